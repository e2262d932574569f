// `sumsig`: the sum over each frame (LiberTEM's SumSigUDF), in JavaScript with host arrays.
//
// Buffer `intensity`: kind nav, dtype = input dtype, intensity[n] = sum_{y,x} F_n[y, x].
// Merged natively by the host.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

class SumSig extends sdk.Udf {
  static description = sdk.description({
    name: 'sumsig',
    version: '0.1.0',
    summary: 'Sum over each frame (LiberTEM SumSigUDF), JavaScript',
    hostArrays: xp,
  });

  static resultBuffers(params, dataset) {
    return [sdk.buffer.nav('intensity', dataset.inputDtype)];
  }

  processTile(tile, results) {
    // A tile may hold only part of each frame: accumulate the partial sums over its
    // signal axes (1 ..= sig dims of [frames, ...sig slice]).
    const sigAxes = tile.sigShape.map((_, a) => a + 1);
    results.get('intensity').iadd(xp.sum(tile.data, { axis: sigAxes }));
  }
}

export const udf = sdk.exportUdf(SumSig);
