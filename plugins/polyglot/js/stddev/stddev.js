// `stddev`: per-pixel sum, variance, standard deviation and mean over all frames
// (LiberTEM's StdDevUDF), in JavaScript with host arrays; the buffers and numbers of the
// Rust `plugins/stddev`.
//
// Over the N processed frames: mean = sum / N, var = varsum / N (population variance),
// std = sqrt(var). Buffers: `varsum` (sig, base dtype), `num_frames` (single, int64), `sum`
// (sig, result_type(input, base)); results `var`, `std` (base) and `mean` (sum's dtype).
// Param `dtype` (float32 or float64, default float64): the base dtype.
//
// Per tile: [S1, V1 / n1] = sumVar(tile, axis=0) (one host call, one pass over the tile;
// in the sum's dtype, the variance then cast to the base dtype), merged into the buffers with the pairwise formula of Chan et al.:
// V = V0 + V1 + |S1/n1 - S0/n0|^2 * n0 * n1 / (n0 + n1), S = S0 + S1. Frames are counted
// per signal slice of the tiling scheme, as LiberTEM keys them by `tiling_scheme_idx`.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

function base(params) {
  const dtype = params.text('dtype');
  if (dtype !== 'float32' && dtype !== 'float64') {
    throw sdk.UdfError.badParam(`stddev: parameter 'dtype' must be float32 or float64, found '${dtype}'`);
  }
  return dtype;
}

/** Merge (sum, varsum, count) of (s1, v1, n1) into the arrays s0, v0 (count n0). */
function pairwise(s0, v0, n0, s1, v1, n1) {
  if (n1 === 0) return;
  if (n0 === 0) {
    s0.set(s1);
    v0.set(v1);
    return;
  }
  const delta = s1.div(n1).sub(s0.div(n0));
  v0.iadd(v1.add(xp.real(delta.mul(xp.conj(delta))).mul((n0 * n1) / (n0 + n1))));
  s0.iadd(s1);
}

class StdDev extends sdk.Udf {
  static description = sdk.description({
    name: 'stddev',
    version: '0.1.0',
    summary: 'Per-pixel sum, variance, standard deviation and mean (LiberTEM StdDevUDF), JavaScript',
    params: [sdk.param.text('dtype', 'base dtype of varsum/var/std: float32 or float64', 'float64')],
    customMerge: true,
    customResults: true,
    hostArrays: xp,
  });

  static resultBuffers(params, dataset) {
    const b = base(params);
    if (!['float32', 'float64', 'complex64', 'complex128'].includes(dataset.inputDtype)) {
      throw sdk.UdfError.invalidData(`stddev needs float or complex input, got ${dataset.inputDtype}`);
    }
    const total = sdk.resultType(dataset.inputDtype, b);
    return [
      sdk.buffer.sig('varsum', b),
      sdk.buffer.single('num_frames', 'int64'),
      sdk.buffer.sig('sum', total),
      sdk.buffer.sig('var', b, [], 'result-only'),
      sdk.buffer.sig('std', b, [], 'result-only'),
      sdk.buffer.sig('mean', total, [], 'result-only'),
    ];
  }

  constructor(ctx) {
    super(ctx);
    this.seen = new Map(); // frames seen per signal slice (tiling scheme index)
  }

  processTile(tile, results) {
    const i = tile.schemeIndex;
    const [n0, n1] = [this.seen.get(i) ?? 0, tile.frames];
    const [s1, v] = xp.sumVar(tile.data, { axis: 0, dtype: results.dtype('sum') });
    const v1 = (v.dtype === results.dtype('varsum') ? v : v.astype(results.dtype('varsum'))).mul(n1);
    pairwise(results.get('sum'), results.get('varsum'), n0, s1, v1, n1);
    this.seen.set(i, n0 + n1);
  }

  postprocess(ctx, results) {
    const counts = [...this.seen.values()];
    const n = counts.length ? counts[0] : 0;
    if (counts.some((m) => m !== n)) {
      throw sdk.UdfError.internal(`stddev: signal slices of the partition saw different frame counts ${counts}`);
    }
    results.get('num_frames').set(BigInt(n));
  }

  static merge(ctx, dest, src) {
    const n0 = Number(dest.get('num_frames').item());
    const n1 = Number(src.get('num_frames').item());
    pairwise(dest.get('sum'), dest.get('varsum'), n0, src.get('sum'), src.get('varsum'), n1);
    dest.get('num_frames').set(BigInt(n0 + n1));
  }

  static getResults(ctx, buffers) {
    const n = Number(buffers.get('num_frames').item()); // 0 (an all-false ROI): NaN, as NumPy's 0 / 0
    const [varsum, sum] = [buffers.buffer('varsum'), buffers.buffer('sum')];
    const variance = varsum.arr.div(n);
    return [
      sdk.result('var', varsum.dtype, varsum.shape, variance),
      sdk.result('std', varsum.dtype, varsum.shape, xp.sqrt(variance)),
      sdk.result('mean', sum.dtype, sum.shape, sum.arr.div(n)),
    ];
  }
}

export const udf = sdk.exportUdf(StdDev);
