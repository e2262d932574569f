//! Ctrl-C (SIGINT) while results are being written, and a second one (issue 15, item
//! 7): the first lets the writing finish; the second exits at once and leaves no
//! temporary directory, snapshot or half-written output behind.

use crate::cli_process::{self, Child};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};
use udf_host_tests::fixture_formats::mib::{self, MibKind, MibSet};
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::plugin;
use udf_host_tests::reference::{sum_frames, to_f64};

const PAUSE: &str = "UDF_HOST_TEST_PAUSE_BEFORE_COMMIT";

fn s(p: &Path) -> String {
    p.display().to_string()
}

fn sigint(child: &Child) {
    // SAFETY: sending a signal to our own child process.
    let sent = unsafe { libc::kill(child.pid() as libc::pid_t, libc::SIGINT) };
    assert_eq!(sent, 0, "kill: {}", std::io::Error::last_os_error());
}

/// Wait until `path` exists (the child got there), at most a minute.
fn wait_for(path: &Path) {
    let started = Instant::now();
    while !path.exists() {
        assert!(started.elapsed() < Duration::from_secs(60), "{} never appeared", path.display());
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The entries of `dir` whose names start with `.` (temporary directories, snapshots).
fn hidden(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.file_name().unwrap().to_string_lossy().starts_with('.'))
        .collect()
}

/// A run of `sum` that stops with its results staged, waiting for the marker to go.
fn paused_run(dir: &Path, extra: &[&str]) -> (Child, PathBuf, PathBuf, fixtures::Data) {
    let data = fixtures::mk_random(&[6], &[5, 4], 3);
    let input = dir.join("in.npy");
    fixtures::write_npy(&input, &data, Ty::F32);
    let out = dir.join("out");
    let marker = dir.join("marker");
    let mut args: Vec<String> =
        ["run", &s(&plugin("sum")), &s(&input), "--out", &s(&out), "-q"].map(String::from).to_vec();
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    let child = cli_process::spawn(&args, &[(PAUSE, &marker)]);
    wait_for(&marker);
    (child, out, marker, data)
}

#[test]
fn a_ctrl_c_while_writing_lets_the_writing_finish() {
    let dir = tempfile::tempdir().unwrap();
    let (child, out, marker, data) = paused_run(dir.path(), &[]);
    assert_eq!(hidden(dir.path()).len(), 1, "the results are staged in a temporary directory");
    sigint(&child);
    std::thread::sleep(Duration::from_millis(300));
    std::fs::remove_file(&marker).unwrap();
    let exit = child.wait();
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
    assert!(exit.stderr.contains("finishing writing the results"), "{}", exit.stderr);
    let sum = udf_host::npy::read_array(&out.join("sum/intensity.npy")).unwrap();
    assert_eq!(to_f64(&sum), sum_frames(&data, None));
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "complete");
    assert!(hidden(dir.path()).is_empty(), "no temporary directory left: {:?}", hidden(dir.path()));
}

#[test]
fn a_second_ctrl_c_while_writing_removes_the_staged_results_and_keeps_the_old_ones() {
    let dir = tempfile::tempdir().unwrap();
    let old = dir.path().join("out");
    std::fs::create_dir(&old).unwrap();
    std::fs::write(old.join("precious.txt"), "the results of last week").unwrap();
    let (child, out, _marker, _) = paused_run(dir.path(), &["--force"]);
    sigint(&child);
    std::thread::sleep(Duration::from_millis(300));
    sigint(&child);
    let exit = child.wait();
    assert_eq!(exit.code, Some(130), "{}", exit.stderr);
    assert!(hidden(dir.path()).is_empty(), "no temporary directory left: {:?}", hidden(dir.path()));
    assert_eq!(std::fs::read_to_string(out.join("precious.txt")).unwrap(), "the results of last week");
}

#[test]
fn a_second_ctrl_c_removes_the_snapshots_of_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &fixtures::mk_random(&[64], &[4, 4], 3), Ty::F32);
    let out = dir.path().join("out");
    // A slow plugin (each frame spins) with a snapshot every 50 ms; one thread.
    let args: Vec<String> = [
        "run",
        &s(&plugin("probe_slow")),
        &s(&input),
        "--out",
        &s(&out),
        "-q",
        "--param",
        "spin=20000000",
        "--partitions",
        "32",
        "--threads",
        "1",
        "--snapshot-every",
        "0.05",
    ]
    .map(String::from)
    .to_vec();
    let marker = dir.path().join("marker");
    let child = cli_process::spawn(&args, &[(PAUSE, &marker)]);
    wait_for(&out.join("partial/results.json"));
    // The first stops the run; its results are staged (and wait there); the second quits.
    sigint(&child);
    wait_for(&marker);
    sigint(&child);
    let exit = child.wait();
    assert_eq!(exit.code, Some(130), "{}", exit.stderr);
    assert!(
        !out.exists(),
        "the snapshots made --out; it is gone with them: {:?}",
        std::fs::read_dir(&out).map(|d| d.count())
    );
    assert!(hidden(dir.path()).is_empty(), "{:?}", hidden(dir.path()));
}

#[test]
fn a_ctrl_c_stops_the_simulator_without_claiming_to_write_results() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4], &[8, 8], 5);
    let file = &mib::write_mib(dir.path(), "scan", &data, MibSet::new(MibKind::U16))[0];
    let child = cli_process::spawn(&["simulate".into(), "merlin".into(), s(file), "--port".into(), "0".into()], &[]);
    let started = Instant::now();
    while !child.stderr_so_far().contains("serving") {
        assert!(started.elapsed() < Duration::from_secs(60), "the simulator never started: {}", child.stderr_so_far());
        std::thread::sleep(Duration::from_millis(10));
    }
    sigint(&child);
    let exit = child.wait();
    assert_eq!(exit.code, Some(0), "{}", exit.stderr);
    assert!(exit.stderr.contains("interrupted: stopping the simulator"), "{}", exit.stderr);
    assert!(!exit.stderr.contains("merged"), "a simulator merges nothing: {}", exit.stderr);
}
