//! `udf-host serve`: the page in a real headless Chromium ([`udf_host_tests::browser`]), driven
//! with mouse events as a person drives it, and the access rules over plain HTTP.
//!
//! The virtual image the page holds after a ring is dragged must be `builtin:ring`'s
//! result for the ring's final position; a clicked scan position must show that frame,
//! a dragged region the sum of its frames (a plain loop over the file). Screenshots go
//! to `target/serve-page.png` (docs/images/serve-page.png is one of them).

use super::cli::{cli, s};
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::path::Path;
use std::time::Duration;
use udf_host::exec::{Run, RunOptions, UdfSpec};
use udf_host::serve::{ServeOptions, Server};
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::browser::{Browser, chromium_or_skip};
use udf_host_tests::reference::{assert_close, to_f64};

const NAV: [usize; 2] = [24, 32];
const SIG: [usize; 2] = [64, 64];
pub(super) const WAIT: Duration = Duration::from_secs(60);

/// A synthetic uint16 scan (moving disk) in `dir/data/scan.npy`, and a file beside
/// `data/` that the server must not open.
fn scan(dir: &Path) -> std::path::PathBuf {
    let root = dir.join("data");
    std::fs::create_dir_all(&root).unwrap();
    let input = root.join("scan.npy");
    let (nav, sig) = (format!("{},{}", NAV[0], NAV[1]), format!("{},{}", SIG[0], SIG[1]));
    cli(&["generate", &s(&input), "--nav-shape", &nav, "--sig-shape", &sig, "--dtype", "uint16"]).unwrap();
    std::fs::copy(&input, dir.join("outside.npy")).unwrap();
    input
}

fn serve(root: &Path, data: &Path) -> Server {
    Server::start(ServeOptions {
        root: root.to_owned(),
        data: vec![data.to_owned()],
        threads: Some(2),
        ..ServeOptions::default()
    })
    .unwrap()
}

/// `builtin:ring` over `data` (opened with `open`) with the given geometry, run by the
/// library directly.
pub(super) fn ring_reference(data: &Path, open: udf_host::dataset::OpenOptions, geometry: &Value) -> Vec<f64> {
    let opened = udf_host::dataset::DatasetSpec::file(data, open).open().unwrap();
    let mut params = Params::default();
    for name in ["cx", "cy", "ri", "ro"] {
        params.set(name, ParamValue::Float(geometry[name].as_f64().unwrap()));
    }
    let udf = udf_host::builtins::get("ring").unwrap();
    let results = Run::plan(opened, vec![UdfSpec { udf, params }], RunOptions::default()).unwrap().execute().unwrap();
    to_f64(&results.udfs[0].buffer("intensity").unwrap().data)
}

/// The page's newest complete result of `lane`: its buffer `name` as numbers, and
/// whether every element is valid.
pub(super) fn page_values(browser: &mut Browser, tab: &str, lane: &str, name: &str) -> (Vec<f64>, bool) {
    browser.wait_until(
        tab,
        &format!("udfHost.state.results.{lane}?.done === true && udfHost.state.results.{lane}.id === udfHost.state.requests.{lane}"),
        WAIT,
    );
    let got = browser.evaluate(
        tab,
        &format!(
            "(() => {{ const b = udfHost.state.results.{lane}.buffers['{name}']; \
             return {{values: Array.from(b.values, Number), valid: b.valid.every(v => v === 1)}}; }})()"
        ),
    );
    let values = got["values"].as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    (values, got["valid"] == json!(true))
}

/// Client coordinates of data pixel position `(x, y)` in view `view`.
pub(super) fn client(browser: &mut Browser, tab: &str, view: &str, x: f64, y: f64) -> (f64, f64) {
    let p = browser.evaluate(tab, &format!("udfHost.views.{view}.toClient({x}, {y})"));
    (p["x"].as_f64().unwrap(), p["y"].as_f64().unwrap())
}

/// Press at `from`, move to `to` in `steps`, release there.
pub(super) fn drag(browser: &mut Browser, tab: &str, from: (f64, f64), to: (f64, f64), steps: usize) {
    browser.mouse(tab, "mousePressed", from);
    for i in 1..=steps {
        let t = i as f64 / steps as f64;
        browser.mouse(tab, "mouseMoved", (from.0 + (to.0 - from.0) * t, from.1 + (to.1 - from.1) * t));
        std::thread::sleep(Duration::from_millis(15));
    }
    browser.mouse(tab, "mouseReleased", to);
}

