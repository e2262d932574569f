//! The integration tests: one binary, one module per topic.

mod bad_input;
mod cli;
mod formats_blo;
mod formats_common;
mod formats_empad;
mod formats_fuzz_regressions;
mod formats_mib;
mod formats_mrc;
mod formats_seq;
mod formats_tvips;
mod sum;
