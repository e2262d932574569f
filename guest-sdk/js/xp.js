// xp.js: NumPy-like arrays that live in the host, in JavaScript's idiom (contract 0.1.1's
// `arrays` interface; the Python plugins' `xp` is the same thing with operators).
//
// An NDArray is a handle to an array in the host: the tile (`xp.tile()`, or `tile.data`
// with `hostArrays: true` in the SDK's description), constructed arrays, temporaries,
// result buffers. Every method is one host call that runs in the host's kernels, so a
// plugin of a few calls per tile runs near the speed of the native built-ins:
//
//     import * as xp from './xp.js';
//     results.get('intensity').iadd(xp.sum(tile.data, { axis: 0 }));   // += in place
//     const ring = xp.std(frame.data.select(mask));                      // x[mask]
//     const out = tile.data.reshape([frames, -1]).matmul(matrix);        // x @ m
//
// Names and semantics follow NumPy 2 and the Python array API standard (broadcasting,
// type promotion; JavaScript numbers are Python floats, BigInts Python ints, booleans
// bools). Indices: `x.get(0, ':', '1:5:2', null, '...')` — a number picks one position,
// a string 'start:stop:step' (or `xp.slice(start, stop, step)`) is a slice, null a new
// axis, '...' the rest. A failed operation throws an XpError with `kind` ('shape',
// 'axis', 'dtype', 'index', 'value', 'memory', 'expired', 'unsupported') and the host's
// message, which names the operation and the shapes.
//
// Arrays are freed in the host when the plugin's partition ends (or the call, on the main
// side). Inside `scoped(f)` every array made is disposed when `f` returns, except those
// `f` returns or marks with `keep()`: the SDK runs each `processTile` (and the other
// calls) in a scope, so temporaries of one tile never pile up (at most 4096 arrays may be
// alive at once); an array made in a call and used in a later one (an accumulator, a
// mask built in `preprocess`) needs `keep()`. Arrays made in the plugin's constructor
// live for the partition.
//
// Garbage: the JavaScript engine collects its heap rarely, so what this module makes per
// call is kept small and short-lived (lists go to the host as plain arrays, never as
// typed arrays; a shape known to the SDK is not asked for). Asking the host for `.shape`
// makes a typed array that lives until the next full collection: keep it off per-tile
// paths where you can (the SDK gives the tile's and the buffers' shapes without asking).
// Build with scripts/polyglot/js-toolchain/componentize.mjs (what `scripts/polyglot/js.sh`
// and the `build.sh` of `udf-host new` do): the bindings of plain componentize-js keep
// 0.4-0.7 KB per host array (docs/plugins/js.md).

import * as host from 'udf:plugin/arrays@0.1.1';

/** A failed array operation. */
export class XpError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
  }
}

function rethrow(e) {
  const p = e && e.payload !== undefined ? e.payload : e;
  if (p && typeof p === 'object' && typeof p.kind === 'string' && typeof p.message === 'string') {
    throw new XpError(p.kind, p.message);
  }
  throw e;
}

function call(f) {
  try {
    return f();
  } catch (e) {
    return rethrow(e);
  } finally {
    disposeTemporaries();
  }
}

// componentize-js traps ("unreachable") lowering a negative f64 into the `scalar`
// variant, whose payload shares a slot with its s64 case. A negative float therefore
// goes to the host as a 0-d array: the float's magnitude, negated in the host, in the
// dtype a weak Python float takes next to `like` (its own float or complex dtype, else
// float64), disposed when the call that needed it returns.
const temporaries = [];

function disposeTemporaries() {
  while (temporaries.length) temporaries.pop()[Symbol.dispose]();
}

const isNegativeFloat = (v) => typeof v === 'number' && (v < 0 || Object.is(v, -0));

function negatedFull(shape, magnitude, dtype) {
  const positive = host.full(shape, { tag: 'float', val: magnitude }, dtype);
  try {
    return host.unary('negative', positive);
  } finally {
    positive[Symbol.dispose]();
  }
}

