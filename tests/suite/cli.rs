//! The `timewarp` binary end to end: every command, every input format and
//! every kind of bad input, compared with the library where there is a
//! result. GPU tests skip (saying why) without a usable GPU, and fail
//! instead under `REQUIRE_GPU=1`.

use assert_cmd::cargo::cargo_bin_cmd;
use assert_cmd::Command;
use ndarray::{array, Array2, Axis};
use ndarray_npy::{read_npy, write_npy};
use std::fmt::Debug;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use tempfile::TempDir;
use timewarp::formats::read_dataset;
use timewarp::gpu;
use timewarp::{distance_matrix, ComputeOptions, Device, Dtw, Float, Metric, SoftDtw, Twed};

pub(crate) fn timewarp() -> Command {
    cargo_bin_cmd!("timewarp")
}

pub(crate) fn bundled(name: &str) -> PathBuf {
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

    run(
        &[&a, &c],
        &["--metric", "soft-dtw", "--gamma", "0.5", "--band", "2"],
        &out("s.csv"),
    );
    let got: Array2<f64> = parse_csv(&std::fs::read_to_string(out("s.csv")).unwrap());
    let banded = SoftDtw::new(0.5).unwrap().with_band(2).into();
    assert_same_bits(&got, &library(&a, Some(&c), banded));

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
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 5 + 4);
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

/// Banded DTW on the CPU prunes by lower bounds and says how much on
/// stderr; `--brute-force` computes every distance, to the same result.
#[test]
fn knn_with_a_band_prunes_and_agrees_with_brute_force() {
    let args = [
        "--metric", "dtw", "--band", "6", "--device", "cpu", "-k", "3",
    ];
    let pruned = knn("GunPoint_TRAIN.ts", "GunPoint_TEST.ts", &args)
        .assert()
        .success()
        .stderr(predicates::str::contains("pruned by LB_Kim "))
        .stderr(predicates::str::contains("of 7500 pairs"));
    let mut brute = knn("GunPoint_TRAIN.ts", "GunPoint_TEST.ts", &args);
    brute.arg("--brute-force");
    let brute = brute
        .assert()
        .success()
        .stderr(predicates::prelude::PredicateBooleanExt::not(
            predicates::str::contains("pruned by"),
        ));
    assert_eq!(
        String::from_utf8_lossy(&pruned.get_output().stdout),
        String::from_utf8_lossy(&brute.get_output().stdout)
    );
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

/// `info` names the compiler of the PTX, its target and its hash.
#[test]
fn info_names_the_kernel_build() {
    let out = stdout_of(timewarp().arg("info"));
    match (gpu::ptx_rustc_version(), gpu::ptx_hash()) {
        (Some(rustc), Some(hash)) => {
            assert!(rustc.starts_with("rustc 1.") && rustc.contains("nightly"));
            let line = format!(
                "\nkernel build: {rustc} [{}], target {}, PTX hash {hash}\n",
                gpu::ptx_toolchain().unwrap(),
                gpu::ptx_target()
            );
            assert!(out.contains(&line), "{out} lacks {line}");
        }
        _ => {
            assert!(gpu::kernels_build_error().is_some());
            assert!(out.contains("\nkernels: not built: "), "{out}");
        }
    }
}

/// FNV-1a 64, written here again rather than shared with build.rs.
fn fnv1a_64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf29ce484222325;
    for &byte in bytes {
        hash ^= byte as u64;
        hash = hash.wrapping_mul(0x100000001b3);
    }
    hash
}

/// The recorded hash is of the embedded PTX: FNV-1a 64, first 12 hex digits.
#[test]
fn ptx_hash_is_of_the_embedded_ptx() {
    // Published FNV-1a 64 test vectors.
    assert_eq!(fnv1a_64(b""), 0xcbf29ce484222325);
    assert_eq!(fnv1a_64(b"a"), 0xaf63dc4c8601ec8c);
    assert_eq!(fnv1a_64(b"foobar"), 0x85944171f73967e8);
    let Some(ptx) = gpu::ptx() else {
        assert!(gpu::ptx_hash().is_none() && gpu::kernels_build_error().is_some());
        crate::common::skip("ptx_hash_is_of_the_embedded_ptx", "this build has no PTX");
        return;
    };
    assert!(ptx.contains(&format!(".target {}", gpu::ptx_target())));
    let expected = format!("{:016x}", fnv1a_64(ptx.as_bytes()));
    assert_eq!(gpu::ptx_hash(), Some(&expected[..12]));
}

#[test]
fn info_dump_ptx_writes_the_embedded_ptx() {
    let dir = TempDir::new().unwrap();
    let file = dir.path().join("kernels.ptx");
    let mut command = timewarp();
    command.args(["info", "--dump-ptx"]).arg(&file);
    match gpu::ptx() {
        Some(ptx) => {
            let output = command.assert().success().stdout("").get_output().clone();
            assert_eq!(std::fs::read_to_string(&file).unwrap(), ptx);
            let stderr = String::from_utf8(output.stderr).unwrap();
            assert!(stderr.contains(gpu::ptx_hash().unwrap()), "{stderr}");
            let to_stdout = stdout_of(timewarp().args(["info", "--dump-ptx", "-"]));
            assert_eq!(to_stdout, ptx);
        }
        None => {
            expect_failure(&mut command, &["no PTX", "no GPU kernels"], 1);
            assert!(!file.exists());
        }
    }
}

