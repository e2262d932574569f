//! Reading speed per detector format: `Dataset::read_tile` over a ≥ 1 GiB file of each
//! format, in the tile shape negotiated for a tile UDF with default preferences (float32
//! input), one thread, page cache warm; next to a memcpy of the same bytes out of the
//! same (mapped, cached) file.
//!
//! `cargo bench -p udf-host-tests --bench formats` — files go to `$UDF_BENCH_DIR` (default:
//! a temporary directory) and are deleted after each format; `UDF_BENCH_GIB` sets the
//! file size (default 1). Results: docs/benchmarks.md.
//!
//! A second table ([`stored`]) covers the formats whose files are slow to write and are
//! kept between runs in `$UDF_BENCH_DIR` (default `/tmp/udf-bench-formats`, ~6 GiB):
//! HDF5 (contiguous, gzip, bitshuffle-LZ4; written by `tests/benches/formats_hdf5.py` with
//! `$UDF_BENCH_PYTHON`, default `python3`, needing h5py and hdf5plugin, else skipped),
//! raw CSR, DM4 and K2IS.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::Instant;
use udf_host::dataset::{
    self, Dataset, ExcludedPixels, Format, OpenOptions, TileRequest, TilingScheme, negotiate, plan_partitions,
};
use udf_host::dtype::{DType, StoredDType, result_type};
use udf_host::udf::{Method, TileDepth, TileSize};
use udf_host_tests::fixture_formats::mib::{self, MibKind, MibSet, counts};
use udf_host_tests::fixture_formats::{blo, empad, mrc, seq, tvips};
use udf_host_tests::fixtures::{Data, Ty, write_npy};

/// A base file of `frames` frames, of which the frame region is repeated.
struct Base {
    path: PathBuf,
    frames: usize,
    /// Bytes from one frame to the next in the file (with headers/footers).
    stride: usize,
}

/// Grow `base` to at least `target` bytes by repeating its frame region; `patch` fixes
/// header counts for the new frame total. Returns the total frames.
fn grow(base: &Base, target: u64, patch: &dyn Fn(&mut [u8], usize)) -> usize {
    let bytes = std::fs::read(&base.path).expect("read base");
    let prefix = bytes.len() - base.frames * base.stride;
    let region = &bytes[prefix..];
    let copies = (target as usize).div_ceil(region.len()).max(1);
    let total = copies * base.frames;
    let mut head = bytes[..prefix].to_vec();
    patch(&mut head, total);
    let mut file = std::io::BufWriter::with_capacity(1 << 22, std::fs::File::create(&base.path).expect("create"));
    file.write_all(&head).expect("write");
    for _ in 0..copies {
        file.write_all(region).expect("write");
    }
    file.flush().expect("flush");
    total
}

struct Case {
    name: &'static str,
    variant: String,
    path: PathBuf,
    options: OpenOptions,
    /// The data files (the first is `path`).
    files: Vec<PathBuf>,
    /// Other files to delete afterwards (corrections).
    extra: Vec<PathBuf>,
}

