//! The `SparseCorrelationUDF` fragments of LiberTEM's docs (`udf/advanced.rst`:
//! `process_tile` under "Tiled processing", `postprocess` under "Post-processing",
//! `get_task_data` under "Task data"; the UDF itself is in libertem_blobfinder):
//! correlate a template with log-scaled frames around expected peak positions, then find
//! each peak's best position.
//!
//! Params: `peaks` (array `(n, 2)`, whole pixels y, x), `radius` (float, default 2: the
//! template is blobfinder's `RadialGradient(radius)`, `d / radius` for `d <= radius`, on
//! a square of half-size `crop = ceil(2 radius)`), `steps` (int, default 3).
//!
//! Task data: one sparse mask per peak `i` and shift `(dy, dx)` in `[-steps, steps]²`, the
//! template with its centre at `peak + (dy, dx)`, cut to the frame. `process_tile` adds
//! `mask · ln(1 + max(F, 0))` over the tile's part of each mask (`self.meta.slice`) to
//! the private buffer `corr` (kind nav, float32, extra `(n (2 steps + 1)²,)`). LiberTEM's
//! `log_scale` subtracts the tile's minimum instead, which makes the numbers depend on
//! the tiling; a fixed offset does not.
//!
//! `postprocess`, per frame and peak, on the `(2 steps + 1)²` correlation map `c`:
//! `centers` (int32, `(n, 2)`) the position of the maximum (first in C order),
//! `peak_values` (float32, `(n,)`) the maximum, `refineds` (float32, `(n, 2)`) the centre
//! of mass of `c − min` in the window of radius `r = min(2, distance to the border)`
//! around the maximum, `peak_elevations` (float32, `(n,)`) the smallest
//! `(max − c[p]) / |p − refined|` over positions at least 1.5 away, at least 0.
//! Positions are frame pixels: `peak + map position − steps`.

use udf_sdk::prelude::*;

struct SparseCorrelation {
    peaks: Vec<[usize; 2]>,
    steps: usize,
    /// `(mask, flat pixel, weight)` of every mask pixel inside the frame.
    masks: Vec<(usize, usize, f32)>,
    frame_width: usize,
}

impl Udf for SparseCorrelation {
    fn declare() -> Declaration {
        Declaration::new("sparse-correlation", "Template correlation around expected peaks")
            .param(ParamSpec::array("peaks", "expected peak positions, one row (y, x) per peak"))
            .param(ParamSpec::float("radius", "radius of the radial gradient template").default(2.0))
            .param(ParamSpec::int("steps", "shifts tried around each peak, in pixels").default(3))
            .nav("corr", DType::Float32)
            .extra_shape_with(|p, _| Ok(vec![peaks(p)?.len() as u64 * maps(p.int("steps")?)?]))
            .private()
            .nav("centers", DType::Int32)
            .extra_shape_with(|p, _| Ok(vec![peaks(p)?.len() as u64, 2]))
            .nav("refineds", DType::Float32)
            .extra_shape_with(|p, _| Ok(vec![peaks(p)?.len() as u64, 2]))
            .nav("peak_values", DType::Float32)
            .extra_shape_with(|p, _| Ok(vec![peaks(p)?.len() as u64]))
            .nav("peak_elevations", DType::Float32)
            .extra_shape_with(|p, _| Ok(vec![peaks(p)?.len() as u64]))
    }

    /// LiberTEM's `get_task_data`: the sparse mask stack.
    fn new(ctx: &Context) -> Result<Self> {
        let (sy, sx) = udf_sdk::frame_shape_2d(ctx.dataset(), "sparse-correlation")?;
        let params = ctx.params();
        maps(params.int("steps")?)?; // checks the range
        let (steps, radius) = (params.int("steps")? as usize, params.float("radius")?);
        if !(radius > 0.0 && radius < 1e3) {
            return Err(UdfError::bad_param(format!("radius must be in (0, 1000), found {radius}")));
        }
        let (crop, peaks, mut masks) = ((2.0 * radius).ceil() as usize, peaks(params)?, Vec::new());
        for (mask, ([py, px], (dy, dx))) in
            peaks.iter().flat_map(|&p| grid(2 * steps + 1).map(move |s| (p, s))).enumerate()
        {
            for (ty, tx) in grid(2 * crop + 1) {
                let d = ((ty as f64 - crop as f64).powi(2) + (tx as f64 - crop as f64).powi(2)).sqrt();
                let inside = |v: usize, n: usize| v.checked_sub(steps + crop).filter(|&v| v < n);
                if let (Some(y), Some(x)) = (inside(py + dy + ty, sy), inside(px + dx + tx, sx))
                    && d <= radius
                {
                    masks.push((mask, y * sx + x, (d / radius) as f32));
                }
            }
        }
        Ok(SparseCorrelation { peaks, steps, masks, frame_width: sx })
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let (origin, shape) = (tile.sig_origin(), tile.sig_shape()); // LiberTEM's self.meta.slice
        let data = tile.to_f64()?.into_shape_with_order((tile.frames(), tile.frame_len()))?;
        let mut corr = results.view_mut::<f32>("corr")?; // (frames in tile, masks)
        for &(mask, pixel, weight) in &self.masks {
            let (y, x) = ((pixel / self.frame_width) as u64, (pixel % self.frame_width) as u64);
            let (Some(ly), Some(lx)) = (y.checked_sub(origin[0]), x.checked_sub(origin[1])) else { continue };
            if (ly as usize) < shape[0] && (lx as usize) < shape[1] {
                for f in 0..tile.frames() {
                    let value = data[[f, ly as usize * shape[1] + lx as usize]];
                    corr[[f, mask]] += weight * (1.0 + value.max(0.0)).ln() as f32;
                }
            }
        }
        Ok(())
    }

