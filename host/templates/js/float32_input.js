// The description asks for float32 tiles; float64 or complex data still arrive as such.
function float32Input(dataset) {
  if (dataset.inputDtype !== 'float32') {
    throw sdk.UdfError.invalidData(`{{name}} handles float32 input only, found ${dataset.inputDtype}`);
  }
}
