//! `stddev`: per-pixel sum, variance, standard deviation and mean in one pass
//! (LiberTEM's `StdDevUDF`, BUILTINS.md §3).
//!
//! | buffer | kind | dtype | use |
//! |--------|------|-------|-----|
//! | `varsum` | sig | base | normal |
//! | `num_frames` | single | int64 | normal |
//! | `sum` | sig | `result_type(input, base)` | normal |
//! | `var`, `std` | sig | base | result-only |
//! | `mean` | sig | `result_type(input, base)` | result-only |
//!
//! `base` is the `dtype` parameter (default float64). Every block of frames is reduced
//! to `(n, S, V)` (count, sum, sum of squared deviations from the block mean) with two
//! passes over data in cache — for real input the host arrays' variance passes
//! (`arrays::reduce`'s `add_block_rows` and `add_block_squared_deviations`: four frames
//! per pass, AVX-512 or AVX2 where the CPU has them, frame after frame as a plain loop adds) — and
//! merged pairwise (Chan et al.; Schubert & Gertz 2018):
//! `V = V0 + V1 + n0·n1/n · |S1/n1 − S0/n0|²` — the same formula merges partitions.
//! Never `Σx² − (Σx)²/n`. Accumulators are `f64` whatever the base.

use super::element::{FusedInt, tile_data, with_fused_stored};
use super::kernels::{CHUNK, SliceRuns};
use super::spec;
use crate::array::NdArray;
use crate::arrays::element::CastTo;
use crate::arrays::reduce::{add_block_rows, add_block_squared_deviations};
use crate::dtype::{CastFrom, DType, Kind, result_type};
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, BufferViewMut, CallError, DatasetMeta, Description, DeviceClass, InitContext,
    MergeContext, NamedBuffer, Params, PartitionRunner, ResultEntry, ResultsContext, RunPlan, Tile, Udf,
};
use num_complex::{Complex32, Complex64};

/// Frames reduced at once before merging into the running state: their column block
/// (`BLOCK_FRAMES × CHUNK` elements) stays in L2 for the second pass.
const BLOCK_FRAMES: usize = 32;

/// LiberTEM's `StdDevUDF`.
pub struct StdDev {
    description: Description,
}

impl Default for StdDev {
    fn default() -> Self {
        let mut d = spec::describe("stddev", "Per-pixel sum, variance, std and mean (LiberTEM StdDevUDF)");
        d.params.push(spec::text("dtype", "base dtype of varsum/var/std: float32 or float64", Some("float64")));
        d.custom_merge = true;
        d.custom_results = true;
        StdDev { description: d }
    }
}

fn base_dtype(params: &Params) -> Result<DType, CallError> {
    match spec::get_dtype(params, "dtype")?.unwrap_or(DType::F64) {
        d @ (DType::F32 | DType::F64) => Ok(d),
        other => Err(CallError::bad_param(format!("parameter 'dtype' must be float32 or float64, got {other}"))),
    }
}

/// Dtypes of (`varsum`/`var`/`std`, `sum`/`mean`).
fn dtypes(params: &Params, dataset: &DatasetMeta) -> Result<(DType, DType), CallError> {
    let base = base_dtype(params)?;
    let sum = result_type(dataset.input_dtype, base);
    if !matches!(sum.kind(), Kind::Float | Kind::Complex) {
        return Err(CallError::invalid_data(format!("stddev cannot use {} input", dataset.input_dtype)));
    }
    Ok((base, sum))
}

fn decl(name: &str, kind: BufferKind, dtype: DType, extra: &[usize], usage: BufferUse) -> BufferDecl {
    BufferDecl { name: name.to_owned(), kind, dtype, extra_shape: extra.to_vec(), usage }
}

impl Udf for StdDev {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:stddev"
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn converts_on_read(&self) -> bool {
        true
    }

