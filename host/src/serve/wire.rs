//! The binary messages the page receives over its WebSocket: a JSON header that says
//! what the message holds, then the raw bytes it describes.
//!
//! ```text
//! u32 LE   H, the header's length (the header is padded with spaces so that 4 + H is a
//!          multiple of 8)
//! H bytes  the header: JSON, {"type": "result" | "export", ...}
//! parts    each at an offset (from byte 4 + H) that is a multiple of 8, so that the page
//!          views them as typed arrays without copying
//! ```
//!
//! A `result` message carries, per shown buffer, its `data` (little-endian, in the dtype
//! the header names: the buffer's own — 64-bit integers exactly, for the page's
//! `BigInt64Array` / `BigUint64Array` — or, for complex values, which no typed array
//! holds, their magnitudes as float64), its valid mask (`valid`, one byte per element) and its images as the previews draw them (PNG, no colour bar, one
//! PNG pixel per data pixel, invalid positions grey) with the range and scale used.
//! Never lists of numbers in JSON.

use crate::array::NdArray;
use crate::dtype::{DType, Kind};
use crate::exec::{ResultBuffer, RunResults};
use crate::preview::{PreviewError, PreviewOptions, buffer_previews};
use serde_json::{Value, json};

/// A message being assembled.
pub struct Message {
    header: Value,
    parts: Vec<u8>,
}

impl Message {
    pub fn new(header: Value) -> Message {
        Message { header, parts: Vec::new() }
    }

    /// Add `bytes` as a part: its `[offset, length]` for the header.
    pub fn part(&mut self, bytes: &[u8]) -> [usize; 2] {
        let offset = self.parts.len();
        self.parts.extend_from_slice(bytes);
        self.parts.resize(self.parts.len().next_multiple_of(8), 0);
        [offset, bytes.len()]
    }

    pub fn header_mut(&mut self) -> &mut Value {
        &mut self.header
    }

    /// The message's bytes.
    pub fn finish(self) -> Vec<u8> {
        let mut header = self.header.to_string().into_bytes();
        header.resize((4 + header.len()).next_multiple_of(8) - 4, b' ');
        let mut out = Vec::with_capacity(4 + header.len() + self.parts.len());
        out.extend_from_slice(&(header.len() as u32).to_le_bytes());
        out.extend_from_slice(&header);
        out.extend_from_slice(&self.parts);
        out
    }
}

/// How the page's images are drawn: the previews' scaling and colour maps, without a
/// colour bar or upscaling (the page scales them up itself).
pub fn page_preview_options() -> PreviewOptions {
    PreviewOptions { min_side: 1, colorbar: false, max_slices: 4, ..PreviewOptions::default() }
}

/// The bytes the page gets for `array`, and their dtype name: as stored when a
/// JavaScript typed array holds them (64-bit integers too: `BigInt64Array`), else the
/// magnitudes as float64 (complex).
pub fn page_data(array: &NdArray) -> (Vec<u8>, &'static str) {
    match array.dtype() {
        d if d.kind() == Kind::Complex => {
            let parts: Vec<f64> = match d {
                DType::C64 => bytemuck::cast_slice::<u8, f32>(array.bytes()).iter().map(|&v| f64::from(v)).collect(),
                _ => bytemuck::cast_slice::<u8, f64>(array.bytes()).to_vec(),
            };
            let magnitudes: Vec<f64> = parts.chunks_exact(2).map(|c| c[0].hypot(c[1])).collect();
            (bytemuck::cast_slice(&magnitudes).to_vec(), DType::F64.name())
        }
        d => (array.bytes().to_vec(), d.name()),
    }
}

/// Add `buffer` to `message`: its data, valid mask and images; the header entry.
fn add_buffer(message: &mut Message, udf: &str, buffer: &ResultBuffer) -> Result<Value, PreviewError> {
    let (bytes, dtype) = page_data(&buffer.data);
    let data = message.part(&bytes);
    let valid = message.part(buffer.valid.bytes());
    let mut images = Vec::new();
    for image in buffer_previews(buffer, &page_preview_options())? {
        let png = message.part(&image.rendered.png);
        images.push(json!({
            "index": image.index,
            "png": png,
            "range": image.rendered.range,
            "extent": image.rendered.extent,
            "scale": image.rendered.scale,
            "colormap": image.rendered.colormap,
            "invalid": image.rendered.invalid,
        }));
    }
    Ok(json!({
        "udf": udf,
        "name": buffer.name,
        "kind": buffer.kind,
        "dtype": dtype,
        "stored_dtype": buffer.dtype().name(),
        "shape": buffer.data.shape(),
        "extra_shape": buffer.extra_shape,
        "data": data,
        "valid": valid,
        "all_valid": buffer.all_valid,
        "images": images,
    }))
}

