//! `com`: centre of mass of each frame and the field quantities derived from it over the
//! scan (LiberTEM's `CoMUDF`, BUILTINS.md §5).
//!
//! # Definition
//!
//! Frames `F[y, x]` of shape `Y × X` on a 2-D scan of `NY × NX` positions. With the mask
//! centre `(cy, cx)`:
//!
//! ```text
//! disk[y, x] = [(y − cy)² + (x − cx)² ≤ r²]                    (r = inf: all ones)
//!           or [ri² < (y − cy)² + (x − cx)² ≤ r²]  if ri > 0    (a ring)
//! I  = Σ F · disk,   Sy = Σ F · y · disk,   Sx = Σ F · x · disk    (per frame, pixel indices y, x)
//! shift_y = Sy / I − cy,  shift_x = Sx / I − cx                     (both 0 where I == 0)
//! raw_com    = (shift_y + cy, shift_x + cx)
//! raw_shifts = (shift_y, shift_x)
//! field      = R(scan_rotation) @ (Fy if flip_y else 1) @ (shift_y, shift_x)
//!              R(θ) = [[cos θ, sin θ], [−sin θ, cos θ]],  Fy = [[−1, 0], [0, 1]]   (θ in degrees)
//! field     −= regression correction (below)
//! field_y, field_x = field[..., 0], field[..., 1]
//! magnitude  = sqrt(field_y² + field_x²)
//! divergence = ∂field_y/∂row + ∂field_x/∂column
//! curl       = ∂field_y/∂column − ∂field_x/∂row
//! ```
//!
//! So a scan rotation of 90° gives `field_y = +shift_x`, `field_x = −shift_y`, and `flip_y`
//! gives `field_y = −shift_y`. The derivatives are `np.gradient` with unit spacing: central
//! differences `(f[i+1] − f[i−1]) / 2` inside, one-sided differences at the border.
//!
//! Everything after the three sums is computed in `get_results`, in float64, on the **full
//! scan grid**: positions outside the ROI are NaN, so `divergence` and `curl` are NaN there
//! and next to them, exactly as in LiberTEM. The results are then compressed back to the
//! ROI's positions.
//!
//! # Regression
//!
//! Removes a background field (centre offset, descan error) with coefficients
//! `C` (3 × 2, rows `[y, x]`, `[dy/dy, dx/dy]`, `[dy/dx, dx/dx]`):
//!
//! - `-1`: none, `C = 0`;
//! - `0`: `C[0] = mean of field` over the valid positions;
//! - `1`: `C = lstsq([1, row, column] → field)` over the valid positions (minimum-norm
//!   least squares with NumPy's default cut-off, so degenerate position sets behave like
//!   `np.linalg.lstsq`);
//! - a 3 × 2 array: `C` as given.
//!
//! Valid positions are the merged ones inside the ROI (LiberTEM's
//! `get_valid_nav_mask(full_nav=True)`), so intermediate results regress only over the
//! frames processed so far. The correction `[1, row, column] @ C` is subtracted from every
//! position if `C[1:]` is not all close to 0 (`|c| ≤ 1e-8`), else `C[0]` if that is not;
//! as in LiberTEM. `C` is returned in the `regression` buffer.
//!
//! # Buffers
//!
//! `d` = the input dtype (float32 or float64; complex input is rejected).
//!
//! | name | kind | extra | declared | returned | use |
//! |---|---|---|---|---|---|
//! | `raw_mask_result` | nav | (3,) | d | – | private: `(I, Sy, Sx)` |
//! | `raw_com`, `raw_shifts` | nav | (2,) | d | d | result-only |
//! | `field` | nav | (2,) | d | float64 | result-only |
//! | `field_y`, `field_x`, `magnitude`, `divergence`, `curl` | nav | – | d | float64 | result-only |
//! | `regression` | single | (3, 2) | float64 | float64 | result-only |
//!
//! The field quantities come back as float64 even for float32 input, as LiberTEM 0.16's
//! do (its rotation matrix is float64 and the declared kind is only checked as "float").
//!
//! # How the sums are computed
//!
//! Float32 tiles: `I`, `Sy`, `Sx` are three dot products of each frame's part with the
//! masks `disk`, `y · disk`, `x · disk` cut to the tile's signal slice, packed once per
//! slice for the SDK's [`PackedVectors`] kernel (float32 lanes, as LiberTEM's float32
//! masks give). Float64 tiles are summed row by row in float64.
//!
//! # Params
//!
//! | name | type | default | meaning |
//! |---|---|---|---|
//! | `cy`, `cx` | float | NaN | mask centre and reference point; NaN (or not given) means the frame centre `Y // 2`, `X // 2` (integer floor) |
//! | `r` | float | inf | outer radius of the mask; inf: whole frame |
//! | `ri` | float | 0 | inner radius; `> 0` makes the mask a ring; must be `< r` |
//! | `scan_rotation` | float | 0 | degrees |
//! | `flip_y` | bool | false | flip the detector's y axis before rotating |
//! | `regression` | array | `[-1]` | one value `-1`, `0` or `1` (the mode), or 6 values: the 3 × 2 coefficients, shape `(3, 2)` or flat in C order |
//!
//! On the command line: `--param regression=1`, `--param regression=@coefficients.npy` or
//! `--param regression=0.5,-0.2,0.01,0,0,0.01`.
//!
//! Errors: a nav or sig shape that is not 2-D, or a nav axis shorter than 2 (no gradient
//! possible), is invalid-data; `ri ≥ r`, negative or NaN radii, non-finite centre or
//! rotation, and a malformed `regression` are bad-param. All are reported by `plan`,
//! before any data is read.

