//! Use udf-host as a library: plan a run and iterate over the partial results after
//! every merged partition (LiberTEM's `run_udf_iter`). `RunIter::update_params` would
//! change parameters for the partitions that start later.
//!
//! ```sh
//! cargo run -p udf-host --example partial_results -- PLUGIN.wasm DATA.npy [NAME=VALUE...]
//! ```
//!
//! For every merged partition it prints how much of the scan is merged and, for each
//! result buffer, the mean over its valid elements so far.

use std::sync::Arc;
use udf_host::exec::{Run, RunOptions, UdfSpec};
use udf_host::udf::{Param, Params, Udf};
use udf_host::wasm::{RuntimeOptions, WasmRuntime};

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let (Some(plugin), Some(data)) = (args.next(), args.next()) else {
        anyhow::bail!("usage: partial_results PLUGIN.wasm DATA.npy [NAME=VALUE...]");
    };
    let runtime = WasmRuntime::new(RuntimeOptions::default())?;
    let (udf, _) = runtime.load(plugin.as_ref())?;
    let mut params = Params::default();
    for pair in args {
        let (name, value) = pair.split_once('=').ok_or_else(|| anyhow::anyhow!("expected NAME=VALUE, got {pair}"))?;
        let spec = udf
            .description()
            .params
            .iter()
            .find(|s| s.name == name)
            .ok_or_else(|| anyhow::anyhow!("'{}' has no parameter '{name}'", udf.description().name))?;
        params.0.push(Param {
            name: name.into(),
            value: udf_host::params::parse_value(spec, value).map_err(anyhow::Error::msg)?,
        });
    }
    let dataset = udf_host::dataset::open(data.as_ref(), &Default::default())?;
    let spec = UdfSpec { udf: Arc::new(udf), params };
    let run = Run::plan(dataset, vec![spec], RunOptions { partitions: Some(8), ..Default::default() })?;
    println!("tile shape {:?}, {} partitions", run.tiling().tile_shape(), run.partitions().len());

    let mut iter = run.iter();
    while let Some(step) = iter.next() {
        let step = step?;
        let partial = iter.results()?;
        let merged = iter.damage().iter().filter(|&&d| d).count();
        print!("partition {:>3} merged ({}/{}), {merged} frames:", step.partition, step.merged, step.total);
        for buffer in &partial.udfs[0].buffers {
            let mean = valid_mean(buffer);
            print!("  {} mean {mean:.4}", buffer.name);
        }
        println!();
    }
    let done = iter.results()?;
    println!("done: {} frames, {:.2} GB/s", done.stats.frames, done.stats.throughput_gbps());
    Ok(())
}

/// Mean of the valid elements of a real-valued buffer (NaN if none, or complex).
fn valid_mean(buffer: &udf_host::exec::ResultBuffer) -> f64 {
    use udf_host::dtype::DType;
    let valid = buffer.valid.to_bools().unwrap_or_default();
    let values: Vec<f64> = match buffer.data.dtype() {
        DType::F32 => buffer.data.as_slice::<f32>().unwrap_or_default().iter().map(|&v| f64::from(v)).collect(),
        DType::F64 => buffer.data.as_slice::<f64>().unwrap_or_default().to_vec(),
        DType::U32 => buffer.data.as_slice::<u32>().unwrap_or_default().iter().map(|&v| f64::from(v)).collect(),
        DType::U64 => buffer.data.as_slice::<u64>().unwrap_or_default().iter().map(|&v| v as f64).collect(),
        DType::I64 => buffer.data.as_slice::<i64>().unwrap_or_default().iter().map(|&v| v as f64).collect(),
        _ => return f64::NAN,
    };
    let (sum, n) = values.iter().zip(&valid).filter(|(_, v)| **v).fold((0.0, 0), |(s, n), (x, _)| (s + x, n + 1));
    if n == 0 { f64::NAN } else { sum / f64::from(n) }
}
