//! The run summary: the schema of `results.json`, which `index.html` and the live
//! snapshots show too.
//!
//! A summary grows with its run: [`RunSummary::planned`] holds what is decided before
//! the first tile (dataset, plan, plugins, devices), [`RunSummary::record_results`] adds
//! the results merged so far (buffers, frames, throughput), and either
//! [`RunSummary::snapshot`] marks it as a snapshot of a running run or
//! [`RunSummary::finish`] gives it its final status, failures and timings.

use crate::cuda::{Device, GpuInfo};
use crate::dataset::Dataset;
use crate::exec::{PartitionFailure, Plan, Run, RunResults, RunStats, UdfResults};
use crate::preview::{ColorMap, Preview, Scale};
use crate::udf::{BufferKind, DeviceClass};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;
use std::time::Instant;

/// What `results.json` says about a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSummary {
    /// The version of udf-host that ran it.
    pub udf_host_version: String,
    /// The plugin contract ([`super::contract_id`]).
    pub contract: String,
    pub status: RunStatus,
    /// What failed: partitions, merges, `get_results` (empty when complete; absent in
    /// snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failures: Option<Vec<FailureSummary>>,
    pub dataset: DatasetOfRun,
    /// The region of interest, if the run had one.
    pub roi: Option<RoiSummary>,
    pub threads: usize,
    pub partitions: PartitionCounts,
    pub tiling: TilingOfRun,
    /// How each UDF was loaded, in the order given.
    pub plugins: Vec<PluginLoad>,
    pub device: DeviceSummary,
    /// NumPy's name of the dtype every UDF got its tiles in.
    pub input_dtype: String,
    /// Frames processed (merged).
    pub frames: u64,
    /// Bytes of stored data read.
    pub bytes_read: u64,
    pub throughput_gb_per_s: f64,
    pub udfs: Vec<UdfSummary>,
    /// Seconds per stage (absent in snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timings: Option<Timings>,
    /// The snapshot's number (only in `partial/results.json`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<u64>,
    /// Seconds since the run started (only in snapshots).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elapsed_seconds: Option<f64>,
    /// A live acquisition's source, frames received, buffer and back-pressure, and why
    /// the scan ended early if it did (only for live runs, docs/live.md).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub live: Option<crate::live::LiveStats>,
}

/// How a run ended (or that it is still going, in snapshots).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// A snapshot of a run that goes on.
    Running,
    /// Every partition merged, every UDF has its results.
    Complete,
    /// Some partitions failed and the run went on (`keep_going`), or a UDF failed after
    /// processing: the rest is complete.
    Partial,
    /// A failure stopped the run: what was merged before is written.
    Failed,
    /// The user stopped the run: what was merged before is written.
    Interrupted,
}

impl RunStatus {
    /// `running`, `complete`, `partial`, `failed`, `interrupted`.
    pub fn name(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Complete => "complete",
            RunStatus::Partial => "partial",
            RunStatus::Failed => "failed",
            RunStatus::Interrupted => "interrupted",
        }
    }
}

/// One failure of a run ([`PartitionFailure`] as written).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureSummary {
    /// The partition (`None`: a main-side call after all merges, such as `get_results`).
    pub partition: Option<usize>,
    /// True flat nav indices of its first and last frame.
    pub frames: Option<(u64, u64)>,
    /// The UDF that failed, if it was one.
    pub udf: Option<String>,
    /// Where it failed.
    pub at: Option<FailureAt>,
    /// The error, with its causes.
    pub error: String,
}

/// The lifecycle call a failure happened in.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FailureAt {
    /// `init`, `process`, `merge`, `get_results`, ...
    pub method: String,
    pub partition: Option<usize>,
    pub frames: Option<(u64, u64)>,
}

impl From<&PartitionFailure> for FailureSummary {
    fn from(f: &PartitionFailure) -> Self {
        FailureSummary {
            partition: f.partition,
            frames: f.frames,
            udf: f.udf.clone(),
            at: f.at.as_ref().map(|at| FailureAt {
                method: at.method.to_owned(),
                partition: at.partition,
                frames: at.frames,
            }),
            error: f.error.clone(),
        }
    }
}

/// The dataset a run read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatasetOfRun {
    pub path: String,
    pub format: String,
    pub nav_shape: Vec<usize>,
    pub sig_shape: Vec<usize>,
    /// The stored dtype as a NumPy `descr`.
    pub dtype: String,
    pub details: BTreeMap<String, String>,
}

/// The ROI: positions selected, of all.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoiSummary {
    pub count: usize,
    pub positions: usize,
}

