//! Detector corrections as a dataset wrapper: `x' = (x − dark) · gain`, then every
//! excluded pixel replaced by the mean of its valid neighbours (the `3^d − 1` pixels
//! around it that are inside the frame and not excluded themselves) — LiberTEM's
//! `libertem.io.corrections.detector.correct`.
//!
//! The corrected dataset's dtype is `result_type(float32, native)` (LiberTEM's rule), so
//! the executor negotiates the input dtype from the corrected values. An excluded pixel
//! at the border of a requested tile needs neighbours outside it: the wrapper reads the
//! tile grown by one pixel on each side, corrects that, and copies out the tile.

use super::{Dataset, DatasetError, DatasetInfo, DatasetShape, OpenOptions, SigSlice};
use crate::dtype::{DType, Kind, StoredDType, converter, result_type};
use crate::udf::SliceRuns;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Pixels to exclude: a boolean mask file or a list of coordinates.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExcludedPixels {
    /// A sig-shaped boolean (or 0/1 integer) `.npy`: true marks an excluded pixel.
    Mask(PathBuf),
    /// Pixel coordinates, one `Vec` of sig-dimension indices each.
    Coordinates(Vec<Vec<usize>>),
}

impl ExcludedPixels {
    /// Parse a command-line value: a path to a `.npy` mask, or coordinates `y,x;y,x;...`.
    pub fn parse(text: &str) -> Result<Self, String> {
        let looks_like_coords = text.chars().all(|c| c.is_ascii_digit() || ",; ".contains(c));
        if !looks_like_coords {
            return Ok(ExcludedPixels::Mask(PathBuf::from(text)));
        }
        text.split(';')
            .filter(|p| !p.trim().is_empty())
            .map(|p| {
                p.split(',')
                    .map(|c| c.trim().parse::<usize>().map_err(|_| format!("'{p}' is not a coordinate like 12,34")))
                    .collect()
            })
            .collect::<Result<Vec<_>, _>>()
            .map(ExcludedPixels::Coordinates)
    }
}

/// An excluded pixel and the flat indices of its valid neighbours.
#[derive(Debug, Clone)]
struct Repair {
    pixel: usize,
    coords: Vec<usize>,
    neighbours: Vec<usize>,
}

/// The corrections wrapper built by [`apply`].
pub struct Corrected {
    inner: Arc<dyn Dataset>,
    stored: StoredDType,
    dark: Option<(Vec<f32>, Vec<f64>)>,
    gain: Option<(Vec<f32>, Vec<f64>)>,
    repairs: Vec<Repair>,
    sources: Vec<String>,
}

/// Wrap `data` with the corrections of `options`, if any.
///
/// # Errors
/// A correction file cannot be read or has the wrong shape, a coordinate is outside the
/// frame, an excluded pixel has no valid neighbour, or the data is complex.
pub fn apply(path: &Path, data: Arc<dyn Dataset>, options: &OpenOptions) -> Result<Arc<dyn Dataset>, DatasetError> {
    if options.dark.is_none() && options.gain.is_none() && options.excluded_pixels.is_none() {
        return Ok(data);
    }
    let sig = data.shape().sig.clone();
    let native = data.stored_dtype().dtype;
    if native.kind() == Kind::Complex {
        return Err(DatasetError::invalid(path, "corrections (--dark, --gain, --excluded-pixels) need real data"));
    }
    let stored = StoredDType::le(result_type(DType::F32, native));
    let mut sources = Vec::new();
    let load_map = |file: &Path, what: &str| -> Result<(Vec<f32>, Vec<f64>), DatasetError> {
        let array = crate::npy::read_array(file).map_err(|e| DatasetError::invalid(file, e))?;
        let squeezed: Vec<usize> = array.shape().iter().copied().filter(|&d| d != 1).collect();
        let want: Vec<usize> = sig.iter().copied().filter(|&d| d != 1).collect();
        if squeezed != want {
            return Err(DatasetError::invalid(
                file,
                format!("the {what} has shape {:?}, the frames have shape {sig:?}", array.shape()),
            ));
        }
        let values = crate::array::real_values(&array).ok_or_else(|| {
            DatasetError::invalid(file, format!("the {what} must be real numbers, found {}", array.dtype()))
        })?;
        Ok((values.iter().map(|&v| v as f32).collect(), values))
    };
    let dark = options.dark.as_deref().map(|f| load_map(f, "dark frame")).transpose()?;
    let gain = options.gain.as_deref().map(|f| load_map(f, "gain map")).transpose()?;
    if let Some(f) = &options.dark {
        sources.push(format!("dark {}", f.display()));
    }
    if let Some(f) = &options.gain {
        sources.push(format!("gain {}", f.display()));
    }
    let excluded: Vec<Vec<usize>> = match &options.excluded_pixels {
        None => Vec::new(),
        Some(ExcludedPixels::Coordinates(coords)) => {
            for c in coords {
                if c.len() != sig.len() || c.iter().zip(&sig).any(|(&i, &n)| i >= n) {
                    return Err(DatasetError::invalid(
                        path,
                        format!("excluded pixel {c:?} is not a pixel of frames of shape {sig:?}"),
                    ));
                }
            }
            sources.push(format!("{} excluded pixels", coords.len()));
            coords.clone()
        }
        Some(ExcludedPixels::Mask(file)) => {
            let (_, values) = load_map(file, "excluded-pixel mask")?;
            let coords: Vec<Vec<usize>> = values
                .iter()
                .enumerate()
                .filter(|&(_, &v)| v != 0.0)
                .map(|(i, _)| crate::array::unravel(i, &sig))
                .collect();
            sources.push(format!("{} excluded pixels from {}", coords.len(), file.display()));
            coords
        }
    };
    let repairs = repairs(path, &excluded, &sig)?;
    Ok(Arc::new(Corrected { inner: data, stored, dark, gain, repairs, sources }))
}

