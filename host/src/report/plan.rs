//! The plan of a run in words: what `udf-host run -v` prints before it starts.

use crate::cuda::Device;
use crate::exec::Run;
use std::fmt::Write;

/// The dataset, the input dtype, partitions, threads and tiling, each UDF's method and
/// buffers, and — when the run asks for a GPU (`device`) — where each UDF computes.
pub fn plan_text(run: &Run, device: Device) -> String {
    let plan = run.as_plan();
    let data = run.worker().dataset();
    let (shape, tiling) = (data.shape(), run.tiling());
    let mut out = String::new();
    let _ = writeln!(
        out,
        "dataset {} ({}): nav {:?} sig {:?} {}",
        data.info().path.display(),
        data.info().format,
        shape.nav,
        shape.sig,
        data.stored_dtype()
    );
    let _ = writeln!(
        out,
        "input dtype {}, {} partitions, {} threads, tile shape {:?} ({} signal slices, {} intent)",
        run.input_dtype(),
        run.partitions().len(),
        plan.threads,
        tiling.tile_shape(),
        tiling.slices.len(),
        tiling.intent.name()
    );
    for (name, udf_plan, decls) in run.udfs() {
        let buffers: Vec<String> = decls.iter().map(|d| format!("{} ({:?} {})", d.name, d.kind, d.dtype)).collect();
        let _ = writeln!(out, "  {name}: {} method; buffers {}", udf_plan.method.name(), buffers.join(", "));
    }
    if device != Device::Cpu {
        for u in &plan.udfs {
            let _ = match &u.device_note {
                Some(why) => writeln!(out, "  {}: on the CPU ({why})", u.name),
                None => writeln!(out, "  {}: on the GPU ({:?})", u.name, u.device),
            };
        }
    }
    out
}
