/// The description asks for float32 tiles; float64 or complex data still arrive as such.
fn float32_input(dataset: &DatasetMeta) -> Result<()> {
    match dataset.input_dtype {
        DType::Float32 => Ok(()),
        other => Err(UdfError::invalid_data(format!(
            "{NAME} handles float32 input only, found {}",
            udf_sdk::dtype_name(other)
        ))),
    }
}
