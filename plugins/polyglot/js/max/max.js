// `max`: the maximum of every pixel over all frames (LiberTEM's MaxUDF), in JavaScript
// with host arrays, the buffer declared with its merge rule: no resultBuffers, preprocess
// or merge here.
//
// Buffer `maxbuf` (kind sig, input dtype): maxbuf[y, x] = max_n F_n[y, x] (NaN wins, as
// np.maximum); -inf where no frame was processed.
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

class Max extends sdk.Udf {
  static description = sdk.description({ name: 'max', version: '0.1.0', summary: 'Maximum of all frames (LiberTEM MaxUDF), JavaScript', hostArrays: xp });
  static buffers = [sdk.buffer.sig('maxbuf', sdk.INPUT, [], 'normal', 'max')];

  processTile(tile, results) {
    const maxbuf = results.get('maxbuf');
    maxbuf.set(xp.maximum(maxbuf, xp.max(tile.data, { axis: 0 })));
  }
}

export const udf = sdk.exportUdf(Max);
