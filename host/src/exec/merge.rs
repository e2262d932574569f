//! Main side: the merged buffers of every UDF, and merging partitions into them — in
//! any order, from any engine. [`Merger`] is the one merge path: the in-process
//! [`super::RunIter`] uses it as much as a Dask client does.

use super::partition::{PartitionOutput, check_exported, named};
use super::plan::{Plan, resolve_params};
use super::{FailurePoint, RunError, RunResults, RunStats, results};
use crate::array::NdArray;
use crate::udf::{
    BufferDecl, BufferKind, BufferUse, BufferViewMut, CallError, DatasetMeta, InitContext, InstanceStats, MergeContext,
    NamedBuffer, Params, PartitionMeta, Udf,
};
use std::sync::Arc;
use std::time::Instant;

/// The dataset-sized buffers of one UDF (nav buffers flat and ROI-compressed), in
/// declaration order, without result-only buffers.
///
/// Public so that tools (the conformance kit) can merge partition results in orders and
/// trees of their own.
#[derive(Debug, Clone)]
pub struct MergeState {
    pub buffers: Vec<NamedBuffer>,
    kinds: Vec<BufferKind>,
}

impl MergeState {
    /// Zeroed buffers for `decls` with `frames` nav entries.
    pub fn zeros(decls: &[BufferDecl], frames: usize, sig: &[usize]) -> Self {
        let arrays = decls
            .iter()
            .filter(|d| d.usage != BufferUse::ResultOnly)
            .map(|d| NdArray::zeros(d.dtype, &d.storage_shape(frames, sig)))
            .collect();
        Self::from_arrays(decls, arrays)
    }

    /// Buffers from arrays in declaration order (result-only declarations skipped).
    pub fn from_arrays(decls: &[BufferDecl], arrays: Vec<NdArray>) -> Self {
        let decls = decls.iter().filter(|d| d.usage != BufferUse::ResultOnly);
        let (buffers, kinds) =
            decls.zip(arrays).map(|(d, array)| (NamedBuffer { name: d.name.clone(), array }, d.kind)).unzip();
        MergeState { buffers, kinds }
    }

    /// Merge `src` — the buffers of the frames `partition.origin..+partition.frames`, in
    /// declaration order — into this state: natively for UDFs without a custom merge
    /// (nav buffers only: copy the rows), else through the UDF with `dest` restricted to
    /// those rows for nav buffers. `valid` is the compressed mask of rows merged before.
    ///
    /// # Errors
    /// The UDF's merge fails or returns malformed buffers.
    pub fn merge(
        &mut self,
        udf: &dyn Udf,
        params: &Params,
        dataset: &DatasetMeta,
        partition: &PartitionMeta,
        src: &[NamedBuffer],
        valid: &[bool],
    ) -> Result<(), CallError> {
        let rows = partition.origin as usize..partition.origin as usize + partition.frames;
        if !udf.description().custom_merge {
            for ((dest, kind), src) in self.buffers.iter_mut().zip(&self.kinds).zip(src) {
                if *kind != BufferKind::Nav {
                    return Err(CallError::Contract(format!(
                        "buffer '{}' is not nav and there is no custom merge",
                        dest.name
                    )));
                }
                copy_rows(&mut dest.array, rows.clone(), &src.array);
            }
            return Ok(());
        }
        let ctx = MergeContext { params, dataset, partition, valid_nav_mask: valid };
        let mut views: Vec<BufferViewMut<'_>> = self
            .buffers
            .iter_mut()
            .zip(&self.kinds)
            .map(|(b, kind)| {
                let dtype = b.array.dtype();
                let mut shape = b.array.shape().to_vec();
                let bytes = if *kind == BufferKind::Nav {
                    let row = row_bytes(&b.array);
                    shape[0] = rows.len();
                    &mut b.array.bytes_mut()[rows.start * row..rows.end * row]
                } else {
                    b.array.bytes_mut()
                };
                BufferViewMut { name: &b.name, dtype, shape, bytes }
            })
            .collect();
        udf.merge(ctx, &mut views, src)
    }
}

fn row_bytes(array: &NdArray) -> usize {
    array.shape()[1..].iter().product::<usize>() * array.dtype().size()
}

/// Copy all of `src` into rows `rows` of `dest` (same row layout, checked before).
fn copy_rows(dest: &mut NdArray, rows: std::ops::Range<usize>, src: &NdArray) {
    let row = row_bytes(dest);
    dest.bytes_mut()[rows.start * row..rows.end * row].copy_from_slice(src.bytes());
}

/// Each partition's buffers of one UDF, as `(partition index, buffers)` in merge order.
type KeptBuffers = Vec<(usize, Vec<NamedBuffer>)>;

