//! Final results: `get_results` (or the default pass-through), the declaration rules of
//! API.md §5, valid masks (§9), and nav buffers expanded to the nav shape with the ROI
//! fill values (§3.1).

use super::plan::Plan;
use super::{FailurePoint, MergeState, RunError, RunStats};
use crate::array::NdArray;
use crate::dtype::DType;
use crate::log::escape_control;
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, CallError, InstanceStats, Method, Params, ResultEntry, ResultsContext, Udf,
};
use std::collections::HashMap;

/// The results of a run.
#[derive(Debug, Clone)]
pub struct RunResults {
    pub udfs: Vec<UdfResults>,
    pub stats: RunStats,
    /// Merged nav positions (compressed).
    pub damage: Vec<bool>,
    /// The input dtype of the run.
    pub input_dtype: DType,
}

/// The results of one UDF.
#[derive(Debug, Clone)]
pub struct UdfResults {
    /// Unique name in the run (output directory).
    pub name: String,
    /// File path or `builtin:NAME`.
    pub source: String,
    pub version: String,
    pub method: Method,
    pub params: Params,
    /// In declaration order; private buffers are not included.
    pub buffers: Vec<ResultBuffer>,
    /// Resource use of each merged partition's instance `(partition, stats)`, where the
    /// UDF reports it (wasm plugins).
    pub instances: Vec<(usize, InstanceStats)>,
}

impl UdfResults {
    /// A result buffer by name.
    pub fn buffer(&self, name: &str) -> Option<&ResultBuffer> {
        self.buffers.iter().find(|b| b.name == name)
    }
}

/// One result buffer.
#[derive(Debug, Clone)]
pub struct ResultBuffer {
    pub name: String,
    pub kind: BufferKind,
    pub extra_shape: Vec<usize>,
    /// Flat, ROI-compressed storage (LiberTEM's `.raw_data`): nav `(N, *E)`.
    pub raw: NdArray,
    /// Nav buffers reshaped to `(*nav_shape, *E)`, positions outside the ROI filled
    /// with NaN / 0 / false (LiberTEM's `.data`); sig and single as stored.
    pub data: NdArray,
    /// Valid mask in the layout of `data` (bool).
    pub valid: NdArray,
    /// Whether every element of `valid` is true.
    pub all_valid: bool,
}

impl ResultBuffer {
    pub fn dtype(&self) -> DType {
        self.data.dtype()
    }
}

/// Produce the results of UDF `u` from its merged state.
pub(crate) fn finish(
    plan: &Plan,
    udf: &dyn Udf,
    u: usize,
    params: &Params,
    state: &MergeState,
    damage: &[bool],
) -> Result<UdfResults, RunError> {
    let planned = &plan.udfs[u];
    let desc = udf.description();
    let frames = plan.meta.frames();
    let sig = &plan.meta.sig_shape;
    let contract = |error: CallError| RunError::Udf {
        udf: planned.name.clone(),
        source_path: udf.source().to_owned(),
        at: FailurePoint::main("get_results"),
        error,
    };

    let entries: Vec<ResultEntry> = if desc.custom_results {
        let ctx = ResultsContext {
            params,
            dataset: &plan.meta,
            valid_nav_mask: damage,
            roi: plan.roi.as_ref().map(|r| r.mask()),
        };
        udf.get_results(ctx, &state.buffers).map_err(contract)?
    } else {
        Vec::new()
    };
    let returned = check_results(&planned.decls, &entries, frames, sig).map_err(contract)?;

    let merged: HashMap<&str, &NdArray> = state.buffers.iter().map(|b| (b.name.as_str(), &b.array)).collect();
    let mut buffers = Vec::new();
    for decl in &planned.decls {
        let (raw, custom_valid) = match (returned.get(decl.name.as_str()), decl.usage) {
            (Some(e), _) => (e.array.clone(), e.valid.clone()),
            (None, BufferUse::Private) => continue,
            (None, BufferUse::ResultOnly) => {
                return Err(contract(CallError::Contract(format!(
                    "get_results did not produce result-only buffer '{}'",
                    decl.name
                ))));
            }
            (None, BufferUse::Normal) => {
                let merged = merged.get(decl.name.as_str()).ok_or_else(|| {
                    RunError::Internal(format!("buffer '{}' of '{}' was never merged", decl.name, planned.name))
                })?;
                ((*merged).clone(), None)
            }
        };
        let valid_raw = valid_mask(decl.kind, &raw, custom_valid.as_deref(), damage, frames)
            .map_err(|m| contract(CallError::Contract(format!("valid mask of '{}': {m}", decl.name))))?;
        let (data, valid) = expand(plan, decl.kind, &decl.extra_shape, &raw, &valid_raw);
        let all_valid = valid.bytes().iter().all(|&b| b != 0);
        buffers.push(ResultBuffer {
            name: decl.name.clone(),
            kind: decl.kind,
            extra_shape: decl.extra_shape.clone(),
            raw,
            data,
            valid,
            all_valid,
        });
    }
    Ok(UdfResults {
        name: planned.name.clone(),
        source: udf.source().to_owned(),
        version: desc.version.clone(),
        method: planned.plan.method,
        params: params.clone(),
        buffers,
        instances: Vec::new(),
    })
}

