//! The acceptance test of issue 15: a configurable hostile plugin (`tests/probes/hostile`;
//! the attack chosen by `--param attack=`, the lifecycle call by `--param at=`) driven
//! through `udf-host run` and `udf-host conformance`, each in a process of its own. For
//! every attack in every call:
//!
//! - exit code 2 (a plugin failed);
//! - bounded time: at most twice `--timeout` beyond a well-behaved run's time (counted
//!   twice: starting a process and loading the plugin take longer on a busy machine);
//! - bounded host memory: peak RSS at most `--max-memory-total` beyond a well-behaved
//!   run's, plus a fixed margin;
//! - no half-written or lying output: nothing at all when planning failed, else a complete
//!   directory whose `results.json` says "failed" and names the plugin, whose files are
//!   exactly those listed, whose valid masks cover exactly the merged partitions, and whose
//!   values there are right (the other plugin of the run, `builtin:sumsig`, against a
//!   plain sum); no temporary directory beside it.

use crate::cli_process::{self, Exit};
use std::path::{Path, PathBuf};
use std::time::Duration;
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::plugin;
use udf_host_tests::reference::to_f64;

/// The attacks of the matrix (see the probe's docs).
const ATTACKS: [&str; 9] = ["trap", "loop", "sleep", "poll", "allocate", "oversized", "many", "odd", "misnamed"];
/// The lifecycle calls an attack can be made in (`describe` takes no parameters).
const CALLS: [&str; 9] = [
    "plan",
    "result_buffers",
    "init",
    "preprocess",
    "process",
    "postprocess",
    "export_buffers",
    "merge",
    "get_results",
];
/// `--timeout` of the runs, in seconds.
const TIMEOUT: f64 = 0.5;
/// `--max-memory-total` of the runs: less than the four instances may have together
/// (4 x 64 MiB).
const BUDGET_MIB: u64 = 160;
/// What the host may hold beyond the budget and a well-behaved run: transient copies of
/// what calls return while they are converted, allocator slack.
const MARGIN: u64 = 96 << 20;

/// The limits every run of the matrix gets.
fn limits() -> Vec<String> {
    [
        "--timeout",
        &TIMEOUT.to_string(),
        "--max-memory",
        "64M",
        "--max-memory-total",
        &format!("{BUDGET_MIB}M"),
        "--threads",
        "4",
    ]
    .map(String::from)
    .to_vec()
}

struct Setup {
    dir: tempfile::TempDir,
    input: PathBuf,
    data: Data,
    hostile: String,
}

impl Setup {
    fn new() -> Setup {
        let dir = tempfile::tempdir().unwrap();
        let data = fixtures::mk_random(&[4, 4], &[8, 8], 11);
        let input = dir.path().join("in.npy");
        fixtures::write_npy(&input, &data, Ty::F32);
        Setup { dir, input, data, hostile: plugin("probe_hostile").display().to_string() }
    }

    /// `udf-host run hostile builtin:sumsig` with `attack` in `at`; where the output went.
    fn run(&self, attack: &str, at: &str, name: &str) -> (Exit, PathBuf) {
        let parent = self.dir.path().join(name);
        std::fs::create_dir(&parent).unwrap();
        let out = parent.join("out");
        let mut args: Vec<String> = [
            "run",
            &self.hostile,
            "builtin:sumsig",
            &self.input.display().to_string(),
            "--out",
            &out.display().to_string(),
        ]
        .map(String::from)
        .to_vec();
        args.extend(
            ["-q", "--partitions", "8", "-p", &format!("hostile.attack={attack}"), "-p", &format!("hostile.at={at}")]
                .map(String::from),
        );
        args.extend(limits());
        let exit = cli_process::spawn(&args, &[]).wait();
        (exit, out)
    }

