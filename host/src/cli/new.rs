//! `udf-host new PATH --lang LANG [--template TEMPLATE]`: start a plugin project
//! ([`crate::scaffold`]).

use super::Failure;
use crate::scaffold::{self, Language, Template};
use clap::Args;
use clap::builder::PossibleValuesParser;
use std::path::PathBuf;

#[derive(Args)]
pub struct NewArgs {
    /// The folder to create; its name is the plugin's name (lowercase letters, digits, '-'
    /// and '_', starting with a letter), e.g. `my-sum` or `plugins/my-sum`.
    path: PathBuf,
    /// The language of the plugin.
    #[arg(long, value_parser = PossibleValuesParser::new(Language::ALL.map(Language::flag)))]
    lang: String,
    /// What the plugin computes to start with: sum (the sum of all frames: a sig buffer,
    /// tile method, a custom merge), frame-map (the mean of each frame: a nav buffer,
    /// frame method) or masks (dot products of each frame with a stack of masks, param
    /// `masks`: virtual detectors).
    #[arg(long, default_value = "sum", value_parser = PossibleValuesParser::new(Template::ALL.map(Template::flag)))]
    template: String,
}

pub fn new(args: NewArgs) -> Result<(), Failure> {
    // Both are among the possible values clap checked.
    let lang = Language::ALL.into_iter().find(|l| l.flag() == args.lang).unwrap_or(Language::Rust);
    let template = Template::ALL.into_iter().find(|t| t.flag() == args.template).unwrap_or(Template::Sum);
    scaffold::create(&args.path, lang, template)?;
    eprintln!(
        "created {}, a {} plugin: {}. Next:\n  cd {} && ./build.sh && ./test.sh",
        args.path.display(),
        lang.title(),
        template.summary(),
        args.path.display()
    );
    Ok(())
}
