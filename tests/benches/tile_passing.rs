//! How fast does a tile get into a guest? Typed `list<f32>` against raw `list<u8>`,
//! transfer alone and transfer plus a sum, at several tile sizes, hot in cache.
//!
//! `cargo bench -p udf-host-tests --bench tile_passing` — results in docs/tile-passing.md.

use std::time::Instant;
use wasmtime::component::{Component, Linker, ResourceTable};
use wasmtime::{Config, Engine, Store};
use wasmtime_wasi::{WasiCtx, WasiCtxView, WasiView};

wasmtime::component::bindgen!({
    path: "probes/tile_passing/wit",
    world: "tiles",
});

struct State {
    wasi: WasiCtx,
    table: ResourceTable,
}

impl WasiView for State {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView { ctx: &mut self.wasi, table: &mut self.table }
    }
}

fn main() -> wasmtime::Result<()> {
    let mut config = Config::new();
    config.concurrency_support(false);
    let engine = Engine::new(&config)?;
    let wasm = udf_host_tests::plugin("probe_tile_passing");
    let component = Component::from_file(&engine, &wasm)?;
    let mut linker = Linker::new(&engine);
    wasmtime_wasi::p2::add_to_linker_sync(&mut linker)?;
    let mut store = Store::new(&engine, State { wasi: WasiCtx::builder().build(), table: ResourceTable::new() });
    let tiles = Tiles::instantiate(&mut store, &component, &linker)?;

    println!(
        "| tile | transfer f32 | transfer bytes | f32 + sum | bytes + sum | host memcpy | guest alignment (f32, bytes) |"
    );
    println!("|---|---|---|---|---|---|---|");
    for kib in [64usize, 256, 1024, 4096, 16384] {
        let n = kib * 1024 / 4;
        let floats: Vec<f32> = (0..n).map(|i| (i % 7) as f32).collect();
        let bytes: Vec<u8> = bytemuck::cast_slice(&floats).to_vec();
        let expected: f32 = floats.iter().sum();
        let reps = (256 * 1024 / kib).max(8);
        let gbps = |seconds: f64| (kib * 1024 * reps) as f64 / seconds / 1e9;
        let time = |f: &mut dyn FnMut()| {
            f();
            let t = Instant::now();
            for _ in 0..reps {
                f();
            }
            t.elapsed().as_secs_f64()
        };
        let t_touch_f32 = time(&mut || {
            tiles.call_touch_f32(&mut store, &floats).unwrap();
        });
        let t_touch_bytes = time(&mut || {
            tiles.call_touch_bytes(&mut store, &bytes).unwrap();
        });
        let mut align = (0, 0);
        let t_sum_f32 = time(&mut || {
            let (s, a) = tiles.call_take_f32(&mut store, &floats).unwrap();
            assert!((s - expected).abs() <= 1e-3 * expected.abs());
            align.0 = a;
        });
        let t_sum_bytes = time(&mut || {
            let (s, a) = tiles.call_take_bytes(&mut store, &bytes).unwrap();
            assert!((s - expected).abs() <= 1e-3 * expected.abs());
            align.1 = a;
        });
        let mut dst = vec![0u8; bytes.len()];
        let t_memcpy = time(&mut || {
            dst.copy_from_slice(std::hint::black_box(&bytes));
            std::hint::black_box(&dst);
        });
        println!(
            "| {kib} KiB | {:.1} GB/s | {:.1} GB/s | {:.1} GB/s | {:.1} GB/s | {:.1} GB/s | {}, {} |",
            gbps(t_touch_f32),
            gbps(t_touch_bytes),
            gbps(t_sum_f32),
            gbps(t_sum_bytes),
            gbps(t_memcpy),
            align.0,
            align.1
        );
    }
    Ok(())
}