    fn plan(&self, params: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        base_dtype(params)?;
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        let (base, sum) = dtypes(params, dataset)?;
        Ok(vec![
            decl("varsum", BufferKind::Sig, base, &[], BufferUse::Normal),
            decl("num_frames", BufferKind::Single, DType::I64, &[], BufferUse::Normal),
            decl("sum", BufferKind::Sig, sum, &[], BufferUse::Normal),
            decl("var", BufferKind::Sig, base, &[], BufferUse::ResultOnly),
            decl("std", BufferKind::Sig, base, &[], BufferUse::ResultOnly),
            decl("mean", BufferKind::Sig, sum, &[], BufferUse::ResultOnly),
        ])
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let (base, sum) = dtypes(ctx.params, ctx.dataset)?;
        if ctx.dataset.device_class == DeviceClass::Cuda {
            return crate::cuda::start(&ctx, crate::cuda::Request::StdDev { base, sum });
        }
        let sig = &ctx.dataset.sig_shape;
        let frame_len: usize = sig.iter().product();
        let runs = ctx.partition.map(|p| SliceRuns::for_scheme(sig, &p.tiling.slices)).unwrap_or_default();
        Ok(Box::new(StdDevPartition {
            base,
            sum_dtype: sum,
            sig: sig.clone(),
            complex: sum.kind() == Kind::Complex,
            counts: vec![0; runs.len()],
            runs,
            state: Moments::zeros(frame_len, sum.kind() == Kind::Complex),
            block: Moments::zeros(CHUNK, true),
            means: (vec![0.0; CHUNK], vec![0.0; CHUNK]),
        }))
    }

    fn merge(&self, _: MergeContext<'_>, dest: &mut [BufferViewMut<'_>], src: &[NamedBuffer]) -> Result<(), CallError> {
        let find = |name: &str| {
            src.iter().find(|b| b.name == name).ok_or_else(|| CallError::internal(format!("merge: no '{name}'")))
        };
        let n1 = read_count(&find("num_frames")?.array)?;
        let s1 = read_values(&find("sum")?.array)?;
        let v1 = read_values(&find("varsum")?.array)?;
        let [count, sum, varsum] = pick_three(dest, ["num_frames", "sum", "varsum"])?;
        let n0 = count_of(count)?;
        if n1 == 0 {
            return Ok(());
        }
        let complex = sum.dtype.kind() == Kind::Complex;
        let (mut sr, mut si) = view_values(sum)?;
        let (mut vs, _) = view_values(varsum)?;
        let im0 = if complex { &mut si[..] } else { &mut [][..] };
        let im1: &[f64] = if complex { &s1.1 } else { &[] };
        merge_moments((&mut sr, im0, &mut vs), n0, (&s1.0, im1, &v1.0), n1);
        write_values(sum, &sr, &si)?;
        write_values(varsum, &vs, &[])?;
        let total = i64::try_from(n0 + n1).map_err(|_| CallError::internal("frame count overflow"))?;
        count.bytes.copy_from_slice(&total.to_ne_bytes());
        Ok(())
    }

    fn get_results(&self, ctx: ResultsContext<'_>, buffers: &[NamedBuffer]) -> Result<Vec<ResultEntry>, CallError> {
        let (base, sum_dtype) = dtypes(ctx.params, ctx.dataset)?;
        let find = |name: &str| {
            buffers.iter().find(|b| b.name == name).ok_or_else(|| CallError::internal(format!("results: no '{name}'")))
        };
        let n = read_count(&find("num_frames")?.array)? as f64;
        let (sr, si) = read_values(&find("sum")?.array)?;
        let (vs, _) = read_values(&find("varsum")?.array)?;
        let shape = find("sum")?.array.shape().to_vec();
        let var: Vec<f64> = vs.iter().map(|v| v / n).collect();
        let std: Vec<f64> = var.iter().map(|v| v.sqrt()).collect();
        let mean_re: Vec<f64> = sr.iter().map(|s| s / n).collect();
        let mean_im: Vec<f64> = si.iter().map(|s| s / n).collect();
        let entry = |name: &str, dtype, re: &[f64], im: &[f64]| -> Result<ResultEntry, CallError> {
            let mut array = NdArray::zeros(dtype, &shape);
            write_bytes(array.bytes_mut(), dtype, re, im)?;
            Ok(ResultEntry { name: name.to_owned(), array, valid: None })
        };
        let zeros = vec![0.0; var.len()];
        Ok(vec![
            entry("var", base, &var, &zeros)?,
            entry("std", base, &std, &zeros)?,
            entry("mean", sum_dtype, &mean_re, &mean_im)?,
        ])
    }
}

