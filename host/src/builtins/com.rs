//! `com`: centre of mass of each frame and the derived field quantities (LiberTEM's
//! `CoMUDF`, BUILTINS.md §5).
//!
//! Per frame, three masks are applied (the [`masks`](super::masks) engine): the disk
//! `(y − cy)² + (x − cx)² ≤ r²` (or the ring `ri² < d² ≤ r²` when `ri > 0`) and the disk
//! weighted by the row and column index, giving `I`, `Sy`, `Sx` in the private nav
//! buffer `raw_mask_result` `(3,)`. Everything else is computed in `get_results`, on
//! the full nav grid (gradients need neighbours), then compressed to the ROI:
//!
//! ```text
//! shift = (Sy/I − cy, Sx/I − cx)  (0 where I == 0);  raw_com = shift + (cy, cx)
//! field = R(scan_rotation) · (flip_y ? diag(−1, 1) : 1) · shift,  R(θ) = [[cos, sin], [−sin, cos]]
//! regression −1: none; 0: subtract the mean field; 1: subtract the least-squares fit
//!   [1, y, x] @ C (3 × 2) over the merged positions; a 3 × 2 array: subtract [1, y, x] @ it
//! magnitude = |field|, divergence = ∂y field_y + ∂x field_x, curl = ∂x field_y − ∂y field_x
//! ```
//!
//! (`np.gradient`: central differences inside, one-sided at the edges; an axis of
//! length 1 has gradient 0 here, where NumPy raises.) `raw_com`/`raw_shifts` have the
//! input's float dtype; `field*`, `magnitude`, `divergence`, `curl` and `regression`
//! come back float64, as LiberTEM's do.

use super::mask_engine::{MaskRun, MaskSet, MasksPartition, result_dtype};
use super::spec;
use crate::array::NdArray;
use crate::cuda::{RadialMask, Request};
use crate::dtype::{DType, Kind};
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, CallError, DatasetMeta, Description, DeviceClass, InitContext, NamedBuffer,
    Params, PartitionRunner, ResultEntry, ResultsContext, RunPlan, Udf,
};
use std::sync::Arc;

/// LiberTEM's `CoMUDF`.
pub struct CoM {
    description: Description,
    /// The masks of a run, in its copy ([`MaskRun`]).
    run: MaskRun,
}

impl Default for CoM {
    fn default() -> Self {
        let mut d = spec::describe("com", "Centre of mass and derived field (LiberTEM CoMUDF)");
        d.params = vec![
            spec::float("cy", "mask centre row and reference; NaN: frame centre Y // 2", Some(f64::NAN)),
            spec::float("cx", "mask centre column and reference; NaN: frame centre X // 2", Some(f64::NAN)),
            spec::float("r", "outer mask radius in pixels; inf: whole frame", Some(f64::INFINITY)),
            spec::float("ri", "inner mask radius in pixels; > 0 makes a ring; must be < r", Some(0.0)),
            spec::float("scan_rotation", "scan rotation in degrees", Some(0.0)),
            spec::boolean("flip_y", "flip the detector y axis", false),
            spec::array(
                "regression",
                "-1 none, 0 subtract mean, 1 subtract linear fit, or 3x2 coefficients [[y,x],[dy/dy,dx/dy],[dy/dx,dx/dx]]",
                Some(&[-1.0]),
            ),
        ];
        d.custom_results = true;
        CoM { description: d, run: MaskRun::default() }
    }
}

/// How the field is corrected for a linear background.
#[derive(Debug, Clone, PartialEq)]
enum Regression {
    None,
    Mean,
    Linear,
    Given([[f64; 2]; 3]),
}

/// The parameters, resolved against the frame shape.
#[derive(Debug, Clone)]
struct ComParams {
    cy: f64,
    cx: f64,
    r: f64,
    ri: f64,
    rotation: f64,
    flip_y: bool,
    regression: Regression,
}

