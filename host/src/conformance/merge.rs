//! Merge algebra: a custom merge must be order-independent and associative, because
//! the host merges partitions in completion order and may merge them in any grouping.
//!
//! The check runs the plugin once with its partition buffers kept, then merges those
//! buffers itself — in other orders (`merge.order`), and in trees whose inner nodes are
//! pseudo-partitions covering adjacent partitions (`merge.associativity`) — and
//! compares the final results with the run's.

use super::compare::{Bounds, summarise};
use super::report::{Check, Evidence, Group};
use super::subject::{Ctx, Executed};
use crate::array::NdArray;
use crate::dataset::Partition;
use crate::exec::{MergeState, RunOptions};
use crate::udf::{
    BufferKind, BufferUse, CallError, DatasetMeta, DeviceClass, InitContext, NamedBuffer, PartitionMeta,
    ResultsContext, Udf,
};
use std::sync::Arc;

/// A merge tree over partitions (by position in the run's partition list).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Tree {
    Leaf(usize),
    Node(Box<Tree>, Box<Tree>),
}

impl Tree {
    /// Balanced over `lo..hi`.
    pub(crate) fn balanced(lo: usize, hi: usize) -> Tree {
        if hi - lo == 1 {
            return Tree::Leaf(lo);
        }
        let mid = lo + (hi - lo) / 2;
        Tree::Node(Box::new(Tree::balanced(lo, mid)), Box::new(Tree::balanced(mid, hi)))
    }

    /// `p0 + (p1 + (p2 + ...))`.
    pub(crate) fn right_nested(lo: usize, hi: usize) -> Tree {
        if hi - lo == 1 {
            return Tree::Leaf(lo);
        }
        Tree::Node(Box::new(Tree::Leaf(lo)), Box::new(Tree::right_nested(lo + 1, hi)))
    }

    /// The tree in parentheses, with partition indices.
    fn show(&self, partitions: &[Partition]) -> String {
        match self {
            Tree::Leaf(p) => format!("p{}", partitions[*p].index),
            Tree::Node(l, r) => format!("({} + {})", l.show(partitions), r.show(partitions)),
        }
    }
}

/// Merges the kept partition buffers of one run, in any order or tree.
struct Merger<'a> {
    udf: &'a dyn Udf,
    run: &'a Executed,
    meta: DatasetMeta,
    frames: usize,
    sig: Vec<usize>,
    /// Kinds of the merged buffers (declaration order, no result-only ones).
    kinds: Vec<BufferKind>,
}