/// Partitions planned, merged and failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartitionCounts {
    pub count: usize,
    pub merged: usize,
    pub failed: usize,
}

/// The negotiated tiling.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TilingOfRun {
    /// `[depth, ..signal slice shape]`.
    pub tile_shape: Vec<usize>,
    pub depth: usize,
    pub signal_slices: usize,
    /// The strongest method among the UDFs (`tile`, `frame`, `partition`).
    pub intent: String,
}

/// How one UDF was loaded.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PluginLoad {
    /// The path or `builtin:NAME` it was given as.
    pub source: String,
    pub cache: LoadCache,
    pub load_seconds: f64,
}

/// Where a UDF's code came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LoadCache {
    /// A native built-in: nothing to load.
    Builtin,
    /// A compiled plugin from the cache.
    Hit,
    /// Compiled now.
    Compiled,
}

/// Devices: what the run asked for, the GPU it found, where each UDF computed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DeviceSummary {
    pub requested: Device,
    pub gpu: Option<GpuInfo>,
    pub udfs: BTreeMap<String, UdfDevice>,
}

/// Where one UDF computed, and why not on the GPU.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UdfDevice {
    pub device: DeviceClass,
    pub cpu_because: Option<String>,
}

/// One UDF's results.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UdfSummary {
    /// Its unique name in the run (its directory).
    pub name: String,
    pub source: String,
    pub version: String,
    /// The method it ran with.
    pub method: String,
    /// Its resolved parameters, as JSON.
    pub params: BTreeMap<String, serde_json::Value>,
    pub buffers: Vec<BufferSummary>,
    /// Resource use of its instances, where it reports it (wasm plugins).
    pub resources: Option<ResourceSummary>,
}

/// Resource use of a UDF's partition instances.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ResourceSummary {
    pub peak_memory_bytes: Option<usize>,
    pub calls: u64,
    pub call_seconds: f64,
    pub process_calls: u64,
    pub seconds_per_process_call: f64,
    /// Instances made for the partitions (fewer than partitions where a UDF reuses them:
    /// the Python runner of LiberTEM UDF classes).
    #[serde(default)]
    pub instances: u64,
}

/// One result buffer and its files.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BufferSummary {
    pub name: String,
    pub kind: BufferKind,
    pub dtype: String,
    /// The shape of `file` (nav buffers in the nav shape).
    pub shape: Vec<usize>,
    /// Flat and ROI-compressed (LiberTEM's `raw_data`).
    pub raw_shape: Vec<usize>,
    /// `<udf>/<buffer>.npy`, relative to the results directory.
    pub file: String,
    /// `<udf>/<buffer>.valid.npy` when not every element is valid.
    pub valid_file: Option<String>,
    pub all_valid: bool,
    pub valid_fraction: f64,
    pub previews: Vec<PreviewSummary>,
}

/// One PNG preview of a buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PreviewSummary {
    /// Relative path of the PNG.
    pub file: String,
    /// The slice of the extra shape it shows (absent when the buffer is one image).
    pub slice: Option<Vec<usize>>,
    /// How many images the buffer has.
    pub slices: usize,
    pub width: u32,
    pub height: u32,
    pub image_shape: [usize; 2],
    pub upscale: usize,
    pub scale: Scale,
    pub colormap: ColorMap,
    pub range: Option<[f64; 2]>,
    pub extent: Option<[f64; 2]>,
    pub invalid_pixels: usize,
}

/// Seconds per stage of a run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// Loading (compiling) the plugins.
    pub load_seconds: f64,
    pub plan_seconds: f64,
    /// From the start of processing to the last merge.
    pub process_seconds: f64,
    pub merge_seconds: f64,
    /// `get_results` and assembling the results.
    pub results_seconds: f64,
    /// Everything, up to writing the results.
    pub total_seconds: f64,
}

impl RunSummary {
    /// What is known once `run` is planned: the dataset, the plan (threads, partitions,
    /// tiling), how each UDF was loaded (`plugins`) and where each computes (`requested`:
    /// the device the run asked for).
    pub fn planned(run: &Run, plugins: Vec<PluginLoad>, requested: Device) -> Self {
        Self::of_plan(run.as_plan(), run.worker().dataset().as_ref(), plugins, requested)
    }

