//! The `udf-host` command line; everything lives in [`udf_host::cli`].

fn main() -> std::process::ExitCode {
    udf_host::cli::main()
}
