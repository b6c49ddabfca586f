//! `cargo xtask import`: a serial log (e.g. captured from real hardware)
//! turned into results JSON.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::{kbuild, results};

#[derive(Args)]
pub struct ImportArgs {
    /// The serial log (what the kernel printed on COM1).
    log: PathBuf,
    /// Label in the results file name.
    #[arg(long, default_value = "import")]
    label: String,
    /// Print the JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Do not write a results file.
    #[arg(long)]
    no_save: bool,
}

pub fn import(a: ImportArgs) -> Result<i32> {
    let bytes =
        std::fs::read(&a.log).with_context(|| format!("cannot read {}", a.log.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let results = results::Results::from_log(&text, &a.label, results::IMPORT_SOURCE)
        .with_context(|| format!("{} is not a usable testbed log", a.log.display()))?;
    if results.benches.is_empty() {
        bail!(
            "{} holds no benchmark records (was the kernel run with prog=bench, prog=locks or mode=smp?)",
            a.log.display()
        );
    }
    if a.json {
        print!("{}", results.to_json()?);
    } else {
        print!("{}", results.table());
    }
    if !a.no_save {
        let path = results.save(&kbuild::root().join("results"))?;
        eprintln!("results: {}", path.display());
    }
    Ok(0)
}
