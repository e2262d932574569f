//! Previews: PNG pictures of the result buffers that are images, for people to look at.
//!
//! | item | role |
//! |------|------|
//! | [`run_previews`] | every image of every buffer of a run, named `<udf>/<buffer>[.<i>...].png` |
//! | [`buffer_previews`] | the images of one [`ResultBuffer`] |
//! | [`png_bytes`] | one image of a buffer as PNG bytes (the hook for Python's `Buffer.preview()`) |
//! | [`render`] | any grid of values with a valid mask, as a [`Rendered`] PNG |
//! | [`PreviewOptions`] | colour map, scaling, percentiles, upscaling, slice count, colour bar |
//!
//! **Which buffers are images.** A nav buffer of a 2-D scan (one image of the scan
//! shape), a sig buffer of 2-D frames (one image of the frame shape), and a single buffer
//! of two or more dimensions whose last two are at least [`MIN_SINGLE_SIDE`] long. An
//! extra shape makes several images: for nav and sig buffers one per extra element (the
//! `y` and `x` of a CoM field), for single buffers one per index of the leading axes;
//! the first [`PreviewOptions::max_slices`] of them are drawn.
//!
//! **How values become colours** (per image, over its valid, finite values; complex
//! values by their magnitude):
//! - the colour-map ends are the [`PreviewOptions::percentiles`] (0.5 and 99.5 by
//!   default, NumPy's linear interpolation), so a few hot pixels do not wash out the rest;
//! - a signed image (low percentile below zero, high above) gets the diverging map,
//!   symmetric about zero: blue for negative, near-white for 0, red for positive
//!   (ColorBrewer's RdBu as d3 interpolates it, reversed); everything else viridis;
//! - sig images without negative values are log-scaled (diffraction patterns span
//!   decades): the percentiles are taken of the positive values and `log10` maps between
//!   them; zeros get the bottom colour;
//! - positions that are not valid (outside the ROI, not merged yet) or not finite are
//!   drawn in [`INVALID_RGB`], a grey neither map contains.
//!
//! Small images are upscaled by an integer factor, nearest neighbour, until the longer
//! side reaches [`PreviewOptions::min_side`]; a colour bar to the right shows the
//! values at its ends (and "0" or "log" in the middle), with a grey "n/a" swatch when
//! some pixels are invalid.
//!
//! ```
//! use udf_host::preview::{render, ImageKind, PreviewOptions};
//! let values: Vec<f64> = (0..16).map(f64::from).collect();
//! let image = render(&values, &[true; 16], 4, 4, ImageKind::Nav, &PreviewOptions::default()).unwrap();
//! assert_eq!(image.upscale, 64); // 4 x 4 pixels drawn 256 x 256
//! assert!(image.png.starts_with(b"\x89PNG"));
//! ```

mod draw;
mod scaling;

pub(crate) use draw::short_number;
pub use scaling::{ColorMap, Scale};

use crate::array::{NdArray, unravel};
use crate::dtype::DType;
use crate::exec::{ResultBuffer, ResultExtra, RunResults};
use crate::udf::BufferKind;
use serde::Serialize;
use std::sync::Arc;

/// The colour of invalid (masked, not merged, outside the ROI) and non-finite pixels.
pub const INVALID_RGB: [u8; 3] = [128, 128, 128];

/// Single buffers are images only when their last two axes are at least this long (a
/// 3 x 2 regression matrix is not a picture).
pub const MIN_SINGLE_SIDE: usize = 4;

/// How previews are drawn.
#[derive(Debug, Clone, PartialEq)]
pub struct PreviewOptions {
    /// `None`: log for sig images without negative values, linear otherwise.
    pub scale: Option<Scale>,
    /// `None`: diverging when the robust range straddles zero, viridis otherwise.
    pub colormap: Option<ColorMap>,
    /// Percentiles (0 to 100) of the valid values that map to the ends of the colour map.
    pub percentiles: (f64, f64),
    /// Images are upscaled by an integer factor until their longer side is at least this.
    pub min_side: usize,
    /// The most images drawn of one buffer (the first ones of its slices).
    pub max_slices: usize,
    /// Draw a colour bar with the value range to the right of the image; without it the
    /// PNG is the image alone.
    pub colorbar: bool,
}