impl ComParams {
    fn parse(params: &Params, dataset: &DatasetMeta) -> Result<Self, CallError> {
        let (sy, sx) = spec::sig_2d(&dataset.sig_shape, "com")?;
        if dataset.nav_shape.len() != 2 {
            return Err(CallError::invalid_data(format!(
                "com needs a 2-D scan, but the nav shape is {:?}",
                dataset.nav_shape
            )));
        }
        let or_centre = |v: f64, size: usize| if v.is_nan() { (size / 2) as f64 } else { v };
        let cy = or_centre(spec::get_float(params, "cy")?, sy);
        let cx = or_centre(spec::get_float(params, "cx")?, sx);
        let r = spec::get_float(params, "r")?;
        let ri = spec::get_float(params, "ri")?;
        if r.is_nan() || ri.is_nan() || ri >= r {
            return Err(CallError::bad_param(format!("com needs ri < r, got ri={ri}, r={r}")));
        }
        let reg = spec::get_array(params, "regression")?;
        let values = spec::array_f64(reg, "regression")?;
        let regression = match (reg.shape(), values.as_slice()) {
            (_, [v]) if *v == -1.0 => Regression::None,
            (_, [v]) if *v == 0.0 => Regression::Mean,
            (_, [v]) if *v == 1.0 => Regression::Linear,
            ([3, 2], v) => Regression::Given([[v[0], v[1]], [v[2], v[3]], [v[4], v[5]]]),
            (shape, _) => {
                return Err(CallError::bad_param(format!(
                    "parameter 'regression' must be -1, 0, 1 or a 3x2 array, got shape {shape:?} {values:?}"
                )));
            }
        };
        Ok(ComParams {
            cy,
            cx,
            r,
            ri,
            rotation: spec::get_float(params, "scan_rotation")?.to_radians(),
            flip_y: spec::get_bool(params, "flip_y")?,
            regression,
        })
    }

    /// The masks as computed from the pixel position: disk (or ring, when `ri > 0`),
    /// y · disk, x · disk. The same for the CPU's masks and the GPU's kernel.
    fn geometry(&self) -> RadialMask {
        let ring = self.ri.abs() > 1e-8;
        let ri2 = if ring { self.ri * self.ri } else { f64::NEG_INFINITY };
        RadialMask { cy: self.cy, cx: self.cx, ri2, ro2: self.r * self.r, weighted: true, sparse: false }
    }

    /// The masks: disk (or ring), y · disk, x · disk.
    fn masks(&self, sy: usize, sx: usize) -> MaskSet {
        let g = self.geometry();
        MaskSet::from_fn_f32(3, sy, sx, false, move |m, y, x| {
            if !g.inside(y, x) {
                return 0.0;
            }
            match m {
                0 => 1.0,
                1 => y as f32,
                _ => x as f32,
            }
        })
    }
}

fn decl(name: &str, kind: BufferKind, dtype: DType, extra: &[usize], usage: BufferUse) -> BufferDecl {
    BufferDecl { name: name.to_owned(), kind, dtype, extra_shape: extra.to_vec(), usage }
}

fn float_dtype(dataset: &DatasetMeta) -> Result<DType, CallError> {
    let d = result_dtype(dataset.input_dtype, DType::F32)?;
    if d.kind() != Kind::Float {
        return Err(CallError::invalid_data(format!("com needs real input, but the run's input dtype is {d}")));
    }
    Ok(d)
}

impl Udf for CoM {
    fn description(&self) -> &Description {
        &self.description
    }

    fn source(&self) -> &str {
        "builtin:com"
    }

    fn for_run(&self) -> Option<Arc<dyn Udf>> {
        let run = self.run.for_run()?;
        Some(Arc::new(CoM { description: self.description.clone(), run }) as Arc<dyn Udf>)
    }

    fn reads_in_place(&self) -> bool {
        true
    }

    fn converts_on_read(&self) -> bool {
        true
    }

    fn plan(&self, params: &Params, dataset: &DatasetMeta) -> Result<RunPlan, CallError> {
        ComParams::parse(params, dataset)?;
        Ok(spec::plan_of(&self.description))
    }

    fn result_buffers(&self, params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        ComParams::parse(params, dataset)?;
        let d = float_dtype(dataset)?;
        let mut decls = vec![decl("raw_mask_result", BufferKind::Nav, d, &[3], BufferUse::Private)];
        for name in ["raw_com", "raw_shifts", "field"] {
            decls.push(decl(name, BufferKind::Nav, d, &[2], BufferUse::ResultOnly));
        }
        for name in ["field_y", "field_x", "magnitude", "divergence", "curl"] {
            decls.push(decl(name, BufferKind::Nav, d, &[], BufferUse::ResultOnly));
        }
        decls.push(decl("regression", BufferKind::Single, DType::F64, &[3, 2], BufferUse::ResultOnly));
        Ok(decls)
    }

