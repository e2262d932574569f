// `map`: the sum of every row of each frame, as a frame map (LiberTEM's
// `ctx.map(f=functools.partial(np.sum, axis=-1))`), in JavaScript.
//
// Buffer `result` (kind nav, float64, extra shape (sig rows,)): result[n, y] = sum_x F_n[y, x].
import * as sdk from './udf-sdk.js';

export const udf = sdk.exportMap('row-sums', (frame) => Array.from(frame.rows(), (row) => row.reduce((a, b) => a + b, 0)));