function negativeFloat(v, like) {
  const d = like instanceof NDArray ? like.dtype : 'float64';
  const dtype = d.startsWith('float') || d.startsWith('complex') ? d : 'float64';
  const array = negatedFull([], -v, dtype);
  temporaries.push(array);
  return array;
}

const WIT_DTYPE = { bool: 'boolean' };
const DTYPE_NAME = { boolean: 'bool' };
const witDtype = (name) => WIT_DTYPE[name] ?? name;
// Lists of integers as plain arrays of BigInt: the bindings copy a typed array through
// its `.buffer`, which makes an ArrayBuffer that lives until a full collection.
const i64s = (list) => Array.from(list, (v) => BigInt(v));
const u64s = i64s;

function scalar(v) {
  if (typeof v === 'boolean') return { tag: 'boolean', val: v };
  if (typeof v === 'bigint') return { tag: 'int', val: v };
  if (typeof v === 'number') return { tag: 'float', val: v };
  if (v && typeof v === 'object' && 're' in v && 'im' in v) return { tag: 'complex', val: [v.re, v.im] };
  throw new TypeError(`expected an NDArray, a number, a BigInt, a boolean or {re, im}, got ${v}`);
}

/** An operand; `like` is the other operand (for the dtype of a negative float). */
function operand(v, like) {
  if (v instanceof NDArray) return { tag: 'array', val: v.r };
  if (isNegativeFloat(v)) return { tag: 'array', val: negativeFloat(v, like) };
  return { tag: 'scalar', val: scalar(v) };
}

/** `start:stop:step` as an index item (any part undefined or null: Python's default). */
export function slice(start, stop, step) {
  const part = (v) => (v === undefined || v === null ? undefined : BigInt(v));
  return { tag: 'slice', val: { start: part(start), stop: part(stop), step: part(step) } };
}

function indexItem(item) {
  if (item === null) return { tag: 'new-axis' };
  if (item === '...') return { tag: 'ellipsis' };
  if (typeof item === 'number' || typeof item === 'bigint') return { tag: 'at', val: BigInt(item) };
  if (typeof item === 'string') {
    const parts = item.split(':').map((p) => (p.trim() === '' ? undefined : Number(p)));
    if (parts.length < 2 || parts.length > 3 || parts.some((p) => p !== undefined && !Number.isInteger(p))) {
      throw new XpError('index', `'${item}' is not an index (expected 'start:stop:step', a number, null or '...')`);
    }
    return slice(parts[0], parts[1], parts[2]);
  }
  if (item && item.tag === 'slice') return item;
  throw new XpError('index', `${item} is not an index (expected 'start:stop:step', a number, null or '...')`);
}

const index = (items) => items.map(indexItem);

function reduceOptions({ axis, keepdims = false, dtype, correction = 0, ddof } = {}) {
  const axes = axis === undefined || axis === null ? undefined : i64s(Array.isArray(axis) ? axis : [axis]);
  return {
    axes,
    keepdims,
    dtype: dtype === undefined ? undefined : witDtype(dtype),
    correction: ddof === undefined ? correction : ddof,
  };
}

// The arrays of the innermost `scoped` call (null: none).
let scope = null;

/**
 * Run `f()`, then dispose every array made meanwhile that is neither `keep()`-marked nor
 * returned by `f` (an array, or arrays in an array or a plain object's values).
 */
export function scoped(f) {
  const outer = scope;
  const made = [];
  scope = made;
  let value;
  try {
    value = f();
    return value;
  } finally {
    scope = outer;
    const returned = new Set(value instanceof NDArray ? [value] : value && typeof value === 'object' ? Object.values(value) : []);
    for (const a of made) {
      if (a.kept || a.r === undefined) continue;
      if (returned.has(a)) {
        if (outer !== null) outer.push(a);
      } else {
        a.dispose();
      }
    }
  }
}

/** An n-dimensional array in the host. */
export class NDArray {
  /** `shape`: the shape if the caller knows it (it is not asked from the host then). */
  constructor(resource, shape = undefined) {
    this.r = resource;
    this._shape = shape;
    this.kept = false;
    if (scope !== null) scope.push(this);
  }

