//! `udf-host conformance PLUGIN`: run the conformance kit ([`crate::conformance`]) on a
//! plugin and print the report; `--vectors DIR` runs test vectors instead.

use super::{Failure, RuntimeArgs, Shape, exit};
use crate::conformance::{self, Config, DataSource, Group, Synthetic, Tolerance};
use crate::dataset::{self, Format, OpenOptions};
use crate::dtype::{DType, StoredDType};
use crate::udf::Udf;
use crate::wasm::WasmRuntime;
use anyhow::anyhow;
use clap::Args;
use std::path::PathBuf;
use std::sync::Arc;

#[derive(Args)]
pub struct ConformanceArgs {
    /// The plugin (.wasm component); with --vectors, one or more.
    #[arg(required = true, value_name = "PLUGIN")]
    plugins: Vec<PathBuf>,
    /// A parameter for the plugin: NAME=VALUE or NAME=@array.npy.
    #[arg(long = "param", short = 'p', value_name = "NAME=VALUE")]
    params: Vec<String>,
    /// Check on this dataset instead of synthetic data.
    #[arg(long, value_name = "FILE")]
    data: Option<PathBuf>,
    /// Dataset format of --data (default: detected).
    #[arg(long, value_name = "raw|npy|mib|...", requires = "data")]
    format: Option<String>,
    /// Element type: of the synthetic data (default float32), or of raw --data ('>u2'...).
    #[arg(long)]
    dtype: Option<String>,
    /// Nav shape: of the synthetic data (default 4,6), or of --data.
    #[arg(long)]
    nav_shape: Option<Shape>,
    /// Sig (frame) shape: of the synthetic data (default 16,16), or of --data.
    #[arg(long)]
    sig_shape: Option<Shape>,
    /// Bytes to skip at the start of a raw --data file.
    #[arg(long, default_value_t = 0, requires = "data")]
    offset: u64,
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

    fn data(&self) -> anyhow::Result<DataSource> {
        let Some(path) = &self.data else {
            let d = Synthetic::default();
            let dtype = match &self.dtype {
                Some(name) => DType::parse(name)
                    .ok_or_else(|| anyhow!("--dtype '{name}' is not a dtype (float32, uint16, ...)"))?,
                None => d.dtype,
            };
            return Ok(DataSource::Synthetic(Synthetic {
                nav: self.nav_shape.clone().map_or(d.nav, |s| s.0),
                sig: self.sig_shape.clone().map_or(d.sig, |s| s.0),
                dtype,
                seed: self.seed,
            }));
        };
        let options = OpenOptions {
            format: self
                .format
                .as_deref()
                .map(|f| Format::parse(f).ok_or_else(|| anyhow!("unknown --format '{f}' ({})", Format::NAMES)))
                .transpose()?,
            dtype: self
                .dtype
                .as_deref()
                .map(|d| {
                    StoredDType::parse(d).ok_or_else(|| anyhow!("--dtype '{d}' is not a dtype (try float32, '>u2')"))
                })
                .transpose()?,
            nav_shape: self.nav_shape.clone().map(|s| s.0),
            sig_shape: self.sig_shape.clone().map(|s| s.0),
            offset: self.offset,
            ..OpenOptions::default()
        };
        let dataset = dataset::open(path, &options)?;
        Ok(DataSource::Dataset { name: path.display().to_string(), dataset })
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
    let instances = ((args.threads + 2) * args.plugins.len()).max(4) as u32;
    let runtime = WasmRuntime::new(args.runtime.options(logger, instances)?)?;
    let mut udfs: Vec<Arc<dyn Udf>> = Vec::new();
    for path in &args.plugins {
        let (udf, _) = runtime.load(path).map_err(|e| Failure {
            code: if e.kind.is_users() { exit::USER_ERROR } else { exit::PLUGIN_FAILURE },
            error: e.into(),
        })?;
        udfs.push(Arc::new(udf));
    }

    let report = match &args.vectors {
        Some(dir) => conformance::check_vectors(dir, &udfs, args.threads.min(2), tolerance)?,
        None => {
            let specs = super::run::assign_params(&udfs, &args.params)?;
            let groups = if args.checks.is_empty() {
                None
            } else {
                Some(
                    args.checks
                        .iter()
                        .map(|g| {
                            Group::parse(g).filter(|g| *g != Group::Vectors && *g != Group::Run).ok_or_else(|| {
                                anyhow!(
                                    "--check '{g}' is not a check group (invariance, roi, merge, declarations, \
                                     determinism, robustness, resources)"
                                )
                            })
                        })
                        .collect::<anyhow::Result<Vec<_>>>()?,
                )
            };
            let config = Config {
                params: specs[0].params.clone(),
                data: args.data()?,
                tolerance: tolerance.unwrap_or_default(),
                threads: args.threads,
                groups,
                seed: args.seed,
            };
            conformance::check_plugin(udfs[0].clone(), &config)?
        }
    };
    let json = serde_json::to_string_pretty(&report)?;
    if let Some(path) = &args.report {
        std::fs::write(path, format!("{json}\n")).map_err(|e| anyhow!("cannot write {}: {e}", path.display()))?;
    }
    if args.json {
        super::print(format!("{json}\n"))?;
    } else {
        super::print(report.to_text(args.verbose))?;
    }
    if report.passed {
        Ok(())
    } else {
        Err(Failure {
            code: exit::PLUGIN_FAILURE,
            error: anyhow!("{} conformance check(s) failed: {}", report.counts.fail, report.failed().join(", ")),
        })
    }
}