/// Merges [`PartitionOutput`]s of a plan, in any order, and gives results at any point.
pub struct Merger {
    plan: Arc<Plan>,
    /// [`Plan::hash`] of the plan and of each [`truncate`](Self::truncate)d one (outputs
    /// dispatched before a scan ended early carry the first): outputs of other plans are
    /// refused.
    plan_hashes: Vec<String>,
    udfs: Vec<Arc<dyn Udf>>,
    states: Vec<MergeState>,
    /// Current parameters per UDF (the plan's, or as updated between partitions).
    params: Vec<Params>,
    /// Merged nav positions (compressed; LiberTEM's `damage`).
    damage: Vec<bool>,
    /// Per partition of the plan (by position): merged yet?
    merged: Vec<bool>,
    stats: RunStats,
    /// Per UDF: instance stats of each merged partition.
    instances: Vec<Vec<(usize, InstanceStats)>>,
    /// Per UDF: each partition's buffers, when kept.
    kept: Option<Vec<KeptBuffers>>,
    /// Per UDF: where and why its merge failed, if it did: its merged state cannot be
    /// trusted, so it is merged no further and has no results; the other UDFs go on.
    failed: Vec<Option<(FailurePoint, CallError)>>,
}

impl Merger {
    /// A merger with initial buffers: zeros, or what a UDF's main-side `preprocess`
    /// makes. `udfs` are the plan's UDFs, in order.
    ///
    /// # Errors
    /// A main-side `preprocess` fails; [`RunError::Internal`] if `udfs` do not match.
    pub fn new(plan: Arc<Plan>, udfs: Vec<Arc<dyn Udf>>) -> Result<Self, RunError> {
        let hash = plan.hash();
        Merger::with_plan_hash(plan, hash, udfs)
    }

