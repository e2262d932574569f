//! `--snapshot-every`: a slow run is watched from another thread while it goes on.

use super::cli::{cli, s};
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};
use udf_host_tests::fixtures::write_npy_f32;
use udf_host_tests::plugin;

/// What a watcher saw in one snapshot.
#[derive(Debug)]
struct Seen {
    snapshot: u64,
    merged: u64,
    valid: Vec<bool>,
    intensity: Vec<f64>,
    grey_pixels: bool,
    final_results_there: bool,
}

/// Read the snapshot `partial` points to, from the directory it resolves to (so both
/// files come from one snapshot). `None` while there is none, or when it was replaced
/// while being read.
fn read_snapshot(out: &Path) -> Option<Seen> {
    // Looked at first: the final results may replace `out` (and its `partial/`) while the
    // snapshot is being read, which is fine; final results already there while a
    // `partial/` still resolves would not be.
    let final_results_there = out.join("results.json").exists();
    let dir = std::fs::canonicalize(out.join("partial")).ok()?;
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).ok()?).ok()?;
    let valid = udf_host::npy::read_array(&dir.join("slow/intensity.valid.npy")).ok()?;
    let intensity = udf_host::npy::read_array(&dir.join("slow/intensity.npy")).ok()?;
    let png = std::fs::read(dir.join("slow/intensity.png")).ok()?;
    let mut reader = png::Decoder::new(std::io::Cursor::new(png)).read_info().ok()?;
    let mut rgb = vec![0; reader.output_buffer_size()?];
    reader.next_frame(&mut rgb).ok()?;
    Some(Seen {
        snapshot: summary["snapshot"].as_u64()?,
        merged: summary["partitions"]["merged"].as_u64()?,
        valid: valid.to_bools()?,
        intensity: udf_host_tests::reference::to_f64(&intensity),
        grey_pixels: rgb.chunks_exact(3).any(|p| p == [128, 128, 128]),
        final_results_there,
    })
}

#[test]
fn a_slow_run_shows_partial_results_and_ends_with_a_complete_directory() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    // 8 x 8 frames of 4 x 4 pixels, frame n all n: sums 16 n.
    let values: Vec<f32> = (0..64).flat_map(|n| [n as f32; 16]).collect();
    write_npy_f32(&input, &[8, 8], &[4, 4], &values);
    let out = dir.path().join("out");
    let args: Vec<String> = [
        "run",
        &s(&plugin("probe_slow")),
        &s(&input),
        "--out",
        &s(&out),
        "--threads",
        "1",
        "--partitions",
        "8",
        "--param",
        // A few hundred milliseconds per partition of 8 frames.
        "spin=25000000",
        "--snapshot-every",
        "0.05",
    ]
    .iter()
    .map(|a| (*a).to_owned())
    .collect();
    let started = Instant::now();
    let run = std::thread::spawn(move || {
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        cli(&refs)
    });

    let mut seen: Vec<Seen> = Vec::new();
    while !run.is_finished() {
        if let Some(now) = read_snapshot(&out)
            && seen.last().is_none_or(|last| last.snapshot != now.snapshot)
        {
            seen.push(now);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    run.join().unwrap().unwrap_or_else(|(code, msg)| panic!("exit {code}: {msg}"));
    let took = started.elapsed();

    // During the run: partial results, their valid mask covering the merged partitions
    // (8 frames each, in order with one thread), the rest grey in the preview, and no
    // final results yet.
    let partial: Vec<&Seen> = seen.iter().filter(|s| s.merged < 8).collect();
    eprintln!("saw {} snapshots ({} partial) in a run of {took:?}", seen.len(), partial.len());
    assert!(!partial.is_empty(), "no partial snapshot seen in {took:?} ({} snapshots)", seen.len());
    for snap in &partial {
        let covered = snap.valid.iter().filter(|&&v| v).count() as u64;
        assert!(covered > 0 && covered < 64, "{snap:?}");
        assert_eq!(covered, snap.merged * 8, "{snap:?}");
        let expected: Vec<bool> = (0..64).map(|n| n < covered).collect();
        assert_eq!(snap.valid, expected, "the merged partitions are the first ones");
        for (n, (&v, &ok)) in snap.intensity.iter().zip(&snap.valid).enumerate() {
            if ok {
                assert_eq!(v, 16.0 * n as f64, "frame {n}");
            }
        }
        assert!(snap.grey_pixels, "not yet merged positions are grey in the preview");
        assert!(!snap.final_results_there, "the final results appear only at the end");
    }
    let numbers: Vec<u64> = seen.iter().map(|s| s.snapshot).collect();
    assert!(numbers.windows(2).all(|w| w[0] < w[1]), "{numbers:?}");

    // After: the complete results, atomically in place; no partial/ and no snapshot left.
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["index.html", "results.json", "slow"]);
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(summary["status"], "complete");
    assert_eq!(summary["partitions"]["merged"], 8);
    assert!(!out.join("slow/intensity.valid.npy").exists(), "every element is valid");
    let intensity = udf_host::npy::read_array(&out.join("slow/intensity.npy")).unwrap();
    let expected: Vec<f64> = (0..64).map(|n| 16.0 * n as f64).collect();
    assert_eq!(udf_host_tests::reference::to_f64(&intensity), expected);
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().map(|e| e.unwrap().file_name()).collect();
    assert_eq!(left.len(), 2, "only the input and the output, no temporary directories: {left:?}");
}

