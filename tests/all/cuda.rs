//! The CUDA built-ins (docs/gpu.md): `--device`, the plan's per-UDF device, the NVRTC
//! compile of every kernel (no GPU needed) and the CPU/GPU agreement tests.
//!
//! Without a usable GPU the agreement tests print why and pass without checking
//! anything; their `#[ignore]`d twins (`cargo test -- --ignored cuda::`, run by
//! scripts/gpu/run.sh on a GPU machine) fail loudly instead.

use crate::cli::{cli, s};
use std::path::Path;
use std::sync::Arc;
use udf_host::cuda::{self, Device};
use udf_host::dataset::OpenOptions;
use udf_host::exec::{Plan, Run, RunError, RunOptions, RunResults, UdfSpec};
use udf_host::udf::{DeviceClass, ParamValue, Params, Udf};
use udf_host_tests::fixtures::{self, Data, Ty};
use udf_host_tests::reference::{assert_close, sum_frames, sum_sig, to_f64};
use udf_host_tests::{load, params, run_on};

fn builtin(name: &str) -> Arc<dyn Udf> {
    udf_host::builtins::get(name).unwrap_or_else(|| panic!("no built-in {name}"))
}

fn float(v: f64) -> ParamValue {
    ParamValue::Float(v)
}

/// Every built-in with a kernel, with parameters that make the masks interesting on
/// frames of `sig` (masks: 3 random masks; 40 for the many-masks path).
fn kernel_builtins(sig: &[usize], many_masks: bool) -> Vec<(Arc<dyn Udf>, Params)> {
    let frame_len: usize = sig.iter().product();
    let count = if many_masks { 40 } else { 3 };
    let values: Vec<f32> = (0..count * frame_len).map(|i| ((i * 7919) % 13) as f32 / 4.0 - 1.0).collect();
    let mut shape = vec![count];
    shape.extend_from_slice(sig);
    let masks = udf_host::array::NdArray::from_vec(&shape, values).unwrap();
    let (cy, cx) = (sig[0] as f64 / 2.0 - 0.5, sig[1] as f64 / 2.0 + 0.25);
    vec![
        (builtin("sum"), Params::default()),
        (builtin("sumsig"), Params::default()),
        (builtin("stddev"), Params::default()),
        (builtin("masks"), params(&[("masks", ParamValue::Array(Arc::new(masks)))])),
        (builtin("disk"), params(&[("cy", float(cy)), ("cx", float(cx)), ("r", float(4.5))])),
        (builtin("ring"), params(&[("cy", float(cy)), ("cx", float(cx)), ("ri", float(2.0)), ("ro", float(6.0))])),
        (builtin("point"), params(&[("cy", float(3.7)), ("cx", float(5.2))])),
        (builtin("com"), params(&[("r", float(5.0)), ("ri", float(1.0))])),
    ]
}

/// Whether a GPU is usable here: `Ok` or, without one, why (the test then only says so,
/// unless `expect_gpu`, when it fails).
fn gpu_or_skip(test: &str, expect_gpu: bool) -> bool {
    match cuda::available() {
        Ok(info) => {
            eprintln!("{test}: on {} (compute capability {:?})", info.name, info.compute_capability);
            true
        }
        Err(why) if expect_gpu => panic!("{test}: a GPU was expected here, but {why}"),
        Err(why) => {
            eprintln!("{test}: SKIPPED, no usable GPU: {why} (the --ignored twin fails instead)");
            false
        }
    }
}

/// Every buffer of every UDF of `gpu` equals `cpu`'s: float32 to rtol 1e-5 (float64
/// too), integers exactly, with the same names, dtypes and shapes.
fn assert_agree(gpu: &RunResults, cpu: &RunResults, what: &str) {
    assert_eq!(gpu.udfs.len(), cpu.udfs.len(), "{what}");
    for (g, c) in gpu.udfs.iter().zip(&cpu.udfs) {
        assert_eq!(g.name, c.name, "{what}");
        assert_eq!(g.buffers.len(), c.buffers.len(), "{what}: {}", g.name);
        for (gb, cb) in g.buffers.iter().zip(&c.buffers) {
            let at = format!("{what}: {}/{}", g.name, gb.name);
            assert_eq!(gb.name, cb.name, "{at}");
            assert_eq!(gb.dtype(), cb.dtype(), "{at}: dtype");
            assert_eq!(gb.data.shape(), cb.data.shape(), "{at}: shape");
            let (gv, cv) = (to_f64(&gb.data), to_f64(&cb.data));
            if gb.dtype().kind() == udf_host::dtype::Kind::Float {
                assert_close(&gv, &cv, 1e-5, &at);
            } else {
                assert_eq!(gv, cv, "{at}: integers exactly");
            }
        }
    }
}

