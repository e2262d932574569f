//! `masks`: the dot product of every frame with each of a stack of masks — virtual
//! detectors (LiberTEM's `ApplyMasksUDF`).
//!
//! # Definition
//!
//! `intensity[n, m] = Σ_{y,x} F_n[y, x] · mask_m[y, x]` (no complex conjugation), for
//! every processed frame `n` and mask `m`.
//!
//! # Params
//!
//! - `masks` (array, required): a stack `(M, *sig)` or a single mask `(*sig)` (M = 1), of
//!   any dtype — bool, integer, float or complex.
//! - `mask_dtype` (text, default `auto` = the masks' own dtype): the dtype the masks are
//!   cast to (LiberTEM's `mask_dtype`); must be float or complex, and complex masks need a
//!   complex `mask_dtype`.
//! - `use_sparse` (text, default `auto`): `true` keeps the masks as CSR (per mask the
//!   non-zero pixels), `false` dense, `auto` sparse when at most 25 % of the mask values
//!   are non-zero. Both give the same numbers up to rounding.
//! - `preferred_dtype` (text, default `float32`): the preferred input dtype, float or
//!   complex (LiberTEM's `preferred_dtype`). With the default, float32 masks and uint8 or
//!   uint16 data the plugin takes the native integer tiles instead and converts them to
//!   float32 as it reads them — the same numbers, for half the bytes copied into the
//!   plugin and no conversion pass in the host (if another UDF of the run wants float32
//!   tiles, it gets float32 tiles).
//!
//! # Buffers
//!
//! | name        | kind | extra shape | dtype                              |
//! |-------------|------|-------------|------------------------------------|
//! | `intensity` | nav  | `(M,)`      | `result_type(input, mask dtype)`   |
//!
//! Merged by the host (nav buffers only).
//!
//! # Processing
//!
//! The masks are cast to the result dtype once per partition (in `new`) and prepared for
//! each signal slice of the tiling scheme. `process_tile` adds `tile[f, :] · mask_m[slice]`
//! to `intensity[f, m]`: dense, as dot products over the runs of consecutive pixels the
//! slice has in the frame (one run for full-width slices), with float32 masks packed
//! once per partition for the SDK's SIMD kernel (`udf_sdk::simd::PackedVectors`);
//! sparse, over the slice's non-zero mask pixels. No allocation per tile.

mod layout;
mod values;

use layout::Masks;
use udf_sdk::prelude::*;
use udf_sdk::{Complex32, Complex64, DtypePreference, RunPlan, dtype_from_name, dtype_name};
use values::{Value, Widen, is_complex, is_float, result_type};

/// Fraction of non-zero mask values up to which `use_sparse=auto` picks CSR.
const SPARSE_FRACTION: f64 = 0.25;

/// What the params say about the masks, checked against the dataset.
struct MaskSpec {
    /// Number of masks.
    count: usize,
    /// The dtype of the `masks` array.
    own: DType,
    /// The dtype the masks are cast to.
    cast: DType,
    /// `result_type(input, cast)`: the dtype of `intensity` and of the arithmetic.
    result: DType,
}

/// A float or complex dtype named by text param `name`; `auto` gives `None` if allowed.
fn text_dtype(params: &Params, name: &str, allow_auto: bool) -> Result<Option<DType>> {
    let text = params.text(name)?;
    if allow_auto && text == "auto" {
        return Ok(None);
    }
    match dtype_from_name(text) {
        Some(d) if is_float(d) => Ok(Some(d)),
        _ => Err(UdfError::bad_param(format!(
            "masks: parameter '{name}' must be float32, float64, complex64 or complex128{}, found '{text}'",
            if allow_auto { " (or auto)" } else { "" }
        ))),
    }
}

