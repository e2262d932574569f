//! The SDK's documented example (`guest-sdk/examples/short_sum.rs`, also in the README), unchanged.
include!("../../../../guest-sdk/examples/short_sum.rs");
