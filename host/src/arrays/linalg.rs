//! Products: `matmul` (NumPy's rules: 1-d operands promoted and their axis removed, a
//! stack of matrices broadcast), `tensordot` and `vecdot`. A stack of masks against a tile — a
//! float32 `(frames, pixels) @ (pixels, M)` product with `M <= 64`, the tile float32 or
//! stored integers read unconverted — runs the mask built-ins' AVX2/FMA kernels
//! ([`super::simd`]); other float and complex products use matrixmultiply's kernels
//! through ndarray; integer products are plain loops in the integer type (wrapping).

use super::array::{Converting, Dense, HostArray, broadcast_shapes};
use super::element::{CastTo, Elem};
use super::elementwise::{CHECK_EVERY, Ctx, Operand, astype, binary, cast_dense, unary};
use super::error::{ArrayError, normalize_axes, normalize_axis};
use super::ops::{BinaryOp, ReduceOp, UnaryOp};
use super::reduce::{ReduceOptions, reduce};
use super::simd;
use crate::dtype::{DType, Kind, result_type};
use ndarray::{ArrayView2, ArrayViewMut2, Axis, Dimension, Ix2, linalg::general_mat_mul, s};

/// Multiply-adds between two checks for interruption in a product: large enough that
/// the kernels' packing of the right operand (once per block) costs little, small
/// enough (tens of milliseconds) that `--timeout` and Ctrl-C reach a long product.
const PRODUCT_BLOCK: usize = 64 * CHECK_EVERY;

/// `matmul(a, b)` (`a @ b`).
///
/// # Errors
/// Inner dimensions that differ, 0-d operands, stacks that do not broadcast, bool
/// operands, memory, interruption.
pub fn matmul(cx: &Ctx<'_>, a: &HostArray, b: &HostArray) -> Result<HostArray, ArrayError> {
    let op = "matmul";
    if let Some(product) = masks_matmul(cx, a, b)? {
        return Ok(HostArray::Dense(product));
    }
    if let HostArray::Converting(c) = a
        && c.stored.shape.len() == 2
        && b.ndim() == 2
        && b.dtype() == c.dtype
        && c.stored.shape[1] == b.shape()[0]
    {
        return converting_matmul(cx, c, b.dense(op)?).map(HostArray::Dense);
    }
    let (x, y) = (a.dense(op)?, b.dense(op)?);
    if x.shape.is_empty() || y.shape.is_empty() {
        return Err(ArrayError::shape(op, &[&x.shape, &y.shape], "matmul needs arrays of at least 1 dimension"));
    }
    let dtype = result_type(x.dtype, y.dtype);
    if dtype == DType::Bool {
        return Err(ArrayError::dtype(op, &[x.dtype, y.dtype], "needs numeric dtypes"));
    }
    // Promote 1-d operands to matrices.
    let xs: Vec<usize> = if x.shape.len() == 1 { vec![1, x.shape[0]] } else { x.shape.clone() };
    let ys: Vec<usize> = if y.shape.len() == 1 { vec![y.shape[0], 1] } else { y.shape.clone() };
    let (m, k) = (xs[xs.len() - 2], xs[xs.len() - 1]);
    let (k2, n) = (ys[ys.len() - 2], ys[ys.len() - 1]);
    if k != k2 {
        return Err(ArrayError::shape(
            op,
            &[&x.shape, &y.shape],
            format!("the last axis of the first ({k}) must equal the second-to-last of the second ({k2})"),
        ));
    }
    let batch = broadcast_shapes(op, &[&xs[..xs.len() - 2], &ys[..ys.len() - 2]])?;
    let mut out_shape = batch.clone();
    if x.shape.len() > 1 {
        out_shape.push(m);
    }
    if y.shape.len() > 1 {
        out_shape.push(n);
    }
    let xv = reshape_view(x, &xs).broadcast(op, &[batch.clone(), vec![m, k]].concat())?;
    let yv = reshape_view(y, &ys).broadcast(op, &[batch.clone(), vec![k, n]].concat())?;
    let xc = if xv.dtype == dtype { xv } else { cast_dense(cx, &xv, dtype, op)? };
    let yc = if yv.dtype == dtype { yv } else { cast_dense(cx, &yv, dtype, op)? };
    let out = Dense::alloc(cx.memory, op, dtype, &out_shape, true)?;
    if out.is_empty() {
        // No product to compute (the batch loop would still walk its indices).
        return Ok(HostArray::Dense(out));
    }
    {
        let (rx, ry) = (xc.storage.read(op)?, yc.storage.read(op)?);
        let mut w = out.storage.write(op)?;
        crate::with_dtype!(dtype, T => {
            let xa = xc.view_in::<T>(&rx, op)?;
            let ya = yc.view_in::<T>(&ry, op)?;
            let os: &mut [T] = bytemuck::cast_slice_mut(&mut w[..]);
            for (i, index) in ndarray::indices(batch.clone()).into_iter().enumerate() {
                cx.check(op)?;
                let (mut xi, mut yi) = (xa.view(), ya.view());
                for &b in index.slice() {
                    xi = xi.index_axis_move(Axis(0), b);
                    yi = yi.index_axis_move(Axis(0), b);
                }
                let xi = xi.into_dimensionality::<Ix2>().map_err(|e| ArrayError::value(op, e.to_string()))?;
                let yi = yi.into_dimensionality::<Ix2>().map_err(|e| ArrayError::value(op, e.to_string()))?;
                let o = &mut os[i * m * n..(i + 1) * m * n];
                let o = ArrayViewMut2::from_shape((m, n), o).map_err(|e| ArrayError::value(op, e.to_string()))?;
                accumulate_in_blocks(cx, op, xi, yi, o, PRODUCT_BLOCK)?;
            }
        }, return Err(ArrayError::dtype(op, &[dtype], "needs numeric dtypes")));
    }
    Ok(HostArray::Dense(out))
}

