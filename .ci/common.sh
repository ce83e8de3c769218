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