use udf_sdk::Element;
use udf_sdk::RunPlan;
use udf_sdk::ndarray::IxDyn;
use udf_sdk::prelude::*;
use udf_sdk::simd::PackedVectors;

/// How the background field is removed.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Regression {
    None,
    Mean,
    Linear,
    /// Coefficients `[[y, x], [dy/dy, dx/dy], [dy/dx, dx/dx]]`.
    Given([[f64; 2]; 3]),
}

/// The parsed and resolved parameters.
#[derive(Debug, Clone, Copy)]
struct ComParams {
    cy: f64,
    cx: f64,
    r: f64,
    ri: f64,
    scan_rotation: f64,
    flip_y: bool,
    regression: Regression,
}

/// `(nav, sig)` shapes, both 2-D, or an invalid-data error.
fn shapes(dataset: &DatasetMeta) -> Result<([usize; 2], [usize; 2])> {
    let (&[ny, nx], &[sy, sx]) = (&dataset.nav_shape[..], &dataset.sig_shape[..]) else {
        return Err(UdfError::invalid_data(format!(
            "com needs a 2-D scan and 2-D frames, but the nav shape is {:?} and the sig shape {:?}",
            dataset.nav_shape, dataset.sig_shape
        )));
    };
    if ny < 2 || nx < 2 {
        return Err(UdfError::invalid_data(format!(
            "com needs at least 2 scan positions along each nav axis for divergence and curl, but the nav shape is \
             {:?}",
            dataset.nav_shape
        )));
    }
    if sy == 0 || sx == 0 {
        return Err(UdfError::invalid_data(format!(
            "com needs non-empty frames, but the sig shape is {:?}",
            dataset.sig_shape
        )));
    }
    Ok(([ny as usize, nx as usize], [sy as usize, sx as usize]))
}

impl ComParams {
    fn parse(params: &Params, dataset: &DatasetMeta) -> Result<Self> {
        let (_, [sy, sx]) = shapes(dataset)?;
        let centre = |name: &str, default: usize| -> Result<f64> {
            match params.float(name)? {
                v if v.is_nan() => Ok(default as f64),
                v if v.is_finite() => Ok(v),
                v => Err(UdfError::bad_param(format!(
                    "parameter '{name}' must be finite or NaN (frame centre), found {v}"
                ))),
            }
        };
        let cy = centre("cy", sy / 2)?;
        let cx = centre("cx", sx / 2)?;
        let r = params.float("r")?;
        let ri = params.float("ri")?;
        if r.is_nan() || ri.is_nan() || r < 0.0 || ri < 0.0 {
            return Err(UdfError::bad_param(format!("radii must be non-negative numbers, found r = {r}, ri = {ri}")));
        }
        if ri >= r {
            return Err(UdfError::bad_param(format!(
                "the inner radius ri ({ri}) must be less than the outer radius r ({r})"
            )));
        }
        let scan_rotation = params.float("scan_rotation")?;
        if !scan_rotation.is_finite() {
            return Err(UdfError::bad_param(format!("scan_rotation must be finite, found {scan_rotation}")));
        }
        let flip_y = params.boolean("flip_y")?;
        let values = params.array_f64("regression")?;
        let shape = values.shape().to_vec();
        let values: Vec<f64> = values.iter().copied().collect();
        let regression = match values[..] {
            [-1.0] => Regression::None,
            [0.0] => Regression::Mean,
            [1.0] => Regression::Linear,
            [v] => {
                return Err(UdfError::bad_param(format!(
                    "parameter 'regression' must be -1, 0, 1 or a 3 x 2 array, found the value {v}"
                )));
            }
            [a, b, c, d, e, f] if shape == [3, 2] || shape == [6] => Regression::Given([[a, b], [c, d], [e, f]]),
            _ => {
                return Err(UdfError::bad_param(format!(
                    "parameter 'regression' must be -1, 0, 1 or a 3 x 2 array, found an array of shape {shape:?}"
                )));
            }
        };
        Ok(ComParams { cy, cx, r, ri, scan_rotation, flip_y, regression })
    }

