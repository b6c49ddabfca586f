//! A boot's report as data: the records of one serial log gathered into
//! [`Results`], checked for consistency, rendered as the human table, and
//! stored as `results/<timestamp>-<label>.json`.
//!
//! The same parser reads a log captured from real hardware
//! (`cargo xtask import serial.log`).
//!
//! This file is the JSON shape (the structs, what they answer, the file
//! written and read back); `gather` turns a log's records into it and
//! `table` renders it for a reader; `figures` holds a model run's figures,
//! `clock` the clocks a run's figures can be in, `bench` a `bench.json`.
//!
//! The results are xtask's bottom layer: they import only the record
//! parser (`report`), so every command reads a run as these types, in
//! process (the book's tables boot through `cmd::run::ran` and read
//! [`Results`]), and no reader indexes JSON by string keys.

pub mod bench;
mod clock;
pub mod figures;
mod gather;
#[cfg(test)]
mod hostile;
pub mod overlap;
mod table;
#[cfg(test)]
mod tests;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use abi::report::Measure;
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

pub use clock::Clock;
pub use figures::ModelFigures;

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Results {
    /// Schema of this JSON file.
    pub schema: u32,
    pub label: String,
    /// UTC, `YYYY-MM-DDTHH:MM:SSZ`.
    pub timestamp: String,
    /// Where the figures come from: "qemu", "bochs" or "import".
    pub source: String,
    /// The machine that ran the emulator (its host name); for an import,
    /// what the log's CPU record shows ("hardware", "QEMU TCG guest", ...).
    #[serde(default)]
    pub host: String,
    /// The kernel's build (git describe) and command line.
    pub rev: String,
    /// The build had uncommitted changes (`rev` ends in `-dirty.<diff>`).
    #[serde(default)]
    pub dirty: bool,
    /// The hash of those changes (`git diff HEAD`, as git hashes a blob);
    /// empty for a clean build.
    #[serde(default)]
    pub diff: String,
    pub cmdline: String,
    pub protocol: String,
    pub accel: String,
    /// The clock the figures are in: `model` for a model run (its modelled
    /// cycles), though the guest read icount (`guest_clock`).
    pub clock: String,
    /// The clock the guest read, where it is not `clock` (a model run's
    /// guest counts instructions: `icount`); empty otherwise.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub guest_clock: String,
    /// The guest clock's unit, what the benchmarks' summaries count:
    /// "instructions" under icount (and under the model, whose cycles are
    /// in each benchmark's `model` figures); under tsc "cycles", "TCG ticks" or
    /// "Bochs ticks" (accel=bochs: 1 tick = 1 instruction).
    pub unit: String,
    pub tsc_hz: u64,
    pub cpu: BTreeMap<String, String>,
    /// The settings that shape every figure as the kernel applied them
    /// (its `settings` record: `pmap`, `fork`, `cpus`); empty in results
    /// from kernels before the record.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub settings: BTreeMap<String, String>,
    pub mechanisms: Vec<Mech>,
    pub benches: Vec<Bench>,
    pub macros: Vec<Macro>,
    /// The clock record's other fields (fence, overheads, interrupts, perf).
    pub timing: BTreeMap<String, String>,
    /// The kernel's warnings about its command line (`warn` records), as
    /// sentences.
    #[serde(default)]
    pub warnings: Vec<String>,
    /// `--clock model`: the profile the model plugin ran, whether its
    /// `virt` costs were on, and the profile's parameters as it used them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_profile: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_virt: bool,
    /// With `model_virt`: the guest's paging under extended page tables
    /// (`--virt ept`), not shadow page tables (`--virt`, `--virt shadow`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub model_ept: bool,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub model_params: BTreeMap<String, String>,
    /// `--clock model`: the CPUs the model saw (its file's `ncpus`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_cpus: u32,
    /// `--clock model`: the model figures left out because a snapshot they
    /// need lies past the plugin's cap (`abi::model::MAX_SNAPS_PER_STREAM`),
    /// each as a sentence; those benchmarks carry no model figures.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub model_incomplete: Vec<String>,
    /// `--clock model`: the events the plugin applied out of modelled-clock
    /// order because more than `model_forced_limit` waited (its queues
    /// full: one CPU's clock ran far ahead of another's). Every multi-CPU
    /// figure of the boot may hold such events: the tables say so.
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub model_forced: u64,
    #[serde(default, skip_serializing_if = "is_zero64")]
    pub model_forced_limit: u64,
    /// What the kernel found of the performance counters, in order: the
    /// boot's verdict (`on`, `n/a` and why), then `off` if a ring-3 RDPMC
    /// faulted during the run.
    #[serde(default)]
    pub perf: Vec<Perf>,
    /// A run in a LAVA lab (`import` of a job's log): the device, its type
    /// and the job; `host` then names the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<Lab>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

fn is_zero64(n: &u64) -> bool {
    *n == 0
}

/// Where the words `asked` (a command line, a label: `pmap=direct
/// fork=cow`) name a setting the boot's `applied` settings contradict,
/// one sentence each. A key the settings do not carry says nothing; the
/// last word of a key counts, as in the kernel.
pub fn contradictions(asked: &str, applied: &BTreeMap<String, String>) -> Vec<String> {
    let mut last: BTreeMap<&str, &str> = BTreeMap::new();
    for w in asked.split([' ', ',']) {
        if let Some((k, v)) = w.split_once('=') {
            if applied.contains_key(k) {
                last.insert(k, v);
            }
        }
    }
    last.into_iter()
        .filter(|(k, v)| applied.get(*k).is_some_and(|a| a != v))
        .map(|(k, v)| format!("asked {k}={v}, the kernel applied {k}={}", applied[k]))
        .collect()
}

impl Results {
    /// What this run's label and command line ask that its `settings`
    /// record contradicts (see [`contradictions`]): such a run's figures
    /// are not what its label says.
    pub fn contradicted(&self) -> Vec<String> {
        let mut v = contradictions(&self.cmdline, &self.settings);
        v.extend(
            contradictions(&self.label, &self.settings)
                .into_iter()
                .map(|c| format!("its label {}", c.replacen("asked", "says", 1))),
        );
        v
    }

    /// The CPUs the machine started, from the `settings` record (`None`:
    /// a kernel before the record).
    pub fn cpus_started(&self) -> Option<u32> {
        self.settings.get("cpus").and_then(|c| c.parse().ok())
    }

    /// The sentence the tables print when the model applied events out of
    /// modelled-clock order in this boot (`None`: it never did).
    pub fn model_forced_note(&self) -> Option<String> {
        (self.model_forced > 0).then(|| {
            format!(
                "model: {} events were applied out of modelled-clock order (more than {} waited: one CPU's clock ran far ahead of another's); in this boot the order of the CPUs' cache and coherence events is partly QEMU's, not the model's",
                self.model_forced, self.model_forced_limit
            )
        })
    }
}

/// Where a run in a lab ran: what `import` records as the system.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Lab {
    /// The device's name in the lab (its hostname in LAVA).
    pub device: String,
    /// The device type (`qemu`, or the lab's name for a kind of PC).
    pub device_type: String,
    /// The LAVA job id.
    pub job: String,
    /// The lab: its server's host (and port), as `cargo xtask lab` names
    /// it; empty for a log imported by hand or run by `lava-run` alone.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub lab: String,
}

