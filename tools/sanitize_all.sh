#!/usr/bin/env bash
# The whole GPU test suite, Rust and Python, under one compute-sanitizer
# tool: every test of every staged test binary and every Python test, split
# into shards that run at once on the GPU machine (each shard is its own
# process under the tool; the tools slow kernels 10-100x, and one process
# at a time would take hours). Prints one summary line: the tool, the
# shards that passed, the errors the tool reported, and the kernels the
# Rust shards launched together.
#
# On the GPU machine, staged as for tools/gpu_gate.sh:
#   bash tools/sanitize_all.sh TOOL [SHARDS] [SECONDS]
# TOOL: memcheck | racecheck | synccheck | initcheck. SHARDS (default 8)
# Rust shards, plus 2 Python shards; SECONDS (default 560) bounds each.
# With a gate log ($SANITIZE_WEIGHTS, or $OUT/gate-rust.log from a gate run
# earlier in the same call), the tests are dealt out by their times there,
# the longest first, to the shard with the least so far; otherwise
# round-robin. SANITIZE_FILTER (an extended regular expression) keeps the
# Rust tests whose names match it (the Python shards run whole).
# Logs: $OUT/san-TOOL-logs.tgz (one file: the device tool returns few);
# kernels launched: $OUT/san-TOOL-kernels.txt.
set -u
tool=${1:?memcheck, racecheck, synccheck or initcheck}
shards=${2:-8}
limit=${3:-560}
out=${OUT:-/tmp}
cd "$(dirname "$0")/.."
started=$(date +%s)

if [[ -f .gpu/payload.tar.xz ]]; then
    tar -xJf .gpu/payload.tar.xz -C .gpu && rm -f .gpu/payload.tar.xz
fi
# tools/stage_gpu.sh stages the library's and the binary's unit tests
# under names of their own; `timewarp` is one of them again.
if [[ -f .gpu/unit-tests.tar.xz ]]; then
    tar -xJf .gpu/unit-tests.tar.xz -C .gpu && rm -f .gpu/unit-tests.tar.xz
fi
if [[ -x .gpu/tests/timewarp-lib && -x .gpu/tests/timewarp-bin ]]; then
    rm -f .gpu/tests/timewarp
fi
if ls .whl/*.whl >/dev/null 2>&1 && [[ ! -d /tmp/gate-site ]]; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir \
        --target /tmp/gate-site .whl/*.whl || { echo "sanitize: wheels did not install"; exit 1; }
fi
export PYTHONPATH=/tmp/gate-site${PYTHONPATH:+:$PYTHONPATH}
# The CLI tests run the binary by its build-time path (as the gate does).
if [[ -x .gpu/bin/timewarp ]]; then
    mkdir -p target/release && cp .gpu/bin/timewarp target/release/timewarp
fi
# run.sh links the build's root to this tree; it is the staged tests' cwd.
bash .gpu/run.sh cmd true >/dev/null 2>&1 || true
# Each shard loads only the kernels its tests launch (the tool instruments
# every kernel a process loads).
export REQUIRE_GPU=1 PYTHONUNBUFFERED=1 RUST_BACKTRACE=1 TIMEWARP_LAZY_KERNELS=1

# Every test of every binary as "binary<TAB>name<TAB>seconds".
weights=${SANITIZE_WEIGHTS:-$out/gate-rust.log}
work=$(mktemp -d)
logs=$work/san-$tool
mkdir -p "$logs"
for binary in .gpu/tests/*; do
    [[ -x $binary ]] || continue
    "$binary" --list --format terse 2>/dev/null | sed -n 's/: test$//p' |
        grep -E "${SANITIZE_FILTER:-.}" | while read -r name; do
        seconds=""
        if [[ -f $weights ]]; then
            # The gate's log names some tests without their first module.
            for key in "$name" "${name#*::}"; do
                seconds=$(grep -F "timing: ${key} " "$weights" | head -n 1 |
                    sed -E 's/.*timing: [^ ]+ ([0-9.]+) s \(holding the GPU ([0-9.]+).*/\2/')
                [[ -n $seconds ]] && break
            done
        fi
        printf '%s\t%s\t%s\n' "$binary" "$name" "${seconds:-0}"
    done
