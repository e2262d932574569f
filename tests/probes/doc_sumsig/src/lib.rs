//! The sum over each frame (LiberTEM's `SumSigUDF`, as in the documentation's "Sparse
//! arrays" section, `reference/seeds/udf-advanced-topics.txt`), implemented with all three
//! processing methods — tile, frame and partition — for the conformance kit's tests: a
//! correct plugin gives the same results whichever method runs, up to float32 rounding
//! (a tile holds part of a frame, so its sums are added in another order).

use udf_sdk::prelude::*;

struct SumSig;

/// Add each frame's sum over the tile's pixels to its row of `intensity`.
fn add_frame_sums(tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
    udf_sdk::with_float_type!(tile.dtype(), T => {
        let data = tile.flat::<T>()?;
        let mut intensity = results.view_mut::<T>("intensity")?;
        for (acc, frame) in intensity.iter_mut().zip(data.chunks_exact(tile.frame_len().max(1))) {
            *acc += frame.iter().copied().sum::<T>();
        }
        Ok(())
    }, Err(UdfError::invalid_data("doc-sumsig needs float input")))
}

impl Udf for SumSig {
    fn describe() -> Description {
        Description::new("doc-sumsig", "0.1.0", "Sum over each frame, by tile, frame or partition (LiberTEM SumSigUDF)")
            .methods(&[Method::Tile, Method::Frame, Method::Partition])
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("intensity", dataset.input_dtype)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(SumSig)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        add_frame_sums(tile, results)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        // `self.results.intensity[:] = np.sum(frame)`; the frame view of a nav buffer is (1,).
        udf_sdk::with_float_type!(frame.dtype(), T => {
            results.view_mut::<T>("intensity")?[0] = frame.flat::<T>()?.iter().copied().sum::<T>();
            Ok(())
        }, Err(UdfError::invalid_data("doc-sumsig needs float input")))
    }

    fn process_partition(&mut self, partition: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        add_frame_sums(partition, results)
    }
}

udf_sdk::export_udf!(SumSig);
