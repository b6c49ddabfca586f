//! A boot's report as data: the records of one serial log gathered into
//! [`Results`], checked for consistency, rendered as the human table, and
//! stored as `results/<timestamp>-<label>.json`.
//!
//! The same parser reads a log captured from real hardware
//! (`cargo xtask import serial.log`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use abi::report::{kind, Measure};
use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::machine::{Accel, Clock};
use crate::model::ModelFigures;
use crate::report::{self, Record};

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
    pub clock: String,
    /// "instructions" under icount; under tsc "cycles", "TCG ticks" or
    /// "Bochs ticks" (accel=bochs: 1 tick = 1 instruction).
    pub unit: String,
    pub tsc_hz: u64,
    pub cpu: BTreeMap<String, String>,
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
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub model_params: BTreeMap<String, String>,
    /// `--clock model`: the CPUs the model saw (its file's `ncpus`).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub model_cpus: u32,
    /// What the kernel found of the performance counters, in order: the
    /// boot's verdict (`on`, `n/a` and why), then `off` if a ring-3 RDPMC
    /// faulted during the run.
    #[serde(default)]
    pub perf: Vec<Perf>,
    /// A run in a LAVA lab (`import` of a job's log): the device, its type
    /// and the job; `host` then names the device.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lab: Option<crate::lava::Lab>,
}

fn is_zero(n: &u32) -> bool {
    *n == 0
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
    pub batch_size: u64,
    pub samples: Vec<u64>,
    /// `--clock model`: modelled cycles, misses and flushes per call and
    /// per batch.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<ModelFigures>,
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
    pub model: Option<crate::model::ModelFigures>,
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

/// How one metric reads: its unit and which way is better.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MetricInfo {
    pub unit: String,
    pub measure: Measure,
}

impl MetricInfo {
    /// What a comparison's heading says about the values.
    pub fn describe(&self) -> String {
        match self.measure {
            Measure::PerOp => format!("{} per operation, lower is better", self.unit),
            Measure::Throughput => format!("{}, a throughput: higher is better", self.unit),
        }
    }
}

/// Speed-up of "with" over "without": time without / time with for costs,
/// rate with / rate without for throughputs; above 1 means "with" is better.
pub fn speedup(m: Measure, without: f64, with: f64) -> f64 {
    match m {
        Measure::PerOp => without / with,
        Measure::Throughput => with / without,
    }
}

fn field<'a>(r: &'a Record, k: &str) -> Result<&'a str> {
    r.get(k)
        .ok_or_else(|| anyhow!("line {}: {} record without {k}", r.line, r.kind))
}

fn num<T: std::str::FromStr>(r: &Record, k: &str) -> Result<T> {
    let v = field(r, k)?;
    v.parse().map_err(|_| {
        anyhow!(
            "line {}: {} record: {k}={v:?} is not a number",
            r.line,
            r.kind
        )
    })
}

/// A figure: a finite number. `NaN` and `inf` parse as floats, but no
/// measurement is one, and JSON cannot hold them.
fn real(r: &Record, k: &str) -> Result<f64> {
    let x: f64 = num(r, k)?;
    if !x.is_finite() {
        bail!(
            "line {}: {} record: {k}={:?} is not a finite number",
            r.line,
            r.kind,
            field(r, k)?
        );
    }
    Ok(x)
}

/// An optional counter figure (`instructions`, `cycles`): `n/a` where the
/// CPU has no counters; anything else must be a finite number.
fn optional_real(r: &Record, k: &str) -> Result<Option<f64>> {
    match r.get(k) {
        None | Some("n/a") => Ok(None),
        Some(_) => real(r, k).map(Some),
    }
}

