//! A plugin that computes with host arrays (`tests/probes/host_arrays`) against plain
//! loops over the frames, for every partitioning, tiling and ROI; old plugins of
//! contract 0.1.0 still load; a plugin that keeps every array hits the cap with a
//! clear error.

use crate::plugin_matrix::{cases, run_one, scaled, values, write};
use udf_host::udf::Params;
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::load;
use udf_host_tests::reference::assert_close;

#[test]
fn host_array_sums_match_plain_loops_for_every_partitioning_tiling_and_roi() {
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([4, 6], [9, 11]);
    let data = scaled(fixtures::mk_uniform(&nav, &sig, 5), 100.0);
    let path = write(dir.path(), "host-arrays", &data, Ty::F32);
    let stored = data.rounded(Ty::F32);
    let udf = load("probe_host_arrays");
    let tiles = [vec![2, 3, 5], vec![1, 9, 11], vec![5, 9, 4]];
    for case in cases(24, &tiles, 3) {
        let what = format!("{case:?}");
        let results = run_one(&path, &udf, Params::default(), case.options()).unwrap_or_else(|e| panic!("{what}: {e}"));
        let r = &results.udfs[0];
        let mut sum = vec![0.0; stored.frame_len()];
        let mut sumsig = Vec::new();
        for n in (0..stored.frames()).filter(|&n| case.selected(n)) {
            let frame = stored.frame(n);
            for (o, v) in sum.iter_mut().zip(frame.iter()) {
                *o += v;
            }
            sumsig.push(frame.iter().sum::<f64>());
        }
        assert_close(&values(r, "intensity"), &sum, 1e-5, &what);
        let got: Vec<f64> = values(r, "sumsig").into_iter().filter(|v| !v.is_nan()).collect();
        assert_close(&got, &sumsig, 1e-5, &what);
    }
}
