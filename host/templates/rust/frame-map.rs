//! `{{name}}`: the mean of each frame, one value per scan position.
//!
//! Buffer `mean`: kind nav, float32, `mean[n] = Σ_{y,x} F_n[y, x] / (frame pixels)`. Frame
//! method: each call sees one whole frame; nav buffers are merged by the host. Started from
//! `udf-host new --template frame-map`; the SDK's documentation: `cargo doc -p udf-sdk --open`.

use udf_sdk::prelude::*;

/// The plugin's name, as `udf-host inspect` and the results show it.
const NAME: &str = "{{name}}";

struct {{Type}};

impl Udf for {{Type}} {
    fn describe() -> Description {
        let summary = "Mean of each frame";
        Description::new(NAME, env!("CARGO_PKG_VERSION"), summary).methods(&[Method::Frame])
    }

    fn result_buffers(_: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        float32_input(dataset)?;
        Ok(vec![BufferDecl::nav("mean", DType::Float32)])
    }

    fn new(_: &Context) -> Result<Self> {
        Ok({{Type}})
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let pixels = frame.flat::<f32>()?;
        let sum: f64 = pixels.iter().map(|&v| f64::from(v)).sum();
        // A nav buffer seen from a frame is that frame's entry: shape (1,).
        let mean = (sum / pixels.len() as f64) as f32;
        results.view_mut::<f32>("mean")?.fill(mean);
        Ok(())
    }
}

{{float32_input}}
udf_sdk::export_udf!({{Type}});
