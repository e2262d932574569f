// udf-sdk.js: write udf-host plugins in JavaScript (built with componentize-js).
//
// The SDK hides the bindings componentize-js generates from wit/udf.wit and gives a plugin
// author LiberTEM's view of a UDF: a class with processTile / processFrame /
// processPartition, result buffers seen through the view shapes of docs/contract.md, and
// pure merge / getResults. A sum plugin:
//
//     import * as sdk from './udf-sdk.js';
//
//     class Sum extends sdk.Udf {
//       static description = sdk.description({ name: 'my-sum', version: '0.1.0', summary: 'Sum of all frames' });
//       // dtype: the run's input dtype; 'add': how the default merge combines it
//       static buffers = [sdk.buffer.sig('intensity', sdk.INPUT, [], 'normal', 'add')];
//       processTile(tile, results) {
//         results.accumulate('intensity', tile, 'add');  // the tile's part of the frame
//       }
//     }
//
//     export const udf = sdk.exportUdf(Sum);             // the exported interface `udf`
//
// A function of one frame is a whole plugin (LiberTEM's `ctx.map`):
//
//     export const udf = sdk.exportMap('row-sums', (frame) => Array.from(frame.rows(), (r) => r.reduce((a, b) => a + b, 0)));
//
// Arrays arrive as bytes (the plugin declares `data-access: bytes`) and are viewed as typed
// arrays (Float32Array, ...) over the same memory, without a copy. With host arrays
// (`description({..., hostArrays: xp})`, `xp` the module `./xp.js`) the tile, the result
// buffers, frames and array parameters are `xp` arrays in the host instead, and a plugin
// runs at the host's speed:
//
//     import * as sdk from './udf-sdk.js';
//     import * as xp from './xp.js';
//
//     class Sum extends sdk.Udf {
//       static description = sdk.description({ name: 'my-sum', version: '0.1.0', summary: 'Sum of all frames', hostArrays: xp });
//       static buffers = [sdk.buffer.sig('intensity', sdk.INPUT, [], 'normal', 'add')];
//       processTile(tile, results) {
//         results.get('intensity').iadd(xp.sum(tile.data, { axis: 0 }));  // the tile's part of the frame
//       }
//     }
//
// Every call of the plugin runs in an `xp.scoped` call: the arrays it makes are disposed
// when it returns, except those marked with `keep()` (xp.js explains). Dtypes are NumPy names
// ('float32'); 64-bit integers are BigInt64Array / BigUint64Array (BigInt values). Complex
// buffers are viewed as their float parts, with one more trailing axis of length 2.

// ------------------------------------------------------------------------------------
// dtypes

const DTYPE_INFO = {
  bool: [Uint8Array, 1],
  uint8: [Uint8Array, 1],
  uint16: [Uint16Array, 1],
  uint32: [Uint32Array, 1],
  uint64: [BigUint64Array, 1],
  int8: [Int8Array, 1],
  int16: [Int16Array, 1],
  int32: [Int32Array, 1],
  int64: [BigInt64Array, 1],
  float32: [Float32Array, 1],
  float64: [Float64Array, 1],
  complex64: [Float32Array, 2],
  complex128: [Float64Array, 2],
};

// wit enum strings <-> NumPy names
const WIT_OF = { bool: 'boolean' };
const NAME_OF = { boolean: 'bool' };

/** Every dtype name the SDK knows. */
export const DTYPES = Object.keys(DTYPE_INFO);

function witDtype(name) {
  if (!(name in DTYPE_INFO)) {
    throw UdfError.badParam(`'${name}' is not a dtype name (expected one of ${DTYPES.join(', ')})`);
  }
  return WIT_OF[name] ?? name;
}

/** The NumPy name of a wit dtype. */
export function dtypeName(wit) {
  return NAME_OF[wit] ?? wit;
}

/** Bytes per element of a dtype name. */
export function itemsize(dtype) {
  const [Ctor, values] = DTYPE_INFO[dtype];
  return Ctor.BYTES_PER_ELEMENT * values;
}

/** Whether a dtype is complex (viewed as float pairs). */
export function isComplex(dtype) {
  return DTYPE_INFO[dtype][1] === 2;
}

/** Whether elements of a dtype are BigInt values. */
export function isBigInt(dtype) {
  return dtype === 'int64' || dtype === 'uint64';
}

/** A typed array over the bytes of `u8` (no copy when aligned; a copy otherwise). */
function typed(u8, dtype) {
  const Ctor = DTYPE_INFO[dtype][0];
  const size = Ctor.BYTES_PER_ELEMENT;
  if (u8.byteOffset % size !== 0) u8 = u8.slice();
  return new Ctor(u8.buffer, u8.byteOffset, Math.floor(u8.byteLength / size));
}

function valueShape(dtype, shape) {
  return isComplex(dtype) ? [...shape, 2] : [...shape];
}

function product(shape) {
  let n = 1;
  for (const d of shape) n *= d;
  return n;
}

const nums = (list) => Array.from(list, Number);
const u64s = (list) => BigUint64Array.from(list, (v) => BigInt(v));

// ------------------------------------------------------------------------------------
// errors and logging

/** An expected failure, reported to the host as a typed `udf-error` instead of a trap. */
export class UdfError extends Error {
  constructor(kind, message) {
    super(message);
    this.kind = kind;
    // componentize-js turns a thrown object's `payload` into the `err` of a result.
    this.payload = { kind, message };
  }
  static badParam(message) {
    return new UdfError('bad-param', message);
  }
  static invalidData(message) {
    return new UdfError('invalid-data', message);
  }
  static internal(message) {
    return new UdfError('internal', message);
  }
}

import { log as hostLog } from 'udf:plugin/host@0.1.1';

/** Send a log line to the host (level: trace, debug, info, warn, error). */
export function log(level, message) {
  hostLog(level, String(message));
}

// ------------------------------------------------------------------------------------
// n-d views

/**
 * A strided n-d view of a typed array (LiberTEM's buffer views): `shape`, `strides` (in
 * elements), `offset`; the last axis is contiguous. `v.at(i, j)`, `v.set([i, j], x)`,
 * `v.sub(i)` (index axis 0), `v.row(i, j)` (a typed subarray of the last axis, no copy),
 * `v.rows()` (all of them), `v.flat()` (the whole view when contiguous).
 */
