//! The `SumSigUDF` of LiberTEM's "Sparse arrays" section (docs: `udf/advanced.rst`):
//! the sum over each frame, in `np.result_type(input dtype, float32)`, from tiles. Tiles
//! arrive dense here (the contract has no sparse tiles), so `get_backends` and `forbuf`
//! have nothing to port.
//!
//! Buffer `intensity` (kind nav, at least float32): `intensity[n] = Σ_{y,x} F_n[y, x]`.

use udf_sdk::prelude::*;

struct SumSigUdf;

impl Udf for SumSigUdf {
    fn declare() -> Declaration {
        Declaration::new("sumsig-backends", "Sum over each frame")
            .nav("intensity", BufferDType::AtLeast(DType::Float32))
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(SumSigUdf)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        udf_sdk::log!(debug, "a tile of {} frames", tile.frames());
        results.add_frame_sums("intensity", tile)
    }
}

udf_sdk::export_udf!(SumSigUdf);
