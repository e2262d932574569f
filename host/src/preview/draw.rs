//! The picture: the upscaled image, the colour bar with its labels, PNG encoding.
//!
//! Layout with a colour bar (PNG pixels): the image at `(MARGIN, MARGIN)`, the bar
//! `BAR_GAP` to its right, labels right of the bar (8 x 8 glyphs of `font8x8`), white
//! background; without one, the image alone.

use super::scaling::{ColorMap, Mapping, Scale};
use super::{INVALID_RGB, PreviewError, PreviewOptions, Rendered};

const MARGIN: usize = 8;
const BAR_GAP: usize = 12;
const BAR_WIDTH: usize = 14;
const LABEL_GAP: usize = 6;
const GLYPH: usize = 8;
/// The colour bar is at least this tall, however flat the image.
const MIN_BAR: usize = 96;
const BACKGROUND: [u8; 3] = [255, 255, 255];
const INK: [u8; 3] = [32, 32, 32];

/// An RGB picture being drawn.
struct Canvas {
    width: usize,
    pixels: Vec<u8>,
}

impl Canvas {
    fn new(width: usize, height: usize) -> Canvas {
        Canvas { width, pixels: BACKGROUND.repeat(width * height) }
    }

    fn fill(&mut self, x: usize, y: usize, w: usize, h: usize, rgb: [u8; 3]) {
        for row in y..y + h {
            let start = (row * self.width + x) * 3;
            for px in self.pixels[start..start + w * 3].chunks_exact_mut(3) {
                px.copy_from_slice(&rgb);
            }
        }
    }

    /// ASCII `text` with its top-left corner at `(x, y)`; other characters as `?`.
    fn text(&mut self, x: usize, y: usize, text: &str) {
        for (i, ch) in text.chars().enumerate() {
            let code = if ch.is_ascii() { ch as usize } else { '?' as usize };
            let glyph = font8x8::legacy::BASIC_LEGACY[code];
            for (row, bits) in glyph.iter().enumerate() {
                for col in 0..GLYPH {
                    if bits >> col & 1 == 1 {
                        self.fill(x + i * GLYPH + col, y + row, 1, 1, INK);
                    }
                }
            }
        }
    }
}

/// A number in at most ~9 characters: 4 significant digits, scientific notation outside
/// 0.001 to 99999.
pub(crate) fn short_number(v: f64) -> String {
    let a = v.abs();
    if v == 0.0 || !v.is_finite() {
        return format!("{v}");
    }
    let trim = |s: String| -> String {
        if s.contains('.') { s.trim_end_matches('0').trim_end_matches('.').to_owned() } else { s }
    };
    if (1e-3..1e5).contains(&a) {
        let decimals = (3 - a.log10().floor() as i32).clamp(0, 6) as usize;
        trim(format!("{v:.decimals$}"))
    } else {
        let text = format!("{v:.3e}");
        match text.split_once('e') {
            Some((mantissa, exp)) => format!("{}e{exp}", trim(mantissa.to_owned())),
            None => text,
        }
    }
}

/// The labels at the top, middle and bottom of the colour bar.
fn labels(mapping: &Mapping) -> [String; 3] {
    let Some([lo, hi]) = mapping.range else { return [String::new(), "n/a".into(), String::new()] };
    let middle = match (mapping.scale, mapping.colormap) {
        (Scale::Log, _) => "log",
        (Scale::Linear, ColorMap::Diverging) => "0",
        (Scale::Linear, ColorMap::Viridis) => "",
    };
    [short_number(hi), middle.into(), short_number(lo)]
}

/// The factor a `height` x `width` image is upscaled by.
fn upscale(height: usize, width: usize, options: &PreviewOptions) -> usize {
    options.min_side.div_ceil(height.max(width).max(1)).max(1)
}

/// The longest label [`short_number`] writes (`-1.235e-308`), in characters.
const LONGEST_LABEL: u64 = 11;

/// At least the bytes of the RGB canvas [`draw`] draws a `height` x `width` image on
/// (with the widest labels and the invalid swatch), and the most rows it has.
pub(super) fn canvas_bound(height: usize, width: usize, options: &PreviewOptions) -> (u64, u64) {
    let up = upscale(height, width, options) as u64;
    let (iw, ih) = ((width as u64).saturating_mul(up), (height as u64).saturating_mul(up));
    let fixed = |n: usize| n as u64;
    let (cw, ch) = if options.colorbar {
        let cw = iw.saturating_add(fixed(2 * MARGIN + BAR_GAP + BAR_WIDTH + LABEL_GAP) + LONGEST_LABEL * fixed(GLYPH));
        (cw, ih.max(fixed(MIN_BAR)).saturating_add(fixed(2 * MARGIN + GLYPH + 6)))
    } else {
        (iw.max(1), ih.max(1))
    };
    (cw.saturating_mul(ch).saturating_mul(3), ch)
}

