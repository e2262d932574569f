//! Register-blocked kernels for products with a few `float32` columns on x86-64 with
//! AVX2 and FMA, also with AVX-512 (checked at run time; the functions
//! return `false` where they cannot run, and the caller uses the portable matrix product
//! instead): the dense-masks
//! kernel of the mask built-ins ([`masks_product`]) and its twin for host arrays'
//! `matmul` against a `(pixels, M)` matrix ([`matrix_product`]).
//!
//! [`masks_product`]: `out (frames × M) += data (frames × k) · masksᵀ` is computed in
//! blocks of [`FRAMES`] frames × [`MASKS`] masks × [`PIXELS`] pixels: twelve AVX
//! registers hold the dot products of three frames with four masks, eight pixels at a
//! time, and each step loads three data vectors and four mask vectors for twelve fused
//! multiply-adds. The three frames' pixel block (48 KiB) stays in L1/L2 while every
//! group of four masks passes over it, and the masks' pixel block (256 KiB for 16 masks)
//! stays in L2 while the frames stream past: every data element is read from memory
//! once. Long pixel blocks keep the hardware prefetchers streaming (one core, 16 masks,
//! data from memory: 11.5 GMAC/s with 512 pixels, 13.0 with 1024, 13.9 with 4096,
//! against 17.2 with all data in L1 and 18.6 for FMAs alone).
//!
//! [`matrix_product`]: `out (frames × M) += data (frames × k) · b (k × M)`, `b`'s rows
//! contiguous (a C-order `(pixels, M)` matrix: what `tile @ masks` gets from a plugin
//! that cut its masks to `(pixels, M)`, and the mask built-ins' masks, transposed once
//! per partition: [`rows_kernel_for`]): the blocking turned around. A group of up to
//! [`GROUP`] frames' pixel block is converted to `f32` into a scratch block whose rows
//! are a constant distance apart (read in place where the tile is `float32`); register
//! blocks hold rows × one or two vectors of columns (AVX-512: 16 frames × 16 columns or
//! 8 × 32; AVX2: 12 × 8 or 6 × 16), and each pixel loads the vectors of `b`'s row and
//! broadcasts one value of each frame, one fused multiply-add per vector and frame.
//! While a group computes, the next group's rows are prefetched, one cache line per
//! pixel step, so that the next conversion reads from cache: without it the conversion
//! waited on memory for a third of the time. Columns past the last full vector are
//! read and written with masked loads and stores. The same code runs with AVX-512
//! where the CPU has it (twice the columns per instruction) and with AVX2 elsewhere.
//! One core, 16 masks, uint16 frames from memory (this machine's Zen 5, 2026-11-27,
//! docs/benchmarks.md "The product kernel with AVX-512 and prefetching"): 34-38 GMAC/s
//! with the AVX2 kernel before, 49-52 with AVX2 and 73-79 with AVX-512 now.
//!
//! [`masks_product`] with one to four masks (a virtual detector's one mask, the centre of
//! mass's three) on a CPU with AVX-512 is a kernel of its own (`few`): four frames'
//! values loaded 16 at a time and converted in registers, each mask vector feeding four
//! fused multiply-adds. With so few masks the conversion through a scratch block cost
//! about as much as the product: `disk`, `ring` and `com` on uint16 ran at 75 % of
//! `sum`'s speed, now at `sum`'s (docs/benchmarks.md "The mask built-ins").
//!
//! Stored integer tiles (read unconverted, [`Udf::converts_on_read`]) are otherwise
//! converted one block of frames × [`PIXELS`] at a time into a scratch block in cache, so
//! the conversion costs one pass over cached data instead of a copied tile.
//!
//! [`Udf::converts_on_read`]: crate::udf::Udf::converts_on_read

/// Frames per register block.
const FRAMES: usize = 3;
/// Masks per register block.
const MASKS: usize = 4;
/// Pixels per cache block.
const PIXELS: usize = 4096;

/// Tile elements the kernel reads: `f32` in place, integers converted into a scratch
/// block.
pub trait Pixel: Copy + Send + Sync {
    /// `src` itself if it is `f32`.
    fn in_place(src: &[Self]) -> Option<&[f32]>;

    /// `dst[i] = src[i] as f32` (for `f32`, a copy).
    fn convert(src: &[Self], dst: &mut [f32]);

    /// The value as `f32` (`as`).
    fn to_f32(self) -> f32;

    /// Sixteen values from `p` as `f32` lanes (`as`), converted in registers. Called
    /// only where AVX-512F is enabled (it inlines there).
    ///
    /// # Safety
    /// `p` points to 16 readable values.
    #[cfg(target_arch = "x86_64")]
    unsafe fn load16(p: *const Self) -> std::arch::x86_64::__m512;

    /// `src` as `f32`: `src` itself, or its values cast into `scratch`.
    #[inline(always)]
    fn as_f32<'a>(src: &'a [Self], scratch: &'a mut [f32]) -> &'a [f32] {
        match Self::in_place(src) {
            Some(src) => src,
            None => {
                let scratch = &mut scratch[..src.len()];
                Self::convert(src, scratch);
                scratch
            }
        }
    }
}

impl Pixel for f32 {
    #[inline(always)]
    fn in_place(src: &[f32]) -> Option<&[f32]> {
        Some(src)
    }

    #[inline(always)]
    fn convert(src: &[f32], dst: &mut [f32]) {
        dst.copy_from_slice(src);
    }

