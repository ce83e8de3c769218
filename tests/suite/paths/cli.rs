//! `timewarp align` and `--plot` end to end.

use ndarray::Array2;
use std::path::{Path, PathBuf};
use tempfile::TempDir;
use timewarp::{dtw_path, twed_path, ComputeOptions, Device, Dtw, EditStep, Twed};

use crate::cli::{bundled, timewarp};

/// A `.csv` file of one univariate series.
fn one_series(dir: &TempDir, name: &str, values: &[f64]) -> PathBuf {
    let path = dir.path().join(name);
    let line: Vec<String> = values.iter().map(|v| v.to_string()).collect();
    std::fs::write(&path, line.join(",") + "\n").unwrap();
    path
}

fn wave(n: usize, phase: f64) -> Vec<f64> {
    (0..n).map(|t| (t as f64 * 0.3 + phase).sin()).collect()
}

/// A PNG's width and height from its IHDR chunk.
fn png_size(path: &Path) -> (u32, u32) {
    let bytes = std::fs::read(path).unwrap();
    assert_eq!(
        &bytes[..8],
        b"\x89PNG\r\n\x1a\n",
        "{} is not a PNG",
        path.display()
    );
    let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
    (word(16), word(20))
}

/// An SVG's width and height attributes.
fn svg_size(path: &Path) -> (u32, u32) {
    let text = std::fs::read_to_string(path).unwrap();
    let attribute = |name: &str| {
        let at = text.find(&format!(" {name}=\"")).unwrap() + name.len() + 3;
        text[at..].split('"').next().unwrap().parse().unwrap()
    };
    assert!(text.contains("<text"), "the SVG has labels");
    (attribute("width"), attribute("height"))
}

#[test]
fn align_dtw_writes_the_library_path_and_a_plot() {
    let dir = TempDir::new().unwrap();
    let (x, y) = (wave(30, 0.0), wave(24, 0.7));
    let (a, b) = (one_series(&dir, "a.csv", &x), one_series(&dir, "b.csv", &y));
    let (out, plot) = (dir.path().join("path.csv"), dir.path().join("align.png"));
    timewarp()
        .args([
            "align",
            "--metric",
            "dtw",
            "--device",
            "cpu",
            "--plot-size",
            "640x400",
        ])
        .arg(&a)
        .arg(&b)
        .arg("--out")
        .arg(&out)
        .arg("--plot")
        .arg(&plot)
        .assert()
        .success();
    let text = std::fs::read_to_string(&out).unwrap();
    let mut lines = text.lines();
    assert_eq!(lines.next(), Some("i,j"));
    let path: Vec<(usize, usize)> = lines
        .map(|l| {
            let (i, j) = l.split_once(',').unwrap();
            (i.parse().unwrap(), j.parse().unwrap())
        })
        .collect();
    let column = |v: &[f64]| Array2::from_shape_vec((v.len(), 1), v.to_vec()).unwrap();
    let cpu = ComputeOptions::on(Device::Cpu);
    let expected = dtw_path(column(&x).view(), column(&y).view(), Dtw::new(), &cpu).unwrap();
    assert_eq!(path, expected.path);
    assert_eq!(png_size(&plot), (640, 400));
}