fn make_cases(dir: &Path, target: u64) -> Vec<Box<dyn Fn() -> Case>> {
    let dir = dir.to_owned();
    let mut cases: Vec<Box<dyn Fn() -> Case>> = Vec::new();
    let d = dir.clone();
    cases.push(Box::new(move || {
        let data = counts(&[64], &[256, 256], 4095, 1);
        let path = d.join("raw.raw");
        udf_host_tests::fixtures::write_raw(&path, &data, Ty::U16, false, 0);
        let frames = grow(&Base { path: path.clone(), frames: 64, stride: 256 * 256 * 2 }, target, &|_, _| {});
        let options = OpenOptions {
            format: Some(Format::Raw),
            dtype: Some(StoredDType::le(DType::U16)),
            sig_shape: Some(vec![256, 256]),
            nav_shape: Some(vec![frames]),
            ..Default::default()
        };
        Case {
            name: "raw",
            variant: "uint16 256x256 (baseline)".into(),
            files: vec![path.clone()],
            extra: vec![],
            path,
            options,
        }
    }));
    for (kind, quad, variant) in [
        (MibKind::U16, false, "U16 256x256"),
        (MibKind::R1, false, "R64 1-bit 256x256"),
        (MibKind::R12, true, "R64 12-bit quad 512x512"),
        (MibKind::U16, false, "U16 256x256 + dark, gain, 16 excluded px"),
    ] {
        let d = dir.clone();
        cases.push(Box::new(move || {
            let side = if quad { 512 } else { 256 };
            let data = counts(&[16], &[side, side], kind.max(), 2);
            let set = MibSet { quad, ..MibSet::new(kind) };
            let path = mib::write_mib(&d, "bench", &data, set).remove(0);
            let stride = std::fs::metadata(&path).expect("size").len() as usize / 16;
            grow(&Base { path: path.clone(), frames: 16, stride }, target, &|_, _| {});
            let mut options = OpenOptions::default();
            let mut extra = Vec::new();
            if variant.contains("dark") {
                let map = Data { nav: vec![], ..counts(&[], &[side, side], 3, 5) };
                let (dark, gain) = (d.join("dark.npy"), d.join("gain.npy"));
                write_npy(&dark, &map, Ty::F32);
                write_npy(&gain, &map, Ty::F32);
                options.dark = Some(dark.clone());
                options.gain = Some(gain.clone());
                options.excluded_pixels =
                    Some(ExcludedPixels::Coordinates((0..16).map(|i| vec![i * 15, (i * 37) % side]).collect()));
                extra.extend([dark, gain]);
            }
            Case { name: "mib", variant: variant.into(), files: vec![path.clone()], path, options, extra }
        }));
    }
    let d = dir.clone();
    cases.push(Box::new(move || {
        let data = counts(&[16], &[128, 128], 1000, 3).rounded(Ty::F32);
        let path = empad::write_raw(&d, "bench", &data, 0.0);
        grow(&Base { path: path.clone(), frames: 16, stride: 130 * 128 * 4 }, target, &|_, _| {});
        let options = OpenOptions { format: Some(Format::Empad), ..Default::default() };
        Case {
            name: "empad",
            variant: "float32 128x128 + footer".into(),
            files: vec![path.clone()],
            extra: vec![],
            path,
            options,
        }
    }));
    let d = dir.clone();
    cases.push(Box::new(move || {
        let data = counts(&[1, 16], &[256, 256], 255, 4);
        let path = d.join("bench.blo");
        blo::write_blo(&path, &data, 8);
        let base = Base { path: path.clone(), frames: 16, stride: 6 + 256 * 256 };
        grow(&base, target, &|head, total| head[26..28].copy_from_slice(&((total / 16) as u16).to_le_bytes()));
        Case {
            name: "blo",
            variant: "uint8 256x256".into(),
            files: vec![path.clone()],
            extra: vec![],
            path,
            options: OpenOptions::default(),
        }
    }));
    let d = dir.clone();
    cases.push(Box::new(move || {
        let data = counts(&[16], &[256, 256], 65535, 5);
        let path = d.join("bench.seq");
        seq::write_seq(&path, &data, 16, 5, 8);
        grow(&Base { path: path.clone(), frames: 16, stride: 256 * 256 * 2 + 8 }, target, &|_, _| {});
        Case {
            name: "seq",
            variant: "uint16 256x256, v5".into(),
            files: vec![path.clone()],
            extra: vec![],
            path,
            options: OpenOptions::default(),
        }
    }));
    let d = dir.clone();
    cases.push(Box::new(move || {
        let data = counts(&[16], &[256, 256], 65535, 6);
        let path = d.join("bench.mrc");
        mrc::write_mrc(&path, &data, Ty::U16, 0, false);
        let base = Base { path: path.clone(), frames: 16, stride: 256 * 256 * 2 };
        grow(&base, target, &|head, total| head[8..12].copy_from_slice(&(total as i32).to_le_bytes()));
        Case {
            name: "mrc",
            variant: "uint16 256x256".into(),
            files: vec![path.clone()],
            extra: vec![],
            path,
            options: OpenOptions::default(),
        }
    }));
    let d = dir;
    cases.push(Box::new(move || {
        // Four files of a quarter each (version 1: no image counters to patch).
        let data = counts(&[16], &[256, 256], 65535, 7);
        let s = tvips::TvipsSeries {
            bits: 16,
            version: 1,
            image_header_bytes: 12,
            frames_per_file: 16,
            lead_in: 0,
            scan_width: 4,
        };
        let mut paths = Vec::new();
        let first = tvips::write_tvips(&d, "bench", &data, s).remove(0);
        let stride = 12 + 256 * 256 * 2;
        grow(&Base { path: first.clone(), frames: 16, stride }, target / 4, &|_, _| {});
        let body = std::fs::read(&first).expect("read")[256..].to_vec();
        for k in 1..4 {
            let p = d.join(format!("bench_{k:03}.tvips"));
            std::fs::write(&p, &body).expect("write");
            paths.push(p);
        }
        paths.insert(0, first.clone());
        Case {
            name: "tvips",
            variant: "uint16 256x256, 4 files".into(),
            files: paths,
            extra: vec![],
            path: first,
            options: OpenOptions::default(),
        }
    }));
    cases
}

