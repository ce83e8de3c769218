#!/usr/bin/env bash
# The DTW path of long random pairs with `timewarp align` (f32, no band):
# the figures of docs/benchmarks.md's alignment section. Usage:
#   benches/align_bench.sh TIMEWARP [LENGTH...]   (default 65536 262144 1048576)
# Needs python3 with numpy for the data. Each length runs twice: the first
# process also JIT-compiles the kernel (the driver caches it for the second).
set -euo pipefail
timewarp=$1; shift
lengths=("${@:-65536 262144 1048576}")
data=$(mktemp -d)
trap 'rm -rf "$data"' EXIT
for n in ${lengths[@]}; do
    python3 -c "
import numpy as np
rng = np.random.default_rng($n)
for name in 'xy':
    np.save('$data/' + name + '.npy', rng.standard_normal((1, $n)).cumsum(axis=1))
"
    for run in 1 2; do
        start=$(date +%s.%N)
        "$timewarp" align "$data/x.npy" "$data/y.npy" --metric dtw --precision f32 --out "$data/path.csv"
        end=$(date +%s.%N)
        echo "n = $n, run $run: $(python3 -c "print(f'{$end - $start:.2f}')") s wall, $(($(wc -l <"$data/path.csv") - 1)) path cells"
    done
done
