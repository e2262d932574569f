//! The run plan: everything decided before the first tile is read, made once and
//! serialisable, so that workers in other processes run exactly the same run.
//!
//! Planning is a sequence of named steps ([`Plan::make`]): check the ROI, name the UDFs,
//! resolve their params and choices, agree on one input dtype, declare buffers, decide
//! whether integers are converted on read, split into partitions, negotiate the tiling,
//! check the merged buffers fit in memory.

use super::{Limits, RunError, RunOptions, UdfSpec};
use crate::dataset::{Dataset, DatasetShape, DatasetSpec, OpenedDataset, Partition, TileRequest, TilingScheme};
use crate::dtype::{DType, StoredDType, result_type};
use crate::roi::Roi;
use crate::udf::{
    BufferDecl, BufferKind, CallError, DTypePreference, DatasetMeta, Description, DeviceClass, FUSED_STORED, Method,
    ParamSpec, ParamValue, Params, RunPlan, Udf, UdfOrigin, rules,
};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// The version of the plan format; a worker refuses plans of another version.
pub const PLAN_VERSION: u32 = 1;

/// A planned run. Serialise it with [`Plan::to_json`] and run partitions from it with
/// [`super::Worker`] anywhere that has the data and the plugins.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(into = "super::wire::PlanRepr", try_from = "super::wire::PlanRepr")]
pub struct Plan {
    /// How to open the dataset again (`None`: opened here without one; the plan then
    /// runs in this process only).
    pub dataset: Option<DatasetSpec>,
    pub shape: DatasetShape,
    pub stored_dtype: StoredDType,
    /// The meta every call sees (the agreed input dtype included).
    pub meta: DatasetMeta,
    pub udfs: Vec<PlannedUdf>,
    pub roi: Option<Roi>,
    /// The partitions with selected frames.
    pub partitions: Vec<Partition>,
    pub tiling: TilingScheme,
    /// The dtype of tiles mapped straight from the file: the input dtype, or the stored
    /// integer dtype when every UDF converts on read.
    pub direct_dtype: DType,
    /// Threads of the in-process engine (the default partition count follows it).
    pub threads: usize,
    pub limits: Limits,
}

/// One UDF of a plan.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PlannedUdf {
    /// Unique name in this run (output directory; `--param NAME.x=`).
    pub name: String,
    /// Where to load it from.
    pub origin: UdfOrigin,
    /// The version its description gave (a worker checks it loaded the same).
    pub version: String,
    /// Resolved parameters (defaults filled in; nav aux arrays flattened to `(nav_len, ..)`).
    pub params: Params,
    pub plan: RunPlan,
    pub decls: Vec<BufferDecl>,
    /// Where it computes: the GPU for built-ins with a kernel when the run asks for it
    /// (the UDF's `start` sees it as `device_class`), else the CPU.
    #[serde(default = "cpu")]
    pub device: DeviceClass,
    /// Why it computes on the CPU although the run asked for a GPU.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_note: Option<String>,
}

fn cpu() -> DeviceClass {
    DeviceClass::Cpu
}

/// Turns a plan's UDF origins back into UDFs in a worker process (built-ins by name,
/// wasm plugins by path or by bytes sent ahead, checked against the hash).
/// [`crate::loader::Loader`] is the implementation for built-ins and wasm plugins.
pub trait UdfLoader {
    /// The UDF `origin` names.
    ///
    /// # Errors
    /// A message saying why it cannot be loaded here (missing file, other bytes, ...).
    fn load(&self, origin: &UdfOrigin) -> Result<Arc<dyn Udf>, String>;
}

