//! Step 3: the boots, interleaved round by round, and what they measured.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressFinish, ProgressStyle};

use crate::compare::{self, Table};
use crate::kbuild::Artifacts;
use crate::machine::{Backend, Clock, Machine};
use crate::results::{MetricInfo, Results};

use super::baseline::Provenance;
use super::plan::{BenchArgs, Variant};

/// What the boots measured: per variant, per metric, one value per boot
/// (and every batch's value per operation, where the boot kept them), how
/// each metric reads, the clock the figures are in, the accelerator and
/// unit the kernel reported, and where each variant's figures come from.
pub(super) struct Measured {
    pub(super) table: Table,
    pub(super) batches: Table,
    pub(super) infos: BTreeMap<String, MetricInfo>,
    /// The machine's clock, not the one the guest read: a model boot's
    /// guest reads icount, its figures are modelled cycles.
    pub(super) clock: Clock,
    /// Under the model: the profile and virt (`modern, virt ept`).
    pub(super) profile: Option<String>,
    pub(super) accel: String,
    pub(super) unit: String,
    /// The first boot's machine (`QEMU 7.2.0 TCG  clock=...  cpu=qemu32`).
    pub(super) machine: String,
    pub(super) provenance: BTreeMap<String, Provenance>,
}

/// The host's CPU, from /proc/cpuinfo.
pub(super) fn host_cpu() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "?".into())
}

