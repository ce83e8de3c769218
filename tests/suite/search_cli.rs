//! `timewarp search` end to end: its matches are the library's (checked
//! against a brute force in `search`), in every input format, with the
//! statistics on stderr, `--out`, `--plot`, and its usage errors.

use crate::cli::timewarp;
use ndarray::Array2;
use std::path::Path;
use timewarp::search::{subsequences, Band, SearchOptions};
use timewarp::Device;

fn walk(n: usize) -> Vec<f64> {
    let mut v = 0.0;
    // A deterministic walk: steps from a multiplicative hash.
    (0..n)
        .map(|i| {
            let step =
                ((i as u64).wrapping_mul(0x9E3779B97F4A7C15) >> 40) as f64 / (1u64 << 24) as f64;
            v += step - 0.5;
            v
        })
        .collect()
}

fn write_text(path: &Path, values: &[f64]) {
    let text: String = values.iter().map(|v| format!("{v:?}\n")).collect();
    std::fs::write(path, text).unwrap();
}

/// The library's matches, as the command prints them.
fn expected(query: &[f64], series: &[f64], band: Band, k: usize, znorm: bool) -> String {
    let query = Array2::from_shape_vec((query.len(), 1), query.to_vec()).unwrap();
    let options = SearchOptions::default()
        .with_band(band)
        .with_k(k)
        .with_znorm(znorm)
        .on(Device::Cpu);
    let found = subsequences(query.view(), series, &options).unwrap();
    let mut text = String::from("start,distance\n");
    for m in found.matches {
        text += &format!("{},{}\n", m.start, m.distance);
    }
    text
}

#[test]
fn search_prints_the_librarys_matches_from_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let series = walk(20_000);
    let query: Vec<f64> = series[7000..7100].iter().map(|v| 3.0 * v + 1.0).collect();
    let query_path = dir.path().join("query.txt");
    write_text(&query_path, &query);
    let text = dir.path().join("series.txt");
    write_text(&text, &series);
    let raw = dir.path().join("series.f64");
    std::fs::write(
        &raw,
        series
            .iter()
            .flat_map(|v| v.to_le_bytes())
            .collect::<Vec<u8>>(),
    )
    .unwrap();
    let npy = dir.path().join("series.npy");
    ndarray_npy::write_npy(&npy, &ndarray::Array1::from(series.clone())).unwrap();
    let want = expected(&query, &series, Band::Fraction(0.1), 4, true);
    assert!(want.starts_with("start,distance\n7000,"), "{want}");
    for path in [&text, &raw, &npy] {
        let output = timewarp()
            .arg("search")
            .arg(&query_path)
            .arg(path)
            .args(["--band", "0.1", "--k", "4"])
            .assert()
            .success()
            .get_output()
            .clone();
        assert_eq!(
            String::from_utf8(output.stdout).unwrap(),
            want,
            "{}",
            path.display()
        );
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(stderr.contains("search: 19901 candidates"), "{stderr}");
        assert!(stderr.contains("pruned by LB_Kim"), "{stderr}");
    }
    // A band above 1 is a radius; --no-znorm; --exclusion.
    let want = expected(&query, &series, Band::Count(3), 2, false);
    let got = timewarp()
        .arg("search")
        .arg(&query_path)
        .arg(&raw)
        .args(["--band", "3", "--k", "2", "--no-znorm"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    assert_eq!(String::from_utf8(got).unwrap(), want);
}

#[test]
fn search_writes_csv_and_a_plot() {
    let dir = tempfile::tempdir().unwrap();
    let series = walk(5000);
    let query_path = dir.path().join("query.txt");
    write_text(&query_path, &series[1000..1064]);
    let series_path = dir.path().join("series.txt");
    write_text(&series_path, &series);
    let out = dir.path().join("matches.csv");
    for plot in ["plot.png", "plot.svg"] {
        let plot = dir.path().join(plot);
        timewarp()
            .arg("search")
            .arg(&query_path)
            .arg(&series_path)
            .args(["--k", "3", "--exclusion", "100", "--out"])
            .arg(&out)
            .arg("--plot")
            .arg(&plot)
            .assert()
            .success()
            .stdout("");
        let csv = std::fs::read_to_string(&out).unwrap();
        assert_eq!(csv.lines().count(), 4, "{csv}");
        assert!(csv.contains("\n1000,0\n"), "{csv}");
        let starts: Vec<i64> = csv
            .lines()
            .skip(1)
            .map(|l| l.split(',').next().unwrap().parse().unwrap())
            .collect();
        for a in &starts {
            for b in &starts {
                assert!(a == b || (a - b).abs() >= 100, "{starts:?}");
            }
        }
        assert!(std::fs::metadata(&plot).unwrap().len() > 1000);
    }
}

#[test]
fn search_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let series_path = dir.path().join("series.txt");
    write_text(&series_path, &walk(300));
    let query_path = dir.path().join("query.txt");
    write_text(&query_path, &walk(20));
    let long = dir.path().join("long.txt");
    write_text(&long, &walk(400));
    let nan = dir.path().join("nan.txt");
    std::fs::write(
        &nan,
        "1\n2\nNaN\n4\n5\n6\n7\n8\n9\n10\n11\n12\n13\n14\n15\n16\n17\n18\n19\n20\n21\n22\n",
    )
    .unwrap();
    let cases: [(&[&str], &Path, &str); 4] = [
        (&[], &long, "longer than the series"),
        (&["--band=-0.5"], &query_path, "--band -0.5"),
        (&["--out", "matches.npy"], &query_path, "must end in .csv"),
        (&["--k", "0"], &query_path, "k = 0"),
    ];
    for (extra, query, message) in cases {
        timewarp()
            .current_dir(dir.path())
            .arg("search")
            .arg(query)
            .arg(&series_path)
            .args(extra)
            .assert()
            .code(2)
            .stderr(predicates::str::contains(message));
    }
    timewarp()
        .arg("search")
        .arg(&query_path)
        .arg(&nan)
        .assert()
        .code(2)
        .stderr(predicates::str::contains("(NaN) at sample 2"));
}

