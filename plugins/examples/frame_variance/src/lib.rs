//! The partition method (docs: `udf/advanced.rst`, "Partition processing", which has no
//! code): "algorithms that require several passes over the data". Two passes over the
//! whole partition give the variance of each frame.
//!
//! Buffer `variance` (kind nav, float64): `variance[n] = mean_{y,x} (F_n − mean F_n)²`.

use udf_sdk::prelude::*;

struct FrameVariance;

impl Udf for FrameVariance {
    fn declare() -> Declaration {
        Declaration::new("frame-variance", "Variance of each frame, in two passes over the partition")
            .method(Method::Partition)
            .nav("variance", DType::Float64)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(FrameVariance)
    }

    fn process_partition(&mut self, partition: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let data = partition.to_f64()?.into_shape_with_order((partition.frames(), partition.frame_len()))?;
        let means = data.mean_axis(Axis(1)).unwrap_or_default(); // first pass
        let squares = (&data - &means.insert_axis(Axis(1))).mapv(|d| d * d); // second pass
        let variances = squares.mean_axis(Axis(1)).unwrap_or_default();
        results.assign("variance", variances.as_slice().unwrap_or_default())
    }
}

udf_sdk::export_udf!(FrameVariance);
