//! A headless Chromium driven over the DevTools protocol on a pipe
//! (`--remote-debugging-pipe`: JSON messages separated by NUL bytes on file descriptors
//! 3 and 4) — a small client of our own: the protocol needs only `call` (a command and
//! its reply), events and a few `Input` commands, which a few dozen lines do without the
//! async runtime and WebSocket client a DevTools crate brings. Used by the report-page and
//! `serve` tests.
//!
//! Chromium is found as `$UDF_HOST_CHROMIUM`, `chromium` or `chromium-browser`. Without
//! it the tests are skipped with a message — except in CI (`CI` or
//! `UDF_HOST_REQUIRE_CHROMIUM` set), where `.ci/run` installs it and a missing browser
//! fails the test.

use serde_json::{Value, json};
use std::io::{BufRead, BufReader, Write};
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Chromium, or `None` (with a message) where it may be missing; panics in CI.
pub fn chromium_or_skip(test: &str) -> Option<PathBuf> {
    let found = find_chromium();
    if found.is_none() {
        let required = std::env::var_os("CI").is_some() || std::env::var_os("UDF_HOST_REQUIRE_CHROMIUM").is_some();
        assert!(!required, "chromium is not installed (.ci/run installs Debian's chromium; or set UDF_HOST_CHROMIUM)");
        eprintln!("SKIPPED {test}: no chromium on PATH (apt-get install chromium)");
    }
    found
}

pub fn find_chromium() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("UDF_HOST_CHROMIUM") {
        return Some(PathBuf::from(path));
    }
    let paths = std::env::var_os("PATH")?;
    std::env::split_paths(&paths)
        .flat_map(|dir| ["chromium", "chromium-browser"].map(|name| dir.join(name)))
        .find(|p| p.is_file())
}

/// A browser driven over the DevTools protocol.
pub struct Browser {
    child: Child,
    commands: std::io::PipeWriter,
    messages: mpsc::Receiver<Value>,
    /// Events received while waiting for replies.
    events: Vec<Value>,
    next_id: u64,
    deadline: Instant,
    _profile: tempfile::TempDir,
}

