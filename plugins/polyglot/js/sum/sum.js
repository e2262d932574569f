// `sum`: the sum of all frames (LiberTEM's SumUDF), in JavaScript with host arrays.
//
// Buffer `intensity`: kind sig, dtype = input dtype, intensity[y, x] = sum_n F_n[y, x].
// Param `dtype` (default float32) is the preferred input dtype. The tile stays in the
// host (`hostArrays: xp`): one reduction and one add per tile, at the host's speed.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

class Sum extends sdk.Udf {
  static description = sdk.description({
    name: 'sum',
    version: '0.1.0',
    summary: 'Sum of all frames (LiberTEM SumUDF), JavaScript',
    params: [sdk.param.text('dtype', 'preferred input dtype (NumPy name)', 'float32')],
    customMerge: true,
    hostArrays: xp,
  });

  static plan(params, dataset) {
    const dtype = params.text('dtype');
    if (!sdk.DTYPES.includes(dtype)) throw sdk.UdfError.badParam(`dtype '${dtype}' is not a NumPy dtype name`);
    return { ...super.plan(params, dataset), inputDtype: dtype };
  }

  static resultBuffers(params, dataset) {
    return [sdk.buffer.sig('intensity', dataset.inputDtype)];
  }

  processTile(tile, results) {
    results.get('intensity').iadd(xp.sum(tile.data, { axis: 0 })); // the tile's part of the frame
  }

  static merge(ctx, dest, src) {
    dest.get('intensity').iadd(src.get('intensity'));
  }
}

export const udf = sdk.exportUdf(Sum);