    fn start(&self, ctx: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        let p = ComParams::parse(ctx.params, ctx.dataset)?;
        let (sy, sx) = spec::sig_2d(&ctx.dataset.sig_shape, "com")?;
        if ctx.dataset.device_class == DeviceClass::Cuda {
            let request = Request::Radial {
                mask: p.geometry(),
                result: float_dtype(ctx.dataset)?,
                buffer: "raw_mask_result",
                extra_shape: &[3],
            };
            return crate::cuda::start(&ctx, request);
        }
        let dtype = float_dtype(ctx.dataset)?;
        let masks = self.run.masks(&ctx, || Ok(p.masks(sy, sx).to_dtype(dtype)))?;
        Ok(Box::new(MasksPartition::new(&ctx, &self.run, &masks, "raw_mask_result", &[3])?))
    }

    // Index arithmetic over (y, x) components reads best as indices.
    #[allow(clippy::needless_range_loop)]
    fn get_results(&self, ctx: ResultsContext<'_>, buffers: &[NamedBuffer]) -> Result<Vec<ResultEntry>, CallError> {
        let p = ComParams::parse(ctx.params, ctx.dataset)?;
        let raw = buffers
            .iter()
            .find(|b| b.name == "raw_mask_result")
            .ok_or_else(|| CallError::internal("no raw_mask_result"))?;
        let d = raw.array.dtype();
        let raw_values = spec::array_f64(&raw.array, "raw_mask_result")?;
        let (ny, nx) = (ctx.dataset.nav_shape[0], ctx.dataset.nav_shape[1]);
        let total = ny * nx;

        // The full nav grid: compressed index of each position (None outside the ROI).
        let mut compressed = vec![None; total];
        let mut next = 0;
        for (i, slot) in compressed.iter_mut().enumerate() {
            if ctx.roi.is_none_or(|roi| roi[i]) {
                *slot = Some(next);
                next += 1;
            }
        }
        let valid: Vec<bool> = compressed.iter().map(|c| c.is_some_and(|k| ctx.valid_nav_mask[k])).collect();

        let mut raw_com = vec![f64::NAN; total * 2];
        let mut shifts = vec![f64::NAN; total * 2];
        let mut field = vec![f64::NAN; total * 2];
        let (cos, sin) = (p.rotation.cos(), p.rotation.sin());
        for (i, c) in compressed.iter().enumerate() {
            let Some(k) = c else { continue };
            let (intensity, sum_y, sum_x) = (raw_values[3 * k], raw_values[3 * k + 1], raw_values[3 * k + 2]);
            let (sy, sx) =
                if intensity == 0.0 { (0.0, 0.0) } else { (sum_y / intensity - p.cy, sum_x / intensity - p.cx) };
            shifts[2 * i] = sy;
            shifts[2 * i + 1] = sx;
            raw_com[2 * i] = sy + p.cy;
            raw_com[2 * i + 1] = sx + p.cx;
            let fy_in = if p.flip_y { -sy } else { sy };
            field[2 * i] = cos * fy_in + sin * sx;
            field[2 * i + 1] = -sin * fy_in + cos * sx;
        }

        let coefficients = match &p.regression {
            Regression::None => [[0.0; 2]; 3],
            Regression::Mean => {
                let mut mean = [0.0; 2];
                let n = valid.iter().filter(|&&v| v).count();
                for (i, _) in valid.iter().enumerate().filter(|(_, v)| **v) {
                    mean[0] += field[2 * i];
                    mean[1] += field[2 * i + 1];
                }
                let n = n as f64;
                [[mean[0] / n, mean[1] / n], [0.0; 2], [0.0; 2]]
            }
            Regression::Linear => linear_fit(&field, &valid, nx),
            Regression::Given(c) => *c,
        };
        if p.regression != Regression::None {
            for i in 0..total {
                let (y, x) = ((i / nx) as f64, (i % nx) as f64);
                for a in 0..2 {
                    field[2 * i + a] -= coefficients[0][a] + y * coefficients[1][a] + x * coefficients[2][a];
                }
            }
        }

        let field_y: Vec<f64> = field.iter().step_by(2).copied().collect();
        let field_x: Vec<f64> = field.iter().skip(1).step_by(2).copied().collect();
        let magnitude: Vec<f64> = field_y.iter().zip(&field_x).map(|(y, x)| (y * y + x * x).sqrt()).collect();
        let (dy_fy, dx_fy) = (gradient(&field_y, ny, nx, 0), gradient(&field_y, ny, nx, 1));
        let (dy_fx, dx_fx) = (gradient(&field_x, ny, nx, 0), gradient(&field_x, ny, nx, 1));
        let divergence: Vec<f64> = dy_fy.iter().zip(&dx_fx).map(|(a, b)| a + b).collect();
        let curl: Vec<f64> = dx_fy.iter().zip(&dy_fx).map(|(a, b)| a - b).collect();

        // Back to the flat, ROI-compressed layout.
        let selected: Vec<usize> = (0..total).filter(|&i| compressed[i].is_some()).collect();
        let compress = |values: &[f64], width: usize| -> Vec<f64> {
            selected.iter().flat_map(|&i| values[i * width..(i + 1) * width].iter().copied()).collect()
        };
        let n = selected.len();
        let entry = |name: &str, dtype: DType, values: Vec<f64>, shape: &[usize]| -> Result<ResultEntry, CallError> {
            let array = match dtype {
                DType::F32 => NdArray::from_vec(shape, values.iter().map(|&v| v as f32).collect::<Vec<f32>>()),
                _ => NdArray::from_vec(shape, values),
            }
            .map_err(|e| CallError::internal(e.to_string()))?;
            Ok(ResultEntry { name: name.to_owned(), array, valid: None })
        };
        Ok(vec![
            entry("raw_com", d, compress(&raw_com, 2), &[n, 2])?,
            entry("raw_shifts", d, compress(&shifts, 2), &[n, 2])?,
            entry("field", DType::F64, compress(&field, 2), &[n, 2])?,
            entry("field_y", DType::F64, compress(&field_y, 1), &[n])?,
            entry("field_x", DType::F64, compress(&field_x, 1), &[n])?,
            entry("magnitude", DType::F64, compress(&magnitude, 1), &[n])?,
            entry("divergence", DType::F64, compress(&divergence, 1), &[n])?,
            entry("curl", DType::F64, compress(&curl, 1), &[n])?,
            entry("regression", DType::F64, coefficients.iter().flatten().copied().collect(), &[3, 2])?,
        ])
    }
}

