//! Probe: the Python plugins' operations (`plugins/polyglot/python/{sum,sumsig,stddev,masks}`)
//! written in Rust with host arrays, for the "Languages" benchmark
//! (`tests/benches/languages.rs`) and its tests. Param `op`:
//!
//! - `sum`: sig buffer `intensity` (float32), `sum(tile, axis=0)` added into an
//!   accumulator in the host, copied out once per partition;
//! - `sumsig`: nav buffer `intensity` (float32), `sum(tile, axis=(1, 2))` copied out per tile;
//! - `stddev`: sig buffers `sum`, `varsum` (float64) and single `num_frames` (int64),
//!   `sum_var(tile, axis=0, dtype=float64)` (the sum and the variance in one pass over
//!   the tile) merged with the pairwise formula (Chan et al.) in the host, as the Python
//!   plugin does;
//! - `masks`: nav buffer `intensity` (float32, extra shape `(M,)`) from the param `masks`
//!   (float32, `(M, *sig)`): `tile.reshape(frames, -1) @ matrix`, the matrix `(pixels, M)`
//!   cut once per signal slice;
//! - `calls`: nav buffer `n` (int64, the calls made per frame); per tile `calls` (param)
//!   host calls `small + 1.0` on a 4-element array: the cost of one call.
//!
//! The input dtype is float32 (the host converts integer data as it reads the tile); tiles
//! of 8 MiB, as the Python SDK asks for plugins with host arrays.

use std::collections::HashMap;
use udf_sdk::array::{Array, BinaryOp, IndexItem, Slice, use_host_tiles};
use udf_sdk::ndarray;
use udf_sdk::prelude::*;

enum Op {
    Sum { acc: Option<Array> },
    SumSig,
    StdDev { sum: Option<Array>, varsum: Option<Array>, seen: HashMap<u32, u64> },
    Masks { masks: Array, count: usize, by_slice: HashMap<u32, Array> },
    Calls { small: Array, calls: i64 },
}

struct HostArrayOps {
    op: Op,
}

/// The tile's signal slice as index items of a sig-shaped array.
fn sig_index(tile: &Tile<'_>) -> Vec<IndexItem> {
    tile.sig_origin()
        .iter()
        .zip(tile.sig_shape())
        .map(|(&o, &n)| {
            IndexItem::Slice(Slice { start: Some(o as i64), stop: Some((o + n as u64) as i64), step: None })
        })
        .collect()
}

fn sig_shape(ctx: &Context) -> Vec<u64> {
    ctx.dataset().sig_shape.clone()
}

/// `(S0, V0, n0) <- (S0, V0, n0) + (S1, V1, n1)`, the pairwise update of sums and sums
/// of squared deviations, in place on the host arrays `s0`, `v0`.
fn pairwise(s0: &Array, v0: &Array, n0: u64, s1: &Array, v1: &Array, n1: u64) -> Result<()> {
    if n0 == 0 {
        s0.set(&[], s1)?;
        return v0.set(&[], v1);
    }
    let delta =
        s1.binary(BinaryOp::Divide, n1 as f64)?.binary(BinaryOp::Subtract, &s0.binary(BinaryOp::Divide, n0 as f64)?)?;
    let weight = (n0 * n1) as f64 / (n0 + n1) as f64;
    let correction = delta.binary(BinaryOp::Multiply, &delta)?.binary(BinaryOp::Multiply, weight)?;
    v0.add_at(&[], v1)?;
    v0.add_at(&[], &correction)?;
    s0.add_at(&[], s1)
}

impl Udf for HostArrayOps {
    fn describe() -> Description {
        use_host_tiles();
        Description::new("host-array-ops", "0.1.0", "The Python plugins' operations with host arrays, in Rust")
            .param(ParamSpec::text("op", "sum, sumsig, stddev, masks or calls").default("sum"))
            .param(ParamSpec::int("calls", "host calls per tile for op=calls").default(1000))
            .param(
                ParamSpec::array("masks", "float32 masks (M, *sig) for op=masks")
                    .default_array(&[0], Vec::<f32>::new()),
            )
            .tiling(TileDepth::Default, TileSize::Bytes(8 << 20))
            .custom_merge()
    }

