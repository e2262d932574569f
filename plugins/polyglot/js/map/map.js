// `map`: the sum of every row of each frame, as a frame map (LiberTEM's
// `ctx.map(f=functools.partial(np.sum, axis=-1))`), in JavaScript with host arrays.
//
// Buffer `result` (kind nav, the frame's dtype, extra shape (sig rows,)):
// result[n, y] = sum_x F_n[y, x].
import * as sdk from './udf-sdk.js';
import * as xp from './xp.js';

export const udf = sdk.exportMap('row-sums', (frame) => xp.sum(frame, { axis: -1 }), { hostArrays: xp });
