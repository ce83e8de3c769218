//! The `timewarp` binary end to end: every command, every input format and
//! every kind of bad input, compared with the library where there is a
//! result. GPU tests skip (saying why) without a usable GPU, and fail
//! instead under `REQUIRE_GPU=1`.

mod common;

use assert_cmd::cargo::cargo_bin_cmd;
use assert_cmd::Command;
use ndarray::{array, Array2, Axis};
use ndarray_npy::{read_npy, write_npy};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use tempfile::TempDir;
use timewarp::formats::read_dataset;
use timewarp::{distance_matrix, ComputeOptions, Device, Dtw, Float, Metric, SoftDtw, Twed};

fn timewarp() -> Command {
    cargo_bin_cmd!("timewarp")
}

fn bundled(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// Runs a command that must succeed and returns its stdout.
fn stdout_of(command: &mut Command) -> String {
    let output = command.assert().success().get_output().stdout.clone();
    String::from_utf8(output).unwrap()
}

/// `distance` on the CPU, CSV on stdout, parsed.
fn cli_matrix<T: FromStr<Err: Debug>>(a: &Path, b: Option<&Path>, extra: &[&str]) -> Array2<T> {
    let mut command = timewarp();
    command
        .arg("distance")
        .arg(a)
        .args(b)
        .args(["--device", "cpu"])
        .args(extra);
    parse_csv(&stdout_of(&mut command))
}

fn parse_csv<T: FromStr<Err: Debug>>(text: &str) -> Array2<T> {
    let rows: Vec<Vec<T>> = text
        .lines()
        .map(|line| line.split(',').map(|v| v.parse().unwrap()).collect())
        .collect();
    let columns = rows[0].len();
    Array2::from_shape_vec((rows.len(), columns), rows.into_iter().flatten().collect()).unwrap()
}

/// The library's CPU matrix for the same files.
fn library<T: Float>(a: &Path, b: Option<&Path>, metric: Metric) -> Array2<T> {
    let set = |path: &Path| read_dataset(path).unwrap().to_series_set::<T>().unwrap();
    let b = b.map(set);
    distance_matrix(
        &set(a),
        b.as_ref(),
        metric,
        &ComputeOptions::on(Device::Cpu),
    )
    .unwrap()
}

/// Equal to the last bit (and sign of zero).
fn assert_same_bits<T: Float>(got: &Array2<T>, expected: &Array2<T>) {
    assert_eq!(got.dim(), expected.dim());
    for (g, e) in got.iter().zip(expected) {
        assert_eq!(g.to_f64().to_bits(), e.to_f64().to_bits(), "{g:?} != {e:?}");
    }
}

fn assert_close(got: &Array2<f64>, expected: &Array2<f64>, relative: f64) {
    assert_eq!(got.dim(), expected.dim());
    for (g, e) in got.iter().zip(expected) {
        assert!(
            (g - e).abs() <= relative * e.abs().max(f64::MIN_POSITIVE),
            "{g} vs {e}"
        );
    }
}

fn twed() -> Metric {
    Twed::default().into()
}

/// Three labelled univariate series of length 5, one file per input format.
fn write_every_format(dir: &Path) -> Vec<PathBuf> {
    let series = array![
        [0.5, 1.25, -2.0, 3.0, 0.1],
        [1.0, 0.0, 2.5, -1.5, 0.3],
        [0.2, 0.7, 1.1, -0.4, 2.2]
    ];
    let labels = ["a", "b", "a"];
    let line = |k: usize, separator: &str| {
        let values: Vec<String> = series.row(k).iter().map(|v| format!("{v:?}")).collect();
        values.join(separator)
    };
    let lines = |make: &dyn Fn(usize) -> String| (0..3).map(|k| make(k) + "\n").collect::<String>();
    let files = [
        (
            "tiny.ts",
            "@problemName tiny\n@univariate true\n@equalLength true\n@seriesLength 5\n\
             @classLabel true a b\n@data\n"
                .to_string()
                + &lines(&|k| format!("{}:{}", line(k, ","), labels[k])),
        ),
        (
            "tiny.tsv",
            lines(&|k| format!("{}\t{}", labels[k], line(k, "\t"))),
        ),
        (
            "tiny.txt",
            lines(&|k| format!("{}  {}", labels[k], line(k, " "))),
        ),
        ("tiny.csv", lines(&|k| line(k, ","))),
    ];
    let mut paths: Vec<PathBuf> = files
        .iter()
        .map(|(name, text)| {
            let path = dir.join(name);
            std::fs::write(&path, text).unwrap();
            path
        })
        .collect();
    let npy = dir.join("tiny.npy");
    write_npy(&npy, &series).unwrap();
    paths.push(npy);
    paths
}

#[test]
fn distance_reads_every_format() {
    let dir = TempDir::new().unwrap();
    let files = write_every_format(dir.path());
    let first: Array2<f64> = cli_matrix(&files[0], None, &["--metric", "twed"]);
    for file in &files {
        let got: Array2<f64> = cli_matrix(file, None, &["--metric", "twed"]);
        assert_same_bits(&got, &library(file, None, twed()));
        // The same series in every format.
        assert_same_bits(&got, &first);
    }
    // Two files of different formats, rows against columns.
    let got: Array2<f64> = cli_matrix(&files[1], Some(&files[4]), &["--metric", "dtw"]);
    assert_same_bits(
        &got,
        &library(&files[1], Some(&files[4]), Dtw::new().into()),
    );
}

#[test]
fn distance_on_bundled_files_round_trips_exactly() {
    let (test, train) = (
        bundled("BasicMotions_TEST.ts"),
        bundled("BasicMotions_TRAIN.ts"),
    );
    let soft: Metric = SoftDtw::new(0.5).unwrap().into();
    let got: Array2<f64> = cli_matrix(
        &test,
        Some(&train),
        &["--metric", "soft-dtw", "--gamma", "0.5"],
    );
    assert_eq!(got.dim(), (40, 40));
    assert_same_bits(&got, &library(&test, Some(&train), soft));
    // f32 prints the shortest form of the f32 value, which parses back exactly.
    let got: Array2<f32> = cli_matrix(
        &test,
        Some(&train),
        &["--metric", "twed", "--precision", "f32"],
    );
    assert_same_bits(&got, &library(&test, Some(&train), twed()));
}

#[test]
fn distance_writes_csv_and_npy_files() {
    let dir = TempDir::new().unwrap();
    let (a, b) = (
        bundled("GunPoint_TRAIN.ts"),
        bundled("BasicMotions_TRAIN.ts"),
    );
    let c = write_every_format(dir.path())[3].clone();
    let out = |name: &str| dir.path().join(name);
    let run = |inputs: &[&Path], extra: &[&str], path: &Path| {
        let mut command = timewarp();
        command
            .arg("distance")
            .args(inputs)
            .args(["--device", "cpu", "--out"])
            .arg(path);
        assert_eq!(
            stdout_of(command.args(extra)),
            "",
            "nothing on stdout with --out"
        );
    };

    run(
        &[&a, &c],
        &["--metric", "dtw", "--band", "5"],
        &out("m.csv"),
    );
    let got: Array2<f64> = parse_csv(&std::fs::read_to_string(out("m.csv")).unwrap());
    assert_same_bits(&got, &library(&a, Some(&c), Dtw::with_band(5).into()));

    run(&[&b], &["--metric", "twed", "--nu", "0.01"], &out("m.npy"));
    let got: Array2<f64> = read_npy(out("m.npy")).unwrap();
    let metric = Twed::new(0.01, 1.0, 2.0).unwrap().into();
    assert_same_bits(&got, &library(&b, None, metric));

    run(
        &[&b],
        &["--metric", "twed", "--precision", "f32"],
        &out("m32.NPY"),
    );
    let got: Array2<f32> = read_npy(out("m32.NPY")).unwrap();
    assert_same_bits(&got, &library(&b, None, twed()));

    // Only the outputs: no temporary files left behind.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 5 + 3);
}

/// Without B each symmetric pair is computed once, with the operands in the
/// order A-against-A puts them in the upper triangle.
#[test]
fn distance_of_a_set_with_itself() {
    let a = bundled("BasicMotions_TEST.ts");
    for metric in ["dtw", "twed", "soft-dtw"] {
        let alone: Array2<f64> = cli_matrix(&a, None, &["--metric", metric]);
        let twice: Array2<f64> = cli_matrix(&a, Some(&a), &["--metric", metric]);
        assert_same_bits(&alone, &alone.t().to_owned());
        let n = alone.nrows();
        for i in 0..n {
            for j in i..n {
                assert_eq!(
                    alone[[i, j]].to_bits(),
                    twice[[i, j]].to_bits(),
                    "{metric} ({i}, {j})"
                );
            }
        }
        assert_close(&alone, &twice, 1e-12);
    }
}

/// DTW within a band of radius 0 is the squared Euclidean distance.
#[test]
fn dtw_band_zero_is_squared_euclidean() {
    let (test, train) = (
        bundled("BasicMotions_TEST.ts"),
        bundled("BasicMotions_TRAIN.ts"),
    );
    let got: Array2<f64> = cli_matrix(&test, Some(&train), &["--metric", "dtw", "--band", "0"]);
    let (x, y) = (read_dataset(&test).unwrap(), read_dataset(&train).unwrap());
    let expected = Array2::from_shape_fn((x.len(), y.len()), |(i, j)| {
        (&x.series[i] - &y.series[j]).mapv(|d| d * d).sum()
    });
    assert_close(&got, &expected, 1e-12);
}

fn knn(train: &str, test: &str, extra: &[&str]) -> Command {
    let mut command = timewarp();
    command
        .arg("knn")
        .arg("--train")
        .arg(bundled(train))
        .arg("--test")
        .arg(bundled(test))
        .args(extra);
    command
}

/// The published UCR figure for 1-NN DTW with no window on GunPoint, and
/// TWED with aeon's defaults.
#[test]
fn knn_gunpoint_accuracy_on_the_cpu() {
    for (metric, expected) in [
        ("dtw", "accuracy: 0.906667\nerror: 0.093333\n"),
        ("twed", "accuracy: 0.973333\nerror: 0.026667\n"),
    ] {
        knn(
            "GunPoint_TRAIN.ts",
            "GunPoint_TEST.ts",
            &["--metric", metric, "--device", "cpu"],
        )
        .assert()
        .success()
        .stdout(expected)
        .stderr(predicates::str::contains("computed 7500 distances in"));
    }
}

fn accuracy(stdout: &str) -> f64 {
    let value = stdout
        .strip_prefix("accuracy: ")
        .and_then(|s| s.lines().next());
    value
        .unwrap_or_else(|| panic!("no accuracy in {stdout:?}"))
        .parse()
        .unwrap()
}

#[test]
fn knn_multivariate_and_k_neighbours() {
    for name in ["BasicMotions", "JapaneseVowels"] {
        let (train, test) = (format!("{name}_TRAIN.ts"), format!("{name}_TEST.ts"));
        let out = stdout_of(&mut knn(
            &train,
            &test,
            &["--metric", "dtw", "--device", "cpu"],
        ));
        assert!(accuracy(&out) > 0.8, "{name}: {out}");
    }
    let out = stdout_of(&mut knn(
        "GunPoint_TRAIN.ts",
        "GunPoint_TEST.ts",
        &[
            "--metric", "dtw", "--device", "cpu", "-k", "3", "--band", "6",
        ],
    ));
    assert!(accuracy(&out) > 0.8, "{out}");
    assert!(out.lines().nth(1).unwrap().starts_with("error: "));
}

#[test]
fn info_reports_kernels_gpus_and_threads() {
    let out = stdout_of(timewarp().arg("info"));
    assert!(
        out.starts_with(&format!("timewarp {}\n", env!("CARGO_PKG_VERSION"))),
        "{out}"
    );
    assert!(out.contains("\nkernels: "), "{out}");
    assert!(
        out.contains("\nGPU 0: ") || out.contains("\nGPUs: none usable: "),
        "{out}"
    );
    assert!(out.contains("\nCPU threads: "), "{out}");
}

#[derive(serde::Deserialize)]
struct BenchRow {
    metric: String,
    length: usize,
    count: usize,
    precision: String,
    backend: String,
    mode: Option<String>,
    seconds: f64,
    gcups: f64,
    speedup_vs_cpu: Option<f64>,
}

#[test]
fn bench_json_parses() {
    let out = stdout_of(timewarp().args([
        "bench",
        "--device",
        "cpu",
        "--lengths",
        "8,12",
        "--count",
        "4",
        "--repeats",
        "2",
        "--json",
        "--precision",
        "f32",
        "--data",
        "normal",
    ]));
    let rows: Vec<BenchRow> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 3 * 2);
    for row in &rows {
        assert!(["dtw", "soft-dtw", "twed"].contains(&row.metric.as_str()));
        assert!([8, 12].contains(&row.length));
        assert_eq!(
            (row.count, row.precision.as_str(), row.backend.as_str()),
            (4, "f32", "cpu")
        );
        assert!(row.seconds > 0.0 && row.gcups > 0.0);
        assert_eq!(row.speedup_vs_cpu, Some(1.0));
        assert_eq!(row.mode, None, "the CPU has no transfer mode");
    }
}

