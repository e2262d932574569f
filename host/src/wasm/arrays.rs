//! The contract's `arrays` interface: a plugin's host arrays ([`crate::arrays`]) in its
//! store.
//!
//! | piece | role |
//! |---|---|
//! | [`PluginArrays`] | per instance: the arrays' memory (charged to `--max-memory` and the run's `--max-memory-total`), the live count, the current tile |
//! | `impl arrays::Host for HostState` | the functions, each a call into the executor with the instance's [`Ctx`] |
//!
//! A tile reaches the plugin as a view of the host's memory ([`PluginArrays::lend_tile`]),
//! valid until the `process` call returns ([`PluginArrays::end_call`] revokes it).

use super::bindings::udf::plugin::arrays as wit;
use super::bindings::udf::plugin::types::Dtype as WitDtype;
use super::budget::{MemoryBudget, Take};
use super::convert::{dtype_from_wit, dtype_to_wit};
use super::state::{HostState, Interrupted};
use crate::arrays::ops::{BinaryOp, FftOp, ReduceOp, UnaryOp};
use crate::arrays::{
    self, ArrayError, ArrayMemory, Ctx, Dense, FixedLimit, HostArray, IndexItem, Lease, MemoryLimit, Operand,
    ReduceOptions, Scalar, WriteMode,
};
use crate::dtype::DType;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;
use wasmtime::component::Resource;

/// Host arrays one instance may hold at once.
pub const MAX_LIVE_ARRAYS: usize = 4096;

/// What an instance's arrays may take: the instance's `--max-memory`, shared with its
/// linear memories and tables (`state::Limits`), and the run's total budget (shared with
/// every instance).
struct InstanceLimit {
    budget: Arc<MemoryBudget>,
    cap: Arc<FixedLimit>,
    /// The runtime's interrupt count: a wait for the budget ends when it moves.
    runtime_interrupts: Arc<AtomicU64>,
}

impl MemoryLimit for InstanceLimit {
    fn try_take(&self, bytes: usize) -> bool {
        if !self.cap.try_take(bytes) {
            return false;
        }
        // The budget may wait (bounded) for lifts in flight to give back their room.
        let before = self.runtime_interrupts.load(Ordering::Relaxed);
        let stop = || (self.runtime_interrupts.load(Ordering::Relaxed) != before).then(|| Interrupted.into());
        if !matches!(self.budget.take(bytes, &stop), Take::Taken) {
            self.cap.give_back(bytes);
            return false;
        }
        true
    }

    fn give_back(&self, bytes: usize) {
        self.cap.give_back(bytes);
        self.budget.give_back(bytes);
    }

    fn available(&self) -> usize {
        self.cap.available().min(self.budget.limit().saturating_sub(self.budget.used()))
    }
}

/// An instance's host arrays.
pub struct PluginArrays {
    memory: Arc<ArrayMemory>,
    /// Arrays the plugin holds now.
    pub live: usize,
    /// The most it held at once.
    pub peak_live: usize,
    /// The tile of the current `process` call.
    tile: Option<HostArray>,
    lease: Option<Arc<Lease>>,
    /// Whether the plugin asked for tiles as host arrays (`use-host-tiles`).
    pub host_tiles: bool,
    runtime_interrupts: Arc<AtomicU64>,
    epochs: bool,
}

impl PluginArrays {
    pub fn new(
        budget: Arc<MemoryBudget>,
        cap: Arc<FixedLimit>,
        runtime_interrupts: Arc<AtomicU64>,
        epochs: bool,
    ) -> Self {
        let limit = InstanceLimit { budget, cap, runtime_interrupts: runtime_interrupts.clone() };
        PluginArrays {
            memory: ArrayMemory::new(Box::new(limit)),
            live: 0,
            peak_live: 0,
            tile: None,
            lease: None,
            host_tiles: false,
            runtime_interrupts,
            epochs,
        }
    }