/// The tiling a tile UDF with default preferences gets, as `info` reports it.
fn tiling(ds: &dyn Dataset) -> (TilingScheme, DType, Vec<std::ops::Range<u64>>) {
    let shape = ds.shape();
    let stored = ds.stored_dtype().dtype;
    let input = result_type(DType::F32, stored);
    let count = dataset::default_partition_count(shape.nav_len(), shape.sig_len(), 2);
    let parts = plan_partitions(shape.nav_len(), count, None);
    let request = TileRequest { method: Method::Tile, depth: TileDepth::Default, size: TileSize::BestFit };
    let scheme = negotiate(&[request], shape, &ds.base_shape(), parts[0].len(), input.size(), stored.size(), true);
    (scheme, input, parts.iter().map(|p| p.range.clone()).collect())
}

/// Seconds to read every tile of the dataset once.
fn read_all_tiles(ds: &dyn Dataset, scheme: &TilingScheme, input: DType, parts: &[std::ops::Range<u64>]) -> f64 {
    let mut buf = vec![0f64; (scheme.depth * scheme.slices[0].len() * input.size()).div_ceil(8)];
    let t = Instant::now();
    for part in parts {
        let frames: Vec<u64> = part.clone().collect();
        for chunk in frames.chunks(scheme.depth) {
            for slice in &scheme.slices {
                let n = chunk.len() * slice.len() * input.size();
                let out = &mut bytemuck::cast_slice_mut::<f64, u8>(&mut buf)[..n];
                ds.read_tile(chunk, slice, input, out).expect("read_tile");
            }
        }
    }
    t.elapsed().as_secs_f64()
}

/// Seconds to memcpy `path`'s bytes (mapped, cached) in 1 MiB pieces.
fn memcpy_file(path: &Path) -> (f64, u64) {
    let file = std::fs::File::open(path).expect("open");
    // SAFETY: read-only mapping of a file this benchmark wrote and nobody modifies.
    let map = unsafe { memmap2::Mmap::map(&file) }.expect("map");
    let mut dst = vec![0u8; 1 << 20];
    let mut best = f64::MAX;
    for _ in 0..2 {
        let t = Instant::now();
        for chunk in map.chunks(1 << 20) {
            dst[..chunk.len()].copy_from_slice(chunk);
            std::hint::black_box(&dst);
        }
        best = best.min(t.elapsed().as_secs_f64());
    }
    (best, map.len() as u64)
}

fn warm(paths: &[PathBuf]) {
    for p in paths {
        let mut f = std::fs::File::open(p).expect("open");
        let mut buf = vec![0u8; 1 << 22];
        while std::io::Read::read(&mut f, &mut buf).expect("read") > 0 {}
    }
}