/// `--resident` keeps references on a GPU: without one (or with --file,
/// a set against itself) it is a usage error, before any work.
#[test]
fn bench_resident_needs_a_gpu_and_references() {
    let mut command = timewarp();
    command.args([
        "bench",
        "--resident",
        "--device",
        "cpu",
        "--metric",
        "dtw",
        "--lengths",
        "8",
        "--count",
        "3",
        "--repeats",
        "1",
    ]);
    expect_failure(&mut command, &["--resident", "needs --device gpu"], 2);
    let mut command = timewarp();
    command
        .args(["bench", "--resident", "--device", "cpu", "--file"])
        .arg(bundled("BasicMotions_TRAIN.ts"));
    expect_failure(&mut command, &["--resident", "--file"], 2);
}

/// On a GPU, `--resident` rows say so; the default rows are streamed and
/// the CPU's have no mode.
#[test]
fn gpu_bench_resident_and_streamed_modes() {
    if !common::gpu_available("gpu_bench_resident_and_streamed_modes") {
        return;
    }
    for (device, resident, expected) in [
        ("gpu", true, "resident"),
        ("gpu", false, "streamed"),
        ("auto", true, "resident"),
    ] {
        let mut command = timewarp();
        command.args([
            "bench",
            "--device",
            device,
            "--variant",
            "naive,warp",
            "--metric",
            "dtw,twed",
            "--lengths",
            "40",
            "--count",
            "50",
            "--queries",
            "3",
            "--repeats",
            "1",
            "--json",
        ]);
        if resident {
            command.arg("--resident");
        }
        let rows: Vec<BenchRow> = serde_json::from_str(&stdout_of(&mut command)).unwrap();
        let cpu_rows = if device == "auto" { 2 } else { 0 };
        assert_eq!(rows.len(), 2 * 2 + cpu_rows);
        for row in &rows {
            assert!(row.seconds > 0.0 && row.gcups > 0.0);
            match row.backend.as_str() {
                "cpu" => assert_eq!(row.mode, None),
                _ => assert_eq!(row.mode.as_deref(), Some(expected), "{}", row.backend),
            }
        }
    }
}

