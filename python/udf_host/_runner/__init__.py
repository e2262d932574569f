"""udf-host's Python runner: its sources (they run inside the sandbox, never here; the
runner's modules are top-level there) and `build`, which makes the component from them."""