/// Check what `get_results` returned against the declarations (API.md §5): declared, not
/// private, once each, of the declared dtype kind and storage shape. Returns the entries
/// by name (looked up, not searched: a plugin may return many).
///
/// # Errors
/// [`CallError::Contract`] naming the first entry that breaks a rule.
pub fn check_results<'e>(
    decls: &[BufferDecl],
    entries: &'e [ResultEntry],
    frames: usize,
    sig: &[usize],
) -> Result<HashMap<&'e str, &'e ResultEntry>, CallError> {
    let declared: HashMap<&str, &BufferDecl> = decls.iter().map(|d| (d.name.as_str(), d)).collect();
    let mut returned: HashMap<&str, &ResultEntry> = HashMap::with_capacity(entries.len());
    let contract = |m: String| Err(CallError::Contract(m));
    for e in entries {
        let Some(decl) = declared.get(e.name.as_str()) else {
            return contract(format!("get_results returned undeclared buffer '{}'", escape_control(&e.name)));
        };
        if decl.usage == BufferUse::Private {
            return contract(format!("get_results returned private buffer '{}'", e.name));
        }
        if returned.insert(&e.name, e).is_some() {
            return contract(format!("get_results returned '{}' twice", e.name));
        }
        if e.array.dtype().kind() != decl.dtype.kind() {
            return contract(format!(
                "get_results returned '{}' as {}, but it is declared {} (the kind must match)",
                e.name,
                e.array.dtype(),
                decl.dtype
            ));
        }
        let expected = decl.storage_shape(frames, sig);
        if e.array.shape() != expected.as_slice() {
            return contract(format!(
                "get_results returned '{}' with shape {:?}, expected {expected:?}",
                e.name,
                e.array.shape()
            ));
        }
    }
    Ok(returned)
}

/// The valid mask of a raw result, one bool per element: the default (nav: merged
/// positions; else all valid) or a custom one broadcast from one value, one per nav
/// position, or one per element.
///
/// For nav buffers the host's knowledge of what was merged always wins: a custom mask
/// is ANDed with the merged positions, so a plugin cannot mark the frames of a failed
/// (or not yet merged) partition valid (issue 15, item 5).
fn valid_mask(
    kind: BufferKind,
    raw: &NdArray,
    custom: Option<&[bool]>,
    damage: &[bool],
    frames: usize,
) -> Result<Vec<bool>, String> {
    let len = raw.len();
    let per_row = if kind == BufferKind::Nav && frames > 0 { len / frames } else { 0 };
    let merged = || damage.iter().flat_map(|&d| std::iter::repeat_n(d, per_row));
    let mask = match custom {
        None if kind == BufferKind::Nav => return Ok(merged().collect()),
        None => vec![true; len],
        Some([one]) => vec![*one; len],
        Some(mask) if mask.len() == len => mask.to_vec(),
        Some(mask) if kind == BufferKind::Nav && mask.len() == frames => {
            mask.iter().flat_map(|&d| std::iter::repeat_n(d, per_row)).collect()
        }
        Some(mask) => {
            return Err(format!(
                "{} values, expected 1, {} (one per element){}",
                mask.len(),
                len,
                if kind == BufferKind::Nav { format!(" or {frames} (one per nav position)") } else { String::new() }
            ));
        }
    };
    if kind != BufferKind::Nav {
        return Ok(mask);
    }
    Ok(mask.into_iter().zip(merged()).map(|(custom, merged)| custom && merged).collect())
}

/// Nav results to the full nav shape (fill outside the ROI); others unchanged.
fn expand(plan: &Plan, kind: BufferKind, extra: &[usize], raw: &NdArray, valid: &[bool]) -> (NdArray, NdArray) {
    let valid_raw = NdArray::from_bools(raw.shape(), valid).unwrap_or_else(|_| unreachable!("one per element"));
    if kind != BufferKind::Nav {
        return (raw.clone(), valid_raw);
    }
    let mut shape = plan.meta.nav_shape.clone();
    shape.extend_from_slice(extra);
    let Some(roi) = &plan.roi else {
        let reshape = |a: &NdArray| a.clone().reshape(&shape).unwrap_or_else(|_| unreachable!("same size"));
        return (reshape(raw), reshape(&valid_raw));
    };
    let dtype = raw.dtype();
    let row = extra.iter().product::<usize>() * dtype.size();
    let vrow = extra.iter().product::<usize>();
    let mut data = NdArray::zeros(dtype, &shape);
    let mut full_valid = NdArray::zeros(DType::Bool, &shape);
    let fill = dtype.fill_outside_roi();
    if fill.iter().any(|&b| b != 0) {
        for chunk in data.bytes_mut().chunks_exact_mut(dtype.size()) {
            chunk.copy_from_slice(&fill);
        }
    }
    for (compressed, position) in roi.selected().enumerate() {
        data.bytes_mut()[position * row..(position + 1) * row]
            .copy_from_slice(&raw.bytes()[compressed * row..(compressed + 1) * row]);
        full_valid.bytes_mut()[position * vrow..(position + 1) * vrow]
            .copy_from_slice(&valid_raw.bytes()[compressed * vrow..(compressed + 1) * vrow]);
    }
    (data, full_valid)
}