impl Plan {
    /// The plan as JSON (arrays as base64 of their bytes).
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(|e| unreachable!("a plan always serialises: {e}"))
    }

    /// The SHA-256 of the plan's JSON, as lowercase hex: what every partition output
    /// records and a merger checks (an output of another run is refused).
    pub fn hash(&self) -> String {
        crate::wasm::sha256_hex(self.to_json().as_bytes())
    }

    /// A plan from [`Plan::to_json`]'s output, checked for consistency.
    ///
    /// # Errors
    /// [`RunError::Invalid`] for malformed JSON, another plan version, or a plan that
    /// contradicts itself.
    pub fn from_json(json: &str) -> Result<Plan, RunError> {
        serde_json::from_str(json).map_err(|e| RunError::Invalid(format!("not a valid run plan: {e}")))
    }

    /// The indices of the partitions to run.
    pub fn partition_indices(&self) -> impl Iterator<Item = usize> + '_ {
        self.partitions.iter().map(|p| p.index)
    }

    /// The partition with index `index`.
    ///
    /// # Errors
    /// [`RunError::Invalid`] if the plan has none (an empty one, or out of range).
    pub fn partition(&self, index: usize) -> Result<&Partition, RunError> {
        self.partitions.iter().find(|p| p.index == index).ok_or_else(|| {
            RunError::Invalid(format!(
                "the plan has no partition {index} (it runs {} partitions: {:?}...)",
                self.partitions.len(),
                self.partition_indices().take(8).collect::<Vec<_>>()
            ))
        })
    }

    /// The plan of a scan that ended after its first `frames` frames (a live source that
    /// stopped early): partitions past it are dropped, the one it cuts ends there. Every
    /// other field stays, so results keep the full nav shape, invalid where no frame came.
    pub fn truncated(&self, frames: u64) -> Plan {
        let partitions = self
            .partitions
            .iter()
            .filter(|p| p.range.start < frames)
            .map(|p| {
                let mut p = p.clone();
                p.range.end = p.range.end.min(frames);
                p.frames.retain(|&f| f < frames);
                p
            })
            .filter(|p| !p.is_empty())
            .collect();
        Plan { partitions, ..self.clone() }
    }

    /// Plan a run (see the module docs for the steps).
    pub(crate) fn make(opened: &OpenedDataset, udfs: &[UdfSpec], options: &RunOptions) -> Result<Plan, RunError> {
        if udfs.is_empty() {
            return Err(RunError::Invalid("no UDF to run".into()));
        }
        let dataset = opened.dataset.as_ref();
        let shape = dataset.shape().clone();
        let stored = dataset.stored_dtype();
        check_roi(options.roi.as_ref(), &shape)?;
        let threads =
            options.threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
        let mut meta = DatasetMeta {
            nav_shape: shape.nav.clone(),
            sig_shape: shape.sig.clone(),
            dataset_dtype: stored.dtype,
            input_dtype: stored.dtype,
            roi_count: options.roi.as_ref().map(Roi::count),
            device_class: DeviceClass::Cpu,
            threads_per_worker: 1,
        };
        let names = rules::unique_names(udfs.iter().map(|s| s.udf.description().name.as_str()));
        let (params, choices) = resolve_and_choose(udfs, &names, &meta, options.force_method)?;
        meta.input_dtype = agree_input_dtype(stored.dtype, &choices);
        let mut planned = Vec::with_capacity(udfs.len());
        for (((spec, name), params), plan) in udfs.iter().zip(names).zip(params).zip(choices) {
            let decls = declare_buffers(spec.udf.as_ref(), &name, &params, &meta)?;
            let origin = spec.udf.origin();
            let version = spec.udf.description().version.clone();
            planned.push(PlannedUdf { name, origin, version, params, plan, decls, device: cpu(), device_note: None });
        }
        choose_devices(&mut planned, options.device, stored.dtype, threads)?;
        let readers: Vec<&dyn Udf> = udfs.iter().map(|s| s.udf.as_ref()).collect();
        let direct_dtype = direct_dtype(dataset, &readers, &meta, options);
        let count = options
            .partitions
            .unwrap_or_else(|| crate::dataset::default_partition_count(shape.nav_len(), shape.sig_len(), threads));
        let partitions = crate::dataset::plan_partitions(shape.nav_len(), count, options.roi.as_ref());
        let tiling = negotiate_tiling(dataset, &planned, &readers, &meta, direct_dtype, &partitions, options)?;
        let cap = options.max_result_bytes.unwrap_or_else(super::default_max_result_bytes);
        super::result_memory::check(&planned, &meta, options.roi.is_some(), options.result_extra.as_ref(), cap)?;
        Ok(Plan {
            dataset: opened.spec.clone(),
            shape,
            stored_dtype: stored,
            meta,
            udfs: planned,
            roi: options.roi.clone(),
            partitions,
            tiling,
            direct_dtype,
            threads,
            limits: options.limits,
        })
    }

    /// The params one instance of UDF `u` sees: nav aux arrays cut to the partition's
    /// selected frames (or, on the main side, `partition: None`, to all selected frames).
    pub(crate) fn instance_params(&self, params: &Params, desc: &Description, partition: Option<&Partition>) -> Params {
        let mut out = params.clone();
        for spec in desc.params.iter().filter(|s| s.nav_aux) {
            let Some(ParamValue::Array(array)) = params.get(&spec.name) else { continue };
            let sliced = match (partition, &self.roi) {
                (Some(p), _) => array.select_rows(p.frames.iter().map(|&f| f as usize)),
                (None, Some(roi)) => array.select_rows(roi.selected()),
                (None, None) => continue,
            };
            out.set(&spec.name, ParamValue::Array(Arc::new(sliced)));
        }
        out
    }
}

