//! The `udf-host` command line. It wires the library together and owns no logic.

mod cli;

fn main() -> std::process::ExitCode {
    cli::main()
}