/// Per-pixel moments: sums (real, imaginary) and sums of squared deviations.
#[derive(Debug, Clone)]
struct Moments {
    sum_re: Vec<f64>,
    sum_im: Vec<f64>,
    varsum: Vec<f64>,
}

impl Moments {
    fn zeros(len: usize, complex: bool) -> Self {
        Moments {
            sum_re: vec![0.0; len],
            sum_im: if complex { vec![0.0; len] } else { Vec::new() },
            varsum: vec![0.0; len],
        }
    }
}

/// The pairwise merge of per-pixel moments: `dest` (`n0` frames) absorbs `src` (`n1`
/// frames). Each is (sums, imaginary sums — empty for real data, varsums).
fn merge_moments(dest: (&mut [f64], &mut [f64], &mut [f64]), n0: u64, src: (&[f64], &[f64], &[f64]), n1: u64) {
    let (s0, i0, v0) = dest;
    let (s1, i1, v1) = src;
    let complex = !i0.is_empty();
    if n1 == 0 {
        return;
    }
    if n0 == 0 {
        s0.copy_from_slice(&s1[..s0.len()]);
        v0.copy_from_slice(&v1[..v0.len()]);
        if complex {
            i0.copy_from_slice(&i1[..i0.len()]);
        }
        return;
    }
    let (n0f, n1f) = (n0 as f64, n1 as f64);
    let weight = n0f * n1f / (n0f + n1f);
    let (r0, r1) = (1.0 / n0f, 1.0 / n1f);
    for p in 0..s0.len() {
        let mut delta2 = (s1[p] * r1 - s0[p] * r0).powi(2);
        if complex {
            delta2 += (i1[p] * r1 - i0[p] * r0).powi(2);
            i0[p] += i1[p];
        }
        s0[p] += s1[p];
        v0[p] += v1[p] + weight * delta2;
    }
}

/// Elements stddev reads: real and imaginary parts as `f64`.
trait Parts: Copy {
    /// Whether the imaginary part can be non-zero.
    const COMPLEX: bool;
    fn parts(self) -> (f64, f64);
}

impl Parts for f32 {
    const COMPLEX: bool = false;
    #[inline(always)]
    fn parts(self) -> (f64, f64) {
        (f64::from(self), 0.0)
    }
}

impl Parts for f64 {
    const COMPLEX: bool = false;
    #[inline(always)]
    fn parts(self) -> (f64, f64) {
        (self, 0.0)
    }
}

// The input dtype of a run holds these exactly (float32 for 8/16 bits, float64 for 32),
// so converting straight to f64 gives the values the executor's copy would.
impl<T: FusedInt> Parts for T {
    const COMPLEX: bool = false;
    #[inline(always)]
    fn parts(self) -> (f64, f64) {
        (self.into(), 0.0)
    }
}

impl Parts for Complex32 {
    const COMPLEX: bool = true;
    #[inline(always)]
    fn parts(self) -> (f64, f64) {
        (f64::from(self.re), f64::from(self.im))
    }
}

impl Parts for Complex64 {
    const COMPLEX: bool = true;
    #[inline(always)]
    fn parts(self) -> (f64, f64) {
        (self.re, self.im)
    }
}

struct StdDevPartition {
    base: DType,
    sum_dtype: DType,
    sig: Vec<usize>,
    complex: bool,
    runs: Vec<SliceRuns>,
    /// Frames seen per signal slice (LiberTEM's counters per `tiling_scheme_idx`).
    counts: Vec<u64>,
    state: Moments,
    /// Scratch for one block's moments (`CHUNK` pixels).
    block: Moments,
    /// Scratch for one block's means (real, imaginary; `CHUNK` pixels).
    means: (Vec<f64>, Vec<f64>),
}