/// The most columns of a right operand that [`masks_matmul`] takes (a stack of masks);
/// wider products go to matrixmultiply.
const MASKS_AT_MOST: usize = 64;

/// `a @ b` for a 2-d float32 `a` (`Dense` with contiguous rows, or a `Converting` tile of
/// stored integers) and a float32 `(k, n)` matrix `b` with `n <= MASKS_AT_MOST`, with
/// [`simd`]'s kernels: `b` with contiguous rows (a C-order `(pixels, M)` matrix) by
/// [`simd::matrix_product`], `b` the transpose of a C-order `(M, pixels)` stack against
/// a C-order tile by the mask built-ins' [`simd::masks_product`]. `None` for any other
/// product, or where the CPU lacks AVX2/FMA.
fn masks_matmul(cx: &Ctx<'_>, a: &HostArray, b: &HostArray) -> Result<Option<Dense>, ArrayError> {
    let op = "matmul";
    let HostArray::Dense(y) = b else { return Ok(None) };
    if !simd::available()
        || a.ndim() != 2
        || y.shape.len() != 2
        || a.dtype() != DType::F32
        || y.dtype != DType::F32
        || a.shape()[1] != y.shape[0]
    {
        return Ok(None);
    }
    let (m, k, n) = (a.shape()[0], y.shape[0], y.shape[1]);
    // A chunk of rows between two checks for interruption is at least 6 rows of
    // `k * n` multiply-adds: longer rows go where the product is blocked along `k`.
    if m == 0 || k == 0 || n == 0 || n > MASKS_AT_MOST || k.saturating_mul(n) > PRODUCT_BLOCK {
        return Ok(None);
    }
    // The operands' layouts: `x`'s rows contiguous, `lda` apart; `y`'s rows contiguous
    // (`ldb` apart) or its columns (`y` the transpose of a C-order stack of masks).
    let x = match a {
        HostArray::Dense(x) => x,
        HostArray::Converting(c) if c.stored.is_c_contiguous() => &c.stored,
        HostArray::Converting(_) => return Ok(None),
    };
    let lda = match (x.strides[0], x.strides[1]) {
        (s, 1) if s >= 0 => s as usize,
        (s, _) if s >= 0 && k == 1 => s as usize,
        _ => return Ok(None),
    };
    let rows_of_y = match (y.strides[0], y.strides[1]) {
        (s, 1) if s >= 0 => Some(s as usize),
        (s, _) if s >= 0 && n == 1 => Some(s as usize),
        _ => None,
    };
    // The mask built-ins' layout (preferred: one mask is a dot product per frame).
    let masks_layout = y.strides[0] == 1 && (n == 1 || y.strides[1] == k as isize) && lda == k;
    if rows_of_y.is_none() && !masks_layout {
        return Ok(None);
    }
    let out = Dense::alloc(cx.memory, op, DType::F32, &[m, n], true)?;
    let done = {
        let (rx, ry) = (x.storage.read(op)?, y.storage.read(op)?);
        let mut w = out.storage.write(op)?;
        let os: &mut [f32] = bytemuck::cast_slice_mut(&mut w[..]);
        let y_span = if masks_layout {
            strided_span::<f32>(&ry, y.offset, n, k, k)
        } else {
            strided_span::<f32>(&ry, y.offset, k, rows_of_y.unwrap_or(0), n)
        };
        let Some(ys) = y_span else { return Ok(None) };
        // Frames per check for interruption: about `PRODUCT_BLOCK` multiply-adds.
        let rows = (PRODUCT_BLOCK / k.saturating_mul(n)).max(6);
        crate::dtype_dispatch!(x.dtype, S => {
            let Some(xs) = strided_span::<S>(&rx, x.offset, m, lda, k) else { return Ok(None) };
            let mut done = true;
            for (r, o) in (0..m).step_by(rows).zip(os.chunks_mut(rows * n)) {
                cx.check(op)?;
                let xr = &xs[r * lda..];
                done &= match rows_of_y {
                    Some(ldb) if !masks_layout => simd::matrix_product(xr, lda, k, ys, ldb, n, o),
                    _ => simd::masks_product(xr, k, ys, n, o),
                };
            }
            done
        }, return Ok(None); F32 => f32, U8 => u8, U16 => u16, U32 => u32, I8 => i8, I16 => i16, I32 => i32)
    };
    Ok(done.then_some(out))
}

/// The elements of `T` in `bytes` (a storage) that `lines` lines of `len` elements,
/// `stride` apart from element `offset` on, span; `None` if they are not all there or
/// `bytes` is not aligned for `T`.
fn strided_span<T: bytemuck::Pod>(
    bytes: &[u8],
    offset: usize,
    lines: usize,
    stride: usize,
    len: usize,
) -> Option<&[T]> {
    let whole = bytes.len() / size_of::<T>() * size_of::<T>();
    let elements: &[T] = bytemuck::try_cast_slice(&bytes[..whole]).ok()?;
    let span = lines.checked_sub(1)?.checked_mul(stride)?.checked_add(len)?;
    elements.get(offset..offset.checked_add(span)?)
}

/// Rows of stored integers converted per block of [`converting_matmul`] (bytes of
/// the converted block: within a core's L2 cache).
const CONVERT_BLOCK_BYTES: usize = 512 << 10;

