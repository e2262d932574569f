//! The conformance kit (`udf_host::conformance`): every reference plugin in `plugins/`
//! and every port of a LiberTEM documentation example (`tests/probes/doc_*`) passes, and
//! the report says why float differences are accepted and why a check was skipped; the
//! deliberately non-invariant probe fails the check that names the reason; each
//! deliberately broken probe (`tests/probes/broken_*`) fails the check made for it, and
//! the hostile and trapping probes fail; the committed vectors (`tests/vectors/`) pass
//! with the Rust plugins and catch a wrong expected value; the CLI's exit codes and JSON
//! report.

use std::path::{Path, PathBuf};
use udf_host::cli::{execute, exit};
use udf_host::conformance::{self, Config, Status, Tolerance};
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::{load, plugin};

/// How each reference plugin or port is checked: the parameters it needs to run (arrays
/// shaped like the default synthetic frames, 16 × 16, or scan, 4 × 6). The tolerance is
/// the default for all: it follows each plugin's accumulation.
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
        // Two float32 values per scan position.
        "probe_aux" => {
            let values: Vec<f32> = (0..48u8).map(|i| f32::from(i) * 0.5).collect();
            let aux = udf_host::array::NdArray::from_vec(&[4, 6, 2], values).expect("shape");
            udf_host_tests::params(&[("aux", ParamValue::Array(std::sync::Arc::new(aux)))])
        }
        _ => Params::default(),
    };
    // LiberTEM's saturation example counts detector values at the maximum: integer data.
    let data = if name == "example_saturation" {
        conformance::DataSource::Synthetic(conformance::Synthetic {
            dtype: udf_host::dtype::DType::U16,
            ..conformance::Synthetic::default()
        })
    } else {
        Config::default().data
    };
    Config { params, data, ..Config::default() }
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

/// The ports of LiberTEM's documentation examples (`tests/probes/doc_*`) and the other
/// correct probes: frame, tile and partition methods, `meta.slice`, coordinates, task
/// data, aux data, private and result-only buffers (float64 results over float32 sums),
/// custom valid masks, `main_preprocess`.
const CORRECT_PROBES: [&str; 8] = [
    "doc_average",
    "doc_pixelsum",
    "doc_coords",
    "doc_valid_mask",
    "doc_sumsig",
    "doc_task_data",
    "probe_aux",
    "probe_minmax",
];

/// Run the suite with `config_for(name)` and require it to conform.
fn conforming(name: &str) -> conformance::Report {
    let report = conformance::check_plugin(load(name), &config_for(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
    assert!(report.passed, "{name} does not conform:\n{}", report.to_text(true));
    report
}

fn evidence<'a>(report: &'a conformance::Report, id: &str) -> &'a [conformance::Evidence] {
    &report.check(id).unwrap_or_else(|| panic!("no check {id}")).evidence
}

#[test]
fn every_port_of_a_documentation_example_conforms() {
    for name in CORRECT_PROBES {
        let report = conforming(name);
        for id in ["run.baseline", "invariance.partitions", "roi.subset", "robustness.empty_partitions"] {
            assert_eq!(report.check(id).map(|c| c.status), Some(Status::Pass), "{name}: {id}");
        }
    }
}

#[test]
fn float64_results_of_float32_sums_agree_within_float32_rounding_and_the_report_says_so() {
    // The AverageUDF: `average` (float64) = `sum` (float32) / `num_frames`.
    let report = conforming("doc_average");
    let check = report.check("invariance.partitions").unwrap();
    assert!(check.summary.contains("within the rounding of the accumulation"), "{}", check.summary);
    let e = check.evidence.iter().find(|e| e.rounding.is_some()).expect("evidence that needed the rounding");
    let rounding = e.rounding.as_deref().unwrap();
    assert!(rounding.contains("float32 accumulation") && rounding.contains("'average'"), "{rounding}");
    // The differences are float32 rounding: far above float64's, far below a real error.
    let rel = e.max_rel_diff.unwrap();
    assert!(rel > 1e-9 && rel < 1e-5, "{e:?}");
    // The rtol follows the model: 2 (n + 8) u, n = 24 frames summed into `sum` (sig).
    let n = 24.0;
    let expected = 2.0 * (n + 8.0) * f64::from(f32::EPSILON) / 2.0;
    let applied: Vec<f64> = evidence(&report, "invariance.partitions").iter().filter_map(|e| e.rtol).collect();
    assert!(applied.iter().any(|r| (r - expected).abs() < 1e-15), "{applied:?} vs {expected}");
    assert!(report.resources.len() > 1);

    // With the dtype's fixed tolerance alone, the same plugin fails: the old false alarm.
    let fixed =
        Config { tolerance: Tolerance { accumulation: false, ..Tolerance::default() }, ..config_for("doc_average") };
    let fixed = Config { groups: Some(vec![conformance::Group::Invariance]), ..fixed };
    let report = conformance::check_plugin(load("doc_average"), &fixed).unwrap();
    let check = report.check("invariance.partitions").unwrap();
    assert_eq!(check.status, Status::Fail, "{}", report.to_text(false));
    assert!(check.evidence.iter().filter(|e| e.status == Status::Fail).all(|e| e.buffer.as_deref() == Some("average")));
}