    /// `udf-host conformance hostile` with `attack` in `at`.
    fn conformance(&self, attack: &str, at: &str) -> Exit {
        let mut args: Vec<String> =
            ["conformance", &self.hostile, "-p", &format!("attack={attack}"), "-p", &format!("at={at}")]
                .map(String::from)
                .to_vec();
        args.extend(limits());
        cli_process::spawn(&args, &[]).wait()
    }
}

/// The bounds of a case, from well-behaved runs measured first, and the worst seen.
struct Bounds {
    time: Duration,
    rss: u64,
    worst: std::sync::Mutex<(Duration, u64)>,
}

impl Drop for Bounds {
    fn drop(&mut self) {
        let (time, rss) = *self.worst.lock().unwrap();
        eprintln!(
            "hostile matrix: slowest case {time:?} (bound {:?}), largest peak RSS {} MiB (bound {} MiB)",
            self.time,
            rss >> 20,
            self.rss >> 20
        );
    }
}

impl Bounds {
    /// Check a case's exit; `run` runs it (again: a case that took too long is given
    /// one more try, for a busy machine's sake; a plugin that holds the host does so
    /// every time).
    #[track_caller]
    fn check<T>(&self, case: &str, mut run: impl FnMut(usize) -> (Exit, T)) -> T {
        let (mut exit, mut output) = run(0);
        if exit.elapsed > self.time {
            eprintln!("{case}: took {:?}, more than {:?}; once more", exit.elapsed, self.time);
            (exit, output) = run(1);
        }
        {
            let mut worst = self.worst.lock().unwrap();
            *worst = (worst.0.max(exit.elapsed), worst.1.max(exit.peak_rss));
        }
        assert_eq!(exit.code, Some(2), "{case}: exit code; stderr:\n{}", exit.stderr);
        assert!(exit.elapsed <= self.time, "{case}: took {:?}, more than {:?}", exit.elapsed, self.time);
        assert!(
            exit.peak_rss <= self.rss,
            "{case}: peak RSS {} MiB, more than {} MiB",
            exit.peak_rss >> 20,
            self.rss >> 20
        );
        output
    }
}

/// The bounds: a well-behaved run's time and RSS (the larger of `run` and a short
/// `conformance`), plus twice the timeout and the budget with a margin.
fn bounds(setup: &Setup) -> Bounds {
    let (run, out) = setup.run("none", "", "benign");
    assert_eq!(run.code, Some(0), "{}", run.stderr);
    check_output(setup, &out, true);
    let conformance = cli_process::run(&[
        "conformance",
        &setup.hostile,
        "--check",
        "declarations",
        "--timeout",
        &TIMEOUT.to_string(),
    ]);
    assert_eq!(conformance.code, Some(0), "{}", conformance.stderr);
    let time = 2 * run.elapsed.max(conformance.elapsed) + Duration::from_secs_f64(2.0 * TIMEOUT);
    let rss = run.peak_rss.max(conformance.peak_rss) + (BUDGET_MIB << 20) + MARGIN;
    eprintln!(
        "hostile matrix: well-behaved run {:?} {} MiB, conformance {:?} {} MiB",
        run.elapsed,
        run.peak_rss >> 20,
        conformance.elapsed,
        conformance.peak_rss >> 20
    );
    Bounds { time, rss, worst: Default::default() }
}

