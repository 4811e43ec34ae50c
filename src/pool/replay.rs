//! Trace replay through a `Pool` (used by `examples/replay_trace.rs` and `tests/pool_vectors.rs`;
//! not a stable API).
//!
//! ```
//! use heapdelta::{replay, Pool};
//!
//! let ops = replay::parse("a 1 40\na 2 40\ns two\nf 1\ns one")?;
//! let outcome = replay::run(&Pool::new(), &ops)?;
//! let in_use: Vec<u64> = outcome.snapshots.iter().map(|s| s.stats.bytes_in_use).collect();
//! assert_eq!(in_use, [96, 48]); // blocks of the 48-byte class
//! assert_eq!(outcome.after_cleanup.bytes_in_use, 0);
//! # Ok::<(), String>(())
//! ```
//!
//! Trace format, one operation a line (`#` starts a comment):
//! `a ID SIZE` allocate, `f ID` free, `r ID SIZE` realloc, `s LABEL` snapshot.
//!
//! A request of 0 bytes lands in `malloc` in CPython (never in the pools), and so does a realloc
//! to 0. `GlobalAlloc` never sees size 0, so the replay sends such requests to the inner allocator
//! as a `max_small + 1`-byte request instead: they stay outside the pools exactly as in CPython,
//! and `large_blocks` equals CPython's count of raw blocks.

use super::{Pool, PoolStats};
use serde_json::{json, Value};
use std::alloc::{GlobalAlloc, Layout};
use std::collections::BTreeMap;

/// One trace operation.
///
/// ```
/// use heapdelta::replay::{parse, Op};
///
/// assert_eq!(parse("s after load")?, [Op::Snapshot("after load".to_string())]);
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// `a ID SIZE`
    Alloc(u32, usize),
    /// `f ID`
    Free(u32),
    /// `r ID SIZE`
    Realloc(u32, usize),
    /// `s LABEL`
    Snapshot(String),
}

/// Parses a trace; the error names the first malformed line.
///
/// ```
/// use heapdelta::replay::{parse, Op};
///
/// assert_eq!(parse("# a comment\na 7 100\nr 7 200\nf 7")?,
///            [Op::Alloc(7, 100), Op::Realloc(7, 200), Op::Free(7)]);
/// assert!(parse("a 7").unwrap_err().contains("line 1"));
/// # Ok::<(), String>(())
/// ```
pub fn parse(text: &str) -> Result<Vec<Op>, String> {
    let mut ops = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let bad = || {
            // A file with another line ending can come in as one huge line: show its start.
            let shown: String = line.chars().take(60).collect();
            let more = if shown.len() < line.len() { "…" } else { "" };
            format!("line {}: malformed: {shown:?}{more}", n + 1)
        };
        let mut it = line.split_ascii_whitespace();
        let kind = it.next().ok_or_else(bad)?;
        let num = |it: &mut std::str::SplitAsciiWhitespace<'_>| -> Result<usize, String> {
            it.next()
                .and_then(|s| s.parse::<usize>().ok())
                .ok_or_else(bad)
        };
        let op = match kind {
            "a" => Op::Alloc(id(num(&mut it)?).ok_or_else(bad)?, num(&mut it)?),
            "f" => Op::Free(id(num(&mut it)?).ok_or_else(bad)?),
            "r" => Op::Realloc(id(num(&mut it)?).ok_or_else(bad)?, num(&mut it)?),
            "s" => Op::Snapshot(line[1..].trim().to_string()),
            _ => return Err(bad()),
        };
        if !matches!(op, Op::Snapshot(_)) && it.next().is_some() {
            return Err(bad());
        }
        ops.push(op);
    }
    Ok(ops)
}

fn id(n: usize) -> Option<u32> {
    u32::try_from(n).ok().filter(|&i| i < 1 << 31)
}

/// The counters at one `s LABEL` line.
///
/// ```
/// use heapdelta::{replay, Pool};
///
/// let ops = replay::parse("a 1 24\ns loaded\nf 1")?;
/// let out = replay::run(&Pool::new(), &ops)?;
/// let s = &out.snapshots[0];
/// assert_eq!((s.label.as_str(), s.op), ("loaded", 1));
/// assert_eq!(s.stats.bytes_in_use, 32); // 24 B in a 32-byte block
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// The label.
    pub label: String,
    /// Index of the `s` line among all operations.
    pub op: usize,
    /// The pool's statistics there.
    pub stats: PoolStats,
}

/// Everything a replay measured.
///
/// ```
/// use heapdelta::{replay, Pool};
///
/// let ops = replay::parse("a 1 24\na 2 24\nf 1")?;
/// let out = replay::run(&Pool::new(), &ops)?;
/// assert_eq!(out.after.bytes_in_use, 32); // block 2 survives the trace
/// assert_eq!(out.after_cleanup.bytes_in_use, 0);
/// # Ok::<(), String>(())
/// ```
#[derive(Clone, Debug)]
pub struct Outcome {
    /// One entry per `s` line, in order.
    pub snapshots: Vec<Snapshot>,
    /// Statistics at the end of the trace.
    pub after: PoolStats,
    /// Statistics after freeing every survivor (in ascending id order).
    pub after_cleanup: PoolStats,
}

