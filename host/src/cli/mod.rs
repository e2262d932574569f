//! The command line: argument definitions and dispatch to the library. It owns no
//! logic; [`execute`] runs a command and returns its outcome (used by `main` and by
//! in-process tests).

mod completions;
mod conformance;
mod dataset;
mod generate;
mod info;
mod inspect;
mod list;
mod new;
mod partition;
mod progress;
mod run;

use crate::wasm::{ComponentCache, MAX_WASM_MEMORY, RuntimeOptions, WasmRuntime};
use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::OnceLock;

/// Run sandboxed LiberTEM-style UDFs (WebAssembly components) over 4D-STEM datasets.
#[derive(Parser)]
#[command(name = "udf-host", about, max_term_width = 100)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run one or more plugins over a dataset in one pass and write their results.
    Run(run::RunArgs),
    /// Print a plugin's description: parameters, methods, preferences.
    Inspect(inspect::InspectArgs),
    /// List the native built-ins (usable as builtin:NAME) with their parameters.
    List(list::ListArgs),
    /// Print what a dataset holds: format, shape, dtype, details, partitions, tile shape.
    Info(info::InfoArgs),
    /// Write a sample dataset (synthetic 4D-STEM scan or test pattern).
    Generate(generate::GenerateArgs),
    /// Check that a plugin obeys the contract: the same input under many executions
    /// (exit code 2 if a check fails).
    Conformance(conformance::ConformanceArgs),
    /// Run one partition of a saved run plan (`run --save-plan`) and write its output:
    /// how other engines (batch schedulers, Dask) run partitions in their own processes.
    RunPartition(partition::RunPartitionArgs),
    /// Start a plugin project: source from a template, the SDK and the contract of this
    /// udf-host, a build script, a README and a test (`new my-sum --lang rust`).
    New(new::NewArgs),
    /// Print a shell completion script (bash, zsh, fish) to stdout.
    Completions(completions::CompletionsArgs),
    /// Explore datasets in the browser: a local web page with virtual detectors, frames,
    /// centre of mass and plugins (prints a URL with a token; docs/serve.md).
    Serve(crate::serve::ServeArgs),
}

/// The cargo features of this build that `--version` reports. When host/Cargo.toml gets a
/// feature that changes what the binary can do, add one line here:
/// `("cuda", cfg!(feature = "cuda")),`.
const FEATURES: &[(&str, bool)] = &[];

/// The features of `list` that are on, for `--version`: `cuda, cuda13` or `none`.
fn features_text(list: &[(&str, bool)]) -> String {
    let on: Vec<&str> = list.iter().filter(|(_, on)| *on).map(|(name, _)| *name).collect();
    if on.is_empty() { "none".to_owned() } else { on.join(", ") }
}

/// What `udf-host --version` prints after the program name: the version, the contract
/// plugins are built against, and the enabled features.
pub fn version_text() -> &'static str {
    static TEXT: OnceLock<String> = OnceLock::new();
    TEXT.get_or_init(|| {
        format!(
            "{}\ncontract: {}\nfeatures: {}",
            env!("CARGO_PKG_VERSION"),
            crate::report::contract_id(),
            features_text(FEATURES)
        )
    })
}

/// The command line's definition (with the version text), for parsing and completions.
fn command() -> clap::Command {
    Cli::command().version(version_text())
}

/// Write `text` to stdout in one piece. Errors (a closed pipe: `udf-host list | head`)
/// come back as errors, which [`main`] turns into a quiet exit instead of the panic of
/// `println!`.
fn print(text: impl AsRef<[u8]>) -> std::io::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_ref())?;
    out.flush()
}

/// Options of the WebAssembly runtime, shared by the commands that load plugins.
#[derive(Args, Debug, Clone)]
pub struct RuntimeArgs {
    /// Wall-clock limit per call into a plugin, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300.0)]
    timeout: f64,
    /// Memory limit per plugin instance (e.g. 512M, 2G; at most 4G).
    #[arg(long, value_name = "SIZE", default_value = "4G", value_parser = parse_size)]
    max_memory: usize,
    /// Memory limit for all plugin instances together, and what their calls return to
    /// udf-host [default: half the machine's memory].
    #[arg(long, value_name = "SIZE", value_parser = parse_memory)]
    max_memory_total: Option<u64>,
    /// Trust the plugins: no per-call timeout (epoch checks off), faster tight loops.
    #[arg(long)]
    trusted: bool,
    /// Give up compiling a plugin after this many seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 120.0)]
    compile_timeout: f64,
    /// Don't read or write the compiled-plugin cache.
    #[arg(long)]
    no_cache: bool,
    /// Directory of the compiled-plugin cache [default: ~/.cache/udf-host].
    #[arg(long, value_name = "DIR")]
    cache_dir: Option<PathBuf>,
}