pub(super) fn draw(
    values: &[f64],
    valid: &[bool],
    height: usize,
    width: usize,
    mapping: &Mapping,
    options: &PreviewOptions,
) -> Result<Rendered, PreviewError> {
    let upscale = upscale(height, width, options);
    let (iw, ih) = (width * upscale, height * upscale);
    let invalid = values.iter().zip(valid).filter(|(v, ok)| !**ok || !v.is_finite()).count();
    let labels = labels(mapping);
    let swatch = if invalid > 0 { GLYPH + 6 } else { 0 };
    let bar_h = ih.max(MIN_BAR);
    let label_w = labels.iter().map(String::len).chain([3]).max().unwrap_or(0) * GLYPH;
    let (origin, cw, ch) = if options.colorbar {
        let cw = MARGIN + iw + BAR_GAP + BAR_WIDTH + LABEL_GAP + label_w + MARGIN;
        (MARGIN, cw, MARGIN + bar_h + swatch + MARGIN)
    } else {
        (0, iw.max(1), ih.max(1))
    };
    let mut canvas = Canvas::new(cw, ch);
    for y in 0..height {
        for x in 0..width {
            let i = y * width + x;
            let rgb = mapping.color(values[i], valid[i]);
            canvas.fill(origin + x * upscale, origin + y * upscale, upscale, upscale, rgb);
        }
    }
    if options.colorbar {
        let (bx, by) = (origin + iw + BAR_GAP, MARGIN);
        canvas.fill(bx - 1, by - 1, BAR_WIDTH + 2, bar_h + 2, INK);
        for r in 0..bar_h {
            let t = 1.0 - r as f64 / (bar_h - 1) as f64;
            canvas.fill(bx, by + r, BAR_WIDTH, 1, mapping.colormap.color(t));
        }
        let lx = bx + BAR_WIDTH + LABEL_GAP;
        canvas.text(lx, by, &labels[0]);
        canvas.text(lx, by + bar_h / 2 - GLYPH / 2, &labels[1]);
        canvas.text(lx, by + bar_h - GLYPH, &labels[2]);
        if invalid > 0 {
            let sy = by + bar_h + 6;
            canvas.fill(bx - 1, sy - 1, BAR_WIDTH + 2, GLYPH + 2, INK);
            canvas.fill(bx, sy, BAR_WIDTH, GLYPH, INVALID_RGB);
            canvas.text(lx, sy, "n/a");
        }
    }

    let range_text = match mapping.range {
        Some([lo, hi]) => format!("{lo} to {hi}"),
        None => "none (no valid value)".into(),
    };
    let comment = format!(
        "{height} x {width} pixels, {} scale, {} colour map, range {range_text}, {invalid} invalid",
        mapping.scale.name(),
        mapping.colormap.name()
    );
    let mut png = Vec::new();
    let mut encoder = png::Encoder::new(&mut png, cw as u32, ch as u32);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.add_text_chunk("Software".into(), format!("udf-host {}", env!("CARGO_PKG_VERSION")))?;
    encoder.add_text_chunk("Comment".into(), comment)?;
    let mut writer = encoder.write_header()?;
    writer.write_image_data(&canvas.pixels)?;
    writer.finish()?;
    // Kept until the results are written: no spare capacity.
    png.shrink_to_fit();
    Ok(Rendered {
        png,
        width: cw as u32,
        height: ch as u32,
        image_shape: [height, width],
        upscale,
        origin: [origin as u32; 2],
        scale: mapping.scale,
        colormap: mapping.colormap,
        range: mapping.range,
        extent: mapping.extent,
        invalid,
    })
}

#[cfg(test)]
mod tests {
    use super::short_number;

    #[test]
    fn numbers_are_short() {
        for (v, want) in [
            (0.0, "0"),
            (1.0, "1"),
            (12345.0, "12345"),
            (-0.5, "-0.5"),
            (0.001234, "0.001234"),
            (2.71234, "2.712"),
            (123456.0, "1.235e5"),
            (-2.5e-7, "-2.5e-7"),
        ] {
            assert_eq!(short_number(v), want);
        }
    }
}
