//! `bench`'s results file, `bench.json`, as types: `export` writes a
//! [`BenchFile`] and `post` and `table` read one back with
//! [`BenchFile::parse`], so every reader sees the same fields by name
//! (the first of xtask's files to be typed both ways; `Results` is the
//! run's). Its labels are the one value the exports write every label
//! from (`export::Labels`): the clock the figures are in, the profile, the
//! accelerator and the baseline.

use std::collections::BTreeMap;

use anyhow::{anyhow, bail, Result};
use serde::{Deserialize, Serialize};

use super::Clock;

/// Schema of `bench.json`. Fields added since (`command`, `code`,
/// `fixed_costs`, a metric's `text`, `measure` and `one_cpu`) read as empty
/// from an older file.
pub const BENCH_SCHEMA: u32 = 1;

/// The kind `bench.json` names itself with.
pub const BENCH_KIND: &str = "bench";

/// Per set, per metric, one value per boot (or per batch).
pub type Table = BTreeMap<String, BTreeMap<String, Vec<f64>>>;

/// A whole `bench.json`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct BenchFile {
    pub schema: u32,
    /// [`BENCH_KIND`]: told apart from a run's results file.
    pub kind: String,
    /// `20261207T063000Z`, the export directory's name.
    pub timestamp: String,
    /// Boots per set.
    pub boots: u32,
    /// The clock the figures are in (`icount`, `tsc`, `model`): under the
    /// model, `model`, though the guest read icount.
    pub clock: String,
    /// Under the model: the profile and virt (`modern`, `p4, virt ept`).
    pub profile: Option<String>,
    /// `tcg`, `kvm`, `bochs`.
    pub accel: String,
    /// The set every other is compared against (absent from files written
    /// before the field: the first set, as it was then).
    #[serde(default)]
    pub baseline: String,
    /// The first boot's machine (`QEMU 7.2.0 TCG  clock=...  cpu=qemu32`).
    pub machine: String,
    /// The comparisons' confidence level, in percent.
    pub confidence: f64,
    /// The sets, the baseline first.
    pub sets: Vec<SetInfo>,
    /// What differs between a saved baseline and this run but compares.
    pub notes: Vec<String>,
    /// Each compared metric.
    pub metrics: BTreeMap<String, MetricEntry>,
    pub summary: Summary,
    /// Per set, per metric, one value per boot.
    pub values: Table,
    /// Per set, per metric, every batch's value per operation.
    pub batches: Table,
    /// The command that reproduces the bench (`cargo xtask bench ...`, its
    /// revisions as commits); empty in older files.
    #[serde(default)]
    pub command: String,
    /// What code differs between each later set's build and the
    /// baseline's; empty in older files.
    #[serde(default)]
    pub code: Vec<CodeDiff>,
    /// Under the model: the profile entries that price the instructions
    /// `code` lists, with their sources.
    #[serde(default)]
    pub fixed_costs: Vec<FixedCost>,
}

/// A set as the exports describe it.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct SetInfo {
    pub name: String,
    /// How it differs (`cmdline: entry=int80`, `rev: HEAD~1`).
    pub how: String,
    pub provenance: Provenance,
}

/// One compared metric.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct MetricEntry {
    pub unit: String,
    /// Which way is better, in words (`instructions per operation, lower
    /// is better`).
    pub reads: String,
    pub changed: bool,
    /// Per later set: the verdict in words.
    pub verdicts: BTreeMap<String, String>,
    /// Its plot's file name.
    pub plot: String,
    /// Higher is better (a throughput).
    #[serde(default)]
    pub higher_is_better: bool,
    /// The comparison as `bench` printed it (`ministat.txt` holds them all).
    #[serde(default)]
    pub text: String,
}

/// What the comparison found, over every metric measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Metrics that changed (by at least the threshold).
    pub changed: Vec<String>,
    /// Metrics compared and found unchanged (under an exact clock, those no
    /// set differs in are unchanged without a comparison of their own).
    pub unchanged: Vec<String>,
    pub threshold: f64,
}

impl Summary {
    /// `bench: 12 metrics compared: 2 changed (null, macro); 10 unchanged (...)`.
    pub fn line(&self) -> String {
        let list = |v: &[String]| {
            if v.is_empty() {
                String::new()
            } else {
                format!(" ({})", v.join(", "))
            }
        };
        format!(
            "bench: {} metrics compared: {} changed{}{}; {} unchanged{}",
            self.changed.len() + self.unchanged.len(),
            self.changed.len(),
            if self.threshold > 0.0 {
                format!(" by {}% or more", self.threshold)
            } else {
                String::new()
            },
            list(&self.changed),
            self.unchanged.len(),
            list(&self.unchanged)
        )
    }
}

