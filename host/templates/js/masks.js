// `{{name}}`: the dot product of each frame with each mask of a stack — virtual detectors
// (LiberTEM's ApplyMasksUDF, dense masks).
//
// Param `masks`: an array (M, ...frame shape) of any real dtype. Buffer `intensity`: kind
// nav, extra shape (M,), float32, intensity[n, m] = sum over y, x of F_n[y, x] * mask_m[y, x].
// Frame method; nav buffers are merged by the host. Started from
// `udf-host new --template masks`; src/udf-sdk.js documents the SDK.
import * as sdk from './udf-sdk.js';

{{float32_input}}
// The number of masks of the `masks` param, checked against the frame shape.
function maskCount(params, dataset) {
  const masks = params.array('masks');
  const frame = dataset.sigShape;
  if (masks.shape.length !== frame.length + 1 || frame.some((n, a) => masks.shape[a + 1] !== n) || !masks.shape[0]) {
    throw sdk.UdfError.badParam(
      `masks must be a stack of at least one mask of the frame shape, (M, ${frame}), found the shape (${masks.shape})`,
    );
  }
  if (sdk.isComplex(masks.dtype)) throw sdk.UdfError.badParam(`masks must be real, found ${masks.dtype}`);
  return masks.shape[0];
}

class {{Type}} extends sdk.Udf {
  static description = sdk.description({
    name: '{{name}}',
    version: '0.1.0',
    summary: 'Dot products of each frame with a mask stack',
    params: [sdk.param.array('masks', 'mask stack (M, *frame shape)')],
    methods: ['frame'],
  });

  static resultBuffers(params, dataset) {
    float32Input(dataset);
    return [sdk.buffer.nav('intensity', 'float32', [maskCount(params, dataset)])];
  }

  constructor(ctx) {
    super(ctx);
    // Task data, once per partition: the masks as Float64Arrays.
    const count = maskCount(ctx.params, ctx.dataset);
    const values = Float64Array.from(ctx.params.array('masks').values(), Number);
    const n = values.length / count;
    this.masks = Array.from({ length: count }, (_, m) => values.subarray(m * n, (m + 1) * n));
  }

  processFrame(frame, results) {
    const pixels = frame.flat();
    const intensity = results.get('intensity'); // this frame's M values
    this.masks.forEach((mask, m) => {
      let dot = 0;
      for (let i = 0; i < pixels.length; i++) dot += pixels[i] * mask[i];
      intensity.set([m], dot);
    });
  }
}

export const udf = sdk.exportUdf({{Type}});
