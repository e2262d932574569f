//! Native built-ins against independent references (plain loops over frames written
//! here, or BUILTINS.md's formulas), for every partitioning, tiling, ROI and input
//! dtype LiberTEM supports; and against their wasm twins where the twin exists.

mod cli;
mod com;
mod frames;
mod masks;
mod max;
mod pick;
mod radial_fourier;
mod stddev;
mod sum;
mod twins;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use udf_host::dataset::OpenOptions;
use udf_host::exec::{RunOptions, RunResults};
use udf_host::roi::Roi;
use udf_host::udf::{Params, Udf};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::run_on;

/// The built-in `name`.
pub fn builtin(name: &str) -> Arc<dyn Udf> {
    udf_host::builtins::get(name).unwrap_or_else(|| panic!("no built-in '{name}'"))
}

/// The dtypes the fixtures are written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    F32,
    U16,
    C64,
}

/// A dataset file and its values (as stored), frame by frame.
pub struct Fixture {
    pub input: Input,
    pub path: PathBuf,
    pub nav: Vec<usize>,
    pub sig: Vec<usize>,
    /// Real parts, C order over nav + sig.
    pub re: Vec<f64>,
    /// Imaginary parts (zeros for real inputs).
    pub im: Vec<f64>,
}

impl Fixture {
    /// Write `data` (and, for complex input, a second seeded part) in `input`'s dtype.
    pub fn write(dir: &Path, input: Input, data: &Data, seed: u64) -> Fixture {
        let path = dir.join(format!("data-{input:?}-{seed}.npy"));
        let (re, im) = match input {
            Input::F32 => {
                fixtures::write_npy(&path, data, Ty::F32);
                (data.rounded(Ty::F32).values, vec![0.0; data.values.len()])
            }
            Input::U16 => {
                fixtures::write_npy(&path, data, Ty::U16);
                (data.rounded(Ty::U16).values, vec![0.0; data.values.len()])
            }
            Input::C64 => {
                let im = fixtures::mk_random(&data.nav, &data.sig, seed.wrapping_add(77));
                let complex = fixtures::ComplexParts { re: data.rounded(Ty::F32), im: im.rounded(Ty::F32) };
                fixtures::write_npy_complex64(&path, &complex);
                (complex.re.values, complex.im.values)
            }
        };
        Fixture { input, path, nav: data.nav.clone(), sig: data.sig.clone(), re, im }
    }

    pub fn frames(&self) -> usize {
        self.nav.iter().product()
    }

    pub fn frame_len(&self) -> usize {
        self.sig.iter().product()
    }

    /// Real parts of frame `i`.
    pub fn frame(&self, i: usize) -> &[f64] {
        let n = self.frame_len();
        &self.re[i * n..(i + 1) * n]
    }

    /// Imaginary parts of frame `i`.
    pub fn frame_im(&self, i: usize) -> &[f64] {
        let n = self.frame_len();
        &self.im[i * n..(i + 1) * n]
    }

    pub fn is_complex(&self) -> bool {
        self.input == Input::C64
    }

    /// Run `udfs` with `case`'s options.
    pub fn run(&self, udfs: Vec<(Arc<dyn Udf>, Params)>, case: &Case) -> RunResults {
        let options = RunOptions {
            partitions: Some(case.partitions),
            tile_shape: case.tile.clone(),
            roi: case.roi.clone().map(Roi::from_mask),
            ..RunOptions::default()
        };
        run_on(&self.path, &OpenOptions::default(), udfs, options).unwrap_or_else(|e| panic!("{}: {e}", case.label))
    }
}

/// One way of running: partitions, a forced tile shape (or the negotiated one) and a ROI.
#[derive(Debug, Clone)]
pub struct Case {
    pub partitions: usize,
    pub tile: Option<Vec<usize>>,
    pub roi: Option<Vec<bool>>,
    pub label: String,
}

impl Case {
    /// Whether frame `i` is processed.
    pub fn selected(&self, i: usize) -> bool {
        self.roi.as_ref().is_none_or(|r| r[i])
    }
}

/// Partitions {1, 2, 3, 7} × tile shapes {negotiated, `odd`, full frames 2 deep} × ROI
/// {none, random, all false, a single frame} for `frames` frames of shape `sig`.
pub fn cases(frames: usize, sig: &[usize], odd: &[usize]) -> Vec<Case> {
    let mut full = vec![2];
    full.extend_from_slice(sig);
    let random: Vec<bool> = (0..frames).map(|i| (i * 7 + 3) % 5 < 2 || i == frames - 1).collect();
    let mut single = vec![false; frames];
    single[frames / 2] = true;
    let rois = [
        ("no ROI", None),
        ("random ROI", Some(random)),
        ("empty ROI", Some(vec![false; frames])),
        ("one frame", Some(single)),
    ];
    let mut out = Vec::new();
    for partitions in [1, 2, 3, 7] {
        for tile in [None, Some(odd.to_vec()), Some(full.clone())] {
            for (roi_name, roi) in &rois {
                out.push(Case {
                    partitions,
                    tile: tile.clone(),
                    roi: roi.clone(),
                    label: format!("{partitions} partitions, tile {tile:?}, {roi_name}"),
                });
            }
        }
    }
    out
}

/// A nav-buffer reference: `per_frame(i)` for selected frames, NaN elsewhere (`.data`).
pub fn nav_reference(case: &Case, frames: usize, width: usize, per_frame: impl Fn(usize) -> Vec<f64>) -> Vec<f64> {
    (0..frames).flat_map(|i| if case.selected(i) { per_frame(i) } else { vec![f64::NAN; width] }).collect()
}
