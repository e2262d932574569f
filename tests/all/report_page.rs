//! The report page in a real browser: headless Chromium ([`udf_host_tests::browser`]) loads
//! `index.html` and reports console errors, exceptions, failed or outgoing requests and
//! how each image decoded; a full-page screenshot goes to `target/report-page.png`.

use super::cli::{cli, s};
use serde_json::{Value, json};
use std::path::Path;
use udf_host_tests::browser::{Browser, chromium_or_skip};
use udf_host_tests::plugin;

#[test]
fn the_report_page_loads_in_headless_chromium_with_every_preview_decoded() {
    let Some(chromium) = chromium_or_skip("the_report_page_loads_in_headless_chromium") else { return };
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("scan.npy");
    cli(&["generate", &s(&input), "--nav-shape", "16,16", "--sig-shape", "32,32", "--dtype", "uint16"]).unwrap();
    let out = dir.path().join("results");
    cli(&[
        "run",
        &s(&plugin("sum")),
        &s(&plugin("sumsig")),
        "builtin:com",
        &s(&input),
        "--out",
        &s(&out),
        "--preview",
        "--roi-rect",
        "0:16,2:16",
    ])
    .unwrap();
    let summary: Value = serde_json::from_str(&std::fs::read_to_string(out.join("results.json")).unwrap()).unwrap();
    let previews: usize = summary["udfs"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|u| u["buffers"].as_array().unwrap())
        .map(|b| b["previews"].as_array().unwrap().len())
        .sum();
    assert!(previews >= 8, "{previews} previews");

    let mut browser = Browser::start(&chromium);
    let tab = browser.open_tab();

    // The checks can fail: a page with a missing image and a console error is caught.
    let broken = dir.path().join("broken.html");
    std::fs::write(&broken, "<!DOCTYPE html><img src=\"missing.png\"><script>console.error('boom')</script>").unwrap();
    let problems = browser.load(&tab, &broken);
    assert!(problems.iter().any(|p| p.contains("boom")), "{problems:?}");
    assert!(problems.iter().any(|p| p.contains("ERR_FILE_NOT_FOUND")), "{problems:?}");

    let problems = browser.load(&tab, &out.join("index.html"));
    assert!(problems.is_empty(), "the report page: {problems:#?}");
    let images = browser.evaluate(
        &tab,
        "Array.from(document.images, i => ({complete: i.complete, width: i.naturalWidth, height: i.naturalHeight, alt: i.alt}))",
    );
    let images = images.as_array().unwrap();
    assert_eq!(images.len(), previews, "one image per preview");
    for image in images {
        assert!(image["complete"] == true && image["width"].as_u64() > Some(0), "not decoded: {image}");
    }
    let title = browser.evaluate(&tab, "document.title");
    assert_eq!(title, "udf-host: scan.npy (complete)");

    // A screenshot of the whole page, for people (and CI artefacts) to look at.
    let metrics = browser.call(Some(&tab), "Page.getLayoutMetrics", json!({}));
    let height = metrics["cssContentSize"]["height"].as_f64().unwrap().ceil();
    browser.call(
        Some(&tab),
        "Emulation.setDeviceMetricsOverride",
        json!({"width": 1200, "height": height as u64, "deviceScaleFactor": 1, "mobile": false}),
    );
    let shot =
        browser.call(Some(&tab), "Page.captureScreenshot", json!({"format": "png", "captureBeyondViewport": true}));
    browser.close();
    use base64::Engine;
    let png = base64::engine::general_purpose::STANDARD.decode(shot["data"].as_str().unwrap()).unwrap();
    let info = png::Decoder::new(std::io::Cursor::new(&png)).read_info().unwrap().info().clone();
    assert!(info.width >= 1000 && f64::from(info.height) >= height - 1.0, "{} x {}", info.width, info.height);
    let target = Path::new(env!("CARGO_MANIFEST_DIR")).join("../target");
    std::fs::write(target.join("report-page.png"), &png).unwrap();
    eprintln!("screenshot of the report page: {}", target.join("report-page.png").display());
}
