//! Host bindings generated from `wit/udf.wit`.
//!
//! Parameters borrow (`TileParam<'_>` holds `&[f32]`), so a tile goes from the host's
//! buffer into guest memory with one copy.

wasmtime::component::bindgen!({
    path: "../wit",
    world: "udf-plugin",
    ownership: Borrowing { duplicate_if_necessary: true },
    with: { "udf:plugin/arrays.array": crate::arrays::HostArray },
});
