//! The run plan, single partitions and the merger: what other engines (Dask, batch
//! schedulers, LiberTEM) use to run a plan made here.

use std::path::Path;
use std::process::Command;
use std::sync::Arc;
use std::sync::mpsc;
use std::task::Poll;
use std::time::Duration;
use udf_host::array::NdArray;
use udf_host::dataset::{DatasetSpec, MemoryDataset, OpenOptions};
use udf_host::exec::{Merger, PartitionOutput, Plan, Run, RunError, RunOptions, RunResults, UdfSpec, Worker};
use udf_host::loader::{Loader, RuntimeSetup};
use udf_host::roi::Roi;
use udf_host::udf::{
    BufferDecl, BufferKind, BufferUse, CallError, DTypePreference, DataAccess, DatasetMeta, Description, InitContext,
    Method, NamedBuffer, Params, PartitionRunner, RunPlan, Tile, TilingPreferences, Udf, UdfOrigin,
};
use udf_host::wasm::{ComponentCache, WasmRuntime};
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::reference::{sum_frames, to_f64};
use udf_host_tests::{load, plugin, test_cache_dir};

/// Environment of the child process [`a_child_process_runs_one_partition`] (the test
/// binary re-executed): which plan, which partition, where to write.
const CHILD_PLAN: &str = "UDF_HOST_TEST_CHILD_PLAN";
const CHILD_INDEX: &str = "UDF_HOST_TEST_CHILD_INDEX";
const CHILD_OUT: &str = "UDF_HOST_TEST_CHILD_OUT";

/// Not a test of its own: the body of the worker processes of
/// [`partitions_run_in_separate_processes_merge_to_what_one_run_gives`], which runs this
/// test binary again with only this test selected and the environment set. Without the
/// environment it does nothing.
#[test]
fn a_child_process_runs_one_partition() {
    let (Ok(plan), Ok(index), Ok(out)) =
        (std::env::var(CHILD_PLAN), std::env::var(CHILD_INDEX), std::env::var(CHILD_OUT))
    else {
        return;
    };
    let cache = test_cache_dir().display().to_string();
    let args = ["udf-host", "run-partition", &plan, "--index", &index, "--out", &out, "--cache-dir", &cache];
    if let Err(f) = udf_host::cli::execute(args) {
        panic!("run-partition failed (exit {}): {:#}", f.code, f.error);
    }
}

/// A uint16 scan with small integer values (sums are exact in float32), its ROI, and the
/// run: a wasm plugin with a custom merge (`sum`, a sig buffer), the nav-only wasm
/// `sumsig`, and the built-ins `sum` and `sumsig`.
fn scan(dir: &Path) -> (std::path::PathBuf, fixtures::Data, Roi, Vec<UdfSpec>) {
    let data = fixtures::mk_random(&[6, 7], &[8, 9], 16).rounded(Ty::U16);
    let path = dir.join("scan.npy");
    fixtures::write_npy(&path, &data, Ty::U16);
    let roi = Roi::from_mask(fixtures::random_roi(42, 0.6, 3));
    let specs = ["sum", "sumsig"]
        .iter()
        .map(|name| load(name))
        .chain(["builtin:sum", "builtin:sumsig"].iter().map(|s| udf_host::builtins::from_source(s).unwrap().unwrap()))
        .map(|udf| UdfSpec { udf, params: Params::default() })
        .collect();
    (path, data, roi, specs)
}

fn plan_run(path: &Path, roi: &Roi, specs: Vec<UdfSpec>) -> Run {
    let opened = DatasetSpec::file(path, OpenOptions::default()).open().unwrap();
    let options = RunOptions { roi: Some(roi.clone()), partitions: Some(5), threads: Some(2), ..RunOptions::default() };
    Run::plan(opened, specs, options).unwrap()
}

fn assert_same_results(a: &RunResults, b: &RunResults) {
    assert_eq!(a.udfs.len(), b.udfs.len());
    for (x, y) in a.udfs.iter().zip(&b.udfs) {
        assert_eq!(x.name, y.name);
        assert_eq!(x.buffers.len(), y.buffers.len());
        for (p, q) in x.buffers.iter().zip(&y.buffers) {
            assert_eq!(p.data, q.data, "{}/{}: data", x.name, p.name);
            assert_eq!(p.raw, q.raw, "{}/{}: raw data", x.name, p.name);
            assert_eq!(p.valid, q.valid, "{}/{}: valid mask", x.name, p.name);
        }
    }
    assert_eq!(a.damage, b.damage);
}