impl Lab {
    /// The system a results file names: the device and its type.
    pub fn system(&self) -> String {
        format!("{} ({})", self.device, self.device_type)
    }
}

/// One `perf` record: `status` (`on`, `n/a`, `off`) and `reason`.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Perf {
    pub status: String,
    pub reason: String,
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Mech {
    pub name: String,
    pub status: String,
    pub reason: String,
}

/// One benchmark: its summary (clock ticks per operation, loop included, or
/// a throughput), and every batch's total in clock ticks.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Bench {
    pub name: String,
    pub mech: String,
    pub path: String,
    pub call: String,
    /// `per_op` (ticks per operation: lower is better) or `throughput`
    /// (operations per second: higher is better).
    #[serde(default, with = "measure_key")]
    pub measure: Measure,
    /// What the summary's values count: the run's unit per operation
    /// (`instructions`, `cycles`, `TCG ticks`), or a throughput's (`records/s`).
    #[serde(default)]
    pub unit: String,
    pub n: usize,
    pub min: f64,
    pub p25: f64,
    pub median: f64,
    pub mean: f64,
    pub p75: f64,
    pub max: f64,
    pub sd: f64,
    pub outliers: usize,
    /// Instructions retired and core cycles per call from the architectural
    /// counters, where the CPU has them (not under TCG).
    #[serde(default)]
    pub instructions: Option<f64>,
    #[serde(default)]
    pub cycles: Option<f64>,
    /// The CPUs the benchmark's threads ran on (`cpus=0,1` in the record);
    /// empty, and left out of the JSON, when the record does not say.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cpus: Vec<u32>,
    /// A multi-CPU figure's division of its work among the CPUs (its
    /// `share` record); left out of the JSON where the record has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub share: Option<Share>,
    pub batch_size: u64,
    pub samples: Vec<u64>,
    /// `--clock model`: modelled cycles, misses and flushes per call and
    /// per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelFigures>,
}

