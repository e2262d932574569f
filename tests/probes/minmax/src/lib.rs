//! Probe: per-pixel minimum and maximum over frames, whose buffers need a non-zero
//! neutral element — set in `preprocess`, which therefore also runs on the main side
//! (`main_preprocess`) to initialise the merged state. Param `main` (bool, default true)
//! turns that flag's effect off by skipping the initialisation on the main side, to show
//! what goes wrong without it.

use udf_sdk::prelude::*;

struct MinMax;

impl Udf for MinMax {
    fn describe() -> Description {
        Description::new("minmax", "0.1.0", "Per-pixel min and max over all frames")
            .param(ParamSpec::boolean("main", "initialise the merged buffers in preprocess").default(true))
            .custom_merge()
            .main_preprocess()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::sig("min", DType::Float32), BufferDecl::sig("max", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(MinMax)
    }

    fn preprocess(&mut self, ctx: &Context, results: &mut Buffers) -> Result<()> {
        if ctx.partition().is_none() && !ctx.params().boolean("main")? {
            return Ok(());
        }
        results.view_mut::<f32>("min")?.fill(f32::INFINITY);
        results.view_mut::<f32>("max")?.fill(f32::NEG_INFINITY);
        Ok(())
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let data = tile.data::<f32>()?;
        let [min, max] = results.many_mut(["min", "max"])?;
        let (mut min, mut max) = (min.view_mut::<f32>()?, max.view_mut::<f32>()?);
        for frame in data.outer_iter() {
            Zip::from(&mut min).and(&mut max).and(&frame).for_each(|lo, hi, &x| {
                *lo = lo.min(x);
                *hi = hi.max(x);
            });
        }
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        Zip::from(&mut dest.view_mut::<f32>("min")?).and(&src.view::<f32>("min")?).for_each(|a, &b| *a = a.min(b));
        Zip::from(&mut dest.view_mut::<f32>("max")?).and(&src.view::<f32>("max")?).for_each(|a, &b| *a = a.max(b));
        Ok(())
    }
}

udf_sdk::export_udf!(MinMax);
