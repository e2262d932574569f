//! Fixtures of the detector file formats: writers (or committed files) and the values
//! the readers must return.

pub mod blo;
pub mod empad;
pub mod mib;
pub mod mrc;
pub mod read;
pub mod seq;
pub mod tvips;
// Formats, part B.
pub mod dm;
pub mod hdf5;
pub mod k2is;
pub mod raw_csr;
