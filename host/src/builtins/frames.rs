//! The runner of the frame-method built-ins (`logsum`, `fem`, `crystallinity`): tiles
//! of whole frames, cut into frames for a per-frame kernel that owns its scratch space.

use super::element::tile_data;
use crate::array::NdArray;
use crate::dtype::DType;
use crate::udf::{CallError, InitContext, NamedBuffer, PartitionRunner, Tile};

/// A per-frame computation on real frames, in `f32` or `f64`.
pub trait FrameKernel: Send {
    /// Process frame `index` (partition-local) of `frame_len` pixels, `f32` data.
    fn frame_f32(&mut self, index: usize, frame: &[f32], out: &mut [NdArray]) -> Result<(), CallError>;
    /// The same for `f64` data.
    fn frame_f64(&mut self, index: usize, frame: &[f64], out: &mut [NdArray]) -> Result<(), CallError>;
}

/// A partition of a frame built-in: named buffers and a kernel.
pub struct FramesPartition<K> {
    kernel: K,
    names: Vec<String>,
    buffers: Vec<NdArray>,
    origin: u64,
    frame_len: usize,
    who: &'static str,
}

impl<K: FrameKernel> FramesPartition<K> {
    /// `buffers`: (name, zeroed array) in declaration order; `who` names the built-in in
    /// errors.
    pub fn new(ctx: &InitContext<'_>, kernel: K, buffers: Vec<(&str, NdArray)>, who: &'static str) -> Self {
        let (names, buffers) = buffers.into_iter().map(|(n, a)| (n.to_owned(), a)).unzip();
        FramesPartition {
            kernel,
            names,
            buffers,
            origin: ctx.partition.map_or(0, |p| p.origin),
            frame_len: ctx.dataset.sig_shape.iter().product(),
            who,
        }
    }
}

/// Frames processed by a frame built-in: the partition's frame count (or all frames on
/// the main side).
pub fn frames_of(ctx: &InitContext<'_>) -> usize {
    ctx.partition.map_or(ctx.dataset.frames(), |p| p.frames)
}

impl<K: FrameKernel> PartitionRunner for FramesPartition<K> {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        if tile.sig.len() != self.frame_len {
            return Err(CallError::internal(format!(
                "{} needs whole frames, got a tile of {:?}",
                self.who, tile.sig.shape
            )));
        }
        let first =
            tile.origin.checked_sub(self.origin).ok_or_else(|| CallError::internal("tile before partition"))? as usize;
        let n = self.frame_len.max(1);
        match tile.dtype {
            DType::F32 => {
                for (i, frame) in tile_data::<f32>(tile)?.chunks_exact(n).enumerate() {
                    self.kernel.frame_f32(first + i, frame, &mut self.buffers)?;
                }
            }
            DType::F64 => {
                for (i, frame) in tile_data::<f64>(tile)?.chunks_exact(n).enumerate() {
                    self.kernel.frame_f64(first + i, frame, &mut self.buffers)?;
                }
            }
            other => {
                return Err(CallError::invalid_data(format!("{} needs real float input, got {other}", self.who)));
            }
        }
        Ok(())
    }

    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let names = std::mem::take(&mut self.names);
        let buffers = std::mem::take(&mut self.buffers);
        Ok(names.into_iter().zip(buffers).map(|(name, array)| NamedBuffer { name, array }).collect())
    }
}

/// Check that the run's input is real float (the frame built-ins' requirement).
///
/// # Errors
/// Invalid data naming `who` and the dtype.
pub fn require_real(input: DType, who: &str) -> Result<(), CallError> {
    match input {
        DType::F32 | DType::F64 => Ok(()),
        other => Err(CallError::invalid_data(format!("{who} needs real input, but the run's input dtype is {other}"))),
    }
}

/// The first buffer as `f32` (the frame built-ins' outputs are float32).
///
/// # Errors
/// Internal, if the buffer is missing or not float32.
pub fn out_f32(out: &mut [NdArray]) -> Result<&mut [f32], CallError> {
    out.first_mut().and_then(|a| a.as_mut_slice::<f32>()).ok_or_else(|| CallError::internal("output buffer"))
}