#[test]
fn search_align_writes_the_librarys_path() {
    let dir = tempfile::tempdir().unwrap();
    let series = walk(3000);
    // The query: a stretch of the series, shifted a little.
    let query: Vec<f64> = series[1200..1300].iter().map(|v| v + 0.01).collect();
    let query_path = dir.path().join("query.txt");
    write_text(&query_path, &query);
    let npy = dir.path().join("series.npy");
    ndarray_npy::write_npy(&npy, &ndarray::Array1::from(series.clone())).unwrap();
    let q = Array2::from_shape_vec((query.len(), 1), query.clone()).unwrap();
    let found =
        timewarp::search::subsequence_alignment(q.view(), &series[..], Device::Cpu).unwrap();
    assert!(
        found.start.abs_diff(1200) <= 2 && found.end.abs_diff(1299) <= 2,
        "{found:?}"
    );
    let mut want = String::from("i,j\n");
    for (i, j) in &found.path {
        want += &format!("{i},{j}\n");
    }
    let output = timewarp()
        .arg("search")
        .arg(&query_path)
        .arg(&npy)
        .arg("--align")
        .assert()
        .success()
        .get_output()
        .clone();
    assert_eq!(String::from_utf8(output.stdout).unwrap(), want);
    let stderr = String::from_utf8(output.stderr).unwrap();
    let line = format!(
        "match: start {}, end {}, cost {} ",
        found.start, found.end, found.cost
    );
    assert!(stderr.contains(&line), "{stderr}");
    // The options of the k best matches do not apply.
    timewarp()
        .arg("search")
        .arg(&query_path)
        .arg(&npy)
        .args(["--align", "--k", "2"])
        .assert()
        .code(2)
        .stderr(predicates::str::contains("cannot be used with"));
}

/// `bench --search`: every candidate counted once by the stage that ended
/// it, and the best match that of the library on the same walk (the
/// bench's: seeded N(0, 1) steps, the series first, then each query).
#[test]
fn bench_search_counts_every_candidate_and_finds_the_librarys_match() {
    use rand::rngs::StdRng;
    use rand::{Rng, SeedableRng};
    use rand_distr::StandardNormal;
    let (points, lengths) = (20_000usize, [64usize, 100]);
    let output = timewarp()
        .args(["bench", "--search", "--device", "cpu", "--count", "20000"])
        .args(["--lengths", "64,100", "--json", "--repeats", "1"])
        .output()
        .unwrap();
    assert!(output.status.success(), "{output:?}");
    let rows: Vec<serde_json::Value> = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(rows.len(), lengths.len());
    let mut rng = StdRng::seed_from_u64(46);
    let mut walk = |n: usize| {
        let mut value = 0.0;
        (0..n)
            .map(|_| {
                value += rng.sample::<f64, _>(StandardNormal);
                value
            })
            .collect::<Vec<f64>>()
    };
    let series = walk(points);
    for (row, m) in rows.iter().zip(lengths) {
        let count = |key: &str| row[key].as_u64().unwrap();
        assert_eq!(count("query_length"), m as u64);
        assert_eq!(count("candidates"), (points - m + 1) as u64);
        let ended = count("kim") + count("keogh_query") + count("keogh_data") + count("dtw");
        assert_eq!(ended, count("candidates"), "{row}");
        assert!(count("abandoned") < count("dtw"), "{row}");
        assert!(row["points_per_second"].as_f64().unwrap() > 0.0);
        assert_eq!(row["device"], "cpu");
        let query = Array2::from_shape_vec((m, 1), walk(m)).unwrap();
        let options = SearchOptions::default()
            .with_band(Band::Fraction(0.05))
            .on(Device::Cpu);
        let best = subsequences(query.view(), &series[..], &options)
            .unwrap()
            .matches[0];
        assert_eq!(count("best_start"), best.start as u64);
        assert_eq!(row["best_distance"].as_f64().unwrap(), best.distance);
    }
    // Options of the distance benches are refused.
    let refused = timewarp()
        .args(["bench", "--search", "--paired"])
        .output()
        .unwrap();
    assert_eq!(refused.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&refused.stderr).contains("--search"));
}
