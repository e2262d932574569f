//! The mask engine: dot products of every frame with a stack of masks, shared by every
//! built-in that applies masks — `masks` (given masks), `disk`, `ring`, `point`,
//! `radial-fourier` and `com` (masks they build). It is not a UDF; the UDF files import it.
//!
//! Per run, the masks are made once (in the result dtype) and cut to each tiling
//! scheme's signal slices once, shared by the run's partitions ([`MaskRun`]); a tile
//! is then one matrix product `tile (frames × pixels) @ masksᵀ (pixels × M)` (dense
//! masks, matrixmultiply's blocked kernels, which read each tile element once), or a
//! gather per mask entry (sparse masks, CSR). Tiles of another dtype than the result
//! are converted block by block (the matrix product's blocks) into a scratch buffer
//! allocated once. Float32 masks on x86-64 with AVX2/FMA use [`simd`](crate::arrays::simd)'s kernel instead,
//! on float32 tiles or on stored integers read unconverted (`converts_on_read`).

use super::element::{Sample, tile_data, with_fused_stored};
use super::kernels::{SliceRuns, parallel};
use super::spec;
use crate::array::NdArray;
use crate::arrays::simd::{self, Pixel};
use crate::dtype::{CastFrom, DType, Element, Kind, StoredDType, converter, result_type};
use crate::udf::{
    CallError, DatasetMeta, InitContext, NamedBuffer, ParamValue, Params, PartitionRunner, SigSlice, Tile,
};
use ndarray::{ArrayView2, ArrayViewMut2, LinalgScalar, ShapeBuilder};
use num_complex::{Complex32, Complex64};
use rayon::prelude::*;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// A stack of `count` masks over the whole frame, in the result dtype.
#[derive(Debug, Clone)]
pub struct MaskSet {
    /// `count × frame_len` elements in the result dtype, C order: `(count, frame_len)`,
    /// or a parameter's array as given (`sig`, `(M, ..sig)`, `(M, pixels)`) when it has
    /// that dtype already (shared, not copied).
    pub values: Arc<NdArray>,
    pub count: usize,
    pub frame_len: usize,
    /// Apply as sparse (CSR) masks.
    pub sparse: bool,
}

impl MaskSet {
    /// Masks from an array of shape `sig` (one mask), `(M, ..sig)` or `(M, pixels)`,
    /// converted to `dtype` (NumPy's `astype`; the array itself when it has `dtype`).
    ///
    /// # Errors
    /// Bad parameter `name` if the shape does not fit the frames or the dtype cannot
    /// hold the result.
    pub fn new(array: &Arc<NdArray>, sig: &[usize], dtype: DType, sparse: bool, name: &str) -> Result<Self, CallError> {
        let frame_len: usize = sig.iter().product();
        let shape = array.shape();
        let count = if shape == sig {
            1
        } else if shape.len() == sig.len() + 1 && shape[1..] == *sig
            || shape.len() == 2 && shape[1] == frame_len && sig.len() != 1
        {
            shape[0]
        } else {
            return Err(CallError::bad_param(format!(
                "parameter '{name}' has shape {shape:?}; expected one mask of the frame shape {sig:?} or a stack (M, {})",
                sig.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")
            )));
        };
        if array.dtype() == DType::Bool && dtype == DType::Bool {
            return Err(CallError::bad_param(format!("parameter '{name}': bool masks need a numeric mask_dtype")));
        }
        if array.dtype() == dtype {
            return Ok(MaskSet { values: array.clone(), count, frame_len, sparse });
        }
        let mut values = NdArray::zeros(dtype, &[count, frame_len]);
        if array.dtype() == DType::Bool {
            // Bool is stored as 0/1 bytes: convert through uint8.
            converter(StoredDType::le(DType::U8), dtype)(array.bytes(), values.bytes_mut());
        } else {
            converter(StoredDType::le(array.dtype()), dtype)(array.bytes(), values.bytes_mut());
        }
        Ok(MaskSet { values: Arc::new(values), count, frame_len, sparse })
    }

    /// Masks built pixel by pixel: `f(m, y, x)` for 2-D frames `(sy, sx)`, as float32.
    pub fn from_fn_f32(
        count: usize,
        sy: usize,
        sx: usize,
        sparse: bool,
        f: impl Fn(usize, usize, usize) -> f32,
    ) -> Self {
        let values: Vec<f32> = (0..count)
            .flat_map(|m| (0..sy).flat_map(move |y| (0..sx).map(move |x| (m, y, x))))
            .map(|(m, y, x)| f(m, y, x))
            .collect();
        let values = NdArray::from_vec(&[count, sy * sx], values).unwrap_or_else(|_| unreachable!("count x frame"));
        MaskSet { values: Arc::new(values), count, frame_len: sy * sx, sparse }
    }

    /// The same masks in `dtype`.
    pub fn to_dtype(&self, dtype: DType) -> MaskSet {
        if dtype == self.values.dtype() {
            return self.clone();
        }
        let mut values = NdArray::zeros(dtype, self.values.shape());
        converter(StoredDType::le(self.values.dtype()), dtype)(self.values.bytes(), values.bytes_mut());
        MaskSet { values: Arc::new(values), ..*self }
    }

    /// These masks cut to each slice of a tiling scheme, for the partitions with that
    /// scheme ([`SharedCut::product`]).
    ///
    /// # Errors
    /// Invalid data if the masks' dtype is not float or complex.
    fn cut(self: &Arc<Self>, sig: &[usize], slices: &[SigSlice]) -> Result<Arc<dyn SharedCut>, CallError> {
        let dtype = self.values.dtype();
        let runs = SliceRuns::for_scheme(sig, slices);
        crate::with_inexact!(dtype, T => {
            if self.sparse {
                Ok(Arc::new(SparseCut::<T>::new(self, runs)) as Arc<dyn SharedCut>)
            } else {
                Ok(Arc::new(DenseCut::<T>::new(self.clone(), runs)) as Arc<dyn SharedCut>)
            }
        }, Err(CallError::invalid_data(format!(
            "masks are applied in float or complex arithmetic, not {dtype}; use float32 input or mask_dtype"
        ))))
    }
}

