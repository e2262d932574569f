//! `udf-host conformance PLUGIN`: run the conformance kit ([`crate::conformance`]) on a
//! plugin and print the report; `--vectors DIR` runs test vectors instead.

use super::dataset::DatasetArgs;
use super::{Failure, RuntimeArgs, exit};
use crate::conformance::{self, Config, DataSource, Group, Synthetic, Tolerance};
use crate::dataset;
use crate::dtype::DType;
use anyhow::anyhow;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct ConformanceArgs {
    /// The plugin (.wasm component or builtin:NAME); with --vectors, one or more.
    #[arg(required = true, value_name = "PLUGIN")]
    plugins: Vec<PathBuf>,
    /// A parameter for the plugin: NAME=VALUE or NAME=@array.npy.
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Check on this dataset instead of synthetic data (opened with the options below;
    /// without it, --dtype, --nav-shape and --sig-shape shape the synthetic data:
    /// float32, 4,6 and 16,16 by default).
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
    #[command(flatten)]
    dataset: DatasetArgs,
    /// Seed of the synthetic data, random ROIs and shuffled merge orders.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Relative tolerance for float32 and complex64 results [default: 1e-5]; a floor,
    /// widened to the rounding of the plugin's accumulation unless --fixed-tolerance.
    #[arg(long)]
    rtol: Option<f64>,
    /// Relative tolerance for float64 and complex128 results [default: 1e-9]; a floor,
    /// like --rtol.
    #[arg(long)]
    rtol64: Option<f64>,
    /// Absolute tolerance for float results [default: 1e-8].
    #[arg(long)]
    atol: Option<f64>,
    /// Use --rtol, --rtol64 and --atol as they are, without widening them to the
    /// rounding of the accumulation (docs/conformance.md, "Tolerance").
    #[arg(long)]
    fixed_tolerance: bool,
    /// The largest worker thread count tried.
    #[arg(long, default_value_t = 4)]
    threads: usize,
    /// Run only these check groups (comma-separated or repeated): invariance, roi, merge,
    /// declarations, determinism, robustness, resources.
    #[arg(long = "check", value_name = "GROUP", value_delimiter = ',')]
    checks: Vec<String>,
    /// Run the test vectors below DIR (cases for the given plugins) instead of the suite.
    #[arg(long, value_name = "DIR")]
    vectors: Option<PathBuf>,
    /// Print the report as JSON (docs/conformance.md describes it).
    #[arg(long)]
    json: bool,
    /// Also write the JSON report to FILE (for CI).
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
    /// Show all evidence, not only failures, and the plugins' warnings.
    #[arg(short, long)]
    verbose: bool,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl ConformanceArgs {
    fn tolerance(&self) -> anyhow::Result<Option<Tolerance>> {
        for (name, value) in [("--rtol", self.rtol), ("--rtol64", self.rtol64), ("--atol", self.atol)] {
            if let Some(v) = value {
                anyhow::ensure!(v.is_finite() && v >= 0.0, "{name} must be a non-negative number, got {v}");
            }
        }
        if self.rtol.is_none() && self.rtol64.is_none() && self.atol.is_none() && !self.fixed_tolerance {
            return Ok(None);
        }
        let d = Tolerance::default();
        Ok(Some(Tolerance {
            rtol32: self.rtol.unwrap_or(d.rtol32),
            rtol64: self.rtol64.unwrap_or(d.rtol64),
            atol: self.atol.unwrap_or(d.atol),
            accumulation: !self.fixed_tolerance,
        }))
    }

    /// `--data` opened with the dataset options, or synthetic data of the dtype and
    /// shapes given.
    fn data(&self) -> anyhow::Result<DataSource> {
        if let Some(path) = &self.data {
            let dataset = dataset::open(path, &self.dataset.open_options()?)?;
            return Ok(DataSource::Dataset { name: path.display().to_string(), dataset });
        }
        if let Some(flag) = self.dataset.names_a_file_option() {
            anyhow::bail!("{flag} is an option of the --data file; the synthetic data takes --dtype and the shapes");
        }
        let d = Synthetic::default();
        let dtype = match &self.dataset.dtype {
            Some(name) => {
                DType::parse(name).ok_or_else(|| anyhow!("--dtype '{name}' is not a dtype (float32, uint16, ...)"))?
            }
            None => d.dtype,
        };
        Ok(DataSource::Synthetic(Synthetic {
            nav: self.dataset.nav_shape.clone().map_or(d.nav, |s| s.0),
            sig: self.dataset.sig_shape.clone().map_or(d.sig, |s| s.0),
            dtype,
            seed: self.seed,
        }))
    }

    /// `--check` groups (`None`: all).
    fn groups(&self) -> anyhow::Result<Option<Vec<Group>>> {
        if self.checks.is_empty() {
            return Ok(None);
        }
        let group = |g: &String| {
            Group::parse(g).filter(|g| *g != Group::Vectors && *g != Group::Run).ok_or_else(|| {
                anyhow!(
                    "--check '{g}' is not a check group (invariance, roi, merge, declarations, determinism, \
                     robustness, resources)"
                )
            })
        };
        self.checks.iter().map(group).collect::<anyhow::Result<Vec<_>>>().map(Some)
    }
}

pub fn conformance(args: ConformanceArgs) -> Result<(), Failure> {
    if args.vectors.is_none() && args.plugins.len() != 1 {
        return Err(anyhow!("give one plugin to check (several only with --vectors)").into());
    }
    if args.threads == 0 {
        return Err(anyhow!("--threads must be at least 1").into());
    }
    let tolerance = args.tolerance()?;
    let logger = if args.verbose { crate::log::stderr(crate::log::LogLevel::Warn) } else { crate::log::discard() };
    let runtime = args.runtime.build(logger, args.threads, args.plugins.len())?;
    let udfs = crate::loader::load_sources(&runtime, &args.plugins).map_err(super::load_failure)?.udfs;
    let report = match &args.vectors {
        Some(dir) => conformance::check_vectors(dir, &udfs, args.threads.min(2), tolerance)?,
        None => {
            let config = Config {
                params: crate::params::assign(&udfs, &args.params)?.remove(0),
                data: args.data()?,
                tolerance: tolerance.unwrap_or_default(),
                threads: args.threads,
                groups: args.groups()?,
                seed: args.seed,
            };
            conformance::check_plugin(udfs[0].clone(), &config)?
        }
    };
    let json = format!("{}\n", serde_json::to_string_pretty(&report)?);
    if let Some(path) = &args.report {
        std::fs::write(path, &json).map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    }
    super::print(if args.json { json } else { report.to_text(args.verbose) })?;
    if report.passed {
        Ok(())
    } else {
        Err(Failure {
            code: exit::PLUGIN_FAILURE,
            error: anyhow!("{} conformance check(s) failed: {}", report.counts.fail, report.failed().join(", ")),
        })
    }
}