    /// [`planned`](Self::planned) for a plan whose dataset is `data` (a live run's).
    pub fn of_plan(plan: &Plan, data: &dyn Dataset, plugins: Vec<PluginLoad>, requested: Device) -> Self {
        let (info, shape) = (data.info(), data.shape());
        let tiling = &plan.tiling;
        let gpu = (requested != Device::Cpu).then(|| crate::cuda::available().ok()).flatten();
        RunSummary {
            udf_host_version: env!("CARGO_PKG_VERSION").to_owned(),
            contract: super::contract_id(),
            status: RunStatus::Running,
            failures: None,
            dataset: DatasetOfRun {
                path: info.path.display().to_string(),
                format: info.format.to_owned(),
                nav_shape: shape.nav.clone(),
                sig_shape: shape.sig.clone(),
                dtype: data.stored_dtype().descr(),
                details: info.details.into_iter().collect(),
            },
            roi: plan.roi.as_ref().map(|r| RoiSummary { count: r.count(), positions: r.len() }),
            threads: plan.threads,
            partitions: PartitionCounts { count: plan.partitions.len(), merged: 0, failed: 0 },
            tiling: TilingOfRun {
                tile_shape: tiling.tile_shape(),
                depth: tiling.depth,
                signal_slices: tiling.slices.len(),
                intent: tiling.intent.name().to_owned(),
            },
            plugins,
            device: DeviceSummary {
                requested,
                gpu,
                udfs: plan
                    .udfs
                    .iter()
                    .map(|u| (u.name.clone(), UdfDevice { device: u.device, cpu_because: u.device_note.clone() }))
                    .collect(),
            },
            input_dtype: plan.meta.input_dtype.name().to_owned(),
            frames: 0,
            bytes_read: 0,
            throughput_gb_per_s: 0.0,
            udfs: Vec::new(),
            timings: None,
            snapshot: None,
            elapsed_seconds: None,
            live: None,
        }
    }

    /// Take in the results merged so far and their `previews`: buffers, frames, bytes,
    /// throughput, partitions merged and failed.
    pub fn record_results(&mut self, results: &RunResults, previews: &[Preview]) {
        let stats = &results.stats;
        self.input_dtype = results.input_dtype.name().to_owned();
        self.partitions = PartitionCounts {
            count: stats.partitions,
            merged: stats.partitions_merged,
            failed: stats.partitions_failed,
        };
        self.frames = stats.frames;
        self.bytes_read = stats.bytes_read;
        self.throughput_gb_per_s = stats.throughput_gbps();
        self.udfs = results.udfs.iter().map(|u| UdfSummary::of(u, previews)).collect();
    }

    /// This summary as snapshot `number` of a run going on for `elapsed_seconds`.
    pub fn snapshot(&self, number: u64, elapsed_seconds: f64) -> Self {
        RunSummary {
            status: RunStatus::Running,
            snapshot: Some(number),
            elapsed_seconds: Some(elapsed_seconds),
            failures: None,
            timings: None,
            ..self.clone()
        }
    }

    /// The run is over: its status, every failure, the partitions that failed (of
    /// `failures`, as the run counts them), and the timings: those of `stats`, the load
    /// and plan times set before (if any), and the total since `started`.
    pub fn finish(
        &mut self,
        status: RunStatus,
        failures: &[PartitionFailure],
        failed: usize,
        stats: &RunStats,
        started: Instant,
    ) {
        self.status = status;
        self.failures = Some(failures.iter().map(FailureSummary::from).collect());
        self.partitions.failed = failed;
        let before = self.timings.unwrap_or_default();
        self.timings = Some(Timings {
            process_seconds: stats.process_seconds,
            merge_seconds: stats.merge_seconds,
            results_seconds: stats.results_seconds,
            total_seconds: started.elapsed().as_secs_f64(),
            ..before
        });
    }

    /// The text the command line prints after a run whose results are in `dir`: what was
    /// processed, every result file with its shape and dtype, the previews and the time.
    pub fn to_text(&self, dir: &Path) -> String {
        let mut out = String::new();
        let timings = self.timings.unwrap_or_default();
        let _ = writeln!(
            out,
            "processed {} frames ({:.1} MB) in {:.2} s ({:.2} GB/s), {} partitions on {} threads",
            self.frames,
            self.bytes_read as f64 / 1e6,
            timings.process_seconds,
            self.throughput_gb_per_s,
            self.partitions.merged,
            self.threads
        );
        for b in self.udfs.iter().flat_map(|u| &u.buffers) {
            let _ = writeln!(out, "  {}  {:?} {}", dir.join(&b.file).display(), b.shape, b.dtype);
        }
        let previews: usize = self.udfs.iter().flat_map(|u| &u.buffers).map(|b| b.previews.len()).sum();
        if previews > 0 {
            let _ = writeln!(out, "  {previews} PNG previews beside them");
        }
        let _ = writeln!(
            out,
            "results in {}/ (summary: results.json, report: index.html), total {:.2} s",
            dir.display(),
            timings.total_seconds
        );
        out
    }
}