    #[inline(always)]
    fn to_f32(self) -> f32 {
        self
    }

    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    unsafe fn load16(p: *const f32) -> std::arch::x86_64::__m512 {
        // SAFETY: the caller's.
        unsafe { std::arch::x86_64::_mm512_loadu_ps(p) }
    }
}

/// The stored integers a tile is read as unconverted (`with_fused_stored!`'s types),
/// converted as an `as` cast (what the executor's conversion gives).
macro_rules! integer_pixels {
    ($($t:ty => $load:ident),*) => {$(
        impl Pixel for $t {
            #[inline(always)]
            fn in_place(_: &[$t]) -> Option<&[f32]> {
                None
            }

            #[inline(always)]
            fn convert(src: &[$t], dst: &mut [f32]) {
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d = s as f32;
                }
            }

            #[inline(always)]
            fn to_f32(self) -> f32 {
                self as f32
            }

            #[cfg(target_arch = "x86_64")]
            #[inline(always)]
            unsafe fn load16(p: *const $t) -> std::arch::x86_64::__m512 {
                // SAFETY: the caller's.
                unsafe { widen::$load(p.cast()) }
            }
        }
    )*};
}
integer_pixels!(u8 => u8s, u16 => u16s, u32 => u32s, i8 => i8s, i16 => i16s, i32 => i32s);

/// Sixteen integers at `p` as `f32` lanes, for [`Pixel::load16`] (AVX-512F, inlined
/// where it is enabled; `u32` and `i32` round to nearest, as `as` does).
#[cfg(target_arch = "x86_64")]
mod widen {
    use std::arch::x86_64::*;

    #[inline(always)]
    pub(super) unsafe fn u8s(p: *const u8) -> __m512 {
        // SAFETY: the caller's (16 bytes at `p`).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128(p.cast()))) }
    }

    #[inline(always)]
    pub(super) unsafe fn i8s(p: *const u8) -> __m512 {
        // SAFETY: as in `u8s`.
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128(p.cast()))) }
    }

    #[inline(always)]
    pub(super) unsafe fn u16s(p: *const u8) -> __m512 {
        // SAFETY: the caller's (32 bytes at `p`).
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepu16_epi32(_mm256_loadu_si256(p.cast()))) }
    }

    #[inline(always)]
    pub(super) unsafe fn i16s(p: *const u8) -> __m512 {
        // SAFETY: as in `u16s`.
        unsafe { _mm512_cvtepi32_ps(_mm512_cvtepi16_epi32(_mm256_loadu_si256(p.cast()))) }
    }

    #[inline(always)]
    pub(super) unsafe fn u32s(p: *const u8) -> __m512 {
        // SAFETY: the caller's (64 bytes at `p`).
        unsafe { _mm512_cvtepu32_ps(_mm512_loadu_si512(p.cast())) }
    }

    #[inline(always)]
    pub(super) unsafe fn i32s(p: *const u8) -> __m512 {
        // SAFETY: as in `u32s`.
        unsafe { _mm512_cvtepi32_ps(_mm512_loadu_si512(p.cast())) }
    }
}

/// Whether this CPU runs the kernel.
pub fn available() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// `out[f, j] += Σ_p data[f, p] · masks[j, p]` for `frames = out.len() / m` frames of
/// `k` pixels and `m` masks of `k` pixels (C order). Returns `false`, touching nothing,
/// if the CPU lacks AVX2/FMA.
///
/// # Panics
/// If `data` or `masks` are shorter than the shapes say.
pub fn masks_product<S: Pixel>(data: &[S], k: usize, masks: &[f32], m: usize, out: &mut [f32]) -> bool {
    if m == 0 || k == 0 {
        return true;
    }
    let frames = out.len() / m;
    assert!(data.len() >= frames * k && masks.len() >= m * k, "mask product shapes");
    #[cfg(target_arch = "x86_64")]
    {
        if m <= few::MASKS && wide::avx512_available() {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { few::product(data, k, masks, m, &mut out[..frames * m]) };
            return true;
        }
        if available() {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            unsafe { x86::product(data, k, masks, m, &mut out[..frames * m]) };
            return true;
        }
    }
    false
}

/// Frames of [`matrix_product`] converted into its scratch block together (and the
/// most rows of a register block).
const GROUP: usize = 16;
/// Bytes of `b`'s block of rows that [`matrix_product`] keeps in L2 while the frames
/// pass (its pixel block is shorter than [`PIXELS`] for more than 16 columns).
const PANEL_BYTES: usize = 256 << 10;

/// `out[f, j] += Σ_p data[f * lda + p] · b[p * ldb + j]` for `frames = out.len() / m`
/// rows of `k` values, `lda` apart, and a `(k, m)` matrix `b` with contiguous rows
/// `ldb` apart (`lda`, `ldb` may be 0: broadcast rows). Returns `false`, touching
/// nothing, if the CPU lacks AVX2/FMA.
///
/// # Panics
/// If `data` or `b` are shorter than the shapes say.
pub fn matrix_product<S: Pixel>(
    data: &[S],
    lda: usize,
    k: usize,
    b: &[f32],
    ldb: usize,
    m: usize,
    out: &mut [f32],
) -> bool {
    let frames = out.len() / m.max(1);
    if m == 0 || k == 0 || frames == 0 {
        return true;
    }
    let data_span = (frames - 1).saturating_mul(lda).saturating_add(k);
    let b_span = (k - 1).saturating_mul(ldb).saturating_add(m);
    assert!(data.len() >= data_span && b.len() >= b_span, "matrix product shapes");
    #[cfg(target_arch = "x86_64")]
    {
        let out = &mut out[..frames * m];
        if wide::avx512_available() {
            // SAFETY: the CPU has AVX-512F (checked just above).
            unsafe { wide::avx512(data, lda, k, b, ldb, m, out) };
            return true;
        }
        if available() {
            // SAFETY: the CPU has AVX2 and FMA (checked just above).
            unsafe { wide::avx2(data, lda, k, b, ldb, m, out) };
            return true;
        }
    }
    false
}

