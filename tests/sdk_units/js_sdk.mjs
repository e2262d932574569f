// Unit tests of guest-sdk/js/udf-sdk.js's pure helpers and of xp.js's bookkeeping, run
// natively (node >= 20.6) by tests/all/sdk_examples.rs: the host imports componentize-js
// provides are stubbed by a module resolve hook (the arrays interface by resources that
// record what was made, with which arguments, and what was disposed).
import { register } from 'node:module';
import assert from 'node:assert/strict';

const hooks = `
export async function resolve(specifier, context, next) {
  if (specifier === 'udf:plugin/host@0.1.1') {
    return { shortCircuit: true, url: 'data:text/javascript,export function log() {}' };
  }
  if (specifier === 'udf:plugin/arrays@0.1.1') {
    const arrays = [
      'const made = (globalThis.xpMade = []);',
      'function resource(args) {',
      '  const r = { args, disposed: false, shape: () => new BigUint64Array(0), dtype: () => "float32" };',
      '  r[Symbol.dispose] = () => { r.disposed = true; };',
      '  r.reshape = (shape) => resource([shape]);',
      '  made.push(r);',
      '  return r;',
      '}',
      'export function zeros(shape, dtype) { return resource([shape, dtype]); }',
      'export function reduce(op, x, options) { return resource([op, x, options]); }',
    ].join('\\n');
    return { shortCircuit: true, url: 'data:text/javascript,' + encodeURIComponent(arrays) };
  }
  return next(specifier, context);
}`;
register(`data:text/javascript,${encodeURIComponent(hooks)}`);
const sdk = await import(new URL('../../guest-sdk/js/udf-sdk.js', import.meta.url));
const xp = await import(new URL('../../guest-sdk/js/xp.js', import.meta.url));

const view = (Ctor, values, shape, dtype) => new sdk.View(Ctor.from(values), shape, null, 0, dtype);
const tests = {
  resultTypeFollowsNumpy() {
    const cases = [['bool', 'uint16', 'uint16'], ['uint16', 'float32', 'float32'], ['int32', 'float32', 'float64'],
      ['uint64', 'float32', 'float64'], ['uint8', 'int8', 'int16'], ['uint32', 'int32', 'int64'],
      ['uint64', 'int64', 'float64'], ['float32', 'float64', 'float64'], ['complex64', 'float64', 'complex128'],
      ['complex64', 'uint16', 'complex64'], ['int64', 'uint8', 'int64']];
    for (const [a, b, expected] of cases) {
      assert.equal(sdk.resultType(a, b), expected, `${a} ${b}`);
      assert.equal(sdk.resultType(b, a), expected, `${b} ${a}`);
    }
  },
  combineAddsWrapsAndLetsNanWin() {
    const dest = view(Float32Array, [1, -2, 3], [3], 'float32');
    sdk.combine(dest, view(Float32Array, [0.5, NaN, -7], [3], 'float32'), 'max');
    assert.deepEqual([dest.at(0), Number.isNaN(dest.at(1)), dest.at(2)], [1, true, 3]);
    const ints = view(Uint8Array, [250, 3], [2], 'uint8');
    sdk.combine(ints, view(Float32Array, [10, 4], [2], 'float32'), 'add');
    assert.deepEqual(Array.from(ints.flat()), [4, 7]);
    const big = view(BigInt64Array, [5n], [1], 'int64');
    sdk.combine(big, view(Float64Array, [2.7], [1], 'float64'), 'add');
    assert.equal(big.at(0), 7n);
    assert.throws(() => sdk.combine(dest, view(Float32Array, [1], [1], 'float32'), 'add'), /differ/);
  },
  accumulateTakesEveryFrame() {
    const acc = view(Float64Array, [-Infinity, -Infinity], [2], 'float64');
    sdk.accumulate(acc, view(Float32Array, [1, -5, -3, 2], [2, 2], 'float32'), 'max');
    assert.deepEqual(Array.from(acc.flat()), [1, 2]);
  },
  frameMapValuesTakeTheirShapes() {
    // Through exportMap's resultBuffers: a frame of zeros of the signal shape.
    const udf = sdk.exportMap('m', (frame) => Array.from(frame.rows(), (row) => [row.length, 0]));
    const meta = { navShape: [2n], sigShape: [3n, 4n], datasetDtype: 'uint16', inputDtype: 'float32', threadsPerWorker: 1 };
    const [decl] = udf.resultBuffers([], meta);
    assert.deepEqual([decl.name, decl.kind, decl.dtype, Array.from(decl.extraShape)], ['result', 'nav', 'float64', [3n, 2n]]);
    assert.equal(udf.describe().methods[0], 'frame');
  },
  declaredBuffersResolveAndSetTheFlags() {
    class Max extends sdk.Udf {
      static description = sdk.description({ name: 'max', version: '0.1.0', summary: '' });
      static buffers = [sdk.buffer.sig('m', sdk.atLeast('float32'), (p, ds) => [ds.navShape.length], 'normal', 'max')];
    }
    const udf = sdk.exportUdf(Max);
    const d = udf.describe();
    assert.deepEqual([d.customMerge, d.customResults, d.mainPreprocess], [true, false, true]);
    const meta = { navShape: [2n, 3n], sigShape: [4n], datasetDtype: 'int32', inputDtype: 'int32', threadsPerWorker: 1 };
    const [decl] = udf.resultBuffers([], meta);
    assert.deepEqual([decl.dtype, Array.from(decl.extraShape)], ['float64', [2n]]);
  },
  scopedDisposesWhatItMadeButNotWhatItReturnsOrKeeps() {
    const made = globalThis.xpMade;
    made.length = 0;
    let kept;
    let returned;
    const outer = xp.scoped(() => {
      returned = xp.scoped(() => {
        xp.zeros([2]);
        kept = xp.zeros([3]).keep();
        return xp.zeros([4]);
      });
      assert.deepEqual(made.map((r) => r.disposed), [true, false, false], 'inner: the temporary only');
      return 'done';
    });
    assert.equal(outer, 'done');
    assert.deepEqual(made.map((r) => r.disposed), [true, false, true], 'outer: the returned one with its caller');
    assert.ok(!kept.r.disposed && returned.r === undefined);
    kept.dispose();
    assert.ok(made[1].disposed);
  },
  listsGoToTheHostAsPlainArraysAndKnownShapesAreNotAsked() {
    const made = globalThis.xpMade;
    made.length = 0;
    const a = xp.zeros([2, 3]);
    const s = xp.sum(a, { axis: [0, -1] });
    const r = a.reshape([3, 2]);
    assert.deepEqual(made[0].args, [[2n, 3n], 'float64'], 'shape: a plain array of BigInt');
    assert.ok(Array.isArray(made[1].args[2].axes), 'axes: a plain array');
    assert.deepEqual(made[1].args[2].axes, [0n, -1n]);
    assert.deepEqual([a.shape, r.shape], [[2, 3], [3, 2]], 'known shapes');
    assert.deepEqual(s.shape, [], 'an unknown shape is asked from the host');
  },
};
for (const [name, test] of Object.entries(tests)) {
  test();
  console.log('ok', name);
}
console.log(`${Object.keys(tests).length} passed`);