impl RuntimeArgs {
    /// The limits as a run plan records them.
    fn limits(&self) -> crate::exec::Limits {
        crate::exec::Limits {
            timeout_seconds: self.timeout,
            max_memory: self.max_memory as u64,
            max_memory_total: self.max_memory_total,
            trusted: self.trusted,
        }
    }

    /// A runtime with these options for runs of `udfs` UDFs on `threads` threads,
    /// plugin logs to `logger`.
    fn build(&self, logger: crate::log::Logger, threads: usize, udfs: usize) -> anyhow::Result<WasmRuntime> {
        let instances = ((threads + 2) * udfs).max(4) as u32;
        Ok(WasmRuntime::new(self.options(logger, instances)?)?)
    }

    fn options(&self, logger: crate::log::Logger, instances: u32) -> anyhow::Result<RuntimeOptions> {
        anyhow::ensure!(
            self.timeout.is_finite() && self.timeout > 0.0,
            "--timeout must be a positive number of seconds, got {}",
            self.timeout
        );
        anyhow::ensure!(
            self.compile_timeout.is_finite() && self.compile_timeout > 0.0,
            "--compile-timeout must be a positive number of seconds, got {}",
            self.compile_timeout
        );
        let cache_dir = if self.no_cache { None } else { self.cache_dir.clone().or_else(ComponentCache::default_dir) };
        Ok(RuntimeOptions {
            max_memory: self.max_memory,
            max_memory_total: self
                .max_memory_total
                .map_or_else(crate::wasm::default_memory_total, |t| usize::try_from(t).unwrap_or(usize::MAX)),
            timeout: std::time::Duration::from_secs_f64(self.timeout),
            trusted: self.trusted,
            cache: ComponentCache::new(cache_dir),
            max_instances: instances,
            compile_timeout: std::time::Duration::from_secs_f64(self.compile_timeout),
            logger,
        })
    }
}

/// Parse `512M`, `2G`, `4096K`, `1048576` into bytes.
fn parse_size(text: &str) -> Result<usize, String> {
    let bytes = parse_bytes(text)?;
    if !(1.0..=MAX_WASM_MEMORY as f64).contains(&bytes) {
        return Err(format!("'{text}' must be between 1 byte and 4G (32-bit wasm)"));
    }
    Ok(bytes as usize)
}

fn parse_bytes(text: &str) -> Result<f64, String> {
    let t = text.trim().to_ascii_uppercase();
    let t = t.strip_suffix("IB").or_else(|| t.strip_suffix('B')).unwrap_or(&t).to_owned();
    let (number, shift) = match t.chars().last() {
        Some('K') => (&t[..t.len() - 1], 10),
        Some('M') => (&t[..t.len() - 1], 20),
        Some('G') => (&t[..t.len() - 1], 30),
        _ => (t.as_str(), 0),
    };
    let value: f64 = number.trim().parse().map_err(|_| format!("'{text}' is not a size like 512M or 2G"))?;
    let bytes = value * (1u64 << shift) as f64;
    if bytes.is_nan() || bytes < 1.0 {
        return Err(format!("'{text}' is not a positive size"));
    }
    Ok(bytes)
}

/// Parse a memory size like `16G` or `512M` (no upper limit).
fn parse_memory(text: &str) -> Result<u64, String> {
    parse_bytes(text).map(|b| b as u64)
}

/// A shape given on the command line: `16,16` or `16x16`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape(pub Vec<usize>);

impl std::str::FromStr for Shape {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        text.split([',', 'x', 'X'])
            .map(|d| d.trim().parse::<usize>().map_err(|_| format!("'{text}' is not a shape like 16,16")))
            .collect::<Result<Vec<_>, _>>()
            .map(Shape)
    }
}

