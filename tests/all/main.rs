//! The integration tests: one binary, one module per topic.

mod bad_input;
mod cli;
mod contract;
mod polyglot;
mod sandbox;
mod sum;
