//! The SDK's documented example (`guest-sdk/examples/my_sum.rs`), unchanged.
include!("../../../../guest-sdk/examples/my_sum.rs");