#[test]
fn dragging_a_ring_gives_builtin_ring_and_clicking_the_scan_gives_the_frame() {
    let Some(chromium) = chromium_or_skip("dragging_a_ring_gives_builtin_ring") else { return };
    let dir = tempfile::tempdir().unwrap();
    let data = scan(dir.path());
    let server = serve(&dir.path().join("data"), &data);
    let stored = udf_host::npy::read_array(&data).unwrap();
    let stored = to_f64(&stored);
    let frame_len = SIG[0] * SIG[1];

    let mut browser = Browser::start(&chromium);
    let tab = browser.open_tab();
    let problems = browser.load_url(&tab, &server.url(), &[&server.base_url(), "blob:", "data:"]);
    assert!(problems.is_empty(), "the page: {problems:#?}");
    browser.wait_until(&tab, "udfHost.ready === true", WAIT);
    let (_, all_valid) = page_values(&mut browser, &tab, "detector", "intensity");
    assert!(all_valid);
    let listed = browser.evaluate(&tab, "Array.from(document.getElementById('dataset').options, o => o.value)");
    assert_eq!(listed, json!(["scan.npy"]), "only the dataset under the root is listed");

    // The max pattern: the element-wise maximum of the stored frames (a plain loop here).
    browser.evaluate(
        &tab,
        "(() => { const s = document.getElementById('pattern-stat'); s.value = 'max'; \
         s.dispatchEvent(new Event('change')); })()",
    );
    let (max_pattern, _) = page_values(&mut browser, &tab, "pattern", "intensity");
    let mut expected = vec![f64::NEG_INFINITY; frame_len];
    for frame in stored.chunks_exact(frame_len) {
        for (e, &v) in expected.iter_mut().zip(frame) {
            *e = e.max(v);
        }
    }
    assert_eq!(max_pattern, expected, "the max pattern");
    browser.evaluate(
        &tab,
        "(() => { const s = document.getElementById('pattern-stat'); s.value = 'mean'; \
         s.dispatchEvent(new Event('change')); })()",
    );

    // Drag the ring by its inside: its centre moves by the drag.
    let before = browser.evaluate(&tab, "udfHost.detectorAnalysis()");
    let (cx, cy) = (before["cx"].as_f64().unwrap(), before["cy"].as_f64().unwrap());
    let ri = before["ri"].as_f64().unwrap();
    let grab = (cx + (ri + before["ro"].as_f64().unwrap()) / 2.0, cy);
    let from = client(&mut browser, &tab, "pattern", grab.0, grab.1);
    let to = client(&mut browser, &tab, "pattern", grab.0 - 7.0, grab.1 + 5.0);
    drag(&mut browser, &tab, from, to, 12);
    let (virtual_image, all_valid) = page_values(&mut browser, &tab, "detector", "intensity");
    let after = browser.evaluate(&tab, "udfHost.detectorAnalysis()");
    assert_eq!(after["kind"], "ring");
    let moved = (after["cx"].as_f64().unwrap() - cx, after["cy"].as_f64().unwrap() - cy);
    assert!((moved.0 + 7.0).abs() < 0.5 && (moved.1 - 5.0).abs() < 0.5, "the ring moved by {moved:?}");
    assert!(all_valid, "the complete virtual image is valid everywhere");
    assert_eq!(virtual_image.len(), NAV[0] * NAV[1]);
    assert_close(
        &virtual_image,
        &ring_reference(&data, Default::default(), &after),
        1e-5,
        "virtual image vs builtin:ring",
    );
    // The release sent one request whose results streamed in: partial (some positions
    // not merged yet, drawn grey) before complete.
    let latency = browser.evaluate(&tab, "udfHost.state.latency.at(-1)");
    assert!(latency["done"].as_f64().is_some(), "{latency}");

    // Click a scan position: its frame, exactly as stored.
    let (y, x) = (5, 7);
    let at = client(&mut browser, &tab, "scan", x as f64 + 0.5, y as f64 + 0.5);
    browser.mouse(&tab, "mousePressed", at);
    browser.mouse(&tab, "mouseReleased", at);
    let (frame, _) = page_values(&mut browser, &tab, "frame", "intensity");
    let k = y * NAV[1] + x;
    assert_eq!(frame, stored[k * frame_len..(k + 1) * frame_len], "the frame at ({y}, {x})");
    let title = browser.evaluate(&tab, "document.getElementById('frame-title').textContent");
    assert_eq!(title, format!("Frame at y={y}, x={x}"));

    // Drag over the scan: the sum of the region's frames.
    let from = client(&mut browser, &tab, "scan", 2.5, 3.5);
    let to = client(&mut browser, &tab, "scan", 6.5, 5.5);
    drag(&mut browser, &tab, from, to, 4);
    let (region, _) = page_values(&mut browser, &tab, "frame", "intensity");
    let mut expected = vec![0.0; frame_len];
    for y in 3..=5 {
        for x in 2..=6 {
            let k = y * NAV[1] + x;
            for (e, v) in expected.iter_mut().zip(&stored[k * frame_len..(k + 1) * frame_len]) {
                *e += v;
            }
        }
    }
    assert_close(&region, &expected, 1e-5, "the sum over scan rows 3..6, columns 2..7");

    // Centre of mass with the ring's centre, and an export of the virtual image.
    browser.evaluate(&tab, "document.getElementById('com-run').click()");
    let (divergence, _) = {
        browser.evaluate(&tab, "document.getElementById('com-buffer').value = 'divergence'");
        page_values(&mut browser, &tab, "com", "divergence")
    };
    assert_eq!(divergence.len(), NAV[0] * NAV[1]);
    browser.evaluate(&tab, "document.getElementById('detector-export').click()");
    browser.wait_until(&tab, "udfHost.state.exported?.lane === 'detector'", WAIT);
    let files = browser.evaluate(&tab, "udfHost.state.exported.files.map(f => f.name)");
    assert_eq!(files, json!(["ring/intensity.npy", "ring/intensity.png", "index.html"]));
    // The exported .npy holds the virtual image.
    let npy = browser.evaluate_async(
        &tab,
        "(async () => { const a = [...document.querySelectorAll('#export-list a')].find(a => a.download.endsWith('.npy')); \
         const bytes = new Uint8Array(await (await fetch(a.href)).arrayBuffer()); \
         return btoa(String.fromCharCode(...bytes)); })()",
    );
    use base64::Engine;
    let npy = base64::engine::general_purpose::STANDARD.decode(npy.as_str().unwrap()).unwrap();
    let exported = udf_host::npy::parse_array(&npy).unwrap();
    assert_eq!(exported.shape(), &NAV);
    assert_close(&to_f64(&exported), &virtual_image, 0.0, "exported .npy");

    let png = browser.screenshot(&tab, 1300);
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    std::fs::write(target.join("serve-page.png"), &png).unwrap();
    eprintln!("screenshot of the serve page: {}", target.join("serve-page.png").display());

    // A page of another origin (here a file: page) cannot open the WebSocket, even
    // with the token: the server refuses the handshake.
    let other = dir.path().join("other.html");
    std::fs::write(&other, "<!DOCTYPE html><title>other</title>").unwrap();
    browser.load(&tab, &other);
    let ws = format!("ws://{}/api/ws?token={}", server.address(), server.token());
    let outcome = browser.evaluate_async(
        &tab,
        &format!(
            "new Promise(done => {{ const w = new WebSocket('{ws}'); \
             w.onopen = () => done('open'); w.onerror = () => done('refused'); }})"
        ),
    );
    assert_eq!(outcome, "refused");
    browser.close();
    server.stop();
}

