use udf_sdk::prelude::*;

/// The sum of all frames, in the input dtype, declared in one place.
struct MySum;

impl Udf for MySum {
    fn declare() -> Declaration {
        Declaration::new("my-sum", "Sum of all frames").sig("intensity", BufferDType::Input).merge(Merge::Add)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(MySum)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        results.accumulate("intensity", tile, Merge::Add) // the tile's part of the frame
    }
}

udf_sdk::export_udf!(MySum);