/// A mask built-in's state for one run: the masks it makes and their cuts per tiling
/// scheme, made by the first partition that needs them and shared by the others (the
/// masks were made and cut, and for the `(pixels, M)` kernel also transposed, once per
/// partition: copies of a large stack per thread, and work per partition). The
/// registry's instance of a built-in holds none and makes everything per partition; the
/// copy the executor makes for a run ([`Udf::for_run`](crate::udf::Udf::for_run)) holds
/// one, dropped with the run. What it holds serves the params and dataset it was made
/// for; others (an engine planning several runs with one copy) make it anew.
#[derive(Clone, Default)]
pub struct MaskRun(Option<Arc<Mutex<Option<RunMasks>>>>);

/// What a [`MaskRun`] holds.
struct RunMasks {
    params: Params,
    dataset: DatasetMeta,
    set: Arc<MaskSet>,
    /// Per tiling scheme (its slices) seen so far, the masks cut to it.
    cuts: Vec<(Vec<SigSlice>, Arc<dyn SharedCut>)>,
}

impl MaskRun {
    /// The state of a run's copy of the built-in; `None` when this is a run's already.
    pub fn for_run(&self) -> Option<MaskRun> {
        self.0.is_none().then(|| MaskRun(Some(Arc::default())))
    }

    /// The run's masks: made by `make` for the first partition, the same ones for the
    /// next while the params and the dataset are those they were made for.
    ///
    /// # Errors
    /// What `make` returns.
    pub fn masks(
        &self,
        ctx: &InitContext<'_>,
        make: impl FnOnce() -> Result<MaskSet, CallError>,
    ) -> Result<Arc<MaskSet>, CallError> {
        let Some(state) = &self.0 else { return make().map(Arc::new) };
        // Held while making: a partition starting meanwhile waits for these masks
        // instead of making its own.
        let mut held = state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(run) = held.as_ref()
            && run.dataset == *ctx.dataset
            && same_params(&run.params, ctx.params)
        {
            return Ok(run.set.clone());
        }
        let set = Arc::new(make()?);
        *held = Some(RunMasks {
            params: ctx.params.clone(),
            dataset: ctx.dataset.clone(),
            set: set.clone(),
            cuts: Vec::new(),
        });
        Ok(set)
    }

    /// The product of `set` (from [`masks`](Self::masks)) for a partition tiled into
    /// `slices`, on the run's cut for that scheme.
    fn product(
        &self,
        set: &Arc<MaskSet>,
        sig: &[usize],
        slices: &[SigSlice],
    ) -> Result<Box<dyn MaskProduct>, CallError> {
        if let Some(state) = &self.0 {
            let mut held = state.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(run) = held.as_mut()
                && Arc::ptr_eq(&run.set, set)
            {
                if let Some((_, cut)) = run.cuts.iter().find(|(s, _)| s == slices) {
                    return Ok(cut.clone().product());
                }
                let cut = set.cut(sig, slices)?;
                run.cuts.push((slices.to_vec(), cut.clone()));
                return Ok(cut.product());
            }
        }
        Ok(set.cut(sig, slices)?.product())
    }
}

/// Whether two runs' params are the same values (arrays: the same array, or equal
/// bytes; floats: the same bits, so a NaN default equals itself).
fn same_params(a: &Params, b: &Params) -> bool {
    a.0.len() == b.0.len()
        && a.0.iter().zip(&b.0).all(|(a, b)| {
            a.name == b.name
                && match (&a.value, &b.value) {
                    (ParamValue::Array(x), ParamValue::Array(y)) => Arc::ptr_eq(x, y) || x == y,
                    (ParamValue::Float(x), ParamValue::Float(y)) => x.to_bits() == y.to_bits(),
                    (ParamValue::Int(x), ParamValue::Int(y)) => x == y,
                    (ParamValue::Bool(x), ParamValue::Bool(y)) => x == y,
                    (ParamValue::Text(x), ParamValue::Text(y)) => x == y,
                    _ => false,
                }
        })
}

/// A run's masks cut to one tiling scheme's slices, shared by the partitions with that
/// scheme; each partition's product adds only its own scratch space.
trait SharedCut: Send + Sync {
    /// A product for one partition.
    fn product(self: Arc<Self>) -> Box<dyn MaskProduct>;
}