/// One HTTP/1.1 request to `server`: the status and the body.
fn http(server: &Server, target: &str, headers: &[(&str, &str)]) -> (u16, String) {
    let mut stream = std::net::TcpStream::connect(server.address()).unwrap();
    let host = server.address().to_string();
    let mut request = format!("GET {target} HTTP/1.1\r\nConnection: close\r\n");
    if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
        request.push_str(&format!("Host: {host}\r\n"));
    }
    for (k, v) in headers {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let status = response.split(' ').nth(1).and_then(|s| s.parse().ok()).unwrap();
    let body = response.split_once("\r\n\r\n").map(|(_, b)| b.to_owned()).unwrap_or_default();
    (status, body)
}

#[test]
fn requests_without_the_token_from_other_origins_or_for_files_outside_the_root_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let data = scan(dir.path());
    let server = serve(&dir.path().join("data"), &data);
    let token = server.token().to_owned();
    let with = |path: &str| format!("{path}{}token={token}", if path.contains('?') { '&' } else { '?' });

    let (status, body) = http(&server, &with("/api/datasets"), &[]);
    assert_eq!(status, 200, "{body}");
    let listing: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(listing["datasets"].as_array().unwrap().len(), 1, "{listing}");

    for path in ["/", "/api/datasets", "/page/app.js", "/api/info?path=scan.npy"] {
        let (status, body) = http(&server, path, &[]);
        assert_eq!(status, 401, "{path}: {body}");
        assert!(body.contains("no valid token"), "{body}");
        let (status, _) =
            http(&server, &format!("{path}{}token=wrong", if path.contains('?') { '&' } else { '?' }), &[]);
        assert_eq!(status, 401, "{path} with a wrong token");
    }
    let auth = format!("token {token}");
    assert_eq!(http(&server, "/api/datasets", &[("Authorization", &auth)]).0, 200);

    let outside = dir.path().join("outside.npy");
    for path in ["../outside.npy", outside.to_str().unwrap(), "/etc/passwd"] {
        let (status, body) = http(&server, &with(&format!("/api/info?path={path}")), &[]);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("outside the served folder"), "{body}");
    }
    let (status, body) = http(&server, &with("/api/info?path=scan.npy"), &[]);
    assert_eq!(status, 200, "{body}");
    let info: Value = serde_json::from_str(&body).unwrap();
    assert_eq!((info["nav_shape"].clone(), info["sig_shape"].clone()), (json!(NAV), json!(SIG)));

    let (status, body) = http(&server, &with("/api/datasets"), &[("Origin", "http://evil.example")]);
    assert_eq!(status, 403, "{body}");
    assert!(body.contains("other origins"), "{body}");
    let (status, body) = http(&server, &with("/api/datasets"), &[("Host", "evil.example")]);
    assert_eq!(status, 403, "{body}");

    // The page opened with the token gets it as a cookie; requests with the cookie pass.
    let mut stream = std::net::TcpStream::connect(server.address()).unwrap();
    let request = format!("GET /?token={token} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", server.address());
    stream.write_all(request.as_bytes()).unwrap();
    let mut response = String::new();
    stream.read_to_string(&mut response).unwrap();
    let cookie = response
        .lines()
        .find_map(|l| l.strip_prefix("set-cookie: ").or_else(|| l.strip_prefix("Set-Cookie: ")))
        .unwrap_or_else(|| panic!("no cookie: {response}"));
    assert!(cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"), "{cookie}");
    let pair = cookie.split(';').next().unwrap();
    assert_eq!(http(&server, "/api/datasets", &[("Cookie", pair)]).0, 200);
    server.stop();
}

