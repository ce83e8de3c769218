#!/usr/bin/env bash
# peer_rows.sh: the GPU rows of docs/benchmarks.md that are compared with
# cuDTW++ (resident DTW, one query against 2^20 series) and with
# pytorch-softdtw-cuda (paired Soft-DTW), for one or more builds of
# `timewarp`, in rounds that alternate the builds, so that builds are
# compared on one machine in one run (the GPU machines differ by more than
# most changes gain). The peers' figures are in docs/benchmarks.md.
#
# Usage (on the GPU machine, from the tree's root):
#   bash tools/peer_rows.sh [--rounds N] [--rows dtw,sdtw] BIN [BIN ...]
# BIN: a `timewarp` binary (stage each with ../shared/tools/stage-gpu --bin,
# or copy builds of other commits next to it). Writes one JSON array per
# `bench` call to $OUT/rows.jsonl and a summary table (median seconds of
# each call) to stdout.
set -uo pipefail
rounds=2
rows=dtw,sdtw
while (($#)); do
  case "$1" in
    --rounds) rounds=$2; shift 2 ;;
    --rows) rows=$2; shift 2 ;;
    *) break ;;
  esac
done
(($#)) || { echo "usage: $0 [--rounds N] [--rows dtw,sdtw] BIN [BIN ...]" >&2; exit 2; }
out=${OUT:-/tmp}
status=0

# name | bench arguments
cases=()
if [[ ,$rows, == *,dtw,* ]]; then
  for length in 127 511 1023; do
    cases+=("dtw 1 x 2^20 L=$length resident|--metric dtw --precision f32 --queries 1 --count 1048576 --lengths $length --resident")
  done
  cases+=("dtw 1 x 2^20 L=127 page-locked|--metric dtw --precision f32 --queries 1 --count 1048576 --lengths 127 --pinned-input")
fi
if [[ ,$rows, == *,sdtw,* ]]; then
  paired="--metric soft-dtw --paired --precision f32 --repeats 30"
  cases+=(
    "sdtw fwd 1024 x 128 resident|$paired --count 1024 --lengths 128 --resident"
    "sdtw fwd 1024 x 128 streamed|$paired --count 1024 --lengths 128"
    "sdtw fwd 1024 x 128 page-locked|$paired --count 1024 --lengths 128 --pinned-input"
    "sdtw fwd 256 x 512 resident|$paired --count 256 --lengths 512 --resident"
    "sdtw fwd+grad 1024 x 128 resident|$paired --count 1024 --lengths 128 --resident --gradient"
    "sdtw fwd+grad 256 x 512 resident|$paired --count 256 --lengths 512 --resident --gradient"
  )
fi

printf '%-36s' "case (median ms)"
for bin in "$@"; do printf ' | %-24s' "$("$bin" info | sed -n 's/.*PTX hash \([0-9a-f]*\).*/\1/p')"; done
echo
for round in $(seq "$rounds"); do
  for case in "${cases[@]}"; do
    name=${case%%|*}
    printf '%-36s' "$name (round $round)"
    for bin in "$@"; do
      # shellcheck disable=SC2086
      json=$("$bin" bench --device gpu --json ${case#*|}) || { status=1; printf ' | %-24s' failed; continue; }
      echo "$json" | tr -d '\n' >>"$out/rows.jsonl"
      echo >>"$out/rows.jsonl"
      ms=$(python3 -c 'import json,sys; print("%.4g" % (1e3 * json.load(sys.stdin)[0]["seconds"]))' <<<"$json")
      printf ' | %-24s' "$ms"
    done
    echo
  done
done
exit $status
