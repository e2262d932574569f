//! Resource use: peak guest memory and time per tile are reported, not judged; memory
//! that grows with the number of tiles (a leak) fails, and so do host arrays that grow
//! with it (`resources.array_growth`) and waiting on timers (`sleep`, a poll with a
//! timeout: `resources.timers`).
//!
//! The leak check runs one partition of few frames and one of many, both in depth-1
//! full-frame tiles (one tile per frame), and compares the peak memory of the two
//! instances. Only buffers legitimately grow with the frames (nav buffers, and buffers
//! sized by the frame count like `pick`'s); anything beyond three times their growth
//! plus [`SLACK`] is a leak. The runs keep a 2-D scan (`2 × n/2`) where the data has one,
//! for plugins that need a 2-D scan (divergence and curl need two rows).

use super::report::{Check, Evidence, Group, ResourceUse};
use super::subject::Ctx;
use super::synthetic;
use crate::exec::{RunOptions, RunResults};
use crate::udf::{BufferKind, BufferUse, Method};

/// Growth of peak memory tolerated besides the nav buffers' (allocator rounding, wasm
/// pages of 64 KiB).
pub const SLACK: usize = 128 << 10;
/// Growth of the most host arrays alive at once tolerated between the short and the
/// long run (a temporary or two held a little longer by a collector).
pub const ARRAY_SLACK: usize = 2;
/// Frames of the short run.
const FEW: usize = 8;
/// Data of the long run, at most.
const MAX_BYTES: usize = 32 << 20;

/// Resource use of a run, summed over its partition instances.
pub(crate) fn usage(run: &str, results: &RunResults) -> ResourceUse {
    let instances = &results.udfs[0].instances;
    let calls = instances.iter().map(|(_, s)| s.calls).sum();
    let process_calls: u64 = instances.iter().map(|(_, s)| s.process_calls).sum();
    let process_seconds: f64 = instances.iter().map(|(_, s)| s.process_seconds).sum();
    ResourceUse {
        run: run.to_owned(),
        partitions: instances.len(),
        tiles_per_partition: instances.iter().map(|(_, s)| s.process_calls).max().unwrap_or(0),
        peak_memory: instances.iter().map(|(_, s)| s.peak_memory).max().unwrap_or(0),
        calls,
        process_calls,
        process_seconds,
        seconds_per_tile: if process_calls > 0 { process_seconds / process_calls as f64 } else { 0.0 },
        peak_arrays: instances.iter().map(|(_, s)| s.peak_arrays).max().unwrap_or(0),
        arrays_left: instances.iter().map(|(_, s)| s.live_arrays).max().unwrap_or(0),
    }
}

fn kib(bytes: usize) -> String {
    format!("{:.0} KiB", bytes as f64 / 1024.0)
}

/// `resources.timers`: the baseline's instances never waited on a timer. Under the
/// frozen clock a timer is due at once, so a plugin cannot pace itself by sleeping; one
/// that waits for time to pass loops until `--timeout` (the baseline then fails).
fn timers(ctx: &Ctx<'_>) -> Check {
    let title = "the plugin does not sleep or wait on timers (the clock is frozen; timers are due at once)";
    let Ok(base) = ctx.baseline() else {
        return Check::not_applicable(Group::Resources, "timers", title, "the baseline run failed");
    };
    let instances = &base.results.udfs[0].instances;
    if instances.is_empty() {
        return Check::not_applicable(Group::Resources, "timers", title, "the UDF reports no instance statistics");
    }
    let waits: u64 = instances.iter().map(|(_, s)| s.timer_waits).sum();
    let variant = format!("baseline: {} partition instance(s)", instances.len());
    let e = if waits == 0 {
        Evidence::pass(&variant, "no timer waited on")
    } else {
        Evidence::fail(
            &variant,
            format!(
                "waited on a timer {waits} time(s) (std::thread::sleep, a poll with a timeout): udf-host's clock \
                 is frozen, so timers are due at once and waiting cannot pace the plugin; one that waits for time \
                 to pass loops until --timeout"
            ),
        )
    };
    Check::from_evidence(Group::Resources, "timers", title, vec![e])
}

/// The leak and timer checks and the usage of their runs.
pub(crate) fn check(ctx: &Ctx<'_>) -> (Vec<Check>, Vec<ResourceUse>) {
    let (mut checks, usage) = memory_growth(ctx);
    checks.push(array_growth(&usage));
    checks.push(timers(ctx));
    (checks, usage)
}

