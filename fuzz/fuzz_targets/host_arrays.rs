//! Random sequences of host-array operations (`udf_host::arrays`, what a plugin calls
//! through the contract's `arrays` interface) with hostile shapes and values.
//!
//! The input is a program: each operation is one byte (its opcode) followed by the
//! bytes its arguments take (see `Input`). Up to `SLOTS` arrays are kept; an operation
//! reads its operands from slots and puts its result in the next one. One of the
//! arrays is a tile lent as a view of borrowed bytes, whose lease a later operation
//! can revoke, as the end of a `process` call does.
//!
//! Every operation must return `Ok` or a typed `ArrayError`: a panic, an overflow, an
//! abort, an allocation outside the arrays' memory limit (libFuzzer's
//! `-malloc_limit_mb`), an operation the interruption check does not reach (a hang
//! past `-timeout`), or an `internal error` are findings.

#![no_main]

use std::cell::Cell;
use std::sync::Arc;
use udf_host::arrays::construct;
use udf_host::arrays::ops::{BinaryOp, FftOp, ReduceOp, UnaryOp};
use udf_host::arrays::{
    ArrayError, ArrayMemory, Ctx, HostArray, IndexItem, Lease, Operand, ReduceOptions, Scalar, WriteMode,
};
use udf_host::dtype::DType;

/// Arrays kept between operations.
const SLOTS: usize = 6;
/// What the arrays may allocate (a plugin's `--max-memory` share).
const MEMORY_LIMIT: usize = 8 << 20;
/// Interruption checks an operation may make before the driver asks it to stop (the
/// `--timeout` of a plugin); an operation that loops without checking hangs instead.
const CHECKS_PER_OPERATION: u32 = 64;

const DIMS: [usize; 16] =
    [0, 1, 2, 3, 4, 5, 7, 8, 16, 33, 1 << 20, 1 << 31, 1 << 32, 1 << 62, usize::MAX / 2 + 1, usize::MAX];
const INTS: [i64; 16] = [0, 1, 2, 3, -1, -2, -3, 4, 7, 1 << 31, 1 << 32, 1 << 62, -(1 << 62), i64::MAX, i64::MIN, 255];
const FLOATS: [f64; 16] = [
    0.0,
    -0.0,
    1.0,
    -1.0,
    0.5,
    3.0,
    f64::NAN,
    f64::INFINITY,
    f64::NEG_INFINITY,
    1e308,
    -1e308,
    f64::MIN_POSITIVE,
    9007199254740993.0,
    9.223372036854775807e18,
    1.8446744073709552e19,
    1e-320,
];

/// The bytes of the program, read front to back; zeros once they run out.
struct Input<'a> {
    data: &'a [u8],
}

impl Input<'_> {
    fn byte(&mut self) -> u8 {
        match self.data.split_first() {
            Some((&b, rest)) => {
                self.data = rest;
                b
            }
            None => 0,
        }
    }

    fn done(&self) -> bool {
        self.data.is_empty()
    }

    /// A length: small most of the time, a hostile one from `DIMS` otherwise.
    fn dim(&mut self) -> usize {
        let b = self.byte();
        if b & 0x80 == 0 { usize::from(b & 0x0f) } else { DIMS[usize::from(b & 0x0f)] }
    }

    fn int(&mut self) -> i64 {
        let b = self.byte();
        if b & 0x80 == 0 { i64::from(b as i8 & 0x3f) - 32 } else { INTS[usize::from(b & 0x0f)] }
    }

    fn float(&mut self) -> f64 {
        let b = self.byte();
        if b & 0x80 == 0 { f64::from(b) / 4.0 - 8.0 } else { FLOATS[usize::from(b & 0x0f)] }
    }

    fn flag(&mut self) -> bool {
        self.byte() & 1 == 1
    }

    fn slot(&mut self) -> usize {
        usize::from(self.byte()) % SLOTS
    }

    fn dtype(&mut self) -> DType {
        DType::ALL[usize::from(self.byte()) % DType::ALL.len()]
    }

    fn shape(&mut self) -> Vec<usize> {
        let n = usize::from(self.byte() % 5);
        (0..n).map(|_| self.dim()).collect()
    }

    fn ints(&mut self) -> Vec<i64> {
        let n = usize::from(self.byte() % 5);
        (0..n).map(|_| self.int()).collect()
    }

    fn maybe_ints(&mut self) -> Option<Vec<i64>> {
        if self.flag() { Some(self.ints()) } else { None }
    }

    fn optional_int(&mut self) -> Option<i64> {
        if self.flag() { Some(self.int()) } else { None }
    }

    fn index(&mut self) -> Vec<IndexItem> {
        let n = usize::from(self.byte() % 6);
        (0..n)
            .map(|_| match self.byte() % 4 {
                0 => IndexItem::At(self.int()),
                1 => IndexItem::NewAxis,
                2 => IndexItem::Ellipsis,
                _ => IndexItem::Slice {
                    start: self.optional_int(),
                    stop: self.optional_int(),
                    step: self.optional_int(),
                },
            })
            .collect()
    }

    fn scalar(&mut self) -> Scalar {
        match self.byte() % 4 {
            0 => Scalar::Bool(self.flag()),
            1 => Scalar::Int(self.int()),
            2 => Scalar::Float(self.float()),
            _ => Scalar::Complex(self.float(), self.float()),
        }
    }

    fn pick<T: Copy>(&mut self, all: &[T]) -> T {
        all[usize::from(self.byte()) % all.len()]
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        let n = n.min(self.data.len());
        let (head, rest) = self.data.split_at(n);
        self.data = rest;
        head.to_vec()
    }
}

