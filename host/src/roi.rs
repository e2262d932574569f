//! Regions of interest: which frames of the nav grid a run processes.
//!
//! A ROI is a boolean mask over the flat nav axis (C order over the nav shape). It comes
//! from a nav-shaped `.npy` (`--roi roi.npy`; non-bool arrays select their nonzero
//! entries) or from rectangles of nav coordinates (`--roi-rect 0:16,8:24`).

use crate::array::NdArray;
use crate::dtype::DType;

/// A boolean selection over the flat nav axis. Serialised compactly as the number of
/// positions and the selected runs `[start, end)`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(into = "RoiRuns", try_from = "RoiRuns")]
pub struct Roi {
    mask: Vec<bool>,
    count: usize,
}

impl Roi {
    /// A ROI from a flat boolean mask (C order over the nav shape).
    pub fn from_mask(mask: Vec<bool>) -> Self {
        let count = mask.iter().filter(|&&b| b).count();
        Roi { mask, count }
    }

    /// A ROI from an array of the nav shape (or flat, with as many entries as frames):
    /// nonzero entries are selected.
    ///
    /// # Errors
    /// If the array's size does not match the nav shape.
    pub fn from_array(array: &NdArray, nav: &[usize]) -> Result<Self, String> {
        let frames: usize = nav.iter().product();
        if array.len() != frames {
            return Err(format!(
                "the ROI has shape {:?} ({} entries), but the nav shape {nav:?} has {frames} positions",
                array.shape(),
                array.len()
            ));
        }
        let size = array.dtype().size();
        let mask = match array.dtype() {
            DType::Bool | DType::U8 | DType::I8 => array.bytes().iter().map(|&b| b != 0).collect(),
            DType::F32 => array.as_slice::<f32>().unwrap_or_default().iter().map(|&v| v != 0.0).collect(),
            DType::F64 => array.as_slice::<f64>().unwrap_or_default().iter().map(|&v| v != 0.0).collect(),
            _ => array.bytes().chunks_exact(size).map(|c| c.iter().any(|&b| b != 0)).collect(),
        };
        Ok(Roi::from_mask(mask))
    }

    /// A ROI from rectangles: `y0:y1,x0:x1` selects rows `y0..y1` and columns `x0..x1`
    /// of a 2-D nav grid (one `start:end` range per nav axis, end exclusive; an empty
    /// start or end means the edge, a single number one index). Several rectangles are
    /// separated by `;` and combined.
    ///
    /// # Errors
    /// A malformed spec, a range per axis missing, or a range outside the nav shape.
    pub fn from_rect(spec: &str, nav: &[usize]) -> Result<Self, String> {
        let frames: usize = nav.iter().product();
        let mut mask = vec![false; frames];
        for rect in spec.split(';').filter(|r| !r.trim().is_empty()) {
            let ranges =
                rect.split(',').zip(nav).map(|(r, &n)| parse_range(r.trim(), n)).collect::<Result<Vec<_>, _>>()?;
            if ranges.len() != nav.len() || rect.split(',').count() != nav.len() {
                return Err(format!(
                    "ROI rectangle '{rect}' needs one start:end range per nav axis ({} axes: {nav:?})",
                    nav.len()
                ));
            }
            for (flat, selected) in mask.iter_mut().enumerate() {
                let mut rest = flat;
                let mut inside = true;
                for (range, &n) in ranges.iter().zip(nav).rev() {
                    inside &= range.contains(&(rest % n));
                    rest /= n;
                }
                *selected |= inside;
            }
        }
        Ok(Roi::from_mask(mask))
    }

    /// Whether true flat nav index `i` is selected.
    pub fn contains(&self, i: usize) -> bool {
        self.mask.get(i).copied().unwrap_or(false)
    }

    /// Number of selected frames.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Length of the mask (the number of nav positions).
    pub fn len(&self) -> usize {
        self.mask.len()
    }

    pub fn is_empty(&self) -> bool {
        self.mask.is_empty()
    }

    /// The flat mask.
    pub fn mask(&self) -> &[bool] {
        &self.mask
    }

    /// True flat nav index of every selected frame, in order.
    pub fn selected(&self) -> impl Iterator<Item = usize> + '_ {
        self.mask.iter().enumerate().filter(|(_, b)| **b).map(|(i, _)| i)
    }

    /// Values of the selected positions (`compressed`, in order) put back in their
    /// places over all positions, `fill` elsewhere.
    pub fn scatter<T: Copy>(&self, compressed: &[T], fill: T) -> Vec<T> {
        let mut full = vec![fill; self.mask.len()];
        for (position, &value) in self.selected().zip(compressed) {
            full[position] = value;
        }
        full
    }
}

