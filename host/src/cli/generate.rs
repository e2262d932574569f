//! `udf-host generate`: write a sample dataset.

use super::{Failure, Shape};
use crate::dtype::{ByteOrder, StoredDType};
use crate::sample::{self, Pattern, SampleSpec};
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Args)]
pub struct GenerateArgs {
    /// Output file (`.npy` for NumPy format, anything else for raw binary).
    out: PathBuf,
    /// Nav shape (scan), e.g. 32,32.
    #[arg(long, default_value = "32,32")]
    nav_shape: Shape,
    /// Sig shape (frame), e.g. 64,64.
    #[arg(long, default_value = "64,64")]
    sig_shape: Shape,
    /// Element type, NumPy style: float32, uint16, '>u2' (big-endian), ...
    #[arg(long, default_value = "float32")]
    dtype: String,
    /// `disk` (synthetic scan with a moving disk) or `random` (0/1 with outliers).
    #[arg(long, default_value = "disk")]
    pattern: String,
    /// Random seed.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

pub fn generate(args: GenerateArgs) -> Result<(), Failure> {
    let stored = StoredDType::parse(&args.dtype)
        .with_context(|| format!("'{}' is not a dtype (try float32, uint16, '>u2')", args.dtype))?;
    let pattern = Pattern::parse(&args.pattern)
        .with_context(|| format!("'{}' is not a pattern (disk or random)", args.pattern))?;
    let npy = args.out.extension().is_some_and(|e| e.eq_ignore_ascii_case("npy"));
    if npy && stored.order == ByteOrder::Big {
        return Err(
            anyhow::anyhow!("big-endian data can only be written as raw (use a name not ending in .npy)").into()
        );
    }
    let spec = SampleSpec {
        pattern,
        nav: args.nav_shape.0.clone(),
        sig: args.sig_shape.0.clone(),
        dtype: stored.dtype,
        order: stored.order,
        npy,
        seed: args.seed,
    };
    sample::write(&args.out, &spec).with_context(|| format!("cannot write {}", args.out.display()))?;
    let frames: usize = args.nav_shape.0.iter().product();
    let bytes = frames * args.sig_shape.0.iter().product::<usize>() * stored.dtype.size();
    eprintln!(
        "wrote {} ({} frames of {:?}, {}, {:.1} MiB)",
        args.out.display(),
        frames,
        args.sig_shape.0,
        stored,
        bytes as f64 / (1 << 20) as f64
    );
    Ok(())
}