fn ravel(coords: &[usize], shape: &[usize]) -> usize {
    coords.iter().zip(shape).fold(0, |acc, (&c, &n)| acc * n + c)
}

/// LiberTEM's `RepairDescriptor`: neighbours inside the frame that are not excluded.
fn repairs(path: &Path, excluded: &[Vec<usize>], sig: &[usize]) -> Result<Vec<Repair>, DatasetError> {
    let flat: std::collections::HashSet<usize> = excluded.iter().map(|c| ravel(c, sig)).collect();
    let dims = sig.len();
    let mut out = Vec::with_capacity(flat.len());
    let mut seen = std::collections::HashSet::new();
    for coords in excluded {
        let pixel = ravel(coords, sig);
        if !seen.insert(pixel) {
            continue;
        }
        let mut neighbours = Vec::new();
        for k in 0..3usize.pow(dims as u32) {
            let mut rem = k;
            let mut n = Vec::with_capacity(dims);
            let mut inside = true;
            for d in (0..dims).rev() {
                let delta = (rem % 3) as isize - 1;
                rem /= 3;
                let c = coords[d] as isize + delta;
                inside &= c >= 0 && (c as usize) < sig[d];
                n.push(c.max(0) as usize);
            }
            n.reverse();
            if inside && n != *coords {
                let index = ravel(&n, sig);
                if !flat.contains(&index) {
                    neighbours.push(index);
                }
            }
        }
        if neighbours.is_empty() {
            return Err(DatasetError::invalid(
                path,
                format!("excluded pixel {coords:?} has no valid neighbour to repair it from (all are excluded)"),
            ));
        }
        out.push(Repair { pixel, coords: coords.clone(), neighbours });
    }
    out.sort_by_key(|r| r.pixel);
    Ok(out)
}

/// Float types the corrections are computed in.
trait Float: bytemuck::Pod + std::ops::Sub<Output = Self> + std::ops::Mul<Output = Self> {
    fn map(maps: &(Vec<f32>, Vec<f64>)) -> &[Self];
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
}

impl Float for f32 {
    fn map(maps: &(Vec<f32>, Vec<f64>)) -> &[Self] {
        &maps.0
    }
    fn to_f64(self) -> f64 {
        f64::from(self)
    }
    fn from_f64(v: f64) -> Self {
        v as f32
    }
}

