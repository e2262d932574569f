//! LiberTEM's raw CSR sparse format: dense tiles equal the dense data the files were
//! written from, for every dtype and index type, any tile shape; duplicates add up; bad
//! TOML and inconsistent files fail naming the file.

use udf_host::dataset::{self, OpenOptions, SigSlice};
use udf_host::dtype::DType;
use udf_host_tests::fixture_formats::raw_csr::{self, CsrLayout, Index};
use udf_host_tests::fixtures::{self, Data, Ty};

fn read(path: &std::path::Path, frames: &[u64], slice: &SigSlice) -> Vec<f64> {
    let ds = dataset::open(path, &OpenOptions::default()).unwrap_or_else(|e| panic!("{e}"));
    let mut buf = vec![0u8; frames.len() * slice.len() * 8];
    ds.read_tile(frames, slice, DType::F64, &mut buf).unwrap_or_else(|e| panic!("{e}"));
    bytemuck::cast_slice::<u8, f64>(&buf).to_vec()
}

/// The expected tile: a plain loop over the dense data.
fn expected(data: &Data, ty: Ty, frames: &[u64], slice: &SigSlice) -> Vec<f64> {
    let w = data.sig[1];
    let mut out = Vec::new();
    for &f in frames {
        for y in slice.origin[0]..slice.origin[0] + slice.shape[0] {
            for x in slice.origin[1]..slice.origin[1] + slice.shape[1] {
                out.push(ty.round(data.frame(f as usize)[y * w + x]));
            }
        }
    }
    out
}

#[test]
fn dense_tiles_match_the_data_for_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    // Mostly zeros, like event data: keep ~10% of mk_random's ones, and its outliers.
    let mut data = fixtures::mk_random(&[3, 4], &[9, 7], 3);
    for (i, v) in data.values.iter_mut().enumerate() {
        if *v == 1.0 && i % 5 != 0 {
            *v = 0.0;
        }
    }
    let layouts = [
        CsrLayout { indptr: Index::I64, indices: Index::I32, data: Ty::U16, big_endian_data: false },
        CsrLayout { indptr: Index::I32, indices: Index::U16, data: Ty::F32, big_endian_data: true },
        CsrLayout { indptr: Index::U32, indices: Index::I64, data: Ty::I32, big_endian_data: false },
        CsrLayout { indptr: Index::I64, indices: Index::U32, data: Ty::F64, big_endian_data: false },
    ];
    for (k, layout) in layouts.iter().enumerate() {
        let path = raw_csr::write(dir.path(), &format!("csr{k}"), &data, layout, &[]);
        let ds = dataset::open(&path, &OpenOptions::default()).unwrap();
        assert_eq!(ds.info().format, "raw_csr");
        assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![3, 4], vec![9, 7]));
        assert_eq!(ds.base_shape(), vec![9, 7], "whole frames");
        let all: Vec<u64> = (0..12).collect();
        for (frames, slice) in [
            (all.clone(), SigSlice::full(&[9, 7])),
            (vec![1, 5, 11], SigSlice { origin: vec![2, 3], shape: vec![4, 4] }),
            (vec![0], SigSlice { origin: vec![8, 0], shape: vec![1, 7] }),
        ] {
            assert_eq!(read(&path, &frames, &slice), expected(&data, layout.data, &frames, &slice), "{layout:?}");
        }
    }
}

#[test]
fn duplicate_indices_add_up_and_empty_frames_are_zero() {
    let dir = tempfile::tempdir().unwrap();
    let data = Data { nav: vec![3], sig: vec![2, 2], values: vec![0.0; 12] };
    let layout = CsrLayout { indptr: Index::I64, indices: Index::I32, data: Ty::F32, big_endian_data: false };
    let path = raw_csr::write(dir.path(), "dup", &data, &layout, &[(1, 3, 2.5), (1, 3, 4.0), (2, 0, 1.0)]);
    let got = read(&path, &[0, 1, 2], &SigSlice::full(&[2, 2]));
    assert_eq!(got, vec![0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 6.5, 1.0, 0.0, 0.0, 0.0]);
}

fn open_err(path: &std::path::Path) -> String {
    match dataset::open(path, &OpenOptions::default()) {
        Ok(_) => panic!("{} opened", path.display()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_toml_and_inconsistent_files() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_random(&[2, 3], &[4, 4], 1);
    let layout = CsrLayout { indptr: Index::I64, indices: Index::I32, data: Ty::U16, big_endian_data: false };
    let path = raw_csr::write(dir.path(), "bad", &data, &layout, &[]);
    let toml = std::fs::read_to_string(&path).unwrap();

    std::fs::write(&path, "[params\nfiletype = ").unwrap();
    let msg = open_err(&path);
    assert!(msg.contains("bad.toml") && msg.contains("TOML"), "{msg}");
    std::fs::write(&path, toml.replace("raw_csr\"\nnav", "mib\"\nnav")).unwrap();
    assert!(open_err(&path).contains("expected 'raw_csr'"));
    std::fs::write(&path, &toml).unwrap();

    // A missing sidecar file.
    let indices = dir.path().join("bad_indices.raw");
    let saved = std::fs::read(&indices).unwrap();
    std::fs::remove_file(&indices).unwrap();
    let msg = open_err(&path);
    assert!(msg.contains("bad_indices.raw") && msg.contains("cannot open"), "{msg}");
    // Fewer indices than values.
    std::fs::write(&indices, &saved[..saved.len() - 4]).unwrap();
    let msg = open_err(&path);
    assert!(msg.contains("bad_data.raw") && msg.contains("must match"), "{msg}");
    // A partial element.
    std::fs::write(&indices, &saved[..saved.len() - 1]).unwrap();
    assert!(open_err(&path).contains("not a whole number"));
    std::fs::write(&indices, &saved).unwrap();

    // Row pointers that run backwards or past the data; too few of them for the nav shape.
    let indptr = dir.path().join("bad_indptr.raw");
    let good = std::fs::read(&indptr).unwrap();
    let mut backwards = good.clone();
    backwards[16..24].copy_from_slice(&0i64.to_le_bytes());
    backwards[8..16].copy_from_slice(&5i64.to_le_bytes());
    std::fs::write(&indptr, &backwards).unwrap();
    let msg = open_err(&path);
    assert!(msg.contains("bad_indptr.raw") && msg.contains("row pointer 2 (offset 16)"), "{msg}");
    std::fs::write(&indptr, &good[..good.len() - 8]).unwrap();
    assert!(open_err(&path).contains("nav shape [2, 3] needs 6"));
    std::fs::write(&indptr, &good).unwrap();

    // An index outside the frame: found when the frame is read.
    let mut wild = saved.clone();
    wild[..4].copy_from_slice(&1000i32.to_le_bytes());
    std::fs::write(&indices, &wild).unwrap();
    let ds = dataset::open(&path, &OpenOptions::default()).unwrap();
    let mut buf = vec![0u8; 16 * 4];
    let msg = ds.read_tile(&[0], &SigSlice::full(&[4, 4]), DType::F32, &mut buf).unwrap_err().to_string();
    assert!(msg.contains("bad_indices.raw") && msg.contains("index 0 (offset 0) is 1000"), "{msg}");
}
