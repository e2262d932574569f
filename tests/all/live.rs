//! Live acquisition over loopback: the simulators replay fixture files over the real
//! protocols, the live engine processes them, and the results equal an offline run of
//! the same UDFs over the same file (bit for bit: integer counts, sums exact in f32);
//! scans that end early keep what came, with valid masks; malformed input fails.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;
use udf_host::dataset::OpenOptions;
use udf_host::exec::{RunOptions, RunResults, UdfSpec};
use udf_host::live::sim::{Faults, MerlinSim, MibReplay, SimOptions};
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
    let outcome = match LiveRun::start(&source, specs(udfs), options, Stop::default()) {
        Ok(run) => drain(run),
        Err(e) => (Err(e.to_string()), fake_stats(), Some(e)),
    };
    stopper.stop();
    let _ = sim.wait();
    outcome
}

/// Run to the end: the results, the stats and the last error.
fn drain(mut run: LiveRun) -> (Result<RunResults, String>, LiveStats, Option<LiveError>) {
    let mut last_error = None;
    for step in run.by_ref() {
        if let Err(e) = step {
            last_error = Some(e);
        }
    }
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
        let (results, stats, error) = drain(LiveRun::start(&live, specs(udfs), options, Stop::default()).unwrap());
        stopper.stop();
        let _ = sim.wait();
        (results.unwrap(), stats, error)
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

    #[test]
    fn dectris_series_that_end_early_keep_what_came() {
        let dir = tempfile::tempdir().unwrap();
        let nav = [5, 9];
        let data = mib::counts(&nav, &[16, 24], 200, 80);
        let path = dir.path().join("d.npy");
        write_npy(&path, &data, Ty::U16);
        let udfs = builtins();
        for (format, faults) in [
            (StreamFormat::Cbor, Faults { end_after: Some(19), ..Faults::default() }),
            (StreamFormat::Legacy, Faults { end_after: Some(30), ..Faults::default() }),
            (StreamFormat::Cbor, Faults { stall_after: Some(11), ..Faults::default() }),
            (StreamFormat::Cbor, Faults { disconnect_after: Some(25), ..Faults::default() }),
        ] {
            let what = format!("{format:?} {faults:?}");
            let mut o = options(&nav, 4, 2);
            o.stall_timeout = Duration::from_millis(700);
            let sim_options = SimOptions { faults: faults.clone(), ..Default::default() };
            let (live, stats, error) = run_live_dectris(&path, format, true, false, &udfs, o, sim_options);
            let Some(LiveError::Ended { received, .. }) = error else { panic!("{what}: {error:?}") };
            let limit = faults.end_after.or(faults.stall_after).or(faults.disconnect_after).unwrap();
            // A ZeroMQ socket cannot be flushed before it closes: a disconnect may cost
            // the images still queued in the simulator, never one that was received.
            if faults.disconnect_after.is_some() {
                assert!(received <= limit, "{what}: {received}");
            } else {
                assert_eq!(received, limit, "{what}");
            }
            assert_eq!(stats.frames_received, received, "{what}");
            assert_partial(&live, &path, &nav, &udfs, received as usize, &what);
        }
    }

    #[test]
    fn dectris_malformed_messages_fail_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let nav = [5, 9];
        let data = mib::counts(&nav, &[16, 24], 200, 81);
        let path = dir.path().join("d.npy");
        write_npy(&path, &data, Ty::U16);
        for format in [StreamFormat::Cbor, StreamFormat::Legacy] {
            let faults = Faults { corrupt_frame: Some(7), ..Faults::default() };
            let sim_options = SimOptions { faults, ..Default::default() };
            let (_, _, error) =
                run_live_dectris(&path, format, true, false, &builtins(), options(&nav, 4, 2), sim_options);
            match error {
                Some(LiveError::Malformed { at, .. }) => assert_eq!(at, "image 7", "{format:?}"),
                other => panic!("{format:?}: expected a malformed image, got {other:?}"),
            }
        }
    }
}

