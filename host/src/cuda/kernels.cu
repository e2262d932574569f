// The CUDA kernels of udf-host's GPU built-ins (host/src/cuda/, docs/gpu.md), compiled at
// run time with NVRTC. Templates over the tile's element type S (stored integers are
// converted here, on the GPU) and the float type F the built-in computes in. The host
// appends the extern "C" entry points `<kernel>_<S>_<F>` for the pairs a run needs: the
// INSTANTIATE(S, F) macro is written from each kernel's argument declaration in
// host/src/cuda/kernels.rs, the same declaration its Rust launch is made from.
//
// A tile chunk is `frames` consecutive frames of one signal slice, `slice_len` pixels
// each, C order. Pixel i of the slice is pixel `starts[i / run_len] + i % run_len` of the
// frame (the slice's runs, udf::SliceRuns; a full frame is one run).
//
// Numbers follow the CPU built-ins (host/src/builtins/): sums accumulate in double (more
// accurate than the CPU's float32 lanes; float32 results agree to rtol 1e-5), mask products
// in F like the CPU's, stddev is the CPU's block-and-merge algorithm operation for operation
// (explicit _rn intrinsics: no FMA contraction), computed masks evaluate the CPU's
// double-precision inequalities the same way, so no boundary pixel flips.
//
// Every kernel is launched with blockDim.x == 256 (THREADS).

typedef unsigned char u8;
typedef unsigned short u16;
typedef unsigned int u32;
typedef signed char i8;
typedef short i16;
typedef int i32;
typedef float f32;
typedef double f64;

#define THREADS 256
#define WARPS (THREADS / 32)
// stddev reduces blocks of this many frames, merged pairwise (builtins/stddev.rs's
// BLOCK_FRAMES): the same blocks give the same numbers.
#define BLOCK_FRAMES 32

__device__ __forceinline__ unsigned int frame_pos(unsigned int i, const unsigned int* __restrict__ starts,
                                                  unsigned int run_len) {
    return starts[i / run_len] + i % run_len;
}

// Sum of v over the block; the total is valid in thread 0. Every thread must call it.
__device__ __forceinline__ double block_sum(double v) {
    __shared__ double warp_sums[WARPS];
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    __syncthreads();  // warp_sums may still be read by a previous call
    if (lane == 0) warp_sums[warp] = v;
    __syncthreads();
    v = (warp == 0 && lane < WARPS) ? warp_sums[lane] : 0.0;
    if (warp == 0)
        for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    return v;
}

// sum: acc[pos(i)] += Σ_f tile[f, i], frame-sized double accumulator. Grid: x over pixels,
// y over groups of `group_frames` frames (added atomically when there are several).
template <typename S, typename F>
__device__ void sum_impl(const S* __restrict__ tile, unsigned int frames, unsigned int slice_len,
                         const unsigned int* __restrict__ starts, unsigned int run_len, unsigned int group_frames,
                         double* __restrict__ acc) {
    const unsigned int i = blockIdx.x * THREADS + threadIdx.x;
    const unsigned int f0 = blockIdx.y * group_frames;
    if (i >= slice_len || f0 >= frames) return;
    const unsigned int f1 = min(frames, f0 + group_frames);
    const size_t stride = slice_len;
    const S* p = tile + (size_t)f0 * stride + i;
    double s0 = 0.0, s1 = 0.0, s2 = 0.0, s3 = 0.0;
    unsigned int f = f0;
    for (; f + 4 <= f1; f += 4, p += 4 * stride) {
        s0 += (double)(F)p[0];
        s1 += (double)(F)p[stride];
        s2 += (double)(F)p[2 * stride];
        s3 += (double)(F)p[3 * stride];
    }
    for (; f < f1; ++f, p += stride) s0 += (double)(F)p[0];
    const double s = (s0 + s1) + (s2 + s3);
    const unsigned int pos = frame_pos(i, starts, run_len);
    if (gridDim.y == 1)
        acc[pos] += s;
    else
        atomicAdd(&acc[pos], s);
}

// sumsig: acc[row0 + f] += Σ_i tile[f, i]. Grid: x splits each frame's pixels into
// gridDim.x ranges, y over frames (grid-stride: more frames than 65535 are fine).
template <typename S, typename F>
__device__ void sumsig_impl(const S* __restrict__ tile, unsigned int frames, unsigned int slice_len,
                            unsigned int row0, double* __restrict__ acc) {
    const unsigned int per_block = (slice_len + gridDim.x - 1) / gridDim.x;
    const unsigned int begin = blockIdx.x * per_block;
    const unsigned int end = min(slice_len, begin + per_block);
    for (unsigned int f = blockIdx.y; f < frames; f += gridDim.y) {
        const S* frame = tile + (size_t)f * slice_len;
        double s = 0.0;
        for (unsigned int i = begin + threadIdx.x; i < end; i += THREADS) s += (double)(F)frame[i];
        s = block_sum(s);
        if (threadIdx.x == 0) atomicAdd(&acc[row0 + f], s);
    }
}