done | sort -t$'\t' -k3,3 -g -r >"$work/tests.tsv"

# Longest first, each to the shard with the least so far.
awk -F'\t' -v shards="$shards" -v dir="$work" '
    { best = 0; for (s = 1; s < shards; s++) if (load[s] < load[best]) best = s
      load[best] += $3 + 0.05
      binary = $1; sub(/.*\//, "", binary)
      print $2 > (dir "/shard-" best "-" binary) }' "$work/tests.tsv"

sanitizer=(compute-sanitizer --tool "$tool" --error-exitcode 99 --print-limit 50)
pids=()
names=()
for list in "$work"/shard-*; do
    shard=$(basename "$list")
    binary=.gpu/tests/${shard#shard-*-}
    mapfile -t tests <"$list"
    log=$logs/$shard.log
    coverage=$logs/$shard.kernels
    (TIMEWARP_KERNEL_COVERAGE=$coverage timeout -k 10 "$limit" "${sanitizer[@]}" \
        "$binary" --exact --test-threads 2 "${tests[@]}") >"$log" 2>&1 &
    pids+=($!)
    names+=("$shard")
done
# Python: the GPU and torch tests apart from the rest.
python_shard() {
    local name=$1; shift
    (cd /tmp && timeout -k 10 "$limit" "${sanitizer[@]}" python3 -m pytest \
        "$@" -q -rs -p no:cacheprovider) >"$logs/$name.log" 2>&1 &
    pids+=($!)
    names+=("$name")
}
here=$PWD
python_shard python-gpu "$here/python/tests/test_gpu.py" "$here/python/tests/test_torch.py"
python_shard python-rest "$here/python/tests" --ignore "$here/python/tests/test_gpu.py" --ignore "$here/python/tests/test_torch.py"

# A shard whose tests made no CUDA call (compute-sanitizer then says the
# target "terminated before first instrumented API call" and exits with an
# error) passed if its tests did.
no_cuda_call() {
    grep -q "terminated before first instrumented API call" "$1" &&
        grep -Eq "^test result: ok|^[0-9]+ passed" "$1" &&
        ! grep -Eq "^test result: FAILED|[1-9][0-9]* failed" "$1"
}
passed=0
failed=()
for i in "${!pids[@]}"; do
    status=0
    wait "${pids[$i]}" || status=$?
    log=$logs/${names[$i]}.log
    if ((status == 0)) || no_cuda_call "$log"; then
        passed=$((passed + 1))
    else
        failed+=("${names[$i]}(exit $status)")
    fi
done
errors=$(grep -h "ERROR SUMMARY" "$logs"/*.log | awk '{ e += $4 } END { print e + 0 }')
summaries=$(grep -h "ERROR SUMMARY" "$logs"/*.log | wc -l)
# racecheck reports hazards apart from errors.
hazards=$(grep -h "RACECHECK SUMMARY" "$logs"/*.log | awk '{ h += $4 } END { print h + 0 }')
# The kernels launched by any Rust shard.
cat "$logs"/*.kernels 2>/dev/null | sed -n 's/^launched: //p' | tr ' ' '\n' |
    sed '/^$/d' | sort -u >"$out/san-$tool-kernels.txt"
kernels=$(wc -l <"$out/san-$tool-kernels.txt")
rust_counts=$(grep -h '^test result:' "$logs"/shard-*.log | awk '
    { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
    END { printf "%d passed, %d failed", p, f }')
python_counts=$(for name in python-gpu python-rest; do
    grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$logs/$name.log" | tail -n 1 |
        sed 's/=//g; s/^ *//; s/ *$//'
done | paste -sd ';')
verdict=PASS
((${#failed[@]} == 0 && errors == 0 && hazards == 0)) || verdict=FAIL
echo "sanitize $tool: $verdict in $(($(date +%s) - started)) s; $passed of ${#pids[@]} shards passed${failed:+ (failed: ${failed[*]})};" \
    "$errors errors and $hazards hazards in $summaries summaries; rust: $rust_counts; python: $python_counts; kernels launched: $kernels"
tar czf "$out/san-$tool-logs.tgz" -C "$work" "san-$tool"
rm -rf "$work"
[[ $verdict == PASS ]]
