//! Deliberately non-invariant, for the conformance kit's tests: each `flaw` makes the
//! results depend on how the host runs the plugin, a mistake a correct-looking UDF can
//! make. The kit must fail the check that names the reason.
//!
//! Every flaw keeps `intensity` (nav, float32: the sum over each frame), correct, and adds:
//!
//! - `partition-mean`: `centered` (nav, float32) = `intensity` minus the mean of
//!   `intensity` over the *partition*, subtracted in `postprocess` (a background removal
//!   that should have used the whole scan, in `get_results`) — `invariance.partitions`;
//! - `method`: `method` (nav, uint8) = 1, 2, 3 for the tile, frame or partition method
//!   that processed the frame — `invariance.methods`;
//! - `partition-index`: `partition` (nav, uint32) = the index of the partition that
//!   processed the frame — `invariance.partitions`.

use udf_sdk::prelude::*;

#[derive(Clone, Copy, PartialEq)]
enum Flaw {
    PartitionMean,
    Method,
    PartitionIndex,
}

impl Flaw {
    fn of(params: &Params) -> Result<Flaw> {
        match params.text("flaw")? {
            "partition-mean" => Ok(Flaw::PartitionMean),
            "method" => Ok(Flaw::Method),
            "partition-index" => Ok(Flaw::PartitionIndex),
            other => {
                Err(UdfError::bad_param(format!("flaw '{other}' is not partition-mean, method or partition-index")))
            }
        }
    }
}

struct NonInvariant {
    flaw: Flaw,
}

impl NonInvariant {
    /// What every method does, with the method's code (1 tile, 2 frame, 3 partition).
    fn process(&self, tile: &Tile<'_>, code: u8, results: &mut Buffers) -> Result<()> {
        let data = tile.flat::<f32>()?;
        let mut intensity = results.view_mut::<f32>("intensity")?;
        for (acc, frame) in intensity.iter_mut().zip(data.chunks_exact(tile.frame_len().max(1))) {
            *acc += frame.iter().sum::<f32>();
        }
        match self.flaw {
            Flaw::PartitionMean => {}
            Flaw::Method => results.view_mut::<u8>("method")?.fill(code),
            Flaw::PartitionIndex => {
                let index = tile.context().partition().map_or(0, |p| p.index);
                results.view_mut::<u32>("partition")?.fill(index);
            }
        }
        Ok(())
    }
}

impl Udf for NonInvariant {
    fn describe() -> Description {
        Description::new("noninvariant", "0.1.0", "Results that depend on how the host runs it (on purpose)")
            .methods(&[Method::Tile, Method::Frame, Method::Partition])
            .param(ParamSpec::text("flaw", "partition-mean | method | partition-index").default("partition-mean"))
    }

    fn result_buffers(params: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        let extra = match Flaw::of(params)? {
            Flaw::PartitionMean => BufferDecl::nav("centered", DType::Float32),
            Flaw::Method => BufferDecl::nav("method", DType::Uint8),
            Flaw::PartitionIndex => BufferDecl::nav("partition", DType::Uint32),
        };
        Ok(vec![BufferDecl::nav("intensity", DType::Float32), extra])
    }

    fn new(ctx: &Context) -> Result<Self> {
        Ok(NonInvariant { flaw: Flaw::of(ctx.params())? })
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        self.process(tile, 1, results)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let sum: f32 = frame.flat::<f32>()?.iter().sum();
        results.view_mut::<f32>("intensity")?[0] = sum;
        match self.flaw {
            Flaw::PartitionMean => {}
            Flaw::Method => results.view_mut::<u8>("method")?[0] = 2,
            Flaw::PartitionIndex => {
                results.view_mut::<u32>("partition")?[0] = frame.context().partition().map_or(0, |p| p.index);
            }
        }
        Ok(())
    }

    fn process_partition(&mut self, partition: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        self.process(partition, 3, results)
    }

    fn postprocess(&mut self, _: &Context, results: &mut Buffers) -> Result<()> {
        if self.flaw != Flaw::PartitionMean {
            return Ok(());
        }
        let intensity = results.view::<f32>("intensity")?.to_owned();
        let mean = intensity.mean().unwrap_or(0.0);
        results.view_mut::<f32>("centered")?.assign(&intensity.mapv(|v| v - mean));
        Ok(())
    }
}

udf_sdk::export_udf!(NonInvariant);
