// `{{name}}`: the mean of each frame, one value per scan position.
//
// Buffer `mean`: kind nav, float32, mean[n] = sum over y, x of F_n[y, x] / (frame pixels).
// Frame method: each call sees one whole frame; nav buffers are merged by the host. Started
// from `udf-host new --template frame-map`; src/udf-sdk.js documents the SDK.
import * as sdk from './udf-sdk.js';

{{float32_input}}
class {{Type}} extends sdk.Udf {
  static description = sdk.description({
    name: '{{name}}',
    version: '0.1.0',
    summary: 'Mean of each frame',
    methods: ['frame'],
  });

  static resultBuffers(params, dataset) {
    float32Input(dataset);
    return [sdk.buffer.nav('mean', 'float32')];
  }

  processFrame(frame, results) {
    const pixels = frame.flat();
    let sum = 0;
    for (let i = 0; i < pixels.length; i++) sum += pixels[i];
    results.get('mean').set([0], sum / pixels.length); // this frame's entry: shape (1,)
  }
}

export const udf = sdk.exportUdf({{Type}});