impl Default for PreviewOptions {
    fn default() -> Self {
        PreviewOptions {
            scale: None,
            colormap: None,
            percentiles: (0.5, 99.5),
            min_side: 256,
            max_slices: 16,
            colorbar: true,
        }
    }
}

/// What an image shows, which decides the default scaling.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ImageKind {
    /// One value per scan position (a virtual image).
    Nav,
    /// One value per detector pixel (a diffraction pattern): log-scaled by default.
    Sig,
    /// Anything else.
    Other,
}

/// Why a preview could not be drawn.
#[derive(Debug, thiserror::Error)]
pub enum PreviewError {
    #[error(
        "buffer '{buffer}' ({kind} buffer of shape {shape:?}) is not an image: previews are drawn of nav buffers of \
         a 2-D scan, sig buffers of 2-D frames, and single buffers with two axes of at least {MIN_SINGLE_SIDE}"
    )]
    NotAnImage { buffer: String, kind: &'static str, shape: Vec<usize> },
    #[error("buffer '{buffer}' has {count} images; there is no image {index}")]
    NoSuchSlice { buffer: String, count: usize, index: usize },
    #[error("{values} values and {valid} valid flags do not make a {height} x {width} image")]
    Size { values: usize, valid: usize, height: usize, width: usize },
    #[error("cannot encode the PNG preview: {0}")]
    Encode(#[from] png::EncodingError),
}

/// A drawn image.
#[derive(Debug, Clone, Serialize)]
pub struct Rendered {
    /// The PNG file (8-bit RGB).
    #[serde(skip)]
    pub png: Vec<u8>,
    /// Size of the PNG in pixels (image, margins and colour bar).
    pub width: u32,
    pub height: u32,
    /// The image's data pixels: rows, columns.
    pub image_shape: [usize; 2],
    /// Each data pixel is drawn as `upscale` x `upscale` PNG pixels ...
    pub upscale: usize,
    /// ... with data pixel `(0, 0)` at PNG pixel `(x, y) = origin`.
    pub origin: [u32; 2],
    pub scale: Scale,
    pub colormap: ColorMap,
    /// The values at the ends of the colour map (`None`: no valid value).
    pub range: Option<[f64; 2]>,
    /// The smallest and largest valid, finite value.
    pub extent: Option<[f64; 2]>,
    /// Pixels drawn as invalid (not valid or not finite).
    pub invalid: usize,
}

/// One image of a run's buffer.
#[derive(Debug, Clone)]
pub struct Preview {
    pub udf: String,
    pub buffer: String,
    /// The slice of the extra shape (nav, sig) or of the leading axes (single); empty
    /// when the buffer is one image.
    pub index: Vec<usize>,
    /// How many images the buffer has (more than were drawn when over `max_slices`).
    pub slices: usize,
    /// Relative path in the results directory: `<udf>/<buffer>.png` or
    /// `<udf>/<buffer>.<i>[.<j>...].png`.
    pub file: String,
    pub rendered: Rendered,
}

/// Where a buffer's images lie in its `data`: element `(slice, y, x)` is at
/// `slice * slice_stride + (y * width + x) * pixel_stride`.
struct Layout {
    height: usize,
    width: usize,
    /// The shape the slice index unravels into.
    slice_shape: Vec<usize>,
    slice_stride: usize,
    pixel_stride: usize,
    kind: ImageKind,
}

impl Layout {
    fn of(buffer: &ResultBuffer) -> Option<Layout> {
        Layout::of_shape(buffer.kind, buffer.data.shape(), &buffer.extra_shape)
    }

    /// The images of a `kind` buffer of `shape` whose last axes are `extra`.
    fn of_shape(kind: BufferKind, shape: &[usize], extra: &[usize]) -> Option<Layout> {
        match kind {
            BufferKind::Nav | BufferKind::Sig => {
                let base = shape.len().checked_sub(extra.len())?;
                (base == 2).then(|| Layout {
                    height: shape[0],
                    width: shape[1],
                    slice_shape: extra.to_vec(),
                    slice_stride: 1,
                    pixel_stride: extra.iter().product(),
                    kind: if kind == BufferKind::Nav { ImageKind::Nav } else { ImageKind::Sig },
                })
            }
            BufferKind::Single => {
                let [lead @ .., h, w] = shape else { return None };
                (*h >= MIN_SINGLE_SIDE && *w >= MIN_SINGLE_SIDE).then(|| Layout {
                    height: *h,
                    width: *w,
                    slice_shape: lead.to_vec(),
                    slice_stride: h * w,
                    pixel_stride: 1,
                    kind: ImageKind::Other,
                })
            }
        }
    }

    fn slices(&self) -> usize {
        self.slice_shape.iter().product()
    }

    /// The values (as `f64`, complex ones by magnitude) and valid flags of slice `s`:
    /// only this slice's elements are converted, never the whole buffer.
    fn extract(&self, array: &NdArray, valid: &[u8], s: usize) -> (Vec<f64>, Vec<bool>) {
        let positions = || (0..self.height * self.width).map(move |p| s * self.slice_stride + p * self.pixel_stride);
        (values_at(array, positions()), positions().map(|i| valid[i] != 0).collect())
    }
}

/// The elements `at` of an array as `f64` (complex ones by magnitude).
fn values_at(array: &NdArray, at: impl Iterator<Item = usize>) -> Vec<f64> {
    use crate::dtype::CastFrom;
    let bytes = array.bytes();
    match array.dtype() {
        DType::C64 => {
            let parts = bytemuck::cast_slice::<u8, f32>(bytes);
            at.map(|i| f64::from(parts[2 * i]).hypot(f64::from(parts[2 * i + 1]))).collect()
        }
        DType::C128 => {
            let parts = bytemuck::cast_slice::<u8, f64>(bytes);
            at.map(|i| parts[2 * i].hypot(parts[2 * i + 1])).collect()
        }
        dtype => crate::with_dtype!(dtype, T => {
            let values = bytemuck::cast_slice::<u8, T>(bytes);
            at.map(|i| f64::cast_from(values[i])).collect()
        }, at.map(|i| f64::from(bytes[i])).collect()),
    }
}

/// One image of a buffer.
#[derive(Debug, Clone)]
pub struct BufferImage {
    /// The slice (empty when the buffer is one image).
    pub index: Vec<usize>,
    /// How many images the buffer has.
    pub slices: usize,
    pub rendered: Rendered,
}

/// The images of `buffer`, the first `options.max_slices` of its slices; empty when the
/// buffer is not an image.
///
/// # Errors
/// PNG encoding fails.
pub fn buffer_previews(buffer: &ResultBuffer, options: &PreviewOptions) -> Result<Vec<BufferImage>, PreviewError> {
    let Some(layout) = Layout::of(buffer) else { return Ok(Vec::new()) };
    let valid = buffer.valid.bytes();
    let count = layout.slices();
    let mut out = Vec::new();
    for s in 0..count.min(options.max_slices) {
        let (v, ok) = layout.extract(&buffer.data, valid, s);
        let index = if layout.slice_shape.is_empty() { Vec::new() } else { unravel(s, &layout.slice_shape) };
        let rendered = render(&v, &ok, layout.height, layout.width, layout.kind, options)?;
        out.push(BufferImage { index, slices: count, rendered });
    }
    Ok(out)
}

/// Image `slice` of `buffer` (0 for a buffer that is one image; slices count in C order
/// over the extra shape, or the leading axes of a single buffer) as PNG bytes, drawn as
/// `udf-host run --preview` draws it.
///
/// This is what Python's `Buffer.preview()` returns, so notebooks show results inline.
///
/// # Errors
/// The buffer is not an image, has no such slice, or encoding fails.
pub fn png_bytes(buffer: &ResultBuffer, slice: usize, options: &PreviewOptions) -> Result<Vec<u8>, PreviewError> {
    let layout = Layout::of(buffer).ok_or_else(|| PreviewError::NotAnImage {
        buffer: buffer.name.clone(),
        kind: buffer.kind.name(),
        shape: buffer.data.shape().to_vec(),
    })?;
    if slice >= layout.slices() {
        return Err(PreviewError::NoSuchSlice { buffer: buffer.name.clone(), count: layout.slices(), index: slice });
    }
    let (v, ok) = layout.extract(&buffer.data, buffer.valid.bytes(), slice);
    Ok(render(&v, &ok, layout.height, layout.width, layout.kind, options)?.png)
}

/// At least the host memory the previews of a `kind` buffer of result shape `shape`
/// (nav buffers: the scan's shape, then `extra`) take when drawn with `options`: the PNG
/// of each image drawn (kept until the results are written), and while one image is
/// drawn its values, valid flags and their sorted copy, the canvas and the encoder's
/// buffers. 0 for a buffer that is not an image. What `udf-host run` counts against
/// `--max-result-memory` when it draws previews (`--preview`, `--snapshot-every`), and
/// `serve` and the Python package (`Buffer.preview()`) always.
pub fn memory_bound(kind: BufferKind, shape: &[usize], extra: &[usize], options: &PreviewOptions) -> u64 {
    let Some(layout) = Layout::of_shape(kind, shape, extra) else { return 0 };
    let images = layout.slices().min(options.max_slices) as u64;
    let (canvas, rows) = draw::canvas_bound(layout.height, layout.width, options);
    // Raw PNG data: a filter byte per row; deflate never grows it by more than a few
    // bytes per 16 KiB block; headers and text chunks.
    let png = canvas.saturating_add(rows).saturating_add(canvas / 1024).saturating_add(4096);
    let pixels = (layout.height as u64).saturating_mul(layout.width as u64);
    // Values (f64), valid flags, the sorted finite values (f64); the canvas, the
    // compressed stream as it grows (up to twice its length) and the PNG.
    let drawing = pixels.saturating_mul(17).saturating_add(canvas).saturating_add(png.saturating_mul(3));
    images.saturating_mul(png).saturating_add(drawing)
}

/// The previews drawn with `options` as a run counts them when it is planned
/// ([`RunOptions::result_extra`](crate::exec::RunOptions::result_extra)).
pub fn result_extra(options: PreviewOptions) -> ResultExtra {
    result_extra_drawn(vec![options])
}

/// The previews of a front end that draws each buffer's images in several ways (the
/// `serve` page's images and its export's files), counted together.
pub fn result_extra_drawn(all: Vec<PreviewOptions>) -> ResultExtra {
    ResultExtra {
        what: "previews",
        bytes: Arc::new(move |kind, shape, extra| {
            all.iter().map(|options| memory_bound(kind, shape, extra, options)).fold(0, u64::saturating_add)
        }),
    }
}

/// The relative file of a preview: `<udf>/<buffer>.png`, or with the slice index
/// `<udf>/<buffer>.<i>[.<j>...].png`.
pub fn file_name(udf: &str, buffer: &str, index: &[usize]) -> String {
    let suffix: String = index.iter().map(|i| format!(".{i}")).collect();
    format!("{udf}/{buffer}{suffix}.png")
}

/// Every image of every buffer of `results`, in UDF and declaration order.
///
/// # Errors
/// PNG encoding fails.
pub fn run_previews(results: &RunResults, options: &PreviewOptions) -> Result<Vec<Preview>, PreviewError> {
    let mut out = Vec::new();
    for u in &results.udfs {
        for b in &u.buffers {
            for image in buffer_previews(b, options)? {
                out.push(Preview {
                    udf: u.name.clone(),
                    buffer: b.name.clone(),
                    file: file_name(&u.name, &b.name, &image.index),
                    index: image.index,
                    slices: image.slices,
                    rendered: image.rendered,
                });
            }
        }
    }
    Ok(out)
}

/// Draw a `height` x `width` grid of `values` (row-major) with its `valid` flags as a
/// PNG: scaled and coloured as the module docs say, upscaled, with a colour bar.
///
/// # Errors
/// `values` or `valid` do not hold `height * width` entries; PNG encoding fails.
pub fn render(
    values: &[f64],
    valid: &[bool],
    height: usize,
    width: usize,
    kind: ImageKind,
    options: &PreviewOptions,
) -> Result<Rendered, PreviewError> {
    if values.len() != height * width || valid.len() != values.len() {
        return Err(PreviewError::Size { values: values.len(), valid: valid.len(), height, width });
    }
    let mapping = scaling::Mapping::choose(values, valid, kind, options);
    draw::draw(values, valid, height, width, &mapping, options)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{GlobalAlloc, Layout as AllocLayout, System};
    use std::cell::Cell;

    /// The system allocator, counting what each thread holds and the most it held.
    struct Counting;

    thread_local! {
        static HELD: Cell<usize> = const { Cell::new(0) };
        static PEAK: Cell<usize> = const { Cell::new(0) };
    }

    // SAFETY: every call is the system allocator's; the counters only add and subtract
    // the sizes it was asked for.
    unsafe impl GlobalAlloc for Counting {
        unsafe fn alloc(&self, layout: AllocLayout) -> *mut u8 {
            let held = HELD.with(|h| {
                h.set(h.get() + layout.size());
                h.get()
            });
            PEAK.with(|p| p.set(p.get().max(held)));
            // SAFETY: the caller's layout, passed on unchanged.
            unsafe { System.alloc(layout) }
        }

        unsafe fn dealloc(&self, ptr: *mut u8, layout: AllocLayout) {
            HELD.with(|h| h.set(h.get().saturating_sub(layout.size())));
            // SAFETY: `ptr` came from `alloc` with this layout.
            unsafe { System.dealloc(ptr, layout) }
        }
    }

    #[global_allocator]
    static COUNTING: Counting = Counting;

    /// The most this thread held while `f` ran, beyond what it held before.
    fn peak_of(f: impl FnOnce()) -> usize {
        let before = HELD.with(Cell::get);
        PEAK.with(|p| p.set(before));
        f();
        PEAK.with(Cell::get) - before
    }

    /// Issue 33, finding 2: a buffer's previews converted the whole buffer to `f64` to draw
    /// its first 16 images, twice the memory of a float32 buffer whatever the slice count.
    /// Each image converts only its own slice.
    #[test]
    fn previews_convert_one_slice_at_a_time() {
        let (scan, slices) = ([64usize, 64], 256usize);
        let elements = scan[0] * scan[1] * slices;
        let data = NdArray::from_vec(&[scan[0], scan[1], slices], (0..elements).map(|i| i as f32).collect()).unwrap();
        let valid = NdArray::from_bools(&[scan[0], scan[1], slices], &vec![true; elements]).unwrap();
        let buffer = ResultBuffer {
            name: "x".into(),
            kind: BufferKind::Nav,
            extra_shape: vec![slices],
            raw: data.clone(),
            data,
            valid,
            all_valid: true,
        };
        let options = PreviewOptions::default();
        let mut images = Vec::new();
        let peak = peak_of(|| images = buffer_previews(&buffer, &options).unwrap());
        assert_eq!(images.len(), options.max_slices);
        let buffer_bytes = elements * 4;
        assert!(peak < buffer_bytes / 2, "drawing 16 of 256 slices held {peak} bytes; the buffer has {buffer_bytes}");
        let bound = memory_bound(BufferKind::Nav, &[64, 64, slices], &[slices], &options);
        assert!(peak as u64 <= bound, "held {peak} bytes, more than the bound of {bound} the run is checked with");
    }
}