impl Float for f64 {
    fn map(maps: &(Vec<f32>, Vec<f64>)) -> &[Self] {
        &maps.1
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn from_f64(v: f64) -> Self {
        v
    }
}

impl Corrected {
    /// Correct `buf` (frames × `region`, in compute type `T`) in place; excluded pixels
    /// are repaired where they lie inside `target`.
    fn correct<T: Float>(&self, buf: &mut [u8], region: &SigSlice, target: &SigSlice) {
        let sig = &self.inner.shape().sig;
        let values: &mut [T] = bytemuck::cast_slice_mut(buf);
        let per_frame = region.len();
        let runs = SliceRuns::new(sig, region);
        let dark = self.dark.as_ref().map(T::map);
        let gain = self.gain.as_ref().map(T::map);
        if dark.is_some() || gain.is_some() {
            for frame in values.chunks_exact_mut(per_frame) {
                let mut at = 0;
                for start in runs.starts.iter().copied() {
                    let run = &mut frame[at..at + runs.run_len];
                    match (dark, gain) {
                        (Some(d), Some(g)) => {
                            let (d, g) = (&d[start..start + runs.run_len], &g[start..start + runs.run_len]);
                            for ((x, &d), &g) in run.iter_mut().zip(d).zip(g) {
                                *x = (*x - d) * g;
                            }
                        }
                        (Some(d), None) => {
                            for (x, &d) in run.iter_mut().zip(&d[start..start + runs.run_len]) {
                                *x = *x - d;
                            }
                        }
                        (None, Some(g)) => {
                            for (x, &g) in run.iter_mut().zip(&g[start..start + runs.run_len]) {
                                *x = *x * g;
                            }
                        }
                        (None, None) => {}
                    }
                    at += runs.run_len;
                }
            }
        }
        // Repairs of the excluded pixels inside the target, from the region's values.
        let local = |flat: usize| -> usize {
            let c = crate::array::unravel(flat, sig);
            let rel: Vec<usize> = c.iter().zip(&region.origin).map(|(&c, &o)| c - o).collect();
            ravel(&rel, &region.shape)
        };
        let inside = |coords: &[usize], s: &SigSlice| {
            coords.iter().zip(s.origin.iter().zip(&s.shape)).all(|(&c, (&o, &n))| c >= o && c < o + n)
        };
        let todo: Vec<(usize, Vec<usize>)> = self
            .repairs
            .iter()
            .filter(|r| inside(&r.coords, target))
            .map(|r| (local(r.pixel), r.neighbours.iter().map(|&n| local(n)).collect()))
            .collect();
        if todo.is_empty() {
            return;
        }
        for frame in values.chunks_exact_mut(per_frame) {
            for (pixel, neighbours) in &todo {
                let sum: f64 = neighbours.iter().map(|&n| frame[n].to_f64()).sum();
                frame[*pixel] = T::from_f64(sum / neighbours.len() as f64);
            }
        }
    }

    /// The excluded pixels inside `slice`.
    fn has_repairs_in(&self, slice: &SigSlice) -> bool {
        self.repairs.iter().any(|r| {
            r.coords.iter().zip(slice.origin.iter().zip(&slice.shape)).all(|(&c, (&o, &n))| c >= o && c < o + n)
        })
    }
}

impl Dataset for Corrected {
    fn shape(&self) -> &DatasetShape {
        self.inner.shape()
    }

    fn stored_dtype(&self) -> StoredDType {
        self.stored
    }

    fn info(&self) -> DatasetInfo {
        let mut info = self.inner.info();
        info.details.push(("native_dtype".into(), self.inner.stored_dtype().to_string()));
        info.details.push(("corrections".into(), self.sources.join(", ")));
        info
    }

    fn base_shape(&self) -> Vec<usize> {
        self.inner.base_shape()
    }

    fn read_tile(&self, frames: &[u64], sig: &SigSlice, dtype: DType, out: &mut [u8]) -> Result<(), DatasetError> {
        let compute = if dtype == DType::F64 { DType::F64 } else { self.stored.dtype };
        let full = &self.inner.shape().sig;
        // Grow the slice by one pixel where excluded pixels need neighbours beyond it.
        let region = if self.has_repairs_in(sig) {
            let origin: Vec<usize> = sig.origin.iter().map(|&o| o.saturating_sub(1)).collect();
            let shape = sig
                .origin
                .iter()
                .zip(&sig.shape)
                .zip(full)
                .zip(&origin)
                .map(|(((&o, &n), &f), &g)| (o + n + 1).min(f) - g)
                .collect();
            SigSlice { origin, shape }
        } else {
            sig.clone()
        };
        if compute == dtype && region == *sig && (out.as_ptr() as usize).is_multiple_of(compute.size()) {
            self.inner.read_tile(frames, &region, compute, out)?;
            match compute {
                DType::F64 => self.correct::<f64>(out, &region, sig),
                _ => self.correct::<f32>(out, &region, sig),
            }
            return Ok(());
        }
        let bytes = frames.len() * region.len() * compute.size();
        let mut scratch = vec![0f64; bytes.div_ceil(8)];
        let target = &mut bytemuck::cast_slice_mut::<f64, u8>(&mut scratch)[..bytes];
        self.inner.read_tile(frames, &region, compute, target)?;
        match compute {
            DType::F64 => self.correct::<f64>(target, &region, sig),
            _ => self.correct::<f32>(target, &region, sig),
        }
        // Copy the target slice out of the region, converting.
        let convert = converter(StoredDType::le(compute), dtype);
        let rel = SigSlice {
            origin: sig.origin.iter().zip(&region.origin).map(|(&s, &r)| s - r).collect(),
            shape: sig.shape.clone(),
        };
        let runs = SliceRuns::new(&region.shape, &rel);
        let (cs, ds) = (compute.size(), dtype.size());
        let mut dst = 0;
        for frame in target.chunks_exact(region.len() * cs) {
            for start in runs.starts.iter().copied() {
                let n = runs.run_len;
                convert(&frame[start * cs..(start + n) * cs], &mut out[dst..dst + n * ds]);
                dst += n * ds;
            }
        }
        Ok(())
    }
}
