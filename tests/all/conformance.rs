//! The conformance kit (`udf_host::conformance`): every reference plugin in `plugins/`
//! passes; each deliberately broken probe (`tests/probes/broken_*`) fails the check
//! made for it; the committed vectors (`tests/vectors/`) pass with the Rust plugins
//! and catch a wrong expected value; the CLI's exit codes and JSON report.

use std::path::{Path, PathBuf};
use udf_host::cli::{execute, exit};
use udf_host::conformance::{self, Config, Status, Tolerance};
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::{load, plugin};

/// How each reference plugin is checked: the parameters it needs to run (arrays shaped
/// like the default synthetic frames, 16 × 16) and, for plugins that accumulate in float32
/// as their LiberTEM counterparts do, a tolerance that allows float32 rounding to depend
/// on the tile shape (`com` sums float32 moments tile by tile; its float64 field and
/// derived quantities inherit that rounding).
pub(crate) fn config_for(name: &str) -> Config {
    let array = |shape: &[usize], values: Vec<f64>| {
        ParamValue::Array(std::sync::Arc::new(udf_host::array::NdArray::from_vec(shape, values).expect("shape")))
    };
    let params = match name {
        "sum" => udf_host_tests::params(&[("dtype", ParamValue::Text("float32".into()))]),
        "masks" => {
            // Two masks: a disk and a gradient.
            let disk =
                (0..256).map(|i| f64::from(u8::from(((i / 16) as f64 - 8.0).hypot((i % 16) as f64 - 8.0) < 5.0)));
            let ramp = (0..256).map(|i| (i % 16) as f64 / 16.0);
            udf_host_tests::params(&[("masks", array(&[2, 16, 16], disk.chain(ramp).collect()))])
        }
        "fem" => udf_host_tests::params(&[
            ("center", array(&[2], vec![8.0, 8.0])),
            ("rad_in", ParamValue::Float(2.0)),
            ("rad_out", ParamValue::Float(6.0)),
        ]),
        "crystallinity" => {
            udf_host_tests::params(&[("rad_in", ParamValue::Float(1.0)), ("rad_out", ParamValue::Float(5.0))])
        }
        _ => Params::default(),
    };
    Config { params, ..Config::default() }
}

fn reference_plugins() -> Vec<&'static str> {
    env!("UDF_REFERENCE_PLUGIN_NAMES").split(',').filter(|n| !n.is_empty()).collect()
}

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("vectors")
}