#[test]
fn roi_checks_keep_the_scan_geometry_and_say_why_a_reference_is_skipped() {
    // CoordUDF: two coordinates per frame on the 2-D scan, one on a 1-D scan.
    let report = conforming("doc_coords");
    let roi = evidence(&report, "roi.subset");
    let nav = roi.iter().find(|e| e.variant.contains("nav results vs a run without ROI")).expect("nav evidence");
    assert_eq!(nav.status, Status::Pass, "{nav:?}");
    let flat = roi.iter().find(|e| e.variant.contains("1-D scan")).expect("1-D scan evidence");
    assert_eq!(flat.status, Status::NotApplicable);
    assert!(flat.message.contains("depend on the scan geometry") && flat.message.contains("'coords'"), "{flat:?}");
    let scan = &evidence(&report, "robustness.flat_scan")[0];
    assert_eq!(scan.status, Status::Pass, "{scan:?}");

    // com refuses a 1-D scan with a typed error: n/a with its message, not a failure.
    let report = conforming("com");
    let flat = evidence(&report, "roi.subset").iter().find(|e| e.variant.contains("1-D scan")).unwrap();
    assert_eq!(flat.status, Status::NotApplicable);
    assert!(flat.message.contains("refused a 1-D scan") && flat.message.contains("com needs a 2-D scan"), "{flat:?}");
    let scan = report.check("robustness.flat_scan").unwrap();
    assert_eq!(scan.status, Status::NotApplicable);
    assert!(scan.summary.contains("com needs a 2-D scan"), "{}", scan.summary);

    // A plugin whose results do not depend on the geometry is compared with the selected
    // frames alone too.
    let report = conforming("doc_average");
    let flat = evidence(&report, "roi.subset").iter().find(|e| e.variant.contains("1-D scan")).unwrap();
    assert_eq!(flat.status, Status::Pass, "{flat:?}");
}

#[test]
fn non_invariant_plugins_fail_the_check_that_names_the_reason() {
    for (flaw, buffer, reason) in [
        ("partition-mean", "centered", "invariance.partitions"),
        ("method", "method", "invariance.methods"),
        ("partition-index", "partition", "invariance.partitions"),
    ] {
        let params = udf_host_tests::params(&[("flaw", ParamValue::Text(flaw.into()))]);
        let report = conformance::check_plugin(load("noninvariant"), &Config { params, ..Config::default() }).unwrap();
        let check = report.check(reason).unwrap();
        assert_eq!(check.status, Status::Fail, "{flaw}:\n{}", report.to_text(false));
        let failed: Vec<_> = check.evidence.iter().filter(|e| e.status == Status::Fail).collect();
        assert!(failed.iter().all(|e| e.buffer.as_deref() == Some(buffer)), "{flaw}: {failed:?}");
        // Each invariance check varies one thing: the others pass.
        for other in ["invariance.tiles", "invariance.threads", "invariance.merge_order"] {
            assert_eq!(report.check(other).unwrap().status, Status::Pass, "{flaw}: {other}");
        }
        if reason == "invariance.methods" {
            assert_eq!(report.failed(), vec![reason], "{flaw}");
        } else {
            assert_eq!(report.check("invariance.methods").unwrap().status, Status::Pass, "{flaw}");
        }
        println!("{flaw}: fails {:?}", report.failed());
    }
}

#[test]
fn hostile_and_trapping_probes_do_not_conform() {
    let text = |v: &str| ParamValue::Text(v.into());
    let mut cases: Vec<(&str, Params)> =
        ["wrong-shape", "wrong-dtype", "undeclared", "missing", "huge-export", "huge-error", "huge-decl", "recurse"]
            .into_iter()
            .map(|attack| ("probe_hostile", udf_host_tests::params(&[("attack", text(attack))])))
            .collect();
    for mode in ["panic", "error"] {
        cases.push(("probe_trap", udf_host_tests::params(&[("mode", text(mode)), ("frame", ParamValue::Int(5))])));
    }
    for (probe, params) in cases {
        let what = format!("{probe} {:?}", params.iter().map(|p| p.value.to_json()).collect::<Vec<_>>());
        let report = conformance::check_plugin(load(probe), &Config { params, ..Config::default() }).unwrap();
        assert!(!report.passed, "{what} conforms:\n{}", report.to_text(false));
        assert_eq!(report.check("run.baseline").unwrap().status, Status::Fail, "{what}");
    }
    // The same probes behaving are no false alarms.
    conforming_with("probe_hostile", udf_host_tests::params(&[("attack", text("none"))]));
    conforming_with("probe_trap", udf_host_tests::params(&[("mode", text("none"))]));
}

