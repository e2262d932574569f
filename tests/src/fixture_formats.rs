//! Fixtures of the detector file formats: writers (or committed files) and the values
//! the readers must return.

// Formats, part B.
pub mod dm;
pub mod hdf5;
pub mod k2is;
pub mod raw_csr;
