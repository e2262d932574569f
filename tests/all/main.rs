//! The integration tests: one binary, one module per topic.

mod bad_input;
mod builtins;
mod cli;
mod conformance;
mod contract;
mod cuda;
mod formats_blo;
mod formats_common;
mod formats_dm;
mod formats_empad;
mod formats_fuzz_regressions;
mod formats_hdf5;
mod formats_k2is;
mod formats_mib;
mod formats_mrc;
mod formats_raw_csr;
mod formats_seq;
mod formats_tvips;
mod plugin_matrix;
mod plugins_com;
mod plugins_crystallinity;
mod plugins_fem;
mod plugins_logsum;
mod plugins_masks;
mod plugins_pick;
mod plugins_stddev;
mod polyglot;
mod previews;
#[cfg(unix)]
mod report_page;
mod run_plan;
mod sandbox;
mod snapshots;
mod sum;