export class View {
  constructor(data, shape, strides, offset = 0, dtype = undefined) {
    this.data = data;
    this.shape = shape;
    this.offset = offset;
    this.dtype = dtype;
    if (!strides) {
      strides = new Array(shape.length);
      let step = 1;
      for (let i = shape.length - 1; i >= 0; i--) {
        strides[i] = step;
        step *= shape[i];
      }
    }
    this.strides = strides;
  }
  get ndim() {
    return this.shape.length;
  }
  get size() {
    return product(this.shape);
  }
  index(idx) {
    if (idx.length !== this.shape.length) {
      throw UdfError.internal(`${idx.length} indices for a ${this.shape.length}-d view`);
    }
    let off = this.offset;
    for (let a = 0; a < idx.length; a++) {
      const i = idx[a];
      if (i < 0 || i >= this.shape[a]) throw UdfError.internal(`index ${i} out of range for length ${this.shape[a]}`);
      off += i * this.strides[a];
    }
    return off;
  }
  at(...idx) {
    return this.data[this.index(idx)];
  }
  set(idx, value) {
    this.data[this.index(idx)] = value;
  }
  sub(i) {
    if (i < 0 || i >= this.shape[0]) throw UdfError.internal(`index ${i} out of range for length ${this.shape[0]}`);
    return new View(this.data, this.shape.slice(1), this.strides.slice(1), this.offset + i * this.strides[0], this.dtype);
  }
  row(...idx) {
    let start = this.offset;
    for (let a = 0; a < idx.length; a++) start += idx[a] * this.strides[a];
    return this.data.subarray(start, start + this.shape[this.shape.length - 1]);
  }
  *rows() {
    const nd = this.shape.length;
    if (nd <= 1) {
      yield this.data.subarray(this.offset, this.offset + (nd ? this.shape[0] : 1));
      return;
    }
    const outer = this.shape.slice(0, -1);
    const n = this.shape[nd - 1];
    const idx = new Array(outer.length).fill(0);
    const count = product(outer);
    for (let k = 0; k < count; k++) {
      let start = this.offset;
      for (let a = 0; a < outer.length; a++) start += idx[a] * this.strides[a];
      yield this.data.subarray(start, start + n);
      for (let a = outer.length - 1; a >= 0; a--) {
        if (++idx[a] < outer[a]) break;
        idx[a] = 0;
      }
    }
  }
  isContiguous() {
    let step = 1;
    for (let a = this.shape.length - 1; a >= 0; a--) {
      if (this.shape[a] > 1 && this.strides[a] !== step) return false;
      step *= this.shape[a];
    }
    return true;
  }
  flat() {
    if (!this.isContiguous()) throw UdfError.internal('flat() of a non-contiguous view; use rows()');
    return this.data.subarray(this.offset, this.offset + this.size);
  }
  fill(value) {
    for (const row of this.rows()) row.fill(value);
  }
}

/** `dest += src` elementwise for two views of the same shape. */
export function iadd(dest, src) {
  if (dest.shape.join() !== src.shape.join()) {
    throw UdfError.internal(`iadd: shapes [${dest.shape}] and [${src.shape}] differ`);
  }
  const d = dest.rows();
  const s = src.rows();
  for (;;) {
    const a = d.next();
    const b = s.next();
    if (a.done) break;
    const x = a.value;
    const y = b.value;
    for (let i = 0; i < x.length; i++) x[i] += y[i];
  }
}

function combineValues(a, b, op) {
  if (op === 'add') return a + b;
  if (op === 'assign') return b;
  if (a !== a) return a; // NaN wins, as with np.minimum / np.maximum
  if (op === 'min') return a <= b ? a : b;
  return a >= b ? a : b;
}

/** `dest = dest op src` elementwise for two views of the same shape; `op`: 'add', 'min',
 * 'max' (NaN wins, as with np.maximum), 'assign'. Values are converted to `dest`'s type
 * (typed arrays wrap integers). */
export function combine(dest, src, op) {
  if (!MERGES.includes(op)) throw UdfError.internal(`combine: op must be one of ${MERGES.join(', ')}, found ${op}`);
  if (dest.size !== src.size) throw UdfError.internal(`combine: shapes [${dest.shape}] and [${src.shape}] differ`);
  if ((op === 'min' || op === 'max') && dest.dtype && isComplex(dest.dtype)) {
    throw UdfError.internal(`combine: ${dest.dtype} values have no ${op}`);
  }
  const big = dest.dtype !== undefined && isBigInt(dest.dtype);
  const cast = big ? (v) => (typeof v === 'bigint' ? v : BigInt(Math.trunc(Number(v)))) : Number;
  const d = dest.rows();
  const s = src.rows();
  for (;;) {
    const x = d.next();
    const y = s.next();
    if (x.done) break;
    for (let i = 0; i < x.value.length; i++) x.value[i] = combineValues(cast(x.value[i]), cast(y.value[i]), op);
  }
}

/** A view of plain numbers (or BigInts) with `shape`, as a source for `combine`. */
function valuesView(values, shape) {
  const big = values.some((v) => typeof v === 'bigint');
  return new View(big ? BigInt64Array.from(values, BigInt) : Float64Array.from(values, Number), shape);
}

/** `dest = dest op frame` for every frame of the view `frames` (`[n, ...dest.shape]`). */
export function accumulate(dest, frames, op) {
  for (let f = 0; f < frames.shape[0]; f++) combine(dest, frames.sub(f), op);
}

/** The identity of `op` in `dtype`: +-inf, an integer's extremes, or 0. */
function identity(dtype, op) {
  const big = isBigInt(dtype);
  if (op !== 'min' && op !== 'max') return big ? 0n : 0;
  if (dtype === 'bool') return op === 'min' ? 1 : 0;
  if (dtype.startsWith('uint') || dtype.startsWith('int')) {
    const bits = BigInt(itemsize(dtype) * 8);
    const [lo, hi] = dtype.startsWith('uint') ? [0n, (1n << bits) - 1n] : [-(1n << (bits - 1n)), (1n << (bits - 1n)) - 1n];
    const v = op === 'min' ? hi : lo;
    return big ? v : Number(v);
  }
  return op === 'min' ? Infinity : -Infinity;
}

function arrayBytes(nd) {
  const data = nd.data;
  if (data.tag === 'bytes' || data.tag === 'uint8') return data.val;
  const dtype = dtypeName(nd.dtype);
  if (data.tag === 'boolean') return Uint8Array.from(data.val, (v) => (v ? 1 : 0));
  const Ctor = DTYPE_INFO[dtype][0];
  const arr = Ctor.from(data.val);
  return new Uint8Array(arr.buffer, arr.byteOffset, arr.byteLength);
}