/// `resources.array_growth`: the host arrays a plugin holds do not grow with the number
/// of tiles (the runs of the memory check, few and many tiles in one partition). What a
/// partition legitimately keeps (buffers, parameters, accumulators) is the same for both;
/// an array kept per tile is a leak that ends at the live-array cap
/// ([`crate::wasm::MAX_LIVE_ARRAYS`]) on a partition of that many tiles.
pub(crate) fn array_growth(runs: &[ResourceUse]) -> Check {
    let title = "the host arrays alive do not grow with the number of tiles (no array kept per tile)";
    let [few, lots] = runs else {
        return Check::not_applicable(Group::Resources, "array_growth", title, "the memory check's runs did not run");
    };
    if lots.peak_arrays == 0 {
        return Check::not_applicable(Group::Resources, "array_growth", title, "the plugin uses no host arrays");
    }
    let variant = format!("{} vs {} tiles of one frame", few.process_calls, lots.process_calls);
    let message = format!(
        "at most {} host arrays alive with {} tiles, {} with {} tiles; {} left after the partition's export with {} \
         tiles, {} with {}",
        few.peak_arrays,
        few.process_calls,
        lots.peak_arrays,
        lots.process_calls,
        few.arrays_left,
        few.process_calls,
        lots.arrays_left,
        lots.process_calls
    );
    let grew = lots.peak_arrays > few.peak_arrays + ARRAY_SLACK || lots.arrays_left > few.arrays_left;
    let e = if grew {
        Evidence::fail(&variant, format!("{message}: arrays kept per tile (drop or dispose them when done)"))
    } else {
        Evidence::pass(&variant, message)
    };
    Check::from_evidence(Group::Resources, "array_growth", title, vec![e])
}

/// The leak check and the usage of its runs.
fn memory_growth(ctx: &Ctx<'_>) -> (Vec<Check>, Vec<ResourceUse>) {
    let title = "peak memory does not grow with the number of tiles (no leak per tile)";
    let na =
        |reason: String| (vec![Check::not_applicable(Group::Resources, "memory_growth", title, reason)], Vec::new());
    let Ok(base) = ctx.baseline() else { return na("the baseline run failed".into()) };
    if base.results.udfs[0].instances.is_empty() {
        return na("the UDF reports no instance statistics (not a wasm plugin)".into());
    }
    let method = ctx.method();
    if method == Method::Partition {
        return na("the partition method gets one tile per partition".into());
    }
    let primary = ctx.primary();
    let shape = primary.data.shape().clone();
    let frame_bytes = shape.sig_len() * primary.data.stored_dtype().dtype.size();
    // Even, for the 2-D scans below.
    let many = (MAX_BYTES / frame_bytes.max(1)).clamp(4 * FEW, 512) & !1;
    let frames = shape.nav_len();
    let mut tile = vec![1];
    tile.extend_from_slice(&shape.sig);

    let mut runs = Vec::new();
    let mut result_bytes = Vec::new();
    for n in [FEW, many] {
        let rows: Vec<usize> = (0..n).map(|i| i % frames).collect();
        let name = format!("memory: {n} frames, 1 partition, depth-1 tiles");
        let nav: &[usize] = if shape.nav.len() >= 2 { &[2, n / 2] } else { &[n] };
        let data = match synthetic::gather("repeated", primary.data.as_ref(), &rows, nav) {
            Ok(d) => d,
            Err(e) => return na(format!("cannot build the dataset: {e}")),
        };
        let options =
            RunOptions { partitions: Some(1), threads: Some(1), tile_shape: Some(tile.clone()), ..Default::default() };
        match ctx.subject.run(&data.data, &ctx.subject.params_for_rows(&rows), options) {
            Ok(r) => {
                runs.push(usage(&name, &r));
                result_bytes.push(r.udfs[0].buffers.iter().map(|b| b.data.bytes().len()).sum::<usize>());
            }
            Err(e) => {
                let evidence = vec![Evidence::fail(&name, e.to_string())];
                return (vec![Check::from_evidence(Group::Resources, "memory_growth", title, evidence)], runs);
            }
        }
    }
    let (few, lots) = (&runs[0], &runs[1]);
    let row_bytes: usize = base
        .decls
        .iter()
        .filter(|d| d.kind == BufferKind::Nav && d.usage != BufferUse::ResultOnly)
        .map(|d| d.extra_shape.iter().product::<usize>() * d.dtype.size())
        .sum();
    // Nav buffers as declared, or all results (buffers sized by the frame count).
    let nav_growth = (row_bytes * (many - FEW)).max(result_bytes[1].saturating_sub(result_bytes[0]));
    let allowed = 3 * nav_growth + SLACK;
    let growth = lots.peak_memory.saturating_sub(few.peak_memory);
    let extra_tiles = lots.process_calls.saturating_sub(few.process_calls).max(1);
    let variant = format!("{FEW} vs {many} tiles of one frame");
    let message = format!(
        "peak memory {} with {} tiles, {} with {} tiles: grew {} (~{} B per extra tile); allowed {} \
         (3 × buffer growth {} + {})",
        kib(few.peak_memory),
        few.process_calls,
        kib(lots.peak_memory),
        lots.process_calls,
        kib(growth),
        growth as u64 / extra_tiles,
        kib(allowed),
        kib(nav_growth),
        kib(SLACK)
    );
    let e = if growth > allowed { Evidence::fail(&variant, message) } else { Evidence::pass(&variant, message) };
    (vec![Check::from_evidence(Group::Resources, "memory_growth", title, vec![e])], runs)
}
