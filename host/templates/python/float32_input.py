def float32_input(dataset):
    """The description asks for float32 tiles; float64 or complex data still arrive as such."""
    if dataset.input_dtype != "float32":
        raise udf.UdfError.invalid_data(f"{{name}} handles float32 input only, found {dataset.input_dtype}")
