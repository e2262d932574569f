//! `--preview`: the PNGs are decoded here and their colours checked against matplotlib's
//! viridis and ColorBrewer's RdBu at positions computed in the test from NumPy's
//! percentile definition; NaN and invalid positions, log scaling, slices,
//! `results.json`, `png_bytes` and the report page's content.

use super::cli::{cli, s};
use serde_json::Value;
use std::path::{Path, PathBuf};
use udf_host::cli::exit;
use udf_host::preview::{self, PreviewOptions};
use udf_host_tests::fixtures::write_npy_f32;
use udf_host_tests::plugin;

/// Matplotlib's viridis at 0, 0.25, 0.5, 0.75 and 1 (`matplotlib.cm.viridis(t)`, as
/// 8-bit: #440154 #3b528b #21918c #5ec962 #fde725).
const VIRIDIS: [(f64, [u8; 3]); 5] =
    [(0.0, [68, 1, 84]), (0.25, [59, 82, 139]), (0.5, [33, 145, 140]), (0.75, [94, 201, 98]), (1.0, [253, 231, 37])];
/// ColorBrewer RdBu (11 classes), reversed (negative blue): the ends #053061 and
/// #67001f, and the middle as a uniform cubic B-spline through the scheme has it (as d3's
/// `interpolateRdBu`): (#d1e5f0 + 4 #f7f7f7 + #fddbc7) / 6.
fn rdbu_r() -> [(f64, [u8; 3]); 3] {
    let spline = |a: u8, b: u8, c: u8| ((f64::from(a) + 4.0 * f64::from(b) + f64::from(c)) / 6.0) as u8;
    let middle = [spline(0xd1, 0xf7, 0xfd), spline(0xe5, 0xf7, 0xdb), spline(0xf0, 0xf7, 0xc7)];
    [(0.0, [5, 48, 97]), (0.5, middle), (1.0, [103, 0, 31])]
}
/// The documented colour of invalid and non-finite pixels.
const GREY: [u8; 3] = [128, 128, 128];
const WHITE: [u8; 3] = [255, 255, 255];

/// NumPy's `np.percentile(values, p)` (linear interpolation between closest ranks).
fn np_percentile(values: &[f64], p: f64) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let rank = p / 100.0 * (v.len() - 1) as f64;
    let (i, frac) = (rank.floor() as usize, rank - rank.floor());
    if i + 1 < v.len() { v[i] * (1.0 - frac) + v[i + 1] * frac } else { v[i] }
}

/// The reference colour at `t`, which must be one of the reference points.
fn reference(map: &[(f64, [u8; 3])], t: f64) -> [u8; 3] {
    map.iter()
        .find(|(at, _)| (at - t).abs() < 1e-9)
        .map(|(_, c)| *c)
        .unwrap_or_else(|| panic!("no reference colour at {t}"))
}

fn assert_near(actual: [u8; 3], expected: [u8; 3], what: &str) {
    let close = actual.iter().zip(expected).all(|(&a, e)| a.abs_diff(e) <= 3);
    assert!(close, "{what}: colour {actual:?}, expected {expected:?}");
}

/// A decoded 8-bit RGB PNG.
struct Picture {
    width: usize,
    height: usize,
    rgb: Vec<u8>,
}

impl Picture {
    fn decode(bytes: &[u8]) -> Picture {
        let mut reader = png::Decoder::new(std::io::Cursor::new(bytes)).read_info().expect("a PNG");
        let mut rgb = vec![0; reader.output_buffer_size().expect("size")];
        let info = reader.next_frame(&mut rgb).expect("PNG data");
        assert_eq!((info.color_type, info.bit_depth), (png::ColorType::Rgb, png::BitDepth::Eight));
        rgb.truncate(info.buffer_size());
        Picture { width: info.width as usize, height: info.height as usize, rgb }
    }