/// Each CPU's share of a multi-CPU benchmark's work. Under icount QEMU
/// runs one vCPU at a time in long turns, so work the CPUs race for (the
/// ebizzy searchers') is divided by its schedule, not by the machine: a
/// figure one CPU did (nearly) alone is not an N-CPU figure, and says so.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Share {
    /// What was counted (`records`, `handoffs`, `increments`).
    pub work: String,
    /// The count on each CPU, CPU 0 first, summed over every batch.
    pub per_cpu: Vec<u64>,
    /// The CPU that did at least [`ONE_CPU_SHARE`] of the work, when one
    /// did: the figure is then one CPU's, whatever CPUs its threads ran on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_cpu: Option<u32>,
    /// Under the model: each other CPU's overlap with the timed CPU (CPU
    /// 0) in modelled time (`overlap`, the definition); empty, and left
    /// out of the JSON, under icount and tsc, where there is no such
    /// figure, and for records that name no snapshots.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub overlap: Vec<overlap::Overlap>,
    /// The CPU that overlapped the timed CPU least, when below
    /// [`overlap::APART_PERCENT`]: the figure's CPUs barely worked at the
    /// same time in the model.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub apart: Option<u32>,
    /// Where each CPU's part of each batch lies in the model's snapshots
    /// (the record's `snap_first`, `snap_per_batch`): the overlap's input.
    #[serde(skip)]
    pub parts: Option<overlap::Parts>,
}

/// The fraction of a figure's work one CPU must do for the figure to be
/// flagged as that CPU's alone (`Share::one_cpu`).
pub const ONE_CPU_SHARE: f64 = 0.9;

impl Share {
    /// A share of `per_cpu` counts of `work`, flagged where one CPU did at
    /// least [`ONE_CPU_SHARE`] of the work of two or more CPUs.
    pub fn new(work: &str, per_cpu: Vec<u64>) -> Share {
        let total: u64 = per_cpu.iter().sum();
        let one_cpu = (per_cpu.len() > 1 && total > 0)
            .then(|| {
                per_cpu
                    .iter()
                    .position(|&n| n as f64 >= ONE_CPU_SHARE * total as f64)
            })
            .flatten()
            .map(|c| c as u32);
        Share {
            work: work.into(),
            per_cpu,
            one_cpu,
            ..Share::default()
        }
    }

    /// Each CPU's share in percent, `CPU 0 first: "100/0"`.
    pub fn percents(&self) -> String {
        let total: u64 = self.per_cpu.iter().sum::<u64>().max(1);
        self.per_cpu
            .iter()
            .map(|&n| format!("{:.0}", 100.0 * n as f64 / total as f64))
            .collect::<Vec<_>>()
            .join("/")
    }

