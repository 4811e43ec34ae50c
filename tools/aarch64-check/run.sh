#!/usr/bin/env bash
# Runs heapdelta's tests for aarch64 under qemu user-mode emulation (the frame-pointer walk has an
# aarch64 implementation; this is how it is exercised without aarch64 hardware).
#
# usage: tools/aarch64-check/run.sh
#
# Needs: the aarch64-unknown-linux-gnu Rust target (`rustup target add aarch64-unknown-linux-gnu`),
# a cross linker and libc (Debian: gcc-aarch64-linux-gnu libc6-dev-arm64-cross) and qemu-user.
# Builds into target/aarch64-check unless CARGO_TARGET_DIR is set.
#
# The test binaries that start a child binary (found by what they call; tests/cli.rs,
# tests/training_leak_example.rs and the tests that rerun themselves) are not run: the emulator
# cannot exec an aarch64 child without binfmt_misc, so they would fail for a reason that has
# nothing to do with heapdelta.
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
TARGET=aarch64-unknown-linux-gnu
die() { echo "aarch64-check: $*" >&2; exit 2; }

rustup target list --installed 2>/dev/null | grep -qx "$TARGET" ||
    die "Rust target $TARGET missing: rustup target add $TARGET"
command -v aarch64-linux-gnu-gcc >/dev/null ||
    die "no aarch64-linux-gnu-gcc (Debian: apt install gcc-aarch64-linux-gnu libc6-dev-arm64-cross)"
command -v qemu-aarch64 >/dev/null || die "no qemu-aarch64 (Debian: apt install qemu-user)"
SYSROOT=/usr/aarch64-linux-gnu
[ -d "$SYSROOT/lib" ] || die "no aarch64 libc in $SYSROOT (Debian: apt install libc6-dev-arm64-cross)"

export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc
export CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_RUNNER="qemu-aarch64 -L $SYSROOT"
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$ROOT/target/aarch64-check}

cd "$ROOT"
# Every test target except those that exec a child binary (their own, through
# `Command::new(std::env::current_exe()...)` or `children/rerun.rs`, or another of the package's: through
# `CARGO_BIN_EXE_*`, `cargo run`, or an example's path built next to the test binary). A test that
# only reads its own path (to check that a report names the program) runs.
TESTS=()
for f in tests/*.rs; do
    name=$(basename "$f" .rs)
    if grep -qE 'Command::new\(std::env::current_exe\(\)|children/rerun.rs|CARGO_BIN_EXE|"--example"|join\("examples"\)' "$f"; then
        echo "aarch64-check: skipping tests/$name.rs (it runs a child binary)"
        continue
    fi
    TESTS+=(--test "$name")
done
cargo test --target "$TARGET" --all-features --lib "${TESTS[@]}"