/// Whether the mask built-ins run `m` masks over tiles of stored integers (`integers`)
/// or of float32 by [`matrix_product`] (their masks transposed once) rather than
/// [`masks_product`]: integer tiles from four masks on, float32 tiles from eight (one
/// broadcast frame value feeds a vector of masks; with fewer masks too many of its lanes
/// are empty, and a float32 tile's dot products read it in place: at four masks the two
/// kernels are even on float32, docs/benchmarks.md "The product kernel with AVX-512 and
/// prefetching").
pub fn rows_kernel_for(m: usize, integers: bool) -> bool {
    m >= if integers { 4 } else { 8 }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use super::{FRAMES, MASKS, PIXELS, Pixel};
    use std::arch::x86_64::*;

    /// The product, blocked as the module describes. Shapes are checked by the caller.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn product<S: Pixel>(data: &[S], k: usize, masks: &[f32], m: usize, out: &mut [f32]) {
        let frames = out.len() / m;
        let mut scratch = [[0f32; PIXELS]; FRAMES];
        for p0 in (0..k).step_by(PIXELS) {
            let len = PIXELS.min(k - p0);
            let mut f = 0;
            while f < frames {
                let group = FRAMES.min(frames - f);
                let mut rows: [&[f32]; FRAMES] = [&[]; FRAMES];
                for ((row, scratch), i) in rows.iter_mut().zip(scratch.iter_mut()).zip(0..group) {
                    let start = (f + i) * k + p0;
                    *row = S::as_f32(&data[start..start + len], scratch);
                }
                let mut j = 0;
                while j < m {
                    let count = MASKS.min(m - j);
                    let mask_rows: [&[f32]; MASKS] =
                        std::array::from_fn(|c| if c < count { &masks[(j + c) * k + p0..][..len] } else { &[] });
                    let out_rows = &mut out[f * m + j..];
                    match (group, count) {
                        (3, 4) => block::<3, 4>(&rows, &mask_rows, out_rows, m),
                        (3, 3) => block::<3, 3>(&rows, &mask_rows, out_rows, m),
                        (3, 2) => block::<3, 2>(&rows, &mask_rows, out_rows, m),
                        (3, _) => block::<3, 1>(&rows, &mask_rows, out_rows, m),
                        (2, 4) => block::<2, 4>(&rows, &mask_rows, out_rows, m),
                        (2, 3) => block::<2, 3>(&rows, &mask_rows, out_rows, m),
                        (2, 2) => block::<2, 2>(&rows, &mask_rows, out_rows, m),
                        (2, _) => block::<2, 1>(&rows, &mask_rows, out_rows, m),
                        (_, 4) => block::<1, 4>(&rows, &mask_rows, out_rows, m),
                        (_, 3) => block::<1, 3>(&rows, &mask_rows, out_rows, m),
                        (_, 2) => block::<1, 2>(&rows, &mask_rows, out_rows, m),
                        (_, _) => block::<1, 1>(&rows, &mask_rows, out_rows, m),
                    }
                    j += count;
                }
                f += group;
            }
        }
    }

    /// `out[i * stride + c] += rows[i] · masks[c]` for `i < F`, `c < M`; all rows and
    /// masks used have the same length.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn block<const F: usize, const M: usize>(
        rows: &[&[f32]; FRAMES],
        masks: &[&[f32]; MASKS],
        out: &mut [f32],
        stride: usize,
    ) {
        let len = rows[0].len();
        assert!(rows[..F].iter().chain(&masks[..M]).all(|r| r.len() == len), "ragged block");
        assert!(out.len() > (F - 1) * stride + M - 1, "block output");
        let vectors = len / 8;
        let mut acc = [[_mm256_setzero_ps(); M]; F];
        for v in 0..vectors {
            let p = v * 8;
            let mut d = [_mm256_setzero_ps(); F];
            for (d, row) in d.iter_mut().zip(rows) {
                // SAFETY: p + 8 <= len = row.len() (asserted above).
                *d = unsafe { _mm256_loadu_ps(row.as_ptr().add(p)) };
            }
            for (c, mask) in masks[..M].iter().enumerate() {
                // SAFETY: as above, for the mask row.
                let w = unsafe { _mm256_loadu_ps(mask.as_ptr().add(p)) };
                for (acc, &d) in acc.iter_mut().zip(&d) {
                    acc[c] = _mm256_fmadd_ps(d, w, acc[c]);
                }
            }
        }
        for (i, (acc, row)) in acc.iter().zip(rows).enumerate() {
            for (c, (&sum, mask)) in acc.iter().zip(masks).enumerate() {
                let tail: f32 = row[vectors * 8..].iter().zip(&mask[vectors * 8..]).map(|(a, b)| a * b).sum();
                out[i * stride + c] += horizontal_sum(sum) + tail;
            }
        }
    }

    /// The sum of the eight lanes.
    #[inline]
    #[target_feature(enable = "avx2,fma")]
    fn horizontal_sum(v: __m256) -> f32 {
        let s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps::<1>(v));
        let s = _mm_add_ps(s, _mm_movehl_ps(s, s));
        let s = _mm_add_ss(s, _mm_shuffle_ps::<1>(s, s));
        _mm_cvtss_f32(s)
    }
}