    /// LiberTEM's `postprocess` with blobfinder's `evaluate_correlations`.
    fn postprocess(&mut self, _: &Context, results: &mut Buffers) -> Result<()> {
        let (corr, side, steps) = (results.view::<f32>("corr")?.to_owned(), 2 * self.steps + 1, self.steps as f64);
        let (mut centers, mut refineds, mut heights, mut elevations) = (vec![], vec![], vec![], vec![]);
        let maps: Vec<f32> = corr.iter().copied().collect();
        for (map, &[py, px]) in maps.chunks(side * side).zip(self.peaks.iter().cycle()) {
            let ([cy, cx], [ry, rx], height, elevation) = evaluate(map, side);
            centers.extend([(py + cy) as i32 - self.steps as i32, (px + cx) as i32 - self.steps as i32]);
            refineds.extend([(py as f64 + ry - steps) as f32, (px as f64 + rx - steps) as f32]);
            heights.push(height);
            elevations.push(elevation);
        }
        results.assign("centers", &centers)?;
        results.assign("refineds", &refineds)?;
        results.assign("peak_values", &heights)?;
        results.assign("peak_elevations", &elevations)
    }
}

/// One correlation map `side x side`: the position of its maximum, the centre of mass of
/// `map − min` in the window of radius `min(2, distance to the border)` around it, the
/// maximum, and the elevation of the tightest cone from the maximum (module docs).
fn evaluate(map: &[f32], side: usize) -> ([usize; 2], [f64; 2], f32, f32) {
    let best = (0..map.len()).fold(0, |b, i| if map[i] > map[b] { i } else { b });
    let (cy, cx, height) = (best / side, best % side, map[best]);
    let r = 2.min(cy).min(cx).min(side - 1 - cy).min(side - 1 - cx);
    let window: Vec<(usize, usize)> = grid(2 * r + 1).map(|(y, x)| (cy + y - r, cx + x - r)).collect();
    let low = window.iter().map(|&(y, x)| map[y * side + x]).fold(f32::INFINITY, f32::min);
    let mass = |f: &dyn Fn(usize, usize) -> f64| -> f64 {
        window.iter().map(|&(y, x)| f64::from(map[y * side + x] - low) * f(y, x)).sum()
    };
    let refined = match r {
        0 => [cy as f64, cx as f64],
        _ => [mass(&|y, _| y as f64) / mass(&|_, _| 1.0), mass(&|_, x| x as f64) / mass(&|_, _| 1.0)],
    };
    let slopes = grid(side).filter_map(|(y, x)| {
        let dist = ((refined[0] - y as f64).powi(2) + (refined[1] - x as f64).powi(2)).sqrt();
        (dist >= 1.5).then(|| (f64::from(height - map[y * side + x]) / dist) as f32)
    });
    ([cy, cx], refined, height, slopes.fold(f32::INFINITY, f32::min).max(0.0))
}

/// The positions `(y, x)` of an `n x n` square, in C order.
fn grid(n: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..n).flat_map(move |y| (0..n).map(move |x| (y, x)))
}

/// The `peaks` parameter: an `(n, 2)` array of whole, non-negative pixel positions.
fn peaks(params: &Params) -> Result<Vec<[usize; 2]>> {
    let peaks = params.array_f64("peaks")?;
    let whole = peaks.iter().all(|&v| v >= 0.0 && v.fract() == 0.0 && v < 1e9);
    if peaks.ndim() != 2 || peaks.shape()[1] != 2 || !whole {
        return Err(UdfError::bad_param(format!("peaks must be an (n, 2) array of pixels, found {:?}", peaks.shape())));
    }
    Ok(peaks.outer_iter().map(|p| [p[0] as usize, p[1] as usize]).collect())
}

/// Correlation maps per peak: `(2 steps + 1)²`.
fn maps(steps: i64) -> Result<u64> {
    match u64::try_from(steps) {
        Ok(s) if s <= 100 => Ok((2 * s + 1) * (2 * s + 1)),
        _ => Err(UdfError::bad_param(format!("steps must be in 0..=100, found {steps}"))),
    }
}

udf_sdk::export_udf!(SparseCorrelation);
