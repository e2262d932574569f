//! `{{name}}`: the dot product of each frame with each mask of a stack — virtual detectors
//! (LiberTEM's `ApplyMasksUDF`, dense masks).
//!
//! Param `masks`: an array `(M, *frame shape)` of any real dtype. Buffer `intensity`: kind
//! nav, extra shape `(M,)`, float32, `intensity[n, m] = Σ_{y,x} F_n[y, x] · mask_m[y, x]`
//! (summed in float64). Frame method; nav buffers are merged by the host. Started from
//! `udf-host new --template masks`; the SDK's documentation: `cargo doc -p udf-sdk --open`.

use udf_sdk::prelude::*;

/// The plugin's name, as `udf-host inspect` and the results show it.
const NAME: &str = "{{name}}";

struct {{Type}} {
    /// The masks as float64, one after the other, each flattened like a frame.
    masks: Vec<f64>,
}

impl Udf for {{Type}} {
    fn describe() -> Description {
        let summary = "Dot products of each frame with a mask stack";
        Description::new(NAME, env!("CARGO_PKG_VERSION"), summary)
            .param(ParamSpec::array("masks", "mask stack (M, *frame shape)"))
            .methods(&[Method::Frame])
    }

    fn result_buffers(params: &Params, dataset: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        float32_input(dataset)?;
        let (count, _) = masks(params, dataset)?;
        let intensity = BufferDecl::nav("intensity", DType::Float32).extra_shape(&[count as u64]);
        Ok(vec![intensity])
    }

    fn new(ctx: &Context) -> Result<Self> {
        let (_, masks) = masks(ctx.params(), ctx.dataset())?;
        Ok({{Type}} { masks })
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let pixels = frame.flat::<f32>()?;
        // A nav buffer with extra shape (M,) seen from a frame: that frame's M values.
        let mut intensity = results.view_mut::<f32>("intensity")?;
        let masks = self.masks.chunks_exact(pixels.len());
        for (out, mask) in intensity.iter_mut().zip(masks) {
            let products = pixels.iter().zip(mask).map(|(&v, &m)| f64::from(v) * m);
            *out = products.sum::<f64>() as f32;
        }
        Ok(())
    }
}

/// The number of masks and their values (float64, flat), checked against the frame shape.
fn masks(params: &Params, dataset: &DatasetMeta) -> Result<(usize, Vec<f64>)> {
    let masks = params.array_f64("masks")?;
    let frame: Vec<usize> = dataset.sig_shape.iter().map(|&d| d as usize).collect();
    let shape = masks.shape();
    if shape.len() != frame.len() + 1 || shape[1..] != frame[..] || shape[0] == 0 {
        return Err(UdfError::bad_param(format!(
            "masks must be a stack of at least one mask of the frame shape, (M, {frame:?}), found the shape {shape:?}"
        )));
    }
    Ok((shape[0], masks.iter().copied().collect()))
}

{{float32_input}}
udf_sdk::export_udf!({{Type}});
