//! Probe: a slow plugin, for watching a run while it goes on (`--snapshot-every`).
//!
//! Param `spin`: busy-loop iterations per frame (the sandbox has no clock to sleep on);
//! `label`: any text, unused (shows that reports escape what plugins are given).
//! Buffer `intensity`: nav, float32, the sum of each frame (like `sumsig`).

use udf_sdk::prelude::*;

struct Slow {
    spin: u64,
}

impl Udf for Slow {
    fn describe() -> Description {
        Description::new("slow", "0.1.0", "Sums each frame, slowly")
            .param(ParamSpec::int("spin", "busy-loop iterations per frame").default(0))
            .param(ParamSpec::text("label", "any text, unused").default(""))
            .methods(&[Method::Frame])
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("intensity", DType::Float32)])
    }

    fn new(ctx: &Context) -> Result<Self> {
        let spin = ctx.params().int("spin")?;
        let spin = u64::try_from(spin).map_err(|_| UdfError::bad_param(format!("spin must be >= 0, got {spin}")))?;
        Ok(Slow { spin })
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let mut x = 0u64;
        for i in 0..self.spin {
            x = std::hint::black_box(x.wrapping_add(i));
        }
        let sum: f32 = frame.flat::<f32>()?.iter().sum();
        results.view_mut::<f32>("intensity")?.fill(sum);
        Ok(())
    }
}

udf_sdk::export_udf!(Slow);