/// [`masks_product`] for a few masks (at most [`few::MASKS`]: a virtual detector's one,
/// the centre of mass's three) with AVX-512: a group of four frames' values loaded 16 at
/// a time and converted in registers (no scratch block: the AVX2 kernel stores each
/// converted block and reads it back, which for one to three masks costs about as much
/// as the product), each mask vector feeding four fused multiply-adds.
#[cfg(target_arch = "x86_64")]
mod few {
    use super::{PIXELS, Pixel};
    use std::arch::x86_64::*;

    /// The most masks this kernel takes.
    pub(super) const MASKS: usize = 4;
    /// Frames per register block.
    const FRAMES: usize = 4;

    /// The product, `m <= MASKS`. Shapes are checked by the caller.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn product<S: Pixel>(data: &[S], k: usize, masks: &[f32], m: usize, out: &mut [f32]) {
        match m {
            1 => blocks::<S, 1>(data, k, masks, out),
            2 => blocks::<S, 2>(data, k, masks, out),
            3 => blocks::<S, 3>(data, k, masks, out),
            _ => blocks::<S, 4>(data, k, masks, out),
        }
    }

    /// Over blocks of [`PIXELS`] (the masks' share stays in L1/L2 while the frames pass)
    /// and groups of [`FRAMES`] frames.
    #[inline(always)]
    fn blocks<S: Pixel, const M: usize>(data: &[S], k: usize, masks: &[f32], out: &mut [f32]) {
        let frames = out.len() / M;
        assert!(data.len() >= frames * k && masks.len() >= M * k, "mask product shapes");
        for p0 in (0..k).step_by(PIXELS) {
            let len = PIXELS.min(k - p0);
            let mut f = 0;
            while f < frames {
                let group = FRAMES.min(frames - f);
                let out = &mut out[f * M..(f + group) * M];
                let first = f * k + p0;
                match group {
                    4 => block::<S, 4, M>(data, first, k, masks, p0, len, out),
                    3 => block::<S, 3, M>(data, first, k, masks, p0, len, out),
                    2 => block::<S, 2, M>(data, first, k, masks, p0, len, out),
                    _ => block::<S, 1, M>(data, first, k, masks, p0, len, out),
                }
                f += group;
            }
        }
    }

    /// `out[i * M + c] += Σ_{p < len} data[first + i * k + p] · masks[c * k + p0 + p]`.
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn block<S: Pixel, const F: usize, const M: usize>(
        data: &[S],
        first: usize,
        k: usize,
        masks: &[f32],
        p0: usize,
        len: usize,
        out: &mut [f32],
    ) {
        // Every row and mask read below lies within these (the panics a caller's
        // mistake would meet, before any unchecked read).
        assert!(first + (F - 1) * k + len <= data.len() && (M - 1) * k + p0 + len <= masks.len(), "block");
        assert!(out.len() >= F * M, "block output");
        let rows: [*const S; F] = std::array::from_fn(|i| data[first + i * k..].as_ptr());
        let mask_rows: [*const f32; M] = std::array::from_fn(|c| masks[c * k + p0..].as_ptr());
        let vectors = len / 16;
        // SAFETY: AVX-512F is enabled where this inlines (`product`'s target feature).
        let zero = unsafe { _mm512_setzero_ps() };
        let mut acc = [[zero; M]; F];
        for v in 0..vectors {
            let p = v * 16;
            let mut x = [zero; F];
            for (x, row) in x.iter_mut().zip(&rows) {
                // SAFETY: as for `zero`; 16 values at `p < vectors * 16 <= len` (asserted).
                *x = unsafe { S::load16(row.add(p)) };
            }
            for (c, mask) in mask_rows.iter().enumerate() {
                // SAFETY: as for `x`.
                let w = unsafe { _mm512_loadu_ps(mask.add(p)) };
                for (acc, &x) in acc.iter_mut().zip(&x) {
                    // SAFETY: as for `zero`.
                    acc[c] = unsafe { _mm512_fmadd_ps(x, w, acc[c]) };
                }
            }
        }
        for (i, (acc, row)) in acc.iter().zip(&rows).enumerate() {
            for (c, (&sum, mask)) in acc.iter().zip(&mask_rows).enumerate() {
                // SAFETY: `p < len`, as asserted.
                let tail: f32 = (vectors * 16..len).map(|p| unsafe { (*row.add(p)).to_f32() * *mask.add(p) }).sum();
                // SAFETY: as for `zero`.
                out[i * M + c] += unsafe { _mm512_reduce_add_ps(sum) } + tail;
            }
        }
    }
}

/// [`matrix_product`]'s kernel, written once over [`wide::Lanes`] (a vector of `f32`
/// lanes: AVX-512's 16 or AVX2's 8) and compiled for each.
#[cfg(target_arch = "x86_64")]
mod wide {
    use super::{GROUP, PANEL_BYTES, PIXELS, Pixel};
    use std::arch::x86_64::*;
    use std::cell::Cell;

    /// Floats from one row of the scratch block to the next: a pixel block and one
    /// cache line, so that a group's rows do not all fall into the same L1 sets.
    const STRIDE: usize = PIXELS + 16;