#[test]
fn partitions_run_in_separate_processes_merge_to_what_one_run_gives() {
    let dir = tempfile::tempdir().unwrap();
    let (path, data, roi, specs) = scan(dir.path());
    let expected = plan_run(&path, &roi, specs.clone()).execute().unwrap();
    // The reference itself is right: the sum of the selected frames.
    let sum = expected.udfs[0].buffer("intensity").unwrap();
    assert_eq!(to_f64(&sum.data), sum_frames(&data, Some(roi.mask())));

    // Plan, ship as JSON, run each partition in a process of its own.
    let run = plan_run(&path, &roi, specs);
    let json = run.as_plan().to_json();
    let plan_path = dir.path().join("plan.json");
    std::fs::write(&plan_path, &json).unwrap();
    let exe = std::env::current_exe().unwrap();
    let indices: Vec<usize> = run.as_plan().partition_indices().collect();
    assert_eq!(indices.len(), 5, "every partition of the 6 x 7 scan holds selected frames");
    let mut outputs = Vec::new();
    for &index in &indices {
        let out = dir.path().join(format!("part-{index}.bin"));
        let status = Command::new(&exe)
            .args(["--exact", "run_plan::a_child_process_runs_one_partition", "--test-threads=1", "--nocapture"])
            .env(CHILD_PLAN, &plan_path)
            .env(CHILD_INDEX, index.to_string())
            .env(CHILD_OUT, &out)
            .status()
            .unwrap();
        assert!(status.success(), "the child process for partition {index} failed");
        outputs.push(std::fs::read(&out).unwrap());
    }

    // A fresh client: the plan from JSON, its UDFs loaded by origin, merged in a
    // shuffled order.
    let plan = Arc::new(Plan::from_json(&json).unwrap());
    assert_eq!(plan.to_json(), json, "the plan survives a JSON round trip unchanged");
    let loader = Loader::new(WasmRuntime::new(udf_host_tests::runtime_options()).unwrap());
    let udfs: Vec<Arc<dyn Udf>> =
        plan.udfs.iter().map(|u| udf_host::exec::UdfLoader::load(&loader, &u.origin).unwrap()).collect();
    let mut merger = Merger::new(plan.clone(), udfs).unwrap();
    for &k in &[3usize, 0, 4, 1, 2] {
        assert!(!merger.is_complete());
        merger.merge(PartitionOutput::from_bytes(&outputs[k]).unwrap()).unwrap();
    }
    assert!(merger.is_complete());
    assert_same_results(&merger.results().unwrap(), &expected);
}

#[test]
fn a_plan_records_origins_hashes_params_and_limits_and_reads_back_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, roi, specs) = scan(dir.path());
    let run = plan_run(&path, &roi, specs);
    let plan = run.as_plan();
    let bytes = std::fs::read(plugin("sum")).unwrap();
    assert_eq!(
        plan.udfs[0].origin,
        UdfOrigin::Wasm { path: plugin("sum"), sha256: udf_host::wasm::sha256_hex(&bytes) }
    );
    assert_eq!(plan.udfs[2].origin, UdfOrigin::Builtin { name: "sum".into() });
    assert_eq!(plan.udfs[3].name, "sumsig-2", "a second 'sumsig' gets a name of its own");
    assert_eq!(plan.roi.as_ref(), Some(&roi));
    let back = Plan::from_json(&plan.to_json()).unwrap();
    assert_eq!(back.partitions, plan.partitions, "partition frames follow from ranges and the ROI");
    assert_eq!(back.tiling, plan.tiling);
    assert_eq!(back.meta, plan.meta);
    assert_eq!(back.limits, plan.limits);

    let json: serde_json::Value = serde_json::from_str(&plan.to_json()).unwrap();
    assert_eq!(json["version"], 1);
    assert_eq!(json["dataset"]["kind"], "file");
    assert_eq!(json["stored_dtype"], "<u2");
    let mut wrong = json.clone();
    wrong["version"] = 99.into();
    let e = Plan::from_json(&wrong.to_string()).unwrap_err().to_string();
    assert!(e.contains("plan version 99"), "{e}");
    let mut overlapping = json.clone();
    overlapping["partitions"][1][1] = 0.into();
    let e = Plan::from_json(&overlapping.to_string()).unwrap_err().to_string();
    assert!(e.contains("not an ascending range"), "{e}");
}