    /// Lend a tile (`[frames, ..sig]`, C order, of dtype `stored`) for the coming
    /// `process` call, seen as `dtype`: stored integers of a float input dtype become a
    /// converting view ([`HostArray::Converting`]), converted as they are read.
    ///
    /// # Safety
    /// `bytes` must stay valid and unchanged until [`PluginArrays::end_call`].
    pub unsafe fn lend_tile(
        &mut self,
        stored: DType,
        dtype: DType,
        shape: &[usize],
        bytes: &[u8],
    ) -> Result<(), ArrayError> {
        let lease = Lease::new();
        let memory = &self.memory;
        let tile = if stored == dtype {
            // SAFETY: passed on to our caller, who calls `end_call` before the bytes go.
            unsafe { HostArray::borrowed(memory, dtype, shape, bytes, lease.clone())? }
        } else {
            // SAFETY: as above.
            unsafe { HostArray::borrowed_converting(memory, stored, dtype, shape, bytes, lease.clone())? }
        };
        self.tile = Some(tile);
        self.lease = Some(lease);
        Ok(())
    }

    /// Give the plugin a tile it owns (read into the instance's memory).
    pub fn own_tile(&mut self, tile: HostArray) {
        self.tile = Some(tile);
    }

    /// A fresh array in the instance's memory for a tile read for the plugin, not
    /// zeroed (the read overwrites every byte; zeroing was a whole extra pass per tile).
    pub fn tile_buffer(&self, dtype: DType, shape: &[usize]) -> Result<HostArray, ArrayError> {
        Dense::alloc(&self.memory, "tile", dtype, shape, false).map(HostArray::Dense)
    }

    /// The most bytes the arrays held at once.
    pub fn peak_bytes(&self) -> usize {
        self.memory.peak()
    }

    /// Give back the freed buffers kept for reuse (they count against the cap): the
    /// instance's linear memory needs the room.
    pub fn trim(&self) {
        self.memory.trim();
    }

    /// The `process` call returned: views of its tile fail from now on.
    pub fn end_call(&mut self) {
        if let Some(lease) = self.lease.take() {
            lease.revoke();
        }
        self.tile = None;
    }
}

/// The error a plugin sees.
fn to_wit(e: ArrayError) -> wit::ArrayError {
    use wit::ArrayErrorKind as K;
    let kind = match e.kind() {
        "shape" => K::Shape,
        "axis" => K::Axis,
        "dtype" => K::Dtype,
        "index" => K::Index,
        "memory" => K::Memory,
        "expired" => K::Expired,
        "unsupported" => K::Unsupported,
        _ => K::Value,
    };
    wit::ArrayError { kind, message: super::state::truncate_message(&e.to_string()) }
}

type Out<T> = Result<T, wit::ArrayError>;

