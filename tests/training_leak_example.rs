//! The main example shows the leak: the leaking function as the top growing site, growing at
//! every step, and `Vec<f32>` as the top growing type; with `--fixed`, nothing grows. It is also
//! the program the `HEAPDELTA` environment variable is tried on.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `cargo test` builds the examples next to the test binaries' `deps` directory.
fn example() -> PathBuf {
    let me = std::env::current_exe().expect("test binary path");
    let dir = me
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target directory");
    dir.join("examples")
        .join(format!("training_leak{}", std::env::consts::EXE_SUFFIX))
}

/// A path in the temporary directory for this test process, `heapdelta-{pid}-{name}`, with any
/// file an earlier run left there removed.
fn fresh_temp(name: &str) -> PathBuf {
    let path = std::env::temp_dir().join(format!("heapdelta-{}-{name}", std::process::id()));
    let _ = std::fs::remove_file(&path);
    path
}

fn run(args: &[&str]) -> String {
    run_with_env(args, "").0
}

/// Runs the example with `HEAPDELTA` set to `config`: (stdout, stderr).
fn run_with_env(args: &[&str], config: &str) -> (String, String) {
    let out = Command::new(example())
        .args(args)
        .env("HEAPDELTA", config)
        .output()
        .expect("the example runs");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_leaking_run_names_the_leaking_function_and_type_as_growing_at_every_step() {
    let out = run(&["--steps", "6"]);
    let mut lines = out
        .lines()
        .skip_while(|l| !l.starts_with("growing at every step"));
    let header = lines.next().unwrap_or_default();
    assert!(header.contains("last 5 steps"), "{out}");
    let top = lines.next().unwrap_or_default();
    assert!(
        top.contains("Node::forward (examples/training_leak.rs:"),
        "{out}"
    );
    assert!(top.contains("[Vec<f32>]"), "{out}");
    let types = out
        .lines()
        .find(|l| l.trim_start().starts_with("types:"))
        .unwrap_or_default();
    assert!(
        types
            .trim_start()
            .starts_with("types: Vec<f32> +133.2 KiB (+341 blk)"),
        "{types}"
    );
}

#[test]
fn the_fixed_run_reports_nothing_growing() {
    let out = run(&["--fixed", "--steps", "6"]);
    assert!(out.contains("growing at every step: none"), "{out}");
    let last_step = out
        .lines()
        .rfind(|l| l.starts_with("| step 6 |"))
        .unwrap_or_default();
    assert!(last_step.contains("added +0 B"), "{last_step}");
}

#[test]
fn a_bad_argument_is_one_clear_error() {
    let out = Command::new(example())
        .arg("--stpes")
        .output()
        .expect("the example runs");
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown argument \"--stpes\""));
}

#[test]
fn heapdelta_report_writes_the_timeline_and_a_final_snapshot_at_exit() {
    let path = fresh_temp("report.json");
    run_with_env(&["--steps", "3"], &format!("report={}", path.display()));
    let timeline =
        heapdelta::Timeline::read_json(&path).expect("the exit report is a timeline file");
    let labels: Vec<&str> = timeline
        .checkpoints()
        .iter()
        .filter_map(|c| c.label())
        .collect();
    assert_eq!(labels, ["start", "step 1", "step 2", "step 3", "exit"]);
    // The exit snapshot, taken once `main` has dropped everything, ends no step.
    let growing = timeline.growing();
    assert!(
        growing
            .first()
            .is_some_and(|g| g.site.to_string().contains("Node::forward")),
        "{growing:?}"
    );
    let _ = std::fs::remove_file(&path);
}

#[test]
fn a_report_path_that_cannot_be_written_is_said_at_start() {
    let (_, err) = run_with_env(
        &["--steps", "1"],
        "report=/nonexistent-heapdelta-dir/report.json",
    );
    let first = err.lines().next().unwrap_or_default();
    assert!(
        first.starts_with("HEAPDELTA: report=/nonexistent-heapdelta-dir/report.json: "),
        "{err}"
    );
}

