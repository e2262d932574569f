// `sum`: the sum of all frames (LiberTEM's SumUDF), in JavaScript.
//
// Buffer `intensity`: kind sig, dtype = input dtype, intensity[y, x] = sum_n F_n[y, x].
// Param `dtype` (default float32) is the preferred input dtype.
import * as sdk from './udf-sdk.js';

class Sum extends sdk.Udf {
  static description = sdk.description({
    name: 'sum',
    version: '0.1.0',
    summary: 'Sum of all frames (LiberTEM SumUDF), JavaScript',
    params: [sdk.param.text('dtype', 'preferred input dtype (NumPy name)', 'float32')],
    customMerge: true,
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
    const acc = results.get('intensity'); // the tile's part of the frame
    for (let f = 0; f < tile.frames; f++) sdk.iadd(acc, tile.data.sub(f));
  }

  static merge(ctx, dest, src) {
    sdk.iadd(dest.get('intensity'), src.get('intensity'));
  }
}

export const udf = sdk.exportUdf(Sum);