#[test]
fn every_reference_plugin_conforms() {
    let names = reference_plugins();
    assert!(names.contains(&"sum") && names.contains(&"sumsig"), "plugins found: {names:?}");
    let mut failures = Vec::new();
    for name in names {
        let report = conformance::check_plugin(load(name), &config_for(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        if !report.passed {
            failures.push(format!("{name} does not conform:\n{}", report.to_text(false)));
            continue;
        }
        // The core groups ran and found something to check. (com needs a 2-D scan, so
        // the ROI's frames alone, a flat scan, cannot be compared with.)
        for id in ["run.baseline", "invariance.partitions", "roi.subset", "determinism.repeat", "robustness.nonfinite"]
        {
            assert_eq!(report.check(id).map(|c| c.status), Some(Status::Pass), "{name}: {id}");
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

/// Run the suite on a broken probe, check that each of `expected` is among the
/// failures, and return the report.
fn assert_caught(probe: &str, expected: &[&str]) -> conformance::Report {
    let report = conformance::check_plugin(load(probe), &Config::default()).unwrap_or_else(|e| panic!("{e}"));
    for id in expected {
        let check = report.check(id).unwrap_or_else(|| panic!("{probe}: no check {id}"));
        assert_eq!(check.status, Status::Fail, "{probe} was not caught by {id}:\n{}", report.to_text(true));
        let failed = check.evidence.iter().find(|e| e.status == Status::Fail).expect("failing evidence");
        assert!(!failed.message.is_empty() && !failed.variant.is_empty());
    }
    assert!(!report.passed);
    println!("{probe}: fails {:?}", report.failed());
    report
}

#[test]
fn catches_a_wrong_merge_for_odd_partition_counts() {
    assert_caught("broken_odd_merge", &["invariance.partitions"]);
}

#[test]
fn catches_an_order_dependent_merge() {
    let report = assert_caught("broken_order_merge", &["invariance.merge_order", "merge.order"]);
    // Partition results merged in reverse order give another "last frame".
    let order = report.check("merge.order").unwrap();
    assert!(order.evidence.iter().any(|e| e.variant.starts_with("reversed") && e.status == Status::Fail));
}

#[test]
fn catches_a_frame_skipped_at_tile_borders() {
    assert_caught("broken_tile_border", &["invariance.tiles"]);
}

#[test]
fn catches_an_undeclared_buffer() {
    let report = assert_caught("broken_undeclared", &["declarations.buffers"]);
    let check = report.check("declarations.buffers").unwrap();
    assert!(check.evidence[0].message.contains("undeclared buffer 'debug'"), "{:?}", check.evidence);
}

#[test]
fn catches_a_private_buffer_returned() {
    let report = assert_caught("broken_private_result", &["declarations.buffers"]);
    let check = report.check("declarations.buffers").unwrap();
    assert!(check.evidence[0].message.contains("private buffer 'pixels'"), "{:?}", check.evidence);
}

#[test]
fn catches_nondeterministic_output_and_nothing_else() {
    let report = conformance::check_plugin(load("broken_nondeterministic"), &Config::default()).unwrap();
    // One unit in the last place: within the invariance tolerance, not bit-identical.
    assert_eq!(report.failed(), vec!["determinism.repeat"], "{}", report.to_text(false));
    let e = &report.check("determinism.repeat").unwrap().evidence[0];
    assert!(e.message.contains("bit for bit"), "{e:?}");
    assert!(e.first_index.is_some() && e.expected.is_some() && e.actual.is_some());
}

#[test]
fn catches_memory_growing_per_tile() {
    let report = assert_caught("broken_leak", &["resources.memory_growth"]);
    assert_eq!(report.failed(), vec!["resources.memory_growth"], "{}", report.to_text(false));
}

#[test]
fn catches_a_trap_on_nan() {
    let report = conformance::check_plugin(load("broken_nan_trap"), &Config::default()).unwrap();
    assert_eq!(report.failed(), vec!["robustness.nonfinite"], "{}", report.to_text(false));
    let e = &report.check("robustness.nonfinite").unwrap().evidence[0];
    assert!(e.message.contains("trapped"), "{e:?}");
}

#[test]
fn a_tolerance_of_zero_is_stated_and_applied() {
    // Float sums over other partitionings differ in the last bits; with rtol 0 and
    // atol 0 the kit must report them (the tolerance is what the report says).
    let tolerance = Tolerance::fixed(0.0, 0.0);
    let config = Config {
        params: config_for("sum").params,
        tolerance,
        groups: Some(vec![conformance::Group::Invariance]),
        ..Config::default()
    };
    let report = conformance::check_plugin(load("sum"), &config).unwrap();
    assert_eq!(report.tolerance, Some(tolerance));
    let partitions = report.check("invariance.partitions").unwrap();
    assert_eq!(partitions.status, Status::Fail, "{}", report.to_text(true));
    // Only the uniform float data differs; the 0/1 data sums exactly.
    assert!(partitions.evidence.iter().filter(|e| e.status == Status::Fail).all(|e| e.variant.starts_with("float")));
}

#[test]
fn committed_vectors_pass_with_the_rust_plugins() {
    let udfs: Vec<_> = reference_plugins().into_iter().map(load).collect();
    let report = conformance::check_vectors(&vectors_dir(), &udfs, 2, None).unwrap();
    assert!(report.passed, "{}", report.to_text(false));
    let ran = report.checks.iter().filter(|c| c.status == Status::Pass).count();
    assert!(ran >= 10, "only {ran} vector cases ran:\n{}", report.to_text(false));
    for plugin in ["sum", "sumsig"] {
        assert!(
            report.checks.iter().any(|c| c.id.starts_with(&format!("vectors.{plugin}_")) && c.status == Status::Pass)
        );
    }
}

#[test]
fn vectors_catch_a_wrong_expected_value() {
    // Copy one case and its dataset, change one expected value: the case must fail
    // at that element.
    let dir = tempfile::tempdir().unwrap();
    let src = vectors_dir();
    std::fs::create_dir_all(dir.path().join("cases/sum_random_f32")).unwrap();
    std::fs::create_dir_all(dir.path().join("datasets")).unwrap();
    for f in ["case.json", "intensity.npy"] {
        std::fs::copy(src.join("cases/sum_random_f32").join(f), dir.path().join("cases/sum_random_f32").join(f))
            .unwrap();
    }
    std::fs::copy(src.join("datasets/random_f32.npy"), dir.path().join("datasets/random_f32.npy")).unwrap();
    let path = dir.path().join("cases/sum_random_f32/intensity.npy");
    let mut expected = udf_host::npy::read_array(&path).unwrap();
    expected.as_mut_slice::<f32>().unwrap()[9] += 1.0;
    let mut file = std::fs::File::create(&path).unwrap();
    udf_host::npy::write_array(&mut file, &expected).unwrap();
    drop(file);
    let report = conformance::check_vectors(dir.path(), &[load("sum")], 2, None).unwrap();
    let check = report.check("vectors.sum_random_f32").unwrap();
    assert_eq!(check.status, Status::Fail);
    let e = check.evidence.iter().find(|e| e.status == Status::Fail).unwrap();
    assert_eq!(e.first_index, Some(vec![1, 2]), "{e:?}");
    assert_eq!(e.mismatches, Some(1));
}

fn cli(args: &[&str]) -> Result<(), (u8, String)> {
    let mut all = vec!["udf-host".to_owned(), "conformance".to_owned()];
    all.extend(args.iter().map(|s| (*s).to_owned()));
    all.extend(["--cache-dir".to_owned(), udf_host_tests::test_cache_dir().display().to_string()]);
    execute(all).map_err(|f| (f.code, format!("{:#}", f.error)))
}

#[test]
fn cli_exit_codes_and_json_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.json");
    let r = report.display().to_string();
    let sumsig = plugin("sumsig").display().to_string();
    cli(&[&sumsig, "--check", "determinism,declarations", "--report", &r, "--nav-shape", "3,4", "--sig-shape", "5,6"])
        .unwrap();
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["format"], "udf-host-conformance/2");
    assert_eq!(json["passed"], true);
    assert_eq!(json["plugins"][0]["name"], "sumsig");
    assert_eq!(json["datasets"][0]["nav_shape"], serde_json::json!([3, 4]));
    assert_eq!(json["tolerance"]["rtol32"], 1e-5);
    let ids: Vec<&str> = json["checks"].as_array().unwrap().iter().map(|c| c["id"].as_str().unwrap()).collect();
    assert_eq!(ids, vec!["run.baseline", "declarations.buffers", "declarations.pure_results", "determinism.repeat"]);
    assert_eq!(json["checks"][3]["status"], "pass");
    assert_eq!(json["checks"][2]["status"], "n/a");
    assert!(json["checks"][3]["evidence"][0]["variant"].is_string());
    assert_eq!(json["counts"]["n/a"], 1);

    let broken = plugin("broken_nondeterministic").display().to_string();
    let (code, message) = cli(&[&broken, "--check", "determinism", "--json", "--report", &r]).unwrap_err();
    assert_eq!(code, exit::PLUGIN_FAILURE, "{message}");
    assert!(message.contains("determinism.repeat"), "{message}");
    let json: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(json["passed"], false);
    assert_eq!(json["counts"]["fail"], 1);

    let (code, message) = cli(&[&sumsig, "--check", "nonsense"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(message.contains("not a check group"), "{message}");
    let (code, message) = cli(&[&sumsig, &broken]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(message.contains("one plugin"), "{message}");
    let vectors = vectors_dir().display().to_string();
    let sum = plugin("sum").display().to_string();
    cli(&[&sum, &sumsig, "--vectors", &vectors]).unwrap();
}

#[test]
fn cli_checks_a_real_dataset_and_missing_params_are_user_errors() {
    let dir = tempfile::tempdir().unwrap();
    let data = udf_host_tests::fixtures::mk_random(&[4, 3], &[6, 5], 3);
    let path = dir.path().join("data.npy");
    udf_host_tests::fixtures::write_npy(&path, &data, udf_host_tests::fixtures::Ty::U16);
    let sum = plugin("sum").display().to_string();
    cli(&[&sum, "--data", &path.display().to_string(), "--check", "invariance,roi"]).unwrap();
    let aux = plugin("probe_aux").display().to_string();
    let (code, message) = cli(&[&aux, "--check", "determinism"]).unwrap_err();
    assert_eq!(code, exit::USER_ERROR);
    assert!(message.contains("aux"), "{message}");
}