/// `out[f, m] += Σ_p tile[f, p] · mask_m[slice p]` for the frames of a tile.
pub trait MaskProduct: Send {
    /// Apply to `tile`, adding into `out` (`tile.frames × M` elements of the result
    /// dtype, as bytes).
    ///
    /// # Errors
    /// An unsupported tile dtype, or internal inconsistencies.
    fn apply(&mut self, tile: &Tile<'_>, out: &mut [u8]) -> Result<(), CallError>;
}

/// Element types masks are applied in, from any tile dtype a mask built-in accepts: the
/// float and complex input dtypes, and the stored integers it converts on read.
pub trait MaskElement:
    Sample
    + LinalgScalar
    + Send
    + Sync
    + CastFrom<f32>
    + CastFrom<f64>
    + CastFrom<Complex32>
    + CastFrom<Complex64>
    + CastFrom<u8>
    + CastFrom<u16>
    + CastFrom<u32>
    + CastFrom<i8>
    + CastFrom<i16>
    + CastFrom<i32>
{
}
impl MaskElement for f32 {}
impl MaskElement for f64 {}
impl MaskElement for Complex32 {}
impl MaskElement for Complex64 {}

/// Frames per parallel block target this many bytes of tile.
const PARALLEL_BLOCK_BYTES: usize = 4 << 20;

fn unsupported(dtype: DType) -> CallError {
    CallError::invalid_data(format!("masks cannot be applied to {dtype} data"))
}

fn rows_of<R: Element>(out: &mut [u8]) -> Result<&mut [R], CallError> {
    super::element::cast_mut::<R>(out, "intensity")
}

/// Dense masks cut to a tiling scheme: per slice a `(M, slice_len)` matrix and, for the
/// `(pixels, M)` kernel, its transpose, each made when a tile first needs it.
struct DenseCut<R> {
    set: Arc<MaskSet>,
    runs: Vec<SliceRuns>,
    /// Per slice the `(M, slice_len)` C-order cut (a slice that is the whole frame uses
    /// the set's values as they are).
    stacks: Vec<OnceLock<Vec<R>>>,
    /// Per slice the cut transposed to `(slice_len, M)` for [`simd::matrix_product`],
    /// made straight from the set's values.
    transposed: Vec<OnceLock<Vec<f32>>>,
    /// Float32 masks on a CPU with AVX2/FMA: use [`simd`](crate::arrays::simd)'s kernels (decided once).
    simd: bool,
}

impl<R: MaskElement> DenseCut<R> {
    fn new(set: Arc<MaskSet>, runs: Vec<SliceRuns>) -> Self {
        let slices = runs.len();
        DenseCut {
            set,
            runs,
            stacks: (0..slices).map(|_| OnceLock::new()).collect(),
            transposed: (0..slices).map(|_| OnceLock::new()).collect(),
            simd: R::DTYPE == DType::F32 && simd::available(),
        }
    }

    fn values(&self) -> &[R] {
        self.set.values.as_slice::<R>().unwrap_or_default()
    }

    /// Slice `i`'s masks, `(M, slice_len)` C order.
    fn stack(&self, i: usize) -> &[R] {
        let (values, runs) = (self.values(), &self.runs[i]);
        let (count, frame_len) = (self.set.count, self.set.frame_len);
        if runs.is_full(frame_len) {
            return values;
        }
        self.stacks[i].get_or_init(|| {
            let mut cut = Vec::with_capacity(count * runs.slice_len);
            for m in 0..count {
                let mask = &values[m * frame_len..(m + 1) * frame_len];
                for &start in &runs.starts {
                    cut.extend_from_slice(&mask[start..start + runs.run_len]);
                }
            }
            cut
        })
    }