fn main() {
    let gib: f64 = std::env::var("UDF_BENCH_GIB").ok().and_then(|v| v.parse().ok()).unwrap_or(1.0);
    let target = (gib * (1u64 << 30) as f64) as u64;
    let tmp = match std::env::var_os("UDF_BENCH_DIR") {
        Some(d) => tempfile::tempdir_in(d),
        None => tempfile::tempdir(),
    }
    .expect("bench dir");
    println!(
        "| format | variant | file GiB | frames | dtype → input | tile shape | read_tile GB/s (file bytes) | GB/s (input bytes out) | memcpy GB/s | read/memcpy |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for make in make_cases(tmp.path(), target) {
        let case = make();
        let ds = dataset::open(&case.path, &case.options).unwrap_or_else(|e| panic!("{}: {e}", case.name));
        warm(&case.files);
        let (scheme, input, parts) = tiling(ds.as_ref());
        let frames = ds.shape().nav_len();
        let input_bytes = (frames * ds.shape().sig_len() * input.size()) as f64;
        let file_bytes: u64 = case.files.iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum();
        // The first pass also maps the cached pages in; report the better of two.
        let t = read_all_tiles(ds.as_ref(), &scheme, input, &parts).min(read_all_tiles(
            ds.as_ref(),
            &scheme,
            input,
            &parts,
        ));
        let (mut copy_s, mut copy_bytes) = (0.0, 0);
        for p in &case.files {
            let (s, b) = memcpy_file(p);
            copy_s += s;
            copy_bytes += b;
        }
        let read_gbps = file_bytes as f64 / t / 1e9;
        let copy_gbps = copy_bytes as f64 / copy_s / 1e9;
        println!(
            "| {} | {} | {:.2} | {} | {} → {} | {:?} | {:.2} | {:.2} | {:.2} | {:.2} |",
            case.name,
            case.variant,
            file_bytes as f64 / (1u64 << 30) as f64,
            frames,
            ds.stored_dtype(),
            input,
            scheme.tile_shape(),
            read_gbps,
            input_bytes / t / 1e9,
            copy_gbps,
            read_gbps / copy_gbps
        );
        drop(ds);
        for p in case.files.iter().chain(&case.extra) {
            let _ = std::fs::remove_file(p);
        }
    }
    stored::main();
}

/// HDF5, raw CSR, DM4 and K2IS: files of at least 1 GiB kept between runs, every tile of
/// the negotiated tiling on one thread, next to `memcpy` of as many native bytes.
mod stored {
    use std::path::{Path, PathBuf};
    use std::time::Instant;
    use udf_host::dataset::{self, Dataset, OpenOptions, TileRequest, negotiate};
    use udf_host::dtype::DType;
    use udf_host::udf::{Method, TileDepth, TileSize};
    use udf_host_tests::fixture_formats::{dm, k2is, raw_csr};
    use udf_host_tests::fixtures::Ty;

    const GIB: usize = 1 << 30;

    fn bench_dir() -> PathBuf {
        let dir =
            std::env::var_os("UDF_BENCH_DIR").map_or_else(|| PathBuf::from("/tmp/udf-bench-formats"), PathBuf::from);
        std::fs::create_dir_all(&dir).expect("bench dir");
        dir
    }

    /// A cheap, reproducible pseudo-random sequence (splitmix64).
    fn mix(mut x: u64) -> u64 {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        x ^ (x >> 31)
    }

    /// DM4, 32768 frames of 128 x 128 uint16 (1 GiB), C order.
    fn make_dm(dir: &Path) -> PathBuf {
        let path = dir.join("bench.dm4");
        if !path.exists() {
            let dims = [128, 256, 128, 128];
            let tree = dm::streamed_image_tree(&dims, Ty::U16);
            let part = dir.join("bench.dm4.part");
            dm::write_streaming(&part, &tree, 4, false, &mut |w| {
                let mut row = vec![0u8; 128 * 128 * 2];
                for f in 0..128 * 256u64 {
                    for (i, px) in row.chunks_exact_mut(2).enumerate() {
                        px.copy_from_slice(&((mix(f * 16384 + i as u64) % 3) as u16).to_le_bytes());
                    }
                    w.write_all(&row).expect("write");
                }
            });
            std::fs::rename(&part, &path).expect("rename");
        }
        path
    }

