//! `cargo xtask post DIR`: the post of a bench already run, from its
//! results directory's `bench.json` (the typed file, read once): the text
//! to paste under a patch, as plain text or (`--md`) Markdown.

use std::path::PathBuf;

use anyhow::{Context, Result};
use clap::Args;

use crate::export::post::{post as render, Form};
use crate::results::bench::BenchFile;

#[derive(Args)]
pub struct PostArgs {
    /// A bench's results directory (results/bench/<timestamp>/) or its
    /// bench.json.
    pub dir: PathBuf,
    /// Markdown (a forge's pull request) instead of plain text (a mail).
    #[arg(long)]
    pub md: bool,
}

/// `cargo xtask post`: prints the post; a directory without a readable
/// `bench.json` is an error naming the file and what is wrong with it.
pub fn post(a: PostArgs) -> Result<i32> {
    let file = if a.dir.is_dir() {
        a.dir.join("bench.json")
    } else {
        a.dir.clone()
    };
    let text = std::fs::read_to_string(&file).with_context(|| {
        format!(
            "cannot read {} (give a bench's results directory, results/bench/<timestamp>/, or its bench.json)",
            file.display()
        )
    })?;
    let f = BenchFile::parse(&text)
        .with_context(|| format!("{} is not a bench's results file", file.display()))?;
    print!(
        "{}",
        render(&f, if a.md { Form::Markdown } else { Form::Text })
    );
    Ok(0)
}
