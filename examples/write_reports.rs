//! Runs a few steps of a program that leaks a little at every step, then writes every report
//! heapdelta makes. The test fixtures under `tests/data/reports/` and the pictures in `docs/` are
//! made by it:
//!
//! ```text
//! cargo run --release --all-features --example write_reports -- tests/data/reports docs
//! ```
//!
//! Arguments, both optional: the directory for the data files (default `heapdelta-reports`), and
//! the one for the SVG pictures (default the same).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[global_allocator]
static GLOBAL: heapdelta::Tracker = heapdelta::Tracker::new();

const STEPS: usize = 6;

/// A cache that is never evicted: the leak.
struct Cache {
    entries: HashMap<u64, Vec<u8>>,
}

impl Cache {
    fn remember(&mut self, key: u64, size: usize) {
        self.entries.insert(key, vec![key as u8; size]);
    }
}

/// Work whose memory is freed within the step.
fn parse_batch(step: usize) -> usize {
    let _scope = heapdelta::scope("parse");
    let words: Vec<String> = (0..200).map(|i| format!("word{step}-{i}")).collect();
    words.iter().map(String::len).sum()
}

/// A log that keeps one line per request: slower growth.
fn log_requests(log: &mut Vec<String>, step: usize) {
    let _scope = heapdelta::scope("log");
    for i in 0..20 {
        log.push(format!("step {step} request {i}: ok"));
    }
}

/// Writes `path` with `write`; an error names the file (heapdelta's writers name it themselves).
fn wrote(path: PathBuf, write: impl FnOnce(&Path) -> std::io::Result<()>) -> Result<(), String> {
    write(&path).map_err(|e| {
        let message = e.to_string();
        let named = path.display().to_string();
        match message.starts_with(&named) {
            true => message,
            false => format!("{named}: {message}"),
        }
    })
}

fn run(data: &Path, pictures: &Path) -> Result<(), Box<dyn std::error::Error>> {
    for dir in [data, pictures] {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let mut cache = Cache {
        entries: HashMap::new(),
    };
    let mut log = Vec::new();
    heapdelta::checkpoint("start");
    let mut last_step = None;
    for step in 1..=STEPS {
        parse_batch(step);
        {
            let _scope = heapdelta::scope("cache");
            for k in 0..8 {
                cache.remember((step * 100 + k) as u64, 4096);
            }
        }
        log_requests(&mut log, step);
        let delta = heapdelta::checkpoint(format!("step {step}"));
        println!("{}\n", delta.summary());
        last_step = Some(delta);
    }
    let timeline = heapdelta::timeline();
    let last = timeline
        .checkpoints()
        .last()
        .cloned()
        .ok_or("no checkpoints")?;
    let step = last_step.ok_or("no steps")?;
    let growth = timeline.between("step 1", &format!("step {STEPS}"))?;

    wrote(data.join("timeline.json"), |p| timeline.write_json(p))?;
    wrote(data.join("snapshot.json"), |p| last.write_json(p))?;
    wrote(data.join("snapshot.dhat.json"), |p| last.write_dhat(p))?;
    wrote(data.join("step.dhat.json"), |p| step.write_dhat(p))?;
    wrote(data.join("snapshot.pb.gz"), |p| last.write_pprof(p))?;
    wrote(data.join("growth.pb.gz"), |p| growth.write_pprof(p))?;
    wrote(data.join("live.folded"), |p| {
        std::fs::write(p, last.folded())
    })?;
    wrote(data.join("growth.folded"), |p| {
        std::fs::write(p, growth.folded())
    })?;
    // A flamegraph needs call sites with live bytes: without call-site capture there are none.
    for (name, drawn) in [
        ("live.svg", last.write_flamegraph(pictures.join("live.svg"))),
        (
            "growth.svg",
            growth.write_flamegraph(pictures.join("growth.svg")),
        ),
    ] {
        if let Err(e) = drawn {
            println!("skipped {name}: {e}");
        }
    }
    wrote(pictures.join("timeline.svg"), |p| timeline.write_plot(p))?;
    println!("{timeline}");
    std::hint::black_box((&cache.entries, &log));
    Ok(())
}

fn main() -> ExitCode {
    let mut args = std::env::args_os().skip(1).map(PathBuf::from);
    let data = args
        .next()
        .unwrap_or_else(|| PathBuf::from("heapdelta-reports"));
    let pictures = args.next().unwrap_or_else(|| data.clone());
    match run(&data, &pictures) {
        Ok(()) => {
            println!(
                "wrote the reports to {} and the pictures to {}",
                data.display(),
                pictures.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("write_reports: {e}");
            ExitCode::FAILURE
        }
    }
}