/// Step: the ROI covers the nav shape.
fn check_roi(roi: Option<&Roi>, shape: &DatasetShape) -> Result<(), RunError> {
    match roi {
        Some(roi) if roi.len() != shape.nav_len() => Err(RunError::Invalid(format!(
            "the ROI has {} positions, but the dataset's nav shape {:?} has {}",
            roi.len(),
            shape.nav,
            shape.nav_len()
        ))),
        _ => Ok(()),
    }
}

/// Step: resolve each UDF's params against its description and ask it for its choices
/// (method, preferred dtype, tiling).
fn resolve_and_choose(
    udfs: &[UdfSpec],
    names: &[String],
    meta: &DatasetMeta,
    force_method: Option<Method>,
) -> Result<(Vec<Params>, Vec<RunPlan>), RunError> {
    let mut all_params = Vec::with_capacity(udfs.len());
    let mut choices = Vec::with_capacity(udfs.len());
    for (spec, name) in udfs.iter().zip(names) {
        let desc = spec.udf.description();
        let params = resolve_params(name, &desc.params, &spec.params, &meta.nav_shape)?;
        let mut plan = spec.udf.plan(&params, meta).map_err(|e| main_call_error(spec.udf.as_ref(), name, "plan", e))?;
        if let Some(method) = force_method {
            plan.method = method;
        }
        if !desc.methods.contains(&plan.method) {
            let implemented = desc.methods.iter().map(|m| m.name()).collect::<Vec<_>>().join(", ");
            let error = CallError::Contract(format!(
                "it chose the {} method, but it only implements {implemented}",
                plan.method.name()
            ));
            // Forced by the caller (the conformance kit, --method): the caller's mistake.
            if force_method.is_some() {
                return Err(RunError::Invalid(format!("'{name}' {error}")));
            }
            return Err(main_call_error(spec.udf.as_ref(), name, "plan", error));
        }
        all_params.push(params);
        choices.push(plan);
    }
    Ok((all_params, choices))
}

/// Step: one input dtype for all, folding each preference with the stored dtype
/// (NumPy's `result_type`, API.md §6).
fn agree_input_dtype(stored: DType, choices: &[RunPlan]) -> DType {
    choices.iter().fold(stored, |acc, p| match p.input_dtype {
        DTypePreference::Native => acc,
        DTypePreference::Prefer(d) => result_type(d, acc),
    })
}

/// Step: a UDF's buffer declarations, checked against the rules of API.md §5.
fn declare_buffers(
    udf: &dyn Udf,
    name: &str,
    params: &Params,
    meta: &DatasetMeta,
) -> Result<Vec<BufferDecl>, RunError> {
    let decls = udf.result_buffers(params, meta).map_err(|e| main_call_error(udf, name, "result_buffers", e))?;
    // Breaking the rules is the UDF's fault (exit 2), reported at the call that declared.
    rules::check_declarations(udf.description(), &decls, meta.frames(), &meta.sig_shape)
        .map_err(|e| main_call_error(udf, name, "result_buffers", e))?;
    Ok(decls)
}