impl HostState {
    /// Run `f` with the instance's context: its memory and its stop check (the call's
    /// deadline and interrupts; none for `--trusted`).
    fn with_ctx<R>(&self, f: impl FnOnce(&Ctx<'_>) -> Result<R, ArrayError>) -> Result<R, ArrayError> {
        let a = &self.arrays;
        let deadline = self.call_deadline;
        let generation = self.interrupt_generation;
        let runtime = &a.runtime_interrupts;
        let udf = &self.udf_interrupts;
        let epochs = a.epochs;
        let stop = move || -> Option<String> {
            if !epochs {
                return None;
            }
            let now = runtime.load(Ordering::Relaxed).wrapping_add(udf.load(Ordering::Relaxed));
            if now != generation {
                return Some("the run was interrupted".into());
            }
            (Instant::now() >= deadline).then(|| "the call ran longer than --timeout".to_owned())
        };
        f(&Ctx { memory: &a.memory, stop: &stop })
    }

    fn array(&self, handle: &Resource<HostArray>) -> Result<&HostArray, ArrayError> {
        self.table_ref()
            .get(handle)
            .map_err(|_| ArrayError::value("arrays", "an array handle that is not (or no longer) the plugin's"))
    }

    /// Hand a new array to the plugin (counted; capped).
    fn push(&mut self, op: &str, array: HostArray) -> Result<Resource<HostArray>, ArrayError> {
        if self.arrays.live >= MAX_LIVE_ARRAYS {
            return Err(ArrayError::TooMany { op: op.into(), live: self.arrays.live });
        }
        let handle = self
            .table_mut()
            .push(array)
            .map_err(|e| ArrayError::value(op, format!("cannot hold another array: {e}")))?;
        self.arrays.live += 1;
        self.arrays.peak_live = self.arrays.peak_live.max(self.arrays.live);
        Ok(handle)
    }

    /// Run an operation on arrays the plugin gave and hand back its result.
    fn op(
        &mut self,
        op: &str,
        f: impl FnOnce(&HostState, &Ctx<'_>) -> Result<HostArray, ArrayError>,
    ) -> Out<Resource<HostArray>> {
        let result = self.with_ctx(|cx| f(self, cx)).map_err(to_wit)?;
        self.push(op, result).map_err(to_wit)
    }
}

fn index(items: &[wit::IndexItem]) -> Vec<IndexItem> {
    items
        .iter()
        .map(|i| match i {
            wit::IndexItem::Slice(s) => IndexItem::Slice { start: s.start, stop: s.stop, step: s.step },
            wit::IndexItem::At(i) => IndexItem::At(*i),
            wit::IndexItem::NewAxis => IndexItem::NewAxis,
            wit::IndexItem::Ellipsis => IndexItem::Ellipsis,
        })
        .collect()
}

fn scalar(s: &wit::Scalar) -> Scalar {
    match s {
        wit::Scalar::Boolean(b) => Scalar::Bool(*b),
        wit::Scalar::Int(i) => Scalar::Int(*i),
        wit::Scalar::Float(f) => Scalar::Float(*f),
        wit::Scalar::Complex((re, im)) => Scalar::Complex(*re, *im),
    }
}

fn operand<'a>(state: &'a HostState, o: &wit::Operand) -> Result<Operand<'a>, ArrayError> {
    Ok(match o {
        wit::Operand::Array(a) => Operand::Array(state.array(a)?),
        wit::Operand::Scalar(s) => Operand::Scalar(scalar(s)),
    })
}

fn reduce_options(o: &wit::ReduceOptions) -> ReduceOptions<'_> {
    ReduceOptions {
        axes: o.axes.as_deref(),
        keepdims: o.keepdims,
        dtype: o.dtype.map(dtype_from_wit),
        correction: o.correction,
    }
}

fn usizes(v: &[u64]) -> Vec<usize> {
    v.iter().map(|&d| usize::try_from(d).unwrap_or(usize::MAX)).collect()
}

impl wit::HostArray for HostState {
    fn shape(&mut self, x: Resource<HostArray>) -> Vec<u64> {
        self.array(&x).map(|a| a.shape().iter().map(|&d| d as u64).collect()).unwrap_or_default()
    }

    fn dtype(&mut self, x: Resource<HostArray>) -> WitDtype {
        dtype_to_wit(self.array(&x).map(HostArray::dtype).unwrap_or(DType::U8))
    }

    fn get(&mut self, x: Resource<HostArray>, items: Vec<wit::IndexItem>) -> Out<Resource<HostArray>> {
        self.op("getitem", |s, _| s.array(&x)?.get(&index(&items)))
    }

    fn select(&mut self, x: Resource<HostArray>, mask: Resource<HostArray>) -> Out<Resource<HostArray>> {
        self.op("getitem", |s, cx| arrays::construct::select(cx, s.array(&x)?, s.array(&mask)?))
    }

    fn take(&mut self, x: Resource<HostArray>, indices: Vec<i64>, axis: Option<i64>) -> Out<Resource<HostArray>> {
        self.op("take", |s, cx| arrays::construct::take(cx, s.array(&x)?, &indices, axis))
    }

