//! Latency of `udf-host serve`, measured from the browser: a ring detector dragged on
//! the pattern of a 1 GiB uint16 scan in the page cache, in headless Chromium driven by
//! mouse events; the page records, for the request it sends on release, the time from
//! the release to the first partial virtual image and to the complete one
//! (`performance.now()` in the page). Each round also runs `builtin:ring` with the same
//! geometry through the library alone (plan + execute, as `udf-host run` does: default
//! partitions, all cores) — "the built-in's own run time" — alternating with the drags so
//! that a busy moment of a shared machine hits both.
//!
//! ```sh
//! cargo bench -p udf-host-tests --bench serve            # 10 rounds
//! UDF_BENCH_REPEAT=20 cargo bench -p udf-host-tests --bench serve
//! ```
//!
//! The dataset (`$UDF_BENCH_DIR`, default `/tmp`: `udf-host-bench-serve-uint16.npy`,
//! 128 × 64 frames of 256 × 256, the synthetic moving-disk scan of `udf-host generate`)
//! is written once and read once to get it into the page cache. Results go to
//! docs/benchmarks.md.

use serde_json::Value;
use std::path::PathBuf;
use std::time::{Duration, Instant};
use udf_host::dtype::{ByteOrder, DType};
use udf_host::exec::{Run, RunOptions, UdfSpec};
use udf_host::sample::{Pattern, SampleSpec};
use udf_host::serve::{ServeOptions, Server};
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::browser::{Browser, find_chromium};

const NAV: [usize; 2] = [128, 64];
const SIG: [usize; 2] = [256, 256];

fn data_path() -> PathBuf {
    let dir = std::env::var_os("UDF_BENCH_DIR").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    dir.join("udf-host-bench-serve").join("udf-host-bench-serve-uint16.npy")
}

fn ensure_data() -> PathBuf {
    let path = data_path();
    let bytes = (NAV[0] * NAV[1] * SIG[0] * SIG[1] * 2) as u64;
    if !std::fs::metadata(&path).is_ok_and(|m| m.len() > bytes) {
        std::fs::create_dir_all(path.parent().expect("a folder")).expect("create the data folder");
        eprintln!("writing {} (1 GiB)...", path.display());
        let spec = SampleSpec {
            pattern: Pattern::Disk,
            nav: NAV.to_vec(),
            sig: SIG.to_vec(),
            dtype: DType::U16,
            order: ByteOrder::Little,
            npy: true,
            seed: 0,
        };
        udf_host::sample::write(&path, &spec).expect("write the dataset");
    }
    // Into the page cache.
    let mut file = std::fs::File::open(&path).expect("open");
    std::io::copy(&mut file, &mut std::io::sink()).expect("read");
    path
}