impl StdDevPartition {
    /// Reduce the block of `rows` (up to [`BLOCK_FRAMES`] frames of a signal slice) over
    /// the column block at slice offset `in_slice`, frame offset `in_frame`, `len`
    /// pixels, to its moments; merge them into the state, which holds `n0` frames.
    ///
    /// Two passes over the block in cache: the sums (row after row), then the squared
    /// deviations from the block's mean `sum · (1/n)` (row after row). Real inputs go
    /// through the host arrays' variance kernels (`var(axis=0)`: four rows per pass
    /// over the accumulators, AVX-512 or AVX2 where the CPU has them), which add in the same order.
    fn block<T: Parts + CastTo>(&mut self, rows: &[&[T]], n0: u64, block: (usize, usize, usize)) {
        let (in_slice, in_frame, len) = block;
        let inverse = 1.0 / rows.len() as f64;
        let b = &mut self.block;
        let (sum_re, sum_im, varsum) = (&mut b.sum_re[..len], &mut b.sum_im[..len], &mut b.varsum[..len]);
        let (mean_re, mean_im) = (&mut self.means.0[..len], &mut self.means.1[..len]);
        sum_re.fill(0.0);
        varsum.fill(0.0);
        if T::COMPLEX {
            let parts = || rows.iter().map(|frame| &frame[in_slice..in_slice + len]);
            sum_im.fill(0.0);
            for row in parts() {
                for ((r, i), &x) in sum_re.iter_mut().zip(sum_im.iter_mut()).zip(row) {
                    let (xr, xi) = x.parts();
                    *r += xr;
                    *i += xi;
                }
            }
            for (m, &s) in mean_re.iter_mut().zip(sum_re.iter()).chain(mean_im.iter_mut().zip(sum_im.iter())) {
                *m = s * inverse;
            }
            for row in parts() {
                for (((v, &mr), &mi), &x) in varsum.iter_mut().zip(mean_re.iter()).zip(mean_im.iter()).zip(row) {
                    let (xr, xi) = x.parts();
                    let (dr, di) = (xr - mr, xi - mi);
                    *v += dr * dr + di * di;
                }
            }
        } else {
            add_block_rows(sum_re, &mut [], rows, in_slice, false);
            for (m, &s) in mean_re.iter_mut().zip(sum_re.iter()) {
                *m = s * inverse;
            }
            add_block_squared_deviations(varsum, mean_re, rows, in_slice, false);
        }
        let state = &mut self.state;
        let range = in_frame..in_frame + len;
        let im = if self.complex { &mut state.sum_im[range.clone()] } else { &mut [][..] };
        let src_im: &[f64] = if self.complex { sum_im } else { &[] };
        merge_moments(
            (&mut state.sum_re[range.clone()], im, &mut state.varsum[range]),
            n0,
            (sum_re, src_im, varsum),
            rows.len() as u64,
        );
    }

    fn process_typed<T: Parts + CastTo + crate::dtype::Element>(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let data = tile_data::<T>(tile)?;
        // Taken out for the loop (no copy), so the blocks can update the state.
        let all_runs = std::mem::take(&mut self.runs);
        let Some(runs) = all_runs.get(tile.scheme_index) else {
            self.runs = all_runs;
            return Err(CallError::internal("unknown signal slice"));
        };
        let stride = runs.slice_len;
        let mut n0 = self.counts[tile.scheme_index];
        if stride > 0 {
            // The frames of a block, on the stack.
            let mut rows: [&[T]; BLOCK_FRAMES] = [&[]; BLOCK_FRAMES];
            for frames in data.chunks(BLOCK_FRAMES * stride) {
                let count = frames.len() / stride;
                for (row, frame) in rows.iter_mut().zip(frames.chunks_exact(stride)) {
                    *row = frame;
                }
                for block in runs.blocks_of(CHUNK) {
                    self.block(&rows[..count], n0, block);
                }
                n0 += count as u64;
            }
        }
        self.counts[tile.scheme_index] = n0;
        self.runs = all_runs;
        Ok(())
    }
}

