//! Why an array operation failed: a typed error naming the operation and the shapes.

use crate::dtype::DType;

/// A shape as NumPy prints it: `(3, 4)`, `(5,)`, `()`.
pub fn shape_text(shape: &[usize]) -> String {
    match shape {
        [one] => format!("({one},)"),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    }
}

/// Why an array operation failed. Every variant names the operation (`op`); the
/// messages say what was expected and what was found.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArrayError {
    /// Shapes that do not broadcast, reshape or multiply together.
    #[error("{op}: shapes {} do not fit: {why}", shapes.iter().map(|s| shape_text(s)).collect::<Vec<_>>().join(" and "))]
    Shape { op: String, shapes: Vec<Vec<usize>>, why: String },
    /// An axis outside `-ndim..ndim`, or repeated.
    #[error("{op}: axis {axis} is out of bounds for an array of {ndim} dimensions (shape {})", shape_text(shape))]
    Axis { op: String, axis: i64, ndim: usize, shape: Vec<usize> },
    /// A repeated axis.
    #[error("{op}: axis {axis} is given twice")]
    RepeatedAxis { op: String, axis: i64 },
    /// A dtype the operation does not accept.
    #[error("{op}: {why} (got {})", dtypes.iter().map(|d| d.name()).collect::<Vec<_>>().join(" and "))]
    DType { op: String, dtypes: Vec<DType>, why: String },
    /// An index outside an axis, or a malformed index.
    #[error("{op}: {why} (shape {})", shape_text(shape))]
    Index { op: String, shape: Vec<usize>, why: String },
    /// A value that cannot be used (a Python int too large for the dtype, a zero step).
    #[error("{op}: {why}")]
    Value { op: String, why: String },
    /// An array larger than the memory the plugin may still use.
    #[error(
        "{op}: a result of {} needs {bytes} bytes, more than the {available} bytes the plugin may still use for arrays (--max-memory / --max-memory-total)",
        shape_text(shape)
    )]
    Memory { op: String, shape: Vec<usize>, bytes: u128, available: usize },
    /// Too many arrays alive at once.
    #[error("{op}: the plugin holds {live} arrays, the most it may hold at once; drop the ones it no longer needs")]
    TooMany { op: String, live: usize },
    /// The operation was interrupted (`--timeout`, Ctrl-C, a failed run).
    #[error("{op}: interrupted ({why})")]
    Interrupted { op: String, why: String },
    /// A view of a tile used after the call that received the tile returned.
    #[error(
        "{op}: the array is a view of a tile of an earlier call, which is gone; copy what you keep (astype or copy) while the call runs"
    )]
    Expired { op: String },
    /// An operation a representation (e.g. a future sparse array) does not have.
    #[error("{op}: not supported for {what}")]
    Unsupported { op: String, what: String },
}

impl ArrayError {
    pub fn shape(op: impl Into<String>, shapes: &[&[usize]], why: impl Into<String>) -> Self {
        ArrayError::Shape { op: op.into(), shapes: shapes.iter().map(|s| s.to_vec()).collect(), why: why.into() }
    }

    pub fn dtype(op: impl Into<String>, dtypes: &[DType], why: impl Into<String>) -> Self {
        ArrayError::DType { op: op.into(), dtypes: dtypes.to_vec(), why: why.into() }
    }

    pub fn value(op: impl Into<String>, why: impl Into<String>) -> Self {
        ArrayError::Value { op: op.into(), why: why.into() }
    }

    pub fn index(op: impl Into<String>, shape: &[usize], why: impl Into<String>) -> Self {
        ArrayError::Index { op: op.into(), shape: shape.to_vec(), why: why.into() }
    }

    /// A short name of the variant, for the WIT error and Python exception classes.
    pub fn kind(&self) -> &'static str {
        match self {
            ArrayError::Shape { .. } => "shape",
            ArrayError::Axis { .. } | ArrayError::RepeatedAxis { .. } => "axis",
            ArrayError::DType { .. } => "dtype",
            ArrayError::Index { .. } => "index",
            ArrayError::Value { .. } => "value",
            ArrayError::Memory { .. } | ArrayError::TooMany { .. } => "memory",
            ArrayError::Interrupted { .. } => "interrupted",
            ArrayError::Expired { .. } => "expired",
            ArrayError::Unsupported { .. } => "unsupported",
        }
    }
}

/// Normalise one axis (`-ndim..ndim`) for `op`.
pub fn normalize_axis(op: &str, axis: i64, shape: &[usize]) -> Result<usize, ArrayError> {
    let ndim = shape.len() as i64;
    let a = if axis < 0 { axis + ndim } else { axis };
    if a < 0 || a >= ndim {
        return Err(ArrayError::Axis { op: op.into(), axis, ndim: shape.len(), shape: shape.to_vec() });
    }
    Ok(a as usize)
}

/// Normalise a list of axes (none: every axis), rejecting repeats.
pub fn normalize_axes(op: &str, axes: Option<&[i64]>, shape: &[usize]) -> Result<Vec<usize>, ArrayError> {
    let Some(axes) = axes else {
        return Ok((0..shape.len()).collect());
    };
    let mut out = Vec::with_capacity(axes.len());
    for &axis in axes {
        let a = normalize_axis(op, axis, shape)?;
        if out.contains(&a) {
            return Err(ArrayError::RepeatedAxis { op: op.into(), axis });
        }
        out.push(a);
    }
    Ok(out)
}