/// Scaled so that uint16 keeps distinct values, with NaN-free fractions in float32.
fn dataset(nav: &[usize], sig: &[usize], seed: u64) -> Data {
    let mut data = fixtures::mk_uniform(nav, sig, seed);
    data.values.iter_mut().for_each(|v| *v = (*v * 1000.0).floor() + 0.25);
    data
}

fn run_both(
    path: &Path,
    udfs: &[(Arc<dyn Udf>, Params)],
    options: &RunOptions,
    what: &str,
) -> (RunResults, RunResults, Plan) {
    let opened = udf_host::dataset::DatasetSpec::file(path, OpenOptions::default()).open().unwrap();
    let specs: Vec<UdfSpec> =
        udfs.iter().map(|(udf, params)| UdfSpec { udf: udf.clone(), params: params.clone() }).collect();
    let run = Run::plan(opened, specs, RunOptions { device: Device::Cuda, ..options.clone() })
        .unwrap_or_else(|e| panic!("{what}: planning on the GPU: {e}"));
    let plan = run.as_plan().clone();
    let gpu = run.execute().unwrap_or_else(|e| panic!("{what}: on the GPU: {e}"));
    let cpu = run_on(path, &OpenOptions::default(), udfs.to_vec(), options.clone())
        .unwrap_or_else(|e| panic!("{what}: on the CPU: {e}"));
    (gpu, cpu, plan)
}

/// All kernels in one run (one shared upload per tile) with a wasm plugin beside them
/// (fed on the CPU in the same pass): float32 and uint16, odd frame shapes, several
/// partitions and tilings, with and without a ROI, one and many masks.
fn every_kernel_agrees_with_its_cpu_builtin(expect_gpu: bool) {
    let test = "every_kernel_agrees_with_its_cpu_builtin";
    if !gpu_or_skip(test, expect_gpu) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([9, 7], [19, 23]);
    let data = dataset(&nav, &sig, 17);
    let roi = fixtures::random_roi(63, 0.6, 3);
    for ty in [Ty::F32, Ty::U16] {
        let path = dir.path().join(format!("data-{ty:?}.npy"));
        fixtures::write_npy(&path, &data, ty);
        let stored = data.rounded(ty);
        for many_masks in [false, true] {
            let mut udfs = kernel_builtins(&sig, many_masks);
            udfs.push((load("sum"), Params::default()));
            for (partitions, tile) in [(1, None), (3, None), (4, Some(vec![5, 19, 23])), (2, Some(vec![3, 7, 23]))] {
                for with_roi in [false, true] {
                    let what =
                        format!("{ty:?} many_masks={many_masks} partitions={partitions} tile={tile:?} roi={with_roi}");
                    let roi = with_roi.then(|| udf_host::roi::Roi::from_mask(roi.clone()));
                    let options = RunOptions {
                        partitions: Some(partitions),
                        tile_shape: tile.clone(),
                        roi,
                        ..Default::default()
                    };
                    let (gpu, cpu, plan) = run_both(&path, &udfs, &options, &what);
                    for u in &plan.udfs {
                        let expected = if u.name == "sum-2" { DeviceClass::Cpu } else { DeviceClass::Cuda };
                        assert_eq!(
                            u.device, expected,
                            "{what}: {} ran on {:?} ({:?})",
                            u.name, u.device, u.device_note
                        );
                    }
                    assert_agree(&gpu, &cpu, &what);
                    if !with_roi {
                        let sum = gpu.udfs[0].buffer("intensity").unwrap();
                        assert_close(
                            &to_f64(&sum.data),
                            &sum_frames(&stored, None),
                            1e-5,
                            &format!("{what}: sum vs reference"),
                        );
                        let sumsig = gpu.udfs[1].buffer("intensity").unwrap();
                        assert_close(
                            &to_f64(&sumsig.data),
                            &sum_sig(&stored),
                            1e-5,
                            &format!("{what}: sumsig vs reference"),
                        );
                        let wasm = gpu.udfs.last().unwrap().buffer("intensity").unwrap();
                        assert_close(
                            &to_f64(&wasm.data),
                            &to_f64(&sum.data),
                            1e-5,
                            &format!("{what}: wasm sum beside"),
                        );
                    }
                }
            }
        }
    }
}

#[test]
fn every_kernel_agrees_with_its_cpu_builtin_where_there_is_a_gpu() {
    every_kernel_agrees_with_its_cpu_builtin(false);
}