    /// `R(scan_rotation) @ (Fy if flip_y else 1)` in `(y, x)` order.
    fn transform(&self) -> [[f64; 2]; 2] {
        let theta = std::f64::consts::PI / 180.0 * self.scan_rotation;
        let (sin, cos) = theta.sin_cos();
        let rotate = [[cos, sin], [-sin, cos]];
        let flip = if self.flip_y { [[-1.0, 0.0], [0.0, 1.0]] } else { [[1.0, 0.0], [0.0, 1.0]] };
        let mut t = [[0.0; 2]; 2];
        for (i, row) in t.iter_mut().enumerate() {
            for (j, v) in row.iter_mut().enumerate() {
                *v = rotate[i][0] * flip[0][j] + rotate[i][1] * flip[1][j];
            }
        }
        t
    }
}

/// For float64 tiles: the mask and the mask times the column index.
struct Masks {
    disk: Vec<f64>,
    disk_x: Vec<f64>,
}

/// Task data: the frame width and the masks.
struct Com {
    sx: usize,
    /// For float32 tiles: `disk`, `y · disk` and `x · disk` over the whole frame, one
    /// after the other.
    frame_masks: Vec<f32>,
    /// The float32 masks cut to each signal slice of the tiling scheme (by scheme index)
    /// and packed for [`PackedVectors::dot_products`], on first use.
    packed: Vec<Option<PackedVectors>>,
    /// A tile's `(I, Sy, Sx)` per frame.
    sums: Vec<f32>,
    /// For float64 tiles.
    masks64: Masks,
}

/// `(Σ a·b, Σ a·c)` with independent partial sums, so the compiler can vectorise.
fn dot2(a: &[f64], b: &[f64], c: &[f64]) -> (f64, f64) {
    let mut p = [0.0; 4];
    let mut q = [0.0; 4];
    let (ac, ar) = a.split_at(a.len() / 4 * 4);
    for ((a, b), c) in ac.chunks_exact(4).zip(b.chunks_exact(4)).zip(c.chunks_exact(4)) {
        for i in 0..4 {
            p[i] += a[i] * b[i];
            q[i] += a[i] * c[i];
        }
    }
    let (mut s, mut t) = ((p[0] + p[1]) + (p[2] + p[3]), (q[0] + q[1]) + (q[2] + q[3]));
    let rest = ac.len();
    for (i, &a) in ar.iter().enumerate() {
        s += a * b[rest + i];
        t += a * c[rest + i];
    }
    (s, t)
}

/// A tile's signal slice as `(origin y, origin x, rows, columns)`.
fn slice_2d(tile: &Tile<'_>) -> Result<(usize, usize, usize, usize)> {
    let (&[oy, ox], &[ty, tx]) = (tile.sig_origin(), tile.sig_shape()) else {
        return Err(UdfError::internal("a tile of a 2-D dataset has a non-2-D signal slice"));
    };
    Ok((oy as usize, ox as usize, ty, tx))
}