impl PartitionRunner for StdDevPartition {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let dtype = tile.dtype;
        // Stored integers read unconverted (`converts_on_read`): exact in f64.
        crate::with_inexact!(dtype, T => self.process_typed::<T>(tile), with_fused_stored!(dtype, S => self.process_typed::<S>(tile),
            Err(CallError::invalid_data(format!("stddev cannot use {dtype} input")))))
    }

    fn postprocess(&mut self) -> Result<(), CallError> {
        if let Some(first) = self.counts.first()
            && self.counts.iter().any(|c| c != first)
        {
            return Err(CallError::internal(format!("signal slices saw different frame counts: {:?}", self.counts)));
        }
        Ok(())
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let n = i64::try_from(self.counts.first().copied().unwrap_or(0)).map_err(|_| CallError::internal("count"))?;
        let mut varsum = NdArray::zeros(self.base, &self.sig);
        write_bytes(varsum.bytes_mut(), self.base, &self.state.varsum, &[])?;
        let mut sum = NdArray::zeros(self.sum_dtype, &self.sig);
        write_bytes(sum.bytes_mut(), self.sum_dtype, &self.state.sum_re, &self.state.sum_im)?;
        let count = NdArray::from_vec(&[1], vec![n]).map_err(|e| CallError::internal(e.to_string()))?;
        Ok(vec![
            NamedBuffer { name: "varsum".into(), array: varsum },
            NamedBuffer { name: "num_frames".into(), array: count },
            NamedBuffer { name: "sum".into(), array: sum },
        ])
    }
}

/// Write `re` (and `im`, empty for zeros) as `dtype` elements.
fn write_bytes(bytes: &mut [u8], dtype: DType, re: &[f64], im: &[f64]) -> Result<(), CallError> {
    let im_at = |i: usize| im.get(i).copied().unwrap_or(0.0);
    let bad = || CallError::internal(format!("cannot write {dtype} values"));
    crate::with_inexact!(dtype, T => {
        let out: &mut [T] = bytemuck::try_cast_slice_mut(bytes).map_err(|_| bad())?;
        // Real dtypes keep the real part (NumPy's astype).
        out.iter_mut().zip(re).enumerate().for_each(|(i, (o, &r))| *o = T::cast_from(Complex64::new(r, im_at(i))));
        Ok(())
    }, Err(bad()))
}

/// Elements of a float or complex buffer as (real, imaginary) `f64`s.
fn values_of(bytes: &[u8], dtype: DType) -> Result<(Vec<f64>, Vec<f64>), CallError> {
    let bad = || CallError::internal(format!("cannot read {dtype} values"));
    crate::with_inexact!(dtype, T => {
        let v: &[T] = bytemuck::try_cast_slice(bytes).map_err(|_| bad())?;
        Ok(v.iter().map(|&x| Complex64::cast_from(x)).map(|c| (c.re, c.im)).unzip())
    }, Err(bad()))
}

fn read_values(array: &NdArray) -> Result<(Vec<f64>, Vec<f64>), CallError> {
    values_of(array.bytes(), array.dtype())
}

fn view_values(view: &BufferViewMut<'_>) -> Result<(Vec<f64>, Vec<f64>), CallError> {
    values_of(view.bytes, view.dtype)
}

fn write_values(view: &mut BufferViewMut<'_>, re: &[f64], im: &[f64]) -> Result<(), CallError> {
    write_bytes(view.bytes, view.dtype, re, im)
}

fn read_count(array: &NdArray) -> Result<u64, CallError> {
    let n =
        array.as_slice::<i64>().and_then(|s| s.first().copied()).ok_or_else(|| CallError::internal("num_frames"))?;
    u64::try_from(n).map_err(|_| CallError::internal(format!("num_frames is {n}")))
}

fn count_of(view: &BufferViewMut<'_>) -> Result<u64, CallError> {
    let bytes: [u8; 8] = (&*view.bytes).try_into().map_err(|_| CallError::internal("num_frames is not one int64"))?;
    u64::try_from(i64::from_ne_bytes(bytes)).map_err(|_| CallError::internal("negative num_frames"))
}