/// `np.gradient(values.reshape(ny, nx), axis=axis)`: central differences inside,
/// one-sided at the edges (0 along an axis of length 1).
pub fn gradient(values: &[f64], ny: usize, nx: usize, axis: usize) -> Vec<f64> {
    let (len, step) = if axis == 0 { (ny, nx) } else { (nx, 1) };
    let mut out = vec![0.0; values.len()];
    if len < 2 {
        return out;
    }
    for (i, o) in out.iter_mut().enumerate() {
        let pos = if axis == 0 { i / nx } else { i % nx };
        *o = if pos == 0 {
            values[i + step] - values[i]
        } else if pos == len - 1 {
            values[i] - values[i - step]
        } else {
            (values[i + step] - values[i - step]) / 2.0
        };
    }
    out
}

/// Least squares `[1, y, x] @ C ≈ field` over the valid positions (NumPy's `lstsq`:
/// the minimum-norm solution when the positions don't determine all three terms).
#[allow(clippy::needless_range_loop)] // 3 x 3 matrix algebra
fn linear_fit(field: &[f64], valid: &[bool], nx: usize) -> [[f64; 2]; 3] {
    let mut ata = [[0.0; 3]; 3];
    let mut atb = [[0.0; 2]; 3];
    let mut rows = 0usize;
    for (i, _) in valid.iter().enumerate().filter(|(_, v)| **v) {
        let row = [1.0, (i / nx) as f64, (i % nx) as f64];
        for a in 0..3 {
            for b in 0..3 {
                ata[a][b] += row[a] * row[b];
            }
            for c in 0..2 {
                atb[a][c] += row[a] * field[2 * i + c];
            }
        }
        rows += 1;
    }
    let pinv = pseudo_inverse_sym3(&ata, rows.max(3));
    let mut out = [[0.0; 2]; 3];
    for a in 0..3 {
        for c in 0..2 {
            out[a][c] = (0..3).map(|b| pinv[a][b] * atb[b][c]).sum();
        }
    }
    out
}

