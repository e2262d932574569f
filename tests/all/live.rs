//! Live acquisition over loopback: the simulators replay fixture files over the real
//! protocols, the live engine processes them, and the results equal an offline run of
//! the same UDFs over the same file (bit for bit: integer counts, sums exact in f32);
//! scans that end early keep what came, with valid masks; malformed input fails.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use udf_host::dataset::OpenOptions;
use udf_host::exec::{RunOptions, RunResults, UdfSpec};
use udf_host::live::sim::{MerlinSim, MibReplay, SimOptions};
use udf_host::live::{LiveError, LiveOptions, LiveRun, LiveSource, LiveStats, Stop};
use udf_host::udf::{Params, Udf};
use udf_host_tests::fixture_formats::mib::{self, MibKind, MibSet};
use udf_host_tests::run_on;

/// sum + sumsig + com: a sig buffer merged by addition, a nav buffer, a nav buffer of
/// vectors.
fn builtins() -> Vec<Arc<dyn Udf>> {
    ["sum", "sumsig", "com"].iter().map(|n| udf_host::builtins::get(n).unwrap()).collect()
}

fn specs(udfs: &[Arc<dyn Udf>]) -> Vec<UdfSpec> {
    udfs.iter().map(|u| UdfSpec { udf: u.clone(), params: Params::default() }).collect()
}

/// Serve `path` once with `sim_options`; run `udfs` live over it.
fn run_live(
    path: &Path,
    nav: &[usize],
    udfs: &[Arc<dyn Udf>],
    options: LiveOptions,
    sim_options: SimOptions,
) -> (Result<RunResults, String>, LiveStats, Option<LiveError>) {
    let replay = MibReplay::open(path, Some(nav)).unwrap();
    let sim = MerlinSim::start(replay, "127.0.0.1:0", SimOptions { acquisitions: Some(1), ..sim_options }).unwrap();
    let source: LiveSource = format!("merlin://{}", sim.address()).parse().unwrap();
    let stopper = sim.stopper();
    let mut run = match LiveRun::start(&source, specs(udfs), options, Stop::default()) {
        Ok(run) => run,
        Err(e) => {
            stopper.stop();
            return (Err(e.to_string()), fake_stats(), Some(e));
        }
    };
    let mut last_error = None;
    for step in run.by_ref() {
        if let Err(e) = step {
            last_error = Some(e);
        }
    }
    stopper.stop();
    let _ = sim.wait();
    (run.results().map_err(|e| e.to_string()), run.stats(), last_error)
}

fn fake_stats() -> LiveStats {
    LiveStats {
        source: String::new(),
        frames_expected: 0,
        frames_received: 0,
        bytes_received: 0,
        seconds: 0.0,
        partition_frames: 0,
        encoding: String::new(),
        buffer: Default::default(),
        ended_early: None,
    }
}

fn offline(path: &Path, nav: &[usize], udfs: &[Arc<dyn Udf>], partitions: usize, threads: usize) -> RunResults {
    let open = OpenOptions { nav_shape: Some(nav.to_vec()), ..Default::default() };
    let udfs = udfs.iter().map(|u| (u.clone(), Params::default())).collect();
    let options = RunOptions { partitions: Some(partitions), threads: Some(threads), ..Default::default() };
    run_on(path, &open, udfs, options).unwrap()
}

/// Every buffer's data and valid mask, byte for byte.
fn assert_same(live: &RunResults, offline: &RunResults, what: &str) {
    assert_eq!(live.udfs.len(), offline.udfs.len());
    for (a, b) in live.udfs.iter().zip(&offline.udfs) {
        for (x, y) in a.buffers.iter().zip(&b.buffers) {
            assert_eq!(x.data.shape(), y.data.shape(), "{what}: {}.{}", a.name, x.name);
            assert_eq!(x.data.bytes(), y.data.bytes(), "{what}: {}.{} differs from the offline run", a.name, x.name);
            assert_eq!(x.valid.bytes(), y.valid.bytes(), "{what}: {}.{} valid mask", a.name, x.name);
        }
    }
}

fn options(nav: &[usize], partition_frames: usize, threads: usize) -> LiveOptions {
    let mut o = LiveOptions::new(nav.to_vec());
    o.partition_frames = Some(partition_frames);
    o.run.threads = Some(threads);
    o.stall_timeout = Duration::from_secs(2);
    o.start_timeout = Some(Duration::from_secs(20));
    o
}