  /** Keep this array alive past the `scoped` call that made it (until `dispose()` or the
   * end of the partition). */
  keep() {
    this.kept = true;
    return this;
  }

  /** The shape, an array of numbers. */
  get shape() {
    if (this._shape === undefined) this._shape = Array.from(this.r.shape(), Number);
    return this._shape;
  }

  /** The dtype's NumPy name ('float32', ...). */
  get dtype() {
    const d = this.r.dtype();
    return DTYPE_NAME[d] ?? d;
  }

  get ndim() {
    return this.shape.length;
  }

  get size() {
    return this.shape.reduce((a, b) => a * b, 1);
  }

  /** `x[index]`: a view. */
  get(...items) {
    return new NDArray(call(() => this.r.get(index(items))));
  }

  /** `x[index]` whose shape the caller knows (`items` an array): not asked from the host. */
  viewKnown(items, shape) {
    return new NDArray(call(() => this.r.get(index(items))), shape);
  }

  /** `x[mask]` for a boolean array of the same shape: the selected elements, 1-d. */
  select(mask) {
    return new NDArray(call(() => this.r.select(mask.r)));
  }

  /** `take(x, indices, axis)` (no axis: of the flattened array). */
  take(indices, axis) {
    return new NDArray(call(() => this.r.take(i64s(indices), axis === undefined ? undefined : BigInt(axis))));
  }

  /** `x[index] = value` (the value broadcast and cast to x's dtype); no index: all of x. */
  set(value, ...items) {
    call(() => this.r.set(index(items), operand(value, this)));
    return this;
  }

  /** `x[index] += value` in place (NumPy's same_kind casting); no index: all of x. */
  iadd(value, ...items) {
    call(() => this.r.addAt(index(items), operand(value, this)));
    return this;
  }

  /** Every element set to `value`. */
  fill(value) {
    return this.set(value);
  }

  reshape(shape) {
    const known = shape.every((n) => Number(n) >= 0) ? shape.map(Number) : undefined;
    return new NDArray(call(() => this.r.reshape(i64s(shape))), known);
  }

  /** `permute_dims(x, axes)`; no axes: reversed. */
  transpose(axes) {
    return new NDArray(call(() => this.r.permuteDims(axes === undefined ? undefined : i64s(axes))));
  }

  /** `x.T`. */
  get T() {
    return this.transpose();
  }

  broadcastTo(shape) {
    return new NDArray(call(() => this.r.broadcastTo(u64s(shape))));
  }

  expandDims(axis) {
    return new NDArray(call(() => this.r.expandDims(BigInt(axis))));
  }

  squeeze(axes) {
    const a = axes === undefined ? undefined : i64s(Array.isArray(axes) ? axes : [axes]);
    return new NDArray(call(() => this.r.squeeze(a)));
  }

  /** A C-order copy with elements of `dtype`. */
  astype(dtype) {
    return new NDArray(call(() => this.r.astype(witDtype(dtype))));
  }

  copy() {
    return this.astype(this.dtype);
  }

  /** The elements, C order, as raw little-endian bytes (a copy into the plugin). */
  toBytes() {
    return call(() => this.r.toBytes());
  }

  /** The elements, C order, as a typed array of the dtype (complex: interleaved floats). */
  toArray() {
    const bytes = this.toBytes();
    const Ctor = TYPED[this.dtype];
    const copy = new Uint8Array(bytes.length);
    copy.set(bytes);
    return new Ctor(copy.buffer, 0, copy.length / Ctor.BYTES_PER_ELEMENT);
  }

  /** The one element of a size-1 array as a number (BigInt for 64-bit integers, boolean for bool). */
  item() {
    if (this.size !== 1) throw new XpError('value', `item() of an array of shape (${this.shape.join(', ')})`);
    const v = this.toArray()[0];
    return this.dtype === 'bool' ? v !== 0 : v;
  }