/// The pseudo-inverse of a symmetric positive semi-definite 3 × 3 matrix `AᵀA`
/// (cyclic Jacobi eigen-decomposition), ignoring singular values of `A` below
/// `eps · rows · σ_max` like NumPy's default `rcond`.
#[allow(clippy::needless_range_loop)] // 3 x 3 matrix algebra
fn pseudo_inverse_sym3(m: &[[f64; 3]; 3], rows: usize) -> [[f64; 3]; 3] {
    let mut a = *m;
    let mut v = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    for _ in 0..50 {
        let off = a[0][1].abs() + a[0][2].abs() + a[1][2].abs();
        if off < 1e-300 {
            break;
        }
        for (p, q) in [(0, 1), (0, 2), (1, 2)] {
            if a[p][q].abs() < 1e-300 {
                continue;
            }
            let theta = (a[q][q] - a[p][p]) / (2.0 * a[p][q]);
            let t = theta.signum() / (theta.abs() + (theta * theta + 1.0).sqrt());
            let t = if theta == 0.0 { 1.0 } else { t };
            let c = 1.0 / (t * t + 1.0).sqrt();
            let s = t * c;
            for k in 0..3 {
                let (akp, akq) = (a[k][p], a[k][q]);
                a[k][p] = c * akp - s * akq;
                a[k][q] = s * akp + c * akq;
            }
            for k in 0..3 {
                let (apk, aqk) = (a[p][k], a[q][k]);
                a[p][k] = c * apk - s * aqk;
                a[q][k] = s * apk + c * aqk;
            }
            for row in &mut v {
                let (vp, vq) = (row[p], row[q]);
                row[p] = c * vp - s * vq;
                row[q] = s * vp + c * vq;
            }
        }
    }
    let eig = [a[0][0], a[1][1], a[2][2]];
    let sigma_max = eig.iter().fold(0.0f64, |m, &e| m.max(e.max(0.0).sqrt()));
    let cutoff = f64::EPSILON * rows as f64 * sigma_max;
    let mut out = [[0.0; 3]; 3];
    for (k, &e) in eig.iter().enumerate() {
        if e.max(0.0).sqrt() <= cutoff || e <= 0.0 {
            continue;
        }
        for i in 0..3 {
            for j in 0..3 {
                out[i][j] += v[i][k] * v[j][k] / e;
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gradient_is_numpys() {
        // np.gradient([[1, 2, 4], [7, 11, 16]], axis=1) = [[1, 1.5, 2], [4, 4.5, 5]]
        let v = [1.0, 2.0, 4.0, 7.0, 11.0, 16.0];
        assert_eq!(gradient(&v, 2, 3, 1), vec![1.0, 1.5, 2.0, 4.0, 4.5, 5.0]);
        assert_eq!(gradient(&v, 2, 3, 0), vec![6.0, 9.0, 12.0, 6.0, 9.0, 12.0]);
    }

    #[test]
    #[allow(clippy::needless_range_loop)]
    fn linear_fit_recovers_a_plane_and_is_minimum_norm_on_one_row() {
        let (ny, nx) = (4, 5);
        let mut field = vec![0.0; ny * nx * 2];
        for i in 0..ny * nx {
            let (y, x) = ((i / nx) as f64, (i % nx) as f64);
            field[2 * i] = 1.5 + 0.25 * y - 0.5 * x;
            field[2 * i + 1] = -2.0 + 0.125 * x;
        }
        let fit = linear_fit(&field, &vec![true; ny * nx], nx);
        let expected = [[1.5, -2.0], [0.25, 0.0], [-0.5, 0.125]];
        for a in 0..3 {
            for c in 0..2 {
                assert!((fit[a][c] - expected[a][c]).abs() < 1e-9, "{fit:?}");
            }
        }
        // Only row y = 2: constant and y-term are collinear; lstsq splits c0 + 2 c1 = b
        // with minimum norm: c0 = b / 5, c1 = 2 b / 5.
        let valid: Vec<bool> = (0..ny * nx).map(|i| i / nx == 2).collect();
        let fit = linear_fit(&field, &valid, nx);
        let b = 1.5 + 0.25 * 2.0;
        assert!((fit[0][0] - b / 5.0).abs() < 1e-9 && (fit[1][0] - 2.0 * b / 5.0).abs() < 1e-9, "{fit:?}");
        assert!((fit[2][0] + 0.5).abs() < 1e-9, "{fit:?}");
    }
}
