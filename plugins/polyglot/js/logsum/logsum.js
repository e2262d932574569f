// `logsum`: the sum of log-scaled frames (LiberTEM's LogsumUDF), in JavaScript with host
// arrays.
//
// Buffer `logsum`: kind sig, float32, logsum[y, x] = sum_n ln(F_n[y, x] - min(F_n) + 1).
// Frame method (the minimum is over the whole frame); merged by adding.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

class Logsum extends sdk.Udf {
  static description = sdk.description({
    name: 'logsum',
    version: '0.1.0',
    summary: 'Sum of log-scaled frames (LiberTEM LogsumUDF), JavaScript',
    methods: ['frame'],
    customMerge: true,
    hostArrays: xp,
  });

  static resultBuffers() {
    return [sdk.buffer.sig('logsum', 'float32')];
  }

  processFrame(frame, results) {
    if (sdk.isComplex(frame.dtype)) throw sdk.UdfError.invalidData('logsum needs real input');
    const data = frame.data;
    results.get('logsum').iadd(xp.log(data.sub(xp.min(data)).add(1)));
  }

  static merge(ctx, dest, src) {
    dest.get('logsum').iadd(src.get('logsum'));
  }
}

export const udf = sdk.exportUdf(Logsum);