    /// Slice `i`'s float32 masks transposed, `(slice_len, M)`: row `p` holds every mask's
    /// value at the slice's pixel `p`.
    fn transposed(&self, i: usize) -> &[f32] {
        let values = bytemuck::cast_slice::<R, f32>(self.values());
        let runs = &self.runs[i];
        let (count, frame_len) = (self.set.count, self.set.frame_len);
        self.transposed[i].get_or_init(|| {
            let mut rows = Vec::with_capacity(runs.slice_len * count);
            for &start in &runs.starts {
                for pixel in start..start + runs.run_len {
                    rows.extend((0..count).map(|m| values[m * frame_len + pixel]));
                }
            }
            rows
        })
    }
}

impl<R: MaskElement> SharedCut for DenseCut<R> {
    fn product(self: Arc<Self>) -> Box<dyn MaskProduct> {
        Box::new(DenseProduct { cut: self, scratch: Vec::new() })
    }
}

/// A partition's product with dense masks: the shared cut and its own conversion scratch.
struct DenseProduct<R> {
    cut: Arc<DenseCut<R>>,
    scratch: Vec<R>,
}

/// Frames per matrix-product call: the rows of one call's block of the tile.
const GEMM_FRAMES: usize = 64;
/// Pixels per matrix-product call: one call's part of each frame (and of the masks,
/// which are then re-read from L2/L3, not from memory).
const GEMM_PIXELS: usize = 4096;

/// `out (frames × m) += data (frames × k) @ masksᵀ`, `masks` being `(m, k)` C order,
/// in blocks of `GEMM_FRAMES × GEMM_PIXELS` so that each call's share of the masks
/// stays in cache while the data streams past once.
fn gemm<R: MaskElement>(data: &[R], k: usize, masks: &[R], m: usize, out: &mut [R]) -> Result<(), CallError> {
    let frames = out.len() / m.max(1);
    if m == 0 || k == 0 || frames == 0 {
        return Ok(());
    }
    let bad = |e: ndarray::ShapeError| CallError::internal(format!("mask product shapes: {e}"));
    if m == 1 {
        // One mask: a dot product per frame (a GEMM would waste most of its kernel).
        for (row, acc) in data.chunks_exact(k).zip(out.iter_mut()) {
            *acc = *acc + dot(row, masks);
        }
        return Ok(());
    }
    for (block, rows) in data[..frames * k].chunks(GEMM_FRAMES * k).zip(out.chunks_mut(GEMM_FRAMES * m)) {
        let f = rows.len() / m;
        for p0 in (0..k).step_by(GEMM_PIXELS) {
            let kc = GEMM_PIXELS.min(k - p0);
            let a = ArrayView2::from_shape((f, kc).strides((k, 1)), &block[p0..]).map_err(bad)?;
            block_product(a, &masks[p0..], k, m, rows)?;
        }
    }
    Ok(())
}

/// `rows (f × m) += a (f × kc) @ masksᵀ`, `masks` being the masks from the block's first
/// pixel on, `k` apart.
fn block_product<R: MaskElement>(
    a: ArrayView2<'_, R>,
    masks: &[R],
    k: usize,
    m: usize,
    rows: &mut [R],
) -> Result<(), CallError> {
    let bad = |e: ndarray::ShapeError| CallError::internal(format!("mask product shapes: {e}"));
    let (f, kc) = a.dim();
    let b = ArrayView2::from_shape((kc, m).strides((1, k)), masks).map_err(bad)?;
    let mut c = ArrayViewMut2::from_shape((f, m), rows).map_err(bad)?;
    ndarray::linalg::general_mat_mul(R::one(), &a, &b, R::one(), &mut c);
    Ok(())
}

/// `Σ a[i] · b[i]` in 8 lanes.
fn dot<R: MaskElement>(a: &[R], b: &[R]) -> R {
    let mut lanes = [R::zero(); 8];
    let mut ca = a.chunks_exact(8);
    let mut cb = b.chunks_exact(8);
    for (x, y) in (&mut ca).zip(&mut cb) {
        for ((lane, &a), &b) in lanes.iter_mut().zip(x).zip(y) {
            *lane = *lane + a * b;
        }
    }
    let mut total = R::zero();
    for (x, y) in ca.remainder().iter().zip(cb.remainder()) {
        total = total + *x * *y;
    }
    lanes.iter().fold(total, |acc, &l| acc + l)
}

/// `apply(data, out)` on the whole tile, or — for tiles worth splitting across threads —
/// on blocks of frames in parallel.
fn by_frame_blocks<S: Sync, R: Send>(
    data: &[S],
    k: usize,
    m: usize,
    out: &mut [R],
    apply: impl Fn(&[S], &mut [R]) -> Result<(), CallError> + Sync,
) -> Result<(), CallError> {
    let frames = out.len() / m.max(1);
    if frames > 1 && parallel(std::mem::size_of_val(data)) {
        let block = (PARALLEL_BLOCK_BYTES / (k * size_of::<S>()).max(1)).max(GEMM_FRAMES).clamp(1, frames);
        return out.par_chunks_mut(block * m.max(1)).zip(data.par_chunks(block * k)).try_for_each(|(o, d)| apply(d, o));
    }
    apply(data, out)
}

/// The float32 masks of one slice for [`simd`]'s kernels: `(M, k)` for
/// [`simd::masks_product`] or, transposed, `(k, M)` for [`simd::matrix_product`].
enum SimdMasks<'a> {
    Stack(&'a [f32]),
    Transposed(&'a [f32]),
}

/// [`simd`]'s kernel on a tile of `S` (float32 or stored integers) with float32 masks.
fn dense_f32<S: Pixel + Element>(
    tile: &Tile<'_>,
    k: usize,
    masks: SimdMasks<'_>,
    m: usize,
    out: &mut [f32],
) -> Result<(), CallError> {
    by_frame_blocks(tile_data::<S>(tile)?, k, m, out, |d, o| {
        let done = match masks {
            SimdMasks::Stack(masks) => simd::masks_product(d, k, masks, m, o),
            SimdMasks::Transposed(rows) => simd::matrix_product(d, k, k, rows, m, m, o),
        };
        if done { Ok(()) } else { Err(CallError::internal("the AVX2 kernel is not available")) }
    })
}

/// The portable product of a tile of another dtype `I`: blocked like [`gemm`], each
/// `GEMM_FRAMES × GEMM_PIXELS` block converted to `R` into `scratch` (so the masks are
/// read once per `GEMM_FRAMES` frames, however wide the frames).
fn convert_then_gemm<I: Copy, R: MaskElement + CastFrom<I>>(
    data: &[I],
    k: usize,
    masks: &[R],
    m: usize,
    out: &mut [R],
    scratch: &mut Vec<R>,
) -> Result<(), CallError> {
    let frames = out.len() / m.max(1);
    if m == 0 || k == 0 || frames == 0 {
        return Ok(());
    }
    let bad = |e: ndarray::ShapeError| CallError::internal(format!("mask product shapes: {e}"));
    let most = GEMM_FRAMES.min(frames) * GEMM_PIXELS.min(k);
    if scratch.len() < most {
        scratch.resize(most, R::zero());
    }
    for (block, rows) in data[..frames * k].chunks(GEMM_FRAMES * k).zip(out.chunks_mut(GEMM_FRAMES * m)) {
        let f = rows.len() / m;
        for p0 in (0..k).step_by(GEMM_PIXELS) {
            let kc = GEMM_PIXELS.min(k - p0);
            let converted = &mut scratch[..f * kc];
            for (to, from) in converted.chunks_exact_mut(kc).zip(block.chunks_exact(k)) {
                for (t, &x) in to.iter_mut().zip(&from[p0..p0 + kc]) {
                    *t = R::cast_from(x);
                }
            }
            let a = ArrayView2::from_shape((f, kc), &*converted).map_err(bad)?;
            block_product(a, &masks[p0..], k, m, rows)?;
        }
    }
    Ok(())
}

impl<R: MaskElement> MaskProduct for DenseProduct<R> {
    fn apply(&mut self, tile: &Tile<'_>, out: &mut [u8]) -> Result<(), CallError> {
        let cut = &*self.cut;
        let i = tile.scheme_index;
        if i >= cut.runs.len() {
            return Err(CallError::internal("unknown signal slice"));
        }
        let k = tile.sig.len();
        let m = cut.set.count;
        let out = rows_of::<R>(out)?;
        if cut.simd {
            let out = bytemuck::cast_slice_mut::<R, f32>(out);
            let masks = if simd::rows_kernel_for(m, tile.dtype != DType::F32) {
                SimdMasks::Transposed(cut.transposed(i))
            } else {
                SimdMasks::Stack(bytemuck::cast_slice::<R, f32>(cut.stack(i)))
            };
            if tile.dtype == DType::F32 {
                return dense_f32::<f32>(tile, k, masks, m, out);
            }
            if let Some(result) =
                with_fused_stored!(tile.dtype, S => Some(dense_f32::<S>(tile, k, masks, m, out)), None)
            {
                return result;
            }
        }
        let masks = cut.stack(i);
        if tile.dtype == R::DTYPE {
            return by_frame_blocks(tile_data::<R>(tile)?, k, m, out, |d, o| gemm(d, k, masks, m, o));
        }
        let scratch = &mut self.scratch;
        crate::with_inexact!(tile.dtype, I => {
            convert_then_gemm(tile_data::<I>(tile)?, k, masks, m, out, scratch)
        }, with_fused_stored!(tile.dtype, I => {
            convert_then_gemm(tile_data::<I>(tile)?, k, masks, m, out, scratch)
        }, Err(unsupported(tile.dtype))))
    }
}

/// Sparse masks cut to a tiling scheme: per slice a CSR matrix `(M, slice_len)`.
struct SparseCut<R> {
    count: usize,
    /// Per slice: row pointers (M + 1), column indices (in the slice), values.
    slices: Vec<(Vec<usize>, Vec<u32>, Vec<R>)>,
    /// The same masks cut dense, for tiles of integers, where the masks hold too many
    /// nonzeros for the gather to pay ([`dense_pays`]). Tiles of floats always take the
    /// sparse product: it leaves out the pixels outside the masks, so a NaN or an
    /// infinity there does not reach the result (`0 · NaN` is NaN), as in LiberTEM's
    /// sparse product; integers hold neither, and give the same sums either way.
    dense: Option<Arc<DenseCut<R>>>,
}

/// Whether the dense product beats the sparse one on `nonzeros` entries of `count`
/// masks of `frame_len` pixels. The gather costs one random read per entry, ~3 ns where
/// the entries are far apart (a cache line each), against the dense kernels' ~0.2 ns
/// per pixel while they are bound by reading the tile (up to ~16 masks, this machine's
/// AVX-512 kernel) and ~0.012 ns per pixel and mask beyond: the sparse product pays
/// below `frame_len · max(1, M / 16) / 16` entries. Measured (`masks` on the builtins
/// bench's 1 GiB uint16 file, 16 masks of random pixels, 2 threads): sparse 0.14 s /
/// dense 0.18 s at 0.1 % nonzero, 0.21 / 0.17 at 1 %, 0.41 / 0.17 at 10 %, and 16 dense
/// masks as CSR 20x slower than dense (docs/benchmarks.md "Sparse masks that are not").
fn dense_pays(nonzeros: usize, count: usize, frame_len: usize) -> bool {
    nonzeros.saturating_mul(16) > frame_len.saturating_mul((count / 16).max(1))
}

impl<R: MaskElement> SparseCut<R> {
    fn new(set: &Arc<MaskSet>, runs: Vec<SliceRuns>) -> Self {
        let (count, frame_len) = (set.count, set.frame_len);
        let values = set.values.as_slice::<R>().unwrap_or_default();
        let slices: Vec<(Vec<usize>, Vec<u32>, Vec<R>)> = runs
            .iter()
            .map(|r| {
                let mut indptr = vec![0];
                let (mut indices, mut data) = (Vec::new(), Vec::new());
                for m in 0..count {
                    let mask = &values[m * frame_len..(m + 1) * frame_len];
                    for (k, &start) in r.starts.iter().enumerate() {
                        for i in 0..r.run_len {
                            let v = mask[start + i];
                            if v != R::zero() {
                                indices.push((k * r.run_len + i) as u32);
                                data.push(v);
                            }
                        }
                    }
                    indptr.push(indices.len());
                }
                (indptr, indices, data)
            })
            .collect();
        // The slices cover the frame once: their entries are the masks' nonzeros.
        let nonzeros = slices.iter().map(|(_, indices, _)| indices.len()).sum();
        let dense = dense_pays(nonzeros, count, frame_len).then(|| Arc::new(DenseCut::new(set.clone(), runs)));
        SparseCut { count, slices, dense }
    }
}

impl<R: MaskElement> SharedCut for SparseCut<R> {
    fn product(self: Arc<Self>) -> Box<dyn MaskProduct> {
        let dense = self.dense.clone().map(|cut| DenseProduct { cut, scratch: Vec::new() });
        Box::new(SparseProduct { cut: self, dense })
    }
}

/// A partition's product with sparse masks, and with them dense for integer tiles
/// where that pays.
struct SparseProduct<R> {
    cut: Arc<SparseCut<R>>,
    dense: Option<DenseProduct<R>>,
}

/// `out[f, mask] += Σ values · frame[indices]` over the CSR rows, each tile element
/// converted to `R` as it is read.
fn sparse_rows<I: Copy, R: MaskElement + CastFrom<I>>(
    data: &[I],
    k: usize,
    (indptr, indices, values): &(Vec<usize>, Vec<u32>, Vec<R>),
    m: usize,
    out: &mut [R],
) {
    for (frame, row) in data.chunks_exact(k).zip(out.chunks_exact_mut(m)) {
        for (mask, acc) in row.iter_mut().enumerate() {
            let range = indptr[mask]..indptr[mask + 1];
            let mut sum = R::zero();
            for (&i, &v) in indices[range.clone()].iter().zip(&values[range]) {
                sum = sum + v * R::cast_from(frame[i as usize]);
            }
            *acc = *acc + sum;
        }
    }
}

impl<R: MaskElement> MaskProduct for SparseProduct<R> {
    fn apply(&mut self, tile: &Tile<'_>, out: &mut [u8]) -> Result<(), CallError> {
        if let Some(dense) = &mut self.dense
            && matches!(tile.dtype.kind(), Kind::Unsigned | Kind::Signed)
        {
            return dense.apply(tile, out);
        }
        let csr = self.cut.slices.get(tile.scheme_index).ok_or_else(|| CallError::internal("unknown signal slice"))?;
        let k = tile.sig.len();
        let m = self.cut.count;
        let out = rows_of::<R>(out)?;
        if m == 0 || k == 0 {
            return Ok(());
        }
        crate::with_inexact!(tile.dtype, I => {
            sparse_rows(tile_data::<I>(tile)?, k, csr, m, out);
            Ok(())
        }, with_fused_stored!(tile.dtype, I => {
            sparse_rows(tile_data::<I>(tile)?, k, csr, m, out);
            Ok(())
        }, Err(unsupported(tile.dtype))))
    }
}

/// A partition of any mask-based built-in: the product into a nav buffer `(frames, M)`.
pub struct MasksPartition {
    product: Box<dyn MaskProduct>,
    buffer: Option<NdArray>,
    name: String,
    count: usize,
    origin: u64,
    dtype_size: usize,
}

impl MasksPartition {
    /// A runner applying `masks` (already in the buffer's dtype; the run's, from
    /// [`MaskRun::masks`]) into nav buffer `name` of shape `(frames, ..extra)` with `M`
    /// elements per frame, on `run`'s cut of them for this partition's tiling.
    ///
    /// # Errors
    /// Invalid data if the masks' dtype is not float or complex.
    pub fn new(
        ctx: &InitContext<'_>,
        run: &MaskRun,
        masks: &Arc<MaskSet>,
        name: &str,
        extra_shape: &[usize],
    ) -> Result<Self, CallError> {
        let (origin, frames) = ctx.partition.map_or((0, ctx.dataset.frames()), |p| (p.origin, p.frames));
        let sig = &ctx.dataset.sig_shape;
        let full = [SigSlice::full(sig)];
        let slices = ctx.partition.map_or(&full[..], |p| &p.tiling.slices[..]);
        let product = run.product(masks, sig, slices)?;
        let mut shape = vec![frames];
        shape.extend_from_slice(extra_shape);
        let dtype = masks.values.dtype();
        Ok(MasksPartition {
            product,
            buffer: Some(NdArray::zeros(dtype, &shape)),
            name: name.to_owned(),
            count: masks.count,
            origin,
            dtype_size: dtype.size(),
        })
    }
}

impl PartitionRunner for MasksPartition {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let buffer = self.buffer.as_mut().ok_or_else(|| CallError::internal("process after export"))?;
        let first =
            tile.origin.checked_sub(self.origin).ok_or_else(|| CallError::internal("tile before partition"))? as usize;
        let row = self.count * self.dtype_size;
        let out = buffer
            .bytes_mut()
            .get_mut(first * row..(first + tile.frames) * row)
            .ok_or_else(|| CallError::internal("tile beyond partition"))?;
        self.product.apply(tile, out)
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let array = self.buffer.take().ok_or_else(|| CallError::internal("exported twice"))?;
        Ok(vec![NamedBuffer { name: self.name.clone(), array }])
    }
}

/// The result dtype of applying masks of `mask_dtype` to `input`: float or complex.
///
/// # Errors
/// Invalid data for inputs masks cannot be applied to (integers kept native by another
/// UDF of the run, bool).
pub fn result_dtype(input: DType, mask_dtype: DType) -> Result<DType, CallError> {
    let d = result_type(input, mask_dtype);
    match d.kind() {
        Kind::Float | Kind::Complex => Ok(d),
        _ => Err(CallError::invalid_data(format!(
            "masks of {mask_dtype} cannot be applied to {input} input in float arithmetic; give preferred_dtype or mask_dtype float32"
        ))),
    }
}

/// Parse `use_sparse`: `auto` (the masks' own form: dense arrays stay dense), `true`
/// or a sparse format name (CSR), `false`.
///
/// # Errors
/// Any other value.
pub fn parse_use_sparse(params: &Params) -> Result<Option<bool>, CallError> {
    let text = spec::get_text(params, "use_sparse")?;
    match text.trim().to_ascii_lowercase().as_str() {
        "" | "auto" | "none" => Ok(None),
        "true" | "1" | "yes" | "scipy.sparse" | "scipy.sparse.csc" | "sparse.pydata" | "csr" => Ok(Some(true)),
        "false" | "0" | "no" => Ok(Some(false)),
        _ => Err(CallError::bad_param(format!(
            "parameter 'use_sparse' must be auto, true or false (or a sparse format name), got '{text}'"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocked_products_equal_plain_dot_products() {
        // More frames and pixels than one block, ragged at both ends.
        let (frames, k, m) = (GEMM_FRAMES * 2 + 3, GEMM_PIXELS + 77, 5);
        let data: Vec<f64> = (0..frames * k).map(|i| ((i * 31) % 17) as f64 - 8.0).collect();
        let masks: Vec<f64> = (0..m * k).map(|i| ((i * 13) % 11) as f64 / 4.0).collect();
        let mut out = vec![1.0; frames * m];
        gemm(&data, k, &masks, m, &mut out).unwrap();
        for f in 0..frames {
            for j in 0..m {
                let expected: f64 = 1.0 + (0..k).map(|p| data[f * k + p] * masks[j * k + p]).sum::<f64>();
                assert_eq!(out[f * m + j], expected, "frame {f}, mask {j}");
            }
        }
        let ints: Vec<i16> = data.iter().map(|&v| v as i16).collect();
        let mut converted = vec![1.0; frames * m];
        convert_then_gemm(&ints, k, &masks, m, &mut converted, &mut Vec::new()).unwrap();
        assert_eq!(converted, out, "converted blocks");
        let mut one = vec![0.0; frames];
        gemm(&data, k, &masks[..k], 1, &mut one).unwrap();
        for f in 0..frames {
            let expected: f64 = (0..k).map(|p| data[f * k + p] * masks[p]).sum();
            assert_eq!(one[f], expected, "frame {f}, one mask");
        }
    }

    fn dataset(sig: &[usize], input: DType) -> DatasetMeta {
        DatasetMeta {
            nav_shape: vec![4],
            sig_shape: sig.to_vec(),
            dataset_dtype: input,
            input_dtype: input,
            roi_count: None,
            device_class: crate::udf::DeviceClass::Cpu,
            threads_per_worker: 1,
        }
    }

    fn array_params(values: Vec<f32>, shape: &[usize]) -> Params {
        let array = Arc::new(NdArray::from_vec(shape, values).unwrap());
        Params(vec![
            crate::udf::Param { name: "masks".into(), value: ParamValue::Array(array) },
            crate::udf::Param { name: "cx".into(), value: ParamValue::Float(f64::NAN) },
        ])
    }

    #[test]
    fn a_runs_partitions_share_one_copy_of_its_masks_and_cuts() {
        let sig = [3, 4];
        let params = array_params((0..24).map(|v| v as f32).collect(), &[2, 3, 4]);
        let meta = dataset(&sig, DType::F32);
        fn ctx<'a>(params: &'a Params, dataset: &'a DatasetMeta) -> InitContext<'a> {
            InitContext { params, dataset, partition: None }
        }
        let made = std::cell::Cell::new(0);
        let make = || {
            made.set(made.get() + 1);
            let Some(ParamValue::Array(a)) = params.get("masks") else { unreachable!() };
            MaskSet::new(a, &sig, DType::F32, false, "masks")
        };
        let registry = MaskRun::default();
        let run = registry.for_run().expect("a run's state");
        assert!(run.for_run().is_none(), "a run's copy serves its run");

        let first = run.masks(&ctx(&params, &meta), make).unwrap();
        // Masks given in the result dtype are the parameter's array itself; others a copy.
        let Some(ParamValue::Array(given)) = params.get("masks") else { unreachable!() };
        assert!(Arc::ptr_eq(&first.values, given));
        let converted = MaskSet::new(given, &sig, DType::F64, false, "masks").unwrap();
        assert!(!Arc::ptr_eq(&converted.values, given));
        assert_eq!(converted.values.as_slice::<f64>().unwrap(), (0..24).map(f64::from).collect::<Vec<_>>());
        // Another partition: its own params, the arrays shared (as the executor gives them).
        let again = run.masks(&ctx(&params.clone(), &meta), make).unwrap();
        assert!(Arc::ptr_eq(&first, &again));
        // Equal bytes in another array, a NaN float param: the same values.
        let equal = array_params((0..24).map(|v| v as f32).collect(), &[2, 3, 4]);
        assert!(Arc::ptr_eq(&first, &run.masks(&ctx(&equal, &meta), make).unwrap()));
        assert_eq!(made.get(), 1);
        // Other masks, or another dataset: made anew.
        let other = array_params((0..24).map(|v| v as f32 + 1.0).collect(), &[2, 3, 4]);
        assert!(!Arc::ptr_eq(&first, &run.masks(&ctx(&other, &meta), make).unwrap()));
        assert!(!Arc::ptr_eq(&first, &run.masks(&ctx(&params, &dataset(&sig, DType::F64)), make).unwrap()));
        assert_eq!(made.get(), 3);
        // The registry's instance makes them each time.
        registry.masks(&ctx(&params, &meta), make).unwrap();
        registry.masks(&ctx(&params, &meta), make).unwrap();
        assert_eq!(made.get(), 5);

        // Cuts: one per tiling scheme, for the masks made last.
        let set = run.masks(&ctx(&params, &meta), make).unwrap();
        let whole = [SigSlice::full(&sig)];
        let rows =
            [SigSlice { origin: vec![0, 0], shape: vec![2, 4] }, SigSlice { origin: vec![2, 0], shape: vec![1, 4] }];
        for slices in [&whole[..], &rows, &whole, &rows] {
            run.product(&set, &sig, slices).unwrap();
        }
        let cuts = |run: &MaskRun| run.0.as_ref().unwrap().lock().unwrap().as_ref().unwrap().cuts.len();
        assert_eq!(cuts(&run), 2);
        // Masks not the run's (made elsewhere): cut for the partition alone.
        let stranger = Arc::new(make().unwrap());
        run.product(&stranger, &sig, &whole).unwrap();
        assert_eq!(cuts(&run), 2);
    }

    /// `Σ_p frame[f, p] · mask[m, p]` over whole frames, in f64.
    fn plain_products(frames: &[f64], masks: &[f64], pixels: usize) -> Vec<f64> {
        let count = masks.len() / pixels;
        frames
            .chunks_exact(pixels)
            .flat_map(|frame| {
                (0..count).map(move |m| (0..pixels).map(|p| frame[p] * masks[m * pixels + p]).sum::<f64>())
            })
            .collect()
    }

    /// The elements of `frames` (`(n, ..sig)` C order) in `slice`, `(n, slice_len)`.
    fn gather<T: Copy>(frames: &[T], sig: &[usize], slice: &SigSlice) -> Vec<T> {
        let pixels: usize = sig.iter().product();
        let runs = SliceRuns::new(sig, slice);
        frames
            .chunks_exact(pixels)
            .flat_map(|frame| runs.starts.iter().flat_map(|&s| frame[s..s + runs.run_len].to_vec()).collect::<Vec<_>>())
            .collect()
    }

    /// Tiles of every slice of a scheme, through one run's shared cut (whole-frame,
    /// row blocks: one run per slice, column blocks: a run per row), agree with plain
    /// products over whole frames: dense float32 masks on both kernels (1, 5 and 17
    /// masks) and the portable product (float64 masks), sparse masks; float32 and
    /// uint16 tiles.
    #[test]
    fn cut_tiles_give_the_products_of_whole_frames() {
        let sig = [7, 10];
        let pixels = 70;
        let frames = 9;
        let data: Vec<u16> = (0..frames * pixels).map(|i| ((i * 37) % 17) as u16).collect();
        let schemes: Vec<Vec<SigSlice>> = vec![
            vec![SigSlice::full(&sig)],
            vec![
                SigSlice { origin: vec![0, 0], shape: vec![3, 10] },
                SigSlice { origin: vec![3, 0], shape: vec![4, 10] },
            ],
            vec![
                SigSlice { origin: vec![0, 0], shape: vec![7, 4] },
                SigSlice { origin: vec![0, 4], shape: vec![7, 3] },
                SigSlice { origin: vec![0, 7], shape: vec![7, 3] },
            ],
        ];
        for (count, mask_dtype, sparse) in [
            (1, DType::F32, false),
            (5, DType::F32, false),
            (17, DType::F32, false),
            (5, DType::F64, false),
            (5, DType::F32, true),
        ] {
            // Quarters and zeros: every sum is exact in float32.
            let values: Vec<f32> =
                (0..count * pixels).map(|i| if i % 3 == 0 { 0.0 } else { ((i * 13) % 11) as f32 / 4.0 }).collect();
            let params = array_params(values.clone(), &[count, 7, 10]);
            let masks64: Vec<f64> = values.iter().map(|&v| f64::from(v)).collect();
            let frames64: Vec<f64> = data.iter().map(|&v| f64::from(v)).collect();
            let expected = plain_products(&frames64, &masks64, pixels);
            for tile_dtype in [DType::F32, DType::U16] {
                let meta = dataset(&sig, DType::F32);
                let run = MaskRun::default().for_run().unwrap();
                let ctx = InitContext { params: &params, dataset: &meta, partition: None };
                let set = run
                    .masks(&ctx, || {
                        let Some(ParamValue::Array(a)) = params.get("masks") else { unreachable!() };
                        MaskSet::new(a, &sig, mask_dtype, sparse, "masks")
                    })
                    .unwrap();
                for slices in &schemes {
                    // Two partitions on one scheme: the second on the cut the first made.
                    for _ in 0..2 {
                        let mut product = run.product(&set, &sig, slices).unwrap();
                        let mut out = NdArray::zeros(mask_dtype, &[frames, count]);
                        for (index, slice) in slices.iter().enumerate() {
                            let floats: Vec<f32> = data.iter().map(|&v| f32::from(v)).collect();
                            let bytes: Vec<u8> = match tile_dtype {
                                DType::F32 => bytemuck::cast_slice(&gather(&floats, &sig, slice)).to_vec(),
                                _ => bytemuck::cast_slice(&gather(&data, &sig, slice)).to_vec(),
                            };
                            let tile_values =
                                NdArray::from_bytes(tile_dtype, &[bytes.len() / tile_dtype.size()], &bytes).unwrap();
                            let indices: Vec<u64> = (0..frames as u64).collect();
                            let tile = Tile {
                                origin: 0,
                                frames,
                                scheme_index: index,
                                sig: slice,
                                true_nav_indices: &indices,
                                dtype: tile_dtype,
                                data: tile_values.bytes(),
                            };
                            product.apply(&tile, out.bytes_mut()).unwrap();
                        }
                        let got: Vec<f64> = match mask_dtype {
                            DType::F32 => out.as_slice::<f32>().unwrap().iter().map(|&v| f64::from(v)).collect(),
                            _ => out.as_slice::<f64>().unwrap().to_vec(),
                        };
                        assert_eq!(
                            got, expected,
                            "{count} {mask_dtype} masks (sparse {sparse}) on {tile_dtype} tiles, slices {slices:?}"
                        );
                    }
                }
            }
        }
    }

    /// Sparse masks with many nonzeros go dense on integer tiles (same sums), stay
    /// sparse on float tiles: a NaN outside the masks stays out of the result there, as
    /// in LiberTEM's sparse product (dense masks give NaN, `0 · NaN`).
    #[test]
    fn sparse_masks_go_dense_only_where_nothing_changes() {
        let sig = [4, 8];
        let slices = [SigSlice::full(&sig)];
        let runs = || SliceRuns::for_scheme(&sig, &slices);
        // A ring-like mask: half the pixels; and one pixel.
        let half = Arc::new(MaskSet::from_fn_f32(1, 4, 8, true, |_, y, x| ((y + x) % 2) as f32));
        let point = Arc::new(MaskSet::from_fn_f32(1, 4, 8, true, |_, y, x| f32::from(u8::from(y == 1 && x == 2))));
        assert!(SparseCut::<f32>::new(&half, runs()).dense.is_some());
        assert!(SparseCut::<f32>::new(&point, runs()).dense.is_none());
        assert!(dense_pays(32 * 16 / 16 + 1, 16, 32) && !dense_pays(32 / 16, 16, 32));
        assert!(dense_pays(64 * 2 + 1, 512, 64) && !dense_pays(64 * 2, 512, 64), "beyond 16 masks: per mask");

        let frames = 3;
        let indices: Vec<u64> = (0..frames as u64).collect();
        let apply = |set: &Arc<MaskSet>, dtype: DType, bytes: &[u8]| {
            let mut product = set.cut(&sig, &slices).unwrap().product();
            let mut out = NdArray::zeros(DType::F32, &[frames, 1]);
            let tile = Tile {
                origin: 0,
                frames,
                scheme_index: 0,
                sig: &slices[0],
                true_nav_indices: &indices,
                dtype,
                data: bytes,
            };
            product.apply(&tile, out.bytes_mut()).unwrap();
            out.as_slice::<f32>().unwrap().to_vec()
        };
        let ints: Vec<u16> = (0..frames * 32).map(|i| (i % 13) as u16).collect();
        let expected: Vec<f32> = ints
            .chunks_exact(32)
            .map(|f| f.iter().enumerate().filter(|(p, _)| (p / 8 + p % 8) % 2 == 1).map(|(_, &v)| f32::from(v)).sum())
            .collect();
        assert_eq!(apply(&half, DType::U16, bytemuck::cast_slice(&ints)), expected, "dense on uint16");
        // A NaN where the mask is 0 (pixel 0 of each frame) in float32 tiles.
        let mut floats: Vec<f32> = ints.iter().map(|&v| f32::from(v)).collect();
        for f in 0..frames {
            floats[f * 32] = f32::NAN;
        }
        assert_eq!(apply(&half, DType::F32, bytemuck::cast_slice(&floats)), expected, "sparse on float32");
        let dense = Arc::new(MaskSet { sparse: false, ..(*half).clone() });
        assert!(apply(&dense, DType::F32, bytemuck::cast_slice(&floats)).iter().all(|v| v.is_nan()), "dense masks");
    }
}
