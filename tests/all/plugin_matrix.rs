//! The run matrix shared by the tests of the LiberTEM reference plugins (`plugins_*.rs`):
//! partition counts × forced tile shapes × ROIs × stored dtypes, and small helpers to run
//! one plugin and read its buffers.

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use udf_host::dataset::OpenOptions;
use udf_host::exec::{RunError, RunOptions, RunResults, UdfResults};
use udf_host::roi::Roi;
use udf_host::udf::{CallError, ErrorKind, Params, Udf};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::to_f64;
use udf_host_tests::run_on;

/// Partition counts every plugin is run with.
pub const PARTITIONS: [usize; 4] = [1, 2, 3, 7];

/// The ROIs every plugin is run with, for `frames` nav positions: none, a seeded random
/// one (about half the frames), none selected, and a single frame.
pub fn rois(frames: usize, seed: u64) -> Vec<(&'static str, Option<Vec<bool>>)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut random: Vec<bool> = (0..frames).map(|_| rng.random_bool(0.5)).collect();
    random[frames / 3] = true;
    random[frames / 3 + 1] = false;
    let mut single = vec![false; frames];
    single[frames / 2 + 1] = true;
    vec![("none", None), ("random", Some(random)), ("all-false", Some(vec![false; frames])), ("single", Some(single))]
}

/// Non-negative whole numbers below `max`: exact in every fixture type, so float32 and
/// uint16 files hold the same values.
pub fn integer_uniform(nav: &[usize], sig: &[usize], max: f64, seed: u64) -> Data {
    let mut data = fixtures::mk_uniform(nav, sig, seed);
    for v in &mut data.values {
        *v = (*v * max).floor();
    }
    data
}

/// `data` scaled by `factor` (non-integer float data of a useful magnitude).
pub fn scaled(mut data: Data, factor: f64) -> Data {
    for v in &mut data.values {
        *v *= factor;
    }
    data
}

/// Write `data` as a `.npy` of `ty` in `dir` and return its path.
pub fn write(dir: &Path, name: &str, data: &Data, ty: Ty) -> PathBuf {
    let path = dir.join(format!("{name}-{ty:?}.npy"));
    fixtures::write_npy(&path, data, ty);
    path
}

/// One cell of the matrix.
#[derive(Debug, Clone)]
pub struct Case {
    pub partitions: usize,
    pub tile: Vec<usize>,
    pub roi_name: &'static str,
    pub roi: Option<Vec<bool>>,
}

impl Case {
    pub fn options(&self) -> RunOptions {
        RunOptions {
            partitions: Some(self.partitions),
            tile_shape: Some(self.tile.clone()),
            roi: self.roi.clone().map(Roi::from_mask),
            ..RunOptions::default()
        }
    }

    /// Whether true flat nav index `i` is processed.
    pub fn selected(&self, i: usize) -> bool {
        self.roi.as_ref().is_none_or(|r| r[i])
    }
}

/// Every combination of [`PARTITIONS`], `tiles` and [`rois`].
pub fn cases(frames: usize, tiles: &[Vec<usize>], seed: u64) -> Vec<Case> {
    let mut out = Vec::new();
    for (roi_name, roi) in rois(frames, seed) {
        for &partitions in &PARTITIONS {
            for tile in tiles {
                out.push(Case { partitions, tile: tile.clone(), roi_name, roi: roi.clone() });
            }
        }
    }
    out
}

/// Run one plugin on the `.npy` at `path`.
pub fn run_one(path: &Path, udf: &Arc<dyn Udf>, params: Params, options: RunOptions) -> Result<RunResults, RunError> {
    run_on(path, &OpenOptions::default(), vec![(udf.clone(), params)], options)
}

/// Run one plugin on the `.npy` at `path` read as `nav` × `sig` (without this the last
/// two axes of an `.npy` are the signal).
pub fn run_shaped(
    path: &Path,
    nav: &[usize],
    sig: &[usize],
    udf: &Arc<dyn Udf>,
    params: Params,
) -> Result<RunResults, RunError> {
    let open = OpenOptions { nav_shape: Some(nav.to_vec()), sig_shape: Some(sig.to_vec()), ..OpenOptions::default() };
    run_on(path, &open, vec![(udf.clone(), params)], RunOptions::default())
}

/// The elements of buffer `name` (its `data`: nav buffers on the full nav grid, NaN
/// outside the ROI) as `f64`.
#[track_caller]
pub fn values(results: &UdfResults, name: &str) -> Vec<f64> {
    to_f64(&results.buffer(name).unwrap_or_else(|| panic!("no buffer '{name}'")).data)
}

/// The kind and message of a typed error a plugin returned.
#[track_caller]
pub fn returned_error(result: Result<RunResults, RunError>) -> (ErrorKind, String) {
    match result {
        Err(RunError::Udf { error: CallError::Returned { kind, message }, .. }) => (kind, message),
        Err(other) => panic!("expected a typed plugin error, got: {other}"),
        Ok(_) => panic!("expected a typed plugin error, the run succeeded"),
    }
}