#[test]
fn heapdelta_every_takes_checkpoints_on_its_own() {
    let path = fresh_temp("every.json");
    // `--steps 2000` runs long enough for a few ticks of the shortest interval, 0.1 s.
    run_with_env(
        &["--steps", "2000", "--fixed"],
        &format!("every=0.1,report={}", path.display()),
    );
    let timeline =
        heapdelta::Timeline::read_json(&path).expect("the exit report is a timeline file");
    let automatic = timeline
        .checkpoints()
        .iter()
        .filter(|c| c.label().is_some_and(|l| l.ends_with('s')))
        .count();
    assert!(
        automatic >= 1,
        "{:?}",
        timeline
            .checkpoints()
            .iter()
            .map(|c| c.label())
            .collect::<Vec<_>>()
    );
    // Each is labelled with the tick it was due at, on the clock of the checkpoints' `seconds`:
    // distinct tenths, in order, none taken before its time (a millisecond aside).
    let file: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).expect("JSON");
    let ticks: Vec<(f64, f64)> = file["checkpoints"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|c| {
            let label = c["label"].as_str()?.strip_suffix('s')?;
            Some((label.parse().ok()?, c["seconds"].as_f64()?))
        })
        .collect();
    for (due, taken) in &ticks {
        assert!(*taken >= due - 0.002, "{ticks:?}");
        assert!(
            ((due * 10.0).round() - due * 10.0).abs() < 1e-9,
            "{ticks:?}"
        );
    }
    assert!(ticks.windows(2).all(|w| w[0].0 < w[1].0), "{ticks:?}");
    let _ = std::fs::remove_file(&path);
}

/// Starts the example for long enough to be killed, with `HEAPDELTA` set to `config`, its
/// standard output to `stdout`.
fn start_long_run_to(config: &str, stdout: Stdio) -> Child {
    Command::new(example())
        .args(["--steps", "200000", "--fixed"])
        .env("HEAPDELTA", config)
        .stdout(stdout)
        .stderr(Stdio::piped())
        .spawn()
        .expect("the example starts")
}

/// `start_long_run_to` with standard output discarded.
fn start_long_run(config: &str) -> Child {
    start_long_run_to(config, Stdio::null())
}

