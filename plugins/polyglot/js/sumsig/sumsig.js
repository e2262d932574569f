// `sumsig`: the sum over each frame (LiberTEM's SumSigUDF), in JavaScript.
//
// Buffer `intensity`: kind nav, dtype = input dtype, intensity[n] = sum_{y,x} F_n[y, x].
// Merged natively by the host.
import * as sdk from './udf-sdk.js';

class SumSig extends sdk.Udf {
  static description = sdk.description({
    name: 'sumsig',
    version: '0.1.0',
    summary: 'Sum over each frame (LiberTEM SumSigUDF), JavaScript',
  });

  static resultBuffers(params, dataset) {
    return [sdk.buffer.nav('intensity', dataset.inputDtype)];
  }

  processTile(tile, results) {
    const intensity = results.get('intensity'); // (frames in tile,) or (frames, 2) for complex
    const data = tile.data.flat(); // the tile is contiguous: [frames, ...sig slice]
    const n = tile.frameLen;
    const zero = sdk.isBigInt(tile.dtype) ? 0n : 0;
    // A tile may hold only part of each frame: accumulate the partial sums.
    if (sdk.isComplex(tile.dtype)) {
      for (let f = 0; f < tile.frames; f++) {
        let re = 0;
        let im = 0;
        for (let i = 2 * f * n; i < 2 * (f + 1) * n; i += 2) {
          re += data[i];
          im += data[i + 1];
        }
        intensity.set([f, 0], intensity.at(f, 0) + re);
        intensity.set([f, 1], intensity.at(f, 1) + im);
      }
      return;
    }
    for (let f = 0; f < tile.frames; f++) {
      let s = zero;
      for (let i = f * n; i < (f + 1) * n; i++) s += data[i];
      intensity.set([f], intensity.at(f) + s);
    }
  }
}

export const udf = sdk.exportUdf(SumSig);