    /// Raw CSR: 16384 frames of 256 x 256, ~8190 values per frame (uint32 data, int32
    /// indices, int64 row pointers: ~1 GiB of files).
    fn make_csr(dir: &Path) -> PathBuf {
        let toml = dir.join("bench-csr.toml");
        if !toml.exists() {
            use std::io::Write;
            let (frames, per_frame) = (16384usize, 8190usize);
            let mut indptr = std::io::BufWriter::new(std::fs::File::create(dir.join("bench-csr_indptr.raw")).unwrap());
            let mut indices =
                std::io::BufWriter::new(std::fs::File::create(dir.join("bench-csr_indices.raw")).unwrap());
            let mut data = std::io::BufWriter::new(std::fs::File::create(dir.join("bench-csr_data.raw")).unwrap());
            indptr.write_all(&0i64.to_le_bytes()).unwrap();
            for f in 0..frames {
                // Distinct sorted positions: one per 8-pixel stride, jittered.
                for k in 0..per_frame {
                    let p = k * 8 + (mix((f * per_frame + k) as u64) % 8) as usize;
                    indices.write_all(&(p as i32).to_le_bytes()).unwrap();
                    data.write_all(&(1 + (mix(p as u64 ^ f as u64) % 5) as u32).to_le_bytes()).unwrap();
                }
                indptr.write_all(&(((f + 1) * per_frame) as i64).to_le_bytes()).unwrap();
            }
            for w in [&mut indptr, &mut indices, &mut data] {
                w.flush().unwrap();
            }
            let layout = raw_csr::CsrLayout {
                indptr: raw_csr::Index::I64,
                indices: raw_csr::Index::I32,
                data: Ty::U32,
                big_endian_data: false,
            };
            std::fs::write(&toml, raw_csr::toml_text(&[128, 128], &[256, 256], &layout, "bench-csr")).unwrap();
        }
        toml
    }

    /// K2IS: 190 frames (1.06 GiB of sector files), a 10 x 19 scan.
    fn make_k2is(dir: &Path) -> PathBuf {
        let gtg = dir.join("bench-k2_.gtg");
        if !gtg.exists() {
            let o =
                k2is::K2Options { frames: 191, inactive: 1, skew: [0; 8], trailing: 0, scan: Some((10, 19)), seed: 1 };
            k2is::write(dir, "bench-k2", &o);
        }
        gtg
    }

    fn make_hdf5(dir: &Path) -> Option<Vec<PathBuf>> {
        let names = ["contiguous", "gzip", "bslz4"];
        let paths: Vec<PathBuf> = names.iter().map(|n| dir.join(format!("bench-{n}.h5"))).collect();
        if paths.iter().all(|p| p.exists()) {
            return Some(paths);
        }
        let python = std::env::var("UDF_BENCH_PYTHON").unwrap_or_else(|_| "python3".into());
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/formats_hdf5.py");
        let status = std::process::Command::new(&python).arg(&script).arg(dir).status();
        match status {
            Ok(s) if s.success() => Some(paths),
            other => {
                eprintln!("skipping HDF5: {python} {} failed ({other:?}); set UDF_BENCH_PYTHON", script.display());
                None
            }
        }
    }