/// `builtin:ring` alone, as `udf-host run` runs it: milliseconds of plan + execute.
fn ring_alone(path: &std::path::Path, geometry: &Value) -> f64 {
    let started = Instant::now();
    let opened = udf_host::dataset::DatasetSpec::file(path, Default::default()).open().expect("open");
    let mut params = Params::default();
    for name in ["cx", "cy", "ri", "ro"] {
        params.set(name, ParamValue::Float(geometry[name].as_f64().expect("a number")));
    }
    let udf = udf_host::builtins::get("ring").expect("ring");
    let run = Run::plan(opened, vec![UdfSpec { udf, params }], RunOptions::default()).expect("plan");
    run.execute().expect("run");
    started.elapsed().as_secs_f64() * 1e3
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n % 2 == 1 { values[n / 2] } else { (values[n / 2 - 1] + values[n / 2]) / 2.0 }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let Some(chromium) = find_chromium() else {
        eprintln!("SKIPPED the serve benchmark: no chromium on PATH (apt-get install chromium)");
        return;
    };
    let rounds: usize = std::env::var("UDF_BENCH_REPEAT").ok().and_then(|r| r.parse().ok()).unwrap_or(10);
    let path = ensure_data();
    let root = path.parent().expect("a folder").to_owned();
    let server = Server::start(ServeOptions { root, data: vec![path.clone()], ..ServeOptions::default() })
        .expect("start the server");
    let mut browser = Browser::start(&chromium);
    let tab = browser.open_tab();
    let problems = browser.load_url(&tab, &server.url(), &[&server.base_url(), "blob:", "data:"]);
    assert!(problems.is_empty(), "the page: {problems:#?}");
    let wait = Duration::from_secs(120);
    browser.wait_until(&tab, "udfHost.ready === true", wait);
    browser.wait_until(&tab, "udfHost.state.results.detector?.done === true", wait);
    browser.wait_until(&tab, "udfHost.state.results.pattern?.done === true", wait);

    let (mut first, mut done, mut alone, mut over) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut first_server, mut done_server) = (Vec::new(), Vec::new());
    println!(
        "round | first partial ms | complete ms | (server: first / complete) | builtin:ring alone ms | complete − alone"
    );
    // Round 0 is a warm-up, not counted: it takes a screenshot as soon as the first
    // partial virtual image is in (target/serve-page-partial.png).
    for round in 0..=rounds {
        // Drag the ring's inside a few pixels right and back, alternately.
        let geometry = browser.evaluate(&tab, "udfHost.detectorAnalysis()");
        let [cx, cy, ri, ro] = ["cx", "cy", "ri", "ro"].map(|k| geometry[k].as_f64().expect("a number"));
        let grab = (cx + (ri + ro) / 2.0, cy);
        let shift = if round % 2 == 0 { 6.0 } else { -6.0 };
        let at = |browser: &mut Browser, x: f64, y: f64| {
            let p = browser.evaluate(&tab, &format!("udfHost.views.pattern.toClient({x}, {y})"));
            (p["x"].as_f64().expect("x"), p["y"].as_f64().expect("y"))
        };
        let from = at(&mut browser, grab.0, grab.1);
        let to = at(&mut browser, grab.0 + shift, grab.1);
        browser.mouse(&tab, "mousePressed", from);
        for i in 1..=8 {
            let t = f64::from(i) / 8.0;
            browser.mouse(&tab, "mouseMoved", (from.0 + (to.0 - from.0) * t, from.1));
            std::thread::sleep(Duration::from_millis(16));
        }
        browser.mouse(&tab, "mouseReleased", to);
        if round == 0 {
            browser.wait_until(&tab, "udfHost.state.latency.at(-1)?.first != null", wait);
            let png = browser.screenshot(&tab, 1300);
            let target = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../target/serve-page-partial.png");
            std::fs::write(&target, png).expect("write the screenshot");
            browser.wait_until(&tab, "udfHost.state.latency.at(-1)?.done != null", wait);
            continue;
        }
        browser.wait_until(&tab, "udfHost.state.latency.at(-1)?.done != null", wait);
        let entry = browser.evaluate(&tab, "udfHost.state.latency.at(-1)");
        let geometry = browser.evaluate(&tab, "udfHost.detectorAnalysis()");
        let own = ring_alone(&path, &geometry);
        let f = entry["first"].as_f64().expect("first");
        let d = entry["done"].as_f64().expect("done");
        let (fs, ds) = (
            entry["first_server_ms"].as_f64().unwrap_or(f64::NAN),
            entry["done_server_ms"].as_f64().unwrap_or(f64::NAN),
        );
        println!("{round:5} | {f:16.1} | {d:11.1} | {fs:6.1} / {ds:6.1} | {own:21.1} | {:+.1}", d - own);
        first.push(f);
        done.push(d);
        first_server.push(fs);
        done_server.push(ds);
        alone.push(own);
        over.push(d - own);
    }
    let max = |v: &[f64]| v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    println!(
        "median (max): first partial {:.1} ms ({:.1}), complete {:.1} ms ({:.1}), server first/complete {:.1}/{:.1} ms, \
         builtin:ring alone {:.1} ms ({:.1}), complete − alone {:+.1} ms ({:+.1}); {rounds} rounds, {} partitions",
        median(&mut first.clone()),
        max(&first),
        median(&mut done.clone()),
        max(&done),
        median(&mut first_server),
        median(&mut done_server),
        median(&mut alone.clone()),
        max(&alone),
        median(&mut over.clone()),
        max(&over),
        browser.evaluate(&tab, "udfHost.state.results.detector.total"),
    );
    browser.close();
    server.stop();
}