impl MaskSpec {
    fn new(params: &Params, dataset: &DatasetMeta) -> Result<Self> {
        let own = params.array_dtype("masks")?;
        let shape: Vec<u64> = match params.get("masks") {
            Some(udf_sdk::ParamValue::Array(a)) => a.shape.clone(),
            _ => return Err(UdfError::bad_param("masks: parameter 'masks' must be an array")),
        };
        let sig = &dataset.sig_shape;
        let count = if shape == *sig {
            1
        } else if shape.len() == sig.len() + 1 && shape[1..] == sig[..] {
            usize::try_from(shape[0]).map_err(|_| UdfError::bad_param("masks: too many masks"))?
        } else {
            return Err(UdfError::bad_param(format!(
                "masks: parameter 'masks' has shape {shape:?}; expected (M, {sig:?}) or a single mask of the frame \
                 shape {sig:?}"
            )));
        };
        let cast = text_dtype(params, "mask_dtype", true)?.unwrap_or(own);
        if is_complex(own) && !is_complex(cast) {
            return Err(UdfError::bad_param(format!(
                "masks: the masks are {} but mask_dtype is {}, which would drop their imaginary part",
                dtype_name(own),
                dtype_name(cast)
            )));
        }
        let input = dataset.input_dtype;
        let native = matches!(input, DType::Uint8 | DType::Uint16) && cast == DType::Float32;
        if !is_float(input) && !native {
            return Err(UdfError::invalid_data(format!(
                "masks: needs float or complex input, the run's input dtype is {}",
                dtype_name(input)
            )));
        }
        Ok(MaskSpec { count, own, cast, result: result_type(input, cast) })
    }

    /// The mask values in C order, cast to `cast` (NumPy's `astype`) and then to `D`.
    fn values<D: Value>(&self, params: &Params) -> Result<Vec<D>> {
        let narrow = matches!(self.cast, DType::Float32 | DType::Complex64);
        let round = |x: f64| if narrow { f64::from(x as f32) } else { x };
        match self.own {
            DType::Complex64 => {
                let masks = params.array::<Complex32>("masks")?;
                Ok(c_order(&masks)
                    .iter()
                    .map(|c| D::from_complex(Complex64::new(round(c.re.into()), round(c.im.into()))))
                    .collect())
            }
            DType::Complex128 => {
                let masks = params.array::<Complex64>("masks")?;
                Ok(c_order(&masks).iter().map(|c| D::from_complex(Complex64::new(round(c.re), round(c.im)))).collect())
            }
            DType::Float32 => {
                let masks = params.array::<f32>("masks")?;
                Ok(c_order(&masks).iter().map(|&x| D::from_f64(round(x.into()))).collect())
            }
            _ => {
                let masks = params.array_f64("masks")?;
                Ok(c_order(&masks.view()).iter().map(|&x| D::from_f64(round(x))).collect())
            }
        }
    }
}

/// The elements of `view` in C order: borrowed when contiguous, as param arrays are
/// (iterating an n-d view element by element is many times slower than a slice).
fn c_order<'a, T: Clone>(view: &'a ArrayViewD<'_, T>) -> std::borrow::Cow<'a, [T]> {
    match view.as_slice() {
        Some(flat) => std::borrow::Cow::Borrowed(flat),
        None => std::borrow::Cow::Owned(view.iter().cloned().collect()),
    }
}

/// The prepared masks in the result dtype.
enum Kernel {
    F32(Masks<f32>),
    F64(Masks<f64>),
    C64(Masks<Complex32>),
    C128(Masks<Complex64>),
}

/// Per-partition state: the masks, prepared for this partition's tiling scheme.
struct ApplyMasks {
    kernel: Kernel,
}

fn prepare<D: Value>(spec: &MaskSpec, ctx: &Context, sparse_choice: &str) -> Result<Masks<D>> {
    let values = spec.values::<D>(ctx.params())?;
    let sparse = match sparse_choice {
        "true" => true,
        "false" => false,
        "auto" => {
            let nonzero = values.iter().filter(|v| !v.is_zero()).count();
            (nonzero as f64) <= SPARSE_FRACTION * values.len() as f64
        }
        other => {
            return Err(UdfError::bad_param(format!(
                "masks: parameter 'use_sparse' must be auto, true or false, found '{other}'"
            )));
        }
    };
    let frame = usize_shape(&ctx.dataset().sig_shape)?;
    let slices = match ctx.partition() {
        Some(p) => p
            .tiling_scheme
            .iter()
            .map(|s| Ok((usize_shape(&s.origin)?, usize_shape(&s.shape)?)))
            .collect::<Result<Vec<_>>>()?,
        None => vec![(vec![0; frame.len()], frame.clone())],
    };
    Masks::new(values, spec.count, &frame, &slices, sparse)
}

fn usize_shape(shape: &[u64]) -> Result<Vec<usize>> {
    shape.iter().map(|&d| usize::try_from(d).map_err(|_| UdfError::invalid_data("masks: shape too large"))).collect()
}

