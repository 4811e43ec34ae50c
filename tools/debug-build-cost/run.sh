#!/usr/bin/env bash
# Times a debug build of a small program under each global allocator, with heapdelta at
# `opt-level = 3` as the README's Install section recommends and the program's own crate
# unoptimized: the figures of the README's table of debug builds. The program formats two million
# short strings and keeps one in fifty; it is built without frame pointers (exact sites unwind).
#
# Usage: tools/debug-build-cost/run.sh [RUNS]      (default 5 runs of each, alternating)
# Builds in a temporary directory (about 1 GB, removed at exit); needs no network beyond crates.io.
set -euo pipefail
repo=$(cd "$(dirname "$0")/../.." && pwd)
runs=${1:-5}
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/src"

cat > "$dir/Cargo.toml" <<EOF
[package]
name = "debug_build_cost"
version = "0.0.0"
edition = "2021"
publish = false

[dependencies]
heapdelta = { path = "$repo" }

[features]
pool = []
off = []
exact = []
tpool = []

[profile.dev.package.heapdelta]
opt-level = 3

[workspace]
EOF

cat > "$dir/src/main.rs" <<'EOF'
#[cfg(feature = "pool")]
#[global_allocator]
static GLOBAL: heapdelta::Pool = heapdelta::Pool::new();
#[cfg(feature = "off")]
#[global_allocator]
static GLOBAL: heapdelta::Tracker =
    heapdelta::Tracker::new().call_sites(heapdelta::CallSites::Off);
#[cfg(feature = "exact")]
#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();
#[cfg(feature = "tpool")]
#[global_allocator]
static GLOBAL: heapdelta::Tracker<heapdelta::Pool> =
    heapdelta::Tracker::wrap(heapdelta::Pool::new());

fn main() {
    let t = std::time::Instant::now();
    let mut keep: Vec<String> = Vec::new();
    for round in 0..20 {
        let mut v: Vec<String> = Vec::with_capacity(100_000);
        for i in 0..100_000u32 {
            v.push(format!("s{i}-{round}"));
        }
        keep.extend(v.drain(..).step_by(50));
    }
    assert_eq!(keep.len(), 40_000);
    println!("{:.3}", t.elapsed().as_secs_f64());
}
EOF

variants=(system pool off exact tpool)
for v in "${variants[@]}"; do
    features=()
    [ "$v" != system ] && features=(--features "$v")
    (cd "$dir" && RUSTFLAGS= cargo build -q "${features[@]}")
    cp "$dir/target/debug/debug_build_cost" "$dir/$v"
done

for _ in $(seq "$runs"); do
    for v in "${variants[@]}"; do
        echo "$v $("$dir/$v" 2>/dev/null)"
    done
done > "$dir/times"

python3 - "$dir/times" <<'EOF'
import statistics, sys
times = {}
for line in open(sys.argv[1]):
    name, secs = line.split()
    times.setdefault(name, []).append(float(secs))
base = statistics.median(times["system"])
names = {"system": "System", "pool": "Pool", "off": "Tracker, sites off",
         "exact": "Tracker, exact sites", "tpool": "Tracker<Pool>, exact sites"}
for key, label in names.items():
    t = sorted(times[key])
    print(f"{label:28} {t[0]:.2f}-{t[-1]:.2f} s   median {statistics.median(t) / base:.2f}x System")
EOF
