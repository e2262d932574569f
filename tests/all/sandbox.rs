//! The sandbox: a plugin gets nothing but `log`. Each capability a hostile plugin might
//! reach for through WASI gives an error or nothing.

use udf_host::dataset::OpenOptions;
use udf_host::exec::RunOptions;
use udf_host::udf::Params;
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::reference::to_f64;
use udf_host_tests::{load, run_on};

/// The checks of tests/probes/sandbox, in order.
const CHECKS: [&str; 12] = [
    "read /etc/passwd",
    "list /",
    "list .",
    "write a file",
    "environment",
    "arguments",
    "wall clock",
    "monotonic clock",
    "random bytes",
    "tcp connect",
    "udp bind",
    "name lookup",
];

#[test]
fn wasi_grants_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("d.npy");
    fixtures::write_npy(&path, &fixtures::mk_random(&[4], &[2, 2], 1), Ty::U8);
    let results =
        run_on(&path, &OpenOptions::default(), vec![(load("probe_sandbox"), Params::default())], RunOptions::default())
            .unwrap();
    let outcome = to_f64(&results.udfs[0].buffer("outcome").unwrap().data);
    assert_eq!(outcome.len(), CHECKS.len());
    let leaks: Vec<&str> = CHECKS.iter().zip(&outcome).filter(|(_, o)| **o != 1.0).map(|(c, _)| *c).collect();
    assert!(leaks.is_empty(), "the plugin obtained: {leaks:?} (outcome {outcome:?})");
    assert!(!std::path::Path::new("udf-probe-was-here.txt").exists());
}
