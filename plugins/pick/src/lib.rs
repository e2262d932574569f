//! `pick`: copies of the raw frames of a (small) selection (LiberTEM's `PickUDF`).
//!
//! # Definition
//!
//! `intensity[i] = F_{n_i}`: the `i`-th processed frame (ROI order, or every frame
//! without a ROI), in the dataset's native dtype — equal to `data[roi]`.
//!
//! # Buffers
//!
//! | name        | kind   | extra shape    | dtype            |
//! |-------------|--------|----------------|------------------|
//! | `intensity` | single | `(N, *sig)`    | input (native)   |
//!
//! `N` = the number of processed frames (the ROI count, else the nav size). The plugin
//! prefers the native dtype; in a run with UDFs that prefer float it gets (and keeps) the
//! run's common input dtype, like LiberTEM's `meta.input_dtype`. A buffer of more than
//! 256 MiB is declared with a warning in the log: every partition holds a full copy.
//!
//! # Processing
//!
//! `process_tile` writes the tile into rows `[origin, origin + frames)` (compressed nav
//! index) and the tile's signal slice. `merge` adds the partition's buffer to the merged
//! one (`dest += src`; booleans: `dest |= src`), which is a copy because every partition
//! leaves the rows of other partitions zeroed.

use udf_sdk::ndarray::{ArrayViewMutD, Slice};
use udf_sdk::prelude::*;
use udf_sdk::{Element, dtype_name, dtype_size, log, with_numeric_type};

/// Buffer size above which `result_buffers` warns (LiberTEM: 256 MiB).
const WARN_BYTES: u64 = 256 << 20;

struct Pick;

/// Copy the tile into its rows and signal slice of `intensity`.
fn write_tile<T: Element>(tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
    let data = tile.data::<T>()?;
    let mut intensity: ArrayViewMutD<'_, T> = results.view_mut::<T>("intensity")?;
    let origin = usize::try_from(tile.origin()).map_err(|_| UdfError::internal("pick: tile origin too large"))?;
    let rows = intensity.shape().first().copied().unwrap_or(0);
    if origin + tile.frames() > rows || intensity.ndim() != tile.sig_shape().len() + 1 {
        return Err(UdfError::internal(format!(
            "pick: tile of frames {origin}..{} does not fit the buffer of shape {:?}",
            origin + tile.frames(),
            intensity.shape()
        )));
    }
    intensity.slice_axis_inplace(Axis(0), Slice::from(origin..origin + tile.frames()));
    for (axis, (&start, &len)) in tile.sig_origin().iter().zip(tile.sig_shape()).enumerate() {
        let start = usize::try_from(start).map_err(|_| UdfError::internal("pick: signal origin too large"))?;
        if start + len > intensity.shape()[axis + 1] {
            return Err(UdfError::internal(format!("pick: signal slice at {start} (+{len}) is outside the frame")));
        }
        intensity.slice_axis_inplace(Axis(axis + 1), Slice::from(start..start + len));
    }
    intensity.assign(&data);
    Ok(())
}

impl Udf for Pick {
    fn describe() -> Description {
        Description::new("pick", env!("CARGO_PKG_VERSION"), "Raw frames of the selection (LiberTEM PickUDF)")
            .native_dtype()
            .custom_merge()
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let mut extra = vec![dataset.frames()];
        extra.extend_from_slice(&dataset.sig_shape);
        let bytes = extra.iter().fold(dtype_size(dataset.input_dtype) as u64, |acc, &d| acc.saturating_mul(d));
        if bytes > WARN_BYTES {
            log!(
                warn,
                "pick: the result holds {} frames of {:?} {} = {} MiB, and every partition keeps a full copy; \
                 select fewer frames with a ROI",
                dataset.frames(),
                dataset.sig_shape,
                dtype_name(dataset.input_dtype),
                bytes >> 20
            );
        }
        Ok(vec![BufferDecl::single("intensity", dataset.input_dtype).extra_shape(&extra)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Pick)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        with_numeric_type!(tile.dtype(), T => write_tile::<T>(tile, results), write_tile::<bool>(tile, results))
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let dtype = src.dtype("intensity")?;
        if dest.dtype("intensity")? != dtype {
            return Err(UdfError::internal("pick: merged and partition buffers differ in dtype"));
        }
        with_numeric_type!(
            dtype,
            T => add_into::<T>(dest, src, |a, b| *a += b),
            add_into::<bool>(dest, src, |a, b| *a |= b)
        )
    }
}

/// `dest.intensity ⊕= src.intensity` element-wise.
fn add_into<T: Element>(dest: &mut Buffers, src: &Buffers, add: impl Fn(&mut T, T)) -> Result<()> {
    let mut acc = dest.view_mut::<T>("intensity")?;
    let part = src.view::<T>("intensity")?;
    if acc.shape() != part.shape() {
        return Err(UdfError::internal(format!(
            "pick: merged buffer {:?} and partition buffer {:?} differ in shape",
            acc.shape(),
            part.shape()
        )));
    }
    Zip::from(&mut acc).and(&part).for_each(|a, &b| add(a, b));
    Ok(())
}

udf_sdk::export_udf!(Pick);
