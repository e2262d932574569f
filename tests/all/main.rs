//! The integration tests: one binary, one module per topic.

mod bad_input;
mod cli;
mod conformance;
mod contract;
mod sandbox;
mod sum;