/// Step: which UDFs compute on the GPU: with `cuda` or `auto` and a usable GPU, the
/// built-ins with a GPU request ([`crate::builtins::gpu_request_for`]), with `auto` only
/// those expected to finish first there ([`crate::cuda::auto`]); `cuda` without a usable
/// GPU is an error, `auto` falls back to the CPU. Each UDF left on the CPU gets a note
/// saying why.
fn choose_devices(
    planned: &mut [PlannedUdf],
    device: crate::cuda::Device,
    stored: DType,
    threads: usize,
) -> Result<(), RunError> {
    use crate::cuda::Device;
    if device == Device::Cpu {
        return Ok(());
    }
    if let Err(why) = crate::cuda::available() {
        if device == Device::Cuda {
            return Err(RunError::Invalid(format!("the run asks for the CUDA device, but {why}")));
        }
        for p in planned.iter_mut() {
            p.device_note = Some(format!("no usable GPU: {why}"));
        }
        return Ok(());
    }
    for p in planned.iter_mut() {
        let chosen = crate::builtins::gpu_request_for(&p.origin, &p.decls).and_then(|()| match (&p.origin, device) {
            (UdfOrigin::Builtin { name }, Device::Auto) => {
                // `masks`: its count is the extra shape of its nav buffer.
                let masks =
                    p.decls.iter().find(|d| d.kind == BufferKind::Nav).map_or(0, |d| d.extra_shape.iter().product());
                crate::cuda::auto::prefers_gpu(name, masks, stored, threads)
            }
            _ => Ok(()),
        });
        match chosen {
            Ok(()) => p.device = DeviceClass::Cuda,
            Err(why) => p.device_note = Some(why),
        }
    }
    Ok(())
}

/// Step: integer files read by UDFs that all convert on read (and read in place) are
/// mapped in unconverted; otherwise tiles come in the input dtype.
fn direct_dtype(dataset: &dyn Dataset, udfs: &[&dyn Udf], meta: &DatasetMeta, options: &RunOptions) -> DType {
    let stored = dataset.stored_dtype();
    let fuses = !options.convert_in_executor
        && options.roi.is_none()
        && matches!(meta.input_dtype, DType::F32 | DType::F64)
        && FUSED_STORED.contains(&stored.dtype)
        && !stored.needs_conversion_to(stored.dtype)
        && udfs.iter().all(|u| u.reads_in_place() && u.converts_on_read())
        && dataset.shape().nav_len() > 0
        && dataset.direct_frames(0..1, stored.dtype).is_some();
    if fuses { stored.dtype } else { meta.input_dtype }
}

/// Step: the tile shape, negotiated from every UDF's wishes (API.md §7) or forced.
fn negotiate_tiling(
    dataset: &dyn Dataset,
    planned: &[PlannedUdf],
    udfs: &[&dyn Udf],
    meta: &DatasetMeta,
    direct_dtype: DType,
    partitions: &[Partition],
    options: &RunOptions,
) -> Result<TilingScheme, RunError> {
    let shape = dataset.shape();
    let intent = strongest_method(planned);
    if let Some(forced) = &options.tile_shape {
        if forced.len() != shape.sig.len() + 1 || forced.contains(&0) {
            return Err(RunError::Invalid(format!(
                "tile shape {forced:?} must be [depth, ..{} positive signal extents]",
                shape.sig.len()
            )));
        }
        let slice = if intent == Method::Tile { &forced[1..] } else { &shape.sig[..] };
        return Ok(TilingScheme::from_tile_shape(forced[0], slice, &shape.sig, intent));
    }
    let requests: Vec<TileRequest> = planned
        .iter()
        .map(|p| TileRequest { method: p.plan.method, depth: p.plan.tiling.depth, size: p.plan.tiling.total_size })
        .collect();
    let stored = dataset.stored_dtype();
    // A copy is needed unless every UDF is native and the data can be mapped straight
    // in; wasm plugins always need one (into guest memory).
    let needs_copy = (stored.needs_conversion_to(meta.input_dtype) && direct_dtype == meta.input_dtype)
        || options.roi.is_some()
        || udfs.iter().any(|u| !u.reads_in_place());
    let tiling = crate::dataset::negotiate(
        &requests,
        shape,
        &dataset.base_shape(),
        partitions.first().map_or(1, Partition::len),
        meta.input_dtype.size(),
        stored.dtype.size(),
        needs_copy,
    );
    debug_assert!(intent != Method::Partition || tiling.intent == Method::Partition);
    Ok(whole_frames_for_in_place_readers(tiling, shape, udfs, partitions, needs_copy))
}