#[test]
fn a_dataset_named_outside_the_root_is_refused_at_start() {
    let dir = tempfile::tempdir().unwrap();
    scan(dir.path());
    let refused = Server::start(ServeOptions {
        root: dir.path().join("data"),
        data: vec![dir.path().join("outside.npy")],
        ..ServeOptions::default()
    });
    let error = refused.err().expect("refused").to_string();
    assert!(error.contains("outside the served folder"), "{error}");
}

/// The Python runner of LiberTEM UDF classes as `scripts/polyglot/runner.sh` builds it
/// (scripts/test.sh does before `cargo test`), or `None` (the test then skips; in CI it
/// must be there).
fn python_runner_or_skip(test: &str) -> Option<std::path::PathBuf> {
    let runner = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/polyglot/runner/udf-runner.wasm");
    if runner.is_file() {
        return Some(runner);
    }
    assert!(std::env::var_os("CI").is_none(), "{} is missing: scripts/polyglot/runner.sh builds it", runner.display());
    eprintln!("SKIPPED {test}: the Python runner is not built (scripts/polyglot/runner.sh)");
    None
}

/// `udf-host serve --root ROOT` as a process (the command line's own binary, which finds
/// the Python runner as an installed one does): the child and the URL it printed.
fn serve_process(root: &Path, runner: &Path) -> (std::process::Child, String) {
    use std::io::BufRead;
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_udf-host-cli"))
        .args(["serve", "--root", &s(root), "--threads", "2"])
        .env("UDF_HOST_RUNNER", runner)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("start udf-host serve");
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
    let url = line.trim().strip_prefix("udf-host serve: open ").unwrap_or_else(|| panic!("printed: {line}")).to_owned();
    (child, url)
}

const CLASSES: &str = r#"import numpy as np
from udf_host import UDF


