#!/usr/bin/env bash
# Checks that heapdelta's Pool (PoolConfig::CPYTHON) reproduces real CPython 3.11 exactly.
#
# usage: tools/cpython-check/run.sh [--quick] [--seed N]
#
# Environment: PYTHON (default python3.11, else python3), CC (default cc), CARGO_TARGET_DIR.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
QUICK=()
SEED=1
while [ $# -gt 0 ]; do
    case $1 in
        --quick) QUICK=(--quick) ;;
        --seed) SEED=${2:?--seed needs a number}; shift ;;
        -h|--help) sed -n '2,6p' "$0"; exit 0 ;;
        *) echo "unknown argument: $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done

die() { echo "cpython-check: $*" >&2; exit 2; }

# --- CPython 3.11: interpreter, headers, shared library ---------------------------------------
PY=${PYTHON:-$(command -v python3.11 || command -v python3 || true)}
[ -n "$PY" ] && command -v "$PY" >/dev/null ||
    die "no Python interpreter ${PY:+'$PY' }found; install CPython 3.11 or set PYTHON=/path/to/python3.11"
# Prints: version, include dir, lib dir, debug build?, pymalloc?
read -r VERSION INCLUDE LIBDIR DEBUG PYMALLOC < <("$PY" -c '
import sys, sysconfig
v = sysconfig.get_config_var
print("%d.%d" % sys.version_info[:2], sysconfig.get_paths()["include"], v("LIBDIR"),
      v("Py_DEBUG") or 0, v("WITH_PYMALLOC") or 0)')
[ "$VERSION" = 3.11 ] || die "$PY is Python $VERSION; CPython 3.11 is needed (set PYTHON=/path/to/python3.11)"
[ -f "$INCLUDE/Python.h" ] || die "no Python.h in $INCLUDE: install the CPython 3.11 headers (e.g. python3.11-dev)"
[ -e "$LIBDIR/libpython3.11.so" ] ||
    die "no libpython3.11.so in $LIBDIR: a CPython 3.11 built with --enable-shared (and its dev files) is needed"
[ "$DEBUG" = 0 ] || die "$PY is a debug build: its allocator adds debug hooks, use a release build"
[ "$PYMALLOC" = 1 ] || die "$PY is built without pymalloc"
command -v cargo >/dev/null || die "cargo not found"
CC=${CC:-cc}
command -v "$CC" >/dev/null || die "no C compiler ($CC); set CC"

# Temporary directory for ref_replay and the traces: removed on success, kept on a mismatch.
WORK=$(mktemp -d "${TMPDIR:-/tmp}/cpython-check.XXXXXX")
trap 'rm -rf "$WORK"' EXIT

echo "== building ref_replay against $LIBDIR/libpython3.11.so"
"$CC" -O2 -Wall -o "$WORK/ref_replay" "$HERE/ref_replay.c" -I"$INCLUDE" \
    -L"$LIBDIR" -lpython3.11 -Wl,-rpath,"$LIBDIR"

echo "== building heapdelta's replay_trace (cargo build --release --example replay_trace)"
(cd "$ROOT" && cargo build --quiet --release --example replay_trace)
# cargo knows where the target directory is (CARGO_TARGET_DIR, .cargo/config.toml, ...).
TARGET=$(cd "$ROOT" && cargo metadata --no-deps --format-version 1 |
         "$PY" -c 'import json, sys; print(json.load(sys.stdin)["target_directory"])')
REPLAY=$TARGET/release/examples/replay_trace

echo "== checking ref_replay against the stored CPython 3.11 vectors"
VECTORS=("$ROOT"/tests/data/pymalloc/*.trace.gz)
"$PY" "$HERE/compare.py" --ref "$WORK/ref_replay" --expected "${VECTORS[@]}" ||
    die "ref_replay disagrees with the stored vectors: the harness, not Pool, is wrong"

echo "== generating traces (seed $SEED${QUICK:+, quick})"
"$PY" "$HERE/make_traces.py" "$WORK/traces" --seed "$SEED" "${QUICK[@]}"

echo "== comparing CPython with heapdelta's Pool"
if ! "$PY" "$HERE/compare.py" --ref "$WORK/ref_replay" --heapdelta "$REPLAY" \
        "${VECTORS[@]}" "$WORK"/traces/*.trace; then
    trap - EXIT
    echo "traces and ref_replay kept in $WORK; replay one with:"
    echo "  $WORK/ref_replay < TRACE    and    $REPLAY TRACE"
    exit 1
fi
echo "done in ${SECONDS}s"
