#!/usr/bin/env bash
# ptxas_report.sh: registers, barriers, static shared memory, stack frame and
# spills of every kernel entry of timewarp's embedded PTX, as ptxas compiles
# it for one GPU architecture (sm_90 unless told), as a Markdown table.
#
# The GPU machine has ptxas (CUDA toolkit) but no Rust toolchain, so the PTX
# comes from the staged binary (`timewarp info --dump-ptx`):
#   on the CPU machine:   ../shared/tools/stage-gpu --bin timewarp
#   on the GPU machine:   bash tools/ptxas_report.sh          (device tool, carry [".gpu"])
#
# Usage:
#   tools/ptxas_report.sh [--arch sm_NN] [PTX_FILE]
#       PTX_FILE: a PTX file instead of the one .gpu/bin/timewarp embeds
#       ($TIMEWARP names another binary); ptxas is $PTXAS, else `ptxas` on
#       PATH, else /usr/local/cuda/bin/ptxas
#   tools/ptxas_report.sh --from-log LOG
#       only parse a saved `ptxas -v` log (`-`: stdin); tests/cli.rs checks
#       this parser on a sample
#
# Shared memory is ptxas' static `smem` only: the kernels' launch-sized
# (dynamic) shared memory is not in the PTX and is not counted. Entries are
# listed in the order ptxas compiles them.
set -euo pipefail

# `ptxas -v` output on stdin -> the table. Lines it reads:
#   ptxas info    : Compiling entry function 'dtw_naive_f32' for 'sm_90'
#   ptxas info    : Function properties for dtw_naive_f32
#       0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
#   ptxas info    : Used 40 registers, used 0 barriers, 8 bytes smem, 456 bytes cmem[0]
# A "Used" line belongs to the entry compiled last; a stack line to the
# function whose properties came last (device functions that are not entries
# get stack lines too, and are not listed). A missing figure prints as `?`.
parse() {
  awk '
    function value(key, name) { return ((key, name) in fig) ? fig[key, name] : "?" }
    /Compiling entry function/ {
      split($0, quoted, "\047")
      entry = quoted[2]
      if (!(entry in seen)) { seen[entry] = 1; order[++n] = entry }
      next
    }
    /Function properties for/ { props = $NF; next }
    /bytes stack frame/ {
      for (i = 1; i < NF; i++) {
        if ($(i + 1) != "bytes") continue
        if ($(i + 2) ~ /^stack/) fig["stack", props] = $i
        else if ($(i + 3) ~ /^stores/) fig["stores", props] = $i
        else if ($(i + 3) ~ /^loads/) fig["loads", props] = $i
      }
      next
    }
    /Used [0-9]+ registers/ {
      if (entry == "") next
      fig["smem", entry] = 0
      for (i = 1; i < NF; i++) {
        if ($(i + 1) ~ /^registers/) fig["registers", entry] = $i
        else if ($(i + 1) ~ /^barriers/) fig["barriers", entry] = $i
        else if ($(i + 1) == "bytes" && $(i + 2) ~ /^smem/) fig["smem", entry] = $i
      }
      next
    }
    END {
      if (n == 0) { print "ptxas_report: no entry functions in the ptxas output" > "/dev/stderr"; exit 1 }
      print "| kernel | registers | barriers | static smem (B) | stack frame (B) | spill stores (B) | spill loads (B) |"
      print "|---|---:|---:|---:|---:|---:|---:|"
      for (k = 1; k <= n; k++) {
        e = order[k]
        printf "| %s | %s | %s | %s | %s | %s | %s |\n", e, value("registers", e), value("barriers", e),
          value("smem", e), value("stack", e), value("stores", e), value("loads", e)
      }
    }'
}

arch=sm_90
ptx=
while (($#)); do
  case "$1" in
    --from-log)
      [[ $# -ge 2 ]] || { echo "ptxas_report: --from-log needs a file (or -)" >&2; exit 2; }
      if [[ $2 == - ]]; then parse; else parse <"$2"; fi
      exit ;;
    --arch) arch=${2:?--arch needs sm_NN}; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    -*) echo "ptxas_report: unknown option $1" >&2; exit 2 ;;
    *) ptx=$1 ;;
  esac
  shift
done

ptxas=${PTXAS:-$(command -v ptxas || echo /usr/local/cuda/bin/ptxas)}
[[ -x $ptxas ]] || { echo "ptxas_report: no ptxas (set PTXAS)" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if [[ -z $ptx ]]; then
  tw=${TIMEWARP:-.gpu/bin/timewarp}
  ptx=$work/timewarp.ptx
  # Its stderr names the build: compiler, target and PTX hash.
  "$tw" info --dump-ptx "$ptx" 2>"$work/dump.log" || { cat "$work/dump.log" >&2; exit 1; }
  echo "PTX: $(sed -n 's/^wrote the embedded PTX (\(.*\)) to .*/\1/p' "$work/dump.log")"
else
  echo "PTX: $ptx ($(grep -m1 '^\.target' "$ptx" || echo 'no .target line'))"
fi
echo "ptxas: $("$ptxas" --version | tail -n 1), \`ptxas -v -arch=$arch\`"
echo
"$ptxas" -v -arch="$arch" -o "$work/out.cubin" "$ptx" >"$work/ptxas.log" 2>&1 \
  || { cat "$work/ptxas.log" >&2; exit 1; }
parse <"$work/ptxas.log"
