//! Throughput of the reference plugins `stddev`, `masks` and `pick` against `sum` (the
//! cheapest useful reduction) and a host memcpy, on one float32 dataset, single-threaded.
//!
//! `cargo bench -p udf-host-tests --bench plugins` — prints a Markdown table.

use std::sync::Arc;
use std::time::Instant;
use udf_host::array::NdArray;
use udf_host::dataset::OpenOptions;
use udf_host::exec::RunOptions;
use udf_host::roi::Roi;
use udf_host::udf::{ParamValue, Params};
use udf_host_tests::{fixtures, load, params, run_on};

const FRAMES: usize = 2048;
const SIG: [usize; 2] = [128, 128];
const PX: usize = SIG[0] * SIG[1];

fn masks_param(count: usize, sparse: bool) -> ParamValue {
    let values: Vec<f32> = (0..count * PX)
        .map(|i| {
            let (m, p) = (i / PX, i % PX);
            let (y, x) = ((p / SIG[1]) as f32 - 64.0, (p % SIG[1]) as f32 - 64.0);
            if sparse {
                // Rings of width 2: about 3 % of the pixels.
                let r = (y * y + x * x).sqrt();
                f32::from(u8::from((r - 8.0 * (m + 1) as f32).abs() < 1.0))
            } else {
                1.0 / (1.0 + (m as f32) + (y * y + x * x).sqrt())
            }
        })
        .collect();
    ParamValue::Array(Arc::new(NdArray::from_vec(&[count, SIG[0], SIG[1]], values).expect("mask shape")))
}

fn main() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.npy");
    let data = fixtures::mk_uniform(&[FRAMES], &SIG, 1);
    let values: Vec<f32> = data.values.iter().map(|&v| v as f32).collect();
    drop(data);
    fixtures::write_npy_f32(&path, &[FRAMES], &SIG, &values);
    let bytes = (values.len() * 4) as f64;

    // Host memcpy of the same amount, for scale.
    let mut copy = vec![0f32; values.len()];
    let started = Instant::now();
    for _ in 0..4 {
        copy.copy_from_slice(std::hint::black_box(&values));
    }
    let memcpy = 4.0 * bytes / started.elapsed().as_secs_f64() / 1e9;
    std::hint::black_box(&copy);
    drop((values, copy));

    let mut pick_roi = vec![false; FRAMES];
    for i in (0..FRAMES).step_by(32) {
        pick_roi[i] = true;
    }
    let text = |v: &str| ParamValue::Text(v.into());
    let cases: Vec<(&str, &str, Params, Option<Vec<bool>>)> = vec![
        ("sum", "sum", Params::default(), None),
        ("stddev (float64 base)", "stddev", Params::default(), None),
        ("stddev (float32 base)", "stddev", params(&[("dtype", text("float32"))]), None),
        ("masks, 1 dense", "masks", params(&[("masks", masks_param(1, false)), ("use_sparse", text("false"))]), None),
        ("masks, 4 dense", "masks", params(&[("masks", masks_param(4, false)), ("use_sparse", text("false"))]), None),
        ("masks, 16 dense", "masks", params(&[("masks", masks_param(16, false)), ("use_sparse", text("false"))]), None),
        (
            "masks, 4 rings sparse",
            "masks",
            params(&[("masks", masks_param(4, true)), ("use_sparse", text("true"))]),
            None,
        ),
        (
            "masks, 4 rings dense",
            "masks",
            params(&[("masks", masks_param(4, true)), ("use_sparse", text("false"))]),
            None,
        ),
        ("pick, every 32nd frame (ROI)", "pick", Params::default(), Some(pick_roi.clone())),
        ("sum, every 32nd frame (ROI)", "sum", Params::default(), Some(pick_roi)),
    ];
    println!(
        "{FRAMES} frames of {SIG:?} float32 ({:.0} MiB), 1 thread; host memcpy {memcpy:.1} GB/s",
        bytes / 1048576.0
    );
    println!();
    println!("| plugin | GB/s (stored data read / process time) | vs sum |");
    println!("|---|---|---|");
    let mut sum_gbps = None;
    for (name, plugin, p, roi) in cases {
        let udf = load(plugin);
        let options = RunOptions { threads: Some(1), roi: roi.map(Roi::from_mask), ..RunOptions::default() };
        // Once to warm the page cache and compile cache, once measured.
        let _ = run_on(&path, &OpenOptions::default(), vec![(udf.clone(), p.clone())], options.clone());
        let results = run_on(&path, &OpenOptions::default(), vec![(udf, p)], options).expect("run");
        let gbps = results.stats.throughput_gbps();
        let base = *sum_gbps.get_or_insert(gbps);
        println!("| {name} | {gbps:.2} | {:.2} |", gbps / base);
    }
}
