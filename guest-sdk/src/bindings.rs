//! Guest bindings generated from `wit/udf.wit` (as the host has its own in
//! `host/src/wasm/bindings.rs`). The SDK's modules import the contract's types from here;
//! plugins see them through the crate root and the prelude.

wit_bindgen::generate!({
    path: "../wit",
    world: "udf-plugin",
    pub_export_macro: true,
    export_macro_name: "export_udf_bindings",
    default_bindings_module: "udf_sdk::bindings",
    additional_derives: [PartialEq],
    // Operands hold borrowed array handles, which have no equality.
    additional_derives_ignore: ["operand"],
});
