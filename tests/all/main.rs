//! The integration tests: one binary, one module per topic.

mod bad_input;
mod builtins;
mod cli;
mod contract;
mod sum;
