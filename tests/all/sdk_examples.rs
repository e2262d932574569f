//! The Rust SDK's documented examples (`guest-sdk/examples/`, built as the probes
//! `tests/probes/sdk_*`) against plain loops, and the README, which must show them
//! unchanged: the README's Rust plugins are compiled and run here, not hand copies.

use crate::plugin_matrix::{cases, run_one, scaled};
use std::path::Path;
use udf_host::dtype::DType;
use udf_host::exec::RunOptions;
use udf_host::udf::{Method, Params};
use udf_host_tests::fixtures::{self, Ty};
use udf_host_tests::load;
use udf_host_tests::reference::{assert_close, sum_frames, to_f64};

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
}

#[test]
fn the_readme_shows_the_compiled_sdk_examples_unchanged() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let section = &readme[readme.find("## Writing a plugin in Rust").expect("the README's Rust section")..];
    let section = &section[..section.find("\n## ").unwrap_or(section.len())];
    let blocks = fenced_blocks(section, "rust");
    let examples = ["short_sum.rs", "frame_map.rs"];
    assert_eq!(blocks.len(), examples.len(), "the README's Rust plugins are exactly the tested examples");
    for (block, file) in blocks.iter().zip(examples) {
        let example = std::fs::read_to_string(root().join("guest-sdk/examples").join(file)).unwrap();
        assert_eq!(block, &example, "README block differs from guest-sdk/examples/{file} (built and run by the tests)");
    }
}

#[test]
fn the_short_sum_example_sums_in_the_input_dtype_and_takes_the_crate_version() {
    let dir = tempfile::tempdir().unwrap();
    let data = scaled(fixtures::mk_uniform(&[5, 7], &[11, 13], 61), 10.0);
    let udf = load("probe_sdk_short_sum");
    for (ty, dtype) in [(Ty::F32, DType::F32), (Ty::U16, DType::F32), (Ty::F64, DType::F64)] {
        let stored = data.rounded(ty);
        let path = dir.path().join(format!("short-{ty:?}.npy"));
        fixtures::write_npy(&path, &data, ty);
        for case in cases(35, &[vec![3, 5, 7], vec![2, 11, 4]], 62) {
            let results = run_one(&path, &udf, Params::default(), case.options()).unwrap();
            let r = &results.udfs[0];
            assert_eq!((r.name.as_str(), r.version.as_str()), ("my-sum", env!("CARGO_PKG_VERSION")));
            let b = r.buffer("intensity").unwrap();
            assert_eq!(b.dtype(), dtype, "{ty:?}");
            let expected = sum_frames(&stored, case.roi.as_deref());
            assert_close(&to_f64(&b.data), &expected, 1e-5, &format!("{ty:?} {case:?}"));
        }
    }
}

#[test]
fn the_frame_map_example_gives_the_row_sums_of_every_frame() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[4, 6], &[9, 7], 63);
    let path = dir.path().join("map.npy");
    fixtures::write_npy(&path, &data, Ty::U16);
    let options = RunOptions { partitions: Some(5), ..Default::default() };
    let results = run_one(&path, &load("probe_sdk_frame_map"), Params::default(), options).unwrap();
    let r = &results.udfs[0];
    assert_eq!((r.name.as_str(), r.method), ("row-sums", Method::Frame));
    let b = r.buffer("result").unwrap();
    assert_eq!((b.dtype(), b.data.shape().to_vec()), (DType::F32, vec![4, 6, 9]));
    let expected: Vec<f64> = (0..24).flat_map(|n| data.frame(n).chunks(7).map(|row| row.iter().sum::<f64>())).collect();
    assert_close(&to_f64(&b.data), &expected, 1e-6, "row sums");
}

/// The fenced blocks of `markdown` in `language`.
fn fenced_blocks(markdown: &str, language: &str) -> Vec<String> {
    let open = format!("```{language}");
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        match (&mut current, line.trim_end()) {
            (None, fence) if fence == open => current = Some(String::new()),
            (Some(block), "```") => {
                blocks.push(std::mem::take(block));
                current = None;
            }
            (Some(block), _) => {
                block.push_str(line);
                block.push('\n');
            }
            (None, _) => {}
        }
    }
    blocks
}

#[test]
fn the_polyglot_guides_show_the_tested_examples_unchanged() {
    // docs/plugins/<language>.md shows these plugins of plugins/polyglot/, which
    // tests/all/polyglot.rs builds and runs.
    for (guide, fence, files) in [
        ("c.md", "c", ["c/max/max.c", "c/map/map.c"]),
        ("zig.md", "zig", ["zig/max/max.zig", "zig/map/map.zig"]),
        ("python.md", "python", ["python/max/app.py", "python/map/app.py"]),
        ("js.md", "js", ["js/max/max.js", "js/map/map.js"]),
    ] {
        let text = std::fs::read_to_string(root().join("docs/plugins").join(guide)).unwrap();
        let blocks = fenced_blocks(&text, fence);
        for file in files {
            let source = std::fs::read_to_string(root().join("plugins/polyglot").join(file)).unwrap();
            assert!(blocks.contains(&source), "docs/plugins/{guide} does not show plugins/polyglot/{file} unchanged");
        }
    }
    // The README's one-line Python frame map is the example's last line.
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap();
    let map = std::fs::read_to_string(root().join("plugins/polyglot/python/map/app.py")).unwrap();
    let line = map.lines().last().expect("the map line");
    assert!(fenced_blocks(&readme, "python").iter().any(|b| b.trim_end() == line), "README: {line}");
}

/// Run a unit-test script of a polyglot SDK (`tests/sdk_units/`) with `program`.
#[track_caller]
fn run_script(program: &str, script: &str) {
    let path = root().join("tests/sdk_units").join(script);
    let out = std::process::Command::new(program)
        .arg(&path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {program} (needed for {script}; scripts/test.sh installs it): {e}"));
    let text = String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{script} failed:\n{text}");
    assert!(text.contains(" passed"), "{script} ran no tests:\n{text}");
}

#[test]
fn the_python_sdks_helpers_pass_their_unit_tests() {
    run_script("python3", "python_sdk.py");
}

#[test]
fn the_javascript_sdks_helpers_pass_their_unit_tests() {
    run_script("node", "js_sdk.mjs");
}