impl Com {
    /// Add `(I, Sy, Sx)` of the float32 tile's part of each frame to `raw_mask_result`:
    /// three dot products per frame with the masks of the tile's signal slice, packed
    /// once per slice.
    fn accumulate_packed(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let data = tile.flat::<f32>()?;
        let (oy, ox, ty, tx) = slice_2d(tile)?;
        let len = ty * tx;
        if len == 0 {
            return Ok(());
        }
        if self.frame_masks.is_empty() {
            return Err(UdfError::internal("float32 tile in a run whose input dtype is float64"));
        }
        let index = tile.scheme_index() as usize;
        if self.packed.len() <= index {
            self.packed.resize_with(index + 1, || None);
        }
        let (sx, frame_masks) = (self.sx, &self.frame_masks);
        let packed = match &mut self.packed[index] {
            Some(packed) if packed.len() == len => packed,
            slot => slot.insert({
                let mut cut = Vec::with_capacity(3 * len);
                for mask in frame_masks.chunks_exact(frame_masks.len() / 3) {
                    for y in oy..oy + ty {
                        cut.extend_from_slice(&mask[y * sx + ox..][..tx]);
                    }
                }
                PackedVectors::new(&cut, len, 3, len)
            }),
        };
        self.sums.clear();
        self.sums.resize(data.len() / len * 3, 0.0);
        packed.dot_products(data, len, &mut self.sums);
        let mut acc = results.view_mut::<f32>("raw_mask_result")?;
        let acc = acc.as_slice_mut().ok_or_else(|| UdfError::internal("raw_mask_result view is not contiguous"))?;
        for (a, s) in acc.iter_mut().zip(&self.sums) {
            *a += s;
        }
        Ok(())
    }

    /// Add `(I, Sy, Sx)` of the float64 tile's part of each frame to `raw_mask_result`.
    fn accumulate_f64(&self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let data = tile.flat::<f64>()?;
        let masks = &self.masks64;
        let (oy, ox, ty, tx) = slice_2d(tile)?;
        let mut acc = results.view_mut::<f64>("raw_mask_result")?;
        let acc = acc.as_slice_mut().ok_or_else(|| UdfError::internal("raw_mask_result view is not contiguous"))?;
        if ty * tx == 0 {
            return Ok(());
        }
        for (frame, out) in data.chunks_exact(ty * tx).zip(acc.chunks_exact_mut(3)) {
            let (mut i, mut sy, mut sx) = (0.0, 0.0, 0.0);
            for (r, row) in frame.chunks_exact(tx).enumerate() {
                let start = (oy + r) * self.sx + ox;
                let (s0, s2) = dot2(row, &masks.disk[start..start + tx], &masks.disk_x[start..start + tx]);
                i += s0;
                sy += (oy + r) as f64 * s0;
                sx += s2;
            }
            out[0] += i;
            out[1] += sy;
            out[2] += sx;
        }
        Ok(())
    }
}

/// `np.gradient` of a `ny × nx` grid along `axis` (0: rows, 1: columns), unit spacing,
/// first-order one-sided differences at the border. Needs `ny, nx ≥ 2`.
fn gradient(f: &[f64], [ny, nx]: [usize; 2], axis: usize) -> Vec<f64> {
    let (len, stride) = if axis == 0 { (ny, nx) } else { (nx, 1) };
    (0..f.len())
        .map(|p| {
            let i = if axis == 0 { p / nx } else { p % nx };
            if i == 0 {
                f[p + stride] - f[p]
            } else if i == len - 1 {
                f[p] - f[p - stride]
            } else {
                (f[p + stride] - f[p - stride]) / 2.0
            }
        })
        .collect()
}

