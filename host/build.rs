//! Refuses the `cuda` and `cuda13` features together, with a message that says why. (The
//! `compile_error!` in src/cuda/mod.rs says the same, but cudarc, compiled first, fails
//! with two sets of CUDA bindings before it could be seen.)

fn main() {
    println!("cargo::rerun-if-changed=build.rs");
    if std::env::var_os("CARGO_FEATURE_CUDA").is_some() && std::env::var_os("CARGO_FEATURE_CUDA13").is_some() {
        println!(
            "cargo::error=the `cuda` (CUDA 12) and `cuda13` (CUDA 13) features of udf-host exclude each other: \
             cudarc's CUDA-version features are not additive; build with one of them (docs/gpu.md)"
        );
    }
}