/// Exit codes (also in the README).
pub mod exit {
    pub const OK: u8 = 0;
    /// Bad input: arguments, files, params.
    pub const USER_ERROR: u8 = 1;
    /// A plugin failed (trap, limit, error, contract violation); what was merged before
    /// is written.
    pub const PLUGIN_FAILURE: u8 = 2;
    /// Partial results: `--keep-going` with failed partitions, or interrupted (Ctrl-C).
    pub const PARTIAL: u8 = 3;
    /// A bug in udf-host itself (a broken internal invariant): please report it.
    pub const INTERNAL: u8 = 4;
}

/// An error with the exit code it maps to.
#[derive(Debug)]
pub struct Failure {
    pub code: u8,
    pub error: anyhow::Error,
}

impl<E: Into<anyhow::Error>> From<E> for Failure {
    fn from(e: E) -> Self {
        Failure { code: exit::USER_ERROR, error: e.into() }
    }
}

/// A UDF that could not be loaded: the user's to fix when the name or file is wrong, the
/// plugin's when it was read but is not a usable plugin.
fn load_failure(e: crate::loader::SourceError) -> Failure {
    let code = if e.is_plugin_failure() { exit::PLUGIN_FAILURE } else { exit::USER_ERROR };
    Failure { code, error: e.into() }
}

/// Parse `args` (including the program name) and run the command.
///
/// # Errors
/// A [`Failure`] with the exit code and the error chain to print.
pub fn execute<I, T>(args: I) -> Result<(), Failure>
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    let cli = match command().try_get_matches_from(args).and_then(|m| Cli::from_arg_matches(&m)) {
        Ok(cli) => cli,
        Err(e) => {
            use clap::error::ErrorKind;
            if matches!(e.kind(), ErrorKind::DisplayHelp | ErrorKind::DisplayVersion) {
                let _ = e.print();
                return Ok(());
            }
            let text = e.render().to_string();
            let text = text.strip_prefix("error: ").unwrap_or(&text).trim_end().to_owned();
            return Err(Failure { code: exit::USER_ERROR, error: anyhow::anyhow!(text) });
        }
    };
    match cli.command {
        Command::Run(args) => run::run(args),
        Command::Inspect(args) => inspect::inspect(args),
        Command::List(args) => list::list(args),
        Command::Info(args) => info::info(args),
        Command::Generate(args) => generate::generate(args),
        Command::Conformance(args) => conformance::conformance(args),
        Command::RunPartition(args) => partition::run_partition(args),
        Command::New(args) => new::new(args),
        Command::Completions(args) => completions::completions(args, &mut command()),
        Command::Serve(args) => Ok(crate::serve::main(args)?),
    }
}

/// An error with its causes, as `{:#}` prints it (`outer: cause: cause`) but without a
/// cause whose text was said already (errors that embed their source's message).
pub fn error_text(error: &anyhow::Error) -> String {
    let mut out = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if out.contains(&text) {
            continue;
        }
        if !out.is_empty() {
            out.push_str(": ");
        }
        out.push_str(&text);
    }
    out
}

/// The `udf-host` binary: run the command line and map the outcome to an exit code. A
/// reader that stops reading (`udf-host list | head`) ends the program quietly, with
/// exit code 0, as other command-line tools do.
pub fn main() -> ExitCode {
    match execute(std::env::args_os()) {
        Ok(()) => ExitCode::from(exit::OK),
        Err(failure) => {
            let broken_pipe = failure.error.chain().any(|e| {
                e.downcast_ref::<std::io::Error>().is_some_and(|io| io.kind() == std::io::ErrorKind::BrokenPipe)
            });
            if broken_pipe {
                return ExitCode::from(exit::OK);
            }
            eprintln!("error: {}", error_text(&failure.error));
            ExitCode::from(failure.code)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("512M"), Ok(512 << 20));
        assert_eq!(parse_size("4G"), Ok(4 << 30));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert!(parse_size("5G").is_err());
        assert!(parse_size("lots").is_err());
    }

    #[test]
    fn features_are_listed_by_name_or_none() {
        assert_eq!(features_text(&[]), "none");
        assert_eq!(features_text(&[("cuda", false)]), "none");
        assert_eq!(features_text(&[("cuda", true), ("cuda13", false), ("hdf5", true)]), "cuda, hdf5");
    }

    #[test]
    fn shapes() {
        assert_eq!("16,16".parse(), Ok(Shape(vec![16, 16])));
        assert_eq!("4x5x6".parse(), Ok(Shape(vec![4, 5, 6])));
        assert!("a,b".parse::<Shape>().is_err());
    }
}