/// Replays `ops` through `pool` (which should be fresh and used by this thread only). Freeing
/// an id that is not live, or allocating one that is, is an error; the blocks the trace left live
/// are freed all the same, so the pool holds none of them after an error either.
///
/// ```
/// use heapdelta::{replay, Pool};
///
/// let ops = replay::parse("f 3")?;
/// assert!(replay::run(&Pool::new(), &ops).is_err());
/// # Ok::<(), String>(())
/// ```
pub fn run<A: GlobalAlloc>(pool: &Pool<A>, ops: &[Op]) -> Result<Outcome, String> {
    // Ids may be anything below 2^31: a map, not a vector indexed by id. Ordered, so the cleanup
    // frees the survivors in ascending id order.
    let mut live: BTreeMap<u32, (*mut u8, Layout)> = BTreeMap::new();
    let mut snapshots = Vec::new();
    let replayed = replay_ops(pool, ops, &mut live, &mut snapshots);
    let after = pool.stats();
    for (p, l) in live.into_values() {
        // SAFETY: every live block came from `pool` with its layout and is freed once.
        unsafe { pool.dealloc(p, l) };
    }
    replayed?;
    Ok(Outcome {
        snapshots,
        after,
        after_cleanup: pool.stats(),
    })
}

/// `run`'s replay of `ops`, up to the first error: the blocks live at its end are in `live`.
fn replay_ops<A: GlobalAlloc>(
    pool: &Pool<A>,
    ops: &[Op],
    live: &mut BTreeMap<u32, (*mut u8, Layout)>,
    snapshots: &mut Vec<Snapshot>,
) -> Result<(), String> {
    let zero = pool.engine.geo.max_small + 1;
    let align = 8;
    let layout = |n: usize| Layout::from_size_align(if n == 0 { zero } else { n }, align);
    for (k, op) in ops.iter().enumerate() {
        match *op {
            Op::Alloc(i, n) => {
                if live.contains_key(&i) {
                    return Err(format!("op {k}: id {i} allocated twice"));
                }
                let l = layout(n).map_err(|e| format!("op {k}: {n} bytes: {e}"))?;
                // SAFETY: `l` is non-zero-sized.
                let p = unsafe { pool.alloc(l) };
                if p.is_null() {
                    return Err(format!("op {k}: out of memory"));
                }
                live.insert(i, (p, l));
            }
            Op::Free(i) => {
                let (p, l) = take(live, i, k)?;
                // SAFETY: `p` came from `pool` with layout `l` and is freed once.
                unsafe { pool.dealloc(p, l) };
            }
            Op::Realloc(i, n) => {
                let nl = layout(n).map_err(|e| format!("op {k}: {n} bytes: {e}"))?;
                let (p, l) = take(live, i, k)?;
                // SAFETY: `p` came from `pool` with layout `l`; `nl.size()` is non-zero.
                let q = unsafe { pool.realloc(p, l, nl.size()) };
                if q.is_null() {
                    // The block is still `p`'s, unchanged: live, to be freed.
                    live.insert(i, (p, l));
                    return Err(format!("op {k}: out of memory"));
                }
                live.insert(i, (q, nl));
            }
            Op::Snapshot(ref label) => snapshots.push(Snapshot {
                label: label.clone(),
                op: k,
                stats: pool.stats(),
            }),
        }
    }
    Ok(())
}

fn take(
    live: &mut BTreeMap<u32, (*mut u8, Layout)>,
    i: u32,
    k: usize,
) -> Result<(*mut u8, Layout), String> {
    live.remove(&i)
        .ok_or_else(|| format!("op {k}: id {i} is not live"))
}

/// A snapshot's counters with the key names of the CPython vectors' `snapshots` entries.
///
/// ```
/// use heapdelta::{replay, Pool};
///
/// let outcome = replay::run(&Pool::new(), &replay::parse("a 1 16\ns one")?)?;
/// let json = replay::snapshot_json(&outcome.snapshots[0]);
/// assert_eq!(json["label"], "one");
/// # Ok::<(), String>(())
/// ```
pub fn snapshot_json(s: &Snapshot) -> Value {
    let st = &s.stats;
    json!({
        "label": s.label,
        "op": s.op,
        // `sys.getallocatedblocks()`: pool blocks plus raw (inner allocator) blocks.
        "live_blocks": st.classes.iter().map(|c| c.blocks_in_use).sum::<u64>() + st.large_blocks,
        "arenas_current": st.arenas_current,
        "arenas_highwater": st.arenas_highwater,
        "arenas_reclaimed": st.arenas_reclaimed,
        "arenas_total": st.arenas_allocated_total,
        "bytes_allocated_blocks": st.bytes_in_use,
        "unused_pools": st.unused_pools,
    })
}

