#!/usr/bin/env bash
# A whole GPU run: the tests, the CLI on GunPoint, the ptxas report,
# the bench workloads and criterion, each part optional. On the CPU machine:
#   ../shared/tools/stage-gpu --benches --bin timewarp
# then, with the device tool (carry .gpu and target/release/timewarp, which
# the CLI tests run by its build-time path):
#   bash tools/gpu_session.sh [tests] [cli] [ptxas] [bench] [criterion]   (default: all)
# Logs and JSON land in $OUT.
set -u
parts=${*:-tests cli ptxas bench criterion}
want() { [[ " $parts " == *" $1 "* ]]; }
out=${OUT:-/tmp}
tw=.gpu/bin/timewarp
status=0
note() { echo; echo "##### $*"; }
run() { echo "== $*"; "$@" || status=$?; }

if want tests; then
  note "all tests"
  bash .gpu/run.sh tests || status=$?
fi

want cli && {
  note "info"
  run $tw info
  for metric in dtw twed; do
    for precision in f64 f32; do
      note "GunPoint 1-NN, $metric, $precision"
      run $tw knn --train tests/data/GunPoint_TRAIN.ts --test tests/data/GunPoint_TEST.ts \
        --metric $metric --device gpu --precision $precision
    done
  done
  for data in BasicMotions JapaneseVowels; do
    note "$data 1-NN, dtw, CPU and GPU"
    run $tw knn --train tests/data/${data}_TRAIN.ts --test tests/data/${data}_TEST.ts --metric dtw --device cpu
    run $tw knn --train tests/data/${data}_TRAIN.ts --test tests/data/${data}_TEST.ts --metric dtw --device gpu
  done
  note "cuTWED's batch workload: all pairs of synthetic control, nu = lambda = 1, degree 2"
  for precision in f64 f32; do
    for repeat in 1 2 3 4 5 6; do
      run $tw distance tests/data/synthetic_control.csv --metric twed --nu 1 --lambda 1 --device gpu \
        --precision $precision --out /tmp/sc.npy
    done
  done
} 2>&1 | tee "$out/cmd.log"

if want ptxas; then
  note "ptxas -v, sm_90"
  bash tools/ptxas_report.sh | tee "$out/ptxas_report.md" || status=$?
fi

if want bench; then
  # Same number of cells (1.7e10) per case: 1024 x 1024 pairs of length 128
  # (the size of cuDTW++'s 2^20-series database) and 256 x 256 of length 512.
  # The CPU column is sampled (see 'timed' / queries_timed). The variants
  # are those bench timed by default before it timed the library's choice
  # alone (every one but the pair-by-pair ones), with the CPU beside them.
  for precision in f32 f64; do
    for size in "128 1024" "512 256"; do
      set -- $size
      echo "== bench $precision length $1 count $2"
      $tw bench --device auto --with-cpu --variant naive,warp,local,shared,stencil \
        --lengths $1 --count $2 --precision $precision --json \
        | tee -a "$out/bench.jsonl" || status=$?
    done
  done
fi

if want criterion; then
  note "criterion"
  bash .gpu/run.sh bench || status=$?
fi
exit $status