/// The arrays of a program.
struct Slots {
    arrays: [Option<HostArray>; SLOTS],
    next: usize,
}

impl Slots {
    fn get(&self, i: usize) -> Option<&HostArray> {
        self.arrays[i].as_ref()
    }

    fn put(&mut self, result: Result<HostArray, ArrayError>) {
        if let Some(array) = checked(result) {
            self.arrays[self.next] = Some(array);
            self.next = (self.next + 1) % SLOTS;
        }
    }

    fn operand(&self, input: &mut Input<'_>) -> Operand<'_> {
        let i = input.byte();
        match self.get(usize::from(i) % SLOTS) {
            Some(a) if i & 0x80 == 0 => Operand::Array(a),
            _ => Operand::Scalar(input.scalar()),
        }
    }
}

/// The result, with errors that reveal a broken invariant turned into a finding.
fn checked<T>(result: Result<T, ArrayError>) -> Option<T> {
    match result {
        Ok(v) => Some(v),
        Err(e) => {
            let text = e.to_string();
            assert!(!text.contains("internal error"), "{text}");
            None
        }
    }
}

fn run(data: &[u8]) {
    let memory = ArrayMemory::with_limit(MEMORY_LIMIT);
    let checks = Cell::new(0u32);
    let stop = || {
        checks.set(checks.get() + 1);
        (checks.get() > CHECKS_PER_OPERATION).then(|| "the driver's operation budget".to_string())
    };
    let cx = Ctx { memory: &memory, stop: &stop };
    let mut input = Input { data };
    // The tile's bytes, aligned for every dtype as a tile read for `process` is.
    let tile_words: Vec<u128> =
        (0..256u128).map(|i| i.wrapping_mul(0x0123_4567_89ab_cdef_0f1e_2d3c_4b5a_6978)).collect();
    // SAFETY: 256 `u128` are 4096 initialised bytes, borrowed as long as `tile_words`.
    let tile_bytes: &[u8] = unsafe { std::slice::from_raw_parts(tile_words.as_ptr().cast::<u8>(), 4096) };
    let mut leases = vec![Lease::new()];
    let mut slots = Slots { arrays: Default::default(), next: 0 };
    let mut steps = 0;
    while !input.done() && steps < 64 {
        steps += 1;
        checks.set(0);
        run_one(&cx, &memory, &mut input, &mut slots, tile_bytes, &mut leases);
    }
    // The tile's views must not read its bytes after this.
    for lease in &leases {
        lease.revoke();
    }
    for array in slots.arrays.iter().flatten() {
        let _ = checked(array.to_bytes(&memory, "to_bytes"));
    }
}

fn run_one(
    cx: &Ctx<'_>,
    memory: &Arc<ArrayMemory>,
    input: &mut Input<'_>,
    slots: &mut Slots,
    tile_bytes: &[u8],
    leases: &mut Vec<Arc<Lease>>,
) {
    let opcode = input.byte() % 31;
    // Operations on one array of a slot.
    let x = input.slot();
    if std::env::var_os("HOST_ARRAYS_TRACE").is_some() {
        let shapes: Vec<_> = slots.arrays.iter().map(|a| a.as_ref().map(|a| (a.dtype(), a.shape().to_vec()))).collect();
        eprintln!("op {opcode} on slot {x}; slots {shapes:?}");
    }
    let Some(a) = slots.get(x).cloned() else {
        // Constructors (and the tile) need no operand.
        let result = match opcode % 7 {
            0 => HostArray::zeros(memory, input.dtype(), &input.shape()),
            1 => construct::full(cx, &input.shape(), input.scalar(), input.flag().then(|| input.dtype())),
            2 => construct::arange(cx, input.float(), input.float(), input.float(), input.dtype()),
            3 => construct::linspace(cx, input.float(), input.float(), input.dim(), input.flag(), input.dtype()),
            4 => construct::eye(cx, input.dim(), input.dim(), input.int(), input.dtype()),
            5 => {
                let (dtype, shape) = (input.dtype(), input.shape());
                let want = shape.iter().try_fold(dtype.size(), |n, &d| n.checked_mul(d)).unwrap_or(0).min(1024);
                let bytes = input.bytes(want);
                HostArray::from_bytes(memory, dtype, &shape, &bytes)
            }
            _ => {
                let (dtype, shape) = (input.dtype(), input.shape());
                let want = shape.iter().try_fold(dtype.size(), |n, &d| n.checked_mul(d));
                match want {
                    Some(n) if n <= tile_bytes.len() => {
                        let lease = leases.last().cloned().unwrap_or_else(Lease::new);
                        // SAFETY: `tile_bytes` stay valid and unchanged until `run`
                        // revokes every lease, before it drops them.
                        unsafe { HostArray::borrowed(memory, dtype, &shape, &tile_bytes[..n], lease) }
                    }
                    _ => return,
                }
            }
        };
        slots.put(result);
        return;
    };
    let result = match opcode {
        0 => HostArray::zeros(memory, input.dtype(), &input.shape()),
        1 => construct::full(cx, &input.shape(), input.scalar(), input.flag().then(|| input.dtype())),
        2 => construct::arange(cx, input.float(), input.float(), input.float(), input.dtype()),
        3 => construct::linspace(cx, input.float(), input.float(), input.dim(), input.flag(), input.dtype()),
        4 => construct::eye(cx, input.dim(), input.dim(), input.int(), input.dtype()),
        5 => a.get(&input.index()),
        6 => a.reshape(memory, &input.ints()),
        7 => a.permute_dims(input.maybe_ints().as_deref()),
        8 => a.broadcast_to(&input.shape()),
        9 => a.expand_dims(input.int()),
        10 => a.squeeze(input.maybe_ints().as_deref()),
        11 => udf_host::arrays::astype(cx, &a, input.dtype()),
        12 => {
            let _ = checked(a.to_bytes(memory, "to_bytes"));
            return;
        }
        13 | 14 => {
            let index = input.index();
            let mode = if opcode == 13 { WriteMode::Assign } else { WriteMode::Add };
            let value = slots.operand(input);
            let _ = checked(udf_host::arrays::write(cx, &a, &index, value, mode));
            return;
        }
        15 => udf_host::arrays::unary(cx, input.pick(UnaryOp::ALL), &a),
        16 => {
            let op = input.pick(BinaryOp::ALL);
            let (b, c) = (slots.operand(input), slots.operand(input));
            let b = if input.flag() { Operand::Array(&a) } else { b };
            udf_host::arrays::binary(cx, op, b, c)
        }
        17 => {
            let op = input.pick(ReduceOp::ALL);
            let axes = input.maybe_ints();
            let options = ReduceOptions {
                axes: axes.as_deref(),
                keepdims: input.flag(),
                dtype: input.flag().then(|| input.dtype()),
                correction: input.float(),
            };
            udf_host::arrays::reduce(cx, op, &a, options)
        }
        18 => {
            let (b, c) = (slots.operand(input), slots.operand(input));
            udf_host::arrays::where_(cx, &a, b, c)
        }
        19 => {
            let lo = input.flag().then(|| slots.operand(input));
            let hi = input.flag().then(|| slots.operand(input));
            udf_host::arrays::clip(cx, &a, lo, hi)
        }
        20 => match slots.get(input.slot()) {
            Some(b) => udf_host::arrays::linalg::matmul(cx, &a, b),
            None => return,
        },
        21 => match slots.get(input.slot()) {
            Some(b) => udf_host::arrays::linalg::tensordot(cx, &a, b, &input.ints(), &input.ints()),
            None => return,
        },
        22 => udf_host::arrays::fft::fft(cx, input.pick(FftOp::ALL), &a, input.maybe_ints().as_deref()),
        23 | 24 => {
            let n = usize::from(input.byte() % 4);
            let picked: Vec<usize> = (0..n).map(|_| input.slot()).collect();
            let mut arrays = vec![&a];
            arrays.extend(picked.iter().filter_map(|&i| slots.get(i)));
            if opcode == 23 {
                construct::concat(cx, &arrays, input.optional_int())
            } else {
                construct::stack(cx, &arrays, input.int())
            }
        }
        25 => construct::take(cx, &a, &input.ints(), input.optional_int()),
        26 => match slots.get(input.slot()) {
            Some(mask) => construct::select(cx, &a, mask),
            None => return,
        },
        27 => {
            // The end of a `process` call: views of the tile expire.
            if let Some(lease) = leases.last() {
                lease.revoke();
            }
            leases.push(Lease::new());
            return;
        }
        28 => {
            slots.arrays[x] = None;
            return;
        }
        29 => {
            memory.trim();
            return;
        }
        _ => {
            let _ = (a.shape(), a.ndim(), a.dtype());
            return;
        }
    };
    slots.put(result);
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| run(data));