#[derive(serde::Deserialize)]
struct WorkloadRow {
    queries: usize,
    count: usize,
    cells: f64,
    backend: String,
}

/// The workloads beside the square default: Q queries against N
/// references, and every pair of a file's series once; cells counted as
/// n * m per pair.
#[test]
fn bench_workloads_count_their_cells() {
    let out = stdout_of(timewarp().args([
        "bench",
        "--device",
        "cpu",
        "--metric",
        "dtw",
        "--queries",
        "1",
        "--count",
        "5",
        "--lengths",
        "16",
        "--repeats",
        "1",
        "--json",
    ]));
    let rows: Vec<WorkloadRow> = serde_json::from_str(&out).unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!((rows[0].queries, rows[0].count), (1, 5));
    assert_eq!(rows[0].cells, (5 * 16 * 16) as f64);
    assert_eq!(rows[0].backend, "cpu");

    // BasicMotions: 40 series of 100 samples; the upper triangle with its
    // diagonal is 40 * 41 / 2 pairs of 100 x 100 cells.
    let file = format!(
        "{}/tests/data/BasicMotions_TRAIN.ts",
        env!("CARGO_MANIFEST_DIR")
    );
    let out = stdout_of(timewarp().args([
        "bench",
        "--device",
        "cpu",
        "--metric",
        "dtw",
        "--file",
        &file,
        "--repeats",
        "1",
        "--json",
    ]));
    let rows: Vec<WorkloadRow> = serde_json::from_str(&out).unwrap();
    assert_eq!((rows[0].queries, rows[0].count), (40, 40));
    assert_eq!(rows[0].cells, (40 * 41 / 2 * 100 * 100) as f64);
}

