#!/usr/bin/env python3
"""Replay traces through real CPython (ref_replay) and compare its counters.

usage: compare.py --ref REF_REPLAY --heapdelta REPLAY_TRACE TRACE...
           CPython against heapdelta's Pool (examples/replay_trace.rs)
       compare.py --ref REF_REPLAY --expected TRACE...
           CPython against the stored NAME.expected.json next to each NAME.trace[.gz]

Every snapshot, the statistics at the end ("after") and after freeing every survivor
("after_cleanup") must be equal, field by field. For each trace that differs, prints the first
differing field with both values; ends with "compared K traces: K OK, 0 mismatches" and exits
with status 1 if any trace differed or a replayer failed.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

SECTIONS = ("snapshots", "after", "after_cleanup")


def run(binary, trace, on_stdin):
    """Run a replayer and parse its JSON. ref_replay reads the (decompressed) trace on stdin,
    replay_trace takes its path."""
    if on_stdin:
        opener = gzip.open if trace.endswith(".gz") else open
        with opener(trace, "rb") as f:
            p = subprocess.run([binary], input=f.read(), capture_output=True)
    else:
        p = subprocess.run([binary, trace], capture_output=True)
    if p.returncode != 0:
        raise RuntimeError(f"{os.path.basename(binary)} exited with {p.returncode}: "
                           f"{p.stderr.decode(errors='replace').strip()[:500]}")
    return json.loads(p.stdout)


def first_diff(a, b, path):
    """(path, a value, b value) of the first difference, or None. Lists are compared item by
    item before their lengths, so a missing snapshot shows up where it is missing."""
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if k not in a or k not in b:
                return (f"{path}.{k}", a.get(k, "<missing>"), b.get(k, "<missing>"))
            d = first_diff(a[k], b[k], f"{path}.{k}")
            if d:
                return d
        return None
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b)):
            where = f"{path}[{i}]"
            if isinstance(x, dict) and "label" in x:
                where += f"(label {x['label']!r}, op {x.get('op')})"
            elif isinstance(x, dict) and "class" in x:
                where += f"(class {x['class']})"
            d = first_diff(x, y, where)
            if d:
                return d
        if len(a) != len(b):
            return (f"{path} length", len(a), len(b))
        return None
    return None if a == b else (path, a, b)


def check(trace, ref, heapdelta):
    """None if the trace matches, else a one-line description of the first difference."""
    try:
        cpython = run(ref, trace, on_stdin=True)
        if heapdelta:
            other, name = run(heapdelta, trace, on_stdin=False), "heapdelta"
        else:
            stem = trace[:-len(".gz")] if trace.endswith(".gz") else trace
            with open(stem[:-len(".trace")] + ".expected.json") as f:
                other, name = json.load(f), "expected"
            # Blocks left with malloc (size 0 or > 512) are counted by the trace section only.
            other["live_raw"] = other["trace"]["live_raw"]
    except (OSError, RuntimeError, ValueError) as e:
        return f"ERROR {e}"
    for key in SECTIONS if heapdelta else SECTIONS + ("live_raw",):
        d = first_diff(cpython[key], other[key], key)
        if d:
            return f"MISMATCH {d[0]}: cpython={d[1]!r} {name}={d[2]!r}"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--ref", required=True, help="the compiled ref_replay")
    what = ap.add_mutually_exclusive_group(required=True)
    what.add_argument("--heapdelta", help="heapdelta's replay_trace binary")
    what.add_argument("--expected", action="store_true", help="compare with NAME.expected.json")
    ap.add_argument("-j", "--jobs", type=int, default=os.cpu_count())
    ap.add_argument("traces", nargs="+")
    args = ap.parse_args()

    with ThreadPoolExecutor(args.jobs) as ex:
        results = list(ex.map(lambda t: check(t, args.ref, args.heapdelta), args.traces))
    bad = 0
    for trace, problem in zip(args.traces, results):
        if problem:
            print(f"{trace}: {problem}")
            bad += 1
    n = len(args.traces)
    print(f"compared {n} traces: {n - bad} OK, {bad} mismatches")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