    fn reshape(&mut self, x: Resource<HostArray>, shape: Vec<i64>) -> Out<Resource<HostArray>> {
        self.op("reshape", |s, cx| s.array(&x)?.reshape(cx.memory, &shape))
    }

    fn permute_dims(&mut self, x: Resource<HostArray>, axes: Option<Vec<i64>>) -> Out<Resource<HostArray>> {
        self.op("permute_dims", |s, _| s.array(&x)?.permute_dims(axes.as_deref()))
    }

    fn broadcast_to(&mut self, x: Resource<HostArray>, shape: Vec<u64>) -> Out<Resource<HostArray>> {
        self.op("broadcast_to", |s, _| s.array(&x)?.broadcast_to(&usizes(&shape)))
    }

    fn expand_dims(&mut self, x: Resource<HostArray>, axis: i64) -> Out<Resource<HostArray>> {
        self.op("expand_dims", |s, _| s.array(&x)?.expand_dims(axis))
    }

    fn squeeze(&mut self, x: Resource<HostArray>, axes: Option<Vec<i64>>) -> Out<Resource<HostArray>> {
        self.op("squeeze", |s, _| s.array(&x)?.squeeze(axes.as_deref()))
    }

    fn astype(&mut self, x: Resource<HostArray>, dtype: WitDtype) -> Out<Resource<HostArray>> {
        self.op("astype", |s, cx| arrays::astype(cx, s.array(&x)?, dtype_from_wit(dtype)))
    }

    fn to_bytes(&mut self, x: Resource<HostArray>) -> Out<Vec<u8>> {
        // The copy counts against the instance's memory while it is made.
        self.with_ctx(|cx| self.array(&x)?.to_bytes(cx.memory, "to_bytes")).map_err(to_wit)
    }

    fn set(&mut self, x: Resource<HostArray>, items: Vec<wit::IndexItem>, value: wit::Operand) -> Out<()> {
        self.with_ctx(|cx| {
            arrays::write(cx, self.array(&x)?, &index(&items), operand(self, &value)?, WriteMode::Assign)
        })
        .map_err(to_wit)
    }

    fn add_at(&mut self, x: Resource<HostArray>, items: Vec<wit::IndexItem>, value: wit::Operand) -> Out<()> {
        self.with_ctx(|cx| arrays::write(cx, self.array(&x)?, &index(&items), operand(self, &value)?, WriteMode::Add))
            .map_err(to_wit)
    }

    fn drop(&mut self, x: Resource<HostArray>) -> wasmtime::Result<()> {
        self.table_mut().delete(x)?;
        self.arrays.live = self.arrays.live.saturating_sub(1);
        Ok(())
    }
}

impl wit::Host for HostState {
    fn use_host_tiles(&mut self) {
        self.arrays.host_tiles = true;
    }

    fn tile(&mut self) -> Out<Resource<HostArray>> {
        let Some(tile) = self.arrays.tile.clone() else {
            return Err(to_wit(ArrayError::value(
                "tile",
                "there is no tile: call it during `process`, after `use-host-tiles` in `describe`",
            )));
        };
        self.push("tile", tile).map_err(to_wit)
    }

    fn zeros(&mut self, shape: Vec<u64>, dtype: WitDtype) -> Out<Resource<HostArray>> {
        self.op("zeros", |_, cx| HostArray::zeros(cx.memory, dtype_from_wit(dtype), &usizes(&shape)))
    }

    fn full(&mut self, shape: Vec<u64>, value: wit::Scalar, dtype: Option<WitDtype>) -> Out<Resource<HostArray>> {
        self.op("full", |_, cx| arrays::construct::full(cx, &usizes(&shape), scalar(&value), dtype.map(dtype_from_wit)))
    }

    fn arange(&mut self, start: f64, stop: f64, step: f64, dtype: WitDtype) -> Out<Resource<HostArray>> {
        self.op("arange", |_, cx| arrays::construct::arange(cx, start, stop, step, dtype_from_wit(dtype)))
    }

