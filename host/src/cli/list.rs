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
        println!("{}", serde_json::to_string_pretty(&list)?);
        return Ok(());
    }
    println!("Built-ins (run them as {}NAME, e.g. `udf-host run builtin:sum data.npy`):", crate::builtins::PREFIX);
    for udf in &all {
        let d = udf.description();
        println!();
        println!("{} — {}", d.name, d.summary);
        print!("{}", params_text(d));
    }
    Ok(())
}