    fn read(path: &Path) -> Picture {
        Picture::decode(&std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
    }

    fn at(&self, x: usize, y: usize) -> [u8; 3] {
        let i = (y * self.width + x) * 3;
        [self.rgb[i], self.rgb[i + 1], self.rgb[i + 2]]
    }

    /// Where the image starts (its top-left pixel, the first that is not background) and how many PNG
    /// pixels one data pixel takes: the image's first row, up to the white gap before the
    /// colour bar, is `data_width` data pixels.
    fn image_grid(&self, data_width: usize) -> (usize, usize, usize) {
        // Column by column: the image is left of everything else.
        let first =
            (0..self.width * self.height).find(|&i| self.at(i / self.height, i % self.height) != WHITE).unwrap();
        let (ox, oy) = (first / self.height, first % self.height);
        let drawn = (ox..self.width).take_while(|&x| self.at(x, oy) != WHITE).count();
        assert_eq!(drawn % data_width, 0, "{drawn} PNG pixels for {data_width} data pixels");
        (ox, oy, drawn / data_width)
    }
}

/// `range` is `[lo, hi]` (to rounding).
fn assert_range(range: &Value, lo: f64, hi: f64) {
    let got: Vec<f64> = range.as_array().unwrap().iter().map(|v| v.as_f64().unwrap()).collect();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
    assert!(got.len() == 2 && close(got[0], lo) && close(got[1], hi), "range {got:?}, expected [{lo}, {hi}]");
}

fn read_json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// The buffer entry `udf`/`buffer` of `results.json`.
fn buffer_entry<'a>(summary: &'a Value, udf: &str, buffer: &str) -> &'a Value {
    let u = summary["udfs"].as_array().unwrap().iter().find(|u| u["name"] == udf).unwrap();
    u["buffers"].as_array().unwrap().iter().find(|b| b["name"] == buffer).unwrap()
}

/// A float32 dataset of `nav` x `sig` where every pixel of frame `n` is `frame_values[n]`
/// divided by the pixel count (so `sumsig` gives `frame_values[n]`).
fn frames_summing_to(dir: &Path, nav: &[usize], sig: &[usize], frame_values: &[f64]) -> PathBuf {
    let pixels: usize = sig.iter().product();
    let values: Vec<f32> =
        frame_values.iter().flat_map(|&v| std::iter::repeat_n((v / pixels as f64) as f32, pixels)).collect();
    let path = dir.join("in.npy");
    write_npy_f32(&path, nav, sig, &values);
    path
}