// stddev: per pixel, the state (n0 frames: sum, varsum) absorbs this chunk's frames in
// blocks of BLOCK_FRAMES, each reduced to (n, S, V) with two passes and merged pairwise:
// V = V0 + (V1 + n0·n1/(n0 + n1) · (S1/n1 − S0/n0)²), exactly as builtins/stddev.rs.
template <typename S>
__device__ void stddev_impl(const S* __restrict__ tile, unsigned int frames, unsigned int slice_len,
                            const unsigned int* __restrict__ starts, unsigned int run_len, unsigned long long n0,
                            double* __restrict__ sum, double* __restrict__ varsum) {
    const unsigned int i = blockIdx.x * THREADS + threadIdx.x;
    if (i >= slice_len) return;
    const unsigned int pos = frame_pos(i, starts, run_len);
    const size_t stride = slice_len;
    double s0 = sum[pos], v0 = varsum[pos];
    unsigned long long n = n0;
    for (unsigned int b = 0; b < frames; b += BLOCK_FRAMES) {
        const unsigned int nb = min((unsigned int)BLOCK_FRAMES, frames - b);
        const S* p = tile + (size_t)b * stride + i;
        double s1 = 0.0;
        for (unsigned int f = 0; f < nb; ++f) s1 = __dadd_rn(s1, (double)p[f * stride]);
        const double mean = __dmul_rn(s1, __ddiv_rn(1.0, (double)nb));
        double v1 = 0.0;
        for (unsigned int f = 0; f < nb; ++f) {
            const double d = __dsub_rn((double)p[f * stride], mean);
            v1 = __dadd_rn(v1, __dmul_rn(d, d));
        }
        if (n == 0) {
            s0 = s1;
            v0 = v1;
        } else {
            const double n0f = (double)n, n1f = (double)nb;
            const double weight = __ddiv_rn(__dmul_rn(n0f, n1f), __dadd_rn(n0f, n1f));
            const double r0 = __ddiv_rn(1.0, n0f), r1 = __ddiv_rn(1.0, n1f);
            const double delta = __dsub_rn(__dmul_rn(s1, r1), __dmul_rn(s0, r0));
            s0 = __dadd_rn(s0, s1);
            v0 = __dadd_rn(v0, __dadd_rn(v1, __dmul_rn(weight, __dmul_rn(delta, delta))));
        }
        n += nb;
    }
    sum[pos] = s0;
    varsum[pos] = v0;
}

// The block's FB x MB partial products summed over the block and added to
// out[(row0 + f) * width + m0 + m] for the nf frames and mb masks that exist.
template <typename R, int FB, int MB>
__device__ __forceinline__ void add_products(R (&acc)[FB][MB], unsigned int nf, unsigned int mb,
                                             double* __restrict__ out, unsigned int row0, unsigned int width,
                                             unsigned int m0) {
    __shared__ R partial[WARPS * FB * MB];
    const unsigned int lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
#pragma unroll
    for (int f = 0; f < FB; ++f)
#pragma unroll
        for (int m = 0; m < MB; ++m) {
            R v = acc[f][m];
            for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
            if (lane == 0) partial[warp * FB * MB + f * MB + m] = v;
        }
    __syncthreads();
    if (threadIdx.x < FB * MB) {
        const unsigned int f = threadIdx.x / MB, m = threadIdx.x % MB;
        R v = 0;
        for (int w = 0; w < WARPS; ++w) v += partial[w * FB * MB + threadIdx.x];
        if (f < nf && m < mb) atomicAdd(&out[(size_t)(row0 + f) * width + m0 + m], (double)v);
    }
    __syncthreads();  // partial is reused by the next frame group
}