/** An array parameter: `dtype`, `shape` and a typed `view`. */
export class ArrayParam {
  constructor(nd) {
    this.dtype = dtypeName(nd.dtype);
    this.shape = nums(nd.shape);
    this.view = new View(typed(arrayBytes(nd), this.dtype), valueShape(this.dtype, this.shape), null, 0, this.dtype);
  }
  /** The elements as a flat array of numbers (BigInt for 64-bit integers). */
  values() {
    const out = [];
    for (const row of this.view.rows()) out.push(...row);
    return out;
  }
}

// ------------------------------------------------------------------------------------
// description, params, buffers

const optional = (v, make) => (v === undefined || v === null ? undefined : make(v));

/** Parameter declarations: `param.float(name, doc, default)` etc. (no default: required). */
export const param = {
  boolean: (name, doc, def) => ({ name, ty: 'boolean', doc, default: optional(def, (v) => ({ tag: 'boolean', val: v })), navAux: false }),
  int: (name, doc, def) => ({ name, ty: 'int', doc, default: optional(def, (v) => ({ tag: 'int', val: BigInt(v) })), navAux: false }),
  float: (name, doc, def) => ({ name, ty: 'float', doc, default: optional(def, (v) => ({ tag: 'float', val: v })), navAux: false }),
  text: (name, doc, def) => ({ name, ty: 'text', doc, default: optional(def, (v) => ({ tag: 'text', val: v })), navAux: false }),
  /** A required n-d array; `navAux` for per-frame aux data. */
  array: (name, doc, navAux = false) => ({ name, ty: 'array', doc, default: undefined, navAux }),
};

function preference(dtype) {
  return dtype === undefined || dtype === 'native' ? { tag: 'native' } : { tag: 'prefer', val: witDtype(dtype) };
}

function tiling(depth, size) {
  return {
    depth: depth === undefined ? { tag: 'default' } : depth === 'max' ? { tag: 'max' } : { tag: 'frames', val: BigInt(depth) },
    totalSize: size === undefined ? { tag: 'best-fit' } : size === 'max' ? { tag: 'max' } : { tag: 'bytes', val: BigInt(size) },
  };
}

/** The tile size host-array plugins ask for unless they say (bytes): large tiles, few calls. */
export const HOST_ARRAY_TILE_BYTES = 8 << 20;

/**
 * A plugin description: `{name, version, summary, params, methods (['tile'] by default;
 * order of preference), inputDtype ('float32' by default; 'native'), tileDepth (undefined,
 * 'max' or frames), tileSize (undefined, 'max' or bytes; `HOST_ARRAY_TILE_BYTES` with host
 * arrays), customMerge, customResults, mainPreprocess, hostArrays}`. `hostArrays`: the
 * module `./xp.js` (`import * as xp from './xp.js'`): tiles, frames, buffers and array
 * parameters are then `xp` arrays in the host.
 */
export function description(d) {
  const hostArrays = d.hostArrays ?? null;
  return {
    hostArrays,
    name: d.name,
    version: d.version,
    summary: d.summary,
    params: d.params ?? [],
    methods: d.methods ?? ['tile'],
    inputDtype: d.inputDtype ?? 'float32',
    tileDepth: d.tileDepth,
    tileSize: d.tileSize ?? (hostArrays ? HOST_ARRAY_TILE_BYTES : undefined),
    customMerge: !!d.customMerge,
    customResults: !!d.customResults,
    mainPreprocess: !!d.mainPreprocess,
  };
}

function witDescription(d) {
  return {
    name: d.name,
    version: d.version,
    summary: d.summary,
    params: d.params,
    methods: d.methods,
    inputDtype: preference(d.inputDtype),
    tiling: tiling(d.tileDepth, d.tileSize),
    customMerge: d.customMerge,
    customResults: d.customResults,
    mainPreprocess: d.mainPreprocess,
    dataAccess: 'bytes',
  };
}

/** Buffer dtype rules besides NumPy names: the run's input dtype, the dataset's dtype, and
 * `atLeast(name)`, NumPy's `result_type` of the input dtype and `name`. */
export const INPUT = 'input';
export const DATASET = 'dataset';
export const atLeast = (dtype) => `at_least:${dtype}`;

/** NumPy's `result_type` of two dtype names (bool is neutral; uint64 with a signed
 * integer is float64; integers of up to 16 bits fit float32). */
export function resultType(a, b) {
  const kind = (d) => (d === 'bool' ? 'b' : d.startsWith('complex') ? 'c' : d.startsWith('float') ? 'f' : d[0]);
  const bits = (d) => (kind(d) === 'c' ? itemsize(d) * 4 : itemsize(d) * 8);
  const [ka, kb] = [kind(a), kind(b)];
  if (ka === 'b') return b;
  if (kb === 'b') return a;
  if ('ui'.includes(ka) && 'ui'.includes(kb)) {
    if (ka === kb) return bits(a) >= bits(b) ? a : b;
    const [unsigned, signed] = ka === 'u' ? [a, b] : [b, a];
    if (bits(signed) > bits(unsigned)) return signed;
    return bits(unsigned) === 64 ? 'float64' : `int${2 * bits(unsigned)}`;
  }
  const need = (d) => ('ui'.includes(kind(d)) ? (bits(d) <= 16 ? 32 : 64) : bits(d));
  const n = Math.max(need(a), need(b));
  return ka === 'c' || kb === 'c' ? `complex${2 * n}` : `float${n}`;
}

const MERGES = ['add', 'min', 'max', 'assign'];

/** Result buffer declarations: `buffer.nav(name, dtype, extraShape = [], use = 'normal',
 * merge = undefined)`. `dtype`: a NumPy name, `INPUT`, `DATASET` or `atLeast('float32')`;
 * `extraShape`: an array or `(params, dataset) => [...]`; `use`: 'normal', 'private',
 * 'result-only'; `merge` ('add', 'min', 'max', 'assign'): how the default `merge` combines
 * the buffer (nav buffers without one are copied); with 'min' / 'max' it starts at that
 * rule's identity. */
export const buffer = {
  nav: (name, dtype, extraShape = [], use = 'normal', merge = undefined) => ({ name, kind: 'nav', dtype, extraShape, use, merge }),
  sig: (name, dtype, extraShape = [], use = 'normal', merge = undefined) => ({ name, kind: 'sig', dtype, extraShape, use, merge }),
  single: (name, dtype, extraShape = [], use = 'normal', merge = undefined) => ({ name, kind: 'single', dtype, extraShape, use, merge }),
};