/// Run `plugins` over `input` with `--preview` (and `extra` flags) into `dir/out`.
fn run_with_previews(dir: &Path, plugins: &[&str], input: &Path, extra: &[&str]) -> PathBuf {
    let out = dir.join("out");
    let mut args: Vec<String> = vec!["run".into()];
    args.extend(plugins.iter().map(|p| (*p).to_owned()));
    args.extend([s(input), "--out".into(), s(&out), "--preview".into()]);
    args.extend(extra.iter().map(|e| (*e).to_owned()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    cli(&refs).unwrap_or_else(|(code, msg)| panic!("exit {code}: {msg}"));
    out
}

/// Check every data pixel's colour: `expected(y, x)` gives the reference colour.
fn check_pixels(
    pic: &Picture,
    (ox, oy, up): (usize, usize, usize),
    (h, w): (usize, usize),
    expected: impl Fn(usize, usize) -> [u8; 3],
) {
    for y in 0..h {
        for x in 0..w {
            let want = expected(y, x);
            // Nearest-neighbour upscaling: every PNG pixel of the block has the colour.
            for (dx, dy) in [(0, 0), (up - 1, 0), (0, up - 1), (up - 1, up - 1), (up / 2, up / 2)] {
                assert_near(
                    pic.at(ox + x * up + dx, oy + y * up + dy),
                    want,
                    &format!("pixel ({y}, {x}) + ({dy}, {dx})"),
                );
            }
        }
    }
}

#[test]
fn a_nav_image_is_viridis_between_the_percentiles_upscaled_with_a_colour_bar() {
    let dir = tempfile::tempdir().unwrap();
    // 5 x 5 positions: 11 at 0, 11 at 100, and 25, 50, 75 (row 2).
    let mut v = vec![0.0; 10];
    v.extend([0.0, 25.0, 50.0, 75.0, 100.0]);
    v.extend([100.0; 10]);
    let input = frames_summing_to(dir.path(), &[5, 5], &[2, 2], &v);
    let out = run_with_previews(dir.path(), &[&s(&plugin("sumsig"))], &input, &[]);

    let (lo, hi) = (np_percentile(&v, 0.5), np_percentile(&v, 99.5));
    let pic = Picture::read(&out.join("sumsig/intensity.png"));
    let (ox, oy, up) = pic.image_grid(5);
    assert_eq!(up, 256usize.div_ceil(5), "upscaled until the longer side reaches 256");
    check_pixels(&pic, (ox, oy, up), (5, 5), |y, x| {
        let t = ((v[y * 5 + x] - lo) / (hi - lo)).clamp(0.0, 1.0);
        reference(&VIRIDIS, t)
    });
    // The colour bar: right of the image, viridis(1) at the top, viridis(0) at the bottom.
    let bar_x = (ox + 5 * up..pic.width).find(|&x| pic.at(x, oy + 2) != WHITE).unwrap() + 3;
    assert_near(pic.at(bar_x, oy), reference(&VIRIDIS, 1.0), "top of the colour bar");
    let bottom = (oy..pic.height).rev().find(|&y| pic.at(bar_x, y) != WHITE).unwrap() - 1;
    assert_near(pic.at(bar_x, bottom), reference(&VIRIDIS, 0.0), "bottom of the colour bar");
    assert!(pic.width > ox + 5 * up + 40 && pic.height >= oy + 5 * up, "{} x {}", pic.width, pic.height);

    let summary = read_json(&out.join("results.json"));
    let entry = buffer_entry(&summary, "sumsig", "intensity");
    let previews = entry["previews"].as_array().unwrap();
    assert_eq!(previews.len(), 1);
    let p = &previews[0];
    assert_eq!(p["file"], "sumsig/intensity.png");
    assert_eq!((p["width"].as_u64(), p["height"].as_u64()), (Some(pic.width as u64), Some(pic.height as u64)));
    assert_eq!(p["image_shape"], serde_json::json!([5, 5]));
    assert_eq!((p["scale"].as_str(), p["colormap"].as_str()), (Some("linear"), Some("viridis")));
    assert_range(&p["range"], lo, hi);
    assert_eq!(p["invalid_pixels"], 0);
    assert_eq!(entry["valid_fraction"], 1.0);
}

#[test]
fn a_sig_image_is_log_scaled_between_the_percentiles_of_its_positive_values() {
    let dir = tempfile::tempdir().unwrap();
    // A 10 x 10 pattern: 50 pixels at 1, 47 at 10^4 and one each at 10, 100, 1000; the sum
    // over 2 x 2 frames of a quarter each.
    let mut pattern = vec![1.0; 50];
    pattern.extend([10.0, 100.0, 1000.0]);
    pattern.extend([1e4; 47]);
    let values: Vec<f32> = (0..4).flat_map(|_| pattern.iter().map(|&p| (p / 4.0) as f32)).collect();
    let input = dir.path().join("in.npy");
    write_npy_f32(&input, &[2, 2], &[10, 10], &values);
    let out = run_with_previews(dir.path(), &[&s(&plugin("sum"))], &input, &[]);

    let (lo, hi) = (np_percentile(&pattern, 0.5), np_percentile(&pattern, 99.5));
    let pic = Picture::read(&out.join("sum/intensity.png"));
    let (ox, oy, up) = pic.image_grid(10);
    assert_eq!(up, 256usize.div_ceil(10));
    check_pixels(&pic, (ox, oy, up), (10, 10), |y, x| {
        let t = ((pattern[y * 10 + x].log10() - lo.log10()) / (hi.log10() - lo.log10())).clamp(0.0, 1.0);
        reference(&VIRIDIS, t)
    });
    let summary = read_json(&out.join("results.json"));
    let p = &buffer_entry(&summary, "sum", "intensity")["previews"][0];
    assert_eq!(p["scale"], "log");
    assert_range(&p["range"], lo, hi);
}

#[test]
fn nan_and_invalid_positions_are_grey_and_left_out_of_the_range() {
    let dir = tempfile::tempdir().unwrap();
    // 4 x 4 positions, frame n sums to 4n; frame 5 has a NaN; only rows 1-3 are processed.
    let mut values: Vec<f32> = (0..16).flat_map(|n| [n as f32; 4]).collect();
    values[5 * 4 + 2] = f32::NAN;
    let input = dir.path().join("in.npy");
    write_npy_f32(&input, &[4, 4], &[2, 2], &values);
    let out = run_with_previews(dir.path(), &[&s(&plugin("sumsig"))], &input, &["--roi-rect", "1:4,0:4"]);

    let shown = |n: usize| n >= 4 && n != 5;
    let valid: Vec<f64> = (0..16).filter(|&n| shown(n)).map(|n| 4.0 * n as f64).collect();
    let (lo, hi) = (np_percentile(&valid, 0.5), np_percentile(&valid, 99.5));
    let pic = Picture::read(&out.join("sumsig/intensity.png"));
    let (ox, oy, up) = pic.image_grid(4);
    assert_eq!(up, 64);
    for y in 0..4 {
        for x in 0..4 {
            let n = y * 4 + x;
            let got = pic.at(ox + x * up + up / 2, oy + y * up + up / 2);
            if !shown(n) {
                assert_eq!(got, GREY, "pixel ({y}, {x}) is outside the ROI or NaN");
                continue;
            }
            let t = ((4.0 * n as f64 - lo) / (hi - lo)).clamp(0.0, 1.0);
            match VIRIDIS.iter().find(|(at, _)| (at - t).abs() < 1e-9) {
                Some((_, want)) => assert_near(got, *want, &format!("pixel ({y}, {x})")),
                // In between the reference points: a colour, not grey.
                None => assert!(got[0] != got[1] || got[1] != got[2], "pixel ({y}, {x}) {got:?}"),
            }
        }
    }
    let summary = read_json(&out.join("results.json"));
    let entry = buffer_entry(&summary, "sumsig", "intensity");
    assert_eq!(entry["previews"][0]["invalid_pixels"], 5, "row 0 and the NaN");
    assert_eq!(entry["previews"][0]["extent"], serde_json::json!([16.0, 60.0]));
    assert_eq!(entry["valid_fraction"], 0.75, "the NaN position is valid, its value is not finite");
}

#[test]
fn signed_images_get_the_diverging_map_symmetric_about_zero() {
    let dir = tempfile::tempdir().unwrap();
    let mut v = vec![-100.0; 11];
    v.extend([-40.0, 0.0, 40.0]);
    v.extend([100.0; 11]);
    let input = frames_summing_to(dir.path(), &[5, 5], &[2, 2], &v);
    let out = run_with_previews(dir.path(), &[&s(&plugin("sumsig"))], &input, &[]);
    let m = np_percentile(&v, 0.5).abs().max(np_percentile(&v, 99.5).abs());
    let pic = Picture::read(&out.join("sumsig/intensity.png"));
    let (ox, oy, up) = pic.image_grid(5);
    for (y, x) in [(0, 0), (2, 2), (4, 4)] {
        let t = (v[y * 5 + x] + m) / (2.0 * m);
        assert_near(
            pic.at(ox + x * up + up / 2, oy + y * up + up / 2),
            reference(&rdbu_r(), t),
            &format!("({y}, {x})"),
        );
    }
    let summary = read_json(&out.join("results.json"));
    let p = &buffer_entry(&summary, "sumsig", "intensity")["previews"][0];
    assert_eq!((p["colormap"].as_str(), p["scale"].as_str()), (Some("diverging"), Some("linear")));
    assert_range(&p["range"], -m, m);
}

#[test]
fn com_fields_are_diverging_slices_and_only_images_get_previews() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("scan.npy");
    cli(&["generate", &s(&input), "--nav-shape", "8,8", "--sig-shape", "16,16", "--dtype", "float32"]).unwrap();
    let out = run_with_previews(dir.path(), &["builtin:com", "builtin:stddev"], &input, &[]);
    let summary = read_json(&out.join("results.json"));
    // The field (nav, extra shape 2): one image per component.
    let field = buffer_entry(&summary, "com", "field")["previews"].as_array().unwrap().clone();
    let files: Vec<&str> = field.iter().map(|p| p["file"].as_str().unwrap()).collect();
    assert_eq!(files, ["com/field.0.png", "com/field.1.png"]);
    assert_eq!(field[1]["slice"], serde_json::json!([1]));
    assert_eq!(field[1]["slices"], 2);
    for p in &field {
        assert_eq!(p["colormap"], "diverging", "{p}");
        assert!(out.join(p["file"].as_str().unwrap()).exists());
    }
    // Not images: the 3 x 2 regression matrix, the frame count.
    assert_eq!(buffer_entry(&summary, "com", "regression")["previews"], serde_json::json!([]));
    assert_eq!(buffer_entry(&summary, "stddev", "num_frames")["previews"], serde_json::json!([]));
    assert!(!out.join("com/regression.png").exists() && !out.join("stddev/num_frames.png").exists());
    // Sig images (non-negative) are log-scaled.
    assert_eq!(buffer_entry(&summary, "stddev", "std")["previews"][0]["scale"], "log");

    // The library hook (Python's Buffer.preview()) gives the same bytes as the file.
    let data = udf_host::dataset::open(&input, &Default::default()).unwrap();
    let specs = vec![udf_host::exec::UdfSpec {
        udf: udf_host::builtins::from_source("builtin:com").unwrap().unwrap(),
        params: Default::default(),
    }];
    let results = udf_host::exec::Run::plan(data, specs, Default::default()).unwrap().execute().unwrap();
    let buffer = results.udfs[0].buffer("field").unwrap();
    let bytes = preview::png_bytes(buffer, 1, &PreviewOptions::default()).unwrap();
    assert_eq!(bytes, std::fs::read(out.join("com/field.1.png")).unwrap());
    let err = preview::png_bytes(buffer, 2, &PreviewOptions::default()).unwrap_err().to_string();
    assert!(err.contains("'field' has 2 images"), "{err}");
    let regression = results.udfs[0].buffer("regression").unwrap();
    let err = preview::png_bytes(regression, 0, &PreviewOptions::default()).unwrap_err().to_string();
    assert!(err.contains("'regression'") && err.contains("not an image"), "{err}");
}

#[test]
fn the_report_page_inlines_every_preview_and_escapes_what_plugins_get() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in<i>.npy");
    cli(&["generate", &s(&input), "--nav-shape", "6,6", "--sig-shape", "8,8", "--dtype", "uint16"]).unwrap();
    let label = "<script>alert(\"x\")</script>&'";
    let out = run_with_previews(
        dir.path(),
        &[&s(&plugin("probe_slow")), &s(&plugin("sum"))],
        &input,
        &["--param", &format!("label={label}")],
    );
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    assert!(!html.contains("<script") && !html.contains("<i>"), "plugin and file text is escaped");
    assert!(html.contains("&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;"));
    assert!(html.contains("in&lt;i&gt;.npy"));
    assert!(!html.contains("http://") && !html.contains("https://"), "the page refers to nothing outside");
    // Every preview of results.json is inlined, byte for byte.
    let summary = read_json(&out.join("results.json"));
    let mut files = Vec::new();
    for u in summary["udfs"].as_array().unwrap() {
        for b in u["buffers"].as_array().unwrap() {
            files.extend(b["previews"].as_array().unwrap().iter().map(|p| p["file"].as_str().unwrap().to_owned()));
        }
    }
    assert_eq!(files, ["slow/intensity.png", "sum/intensity.png"]);
    let inlined: Vec<Vec<u8>> = html
        .split("src=\"data:image/png;base64,")
        .skip(1)
        .map(|rest| {
            use base64::Engine;
            base64::engine::general_purpose::STANDARD.decode(&rest[..rest.find('"').unwrap()]).unwrap()
        })
        .collect();
    let written: Vec<Vec<u8>> = files.iter().map(|f| std::fs::read(out.join(f)).unwrap()).collect();
    assert_eq!(inlined, written);
    assert!(html.contains("status-complete") && html.contains("sig buffer, shape 8 × 8, float32, valid 100.0 %"));

    // Without --preview the page is there, without images, and says how to get them.
    let plain = dir.path().join("plain");
    cli(&["run", &s(&plugin("sum")), &s(&input), "--out", &s(&plain)]).unwrap();
    let html = std::fs::read_to_string(plain.join("index.html")).unwrap();
    assert!(!html.contains("<img") && html.contains("run with --preview"));
    assert!(!plain.join("sum/intensity.png").exists());
}

#[test]
fn snapshot_every_must_be_a_positive_number_of_seconds() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.npy");
    write_npy_f32(&input, &[2, 2], &[2, 2], &[1.0; 16]);
    for bad in ["0", "-1", "soon", "NaN"] {
        let out = dir.path().join("out");
        let (code, msg) =
            cli(&["run", &s(&plugin("sum")), &s(&input), "--out", &s(&out), "--snapshot-every", bad]).unwrap_err();
        assert_eq!(code, exit::USER_ERROR, "{bad}: {msg}");
        assert!(msg.contains("positive number of seconds"), "{bad}: {msg}");
        assert!(!out.exists());
    }
}
