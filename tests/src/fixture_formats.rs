//! Fixtures of the detector file formats: writers (or committed files) and the values
//! the readers must return.

pub mod blo;
pub mod dm;
pub mod empad;
pub mod hdf5;
pub mod k2is;
pub mod mib;
pub mod mrc;
pub mod raw_csr;
pub mod read;
pub mod seq;
pub mod tvips;
