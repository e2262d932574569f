//! Regions of interest: which frames of the nav grid a run processes.

/// A boolean selection over the flat nav axis.
#[derive(Debug, Clone, PartialEq, Eq)]
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
}
