// `{{name}}`: the sum of all frames (LiberTEM's SumUDF).
//
// Buffer `intensity`: kind sig, float32, intensity[y, x] = sum over frames n of F_n[y, x].
// Tile method: each call adds a tile's frames into its part of the frame; the host merges
// partitions with `merge`. With `hostArrays: xp` the tile and the buffers are `xp` arrays
// that live in the host (src/xp.js: NumPy's names, the array API standard): `xp.sum` runs
// at the host's speed and the tile is never copied into the plugin. Started from
// `udf-host new --template sum`; src/udf-sdk.js documents the SDK.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

{{float32_input}}
class {{Type}} extends sdk.Udf {
  static description = sdk.description({
    name: '{{name}}',
    version: '0.1.0',
    summary: 'Sum of all frames',
    customMerge: true,
    hostArrays: xp,
  });

  static resultBuffers(params, dataset) {
    float32Input(dataset);
    return [sdk.buffer.sig('intensity', 'float32')];
  }

  processTile(tile, results) {
    results.get('intensity').iadd(xp.sum(tile.data, { axis: 0 })); // the tile's part of the frame
  }

  static merge(ctx, dest, src) {
    dest.get('intensity').iadd(src.get('intensity'));
  }
}

export const udf = sdk.exportUdf({{Type}});
