//! `pick`: the selected frames, in the native dtype, bit for bit.

use super::{Fixture, Input, builtin, cases};
use udf_host::dtype::DType;
use udf_host::udf::Params;
use udf_host_tests::fixtures;
use udf_host_tests::reference::{to_complex, to_f64};

#[test]
fn pick_returns_the_selected_frames_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let data = fixtures::mk_uniform(&[5, 7], &[19, 23], 51);
    let data = fixtures::Data { values: data.values.iter().map(|v| (v * 60000.0).floor()).collect(), ..data };
    for input in [Input::F32, Input::U16, Input::C64] {
        let f = Fixture::write(dir.path(), input, &data, 51);
        for case in cases(f.frames(), &f.sig, &[3, 5, 7]) {
            let what = format!("{input:?}, {}", case.label);
            let results = f.run(vec![(builtin("pick"), Params::default())], &case);
            let b = results.udfs[0].buffer("intensity").expect("intensity");
            let selected: Vec<usize> = (0..f.frames()).filter(|&i| case.selected(i)).collect();
            assert_eq!(b.data.shape(), &[selected.len(), 19, 23], "{what}");
            let native = match input {
                Input::F32 => DType::F32,
                Input::U16 => DType::U16,
                Input::C64 => DType::C64,
            };
            assert_eq!(b.dtype(), native, "{what}: native dtype");
            let re: Vec<f64> = selected.iter().flat_map(|&i| f.frame(i).to_vec()).collect();
            if f.is_complex() {
                let im: Vec<f64> = selected.iter().flat_map(|&i| f.frame_im(i).to_vec()).collect();
                assert_eq!(to_complex(&b.data), re.into_iter().zip(im).collect::<Vec<_>>(), "{what}");
            } else {
                assert_eq!(to_f64(&b.data), re, "{what}");
            }
        }
    }
}