// masks: out[row0 + f, m0 + m] += Σ_i (R)tile[f, i] · masks[m0 + m, i] for up to MB masks
// at once, FB frames per block so that each mask value read serves FB frames. masks is
// (m_count, slice_len), cut to the slice. skip_zero: leave out zero mask entries (a
// sparse mask's product: NaN · 0 does not spoil it). Grid: x splits the pixels, y over
// groups of FB frames (grid-stride).
template <typename S, typename R, int FB, int MB>
__device__ void masks_impl(const S* __restrict__ tile, unsigned int frames, unsigned int slice_len,
                           const R* __restrict__ masks, unsigned int m_count, unsigned int m0, int skip_zero,
                           double* __restrict__ out, unsigned int row0, unsigned int width) {
    const unsigned int mb = min((unsigned int)MB, m_count - m0);
    const size_t stride = slice_len;
    for (unsigned int g = blockIdx.y; g * FB < frames; g += gridDim.y) {
        const unsigned int f0 = g * FB;
        const unsigned int nf = min((unsigned int)FB, frames - f0);
        R acc[FB][MB];
#pragma unroll
        for (int f = 0; f < FB; ++f)
#pragma unroll
            for (int m = 0; m < MB; ++m) acc[f][m] = 0;
        for (unsigned int i = blockIdx.x * THREADS + threadIdx.x; i < slice_len; i += gridDim.x * THREADS) {
            R x[FB];
#pragma unroll
            for (int f = 0; f < FB; ++f) x[f] = (unsigned int)f < nf ? (R)tile[(f0 + f) * stride + i] : (R)0;
#pragma unroll
            for (int m = 0; m < MB; ++m) {
                if ((unsigned int)m < mb) {
                    const R w = masks[(size_t)(m0 + m) * stride + i];
                    if (skip_zero && w == (R)0) continue;
#pragma unroll
                    for (int f = 0; f < FB; ++f) acc[f][m] += x[f] * w;
                }
            }
        }
        add_products<R, FB, MB>(acc, nf, mb, out, row0 + f0, width, m0);
    }
}

// Computed masks (disk, ring, point, com): inside = ri2 < (y − cy)² + (x − cx)² ≤ ro2,
// evaluated in double like the CPU's mask builders; M = 1 (inside) or, WEIGHTED, 3
// (inside, y · inside, x · inside: CoM). Frames are 2-D of width sx.
template <typename S, typename R, int FB, bool WEIGHTED>
__device__ void radial_impl(const S* __restrict__ tile, unsigned int frames, unsigned int slice_len,
                            const unsigned int* __restrict__ starts, unsigned int run_len, unsigned int sx, double cy,
                            double cx, double ri2, double ro2, int skip_zero, double* __restrict__ out,
                            unsigned int row0) {
    const int MB = WEIGHTED ? 3 : 1;
    const size_t stride = slice_len;
    for (unsigned int g = blockIdx.y; g * FB < frames; g += gridDim.y) {
        const unsigned int f0 = g * FB;
        const unsigned int nf = min((unsigned int)FB, frames - f0);
        R acc[FB][MB];
#pragma unroll
        for (int f = 0; f < FB; ++f)
#pragma unroll
            for (int m = 0; m < MB; ++m) acc[f][m] = 0;
        for (unsigned int i = blockIdx.x * THREADS + threadIdx.x; i < slice_len; i += gridDim.x * THREADS) {
            const unsigned int pos = frame_pos(i, starts, run_len);
            const unsigned int y = pos / sx, x = pos % sx;
            const double dy = __dsub_rn((double)y, cy), dx = __dsub_rn((double)x, cx);
            const double d2 = __dadd_rn(__dmul_rn(dy, dy), __dmul_rn(dx, dx));
            const bool inside = ri2 < d2 && d2 <= ro2;
            if (skip_zero && !inside) continue;
            const R in = inside ? (R)1 : (R)0;
            R w[MB];
            w[0] = in;
            if (WEIGHTED) {
                w[1 % MB] = (R)(float)y * in;
                w[2 % MB] = (R)(float)x * in;
            }
#pragma unroll
            for (int f = 0; f < FB; ++f) {
                const R v = (unsigned int)f < nf ? (R)tile[(f0 + f) * stride + i] : (R)0;
#pragma unroll
                for (int m = 0; m < MB; ++m) acc[f][m] += v * w[m];
            }
        }
        add_products<R, FB, MB>(acc, nf, MB, out, row0 + f0, MB, 0);
    }
}

// For the cuBLAS product of many float32 masks: the chunk converted to float32.
template <typename S>
__device__ void to_f32_impl(const S* __restrict__ in, unsigned long long n, float* __restrict__ out) {
    for (unsigned long long i = blockIdx.x * (unsigned long long)THREADS + threadIdx.x; i < n;
         i += (unsigned long long)gridDim.x * THREADS)
        out[i] = (float)in[i];
}