/// Minimum-norm least-squares solution of `A c = b` for `A` with 3 columns and `b` with 2
/// (NumPy's `lstsq(A, b, rcond=None)`): a one-sided Jacobi SVD of `A`, singular values at
/// or below `eps · max(rows, 3) · σ_max` treated as 0.
fn lstsq(columns: [Vec<f64>; 3], rhs: [&[f64]; 2]) -> [[f64; 2]; 3] {
    let mut a = columns;
    let mut v = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]];
    let dot = |x: &[f64], y: &[f64]| x.iter().zip(y).map(|(a, b)| a * b).sum::<f64>();
    for _sweep in 0..60 {
        let mut rotated = false;
        for (p, q) in [(0, 1), (0, 2), (1, 2)] {
            let alpha = dot(&a[p], &a[p]);
            let beta = dot(&a[q], &a[q]);
            let gamma = dot(&a[p], &a[q]);
            if gamma == 0.0 || gamma.abs() <= f64::EPSILON * (alpha * beta).sqrt() {
                continue;
            }
            rotated = true;
            let zeta = (beta - alpha) / (2.0 * gamma);
            let t = zeta.signum() / (zeta.abs() + (1.0 + zeta * zeta).sqrt());
            let c = 1.0 / (1.0 + t * t).sqrt();
            let s = c * t;
            let (left, right) = a.split_at_mut(q);
            for (x, y) in left[p].iter_mut().zip(right[0].iter_mut()) {
                let (xp, yq) = (*x, *y);
                *x = c * xp - s * yq;
                *y = s * xp + c * yq;
            }
            for row in &mut v {
                let (xp, yq) = (row[p], row[q]);
                row[p] = c * xp - s * yq;
                row[q] = s * xp + c * yq;
            }
        }
        if !rotated {
            break;
        }
    }
    let sigma: Vec<f64> = a.iter().map(|col| dot(col, col).sqrt()).collect();
    let rows = a[0].len();
    let cutoff = f64::EPSILON * rows.max(3) as f64 * sigma.iter().copied().fold(0.0, f64::max);
    let mut out = [[0.0; 2]; 3];
    for (i, col) in a.iter().enumerate() {
        if sigma[i] <= cutoff || sigma[i] == 0.0 {
            continue;
        }
        for (k, b) in rhs.iter().enumerate() {
            let coefficient = dot(col, b) / (sigma[i] * sigma[i]);
            for (j, row) in out.iter_mut().enumerate() {
                row[k] += v[j][i] * coefficient;
            }
        }
    }
    out
}

/// `(I, Sy, Sx)` per compressed position, as float64.
fn mask_sums(buffers: &Buffers) -> Result<Vec<f64>> {
    fn as_f64<T: Float>(buffers: &Buffers) -> Result<Vec<f64>> {
        Ok(buffers.view::<T>("raw_mask_result")?.iter().map(|v| v.to_f64()).collect())
    }
    match buffers.dtype("raw_mask_result")? {
        DType::Float32 => as_f64::<f32>(buffers),
        DType::Float64 => as_f64::<f64>(buffers),
        other => Err(UdfError::internal(format!("raw_mask_result is {}", udf_sdk::dtype_name(other)))),
    }
}

/// A compressed nav result of shape `(n, *extra)` from the full grid `values`
/// (`per` values per position) at `positions`.
fn compress<T: Element>(name: &str, values: &[T], per: usize, positions: &[usize]) -> Result<ResultOut> {
    let mut out = Vec::with_capacity(positions.len() * per);
    for &p in positions {
        out.extend_from_slice(&values[p * per..(p + 1) * per]);
    }
    let shape = if per == 1 { vec![positions.len()] } else { vec![positions.len(), per] };
    Ok(ResultOut::new(name, ArrayD::from_shape_vec(IxDyn(&shape), out)?))
}

/// Whether every value is within NumPy's `allclose` tolerance of 0 (`|v| ≤ 1e-8`).
fn all_close_to_zero(values: &[f64]) -> bool {
    values.iter().all(|v| v.abs() <= 1e-8)
}

impl Udf for Com {
    fn describe() -> Description {
        Description::new("com", env!("CARGO_PKG_VERSION"), "Centre of mass and derived field (LiberTEM CoMUDF)")
            .param(ParamSpec::float("cy", "mask centre row and reference; NaN: frame centre Y // 2").default(f64::NAN))
            .param(ParamSpec::float("cx", "mask centre column and reference; NaN: frame centre X // 2").default(f64::NAN))
            .param(ParamSpec::float("r", "outer mask radius in pixels; inf: whole frame").default(f64::INFINITY))
            .param(ParamSpec::float("ri", "inner mask radius in pixels; > 0 makes a ring; must be < r").default(0.0))
            .param(ParamSpec::float("scan_rotation", "scan rotation in degrees").default(0.0))
            .param(ParamSpec::boolean("flip_y", "flip the detector y axis").default(false))
            .param(
                ParamSpec::array(
                    "regression",
                    "-1 none, 0 subtract mean, 1 subtract linear fit, or 3x2 coefficients [[y,x],[dy/dy,dx/dy],[dy/dx,dx/dx]]",
                )
                .default_array(&[1], vec![-1.0f64]),
            )
            .custom_results()
    }