/// A scan that ended after `received` frames: the valid masks are exactly those frames,
/// and every valid value equals the offline run over them (a ROI of the first frames).
/// Except next to frames that never came, where com's gradients (divergence, curl) are
/// NaN offline (the ROI) and use the zeros of the missing rows live, as LiberTEM's
/// partial results do.
fn assert_partial(live: &RunResults, path: &Path, nav: &[usize], udfs: &[Arc<dyn Udf>], received: usize, what: &str) {
    let n: usize = nav.iter().product();
    let mask: Vec<bool> = (0..n).map(|i| i < received).collect();
    let open = OpenOptions { nav_shape: Some(nav.to_vec()), ..Default::default() };
    let specs = udfs.iter().map(|u| (u.clone(), Params::default())).collect();
    let options = RunOptions { roi: Some(udf_host::roi::Roi::from_mask(mask.clone())), ..Default::default() };
    let offline = run_on(path, &open, specs, options).unwrap();
    for (a, b) in live.udfs.iter().zip(&offline.udfs) {
        for (x, y) in a.buffers.iter().zip(&b.buffers) {
            assert_eq!(x.valid.bytes(), y.valid.bytes(), "{what}: {}.{} valid mask", a.name, x.name);
            let (xs, ys) = (udf_host_tests::reference::to_f64(&x.data), udf_host_tests::reference::to_f64(&y.data));
            let valid: &[u8] = x.valid.bytes();
            let per = xs.len() / valid.len();
            for (i, (p, q)) in xs.iter().zip(&ys).enumerate() {
                if valid[i / per] != 0 && !q.is_nan() {
                    assert!(p.to_bits() == q.to_bits(), "{what}: {}.{}[{i}]: {p} live, {q} offline", a.name, x.name);
                }
            }
        }
    }
}

#[test]
fn merlin_disconnect_and_stall_end_the_scan_with_the_frames_received() {
    let dir = tempfile::tempdir().unwrap();
    let nav = [6, 7];
    let data = mib::counts(&nav, &[8, 64], 255, 3);
    let path = mib::write_mib(dir.path(), "scan", &data, MibSet::new(MibKind::U16)).remove(0);
    let udfs = builtins();
    for faults in [
        Faults { disconnect_after: Some(17), ..Faults::default() },
        Faults { stall_after: Some(23), ..Faults::default() },
    ] {
        let mut o = options(&nav, 5, 2);
        o.stall_timeout = Duration::from_millis(700);
        let expected = faults.disconnect_after.or(faults.stall_after).unwrap();
        let (live, stats, error) =
            run_live(&path, &nav, &udfs, o, SimOptions { faults: faults.clone(), ..Default::default() });
        let what = format!("{faults:?}");
        match error {
            Some(LiveError::Ended { received, expected: 42, reason }) => {
                assert_eq!(received, expected, "{what}");
                if faults.stall_after.is_some() {
                    assert!(matches!(*reason, LiveError::Stalled { .. }), "{what}: {reason}");
                } else {
                    assert!(matches!(*reason, LiveError::Disconnected { .. }), "{what}: {reason}");
                }
            }
            other => panic!("{what}: expected the scan to end early, got {other:?}"),
        }
        assert_eq!(stats.frames_received, expected, "{what}");
        assert!(stats.ended_early.is_some(), "{what}");
        assert_partial(&live.unwrap(), &path, &nav, &udfs, expected as usize, &what);
    }
    // Gone before the first frame: no acquisition, nothing to keep.
    let faults = Faults { disconnect_after: Some(0), ..Faults::default() };
    let (_, _, error) = run_live(&path, &nav, &udfs, options(&nav, 5, 2), SimOptions { faults, ..Default::default() });
    assert!(matches!(error, Some(LiveError::Disconnected { frames: 0, .. })), "{error:?}");
}

#[test]
fn merlin_malformed_frames_fail_the_run() {
    let dir = tempfile::tempdir().unwrap();
    let nav = [6, 7];
    let data = mib::counts(&nav, &[8, 64], 255, 4);
    let path = mib::write_mib(dir.path(), "scan", &data, MibSet::new(MibKind::U8)).remove(0);
    let faults = Faults { corrupt_frame: Some(20), ..Faults::default() };
    let (_, _, error) =
        run_live(&path, &nav, &builtins(), options(&nav, 5, 2), SimOptions { faults, ..Default::default() });
    match error {
        Some(LiveError::Malformed { at, message, .. }) => {
            assert_eq!(at, "frame 20");
            assert!(message.contains("MQ1"), "{message}");
        }
        other => panic!("expected a malformed frame, got {other:?}"),
    }
    // A nav shape that does not match what the detector announces.
    let (_, _, error) = run_live(&path, &[6, 8], &builtins(), options(&[6, 8], 5, 2), SimOptions::default());
    let text = error.map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("announces 42 frames") && text.contains("[6, 8]"), "{text}");
}