/// `tile @ y` for a 2-d converting tile (a tile's frames against a stack of masks):
/// a block of rows at a time converted into a reused buffer and multiplied, so the
/// converted tile never exists as a whole (one read of the stored integers).
fn converting_matmul(cx: &Ctx<'_>, c: &Converting, y: &Dense) -> Result<Dense, ArrayError> {
    let op = "matmul";
    let (m, k, n) = (c.stored.shape[0], c.stored.shape[1], y.shape[1]);
    let dtype = c.dtype;
    let rows = (CONVERT_BLOCK_BYTES / (k.max(1) * dtype.size())).clamp(1, m.max(1));
    // Zeroed: with k = 0 the product is all zeros and no block runs.
    let out = Dense::alloc(cx.memory, op, dtype, &[m, n], true)?;
    let block = Dense::alloc(cx.memory, op, dtype, &[rows, k], false)?;
    {
        let (rs, ry) = (c.stored.storage.read(op)?, y.storage.read(op)?);
        let mut w = out.storage.write(op)?;
        let mut b = block.storage.write(op)?;
        crate::with_real!(dtype, T => {
            let ya = y.view_in::<T>(&ry, op)?.into_dimensionality::<Ix2>().map_err(|e| ArrayError::value(op, e.to_string()))?;
            let os: &mut [T] = bytemuck::cast_slice_mut(&mut w[..]);
            let bs: &mut [T] = bytemuck::cast_slice_mut(&mut b[..]);
            crate::with_dtype!(c.stored.dtype, S => {
                let stored = c.stored.view_in::<S>(&rs, op)?;
                let stored = stored.as_slice().ok_or_else(|| ArrayError::value(op, "internal error: a tile not in C order"))?;
                for (src, dst) in stored.chunks(rows * k.max(1)).zip(os.chunks_mut(rows * n.max(1))) {
                    cx.check(op)?;
                    let r = src.len() / k.max(1);
                    for (o, &v) in bs.iter_mut().zip(src) {
                        *o = v.cast_to::<T>();
                    }
                    let xb = ArrayView2::from_shape((r, k), &bs[..r * k]).map_err(|e| ArrayError::value(op, e.to_string()))?;
                    let ob = ArrayViewMut2::from_shape((r, n), dst).map_err(|e| ArrayError::value(op, e.to_string()))?;
                    T::accumulate(xb, ya.view(), ob);
                }
            }, return Err(ArrayError::value(op, "internal error: unexpected stored dtype")));
        }, return Err(ArrayError::dtype(op, &[dtype], "a converting tile is float32 or float64")));
    }
    Ok(out)
}

/// `o += x @ y` in blocks of rows and of the inner axis of about `block` multiply-adds
/// each, checking for interruption before each: a long product (a broadcast view's
/// inner axis can be 2**40 long) stops when asked to.
fn accumulate_in_blocks<T: MatrixKernel>(
    cx: &Ctx<'_>,
    op: &str,
    x: ArrayView2<'_, T>,
    y: ArrayView2<'_, T>,
    mut o: ArrayViewMut2<'_, T>,
    block: usize,
) -> Result<(), ArrayError> {
    let (m, k, n) = (x.nrows(), x.ncols(), y.ncols());
    let rows = (block / k.saturating_mul(n).max(1)).max(1);
    let depth = (block / rows.saturating_mul(n).max(1)).max(1);
    for r in (0..m).step_by(rows) {
        let r_end = r.saturating_add(rows).min(m);
        for p in (0..k).step_by(depth) {
            cx.check(op)?;
            let p_end = p.saturating_add(depth).min(k);
            T::accumulate(x.slice(s![r..r_end, p..p_end]), y.slice(s![p..p_end, ..]), o.slice_mut(s![r..r_end, ..]));
        }
    }
    Ok(())
}

