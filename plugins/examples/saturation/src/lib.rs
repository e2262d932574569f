//! A UDF that takes the dataset's native dtype (docs: `udf/advanced.rst`, "Preferred
//! input dtype", which has no code; LiberTEM's `UDF.USE_NATIVE_DTYPE`): the number of
//! saturated pixels of each frame of integer detector data.
//!
//! Buffer `saturated` (kind nav, uint32): the pixels of frame `n` that hold the largest
//! value of the data's integer dtype (65535 for uint16). Float data is refused.

use udf_sdk::prelude::*;

struct Saturation;

impl Udf for Saturation {
    fn declare() -> Declaration {
        Declaration::new("saturation", "Saturated pixels per frame of integer data")
            .native_dtype()
            .nav("saturated", DType::Uint32)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(Saturation)
    }

    fn process_tile(&mut self, tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        let counts: Vec<u32> = udf_sdk::with_numeric_type!(tile.dtype(), T => {
            if T::HIGHEST.to_parts().0.is_infinite() {
                return Err(UdfError::invalid_data("saturation needs integer data, found floats"));
            }
            let frames = tile.flat::<T>()?.chunks_exact(tile.frame_len().max(1));
            frames.map(|f| f.iter().filter(|&&v| v == T::HIGHEST).count() as u32).collect()
        }, return Err(UdfError::invalid_data("saturation needs integer data")));
        // A tile may hold only part of each frame: add its counts.
        let mut saturated = results.view_mut::<u32>("saturated")?;
        saturated.iter_mut().zip(counts).for_each(|(s, c)| *s += c);
        Ok(())
    }
}

udf_sdk::export_udf!(Saturation);