fn conforming_with(name: &str, params: Params) {
    let report = conformance::check_plugin(load(name), &Config { params, ..Config::default() }).unwrap();
    assert!(report.passed, "{name} does not conform:\n{}", report.to_text(true));
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
fn catches_roi_mistakes_with_the_references_that_keep_the_geometry() {
    for (bug, reference) in
        [("nav-len", "alone (a 1-D scan)"), ("compressed-coords", "nav results vs a run without ROI")]
    {
        let params = udf_host_tests::params(&[("bug", ParamValue::Text(bug.into()))]);
        let report = conformance::check_plugin(load("broken_roi"), &Config { params, ..Config::default() }).unwrap();
        let check = report.check("roi.subset").unwrap();
        assert_eq!(check.status, Status::Fail, "{bug}:\n{}", report.to_text(true));
        let failed: Vec<_> = check.evidence.iter().filter(|e| e.status == Status::Fail).collect();
        assert!(failed.iter().all(|e| e.variant.contains(reference)), "{bug}: {failed:?}");
        // Right without a ROI: invariance passes.
        assert_eq!(report.check("invariance.partitions").unwrap().status, Status::Pass, "{bug}");
        println!("{bug}: fails {:?}", report.failed());
    }
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

/// Plugins that compute with host arrays (the Rust probes; the Python and JavaScript
/// ones in `polyglot::every_polyglot_plugin_conforms`) conform, and the array check
/// looked at their arrays.
#[test]
fn host_array_plugins_conform() {
    let masks: Vec<f32> = (0..2 * 256).map(|i| ((i * 7) % 5) as f32 - 2.0).collect();
    let masks =
        ParamValue::Array(std::sync::Arc::new(udf_host::array::NdArray::from_vec(&[2, 16, 16], masks).expect("shape")));
    let mut subjects = vec![("probe_host_arrays", Params::default())];
    for op in ["sum", "sumsig", "stddev", "masks"] {
        let params = udf_host_tests::params(&[("op", ParamValue::Text(op.into())), ("masks", masks.clone())]);
        subjects.push(("probe_host_array_ops", params));
    }
    for (name, params) in subjects {
        let report = conformance::check_plugin(load(name), &Config { params, ..Config::default() })
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(report.passed, "{name} does not conform:\n{}", report.to_text(true));
        let check = report.check("resources.array_growth").expect("the array check");
        assert_eq!(check.status, Status::Pass, "{name}: {}", report.to_text(true));
    }
}

/// Issue 32: a plugin that keeps a host array per tile holds more and more of them and
/// ends at the live-array cap on a long partition; the kit reports the arrays left
/// after the partition and fails `resources.array_growth` alone.
#[test]
fn catches_host_arrays_kept_per_tile() {
    let params = udf_host_tests::params(&[("leak", ParamValue::Bool(true))]);
    let report = conformance::check_plugin(load("probe_host_arrays"), &Config { params, ..Config::default() })
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(report.failed(), vec!["resources.array_growth"], "{}", report.to_text(false));
    let failed = &evidence(&report, "resources.array_growth")[0];
    assert!(failed.message.contains("left after the partition's export"), "{failed:?}");
    let text = report.to_text(false);
    assert!(text.contains("host arrays: at most"), "{text}");
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
    assert_eq!(json["tolerance"]["accumulation"], true);
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

/// The gallery's parameters where a port needs some (the rest run on their defaults).
fn gallery_config(name: &str) -> Config {
    let array = |shape: &[usize], values: Vec<f64>| {
        ParamValue::Array(std::sync::Arc::new(udf_host::array::NdArray::from_vec(shape, values).expect("shape")))
    };
    let peaks = || array(&[3, 2], vec![4.0, 4.0, 8.0, 8.0, 11.0, 5.0]);
    let params = match name {
        // One factor per position of the suite's 4 x 6 scan.
        "example_aux_scale" => {
            udf_host_tests::params(&[("scale", array(&[4, 6], (0..24).map(|i| 1.0 + f64::from(i) / 8.0).collect()))])
        }
        "example_correlate_peaks" | "example_sparse_correlation" => udf_host_tests::params(&[("peaks", peaks())]),
        _ => Params::default(),
    };
    // LiberTEM's saturation example counts detector values at the maximum: integer data.
    let data = if name == "example_saturation" {
        conformance::DataSource::Synthetic(conformance::Synthetic {
            dtype: udf_host::dtype::DType::U16,
            ..conformance::Synthetic::default()
        })
    } else {
        Config::default().data
    };
    Config { params, data, ..Config::default() }
}

#[test]
fn every_gallery_port_conforms() {
    // The ports of LiberTEM's documentation examples (plugins/examples/, issue 21) are
    // correct plugins: the kit must not raise a false alarm on any of them (issue 24).
    let mut failures = Vec::new();
    for name in env!("UDF_EXAMPLE_PLUGIN_NAMES").split(',') {
        let report =
            conformance::check_plugin(load(name), &gallery_config(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        if !report.passed {
            failures.push(format!("{name} does not conform:\n{}", report.to_text(false)));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