#[test]
fn a_worker_refuses_a_plugin_whose_bytes_differ_from_the_plans() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, roi, _) = scan(dir.path());
    let copy = dir.path().join("sum.wasm");
    std::fs::copy(plugin("sum"), &copy).unwrap();
    let runtime = udf_host_tests::runtime();
    let (udf, _) = runtime.load(&copy).unwrap();
    let run = plan_run(&path, &roi, vec![UdfSpec { udf: Arc::new(udf), params: Params::default() }]);
    let plan = Arc::new(run.as_plan().clone());
    // Another plugin at the same path.
    std::fs::copy(plugin("sumsig"), &copy).unwrap();
    let loader = Loader::new(WasmRuntime::new(udf_host_tests::runtime_options()).unwrap());
    let e = Worker::load(plan.clone(), &loader).err().expect("a different plugin must be refused").to_string();
    assert!(e.contains("not the same plugin"), "{e}");
    // Its bytes sent ahead are found by hash, whatever is at the path.
    loader.add_bytes(std::fs::read(plugin("sum")).unwrap());
    let worker = Worker::load(plan.clone(), &loader).unwrap();
    assert!(worker.run_partition(plan.partitions[0].index).is_ok());
    // A dataset that is not what the plan was made for.
    fixtures::write_npy(&path, &fixtures::mk_random(&[6, 7], &[8, 8], 1), Ty::U16);
    let e = Worker::load(plan, &loader).err().expect("another dataset must be refused").to_string();
    assert!(e.contains("is it the same file?"), "{e}");
}

#[test]
fn the_merger_takes_outputs_in_any_order_once_each_and_checks_them() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, roi, specs) = scan(dir.path());
    let run = plan_run(&path, &roi, specs);
    let worker = run.worker().clone();
    let outputs: Vec<PartitionOutput> =
        run.as_plan().partition_indices().map(|i| worker.run_partition(i).unwrap()).collect();
    let expected = plan_run(&path, &roi, scan(dir.path()).3).execute().unwrap();
    let mut merger = run.merger().unwrap();
    let mut damage_seen = 0;
    for output in outputs.iter().rev() {
        merger.merge(output.clone()).unwrap();
        let now = merger.damage().iter().filter(|&&d| d).count();
        assert!(now > damage_seen, "damage grows with every merge");
        damage_seen = now;
        // Results are available at any point, valid where merged.
        let partial = merger.results().unwrap();
        let valid = partial.udfs[1].buffer("intensity").unwrap().valid.to_bools().unwrap();
        assert_eq!(valid.iter().filter(|&&v| v).count(), now);
    }
    assert_same_results(&merger.results().unwrap(), &expected);
    let e = merger.merge(outputs[0].clone()).unwrap_err().to_string();
    assert!(e.contains("merged already"), "{e}");
    let mut unknown = outputs[0].clone();
    unknown.index = 99;
    assert!(run.merger().unwrap().merge(unknown).unwrap_err().to_string().contains("no such partition"));
    let mut misshapen = outputs[0].clone();
    misshapen.udfs[0].buffers[0].array = NdArray::zeros(udf_host::dtype::DType::F32, &[3]);
    let e = run.merger().unwrap().merge(misshapen).unwrap_err().to_string();
    assert!(e.contains("'sum'") && e.contains("declared as float32 [8, 9]"), "{e}");
}

