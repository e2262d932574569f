//! The SDK's documented example (`guest-sdk/examples/frame_map.rs`, also in the README), unchanged.
include!("../../../../guest-sdk/examples/frame_map.rs");