impl Browser {
    pub fn start(executable: &Path) -> Browser {
        let profile = tempfile::tempdir().unwrap();
        let (to_browser_read, to_browser_write) = std::io::pipe().unwrap();
        let (from_browser_read, from_browser_write) = std::io::pipe().unwrap();
        let (read_fd, write_fd) = (to_browser_read.as_raw_fd(), from_browser_write.as_raw_fd());
        let mut command = Command::new(executable);
        command
            .args([
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--remote-debugging-pipe",
                "--window-size=1200,900",
            ])
            .arg(format!("--user-data-dir={}", profile.path().display()))
            .arg("about:blank")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        // SAFETY: between fork and exec only async-signal-safe calls (fcntl, dup2) on
        // descriptors that are open in the child: the pipe ends become fds 3 and 4 (via
        // fresh copies, so an end that already is 3 or 4 is not closed by dup2).
        unsafe {
            command.pre_exec(move || {
                let r = libc::fcntl(read_fd, libc::F_DUPFD_CLOEXEC, 10);
                let w = libc::fcntl(write_fd, libc::F_DUPFD_CLOEXEC, 10);
                if r < 0 || w < 0 || libc::dup2(r, 3) < 0 || libc::dup2(w, 4) < 0 {
                    return Err(std::io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let child = command.spawn().unwrap_or_else(|e| panic!("cannot start {}: {e}", executable.display()));
        drop((to_browser_read, from_browser_write));
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut reader = BufReader::new(from_browser_read);
            let mut message = Vec::new();
            while reader.read_until(0, &mut message).is_ok_and(|n| n > 0) {
                message.pop_if(|b| *b == 0);
                if let Ok(value) = serde_json::from_slice::<Value>(&message)
                    && tx.send(value).is_err()
                {
                    break;
                }
                message.clear();
            }
        });
        Browser {
            child,
            commands: to_browser_write,
            messages: rx,
            events: Vec::new(),
            next_id: 0,
            deadline: Instant::now() + Duration::from_secs(120),
            _profile: profile,
        }
    }

    pub fn receive(&mut self, waiting_for: &str) -> Value {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.messages
            .recv_timeout(left)
            .unwrap_or_else(|e| panic!("no answer from the browser ({e}) waiting for {waiting_for}"))
    }

    /// Call `method` (in `session`, or on the browser) and return its result.
    pub fn call(&mut self, session: Option<&str>, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let mut message = json!({"id": id, "method": method, "params": params});
        if let Some(session) = session {
            message["sessionId"] = json!(session);
        }
        let mut bytes = serde_json::to_vec(&message).unwrap();
        bytes.push(0);
        self.commands.write_all(&bytes).unwrap();
        loop {
            let m = self.receive(method);
            if m["id"] == id {
                assert!(m.get("error").is_none(), "{method} failed: {}", m["error"]);
                return m["result"].clone();
            }
            self.events.push(m);
        }
    }

    /// Wait for event `method` (already received or still to come).
    pub fn wait_for(&mut self, method: &str) {
        if self.events.iter().any(|e| e["method"] == method) {
            return;
        }
        loop {
            let m = self.receive(method);
            let found = m["method"] == method;
            self.events.push(m);
            if found {
                return;
            }
        }
    }

    /// A new tab, attached: its session id.
    pub fn open_tab(&mut self) -> String {
        let target = self.call(None, "Target.createTarget", json!({"url": "about:blank"}));
        let attached =
            self.call(None, "Target.attachToTarget", json!({"targetId": target["targetId"], "flatten": true}));
        let session = attached["sessionId"].as_str().unwrap().to_owned();
        for domain in ["Page", "Runtime", "Log", "Network"] {
            self.call(Some(&session), &format!("{domain}.enable"), json!({}));
        }
        session
    }

    /// Load `page` in the tab and return what went wrong: console errors and warnings,
    /// exceptions, error log entries, failed requests, and requests for anything but
    /// `file:` and `data:` URLs.
    pub fn load(&mut self, session: &str, page: &Path) -> Vec<String> {
        self.load_url(session, &format!("file://{}", page.display()), &["file:", "data:"])
    }

    /// Load `url` in the tab and return what went wrong, as [`Browser::load`] does;
    /// requests for URLs that start with none of `allowed` count as problems.
    pub fn load_url(&mut self, session: &str, url: &str, allowed: &[&str]) -> Vec<String> {
        self.events.clear();
        let navigated = self.call(Some(session), "Page.navigate", json!({"url": url}));
        assert!(navigated.get("errorText").is_none(), "cannot load {url}: {navigated}");
        self.wait_for("Page.loadEventFired");
        // Late console messages and load failures come within the same turn; a trivial
        // evaluation after the load event flushes them.
        self.call(Some(session), "Runtime.evaluate", json!({"expression": "1"}));
        let mut problems = Vec::new();
        for e in &self.events {
            let p = &e["params"];
            match e["method"].as_str().unwrap_or_default() {
                "Runtime.consoleAPICalled"
                    if ["error", "warning", "assert"].contains(&p["type"].as_str().unwrap_or("")) =>
                {
                    problems.push(format!("console {}: {}", p["type"], p["args"]));
                }
                "Runtime.exceptionThrown" => problems.push(format!("exception: {}", p["exceptionDetails"])),
                "Log.entryAdded" if ["error", "warning"].contains(&p["entry"]["level"].as_str().unwrap_or("")) => {
                    problems.push(format!("log {}: {}", p["entry"]["level"], p["entry"]["text"]));
                }
                "Network.loadingFailed" => problems.push(format!("request failed: {}", p["errorText"])),
                "Network.requestWillBeSent" => {
                    let url = p["request"]["url"].as_str().unwrap_or_default();
                    if !allowed.iter().any(|a| url.starts_with(a)) {
                        problems.push(format!("request to {url}"));
                    }
                }
                _ => {}
            }
        }
        problems
    }

    pub fn evaluate(&mut self, session: &str, expression: &str) -> Value {
        let r = self.call(Some(session), "Runtime.evaluate", json!({"expression": expression, "returnByValue": true}));
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Evaluate `expression`, awaiting it if it is a promise; its value.
    pub fn evaluate_async(&mut self, session: &str, expression: &str) -> Value {
        let r = self.call(
            Some(session),
            "Runtime.evaluate",
            json!({"expression": expression, "returnByValue": true, "awaitPromise": true}),
        );
        assert!(r.get("exceptionDetails").is_none(), "{expression}: {}", r["exceptionDetails"]);
        r["result"]["value"].clone()
    }

    /// Wait until `expression` is true (checked every 20 ms), at most `timeout`.
    pub fn wait_until(&mut self, session: &str, expression: &str, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        while self.evaluate(session, expression) != json!(true) {
            assert!(Instant::now() < deadline, "still not true after {timeout:?}: {expression}");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A mouse event (`mousePressed`, `mouseMoved`, `mouseReleased`) with the left button
    /// at client coordinates `(x, y)`, as a user's mouse makes it.
    pub fn mouse(&mut self, session: &str, kind: &str, (x, y): (f64, f64)) {
        let buttons = if kind == "mouseReleased" { 0 } else { 1 };
        let button = if kind == "mouseMoved" && buttons == 0 { "none" } else { "left" };
        self.call(
            Some(session),
            "Input.dispatchMouseEvent",
            json!({"type": kind, "x": x, "y": y, "button": button, "buttons": buttons, "clickCount": 1}),
        );
    }

    /// A PNG screenshot of the whole page, `width` CSS pixels wide.
    pub fn screenshot(&mut self, session: &str, width: u64) -> Vec<u8> {
        let metrics = self.call(Some(session), "Page.getLayoutMetrics", json!({}));
        let height = metrics["cssContentSize"]["height"].as_f64().unwrap_or(900.0).ceil();
        self.call(
            Some(session),
            "Emulation.setDeviceMetricsOverride",
            json!({"width": width, "height": height as u64, "deviceScaleFactor": 1, "mobile": false}),
        );
        let shot =
            self.call(Some(session), "Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true}));
        use base64::Engine;
        base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap_or_default()).unwrap()
    }

    pub fn close(mut self) {
        let _ = self.call(None, "Browser.close", json!({}));
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Browser {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}
