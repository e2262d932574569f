//! `udf-host serve` with a live source: `udf-host simulate merlin FILE --port 0` (the
//! command line's own simulator, as a process) plays the detector, the page in a real
//! headless Chromium chooses the live source, and what it shows when the acquisition is
//! complete must be what the file holds: the sum pattern and each frame's sum (plain
//! loops over the fixture's counts) — the ring dragged meanwhile does not abort the scan
//! — then, in the next acquisition, the ring's image: `builtin:ring` run on the same file. A source that is not there, or a scan of another shape, must reach
//! the page as a message while the server goes on serving. Screenshots go to
//! `target/serve-live-partial.png` (mid-scan; docs/images/serve-live.png is one) and
//! `target/serve-live.png`.

use super::cli::{cli, s};
use super::serve::{WAIT, client, drag, page_values, ring_reference};
use serde_json::json;
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use udf_host::dataset::OpenOptions;
use udf_host::live::{LiveOptions, LiveSource};
use udf_host::serve::{ServeLive, ServeOptions, Server};
use udf_host_tests::browser::{Browser, chromium_or_skip};
use udf_host_tests::fixture_formats::mib::{self, MibKind, MibSet};
use udf_host_tests::fixtures::Data;
use udf_host_tests::reference::{assert_close, sum_frames, sum_sig};

const NAV: [usize; 2] = [8, 10];
const SIG: [usize; 2] = [32, 32];

/// A uint16 `.mib` scan with its `.hdr` (80 frames) in `dir/data`: the file and its counts.
fn recorded_scan(dir: &Path) -> (PathBuf, Data) {
    let root = dir.join("data");
    std::fs::create_dir_all(&root).unwrap();
    // Counts small enough that every sum is exact in float32.
    let data = mib::counts(&NAV, &SIG, 255, 29);
    let path = mib::write_mib(&root, "scan", &data, MibSet::new(MibKind::U16)).remove(0);
    mib::write_hdr(&path.with_extension("hdr"), &NAV, true);
    (path, data)
}

/// `udf-host simulate merlin|dectris FILE --port 0`, killed when dropped.
struct Simulator {
    child: Child,
    /// `127.0.0.1:PORT`, as it printed.
    address: String,
}

impl Simulator {
    fn start(file: &Path, extra: &[&str]) -> Simulator {
        Simulator::of("merlin", file, extra)
    }

