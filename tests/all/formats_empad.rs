//! EMPAD: `.xml` + `.raw` with frame footers; scan, search fix-up and series XML; the
//! raw file alone with a nav shape; missing and mismatching files.

use udf_host::dataset::{Format, OpenOptions, SigSlice};
use udf_host::dtype::DType;
use udf_host_tests::fixture_formats::empad;
use udf_host_tests::fixture_formats::read::{expected_tile, open, open_error, read_all, read_tile};
use udf_host_tests::fixtures::{Ty, mk_uniform};

#[test]
fn scans_and_series_read_back_without_footers() {
    let dir = tempfile::tempdir().unwrap();
    let data = mk_uniform(&[3, 4], &[128, 128], 21).rounded(Ty::F32);
    empad::write_raw(dir.path(), "scan", &data, -7.0);
    let xml = dir.path().join("scan.xml");
    empad::write_xml(&xml, "scan.raw", [3, 4], [16, 16]);
    assert_eq!(Format::detect(&xml), Format::Empad);
    let ds = open(&xml, &OpenOptions::default());
    assert_eq!((ds.shape().nav.clone(), ds.shape().sig.clone()), (vec![3, 4], vec![128, 128]));
    assert_eq!(ds.stored_dtype().dtype, DType::F32);
    assert_eq!(read_all(ds.as_ref()), data.values);
    let slice = SigSlice { origin: vec![120, 3], shape: vec![8, 50] };
    assert_eq!(read_tile(ds.as_ref(), &[2, 11], &slice, DType::F32), expected_tile(&data, &[2, 11], &slice));
    // The raw file matches the search scan only: LiberTEM's fix-up.
    empad::write_xml(&xml, "scan.raw", [16, 16], [3, 4]);
    assert_eq!(open(&xml, &OpenOptions::default()).shape().nav, vec![3, 4]);
    // A series.
    empad::write_series_xml(&xml, "scan.raw", 12);
    assert_eq!(open(&xml, &OpenOptions::default()).shape().nav, vec![12]);
    // The raw file alone, with --format empad and a nav shape using fewer frames.
    let raw = dir.path().join("scan.raw");
    let options = OpenOptions { format: Some(Format::Empad), nav_shape: Some(vec![2, 5]), ..Default::default() };
    let ds = open(&raw, &options);
    assert_eq!(read_all(ds.as_ref()), data.values[..10 * 128 * 128].to_vec());
}

#[test]
fn missing_and_mismatching_files_are_named() {
    let dir = tempfile::tempdir().unwrap();
    let data = mk_uniform(&[2, 2], &[128, 128], 22);
    empad::write_raw(dir.path(), "a", &data, 0.0);
    let xml = dir.path().join("a.xml");
    // Missing sidecar: the XML names a raw file that is not there.
    empad::write_xml(&xml, "gone.raw", [2, 2], [2, 2]);
    let msg = open_error(&xml, &OpenOptions::default());
    assert!(msg.contains("a.xml") && msg.contains("gone.raw"), "{msg}");
    // The raw file's size fits neither scan.
    empad::write_xml(&xml, "a.raw", [3, 3], [5, 5]);
    let msg = open_error(&xml, &OpenOptions::default());
    assert!(msg.contains("a.raw") && msg.contains("[3, 3]") && msg.contains("266240 bytes"), "{msg}");
    // Not EMPAD XML.
    std::fs::write(&xml, "<root><other/></root>").unwrap();
    let msg = open_error(&xml, &OpenOptions { format: Some(Format::Empad), ..Default::default() });
    assert!(msg.contains("a.xml") && msg.contains("raw_file"), "{msg}");
    // A truncated raw file opened directly.
    let raw = dir.path().join("a.raw");
    let bytes = std::fs::read(&raw).unwrap();
    std::fs::write(&raw, &bytes[..bytes.len() - 70_000]).unwrap();
    let msg = open_error(&raw, &OpenOptions { format: Some(Format::Empad), ..Default::default() });
    assert!(msg.contains("a.raw") && msg.contains("truncated") && msg.contains("offset 133120"), "{msg}");
}

/// An XML laid out like the older acquisition software writes it (rosettasciio's
/// `map4x4.xml`): a long list of reconstructions first, so `<raw_file>` comes after the
/// first KiB; `<pix_x>`/`<pix_y>` give the scan recorded, `<scan_parameters>` the settings.
fn old_style_xml(raw: &str, pix: [usize; 2]) -> String {
    let recon: String = (0..7)
        .map(|i| {
            format!(
                "<reconstruction absolute_filename=\"/home/empad/empad_projects/UKAEA/acquisition_1/\
                 scan_roi{i}_sum_annulus_x64_y64_ri20_ro50.tif\"/>"
            )
        })
        .collect();
    format!(
        "<root name=\"acquisition_1\"><timestamp timestamp=\"1559820600.164675\"/><software_version>0.51 211118\
         </software_version><reconstructions Sentinel=\"Test  \">{recon}</reconstructions><type>scan</type>\
         <pix_x>{}</pix_x><pix_y>{}</pix_y><raw_file filename=\"{raw}\"/><scan_parameters mode=\"search\">\
         <scan_resolution_x>64</scan_resolution_x><scan_resolution_y>64</scan_resolution_y></scan_parameters>\
         <scan_parameters mode=\"acquire\"><scan_resolution_x>128</scan_resolution_x><scan_resolution_y>128\
         </scan_resolution_y></scan_parameters></root>",
        pix[1], pix[0]
    )
}

#[test]
fn older_xml_is_detected_and_pix_x_pix_y_give_the_scan() {
    // Regression (issue 22, item 4): detection read only the first KiB, so this XML was
    // taken as raw data and refused; its scan is in <pix_x>/<pix_y>.
    let dir = tempfile::tempdir().unwrap();
    let data = mk_uniform(&[4, 3], &[128, 128], 23).rounded(Ty::F32);
    empad::write_raw(dir.path(), "scan_x3_y4", &data, 1.0);
    let xml = dir.path().join("map.xml");
    let text = old_style_xml("scan_x3_y4.raw", [4, 3]);
    assert!(text.find("<raw_file").unwrap() > 1024);
    std::fs::write(&xml, &text).unwrap();
    assert_eq!(Format::detect(&xml), Format::Empad);
    let ds = open(&xml, &OpenOptions::default());
    assert_eq!(ds.shape().nav, vec![4, 3]);
    assert_eq!(read_all(ds.as_ref()), data.values);
    let from = ds.info().details.iter().find(|(k, _)| k == "nav_shape_from").map(|(_, v)| v.clone());
    assert!(from.unwrap_or_default().contains("pix_x/pix_y"), "{:?}", ds.info().details);
    // No pix_x/pix_y and no fitting scan_parameters: the raw file's name tells.
    std::fs::write(&xml, text.replace("<pix_x>3</pix_x><pix_y>4</pix_y>", "")).unwrap();
    assert_eq!(open(&xml, &OpenOptions::default()).shape().nav, vec![4, 3]);
    // An XML that fits nothing, with an explicit --nav-shape that fits the raw file.
    std::fs::copy(dir.path().join("scan_x3_y4.raw"), dir.path().join("acquisition.raw")).unwrap();
    std::fs::write(&xml, old_style_xml("acquisition.raw", [9, 9])).unwrap();
    assert!(open_error(&xml, &OpenOptions::default()).contains("[9, 9]"));
    let ds = open(&xml, &OpenOptions { nav_shape: Some(vec![2, 6]), ..Default::default() });
    assert_eq!(ds.shape().nav, vec![2, 6]);
    assert_eq!(read_all(ds.as_ref()), data.values);
}