impl UdfSummary {
    /// A UDF's results, with the previews among `previews` that show its buffers.
    pub fn of(u: &UdfResults, previews: &[Preview]) -> Self {
        let buffers = u
            .buffers
            .iter()
            .map(|b| BufferSummary {
                name: b.name.clone(),
                kind: b.kind,
                dtype: b.dtype().name().to_owned(),
                shape: b.data.shape().to_vec(),
                raw_shape: b.raw.shape().to_vec(),
                file: data_file(&u.name, &b.name),
                valid_file: (!b.all_valid).then(|| valid_file(&u.name, &b.name)),
                all_valid: b.all_valid,
                valid_fraction: valid_fraction(&b.valid),
                previews: previews
                    .iter()
                    .filter(|p| p.udf == u.name && p.buffer == b.name)
                    .map(PreviewSummary::of)
                    .collect(),
            })
            .collect();
        let resources = (!u.instances.is_empty()).then(|| {
            let stats = || u.instances.iter().map(|(_, s)| s);
            let process_calls: u64 = stats().map(|s| s.process_calls).sum();
            let process_seconds: f64 = stats().map(|s| s.process_seconds).sum();
            ResourceSummary {
                peak_memory_bytes: stats().map(|s| s.peak_memory).max(),
                calls: stats().map(|s| s.calls).sum(),
                call_seconds: stats().map(|s| s.call_seconds).sum(),
                process_calls,
                seconds_per_process_call: if process_calls > 0 { process_seconds / process_calls as f64 } else { 0.0 },
                instances: stats().map(|s| s.instances).sum(),
            }
        });
        UdfSummary {
            name: u.name.clone(),
            source: u.source.clone(),
            version: u.version.clone(),
            method: u.method.name().to_owned(),
            params: u.params.iter().map(|p| (p.name.clone(), p.value.to_json())).collect(),
            buffers,
            resources,
        }
    }
}

impl PreviewSummary {
    fn of(p: &Preview) -> Self {
        let r = &p.rendered;
        PreviewSummary {
            file: p.file.clone(),
            slice: (!p.index.is_empty()).then(|| p.index.clone()),
            slices: p.slices,
            width: r.width,
            height: r.height,
            image_shape: r.image_shape,
            upscale: r.upscale,
            scale: r.scale,
            colormap: r.colormap,
            range: r.range,
            extent: r.extent,
            invalid_pixels: r.invalid,
        }
    }
}

/// Where a result buffer is written, relative to the results directory:
/// `<udf>/<buffer>.npy`.
pub fn data_file(udf: &str, buffer: &str) -> String {
    format!("{udf}/{buffer}.npy")
}

/// Where a result buffer's valid mask is written: `<udf>/<buffer>.valid.npy` (when not
/// every element is valid; in snapshots always).
pub fn valid_file(udf: &str, buffer: &str) -> String {
    format!("{udf}/{buffer}.valid.npy")
}