/** A declaration for a run: a NumPy dtype name and an array extra shape. */
function resolveDecl(d, params, dataset) {
  let dtype = d.dtype;
  if (dtype === INPUT) dtype = dataset.inputDtype;
  else if (dtype === DATASET) dtype = dataset.datasetDtype;
  else if (dtype.startsWith('at_least:')) dtype = resultType(dataset.inputDtype, dtype.slice(9));
  const extraShape = typeof d.extraShape === 'function' ? d.extraShape(params, dataset) : d.extraShape;
  if (d.merge !== undefined && !MERGES.includes(d.merge)) {
    throw UdfError.internal(`buffer '${d.name}': merge must be one of ${MERGES.join(', ')}, found ${d.merge}`);
  }
  return { ...d, dtype, extraShape };
}

function witDecl(d) {
  return { name: d.name, kind: d.kind, dtype: witDtype(d.dtype), extraShape: u64s(d.extraShape), usage: d.use };
}

/** The run's parameters by name: `params.float('r')`, `.int` (a Number), `.boolean`,
 * `.text`, `.array` (an `ArrayParam`), `params.has(name)`. */
export class Params {
  /** `xp`: the host-array module (array parameters are then `xp` arrays), or null. */
  constructor(list, xp = null) {
    this.values = new Map(list.map((p) => [p.name, p.value]));
    this.arrays = new Map();
    this.xp = xp;
  }
  has(name) {
    return this.values.has(name);
  }
  get(name, tag, what) {
    const v = this.values.get(name);
    if (v === undefined) throw UdfError.badParam(`parameter '${name}' is missing`);
    if (v.tag !== tag) throw UdfError.badParam(`parameter '${name}' is not ${what}`);
    return v.val;
  }
  boolean(name) {
    return this.get(name, 'boolean', 'a boolean');
  }
  int(name) {
    return Number(this.get(name, 'int', 'an integer'));
  }
  float(name) {
    const v = this.values.get(name);
    if (v && v.tag === 'int') return Number(v.val);
    return this.get(name, 'float', 'a float');
  }
  text(name) {
    return this.get(name, 'text', 'text');
  }
  /** An array parameter: an `ArrayParam`, or with host arrays an `xp` array (kept for the
   * partition). */
  array(name) {
    if (!this.arrays.has(name)) {
      const nd = this.get(name, 'array', 'an array');
      const value = this.xp ? this.xp.fromBytes(dtypeName(nd.dtype), nums(nd.shape), arrayBytes(nd)).keep() : new ArrayParam(nd);
      this.arrays.set(name, value);
    }
    return this.arrays.get(name);
  }
}

/** Dataset meta: navShape, sigShape, datasetDtype, inputDtype (names), roiCount
 * (undefined without ROI), frames (selected frames). */
export class Dataset {
  constructor(m) {
    this.navShape = nums(m.navShape);
    this.sigShape = nums(m.sigShape);
    this.datasetDtype = dtypeName(m.datasetDtype);
    this.inputDtype = dtypeName(m.inputDtype);
    this.roiCount = m.roiCount === undefined || m.roiCount === null ? undefined : Number(m.roiCount);
    this.threadsPerWorker = m.threadsPerWorker;
    this.frames = this.roiCount ?? product(this.navShape);
  }
  /** True nav coordinates of a true flat nav index. */
  navCoordinates(index) {
    const out = new Array(this.navShape.length);
    for (let a = this.navShape.length - 1; a >= 0; a--) {
      out[a] = index % this.navShape[a];
      index = Math.floor(index / this.navShape[a]);
    }
    return out;
  }
}

/** A worker's partition: index, origin (compressed), frames, method. */
export class Partition {
  constructor(p) {
    this.index = p.index;
    this.origin = Number(p.origin);
    this.frames = Number(p.frames);
    this.method = p.method;
    this.tileDepth = Number(p.tileDepth);
  }
}

// ------------------------------------------------------------------------------------
// buffers

function storageShape(d, frames, sigShape) {
  let shape = d.kind === 'nav' ? [frames] : d.kind === 'sig' ? [...sigShape] : [];
  shape = shape.concat(nums(d.extraShape));
  return shape.length ? shape : [1];
}

/**
 * Result buffers by name, seen through the current unit (docs/contract.md):
 * `results.get(name)` is a `View` — in processTile a nav buffer's rows of the tile
 * `(T, *E)` and a sig buffer's part under the tile `(*s, *E)`; in processFrame a nav
 * buffer's entry `E` (or `(1,)`) and the whole sig buffer; otherwise the whole buffer.
 */
export class Buffers {
  constructor(list, sigDims = 0) {
    this.buffers = new Map(list.map((b) => [b.name, b]));
    this.sigDims = sigDims;
    this.unit = null; // null: whole; {tile: [n0, n1], sigOrigin, sigShape}; {frame: n}
  }
  /** Enter a unit: null (whole buffers), `{tile: [n0, n1], sigOrigin, sigShape}` or
   * `{frame: n}`. */
  enter(unit) {
    this.unit = unit;
  }
  names() {
    return [...this.buffers.keys()];
  }
  buffer(name) {
    const b = this.buffers.get(name);
    if (!b) throw UdfError.internal(`no buffer '${name}' (buffers: ${this.names().join(', ')})`);
    return b;
  }
  dtype(name) {
    return this.buffer(name).dtype;
  }
  /** The whole buffer, whatever the unit. */
  whole(name) {
    const b = this.buffer(name);
    return new View(b.data, valueShape(b.dtype, b.shape), null, 0, b.dtype);
  }
  get(name) {
    const b = this.buffer(name);
    const view = this.whole(name);
    const unit = this.unit;
    if (unit === null || b.kind === null || b.kind === 'single') return view;
    if (b.kind === 'nav') {
      if (unit.tile) {
        const [n0, n1] = unit.tile;
        return new View(b.data, [n1 - n0, ...view.shape.slice(1)], view.strides, n0 * view.strides[0], b.dtype);
      }
      const sub = view.sub(unit.frame);
      return sub.shape.length ? sub : new View(b.data, [1], [1], sub.offset, b.dtype);
    }
    if (unit.tile) {
      let off = 0;
      const k = Math.min(this.sigDims, unit.sigOrigin.length);
      for (let a = 0; a < k; a++) off += unit.sigOrigin[a] * view.strides[a];
      return new View(b.data, [...unit.sigShape.slice(0, k), ...view.shape.slice(k)], view.strides, off, b.dtype);
    }
    return view;
  }
  /** Set every element of the buffer's current view to `value`. */
  fill(name, value) {
    const b = this.buffer(name);
    this.get(name).fill(isBigInt(b.dtype) ? BigInt(value) : value);
  }
  /** Combine `source` into the buffer's current view: every frame of a `Tile`, one `Frame`,
   * or a number for every element (`results.accumulate('n', 1, 'add')`). */
  accumulate(name, source, op) {
    const view = this.get(name);
    if (source instanceof Tile) accumulate(view, source.data, op);
    else if (source instanceof Frame) combine(view, source.data, op);
    else combine(view, valuesView(new Array(view.size).fill(source), view.shape), op);
  }
  /** Add the sum of each frame of `tile` (its part of the frame) to the buffer's rows for
   * the tile (a nav buffer). */
  addFrameSums(name, tile) {
    const view = this.get(name);
    const sums = [];
    for (let f = 0; f < tile.frames; f++) {
      let s = 0;
      for (const row of tile.data.sub(f).rows()) for (const v of row) s += Number(v);
      sums.push(s);
    }
    combine(view, valuesView(sums, view.shape), 'add');
  }
  /** Merge buffer `name` of `src` into this one, whole. */
  mergeFrom(src, name, op) {
    combine(this.whole(name), src.whole(name), op);
  }
  /** A buffer unchanged, as a result. */
  result(name) {
    const b = this.buffer(name);
    return { name, dtype: b.dtype, shape: b.shape, data: b.data };
  }
  named() {
    return [...this.buffers.values()].map((b) => ({
      name: b.name,
      data: { dtype: witDtype(b.dtype), shape: u64s(b.shape), data: { tag: 'bytes', val: b.bytes } },
    }));
  }
}