/// How a [`Roi`] is written: `len` positions, the selected ones as `[start, end)` runs.
#[derive(serde::Serialize, serde::Deserialize)]
struct RoiRuns {
    len: usize,
    runs: Vec<(usize, usize)>,
}

impl From<Roi> for RoiRuns {
    fn from(roi: Roi) -> Self {
        let mut runs: Vec<(usize, usize)> = Vec::new();
        for i in roi.selected() {
            match runs.last_mut() {
                Some((_, end)) if *end == i => *end += 1,
                _ => runs.push((i, i + 1)),
            }
        }
        RoiRuns { len: roi.len(), runs }
    }
}

impl TryFrom<RoiRuns> for Roi {
    type Error = String;

    fn try_from(r: RoiRuns) -> Result<Self, String> {
        let mut mask = vec![false; r.len];
        for (start, end) in r.runs {
            let run = mask.get_mut(start..end).ok_or_else(|| {
                format!("ROI run {start}..{end} is outside its {} positions (or ends before it starts)", r.len)
            })?;
            run.fill(true);
        }
        Ok(Roi::from_mask(mask))
    }
}

fn parse_range(text: &str, n: usize) -> Result<std::ops::Range<usize>, String> {
    let num = |t: &str, default: usize| -> Result<usize, String> {
        if t.trim().is_empty() {
            Ok(default)
        } else {
            t.trim().parse().map_err(|_| format!("'{t}' in ROI range '{text}' is not an index"))
        }
    };
    let range = match text.split_once(':') {
        Some((a, b)) => num(a, 0)?..num(b, n)?,
        None => {
            let i = num(text, 0)?;
            // Saturating: an index of usize::MAX is out of range, not an overflow.
            i..i.saturating_add(1)
        }
    };
    if range.start >= range.end || range.end > n {
        return Err(format!("ROI range '{text}' is empty or outside 0..{n}"));
    }
    Ok(range)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rois_serialise_as_runs_and_come_back_the_same() {
        let roi = Roi::from_mask(vec![false, true, true, false, true, false, false, true]);
        let json = serde_json::to_string(&roi).unwrap();
        assert_eq!(json, r#"{"len":8,"runs":[[1,3],[4,5],[7,8]]}"#);
        assert_eq!(serde_json::from_str::<Roi>(&json).unwrap(), roi);
        let bad = serde_json::from_str::<Roi>(r#"{"len":4,"runs":[[3,9]]}"#).unwrap_err().to_string();
        assert!(bad.contains("outside its 4 positions"), "{bad}");
    }

    /// Found by the `params_roi` fuzz target: a single index of `usize::MAX` overflowed.
    #[test]
    fn the_largest_index_is_out_of_range_not_an_overflow() {
        let e = Roi::from_rect("18446744073709551615,0", &[4, 5]).unwrap_err();
        assert!(e.contains("outside 0..4"), "{e}");
    }

    #[test]
    fn rectangles_select_nav_positions() {
        let roi = Roi::from_rect("1:3,2:", &[4, 5]).unwrap();
        let expected: Vec<bool> = (0..20).map(|i| (1..3).contains(&(i / 5)) && i % 5 >= 2).collect();
        assert_eq!(roi.mask(), expected.as_slice());
        assert_eq!(roi.count(), 6);
        let two = Roi::from_rect("0,0;3,4", &[4, 5]).unwrap();
        assert_eq!(two.selected().collect::<Vec<_>>(), vec![0, 19]);
        assert!(Roi::from_rect("0:9,0:1", &[4, 5]).unwrap_err().contains("outside"));
        assert!(Roi::from_rect("0:2", &[4, 5]).unwrap_err().contains("one start:end range per nav axis"));
        assert!(Roi::from_rect("a:2,0:1", &[4, 5]).unwrap_err().contains("not an index"));
    }

    #[test]
    fn arrays_select_nonzero_entries() {
        let a = NdArray::from_vec(&[2, 2], vec![0.0f32, 2.0, 0.0, -1.0]).unwrap();
        assert_eq!(Roi::from_array(&a, &[2, 2]).unwrap().mask(), &[false, true, false, true]);
        assert!(Roi::from_array(&a, &[3, 2]).unwrap_err().contains("has 6 positions"));
    }

    #[test]
    fn scatter_puts_the_selected_values_back_in_place() {
        let roi = Roi::from_mask(vec![false, true, false, true, true]);
        assert_eq!(roi.scatter(&[7, 8, 9], 0), [0, 7, 0, 8, 9]);
        assert_eq!(roi.scatter(&[true, false, true], false), [false, true, false, false, true]);
    }
}