  /** Free it in the host now (it may not be used afterwards). */
  dispose() {
    if (this.r && typeof this.r[Symbol.dispose] === 'function') this.r[Symbol.dispose]();
    this.r = undefined;
  }

  matmul(other) {
    return matmul(this, other);
  }
}

const TYPED = {
  bool: Uint8Array,
  uint8: Uint8Array,
  uint16: Uint16Array,
  uint32: Uint32Array,
  uint64: BigUint64Array,
  int8: Int8Array,
  int16: Int16Array,
  int32: Int32Array,
  int64: BigInt64Array,
  float32: Float32Array,
  float64: Float64Array,
  complex64: Float32Array,
  complex128: Float64Array,
};

// ------------------------------------------------------------------------------------
// the operations: one function each, and the methods of NDArray that NumPy has

/** The contract's operations (`host/src/arrays/ops.rs`) by the array API's names. */
export const UNARY = ['abs', 'negative', 'positive', 'square', 'sqrt', 'exp', 'expm1', 'log', 'log1p', 'log2', 'log10',
  'sin', 'cos', 'tan', 'asin', 'acos', 'atan', 'sinh', 'cosh', 'tanh', 'asinh', 'acosh', 'atanh', 'floor', 'ceil',
  'trunc', 'round', 'sign', 'isnan', 'isinf', 'isfinite', 'logical_not', 'bitwise_invert', 'real', 'imag', 'conj'];
export const BINARY = ['add', 'subtract', 'multiply', 'divide', 'floor_divide', 'remainder', 'pow', 'maximum', 'minimum',
  'equal', 'not_equal', 'less', 'less_equal', 'greater', 'greater_equal', 'logical_and', 'logical_or', 'logical_xor',
  'bitwise_and', 'bitwise_or', 'bitwise_xor', 'bitwise_left_shift', 'bitwise_right_shift', 'atan2', 'hypot', 'copysign'];
export const REDUCE = ['sum', 'prod', 'mean', 'min', 'max', 'var', 'std', 'argmin', 'argmax', 'any', 'all',
  'count_nonzero', 'nansum', 'nanmean', 'nanmin', 'nanmax', 'nanvar', 'nanstd'];

const kebab = (name) => name.replaceAll('_', '-');
const camel = (name) => name.replace(/_([a-z0-9])/g, (_, c) => c.toUpperCase());

const ops = {};
for (const name of UNARY) {
  ops[name] = (x) => new NDArray(call(() => host.unary(kebab(name), asarray(x).r)));
}
for (const name of BINARY) {
  ops[name] = (a, b) => new NDArray(call(() => host.binary(kebab(name), operand(a, b), operand(b, a))));
}
for (const name of REDUCE) {
  ops[name] = (x, options) => new NDArray(call(() => host.reduce(kebab(name), asarray(x).r, reduceOptions(options))));
}
// Methods: x.add(y), x.sum({ axis: 0 }), x.sqrt(), ... (NumPy's method names in camelCase).
for (const [name, f] of Object.entries(ops)) {
  NDArray.prototype[camel(name)] = function (...args) {
    return f(this, ...args);
  };
}
// The short names JavaScript code expects.
Object.assign(NDArray.prototype, {
  sub(b) {
    return ops.subtract(this, b);
  },
  mul(b) {
    return ops.multiply(this, b);
  },
  div(b) {
    return ops.divide(this, b);
  },
});

export const {
  abs, negative, positive, square, sqrt, exp, expm1, log, log1p, log2, log10, sin, cos, tan, asin, acos, atan, sinh,
  cosh, tanh, asinh, acosh, atanh, floor, ceil, trunc, round, sign, isnan, isinf, isfinite, real, imag, conj,
  add, subtract, multiply, divide, remainder, pow, maximum, minimum, equal, less, greater, atan2, hypot, copysign,
  sum, prod, mean, min, max, argmin, argmax, any, all, nansum, nanmean, nanmin, nanmax, nanvar, nanstd,
} = ops;
export const logicalNot = ops.logical_not;
export const floorDivide = ops.floor_divide;
export const notEqual = ops.not_equal;
export const lessEqual = ops.less_equal;
export const greaterEqual = ops.greater_equal;
export const logicalAnd = ops.logical_and;
export const logicalOr = ops.logical_or;
export const countNonzero = ops.count_nonzero;
// `var` is a keyword: xp.var_ and xp.variance.
export const var_ = ops.var;
export const variance = ops.var;
export const std = ops.std;