/// Where a set of figures comes from: what `run` records of a boot, and
/// what a baseline keeps so that a later comparison can tell like from
/// unlike.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Provenance {
    pub clock: String,
    pub accel: String,
    /// The emulator and its version (`QEMU 7.2.0`).
    pub emulator: String,
    /// The CPU model the emulator was given (`qemu32`, `pentium`, `host`).
    pub cpu_model: String,
    /// The CPU the guest saw (its brand string).
    pub cpu: String,
    pub rev: String,
    pub dirty: bool,
    pub diff: String,
    /// The whole kernel command line.
    pub cmdline: String,
    pub batches: String,
    pub batch_size: String,
    /// The host that ran the emulator, and its CPU.
    pub host: String,
    pub host_cpu: String,
    /// Under the model clock, the profile (and `virt`) the figures are
    /// modelled with; empty otherwise.
    #[serde(default)]
    pub profile: String,
    /// How many CPUs the machine had (0 in exports older than the field).
    #[serde(default)]
    pub cpus: u32,
    /// The settings the kernel applied (its `settings` record: `pmap`,
    /// `fork`, `cpus`); empty in older exports.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub settings: std::collections::BTreeMap<String, String>,
}

impl Provenance {
    /// The emulator's name without its version (`QEMU`).
    pub fn emulator_name(&self) -> &str {
        self.emulator.split_whitespace().next().unwrap_or("")
    }

    /// The clock the figures are in. A model run saved before the field
    /// named the machine's clock says `icount` (the guest's) beside its
    /// profile: its figures are modelled cycles all the same.
    pub fn figures_clock(&self) -> &str {
        if !self.profile.is_empty() && self.clock == Clock::Icount.key() {
            Clock::Model.key()
        } else {
            &self.clock
        }
    }

    /// The revision with its dirty flag, as exports print it.
    pub fn revision(&self) -> String {
        if self.dirty && !self.rev.contains("-dirty") {
            format!("{} (dirty)", self.rev)
        } else {
            self.rev.clone()
        }
    }
}

/// The code that differs between a later set's build and the baseline's,
/// function by function (`cmd::bench::code` compares the two builds'
/// disassembly).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct CodeDiff {
    /// The later set, and the set it is compared with.
    pub set: String,
    pub base: String,
    /// Why no function is listed when none is: the same build, or a
    /// disassembler that could not run. Empty when the builds were compared.
    #[serde(default)]
    pub note: String,
    pub functions: Vec<ChangedFunction>,
}

/// One function whose instructions differ between the two builds.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ChangedFunction {
    /// The binary: `kernel`, or a user program's name.
    pub binary: String,
    /// The symbol, demangled, without its hash (`sysenter_full`,
    /// `kernel::syscall::dispatch`).
    pub name: String,
    /// Instructions only the later build has, and only the baseline has.
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// The instructions of the function (either build) whose cost the
    /// model takes from its profile's table; of a function whose change is
    /// in constants only, just the added and removed ones.
    pub fixed: Vec<FixedInsn>,
    /// The function differs in constants only (the same instructions, other
    /// numbers: the length of the revision string the kernel prints, when
    /// a set is built from another revision).
    #[serde(default)]
    pub constants_only: bool,
}

/// An instruction the model prices from a profile entry.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FixedInsn {
    /// `+` only in the later build, `-` only in the baseline's, ` ` in both.
    pub side: String,
    /// As the disassembler prints it (`lfence`, `popf`, `mov %ecx,%ds`).
    pub text: String,
    /// The profile key that prices it (`lfence`, `sreg_load`).
    pub key: String,
}

/// A profile entry a modelled comparison rests on.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct FixedCost {
    /// The profile (`modern`).
    pub profile: String,
    /// The key and its value in cycles, on top of the profile's `base`.
    pub key: String,
    pub cycles: u64,
    /// The source written beside it in `model/profiles.toml`.
    pub source: String,
}

impl BenchFile {
    /// A `bench.json`'s text; the error says whether it is cut short, is
    /// another of xtask's files, or which field is wrong.
    pub fn parse(text: &str) -> Result<BenchFile> {
        let f: BenchFile = serde_json::from_str(text).map_err(|e| {
            if e.is_eof() {
                anyhow!("it ends early, at line {} (truncated?)", e.line())
            } else if text.contains("\"schema\"") && text.contains("\"benches\"") {
                anyhow!("it is a run's results file, not a bench export")
            } else {
                anyhow!("{e}")
            }
        })?;
        if f.kind != BENCH_KIND {
            bail!("its kind is {:?}, not {BENCH_KIND:?}", f.kind);
        }
        if f.schema != BENCH_SCHEMA {
            bail!(
                "bench schema {} (this xtask reads {BENCH_SCHEMA})",
                f.schema
            );
        }
        if f.sets.is_empty() {
            bail!("it names no sets");
        }
        let mut f = f;
        if f.baseline.is_empty() {
            f.baseline = f.sets[0].name.clone();
        }
        Ok(f)
    }

    /// The clock the figures are in, when this tool knows it.
    pub fn clock(&self) -> Option<Clock> {
        Clock::from_key(&self.clock)
    }

    /// The later sets' names, in order.
    pub fn later(&self) -> impl Iterator<Item = &str> {
        self.sets.iter().skip(1).map(|s| s.name.as_str())
    }

    /// Set `set`'s values of `metric` (empty when it has none).
    pub fn values_of(&self, set: &str, metric: &str) -> &[f64] {
        self.values
            .get(set)
            .and_then(|m| m.get(metric))
            .map_or(&[], Vec::as_slice)
    }

    /// Every metric measured, changed or not, in name order.
    pub fn all_metrics(&self) -> Vec<String> {
        let mut all: Vec<String> = self
            .summary
            .changed
            .iter()
            .chain(&self.summary.unchanged)
            .cloned()
            .collect();
        all.sort();
        all.dedup();
        all
    }
}
