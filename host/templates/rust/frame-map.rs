//! `{{name}}`: the mean of each frame, one value per scan position.
//!
//! Buffer `mean`: kind nav, float32, `mean[n] = Σ_{y,x} F_n[y, x] / (frame pixels)`. Frame
//! method: each call sees one whole frame; nav buffers are merged by the host. Started from
//! `udf-host new --template frame-map`; the SDK's documentation: `cargo doc -p udf-sdk --open`.

use udf_sdk::prelude::*;

struct {{Type}};

impl Udf for {{Type}} {
    fn describe() -> Description {
        Description::new("{{name}}", env!("CARGO_PKG_VERSION"), "Mean of each frame").methods(&[Method::Frame])
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
        results.view_mut::<f32>("mean")?.fill((sum / pixels.len() as f64) as f32);
        Ok(())
    }
}

/// The description asks for float32 tiles; float64 or complex data still arrive as such.
fn float32_input(dataset: &DatasetMeta) -> Result<()> {
    match dataset.input_dtype {
        DType::Float32 => Ok(()),
        other => Err(UdfError::invalid_data(format!(
            "{{name}} handles float32 input only, found {}",
            udf_sdk::dtype_name(other)
        ))),
    }
}

udf_sdk::export_udf!({{Type}});