#[test]
fn a_slow_consumer_back_pressures_the_detector_and_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let nav = [8, 16];
    let data = mib::counts(&nav, &[16, 64], 255, 5);
    let path = mib::write_mib(dir.path(), "scan", &data, MibSet::new(MibKind::U16)).remove(0);
    let slow = udf_host_tests::load("probe_slow");
    let sumsig = udf_host::builtins::get("sumsig").unwrap();
    let mut o = options(&nav, 4, 2);
    // Room for two partitions of 4 frames of 2 KiB: the receiver must wait for them.
    o.max_buffer = 2 * 4 * 16 * 64 * 2;
    let spin =
        Params(vec![udf_host::udf::Param { name: "spin".into(), value: udf_host::udf::ParamValue::Int(200_000) }]);
    let specs =
        vec![UdfSpec { udf: slow.clone(), params: spin }, UdfSpec { udf: sumsig.clone(), params: Params::default() }];
    let replay = MibReplay::open(&path, Some(&nav)).unwrap();
    let sim =
        MerlinSim::start(replay, "127.0.0.1:0", SimOptions { acquisitions: Some(1), ..Default::default() }).unwrap();
    let source: LiveSource = format!("merlin://{}", sim.address()).parse().unwrap();
    let mut run = LiveRun::start(&source, specs, o, Stop::default()).unwrap();
    for step in run.by_ref() {
        step.unwrap();
    }
    let stats = run.stats();
    assert_eq!(stats.frames_received, 128);
    assert!(stats.buffer.back_pressure_waits > 0, "{stats:?}");
    assert!(stats.buffer.peak_bytes <= o_limit(&stats), "{stats:?}");
    let results = run.results().unwrap();
    // The slow plugin's frame sums equal sumsig's, offline.
    let offline = offline(&path, &nav, &[sumsig], 32, 2);
    assert_eq!(results.udfs[0].buffers[0].data.bytes(), offline.udfs[0].buffers[0].data.bytes());
    assert!(results.udfs[0].buffers[0].all_valid);
    let _ = sim.wait();
}

/// The buffer limit plus one frame (a frame is let in when the buffer holds less than
/// the limit).
fn o_limit(stats: &LiveStats) -> u64 {
    stats.buffer.limit_bytes + 16 * 64 * 2
}

#[test]
fn a_roi_processes_only_its_frames() {
    let dir = tempfile::tempdir().unwrap();
    let nav = [6, 7];
    let data = mib::counts(&nav, &[8, 64], 255, 6);
    let path = mib::write_mib(dir.path(), "scan", &data, MibSet::new(MibKind::R12)).remove(0);
    let mask = udf_host_tests::fixtures::random_roi(42, 0.4, 9);
    let roi = udf_host::roi::Roi::from_mask(mask);
    let udfs = builtins();
    let mut o = options(&nav, 5, 2);
    o.run.roi = Some(roi.clone());
    let (live, _, error) = run_live(&path, &nav, &udfs, o, SimOptions::default());
    assert!(error.is_none(), "{error:?}");
    let open = OpenOptions { nav_shape: Some(nav.to_vec()), ..Default::default() };
    let specs = udfs.iter().map(|u| (u.clone(), Params::default())).collect();
    let options = RunOptions { roi: Some(roi), partitions: Some(9), threads: Some(2), ..Default::default() };
    assert_same(&live.unwrap(), &run_on(&path, &open, specs, options).unwrap(), "roi");
}

mod command_line {
    use super::*;