/// The output of a run (`complete`: it succeeded): nothing but `out` beside the input,
/// and `out` (if any) complete and truthful.
fn check_output(setup: &Setup, out: &Path, complete: bool) -> Option<serde_json::Value> {
    let parent = out.parent().unwrap();
    let beside: Vec<String> =
        std::fs::read_dir(parent).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    assert!(beside.iter().all(|n| n == "out"), "left beside the output: {beside:?}");
    if !out.exists() {
        return None;
    }
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let failures = summary["failures"].as_array().unwrap();
    if complete {
        assert_eq!(summary["status"], "complete");
        assert!(failures.is_empty());
    } else {
        assert_eq!(summary["status"], "failed", "{summary}");
        assert!(!failures.is_empty());
        assert!(failures.iter().all(|f| f["udf"] == "hostile"), "only the hostile plugin failed: {failures:?}");
    }
    // Exactly the files listed, each readable with the shape it is said to have.
    let mut listed = vec!["results.json".to_owned(), "index.html".to_owned()];
    let merged = summary["partitions"]["merged"].as_u64().unwrap() as usize;
    for udf in summary["udfs"].as_array().unwrap() {
        for b in udf["buffers"].as_array().unwrap() {
            let file = b["file"].as_str().unwrap();
            let array = udf_host::npy::read_array(&out.join(file)).unwrap();
            assert_eq!(serde_json::json!(array.shape()), b["shape"], "{file}");
            listed.push(file.to_owned());
            let valid = match b["valid_file"].as_str() {
                Some(v) => {
                    listed.push(v.to_owned());
                    udf_host::npy::read_array(&out.join(v)).unwrap().to_bools().unwrap()
                }
                None => vec![true; array.len()],
            };
            // Nav buffers of 16 frames in 8 partitions of 2: valid where merged.
            assert_eq!(valid.iter().filter(|&&v| v).count(), 2 * merged, "{file}: valid = merged frames");
            let values = to_f64(&array);
            for (f, _) in valid.iter().enumerate().filter(|(_, v)| **v) {
                let expected = match udf["name"].as_str().unwrap() {
                    "sumsig" => setup.data.frame(f).iter().map(|&v| f64::from(v as f32)).sum::<f64>(),
                    _ => 1.0,
                };
                let close = (values[f] - expected).abs() <= 1e-4 * expected.abs().max(1.0);
                assert!(close, "{file}[{f}] = {}, expected {expected}", values[f]);
            }
        }
    }
    let mut found = Vec::new();
    for entry in walk(out) {
        found.push(entry.strip_prefix(out).unwrap().display().to_string());
    }
    listed.sort();
    found.sort();
    assert_eq!(found, listed, "the files of the output are exactly those results.json lists");
    Some(summary)
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() { files.extend(walk(&path)) } else { files.push(path) }
    }
    files
}

#[test]
fn every_attack_in_every_call_fails_cleanly_in_bounded_time_and_memory() {
    let setup = Setup::new();
    let bounds = bounds(&setup);
    let cases: Vec<(&str, &str)> = ATTACKS.iter().flat_map(|a| CALLS.iter().map(move |c| (*a, *c))).collect();
    // Two at a time: each child is measured on its own (time and RSS per process).
    let next = std::sync::atomic::AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..2 {
            scope.spawn(|| {
                loop {
                    let i = next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    let Some(&(attack, at)) = cases.get(i) else { break };
                    let case = format!("run: {attack} in {at}");
                    let out = bounds.check(&case, |try_| setup.run(attack, at, &format!("case-{i}-{try_}")));
                    let summary = check_output(&setup, &out, false);
                    let planning = at == "plan" || at == "result_buffers";
                    assert_eq!(summary.is_none(), planning, "{case}: output only when processing began");
                    if let Some(summary) = summary {
                        let names: Vec<&str> =
                            summary["udfs"].as_array().unwrap().iter().map(|u| u["name"].as_str().unwrap()).collect();
                        assert!(names.contains(&"sumsig"), "{case}: the other plugin's results are kept: {names:?}");
                    }
                }
            });
        }
    });
}

#[test]
fn the_conformance_kit_fails_every_attack_in_bounded_time_and_memory() {
    let setup = Setup::new();
    let bounds = bounds(&setup);
    // Each attack once, in a call of its own: every attack and every call is covered.
    for (i, attack) in ATTACKS.iter().enumerate() {
        let at = CALLS[(i * 4) % CALLS.len()];
        let stderr = bounds.check(&format!("conformance: {attack} in {at}"), |_| {
            let exit = setup.conformance(attack, at);
            let stderr = exit.stderr.clone();
            (exit, stderr)
        });
        assert!(stderr.contains("conformance check(s) failed"), "{attack} in {at}: {stderr}");
    }
}
