#!/usr/bin/env bash
# The path of long random pairs with `timewarp align` (f32, no band): the
# figures of docs/benchmarks.md's "Paths" section. Usage:
#   bash benches/align_bench.sh TIMEWARP [LENGTH...]   (default 65536 262144 1048576)
# METRIC=twed aligns with TWED instead of DTW (default dtw); with TIMES=1,
# TWED's samples get irregular timestamps (--times-a/--times-b).
# Needs python3 with numpy for the data. Each length runs twice: the first
# process also JIT-compiles the kernel (the driver caches it for the second).
set -euo pipefail
timewarp=$1; shift
lengths=("${@:-65536 262144 1048576}")
metric=${METRIC:-dtw}
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
times=()
if [[ ${TIMES:-0} == 1 ]]; then
    [[ $metric == twed ]] || { echo "TIMES=1 needs METRIC=twed" >&2; exit 2; }
    times=(--times-a "$data/tx.npy" --times-b "$data/ty.npy")
fi
for n in ${lengths[@]}; do
    python3 -c "
import numpy as np
rng = np.random.default_rng($n)
for name in 'xy':
    np.save('$data/' + name + '.npy', rng.standard_normal((1, $n)).cumsum(axis=1))
times = np.random.default_rng($n + 1)
for name in 'xy':
    np.save('$data/t' + name + '.npy', times.uniform(0.0, 2.0, (1, $n)).cumsum(axis=1))
"
    for run in 1 2; do
        start=$(date +%s.%N)
        "$timewarp" align "$data/x.npy" "$data/y.npy" --metric "$metric" --precision f32 \
            ${times[@]+"${times[@]}"} --out "$data/path.csv"
        end=$(date +%s.%N)
        echo "$metric n = $n, run $run: $(python3 -c "print(f'{$end - $start:.2f}')") s wall, $(($(wc -l <"$data/path.csv") - 1)) path steps"
    done
done
