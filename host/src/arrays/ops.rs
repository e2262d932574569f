//! The operations of host arrays: **the one table** (STYLE.md habit 12).
//!
//! Every face of the array interface — the WIT enums (`wit/udf.wit`, interface
//! `arrays`), this executor, the SDKs (Rust `udf_sdk::Array`, Python `xp`, JavaScript,
//! C, Zig) and the docs (`docs/contract.md`) — names the same operations. They are
//! listed once, here. Tests hold two faces to these lists, so an operation added here
//! and forgotten there fails them: the WIT enums (`wit_enums_follow_the_table` in
//! `host/src/wasm/arrays.rs`) and the C SDK's enums (`c_sdk_array_enums_follow_the_one_table`
//! in `tests/all/polyglot.rs`); the other SDKs and the docs are kept by hand.
//!
//! Names are the Python array API standard's (NumPy 2's), with `_` where WIT writes `-`.

/// Defines an enum of operations with its NumPy names, its WIT names and `ALL`.
macro_rules! operation_table {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $numpy:literal),* $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)*
        }

        impl $name {
            /// Every operation, in the order of the WIT enum.
            pub const ALL: &'static [$name] = &[$($name::$variant),*];

            /// The array API / NumPy name (`logical_not`).
            pub fn name(self) -> &'static str {
                match self {
                    $($name::$variant => $numpy,)*
                }
            }

            /// The WIT enum case (`logical-not`).
            pub fn wit_name(self) -> String {
                self.name().replace('_', "-")
            }

            /// The operation with this array API name.
            pub fn from_name(name: &str) -> Option<$name> {
                Self::ALL.iter().copied().find(|op| op.name() == name)
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

operation_table! {
    /// Elementwise functions of one array.
    UnaryOp {
        Abs => "abs",
        Negative => "negative",
        Positive => "positive",
        Square => "square",
        Sqrt => "sqrt",
        Exp => "exp",
        Expm1 => "expm1",
        Log => "log",
        Log1p => "log1p",
        Log2 => "log2",
        Log10 => "log10",
        Sin => "sin",
        Cos => "cos",
        Tan => "tan",
        Asin => "asin",
        Acos => "acos",
        Atan => "atan",
        Sinh => "sinh",
        Cosh => "cosh",
        Tanh => "tanh",
        Asinh => "asinh",
        Acosh => "acosh",
        Atanh => "atanh",
        Floor => "floor",
        Ceil => "ceil",
        Trunc => "trunc",
        Round => "round",
        Sign => "sign",
        Isnan => "isnan",
        Isinf => "isinf",
        Isfinite => "isfinite",
        LogicalNot => "logical_not",
        BitwiseInvert => "bitwise_invert",
        Real => "real",
        Imag => "imag",
        Conj => "conj",
    }
}

operation_table! {
    /// Elementwise functions of two arrays (broadcast against each other).
    BinaryOp {
        Add => "add",
        Subtract => "subtract",
        Multiply => "multiply",
        Divide => "divide",
        FloorDivide => "floor_divide",
        Remainder => "remainder",
        Pow => "pow",
        Maximum => "maximum",
        Minimum => "minimum",
        Equal => "equal",
        NotEqual => "not_equal",
        Less => "less",
        LessEqual => "less_equal",
        Greater => "greater",
        GreaterEqual => "greater_equal",
        LogicalAnd => "logical_and",
        LogicalOr => "logical_or",
        LogicalXor => "logical_xor",
        BitwiseAnd => "bitwise_and",
        BitwiseOr => "bitwise_or",
        BitwiseXor => "bitwise_xor",
        BitwiseLeftShift => "bitwise_left_shift",
        BitwiseRightShift => "bitwise_right_shift",
        Atan2 => "atan2",
        Hypot => "hypot",
        Copysign => "copysign",
    }
}

operation_table! {
    /// Reductions over some axes (or all).
    ReduceOp {
        Sum => "sum",
        Prod => "prod",
        Mean => "mean",
        Min => "min",
        Max => "max",
        Var => "var",
        Std => "std",
        Argmin => "argmin",
        Argmax => "argmax",
        Any => "any",
        All => "all",
        CountNonzero => "count_nonzero",
        Nansum => "nansum",
        Nanmean => "nanmean",
        Nanmin => "nanmin",
        Nanmax => "nanmax",
        Nanvar => "nanvar",
        Nanstd => "nanstd",
    }
}

operation_table! {
    /// Fourier transforms and their helpers (over the given axes; default the last two).
    FftOp {
        Fft2 => "fft2",
        Ifft2 => "ifft2",
        Rfft2 => "rfft2",
        Irfft2 => "irfft2",
        Fftshift => "fftshift",
        Ifftshift => "ifftshift",
    }
}

/// The other functions of the interface (constructors, views, products, writes), by
/// their array API / NumPy names: each is a function or method of its own in the WIT
/// and the SDKs.
pub const FUNCTIONS: &[&str] = &[
    "zeros",
    "full",
    "arange",
    "linspace",
    "eye",
    "asarray",
    "astype",
    "reshape",
    "permute_dims",
    "broadcast_to",
    "expand_dims",
    "squeeze",
    "getitem",
    "take",
    "setitem",
    "add_at",
    "where",
    "clip",
    "matmul",
    "tensordot",
    "vecdot",
    "concat",
    "stack",
    "to_bytes",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_unique() {
        let mut seen = std::collections::HashSet::new();
        for op in UnaryOp::ALL {
            assert_eq!(UnaryOp::from_name(op.name()), Some(*op));
            assert!(seen.insert(op.name()));
        }
        for op in BinaryOp::ALL {
            assert_eq!(BinaryOp::from_name(op.name()), Some(*op));
            assert!(seen.insert(op.name()));
        }
        for op in ReduceOp::ALL {
            assert_eq!(ReduceOp::from_name(op.name()), Some(*op));
            assert!(seen.insert(op.name()));
        }
        assert_eq!(BinaryOp::FloorDivide.wit_name(), "floor-divide");
    }
}