/// Three distinct buffers of `dest` by name.
fn pick_three<'a, 'b>(
    dest: &'a mut [BufferViewMut<'b>],
    names: [&str; 3],
) -> Result<[&'a mut BufferViewMut<'b>; 3], CallError> {
    let index = |name: &str, dest: &[BufferViewMut<'_>]| {
        dest.iter().position(|b| b.name == name).ok_or_else(|| CallError::internal(format!("merge: no '{name}'")))
    };
    let idx = [index(names[0], dest)?, index(names[1], dest)?, index(names[2], dest)?];
    dest.get_disjoint_mut(idx).map_err(|e| CallError::internal(format!("merge buffers: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udf::{Method, Param, ParamValue, PartitionMeta, SigSlice, TilingScheme};
    use std::sync::Arc;

    /// Per pixel the frames' sum and sum of squared deviations from their mean, by a
    /// plain f64 loop: the sum frame after frame, the mean as the built-in forms it
    /// (`sum · (1/n)`, BUILTINS.md §3's block mean), then the squared deviations frame
    /// after frame. `frames` is `(n, pixels)` in C order.
    fn plain_moments(frames: &[f64], pixels: usize) -> (Vec<f64>, Vec<f64>) {
        let n = frames.len() / pixels;
        let mut sums = vec![0.0; pixels];
        for frame in frames.chunks_exact(pixels) {
            for (s, &x) in sums.iter_mut().zip(frame) {
                *s += x;
            }
        }
        let inverse = 1.0 / n as f64;
        let means: Vec<f64> = sums.iter().map(|s| s * inverse).collect();
        let mut varsums = vec![0.0; pixels];
        for frame in frames.chunks_exact(pixels) {
            for ((v, &m), &x) in varsums.iter_mut().zip(&means).zip(frame) {
                let d = x - m;
                *v += d * d;
            }
        }
        (sums, varsums)
    }

    /// `(sum, varsum, num_frames)` of the built-in over one partition of `n` frames
    /// of `sig`, given as one tile of the element type `T` (the file's, `dataset`).
    fn built_in_moments<T: crate::dtype::Element>(
        values: &[T],
        sig: &[usize],
        dataset: DType,
    ) -> (Vec<f64>, Vec<f64>, i64) {
        let pixels: usize = sig.iter().product();
        let frames = values.len() / pixels;
        let udf = StdDev::default();
        let params = Params(vec![Param { name: "dtype".into(), value: ParamValue::Text("float64".into()) }]);
        // Stored 8- and 16-bit integers are read as float32 (the run's input dtype).
        let input_dtype = if T::DTYPE.kind() == Kind::Float { T::DTYPE } else { DType::F32 };
        let meta = DatasetMeta {
            nav_shape: vec![frames],
            sig_shape: sig.to_vec(),
            dataset_dtype: dataset,
            input_dtype,
            roi_count: None,
            device_class: DeviceClass::Cpu,
            threads_per_worker: 1,
        };
        let tiling = Arc::new(TilingScheme::from_tile_shape(frames, sig, sig, Method::Tile));
        let partition = PartitionMeta { index: 0, origin: 0, frames, method: Method::Tile, tiling };
        let mut runner =
            udf.start(InitContext { params: &params, dataset: &meta, partition: Some(&partition) }).unwrap();
        let indices: Vec<u64> = (0..frames as u64).collect();
        let slice = SigSlice::full(sig);
        let tile = Tile {
            origin: 0,
            frames,
            scheme_index: 0,
            sig: &slice,
            true_nav_indices: &indices,
            dtype: T::DTYPE,
            data: bytemuck::cast_slice(values),
        };
        runner.process(&tile).unwrap();
        let buffers = runner.export().unwrap();
        let get = |name: &str| buffers.iter().find(|b| b.name == name).unwrap().array.clone();
        let f64s = |name: &str| get(name).as_slice::<f64>().unwrap().to_vec();
        (f64s("sum"), f64s("varsum"), get("num_frames").as_slice::<i64>().unwrap()[0])
    }

    /// One block of frames (1 to [`BLOCK_FRAMES`]) over frames of pixel counts that are
    /// no multiple of 4 or 8, within one column block and over one and a bit ([`CHUNK`] + 273),
    /// float32 and float64 with magnitudes from 1e-4 to 4e9 in every pixel (so that the
    /// order of the additions shows in the last bits of the sums) and stored uint16,
    /// int16 and uint8: the built-in's sums and varsums equal a plain two-pass loop's to
    /// the last bit. More frames than a block are merged pairwise (Chan et al.), a
    /// different order: close to the same loop over all frames.
    #[test]
    fn block_moments_match_a_plain_two_pass_loop() {
        let same = |got: &[f64], expected: &[f64], what: &str| {
            assert_eq!(got.len(), expected.len(), "{what}");
            for (p, (&g, &e)) in got.iter().zip(expected).enumerate() {
                assert_eq!(g.to_bits(), e.to_bits(), "{what}, pixel {p}: {g} != {e}");
            }
        };
        let close = |got: &[f64], expected: &[f64], what: &str| {
            for (p, (&g, &e)) in got.iter().zip(expected).enumerate() {
                assert!((g - e).abs() <= 1e-12 * e.abs().max(1.0), "{what}, pixel {p}: {g} != {e}");
            }
        };
        let shapes: [&[usize]; 4] = [&[1, 1], &[3, 7], &[5, 13], &[17, 257]];
        for sig in shapes {
            let pixels: usize = sig.iter().product();
            for frames in [1, 2, 3, 4, 5, 7, 9, BLOCK_FRAMES - 1, BLOCK_FRAMES, BLOCK_FRAMES + 3, 2 * BLOCK_FRAMES + 5]
            {
                let what = |dtype: &str| format!("{dtype}, {frames} frames of {sig:?}");
                let check = |got: (Vec<f64>, Vec<f64>, i64), wide: &[f64], what: String| {
                    let (sums, varsums) = plain_moments(wide, pixels);
                    assert_eq!(got.2, frames as i64, "{what}");
                    if frames <= BLOCK_FRAMES {
                        same(&got.0, &sums, &format!("sum, {what}"));
                        same(&got.1, &varsums, &format!("varsum, {what}"));
                    } else {
                        close(&got.0, &sums, &format!("sum, {what}"));
                        close(&got.1, &varsums, &format!("varsum, {what}"));
                    }
                };
                let n = frames * pixels;
                let scale = |i: usize| [1.0, 4.1e9, 1.3e-4][(i / pixels + i % pixels) % 3];
                let floats: Vec<f32> = (0..n)
                    .map(|i| (((i * 7919) % 1013) as f32 * 0.37 - 150.0 + (i / pixels) as f32) * scale(i) as f32)
                    .collect();
                let wide: Vec<f64> = floats.iter().map(|&v| f64::from(v)).collect();
                check(built_in_moments(&floats, sig, DType::F32), &wide, what("float32"));
                let doubles: Vec<f64> = wide.iter().enumerate().map(|(i, v)| v * (1.0 + 1e-9 * i as f64)).collect();
                check(built_in_moments(&doubles, sig, DType::F64), &doubles, what("float64"));
                let u16s: Vec<u16> = (0..n).map(|i| ((i * 40503) % 65536) as u16).collect();
                let wide: Vec<f64> = u16s.iter().map(|&v| f64::from(v)).collect();
                check(built_in_moments(&u16s, sig, DType::U16), &wide, what("uint16"));
                let i16s: Vec<i16> = u16s.iter().map(|&v| v as i16).collect();
                let wide: Vec<f64> = i16s.iter().map(|&v| f64::from(v)).collect();
                check(built_in_moments(&i16s, sig, DType::I16), &wide, what("int16"));
                let u8s: Vec<u8> = u16s.iter().map(|&v| v as u8).collect();
                let wide: Vec<f64> = u8s.iter().map(|&v| f64::from(v)).collect();
                check(built_in_moments(&u8s, sig, DType::U8), &wide, what("uint8"));
            }
        }
    }
}