/**
 * Result buffers as `xp` arrays in the host (`description({hostArrays: xp})`), seen
 * through the current unit as `Buffers` are: `results.get(name)` is an `xp` view (no copy)
 * of the buffer — in processTile a nav buffer's rows of the tile, a sig buffer's part
 * under the tile. Write with xp's methods: `results.get('intensity').iadd(xp.sum(tile.data,
 * { axis: 0 }))`, `results.get('n').iadd(1)`, `results.get('peak').set(xp.maximum(peak, frame))`.
 */
export class HostBuffers extends Buffers {
  /** `list`: `{name, kind, dtype, shape, arr}` with `arr` the whole buffer (an `xp` array). */
  constructor(xp, list, sigDims = 0) {
    super(list, sigDims);
    this.xp = xp;
    this.views = new Map();
  }
  /** Enter a unit (as `Buffers` do); the views of the last one are disposed with its
   * call's scope. */
  enter(unit) {
    this.unit = unit;
    this.views.clear();
  }
  /** The whole buffer, whatever the unit. */
  whole(name) {
    return this.buffer(name).arr;
  }
  get(name) {
    let view = this.views.get(name);
    if (view !== undefined) return view;
    const b = this.buffer(name);
    const unit = this.unit;
    const { slice } = this.xp;
    view = b.arr;
    if (unit !== null && b.kind === 'nav') {
      if (unit.tile) {
        const [n0, n1] = unit.tile;
        view = b.arr.viewKnown([slice(n0, n1)], [n1 - n0, ...b.shape.slice(1)]);
      } else {
        const n = unit.frame;
        view = b.shape.length === 1 ? b.arr.viewKnown([slice(n, n + 1)], [1]) : b.arr.viewKnown([n], b.shape.slice(1));
      }
    } else if (unit !== null && b.kind === 'sig' && unit.tile) {
      const k = Math.min(this.sigDims, unit.sigOrigin.length);
      const items = [];
      for (let a = 0; a < k; a++) items.push(slice(unit.sigOrigin[a], unit.sigOrigin[a] + unit.sigShape[a]));
      view = b.arr.viewKnown(items, [...unit.sigShape.slice(0, k), ...b.shape.slice(k)]);
    }
    this.views.set(name, view);
    return view;
  }
  /** Set every element of the buffer's current view to `value`. */
  fill(name, value) {
    this.get(name).set(value);
  }
  /** Combine `source` into the buffer's current view: every frame of a `Tile`, one `Frame`,
   * an `xp` array or a number. */
  accumulate(name, source, op) {
    const xp = this.xp;
    let value = source;
    if (source instanceof Tile) {
      const frames = source.data;
      if (op === 'add') value = xp.sum(frames, { axis: 0 });
      else if (op === 'assign') value = frames.get(-1);
      else value = op === 'max' ? xp.max(frames, { axis: 0 }) : xp.min(frames, { axis: 0 });
    } else if (source instanceof Frame) {
      value = source.data;
    }
    combineHost(xp, this.get(name), value, op);
  }
  /** Add the sum of each frame of `tile` (its part of the frame) to the buffer's rows for
   * the tile (a nav buffer). */
  addFrameSums(name, tile) {
    const axes = Array.from({ length: tile.sigShape.length }, (_, i) => i + 1);
    combineHost(this.xp, this.get(name), this.xp.sum(tile.data, { axis: axes }), 'add');
  }
  /** Merge buffer `name` of `src` into this one, whole. */
  mergeFrom(src, name, op) {
    combineHost(this.xp, this.whole(name), src.whole(name), op);
  }
  /** A buffer unchanged, as a result. */
  result(name) {
    const b = this.buffer(name);
    return { name, dtype: b.dtype, shape: b.shape, data: b.arr.toArray() };
  }
  named() {
    return [...this.buffers.values()].map((b) => ({
      name: b.name,
      data: { dtype: witDtype(b.dtype), shape: u64s(b.shape), data: { tag: 'bytes', val: b.arr.toBytes() } },
    }));
  }
}

/** `dest op= value` in place for `xp` arrays (`op` as for `combine`; NaN wins in min and
 * max, as with np.maximum). */
function combineHost(xp, dest, value, op) {
  if (op === 'add') dest.iadd(value);
  else if (op === 'assign') dest.set(value);
  else if (op === 'max' || op === 'min') dest.set(op === 'max' ? xp.maximum(dest, value) : xp.minimum(dest, value));
  else throw UdfError.internal(`combine: op must be one of ${MERGES.join(', ')}, found ${op}`);
}

function allocateHost(xp, decls, frames, sigShape) {
  const list = [];
  for (const d of decls) {
    if (d.use === 'result-only') continue;
    const shape = storageShape(d, frames, sigShape);
    list.push({ name: d.name, kind: d.kind, dtype: d.dtype, shape, arr: xp.zeros(shape, d.dtype).keep() });
  }
  return new HostBuffers(xp, list, sigShape.length);
}

