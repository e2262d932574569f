//! Probe: fails on purpose at a chosen frame, to test how the host reports failures.
//!
//! Params: `mode` = `panic` (trap) | `error` (typed error) | `spin` (loop forever) |
//! `grow` (allocate until memory runs out) | `none`; `frame` = the true flat nav index at
//! which to fail. Buffer `seen`: nav, uint8, 1 for each processed frame.

use udf_sdk::prelude::*;

struct Trap {
    mode: String,
    frame: u64,
}

impl Udf for Trap {
    fn describe() -> Description {
        Description::new("trap", "0.1.0", "Fails on purpose at a chosen frame")
            .param(ParamSpec::text("mode", "panic | error | spin | grow | none").default("panic"))
            .param(ParamSpec::int("frame", "true flat nav index to fail at").default(0))
            .methods(&[Method::Frame])
            .native_dtype()
    }

    fn result_buffers(_: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>> {
        Ok(vec![BufferDecl::nav("seen", DType::Uint8)])
    }

    fn new(ctx: &Context) -> Result<Self> {
        let mode = ctx.params().text("mode")?.to_owned();
        if !["panic", "error", "spin", "grow", "none"].contains(&mode.as_str()) {
            return Err(UdfError::bad_param(format!("mode '{mode}' is not panic, error, spin, grow or none")));
        }
        Ok(Trap { mode, frame: ctx.params().int("frame")? as u64 })
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        let index = frame.true_nav_index();
        if index == self.frame {
            udf_sdk::log!(info, "about to fail at frame {index}");
            match self.mode.as_str() {
                "panic" => panic!("probe panics at frame {index}"),
                "error" => return Err(UdfError::invalid_data(format!("probe rejects frame {index}"))),
                "spin" => {
                    let mut x = 0u64;
                    loop {
                        x = std::hint::black_box(x.wrapping_add(1));
                    }
                }
                "grow" => {
                    let mut hoard: Vec<Vec<u8>> = Vec::new();
                    loop {
                        hoard.push(vec![1; 16 << 20]);
                        std::hint::black_box(&hoard);
                    }
                }
                _ => {}
            }
        }
        results.view_mut::<u8>("seen")?.fill(1);
        Ok(())
    }
}

udf_sdk::export_udf!(Trap);