    fn result_buffers(params: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(match params.text("op")? {
            "sum" => vec![BufferDecl::sig("intensity", DType::Float32)],
            "sumsig" => vec![BufferDecl::nav("intensity", DType::Float32)],
            "stddev" => vec![
                BufferDecl::sig("sum", DType::Float64),
                BufferDecl::sig("varsum", DType::Float64),
                BufferDecl::single("num_frames", DType::Int64),
            ],
            "masks" => {
                let count = params.array::<f32>("masks")?.shape().first().copied().unwrap_or(0);
                vec![BufferDecl::nav("intensity", DType::Float32).extra_shape(&[count as u64])]
            }
            "calls" => vec![BufferDecl::nav("n", DType::Int64)],
            other => {
                return Err(UdfError::bad_param(format!(
                    "op must be sum, sumsig, stddev, masks or calls, found '{other}'"
                )));
            }
        })
    }

    fn new(ctx: &Context) -> Result<Self> {
        let op = match ctx.params().text("op")? {
            "sum" => Op::Sum { acc: None },
            "sumsig" => Op::SumSig,
            "stddev" => Op::StdDev { sum: None, varsum: None, seen: HashMap::new() },
            "masks" => {
                let view = ctx.params().array::<f32>("masks")?;
                let shape: Vec<u64> = view.shape().iter().map(|&n| n as u64).collect();
                let values: Vec<f32> = view.iter().copied().collect();
                Op::Masks {
                    masks: Array::from_slice(&shape, &values)?,
                    count: view.shape()[0],
                    by_slice: HashMap::new(),
                }
            }
            _ => Op::Calls { small: Array::zeros(&[4], DType::Float32)?, calls: ctx.params().int("calls")? },
        };
        // Accumulators live in the host for the whole partition.
        let op = match op {
            Op::Sum { .. } => Op::Sum { acc: Some(Array::zeros(&sig_shape(ctx), DType::Float32)?) },
            Op::StdDev { seen, .. } => Op::StdDev {
                sum: Some(Array::zeros(&sig_shape(ctx), DType::Float64)?),
                varsum: Some(Array::zeros(&sig_shape(ctx), DType::Float64)?),
                seen,
            },
            other => other,
        };
        Ok(HostArrayOps { op })
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let data = Array::tile()?;
        let frames = tile.frames();
        match &mut self.op {
            Op::Sum { acc } => {
                let acc = acc.as_ref().ok_or_else(|| UdfError::internal("no accumulator"))?;
                acc.get(&sig_index(tile))?.add_at(&[], &data.sum(Some(&[0]))?)?;
            }
            Op::SumSig => {
                let axes: Vec<i64> = (1..data.shape().len() as i64).collect();
                let sums = data.sum(Some(&axes))?.to_vec::<f32>()?;
                for (o, v) in results.view_mut::<f32>("intensity")?.iter_mut().zip(sums) {
                    *o += v;
                }
            }
            Op::StdDev { sum, varsum, seen } => {
                let (Some(sum), Some(varsum)) = (sum.as_ref(), varsum.as_ref()) else {
                    return Err(UdfError::internal("no accumulators"));
                };
                let index = sig_index(tile);
                let n0 = seen.get(&tile.scheme_index()).copied().unwrap_or(0);
                let n1 = frames as u64;
                let (s1, v1) = data.sum_var(Some(&[0]), false, Some(DType::Float64), 0.0)?;
                let v1 = v1.binary(BinaryOp::Multiply, n1 as f64)?;
                pairwise(&sum.get(&index)?, &varsum.get(&index)?, n0, &s1, &v1, n1)?;
                seen.insert(tile.scheme_index(), n0 + n1);
            }
            Op::Masks { masks, count, by_slice } => {
                let key = tile.scheme_index();
                let matrix = match by_slice.entry(key) {
                    std::collections::hash_map::Entry::Occupied(slot) => slot.into_mut(),
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        let mut index = vec![IndexItem::Slice(Slice { start: None, stop: None, step: None })];
                        index.extend(sig_index(tile));
                        let part = masks.get(&index)?.reshape(&[*count as i64, -1])?;
                        slot.insert(part.permute_dims(None)?.astype(DType::Float32)?)
                    }
                };
                let product = data.reshape(&[frames as i64, -1])?.matmul(matrix)?.to_vec::<f32>()?;
                for (o, v) in results.view_mut::<f32>("intensity")?.iter_mut().zip(product) {
                    *o += v;
                }
            }
            Op::Calls { small, calls } => {
                for _ in 0..*calls {
                    drop(small.binary(BinaryOp::Add, 1.0)?);
                }
                results.view_mut::<i64>("n")?.fill(*calls);
            }
        }
        Ok(())
    }

    fn postprocess(&mut self, _: &Context, results: &mut Buffers) -> Result<()> {
        match &self.op {
            Op::Sum { acc: Some(acc) } => {
                results.whole_mut::<f32>("intensity")?.iter_mut().zip(acc.to_vec::<f32>()?).for_each(|(o, v)| *o = v);
            }
            Op::StdDev { sum: Some(sum), varsum: Some(varsum), seen } => {
                let n = seen.values().next().copied().unwrap_or(0);
                if seen.values().any(|&m| m != n) {
                    return Err(UdfError::internal("signal slices saw different frame counts"));
                }
                results.whole_mut::<f64>("sum")?.iter_mut().zip(sum.to_vec::<f64>()?).for_each(|(o, v)| *o = v);
                results.whole_mut::<f64>("varsum")?.iter_mut().zip(varsum.to_vec::<f64>()?).for_each(|(o, v)| *o = v);
                results.whole_mut::<i64>("num_frames")?.fill(n as i64);
            }
            _ => {}
        }
        Ok(())
    }

    fn merge(ctx: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        match ctx.params.text("op")? {
            "sum" => {
                let mut d = dest.whole_mut::<f32>("intensity")?;
                d += &src.whole::<f32>("intensity")?;
            }
            "stddev" => {
                // Plain loops: a merge is once per partition.
                let count =
                    |b: &Buffers| -> Result<f64> { Ok(b.whole::<i64>("num_frames")?.iter().sum::<i64>() as f64) };
                let (n0, n1) = (count(dest)?, count(src)?);
                if n1 > 0.0 {
                    let s0 = dest.to_owned::<f64>("sum")?;
                    let (s1, v1) = (src.whole::<f64>("sum")?, src.whole::<f64>("varsum")?);
                    ndarray::Zip::from(&mut dest.whole_mut::<f64>("varsum")?).and(&s0).and(&s1).and(&v1).for_each(
                        |v, &a, &b, &vb| {
                            *v = if n0 == 0.0 { vb } else { *v + vb + (b / n1 - a / n0).powi(2) * n0 * n1 / (n0 + n1) };
                        },
                    );
                    let mut s = dest.whole_mut::<f64>("sum")?;
                    s += &s1;
                    dest.whole_mut::<i64>("num_frames")?.fill((n0 + n1) as i64);
                }
            }
            "calls" => dest.view_mut::<i64>("n")?.assign(&src.view::<i64>("n")?),
            // sumsig, masks: the partition's rows of the nav buffer.
            _ => dest.view_mut::<f32>("intensity")?.assign(&src.view::<f32>("intensity")?),
        }
        Ok(())
    }
}

udf_sdk::export_udf!(HostArrayOps);
