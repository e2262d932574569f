//! Each kernel's arguments, declared once: from one declaration come the Rust struct a
//! consumer fills, its launch (the arguments pushed in the declared order), and the
//! CUDA C `extern "C"` entry points that call the kernel's template in `kernels.cu`
//! (the `INSTANTIATE(S, F)` macro that [`super::instantiations`] defines). An argument
//! cannot be left out, added or reordered on one side only.
//!
//! An argument is `name: val TYPE = "C type"` (a scalar, pushed by reference),
//! `name: buf TYPE = "C type"` (a device buffer read) or `name: out TYPE = "C type"`
//! (a device buffer written); `S` is the tile's element type, `F` the float type.

macro_rules! kernel_args {
    ($(
        $(#[$doc:meta])*
        $args:ident [$(($entry:literal, $call:literal)),+ $(,)?] {
            $first:ident : $first_kind:ident $first_ty:ty = $first_c:literal
            $(, $field:ident : $kind:ident $ty:ty = $c:literal)* $(,)?
        }
    )*) => {
        $(
            $(#[$doc])*
            #[cfg(any(feature = "cuda", feature = "cuda13"))]
            pub(crate) struct $args<'a> {
                pub $first: $first_ty,
                $(pub $field: $ty,)*
            }

            #[cfg(any(feature = "cuda", feature = "cuda13"))]
            impl $args<'_> {
                /// Launch `function` (one of this declaration's entry points) with these
                /// arguments on `stream`.
                ///
                /// # Safety
                /// The buffers must be as large as the kernel indexes them for these
                /// scalars (each caller says why they are).
                pub(crate) unsafe fn launch(
                    self,
                    stream: &std::sync::Arc<cudarc::driver::CudaStream>,
                    function: &cudarc::driver::CudaFunction,
                    config: cudarc::driver::LaunchConfig,
                ) -> Result<(), cudarc::driver::DriverError> {
                    use cudarc::driver::PushKernelArg;
                    let mut builder = stream.launch_builder(function);
                    push_arg!(builder, $first_kind, self.$first);
                    $(push_arg!(builder, $kind, self.$field);)*
                    // SAFETY: the arguments are pushed in the order of the entry point's
                    // parameters (both come from this declaration); the caller vouches
                    // for the sizes.
                    unsafe { builder.launch(config) }.map(drop)
                }
            }
        )*

        /// Every kernel's name (its entry points are `<name>_<S>_<F>`).
        pub const KERNEL_NAMES: &[&str] = &[$($($entry),+),*];

        /// Each declaration: its entry points `(name, template call)`, its C parameter
        /// list and its C argument list.
        const DECLARATIONS: &[(&[(&str, &str)], &str, &str)] = &[$((
            &[$(($entry, $call)),+],
            concat!($first_c, " ", stringify!($first) $(, ", ", $c, " ", stringify!($field))*),
            concat!(stringify!($first) $(, ", ", stringify!($field))*),
        )),*];
    };
}

#[cfg(any(feature = "cuda", feature = "cuda13"))]
macro_rules! push_arg {
    ($builder:ident, val, $value:expr) => {
        $builder.arg(&$value)
    };
    ($builder:ident, buf, $value:expr) => {
        $builder.arg($value)
    };
    ($builder:ident, out, $value:expr) => {
        $builder.arg($value)
    };
}

#[cfg(any(feature = "cuda", feature = "cuda13"))]
use cudarc::driver::CudaSlice;