    fn live_command(address: &str, out: &Path, extra: &[&str]) -> Result<(), udf_host::cli::Failure> {
        let mut args = vec![
            "udf-host".to_owned(),
            "live".into(),
            format!("merlin://{address}"),
            "builtin:sumsig".into(),
            "--nav-shape".into(),
            "6,7".into(),
            "--out".into(),
            out.display().to_string(),
            "-q".into(),
            "--stall-timeout".into(),
            "0.7".into(),
            "--start-timeout".into(),
            "20".into(),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        udf_host::cli::execute(args)
    }

    fn serve(path: &Path, faults: Faults) -> MerlinSim {
        let replay = MibReplay::open(path, Some(&[6, 7])).unwrap();
        MerlinSim::start(replay, "127.0.0.1:0", SimOptions { acquisitions: Some(1), faults, ..Default::default() })
            .unwrap()
    }

    #[test]
    fn live_writes_what_came_and_exits_3_when_the_detector_disconnects() {
        let dir = tempfile::tempdir().unwrap();
        let data = mib::counts(&[6, 7], &[8, 64], 255, 11);
        let path = mib::write_mib(dir.path(), "scan", &data, MibSet::new(MibKind::U16)).remove(0);
        let out = dir.path().join("out");
        let sim = serve(&path, Faults { disconnect_after: Some(30), ..Faults::default() });
        let failure = live_command(&sim.address().to_string(), &out, &["--partition-frames", "4"]).unwrap_err();
        assert_eq!(failure.code, udf_host::cli::exit::PARTIAL, "{:#}", failure.error);
        assert!(format!("{:#}", failure.error).contains("after 30 of 42 frames"), "{:#}", failure.error);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
        assert_eq!(summary["status"], "partial");
        assert!(summary["live"]["ended_early"].as_str().is_some_and(|why| why.contains("closed the connection")));
        assert_eq!(summary["live"]["frames_received"], 30);
        let valid = udf_host::npy::read_array(&out.join("sumsig").join("intensity.npy")).unwrap();
        let values = udf_host_tests::reference::to_f64(&valid);
        let expected = udf_host_tests::reference::sum_sig(&data);
        assert_eq!(&values[..30], &expected[..30]);
        let _ = sim.wait();
    }

    #[test]
    fn live_writes_nothing_on_a_malformed_frame() {
        let dir = tempfile::tempdir().unwrap();
        let data = mib::counts(&[6, 7], &[8, 64], 255, 12);
        let path = mib::write_mib(dir.path(), "scan", &data, MibSet::new(MibKind::U16)).remove(0);
        let out = dir.path().join("out");
        let sim = serve(&path, Faults { corrupt_frame: Some(25), ..Faults::default() });
        let failure =
            live_command(&sim.address().to_string(), &out, &["--partition-frames", "4", "--snapshot-every", "0.01"])
                .unwrap_err();
        assert_eq!(failure.code, udf_host::cli::exit::USER_ERROR);
        assert!(format!("{:#}", failure.error).contains("frame 25"), "{:#}", failure.error);
        assert!(!out.exists(), "nothing may be left of a run over malformed data");
        let _ = sim.stop();
    }
}

/// The Merlin control port: udf-host's arming against a control port played here (the
/// check against an implementation nobody here wrote is LiberTEM-live's simulator, in
/// python/tests/test_live_simulators.py).
mod merlin_control {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::sync::Mutex;

