//! Where a set of figures comes from, and the saved baselines: a baseline
//! compares with a run only on the same clock, accelerator, emulator and CPU.

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::results::sanitize;

/// A baseline's file name from `--save-baseline`/`--baseline`, cleaned as
/// `--label` is, so that it stays inside `<out>/baselines`.
pub fn baseline_name(name: &str) -> Result<String> {
    let clean = sanitize(name.trim());
    if clean.is_empty() || clean.chars().all(|c| c == '_') {
        bail!("a baseline needs a name of letters, digits, '-' or '_': got {name:?}");
    }
    Ok(clean)
}

pub use crate::results::bench::Provenance;

/// Why the figures of `base` (a baseline) and `now` cannot be compared:
/// another clock, accelerator, emulator or CPU model. The second list is
/// what differs but still compares (and must be said): the revision, the
/// command line, the batching, the emulator's version, the host.
pub fn baseline_mismatch(base: &Provenance, now: &Provenance) -> (Vec<String>, Vec<String>) {
    let mut refuse = Vec::new();
    let mut flag = Vec::new();
    let mut check = |what: &str, a: &str, b: &str, hard: bool| {
        if a != b {
            let line = format!("{what}: baseline {a:?}, this run {b:?}");
            if hard {
                refuse.push(line);
            } else {
                flag.push(line);
            }
        }
    };
    check("clock", base.figures_clock(), now.figures_clock(), true);
    check("accelerator", &base.accel, &now.accel, true);
    check("emulator", base.emulator_name(), now.emulator_name(), true);
    check("CPU model", &base.cpu_model, &now.cpu_model, true);
    check("guest CPU", &base.cpu, &now.cpu, true);
    check("model profile", &base.profile, &now.profile, true);
    check("revision", &base.revision(), &now.revision(), false);
    check("kernel command line", &base.cmdline, &now.cmdline, false);
    check("batches", &base.batches, &now.batches, false);
    check("batch size", &base.batch_size, &now.batch_size, false);
    check("emulator version", &base.emulator, &now.emulator, false);
    check("host", &base.host, &now.host, false);
    (refuse, flag)
}

#[derive(Serialize, Deserialize)]
pub(super) struct Baseline {
    pub(super) label: String,
    /// Absent in a baseline saved by an older xtask: such a baseline is
    /// refused (it cannot say what it was measured on).
    #[serde(default)]
    pub(super) provenance: Option<Provenance>,
    pub(super) metrics: BTreeMap<String, Vec<f64>>,
}

/// Step 2: the saved baseline `name`, from `<out>/baselines/<name>.json`.
pub(super) fn load_baseline(out: &Path, name: &str) -> Result<Baseline> {
    let p = out
        .join("baselines")
        .join(format!("{}.json", baseline_name(name)?));
    let text = std::fs::read_to_string(&p)
        .with_context(|| format!("no saved baseline {name:?} ({})", p.display()))?;
    parse_baseline(&text).with_context(|| format!("{} is not a baseline file", p.display()))
}

/// A baseline file's text.
fn parse_baseline(text: &str) -> Result<Baseline> {
    Ok(serde_json::from_str::<Baseline>(text)?)
}

/// What `bench --baseline` does with a saved baseline's text before it
/// compares: reads it and checks it against this run's provenance (`now`,
/// or the baseline's own where `None`), giving what differs. For the fuzz
/// target, which has no saved baselines and no run.
pub(crate) fn read_and_check(text: &str, now: Option<&Provenance>) -> Result<Vec<String>> {
    let b = parse_baseline(text)?;
    let own = b.provenance.clone().unwrap_or_default();
    check_baseline(&b, now.unwrap_or(&own))
}

/// A baseline compares with this run only on the same clock, accelerator,
/// emulator and CPU; returns what differs but compares, to be said.
pub(super) fn check_baseline(b: &Baseline, now: &Provenance) -> Result<Vec<String>> {
    let Some(p) = &b.provenance else {
        bail!(
            "baseline {:?} was saved by an older xtask and does not say what it was measured on (clock, accelerator, CPU); save it again",
            b.label
        );
    };
    let (refuse, flag) = baseline_mismatch(p, now);
    if !refuse.is_empty() {
        bail!(
            "baseline {:?} was measured on another machine, so its figures do not compare with this run's: {}",
            b.label,
            refuse.join("; ")
        );
    }
    Ok(flag
        .into_iter()
        .map(|f| format!("baseline {:?} differs in {f}", b.label))
        .collect())
}

/// Step 6: the first variant's figures as baseline `name`, with where they
/// come from.
pub(super) fn save_baseline(
    out: &Path,
    name: &str,
    first: &str,
    provenance: &Provenance,
    metrics: BTreeMap<String, Vec<f64>>,
) -> Result<()> {
    let file = baseline_name(name)?;
    let b = Baseline {
        label: file.clone(),
        provenance: Some(provenance.clone()),
        metrics,
    };
    let dir = out.join("baselines");
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the baseline directory {}", dir.display()))?;
    let p = dir.join(format!("{file}.json"));
    std::fs::write(&p, serde_json::to_string_pretty(&b)? + "\n")
        .with_context(|| format!("cannot write {}", p.display()))?;
    eprintln!(
        "baseline {file:?} saved from variant {first}: {}",
        p.display()
    );
    Ok(())
}