#[test]
fn a_plan_without_a_dataset_spec_runs_here_but_cannot_be_loaded_elsewhere() {
    let data = MemoryDataset::new("m", NdArray::from_vec(&[4, 4], vec![1.0f32; 16]).unwrap(), &[4], &[4]).unwrap();
    let specs = vec![UdfSpec { udf: udf_host::builtins::get("sum").unwrap(), params: Params::default() }];
    let run = Run::plan(Arc::new(data), specs, RunOptions::default()).unwrap();
    let plan = Arc::new(Plan::from_json(&run.as_plan().to_json()).unwrap());
    let loader = Loader::new(RuntimeSetup::new(plan.limits, 1, 1).build().unwrap());
    let e = Worker::load(plan, &loader).err().unwrap().to_string();
    assert!(e.contains("opened without a spec"), "{e}");
    // In memory with a spec: the frames travel with the plan.
    let spec = DatasetSpec::Memory {
        name: "m".into(),
        nav: vec![4],
        sig: vec![4],
        data: Arc::new(NdArray::from_vec(&[16], (0..16).map(|i| i as f32).collect()).unwrap()),
    };
    let specs = vec![UdfSpec { udf: udf_host::builtins::get("sumsig").unwrap(), params: Params::default() }];
    let run = Run::plan(spec.open().unwrap(), specs, RunOptions::default()).unwrap();
    let plan = Arc::new(Plan::from_json(&run.as_plan().to_json()).unwrap());
    let setup = RuntimeSetup { cache: ComponentCache::new(None), ..RuntimeSetup::new(plan.limits, 1, 1) };
    let worker = Worker::load(plan.clone(), &Loader::new(setup.build().unwrap())).unwrap();
    let mut merger = run.merger().unwrap();
    for i in plan.partition_indices() {
        merger.merge(worker.run_partition(i).unwrap()).unwrap();
    }
    let sums = to_f64(&merger.results().unwrap().udfs[0].buffers[0].data);
    assert_eq!(sums, vec![6.0, 22.0, 38.0, 54.0]);
}

/// A UDF whose `process` waits for the test to let it go: a run that is deterministically
/// busy. Its nav buffer holds each frame's first element.
struct Gate {
    description: Description,
    open: Arc<std::sync::Mutex<mpsc::Receiver<()>>>,
}

impl Gate {
    fn new() -> (Gate, mpsc::Sender<()>) {
        let (tx, rx) = mpsc::channel();
        let description = Description {
            name: "gate".into(),
            version: "1".into(),
            summary: String::new(),
            params: Vec::new(),
            methods: vec![Method::Frame],
            input_dtype: DTypePreference::Prefer(udf_host::dtype::DType::F32),
            tiling: TilingPreferences::default(),
            custom_merge: false,
            custom_results: false,
            main_preprocess: false,
            data_access: DataAccess::Typed,
        };
        (Gate { description, open: Arc::new(std::sync::Mutex::new(rx)) }, tx)
    }
}

struct GateRunner<'a> {
    gate: &'a Gate,
    first: Vec<f32>,
}

impl Udf for Gate {
    fn description(&self) -> &Description {
        &self.description
    }
    fn source(&self) -> &str {
        "test:gate"
    }
    fn plan(&self, _: &Params, _: &DatasetMeta) -> Result<RunPlan, CallError> {
        Ok(RunPlan { method: Method::Frame, input_dtype: self.description.input_dtype, tiling: Default::default() })
    }
    fn result_buffers(&self, _: &Params, _: &DatasetMeta) -> Result<Vec<BufferDecl>, CallError> {
        let kind = BufferKind::Nav;
        Ok(vec![BufferDecl {
            name: "first".into(),
            kind,
            dtype: udf_host::dtype::DType::F32,
            extra_shape: vec![],
            usage: BufferUse::Normal,
        }])
    }
    fn start(&self, _: InitContext<'_>) -> Result<Box<dyn PartitionRunner + '_>, CallError> {
        Ok(Box::new(GateRunner { gate: self, first: Vec::new() }))
    }
}

impl PartitionRunner for GateRunner<'_> {
    fn process(&mut self, tile: &Tile<'_>) -> Result<(), CallError> {
        let open = self.gate.open.lock().map_err(|_| CallError::internal("poisoned"))?;
        open.recv_timeout(Duration::from_secs(30))
            .map_err(|_| CallError::internal("the test never opened the gate"))?;
        let data = tile.as_slice::<f32>().ok_or_else(|| CallError::internal("not float32"))?;
        self.first.extend(data.chunks(tile.sig.len()).map(|f| f[0]));
        Ok(())
    }
    fn export(&mut self) -> Result<Vec<NamedBuffer>, CallError> {
        let n = self.first.len();
        Ok(vec![NamedBuffer {
            name: "first".into(),
            array: NdArray::from_vec(&[n], std::mem::take(&mut self.first)).unwrap(),
        }])
    }
}