#[test]
fn bench_table() {
    let out = stdout_of(timewarp().args([
        "bench",
        "--device",
        "cpu",
        "--metric",
        "dtw",
        "--metric",
        "twed",
        "--lengths",
        "8",
        "--count",
        "3",
        "--repeats",
        "1",
    ]));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 3, "{out}");
    assert!(
        lines[0].contains("GCUPS") && lines[0].contains("speedup"),
        "{out}"
    );
    assert!(
        lines[1].starts_with("dtw") && lines[2].starts_with("twed"),
        "{out}"
    );
}

#[test]
fn every_command_has_examples_in_its_help() {
    for command in ["distance", "knn", "info", "bench"] {
        let out = stdout_of(timewarp().args([command, "--help"]));
        assert!(out.contains("Example"), "{command}: {out}");
    }
}

/// Bad input: exit status 2, one line on stderr naming the problem (and the
/// file and line where there is one), nothing on stdout, no output file.
#[test]
fn bad_input_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let file = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.to_str().unwrap().to_string()
    };
    let good = file("good.csv", "1,2,3\n4,5,6\n");
    let labelled = file("good.tsv", "x\t1\t2\t3\ny\t4\t5\t6\n");
    let cases: Vec<(Vec<String>, Vec<String>)> = vec![
        (
            vec![
                good.clone(),
                bundled("BasicMotions_TRAIN.ts").to_str().unwrap().into(),
            ],
            vec![
                "BasicMotions_TRAIN.ts".into(),
                "6 dimensions".into(),
                "good.csv".into(),
            ],
        ),
        (vec![file("empty.csv", "")], vec!["empty.csv".into()]),
        (
            vec![file("word.csv", "1,2,3\n4,five,6\n")],
            vec!["word.csv:2:".into()],
        ),
        (
            vec![file("nan.tsv", "x\t1\tNaN\t3\n")],
            vec!["nan.tsv:1:".into(), "NaN".into()],
        ),
        (
            vec![file("inf.csv", "1,inf,3\n")],
            vec!["inf.csv:1:".into()],
        ),
        (
            vec![file("ragged.csv", "1,2,3\n4,5\n")],
            vec!["ragged.csv:2:".into()],
        ),
        (
            vec![dir.path().join("missing.csv").to_str().unwrap().into()],
            vec!["missing.csv".into()],
        ),
        (
            vec![file("data.xyz", "1,2\n")],
            vec!["data.xyz".into(), "extension".into()],
        ),
    ];
    let out = dir.path().join("out.csv");
    for (inputs, needles) in cases {
        let mut command = timewarp();
        command
            .arg("distance")
            .args(&inputs)
            .args(["--metric", "dtw", "--device", "cpu", "--out"]);
        expect_failure(command.arg(&out), &needles, 2);
        assert!(!out.exists());
    }
    let parameters: [(&[&str], &str); 4] = [
        (&["--metric", "twed", "--nu", "-1"], "nu"),
        (&["--metric", "soft-dtw", "--gamma", "0"], "gamma"),
        (&["--metric", "twed", "--band", "3"], "--band"),
        (&["--metric", "dtw", "--gamma", "1"], "--gamma"),
    ];
    for (args, needle) in parameters {
        let mut command = timewarp();
        command
            .args(["distance", &good, "--out"])
            .arg(&out)
            .args(args);
        expect_failure(&mut command, &[needle], 2);
        assert!(!out.exists());
    }
    let mut bad_out = timewarp();
    bad_out
        .args(["distance", &good, "--metric", "dtw", "--out"])
        .arg(dir.path().join("m.txt"));
    expect_failure(&mut bad_out, &["m.txt", ".csv or .npy"], 2);

    let knn_cases: [(&str, &str, &str, &[&str]); 3] = [
        (&good, &good, "1", &["good.csv", "labels"]),
        (&labelled, &labelled, "0", &["-k"]),
        (&labelled, &labelled, "3", &["-k 3", "good.tsv"]),
    ];
    for (train, test, k, needles) in knn_cases {
        let mut command = timewarp();
        command.args([
            "knn", "--train", train, "--test", test, "--metric", "dtw", "-k", k,
        ]);
        expect_failure(&mut command, needles, 2);
    }
}