class ScaledSum(UDF):
    """Each frame's sum times a factor."""

    def __init__(self, factor=1.0):
        super().__init__(factor=factor)

    def get_result_buffers(self):
        return {"total": self.buffer(kind="nav", dtype=np.float64)}

    def process_frame(self, frame):
        self.results.total[:] = np.sum(frame) * self.params.factor
"#;

#[test]
fn a_libertem_udf_class_runs_from_the_page_and_a_broken_one_is_reported_there() {
    let Some(chromium) = chromium_or_skip("a_libertem_udf_class_runs_from_the_page") else { return };
    let Some(runner) = python_runner_or_skip("a_libertem_udf_class_runs_from_the_page") else { return };
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("data");
    std::fs::create_dir_all(&root).unwrap();
    let data = root.join("scan.npy");
    cli(&["generate", &s(&data), "--nav-shape", "4,6", "--sig-shape", "8,8", "--dtype", "uint16"]).unwrap();
    std::fs::write(root.join("classes.py"), CLASSES).unwrap();
    std::fs::write(root.join("broken.py"), "from udf_host import UDF\n\nclass Broken(UDF):\n    def oops(self:\n")
        .unwrap();
    std::fs::write(
        root.join("importer.py"),
        "import scipy\nfrom udf_host import UDF\n\nclass Importer(UDF):\n    pass\n",
    )
    .unwrap();
    let (mut child, url) = serve_process(&root, &runner);
    let base = url.split("/?").next().unwrap().to_owned();

    let mut browser = Browser::start(&chromium);
    let tab = browser.open_tab();
    let problems = browser.load_url(&tab, &url, &[&base, "blob:", "data:"]);
    assert!(problems.is_empty(), "the page: {problems:#?}");
    browser.wait_until(&tab, "udfHost.ready === true", WAIT);
    let listed = browser.evaluate(&tab, "Array.from(document.getElementById('plugin').options, o => o.value)");
    assert_eq!(listed, json!(["", "broken.py:Broken", "classes.py:ScaledSum", "importer.py:Importer"]));

    // A file that does not parse, one that imports what the sandbox lacks: said on the page.
    let choose = |browser: &mut Browser, value: &str| {
        browser.evaluate(
            &tab,
            &format!(
                "(() => {{ const s = document.getElementById('plugin'); s.value = '{value}'; \
                 s.dispatchEvent(new Event('change')); }})()"
            ),
        );
    };
    for (class, says) in [("broken.py:Broken", "SyntaxError"), ("importer.py:Importer", "scipy")] {
        choose(&mut browser, class);
        browser.wait_until(&tab, "!document.getElementById('error').hidden", WAIT);
        let error = browser.evaluate(&tab, "document.getElementById('error').textContent");
        let error = error.as_str().unwrap();
        assert!(error.contains(class.split(':').next().unwrap()) && error.contains(says), "{class}: {error}");
        browser.evaluate(&tab, "document.getElementById('error').hidden = true");
    }

    // The class: its form from its parameters, run with factor 3.
    choose(&mut browser, "classes.py:ScaledSum");
    browser.wait_until(&tab, "udfHost.state.plugin?.name === 'ScaledSum'", WAIT);
    let fields = browser.evaluate(&tab, "Array.from(document.querySelectorAll('#plugin-form input'), i => i.name)");
    assert!(fields.as_array().unwrap().contains(&json!("factor")), "{fields}");
    browser.evaluate(
        &tab,
        "(() => { document.querySelector('#plugin-form input[name=factor]').value = '3'; \
         document.querySelector('#plugin-form button').click(); })()",
    );
    let (total, all_valid) = page_values(&mut browser, &tab, "plugin", "total");
    assert!(all_valid);
    let stored = to_f64(&udf_host::npy::read_array(&data).unwrap());
    let expected: Vec<f64> = stored.chunks_exact(64).map(|frame| 3.0 * frame.iter().sum::<f64>()).collect();
    assert_close(&total, &expected, 1e-9, "ScaledSum(factor=3) vs 3 x each frame's sum");

    // A dataset added while the page is open is listed after a refresh.
    std::fs::copy(&data, root.join("later.npy")).unwrap();
    browser.evaluate(&tab, "document.getElementById('refresh').click()");
    browser.wait_until(
        &tab,
        "Array.from(document.getElementById('dataset').options, o => o.value).includes('later.npy')",
        WAIT,
    );
    browser.close();
    child.kill().unwrap();
    child.wait().unwrap();
}