function fromNamedHost(xp, arrays) {
  const list = arrays.map((a) => {
    const dtype = dtypeName(a.data.dtype);
    const shape = nums(a.data.shape);
    const bytes = arrayBytes(a.data);
    if (bytes.byteLength !== product(shape) * itemsize(dtype)) {
      throw UdfError.internal(`buffer '${a.name}' from the host has ${bytes.byteLength} bytes, expected ${product(shape) * itemsize(dtype)}`);
    }
    const arr = xp.fromBytes(dtype, shape, bytes);
    return { name: a.name, kind: null, dtype, shape, arr };
  });
  return new HostBuffers(xp, list);
}

function makeBuffer(name, kind, dtype, shape, bytes) {
  return { name, kind, dtype, shape, bytes, data: typed(bytes, dtype) };
}

function allocate(decls, frames, sigShape) {
  const list = [];
  for (const d of decls) {
    if (d.use === 'result-only') continue;
    const shape = storageShape(d, frames, sigShape);
    list.push(makeBuffer(d.name, d.kind, d.dtype, shape, new Uint8Array(product(shape) * itemsize(d.dtype))));
  }
  return new Buffers(list, sigShape.length);
}

function fromNamed(arrays) {
  return new Buffers(
    arrays.map((a) => {
      const dtype = dtypeName(a.data.dtype);
      const shape = nums(a.data.shape);
      let bytes = arrayBytes(a.data);
      if (bytes.byteLength !== product(shape) * itemsize(dtype)) {
        throw UdfError.internal(`buffer '${a.name}' from the host has ${bytes.byteLength} bytes, expected ${product(shape) * itemsize(dtype)}`);
      }
      return makeBuffer(a.name, null, dtype, shape, bytes);
    }),
  );
}

/** A result of getResults: `{name, dtype, shape, data (a typed array, or an `xp` array of
 * that dtype and shape), valid (optional array of booleans)}`. */
export function result(name, dtype, shape, data, valid = undefined) {
  return { name, dtype, shape, data, valid };
}

function witResult(r) {
  const d = r.data;
  // A typed array, or an `xp` array (host arrays).
  const bytes = typeof d.toBytes === 'function' ? d.toBytes() : new Uint8Array(d.buffer, d.byteOffset, d.byteLength);
  return {
    name: r.name,
    data: { dtype: witDtype(r.dtype), shape: u64s(r.shape), data: { tag: 'bytes', val: bytes } },
    valid: r.valid === undefined ? undefined : r.valid.map(Boolean),
  };
}

// ------------------------------------------------------------------------------------
// tiles and frames

/** A tile: `frames` consecutive frames times one signal slice. `data` is a `View`
 * `[frames, ...sigShape]`; origin (compressed flat nav index), sigOrigin, sigShape,
 * schemeIndex, trueNavIndices, dtype, navOffset (first frame within the partition). */
export class Tile {
  /** `xp`: with host arrays, the `xp` module (`data` is then the host's tile, an `xp`
   * array valid during the `process` call). */
  constructor(raw, ctx, xp = null) {
    this.xp = xp;
    this.ctx = ctx;
    this.dtype = ctx.dataset.inputDtype;
    this.frames = Number(raw.frames);
    this.origin = Number(raw.origin);
    this.schemeIndex = raw.schemeIndex;
    this.sigOrigin = nums(raw.sig.origin);
    this.sigShape = nums(raw.sig.shape);
    this.trueNavIndices = raw.trueNavIndices;
    if (xp) {
      this.data = xp.tile([this.frames, ...this.sigShape]);
    } else {
      const bytes = arrayBytes({ dtype: witDtype(this.dtype), data: raw.data });
      this.data = new View(typed(bytes, this.dtype), valueShape(this.dtype, [this.frames, ...this.sigShape]), null, 0, this.dtype);
    }
    this.navOffset = this.origin - (ctx.partition ? ctx.partition.origin : 0);
  }
  get frameLen() {
    return product(this.sigShape);
  }
  frame(i) {
    return new Frame(this, i);
  }
  coordinates() {
    return Array.from(this.trueNavIndices, (i) => this.ctx.dataset.navCoordinates(Number(i)));
  }
  /** The tile's part of a sig-shaped view (its last axes the signal shape; leading axes,
   * e.g. a stack of masks, are kept). */
  sigPart(view) {
    const k = this.sigShape.length;
    if (this.xp && view instanceof this.xp.NDArray) {
      const shape = view.shape;
      const sig = this.ctx.dataset.sigShape;
      const first = shape.length - k;
      if (first < 0 || shape.slice(first).join() !== sig.join()) {
        throw UdfError.badParam(`an array of shape [${shape}] does not end in the signal shape [${sig}]`);
      }
      const items = ['...', ...this.sigOrigin.map((o, a) => this.xp.slice(o, o + this.sigShape[a]))];
      return view.viewKnown(items, [...shape.slice(0, first), ...this.sigShape]);
    }
    const first = view.shape.length - k;
    const sig = this.ctx.dataset.sigShape;
    if (first < 0 || view.shape.slice(first).join() !== sig.join()) {
      throw UdfError.badParam(`an array of shape [${view.shape}] does not end in the signal shape [${sig}]`);
    }
    let offset = view.offset;
    for (let a = 0; a < k; a++) offset += this.sigOrigin[a] * view.strides[first + a];
    return new View(view.data, [...view.shape.slice(0, first), ...this.sigShape], view.strides, offset, view.dtype);
  }
  /** Per-frame aux data of this tile's frames: `[frames, ...extra]`. */
  aux(name) {
    if (this.xp) {
      const a = this.ctx.params.array(name);
      return a.viewKnown([this.xp.slice(this.navOffset, this.navOffset + this.frames)], [this.frames, ...a.shape.slice(1)]);
    }
    const v = this.ctx.params.array(name).view;
    return new View(v.data, [this.frames, ...v.shape.slice(1)], v.strides, v.offset + this.navOffset * v.strides[0], v.dtype);
  }
}

/** One full frame: `data` (a `View` of the signal shape), navIndex (compressed),
 * trueNavIndex, coordinates, aux(name). */