    /// Whether this CPU runs the AVX-512 kernel.
    pub(super) fn avx512_available() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
    }

    /// [`super::matrix_product`] with AVX-512F.
    #[target_feature(enable = "avx512f")]
    pub(super) unsafe fn avx512<S: Pixel>(
        data: &[S],
        lda: usize,
        k: usize,
        b: &[f32],
        ldb: usize,
        m: usize,
        out: &mut [f32],
    ) {
        product::<Z, S>(data, lda, k, b, ldb, m, out);
    }

    /// [`super::matrix_product`] with AVX2 and FMA.
    #[target_feature(enable = "avx2,fma")]
    pub(super) unsafe fn avx2<S: Pixel>(
        data: &[S],
        lda: usize,
        k: usize,
        b: &[f32],
        ldb: usize,
        m: usize,
        out: &mut [f32],
    ) {
        product::<Y, S>(data, lda, k, b, ldb, m, out);
    }

    /// A vector of `f32` lanes and the operations the kernel needs. Implementors hold
    /// vectors of a target feature; their methods are called only from functions with
    /// that feature enabled (they inline there).
    pub(super) trait Lanes: Copy {
        /// Lanes per vector.
        const N: usize;
        /// The most rows of a register block: `[one vector, two vectors]` of columns,
        /// rows in the scratch block (`[0]`) or read in place (`[1]`, a pointer each).
        const ROWS: [[usize; 2]; 2];
        /// Which lanes a masked load or store touches.
        type Mask: Copy;
        /// The first `width` lanes (all of them from `N` on).
        fn mask(width: usize) -> Self::Mask;
        fn zero() -> Self;
        /// # Safety
        /// `p` points to `N` readable values.
        unsafe fn load(p: *const f32) -> Self;
        /// # Safety
        /// `p` points to as many readable values as `mask` has lanes.
        unsafe fn load_masked(mask: Self::Mask, p: *const f32) -> Self;
        /// # Safety
        /// `p` is readable.
        unsafe fn splat(p: *const f32) -> Self;
        fn mul_add(a: Self, b: Self, c: Self) -> Self;
        /// `p[i] += v[i]` for the lanes of `mask`.
        /// # Safety
        /// `p` points to as many writable values as `mask` has lanes.
        unsafe fn add_to(mask: Self::Mask, p: *mut f32, v: Self);
        /// [`panel_block`] compiled with this vector's target feature.
        /// # Safety
        /// The CPU has the feature.
        unsafe fn block<const F: usize, const V: usize, const IN_PLACE: bool>(
            rows: &Rows,
            ahead: &mut Ahead,
            b: &[f32],
            ldb: usize,
            out: &mut [f32],
            stride: usize,
            width: usize,
        );
    }

    /// [`Lanes::block`] for the vector type `$lanes`: [`panel_block`] compiled with
    /// `$feature`.
    macro_rules! block_with_feature {
        ($feature:literal, $lanes:ty) => {
            #[inline(always)]
            unsafe fn block<const F: usize, const V: usize, const IN_PLACE: bool>(
                rows: &Rows,
                ahead: &mut Ahead,
                b: &[f32],
                ldb: usize,
                out: &mut [f32],
                stride: usize,
                width: usize,
            ) {
                #[target_feature(enable = $feature)]
                fn block<const F: usize, const V: usize, const IN_PLACE: bool>(
                    rows: &Rows,
                    ahead: &mut Ahead,
                    b: &[f32],
                    ldb: usize,
                    out: &mut [f32],
                    stride: usize,
                    width: usize,
                ) {
                    panel_block::<$lanes, F, V, IN_PLACE>(rows, ahead, b, ldb, out, stride, width);
                }
                // SAFETY: the caller's (the CPU has `$feature`).
                unsafe { block::<F, V, IN_PLACE>(rows, ahead, b, ldb, out, stride, width) }
            }
        };
    }

    /// AVX-512's 16 lanes.
    #[derive(Clone, Copy)]
    struct Z(__m512);

    impl Lanes for Z {
        const N: usize = 16;
        const ROWS: [[usize; 2]; 2] = [[16, 8], [8, 6]];
        type Mask = __mmask16;

        #[inline(always)]
        fn mask(width: usize) -> __mmask16 {
            if width >= 16 { !0 } else { (1 << width) - 1 }
        }

        #[inline(always)]
        fn zero() -> Self {
            // SAFETY: called only where AVX-512F is enabled (the trait's contract).
            Z(unsafe { _mm512_setzero_ps() })
        }

        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: the caller's.
            Z(unsafe { _mm512_loadu_ps(p) })
        }

        #[inline(always)]
        unsafe fn load_masked(mask: __mmask16, p: *const f32) -> Self {
            // SAFETY: the caller's; lanes outside the mask are not read.
            Z(unsafe { _mm512_maskz_loadu_ps(mask, p) })
        }

        #[inline(always)]
        unsafe fn splat(p: *const f32) -> Self {
            // SAFETY: the caller's.
            Z(unsafe { _mm512_set1_ps(*p) })
        }

        #[inline(always)]
        fn mul_add(a: Self, b: Self, c: Self) -> Self {
            // SAFETY: as in `zero`.
            Z(unsafe { _mm512_fmadd_ps(a.0, b.0, c.0) })
        }

        #[inline(always)]
        unsafe fn add_to(mask: __mmask16, p: *mut f32, v: Self) {
            // SAFETY: the caller's; lanes outside the mask are neither read nor written.
            unsafe { _mm512_mask_storeu_ps(p, mask, _mm512_add_ps(_mm512_maskz_loadu_ps(mask, p), v.0)) }
        }

        block_with_feature!("avx512f", Z);
    }

    /// AVX2's 8 lanes.
    #[derive(Clone, Copy)]
    struct Y(__m256);

    impl Lanes for Y {
        const N: usize = 8;
        const ROWS: [[usize; 2]; 2] = [[12, 6], [8, 6]];
        type Mask = __m256i;

        #[inline(always)]
        fn mask(width: usize) -> __m256i {
            // SAFETY: called only where AVX2 is enabled (the trait's contract).
            unsafe {
                let lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                _mm256_cmpgt_epi32(_mm256_set1_epi32(width.min(8) as i32), lanes)
            }
        }

        #[inline(always)]
        fn zero() -> Self {
            // SAFETY: as in `mask`.
            Y(unsafe { _mm256_setzero_ps() })
        }

        #[inline(always)]
        unsafe fn load(p: *const f32) -> Self {
            // SAFETY: the caller's.
            Y(unsafe { _mm256_loadu_ps(p) })
        }

        #[inline(always)]
        unsafe fn load_masked(mask: __m256i, p: *const f32) -> Self {
            // SAFETY: the caller's; lanes outside the mask are not read.
            Y(unsafe { _mm256_maskload_ps(p, mask) })
        }

        #[inline(always)]
        unsafe fn splat(p: *const f32) -> Self {
            // SAFETY: the caller's.
            Y(unsafe { _mm256_broadcast_ss(&*p) })
        }

        #[inline(always)]
        fn mul_add(a: Self, b: Self, c: Self) -> Self {
            // SAFETY: as in `mask` (FMA is enabled with AVX2 here).
            Y(unsafe { _mm256_fmadd_ps(a.0, b.0, c.0) })
        }

        #[inline(always)]
        unsafe fn add_to(mask: __m256i, p: *mut f32, v: Self) {
            // SAFETY: the caller's; lanes outside the mask are neither read nor written.
            unsafe { _mm256_maskstore_ps(p, mask, _mm256_add_ps(_mm256_maskload_ps(p, mask), v.0)) }
        }

        block_with_feature!("avx2,fma", Y);
    }

    /// A group's pixel block as `f32`: row `i` at `base + i * stride`, `len` values each.
    pub(super) struct Rows {
        base: *const f32,
        stride: usize,
        len: usize,
    }

    /// The next group's rows, prefetched one cache line per pixel step while this
    /// group computes.
    pub(super) struct Ahead {
        rows: [*const u8; GROUP],
        count: usize,
        bytes: usize,
        row: usize,
        at: usize,
    }

    impl Ahead {
        /// The rows `first..first + count` of `data` (`lda` apart), from pixel `p0` on,
        /// `len` pixels each.
        fn new<S>(data: &[S], lda: usize, first: usize, count: usize, p0: usize, len: usize) -> Ahead {
            let mut rows = [std::ptr::null(); GROUP];
            for (row, i) in rows.iter_mut().zip(0..count) {
                *row = data[(first + i) * lda + p0..][..len].as_ptr().cast();
            }
            Ahead { rows, count: count.min(GROUP), bytes: len * size_of::<S>(), row: 0, at: 0 }
        }

        const NONE: Ahead = Ahead { rows: [std::ptr::null(); GROUP], count: 0, bytes: 0, row: 0, at: 0 };

        /// Prefetch the next cache line, if any is left.
        #[inline(always)]
        fn step(&mut self) {
            if self.row < self.count {
                // SAFETY: `at < bytes`, within the row (`new` sliced it); a prefetch
                // reads nothing the program sees.
                unsafe { _mm_prefetch::<_MM_HINT_T0>(self.rows[self.row].add(self.at).cast()) };
                self.at += 64;
                if self.at >= self.bytes {
                    self.at = 0;
                    self.row += 1;
                }
            }
        }
    }

    thread_local! {
        /// The scratch block of each thread (kept: a fresh zeroed one per call costs
        /// page faults).
        static SCRATCH: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
    }

    /// The product, blocked as the module describes. Shapes are checked by the caller.
    #[inline(always)]
    fn product<L: Lanes, S: Pixel>(data: &[S], lda: usize, k: usize, b: &[f32], ldb: usize, m: usize, out: &mut [f32]) {
        let frames = out.len() / m;
        let pixels = ((PANEL_BYTES / (m * 4)).clamp(256, PIXELS) / 8) * 8;
        let in_place = S::in_place(data).is_some();
        let mut scratch = SCRATCH.take();
        if !in_place && scratch.len() < GROUP * STRIDE {
            scratch = vec![0.0; GROUP * STRIDE];
        }
        for p0 in (0..k).step_by(pixels) {
            let len = pixels.min(k - p0);
            let mut f = 0;
            while f < frames {
                let group = GROUP.min(frames - f);
                let rows = match S::in_place(&data[f * lda + p0..]) {
                    Some(first) => Rows { base: first.as_ptr(), stride: lda, len },
                    None => {
                        for (row, i) in scratch.chunks_exact_mut(STRIDE).zip(0..group) {
                            let start = (f + i) * lda + p0;
                            S::convert(&data[start..start + len], &mut row[..len]);
                        }
                        Rows { base: scratch.as_ptr(), stride: STRIDE, len }
                    }
                };
                let mut ahead = match (f + group < frames, p0 + pixels < k) {
                    (true, _) => Ahead::new(data, lda, f + group, GROUP.min(frames - f - group), p0, len),
                    (false, true) => {
                        Ahead::new(data, lda, 0, GROUP.min(frames), p0 + pixels, pixels.min(k - p0 - pixels))
                    }
                    (false, false) => Ahead::NONE,
                };
                let out = &mut out[f * m..];
                let mut j = 0;
                while j < m {
                    let width = (m - j).min(2 * L::N);
                    let b = &b[p0 * ldb + j..];
                    let out = &mut out[j..];
                    match (width > L::N, in_place) {
                        (true, false) => panel::<L, 2, false>(group, &rows, &mut ahead, b, ldb, out, m, width),
                        (true, true) => panel::<L, 2, true>(group, &rows, &mut ahead, b, ldb, out, m, width),
                        (false, false) => panel::<L, 1, false>(group, &rows, &mut ahead, b, ldb, out, m, width),
                        (false, true) => panel::<L, 1, true>(group, &rows, &mut ahead, b, ldb, out, m, width),
                    }
                    j += width;
                }
                f += group;
            }
        }
        SCRATCH.set(scratch);
    }

    /// The `group` rows in register blocks of at most `L::ROWS` rows each (16, 12, 8,
    /// 6, 4, 3, 2 or 1).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn panel<L: Lanes, const V: usize, const IN_PLACE: bool>(
        group: usize,
        rows: &Rows,
        ahead: &mut Ahead,
        b: &[f32],
        ldb: usize,
        out: &mut [f32],
        stride: usize,
        width: usize,
    ) {
        let most = L::ROWS[usize::from(IN_PLACE)][V - 1];
        let mut first = 0;
        while first < group {
            let n = match most.min(group - first) {
                16.. => 16,
                12..=15 => 12,
                8..=11 => 8,
                6 | 7 => 6,
                4 | 5 => 4,
                n => n,
            };
            // SAFETY: row `first < group` of the group's rows.
            let rows = Rows { base: unsafe { rows.base.add(first * rows.stride) }, ..*rows };
            let out = &mut out[first * stride..];
            macro_rules! blocks {
                ($($f:literal)*) => {
                    match n {
                        // SAFETY: `L`'s target feature is enabled here (the kernel's
                        // entry points), so the CPU has it.
                        $($f => unsafe { L::block::<$f, V, IN_PLACE>(&rows, ahead, b, ldb, out, stride, width) },)*
                        _ => unreachable!("register blocks of 1 to 16 rows"),
                    }
                };
            }
            blocks!(16 12 8 6 4 3 2 1);
            first += n;
        }
    }

    /// `out[i * stride + c] += Σ_p row_i[p] · b[p * ldb + c]` for `i < F`, `c < width`
    /// (`L::N (V - 1) < width <= L::N V`); row `i` at `rows.base + i * stride` (the
    /// scratch block's [`STRIDE`] unless `IN_PLACE`: a constant, so one pointer serves
    /// all rows).
    #[inline(always)]
    #[allow(clippy::too_many_arguments)]
    fn panel_block<L: Lanes, const F: usize, const V: usize, const IN_PLACE: bool>(
        rows: &Rows,
        ahead: &mut Ahead,
        b: &[f32],
        ldb: usize,
        out: &mut [f32],
        stride: usize,
        width: usize,
    ) {
        let len = rows.len;
        let row_stride = if IN_PLACE { rows.stride } else { STRIDE };
        assert!(width > L::N * (V - 1) && width <= L::N * V, "panel width");
        assert!(len == 0 || b.len() >= (len - 1) * ldb + width, "panel rows");
        assert!(out.len() >= (F - 1) * stride + width, "block output");
        let last = L::mask(width - L::N * (V - 1));
        let full = width == L::N * V;
        let mut acc = [[L::zero(); V]; F];
        let bp = b.as_ptr();
        for p in 0..len {
            ahead.step();
            let mut w = [L::zero(); V];
            for (v, w) in w.iter_mut().enumerate() {
                // SAFETY: `p * ldb + L::N * v + (lanes read) <= (len - 1) * ldb + width
                // <= b.len()` (asserted): full vectors below `width`, the last one masked.
                *w = unsafe {
                    let at = bp.add(p * ldb + L::N * v);
                    if v + 1 < V || full { L::load(at) } else { L::load_masked(last, at) }
                };
            }
            for (i, acc) in acc.iter_mut().enumerate() {
                // SAFETY: row `i < F` of the rows (the caller's), pixel `p < len`.
                let x = unsafe { L::splat(rows.base.add(i * row_stride + p)) };
                for (acc, &w) in acc.iter_mut().zip(&w) {
                    *acc = L::mul_add(x, w, *acc);
                }
            }
        }
        for (i, acc) in acc.iter().enumerate() {
            for (v, &acc) in acc.iter().enumerate() {
                let mask = if v + 1 < V { L::mask(L::N) } else { last };
                // SAFETY: `i * stride + L::N * v + (lanes written) <= (F - 1) * stride +
                // width <= out.len()` (asserted).
                unsafe { L::add_to(mask, out.as_mut_ptr().add(i * stride + L::N * v), acc) };
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `masks_product`'s kernels — AVX2's and, for up to four masks, AVX-512's (where the
    /// CPU has them) — on every (frames, masks) remainder of their register blocks, pixels
    /// ragged at both the vector and the cache block, for every tile type they read
    /// (float32 in place, the integers converted), against plain `f64` dot products.
    #[test]
    fn blocked_products_equal_plain_dot_products() {
        type Kernel<S> = unsafe fn(&[S], usize, &[f32], usize, &mut [f32]);
        fn kernels<S: Pixel>(m: usize) -> Vec<(&'static str, Kernel<S>)> {
            let mut kernels: Vec<(&'static str, Kernel<S>)> = Vec::new();
            #[cfg(target_arch = "x86_64")]
            {
                if m <= few::MASKS && wide::avx512_available() {
                    kernels.push(("AVX-512", few::product::<S>));
                }
                if available() {
                    kernels.push(("AVX2", x86::product::<S>));
                }
            }
            kernels
        }
        fn check<S: Pixel + std::fmt::Debug>(value: impl Fn(usize) -> S) {
            for (frames, m) in [(7, 5), (3, 4), (1, 1), (2, 16), (8, 3), (6, 2), (9, 1)] {
                let k = PIXELS * 2 + 13;
                let data: Vec<S> = (0..frames * k).map(&value).collect();
                let masks: Vec<f32> = (0..m * k).map(|i| ((i * 13) % 11) as f32 / 4.0 - 1.0).collect();
                let mut by_kernel = Vec::new();
                for (name, kernel) in kernels::<S>(m) {
                    let mut out = vec![1.0; frames * m];
                    // SAFETY: `kernels` lists only those the CPU runs; the shapes are
                    // what `masks_product` checks.
                    unsafe { kernel(&data, k, &masks, m, &mut out) };
                    for f in 0..frames {
                        for j in 0..m {
                            let terms =
                                (0..k).map(|p| f64::from(data[f * k + p].to_f32()) * f64::from(masks[j * k + p]));
                            let expected: f64 = 1.0 + terms.clone().sum::<f64>();
                            let magnitude: f64 = 1.0 + terms.map(f64::abs).sum::<f64>();
                            let got = out[f * m + j];
                            let err = (f64::from(got) - expected).abs();
                            assert!(err <= 1e-6 * magnitude, "{name}, frame {f}, mask {j}: {got} vs {expected}");
                        }
                    }
                    by_kernel.push(out);
                }
                let mut public = vec![1.0; frames * m];
                assert_eq!(masks_product(&data, k, &masks, m, &mut public), !by_kernel.is_empty());
                if let Some(first) = by_kernel.first() {
                    assert_eq!(&public, first, "masks_product runs the first kernel the CPU has");
                }
            }
        }
        // Values past the signed range where the type has one: a sign-extending load shows.
        check(|i| ((i * 31) % 1000) as u16 * 61);
        check(|i| ((i * 31) % 1000) as f32 - 500.0);
        check(|i| ((i * 31) % 1000) as i16 - 500);
        check(|i| ((i * 31) % 251) as u8);
        check(|i| (((i * 31) % 251) as i16 - 120) as i8);
        check(|i| ((i * 31) % 100_000) as u32 + 4_000_000_000);
        check(|i| ((i * 31) % 100_000) as i32 - 50_000);
    }

    /// `matrix_product`'s kernels (AVX-512 where the CPU has it, and AVX2) on every
    /// remainder of the groups and register blocks — frames 1, 7 and 37 (16 + 16 + 4 +
    /// 1); columns 1 to 64, one or two vectors with masked tails (and 40 = 32 + 8, 64 with a
    /// shorter pixel block) — rows and `b`'s rows wider than the product, pixels ragged at
    /// the block, for uint16, int16 (negative) and float32 (read in place) tiles, and
    /// broadcast rows (`lda = 0`), against plain `f64` dot products.
    #[test]
    fn matrix_products_equal_plain_dot_products() {
        type Kernel<S> = unsafe fn(&[S], usize, usize, &[f32], usize, usize, &mut [f32]);
        fn kernels<S: Pixel>() -> Vec<(&'static str, Kernel<S>)> {
            let mut kernels: Vec<(&'static str, Kernel<S>)> = Vec::new();
            #[cfg(target_arch = "x86_64")]
            {
                if wide::avx512_available() {
                    kernels.push(("AVX-512", wide::avx512::<S>));
                }
                if available() {
                    kernels.push(("AVX2", wide::avx2::<S>));
                }
            }
            kernels
        }
        fn check<S: Pixel + std::fmt::Debug>(value: impl Fn(usize) -> S, to_f64: impl Fn(S) -> f64) {
            let k = PIXELS + 13;
            for (frames, lda) in [(1, k), (7, k + 3), (37, k + 3), (5, 0)] {
                let data: Vec<S> = (0..(frames - 1) * lda + k).map(&value).collect();
                for m in [1, 5, 16, 17, 33, 40, 64] {
                    let ldb = m + 2;
                    let b: Vec<f32> = (0..(k - 1) * ldb + m).map(|i| ((i * 13) % 11) as f32 / 4.0 - 1.0).collect();
                    let expected: Vec<(f64, f64)> = (0..frames * m)
                        .map(|o| {
                            let (f, j) = (o / m, o % m);
                            let terms = (0..k).map(|p| to_f64(data[f * lda + p]) * f64::from(b[p * ldb + j]));
                            (1.0 + terms.clone().sum::<f64>(), 1.0 + terms.map(f64::abs).sum::<f64>())
                        })
                        .collect();
                    for (name, kernel) in kernels::<S>() {
                        let mut out = vec![1.0f32; frames * m];
                        // SAFETY: `kernels` lists only those the CPU runs; the shapes
                        // are what `matrix_product` checks.
                        unsafe { kernel(&data, lda, k, &b, ldb, m, &mut out) };
                        for (o, (&got, &(want, magnitude))) in out.iter().zip(&expected).enumerate() {
                            let err = (f64::from(got) - want).abs();
                            assert!(
                                err <= 1e-6 * magnitude,
                                "{name}, {frames} frames {lda} apart, {m} columns, frame {}, column {}: {got} vs {want}",
                                o / m,
                                o % m,
                            );
                        }
                    }
                }
            }
        }
        check(|i| ((i * 31) % 1000) as u16, f64::from);
        check(|i| ((i * 31) % 1000) as i16 - 500, f64::from);
        check(|i| ((i * 31) % 1000) as f32 - 500.0, f64::from);
    }
}
