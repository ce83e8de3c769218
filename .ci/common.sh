# Sourced by the scripts of .ci/: the repository's root as the working
# directory, and the kernels' pinned toolchain.
cd "$(dirname "${BASH_SOURCE[0]}")/.."

# The nightly that compiles the kernels, from kernels-gpu/rust-toolchain.toml
# (the one users get: build.rs reads the same file).
kernel_channel() {
    local channel
    channel=$(sed -n 's/^channel *= *"\(.*\)".*/\1/p' kernels-gpu/rust-toolchain.toml)
    [[ -n $channel ]] || { echo "no channel in kernels-gpu/rust-toolchain.toml" >&2; return 1; }
    echo "$channel"
}

# CI builds every crate once, from clean: incremental compilation's records
# would only cost time.
export CARGO_INCREMENTAL=0

# Runs "$@" (a cargo command that compiles) with clippy's driver as the
# compiler of the workspace's crates: it compiles them as rustc does and
# lints them on the way (warnings are errors), so the lints need no check
# build of their own. Dependencies compile with rustc, unlinted.
with_clippy() {
    RUSTC_WORKSPACE_WRAPPER="$(rustup which clippy-driver)" \
        CLIPPY_ARGS="-D__CLIPPY_HACKERY__warnings__CLIPPY_HACKERY__" "$@"
}
