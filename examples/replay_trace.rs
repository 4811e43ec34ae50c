//! Replays an allocation trace (gzipped or plain) through a fresh, non-global `Pool` with
//! `PoolConfig::CPYTHON` and prints the counters at each snapshot, at the end and after freeing
//! every survivor, as JSON: the `snapshots`, `after` and `after_cleanup` parts of
//! `tests/data/pymalloc/*.expected.json`, in the same shape (the rest of those files describes
//! the trace and the CPython that replayed it).
//!
//! ```text
//! cargo run --release --example replay_trace -- tests/data/pymalloc/training.trace.gz
//! ```

use heapdelta::{replay, Pool, PoolConfig};
use std::io::Read;

fn main() {
    let Some(path) = std::env::args().nth(1) else {
        eprintln!("usage: replay_trace TRACE[.gz]");
        std::process::exit(2);
    };
    let result = read(&path).and_then(|text| {
        let ops = replay::parse(&text)?;
        let pool = Pool::with_config(std::alloc::System, PoolConfig::CPYTHON);
        let outcome = replay::run(&pool, &ops)?;
        serde_json::to_string_pretty(&replay::outcome_json(&pool, &outcome))
            .map_err(|e| e.to_string())
    });
    match result {
        Ok(json) => println!("{json}"),
        Err(e) => {
            eprintln!("replay_trace: {path}: {e}");
            std::process::exit(1);
        }
    }
}

fn read(path: &str) -> Result<String, String> {
    let bytes = std::fs::read(path).map_err(|e| e.to_string())?;
    let mut text = String::new();
    if bytes.starts_with(&[0x1f, 0x8b]) {
        // Every member of a concatenated file (`cat a.gz b.gz`), as `gunzip` reads it.
        flate2::read::MultiGzDecoder::new(&bytes[..])
            .read_to_string(&mut text)
            .map_err(|e| e.to_string())?;
    } else {
        text = String::from_utf8(bytes).map_err(|e| e.to_string())?;
    }
    Ok(text)
}
