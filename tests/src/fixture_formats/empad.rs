//! EMPAD fixtures: a `.raw` of 128 × 128 float32 frames with a 2-row footer, and the
//! `.xml` describing it.

use crate::fixtures::Data;
use std::path::{Path, PathBuf};

/// Write `data` (frames of 128 × 128) as `<dir>/<name>.raw` with footers of `footer`
/// values; returns the path.
pub fn write_raw(dir: &Path, name: &str, data: &Data, footer: f32) -> PathBuf {
    assert_eq!(data.sig, vec![128, 128]);
    let path = dir.join(format!("{name}.raw"));
    let mut bytes = Vec::with_capacity(data.frames() * 130 * 128 * 4);
    for i in 0..data.frames() {
        for &v in data.frame(i) {
            bytes.extend_from_slice(&(v as f32).to_le_bytes());
        }
        for _ in 0..2 * 128 {
            bytes.extend_from_slice(&footer.to_le_bytes());
        }
    }
    std::fs::write(&path, bytes).expect("write empad raw");
    path
}

/// Write the XML for a scan of `[y, x]` (acquire mode) plus a `search` scan of
/// `search`, naming `raw_name` with a Windows path like the instrument does.
pub fn write_xml(path: &Path, raw_name: &str, acquire: [usize; 2], search: [usize; 2]) {
    let text = format!(
        r#"<?xml version="1.0" encoding="UTF-8"?>
<root>
  <!-- written by the udf-host test fixtures -->
  <timestamp>2021-02-03T10:11:12</timestamp>
  <raw_file filename="C:\Users\EMPAD\{raw_name}" />
  <scan_parameters mode="search">
    <scan_resolution_x>{}</scan_resolution_x>
    <scan_resolution_y>{}</scan_resolution_y>
  </scan_parameters>
  <scan_parameters mode="acquire">
    <scan_resolution_x>{}</scan_resolution_x>
    <scan_resolution_y>{}</scan_resolution_y>
  </scan_parameters>
</root>
"#,
        search[1], search[0], acquire[1], acquire[0]
    );
    std::fs::write(path, text).expect("write empad xml");
}

/// Write the XML for a series of `count` frames.
pub fn write_series_xml(path: &Path, raw_name: &str, count: usize) {
    let text = format!(
        "<?xml version=\"1.0\"?>\n<root><type>series</type><count>{count}</count><raw_file filename=\"{raw_name}\"/></root>\n"
    );
    std::fs::write(path, text).expect("write empad xml");
}