#[test]
fn a_failing_run_replaces_the_snapshots_it_made_with_what_was_merged() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy_f32(&input, &[4, 4], &[2, 2], &[1.0; 64]);
    let out = dir.path().join("out");
    // Partition 0 merges (a snapshot is written), partition 1 traps: the run stops and
    // writes what was merged — the final directory replaces the snapshots.
    let result = cli(&[
        "run",
        &s(&plugin("probe_slow")),
        &s(&plugin("probe_trap")),
        &s(&input),
        "--out",
        &s(&out),
        "--threads",
        "1",
        "--partitions",
        "4",
        "--param",
        "trap.frame=5",
        "--snapshot-every",
        "0.001",
    ]);
    assert!(result.is_err());
    let mut names: Vec<String> =
        std::fs::read_dir(&out).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
    names.sort();
    assert_eq!(names, ["index.html", "results.json", "slow", "trap"], "no partial/ in the written results");
}

#[test]
fn snapshots_replace_each_other_and_are_removed_when_no_results_follow() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy_f32(&input, &[2, 3], &[2, 2], &[2.0; 24]);
    let udf = udf_host::builtins::from_source("builtin:sumsig").unwrap().unwrap();
    let data = udf_host::dataset::open(&input, &Default::default()).unwrap();
    let spec = udf_host::exec::UdfSpec { udf, params: Default::default() };
    let run = udf_host::exec::Run::plan(data, vec![spec], Default::default()).unwrap();
    let summary = udf_host::report::RunSummary::planned(&run, Vec::new(), Default::default());
    let results = run.execute().unwrap();
    let out = dir.path().join("out");
    let mut snapshots = udf_host::output::snapshot::Snapshots::new(&out, Duration::from_secs(1), summary);
    snapshots.write(&results).unwrap();
    assert!(snapshots.made_output_dir());
    assert_eq!(std::fs::read_link(out.join("partial")).unwrap(), Path::new(".partial-1"));
    let first = std::fs::read(out.join("partial/sumsig/intensity.npy")).unwrap();
    snapshots.write(&results).unwrap();
    assert_eq!(std::fs::read_link(out.join("partial")).unwrap(), Path::new(".partial-2"));
    assert!(!out.join(".partial-1").exists(), "the previous snapshot is deleted");
    assert_eq!(std::fs::read(out.join("partial/sumsig/intensity.npy")).unwrap(), first);
    for file in ["results.json", "index.html", "sumsig/intensity.valid.npy", "sumsig/intensity.png"] {
        assert!(out.join("partial").join(file).exists(), "{file}");
    }
    let page = std::fs::read_to_string(out.join("partial/index.html")).unwrap();
    assert!(page.contains("http-equiv=\"refresh\" content=\"1\""), "the live page reloads itself");
    drop(snapshots);
    assert!(!out.exists(), "the snapshots made the output directory and remove it with themselves");
}