/// Add the tile's dot products to the `intensity` view of the tile.
fn apply<I: Widen<D>, D: Value>(masks: &Masks<D>, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
    let mut intensity = results.view_mut::<D>("intensity")?;
    let out = intensity
        .as_slice_mut()
        .ok_or_else(|| UdfError::internal("masks: the intensity view of a tile is not contiguous"))?;
    masks.apply(tile.scheme_index() as usize, tile.flat::<I>()?, out)
}

impl Udf for ApplyMasks {
    fn describe() -> Description {
        Description::new(
            "masks",
            env!("CARGO_PKG_VERSION"),
            "Dot product of each frame with masks (LiberTEM ApplyMasksUDF)",
        )
        .param(ParamSpec::array("masks", "stack of masks (M, *sig), or one mask (*sig)"))
        .param(ParamSpec::text("mask_dtype", "dtype the masks are cast to; auto = their own dtype").default("auto"))
        .param(ParamSpec::text("use_sparse", "auto (sparse if <= 25% non-zero), true or false").default("auto"))
        .param(ParamSpec::text("preferred_dtype", "preferred input dtype (float or complex)").default("float32"))
    }

    fn plan(params: &Params, dataset: &DatasetMeta) -> Result<RunPlan> {
        let mut plan = RunPlan::from_description(&Self::describe());
        if let Some(dtype) = text_dtype(params, "preferred_dtype", false)? {
            plan.input_dtype = DtypePreference::Prefer(dtype);
        }
        // 8- and 16-bit detector data with float32 masks: the native tiles, converted to
        // float32 by the SIMD kernel as it reads them (the same values as float32 tiles,
        // for half the bytes copied in and no conversion pass in the host).
        let cast = match text_dtype(params, "mask_dtype", true)? {
            Some(cast) => cast,
            None => params.array_dtype("masks")?,
        };
        let narrow = matches!(dataset.dataset_dtype, DType::Uint8 | DType::Uint16);
        if narrow && cast == DType::Float32 && plan.input_dtype == DtypePreference::Prefer(DType::Float32) {
            plan.input_dtype = DtypePreference::Native;
        }
        Ok(plan)
    }

    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let spec = MaskSpec::new(params, dataset)?;
        Ok(vec![BufferDecl::nav("intensity", spec.result).extra_shape(&[spec.count as u64])])
    }

    fn new(ctx: &Context) -> Result<Self> {
        let spec = MaskSpec::new(ctx.params(), ctx.dataset())?;
        let sparse = ctx.params().text("use_sparse")?;
        let kernel = match spec.result {
            DType::Float32 => Kernel::F32(prepare(&spec, ctx, sparse)?),
            DType::Float64 => Kernel::F64(prepare(&spec, ctx, sparse)?),
            DType::Complex64 => Kernel::C64(prepare(&spec, ctx, sparse)?),
            _ => Kernel::C128(prepare(&spec, ctx, sparse)?),
        };
        Ok(ApplyMasks { kernel })
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        match (&self.kernel, tile.dtype()) {
            (Kernel::F32(m), DType::Float32) => apply::<f32, _>(m, tile, results),
            (Kernel::F32(m), DType::Uint16) => apply::<u16, _>(m, tile, results),
            (Kernel::F32(m), DType::Uint8) => apply::<u8, _>(m, tile, results),
            (Kernel::F64(m), DType::Float32) => apply::<f32, _>(m, tile, results),
            (Kernel::F64(m), DType::Float64) => apply::<f64, _>(m, tile, results),
            (Kernel::C64(m), DType::Float32) => apply::<f32, _>(m, tile, results),
            (Kernel::C64(m), DType::Complex64) => apply::<Complex32, _>(m, tile, results),
            (Kernel::C128(m), DType::Float32) => apply::<f32, _>(m, tile, results),
            (Kernel::C128(m), DType::Float64) => apply::<f64, _>(m, tile, results),
            (Kernel::C128(m), DType::Complex64) => apply::<Complex32, _>(m, tile, results),
            (Kernel::C128(m), DType::Complex128) => apply::<Complex64, _>(m, tile, results),
            (_, other) => Err(UdfError::internal(format!(
                "masks: {} tiles do not fit the result dtype chosen for this run",
                dtype_name(other)
            ))),
        }
    }
}

udf_sdk::export_udf!(ApplyMasks);