export class Frame {
  constructor(tile, i) {
    this.tile = tile;
    this.index = i;
    this.data = tile.xp ? tile.data.viewKnown([i], tile.sigShape) : tile.data.sub(i);
    this.dtype = tile.dtype;
    this.navIndex = tile.origin + i;
    this.trueNavIndex = Number(tile.trueNavIndices[i]);
  }
  get coordinates() {
    return this.tile.ctx.dataset.navCoordinates(this.trueNavIndex);
  }
  flat() {
    return this.tile.xp ? this.data.reshape([-1]) : this.data.flat();
  }
  /** The sum of the frame's values (a Number). */
  sum() {
    if (this.tile.xp) return Number(this.tile.xp.sum(this.data).item());
    let s = 0;
    for (const row of this.data.rows()) for (const v of row) s += Number(v);
    return s;
  }
  aux(name) {
    const i = this.tile.navOffset + this.index;
    if (this.tile.xp) {
      const a = this.tile.ctx.params.array(name);
      const shape = a.shape;
      return shape.length === 1 ? a.viewKnown([this.tile.xp.slice(i, i + 1)], [1]) : a.viewKnown([i], shape.slice(1));
    }
    const sub = this.tile.ctx.params.array(name).view.sub(i);
    return sub.shape.length ? sub : new View(sub.data, [1], [1], sub.offset, sub.dtype);
  }
}

// ------------------------------------------------------------------------------------
// the plugin base class and the export adapter

/**
 * Base class of a plugin. Set `static description` and `static buffers` (or implement
 * `static resultBuffers`) and implement one
 * of `processTile(tile, results)`, `processFrame(frame, results)`,
 * `processPartition(tile, results)`. Optional: `static plan(params, dataset)`,
 * `constructor(ctx)` (per partition: task data), `preprocess(ctx, results)`,
 * `postprocess(ctx, results)`, `static merge(ctx, dest, src)` (with customMerge),
 * `static getResults(ctx, buffers)` (with customResults; returns `result(...)`s).
 */
export class Udf {
  constructor(_ctx) {}
  static plan(_params, _dataset) {
    const d = this.description;
    return { method: d.methods[0], inputDtype: d.inputDtype, tileDepth: d.tileDepth, tileSize: d.tileSize };
  }
  static resultBuffers(_params, _dataset) {
    return [...(this.buffers ?? [])];
  }
  preprocess(_ctx, _results) {}
  postprocess(_ctx, _results) {}
  static merge(_ctx, dest, src) {
    const decls = this.buffers ?? [];
    if (!decls.length) throw UdfError.internal('merge is not implemented');
    for (const name of src.names()) {
      const d = decls.find((b) => b.name === name);
      if (!d) throw UdfError.internal(`buffer '${name}' is not declared`);
      const op = d.merge ?? (d.kind === 'nav' ? 'assign' : undefined);
      if (!op) {
        throw UdfError.internal(`buffer '${name}' has no merge rule: declare one ('add', 'min', 'max', 'assign') or implement merge`);
      }
      dest.mergeFrom(src, name, op);
    }
  }
  static getResults(_ctx, buffers) {
    return buffers.names().map((n) => buffers.result(n));
  }
}

function guard(f) {
  return (...args) => {
    try {
      return f(...args);
    } catch (e) {
      if (e instanceof UdfError) throw e;
      // Any other exception is a bug: an `internal` error (the contract wants typed
      // errors, never traps), with the stack in the host's log.
      hostLog('error', `javascript exception: ${e && e.stack ? `${e}\n${e.stack}` : e}`);
      throw UdfError.internal(`${e && e.name ? e.name : 'Error'}: ${e && e.message !== undefined ? e.message : e}`);
    }
  };
}

/** The starting value of a min / max buffer, as an `xp` scalar (BigInt for integers). */
function hostIdentity(dtype, op) {
  const v = identity(dtype, op);
  if (dtype === 'bool') return Boolean(v);
  return dtype.startsWith('int') || dtype.startsWith('uint') ? BigInt(v) : v;
}

/** The object to export as `udf` from the plugin module. */
export function exportUdf(Cls) {
  let worker = null;
  const need = () => {
    if (!worker) throw UdfError.internal('called before init');
    return worker;
  };
  // With host arrays every call runs in a scope: the arrays it makes are disposed when it
  // returns (buffers, array parameters and what the plugin keep()s live on).
  const xp = Cls.description.hostArrays ?? null;
  const scoped = xp ? (f) => (...args) => xp.scoped(() => f(...args)) : (f) => f;
  return {
    describe: guard(() => {
      if (xp) xp.useHostTiles();
      const decls = Cls.buffers ?? [];
      const d = { ...Cls.description };
      d.customMerge ||= decls.some((b) => b.merge !== undefined);
      d.customResults ||= decls.some((b) => b.use === 'result-only');
      d.mainPreprocess ||= decls.some((b) => b.merge === 'min' || b.merge === 'max');
      return witDescription(d);
    }),
    plan: guard((params, dataset) => {
      const p = Cls.plan(new Params(params, xp), new Dataset(dataset));
      return { method: p.method, inputDtype: preference(p.inputDtype), tiling: tiling(p.tileDepth, p.tileSize) };
    }),
    resultBuffers: guard((params, dataset) => {
      const [p, ds] = [new Params(params, xp), new Dataset(dataset)];
      return Cls.resultBuffers(p, ds).map((d) => witDecl(resolveDecl(d, p, ds)));
    }),
    init: guard((c) => {
      const params = new Params(c.params, xp);
      const dataset = new Dataset(c.dataset);
      const partition = c.partition ? new Partition(c.partition) : undefined;
      const ctx = { params, dataset, partition };
      const frames = partition ? partition.frames : dataset.frames;
      const decls = Cls.resultBuffers(params, dataset).map((d) => resolveDecl(d, params, dataset));
      const buffers = xp ? allocateHost(xp, decls, frames, dataset.sigShape) : allocate(decls, frames, dataset.sigShape);
      for (const d of decls) {
        if ((d.merge === 'min' || d.merge === 'max') && d.use !== 'result-only') {
          buffers.whole(d.name).fill(xp ? hostIdentity(d.dtype, d.merge) : identity(d.dtype, d.merge));
        }
      }
      worker = { ctx, buffers, method: partition ? partition.method : 'partition', udf: null };
      worker.udf = new Cls(ctx);
    }),
    preprocess: guard(scoped(() => {
      const w = need();
      w.buffers.enter(null);
      w.udf.preprocess(w.ctx, w.buffers);
    })),
    process: guard(scoped((raw) => {
      const w = need();
      const tile = new Tile(raw, w.ctx, xp);
      if (w.method === 'tile') {
        w.buffers.enter({ tile: [tile.navOffset, tile.navOffset + tile.frames], sigOrigin: tile.sigOrigin, sigShape: tile.sigShape });
        w.udf.processTile(tile, w.buffers);
      } else if (w.method === 'frame') {
        // One scope per frame: a tile may hold thousands of frames.
        const frame = scoped((i) => {
          w.buffers.enter({ frame: tile.navOffset + i });
          w.udf.processFrame(new Frame(tile, i), w.buffers);
        });
        for (let i = 0; i < tile.frames; i++) frame(i);
      } else {
        w.buffers.enter(null);
        w.udf.processPartition(tile, w.buffers);
      }
    })),
    postprocess: guard(scoped(() => {
      const w = need();
      w.buffers.enter(null);
      w.udf.postprocess(w.ctx, w.buffers);
    })),
    exportBuffers: guard(() => {
      const w = need();
      worker = null;
      return w.buffers.named();
    }),
    merge: guard(scoped((c, dest, src) => {
      const ctx = {
        params: new Params(c.params, xp),
        dataset: new Dataset(c.dataset),
        partition: new Partition(c.partition),
        validNavMask: c.validNavMask,
      };
      const named = (arrays) => (xp ? fromNamedHost(xp, arrays) : fromNamed(arrays));
      const d = named(dest);
      Cls.merge(ctx, d, named(src));
      return d.named();
    })),
    getResults: guard(scoped((c, buffers) => {
      const ctx = { params: new Params(c.params, xp), dataset: new Dataset(c.dataset), validNavMask: c.validNavMask, roi: c.roi };
      return Cls.getResults(ctx, xp ? fromNamedHost(xp, buffers) : fromNamed(buffers)).map(witResult);
    })),
  };
}

