#!/usr/bin/env bash
# scaling.sh: the several-GPU workloads of docs/benchmarks.md ("Several
# GPUs"), each timed by `timewarp bench` on GPU 0 alone and then on every
# GPU, in one run; prints one line a workload: both times, the speed-up,
# and each GPU's busy and idle seconds (its share of the last timed call).
#
# Usage (on the GPU machine, from the tree's root, staged as for
# tools/gpu_gate.sh):
#   bash tools/scaling.sh [BIN] [--rows all|ROW,ROW...]
# BIN: the `timewarp` binary (default .gpu/bin/timewarp). ROW: dtw-all,
# dtw-1x4m, dtw-64x1m, twed-all, sdtw-all, sdtw-paired, sdtw-paired-grad.
# Writes every `bench` JSON to $OUT/scaling.jsonl.
set -uo pipefail
bin=.gpu/bin/timewarp
rows=all
while (($#)); do
  case "$1" in
    --rows) rows=$2; shift 2 ;;
    *) bin=$1; shift ;;
  esac
done
out=${OUT:-/tmp}
status=0
cd "$(dirname "$0")/.."
# The staged binaries, unpacked where stage-gpu packed them.
if [[ -f .gpu/payload.tar.xz ]]; then
  tar -xJf .gpu/payload.tar.xz -C .gpu && rm -f .gpu/payload.tar.xz
fi

# name | bench arguments
cases=(
  "dtw-all|DTW all pairs 16384 x 16384 x 256 f32|--metric dtw --precision f32 --count 16384 --lengths 256"
  "dtw-1x4m|DTW 1 x 2^22 resident, L = 511|--metric dtw --precision f32 --queries 1 --count 4194304 --lengths 511 --resident"
  "dtw-64x1m|DTW 64 x 2^20 resident, L = 127|--metric dtw --precision f32 --queries 64 --count 1048576 --lengths 127 --resident"
  "twed-all|TWED all pairs 2048 x 2048 x 512 f64|--metric twed --precision f64 --count 2048 --lengths 512"
  "sdtw-all|Soft-DTW all pairs 4096 x 4096 x 256 f32|--metric soft-dtw --precision f32 --count 4096 --lengths 256"
  "sdtw-paired|Soft-DTW paired 65536 x 512 resident, values|--metric soft-dtw --paired --precision f32 --count 65536 --lengths 512 --resident"
  "sdtw-paired-grad|Soft-DTW paired 65536 x 512 resident, gradient|--metric soft-dtw --paired --precision f32 --count 65536 --lengths 512 --resident --gradient"
)

summary() {
  python3 -c '
import json, sys
one, every = (json.loads(text)[0] for text in sys.argv[1:3])
shares = every.get("gpu_shares") or []
parts = ["%s busy %.3g s, idle %.3g s" % (s["gpu"].split(" (")[0], s["seconds"], s["idle_seconds"])
         for s in shares]
print("%.4g s | %.4g s | %.2fx | %s" % (one["seconds"], every["seconds"],
      one["seconds"] / every["seconds"], "; ".join(parts) or "no shares"))
' "$1" "$2"
}

"$bin" info | grep -E "PTX hash|GPU" | head -n 4
for case in "${cases[@]}"; do
  IFS='|' read -r key name args <<<"$case"
  [[ $rows == all || ,$rows, == *,$key,* ]] || continue
  # shellcheck disable=SC2086
  one=$("$bin" bench --device gpu --json --gpus 0 $args 2>/dev/null) || { status=1; echo "$name: --gpus 0 failed"; continue; }
  # shellcheck disable=SC2086
  every=$("$bin" bench --device gpu --json --gpus all $args 2>/dev/null) || { status=1; echo "$name: --gpus all failed"; continue; }
  printf '%s\n%s\n' "$(tr -d '\n' <<<"$one")" "$(tr -d '\n' <<<"$every")" >>"$out/scaling.jsonl"
  echo "$name | $(summary "$one" "$every")"
done
exit $status
