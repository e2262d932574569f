//! The integration tests: one binary, one module per topic.

mod bad_input;
mod builtins;
mod cli;
mod cli_binary;
#[cfg(target_os = "linux")]
mod cli_process;
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
mod gallery;
#[cfg(target_os = "linux")]
mod host_arrays;
mod hostile_matrix;
#[cfg(target_os = "linux")]
mod interrupt;
mod live;
mod new_project;
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
mod sdk_examples;
#[cfg(unix)]
mod serve;
#[cfg(unix)]
mod serve_live;
mod snapshots;
mod sum;