/// The fraction of `true` elements of a valid mask (1 for an empty one).
fn valid_fraction(valid: &crate::array::NdArray) -> f64 {
    let bytes = valid.bytes();
    if bytes.is_empty() { 1.0 } else { bytes.iter().filter(|&&b| b != 0).count() as f64 / bytes.len() as f64 }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::udf::BufferUse;

    fn example() -> RunSummary {
        RunSummary {
            udf_host_version: "0.1.0".into(),
            contract: super::super::contract_id(),
            status: RunStatus::Partial,
            failures: Some(vec![FailureSummary {
                partition: Some(2),
                frames: Some((64, 95)),
                udf: Some("sum".into()),
                at: Some(FailureAt { method: "process".into(), partition: Some(2), frames: Some((70, 70)) }),
                error: "trap".into(),
            }]),
            dataset: DatasetOfRun {
                path: "scan.npy".into(),
                format: "npy".into(),
                nav_shape: vec![8, 16],
                sig_shape: vec![4, 4],
                dtype: "<u2".into(),
                details: BTreeMap::from([("data_offset".to_owned(), "128".to_owned())]),
            },
            roi: Some(RoiSummary { count: 3, positions: 128 }),
            threads: 2,
            partitions: PartitionCounts { count: 4, merged: 3, failed: 1 },
            tiling: TilingOfRun { tile_shape: vec![8, 4, 4], depth: 8, signal_slices: 1, intent: "tile".into() },
            plugins: vec![PluginLoad { source: "sum.wasm".into(), cache: LoadCache::Hit, load_seconds: 0.25 }],
            device: DeviceSummary {
                requested: Device::Auto,
                gpu: None,
                udfs: BTreeMap::from([(
                    "sum".to_owned(),
                    UdfDevice { device: DeviceClass::Cpu, cpu_because: Some("no GPU".into()) },
                )]),
            },
            input_dtype: "float32".into(),
            frames: 96,
            bytes_read: 3072,
            throughput_gb_per_s: 1.5,
            udfs: vec![UdfSummary {
                name: "sum".into(),
                source: "sum.wasm".into(),
                version: "0.1.0".into(),
                method: "tile".into(),
                params: BTreeMap::from([("x".to_owned(), serde_json::json!(2))]),
                buffers: vec![BufferSummary {
                    name: "intensity".into(),
                    kind: BufferKind::Sig,
                    dtype: "float32".into(),
                    shape: vec![4, 4],
                    raw_shape: vec![4, 4],
                    file: "sum/intensity.npy".into(),
                    valid_file: None,
                    all_valid: true,
                    valid_fraction: 1.0,
                    previews: vec![PreviewSummary {
                        file: "sum/intensity.png".into(),
                        slice: None,
                        slices: 1,
                        width: 300,
                        height: 280,
                        image_shape: [4, 4],
                        upscale: 64,
                        scale: Scale::Log,
                        colormap: ColorMap::Viridis,
                        range: Some([1.0, 2.5]),
                        extent: Some([0.5, 3.0]),
                        invalid_pixels: 0,
                    }],
                }],
                resources: Some(ResourceSummary {
                    peak_memory_bytes: Some(1 << 20),
                    calls: 7,
                    call_seconds: 0.125,
                    process_calls: 4,
                    seconds_per_process_call: 0.03125,
                    instances: 2,
                }),
            }],
            timings: Some(Timings {
                load_seconds: 0.25,
                plan_seconds: 0.5,
                process_seconds: 1.0,
                merge_seconds: 0.0,
                results_seconds: 0.125,
                total_seconds: 2.0,
            }),
            snapshot: None,
            elapsed_seconds: None,
            live: None,
        }
    }

    #[test]
    fn a_summary_reads_back_as_it_was_written() {
        let summary = example();
        let text = super::super::json_text(&summary).unwrap();
        let back: RunSummary = serde_json::from_str(&text).unwrap();
        assert_eq!(back, summary);
        // And a snapshot, with its own fields and without the final ones.
        let snapshot = summary.snapshot(3, 12.5);
        let text = super::super::json_text(&snapshot).unwrap();
        let value: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(value["status"], "running");
        assert_eq!(value["snapshot"], 3);
        assert!(value.get("failures").is_none() && value.get("timings").is_none());
        assert_eq!(serde_json::from_value::<RunSummary>(value).unwrap(), snapshot);
    }

    #[test]
    fn the_json_has_the_fields_results_json_documents() {
        let value = serde_json::to_value(example()).unwrap();
        let keys: Vec<&str> = value.as_object().unwrap().keys().map(String::as_str).collect();
        let documented = [
            "bytes_read",
            "contract",
            "dataset",
            "device",
            "failures",
            "frames",
            "input_dtype",
            "partitions",
            "plugins",
            "roi",
            "status",
            "threads",
            "throughput_gb_per_s",
            "tiling",
            "timings",
            "udf_host_version",
            "udfs",
        ];
        assert_eq!(keys, documented);
        assert_eq!(value["failures"][0]["at"]["method"], "process");
        assert_eq!(value["failures"][0]["frames"], serde_json::json!([64, 95]));
        assert_eq!(value["udfs"][0]["buffers"][0]["kind"], "sig");
        assert_eq!(value["udfs"][0]["buffers"][0]["valid_file"], serde_json::Value::Null);
        assert_eq!(value["plugins"][0]["cache"], "hit");
        assert_eq!(value["device"]["requested"], "auto");
    }

    #[test]
    fn names_are_those_of_the_serialised_forms() {
        for kind in [BufferKind::Nav, BufferKind::Sig, BufferKind::Single] {
            assert_eq!(serde_json::to_value(kind).unwrap(), kind.name());
        }
        for usage in [BufferUse::Normal, BufferUse::Private, BufferUse::ResultOnly] {
            assert_eq!(serde_json::to_value(usage).unwrap(), usage.name());
        }
        for status in
            [RunStatus::Running, RunStatus::Complete, RunStatus::Partial, RunStatus::Failed, RunStatus::Interrupted]
        {
            assert_eq!(serde_json::to_value(status).unwrap(), status.name());
        }
    }
}