    fn plan(params: &Params, dataset: &DatasetMeta) -> Result<RunPlan> {
        ComParams::parse(params, dataset)?;
        Ok(RunPlan::from_description(&Self::describe()))
    }

    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        ComParams::parse(params, dataset)?;
        let d = match dataset.input_dtype {
            d @ (DType::Float32 | DType::Float64) => d,
            other => {
                return Err(UdfError::invalid_data(format!(
                    "com needs real input, but the run's input dtype is {}",
                    udf_sdk::dtype_name(other)
                )));
            }
        };
        let mut decls = vec![BufferDecl::nav("raw_mask_result", d).extra_shape(&[3]).private()];
        for name in ["raw_com", "raw_shifts", "field"] {
            decls.push(BufferDecl::nav(name, d).extra_shape(&[2]).result_only());
        }
        for name in ["field_y", "field_x", "magnitude", "divergence", "curl"] {
            decls.push(BufferDecl::nav(name, d).result_only());
        }
        decls.push(BufferDecl::single("regression", DType::Float64).extra_shape(&[3, 2]).result_only());
        Ok(decls)
    }

    fn new(ctx: &Context) -> Result<Self> {
        let p = ComParams::parse(ctx.params(), ctx.dataset())?;
        let (_, [sy, sx]) = shapes(ctx.dataset())?;
        let (r2, ri2) = (p.r * p.r, p.ri * p.ri);
        let ring = p.ri.abs() > 1e-8; // LiberTEM: `np.isclose(ri, 0)` selects the plain disk
        let mut disk = Vec::with_capacity(sy * sx);
        for y in 0..sy {
            for x in 0..sx {
                let (dy, dx) = (y as f64 - p.cy, x as f64 - p.cx);
                let d2 = dy * dy + dx * dx;
                disk.push(d2 <= r2 && !(ring && d2 <= ri2));
            }
        }
        // Only the masks of the run's input dtype (the other tile type never comes).
        let n = sy * sx;
        let float64 = ctx.dataset().input_dtype == DType::Float64;
        let mut frame_masks = vec![0.0f32; if float64 { 0 } else { 3 * n }];
        let mut masks64 = Masks { disk: Vec::new(), disk_x: Vec::new() };
        if float64 {
            masks64.disk = disk.iter().map(|&m| f64::from(u8::from(m))).collect();
            masks64.disk_x = disk.iter().enumerate().map(|(i, &m)| if m { (i % sx) as f64 } else { 0.0 }).collect();
        } else {
            for (i, _) in disk.iter().enumerate().filter(|(_, m)| **m) {
                frame_masks[i] = 1.0;
                frame_masks[n + i] = (i / sx) as f32;
                frame_masks[2 * n + i] = (i % sx) as f32;
            }
        }
        Ok(Com { sx, frame_masks, packed: Vec::new(), sums: Vec::new(), masks64 })
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        match tile.dtype() {
            DType::Float32 => self.accumulate_packed(tile, results),
            DType::Float64 => self.accumulate_f64(tile, results),
            other => Err(UdfError::invalid_data(format!(
                "com needs float32 or float64 tiles, got {}",
                udf_sdk::dtype_name(other)
            ))),
        }
    }

    fn get_results(ctx: &ResultsContext, buffers: &Buffers) -> Result<Vec<ResultOut>> {
        let p = ComParams::parse(&ctx.params, &ctx.dataset)?;
        let (grid @ [ny, nx], _) = shapes(&ctx.dataset)?;
        let full = ny * nx;
        let sums = mask_sums(buffers)?;
        let positions: Vec<usize> = match &ctx.roi {
            Some(roi) if roi.len() == full => roi.iter().enumerate().filter(|(_, s)| **s).map(|(i, _)| i).collect(),
            Some(roi) => {
                return Err(UdfError::internal(format!("the ROI has {} positions, the scan {full}", roi.len())));
            }
            None => (0..full).collect(),
        };
        if sums.len() != positions.len() * 3 || ctx.valid_nav_mask.len() != positions.len() {
            return Err(UdfError::internal(format!(
                "raw_mask_result has {} values and the valid mask {} entries for {} positions",
                sums.len(),
                ctx.valid_nav_mask.len(),
                positions.len()
            )));
        }

        // The full grid: NaN outside the ROI.
        let mut shifts = vec![f64::NAN; full * 2];
        let mut valid = vec![false; full];
        for (c, &pos) in positions.iter().enumerate() {
            let [i, sy, sx] = [sums[3 * c], sums[3 * c + 1], sums[3 * c + 2]];
            shifts[2 * pos] = if i == 0.0 { 0.0 } else { sy / i - p.cy };
            shifts[2 * pos + 1] = if i == 0.0 { 0.0 } else { sx / i - p.cx };
            valid[pos] = ctx.valid_nav_mask[c];
        }
        let com: Vec<f64> = shifts.chunks_exact(2).flat_map(|s| [s[0] + p.cy, s[1] + p.cx]).collect();
        let t = p.transform();
        let mut field: Vec<f64> = shifts
            .chunks_exact(2)
            .flat_map(|s| [t[0][0] * s[0] + t[0][1] * s[1], t[1][0] * s[0] + t[1][1] * s[1]])
            .collect();

        // Regression over the valid positions.
        let valid_positions: Vec<usize> = (0..full).filter(|&q| valid[q]).collect();
        let component = |k: usize| -> Vec<f64> { valid_positions.iter().map(|&q| field[2 * q + k]).collect() };
        let regression = match p.regression {
            Regression::None => [[0.0; 2]; 3],
            Regression::Mean => {
                let n = valid_positions.len() as f64;
                let mean = |k| component(k).iter().sum::<f64>() / n; // NaN without valid positions, like np.mean
                [[mean(0), mean(1)], [0.0; 2], [0.0; 2]]
            }
            Regression::Linear => {
                let ones = vec![1.0; valid_positions.len()];
                let rows = valid_positions.iter().map(|&q| (q / nx) as f64).collect();
                let cols = valid_positions.iter().map(|&q| (q % nx) as f64).collect();
                lstsq([ones, rows, cols], [&component(0), &component(1)])
            }
            Regression::Given(c) => c,
        };
        let linear = !all_close_to_zero(&[regression[1][0], regression[1][1], regression[2][0], regression[2][1]]);
        if linear {
            for (q, f) in field.chunks_exact_mut(2).enumerate() {
                let (y, x) = ((q / nx) as f64, (q % nx) as f64);
                for (k, v) in f.iter_mut().enumerate() {
                    *v -= regression[0][k] + y * regression[1][k] + x * regression[2][k];
                }
            }
        } else if !all_close_to_zero(&regression[0]) {
            for f in field.chunks_exact_mut(2) {
                f[0] -= regression[0][0];
                f[1] -= regression[0][1];
            }
        }

        let field_y: Vec<f64> = field.iter().step_by(2).copied().collect();
        let field_x: Vec<f64> = field.iter().skip(1).step_by(2).copied().collect();
        let magnitude: Vec<f64> = field_y.iter().zip(&field_x).map(|(y, x)| (y * y + x * x).sqrt()).collect();
        let (dy_dy, dy_dx) = (gradient(&field_y, grid, 0), gradient(&field_y, grid, 1));
        let (dx_dy, dx_dx) = (gradient(&field_x, grid, 0), gradient(&field_x, grid, 1));
        let divergence: Vec<f64> = dy_dy.iter().zip(&dx_dx).map(|(a, b)| a + b).collect();
        let curl: Vec<f64> = dy_dx.iter().zip(&dx_dy).map(|(a, b)| a - b).collect();

        // raw_com and raw_shifts in the declared dtype, the field quantities in float64.
        let (raw_com, raw_shifts) = match buffers.dtype("raw_mask_result")? {
            DType::Float32 => {
                let narrow = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
                (
                    compress("raw_com", &narrow(&com), 2, &positions)?,
                    compress("raw_shifts", &narrow(&shifts), 2, &positions)?,
                )
            }
            _ => (compress("raw_com", &com, 2, &positions)?, compress("raw_shifts", &shifts, 2, &positions)?),
        };
        let coefficients: Vec<f64> = regression.iter().flatten().copied().collect();
        Ok(vec![
            raw_com,
            raw_shifts,
            compress("field", &field, 2, &positions)?,
            compress("field_y", &field_y, 1, &positions)?,
            compress("field_x", &field_x, 1, &positions)?,
            compress("magnitude", &magnitude, 1, &positions)?,
            compress("divergence", &divergence, 1, &positions)?,
            compress("curl", &curl, 1, &positions)?,
            ResultOut::new("regression", ArrayD::from_shape_vec(IxDyn(&[3, 2]), coefficients)?),
        ])
    }
}

udf_sdk::export_udf!(Com);
