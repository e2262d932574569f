// `{{name}}`: the mean of each frame, one value per scan position.
//
// Buffer `mean`: kind nav, float32, mean[n] = sum over y, x of F_n[y, x] / (frame pixels).
// Frame method: each call sees one whole frame; nav buffers are merged by the host. With
// `hostArrays: xp` the frame and the buffers are `xp` arrays that live in the host
// (src/xp.js: NumPy's names): `xp.mean` runs at the host's speed. Started from
// `udf-host new --template frame-map`; src/udf-sdk.js documents the SDK.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

{{float32_input}}
class {{Type}} extends sdk.Udf {
  static description = sdk.description({
    name: '{{name}}',
    version: '0.1.0',
    summary: 'Mean of each frame',
    methods: ['frame'],
    hostArrays: xp,
  });

  static resultBuffers(params, dataset) {
    float32Input(dataset);
    return [sdk.buffer.nav('mean', 'float32')];
  }

  processFrame(frame, results) {
    results.get('mean').set(xp.mean(frame.data)); // this frame's entry: shape (1,)
  }
}

export const udf = sdk.exportUdf({{Type}});