/** udf-host's own: `[sum(x), var(x)]` over the same axes, reading `x` once where the two
 * calls read it twice (a tile's per-pixel sum and variance: `sumVar(tile, { axis: 0 })`).
 * `dtype` (a floating dtype; default `var`'s) is both results' (the sums accumulated in
 * float64); `correction` (or `ddof`) is the variance's. */
export function sumVar(x, options) {
  const [total, variance] = call(() => host.sumVar(asarray(x).r, reduceOptions(options)));
  return [new NDArray(total), new NDArray(variance)];
}

/** `where(condition, a, b)`. */
export function where(condition, a, b) {
  return new NDArray(call(() => host.where(condition.r, operand(a, b), operand(b, a))));
}

/** `clip(x, min, max)` (either may be undefined): x's dtype. */
export function clip(x, lo, hi) {
  return new NDArray(call(() => host.clip(x.r, lo === undefined ? undefined : operand(lo, x), hi === undefined ? undefined : operand(hi, x))));
}

/** `a @ b`. */
export function matmul(a, b) {
  return new NDArray(call(() => host.matmul(asarray(a).r, asarray(b).r)));
}

/** `tensordot(a, b, axes=[axesA, axesB])`. */
export function tensordot(a, b, [axesA, axesB]) {
  return new NDArray(call(() => host.tensordot(a.r, b.r, i64s(axesA), i64s(axesB))));
}

/** `xp.fft.fft2(x, axes)`, `ifft2`, `rfft2`, `irfft2`, `fftshift`, `ifftshift`. */
export const fft = Object.fromEntries(
  ['fft2', 'ifft2', 'rfft2', 'irfft2', 'fftshift', 'ifftshift'].map((name) => [
    name,
    (x, axes) => new NDArray(call(() => host.fft(name, x.r, axes === undefined ? undefined : i64s(axes)))),
  ]),
);

// ------------------------------------------------------------------------------------
// constructors

/** From now on `process` gets tiles without data; `tile()` is the tile. Call it in `describe`. */
export function useHostTiles() {
  host.useHostTiles();
}

/** The tile of the current `process` call: a read-only view `[frames, ...sig]` (`shape`:
 * that shape, if the caller knows it). */
export function tile(shape = undefined) {
  return new NDArray(call(() => host.tile()), shape);
}

export function zeros(shape, dtype = 'float64') {
  return new NDArray(call(() => host.zeros(u64s(shape), witDtype(dtype))), shape.map(Number));
}

export function full(shape, value, dtype) {
  const d = dtype === undefined ? undefined : witDtype(dtype);
  const known = shape.map(Number);
  if (isNegativeFloat(value)) return new NDArray(call(() => negatedFull(u64s(shape), -value, d)), known);
  return new NDArray(call(() => host.full(u64s(shape), scalar(value), d)), known);
}

export function ones(shape, dtype = 'float64') {
  return full(shape, 1, dtype);
}

export function arange(start, stop, step = 1, dtype = 'float64') {
  if (stop === undefined) [start, stop] = [0, start];
  return new NDArray(call(() => host.arange(start, stop, step, witDtype(dtype))));
}

export function linspace(start, stop, num = 50, { endpoint = true, dtype = 'float64' } = {}) {
  return new NDArray(call(() => host.linspace(start, stop, BigInt(num), endpoint, witDtype(dtype))));
}

export function eye(rows, cols = rows, { k = 0, dtype = 'float64' } = {}) {
  return new NDArray(call(() => host.eye(BigInt(rows), BigInt(cols), BigInt(k), witDtype(dtype))));
}