    /// [`Merger::new`] with the plan's [`Plan::hash`] known (a worker's): hashing a plan
    /// serialises it, parameters included (16 masks of 256 × 256 made that ~8 ms a run).
    ///
    /// # Errors
    /// As [`Merger::new`].
    pub fn with_plan_hash(plan: Arc<Plan>, plan_hash: String, udfs: Vec<Arc<dyn Udf>>) -> Result<Self, RunError> {
        if udfs.len() != plan.udfs.len() {
            return Err(RunError::Internal(format!("{} UDFs for a plan of {}", udfs.len(), plan.udfs.len())));
        }
        let params: Vec<Params> = plan.udfs.iter().map(|u| u.params.clone()).collect();
        let states = (0..udfs.len())
            .map(|u| {
                initial_buffers(&plan, udfs[u].as_ref(), u, &params[u])
                    .map(|a| MergeState::from_arrays(&plan.udfs[u].decls, a))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let stats = RunStats { partitions: plan.partitions.len(), threads: plan.threads, ..RunStats::default() };
        Ok(Merger {
            plan_hashes: vec![plan_hash],
            damage: vec![false; plan.meta.frames()],
            merged: vec![false; plan.partitions.len()],
            instances: vec![Vec::new(); udfs.len()],
            kept: None,
            failed: vec![None; udfs.len()],
            plan,
            udfs,
            states,
            params,
            stats,
        })
    }

    /// Keep every merged partition's buffers (see [`partition_buffers`](Self::partition_buffers)).
    pub fn keep_partition_buffers(&mut self, keep: bool) {
        self.kept = keep.then(|| vec![Vec::new(); self.udfs.len()]);
    }

    pub fn plan(&self) -> &Arc<Plan> {
        &self.plan
    }

    /// Merge one partition's output.
    ///
    /// A UDF whose merge fails is out of the run from then on (its merged state may be
    /// half-updated): it is merged no further and [`results`](Self::results) reports its
    /// failure, while the partition is still merged into every other UDF (issue 15,
    /// item 6: one plugin's failure does not discard the others' results).
    ///
    /// # Errors
    /// [`RunError::Invalid`] for a partition the plan does not have, one merged before,
    /// or buffers that do not match the declarations (nothing is merged then);
    /// [`RunError::Udf`] for the first UDF whose merge failed (the others are merged).
    pub fn merge(&mut self, output: PartitionOutput) -> Result<super::MergeStep, RunError> {
        let started = Instant::now();
        let plan = self.plan.clone();
        if !self.plan_hashes.contains(&output.plan) {
            return Err(RunError::Invalid(format!(
                "partition output {} was run from another plan (plan hash {}), not this run's ({}); a stale \
                 output of an earlier run?",
                output.index,
                output.plan,
                self.plan_hashes.join(" or ")
            )));
        }
        let position = plan.partitions.iter().position(|p| p.index == output.index).ok_or_else(|| {
            RunError::Invalid(format!("partition output {}: the plan has no such partition", output.index))
        })?;
        if self.merged[position] {
            return Err(RunError::Invalid(format!("partition {} was merged already", output.index)));
        }
        let partition = &plan.partitions[position];
        if output.udfs.len() != self.udfs.len() {
            return Err(RunError::Invalid(format!(
                "partition output {} has {} UDFs, the plan {}",
                output.index,
                output.udfs.len(),
                self.udfs.len()
            )));
        }
        let tiling = Arc::new(plan.tiling.clone());
        let at = || FailurePoint::worker("merge", partition.index, &partition.frames);
        // Outputs may come from another process: check them as a worker would, all
        // before anything is merged.
        let mut sources = Vec::with_capacity(output.udfs.len());
        for (u, out) in output.udfs.into_iter().enumerate() {
            let planned = &plan.udfs[u];
            let arrays =
                check_exported(&planned.decls, out.buffers, partition.len(), &plan.meta.sig_shape).map_err(|e| {
                    RunError::Invalid(format!("partition output {} of '{}': {e}", output.index, planned.name))
                })?;
            sources.push((named(&planned.decls, arrays), out.stats));
        }
        let mut first_error = None;
        for (u, (src, stats)) in sources.into_iter().enumerate() {
            if self.failed[u].is_some() {
                continue;
            }
            let planned = &plan.udfs[u];
            let meta = PartitionMeta {
                index: partition.index,
                origin: partition.origin,
                frames: partition.len(),
                method: planned.plan.method,
                tiling: tiling.clone(),
            };
            let merged =
                self.states[u].merge(self.udfs[u].as_ref(), &self.params[u], &plan.meta, &meta, &src, &self.damage);
            if let Err(e) = merged {
                self.failed[u] = Some((at(), e.clone()));
                first_error.get_or_insert(self.udf_error(u, at(), e));
                continue;
            }
            if let Some(stats) = stats {
                self.instances[u].push((partition.index, stats));
            }
            if let Some(kept) = &mut self.kept {
                kept[u].push((partition.index, src));
            }
        }
        let start = partition.origin as usize;
        self.damage[start..start + partition.len()].fill(true);
        self.merged[position] = true;
        self.stats.partitions_merged += 1;
        self.stats.frames += output.frames;
        self.stats.bytes_read += output.bytes_read;
        self.stats.merge_seconds += started.elapsed().as_secs_f64();
        if let Some(error) = first_error {
            return Err(error);
        }
        Ok(super::MergeStep {
            partition: partition.index,
            merged: self.stats.partitions_merged,
            total: self.stats.partitions,
        })
    }

    /// The scan ended after its first `frames` frames (a live source that stopped early):
    /// merge by [`Plan::truncated`] from now on, so the partition it cuts can be merged
    /// with the frames it has, and the run is complete without the partitions past it.
    ///
    /// # Errors
    /// [`RunError::Internal`] if a partition that the cut changes was merged already.
    pub fn truncate(&mut self, frames: u64) -> Result<(), RunError> {
        let truncated = self.plan.truncated(frames);
        let mut merged = Vec::with_capacity(truncated.partitions.len());
        for (position, old) in self.plan.partitions.iter().enumerate() {
            let new = truncated.partitions.iter().find(|p| p.index == old.index);
            if self.merged[position] && new != Some(old) {
                return Err(RunError::Internal(format!(
                    "partition {} was merged, but the scan ended inside it (after {frames} frames)",
                    old.index
                )));
            }
            if new.is_some() {
                merged.push(self.merged[position]);
            }
        }
        self.merged = merged;
        self.stats.partitions = truncated.partitions.len();
        self.plan_hashes.push(truncated.hash());
        self.plan = Arc::new(truncated);
        Ok(())
    }

    /// Merged nav positions so far (compressed; LiberTEM's `damage`).
    pub fn damage(&self) -> &[bool] {
        &self.damage
    }

    /// Merged positions so far over the whole scan (flat, C order over the nav shape):
    /// [`damage`](Self::damage) put back in place, `false` outside the ROI.
    pub fn nav_damage(&self) -> Vec<bool> {
        match &self.plan.roi {
            None => self.damage.clone(),
            Some(roi) => roi.scatter(&self.damage, false),
        }
    }

    /// Whether every partition of the plan is merged.
    pub fn is_complete(&self) -> bool {
        self.merged.iter().all(|&m| m)
    }

    /// The statistics of what was merged (processing times are the engine's to add).
    pub fn stats(&self) -> &RunStats {
        &self.stats
    }

    /// The current parameters of each UDF.
    pub fn params(&self) -> &[Params] {
        &self.params
    }

    /// Replace parameters of UDF `udf` for partitions merged from now on (LiberTEM's
    /// `update_parameters_experimental`); only the given names change. Returns the
    /// resolved parameters, which the engine must also run new partitions with.
    ///
    /// # Errors
    /// No such UDF, an unknown parameter or a wrong type.
    pub fn update_params(&mut self, udf: usize, updates: &Params) -> Result<Params, RunError> {
        let planned = self.plan.udfs.get(udf).ok_or_else(|| RunError::Invalid(format!("no UDF {udf} in this run")))?;
        let mut merged = self.params[udf].clone();
        for p in updates.iter() {
            merged.set(&p.name, p.value.clone());
        }
        let resolved =
            resolve_params(&planned.name, &self.udfs[udf].description().params, &merged, &self.plan.meta.nav_shape)?;
        self.params[udf] = resolved.clone();
        Ok(resolved)
    }

    /// Each partition's exported buffers for UDF `udf`, in merge order (only when kept).
    pub fn partition_buffers(&self, udf: usize) -> &[(usize, Vec<NamedBuffer>)] {
        self.kept.as_ref().and_then(|k| k.get(udf)).map_or(&[], Vec::as_slice)
    }

    /// The results of what has been merged so far (calls `get_results`; LiberTEM's
    /// `UDFResultsLazy.buffers`).
    ///
    /// # Errors
    /// A UDF's merge failed before, or its `get_results` fails or returns something that
    /// breaks the rules (the first such UDF; [`results_each`](Self::results_each) gives
    /// the others' results all the same).
    pub fn results(&self) -> Result<RunResults, RunError> {
        let (results, mut failures) = self.results_each();
        match failures.drain(..).next() {
            Some((_, error)) => Err(error),
            None => Ok(results),
        }
    }

    /// The results of every UDF that has them, and the failure of each that has not (its
    /// index in the plan, and why: its merge failed before, or its `get_results` failed
    /// now). One UDF's failure does not cost the others their results.
    pub fn results_each(&self) -> (RunResults, Vec<(usize, RunError)>) {
        let started = Instant::now();
        let mut udfs = Vec::with_capacity(self.udfs.len());
        let mut failures = Vec::new();
        for u in 0..self.udfs.len() {
            if let Some((at, error)) = &self.failed[u] {
                failures.push((u, self.udf_error(u, at.clone(), error.clone())));
                continue;
            }
            let finished =
                results::finish(&self.plan, self.udfs[u].as_ref(), u, &self.params[u], &self.states[u], &self.damage);
            match finished {
                Ok(mut r) => {
                    r.instances = self.instances[u].clone();
                    udfs.push(r);
                }
                Err(e) => failures.push((u, e)),
            }
        }
        let mut stats = self.stats.clone();
        stats.results_seconds = started.elapsed().as_secs_f64();
        let results = RunResults { udfs, stats, damage: self.damage.clone(), input_dtype: self.plan.meta.input_dtype };
        (results, failures)
    }

    /// Whether UDF `udf`'s merge failed (it has no results).
    pub fn udf_failed(&self, udf: usize) -> bool {
        self.failed.get(udf).is_some_and(Option::is_some)
    }

    pub(crate) fn udf_error(&self, u: usize, at: FailurePoint, error: CallError) -> RunError {
        RunError::Udf { udf: self.plan.udfs[u].name.clone(), source_path: self.udfs[u].source().to_owned(), at, error }
    }
}

/// Initial merged buffers of UDF `u`: zeros, or what its main-side preprocess makes.
fn initial_buffers(plan: &Plan, udf: &dyn Udf, u: usize, params: &Params) -> Result<Vec<NdArray>, RunError> {
    let decls = &plan.udfs[u].decls;
    let frames = plan.meta.frames();
    if !udf.description().main_preprocess {
        return Ok(MergeState::zeros(decls, frames, &plan.meta.sig_shape)
            .buffers
            .into_iter()
            .map(|b| b.array)
            .collect());
    }
    let error = |method, e| RunError::Udf {
        udf: plan.udfs[u].name.clone(),
        source_path: udf.source().to_owned(),
        at: FailurePoint::main(method),
        error: e,
    };
    let main_params = plan.instance_params(params, udf.description(), None);
    let ctx = InitContext { params: &main_params, dataset: &plan.meta, partition: None };
    let mut runner = udf.start(ctx).map_err(|e| error("init (main)", e))?;
    runner.preprocess().map_err(|e| error("preprocess (main)", e))?;
    let exported = runner.export().map_err(|e| error("export_buffers (main)", e))?;
    check_exported(decls, exported, frames, &plan.meta.sig_shape).map_err(|e| error("export_buffers (main)", e))
}