kernel_args! {
    /// `sum_impl`: `acc[pos(i)] += Σ_f tile[f, i]` over groups of `group_frames` frames.
    SumArgs [("sum", "sum_impl<S, F>")] {
        tile: buf &'a CudaSlice<u8> = "const S*",
        frames: val u32 = "unsigned int",
        slice_len: val u32 = "unsigned int",
        starts: buf &'a CudaSlice<u32> = "const unsigned int*",
        run_len: val u32 = "unsigned int",
        group_frames: val u32 = "unsigned int",
        acc: out &'a mut CudaSlice<f64> = "double*",
    }

    /// `sumsig_impl`: `acc[row0 + f] += Σ_i tile[f, i]`.
    SumSigArgs [("sumsig", "sumsig_impl<S, F>")] {
        tile: buf &'a CudaSlice<u8> = "const S*",
        frames: val u32 = "unsigned int",
        slice_len: val u32 = "unsigned int",
        row0: val u32 = "unsigned int",
        acc: out &'a mut CudaSlice<f64> = "double*",
    }

    /// `stddev_impl`: per-pixel sums and varsums, `n0` frames merged before.
    StdDevArgs [("stddev", "stddev_impl<S>")] {
        tile: buf &'a CudaSlice<u8> = "const S*",
        frames: val u32 = "unsigned int",
        slice_len: val u32 = "unsigned int",
        starts: buf &'a CudaSlice<u32> = "const unsigned int*",
        run_len: val u32 = "unsigned int",
        n0: val u64 = "unsigned long long",
        sum: out &'a mut CudaSlice<f64> = "double*",
        varsum: out &'a mut CudaSlice<f64> = "double*",
    }

    /// `masks_impl`: products of the frames with masks `m0..` (frames per block, masks
    /// per pass).
    MasksArgs [
        ("masks1", "masks_impl<S, F, 8, 1>"),
        ("masks4", "masks_impl<S, F, 8, 4>"),
        ("masks16", "masks_impl<S, F, 4, 16>"),
        ("masks32", "masks_impl<S, F, 2, 32>"),
    ] {
        tile: buf &'a CudaSlice<u8> = "const S*",
        frames: val u32 = "unsigned int",
        slice_len: val u32 = "unsigned int",
        masks: buf &'a CudaSlice<u8> = "const F*",
        m_count: val u32 = "unsigned int",
        m0: val u32 = "unsigned int",
        skip_zero: val i32 = "int",
        out: out &'a mut CudaSlice<f64> = "double*",
        row0: val u32 = "unsigned int",
        width: val u32 = "unsigned int",
    }

    /// `radial_impl`: products with a mask computed from the pixel position (one, or
    /// three weighted ones for CoM).
    RadialArgs [
        ("radial1", "radial_impl<S, F, 8, false>"),
        ("radial3", "radial_impl<S, F, 8, true>"),
    ] {
        tile: buf &'a CudaSlice<u8> = "const S*",
        frames: val u32 = "unsigned int",
        slice_len: val u32 = "unsigned int",
        starts: buf &'a CudaSlice<u32> = "const unsigned int*",
        run_len: val u32 = "unsigned int",
        sx: val u32 = "unsigned int",
        cy: val f64 = "double",
        cx: val f64 = "double",
        ri2: val f64 = "double",
        ro2: val f64 = "double",
        skip_zero: val i32 = "int",
        out: out &'a mut CudaSlice<f64> = "double*",
        row0: val u32 = "unsigned int",
    }

    /// `to_f32_impl`: `n` tile elements as float32 (for the cuBLAS product).
    ToF32Args [("to_f32", "to_f32_impl<S>")] {
        input: buf &'a CudaSlice<u8> = "const S*",
        n: val u64 = "unsigned long long",
        out: out &'a mut CudaSlice<f32> = "float*",
    }
}

/// `#define INSTANTIATE(S, F)`: every kernel's `extern "C"` entry point for tiles of `S`
/// computed in `F`, calling its template in `kernels.cu`.
pub fn instantiate_macro() -> String {
    let mut out = String::from("#define INSTANTIATE(S, F) \\\n");
    for (entries, params, args) in DECLARATIONS {
        for (name, call) in *entries {
            out.push_str(&format!(
                "    extern \"C\" __global__ void __launch_bounds__(THREADS) {name}_##S##_##F({params}) {{ {call}({args}); }} \\\n"
            ));
        }
    }
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_entry_point_is_in_the_macro_with_its_parameters() {
        let text = instantiate_macro();
        assert!(text.contains(
            "sum_##S##_##F(const S* tile, unsigned int frames, unsigned int slice_len, const unsigned int* starts, \
             unsigned int run_len, unsigned int group_frames, double* acc) { sum_impl<S, F>(tile, frames, slice_len, \
             starts, run_len, group_frames, acc); }"
        ));
        assert!(text.contains("masks16_##S##_##F(") && text.contains("masks_impl<S, F, 4, 16>(tile, frames"));
        assert!(text.contains("to_f32_##S##_##F(const S* input, unsigned long long n, float* out)"));
        assert_eq!(KERNEL_NAMES.len(), 10);
        for name in KERNEL_NAMES {
            assert_eq!(text.matches(&format!(" {name}_##S##_##F(")).count(), 1, "{name}");
        }
    }
}
