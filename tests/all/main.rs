//! The integration tests: one binary, one module per topic.

mod bad_input;
mod cli;
// Formats, part B.
mod formats_dm;
mod formats_hdf5;
mod formats_k2is;
mod formats_raw_csr;
mod sum;