impl Merger<'_> {
    /// The merged state before any partition: zeros, or the main-side preprocess.
    fn initial(&self) -> Result<MergeState, CallError> {
        if !self.udf.description().main_preprocess {
            return Ok(MergeState::zeros(&self.run.decls, self.frames, &self.sig));
        }
        let ctx = InitContext { params: &self.run.params, dataset: &self.meta, partition: None };
        let mut runner = self.udf.start(ctx)?;
        runner.preprocess()?;
        let mut exported = runner.export()?;
        let mut arrays = Vec::new();
        for d in self.run.decls.iter().filter(|d| d.usage != BufferUse::ResultOnly) {
            let at = exported.iter().position(|b| b.name == d.name).ok_or_else(|| {
                CallError::Contract(format!("the main-side preprocess did not export buffer '{}'", d.name))
            })?;
            arrays.push(exported.swap_remove(at).array);
        }
        Ok(MergeState::from_arrays(&self.run.decls, arrays))
    }

    fn partition_meta(&self, index: usize, origin: u64, frames: usize) -> PartitionMeta {
        PartitionMeta {
            index,
            origin,
            frames,
            method: self.run.results.udfs[0].method,
            tiling: Arc::new(self.run.tiling.clone()),
        }
    }

    /// Partition `p` (position) as merge input.
    fn leaf(&self, p: usize) -> Result<(PartitionMeta, Vec<NamedBuffer>), CallError> {
        let part = &self.run.partitions[p];
        let buffers = self
            .run
            .kept
            .iter()
            .find(|(i, _)| *i == part.index)
            .map(|(_, b)| b.clone())
            .ok_or_else(|| CallError::internal(format!("partition {} was not kept", part.index)))?;
        Ok((self.partition_meta(part.index, part.origin, part.len()), buffers))
    }

    fn merge_into(
        &self,
        state: &mut MergeState,
        valid: &mut [bool],
        meta: &PartitionMeta,
        src: &[NamedBuffer],
    ) -> Result<(), CallError> {
        state.merge(self.udf, &self.run.params, &self.meta, meta, src, valid)?;
        let start = meta.origin as usize;
        valid[start..start + meta.frames].fill(true);
        Ok(())
    }

    /// Evaluate a tree: a leaf is its partition; a node merges both children into a
    /// fresh state and hands on the rows it covers as one pseudo-partition.
    fn eval(&self, tree: &Tree) -> Result<(PartitionMeta, Vec<NamedBuffer>), CallError> {
        let (l, r) = match tree {
            Tree::Leaf(p) => return self.leaf(*p),
            Tree::Node(l, r) => (self.eval(l)?, self.eval(r)?),
        };
        let mut state = self.initial()?;
        let mut valid = vec![false; self.frames];
        self.merge_into(&mut state, &mut valid, &l.0, &l.1)?;
        self.merge_into(&mut state, &mut valid, &r.0, &r.1)?;
        let origin = l.0.origin.min(r.0.origin);
        let frames = l.0.frames + r.0.frames;
        let rows = origin as usize..origin as usize + frames;
        let buffers = state
            .buffers
            .iter()
            .zip(&self.kinds)
            .map(|(b, kind)| NamedBuffer {
                name: b.name.clone(),
                array: if *kind == BufferKind::Nav { b.array.slice_rows(rows.clone()) } else { b.array.clone() },
            })
            .collect();
        let index = l.0.index.min(r.0.index);
        Ok((self.partition_meta(index, origin, frames), buffers))
    }

    /// Merge the partitions at `order` (positions) one by one into a fresh state.
    fn fold(&self, order: &[usize]) -> Result<MergeState, CallError> {
        let mut state = self.initial()?;
        let mut valid = vec![false; self.frames];
        for &p in order {
            let (meta, src) = self.leaf(p)?;
            self.merge_into(&mut state, &mut valid, &meta, &src)?;
        }
        Ok(state)
    }

    /// Merge a whole tree into a fresh state.
    fn tree(&self, tree: &Tree) -> Result<MergeState, CallError> {
        let mut state = self.initial()?;
        let mut valid = vec![false; self.frames];
        let (meta, src) = self.eval(tree)?;
        self.merge_into(&mut state, &mut valid, &meta, &src)?;
        Ok(state)
    }

    /// The final results of a merged state, as `get_results` (or the pass-through)
    /// gives them: `(name, raw array)` of every non-private buffer.
    fn results(&self, state: &MergeState) -> Result<Vec<(String, NdArray)>, CallError> {
        let entries = if self.udf.description().custom_results {
            let valid = vec![true; self.frames];
            let ctx =
                ResultsContext { params: &self.run.params, dataset: &self.meta, valid_nav_mask: &valid, roi: None };
            self.udf.get_results(ctx, &state.buffers)?
        } else {
            Vec::new()
        };
        let mut out = Vec::new();
        for d in &self.run.decls {
            if let Some(e) = entries.iter().find(|e| e.name == d.name) {
                out.push((d.name.clone(), e.array.clone()));
            } else if d.usage == BufferUse::Normal
                && let Some(b) = state.buffers.iter().find(|b| b.name == d.name)
            {
                out.push((d.name.clone(), b.array.clone()));
            }
        }
        Ok(out)
    }

    /// Compare the results of a merged state with the run's.
    fn evidence(&self, variant: &str, state: Result<MergeState, CallError>, bounds: &Bounds) -> Evidence {
        let results = match state.and_then(|s| self.results(&s)) {
            Ok(r) => r,
            Err(e) => return Evidence::fail(variant, format!("merging failed: {e}")),
        };
        let pairs: Vec<(&str, &NdArray, Option<&NdArray>)> = self.run.results.udfs[0]
            .buffers
            .iter()
            .map(|b| (b.name.as_str(), &b.raw, results.iter().find(|(n, _)| *n == b.name).map(|(_, a)| a)))
            .collect();
        let mut e = summarise(variant, &pairs, None, bounds, false, "differs from the run's result");
        if e.status == super::Status::Pass && !pairs.is_empty() {
            e.message = format!("same results as the run's ({})", e.message);
        }
        e
    }
}

