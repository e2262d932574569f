// `logsum`: the sum of log-scaled frames (LiberTEM's LogsumUDF), in JavaScript.
//
// Buffer `logsum`: kind sig, float32, logsum[y, x] = sum_n ln(F_n[y, x] - min(F_n) + 1).
// Frame method; merged by adding.
import * as sdk from './udf-sdk.js';

class Logsum extends sdk.Udf {
  static description = sdk.description({
    name: 'logsum',
    version: '0.1.0',
    summary: 'Sum of log-scaled frames (LiberTEM LogsumUDF), JavaScript',
    methods: ['frame'],
    customMerge: true,
  });

  static resultBuffers() {
    return [sdk.buffer.sig('logsum', 'float32')];
  }

  processFrame(frame, results) {
    if (sdk.isComplex(frame.dtype)) throw sdk.UdfError.invalidData('logsum needs real input');
    const data = frame.flat();
    const acc = results.get('logsum').flat(); // the whole frame
    let min = Infinity;
    for (let i = 0; i < data.length; i++) if (Number(data[i]) < min) min = Number(data[i]);
    for (let i = 0; i < data.length; i++) acc[i] += Math.log(Number(data[i]) - min + 1);
  }

  static merge(ctx, dest, src) {
    sdk.iadd(dest.get('logsum'), src.get('logsum'));
  }
}

export const udf = sdk.exportUdf(Logsum);
