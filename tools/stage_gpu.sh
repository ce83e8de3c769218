#!/usr/bin/env bash
# Stages the build for the GPU machine (docs/testing.md, "The GPU gate"):
# `../shared/tools/stage-gpu --bin timewarp`, then the test binaries that
# its naming loses. The library's unit tests and the `timewarp` binary's
# are both built as `timewarp-<hash>`, and stage-gpu keeps one of them as
# `.gpu/tests/timewarp`; both are put back here, as `timewarp-lib` and
# `timewarp-bin`, in `.gpu/unit-tests.tar.xz` (the gate and the
# sanitizers unpack it, run those and drop `timewarp`). Arguments go to
# stage-gpu.
set -euo pipefail
cd "$(dirname "$0")/.."
../shared/tools/stage-gpu --bin timewarp "$@"
# Packed apart (xz: the device tool carries 64 MiB), unpacked by the gate
# and the sanitizers.
units=$(mktemp -d)
trap 'rm -rf "$units"' EXIT
mkdir -p "$units/tests"
cargo test --release --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
for line in sys.stdin:
    try:
        m = json.loads(line)
    except ValueError:
        continue
    if (m.get("reason") == "compiler-artifact" and m.get("executable")
            and m["profile"]["test"] and m["target"]["name"] == "timewarp"):
        print(m["target"]["kind"][0], m["executable"])' >"$units/list"
while read -r kind executable; do
    cp "$executable" "$units/tests/timewarp-$kind"
    strip --strip-debug "$units/tests/timewarp-$kind" 2>/dev/null || true
done <"$units/list"
ls "$units/tests/timewarp-lib" "$units/tests/timewarp-bin" >/dev/null
tar -cJf .gpu/unit-tests.tar.xz -C "$units" tests
echo "stage_gpu.sh: .gpu/ is now $(du -sm .gpu | cut -f1) MiB"