    fn of(detector: &str, file: &Path, extra: &[&str]) -> Simulator {
        let mut child = Command::new(env!("CARGO_BIN_EXE_udf-host-cli"))
            .args(["simulate", detector, &s(file), "--port", "0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("start udf-host simulate merlin");
        let mut stderr = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        stderr.read_line(&mut line).unwrap();
        // "serving FILE (80 frames) as a Merlin data port on 127.0.0.1:PORT (Ctrl-C to stop)",
        // "... as a DECTRIS stream on tcp://127.0.0.1:PORT (Ctrl-C to stop)"
        let address = line
            .rsplit_once(" on ")
            .and_then(|(_, rest)| rest.split_whitespace().next())
            .map(|a| a.trim_start_matches("tcp://"))
            .unwrap_or_else(|| panic!("the simulator printed: {line}"))
            .to_owned();
        // Whatever else it prints must not fill the pipe and block it.
        std::thread::spawn(move || {
            let mut rest = String::new();
            let _ = stderr.read_to_string(&mut rest);
        });
        Simulator { child, address }
    }
}

impl Drop for Simulator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A server of `root` with the live source `url` for scans of shape `nav`.
fn serve_live(root: &Path, url: &str, nav: &[usize]) -> Server {
    let source: LiveSource = url.parse().unwrap();
    let mut options = LiveOptions::new(nav.to_vec());
    options.partition_frames = Some(8);
    options.stall_timeout = Duration::from_secs(5);
    options.start_timeout = Some(Duration::from_secs(30));
    Server::start(ServeOptions {
        root: root.to_owned(),
        threads: Some(2),
        live: Some(ServeLive { source, options }),
        ..ServeOptions::default()
    })
    .unwrap()
}

/// Open the page of `server` in a new tab of `browser`, ready.
fn open_page(browser: &mut Browser, server: &Server) -> String {
    let tab = browser.open_tab();
    let problems = browser.load_url(&tab, &server.url(), &[&server.base_url(), "blob:", "data:"]);
    assert!(problems.is_empty(), "the page: {problems:#?}");
    browser.wait_until(&tab, "udfHost.ready === true", WAIT);
    tab
}

/// Choose `value` in the select `id` as a person does (a change event).
fn choose(browser: &mut Browser, tab: &str, id: &str, value: &str) {
    browser.evaluate(
        tab,
        &format!(
            "(() => {{ const s = document.getElementById('{id}'); s.value = '{value}'; \
             s.dispatchEvent(new Event('change')); }})()"
        ),
    );
}

fn text_of(browser: &mut Browser, tab: &str, id: &str) -> String {
    let text = browser.evaluate(tab, &format!("document.getElementById('{id}').textContent"));
    text.as_str().unwrap_or_default().to_owned()
}

#[test]
fn choosing_the_live_source_shows_the_acquisition_as_the_file_gives_it() {
    let Some(chromium) = chromium_or_skip("choosing_the_live_source_shows_the_acquisition") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (file, data) = recorded_scan(dir.path());
    // 20 frames per second: the scan takes 4 s, time to drag the ring while it comes.
    let simulator = Simulator::start(&file, &["--fps", "20"]);
    let url = format!("merlin://{}", simulator.address);
    let server = serve_live(&dir.path().join("data"), &url, &NAV);

    let mut browser = Browser::start(&chromium);
    let tab = open_page(&mut browser, &server);
    let listed = browser.evaluate(&tab, "Array.from(document.getElementById('dataset').options, o => o.value)");
    assert_eq!(listed, json!([url, "scan.hdr", "scan.mib"]), "the live source first, then the files");
    assert_eq!(browser.evaluate(&tab, "udfHost.state.isLive"), json!(false), "opening the page starts no acquisition");

    // The sum pattern, and (the frame shape not known yet) each frame's sum as the scan
    // image, filling in as partitions of frames merge.
    browser.evaluate(&tab, "document.getElementById('pattern-stat').value = 'sum'");
    choose(&mut browser, &tab, "dataset", &url);
    browser.wait_until(&tab, "udfHost.state.liveState === 'receiving' && udfHost.state.info.sig_shape !== null", WAIT);
    assert_eq!(
        browser.evaluate(&tab, "udfHost.state.info.sig_shape"),
        json!(SIG),
        "the frame shape, from the detector"
    );
    browser.wait_until(
        &tab,
        "udfHost.state.results.live?.done === false && udfHost.state.results.live.buffers.scan.valid.includes(0) \
         && udfHost.state.results.live.buffers.scan.valid.includes(1)",
        WAIT,
    );
    let first = browser.evaluate(&tab, "udfHost.state.requests.live").as_u64().unwrap();
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    std::fs::write(target.join("serve-live-partial.png"), browser.screenshot(&tab, 1300)).unwrap();

    // Drag the ring while the frames come: the scan goes on; the ring is for the next one.
    let before = browser.evaluate(&tab, "udfHost.detectorAnalysis()");
    assert_eq!(before["kind"], "ring");
    let (cx, cy) = (before["cx"].as_f64().unwrap(), before["cy"].as_f64().unwrap());
    let grab = (cx + (before["ri"].as_f64().unwrap() + before["ro"].as_f64().unwrap()) / 2.0, cy);
    let from = client(&mut browser, &tab, "pattern", grab.0, grab.1);
    let to = client(&mut browser, &tab, "pattern", grab.0 - 3.0, grab.1 + 2.0);
    drag(&mut browser, &tab, from, to, 6);
    let status = text_of(&mut browser, &tab, "live-status");
    assert!(status.contains("applies to the next acquisition"), "{status}");

    // The first acquisition, complete: the file's sum pattern and frame sums.
    browser.wait_until(&tab, &format!("udfHost.state.acquired.some(a => a.id === {first})"), WAIT);
    let first_values = |browser: &mut Browser, part: &str| -> (Vec<f64>, bool) {
        let got = browser.evaluate(
            &tab,
            &format!(
                "(() => {{ const b = udfHost.state.acquired.find(a => a.id === {first}).buffers.{part}; \
                 return {{values: Array.from(b.values, Number), valid: b.valid.every(v => v === 1)}}; }})()"
            ),
        );
        let values = got["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
        (values, got["valid"] == json!(true))
    };
    let (scan, all_valid) = first_values(&mut browser, "scan");
    assert!(all_valid, "every position of the complete acquisition is valid");
    assert_close(&scan, &sum_sig(&data), 0.0, "the live scan image vs each frame's sum");
    let (pattern, _) = first_values(&mut browser, "pattern");
    assert_close(&pattern, &sum_frames(&data, None), 0.0, "the live sum pattern vs the sum of the frames");

    // The next acquisition starts by itself with the ring: builtin:ring on the file.
    browser.wait_until(&tab, &format!("udfHost.state.requests.live > {first}"), WAIT);
    let (virtual_image, all_valid) = page_values(&mut browser, &tab, "live", "scan");
    assert!(all_valid);
    browser.wait_until(&tab, "udfHost.state.liveState === 'complete'", WAIT);
    assert_eq!(text_of(&mut browser, &tab, "live-status"), "acquisition complete (80 frames)");
    let after = browser.evaluate(&tab, "udfHost.detectorAnalysis()");
    let moved = (after["cx"].as_f64().unwrap() - cx, after["cy"].as_f64().unwrap() - cy);
    assert!((moved.0 + 3.0).abs() < 0.5 && (moved.1 - 2.0).abs() < 0.5, "the ring moved by {moved:?}");
    let open = OpenOptions { nav_shape: Some(NAV.to_vec()), ..OpenOptions::default() };
    assert_close(&virtual_image, &ring_reference(&file, open, &after), 1e-5, "live ring vs builtin:ring on the file");

    // The acquisition exports as a file run does.
    browser.evaluate(&tab, "document.getElementById('detector-export').click()");
    browser.wait_until(&tab, "udfHost.state.exported?.lane === 'live'", WAIT);
    let files = browser.evaluate(&tab, "udfHost.state.exported.files.map(f => f.name)");
    assert!(files.as_array().unwrap().contains(&json!("ring/intensity.npy")), "{files}");

    std::fs::write(target.join("serve-live.png"), browser.screenshot(&tab, 1300)).unwrap();
    browser.close();
    server.stop();
}

#[test]
fn a_live_source_that_is_not_there_sends_another_scan_shape_or_goes_away_is_reported_on_the_page() {
    let Some(chromium) = chromium_or_skip("a_live_source_that_is_not_there") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (file, data) = recorded_scan(dir.path());
    let root = dir.path().join("data");
    let mut browser = Browser::start(&chromium);

    // Nothing listens on the port: said at once, and the server serves files on.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let nobody = format!("merlin://127.0.0.1:{port}");
    let server = serve_live(&root, &nobody, &NAV);
    let tab = open_page(&mut browser, &server);
    choose(&mut browser, &tab, "dataset", &nobody);
    browser.wait_until(&tab, "udfHost.state.liveState === 'failed'", WAIT);
    let error = text_of(&mut browser, &tab, "error");
    assert!(error.contains("cannot connect") && error.contains(&format!("127.0.0.1:{port}")), "{error}");
    choose(&mut browser, &tab, "dataset", "scan.mib");
    let (ring, all_valid) = page_values(&mut browser, &tab, "detector", "intensity");
    assert!(all_valid && ring.len() == NAV[0] * NAV[1], "the file after the failed live source");
    server.stop();

    // The detector announces 80 frames; the server was told 5 x 5: said before any frame
    // is processed, each time it is tried.
    let simulator = Simulator::start(&file, &[]);
    let url = format!("merlin://{}", simulator.address);
    let server = serve_live(&root, &url, &[5, 5]);
    let tab = open_page(&mut browser, &server);
    for attempt in 0..2 {
        if attempt == 0 {
            choose(&mut browser, &tab, "dataset", &url);
        } else {
            browser.evaluate(&tab, "document.getElementById('error').hidden = true");
            browser.evaluate(&tab, "document.getElementById('live-acquire').click()");
        }
        browser.wait_until(
            &tab,
            "udfHost.state.liveState === 'failed' && !document.getElementById('error').hidden",
            WAIT,
        );
        let error = text_of(&mut browser, &tab, "error");
        assert!(error.contains("announces 80 frames") && error.contains("[5, 5] has 25"), "attempt {attempt}: {error}");
    }
    server.stop();
    drop(simulator);

    // The detector goes away after 30 frames: what came is shown, valid where it came.
    let simulator = Simulator::start(&file, &["--disconnect-after", "30"]);
    let url = format!("merlin://{}", simulator.address);
    let server = serve_live(&root, &url, &NAV);
    let tab = open_page(&mut browser, &server);
    choose(&mut browser, &tab, "dataset", &url);
    browser.wait_until(&tab, "udfHost.state.liveState === 'ended'", WAIT);
    let error = text_of(&mut browser, &tab, "error");
    assert!(error.contains("ended early after 30 of 80 frames"), "{error}");
    assert_eq!(text_of(&mut browser, &tab, "live-status"), "the scan ended early after 30 frames");
    let got = browser.evaluate(
        &tab,
        "(() => { const b = udfHost.state.results.live.buffers.scan; \
         return {values: Array.from(b.values, Number), valid: Array.from(b.valid)}; })()",
    );
    let valid: Vec<u64> = got["valid"].as_array().unwrap().iter().map(|v| v.as_u64().unwrap()).collect();
    let expected_valid: Vec<u64> = (0..NAV[0] * NAV[1]).map(|i| u64::from(i < 30)).collect();
    assert_eq!(valid, expected_valid, "valid exactly where frames came");
    let values: Vec<f64> = got["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    assert_close(&values[..30], &sum_sig(&data)[..30], 0.0, "the frames that came, summed");
    // Its export's report says it is partial, and why.
    browser.evaluate(&tab, "document.getElementById('detector-export').click()");
    browser.wait_until(&tab, "udfHost.state.exported?.lane === 'live'", WAIT);
    let report = browser.evaluate_async(
        &tab,
        "(async () => { const a = [...document.querySelectorAll('#export-list a')].find(a => a.download.endsWith('index.html')); \
         return await (await fetch(a.href)).text(); })()",
    );
    let report = report.as_str().unwrap();
    assert!(report.contains("partial") && report.contains("ended early after 30 of 80 frames"), "the exported report");
    browser.close();
    server.stop();
}

#[test]
fn a_dectris_stream_is_a_live_source_as_a_merlin_is() {
    let Some(chromium) = chromium_or_skip("a_dectris_stream_is_a_live_source") else { return };
    let dir = tempfile::tempdir().unwrap();
    let (file, data) = recorded_scan(dir.path());
    let simulator = Simulator::of("dectris", &file, &[]);
    let url = format!("dectris://{}", simulator.address);
    let server = serve_live(&dir.path().join("data"), &url, &NAV);
    let mut browser = Browser::start(&chromium);
    let tab = open_page(&mut browser, &server);
    choose(&mut browser, &tab, "dataset", &url);
    let (scan, all_valid) = page_values(&mut browser, &tab, "live", "scan");
    assert!(all_valid);
    assert_close(&scan, &sum_sig(&data), 0.0, "each frame's sum, from the DECTRIS stream");
    let (mean, _) = page_values(&mut browser, &tab, "live", "pattern");
    let expected: Vec<f64> = sum_frames(&data, None).iter().map(|v| v / 80.0).collect();
    assert_close(&mean, &expected, 1e-6, "the mean pattern, from the DECTRIS stream");
    server.stop();

    // A ZeroMQ socket connects in the background: a DECTRIS stream nobody sends looks like
    // an acquisition not started yet. The page says it waits, and *stop* ends the wait.
    let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
    let nobody = format!("dectris://127.0.0.1:{port}");
    let server = serve_live(&dir.path().join("data"), &nobody, &NAV);
    let tab = open_page(&mut browser, &server);
    choose(&mut browser, &tab, "dataset", &nobody);
    browser.wait_until(&tab, "udfHost.state.liveState === 'waiting'", WAIT);
    browser.wait_until(&tab, "document.getElementById('live-status').textContent.startsWith('waiting for')", WAIT);
    browser.evaluate(&tab, "document.getElementById('live-stop').click()");
    browser.wait_until(&tab, "udfHost.state.liveState === 'stopped'", WAIT);
    assert_eq!(text_of(&mut browser, &tab, "live-status"), "stopped");
    browser.close();
    server.stop();
}

#[test]
fn serve_refuses_a_malformed_live_source_and_one_without_a_nav_shape() {
    let (_, message) = cli(&["serve", "--live", "nope://127.0.0.1:1", "--nav-shape", "2,2"]).unwrap_err();
    assert!(message.contains("is not a live source") && message.contains("unknown detector 'nope'"), "{message}");
    let (_, message) = cli(&["serve", "--live", "merlin://127.0.0.1:1"]).unwrap_err();
    assert!(message.contains("--nav-shape"), "{message}");
    let (_, message) = cli(&["serve", "--nav-shape", "2,2"]).unwrap_err();
    assert!(message.contains("--live"), "{message}");
    let (_, message) = cli(&["serve", "--stall-timeout", "3"]).unwrap_err();
    assert!(message.contains("options of the live source"), "{message}");
}
