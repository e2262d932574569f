//! `udf-host list`: the native built-ins and their parameters.

use super::Failure;
use super::inspect::{description_json, params_text};
use clap::Args;

#[derive(Args)]
pub struct ListArgs {
    /// Print JSON instead of text.
    #[arg(long)]
    json: bool,
}

pub fn list(args: ListArgs) -> Result<(), Failure> {
    let all = crate::builtins::all();
    if args.json {
        let list: Vec<serde_json::Value> = all.iter().map(|u| description_json(u.description())).collect();
        super::print(format!("{}\n", serde_json::to_string_pretty(&list)?))?;
        return Ok(());
    }
    let mut text =
        format!("Built-ins (run them as {}NAME, e.g. `udf-host run builtin:sum data.npy`):\n", crate::builtins::PREFIX);
    for udf in &all {
        let d = udf.description();
        text.push_str(&format!("\n{} — {}\n", d.name, d.summary));
        text.push_str(&params_text(d));
    }
    super::print(text)?;
    Ok(())
}
