// `masks`: the dot product of every frame with each of a stack of masks — virtual
// detectors (LiberTEM's ApplyMasksUDF), in JavaScript with host arrays.
//
// intensity[n, m] = sum_{y,x} F_n[y, x] * mask_m[y, x] (no complex conjugation). Param
// `masks` (array, required): a stack (M, ...sig) or one mask (...sig). Buffer `intensity`:
// kind nav, extra shape (M,), dtype result_type(input, mask dtype).
//
// Per partition the masks are cut once for each signal slice of the tiling scheme into a
// (pixels, M) matrix; per tile one matrix product tile (frames, pixels) @ (pixels, M) in
// the host.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

function count(params, dataset) {
  const shape = params.array('masks').shape;
  const sig = dataset.sigShape;
  if (shape.join() === sig.join()) return 1;
  if (shape.length === sig.length + 1 && shape.slice(1).join() === sig.join()) return shape[0];
  throw sdk.UdfError.badParam(`masks: expected a stack (M, ${sig.join(', ')}) or one mask (${sig.join(', ')}), found shape (${shape.join(', ')})`);
}

class Masks extends sdk.Udf {
  static description = sdk.description({
    name: 'masks',
    version: '0.1.0',
    summary: 'Dot product of each frame with a stack of masks (LiberTEM ApplyMasksUDF), JavaScript',
    params: [sdk.param.array('masks', 'a stack of masks (M, *sig) or one mask (*sig)')],
    hostArrays: xp,
  });

  static resultBuffers(params, dataset) {
    const dtype = sdk.resultType(dataset.inputDtype, params.array('masks').dtype);
    return [sdk.buffer.nav('intensity', dtype, [count(params, dataset)])];
  }

  constructor(ctx) {
    super(ctx);
    // Made in the constructor: these live for the partition.
    this.count = count(ctx.params, ctx.dataset);
    const masks = ctx.params.array('masks');
    this.dtype = sdk.resultType(ctx.dataset.inputDtype, masks.dtype);
    this.masks = masks.reshape([this.count, ...ctx.dataset.sigShape]).astype(this.dtype);
    this.bySlice = new Map();
  }

  /** The masks under the tile's signal slice as a (pixels, M) matrix, once per slice
   * (kept past the tile's call). */
  matrix(tile) {
    let matrix = this.bySlice.get(tile.schemeIndex);
    if (matrix === undefined) {
      const part = tile.sigPart(this.masks); // (M, ...slice)
      matrix = part.reshape([this.count, -1]).T.copy().keep();
      this.bySlice.set(tile.schemeIndex, matrix);
    }
    return matrix;
  }

  processTile(tile, results) {
    const flat = tile.data.reshape([tile.frames, -1]);
    results.get('intensity').iadd(flat.matmul(this.matrix(tile)));
  }
}

export const udf = sdk.exportUdf(Masks);