fn gated_run(frames: usize) -> (udf_host::exec::RunIter, mpsc::Sender<()>) {
    let values: Vec<f32> = (0..frames * 4).map(|i| i as f32).collect();
    let data = MemoryDataset::new("g", NdArray::from_vec(&[frames * 4], values).unwrap(), &[frames], &[2, 2]).unwrap();
    let (gate, tx) = Gate::new();
    let specs = vec![UdfSpec { udf: Arc::new(gate), params: Params::default() }];
    let options = RunOptions { partitions: Some(frames), threads: Some(1), ..RunOptions::default() };
    (Run::plan(Arc::new(data), specs, options).unwrap().iter(), tx)
}

#[test]
fn next_timeout_returns_pending_while_a_partition_runs_and_the_merge_when_it_is_done() {
    let (mut iter, gate) = gated_run(2);
    assert!(iter.next_timeout(Duration::from_millis(30)).is_pending(), "nothing can be merged before the gate opens");
    gate.send(()).unwrap();
    let step = loop {
        match iter.next_timeout(Duration::from_millis(50)) {
            Poll::Ready(step) => break step,
            Poll::Pending => continue,
        }
    };
    assert_eq!(step.unwrap().unwrap().merged, 1);
    gate.send(()).unwrap();
    while let Poll::Pending | Poll::Ready(Some(_)) = iter.next_timeout(Duration::from_millis(50)) {}
    let first = iter.results().unwrap().udfs[0].buffers[0].data.clone();
    assert_eq!(to_f64(&first), vec![0.0, 4.0]);
}

#[test]
fn the_interrupt_handle_stops_a_run_between_polls_and_keeps_what_was_merged() {
    let (mut iter, gate) = gated_run(3);
    gate.send(()).unwrap();
    let first = loop {
        if let Poll::Ready(step) = iter.next_timeout(Duration::from_millis(50)) {
            break step;
        }
    };
    assert!(first.unwrap().is_ok());
    iter.progress().interrupt();
    // The second partition is waiting at the gate; let it go so it sees the cancel.
    let _ = gate.send(());
    let mut last = None;
    loop {
        match iter.next_timeout(Duration::from_millis(50)) {
            Poll::Pending => {}
            Poll::Ready(Some(step)) => last = Some(matches!(step, Err(RunError::Cancelled))),
            Poll::Ready(None) => break,
        }
    }
    assert!(iter.interrupted());
    assert_eq!(last, Some(true), "an interrupted run ends with RunError::Cancelled");
    let damage = iter.damage().to_vec();
    assert!(damage[0] && !damage[2], "the first partition stays merged, the last never ran: {damage:?}");
    assert!(iter.next().is_none(), "an interrupted run is over");
}

/// `udf-host run-partition` in process, with a hang guard (the bugs these tests are
/// about hung or aborted).
fn run_partition_cli(args: &[&str]) -> Result<(), (u8, String)> {
    let mut all = vec!["udf-host".to_owned(), "run-partition".to_owned()];
    all.extend(args.iter().map(|a| (*a).to_owned()));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(udf_host::cli::execute(all).map_err(|f| (f.code, format!("{:#}", f.error))));
    });
    rx.recv_timeout(Duration::from_secs(300)).expect("run-partition hung")
}

/// A plan of `plugin_name` over a fresh 4 x 4 scan in `dir`, as `run --save-plan` writes it.
fn saved_plan(dir: &Path, plugin_name: &str, extra: &[&str]) -> String {
    let input = dir.join("in.npy");
    fixtures::write_npy(&input, &fixtures::mk_random(&[4, 4], &[6, 5], 2), Ty::F32);
    let plan = dir.join(format!("{plugin_name}.plan.json"));
    let mut args: Vec<String> =
        ["udf-host", "run", &plugin(plugin_name).display().to_string()].iter().map(|s| (*s).to_owned()).collect();
    args.extend(extra.iter().map(|s| (*s).to_owned()));
    args.extend([
        input.display().to_string(),
        "--save-plan".into(),
        plan.display().to_string(),
        "--out".into(),
        dir.join(format!("{plugin_name}-out")).display().to_string(),
        "--partitions".into(),
        "2".into(),
        "--cache-dir".into(),
        test_cache_dir().display().to_string(),
        "-q".into(),
    ]);
    udf_host::cli::execute(args).map_err(|f| format!("{:#}", f.error)).unwrap();
    std::fs::read_to_string(plan).unwrap()
}