#[test]
fn merlin_every_pixel_format_equals_the_offline_run() {
    let dir = tempfile::tempdir().unwrap();
    let nav = [6, 7];
    let cases = [
        (MibKind::U8, false),
        (MibKind::U16, false),
        (MibKind::U32, false),
        (MibKind::R1, false),
        (MibKind::R6, false),
        (MibKind::R12, false),
        (MibKind::R24, false),
        (MibKind::R12, true),
        (MibKind::U16, true),
    ];
    for (i, (kind, quad)) in cases.into_iter().enumerate() {
        let sig = if quad { [128, 128] } else { [8, 64] };
        // Counts small enough that every f32 sum is exact, whatever the merge order.
        let data = mib::counts(&nav, &sig, kind.max().min(255), 40 + i as u64);
        let set = MibSet { quad, ..MibSet::new(kind) };
        let path = mib::write_mib(dir.path(), &format!("case{i}_"), &data, set).remove(0);
        let udfs = builtins();
        let (live, stats, error) = run_live(&path, &nav, &udfs, options(&nav, 5, 2), SimOptions::default());
        assert!(error.is_none(), "{kind:?} quad {quad}: {error:?}");
        assert_eq!(stats.frames_received, 42, "{kind:?}");
        let partitions = 42usize.div_ceil(5);
        assert_same(&live.unwrap(), &offline(&path, &nav, &udfs, partitions, 2), &format!("{kind:?} quad {quad}"));
    }
}

mod dectris {
    use super::*;
    use udf_host::live::StreamFormat;
    use udf_host::live::sim::{DectrisSim, DectrisSource};
    use udf_host_tests::fixtures::{Ty, write_npy};

    /// Serve `path` once as a DECTRIS stream; run `udfs` live over it.
    pub(super) fn run_live_dectris(
        path: &Path,
        format: StreamFormat,
        compress: bool,
        with_api: bool,
        udfs: &[Arc<dyn Udf>],
        options: LiveOptions,
        sim_options: SimOptions,
    ) -> (RunResults, LiveStats, Option<LiveError>) {
        let source = DectrisSource::open(path, &OpenOptions::default(), format, compress).unwrap();
        let api = with_api.then_some("127.0.0.1:0");
        let sim =
            DectrisSim::start(source, "127.0.0.1:0", api, SimOptions { acquisitions: Some(1), ..sim_options }).unwrap();
        let live = LiveSource::Dectris {
            address: sim.address().to_string(),
            api: sim.api_address().map(|a| format!("http://{a}")),
        };
        let stopper = sim.stopper();
        let mut run = LiveRun::start(&live, specs(udfs), options, Stop::default()).unwrap();
        let mut last_error = None;
        for step in run.by_ref() {
            if let Err(e) = step {
                last_error = Some(e);
            }
        }
        stopper.stop();
        let _ = sim.wait();
        (run.results().unwrap(), run.stats(), last_error)
    }

    #[test]
    fn dectris_streams_equal_the_offline_run() {
        let dir = tempfile::tempdir().unwrap();
        let nav = [5, 9];
        let cases = [
            (Ty::U16, StreamFormat::Cbor, true, true),
            (Ty::U32, StreamFormat::Cbor, true, false),
            (Ty::U8, StreamFormat::Cbor, false, false),
            (Ty::U16, StreamFormat::Legacy, true, true),
            (Ty::U32, StreamFormat::Legacy, false, false),
        ];
        for (i, (ty, format, compress, api)) in cases.into_iter().enumerate() {
            let data = mib::counts(&nav, &[16, 24], 200, 70 + i as u64);
            let path = dir.path().join(format!("d{i}.npy"));
            write_npy(&path, &data, ty);
            let udfs = builtins();
            let (live, stats, error) =
                run_live_dectris(&path, format, compress, api, &udfs, options(&nav, 4, 2), SimOptions::default());
            let what = format!("{ty:?} {format:?} compressed {compress} api {api}");
            assert!(error.is_none(), "{what}: {error:?}");
            assert_eq!(stats.frames_received, 45, "{what}");
            assert_same(&live, &offline(&path, &nav, &udfs, 45usize.div_ceil(4), 2), &what);
        }
    }
}
