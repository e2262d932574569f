//! `{{name}}`: the sum of all frames (LiberTEM's `SumUDF`).
//!
//! Buffer `intensity`: kind sig, float32, `intensity[y, x] = Σ_n F_n[y, x]`. Tile method:
//! each call adds a tile's frames into its part of the frame; the host merges partitions
//! with `merge`. The tile stays in the host (`use_host_tiles`): its sum over frames is one
//! host call on an [`Array`] at the host's native speed, and only that sum is copied into
//! the plugin. Started from `udf-host new --template sum`; the SDK's documentation:
//! `cargo doc -p udf-sdk --open`.

use udf_sdk::array::{Array, use_host_tiles};
use udf_sdk::prelude::*;

/// The plugin's name, as `udf-host inspect` and the results show it.
const NAME: &str = "{{name}}";

struct {{Type}};

impl Udf for {{Type}} {
    fn describe() -> Description {
        use_host_tiles(); // `process_tile` gets the tile as `Array::tile()`, not as data
        Description::new(NAME, env!("CARGO_PKG_VERSION"), "Sum of all frames").custom_merge()
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        float32_input(dataset)?;
        Ok(vec![BufferDecl::sig("intensity", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok({{Type}})
    }

    fn process_tile(&mut self, _tile: &Tile<'_>, results: &mut Buffers) -> Result<()> {
        // The tile is (frames, its part of the frame); `intensity` is seen as that part.
        let part = Array::tile()?.sum(Some(&[0]))?.to_vec::<f32>()?;
        let mut intensity = results.view_mut::<f32>("intensity")?;
        intensity.iter_mut().zip(part).for_each(|(o, v)| *o += v);
        Ok(())
    }

    fn merge(_: &MergeContext, dest: &mut Buffers, src: &Buffers) -> Result<()> {
        let mut intensity = dest.view_mut::<f32>("intensity")?;
        intensity += &src.view::<f32>("intensity")?;
        Ok(())
    }
}

{{float32_input}}
udf_sdk::export_udf!({{Type}});