#[test]
#[ignore = "needs a GPU: run with --ignored on a GPU machine (scripts/gpu/run.sh)"]
fn every_kernel_agrees_with_its_cpu_builtin_on_the_gpu() {
    every_kernel_agrees_with_its_cpu_builtin(true);
}

/// `masks` at every width the GPU treats differently: 1, 4, 16 and 32 masks (the one-pass
/// kernels of 1/4/16/32 masks per pass), 33 and 128 (float32: cuBLAS SGEMM where
/// `libcublas` loads, else passes of 32), on frames of several blocks of pixels.
fn masks_agree_at_every_width(expect_gpu: bool) {
    let test = "masks_agree_at_every_width";
    if !gpu_or_skip(test, expect_gpu) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([10, 13], [48, 67]);
    let data = dataset(&nav, &sig, 23);
    let roi = fixtures::random_roi(130, 0.5, 9);
    let frame_len: usize = sig.iter().product();
    for ty in [Ty::F32, Ty::U16] {
        let path = dir.path().join(format!("masks-{ty:?}.npy"));
        fixtures::write_npy(&path, &data, ty);
        for count in [1, 4, 16, 32, 33, 128] {
            let values: Vec<f32> =
                (0..count * frame_len).map(|i| ((i * 2_654_435_761usize) % 17) as f32 / 8.0 - 0.5).collect();
            let masks = udf_host::array::NdArray::from_vec(&[count, sig[0], sig[1]], values).unwrap();
            let udfs = vec![(builtin("masks"), params(&[("masks", ParamValue::Array(Arc::new(masks)))]))];
            for (partitions, with_roi) in [(3, false), (2, true)] {
                let what = format!("{ty:?} {count} masks partitions={partitions} roi={with_roi}");
                let options = RunOptions {
                    partitions: Some(partitions),
                    roi: with_roi.then(|| udf_host::roi::Roi::from_mask(roi.clone())),
                    ..Default::default()
                };
                let (gpu, cpu, plan) = run_both(&path, &udfs, &options, &what);
                assert_eq!(plan.udfs[0].device, DeviceClass::Cuda, "{what}: {:?}", plan.udfs[0].device_note);
                assert_agree(&gpu, &cpu, &what);
            }
        }
    }
}

#[test]
fn masks_agree_at_every_width_where_there_is_a_gpu() {
    masks_agree_at_every_width(false);
}

#[test]
#[ignore = "needs a GPU: run with --ignored on a GPU machine (scripts/gpu/run.sh)"]
fn masks_agree_at_every_width_on_the_gpu() {
    masks_agree_at_every_width(true);
}

/// Large odd frames (131 × 257: many blocks of pixels per frame, more than one chunk per
/// lane) through every kernel, float32 and uint16, compared with the CPU built-ins.
fn large_odd_frames_agree(expect_gpu: bool) {
    let test = "large_odd_frames_agree";
    if !gpu_or_skip(test, expect_gpu) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let (nav, sig) = ([12, 11], [131, 257]);
    let data = dataset(&nav, &sig, 31);
    for ty in [Ty::F32, Ty::U16] {
        let path = dir.path().join(format!("large-{ty:?}.npy"));
        fixtures::write_npy(&path, &data, ty);
        let udfs = kernel_builtins(&sig, false);
        // One partition: a float32 tile of 17.8 MB read in place is two chunks of a 16 MiB lane.
        for (partitions, tile) in [(1, None), (2, None), (3, Some(vec![4, 131, 257]))] {
            let what = format!("{ty:?} {sig:?} partitions={partitions} tile={tile:?}");
            let options = RunOptions { partitions: Some(partitions), tile_shape: tile, ..Default::default() };
            let (gpu, cpu, _) = run_both(&path, &udfs, &options, &what);
            assert_agree(&gpu, &cpu, &what);
            let sum = gpu.udfs[0].buffer("intensity").unwrap();
            assert_close(&to_f64(&sum.data), &sum_frames(&data.rounded(ty), None), 1e-5, &format!("{what}: sum"));
        }
    }
}

#[test]
fn large_odd_frames_agree_where_there_is_a_gpu() {
    large_odd_frames_agree(false);
}

#[test]
#[ignore = "needs a GPU: run with --ignored on a GPU machine (scripts/gpu/run.sh)"]
fn large_odd_frames_agree_on_the_gpu() {
    large_odd_frames_agree(true);
}