/// The merge algebra checks.
pub(crate) fn check(ctx: &Ctx<'_>) -> Vec<Check> {
    let order_title = "merging partitions in other orders gives the same results";
    let assoc_title = "merging partitions in other groupings (pseudo-partitions) gives the same results";
    let desc = ctx.subject.udf.description();
    if !desc.custom_merge {
        let reason = "no custom merge: the host merges nav buffers by copying rows";
        return vec![
            Check::not_applicable(Group::Merge, "order", order_title, reason),
            Check::not_applicable(Group::Merge, "associativity", assoc_title, reason),
        ];
    }
    let primary = ctx.primary();
    let count = 6.min(ctx.frames());
    // One thread: the run merges in index order, so its results are the in-order
    // reference even for a plugin whose merge depends on the order.
    let options =
        RunOptions { partitions: Some(count), threads: Some(1), keep_partition_buffers: true, ..Default::default() };
    let run = match ctx.subject.execute(&primary.data, &ctx.subject.params, options, false) {
        Ok(r) => r,
        Err(e) => {
            let evidence = vec![Evidence::fail(&format!("{count} partitions, buffers kept"), e.to_string())];
            return vec![
                Check::from_evidence(Group::Merge, "order", order_title, evidence.clone()),
                Check::from_evidence(Group::Merge, "associativity", assoc_title, evidence),
            ];
        }
    };
    let shape = primary.data.shape();
    let merger = Merger {
        udf: ctx.subject.udf.as_ref(),
        meta: DatasetMeta {
            nav_shape: shape.nav.clone(),
            sig_shape: shape.sig.clone(),
            dataset_dtype: primary.data.stored_dtype().dtype,
            input_dtype: run.input_dtype,
            roi_count: None,
            device_class: DeviceClass::Cpu,
            threads_per_worker: 1,
        },
        frames: shape.nav_len(),
        sig: shape.sig.clone(),
        kinds: run.decls.iter().filter(|d| d.usage != BufferUse::ResultOnly).map(|d| d.kind).collect(),
        run: &run,
    };
    let n = merger.run.partitions.len();
    let bounds = ctx.bounds(&run, primary.data.as_ref());
    let tol = &bounds;
    let show = |order: &[usize]| {
        order.iter().map(|&p| format!("p{}", merger.run.partitions[p].index)).collect::<Vec<_>>().join(", ")
    };

    let forward: Vec<usize> = (0..n).collect();
    let reverse: Vec<usize> = (0..n).rev().collect();
    let interleaved: Vec<usize> = (0..n).step_by(2).chain((1..n).step_by(2)).collect();
    let mut orders = vec![("in order", forward), ("reversed", reverse), ("evens then odds", interleaved)];
    orders.dedup_by(|a, b| a.1 == b.1);
    let order_evidence: Vec<Evidence> = orders
        .iter()
        .map(|(name, order)| merger.evidence(&format!("{name}: {}", show(order)), merger.fold(order), tol))
        .collect();

    let mut assoc_evidence = Vec::new();
    if n < 3 {
        assoc_evidence.push(Evidence::na("trees", format!("{n} partitions: no grouping differs from an order")));
    } else {
        for (name, tree) in [("balanced", Tree::balanced(0, n)), ("right-nested", Tree::right_nested(0, n))] {
            let variant = format!("{name}: {}", tree.show(&merger.run.partitions));
            assoc_evidence.push(merger.evidence(&variant, merger.tree(&tree), tol));
        }
    }
    vec![
        Check::from_evidence(Group::Merge, "order", order_title, order_evidence),
        Check::from_evidence(Group::Merge, "associativity", assoc_title, assoc_evidence),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(t: &Tree) -> String {
        match t {
            Tree::Leaf(p) => p.to_string(),
            Tree::Node(l, r) => format!("({} {})", shape(l), shape(r)),
        }
    }

    #[test]
    fn trees() {
        assert_eq!(shape(&Tree::balanced(0, 6)), "((0 (1 2)) (3 (4 5)))");
        assert_eq!(shape(&Tree::right_nested(0, 4)), "(0 (1 (2 3)))");
        assert_eq!(shape(&Tree::balanced(0, 1)), "0");
    }
}
