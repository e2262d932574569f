//! The command line with built-ins: `builtin:NAME` in `run` (mixed with a plugin),
//! `list`, `inspect builtin:NAME`.

use udf_host::cli::{execute, exit};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::plugin;
use udf_host_tests::reference::{assert_close, to_f64};

fn cli(args: &[&str]) -> Result<(), (u8, String)> {
    let mut all = vec!["udf-host".to_owned()];
    all.extend(args.iter().map(|s| (*s).to_owned()));
    if args.first() == Some(&"run") {
        let cache = udf_host_tests::test_cache_dir();
        all.extend(["--cache-dir".to_owned(), cache.display().to_string(), "-q".to_owned()]);
    }
    execute(all).map_err(|f| (f.code, format!("{:#}", f.error)))
}

/// `data` written as `dir/in.npy` of `ty`; its path.
fn write_input(dir: &tempfile::TempDir, data: &Data, ty: Ty) -> std::path::PathBuf {
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, data, ty);
    input
}

#[test]
fn run_a_ring_detector_without_masks_next_to_a_plugin() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[6, 5], &[16, 16], 5);
    let input = write_input(&dir, &data, Ty::U16);
    let out = dir.path().join("out");
    let s = |p: &std::path::Path| p.display().to_string();
    cli(&[
        "run",
        "builtin:ring",
        &s(&plugin("sumsig")),
        &s(&input),
        "--param",
        "ri=3",
        "--param",
        "ro=6",
        "--out",
        &s(&out),
    ])
    .unwrap();
    let ring = udf_host::npy::read_array(&out.join("ring/intensity.npy")).unwrap();
    assert_eq!(ring.shape(), &[6, 5]);
    let stored = data.rounded(Ty::U16);
    let expected: Vec<f64> = (0..30)
        .map(|i| {
            stored
                .frame(i)
                .iter()
                .enumerate()
                .filter(|(p, _)| {
                    let d2 = ((p / 16) as f64 - 8.0).powi(2) + ((p % 16) as f64 - 8.0).powi(2);
                    9.0 < d2 && d2 <= 36.0
                })
                .map(|(_, v)| v)
                .sum()
        })
        .collect();
    assert_close(&to_f64(&ring), &expected, 1e-5, "ring");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    assert_eq!(summary["udfs"][0]["name"], "ring");
    assert_eq!(summary["plugins"][0]["source"], "builtin:ring");
    assert_eq!(summary["udfs"][1]["name"], "sumsig");
}

#[test]
fn unknown_builtins_and_missing_params_are_user_errors() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(&dir, &fixtures::mk_random(&[4], &[8, 8], 5), Ty::F32);
    let out = dir.path().join("out").display().to_string();
    let (code, text) = cli(&["run", "builtin:rings", &input.display().to_string(), "--out", &out]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(text.contains("'rings'") && text.contains("ring"), "{text}");
    let (code, text) = cli(&["run", "builtin:ring", &input.display().to_string(), "--out", &out]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(text.contains("'ri'"), "{text}");
}

#[test]
fn options_may_come_between_the_plugins_and_the_dataset() {
    let dir = tempfile::tempdir().unwrap();
    let input = write_input(&dir, &fixtures::mk_random(&[3, 4], &[16, 16], 8), Ty::U16);
    let out = dir.path().join("out").display().to_string();
    let input = input.display().to_string();
    // The spelling of the built-ins issue: options between the plugin and the dataset.
    cli(&["run", "builtin:ring", "--param", "ri=3", "--param", "ro=6", &input, "--out", &out]).unwrap();
    let ring = udf_host::npy::read_array(&std::path::Path::new(&out).join("ring/intensity.npy")).unwrap();
    assert_eq!(ring.shape(), &[3, 4]);
    // One file alone is a plugin without a dataset (or the other way round).
    let (code, text) = cli(&["run", &input, "--out", &out, "--force"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(text.contains("at least one plugin") && text.contains("PLUGIN... DATA"), "{text}");
}

#[test]
fn list_and_inspect_know_every_builtin() {
    cli(&["list"]).unwrap();
    cli(&["list", "--json"]).unwrap();
    for name in udf_host::builtins::names() {
        cli(&["inspect", &format!("builtin:{name}")]).unwrap();
    }
    let (code, text) = cli(&["inspect", "builtin:nope"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(text.contains("'nope'"), "{text}");
}
