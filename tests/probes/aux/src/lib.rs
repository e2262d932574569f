//! Probe: per-frame aux data (LiberTEM's `aux_data(kind='nav')`).
//!
//! Param `aux`: a nav-aux float32 array `(nav.., 2)`; `method`: tile | frame | partition.
//! Buffer `echo` (nav, extra (2,), float32) gets the aux values each unit sees, so the
//! tests can compare them with the input; `preprocess` and `postprocess` check that the
//! aux view covers the whole partition.

use udf_sdk::RunPlan;
use udf_sdk::prelude::*;

struct Aux;

fn check_partition(ctx: &Context) -> Result<()> {
    let frames = ctx.partition().map_or(0, |p| p.frames as usize);
    let aux = ctx.params().array::<f32>("aux")?;
    if aux.shape() != [frames, 2] {
        return Err(UdfError::internal(format!(
            "aux in pre/postprocess has shape {:?}, expected [{frames}, 2]",
            aux.shape()
        )));
    }
    Ok(())
}

impl Udf for Aux {
    fn describe() -> Description {
        Description::new("aux", "0.1.0", "Echoes per-frame aux data")
            .methods(&[Method::Tile, Method::Frame, Method::Partition])
            .param(ParamSpec::nav_aux("aux", "float32 array (nav.., 2)"))
            .param(ParamSpec::text("method", "tile | frame | partition").default("tile"))
    }

    fn plan(params: &Params, _: &DatasetMeta) -> Result<RunPlan> {
        let mut plan = RunPlan::from_description(&Self::describe());
        plan.method = match params.text("method")? {
            "frame" => Method::Frame,
            "partition" => Method::Partition,
            _ => Method::Tile,
        };
        Ok(plan)
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("echo", DType::Float32).extra_shape(&[2])])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Aux)
    }

    fn preprocess(&mut self, ctx: &Context, _: &mut Buffers) -> Result<()> {
        check_partition(ctx)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let aux = tile.aux::<f32>("aux")?;
        results.view_mut::<f32>("echo")?.assign(&aux);
        Ok(())
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let aux = frame.aux::<f32>("aux")?;
        if aux.shape() != [2] {
            return Err(UdfError::internal(format!("aux of a frame has shape {:?}", aux.shape())));
        }
        results.view_mut::<f32>("echo")?.assign(&aux);
        Ok(())
    }

    fn process_partition(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        self.process_tile(tile, results)
    }

    fn postprocess(&mut self, ctx: &Context, _: &mut Buffers) -> Result<()> {
        check_partition(ctx)
    }
}

udf_sdk::export_udf!(Aux);