/// Step 3: `--boots` rounds, each booting every variant once: A B A B ...,
/// so drift in the host hits every variant alike. A boot whose kernel
/// warned about its command line fails the bench.
pub(super) fn boot_interleaved(
    a: &BenchArgs,
    variants: &[Variant],
    builds: &[Artifacts],
    tmp: &Path,
    started: Instant,
) -> Result<Measured> {
    let spec = a.boot.spec()?;
    // The accelerator notice once, before the progress bar takes the line.
    let _ = Backend::decide(&spec.backend);
    let total = a.boots as usize * variants.len();
    let mut m = Measured {
        table: BTreeMap::new(),
        batches: BTreeMap::new(),
        infos: BTreeMap::new(),
        clock: Clock::Icount,
        profile: None,
        accel: String::new(),
        unit: String::new(),
        machine: String::new(),
        provenance: BTreeMap::new(),
    };
    let mut emulator = String::new();
    let host_cpu = host_cpu();
    let mut done = 0usize;
    let bar = progress(total, started);
    for round in 0..a.boots {
        for (v, art) in variants.iter().zip(builds) {
            bar.set_position(done as u64);
            bar.set_message(format!(", running {}", v.name));
            let words = format!("{} prog={} {}", a.mode.word(), a.prog, v.cmdline)
                .trim()
                .to_string();
            let mut machine = Machine::build(&spec, art, &words, tmp)?;
            // Each round a boot of its own, even in a test run's boot cache.
            machine.series = round;
            if emulator.is_empty() {
                emulator = machine.emulator();
                m.machine = machine.describe();
            }
            let log = machine.boot(&mut |_| {})?;
            if !log.succeeded() {
                eprintln!();
                bail!(
                    "variant {}: boot {} failed: {}",
                    v.name,
                    done + 1,
                    log.explain(20)
                );
            }
            let mut r = Results::from_log(&log.serial, &v.name, machine.backend.source())
                .with_context(|| format!("variant {}: boot {}", v.name, done + 1))?;
            crate::model::finish(machine.model.as_ref(), &log.serial, &mut r)?;
            if !r.warnings.is_empty() {
                eprintln!();
                bail!(
                    "variant {}: the kernel warned about its command line ({}): {}",
                    v.name,
                    r.cmdline,
                    r.warnings.join("; ")
                );
            }
            // Each boot of a variant must be the configuration its words
            // ask, and the same as the variant's first boot.
            let c = r.contradicted();
            if !c.is_empty() {
                eprintln!();
                bail!(
                    "variant {}: boot {}: the kernel's settings record contradicts the command line: {}",
                    v.name,
                    done + 1,
                    c.join("; ")
                );
            }
            if let Some(p) = m.provenance.get(&v.name) {
                if p.settings != r.settings {
                    eprintln!();
                    bail!(
                        "variant {}: boot {} applied {:?}, an earlier boot {:?}",
                        v.name,
                        done + 1,
                        r.settings,
                        p.settings
                    );
                }
            }
            // The kernel must have read the clock the machine gave it (a
            // CPU without a TSC reports `none`, which says so itself).
            let guest = r.guest_clock();
            if Clock::from_key(guest).is_some() && guest != machine.clock.guest().key() {
                eprintln!();
                bail!(
                    "variant {}: boot {}: the kernel read clock={}, the machine gave it {} (clock={})",
                    v.name,
                    done + 1,
                    guest,
                    machine.clock.key(),
                    machine.clock.guest().key()
                );
            }
            let profile = profile_of(&r);
            if machine.clock == Clock::Model && profile.is_none() {
                eprintln!();
                bail!(
                    "variant {}: boot {}: a model boot without the model's figures",
                    v.name,
                    done + 1
                );
            }
            m.clock = machine.clock;
            m.profile = profile.clone();
            m.accel = r.accel.clone();
            m.unit = crate::model::unit(&r).unwrap_or_else(|| r.unit.clone());
            for (k, i) in r.metric_info() {
                m.infos.entry(k).or_default().merge(i);
            }
            m.provenance
                .entry(v.name.clone())
                .or_insert_with(|| Provenance {
                    clock: machine.clock.key().into(),
                    accel: r.accel.clone(),
                    emulator: emulator.clone(),
                    cpu_model: machine.cpu_model(),
                    cpus: r.cpus_started().unwrap_or(machine.cpus),
                    settings: r.settings.clone(),
                    cpu: r.cpu.get("brand").cloned().unwrap_or_default(),
                    rev: r.rev.clone(),
                    dirty: r.dirty,
                    diff: r.diff.clone(),
                    cmdline: r.cmdline.clone(),
                    batches: r.timing.get("batches").cloned().unwrap_or_default(),
                    batch_size: r.timing.get("batch_size").cloned().unwrap_or_default(),
                    host: r.host.clone(),
                    host_cpu: host_cpu.clone(),
                    profile: r
                        .model_profile
                        .as_ref()
                        .map(|p| crate::model::label(p, r.virt()))
                        .unwrap_or_default(),
                });
            for (k, val) in compare::metrics_of(&r) {
                m.table
                    .entry(v.name.clone())
                    .or_default()
                    .entry(k)
                    .or_default()
                    .push(val);
            }
            for b in r
                .benches
                .iter()
                .filter(|b| b.measure == abi::report::Measure::PerOp && b.batch_size > 0)
            {
                m.batches
                    .entry(v.name.clone())
                    .or_default()
                    .entry(b.name.clone())
                    .or_default()
                    .extend(crate::model::cycle_samples(b).unwrap_or_else(|| {
                        b.samples
                            .iter()
                            .map(|s| *s as f64 / b.batch_size as f64)
                            .collect()
                    }));
            }
            done += 1;
        }
    }
    bar.set_message("");
    bar.finish();
    if !bar.is_hidden() {
        eprintln!();
    }
    Ok(m)
}

/// Under the model: the profile and virt a boot's figures are modelled
/// with (`modern`, `p4, virt ept`); `None` for every other clock.
fn profile_of(r: &Results) -> Option<String> {
    let p = r.model_profile.as_ref()?;
    let label = crate::model::label(p, r.virt());
    Some(
        label
            .strip_prefix("modelled, profile ")
            .unwrap_or(&label)
            .to_string(),
    )
}

/// A one-line progress bar on stderr (indicatif's; nothing when stderr is
/// not a terminal): boots done, ETA, the variant running. A boot that fails
/// ends the line (`eprintln!()`) before its error; the bar, dropped then,
/// clears only that empty line.
fn progress(total: usize, started: Instant) -> ProgressBar {
    let style = ProgressStyle::with_template("[{bar:30}] {pos}/{len} boots, ETA {eta}{msg}")
        .expect("a valid template")
        .progress_chars("##.");
    ProgressBar::new(total as u64)
        .with_style(style)
        .with_elapsed(started.elapsed())
        .with_finish(ProgressFinish::AndClear)
}