fn expect_failure(command: &mut Command, needles: &[impl AsRef<str>], status: i32) {
    let output = command
        .assert()
        .code(status)
        .stdout("")
        .get_output()
        .clone();
    let stderr = String::from_utf8(output.stderr).unwrap();
    assert_eq!(stderr.lines().count(), 1, "not one line: {stderr:?}");
    assert!(stderr.starts_with("timewarp: "), "{stderr:?}");
    for needle in needles {
        assert!(
            stderr.contains(needle.as_ref()),
            "{stderr:?} lacks {:?}",
            needle.as_ref()
        );
    }
}

#[test]
fn device_gpu_without_a_gpu_is_a_runtime_failure() {
    if timewarp::gpu::Gpu::get().is_ok() {
        common::skip(
            "device_gpu_without_a_gpu_is_a_runtime_failure",
            "there is a GPU",
        );
        return;
    }
    let mut command = knn(
        "GunPoint_TRAIN.ts",
        "GunPoint_TEST.ts",
        &["--metric", "dtw", "--device", "gpu"],
    );
    expect_failure(&mut command, &["no usable GPU"], 1);
}

#[test]
fn gpu_knn_gunpoint_accuracy() {
    if !common::gpu_available("gpu_knn_gunpoint_accuracy") {
        return;
    }
    for (metric, expected) in [
        ("dtw", "accuracy: 0.906667\nerror: 0.093333\n"),
        ("twed", "accuracy: 0.973333\nerror: 0.026667\n"),
    ] {
        let mut command = knn(
            "GunPoint_TRAIN.ts",
            "GunPoint_TEST.ts",
            &["--metric", metric, "--device", "gpu"],
        );
        command.assert().success().stdout(expected);
    }
}

#[test]
fn gpu_distance_matches_cpu_on_multivariate_sets() {
    if !common::gpu_available("gpu_distance_matches_cpu_on_multivariate_sets") {
        return;
    }
    for name in ["BasicMotions", "JapaneseVowels"] {
        let (test, train) = (
            bundled(&format!("{name}_TEST.ts")),
            bundled(&format!("{name}_TRAIN.ts")),
        );
        for metric in [
            &["--metric", "dtw"][..],
            &["--metric", "dtw", "--band", "0"],
            &["--metric", "twed"],
        ] {
            let on = |device: &str| {
                let mut command = timewarp();
                command
                    .arg("distance")
                    .arg(&test)
                    .arg(&train)
                    .args(metric)
                    .args(["--device", device]);
                parse_csv::<f64>(&stdout_of(&mut command))
            };
            let (cpu, gpu) = (on("cpu"), on("gpu"));
            assert_eq!(cpu.len_of(Axis(0)), read_dataset(&test).unwrap().len());
            assert_close(&gpu, &cpu, 1e-9);
        }
    }
}
