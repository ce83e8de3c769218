#!/usr/bin/env bash
# The GPU gate: the whole Rust test suite and the whole Python test suite,
# under REQUIRE_GPU=1 at the default thread count, each under a timeout,
# at once on the GPU machine; prints one summary line and exits non-zero
# unless both passed. Run it before every submission that touches GPU code.
#
# On the CPU machine (the repository's root):
#   bash tools/stage_gpu.sh          (stage-gpu, and both unit-test binaries)
#   maturin build --release -m python/Cargo.toml -o .whl   # the wheel, abi3
#   pip download dask distributed partd locket tblib zict tornado into .whl
#     (docs/testing.md, "The GPU gate", has the exact command)
# then with the device tool: carry [".gpu", ".whl"], command
#   bash tools/gpu_gate.sh [SECONDS]      (default 170: the gate is 3 minutes)
# Logs: $OUT/gate-rust.log and $OUT/gate-python.log; the kernels the Rust
# suite launched: $OUT/kernel-coverage.txt.
set -u
limit=${1:-170}
out=${OUT:-/tmp}
cd "$(dirname "$0")/.."
started=$(date +%s)

# The Python package and what the GPU machine lacks (dask), from the
# carried wheels, without the network.
if ls .whl/*.whl >/dev/null 2>&1; then
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
        --target /tmp/gate-site .whl/*.whl || { echo "gpu gate: FAIL (wheels did not install)"; exit 1; }
    export PYTHONPATH=/tmp/gate-site${PYTHONPATH:+:$PYTHONPATH}
fi
# The CLI tests run the binary by its build-time path (run.sh links the
# build's root to this tree): put the staged one there.
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
if [[ -x .gpu/bin/timewarp ]]; then
    mkdir -p target/release && cp .gpu/bin/timewarp target/release/timewarp
fi

export REQUIRE_GPU=1 PYTHONUNBUFFERED=1
# The kernels the Rust suite launched, and those it did not.
export TIMEWARP_KERNEL_COVERAGE=$out/kernel-coverage.txt
timeout -k 10 "$limit" bash .gpu/run.sh tests >"$out/gate-rust.log" 2>&1 &
rust=$!
# From /tmp, so that `import timewarp` finds the installed package, not
# the source folder.
(cd /tmp && timeout -k 10 "$limit" python3 -m pytest "$OLDPWD/python/tests" -q -rs \
    -p no:cacheprovider) >"$out/gate-python.log" 2>&1 &
python=$!
wait "$rust"; rust_status=$?
wait "$python"; python_status=$?
elapsed=$(($(date +%s) - started))

# libtest prints one `test result:` line per binary; pytest one summary.
rust_counts=$(grep -h '^test result:' "$out/gate-rust.log" | awk '
    { for (i = 1; i <= NF; i++) { if ($(i+1) ~ /^passed/) p += $i; if ($(i+1) ~ /^failed/) f += $i } }
    END { printf "%d passed, %d failed", p, f }')
python_counts=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error)' "$out/gate-python.log" | tail -n 1 |
    sed 's/=//g; s/^ *//; s/ *$//')
verdict=PASS
((rust_status == 0 && python_status == 0)) || verdict=FAIL
why=""
((rust_status == 124 || python_status == 124)) && why=" (a timeout of ${limit} s)"
echo "gpu gate: $verdict in ${elapsed} s$why; rust: ${rust_counts} (exit $rust_status); python: ${python_counts:-no summary} (exit $python_status)"
[[ $verdict == PASS ]]
