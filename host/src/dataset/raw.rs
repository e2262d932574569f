//! Raw binary files: frames in C order with no header, after an optional offset.

use super::{DatasetError, DatasetShape, MappedFrames, OpenOptions};
use std::path::Path;

pub(super) fn open(path: &Path, options: &OpenOptions) -> Result<MappedFrames, DatasetError> {
    let stored = options
        .dtype
        .ok_or_else(|| DatasetError::invalid(path, "raw data needs --dtype (e.g. --dtype float32 or --dtype '>u2')"))?;
    let sig = options
        .sig_shape
        .clone()
        .ok_or_else(|| DatasetError::invalid(path, "raw data needs --sig-shape (e.g. --sig-shape 128,128)"))?;
    let len = std::fs::metadata(path).map_err(|source| DatasetError::Open { path: path.to_owned(), source })?.len();
    let offset = options.offset;
    if offset > len {
        return Err(DatasetError::invalid(
            path,
            format!("--offset {offset} is beyond the end of the file ({len} bytes)"),
        ));
    }
    let frame_bytes = crate::array::byte_len(&sig, stored.dtype.size())
        .ok_or_else(|| DatasetError::invalid(path, format!("sig shape {sig:?} is too large")))?
        as u64;
    if frame_bytes == 0 {
        return Err(DatasetError::invalid(path, format!("sig shape {sig:?} is empty")));
    }
    let available = len - offset;
    let nav = match &options.nav_shape {
        Some(nav) => nav.clone(),
        None if available.is_multiple_of(frame_bytes) => vec![(available / frame_bytes) as usize],
        None => {
            return Err(DatasetError::invalid(
                path,
                format!(
                    "{available} bytes after the offset are not a whole number of {frame_bytes}-byte frames \
                     ({stored}, {sig:?}); check --dtype, --sig-shape and --offset"
                ),
            ));
        }
    };
    let shape = DatasetShape { nav, sig };
    let needed = crate::array::byte_len(&shape.full(), stored.dtype.size())
        .ok_or_else(|| DatasetError::invalid(path, format!("nav {:?} × sig {:?} is too large", shape.nav, shape.sig)))?
        as u64;
    if available != needed {
        let what = if available < needed { "too short" } else { "too long" };
        return Err(DatasetError::invalid(
            path,
            format!(
                "{what}: nav {:?} × sig {:?} of {stored} is {needed} bytes, but the file has {available} bytes \
                 after the offset; check --dtype, --nav-shape, --sig-shape and --offset",
                shape.nav, shape.sig
            ),
        ));
    }
    let details = vec![("file_bytes".into(), len.to_string()), ("offset".into(), offset.to_string())];
    Ok(MappedFrames::open(path, offset as usize, frame_bytes as usize, stored, shape)?.with_info("raw", details))
}