#[test]
fn align_twed_and_soft_dtw_write_their_csv() {
    let dir = TempDir::new().unwrap();
    let (a, b) = (
        one_series(&dir, "a.csv", &wave(12, 0.0)),
        one_series(&dir, "b.csv", &wave(9, 1.0)),
    );
    let output = timewarp()
        .args(["align", "--metric", "twed", "--device", "cpu"])
        .arg(&a)
        .arg(&b)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(output).unwrap();
    assert!(text.starts_with("step,i,j,cost\nmatch,0,0,"), "{text}");
    let last = text.lines().last().unwrap();
    let fields: Vec<&str> = last.split(',').collect();
    assert_eq!((fields[1], fields[2]), ("11", "8"), "{last}");

    let plot = dir.path().join("soft.svg");
    let output = timewarp()
        .args([
            "align", "--metric", "soft-dtw", "--gamma", "0.5", "--device", "cpu",
        ])
        .arg(&a)
        .arg(&b)
        .arg("--plot")
        .arg(&plot)
        .args(["--plot-size", "900x500"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(output).unwrap();
    assert_eq!(text.lines().count(), 12);
    assert!(text.lines().all(|l| l.split(',').count() == 9));
    assert_eq!(svg_size(&plot), (900, 500));
}

/// `--times-a` and `--times-b` give TWED's timestamps: the steps are the
/// library's with the same timestamps (and not those of 0, 1, 2, ...);
/// they are refused for other measures, of the wrong length, or
/// decreasing.
#[test]
fn align_twed_takes_timestamps() {
    let dir = TempDir::new().unwrap();
    let (x, y) = (wave(12, 0.0), wave(9, 1.0));
    let (a, b) = (one_series(&dir, "a.csv", &x), one_series(&dir, "b.csv", &y));
    let tx: Vec<f64> = (0..12).map(|k| (k * k) as f64 * 0.25).collect();
    let ty: Vec<f64> = (0..9).map(|k| 3.0 + k as f64 * 1.5).collect();
    let (ta, tb) = (
        one_series(&dir, "ta.csv", &tx),
        one_series(&dir, "tb.csv", &ty),
    );
    let output = timewarp()
        .args([
            "align", "--metric", "twed", "--nu", "0.5", "--device", "cpu",
        ])
        .arg(&a)
        .arg(&b)
        .arg("--times-a")
        .arg(&ta)
        .arg("--times-b")
        .arg(&tb)
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let text = String::from_utf8(output).unwrap();
    let steps: Vec<(String, usize, usize, f64)> = text
        .lines()
        .skip(1)
        .map(|line| {
            let fields: Vec<&str> = line.split(',').collect();
            let number = |k: usize| fields[k].parse::<usize>().unwrap();
            (
                fields[0].to_string(),
                number(1),
                number(2),
                fields[3].parse().unwrap(),
            )
        })
        .collect();
    let column = |v: &[f64]| Array2::from_shape_vec((v.len(), 1), v.to_vec()).unwrap();
    let vector = |v: &[f64]| ndarray::Array1::from(v.to_vec());
    let (xs, ys, txs, tys) = (column(&x), column(&y), vector(&tx), vector(&ty));
    let twed = Twed::new(0.5, 1.0, 2.0).unwrap();
    let cpu = ComputeOptions::on(Device::Cpu);
    let timed = twed_path(
        xs.view(),
        ys.view(),
        Some(txs.view()),
        Some(tys.view()),
        twed,
        &cpu,
    )
    .unwrap();
    let expected: Vec<_> = timed
        .edits
        .iter()
        .map(|e| (e.step.name().to_string(), e.i, e.j, e.cost))
        .collect();
    assert_eq!(steps, expected);
    let untimed = twed_path(xs.view(), ys.view(), None, None, twed, &cpu).unwrap();
    assert!((untimed.value - timed.value).abs() > 1e-6 * timed.value);
    assert_eq!(timed.edits[0].step, EditStep::Match);

    let refused = |args: &[&str], times: &Path, expected: &str| {
        let output = timewarp()
            .args(["align", "--device", "cpu"])
            .args(args)
            .arg(&a)
            .arg(&b)
            .arg("--times-a")
            .arg(times)
            .assert()
            .code(2)
            .get_output()
            .stderr
            .clone();
        let message = String::from_utf8(output).unwrap();
        assert!(message.contains(expected), "{message}");
    };
    refused(
        &["--metric", "dtw"],
        &ta,
        "--times-a applies only to --metric twed",
    );
    refused(
        &["--metric", "twed"],
        &tb,
        "expected one timestamp for each of the 12",
    );
    let decreasing: Vec<f64> = tx.iter().rev().copied().collect();
    let decreasing = one_series(&dir, "down.csv", &decreasing);
    refused(&["--metric", "twed"], &decreasing, "non-decreasing");
}

#[test]
fn distance_and_knn_plot_their_matrices() {
    let dir = TempDir::new().unwrap();
    let (matrix, confusion) = (dir.path().join("m.svg"), dir.path().join("c.png"));
    timewarp()
        .args([
            "distance", "--metric", "dtw", "--device", "cpu", "--band", "3", "--out",
        ])
        .arg(dir.path().join("d.npy"))
        .arg(bundled("GunPoint_TEST.ts"))
        .arg("--plot")
        .arg(&matrix)
        .assert()
        .success();
    assert_eq!(svg_size(&matrix), (1000, 600));
    timewarp()
        .args([
            "knn",
            "--metric",
            "dtw",
            "--device",
            "cpu",
            "--plot-size",
            "500x400",
            "--train",
        ])
        .arg(bundled("GunPoint_TRAIN.ts"))
        .arg("--test")
        .arg(bundled("GunPoint_TEST.ts"))
        .arg("--plot")
        .arg(&confusion)
        .assert()
        .success();
    assert_eq!(png_size(&confusion), (500, 400));
}

/// A plot of series longer than a figure can show is left out with a
/// warning naming the limit (the path is still written); bad plot options
/// and picks are refused before any work, exit status 2.
#[test]
fn bad_plots_and_picks_are_refused_clearly() {
    let dir = TempDir::new().unwrap();
    let long = one_series(&dir, "long.csv", &wave(6000, 0.0));
    let plot = dir.path().join("too.png");
    let output = timewarp()
        .args(["align", "--metric", "dtw", "--device", "cpu", "--band", "1"])
        .arg(&long)
        .arg(&long)
        .arg("--plot")
        .arg(&plot)
        .assert()
        .success()
        .get_output()
        .clone();
    let message = String::from_utf8(output.stderr).unwrap();
    assert!(
        message.starts_with("timewarp: --plot:")
            && message.contains("5000")
            && message.contains("leaving out the plot"),
        "{message}"
    );
    let path = String::from_utf8(output.stdout).unwrap();
    assert_eq!(path.lines().count(), 6001, "i,j and the diagonal");
    assert!(!plot.exists());

    for (args, expected) in [
        (vec!["--plot", "x.jpg"], ".svg or .png"),
        (vec!["--plot-size", "10x10"], "WIDTHxHEIGHT"),
    ] {
        let output = timewarp()
            .args(["align", "--metric", "dtw"])
            .arg(&long)
            .arg(&long)
            .args(args)
            .assert()
            .code(2)
            .get_output()
            .stderr
            .clone();
        assert!(String::from_utf8(output).unwrap().contains(expected));
    }

    let several = bundled("GunPoint_TEST.ts");
    let output = timewarp()
        .args(["align", "--metric", "dtw", "--device", "cpu"])
        .arg(&several)
        .arg(&several)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    let message = String::from_utf8(output).unwrap();
    assert!(message.contains("has 150 series; pick one"), "{message}");
    let output = timewarp()
        .args([
            "align", "--metric", "dtw", "--device", "cpu", "--index", "0", "150",
        ])
        .arg(&several)
        .arg(&several)
        .assert()
        .code(2)
        .get_output()
        .stderr
        .clone();
    assert!(String::from_utf8(output).unwrap().contains("--index-b 150"));
}

/// `--device gpu`: the matrix the GPU computes, said to be from the GPU,
/// within the tolerance of the CPU's (`paths::soft_dtw::alignment_tolerance`
/// of both devices, f64; samples in [-1, 1] cost at most 4 a cell, so the
/// scale is at most `(n + m)(8 + gamma ln 3)`).
#[test]
fn gpu_align_soft_dtw_matches_the_cpu() {
    let Some(_timed) = crate::common::on_gpu("paths::cli::gpu_align_soft_dtw_matches_the_cpu")
    else {
        return;
    };
    let dir = TempDir::new().unwrap();
    let (a, b) = (
        one_series(&dir, "a.csv", &wave(40, 0.0)),
        one_series(&dir, "b.csv", &wave(33, 1.0)),
    );
    let on = |device: &str| {
        let out = dir.path().join(format!("{device}.npy"));
        let assert = timewarp()
            .args([
                "align", "--metric", "soft-dtw", "--gamma", "0.5", "--band", "5",
            ])
            .args(["--device", device])
            .arg(&a)
            .arg(&b)
            .arg("--out")
            .arg(&out)
            .assert()
            .success();
        let stderr = String::from_utf8(assert.get_output().stderr.clone()).unwrap();
        let matrix: Array2<f64> = ndarray_npy::read_npy(&out).unwrap();
        (matrix, stderr)
    };
    let ((cpu, cpu_said), (gpu, gpu_said)) = (on("cpu"), on("gpu"));
    assert!(cpu_said.contains(" on cpu "), "{cpu_said}");
    assert!(gpu_said.contains(" on gpu "), "{gpu_said}");
    assert_eq!(gpu.dim(), (40, 33));
    let (cells, gamma) = (40.0 + 33.0, 0.5);
    let scale = cells * (8.0 + gamma * 3f64.ln());
    let bound = 2.0 * cells * 4.0 * f64::EPSILON / 2.0 * (1.0 + scale / gamma);
    for (g, c) in gpu.iter().zip(&cpu) {
        assert!((g - c).abs() <= bound, "{g} vs {c}");
    }
    assert!(
        gpu.iter().any(|&v| v == 0.0),
        "cells outside the band are 0"
    );
}