/// How a dtype multiplies matrices.
pub trait MatrixKernel: Sized {
    /// `o += x @ y`.
    fn accumulate(x: ArrayView2<'_, Self>, y: ArrayView2<'_, Self>, o: ArrayViewMut2<'_, Self>);
}

macro_rules! blas_like {
    ($($t:ty),*) => {$(
        impl MatrixKernel for $t {
            fn accumulate(x: ArrayView2<'_, Self>, y: ArrayView2<'_, Self>, mut o: ArrayViewMut2<'_, Self>) {
                let one = <$t as num_traits::One>::one();
                general_mat_mul(one, &x, &y, one, &mut o);
            }
        }
    )*};
}
blas_like!(f32, f64, crate::dtype::Complex32, crate::dtype::Complex64);

macro_rules! int_product {
    ($($t:ty),*) => {$(
        impl MatrixKernel for $t {
            fn accumulate(x: ArrayView2<'_, Self>, y: ArrayView2<'_, Self>, mut o: ArrayViewMut2<'_, Self>) {
                let (m, k, n) = (x.nrows(), x.ncols(), y.ncols());
                for i in 0..m {
                    for p in 0..k {
                        let a = x[[i, p]];
                        for j in 0..n {
                            o[[i, j]] = o[[i, j]].add(a.mul(y[[p, j]]));
                        }
                    }
                }
            }
        }
    )*};
}
int_product!(u8, u16, u32, u64, i8, i16, i32, i64);

/// A view of a C-order-compatible array with another shape of the same size (1-d
/// operands as rows or columns).
fn reshape_view(d: &Dense, shape: &[usize]) -> Dense {
    if d.shape.len() == 1 && shape.len() == 2 {
        let mut v = d.clone();
        let s = d.strides[0];
        if shape[0] == 1 {
            v.shape = shape.to_vec();
            v.strides = vec![0, s];
        } else {
            v.shape = shape.to_vec();
            v.strides = vec![s, 0];
        }
        return v;
    }
    d.clone()
}

/// `tensordot(a, b, axes=(axes_a, axes_b))`: sum over the paired axes.
///
/// # Errors
/// Axes of different lengths, bad axes, numeric errors of `matmul`.
pub fn tensordot(
    cx: &Ctx<'_>,
    a: &HostArray,
    b: &HostArray,
    axes_a: &[i64],
    axes_b: &[i64],
) -> Result<HostArray, ArrayError> {
    let op = "tensordot";
    let (x, y) = (a.dense(op)?, b.dense(op)?);
    if axes_a.len() != axes_b.len() {
        return Err(ArrayError::value(op, "the two lists of axes must have the same length"));
    }
    let ax = normalize_axes(op, Some(axes_a), &x.shape)?;
    let by = normalize_axes(op, Some(axes_b), &y.shape)?;
    for (&i, &j) in ax.iter().zip(&by) {
        if x.shape[i] != y.shape[j] {
            return Err(ArrayError::shape(
                op,
                &[&x.shape, &y.shape],
                format!("axis {i} ({}) and axis {j} ({}) differ", x.shape[i], y.shape[j]),
            ));
        }
    }
    if result_type(x.dtype, y.dtype).kind() == Kind::Bool {
        return Err(ArrayError::dtype(op, &[x.dtype, y.dtype], "needs numeric dtypes"));
    }
    let free_a: Vec<usize> = (0..x.shape.len()).filter(|i| !ax.contains(i)).collect();
    let free_b: Vec<usize> = (0..y.shape.len()).filter(|i| !by.contains(i)).collect();
    let k: usize = ax.iter().map(|&i| x.shape[i]).product();
    let m: usize = free_a.iter().map(|&i| x.shape[i]).product();
    let n: usize = free_b.iter().map(|&i| y.shape[i]).product();
    let perm_a: Vec<i64> = free_a.iter().chain(&ax).map(|&i| i as i64).collect();
    let perm_b: Vec<i64> = by.iter().chain(&free_b).map(|&i| i as i64).collect();
    let a2 = a.permute_dims(Some(&perm_a))?.reshape(cx.memory, &[m as i64, k as i64])?;
    let b2 = b.permute_dims(Some(&perm_b))?.reshape(cx.memory, &[k as i64, n as i64])?;
    let product = matmul(cx, &a2, &b2)?;
    let shape: Vec<i64> =
        free_a.iter().map(|&i| x.shape[i] as i64).chain(free_b.iter().map(|&i| y.shape[i] as i64)).collect();
    product.reshape(cx.memory, &shape)
}

/// `vecdot(a, b, axis)`: the sum over `axis` of `conj(a) * b`, the other axes
/// broadcast (the array API's `vecdot`; `dtype`, as NumPy's `dtype=`, is the dtype
/// both operands are converted to before they are multiplied, and the result's).
/// A non-negative `axis` counts in each operand (NumPy's rule), a negative one from
/// the end of each.
///
/// Same-shaped real operands reduced over their first axis (`np.sum(t * t, axis=0)`
/// for a tile `t`) into a float dtype run in one pass over both, converted in
/// registers, without the product ever existing ([`column_products`]); every other
/// case is `sum(astype(conj(a)) * astype(b), axis)`.
///
/// # Errors
/// 0-d operands, an axis out of range, lengths along the axes that differ, bool
/// operands, memory, interruption.
pub fn vecdot(
    cx: &Ctx<'_>,
    a: &HostArray,
    b: &HostArray,
    axis: i64,
    dtype: Option<DType>,
) -> Result<HostArray, ArrayError> {
    let op = "vecdot";
    let (sa, sb) = (a.shape(), b.shape());
    if sa.is_empty() || sb.is_empty() {
        return Err(ArrayError::shape(op, &[sa, sb], "vecdot needs arrays of at least 1 dimension"));
    }
    let (ia, ib) = (normalize_axis(op, axis, sa)?, normalize_axis(op, axis, sb)?);
    if sa[ia] != sb[ib] {
        return Err(ArrayError::shape(
            op,
            &[sa, sb],
            format!("axis {axis} of the first ({}) and of the second ({}) differ", sa[ia], sb[ib]),
        ));
    }
    let promoted = result_type(a.dtype(), b.dtype());
    let dtype = dtype.unwrap_or(promoted);
    if promoted.kind() == Kind::Bool || dtype.kind() == Kind::Bool {
        return Err(ArrayError::dtype(op, &[a.dtype(), b.dtype()], "needs numeric dtypes"));
    }
    if let Some(out) = leading_axis_products(cx, a, b, (ia, ib), dtype)? {
        return Ok(HostArray::Dense(out));
    }
    // Move the axis last in both, conjugate, convert, multiply (broadcasting), sum.
    let last = |x: &HostArray, i: usize| -> Result<HostArray, ArrayError> {
        let n = x.ndim();
        let perm: Vec<i64> = (0..n).filter(|&d| d != i).chain([i]).map(|d| d as i64).collect();
        x.permute_dims(Some(&perm))
    };
    let mut x = last(a, ia)?;
    if x.dtype().kind() == Kind::Complex {
        x = unary(cx, UnaryOp::Conj, &x)?;
    }
    let y = last(b, ib)?;
    let x = if x.dtype() == dtype { x } else { astype(cx, &x, dtype)? };
    let y = if y.dtype() == dtype { y } else { astype(cx, &y, dtype)? };
    let product = binary(cx, BinaryOp::Multiply, Operand::Array(&x), Operand::Array(&y))?;
    let options = ReduceOptions { axes: Some(&[-1]), keepdims: false, dtype: Some(dtype), correction: 0.0 };
    reduce(cx, ReduceOp::Sum, &product, options)
}

/// The stored elements of a C-order operand and the dtype its values have (a
/// converting tile's stored integers where they convert to `dtype` as its converted
/// values would); `None` for any other layout.
fn stored_in_c_order(x: &HostArray, dtype: DType) -> Option<&Dense> {
    match x {
        HostArray::Dense(d) if d.is_c_contiguous() => Some(d),
        HostArray::Converting(c) if c.stored.is_c_contiguous() && (c.exact() || c.dtype == dtype) => Some(&c.stored),
        _ => None,
    }
}

/// `vecdot` of same-shaped real C-order operands (dense, or converting tiles read
/// unconverted) of one stored dtype over their first axis into float32 or float64:
/// [`column_products`]. `None` for any other case.
fn leading_axis_products(
    cx: &Ctx<'_>,
    a: &HostArray,
    b: &HostArray,
    axes: (usize, usize),
    dtype: DType,
) -> Result<Option<Dense>, ArrayError> {
    let op = "vecdot";
    if axes != (0, 0) || a.shape() != b.shape() || !matches!(dtype, DType::F32 | DType::F64) {
        return Ok(None);
    }
    let (Some(x), Some(y)) = (stored_in_c_order(a, dtype), stored_in_c_order(b, dtype)) else { return Ok(None) };
    if x.dtype != y.dtype || matches!(x.dtype.kind(), Kind::Complex | Kind::Bool) {
        return Ok(None);
    }
    let shape = a.shape();
    let rows = shape[0];
    let cols: usize = shape[1..].iter().product();
    let out = Dense::alloc(cx.memory, op, dtype, &shape[1..], false)?;
    {
        let (rx, ry) = (x.storage.read(op)?, y.storage.read(op)?);
        let mut w = out.storage.write(op)?;
        crate::with_real!(dtype, A => {
            let o: &mut [A] = bytemuck::cast_slice_mut(&mut w[..]);
            crate::with_dtype!(x.dtype, S => {
                let (Some(xs), Some(ys)) = (strided_span::<S>(&rx, x.offset, rows, cols, cols), strided_span::<S>(&ry, y.offset, rows, cols, cols)) else {
                    return Ok(None);
                };
                column_products::<S, A>(cx, op, xs, ys, cols, o)?;
            }, return Ok(None));
        }, return Ok(None));
    }
    Ok(Some(out))
}

/// Columns per block of [`column_products`]: their float64 sums (128 KiB) stay in a
/// core's L2 cache while every row's part passes.
const PRODUCTS_BLOCK: usize = 16384;

/// Rows added per pass over a block's sums by [`column_products`]: a quarter of the
/// loads and stores of the sums (as `sum(axis=0)`'s `add_rows`).
const ROWS_PER_PASS: usize = 4;

/// `out[j] = Σ_i x[i, j] * y[i, j]` for C-order `(rows, cols)` matrices `x`, `y`,
/// converted to `A` in registers: in blocks of [`PRODUCTS_BLOCK`] columns,
/// [`ROWS_PER_PASS`] rows per pass over a block's sums; `x` and `y` the same matrix
/// (`t * t`) converted once.
fn column_products<'a, S: CastTo, A: Elem>(
    cx: &Ctx<'_>,
    op: &str,
    x: &'a [S],
    y: &'a [S],
    cols: usize,
    out: &mut [A],
) -> Result<(), ArrayError> {
    out.iter_mut().for_each(|o| *o = A::default());
    if cols == 0 {
        return Ok(());
    }
    let squares = std::ptr::eq(x, y);
    let rows = x.len().div_ceil(cols);
    for (b, block) in out.chunks_mut(PRODUCTS_BLOCK).enumerate() {
        let (start, len) = (b * PRODUCTS_BLOCK, block.len());
        let rows_per_check = (CHECK_EVERY / len).max(ROWS_PER_PASS) / ROWS_PER_PASS * ROWS_PER_PASS;
        let part = |s: &'a [S], r: usize| -> &'a [S] { &s[r * cols + start..r * cols + start + len] };
        let parts = |s: &'a [S], r: usize| -> [&'a [S]; ROWS_PER_PASS] { std::array::from_fn(|k| part(s, r + k)) };
        for first in (0..rows).step_by(rows_per_check) {
            cx.check(op)?;
            let end = (first + rows_per_check).min(rows);
            let mut r = first;
            while r + ROWS_PER_PASS <= end {
                if squares {
                    multiply_add::<S, A, ROWS_PER_PASS, true>(block, parts(x, r), parts(x, r));
                } else {
                    multiply_add::<S, A, ROWS_PER_PASS, false>(block, parts(x, r), parts(y, r));
                }
                r += ROWS_PER_PASS;
            }
            for r in r..end {
                multiply_add::<S, A, 1, false>(block, [part(x, r)], [part(y, r)]);
            }
        }
    }
    Ok(())
}