/// A CPU-only build says so, and why, in one line when the GPU is wanted.
#[test]
fn kernels_missing_is_one_line_on_stderr() {
    let Some(reason) = gpu::kernels_build_error() else {
        crate::common::skip(
            "kernels_missing_is_one_line_on_stderr",
            "this build has GPU kernels (TIMEWARP_SKIP_KERNELS=1 builds one without)",
        );
        return;
    };
    let first = reason.lines().next().unwrap();
    let output = knn(
        "GunPoint_TRAIN.ts",
        "GunPoint_TEST.ts",
        &["--metric", "dtw", "--band", "0"],
    )
    .assert()
    .success()
    .get_output()
    .clone();
    let stderr = String::from_utf8(output.stderr).unwrap();
    let notices: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("timewarp: "))
        .collect();
    assert_eq!(notices.len(), 1, "{stderr}");
    assert!(
        notices[0].contains("no GPU kernels") && notices[0].contains(first),
        "{stderr}"
    );
    let mut gpu_only = knn(
        "GunPoint_TRAIN.ts",
        "GunPoint_TEST.ts",
        &["--metric", "dtw", "--device", "gpu"],
    );
    expect_failure(&mut gpu_only, &["no GPU kernels", first], 1);
}

#[derive(serde::Deserialize)]
struct BenchRow {
    metric: String,
    length: usize,
    queries: usize,
    count: usize,
    precision: String,
    backend: String,
    mode: Option<String>,
    seconds: f64,
    gcups: f64,
    speedup_vs_cpu: Option<f64>,
    first_call_seconds: Option<f64>,
    pinned_input: bool,
    gpu_shares: Option<Vec<GpuShareRow>>,
    ptx_rustc: Option<String>,
    ptx_toolchain: Option<String>,
    ptx_target: Option<String>,
    ptx_hash: Option<String>,
}

#[derive(serde::Deserialize)]
struct GpuShareRow {
    gpu: String,
    pairs: u64,
    seconds: f64,
    idle_seconds: f64,
    gcups: f64,
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
        assert_eq!(
            row.speedup_vs_cpu, None,
            "the CPU alone: nothing to compare"
        );
        // Every record names the build of the kernels.
        assert_eq!(row.ptx_rustc.as_deref(), gpu::ptx_rustc_version());
        assert_eq!(row.ptx_toolchain.as_deref(), gpu::ptx_toolchain());
        assert_eq!(
            row.ptx_target.as_deref(),
            gpu::ptx().map(|_| gpu::ptx_target())
        );
        assert_eq!(row.ptx_hash.as_deref(), gpu::ptx_hash());
        assert_eq!(row.mode, None, "the CPU has no transfer mode");
        // No first call (the CPU's warm-up is one query), no GPU shares.
        assert_eq!(row.first_call_seconds, None);
        assert!(row.gpu_shares.is_none() && !row.pinned_input);
    }
}

