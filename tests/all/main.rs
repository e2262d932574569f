//! The integration tests: one binary, one module per topic.

mod bad_input;
mod cli;
mod plugins_masks;
mod plugins_pick;
mod plugins_stddev;
mod sum;
