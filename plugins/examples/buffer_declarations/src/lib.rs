//! The buffer declarations of LiberTEM's docs (`udf/basic.rst`, "Declaring buffers"),
//! run as the docs' test does: a UDF whose `process_frame` and `merge` do nothing.
//!
//! Buffers, all float32 and zero: `nav_buffer` (kind nav, extra shape `(3, 2)`),
//! `sig_buffer` (kind sig, extra shape `(2,)`), `single_buffer` (kind single, shape
//! `(16, 16)`).

use udf_sdk::prelude::*;

struct BufferDeclarations;

impl Udf for BufferDeclarations {
    fn declare() -> Declaration {
        Declaration::new("buffer-declarations", "The buffer declarations of LiberTEM's docs")
            .method(Method::Frame)
            .nav("nav_buffer", DType::Float32)
            .extra_shape(&[3, 2])
            .sig("sig_buffer", DType::Float32)
            .extra_shape(&[2])
            .merge(Merge::Add)
            .single("single_buffer", DType::Float32)
            .extra_shape(&[16, 16])
            .merge(Merge::Add)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(BufferDeclarations)
    }

    fn process_frame(&mut self, _: &Frame<'_>, _: &mut Buffers) -> Result<()> {
        Ok(())
    }
}

udf_sdk::export_udf!(BufferDeclarations);