    /// Read every tile of the negotiated tiling once; returns seconds and native bytes.
    fn pass(ds: &dyn Dataset, dtype: DType) -> (f64, usize, Vec<usize>) {
        let shape = ds.shape().clone();
        let request = TileRequest { method: Method::Tile, depth: TileDepth::Default, size: TileSize::BestFit };
        let partition_len = shape.nav_len().div_ceil(8);
        let native = ds.stored_dtype().dtype.size();
        let scheme = negotiate(&[request], &shape, &ds.base_shape(), partition_len, dtype.size(), native, true);
        let frames: Vec<u64> = (0..shape.nav_len() as u64).collect();
        let mut buf = vec![0u8; scheme.depth * scheme.slices.iter().map(|s| s.len()).max().unwrap_or(0) * dtype.size()];
        let t = Instant::now();
        for chunk in frames.chunks(scheme.depth) {
            for slice in &scheme.slices {
                let n = chunk.len() * slice.len() * dtype.size();
                ds.read_tile(chunk, slice, dtype, &mut buf[..n]).expect("read_tile");
                std::hint::black_box(&buf);
            }
        }
        (t.elapsed().as_secs_f64(), shape.nav_len() * shape.sig_len() * native, scheme.tile_shape())
    }

    /// `memcpy` of `bytes` native bytes from a 1 GiB buffer into a tile buffer of `tile` bytes.
    fn memcpy_gbps(bytes: usize, tile: usize) -> f64 {
        let src = vec![1u8; GIB];
        let mut dst = vec![0u8; tile];
        let mut run = || {
            let t = Instant::now();
            let mut done = 0;
            while done < bytes {
                let at = done % (GIB - tile);
                dst.copy_from_slice(&src[at..at + tile]);
                std::hint::black_box(&dst);
                done += tile;
            }
            t.elapsed().as_secs_f64()
        };
        run();
        bytes as f64 / run() / 1e9
    }

    fn file_bytes(paths: &[PathBuf]) -> u64 {
        paths.iter().map(|p| std::fs::metadata(p).map_or(0, |m| m.len())).sum()
    }

    pub fn main() {
        let dir = bench_dir();
        let mut rows: Vec<(String, PathBuf, OpenOptions, u64)> = Vec::new();
        if let Some(paths) = make_hdf5(&dir) {
            for p in paths {
                let size = file_bytes(std::slice::from_ref(&p));
                let name = format!("hdf5 {}", p.file_stem().unwrap().to_string_lossy().trim_start_matches("bench-"));
                rows.push((name, p, OpenOptions::default(), size));
            }
        }
        let csr = make_csr(&dir);
        let csr_size = file_bytes(&["indptr", "indices", "data"].map(|k| dir.join(format!("bench-csr_{k}.raw"))));
        rows.push(("raw_csr (dense tiles)".into(), csr, OpenOptions::default(), csr_size));
        let dm = make_dm(&dir);
        let dm_size = file_bytes(std::slice::from_ref(&dm));
        rows.push(("dm4".into(), dm, OpenOptions::default(), dm_size));
        let k2 = make_k2is(&dir);
        let k2_size = file_bytes(&(0..8).map(|s| k2is::sector_path(&dir, "bench-k2", s)).collect::<Vec<_>>());
        rows.push(("k2is".into(), k2, OpenOptions::default(), k2_size));

        println!("| format | file size | dataset | read as | tile shape | read_tile GB/s | memcpy GB/s | ratio |");
        println!("|---|---|---|---|---|---|---|---|");
        for (name, path, options, size) in rows {
            let ds = dataset::open(&path, &options).unwrap_or_else(|e| panic!("{name}: {e}"));
            let native = ds.stored_dtype().dtype;
            for dtype in [native, DType::F32] {
                pass(ds.as_ref(), dtype); // warm the page cache and the chunk cache paths
                let (seconds, bytes, tile) = pass(ds.as_ref(), dtype);
                let tile_bytes = tile.iter().product::<usize>() * native.size();
                let gbps = bytes as f64 / seconds / 1e9;
                let copy = memcpy_gbps(bytes, tile_bytes);
                let shape = ds.shape();
                println!(
                    "| {name} | {:.2} GiB | {:?} x {:?} {} | {} | {:?} | {gbps:.2} | {copy:.2} | {:.2} |",
                    size as f64 / GIB as f64,
                    shape.nav,
                    shape.sig,
                    native,
                    dtype,
                    tile,
                    gbps / copy,
                );
            }
        }
    }
}
