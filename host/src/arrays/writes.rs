//! Writes into an array of the plugin's own (result buffers, temporaries):
//! `x[index] = value` and `x[index] += value` (LiberTEM's
//! `self.results.intensity[:] += ...`). The value is broadcast to the indexed view and
//! cast to the target's dtype (NumPy's `same_kind` casting for `+=`: a float added into
//! an integer buffer is an error). A value that shares the target's elements is copied
//! first, as NumPy does for overlapping operands.

use super::array::{HostArray, IndexItem};
use super::elementwise::{Ctx, Operand, cast_dense, scalar_array};
use super::error::ArrayError;
use crate::dtype::{DType, Kind};
use ndarray::Zip;

/// How a write combines the value with what is there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WriteMode {
    /// `x[index] = value`
    Assign,
    /// `x[index] += value`
    Add,
}

/// `x[index] = value` or `x[index] += value`.
///
/// # Errors
/// A tile or broadcast view as the target, an index error, a value that does not
/// broadcast to the view, an unsafe cast for `+=`, memory, interruption.
pub fn write(
    cx: &Ctx<'_>,
    target: &HostArray,
    index: &[IndexItem],
    value: Operand<'_>,
    mode: WriteMode,
) -> Result<(), ArrayError> {
    let op = if mode == WriteMode::Add { "add_at" } else { "setitem" };
    let t = target.dense(op)?.index(index)?;
    let dtype = t.dtype;
    let value = match value {
        Operand::Array(v) => {
            let v = v.dense(op)?;
            if mode == WriteMode::Assign && v.shares_storage(&t) && v.same_layout(&t) {
                // `x[i] = x[i]` (what Python's `x[i] += v` ends with): already there.
                return Ok(());
            }
            if mode == WriteMode::Add && !same_kind(v.dtype, dtype) {
                return Err(ArrayError::dtype(
                    op,
                    &[v.dtype, dtype],
                    "cannot add this dtype into the target in place (casting rule 'same_kind')",
                ));
            }
            if v.dtype != dtype || v.shares_storage(&t) { cast_dense(cx, v, dtype, op)? } else { v.clone() }
        }
        Operand::Scalar(s) => scalar_array(cx, s, dtype, op)?,
    };
    let shape = t.shape.clone();
    let value = value.broadcast(op, &shape)?;
    if t.is_empty() {
        // Nothing to write (ndarray would walk the outer lanes of the empty view).
        return Ok(());
    }
    cx.check(op)?;
    let r = value.storage.read(op)?;
    let mut w = t.storage.write(op)?;
    let data = if dtype == DType::Bool { DType::U8 } else { dtype };
    crate::with_dtype!(data, T => {
        let src = value.view_in::<T>(&r, op)?;
        let mut dst = t.view_mut_in::<T>(&mut w, op)?;
        match mode {
            WriteMode::Assign => dst.assign(&src),
            WriteMode::Add => {
                if dtype == DType::Bool {
                    return Err(ArrayError::dtype(op, &[dtype], "cannot add into a bool array"));
                }
                match (dst.as_slice_mut(), src.as_slice()) {
                    (Some(d), Some(s)) => {
                        for (d, &s) in d.iter_mut().zip(s) {
                            *d = super::element::Elem::add(*d, s);
                        }
                    }
                    _ => Zip::from(&mut dst).and(&src).for_each(|d, &s| *d = super::element::Elem::add(*d, s)),
                }
            }
        }
    }, return Err(ArrayError::value(op, "internal error: dtype")));
    Ok(())
}

/// NumPy's `same_kind` casting: within a kind or to a higher kind.
fn same_kind(from: DType, to: DType) -> bool {
    fn rank(k: Kind) -> u8 {
        match k {
            Kind::Bool => 0,
            Kind::Unsigned | Kind::Signed => 1,
            Kind::Float => 2,
            Kind::Complex => 3,
        }
    }
    rank(from.kind()) <= rank(to.kind())
}