// ------------------------------------------------------------------------------------
// frame maps (LiberTEM's AutoUDF / ctx.map)

const TYPED_DTYPES = [
  [Float32Array, 'float32'], [Float64Array, 'float64'], [Int8Array, 'int8'], [Int16Array, 'int16'],
  [Int32Array, 'int32'], [BigInt64Array, 'int64'], [Uint8Array, 'uint8'], [Uint16Array, 'uint16'],
  [Uint32Array, 'uint32'], [BigUint64Array, 'uint64'],
];

/** `{dtype, shape, values}` of a frame map's value: a number (float64), a boolean, a BigInt
 * (int64), a typed array, a `View` or nested arrays. */
function valueInfo(value) {
  if (value instanceof View) {
    const values = [];
    for (const row of value.rows()) values.push(...row);
    const dtype = value.dtype ?? 'float64';
    return { dtype, shape: isComplex(dtype) ? value.shape.slice(0, -1) : value.shape, values };
  }
  const typed = TYPED_DTYPES.find(([Ctor]) => value instanceof Ctor);
  if (typed) return { dtype: typed[1], shape: [value.length], values: Array.from(value) };
  const shape = [];
  const values = [];
  const walk = (v, depth) => {
    if (Array.isArray(v) || ArrayBuffer.isView(v)) {
      if (shape.length === depth) shape.push(v.length);
      else if (shape[depth] !== v.length) throw UdfError.invalidData(`a frame map returned ragged arrays (length ${v.length}, not ${shape[depth]})`);
      for (const item of v) walk(item, depth + 1);
    } else values.push(v);
  };
  walk(value, 0);
  if (values.length && values.every((v) => typeof v === 'boolean')) return { dtype: 'bool', shape, values: values.map(Number) };
  if (values.length && values.every((v) => typeof v === 'bigint')) return { dtype: 'int64', shape, values };
  return { dtype: 'float64', shape, values: values.map(Number) };
}

/**
 * A whole plugin from a function of one frame (LiberTEM's `ctx.map(f=...)`):
 * `export const udf = sdk.exportMap('row-sums', (frame) => Array.from(frame.rows(), (r) => r.reduce((a, b) => a + b, 0)));`
 *
 * `f` gets the frame as a `View` of the signal shape and returns a number, an array or a
 * `View`; the nav buffer `result` takes that value's dtype and shape, found by calling `f`
 * on a frame of zeros (as `AutoUDF` does). Options: `summary`, `inputDtype` ('float32'),
 * `hostArrays` (the module `./xp.js`: the frame is then an `xp` array and `f` returns
 * anything `xp.asarray` takes:
 * `sdk.exportMap('row-sums', (frame) => xp.sum(frame, { axis: -1 }), { hostArrays: xp })`).
 */
export function exportMap(name, f, { summary = "A frame map (LiberTEM's AutoUDF), JavaScript", inputDtype = 'float32', hostArrays = null } = {}) {
  if (hostArrays) return exportHostMap(name, f, summary, inputDtype, hostArrays);
  class FrameMap extends Udf {
    static description = description({ name, version: '0.1.0', summary, methods: ['frame'], inputDtype });
    static resultBuffers(_params, dataset) {
      const dtype = dataset.inputDtype;
      const bytes = new Uint8Array(product(dataset.sigShape) * itemsize(dtype));
      const zeros = new View(typed(bytes, dtype), valueShape(dtype, dataset.sigShape), null, 0, dtype);
      const info = valueInfo(f(zeros));
      return [buffer.nav('result', info.dtype, info.shape)];
    }
    processFrame(frame, results) {
      const out = results.get('result');
      const info = valueInfo(f(frame.data));
      if (info.values.length !== out.size) {
        throw UdfError.invalidData(`the frame map returned a value of shape [${info.shape}] for frame ${frame.navIndex}, unlike its value for a frame of zeros`);
      }
      combine(out, valuesView(info.values, out.shape), 'assign');
    }
  }
  return exportUdf(FrameMap);
}

/** `exportMap` with host arrays. */
function exportHostMap(name, f, summary, inputDtype, xp) {
  class FrameMap extends Udf {
    static description = description({ name, version: '0.1.0', summary, methods: ['frame'], inputDtype, hostArrays: xp });
    static resultBuffers(_params, dataset) {
      const value = xp.asarray(f(xp.zeros(dataset.sigShape, dataset.inputDtype)));
      return [buffer.nav('result', value.dtype, value.shape)];
    }
    processFrame(frame, results) {
      const out = results.get('result');
      const value = xp.asarray(f(frame.data));
      let reshaped;
      try {
        // The host checks the size (asking for the value's shape would leave garbage).
        reshaped = value.reshape(out.shape);
      } catch (e) {
        if (!(e instanceof xp.XpError)) throw e;
        throw UdfError.invalidData(`the frame map returned a value of shape [${value.shape}] for frame ${frame.navIndex}, unlike its value for a frame of zeros`);
      }
      out.set(reshaped);
    }
  }
  return exportUdf(FrameMap);
}