/// Issue 33, finding 6: a partition output of another run (a stale `part-N.bin`) merged
/// silently. Every output names its plan's hash; a merger takes only its own.
#[test]
fn an_output_of_another_plan_is_refused_at_merge() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 4], &[6, 5], 2);
    let input = dir.path().join("in.npy");
    fixtures::write_npy(&input, &data, Ty::F32);
    let plan_of = |partitions: usize| {
        let opened = DatasetSpec::file(&input, OpenOptions::default()).open().unwrap();
        let options = RunOptions { partitions: Some(partitions), ..RunOptions::default() };
        Run::plan(opened, vec![UdfSpec { udf: load("sum"), params: Params::default() }], options).unwrap()
    };
    let (this, other) = (plan_of(2), plan_of(4));
    let stale = other.worker().run_partition(0).unwrap();
    let mut merger = this.merger().unwrap();
    let e = merger.merge(stale).unwrap_err().to_string();
    assert!(e.contains("another plan"), "{e}");
    // Its own outputs merge, through the wire format too.
    let own = PartitionOutput::from_bytes(&this.worker().run_partition(0).unwrap().to_bytes()).unwrap();
    merger.merge(own).unwrap();
}

/// Issue 33, finding 6: a plan saying `"trusted": true` turned the timeout off in
/// `run-partition` without `--trusted` on its command line. Limits come from the
/// worker's command line.
#[test]
fn a_plan_cannot_turn_the_timeout_off_in_run_partition() {
    let dir = tempfile::tempdir().unwrap();
    let json = saved_plan(dir.path(), "probe_slow", &["--trusted"]);
    let mut edited: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(edited["limits"]["trusted"], true, "the plan records how it was planned");
    // Spin long enough per frame that only a timeout ends the partition.
    edited["udfs"][0]["params"][0]["value"]["value"] = serde_json::json!(4_000_000_000_000i64);
    let plan = dir.path().join("plan.json");
    std::fs::write(&plan, edited.to_string()).unwrap();
    let out = dir.path().join("part-0.bin");
    let cache = test_cache_dir().display().to_string();
    let args = [
        plan.to_str().unwrap(),
        "--index",
        "0",
        "--out",
        out.to_str().unwrap(),
        "--timeout",
        "0.5",
        "--cache-dir",
        &cache,
    ];
    let (code, msg) = run_partition_cli(&args).expect_err("the spinning plugin is stopped by --timeout");
    assert_eq!(code, udf_host::cli::exit::PLUGIN_FAILURE, "{msg}");
    assert!(msg.contains("timed out"), "{msg}");
    assert!(!out.exists());
}

/// Issue 33, finding 6: a 200-byte change to a plan (a huge scan) made run-partition
/// build the plan's partitions (8 TiB of frame indices) before the dataset was opened.
/// The dataset is opened and checked against the plan first.
#[test]
fn a_plan_claiming_a_huge_scan_is_checked_against_the_data_first() {
    let dir = tempfile::tempdir().unwrap();
    let json = saved_plan(dir.path(), "sum", &[]);
    let mut plan: serde_json::Value = serde_json::from_str(&json).unwrap();
    let huge = serde_json::json!([1u64 << 40]);
    plan["shape"]["nav"] = huge.clone();
    plan["meta"]["nav_shape"] = huge;
    plan["partitions"] = serde_json::json!([[0, 0, 1u64 << 40]]);
    let path = dir.path().join("huge.json");
    std::fs::write(&path, plan.to_string()).unwrap();
    let out = dir.path().join("part-0.bin");
    let (code, msg) = run_partition_cli(&[path.to_str().unwrap(), "--index", "0", "--out", out.to_str().unwrap()])
        .expect_err("the plan does not fit the data");
    assert_eq!(code, udf_host::cli::exit::USER_ERROR, "{msg}");
    assert!(msg.contains("opens here as nav [4, 4]") && msg.contains("1099511627776"), "{msg}");
}