/// UDFs that all read in place get their tiles lent straight from the file mapping,
/// which only whole frames allow: where the negotiated shape cuts frames into signal
/// slices (LiberTEM's rule grows the depth first: a plugin's 8 MiB tiles of 256 × 256
/// frames became 512 frames × 16 rows, each gathered into a copy), take as many whole
/// frames as the negotiated tile holds instead. Built-ins ask for whole partitions and
/// are not affected; UDFs that need a copy keep LiberTEM's shapes.
fn whole_frames_for_in_place_readers(
    tiling: TilingScheme,
    shape: &DatasetShape,
    udfs: &[&dyn Udf],
    partitions: &[Partition],
    needs_copy: bool,
) -> TilingScheme {
    let frame_px = shape.sig_len();
    let tile_px = tiling.depth * tiling.slices.first().map_or(0, |s| s.len());
    if needs_copy
        || tiling.intent != Method::Tile
        || tiling.slices.len() < 2
        || frame_px == 0
        || tile_px < frame_px
        || !udfs.iter().all(|u| u.reads_in_place())
    {
        return tiling;
    }
    let depth = (tile_px / frame_px).min(partitions.first().map_or(1, Partition::len)).max(1);
    TilingScheme::from_tile_shape(depth, &shape.sig, &shape.sig, tiling.intent)
}

/// The strongest method among the UDFs: partition > frame > tile.
fn strongest_method(planned: &[PlannedUdf]) -> Method {
    let uses = |m| planned.iter().any(|u| u.plan.method == m);
    if uses(Method::Partition) {
        Method::Partition
    } else if uses(Method::Frame) {
        Method::Frame
    } else {
        Method::Tile
    }
}

/// A failed main-side call while planning.
fn main_call_error(udf: &dyn Udf, name: &str, method: &'static str, error: CallError) -> RunError {
    RunError::Udf {
        udf: name.to_owned(),
        source_path: udf.source().to_owned(),
        at: super::FailurePoint::main(method),
        error,
    }
}

/// Resolve `given` against a UDF's parameter specs (defaults, types, unknown names) and
/// flatten nav aux arrays to `(nav_len, ..extra)`. Used when planning and for
/// `update_params` between partitions.
pub(crate) fn resolve_params(
    name: &str,
    specs: &[ParamSpec],
    given: &Params,
    nav: &[usize],
) -> Result<Params, RunError> {
    let mut params = crate::params::resolve(name, specs, given).map_err(RunError::Invalid)?;
    let nav_len: usize = nav.iter().product();
    for spec in specs.iter().filter(|s| s.nav_aux) {
        let Some(ParamValue::Array(array)) = params.get(&spec.name) else { continue };
        let shape = array.shape();
        let extra = if shape.len() >= nav.len() && shape[..nav.len()] == *nav {
            shape[nav.len()..].to_vec()
        } else if shape.first() == Some(&nav_len) {
            shape[1..].to_vec()
        } else {
            return Err(RunError::Invalid(format!(
                "aux parameter '{}' of '{name}' has shape {shape:?}; its leading axes must be the nav shape {nav:?} (or {nav_len})",
                spec.name
            )));
        };
        let mut flat = vec![nav_len];
        flat.extend(extra);
        let reshaped = (**array).clone().reshape(&flat).map_err(|e| RunError::Invalid(e.to_string()))?;
        params.set(&spec.name, ParamValue::Array(Arc::new(reshaped)));
    }
    Ok(params)
}