    fn linspace(
        &mut self,
        start: f64,
        stop: f64,
        num: u64,
        endpoint: bool,
        dtype: WitDtype,
    ) -> Out<Resource<HostArray>> {
        self.op("linspace", |_, cx| {
            let num = usize::try_from(num).map_err(|_| ArrayError::value("linspace", "num too large"))?;
            arrays::construct::linspace(cx, start, stop, num, endpoint, dtype_from_wit(dtype))
        })
    }

    fn eye(&mut self, rows: u64, cols: u64, k: i64, dtype: WitDtype) -> Out<Resource<HostArray>> {
        self.op("eye", |_, cx| arrays::construct::eye(cx, rows as usize, cols as usize, k, dtype_from_wit(dtype)))
    }

    fn from_bytes(&mut self, dtype: WitDtype, shape: Vec<u64>, data: Vec<u8>) -> Out<Resource<HostArray>> {
        self.op("asarray", |_, cx| HostArray::from_bytes(cx.memory, dtype_from_wit(dtype), &usizes(&shape), &data))
    }

    fn unary(&mut self, op: wit::UnaryOp, x: Resource<HostArray>) -> Out<Resource<HostArray>> {
        self.op("unary", |s, cx| arrays::unary(cx, unary_op(op)?, s.array(&x)?))
    }

    fn binary(&mut self, op: wit::BinaryOp, a: wit::Operand, b: wit::Operand) -> Out<Resource<HostArray>> {
        self.op("binary", |s, cx| arrays::binary(cx, binary_op(op)?, operand(s, &a)?, operand(s, &b)?))
    }

    fn reduce(
        &mut self,
        op: wit::ReduceOp,
        x: Resource<HostArray>,
        options: wit::ReduceOptions,
    ) -> Out<Resource<HostArray>> {
        self.op("reduce", |s, cx| arrays::reduce(cx, reduce_op(op)?, s.array(&x)?, reduce_options(&options)))
    }

    fn sum_var(
        &mut self,
        x: Resource<HostArray>,
        options: wit::ReduceOptions,
    ) -> Out<(Resource<HostArray>, Resource<HostArray>)> {
        let opts = reduce_options(&options);
        let (sum, var) = self.with_ctx(|cx| arrays::sum_var(cx, self.array(&x)?, opts)).map_err(to_wit)?;
        let sum = self.push("sum_var", sum).map_err(to_wit)?;
        match self.push("sum_var", var) {
            Ok(var) => Ok((sum, var)),
            Err(e) => {
                // Not handed over: the first goes as the plugin's drop would take it.
                let _ = wit::HostArray::drop(self, sum);
                Err(to_wit(e))
            }
        }
    }

    fn where_(&mut self, condition: Resource<HostArray>, a: wit::Operand, b: wit::Operand) -> Out<Resource<HostArray>> {
        self.op("where", |s, cx| arrays::where_(cx, s.array(&condition)?, operand(s, &a)?, operand(s, &b)?))
    }

    fn clip(
        &mut self,
        x: Resource<HostArray>,
        min: Option<wit::Operand>,
        max: Option<wit::Operand>,
    ) -> Out<Resource<HostArray>> {
        self.op("clip", |s, cx| {
            let lo = min.as_ref().map(|o| operand(s, o)).transpose()?;
            let hi = max.as_ref().map(|o| operand(s, o)).transpose()?;
            arrays::clip(cx, s.array(&x)?, lo, hi)
        })
    }

    fn matmul(&mut self, a: Resource<HostArray>, b: Resource<HostArray>) -> Out<Resource<HostArray>> {
        self.op("matmul", |s, cx| arrays::linalg::matmul(cx, s.array(&a)?, s.array(&b)?))
    }

    fn tensordot(
        &mut self,
        a: Resource<HostArray>,
        b: Resource<HostArray>,
        axes_a: Vec<i64>,
        axes_b: Vec<i64>,
    ) -> Out<Resource<HostArray>> {
        self.op("tensordot", |s, cx| arrays::linalg::tensordot(cx, s.array(&a)?, s.array(&b)?, &axes_a, &axes_b))
    }