/// Without `--device`, bench times what `distance` computes: on a GPU the
/// variant the library chooses for the shapes (and no CPU row unless
/// `--with-cpu`), else the CPU; each case says on stderr when it starts.
#[test]
fn bench_times_what_distance_computes() {
    let output = timewarp()
        .args([
            "bench",
            "--metric",
            "dtw,twed",
            "--lengths",
            "8",
            "--count",
            "3",
        ])
        .args(["--repeats", "1", "--json", "--with-cpu"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8(output.stderr).unwrap();
    let rows: Vec<BenchRow> = serde_json::from_slice(&output.stdout).unwrap();
    let backends: Vec<&str> = rows.iter().map(|r| r.backend.as_str()).collect();
    let gpu = timewarp::gpu::Gpu::get().is_ok();
    if gpu {
        // Nine short pairs: the warp kernel, after the CPU's reference.
        assert_eq!(backends, ["cpu", "gpu:warp", "cpu", "gpu:warp"], "{stderr}");
        for row in rows.iter().filter(|r| r.backend != "cpu") {
            assert!(row.speedup_vs_cpu.is_some_and(|s| s > 0.0));
            assert!(row.first_call_seconds.is_some_and(|s| s > 0.0));
        }
    } else {
        // The CPU once per case, whether or not --with-cpu asked for it.
        assert_eq!(backends, ["cpu", "cpu"], "{stderr}");
        assert!(stderr.contains("; computing on the CPU"), "{stderr}");
    }
    for (metric, row) in ["dtw", "twed"]
        .iter()
        .zip(rows.iter().step_by(rows.len() / 2))
    {
        assert_eq!(&row.metric, metric);
        assert_eq!((row.queries, row.count, row.length), (3, 3, 8));
    }
    for metric in ["dtw", "twed"] {
        let line = format!("bench: {metric} length 8, 3 x 3, f64, cpu: timing");
        assert!(stderr.contains(&line), "{stderr}");
    }
}

/// Bad values of bench's own flags are usage errors before any work.
#[test]
fn bench_flags_are_checked() {
    let base = ["bench", "--metric", "dtw", "--lengths", "8", "--count", "3"];
    for (extra, needles) in [
        (
            &["--limit-seconds", "0"][..],
            &["--limit-seconds", "> 0"][..],
        ),
        (&["--limit-seconds", "inf"], &["--limit-seconds"]),
        (
            &["--pinned-input", "--device", "cpu"],
            &["--pinned-input", "needs --device gpu"],
        ),
        (
            &["--variant", "all", "--device", "cpu"],
            &["--variant", "--device cpu"],
        ),
    ] {
        let mut command = timewarp();
        command.args(base).args(extra);
        expect_failure(&mut command, needles, 2);
    }
    let mut gradient = timewarp();
    gradient.args([
        "bench",
        "--metric",
        "soft-dtw",
        "--paired",
        "--gradient",
        "--variant",
        "tiled",
    ]);
    expect_failure(&mut gradient, &["--gradient", "warp or stencil"], 2);
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
/// the CPU's (`--with-cpu`) have no mode; every GPU row gives its first
/// call and its one GPU's share: every pair of the warm-up and the timed
/// run.
#[test]
fn gpu_bench_resident_and_streamed_modes() {
    let Some(_timed) = crate::common::on_gpu("gpu_bench_resident_and_streamed_modes") else {
        return;
    };
    for (device, resident, with_cpu, expected) in [
        ("gpu", true, false, "resident"),
        ("gpu", false, false, "streamed"),
        ("auto", true, true, "resident"),
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
        if with_cpu {
            command.arg("--with-cpu");
        }
        let rows: Vec<BenchRow> = serde_json::from_str(&stdout_of(&mut command)).unwrap();
        let cpu_rows = if with_cpu { 2 } else { 0 };
        assert_eq!(rows.len(), 2 * 2 + cpu_rows);
        for row in &rows {
            assert!(row.seconds > 0.0 && row.gcups > 0.0);
            match row.backend.as_str() {
                "cpu" => assert_eq!(row.mode, None),
                _ => {
                    assert_eq!(row.mode.as_deref(), Some(expected), "{}", row.backend);
                    assert!(row.first_call_seconds.is_some_and(|s| s > 0.0));
                    let shares = row.gpu_shares.as_ref().unwrap();
                    let pairs: u64 = shares.iter().map(|s| s.pairs).sum();
                    assert_eq!(pairs, 2 * 3 * 50, "{}", row.backend);
                    for share in shares {
                        assert!(share.gpu.starts_with("GPU "), "{}", share.gpu);
                        assert!(share.seconds > 0.0 && share.gcups > 0.0);
                        assert!(share.idle_seconds >= 0.0);
                    }
                }
            }
        }
    }
}

/// The default row is the variant the library chooses (tiled for one long
/// pair); `--variant all` times every other variant too, or skips it with
/// the reason on stderr: here all of them, under a limit no run can meet.
/// The first call and the process's setup (the kernel's module load) are
/// reported.
#[test]
fn gpu_bench_variant_all_skips_over_the_limit() {
    let Some(_timed) = crate::common::on_gpu("gpu_bench_variant_all_skips_over_the_limit") else {
        return;
    };
    let pair = [
        "bench",
        "--metric",
        "twed",
        "--data",
        "normal",
        "--queries",
        "1",
        "--count",
        "1",
        "--lengths",
        "8192",
        "--repeats",
        "2",
    ];
    let output = timewarp()
        .args(pair)
        .args(["--variant", "all", "--limit-seconds", "0.000001", "--json"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8(output.stderr).unwrap();
    let rows: Vec<BenchRow> = serde_json::from_slice(&output.stdout).unwrap();
    let backends: Vec<&str> = rows.iter().map(|r| r.backend.as_str()).collect();
    assert_eq!(backends, ["gpu:tiled"], "{stderr}");
    assert!(
        stderr.contains("gpu:tiled (default), streamed: timing"),
        "{stderr}"
    );
    for variant in timewarp::Variant::ALL.map(timewarp::Variant::name) {
        if variant != "tiled" {
            let skipped = format!("gpu:{variant}, streamed: skipped: ");
            assert!(stderr.contains(&skipped), "{variant}: {stderr}");
        }
    }
    // The table: the row's first call, and the setup after it.
    let out = stdout_of(timewarp().args(pair));
    let row = out.lines().find(|l| l.starts_with("twed ")).unwrap();
    assert!(row.contains("gpu:tiled"), "{out}");
    let first_ms: f64 = row.split_whitespace().last().unwrap().parse().unwrap();
    assert!(first_ms > 0.0, "{out}");
    assert!(out.contains("# one-time setup in this process"), "{out}");
    assert!(
        out.contains("module load") && out.contains("twed_tiled"),
        "{out}"
    );
}

/// `--pinned-input`: rows say so (the header too), and time the streamed
/// case from page-locked batches.
#[test]
fn gpu_bench_pinned_input() {
    let Some(_timed) = crate::common::on_gpu("gpu_bench_pinned_input") else {
        return;
    };
    let case = [
        "bench",
        "--metric",
        "dtw",
        "--queries",
        "1",
        "--count",
        "5000",
        "--lengths",
        "127",
        "--precision",
        "f32",
        "--repeats",
        "2",
    ];
    for pinned in [false, true] {
        let mut command = timewarp();
        command.args(case).arg("--json");
        if pinned {
            command.arg("--pinned-input");
        }
        let rows: Vec<BenchRow> = serde_json::from_str(&stdout_of(&mut command)).unwrap();
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].pinned_input, pinned);
        assert_eq!(rows[0].mode.as_deref(), Some("streamed"));
        assert!(rows[0].seconds > 0.0);
    }
    let out = stdout_of(timewarp().args(case).arg("--pinned-input"));
    assert!(
        out.contains("# batches in page-locked host memory"),
        "{out}"
    );
}

/// `--paired --resident` keeps both Soft-DTW batches on a GPU: without
/// one it is a usage error, before any work.
#[test]
fn bench_paired_resident_needs_a_gpu() {
    let mut command = timewarp();
    command.args([
        "bench",
        "--metric",
        "soft-dtw",
        "--paired",
        "--gradient",
        "--resident",
        "--device",
        "cpu",
        "--lengths",
        "8",
        "--count",
        "3",
        "--repeats",
        "1",
    ]);
    expect_failure(&mut command, &["--resident", "needs --device gpu"], 2);
}

/// On a GPU, paired Soft-DTW rows (values, and with their gradient) are
/// `resident` with `--resident` (both batches uploaded once) and
/// `streamed` without.
#[test]
fn gpu_bench_paired_resident_and_streamed_modes() {
    let Some(_timed) = crate::common::on_gpu("gpu_bench_paired_resident_and_streamed_modes") else {
        return;
    };
    for (resident, expected) in [(true, "resident"), (false, "streamed")] {
        for (gradient, label) in [(false, "soft-dtw/paired"), (true, "soft-dtw/paired+grad")] {
            let mut command = timewarp();
            command.args([
                "bench",
                "--device",
                "gpu",
                "--metric",
                "soft-dtw",
                "--paired",
                "--lengths",
                "24",
                "--count",
                "10",
                "--repeats",
                "1",
                "--json",
            ]);
            if gradient {
                command.arg("--gradient");
            }
            if resident {
                command.arg("--resident");
            }
            let rows: Vec<BenchRow> = serde_json::from_str(&stdout_of(&mut command)).unwrap();
            // The library's choice: the warp kernels for values and
            // gradients of short pairs.
            let backends: Vec<&str> = rows.iter().map(|r| r.backend.as_str()).collect();
            assert_eq!(backends, ["gpu:warp"]);
            for row in &rows {
                assert_eq!(row.metric, label);
                assert!(row.seconds > 0.0 && row.gcups > 0.0);
                assert_eq!(row.mode.as_deref(), Some(expected), "{}", row.backend);
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
    assert_eq!(lines.len(), 4, "{out}");
    // The header names the build of the kernels.
    assert!(lines[0].starts_with("# timewarp "), "{out}");
    assert!(lines[0].contains("kernel build: "), "{out}");
    if let Some(hash) = gpu::ptx_hash() {
        assert!(
            lines[0].contains(hash) && lines[0].contains(gpu::ptx_rustc_version().unwrap()),
            "{out}"
        );
    }
    // The CPU alone: no speedup (it would compare the CPU with itself),
    // and no GPU setup after the table.
    assert!(
        lines[1].contains("GCUPS") && !lines[1].contains("speedup"),
        "{out}"
    );
    assert!(
        lines[2].starts_with("dtw") && lines[3].starts_with("twed"),
        "{out}"
    );
    assert!(!lines[2].ends_with('x'), "{out}");
}

/// `bench` without `--device` on a machine with no GPU: the CPU alone,
/// so neither a speedup column nor the driver's start after the table.
#[test]
fn cpu_bench_shows_no_speedup_and_no_driver() {
    if timewarp::gpu::Gpu::get().is_ok() {
        crate::common::skip("cpu_bench_shows_no_speedup_and_no_driver", "there is a GPU");
        return;
    }
    let output = timewarp()
        .args(["bench", "--metric", "dtw", "--lengths", "8", "--count", "3"])
        .args(["--repeats", "1"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stdout = String::from_utf8(output.stdout).unwrap();
    assert!(
        !stdout.contains("speedup") && !stdout.contains("1.00x"),
        "{stdout}"
    );
    assert!(
        !stdout.contains("driver") && !stdout.contains("setup"),
        "{stdout}"
    );
    assert_eq!(stdout.lines().count(), 3, "{stdout}");
}

#[test]
fn every_command_has_examples_in_its_help() {
    for command in ["distance", "knn", "info", "bench"] {
        let out = stdout_of(timewarp().args([command, "--help"]));
        assert!(out.contains("Example"), "{command}: {out}");
    }
}

/// Writes `text` to the file `name` in `dir`; its path, as an argument.
fn write_input(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_str().unwrap().to_string()
}

/// Bad input: exit status 2, one line on stderr naming the problem (and the
/// file and line where there is one), nothing on stdout, no output file.
#[test]
fn bad_input_files_fail_cleanly() {
    let dir = TempDir::new().unwrap();
    let file = |name: &str, text: &str| write_input(dir.path(), name, text);
    let good = file("good.csv", "1,2,3\n4,5,6\n");
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
    assert!(partial_files(dir.path()).is_empty());
}

/// Bad options of `distance`, as [`bad_input_files_fail_cleanly`].
#[test]
fn bad_distance_options_fail_cleanly() {
    let dir = TempDir::new().unwrap();
    let good = write_input(dir.path(), "good.csv", "1,2,3\n4,5,6\n");
    let out = dir.path().join("out.csv");
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
    // A folder named like an output, or a negative band: refused before
    // any work.
    let folder = dir.path().join("taken.csv");
    std::fs::create_dir(&folder).unwrap();
    let mut into_folder = timewarp();
    into_folder
        .args(["distance", &good, "--metric", "dtw", "--out"])
        .arg(&folder);
    expect_failure(&mut into_folder, &["taken.csv", "is a folder"], 2);
    // clap's own usage error (with its "--help" line), not its hint to
    // write `-- -3`.
    let negative_band = timewarp()
        .args(["distance", &good, "--metric", "dtw", "--band", "-3"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&negative_band.stderr);
    assert_eq!(negative_band.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("--band") && stderr.contains("must be >= 0") && !stderr.contains("-- -3"),
        "{stderr}"
    );
    assert!(partial_files(dir.path()).is_empty());
}

/// Bad input of `knn`, as [`bad_input_files_fail_cleanly`].
#[test]
fn bad_knn_input_fails_cleanly() {
    let dir = TempDir::new().unwrap();
    let good = write_input(dir.path(), "good.csv", "1,2,3\n4,5,6\n");
    let labelled = write_input(dir.path(), "good.tsv", "x\t1\t2\t3\ny\t4\t5\t6\n");
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
        crate::common::skip(
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
    let Some(_timed) = crate::common::on_gpu("gpu_knn_gunpoint_accuracy") else {
        return;
    };
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
    let Some(_timed) = crate::common::on_gpu("gpu_distance_matches_cpu_on_multivariate_sets")
    else {
        return;
    };
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

/// tools/ptxas_report.sh's parser (the GPU machine runs ptxas; here a
/// hand-written `ptxas -v` log in the formats ptxas prints).
#[test]
fn ptxas_report_parses_ptxas_output() {
    let log = "\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'dtw_naive_f32' for 'sm_90'
ptxas info    : Function properties for dtw_naive_f32
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, used 0 barriers, 456 bytes cmem[0]
ptxas info    : Compile time = 3.021 ms
ptxas info    : Function properties for a_device_function
    16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Compiling entry function 'twed_wave_f64' for 'sm_90'
ptxas info    : Function properties for twed_wave_f64
    24 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 2048 bytes smem, 456 bytes cmem[0], 8 bytes cmem[2]
ptxas info    : Compiling entry function 'soft_dtw_naive_f64' for 'sm_90'
ptxas info    : Used 64 registers, 368 bytes cmem[0]
";
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tools/ptxas_report.sh");
    let output = Command::new("bash")
        .arg(&script)
        .args(["--from-log", "-"])
        .write_stdin(log)
        .assert()
        .success()
        .get_output()
        .clone();
    let table = String::from_utf8(output.stdout).unwrap();
    let expected = "\
| kernel | registers | barriers | static smem (B) | stack frame (B) | spill stores (B) | spill loads (B) |
|---|---:|---:|---:|---:|---:|---:|
| dtw_naive_f32 | 40 | 0 | 0 | 0 | 0 | 0 |
| twed_wave_f64 | 255 | 1 | 2048 | 24 | 12 | 20 |
| soft_dtw_naive_f64 | 64 | ? | 0 | ? | ? | ? |
";
    assert_eq!(table, expected);
    // No entry function: a failure, not an empty table.
    Command::new("bash")
        .arg(&script)
        .args(["--from-log", "-"])
        .write_stdin("ptxas info    : 0 bytes gmem\n")
        .assert()
        .failure()
        .stdout("");
}

/// `--variant` on `distance`, `knn` and `bench`: a name outside
/// `Variant::ALL` is clap's usage error, which lists them; with `--device
/// cpu` it is a usage error too.
#[test]
fn variant_flag_is_checked() {
    let dir = TempDir::new().unwrap();
    let csv = dir.path().join("a.csv");
    std::fs::write(&csv, "1,2,3\n4,5,6\n").unwrap();
    let csv = csv.to_str().unwrap();
    let train = bundled("GunPoint_TRAIN.ts");
    let train = train.to_str().unwrap();
    let commands: [&[&str]; 3] = [
        &["distance", csv, "--metric", "dtw"],
        &["knn", "--train", train, "--test", train, "--metric", "dtw"],
        &["bench", "--lengths", "4", "--count", "2"],
    ];
    for command in commands {
        let output = timewarp()
            .args(command)
            .args(["--variant", "fastest"])
            .assert()
            .code(2)
            .stdout("")
            .get_output()
            .clone();
        let stderr = String::from_utf8(output.stderr).unwrap();
        for needle in ["fastest", "--variant", "diagonal-launches", "shared"] {
            assert!(stderr.contains(needle), "{command:?}: {stderr}");
        }
        let mut on_cpu = timewarp();
        on_cpu
            .args(command)
            .args(["--variant", "warp", "--device", "cpu"]);
        expect_failure(&mut on_cpu, &["--variant", "--device cpu"], 2);
    }
}

/// The timing line gives milliseconds to three significant digits.
#[test]
fn distance_timing_is_in_milliseconds() {
    let output = timewarp()
        .arg("distance")
        .arg(bundled("GunPoint_TRAIN.ts"))
        .args(["--metric", "dtw", "--device", "cpu"])
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8(output.stderr).unwrap();
    let time = stderr
        .strip_prefix("computed 1275 distances in ")
        .and_then(|rest| rest.strip_suffix(" ms on cpu (f64)\n"))
        .unwrap_or_else(|| panic!("unexpected timing line {stderr:?}"));
    assert!(time.parse::<f64>().unwrap() > 0.0, "{time}");
    let digits: String = time.chars().filter(char::is_ascii_digit).collect();
    let significant = digits.trim_start_matches('0');
    if time.contains('.') {
        assert_eq!(significant.len(), 3, "{time}");
    } else {
        assert!(significant.len() >= 3, "{time}");
    }
}

/// With `--device auto` and no GPU, `--variant` is ignored and the CPU
/// computes the same matrix.
#[test]
fn variant_with_auto_device_and_no_gpu_computes_on_the_cpu() {
    if timewarp::gpu::Gpu::get().is_ok() {
        crate::common::skip(
            "variant_with_auto_device_and_no_gpu_computes_on_the_cpu",
            "there is a GPU",
        );
        return;
    }
    let file = bundled("GunPoint_TRAIN.ts");
    let mut command = timewarp();
    command
        .arg("distance")
        .arg(&file)
        .args(["--metric", "twed", "--variant", "diagonal"]);
    let got: Array2<f64> = parse_csv(&stdout_of(&mut command));
    assert_same_bits(&got, &library::<f64>(&file, None, twed()));
}

/// On the GPU, `--variant` picks each kernel variant (named on the timing
/// line) and gives the CPU's matrix; `knn --variant` and `bench --variant`
/// (which times exactly the variants named).
#[test]
fn gpu_variant_flag_selects_each_variant() {
    let Some(_timed) = crate::common::on_gpu("gpu_variant_flag_selects_each_variant") else {
        return;
    };
    let file = bundled("BasicMotions_TRAIN.ts");
    for metric in [&["--metric", "dtw"][..], &["--metric", "twed"]] {
        let cpu: Array2<f64> = cli_matrix(&file, None, metric);
        for variant in timewarp::Variant::ALL.map(timewarp::Variant::name) {
            let output = timewarp()
                .arg("distance")
                .arg(&file)
                .args(metric)
                .args(["--device", "gpu", "--variant", variant])
                .assert()
                .success()
                .get_output()
                .clone();
            let stderr = String::from_utf8(output.stderr).unwrap();
            assert!(stderr.contains(&format!("(f64, {variant})")), "{stderr}");
            let gpu = parse_csv::<f64>(&String::from_utf8(output.stdout).unwrap());
            assert_close(&gpu, &cpu, 1e-9);
        }
    }
    let mut command = knn(
        "GunPoint_TRAIN.ts",
        "GunPoint_TEST.ts",
        &["--metric", "dtw", "--device", "gpu", "--variant", "shared"],
    );
    command
        .assert()
        .success()
        .stdout("accuracy: 0.906667\nerror: 0.093333\n");
    let out = stdout_of(timewarp().args([
        "bench",
        "--device",
        "gpu",
        "--variant",
        "local,diagonal",
        "--metric",
        "dtw",
        "--lengths",
        "16",
        "--count",
        "3",
        "--repeats",
        "1",
        "--json",
    ]));
    let rows: Vec<BenchRow> = serde_json::from_str(&out).unwrap();
    let backends: Vec<&str> = rows.iter().map(|r| r.backend.as_str()).collect();
    assert_eq!(backends, ["gpu:diagonal", "gpu:local"], "{out}");
}

/// Counts read as English ("1 distance"), and the bench table's columns
/// line up for its longest metric label, `soft-dtw/paired+grad`.
#[test]
fn messages_and_tables_read_right() {
    let dir = tempfile::tempdir().unwrap();
    let one = dir.path().join("one.csv");
    std::fs::write(&one, "1,2,3\n").unwrap();
    timewarp()
        .args(["distance", "--metric", "dtw", "--device", "cpu"])
        .arg(&one)
        .assert()
        .success()
        .stderr(predicates::str::contains("computed 1 distance in"));
    let output = timewarp()
        .args([
            "bench",
            "--device",
            "cpu",
            "--metric",
            "soft-dtw",
            "--paired",
            "--gradient",
        ])
        .args(["--count", "1", "--lengths", "8", "--repeats", "1"])
        .output()
        .unwrap();
    assert!(output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("1 query x 1 reference per case") && stderr.contains("up to 1 run "),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&output.stdout);
    let lines: Vec<&str> = stdout.lines().filter(|l| !l.starts_with('#')).collect();
    let (header, row) = (lines[0], lines[1]);
    assert!(row.starts_with("soft-dtw/paired+grad "), "{stdout}");
    // Right-aligned numbers end where their headers end.
    let end_of = |line: &str, word: &str| line.find(word).map(|at| at + word.len());
    assert_eq!(end_of(header, "length"), end_of(row, " 8"), "{stdout}");
}

/// `--gpus`: a list that does not parse or comes with `--device cpu` is a
/// usage error. GPUs that cannot be used follow one rule, whether `all` or
/// listed: `--device auto` computes on the CPU with a warning saying why,
/// `--device gpu` fails with one line, exit status 1, before any work.
#[test]
fn gpus_option_errors() {
    let train = bundled("GunPoint_TRAIN.ts");
    let train = train.to_str().unwrap();
    let commands: [&[&str]; 3] = [
        &["distance", train, "--metric", "dtw", "--band", "2"],
        &["knn", "--train", train, "--test", train, "--metric", "dtw"],
        &["bench", "--lengths", "4", "--count", "2", "--repeats", "1"],
    ];
    let gpu = timewarp::gpu::Gpu::get().is_ok();
    for command in commands {
        let output = timewarp()
            .args(command)
            .args(["--gpus", "0,x"])
            .assert()
            .code(2)
            .stdout("")
            .get_output()
            .clone();
        let stderr = String::from_utf8(output.stderr).unwrap();
        assert!(
            stderr.contains("--gpus") && stderr.contains("0,x"),
            "{stderr}"
        );
        let mut on_cpu = timewarp();
        on_cpu
            .args(command)
            .args(["--gpus", "0", "--device", "cpu"]);
        expect_failure(&mut on_cpu, &["--gpus", "--device cpu"], 2);

        let missing = if gpu {
            "there is no GPU 63"
        } else {
            "no usable GPU"
        };
        let mut wanted = timewarp();
        wanted
            .args(command)
            .args(["--gpus", "63", "--device", "gpu"]);
        expect_failure(&mut wanted, &[missing], 1);
        // auto: the CPU instead, saying why, for a list as for all.
        let lists: &[&str] = if gpu { &["63"] } else { &["63", "0,1", "all"] };
        for list in lists {
            let output = timewarp()
                .args(command)
                .args(["--gpus", list])
                .assert()
                .success()
                .get_output()
                .clone();
            let stderr = String::from_utf8(output.stderr).unwrap();
            let warning = stderr.lines().find(|l| l.starts_with("timewarp: "));
            let warning = warning.unwrap_or_default();
            assert!(
                warning.ends_with("; computing on the CPU"),
                "--gpus {list}: {stderr}"
            );
            if gpu {
                assert!(warning.contains(missing), "{stderr}");
            }
            if command[0] != "bench" {
                assert!(stderr.contains(" on cpu "), "--gpus {list}: {stderr}");
            }
        }
    }
}

/// Files in `dir` left by an output written part way (`.NAME.partial.EXT`).
fn partial_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains("partial"))
        .collect()
}

/// A matrix or a bench that could never fit this machine is refused
/// before any work: one line naming the bytes, exit status 2, no output.
#[test]
fn runs_too_large_for_memory_fail_before_any_work() {
    let dir = TempDir::new().unwrap();
    // 200,000 series of one sample: 320 GB of distances in f64.
    let many = dir.path().join("many.npy");
    write_npy(&many, &Array2::<f64>::zeros((200_000, 1))).unwrap();
    let out = dir.path().join("big.npy");
    let mut distance = timewarp();
    distance
        .args(["distance", "--metric", "dtw", "--device", "cpu"])
        .arg(&many)
        .arg("--out")
        .arg(&out);
    expect_failure(
        &mut distance,
        &[
            "200000 x 200000 distance matrix in f64",
            "(320000000000 bytes)",
        ],
        2,
    );
    assert!(!out.exists());
    let mut bench = timewarp();
    bench.args(["bench", "--device", "cpu", "--count", "100"]);
    bench.args(["--queries", "1000000000"]);
    expect_failure(&mut bench, &["1000000000 queries", "bytes", "--queries"], 2);
    // Past what a usize counts.
    let mut bench = timewarp();
    bench.args(["bench", "--device", "cpu", "--count", "4000000000"]);
    bench.args(["--queries", "4000000000000", "--metric", "dtw"]);
    expect_failure(&mut bench, &["more than this machine can address"], 2);
}

/// An output path that is a symbolic link is written where it points (the
/// link stays a link), relative links from the link's folder, a dangling
/// link creating its target; plots alike.
#[test]
fn outputs_are_written_through_symbolic_links() {
    let dir = TempDir::new().unwrap();
    let data = write_every_format(dir.path())[3].clone();
    let sub = dir.path().join("sub");
    std::fs::create_dir(&sub).unwrap();
    std::fs::write(sub.join("real.csv"), "old\n").unwrap();
    let link = dir.path().join("link.csv");
    std::os::unix::fs::symlink("sub/real.csv", &link).unwrap();
    let dangling = dir.path().join("new.npy");
    std::os::unix::fs::symlink(sub.join("made.npy"), &dangling).unwrap();
    let plot = dir.path().join("plot.svg");
    std::os::unix::fs::symlink("sub/real.svg", &plot).unwrap();
    let expected: Array2<f64> = cli_matrix(&data, None, &["--metric", "dtw"]);
    for (out, extra) in [(&link, None), (&dangling, Some(&plot))] {
        let mut command = timewarp();
        command
            .args(["distance", "--metric", "dtw", "--device", "cpu"])
            .arg(&data)
            .arg("--out")
            .arg(out);
        if let Some(plot) = extra {
            command.arg("--plot").arg(plot);
        }
        command.assert().success();
    }
    for path in [&link, &dangling, &plot] {
        let kind = std::fs::symlink_metadata(path).unwrap().file_type();
        assert!(kind.is_symlink(), "{} was replaced", path.display());
    }
    let text = std::fs::read_to_string(sub.join("real.csv")).unwrap();
    assert_same_bits(&parse_csv::<f64>(&text), &expected);
    let made: Array2<f64> = read_npy(sub.join("made.npy")).unwrap();
    assert_same_bits(&made, &expected);
    assert!(std::fs::read_to_string(sub.join("real.svg"))
        .unwrap()
        .contains("<svg"));
    assert!(partial_files(dir.path()).is_empty() && partial_files(&sub).is_empty());
}

/// A plot that cannot be written: one line naming it and the system's
/// reason, exit status 2, and no output of the run left: refused before
/// any work where the folder shows it, else (a full disk, here /dev/full
/// through a link) the `--out` written beside it is removed.
#[test]
fn a_plot_that_cannot_be_written_leaves_no_outputs() {
    let dir = TempDir::new().unwrap();
    let data = write_every_format(dir.path())[0].clone();
    let out = dir.path().join("d.csv");
    let run = |plot: &Path, needles: &[&str]| {
        let mut command = timewarp();
        command
            .args(["distance", "--metric", "dtw", "--device", "cpu"])
            .arg(&data)
            .arg("--out")
            .arg(&out)
            .arg("--plot")
            .arg(plot);
        expect_error_line(&mut command, needles);
        assert!(!out.exists());
        assert!(partial_files(dir.path()).is_empty());
    };
    // Its folder is a file.
    let file = dir.path().join("file");
    std::fs::write(&file, "").unwrap();
    run(&file.join("m.png"), &["m.png", "no folder"]);
    if !Path::new("/dev/full").exists() {
        crate::common::skip(
            "a_plot_that_cannot_be_written_leaves_no_outputs",
            "no /dev/full to fill",
        );
        return;
    }
    let full = dir.path().join("full.png");
    std::os::unix::fs::symlink("/dev/full", &full).unwrap();
    run(&full, &["full.png: ", "(os error 28)"]);
    // The same for knn, whose accuracy would be printed last.
    let labelled = write_every_format(dir.path())[1].clone();
    let mut knn = timewarp();
    knn.args(["knn", "--metric", "dtw", "--device", "cpu", "--train"])
        .arg(&labelled)
        .arg("--test")
        .arg(&labelled)
        .arg("--plot")
        .arg(&full);
    expect_error_line(&mut knn, &["full.png: ", "(os error 28)"]);
}

/// Exit status 2, nothing on stdout, and one `timewarp:` line on stderr
/// (after the computation's own lines) holding every needle.
fn expect_error_line(command: &mut Command, needles: &[&str]) {
    let output = command.assert().code(2).stdout("").get_output().clone();
    let stderr = String::from_utf8(output.stderr).unwrap();
    let errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("timewarp: "))
        .collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    for needle in needles {
        assert!(errors[0].contains(needle), "{stderr:?} lacks {needle:?}");
    }
}

/// A matrix too large to draw: the plot alone is left out, with a warning,
/// and the matrix is written.
#[test]
fn a_plot_too_large_is_left_out_and_the_matrix_written() {
    let dir = TempDir::new().unwrap();
    let data = dir.path().join("600.npy");
    let series = Array2::from_shape_fn((600, 3), |(i, t)| (i * 3 + t) as f64 * 0.01);
    write_npy(&data, &series).unwrap();
    let (out, plot) = (dir.path().join("d.npy"), dir.path().join("m.png"));
    let output = timewarp()
        .args(["distance", "--metric", "dtw", "--device", "cpu"])
        .arg(&data)
        .arg("--out")
        .arg(&out)
        .arg("--plot")
        .arg(&plot)
        .assert()
        .success()
        .get_output()
        .clone();
    let stderr = String::from_utf8(output.stderr).unwrap();
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.starts_with("timewarp: "))
        .collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(
        warnings[0].contains("A (rows) has 600, more than the 500")
            && warnings[0].contains("leaving out the plot"),
        "{stderr}"
    );
    let matrix: Array2<f64> = read_npy(&out).unwrap();
    assert_eq!(matrix.dim(), (600, 600));
    assert!(!plot.exists());
}

/// Every command draws at the smallest size allowed, 200 x 200 pixels.
#[test]
fn plots_at_the_smallest_size() {
    let dir = TempDir::new().unwrap();
    let (test, train) = (bundled("GunPoint_TEST.ts"), bundled("GunPoint_TRAIN.ts"));
    let plot = |name: &str| dir.path().join(name);
    let runs: [(&[&str], &str); 3] = [
        (&["distance", "--metric", "dtw", "--band", "2"], "d.png"),
        (&["align", "--metric", "dtw", "--index", "0", "3"], "a.png"),
        (
            &["knn", "--metric", "dtw", "--band", "2", "--train"],
            "k.png",
        ),
    ];
    for (args, name) in runs {
        let mut command = timewarp();
        command.args(args);
        if args[0] == "knn" {
            command.arg(&train).arg("--test");
        }
        command.arg(&test);
        if args[0] == "align" {
            command.arg(&train);
        }
        command
            .args(["--device", "cpu", "--plot-size", "200x200", "--plot"])
            .arg(plot(name))
            .assert()
            .success();
        let bytes = std::fs::read(plot(name)).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        let word = |at: usize| u32::from_be_bytes(bytes[at..at + 4].try_into().unwrap());
        assert_eq!((word(16), word(20)), (200, 200), "{name}");
    }
}
