use udf_sdk::prelude::*;

/// The sum of all frames (float32), in ~20 lines.
struct MySum;

impl Udf for MySum {
    fn describe() -> Description {
        Description::new("my-sum", "0.1.0", "Sum of all frames").custom_merge()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::sig("intensity", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(MySum)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let mut intensity = results.view_mut::<f32>("intensity")?;
        intensity += &tile.data::<f32>()?.sum_axis(Axis(0));
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let mut intensity = dest.view_mut::<f32>("intensity")?;
        intensity += &src.view::<f32>("intensity")?;
        Ok(())
    }
}

udf_sdk::export_udf!(MySum);