    fn vecdot(
        &mut self,
        a: Resource<HostArray>,
        b: Resource<HostArray>,
        axis: i64,
        dtype: Option<WitDtype>,
    ) -> Out<Resource<HostArray>> {
        self.op("vecdot", |s, cx| {
            arrays::linalg::vecdot(cx, s.array(&a)?, s.array(&b)?, axis, dtype.map(dtype_from_wit))
        })
    }

    fn fft(&mut self, op: wit::FftOp, x: Resource<HostArray>, axes: Option<Vec<i64>>) -> Out<Resource<HostArray>> {
        self.op("fft", |s, cx| arrays::fft::fft(cx, fft_op(op)?, s.array(&x)?, axes.as_deref()))
    }

    fn concat(&mut self, xs: Vec<Resource<HostArray>>, axis: Option<i64>) -> Out<Resource<HostArray>> {
        self.op("concat", |s, cx| {
            let refs: Vec<&HostArray> = xs.iter().map(|x| s.array(x)).collect::<Result<_, _>>()?;
            arrays::construct::concat(cx, &refs, axis)
        })
    }

    fn stack(&mut self, xs: Vec<Resource<HostArray>>, axis: i64) -> Out<Resource<HostArray>> {
        self.op("stack", |s, cx| {
            let refs: Vec<&HostArray> = xs.iter().map(|x| s.array(x)).collect::<Result<_, _>>()?;
            arrays::construct::stack(cx, &refs, axis)
        })
    }
}

/// The WIT enums map to the one table by position: the test
/// `wit_enums_follow_the_table` checks the names case by case.
fn unary_op(op: wit::UnaryOp) -> Result<UnaryOp, ArrayError> {
    UnaryOp::ALL.get(op as usize).copied().ok_or_else(|| ArrayError::value("unary", "unknown operation"))
}

fn binary_op(op: wit::BinaryOp) -> Result<BinaryOp, ArrayError> {
    BinaryOp::ALL.get(op as usize).copied().ok_or_else(|| ArrayError::value("binary", "unknown operation"))
}

fn reduce_op(op: wit::ReduceOp) -> Result<ReduceOp, ArrayError> {
    ReduceOp::ALL.get(op as usize).copied().ok_or_else(|| ArrayError::value("reduce", "unknown operation"))
}

fn fft_op(op: wit::FftOp) -> Result<FftOp, ArrayError> {
    FftOp::ALL.get(op as usize).copied().ok_or_else(|| ArrayError::value("fft", "unknown operation"))
}

#[cfg(test)]
mod tests {
    use crate::arrays::ops::{BinaryOp, FftOp, ReduceOp, UnaryOp};

    /// The cases of `enum NAME { ... }` in the contract.
    fn wit_enum(name: &str) -> Vec<String> {
        let wit = include_str!("../../../wit/udf.wit");
        let start = wit.find(&format!("enum {name} {{")).unwrap_or_else(|| panic!("no enum {name}"));
        let body = &wit[start..];
        let body = &body[body.find('{').unwrap() + 1..body.find('}').unwrap()];
        body.lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with("//"))
            .map(|l| l.trim_end_matches(',').to_owned())
            .collect()
    }

    #[test]
    fn wit_enums_follow_the_table() {
        let names = |all: Vec<String>| all;
        assert_eq!(wit_enum("unary-op"), names(UnaryOp::ALL.iter().map(|o| o.wit_name()).collect()));
        assert_eq!(wit_enum("binary-op"), names(BinaryOp::ALL.iter().map(|o| o.wit_name()).collect()));
        assert_eq!(wit_enum("reduce-op"), names(ReduceOp::ALL.iter().map(|o| o.wit_name()).collect()));
        assert_eq!(wit_enum("fft-op"), names(FftOp::ALL.iter().map(|o| o.wit_name()).collect()));
    }
}
