//! How fast do the readers of HDF5, raw CSR, DM and K2IS fill tiles? For each format a
//! file of at least 1 GiB, page cache warm (one untimed pass first), every tile of the
//! negotiated tiling read through `Dataset::read_tile` on one thread, next to `memcpy`
//! of the same number of native bytes into tiles of the same size.
//!
//! `cargo bench -p udf-host-tests --bench formats_b` — files go to `$UDF_BENCH_DIR`
//! (default `/tmp/udf-bench-formats-b`, ~6 GiB) and are kept between runs. The HDF5 files
//! are written by `tests/benches/formats_b_hdf5.py` with `$UDF_BENCH_PYTHON` (default
//! `python3`, needs h5py and hdf5plugin); without it the HDF5 rows are skipped.
//! Results: docs/benchmarks.md.

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
        std::env::var_os("UDF_BENCH_DIR").map_or_else(|| PathBuf::from("/tmp/udf-bench-formats-b"), PathBuf::from);
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
        let mut indices = std::io::BufWriter::new(std::fs::File::create(dir.join("bench-csr_indices.raw")).unwrap());
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
        let o = k2is::K2Options { frames: 191, inactive: 1, skew: [0; 8], trailing: 0, scan: Some((10, 19)), seed: 1 };
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
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("benches/formats_b_hdf5.py");
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

fn main() {
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