    /// The flag a table, a CSV or a chart shows beside the figure: empty,
    /// or `one CPU: CPU n did x of y <work>`.
    pub fn flag(&self) -> String {
        match self.one_cpu {
            None => String::new(),
            Some(c) => format!(
                "one CPU: CPU {c} did {} of {} {}",
                self.per_cpu[c as usize],
                self.per_cpu.iter().sum::<u64>(),
                self.work
            ),
        }
    }

    /// The flag of CPUs that barely overlapped in modelled time: empty, or
    /// `apart: CPU n worked during x% of CPU 0's modelled time`.
    pub fn apart_flag(&self) -> String {
        let Some(c) = self.apart else {
            return String::new();
        };
        let p = self
            .overlap
            .iter()
            .find(|o| o.cpu == c)
            .map_or(0.0, |o| o.percent);
        format!("apart: CPU {c} worked during {p:.0}% of CPU 0's timed modelled time")
    }
}

#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Macro {
    pub mech: String,
    pub ops: u64,
    pub ticks_per_op: f64,
    pub ops_per_s: f64,
    pub syscalls_per_op: u32,
    /// `--clock model`: the model's figures per operation (one batch is
    /// `ops` operations), as a benchmark's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelFigures>,
}

impl Macro {
    /// Its metric's name: `macro.<mechanism>`.
    pub fn name(&self) -> String {
        format!("{}.{}", abi::report::names::MACRO, self.mech)
    }
}

pub const JSON_SCHEMA: u32 = 1;

/// The `source` of figures read from a captured serial log.
pub const IMPORT_SOURCE: &str = "import";

/// `Measure` in JSON as its record key (`per_op`, `throughput`).
mod measure_key {
    use abi::report::Measure;
    use serde::{de::Error, Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(m: &Measure, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(m.key())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Measure, D::Error> {
        let k = String::deserialize(d)?;
        Measure::from_key(&k)
            .ok_or_else(|| D::Error::custom(format!("measure {k:?}: not per_op or throughput")))
    }
}

/// How one metric reads: its unit and which way is better, and whether
/// one CPU did (nearly) all of a multi-CPU figure's work.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetricInfo {
    pub unit: String,
    pub measure: Measure,
    /// Empty, or the flags of a multi-CPU figure one CPU did alone
    /// (`Share::flag`, with `: not an N-CPU figure`) or whose CPUs barely
    /// overlapped in modelled time (`Share::apart_flag`, with `: not a
    /// concurrent figure`): [`one_cpu_flag`].
    pub one_cpu: String,
}

impl MetricInfo {
    /// A per-operation metric (lower is better) in `unit`, flagged nowhere.
    pub fn per_op(unit: impl Into<String>) -> MetricInfo {
        MetricInfo {
            unit: unit.into(),
            measure: Measure::PerOp,
            ..MetricInfo::default()
        }
    }

    /// What a comparison's heading says about the values.
    pub fn describe(&self) -> String {
        let reads = match self.measure {
            Measure::PerOp => format!("{} per operation, lower is better", self.unit),
            Measure::Throughput => format!("{}, a throughput: higher is better", self.unit),
        };
        if self.one_cpu.is_empty() {
            reads
        } else {
            format!("{reads}; {}", self.one_cpu)
        }
    }