/// A plan made here with the GPU runs its GPU built-ins in another worker from its JSON.
fn a_shipped_plan_keeps_its_devices(expect_gpu: bool) {
    if !gpu_or_skip("a_shipped_plan_keeps_its_devices", expect_gpu) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(&[4, 6], &[16, 16], 5);
    let path = dir.path().join("data.npy");
    fixtures::write_npy(&path, &data, Ty::U16);
    let udfs = vec![(builtin("sum"), Params::default()), (builtin("pick"), Params::default())];
    // One thread: `auto` estimates the GPU faster for `sum` (crate::cuda::auto).
    let options = RunOptions { partitions: Some(3), device: Device::Auto, threads: Some(1), ..Default::default() };
    let (gpu, cpu, plan) = run_both(&path, &udfs, &options, "shipped");
    let back = Plan::from_json(&plan.to_json()).unwrap();
    assert_eq!(back.udfs[0].device, DeviceClass::Cuda);
    assert_eq!(back.udfs[1].device, DeviceClass::Cpu);
    assert!(back.udfs[1].device_note.as_deref().is_some_and(|n| n.contains("no CUDA kernel")), "{:?}", back.udfs[1]);
    assert_agree(&gpu, &cpu, "shipped");

    // 16 threads (uint16): `auto` keeps `sum` on the CPU and says why; `stddev` goes to the GPU.
    let opened = udf_host::dataset::DatasetSpec::file(&path, OpenOptions::default()).open().unwrap();
    let specs = ["sum", "stddev"].map(|name| UdfSpec { udf: builtin(name), params: Params::default() });
    let many = RunOptions { device: Device::Auto, threads: Some(16), ..Default::default() };
    let run = Run::plan(opened, specs.to_vec(), many).unwrap();
    let planned = &run.as_plan().udfs;
    assert_eq!(planned[0].device, DeviceClass::Cpu, "{:?}", planned[0]);
    assert!(planned[0].device_note.as_deref().is_some_and(|n| n.contains("16 CPU threads")), "{:?}", planned[0]);
    assert_eq!(planned[1].device, DeviceClass::Cuda, "{:?}", planned[1]);
    run.execute().unwrap();
}

#[test]
fn a_shipped_plan_keeps_its_devices_where_there_is_a_gpu() {
    a_shipped_plan_keeps_its_devices(false);
}

#[test]
#[ignore = "needs a GPU: run with --ignored on a GPU machine (scripts/gpu/run.sh)"]
fn a_shipped_plan_keeps_its_devices_on_the_gpu() {
    a_shipped_plan_keeps_its_devices(true);
}

#[test]
fn device_cuda_without_a_usable_gpu_is_a_clear_error_and_auto_falls_back() {
    let Err(why) = cuda::available() else {
        eprintln!("device_cuda_without_a_usable_gpu...: SKIPPED, this machine has a usable GPU");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(&[3, 4], &[8, 8], 2);
    let path = dir.path().join("data.npy");
    fixtures::write_npy(&path, &data, Ty::F32);
    let udfs = vec![(builtin("sum"), Params::default())];
    let cuda_options = RunOptions { device: Device::Cuda, ..Default::default() };
    let e = run_on(&path, &OpenOptions::default(), udfs.clone(), cuda_options).unwrap_err();
    assert!(matches!(e, RunError::Invalid(_)) && e.is_user_error(), "{e:?}");
    assert!(e.to_string().contains("CUDA") && e.to_string().contains(&why.to_string()), "{e}");

    let auto = RunOptions { device: Device::Auto, ..Default::default() };
    let opened = udf_host::dataset::DatasetSpec::file(&path, OpenOptions::default()).open().unwrap();
    let run = Run::plan(opened, vec![UdfSpec { udf: builtin("sum"), params: Params::default() }], auto).unwrap();
    let planned = &run.as_plan().udfs[0];
    assert_eq!(planned.device, DeviceClass::Cpu);
    assert!(planned.device_note.as_deref().is_some_and(|n| n.starts_with("no usable GPU")), "{planned:?}");
    let results = run.execute().unwrap();
    let sum = results.udfs[0].buffer("intensity").unwrap();
    assert_close(&to_f64(&sum.data), &sum_frames(&data.rounded(Ty::F32), None), 1e-5, "auto on the CPU");

    // The command line: exit 1 with the reason; auto says where each UDF ran.
    let out = dir.path().join("out");
    let (code, message) = cli(&["run", "builtin:sum", &s(&path), "--out", &s(&out), "--device", "cuda"]).unwrap_err();
    assert_eq!(code, udf_host::cli::exit::USER_ERROR, "{message}");
    assert!(message.contains("CUDA"), "{message}");
    assert!(!out.exists(), "nothing written");
    cli(&["run", "builtin:sum", "builtin:pick", &s(&path), "--out", &s(&out), "--device", "auto"]).unwrap();
    let summary: serde_json::Value = serde_json::from_slice(&std::fs::read(out.join("results.json")).unwrap()).unwrap();
    let device = &summary["device"];
    assert_eq!(device["requested"], "auto", "{device}");
    assert_eq!(device["udfs"]["sum"]["device"], "cpu", "{device}");
    assert!(device["udfs"]["sum"]["cpu_because"].as_str().is_some_and(|w| w.contains("no usable GPU")), "{device}");
    let (code, message) = cli(&["run", "builtin:sum", &s(&path), "--out", &s(&out), "--device", "tpu"]).unwrap_err();
    assert_eq!(code, udf_host::cli::exit::USER_ERROR, "{message}");
    assert!(message.contains("cpu, cuda or auto"), "{message}");
}

#[test]
fn device_cpu_is_the_default_and_the_plan_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let data = dataset(&[2, 3], &[4, 5], 1);
    let path = dir.path().join("data.npy");
    fixtures::write_npy(&path, &data, Ty::U16);
    let opened = udf_host::dataset::DatasetSpec::file(&path, OpenOptions::default()).open().unwrap();
    let run = Run::plan(opened, vec![UdfSpec { udf: builtin("sum"), params: Params::default() }], Default::default())
        .unwrap();
    let plan = Plan::from_json(&run.as_plan().to_json()).unwrap();
    assert_eq!(plan.udfs[0].device, DeviceClass::Cpu);
    assert_eq!(plan.udfs[0].device_note, None);
}