const TYPED_DTYPE = new Map([
  [Uint8Array, 'uint8'], [Uint16Array, 'uint16'], [Uint32Array, 'uint32'], [BigUint64Array, 'uint64'],
  [Int8Array, 'int8'], [Int16Array, 'int16'], [Int32Array, 'int32'], [BigInt64Array, 'int64'],
  [Float32Array, 'float32'], [Float64Array, 'float64'],
]);

/**
 * An NDArray from an NDArray (returned as is, or cast to `dtype`), a typed array (its
 * dtype, `shape` default 1-d), a number / BigInt / boolean (0-d), or nested arrays of
 * numbers (float64 unless `dtype`).
 */
export function asarray(value, { shape, dtype } = {}) {
  if (value instanceof NDArray) return dtype === undefined || dtype === value.dtype ? value : value.astype(dtype);
  if (ArrayBuffer.isView(value)) {
    const own = TYPED_DTYPE.get(value.constructor);
    if (own === undefined) throw new XpError('dtype', `asarray: ${value.constructor.name} is not an array of numbers`);
    const bytes = new Uint8Array(value.buffer, value.byteOffset, value.byteLength);
    const a = fromBytes(own, shape ?? [value.length], bytes);
    return dtype === undefined || dtype === own ? a : a.astype(dtype);
  }
  if (typeof value === 'number' || typeof value === 'bigint' || typeof value === 'boolean') {
    const d = dtype ?? (typeof value === 'bigint' ? 'int64' : typeof value === 'boolean' ? 'bool' : 'float64');
    return full([], value, d);
  }
  const dims = [];
  for (let v = value; Array.isArray(v); v = v[0]) dims.push(v.length);
  const flat = value.flat(Infinity);
  if (flat.length !== dims.reduce((a, b) => a * b, 1)) throw new XpError('shape', 'asarray: nested arrays of different lengths');
  const d = dtype ?? 'float64';
  const Ctor = TYPED[d];
  if (Ctor === undefined || d.startsWith('complex')) throw new XpError('dtype', `asarray: nested arrays as ${d}`);
  const typed = Ctor.from(flat, (v) => (Ctor === BigInt64Array || Ctor === BigUint64Array ? BigInt(v) : Number(v)));
  return asarray(typed, { shape: shape ?? dims });
}

/** An NDArray of `dtype` and `shape` from little-endian bytes in C order. */
export function fromBytes(dtype, shape, bytes) {
  const d = witDtype(dtype);
  if (bytes.byteLength <= CHUNK_BYTES) return new NDArray(call(() => host.fromBytes(d, u64s(shape), bytes)), shape.map(Number));
  // A flat array filled a piece at a time, then given its shape.
  const size = ITEMSIZE[dtype];
  const count = bytes.byteLength / size;
  const flat = zeros([count], dtype);
  const step = CHUNK_BYTES / size;
  for (let start = 0; start < count; start += step) {
    const stop = Math.min(start + step, count);
    const piece = bytes.subarray(start * size, stop * size);
    const part = new NDArray(call(() => host.fromBytes(d, u64s([stop - start]), piece)));
    flat.set(part, slice(start, stop));
    part.dispose();
  }
  return flat.reshape(shape);
}

/** The most bytes one call hands the host: the host takes at most 1 MiB of data from a
 * plugin per call during init and process, so larger arrays go in pieces. */
export const CHUNK_BYTES = 1 << 19;
const ITEMSIZE = { bool: 1, uint8: 1, int8: 1, uint16: 2, int16: 2, uint32: 4, int32: 4, float32: 4, uint64: 8,
  int64: 8, float64: 8, complex64: 8, complex128: 16 };

/** `concat(arrays, axis)` (axis null: flattened). */
export function concat(arrays, axis = 0) {
  return new NDArray(call(() => host.concat(arrays.map((a) => a.r), axis === null ? undefined : BigInt(axis))));
}

/** `stack(arrays, axis)`. */
export function stack(arrays, axis = 0) {
  return new NDArray(call(() => host.stack(arrays.map((a) => a.r), BigInt(axis))));
}