    /// Merges the same metric's info from another boot: a flag in any
    /// boot stays.
    pub fn merge(&mut self, other: MetricInfo) {
        let flag = std::mem::take(&mut self.one_cpu);
        *self = other;
        if self.one_cpu.is_empty() {
            self.one_cpu = flag;
        }
    }
}

/// A share's flags as metrics carry them: empty, or `one CPU: CPU 0 did
/// 8000 of 8000 records: not a 2-CPU figure`, or (under the model) `apart:
/// CPU 1 worked during 3% of CPU 0's timed modelled time: not a concurrent
/// figure`, or both, joined by `; `.
pub fn one_cpu_flag(share: &Share) -> String {
    let mut flags = Vec::new();
    let one = share.flag();
    if !one.is_empty() {
        flags.push(format!("{one}: not a {}-CPU figure", share.per_cpu.len()));
    }
    let apart = share.apart_flag();
    if !apart.is_empty() {
        flags.push(format!("{apart}: not a concurrent figure"));
    }
    flags.join("; ")
}

/// Speed-up of "with" over "without": time without / time with for costs,
/// rate with / rate without for throughputs; above 1 means "with" is better.
pub fn speedup(m: Measure, without: f64, with: f64) -> f64 {
    match m {
        Measure::PerOp => without / with,
        Measure::Throughput => with / without,
    }
}

impl Results {
    /// The clock the kernel reported, if this tool knows it (a CPU without
    /// a TSC reports `none`).
    /// How the model virtualised the guest (`model_virt`, `model_ept`).
    pub fn virt(&self) -> model::Virt {
        use model::Virt;
        match (self.model_virt, self.model_ept) {
            (false, _) => Virt::Off,
            (true, false) => Virt::Shadow,
            (true, true) => Virt::Ept,
        }
    }

    /// The clock the figures are in. A model run written before `clock`
    /// said so names the guest's (`icount`) beside its profile: its
    /// figures are modelled cycles all the same.
    pub fn clock(&self) -> Option<Clock> {
        if self.model_profile.is_some() {
            return Some(Clock::Model);
        }
        Clock::from_key(&self.clock)
    }

    /// The clock the guest read (`icount` under the model).
    pub fn guest_clock(&self) -> &str {
        if self.guest_clock.is_empty() {
            &self.clock
        } else {
            &self.guest_clock
        }
    }

    /// The guest ran under TCG.
    pub fn tcg(&self) -> bool {
        self.accel == abi::cmdline::ACCEL_TCG
    }

    /// The guest ran under Bochs.
    pub fn bochs(&self) -> bool {
        self.accel == abi::cmdline::ACCEL_BOCHS
    }

    pub fn bench(&self, name: &str) -> Option<&Bench> {
        self.benches.iter().find(|b| b.name == name)
    }

    /// Every metric of this run: each benchmark's median, and each macro
    /// mix's ticks per operation (`macro.<mechanism>`).
    pub fn metrics(&self) -> BTreeMap<String, f64> {
        // A model run: modelled cycles per operation of each modelled figure.
        if self.model_profile.is_some() {
            return figures::metrics(self);
        }
        let mut m: BTreeMap<String, f64> = self
            .benches
            .iter()
            .map(|b| (b.name.clone(), b.median))
            .collect();
        for x in &self.macros {
            m.insert(x.name(), x.ticks_per_op);
        }
        m
    }

    /// How each of [`Results::metrics`] reads.
    pub fn metric_info(&self) -> BTreeMap<String, MetricInfo> {
        if let Some(unit) = figures::unit(self) {
            return figures::metrics(self)
                .into_keys()
                .map(|k| {
                    let info = MetricInfo {
                        unit: unit.clone(),
                        measure: Measure::PerOp,
                        one_cpu: self
                            .bench(&k)
                            .and_then(|b| b.share.as_ref())
                            .map(one_cpu_flag)
                            .unwrap_or_default(),
                    };
                    (k, info)
                })
                .collect();
        }
        let mut m: BTreeMap<String, MetricInfo> = self
            .benches
            .iter()
            .map(|b| {
                let unit = if b.unit.is_empty() {
                    &self.unit
                } else {
                    &b.unit
                };
                let info = MetricInfo {
                    unit: unit.clone(),
                    measure: b.measure,
                    one_cpu: b.share.as_ref().map(one_cpu_flag).unwrap_or_default(),
                };
                (b.name.clone(), info)
            })
            .collect();
        for x in &self.macros {
            let info = MetricInfo::per_op(self.unit.clone());
            m.insert(x.name(), info);
        }
        m
    }
}

impl Results {
    /// Writes `dir/<timestamp>-<label>.json`; returns its path.
    pub fn save(&self, dir: &Path) -> Result<PathBuf> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        let stamp = self.timestamp.replace([':', '-'], "");
        let path = dir.join(format!("{stamp}-{}.json", sanitize(&self.label)));
        std::fs::write(&path, self.to_json()?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }

    pub fn to_json(&self) -> Result<String> {
        Ok(serde_json::to_string_pretty(self)? + "\n")
    }

    /// A results file's text; the error says whether it is cut short, is
    /// another of xtask's files, or what field is wrong.
    pub fn parse(text: &str) -> Result<Results> {
        if let Some(kind) = other_kind(text) {
            bail!("it is {kind}, not a run's results");
        }
        let r: Results = serde_json::from_str(text).map_err(|e| {
            if e.is_eof() {
                anyhow!("it ends early, at line {} (truncated?)", e.line())
            } else {
                anyhow!("{e}")
            }
        })?;
        if r.schema != JSON_SCHEMA {
            bail!(
                "results schema {} (this xtask reads {JSON_SCHEMA})",
                r.schema
            );
        }
        Ok(r)
    }

    /// Rows of `table` compare like with like only: the same clock, the
    /// same accelerator or emulator, the same source of figures, and for a
    /// model run the same profile. This is what must be equal.
    pub fn like(&self) -> String {
        format!(
            "clock={} accel={} source={}{}",
            self.clock()
                .map_or_else(|| self.clock.clone(), |c| c.key().to_string()),
            self.accel,
            self.source,
            match &self.model_profile {
                Some(p) => format!(" ({})", figures::label(p, self.virt())),
                None => String::new(),
            }
        )
    }

    /// The fields that identify a run, for comparing boots: everything but
    /// the timestamp.
    pub fn without_timestamp(&self) -> Results {
        Results {
            timestamp: String::new(),
            ..self.clone()
        }
    }
}

/// The dirty flag and diff hash a kernel revision carries
/// (`<describe>-dirty.<hash>`; the kernel build writes it so).
pub fn dirty_of_rev(rev: &str) -> (bool, String) {
    match rev.split_once("-dirty") {
        Some((_, tail)) => (true, tail.trim_start_matches('.').to_string()),
        None => (false, String::new()),
    }
}

/// What a JSON file that is not a run's results is, when it is another of
/// xtask's files: a `bench` export or a `bench` baseline.
pub fn other_kind(text: &str) -> Option<&'static str> {
    use serde::de::IgnoredAny;
    /// The top-level keys that tell xtask's files apart; whatever they
    /// hold is skipped unread (`IgnoredAny`), the other keys ignored.
    #[derive(Deserialize)]
    struct Keys {
        kind: Option<String>,
        variants: Option<IgnoredAny>,
        values: Option<IgnoredAny>,
        metrics: Option<IgnoredAny>,
        label: Option<IgnoredAny>,
        schema: Option<IgnoredAny>,
    }
    let k: Keys = serde_json::from_str(text).ok()?;
    if k.kind.as_deref() == Some(bench::BENCH_KIND) || k.variants.is_some() && k.values.is_some() {
        Some("a bench export")
    } else if k.metrics.is_some() && k.label.is_some() && k.schema.is_none() {
        Some("a bench baseline")
    } else {
        None
    }
}

pub fn sanitize(label: &str) -> String {
    label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// `YYYY-MM-DDTHH:MM:SSZ` without a date crate.
pub fn utc_timestamp(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let rem = secs % 86_400;
    format!(
        "{}T{:02}:{:02}:{:02}Z",
        utc_date(secs),
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// `YYYY-MM-DD` (UTC) of `secs` since the Unix epoch: days to a civil
/// date in the proleptic Gregorian calendar.
pub fn utc_date(secs: u64) -> String {
    let days = (secs / 86_400) as i64 + 719_468;
    let era = days.div_euclid(146_097);
    let doe = days - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}