/// Every kernel compiles with NVRTC to PTX (no GPU needed: the NVRTC library alone,
/// e.g. from the `nvidia-cuda-nvrtc-cu12` wheel on `LD_LIBRARY_PATH`). Skipped where
/// NVRTC cannot be loaded, unless `UDF_HOST_REQUIRE_NVRTC=1` (CI), which makes that a
/// failure; so is a build without the `cuda` feature then.
#[test]
fn every_kernel_compiles_with_nvrtc() {
    let required = std::env::var_os("UDF_HOST_REQUIRE_NVRTC").is_some_and(|v| v == "1");
    #[cfg(any(feature = "cuda", feature = "cuda13"))]
    {
        if !cuda::nvrtc::library_present() {
            assert!(!required, "UDF_HOST_REQUIRE_NVRTC=1, but the NVRTC library cannot be loaded (LD_LIBRARY_PATH?)");
            eprintln!("every_kernel_compiles_with_nvrtc: SKIPPED, the NVRTC library cannot be loaded");
            return;
        }
        let version = cuda::nvrtc::version().unwrap();
        for arch in ["compute_75", "compute_80", "compute_90"] {
            let bytes = cuda::compile_all(arch).unwrap_or_else(|e| panic!("NVRTC {version:?}, {arch}: {e}"));
            eprintln!("every_kernel_compiles_with_nvrtc: NVRTC {version:?}, {arch}: {bytes} bytes of PTX");
            assert!(bytes > 10_000, "{arch}: {bytes} bytes");
        }
        // Every entry point the host launches is in the PTX.
        let ptx = cuda::nvrtc::compile(
            &format!("{}\n{}", cuda::KERNEL_SOURCE, cuda::instantiations(&cuda::all_pairs()).unwrap()),
            cuda::nvrtc::Target::Ptx("compute_80".into()),
        )
        .unwrap();
        let ptx = String::from_utf8_lossy(&ptx);
        for kernel in cuda::KERNEL_NAMES {
            for (tile, float) in cuda::all_pairs() {
                let name = cuda::entry_point(kernel, tile, float).unwrap();
                assert!(ptx.contains(&format!(".entry {name}(")), "{name} is not in the PTX");
            }
        }
        // The device's own architecture as machine code (what a run on an H100 uses).
        if cuda::nvrtc::supported_archs().unwrap().contains(&90) {
            let cubin = cuda::nvrtc::compile(
                &format!(
                    "{}\n{}",
                    cuda::KERNEL_SOURCE,
                    cuda::instantiations(&[(udf_host::dtype::DType::U16, udf_host::dtype::DType::F32)]).unwrap()
                ),
                cuda::nvrtc::Target::Cubin("sm_90".into()),
            )
            .unwrap();
            assert!(cubin.starts_with(b"\x7fELF"), "CUBIN is an ELF image");
        }
    }
    #[cfg(not(any(feature = "cuda", feature = "cuda13")))]
    {
        assert!(!required, "UDF_HOST_REQUIRE_NVRTC=1, but this test binary was built without the cuda feature");
        eprintln!("every_kernel_compiles_with_nvrtc: SKIPPED, built without the cuda feature");
    }
}