/// Whether `ready` held within 30 s, asked every 10 ms.
fn wait_until(mut ready: impl FnMut() -> bool) -> bool {
    let start = Instant::now();
    while !ready() {
        if start.elapsed() > Duration::from_secs(30) {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    true
}

/// Kills `child`, which runs no exit handler, and returns its stderr.
fn kill(mut child: Child) -> String {
    child.kill().expect("the example is killed");
    let out = child.wait_with_output().expect("the example is reaped");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The names the system gives `child`'s threads.
#[cfg(target_os = "linux")]
fn thread_names(child: &Child) -> Vec<String> {
    std::fs::read_dir(format!("/proc/{}/task", child.id()))
        .map(|dir| {
            dir.filter_map(|t| std::fs::read_to_string(t.ok()?.path().join("comm")).ok())
                .map(|n| n.trim().to_string())
                .collect()
        })
        .unwrap_or_default()
}

/// Waits until `child`'s clock thread (`every=`) runs, then for a few of its ticks.
#[cfg(target_os = "linux")]
fn after_some_ticks(child: &Child) {
    let clock = || thread_names(child).iter().any(|n| n == "heapdelta-clock");
    assert!(
        wait_until(clock),
        "no clock thread: {:?}",
        thread_names(child)
    );
    std::thread::sleep(Duration::from_millis(500));
}

#[test]
fn heapdelta_rewrite_leaves_the_report_of_a_killed_process() {
    let path = fresh_temp("killed.json");
    let child = start_long_run(&format!("every=0.1,report={},rewrite=on", path.display()));
    // The report is renamed into place whole, after the first tick: once it exists, SIGKILL.
    wait_until(|| path.exists());
    kill(child);
    let timeline = heapdelta::Timeline::read_json(&path).expect("a whole timeline file");
    let labels: Vec<_> = timeline.checkpoints().iter().map(|c| c.label()).collect();
    assert!(
        labels.iter().any(|l| l.is_some_and(|l| l.ends_with('s'))),
        "{labels:?}"
    );
    assert!(!labels.contains(&Some("exit")), "{labels:?}");
    let _ = std::fs::remove_file(&path);
}

#[cfg(target_os = "linux")]
#[test]
fn heapdelta_rewrite_never_writes_a_hard_linked_report_in_place() {
    let (path, other) = (fresh_temp("linked.json"), fresh_temp("linked.other"));
    std::fs::write(&path, "before").unwrap();
    std::fs::hard_link(&path, &other).unwrap();
    // A reader of a file rewritten in place can meet it empty or half written: it is left alone
    // until the exit report.
    let child = start_long_run(&format!("every=0.1,report={},rewrite=on", path.display()));
    after_some_ticks(&child);
    let stderr = kill(child);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "before",
        "{stderr}"
    );
    // Every tick tries again, and the problem is said once.
    assert_eq!(
        stderr.matches("cannot be replaced whole").count(),
        1,
        "{stderr}"
    );
    let _ = (std::fs::remove_file(&path), std::fs::remove_file(&other));
}

#[test]
fn heapdelta_rewrite_replaces_the_file_a_linked_report_names() {
    let (target, link) = (fresh_temp("target.json"), fresh_temp("link.json"));
    std::fs::write(&target, "{}").unwrap();
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let child = start_long_run(&format!("every=0.1,report={},rewrite=on", link.display()));
    wait_until(|| std::fs::read(&target).unwrap().len() > 2);
    kill(child);
    assert!(heapdelta::Timeline::read_json(&link).is_ok());
    let link_kept = std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink();
    assert!(link_kept);
    let _ = (std::fs::remove_file(&target), std::fs::remove_file(&link));
}

#[test]
fn heapdelta_rewrite_makes_the_file_a_link_to_no_file_names() {
    let dir = fresh_temp("dangling");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("sub")).unwrap();
    let link = dir.join("report.json");
    // Relative, to a file that does not exist yet.
    std::os::unix::fs::symlink("sub/target.json", &link).unwrap();
    let child = start_long_run(&format!("every=0.1,report={},rewrite=on", link.display()));
    let target = dir.join("sub/target.json");
    wait_until(|| target.exists());
    kill(child);
    assert!(heapdelta::Timeline::read_json(&target).is_ok());
    let _ = std::fs::remove_dir_all(&dir);
}

#[cfg(target_os = "linux")]
#[test]
fn heapdelta_rewrite_to_standard_output_never_replaces_the_file_it_is_redirected_to() {
    use std::os::unix::fs::MetadataExt;
    let path = fresh_temp("stdout.txt");
    let out = std::fs::File::create(&path).unwrap();
    let inode = std::fs::metadata(&path).unwrap().ino();
    let child = start_long_run_to("every=0.1,report=/dev/stdout,rewrite=on", out.into());
    after_some_ticks(&child);
    kill(child);
    assert_eq!(std::fs::metadata(&path).unwrap().ino(), inode);
    let _ = std::fs::remove_file(&path);
}

#[cfg(target_os = "linux")]
#[test]
fn heapdelta_every_with_a_report_but_no_rewrite_writes_it_at_exit_only() {
    let path = fresh_temp("no-rewrite.json");
    let child = start_long_run(&format!("every=0.1,report={}", path.display()));
    after_some_ticks(&child);
    kill(child);
    assert!(!path.exists());
}

#[cfg(target_os = "linux")]
#[test]
fn heapdeltas_own_threads_are_named_for_the_system() {
    let child = start_long_run("every=0.1");
    let named = wait_until(|| thread_names(&child).iter().any(|n| n == "heapdelta-clock"));
    let names = thread_names(&child);
    kill(child);
    assert!(named, "{names:?}");
}

#[test]
fn heapdelta_keep_holds_the_first_and_the_latest_checkpoints() {
    let path = fresh_temp("keep.json");
    let (out, _) = run_with_env(
        &["--steps", "6"],
        &format!("keep=3,report={}", path.display()),
    );
    let timeline = heapdelta::Timeline::read_json(&path).expect("the exit report");
    let labels: Vec<_> = timeline.checkpoints().iter().map(|c| c.label()).collect();
    assert_eq!(
        labels,
        [Some("start"), Some("step 5"), Some("step 6"), Some("exit")]
    );
    // The example's table from step 1 asks for a checkpoint no longer kept, and says so.
    assert!(out.contains("\"step 1\""), "{out}");
    let _ = std::fs::remove_file(&path);
}

#[test]
fn heapdelta_sites_off_turns_call_sites_off() {
    let (out, _) = run_with_env(&["--steps", "6"], "sites=off");
    // The leak still shows in the totals, and the detector says why it names no site.
    assert!(
        out.contains(
            "growing at every step: no site, but live bytes rose in each of the last 5 steps"
        ),
        "{out}"
    );
    assert!(out.contains("call sites off"), "{out}");
    assert!(!out.contains("Node::forward"), "{out}");
}

#[test]
fn heapdelta_seed_draws_another_sample_and_the_same_seed_the_same_one() {
    let sampled =
        |seed: &str| run_with_env(&["--steps", "6"], &format!("sites=sampled:65536{seed}")).0;
    let (unseeded, zero) = (sampled(""), sampled(",seed=0"));
    assert_eq!(unseeded, zero, "seed 0 is the default");
    let (one, again) = (sampled(",seed=1"), sampled(",seed=1"));
    assert_eq!(one, again, "a seed repeats its sample");
    assert_ne!(one, zero, "another seed draws another sample");
}

#[test]
fn a_malformed_heapdelta_value_is_one_line_naming_the_key_and_defaults_are_kept() {
    let (out, err) = run_with_env(&["--steps", "6"], "depth=lots");
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(
        lines[0].contains("depth") && lines[0].contains("lots"),
        "{err}"
    );
    assert!(
        out.contains("Node::forward (examples/training_leak.rs:"),
        "call sites still on: {out}"
    );
}