    /// A control port that records every command and answers with the status code
    /// `code(command)`, its length counted as LiberTEM-live's simulator counts it
    /// (without the leading comma) when `short_length`.
    fn control_port(
        code: fn(&str) -> u8,
        short_length: bool,
    ) -> (String, Arc<Mutex<Vec<String>>>, std::thread::JoinHandle<()>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let address = listener.local_addr().unwrap().to_string();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        let thread = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            loop {
                let mut prefix = [0u8; 15];
                if conn.read_exact(&mut prefix).is_err() {
                    return;
                }
                let length: usize = std::str::from_utf8(&prefix[4..14]).unwrap().parse().unwrap();
                let mut body = vec![0u8; length - 1];
                conn.read_exact(&mut body).unwrap();
                let body = String::from_utf8(body).unwrap();
                log.lock().unwrap().push(body.clone());
                let fields: Vec<&str> = body.split(',').collect();
                let answer = match fields[0] {
                    "GET" => format!("GET,{},42,{}", fields[1], code(&body)),
                    kind => format!("{kind},{},{}", fields[1], code(&body)),
                };
                let counted = answer.len() + usize::from(!short_length);
                conn.write_all(format!("MPX,{counted:010},{answer}").as_bytes()).unwrap();
            }
        });
        (address, seen, thread)
    }

    fn fixture(dir: &Path, nav: &[usize]) -> std::path::PathBuf {
        let data = mib::counts(nav, &[16, 16], 4095, 9);
        mib::write_mib(dir, "scan", &data, MibSet::new(MibKind::U16)).remove(0)
    }

    fn arm_and_run(path: &Path, nav: &[usize], control: &str, settings: &[String]) -> Result<RunResults, String> {
        let replay = MibReplay::open(path, Some(nav)).unwrap();
        let sim = MerlinSim::start(replay, "127.0.0.1:0", SimOptions { acquisitions: Some(1), ..Default::default() })
            .unwrap();
        let mut source: LiveSource = format!("merlin://{}", sim.address()).parse().unwrap();
        source.set_api(Some(control), settings, true).unwrap();
        let stopper = sim.stopper();
        let outcome = match LiveRun::start(&source, specs(&builtins()), options(nav, 6, 2), Stop::default()) {
            Ok(run) => drain(run).0,
            Err(e) => Err(e.to_string()),
        };
        stopper.stop();
        let _ = sim.wait();
        outcome
    }

    #[test]
    fn arming_sends_the_frame_count_the_settings_then_start_and_trigger() {
        let dir = tempfile::tempdir().unwrap();
        let nav = [4, 9];
        let path = fixture(dir.path(), &nav);
        for short_length in [false, true] {
            let (control, seen, thread) = control_port(|_| 0, short_length);
            let live = arm_and_run(&path, &nav, &control, &["counterdepth=12".into()]).unwrap();
            assert_same(&live, &offline(&path, &nav, &builtins(), 6, 2), "armed through the control port");
            thread.join().unwrap();
            assert_eq!(
                *seen.lock().unwrap(),
                ["SET,NUMFRAMESTOACQUIRE,36", "SET,COUNTERDEPTH,12", "CMD,STARTACQUISITION,0", "CMD,SOFTTRIGGER,0"],
                "short_length: {short_length}"
            );
        }
    }

    #[test]
    fn a_refused_command_fails_before_the_scan_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let nav = [3, 4];
        let path = fixture(dir.path(), &nav);
        let (control, _, _thread) = control_port(|body| if body.starts_with("CMD,START") { 1 } else { 0 }, false);
        let error = arm_and_run(&path, &nav, &control, &[]).unwrap_err();
        assert!(error.contains("CMD,STARTACQUISITION") && error.contains("busy"), "{error}");
        assert!(error.contains(&control), "{error}");
        let (control, _, _thread) = control_port(|body| if body.contains("BOGUS") { 2 } else { 0 }, true);
        let error = arm_and_run(&path, &nav, &control, &["BOGUS=1".into()]).unwrap_err();
        assert!(error.contains("SET,BOGUS") && error.contains("does not recognise"), "{error}");
        // Nothing listening on the control port.
        let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().to_string();
        let error = arm_and_run(&path, &nav, &closed, &[]).unwrap_err();
        assert!(error.contains("Merlin control port") && error.contains(&closed), "{error}");
    }

    #[test]
    fn settings_without_a_control_port_are_refused() {
        let mut source: LiveSource = "merlin://127.0.0.1:6342".parse().unwrap();
        let error = source.set_api(None, &["COUNTERDEPTH=12".into()], false).unwrap_err().to_string();
        assert!(error.contains("control port"), "{error}");
        let error = source.set_api(Some("127.0.0.1:6341"), &["COUNTERDEPTH".into()], false).unwrap_err().to_string();
        assert!(error.contains("expected NAME=VALUE"), "{error}");
        let mut dectris: LiveSource = "dectris://127.0.0.1".parse().unwrap();
        assert!(dectris.set_api(None, &[], true).is_err());
        let error = source.set_api(Some("detector-pc:ctl"), &[], false).unwrap_err().to_string();
        assert!(error.contains("port 'ctl' is not a number"), "{error}");
        source.set_api(Some("detector-pc"), &[], false).unwrap();
        match source {
            LiveSource::Merlin { control: Some(arming), .. } => assert_eq!(arming.address, "detector-pc:6341"),
            other => panic!("{other:?}"),
        }
    }
}
