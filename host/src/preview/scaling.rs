//! From values to positions on a colour map: robust ranges, linear and log scaling, and
//! the two colour maps.

use super::{ImageKind, PreviewOptions};
use serde::{Deserialize, Serialize};

/// How values map to the colour map between the ends of the range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Scale {
    Linear,
    /// `log10`, between two positive ends; values at or below zero get the bottom colour.
    Log,
}

impl Scale {
    pub fn name(self) -> &'static str {
        match self {
            Scale::Linear => "linear",
            Scale::Log => "log",
        }
    }
}

/// A perceptually uniform colour map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ColorMap {
    /// Matplotlib's viridis: dark blue-violet (low) to yellow (high).
    Viridis,
    /// ColorBrewer's RdBu (a B-spline through its 11 colours, as d3's `interpolateRdBu`),
    /// reversed: blue (negative) through near-white (zero) to red (positive), for signed
    /// fields (CoM shifts, divergence, curl).
    Diverging,
}

impl ColorMap {
    pub fn name(self) -> &'static str {
        match self {
            ColorMap::Viridis => "viridis",
            ColorMap::Diverging => "diverging",
        }
    }

    /// The colour at position `t` (0 to 1) of the map.
    pub fn color(self, t: f64) -> [u8; 3] {
        let c = match self {
            ColorMap::Viridis => colorous::VIRIDIS.eval_continuous(t),
            ColorMap::Diverging => colorous::RED_BLUE.eval_continuous(1.0 - t),
        };
        [c.r, c.g, c.b]
    }
}

/// The chosen scaling of one image.
#[derive(Debug, Clone)]
pub(crate) struct Mapping {
    pub scale: Scale,
    pub colormap: ColorMap,
    /// The values at the ends of the map; `None` when no value is valid.
    pub range: Option<[f64; 2]>,
    /// The smallest and largest valid, finite value.
    pub extent: Option<[f64; 2]>,
}

/// Percentile `p` (0 to 100) of ascending `sorted` values, interpolated linearly
/// between the two nearest ranks (NumPy's default method).
fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = p.clamp(0.0, 100.0) / 100.0 * (sorted.len() - 1) as f64;
    let below = rank.floor() as usize;
    let above = (below + 1).min(sorted.len() - 1);
    sorted[below] + (sorted[above] - sorted[below]) * (rank - below as f64)
}

impl Mapping {
    /// The scaling of an image of `values` with `valid` flags (see the module docs).
    pub fn choose(values: &[f64], valid: &[bool], kind: ImageKind, options: &PreviewOptions) -> Mapping {
        let mut finite: Vec<f64> =
            values.iter().zip(valid).filter(|(v, ok)| **ok && v.is_finite()).map(|(v, _)| *v).collect();
        finite.sort_unstable_by(f64::total_cmp);
        let (Some(&first), Some(&last)) = (finite.first(), finite.last()) else {
            return Mapping {
                scale: options.scale.unwrap_or(Scale::Linear),
                colormap: options.colormap.unwrap_or(ColorMap::Viridis),
                range: None,
                extent: None,
            };
        };
        let (pl, ph) = options.percentiles;
        let (pl, ph) = (pl.min(ph), ph.max(pl));
        let (lo, hi) = (percentile(&finite, pl), percentile(&finite, ph));
        let colormap =
            options.colormap.unwrap_or(if lo < 0.0 && hi > 0.0 { ColorMap::Diverging } else { ColorMap::Viridis });
        let auto_log = kind == ImageKind::Sig && colormap == ColorMap::Viridis && first >= 0.0;
        let extent = Some([first, last]);
        if options.scale.unwrap_or(if auto_log { Scale::Log } else { Scale::Linear }) == Scale::Log {
            let positive = &finite[finite.partition_point(|&v| v <= 0.0)..];
            if !positive.is_empty() {
                let range = Some([percentile(positive, pl), percentile(positive, ph)]);
                return Mapping { scale: Scale::Log, colormap, range, extent };
            }
        }
        let range = match colormap {
            ColorMap::Diverging => {
                let m = lo.abs().max(hi.abs());
                [-m, m]
            }
            ColorMap::Viridis => [lo, hi],
        };
        Mapping { scale: Scale::Linear, colormap, range: Some(range), extent }
    }

    /// The position of a valid, finite `v` on the colour map (0 to 1).
    pub fn position(&self, v: f64) -> f64 {
        let Some([lo, hi]) = self.range else { return 0.5 };
        let (v, lo, hi) = match self.scale {
            Scale::Linear => (v, lo, hi),
            Scale::Log if v <= 0.0 => return 0.0,
            Scale::Log => (v.log10(), lo.log10(), hi.log10()),
        };
        if hi > lo {
            ((v - lo) / (hi - lo)).clamp(0.0, 1.0)
        } else if v < lo {
            0.0
        } else if v > hi {
            1.0
        } else {
            0.5
        }
    }

    /// The colour of `v`, or [`super::INVALID_RGB`] when it is not valid or not finite.
    pub fn color(&self, v: f64, valid: bool) -> [u8; 3] {
        if valid && v.is_finite() { self.colormap.color(self.position(v)) } else { super::INVALID_RGB }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentile_interpolates_like_numpy() {
        // np.percentile([1, 2, 3, 4], [0, 25, 50, 99.5, 100]) = [1, 1.75, 2.5, 3.985, 4]
        let v = [1.0, 2.0, 3.0, 4.0];
        for (p, want) in [(0.0, 1.0), (25.0, 1.75), (50.0, 2.5), (99.5, 3.985), (100.0, 4.0)] {
            assert!((percentile(&v, p) - want).abs() < 1e-12, "{p}: {}", percentile(&v, p));
        }
        assert_eq!(percentile(&[7.0], 30.0), 7.0);
    }

    #[test]
    fn signed_values_get_a_symmetric_diverging_range() {
        let values = [-1.0, 0.0, 3.0, f64::NAN];
        let m = Mapping::choose(
            &values,
            &[true; 4],
            ImageKind::Nav,
            &PreviewOptions { percentiles: (0.0, 100.0), ..PreviewOptions::default() },
        );
        assert_eq!(
            (m.colormap, m.scale, m.range, m.extent),
            (ColorMap::Diverging, Scale::Linear, Some([-3.0, 3.0]), Some([-1.0, 3.0]))
        );
        assert_eq!(m.position(0.0), 0.5);
        assert_eq!(m.position(3.0), 1.0);
    }

    #[test]
    fn sig_images_are_log_scaled_over_their_positive_values() {
        let values = [0.0, 1.0, 10.0, 100.0];
        let all = PreviewOptions { percentiles: (0.0, 100.0), ..PreviewOptions::default() };
        let m = Mapping::choose(&values, &[true; 4], ImageKind::Sig, &all);
        assert_eq!((m.scale, m.range), (Scale::Log, Some([1.0, 100.0])));
        assert_eq!(m.position(0.0), 0.0);
        assert!((m.position(10.0) - 0.5).abs() < 1e-12);
        let nav = Mapping::choose(&values, &[true; 4], ImageKind::Nav, &all);
        assert_eq!(nav.scale, Scale::Linear);
    }

    #[test]
    fn nothing_valid_has_no_range() {
        let m = Mapping::choose(&[1.0, 2.0], &[false, false], ImageKind::Nav, &PreviewOptions::default());
        assert_eq!(m.range, None);
        assert_eq!(m.color(1.0, false), super::super::INVALID_RGB);
    }
}
