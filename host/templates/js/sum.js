// `{{name}}`: the sum of all frames (LiberTEM's SumUDF).
//
// Buffer `intensity`: kind sig, float32, intensity[y, x] = sum over frames n of F_n[y, x].
// Tile method: each call adds a tile's frames into its part of the frame; the host merges
// partitions with `merge`. Started from `udf-host new --template sum`; src/udf-sdk.js
// documents the SDK.
import * as sdk from './udf-sdk.js';

{{float32_input}}
class {{Type}} extends sdk.Udf {
  static description = sdk.description({
    name: '{{name}}',
    version: '0.1.0',
    summary: 'Sum of all frames',
    customMerge: true,
  });

  static resultBuffers(params, dataset) {
    float32Input(dataset);
    return [sdk.buffer.sig('intensity', 'float32')];
  }

  processTile(tile, results) {
    const intensity = results.get('intensity'); // the tile's part of the frame
    for (let f = 0; f < tile.frames; f++) sdk.iadd(intensity, tile.data.sub(f));
  }

  static merge(ctx, dest, src) {
    sdk.iadd(dest.get('intensity'), src.get('intensity'));
  }
}

export const udf = sdk.exportUdf({{Type}});
