//! `cargo xtask import`: a serial log (e.g. captured from real hardware)
//! turned into results JSON; with `--model FILE`, the model plugin's file
//! of the same boot joins it, as `run --clock model` merges them.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::machine::Clock;
use crate::{kbuild, model, results};

#[derive(Args)]
pub struct ImportArgs {
    /// The serial log (what the kernel printed on COM1).
    log: PathBuf,
    /// The model plugin's file of the same boot (a `--clock model` boot:
    /// `run --model-file`, or QEMU's `-plugin ...,out=FILE`): its modelled
    /// figures join the log's.
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
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

/// What an import of an icount log without `--model` says: the figures
/// are instruction counts, whatever clock the host computed beside them.
pub const NO_MODEL_NOTE: &str = "no modelled figures: a serial log holds the guest's instruction counts only; the model plugin writes its figures to a file of its own (for a --clock model boot give it with --model FILE)";

pub fn import(a: ImportArgs) -> Result<i32> {
    let bytes =
        std::fs::read(&a.log).with_context(|| format!("cannot read {}", a.log.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let mut results = results::Results::from_log(&text, &a.label, results::IMPORT_SOURCE)
        .with_context(|| format!("{} is not a usable testbed log", a.log.display()))?;
    if results.benches.is_empty() {
        bail!(
            "{} holds no benchmark records (was the kernel run with prog=bench, prog=locks or mode=smp?)",
            a.log.display()
        );
    }
    match &a.model {
        Some(file) => with_model(&mut results, &text, &a.log, file)?,
        None if results.clock() == Some(Clock::Icount) => {
            eprintln!("import: {}: {NO_MODEL_NOTE}", a.log.display())
        }
        None => {}
    }
    if a.json {
        print!("{}", results.to_json()?);
    } else {
        print!("{}", results.table());
        if results.model_profile.is_some() {
            println!();
            print!("{}", model::table(&results));
        }
    }
    if !a.no_save {
        let path = results.save(&kbuild::root().join("results"))?;
        eprintln!("results: {}", path.display());
    }
    Ok(0)
}

/// Merges the plugin's file `file` into the results of the log `log_path`
/// (text `log`): the file must be a finished model file, the log an icount
/// boot's with model snapshots, and every snapshot the log names must be
/// in the file.
fn with_model(r: &mut results::Results, log: &str, log_path: &Path, file: &Path) -> Result<()> {
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read the model file {}", file.display()))?;
    let parsed = model::parse_file(&text)
        .with_context(|| format!("{} is not a finished model plugin file", file.display()))?;
    if r.clock() != Some(Clock::Icount) {
        bail!(
            "{} is a clock={} boot's log: a model boot runs under icount, so {} cannot be its model file",
            log_path.display(),
            r.clock,
            file.display()
        );
    }
    model::apply(r, log, &parsed).with_context(|| {
        format!(
            "{} and {} are not the log and the model file of one boot",
            log_path.display(),
            file.display()
        )
    })?;
    // The entry benchmarks count the same instructions under icount and in
    // the model (the boot tests hold them to it): a file of another build
    // or command line shows here, even where its snapshots pair.
    for b in r
        .benches
        .iter()
        .filter(|b| abi::Mechanism::from_key(&b.mech).is_some())
    {
        if let Some(m) = b.model.as_ref().filter(|m| m.insns != b.median) {
            bail!(
                "{} and {} are not the log and the model file of one boot: {}: the model counted {} instructions per call, the log {}",
                log_path.display(),
                file.display(),
                b.name,
                m.insns,
                b.median
            );
        }
    }
    let modelled = model::metrics(r).len();
    if modelled == 0 {
        bail!(
            "{} names no model snapshots (a kernel older than the model clock?): nothing of {} to import",
            log_path.display(),
            file.display()
        );
    }
    eprintln!(
        "import: {modelled} figures {} from {}",
        model::label(&parsed.profile, parsed.virt),
        file.display()
    );
    Ok(())
}
