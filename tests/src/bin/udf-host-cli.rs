//! The `udf-host` command line as a program of this package, so that the integration tests
//! can run it as a process (`env!("CARGO_BIN_EXE_udf-host-cli")`): exit codes, closed pipes,
//! and projects whose scripts call `udf-host`. The same as host/src/main.rs.

fn main() -> std::process::ExitCode {
    udf_host::cli::main()
}
