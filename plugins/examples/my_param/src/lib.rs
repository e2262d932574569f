//! LiberTEM's `MyParamUDF` (docs: `udf/basic.rst`, "Declaring a constructor"): a
//! parameter with a default value, mirrored in a result buffer.
//!
//! Param `my_param` (text, default `"Eins, zwei drei!"`). Buffer `demo` (kind single,
//! uint8, shape `(len(my_param),)`): the parameter's UTF-8 bytes (LiberTEM stores the
//! Python object in a `dtype=object` buffer; the contract's buffers hold numbers).

use udf_sdk::prelude::*;

struct MyParamUdf;

impl Udf for MyParamUdf {
    fn declare() -> Declaration {
        Declaration::new("my-param", "Mirrors its parameter in the demo buffer")
            .method(Method::Frame)
            .param(ParamSpec::text("my_param", "mirrored in the demo buffer").default("Eins, zwei drei!"))
            .single("demo", DType::Uint8)
            .extra_shape_with(|params, _| Ok(vec![params.text("my_param")?.len() as u64]))
            .merge(Merge::Assign)
    }

    fn new(_: &Context) -> Result<Self> {
        Ok(MyParamUdf)
    }

    fn process_frame(&mut self, frame: &Frame<'_>, results: &mut Buffers) -> Result<()> {
        results.assign("demo", frame.context().params().text("my_param")?.as_bytes())
    }
}

udf_sdk::export_udf!(MyParamUdf);