/// What a `result` message says besides the buffers.
pub struct Progress<'a> {
    pub lane: &'a str,
    pub id: u64,
    pub merged: usize,
    pub total: usize,
    pub done: bool,
    /// Milliseconds since the server received the request.
    pub elapsed_ms: f64,
}

/// A `result` message: `results` so far, the buffers named in `show` (all if `None`).
///
/// # Errors
/// A PNG cannot be encoded.
pub fn results_message(
    progress: &Progress<'_>,
    results: &RunResults,
    show: Option<&[String]>,
) -> Result<Vec<u8>, PreviewError> {
    let mut message = Message::new(Value::Null);
    let mut buffers = Vec::new();
    for udf in &results.udfs {
        for buffer in &udf.buffers {
            if show.is_none_or(|names| names.contains(&buffer.name)) {
                buffers.push(add_buffer(&mut message, &udf.name, buffer)?);
            }
        }
    }
    *message.header_mut() = json!({
        "type": "result",
        "lane": progress.lane,
        "id": progress.id,
        "merged": progress.merged,
        "total": progress.total,
        "done": progress.done,
        "elapsed_ms": progress.elapsed_ms,
        "frames": results.stats.frames,
        "process_seconds": results.stats.process_seconds,
        "buffers": buffers,
    });
    Ok(message.finish())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Read a message back as the page does.
    fn parse(bytes: &[u8]) -> (Value, &[u8]) {
        let h = u32::from_le_bytes(bytes[..4].try_into().unwrap()) as usize;
        assert_eq!((4 + h) % 8, 0);
        (serde_json::from_slice(&bytes[4..4 + h]).unwrap(), &bytes[4 + h..])
    }

    #[test]
    fn parts_are_aligned_and_found_where_the_header_says() {
        let mut m = Message::new(Value::Null);
        let a = m.part(b"abc");
        let b = m.part(&[1u8; 9]);
        *m.header_mut() = json!({"a": a, "b": b});
        let bytes = m.finish();
        let (header, parts) = parse(&bytes);
        assert_eq!(header["a"], json!([0, 3]));
        assert_eq!(header["b"], json!([8, 9]));
        assert_eq!(&parts[0..3], b"abc");
        assert_eq!(&parts[8..17], &[1u8; 9]);
    }

    #[test]
    fn wide_integers_reach_the_page_exactly_and_complex_values_as_magnitudes() {
        // 2^53 + 1 and u64::MAX have no float64 of their own.
        let ints = NdArray::from_vec(&[3], vec![(1i64 << 53) + 1, -4, i64::MIN]).unwrap();
        let (bytes, dtype) = page_data(&ints);
        assert_eq!((bytemuck::cast_slice::<u8, i64>(&bytes), dtype), (&[(1i64 << 53) + 1, -4, i64::MIN][..], "int64"));
        let unsigned = NdArray::from_vec(&[2], vec![u64::MAX, (1u64 << 53) + 1]).unwrap();
        let (bytes, dtype) = page_data(&unsigned);
        assert_eq!((bytemuck::cast_slice::<u8, u64>(&bytes), dtype), (&[u64::MAX, (1u64 << 53) + 1][..], "uint64"));
        let complex = NdArray::from_vec(&[1], vec![num_complex::Complex32::new(3.0, 4.0)]).unwrap();
        let (bytes, dtype) = page_data(&complex);
        assert_eq!((bytemuck::cast_slice::<u8, f64>(&bytes), dtype), (&[5.0][..], "float64"));
        let floats = NdArray::from_vec(&[2], vec![1.5f32, 2.0]).unwrap();
        assert_eq!(page_data(&floats), (floats.bytes().to_vec(), "float32"));
    }
}