/// What a hypervisor signature in the CPU record says about where an
/// imported log ran (`none`: no hypervisor bit, a real machine).
pub fn host_of_signature(sig: Option<&str>) -> String {
    match sig.map(str::trim) {
        None | Some("") | Some("none") => "hardware".into(),
        Some("TCGTCGTCGTCG") => "QEMU TCG guest".into(),
        Some("KVMKVMKVM") => "KVM guest".into(),
        Some(s) => format!("{s} guest"),
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

impl Results {
    /// Gathers the records of one boot. Fails, naming the line, on a
    /// malformed record, a benchmark without its samples, or a sample count
    /// that is not the configured number of batches.
    pub fn from_log(log: &str, label: &str, source: &str) -> Result<Results> {
        let records = report::parse_log(log)?;
        Self::from_records(&records, label, source)
    }

    pub fn from_records(records: &[Record], label: &str, source: &str) -> Result<Results> {
        let mut r = Results {
            schema: JSON_SCHEMA,
            label: label.to_string(),
            timestamp: utc_timestamp(SystemTime::now()),
            source: source.to_string(),
            // An import's host is named from its CPU record, below.
            host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "localhost".into()),
            ..Results::default()
        };
        let mut samples: BTreeMap<String, (u64, Vec<u64>, usize)> = BTreeMap::new();
        let mut ended: Option<(String, usize)> = None;
        for rec in records {
            match rec.kind.as_str() {
                kind::BOOT => {
                    r.rev = field(rec, "rev")?.into();
                    (r.dirty, r.diff) = dirty_of_rev(&r.rev);
                    r.cmdline = field(rec, "cmdline")?.into();
                    r.protocol = field(rec, "protocol")?.into();
                    for w in r.cmdline.split_whitespace() {
                        if let Some(a) = w.strip_prefix("accel=") {
                            r.accel = a.into();
                        }
                        // What the host asked for; a clock record, where the
                        // program prints one, says what was used.
                        if let Some(c) = w.strip_prefix("clock=") {
                            if r.clock.is_empty() {
                                r.clock = c.into();
                            }
                        }
                    }
                }
                kind::CPU => r.cpu = rec.fields.clone().into_iter().collect(),
                kind::WARN => r.warnings.push(warning_text(rec)),
                kind::END => ended = Some((rec.get("status").unwrap_or("").to_string(), rec.line)),
                kind::MECH => r.mechanisms.push(Mech {
                    name: field(rec, "name")?.into(),
                    status: field(rec, "status")?.into(),
                    reason: rec.get("reason").unwrap_or("").into(),
                }),
                kind::PERF => r.perf.push(Perf {
                    status: field(rec, "status")?.into(),
                    reason: rec.get("reason").unwrap_or("").into(),
                }),
                kind::CLOCK => {
                    r.clock = field(rec, "clock")?.into();
                    r.tsc_hz = num(rec, "tsc_hz")?;
                    for (k, v) in &rec.fields {
                        if !matches!(k.as_str(), "clock" | "tsc_hz") {
                            r.timing.insert(k.clone(), v.clone());
                        }
                    }
                }
                kind::BENCH => r.benches.push(Bench {
                    name: field(rec, "name")?.into(),
                    mech: field(rec, "mech")?.into(),
                    path: field(rec, "path")?.into(),
                    call: field(rec, "call")?.into(),
                    measure: match rec.get("measure") {
                        None => Measure::PerOp,
                        Some(k) => Measure::from_key(k).ok_or_else(|| {
                            anyhow!(
                                "line {}: bench record: measure={k:?} is not per_op or throughput",
                                rec.line
                            )
                        })?,
                    },
                    unit: rec.get("unit").unwrap_or("").into(),
                    n: num(rec, "n")?,
                    min: real(rec, "min")?,
                    p25: real(rec, "p25")?,
                    median: real(rec, "median")?,
                    mean: real(rec, "mean")?,
                    p75: real(rec, "p75")?,
                    max: real(rec, "max")?,
                    sd: real(rec, "sd")?,
                    outliers: num(rec, "outliers")?,
                    instructions: optional_real(rec, "instructions")?,
                    cycles: optional_real(rec, "cycles")?,
                    cpus: match rec.get("cpus") {
                        None => vec![],
                        Some(list) => list
                            .split(',')
                            .map(|c| {
                                c.parse::<u32>().map_err(|_| {
                                    anyhow!(
                                        "line {}: bench record: cpus={list:?} is not a list of CPU numbers",
                                        rec.line
                                    )
                                })
                            })
                            .collect::<Result<Vec<_>>>()?,
                    },
                    batch_size: 0,
                    samples: vec![],
                    model: None,
                }),
                kind::SAMPLES => {
                    let name = field(rec, "name")?.to_string();
                    let size = num(rec, "batch_size")?;
                    let values = field(rec, "values")?
                        .split(',')
                        .map(|v| {
                            v.parse::<u64>().map_err(|_| {
                                anyhow!(
                                    "line {}: samples of {name}: {v:?} is not a count",
                                    rec.line
                                )
                            })
                        })
                        .collect::<Result<Vec<_>>>()?;
                    samples.insert(name, (size, values, rec.line));
                }
                kind::MACRO => r.macros.push(Macro {
                    mech: field(rec, "mech")?.into(),
                    ops: num(rec, "ops")?,
                    ticks_per_op: real(rec, "ticks_per_op")?,
                    ops_per_s: real(rec, "ops_per_s")?,
                    syscalls_per_op: num(rec, "syscalls_per_op")?,
                    model: None,
                }),
                _ => {}
            }
        }
        if r.accel.is_empty() {
            r.accel = "hw".into();
        }
        if source == IMPORT_SOURCE {
            r.host = host_of_signature(r.cpu.get("hypervisor").map(String::as_str));
        }
        r.unit = match r.clock() {
            Some(Clock::Tsc) if r.bochs() => abi::syscall::tsc_unit(abi::syscall::EMULATOR_BOCHS),
            Some(c) => c.unit(r.tcg()),
            None => "ticks",
        }
        .into();
        for b in &mut r.benches {
            let (size, values, line) = samples.remove(&b.name).ok_or_else(|| {
                anyhow!(
                    "benchmark {} has no samples record (a truncated log?)",
                    b.name
                )
            })?;
            if values.len() != b.n {
                bail!(
                    "line {line}: {} has {} samples, but the summary says n={}",
                    b.name,
                    values.len(),
                    b.n
                );
            }
            if b.measure == Measure::PerOp || b.unit.is_empty() {
                b.unit = r.unit.clone();
            }
            b.batch_size = size;
            b.samples = values;
        }
        if let Some(name) = samples.keys().next() {
            bail!("samples for {name} without a bench record (a truncated log?)");
        }
        match ended {
            None => bail!(
                "the log ends before the kernel's end record (cut short?); missing: {}",
                r.missing().join(", ")
            ),
            Some((status, line)) if status != "success" => {
                bail!("line {line}: the kernel ended with status={status:?}, not success")
            }
            Some(_) => {}
        }
        Ok(r)
    }

    /// What a cut log lacks, for the error that says so: the end record,
    /// every usable mechanism the benchmark program had not measured yet,
    /// and its macro mix.
    fn missing(&self) -> Vec<String> {
        let mut m = vec!["the end record".to_string()];
        let words: Vec<&str> = self.cmdline.split_whitespace().collect();
        let bench_prog = !words
            .iter()
            .any(|w| w.starts_with("mode=") && *w != "mode=run")
            && words
                .iter()
                .rev()
                .find_map(|w| w.strip_prefix("prog="))
                .unwrap_or(abi::cmdline::DEFAULT_PROG)
                == abi::cmdline::DEFAULT_PROG;
        if bench_prog {
            for mech in self.mechanisms.iter().filter(|x| x.status == "ok") {
                if !self.benches.iter().any(|b| b.mech == mech.name) {
                    m.push(format!("the {} benchmarks", mech.name));
                }
            }
            if self.macros.is_empty() {
                m.push("the macro mix".into());
            }
        }
        m
    }

    /// The clock the kernel reported, if this tool knows it (a CPU without
    /// a TSC reports `none`).
    pub fn clock(&self) -> Option<Clock> {
        Clock::from_key(&self.clock)
    }

    /// The guest ran under TCG.
    pub fn tcg(&self) -> bool {
        self.accel == Accel::Tcg.key()
    }

    /// The guest ran under Bochs.
    pub fn bochs(&self) -> bool {
        self.accel == crate::machine::bochs::ACCEL
    }

    pub fn bench(&self, name: &str) -> Option<&Bench> {
        self.benches.iter().find(|b| b.name == name)
    }

    /// Every metric of this run: each benchmark's median, and each macro
    /// mix's ticks per operation (`macro.<mechanism>`).
    pub fn metrics(&self) -> BTreeMap<String, f64> {
        // A model run: modelled cycles per operation of each modelled figure.
        if self.model_profile.is_some() {
            return crate::model::metrics(self);
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
        if let Some(unit) = crate::model::unit(self) {
            return crate::model::metrics(self)
                .into_keys()
                .map(|k| {
                    let info = MetricInfo {
                        unit: unit.clone(),
                        measure: Measure::PerOp,
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
                };
                (b.name.clone(), info)
            })
            .collect();
        for x in &self.macros {
            let info = MetricInfo {
                unit: self.unit.clone(),
                measure: Measure::PerOp,
            };
            m.insert(x.name(), info);
        }
        m
    }

    /// The human table: median and min per call, full/floor, and the ratio
    /// to int 0x80 for the same call; then the macro mix.
    pub fn table(&self) -> String {
        let mut s = String::new();
        let bochs_note = format!(
            "  ({}; emulator figures, not cycles)",
            abi::syscall::BOCHS_TICK
        );
        let emulated = if self.clock().is_some_and(|c| c.emulated(self.tcg())) {
            "  (TCG: emulator artefacts, not cycles)"
        } else if self.bochs() && self.clock() == Some(Clock::Tsc) {
            bochs_note.as_str()
        } else {
            ""
        };
        s += &format!(
            "clock={} ({} per tick)  accel={}  cpu={} \"{}\"{}\n",
            self.clock,
            self.unit.trim_end_matches('s'),
            self.accel,
            self.cpu.get("vendor").map_or("?", String::as_str),
            self.cpu.get("brand").map_or("?", String::as_str),
            emulated
        );
        if let Some(p) = &self.model_profile {
            s += &format!(
                "modelled: cycles per call from the model plugin ({}); the other columns are {}\n",
                crate::model::label(p, self.model_virt),
                self.unit
            );
        }
        s += &format!(
            "{:<10} {:<8} {:>10} {:>10} {:>11} {:>12}{}\n",
            "entry",
            "call",
            "median",
            "min",
            "full/floor",
            "vs int 0x80",
            if self.model_profile.is_some() {
                format!(" {:>10}", "modelled")
            } else {
                String::new()
            }
        );
        // Each column's unit; both ratios are time over time, as in the
        // macro lines (below 1: faster).
        let short = if self.unit == "instructions" {
            "insns"
        } else {
            self.unit.as_str()
        };
        s += &format!(
            "{:<10} {:<8} {:>10} {:>10} {:>11} {:>12}{}\n",
            "",
            "",
            short,
            short,
            "time ratio",
            "time ratio",
            if self.model_profile.is_some() {
                format!(" {:>10}", "cycles")
            } else {
                String::new()
            }
        );
        for m in abi::Mechanism::ALL {
            if let Some(mech) = self.mechanisms.iter().find(|x| x.name == m.key()) {
                if mech.status != "ok" {
                    s += &format!("{:<10} unavailable: {}\n", m.title(), mech.reason);
                    continue;
                }
            }
            let floor = self.bench(&format!("{}.floor", m.key())).map(|b| b.median);
            for b in self.benches.iter().filter(|b| b.mech == m.key()) {
                let ratio = match (b.call.as_str(), floor) {
                    ("null", Some(f)) if f > 0.0 => format!("{:.2}x", b.median / f),
                    _ => String::new(),
                };
                let vs = self
                    .bench(&format!("int80.{}", b.call))
                    .filter(|base| base.median > 0.0)
                    .map(|base| format!("{:.2}", b.median / base.median))
                    .unwrap_or_default();
                let pmc = match (b.instructions, b.cycles) {
                    (Some(i), Some(c)) => {
                        format!("   {i:.1} instructions, {c:.1} cycles (counters)")
                    }
                    _ => String::new(),
                };
                let modelled = match (&self.model_profile, &b.model) {
                    (None, _) => String::new(),
                    (Some(_), Some(x)) => format!(" {:>10.1}", x.cycles),
                    (Some(_), None) => format!(" {:>10}", "-"),
                };
                s += &format!(
                    "{:<10} {:<8} {:>10.2} {:>10.2} {:>11} {:>12}{}{}\n",
                    m.title(),
                    b.call,
                    b.median,
                    b.min,
                    ratio,
                    vs,
                    modelled,
                    pmc
                );
            }
        }
        if let Some(l) = self.bench("loop") {
            s += &format!(
                "{:<10} {:<8} {:>10.2}   (decl + jnz, included above)\n",
                "loop", "empty", l.median
            );
        }
        let base = self
            .macros
            .iter()
            .find(|m| m.mech == "int80")
            .map(|m| m.ticks_per_op);
        for m in &self.macros {
            let vs = base
                .filter(|b| *b > 0.0)
                .map(|b| format!("  {:.2} vs int 0x80", m.ticks_per_op / b))
                .unwrap_or_default();
            let modelled = m
                .model
                .as_ref()
                .map(|x| format!("  {:.1} modelled cycles/op", x.cycles))
                .unwrap_or_default();
            s += &format!(
                "macro mix  {:<9} {:>12.0} ops/s{}  {:>9.1} {}/op{}{}\n",
                abi::Mechanism::ALL
                    .iter()
                    .find(|x| x.key() == m.mech)
                    .map_or(m.mech.as_str(), |x| x.title()),
                m.ops_per_s,
                if self.clock().is_some_and(Clock::virtual_time) {
                    " (virtual)"
                } else {
                    ""
                },
                m.ticks_per_op,
                self.unit,
                vs,
                modelled
            );
        }
        let others: Vec<&Bench> = self
            .benches
            .iter()
            .filter(|b| b.name != "loop" && abi::Mechanism::from_key(&b.mech).is_none())
            .collect();
        if !others.is_empty() {
            s += &format!(
                "{:<28} {:>12} {:>12}  unit (median and min of each benchmark's batches)\n",
                "benchmark", "median", "min"
            );
        }
        for b in others {
            s += &format!(
                "{:<28} {:>12.2} {:>12.2}  {}{}\n",
                b.name,
                b.median,
                b.min,
                b.unit,
                match b.measure {
                    Measure::PerOp => " per op",
                    Measure::Throughput => " (throughput: higher is better)",
                }
            );
        }
        s
    }

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
            self.clock,
            self.accel,
            self.source,
            match &self.model_profile {
                Some(p) => format!(" ({})", crate::model::label(p, self.model_virt)),
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

/// What a JSON file that is not a run's results is, when it is another of
/// xtask's files: a `bench` export or a `bench` baseline.
pub fn other_kind(text: &str) -> Option<&'static str> {
    let v: serde_json::Value = serde_json::from_str(text).ok()?;
    let o = v.as_object()?;
    if o.get("kind").and_then(|k| k.as_str()) == Some(crate::export::BENCH_KIND)
        || o.contains_key("variants") && o.contains_key("values")
    {
        Some("a bench export")
    } else if o.contains_key("metrics") && o.contains_key("label") && !o.contains_key("schema") {
        Some("a bench baseline")
    } else {
        None
    }
}

/// A `warn` record as the sentence the kernel printed beside it.
fn warning_text(rec: &Record) -> String {
    let key = rec.get("key").unwrap_or("?");
    match rec.get("value") {
        Some(v) => format!("{key}={v}: {}", rec.get("text").unwrap_or("warning")),
        None => format!("{key}: {}", rec.get("text").unwrap_or("warning")),
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

/// `YYYY-MM-DDTHH:MM:SSZ` without a date crate (days to civil date, from
/// the proleptic Gregorian calendar).
pub fn utc_timestamp(t: SystemTime) -> String {
    let secs = t
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0) as i64;
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const LOG: &str = "\
i386 testbed kernel abc
@@tb1 boot loader=qemu protocol=mb1 cmdline=mode%3Drun%20clock%3Dicount%20accel%3Dtcg mem_kib=1 modules=3 rev=abc
@@tb1 cpu vendor=GenuineIntel brand=QEMU%20Virtual%20CPU family=6 model=6 stepping=3
@@tb1 mech name=int80 status=ok reason=%00
@@tb1 mech name=syscall status=unavailable reason=not%20AMD
@@tb1 clock clock=icount fence=lfence+rdtsc tsc_hz=1000000000 timer_overhead=28 batches=2 batch_size=64 interrupts=masked perf=n/a
@@tb1 bench name=int80.floor mech=int80 path=floor call=floor n=2 min=4.0000 p25=4.0000 median=4.0000 mean=4.0000 p75=4.0000 max=4.0000 sd=0.0000 outliers=0
@@tb1 samples name=int80.floor batch_size=64 values=256,256
@@tb1 bench name=int80.null mech=int80 path=full call=null n=2 min=24.0000 p25=24.0000 median=24.0000 mean=24.0000 p75=24.0000 max=24.0000 sd=0.0000 outliers=0
@@tb1 samples name=int80.null batch_size=64 values=1536,1536
@@tb1 macro mech=int80 ops=16 batches=2 ticks_per_op=1700.0 ops_per_s=588235.3 syscalls_per_op=4
@@tb1 end status=success
";

    #[test]
    fn gathers_a_boot() {
        let r = Results::from_log(LOG, "default", "qemu").unwrap();
        assert_eq!(
            (r.clock.as_str(), r.unit.as_str(), r.accel.as_str()),
            ("icount", "instructions", "tcg")
        );
        assert_eq!(r.tsc_hz, 1_000_000_000);
        assert_eq!(r.benches.len(), 2);
        let null = r.bench("int80.null").unwrap();
        assert_eq!(null.samples, [1536, 1536]);
        assert_eq!(null.batch_size, 64);
        assert_eq!(r.mechanisms[1].status, "unavailable");
        let t = r.table();
        assert!(
            t.contains("int 0x80   null          24.00      24.00       6.00x         1.00"),
            "{t}"
        );
        assert!(t.contains("syscall    unavailable: not AMD"));
        assert!(t.contains("macro mix  int 0x80"));
        // Units named per column; "vs int 0x80" is time over time in the
        // micro table and in the macro lines alike.
        assert!(
            t.contains("insns      insns  time ratio   time ratio"),
            "{t}"
        );
        assert!(t.contains("1.00 vs int 0x80"), "{t}");
    }

    #[test]
    fn perf_records_in_order() {
        let log = LOG.replace(
            "@@tb1 end",
            "@@tb1 perf status=on reason=pmc%3Dpretend\n\
             @@tb1 perf status=off reason=RDPMC%20(ECX%200x40000000)%20raised%20#GP%20in%20ring%203\n\
             @@tb1 end",
        );
        let r = Results::from_log(&log, "default", "qemu").unwrap();
        let perf: Vec<_> = r
            .perf
            .iter()
            .map(|p| (p.status.as_str(), p.reason.as_str()))
            .collect();
        assert_eq!(
            perf,
            [
                ("on", "pmc=pretend"),
                ("off", "RDPMC (ECX 0x40000000) raised #GP in ring 3")
            ]
        );
        assert!(Results::from_log(LOG, "default", "qemu")
            .unwrap()
            .perf
            .is_empty());
    }

    /// A `locks` boot: no clock in the boot line's words the host did not
    /// add, a per-operation figure and a throughput.
    const LOCKS_LOG: &str = "\
@@tb1 boot loader=qemu protocol=mb1 cmdline=mode%3Drun%20prog%3Dlocks%20clock%3Dicount%20accel%3Dtcg mem_kib=1 modules=3 rev=abc
@@tb1 cpu vendor=GenuineIntel brand=QEMU%20Virtual%20CPU family=6 model=6 stepping=3
@@tb1 bench name=locks.contended.128 mech=locks path=contended call=128 measure=per_op n=2 min=1476.0000 p25=1476.0000 median=1476.0000 mean=1476.0000 p75=1476.0000 max=1476.0000 sd=0.0000 outliers=0 instructions=n/a cycles=n/a
@@tb1 samples name=locks.contended.128 batch_size=100 values=147600,147600
@@tb1 bench name=ebizzy.128 mech=locks path=ebizzy call=128 measure=throughput unit=records/s n=2 min=160000.0000 p25=160000.0000 median=160000.0000 mean=160000.0000 p75=160000.0000 max=160000.0000 sd=0.0000 outliers=0 instructions=n/a cycles=n/a cpus=0,1
@@tb1 samples name=ebizzy.128 batch_size=1000 values=6250000,6250000
@@tb1 end status=success
";

    #[test]
    fn lock_figures_and_throughputs() {
        let r = Results::from_log(LOCKS_LOG, "locks", "qemu").unwrap();
        // No clock record: the clock the host asked for on the command line.
        assert_eq!(
            (r.clock.as_str(), r.unit.as_str()),
            ("icount", "instructions")
        );
        let c = r.bench("locks.contended.128").unwrap();
        assert_eq!(
            (c.measure, c.unit.as_str()),
            (Measure::PerOp, "instructions")
        );
        assert_eq!(c.samples, [147600, 147600]);
        let e = r.bench("ebizzy.128").unwrap();
        assert_eq!(
            (e.measure, e.unit.as_str()),
            (Measure::Throughput, "records/s")
        );
        assert_eq!((e.cpus.as_slice(), c.cpus.is_empty()), (&[0, 1][..], true));
        let info = r.metric_info();
        assert!(info["ebizzy.128"].describe().contains("higher is better"));
        assert!(info["locks.contended.128"]
            .describe()
            .contains("lower is better"));
        let t = r.table();
        assert!(
            t.contains("ebizzy.128") && t.contains("records/s (throughput: higher is better)"),
            "{t}"
        );
        // The JSON says which way is better, and reads back.
        let json = r.to_json().unwrap();
        assert!(json.contains("\"measure\": \"throughput\""), "{json}");
        let back: Results = serde_json::from_str(&json).unwrap();
        assert_eq!(back, r);
        let bad = LOCKS_LOG.replace("measure=throughput", "measure=faster");
        let e = Results::from_log(&bad, "x", "qemu")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("line 5: bench record: measure=\"faster\""),
            "{e}"
        );
        let bad = LOCKS_LOG.replace("cpus=0,1", "cpus=0,x");
        let e = Results::from_log(&bad, "x", "qemu")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("cpus=\"0,x\" is not a list of CPU numbers"),
            "{e}"
        );
    }

    #[test]
    fn speedup_follows_the_direction() {
        assert_eq!(speedup(Measure::PerOp, 30.0, 20.0), 1.5);
        assert_eq!(speedup(Measure::Throughput, 100.0, 150.0), 1.5);
    }

    #[test]
    fn a_bochs_boot_says_bochs_ticks() {
        let log = LOG
            .replace(
                "clock%3Dicount%20accel%3Dtcg",
                "clock%3Dtsc%20accel%3Dbochs",
            )
            .replace("clock clock=icount", "clock clock=tsc");
        let r = Results::from_log(&log, "b", "bochs").unwrap();
        assert_eq!(
            (r.clock.as_str(), r.unit.as_str(), r.accel.as_str()),
            ("tsc", "Bochs ticks", "bochs")
        );
        assert!(r.bochs() && !r.tcg() && r.host != "hardware");
        let t = r.table();
        assert!(
            t.contains("Bochs: 1 tick = 1 instruction") && !t.contains("cycles per"),
            "{t}"
        );
    }

    #[test]
    fn sample_count_must_match_batches() {
        let log = LOG.replace("values=1536,1536", "values=1536");
        let e = Results::from_log(&log, "x", "qemu")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("int80.null has 1 samples") && e.starts_with("line 10"),
            "{e}"
        );
    }

    #[test]
    fn truncated_log_is_an_error() {
        let cut = &LOG[..LOG.find("@@tb1 samples name=int80.null").unwrap()];
        let e = Results::from_log(cut, "x", "qemu").unwrap_err().to_string();
        assert!(e.contains("int80.null has no samples record"), "{e}");
        let e = Results::from_log(&LOG[..LOG.len() - 200], "x", "qemu").unwrap_err();
        assert!(e.to_string().contains("line"), "{e}");
    }

    #[test]
    fn bad_number_names_the_line() {
        let log = LOG.replace("median=24.0000", "median=lots");
        let e = Results::from_log(&log, "x", "qemu")
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("line 9: bench record: median=\"lots\""),
            "{e}"
        );
    }

    #[test]
    fn non_finite_figures_are_refused() {
        for bad in ["NaN", "nan", "inf", "-inf", "infinity"] {
            let log = LOG.replace("median=24.0000", &format!("median={bad}"));
            let e = Results::from_log(&log, "x", "qemu")
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("line 9: bench record: median=") && e.contains("not a finite number"),
                "{bad}: {e}"
            );
        }
        let log = LOG.replace("ticks_per_op=1700.0", "ticks_per_op=inf");
        let e = Results::from_log(&log, "x", "import").unwrap_err();
        assert!(e.to_string().starts_with("line 11: macro record"), "{e}");
        let log = LOCKS_LOG.replace("instructions=n/a", "instructions=NaN");
        assert!(Results::from_log(&log, "x", "qemu").is_err());
    }

    #[test]
    fn a_cut_log_says_what_is_missing() {
        let log = LOG.replace("@@tb1 end status=success\n", "");
        let e = Results::from_log(&log, "x", "import")
            .unwrap_err()
            .to_string();
        assert!(e.contains("before the kernel's end record"), "{e}");
        // int80 was measured; no macro mix came. The call gate reported ok
        // but never got to its benchmarks.
        let log = log.replace(
            "@@tb1 macro mech=int80 ops=16 batches=2 ticks_per_op=1700.0 ops_per_s=588235.3 syscalls_per_op=4\n",
            "@@tb1 mech name=callgate status=ok reason=%00\n",
        );
        let e = Results::from_log(&log, "x", "import")
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with("missing: the end record, the callgate benchmarks, the macro mix"),
            "{e}"
        );
        let log = LOG.replace("end status=success", "end status=failure");
        let e = Results::from_log(&log, "x", "import").unwrap_err();
        assert!(e.to_string().contains("status=\"failure\""), "{e}");
    }

    #[test]
    fn an_import_names_its_host_from_the_log() {
        let r = Results::from_log(LOG, "x", "import").unwrap();
        assert_eq!(r.host, "hardware");
        let tcg = LOG.replace("stepping=3", "stepping=3 hypervisor=TCGTCGTCGTCG");
        assert_eq!(
            Results::from_log(&tcg, "x", "import").unwrap().host,
            "QEMU TCG guest"
        );
        let kvm = LOG.replace("stepping=3", "stepping=3 hypervisor=KVMKVMKVM");
        assert_eq!(
            Results::from_log(&kvm, "x", "import").unwrap().host,
            "KVM guest"
        );
        let none = LOG.replace("stepping=3", "stepping=3 hypervisor=none");
        assert_eq!(
            Results::from_log(&none, "x", "import").unwrap().host,
            "hardware"
        );
    }

    #[test]
    fn a_dirty_build_is_flagged() {
        let r = Results::from_log(LOG, "x", "qemu").unwrap();
        assert!(!r.dirty && r.diff.is_empty());
        let log = LOG.replace("rev=abc", "rev=abc-dirty.0123456789ab");
        let r = Results::from_log(&log, "x", "qemu").unwrap();
        assert!(r.dirty);
        assert_eq!(r.diff, "0123456789ab");
        assert!(r.to_json().unwrap().contains("\"dirty\": true"));
    }

    #[test]
    fn command_line_warnings_are_kept() {
        let log = LOG.replace(
            "@@tb1 cpu ",
            "@@tb1 warn text=bad%20value key=entry value=sysentr\n@@tb1 warn text=unknown%20key key=colour\n@@tb1 cpu ",
        );
        let r = Results::from_log(&log, "x", "qemu").unwrap();
        assert_eq!(
            r.warnings,
            ["entry=sysentr: bad value", "colour: unknown key"]
        );
    }

    /// As `table` reads a file.
    fn load(path: &Path) -> Result<Results> {
        let text = std::fs::read_to_string(path)?;
        Results::parse(&text).with_context(|| format!("{} is not a results file", path.display()))
    }

    #[test]
    fn json_round_trip_and_truncated_file() {
        let r = Results::from_log(LOG, "a b/c", "qemu").unwrap();
        let dir = std::env::temp_dir().join(format!("testbed-results-{}", std::process::id()));
        let p = r.save(&dir).unwrap();
        assert!(p
            .file_name()
            .unwrap()
            .to_str()
            .unwrap()
            .ends_with("-a_b_c.json"));
        assert_eq!(load(&p).unwrap(), r);
        let text = std::fs::read_to_string(&p).unwrap();
        std::fs::write(&p, &text[..text.len() / 2]).unwrap();
        let e = format!("{:#}", load(&p).unwrap_err());
        assert!(
            e.contains("is not a results file: it ends early") && e.contains("(truncated?)"),
            "{e}"
        );
        // A figure JSON cannot hold (an older xtask wrote NaN as null).
        std::fs::write(&p, text.replacen("\"median\": 4.0", "\"median\": null", 1)).unwrap();
        let e = format!("{:#}", load(&p).unwrap_err());
        assert!(
            e.contains("invalid type: null") && !e.contains("truncated"),
            "{e}"
        );
        // Another of xtask's files is named for what it is.
        std::fs::write(&p, r#"{"schema":1,"kind":"bench","values":{}}"#).unwrap();
        let e = format!("{:#}", load(&p).unwrap_err());
        assert!(
            e.contains("it is a bench export, not a run's results"),
            "{e}"
        );
        std::fs::write(&p, r#"{"label":"x","provenance":null,"metrics":{}}"#).unwrap();
        assert_eq!(
            other_kind(&std::fs::read_to_string(&p).unwrap()),
            Some("a bench baseline")
        );
        let _ = std::fs::remove_dir_all(dir);
    }

    #[test]
    fn timestamps() {
        assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
        let t = UNIX_EPOCH + Duration::from_secs(1_796_083_200 + 3661);
        assert_eq!(utc_timestamp(t), "2026-12-01T01:01:01Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(utc_timestamp(leap), "2000-02-29T00:00:00Z");
    }
}
