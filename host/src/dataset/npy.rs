//! NumPy `.npy` files: the header gives dtype and shape; the data is memory-mapped.

use super::{DatasetError, MappedFrames, OpenOptions, reshape};
use crate::npy::NpyHeader;
use std::io::Read;
use std::path::Path;

pub(super) fn open(path: &Path, options: &OpenOptions) -> Result<MappedFrames, DatasetError> {
    let mut file = crate::dataset::mapped::open_file(path)
        .map_err(|source| DatasetError::Open { path: path.to_owned(), source })?;
    // Headers are small; read enough for any realistic one, then parse.
    let mut head = Vec::new();
    (&mut file)
        .take(1 << 20)
        .read_to_end(&mut head)
        .map_err(|source| DatasetError::Open { path: path.to_owned(), source })?;
    let header = NpyHeader::parse(&head).map_err(|e| DatasetError::invalid(path, e.to_string()))?;
    if header.fortran_order {
        return Err(DatasetError::invalid(
            path,
            "the array is in Fortran order; only C order is supported (save it with np.ascontiguousarray)",
        ));
    }
    if options.dtype.is_some_and(|d| d != header.dtype) {
        return Err(DatasetError::invalid(
            path,
            format!(
                "--dtype says {}, but the .npy header says {}",
                options.dtype.unwrap_or(header.dtype),
                header.dtype
            ),
        ));
    }
    let shape = reshape(path, &header.shape, options.nav_shape.as_deref(), options.sig_shape.as_deref())?;
    let stride = shape.sig_len() * header.dtype.dtype.size();
    let details = vec![
        ("header_shape".into(), format!("{:?}", header.shape)),
        ("descr".into(), header.dtype.descr()),
        ("data_offset".into(), header.data_offset.to_string()),
    ];
    Ok(MappedFrames::open(path, header.data_offset, stride, header.dtype, shape)?.with_info("npy", details))
}