/// Full statistics in the format of the CPython vectors' `after` entries (classes with pools only).
///
/// ```
/// use heapdelta::{replay, Pool};
///
/// let pool = Pool::new();
/// let outcome = replay::run(&pool, &replay::parse("a 1 16")?)?;
/// let json = replay::full_json(&pool, &outcome.after);
/// assert!(json.is_object());
/// # Ok::<(), String>(())
/// ```
pub fn full_json<A: GlobalAlloc>(pool: &Pool<A>, st: &PoolStats) -> Value {
    let g = &pool.engine.geo;
    let classes: Vec<Value> = st
        .classes
        .iter()
        .enumerate()
        .filter(|(_, c)| c.pools > 0)
        .map(|(i, c)| {
            json!({"class": i, "size": c.size, "pools": c.pools,
                   "blocks_in_use": c.blocks_in_use, "avail_blocks": c.blocks_available})
        })
        .collect();
    let pools: u64 = st.classes.iter().map(|c| c.pools).sum();
    let quant: u64 = st
        .classes
        .iter()
        .map(|c| c.pools * ((g.pool_size - g.overhead) % c.size) as u64)
        .sum();
    json!({
        "arenas_total": st.arenas_allocated_total,
        "arenas_reclaimed": st.arenas_reclaimed,
        "arenas_highwater": st.arenas_highwater,
        "arenas_current": st.arenas_current,
        "arena_size": g.arena_size,
        "pool_size": g.pool_size,
        "bytes_allocated_blocks": st.bytes_in_use,
        "bytes_available_blocks": st.classes.iter().map(|c| c.blocks_available * c.size as u64).sum::<u64>(),
        "unused_pools": st.unused_pools,
        "bytes_pool_headers": pools * g.overhead as u64,
        "bytes_quantization": quant,
        "bytes_arena_alignment": 0,
        "allocated_blocks": st.classes.iter().map(|c| c.blocks_in_use).sum::<u64>() + st.large_blocks,
        "classes": classes,
    })
}

/// The whole outcome as JSON: `{"snapshots": [...], "after": {...}, "after_cleanup": {...}}`.
///
/// ```
/// use heapdelta::{replay, Pool};
///
/// let pool = Pool::new();
/// let outcome = replay::run(&pool, &replay::parse("a 1 16\ns one")?)?;
/// let json = replay::outcome_json(&pool, &outcome);
/// assert_eq!(json["snapshots"].as_array().map(Vec::len), Some(1));
/// # Ok::<(), String>(())
/// ```
pub fn outcome_json<A: GlobalAlloc>(pool: &Pool<A>, o: &Outcome) -> Value {
    json!({
        "snapshots": o.snapshots.iter().map(snapshot_json).collect::<Vec<_>>(),
        "after": full_json(pool, &o.after),
        "after_cleanup": full_json(pool, &o.after_cleanup),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::PoolConfig;

    #[test]
    fn ids_up_to_the_format_limit_replay_without_a_table_that_large() {
        let ops = parse("a 2147483647 100\na 0 200\nf 2147483647\ns end\n").unwrap();
        let pool = Pool::with_config(std::alloc::System, PoolConfig::CPYTHON);
        let outcome = run(&pool, &ops).unwrap();
        let in_use = |st: &PoolStats| st.classes.iter().map(|c| c.blocks_in_use).sum::<u64>();
        assert_eq!(in_use(&outcome.snapshots[0].stats), 1);
        assert_eq!(in_use(&outcome.after_cleanup), 0);
    }

    #[test]
    fn extra_fields_on_a_line_are_an_error() {
        assert_eq!(
            parse("a 1 100\na 2 200 300\n").unwrap_err(),
            "line 2: malformed: \"a 2 200 300\""
        );
        assert!(parse("f 1 junk\n").is_err());
    }

    #[test]
    fn a_file_with_carriage_returns_only_is_an_error_not_one_allocation() {
        let e = parse("a 1 100\ra 2 200\rs end\r").unwrap_err();
        assert!(e.starts_with("line 1: malformed"), "{e}");
    }

    #[test]
    fn freeing_an_id_that_is_not_live_is_an_error() {
        let ops = parse("a 5 100\nf 6\n").unwrap();
        let pool = Pool::with_config(std::alloc::System, PoolConfig::CPYTHON);
        let err = run(&pool, &ops).unwrap_err();
        assert_eq!(err, "op 1: id 6 is not live");
    }

    #[test]
    fn a_trace_that_fails_partway_leaves_no_block_in_the_pool() {
        // A small block, a large one (from the inner allocator), then an error.
        let ops = parse("a 1 24\na 2 100000\na 1 8\n").unwrap();
        let pool = Pool::with_config(std::alloc::System, PoolConfig::CPYTHON);
        assert!(run(&pool, &ops).is_err());
        let st = pool.stats();
        assert_eq!((st.bytes_in_use, st.large_blocks), (0, 0), "{st:?}");
    }
}