/// `o[i] += Σ_k x[k][i] * y[k][i]` (`SQUARE`: `x[k][i]²`, `y` unread), with AVX2 where
/// the CPU has it (the same code, 8 lanes wide).
fn multiply_add<S: CastTo, A: Elem, const N: usize, const SQUARE: bool>(o: &mut [A], x: [&[S]; N], y: [&[S]; N]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") {
        // SAFETY: the CPU has AVX2 (checked just above).
        return unsafe { multiply_add_avx2::<S, A, N, SQUARE>(o, x, y) };
    }
    multiply_add_portable::<S, A, N, SQUARE>(o, x, y);
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
fn multiply_add_avx2<S: CastTo, A: Elem, const N: usize, const SQUARE: bool>(o: &mut [A], x: [&[S]; N], y: [&[S]; N]) {
    multiply_add_portable::<S, A, N, SQUARE>(o, x, y);
}

#[inline(always)]
fn multiply_add_portable<S: CastTo, A: Elem, const N: usize, const SQUARE: bool>(
    o: &mut [A],
    x: [&[S]; N],
    y: [&[S]; N],
) {
    let len = o.len();
    // Every row as long as `o`: the loop below then needs no bounds checks.
    let x: [&[S]; N] = x.map(|r| &r[..len]);
    let y: [&[S]; N] = if SQUARE { x } else { y.map(|r| &r[..len]) };
    for (i, o) in o.iter_mut().enumerate() {
        let mut terms = A::default();
        for k in 0..N {
            let p = x[k][i].cast_to::<A>();
            let q = if SQUARE { p } else { y[k][i].cast_to::<A>() };
            terms = terms.add(p.mul(q));
        }
        *o = o.add(terms);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::arrays::{ArrayMemory, IndexItem};
    use std::cell::Cell;
    use std::sync::Arc;

    /// Found writing the `host_arrays` fuzz target: a product over an inner axis of
    /// 2**40 (broadcast views hold no memory) ran in one kernel call that `--timeout` and
    /// Ctrl-C could not stop.
    #[test]
    fn a_long_product_stops_when_asked() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let checks = Cell::new(0);
        let stop = || {
            checks.set(checks.get() + 1);
            (checks.get() > 3).then(|| "asked to stop".to_string())
        };
        let cx = Ctx { memory: &memory, stop: &stop };
        let one = HostArray::from_bytes(&memory, DType::U8, &[1], &[1]).unwrap();
        let row = one.broadcast_to(&[1, 1 << 40]).unwrap();
        let column = one.broadcast_to(&[1 << 40, 1]).unwrap();
        let product = matmul(&cx, &row, &column);
        assert!(matches!(product, Err(ArrayError::Interrupted { .. })), "{product:?}");
    }

    /// The blocks of a product add up to the whole, for any block size. Expected
    /// values: a plain loop.
    #[test]
    fn products_in_blocks_add_up() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let (m, k, n) = (5usize, 13usize, 3usize);
        let x = ndarray::Array2::from_shape_fn((m, k), |(i, p)| ((i * k + p) % 7) as i64 - 3);
        let y = ndarray::Array2::from_shape_fn((k, n), |(p, j)| ((p * n + j) % 5) as i64 - 2);
        let mut want = ndarray::Array2::<i64>::zeros((m, n));
        for ((i, j), w) in want.indexed_iter_mut() {
            *w = (0..k).map(|p| x[[i, p]] * y[[p, j]]).sum();
        }
        for block in [1, 2, 7, 20, 40, 1 << 20] {
            let mut got = ndarray::Array2::<i64>::zeros((m, n));
            accumulate_in_blocks(&cx, "t", x.view(), y.view(), got.view_mut(), block).unwrap();
            assert_eq!(got, want, "block {block}");
            let (xf, yf) = (x.mapv(|v| v as f64), y.mapv(|v| v as f64));
            let mut got = ndarray::Array2::<f64>::zeros((m, n));
            accumulate_in_blocks(&cx, "t", xf.view(), yf.view(), got.view_mut(), block).unwrap();
            assert_eq!(got, want.mapv(|v| v as f64), "block {block}");
        }
    }

    /// Float32 operands for the mask-product tests: `(rows, cols)` C order, values with
    /// both signs and several magnitudes.
    fn f32_matrix(memory: &Arc<ArrayMemory>, rows: usize, cols: usize, seed: usize) -> (HostArray, Vec<f32>) {
        let values: Vec<f32> =
            (0..rows * cols).map(|i| (((i * 7919 + seed * 104_729) % 2003) as f32 - 1001.0) / 97.0).collect();
        let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        (HostArray::from_bytes(memory, DType::F32, &[rows, cols], &bytes).unwrap(), values)
    }

    /// `got` against `x @ y` computed by a plain loop in f64 (`x` `(m, k)`, `y` `(k, n)`,
    /// C order): `|got - want| <= 1e-5 · Σ|x·y|` per element (float32 accumulation, as
    /// NumPy's float32 `matmul` does).
    fn assert_product(got: &HostArray, x: &[f32], y: &[f32], (m, k, n): (usize, usize, usize), what: &str) {
        assert_eq!(got.shape(), [m, n], "{what}: shape");
        assert_eq!(got.dtype(), DType::F32, "{what}: dtype");
        let got = crate::arrays::to_vec::<f32>(got).unwrap();
        for i in 0..m {
            for j in 0..n {
                let terms = (0..k).map(|p| f64::from(x[i * k + p]) * f64::from(y[p * n + j]));
                let (want, magnitude) = (terms.clone().sum::<f64>(), terms.map(f64::abs).sum::<f64>());
                let err = (f64::from(got[i * n + j]) - want).abs();
                assert!(err <= 1e-5 * magnitude + 1e-30, "{what}: [{i}, {j}] = {} vs {want}", got[i * n + j]);
            }
        }
    }

    /// The product of a tile with a stack of masks, in every layout the kernels take and
    /// some they leave to matrixmultiply, against a plain loop: 1, 16, 64 (the kernels)
    /// and 65 columns (matrixmultiply), frames not a multiple of the register block,
    /// pixels past one cache block and not a multiple of 8.
    #[test]
    fn products_with_a_stack_of_masks_equal_a_plain_loop() {
        let memory = ArrayMemory::with_limit(1 << 30);
        let lease = crate::arrays::Lease::new();
        let cx = Ctx { memory: &memory, stop: &|| None };
        let (m, k) = (13usize, 2 * 4096 + 37);
        let (x, xv) = f32_matrix(&memory, m, k, 1);
        // The same tile as stored uint16 read unconverted (values up to 65535).
        let ints: Vec<u16> = (0..m * k).map(|i| ((i * 2_654_435_761) % 65_536) as u16).collect();
        let ints_f32: Vec<f32> = ints.iter().map(|&v| f32::from(v)).collect();
        let ints: &'static [u16] = Box::leak(ints.into_boxed_slice());
        // SAFETY: the bytes are leaked (never freed nor written).
        let tile = unsafe {
            HostArray::borrowed_converting(&memory, DType::U16, DType::F32, &[m, k], bytemuck::cast_slice(ints), lease)
        }
        .unwrap();
        // The tile inside a wider array (rows `k + 5` apart), and every other row of it.
        let (wide, wide_v) = f32_matrix(&memory, 2 * m, k + 5, 2);
        let inner = wide
            .get(&[IndexItem::FULL, IndexItem::Slice { start: Some(2), stop: Some(k as i64 + 2), step: None }])
            .unwrap();
        let inner_v: Vec<f32> = (0..2 * m).flat_map(|i| wide_v[i * (k + 5) + 2..][..k].to_vec()).collect();
        let every_other = inner.get(&[IndexItem::Slice { start: None, stop: None, step: Some(2) }]).unwrap();
        let every_other_v: Vec<f32> = (0..m).flat_map(|i| inner_v[2 * i * k..][..k].to_vec()).collect();
        // The tile transposed twice (a (k, m) C-order array's transpose) and with
        // columns two apart: matrixmultiply's cases.
        let (tall, tall_v) = f32_matrix(&memory, k, m, 3);
        let transposed = tall.permute_dims(None).unwrap();
        let transposed_v: Vec<f32> =
            (0..m).flat_map(|i| (0..k).map(move |p| (i, p))).map(|(i, p)| tall_v[p * m + i]).collect();
        let (double, double_v) = f32_matrix(&memory, m, 2 * k, 4);
        let strided =
            double.get(&[IndexItem::FULL, IndexItem::Slice { start: None, stop: None, step: Some(2) }]).unwrap();
        let strided_v: Vec<f32> =
            (0..m).flat_map(|i| (0..k).map(move |p| (i, p))).map(|(i, p)| double_v[i * 2 * k + 2 * p]).collect();
        let tiles = [
            (&x, &xv, "float32 tile", true),
            (&tile, &ints_f32, "uint16 tile read as float32", true),
            (&inner, &inner_v, "rows k + 5 apart", true),
            (&every_other, &every_other_v, "every other row", true),
            (&transposed, &transposed_v, "a transposed tile", false),
            (&strided, &strided_v, "columns two apart", false),
        ];
        for n in [1usize, 16, 64, 65] {
            // `(pixels, M)` C order, and the transpose of a C-order `(M, pixels)` stack.
            let (rows, rows_v) = f32_matrix(&memory, k, n, 5 + n);
            let (stack, stack_v) = f32_matrix(&memory, n, k, 6 + n);
            let columns = stack.permute_dims(None).unwrap();
            let columns_v: Vec<f32> =
                (0..k).flat_map(|p| (0..n).map(move |j| (p, j))).map(|(p, j)| stack_v[j * k + p]).collect();
            for (masks, masks_v, layout) in [(&rows, &rows_v, "(pixels, M)"), (&columns, &columns_v, "(M, pixels)ᵀ")]
            {
                for &(a, a_v, what, kernel) in &tiles {
                    let what = format!("{what} @ {layout} with M = {n}");
                    let rows_of_a = a.shape()[0];
                    assert_product(&matmul(&cx, a, masks).unwrap(), a_v, masks_v, (rows_of_a, k, n), &what);
                    // The kernels take the layouts they are meant for.
                    let fast = masks_matmul(&cx, a, masks).unwrap().is_some();
                    let (rows_layout, masks_layout) =
                        (layout == "(pixels, M)", what.starts_with("float32") || what.starts_with("uint16"));
                    let expected =
                        simd::available() && kernel && n <= MASKS_AT_MOST && (rows_layout || masks_layout || n == 1);
                    assert_eq!(fast, expected, "{what}: kernel taken");
                }
            }
        }
    }

    /// `vecdot` of a tile with itself over the frames (`np.sum(t * t, axis=0)`) in one
    /// pass, against a plain f64 loop: float32 and a uint16 tile read unconverted,
    /// into float64 and float32; an odd number of frames (the kernel's single-row
    /// tail) and pixels past one block and not a multiple of 8.
    #[test]
    fn products_over_the_frames_equal_a_plain_loop() {
        let memory = ArrayMemory::with_limit(1 << 30);
        let lease = crate::arrays::Lease::new();
        let cx = Ctx { memory: &memory, stop: &|| None };
        let (frames, pixels) = (7usize, PRODUCTS_BLOCK + 37);
        let (x, xv) = f32_matrix(&memory, frames, pixels, 7);
        let (y, yv) = f32_matrix(&memory, frames, pixels, 8);
        let ints: Vec<u16> = (0..frames * pixels).map(|i| ((i * 2_654_435_761) % 65_536) as u16).collect();
        let ints_f32: Vec<f32> = ints.iter().map(|&v| f32::from(v)).collect();
        let ints: &'static [u16] = Box::leak(ints.into_boxed_slice());
        // SAFETY: the bytes are leaked (never freed nor written).
        let tile = unsafe {
            HostArray::borrowed_converting(
                &memory,
                DType::U16,
                DType::F32,
                &[frames, pixels],
                bytemuck::cast_slice(ints),
                lease,
            )
        }
        .unwrap();
        let cases =
            [(&x, &xv, &x, &xv, "x·x"), (&x, &xv, &y, &yv, "x·y"), (&tile, &ints_f32, &tile, &ints_f32, "uint16 tile")];
        for (a, av, b, bv, what) in cases {
            assert!(leading_axis_products(&cx, a, b, (0, 0), DType::F64).unwrap().is_some(), "{what}: one pass");
            for dtype in [DType::F64, DType::F32] {
                let got = vecdot(&cx, a, b, 0, Some(dtype)).unwrap();
                assert_eq!((got.shape(), got.dtype()), (&[pixels][..], dtype), "{what}");
                let got: Vec<f64> = match dtype {
                    DType::F64 => crate::arrays::to_vec::<f64>(&got).unwrap(),
                    _ => crate::arrays::to_vec::<f32>(&got).unwrap().into_iter().map(f64::from).collect(),
                };
                let tolerance = if dtype == DType::F64 { 1e-12 } else { 1e-6 };
                for (j, g) in got.iter().enumerate() {
                    let terms = (0..frames).map(|i| f64::from(av[i * pixels + j]) * f64::from(bv[i * pixels + j]));
                    let (want, magnitude) = (terms.clone().sum::<f64>(), terms.map(f64::abs).sum::<f64>());
                    assert!((g - want).abs() <= tolerance * magnitude, "{what} {dtype:?} [{j}]: {g} vs {want}");
                }
            }
        }
    }

    /// The other cases (the axis last, broadcasting, integers, complex operands) go
    /// through conj, multiply and sum; checked against a plain loop; bad axes, lengths
    /// and dtypes are typed errors.
    #[test]
    fn vecdot_over_other_axes_broadcasts_and_conjugates() {
        let memory = ArrayMemory::with_limit(1 << 20);
        let cx = Ctx { memory: &memory, stop: &|| None };
        let ints = |shape: &[usize], seed: i32| {
            let n: usize = shape.iter().product();
            let v: Vec<i32> = (0..n as i32).map(|i| (i * 7 + seed) % 11 - 5).collect();
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            (HostArray::from_bytes(&memory, DType::I32, shape, &bytes).unwrap(), v)
        };
        // (2, 3, 4) · (4,) over the last axis: (2, 3), int32 (no promotion to int64).
        let (a, av) = ints(&[2, 3, 4], 1);
        let (b, bv) = ints(&[4], 2);
        let got = vecdot(&cx, &a, &b, -1, None).unwrap();
        assert_eq!((got.shape(), got.dtype()), (&[2, 3][..], DType::I32));
        let want: Vec<i32> = (0..6).map(|r| (0..4).map(|k| av[r * 4 + k] * bv[k]).sum()).collect();
        assert_eq!(crate::arrays::to_vec::<i32>(&got).unwrap(), want);
        // Over the first axis of (4, 3) and (4, 1): broadcast along the kept axis.
        let (c, cv) = ints(&[4, 3], 3);
        let (d, dv) = ints(&[4, 1], 4);
        let got = vecdot(&cx, &c, &d, 0, Some(DType::F64)).unwrap();
        let want: Vec<f64> = (0..3).map(|j| (0..4).map(|i| f64::from(cv[i * 3 + j] * dv[i])).sum()).collect();
        assert_eq!(crate::arrays::to_vec::<f64>(&got).unwrap(), want);
        // Complex: the first operand conjugated.
        let z: Vec<f64> = vec![1.0, 2.0, 3.0, -1.0];
        let zb: Vec<u8> = z.iter().flat_map(|x| x.to_le_bytes()).collect();
        let zs = HostArray::from_bytes(&memory, DType::C128, &[2], &zb).unwrap();
        let got = crate::arrays::to_vec::<f64>(&vecdot(&cx, &zs, &zs, -1, None).unwrap()).unwrap();
        // |1+2i|² + |3-i|² = 5 + 10, imaginary part 0.
        assert_eq!(got, vec![15.0, 0.0]);
        // Errors.
        let (e, _) = ints(&[3], 0);
        assert!(matches!(vecdot(&cx, &a, &e, -1, None), Err(ArrayError::Shape { .. })));
        assert!(matches!(vecdot(&cx, &a, &b, 3, None), Err(ArrayError::Axis { .. })));
        let flag = HostArray::from_bytes(&memory, DType::Bool, &[2], &[1, 0]).unwrap();
        assert!(matches!(vecdot(&cx, &flag, &flag, 0, None), Err(ArrayError::DType { .. })));
        let zero_d = HostArray::from_bytes(&memory, DType::I32, &[], &[0; 4]).unwrap();
        assert!(matches!(vecdot(&cx, &zero_d, &zero_d, 0, None), Err(ArrayError::Shape { .. })));
    }
}
