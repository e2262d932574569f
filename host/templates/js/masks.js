// `{{name}}`: the dot product of each frame with each mask of a stack — virtual detectors
// (LiberTEM's ApplyMasksUDF, dense masks).
//
// Param `masks`: an array (M, ...frame shape) of any real dtype. Buffer `intensity`: kind
// nav, extra shape (M,), float32, intensity[n, m] = sum over y, x of F_n[y, x] * mask_m[y, x].
// Frame method; nav buffers are merged by the host. With `hostArrays: xp` the frame, the
// masks and the buffers are `xp` arrays that live in the host (src/xp.js: NumPy's names):
// one matrix product per frame at the host's speed. Started from
// `udf-host new --template masks`; src/udf-sdk.js documents the SDK.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

{{float32_input}}
// The number of masks of the `masks` param, checked against the frame shape.
function maskCount(params, dataset) {
  const masks = params.array('masks');
  const [shape, frame] = [masks.shape, dataset.sigShape];
  if (shape.length !== frame.length + 1 || frame.some((n, a) => shape[a + 1] !== n) || !shape[0]) {
    throw sdk.UdfError.badParam(
      `masks must be a stack of at least one mask of the frame shape, (M, ${frame}), found the shape (${shape})`,
    );
  }
  if (sdk.isComplex(masks.dtype)) throw sdk.UdfError.badParam(`masks must be real, found ${masks.dtype}`);
  return shape[0];
}

class {{Type}} extends sdk.Udf {
  static description = sdk.description({
    name: '{{name}}',
    version: '0.1.0',
    summary: 'Dot products of each frame with a mask stack',
    params: [sdk.param.array('masks', 'mask stack (M, *frame shape)')],
    methods: ['frame'],
    hostArrays: xp,
  });

  static resultBuffers(params, dataset) {
    float32Input(dataset);
    return [sdk.buffer.nav('intensity', 'float32', [maskCount(params, dataset)])];
  }

  constructor(ctx) {
    super(ctx);
    // Task data, once per partition (made in the constructor, it lives for the partition):
    // the masks as a (pixels, M) matrix in the host.
    const count = maskCount(ctx.params, ctx.dataset);
    const masks = ctx.params.array('masks').astype('float32');
    this.matrix = masks.reshape([count, -1]).T.copy();
  }

  processFrame(frame, results) {
    results.get('intensity').set(frame.data.reshape([-1]).matmul(this.matrix)); // this frame's M values
  }
}

export const udf = sdk.exportUdf({{Type}});
