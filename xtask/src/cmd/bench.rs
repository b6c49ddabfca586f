//! `cargo xtask bench`: many boots per variant, interleaved, compared with
//! ministat's statistics, and exported (`export.rs`) for a reviewer: JSON,
//! CSV, Markdown, ministat's text, data files and an SVG plot per metric.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use super::run::ModeArg;
use super::BootArgs;
use crate::compare::{self, Compared, Reading, Table};
use crate::export;
use crate::kbuild::{self, Artifacts};
use crate::machine::{qemu, Backend, Clock, CmdlineCheck, Machine, Scratch};
use crate::ministat::RenderOptions;
use crate::preflight;
use crate::results::{sanitize, utc_timestamp, MetricInfo, Results};

/// The exit status of `bench --fail-on-change` when a metric changed (1
/// stays "the bench itself failed").
pub const CHANGED_EXIT: i32 = 3;

/// A variant: a name and how it differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    /// Extra kernel command-line words.
    pub cmdline: String,
    /// Kernel features to build with.
    pub features: Vec<String>,
    /// A git revision to build, in a temporary worktree.
    pub rev: Option<String>,
}

/// Splits `NAME=VALUE`, with a clear error.
pub fn split_spec<'a>(flag: &str, spec: &'a str) -> Result<(&'a str, &'a str)> {
    match spec.split_once('=') {
        Some((n, v))
            if !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            Ok((n, v))
        }
        _ => bail!(
            "{flag} takes NAME=VALUE with a name of letters, digits, '-', '_' or '.': got {spec:?}"
        ),
    }
}

#[derive(Args, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// Boots per variant.
    #[arg(short = 'n', long = "boots", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub boots: u32,
    /// A variant by kernel command line: NAME=WORDS (e.g. a="entry=int80").
    #[arg(long = "variant", value_name = "NAME=CMDLINE")]
    pub variants: Vec<String>,
    /// A variant by kernel features: NAME=FEATURE[,FEATURE].
    #[arg(long = "features", value_name = "NAME=FEATURES")]
    pub features: Vec<String>,
    /// A variant by git revision, built in a temporary worktree: NAME=REV.
    #[arg(long = "rev", value_name = "NAME=REV")]
    pub revs: Vec<String>,
    /// What each boot runs: a user program (`--prog`), or the SMP benchmarks.
    #[arg(long, value_enum, default_value = "run")]
    pub mode: ModeArg,
    /// The user program each boot runs (bench, locks).
    #[arg(long, default_value = abi::cmdline::DEFAULT_PROG)]
    pub prog: String,
    /// Metrics to compare (benchmark names such as int80.null, or macro.int80);
    /// default: every metric that differs between the variants.
    #[arg(long = "metric")]
    pub metrics: Vec<String>,
    /// Confidence level in percent.
    #[arg(long, default_value_t = 95.0)]
    pub confidence: f64,
    /// Save the first variant's figures as a named baseline
    /// (<out>/baselines/NAME.json; NAME is cleaned as --label is).
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// Compare against a saved baseline (it becomes the first set). A
    /// baseline from another clock, accelerator, emulator or CPU model is
    /// refused.
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Where the exports go: <out>/<timestamp>/ (JSON, CSV, Markdown,
    /// ministat text, data files, SVG plots); baselines in <out>/baselines.
    #[arg(long, default_value = "results/bench")]
    pub out: PathBuf,
    /// Exit with status 3 when any compared metric changed (a CI gate on
    /// path lengths); 0 when every one is unchanged.
    #[arg(long)]
    pub fail_on_change: bool,
    /// With --fail-on-change: a change smaller than this, in percent, does
    /// not count.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub threshold: f64,
}

impl BenchArgs {
    pub fn variants(&self) -> Result<Vec<Variant>> {
        let mut v = Vec::new();
        for s in &self.variants {
            let (n, c) = split_spec("--variant", s)?;
            v.push(Variant {
                name: n.into(),
                cmdline: c.into(),
                features: vec![],
                rev: None,
            });
        }
        for s in &self.features {
            let (n, f) = split_spec("--features", s)?;
            let features = f
                .split(',')
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect();
            v.push(Variant {
                name: n.into(),
                cmdline: String::new(),
                features,
                rev: None,
            });
        }
        for s in &self.revs {
            let (n, r) = split_spec("--rev", s)?;
            if r.is_empty() {
                bail!("--rev {s:?}: the revision is empty");
            }
            v.push(Variant {
                name: n.into(),
                cmdline: String::new(),
                features: vec![],
                rev: Some(r.into()),
            });
        }
        if v.is_empty() {
            v.push(Variant {
                name: "default".into(),
                cmdline: String::new(),
                features: vec![],
                rev: None,
            });
        }
        let mut names: Vec<&str> = v.iter().map(|x| x.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            bail!("two variants are named {:?}", w[0]);
        }
        if v.len() + usize::from(self.baseline.is_some()) > 7 {
            bail!("ministat tells at most 7 sets apart");
        }
        if !(self.confidence > 0.0 && self.confidence < 100.0) {
            bail!("--confidence must lie strictly between 0 and 100");
        }
        if !(self.threshold.is_finite() && self.threshold >= 0.0) {
            bail!("--threshold must be a percentage of 0 or more");
        }
        for name in self.save_baseline.iter().chain(&self.baseline) {
            baseline_name(name)?;
        }
        for m in &self.metrics {
            check_metric_name(m)?;
        }
        for x in &v {
            let words = format!(
                "{} prog={} {} {}",
                self.mode.word(),
                self.prog,
                x.cmdline,
                self.boot.append
            );
            let check = CmdlineCheck::of(&words);
            if !check.invalid.is_empty() {
                bail!(
                    "variant {}: its kernel command line is invalid: {}",
                    x.name,
                    check.invalid.join("; ")
                );
            }
            if let Some(w) = check.repeat_warning() {
                eprintln!("variant {}: {w}", x.name);
            }
        }
        Ok(v)
    }
}

/// A baseline's file name from `--save-baseline`/`--baseline`, cleaned as
/// `--label` is, so that it stays inside `<out>/baselines`.
pub fn baseline_name(name: &str) -> Result<String> {
    let clean = sanitize(name.trim());
    if clean.is_empty() || clean.chars().all(|c| c == '_') {
        bail!("a baseline needs a name of letters, digits, '-' or '_': got {name:?}");
    }
    Ok(clean)
}

/// `--metric NAME` names a metric some boot can report: a benchmark name
/// (`<group>.<figure>...`, a mechanism or a group of `abi::report::names`)
/// or, for variants compared call by call, a call or `macro`. Checked
/// before any boot; whether the boots measured it is checked after.
pub fn check_metric_name(m: &str) -> Result<()> {
    use abi::report::names;
    let group = m.split('.').next().unwrap_or("");
    let known = abi::Mechanism::from_key(group).is_some()
        || names::GROUPS.contains(&group)
        || !m.contains('.') && names::CALLS.contains(&m);
    if known {
        return Ok(());
    }
    let mechs: Vec<&str> = abi::Mechanism::ALL.iter().map(|x| x.key()).collect();
    bail!(
        "--metric {m:?}: not a metric name: a benchmark such as int80.null, macro.int80, locks.contended.128, \
         a call ({}) when each variant uses one mechanism; groups: {}, {}",
        names::CALLS.join(", "),
        mechs.join(", "),
        names::GROUPS.join(", ")
    )
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
}

impl Provenance {
    /// The emulator's name without its version (`QEMU`).
    fn emulator_name(&self) -> &str {
        self.emulator.split_whitespace().next().unwrap_or("")
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
    check("clock", &base.clock, &now.clock, true);
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
struct Baseline {
    label: String,
    /// Absent in a baseline saved by an older xtask: such a baseline is
    /// refused (it cannot say what it was measured on).
    #[serde(default)]
    provenance: Option<Provenance>,
    metrics: BTreeMap<String, Vec<f64>>,
}

/// How many revision worktrees stay cached besides the ones a call uses.
const CACHED_REVS: usize = 4;

/// The commit `rev` names in the repository at `root`.
fn resolve_commit(root: &Path, rev: &str) -> Result<String> {
    let o = std::process::Command::new("git")
        .args(["rev-parse", "--verify", "--quiet"])
        .arg(format!("{rev}^{{commit}}"))
        .current_dir(root)
        .output()
        .context("cannot run git")?;
    if !o.status.success() {
        bail!("--rev {rev:?}: not a commit in this repository");
    }
    Ok(String::from_utf8_lossy(&o.stdout).trim().to_string())
}

/// The worktree directory of a commit: one per commit, reused by later
/// calls (so cargo's incremental build in it is reused too).
fn rev_dir(tmp: &Path, commit: &str) -> PathBuf {
    tmp.join(format!("rev-{}", &commit[..commit.len().min(12)]))
}

/// Which cached worktrees to remove: those not `used` by this call, beyond
/// the `keep` most recently used (`cached`: name and last use, any order).
pub fn stale_worktrees(
    mut cached: Vec<(String, std::time::SystemTime)>,
    used: &[String],
    keep: usize,
) -> Vec<String> {
    cached.retain(|(n, _)| !used.contains(n));
    cached.sort_by_key(|c| std::cmp::Reverse(c.1));
    cached.into_iter().skip(keep).map(|(n, _)| n).collect()
}

/// A checked-out worktree of `commit` at `dir`, reused when it is there.
fn worktree(root: &Path, dir: &Path, commit: &str) -> Result<()> {
    let head = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .current_dir(dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string());
    if head.as_deref() == Some(commit) && dir.join("Cargo.toml").is_file() {
        return Ok(());
    }
    let _ = std::process::Command::new("git")
        .args(["worktree", "remove", "--force"])
        .arg(dir)
        .current_dir(root)
        .output();
    let o = std::process::Command::new("git")
        .args(["worktree", "add", "--detach", "--force"])
        .arg(dir)
        .arg(commit)
        .current_dir(root)
        .output()
        .context("cannot run git")?;
    if !o.status.success() {
        bail!(
            "cannot check out {commit}: {}",
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(())
}

/// Removes the cached worktrees this call did not use, beyond the
/// [`CACHED_REVS`] most recently used.
fn prune_worktrees(root: &Path, tmp: &Path, used: &[String]) {
    let cached: Vec<(String, std::time::SystemTime)> = std::fs::read_dir(tmp)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_name().to_string_lossy().starts_with("rev-"))
        .map(|e| {
            let t = e
                .metadata()
                .and_then(|m| m.modified())
                .unwrap_or(std::time::UNIX_EPOCH);
            (e.file_name().to_string_lossy().into_owned(), t)
        })
        .collect();
    for name in stale_worktrees(cached, used, CACHED_REVS) {
        eprintln!("bench: removing the cached worktree {name}");
        let _ = std::process::Command::new("git")
            .args(["worktree", "remove", "--force"])
            .arg(tmp.join(&name))
            .current_dir(root)
            .output();
    }
    let _ = std::process::Command::new("git")
        .args(["worktree", "prune"])
        .current_dir(root)
        .output();
}

fn build_variant(v: &Variant, tmp: &Path, used: &mut Vec<String>) -> Result<Artifacts> {
    let dest = tmp.join(format!("variant-{}", v.name));
    match &v.rev {
        None => kbuild::build_into(&kbuild::root(), &v.features, &dest, None),
        Some(rev) => {
            let root = kbuild::root();
            let commit = resolve_commit(&root, rev)?;
            let dir = rev_dir(tmp, &commit);
            worktree(&root, &dir, &commit).with_context(|| format!("variant {}", v.name))?;
            // Mark it used now, for the pruning of the least recently used.
            let _ = std::fs::File::open(&dir)
                .and_then(|f| f.set_modified(std::time::SystemTime::now()));
            used.push(
                dir.file_name()
                    .unwrap_or_default()
                    .to_string_lossy()
                    .into_owned(),
            );
            kbuild::build_into(&dir, &v.features, &dest, None)
                .with_context(|| format!("variant {}: building {rev}", v.name))
        }
    }
}

/// `cargo xtask bench`: check every flag, build the variants, boot them in
/// turn, compare, save the baseline if asked, export; with
/// `--fail-on-change`, exit with [`CHANGED_EXIT`] when a metric changed.
pub fn bench(a: BenchArgs) -> Result<i32> {
    let variants = a.variants()?;
    a.boot.check()?;
    // Everything that can fail without a boot fails before the first one.
    let baseline = a
        .baseline
        .as_deref()
        .map(|n| load_baseline(&a.out, n))
        .transpose()?;
    let (stamp, dir) = export_dir(&a.out)?;
    if a.save_baseline.is_some() {
        let b = a.out.join("baselines");
        std::fs::create_dir_all(&b)
            .with_context(|| format!("cannot create the baseline directory {}", b.display()))?;
    }
    preflight::ensure(a.boot.need())?;
    let tmp = kbuild::root().join("target/xtask/bench");
    std::fs::create_dir_all(&tmp)?;
    let builds = build_variants(&variants, &tmp)?;
    let started = Instant::now();
    // The builds are kept between runs; the boots' files are this run's own.
    let scratch = Scratch::new("bench")?;
    let m = boot_interleaved(&a, &variants, &builds, scratch.path(), started)?;
    let now = m.provenance.values().next().cloned().unwrap_or_default();
    let mut notes = Vec::new();
    if let Some(b) = &baseline {
        notes = check_baseline(b, &now)?;
    }
    let first_raw = m.table.get(&variants[0].name).cloned().unwrap_or_default();
    let (table, order, rename) = sets_to_compare(m.table, baseline.as_ref(), &variants);
    let batches = compare::renamed(m.batches, rename);
    let infos: BTreeMap<String, MetricInfo> =
        m.infos.into_iter().map(|(k, i)| (rename(&k), i)).collect();
    let unit = m.unit.as_str();
    let info_of = |k: &str| {
        infos.get(k).cloned().unwrap_or(MetricInfo {
            unit: unit.into(),
            measure: abi::report::Measure::PerOp,
        })
    };
    let reading = Reading::of(Clock::from_key(&m.clock), m.accel == qemu::Accel::Tcg.key());
    let header = format!(
        "bench: {} boots per variant, clock={}, accel={}{}",
        a.boots,
        m.clock,
        m.accel,
        if reading.host_time {
            " (TCG ticks: host time under emulation, not cycles)".to_string()
        } else if m.accel == crate::machine::bochs::ACCEL {
            format!(
                " ({}; emulator figures, not cycles)",
                abi::syscall::BOCHS_TICK
            )
        } else {
            String::new()
        }
    );
    println!("{header}");
    for n in &notes {
        println!("note: {n}");
    }
    let compared = compare_all(&a, &table, &order, reading, &info_of)?;
    // What was compared: the metrics asked for, or every one measured.
    let all_metrics: Vec<String> = if a.metrics.is_empty() {
        table
            .values()
            .flat_map(|t| t.keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect()
    } else {
        a.metrics.clone()
    };
    let summary = Summary::of(&compared, &all_metrics, a.threshold);
    println!("{}", summary.line());
    if let Some(name) = &a.save_baseline {
        save_baseline(&a.out, name, &variants[0].name, &now, first_raw)?;
    }
    let report = export::Report {
        stamp: &stamp,
        header: &header,
        boots: a.boots,
        clock: &m.clock,
        accel: &m.accel,
        machine: &m.machine,
        confidence: a.confidence,
        variants: variants
            .iter()
            .map(|v| export::VariantInfo {
                name: v.name.clone(),
                how: describe(v),
                provenance: m.provenance.get(&v.name).cloned().unwrap_or_default(),
            })
            .collect(),
        baseline: baseline.as_ref().map(|b| export::VariantInfo {
            name: order[0].clone(),
            how: "saved baseline".into(),
            provenance: b.provenance.clone().unwrap_or_default(),
        }),
        notes: &notes,
        compared: &compared,
        summary: &summary,
        values: &table,
        batches: &batches,
        info_of: &info_of,
    };
    export::write(&dir, &report)?;
    eprintln!(
        "exports: {}/ (bench.json, bench.csv, bench.md, ministat.txt, data/, plots)",
        dir.display()
    );
    eprintln!(
        "bench: {} boots in {:.1} s",
        a.boots as usize * variants.len(),
        started.elapsed().as_secs_f64()
    );
    if a.fail_on_change && !summary.changed.is_empty() {
        eprintln!(
            "bench: --fail-on-change: {} changed",
            summary.changed.join(", ")
        );
        return Ok(CHANGED_EXIT);
    }
    Ok(0)
}

/// A new export directory `<out>/<timestamp>[-N]/`, made before any boot so
/// that a path that cannot be written fails first, naming itself.
fn export_dir(out: &Path) -> Result<(String, PathBuf)> {
    std::fs::create_dir_all(out)
        .with_context(|| format!("cannot create the export directory {}", out.display()))?;
    let stamp = utc_timestamp(std::time::SystemTime::now()).replace([':', '-'], "");
    for n in 1.. {
        let name = if n == 1 {
            stamp.clone()
        } else {
            format!("{stamp}-{n}")
        };
        let dir = out.join(&name);
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok((name, dir)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => {
                return Err(e).with_context(|| {
                    format!("cannot create the export directory {}", dir.display())
                })
            }
        }
    }
    unreachable!("some suffix is free")
}

/// Step 1: each variant's kernel and programs, built apart; revisions in
/// worktrees cached by commit.
fn build_variants(variants: &[Variant], tmp: &Path) -> Result<Vec<Artifacts>> {
    let mut used = Vec::new();
    let builds = variants
        .iter()
        .map(|v| {
            eprintln!("bench: building variant {}", v.name);
            build_variant(v, tmp, &mut used)
        })
        .collect::<Result<Vec<_>>>()?;
    if variants.iter().any(|v| v.rev.is_some()) {
        prune_worktrees(&kbuild::root(), tmp, &used);
    }
    Ok(builds)
}

/// Step 2: the saved baseline `name`, from `<out>/baselines/<name>.json`.
fn load_baseline(out: &Path, name: &str) -> Result<Baseline> {
    let p = out
        .join("baselines")
        .join(format!("{}.json", baseline_name(name)?));
    let text = std::fs::read_to_string(&p)
        .with_context(|| format!("no saved baseline {name:?} ({})", p.display()))?;
    serde_json::from_str::<Baseline>(&text)
        .with_context(|| format!("{} is not a baseline file", p.display()))
}

/// A baseline compares with this run only on the same clock, accelerator,
/// emulator and CPU; returns what differs but compares, to be said.
fn check_baseline(b: &Baseline, now: &Provenance) -> Result<Vec<String>> {
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

/// What the boots measured: per variant, per metric, one value per boot
/// (and every batch's value per operation, where the boot kept them), how
/// each metric reads, the clock, accelerator and unit the kernel reported,
/// and where each variant's figures come from.
struct Measured {
    table: Table,
    batches: Table,
    infos: BTreeMap<String, MetricInfo>,
    clock: String,
    accel: String,
    unit: String,
    /// The first boot's machine (`QEMU 7.2.0 TCG  clock=...  cpu=qemu32`).
    machine: String,
    provenance: BTreeMap<String, Provenance>,
}

/// The host's CPU, from /proc/cpuinfo.
fn host_cpu() -> String {
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
fn boot_interleaved(
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
        clock: String::new(),
        accel: String::new(),
        unit: String::new(),
        machine: String::new(),
        provenance: BTreeMap::new(),
    };
    let mut emulator = String::new();
    let host_cpu = host_cpu();
    let mut done = 0usize;
    for _round in 0..a.boots {
        for (v, art) in variants.iter().zip(builds) {
            progress(done, total, started, &v.name);
            let words = format!("{} prog={} {}", a.mode.word(), a.prog, v.cmdline)
                .trim()
                .to_string();
            let machine = Machine::build(&spec, art, &words, tmp)?;
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
            crate::model::finish(&machine, &log.serial, &mut r)?;
            if !r.warnings.is_empty() {
                eprintln!();
                bail!(
                    "variant {}: the kernel warned about its command line ({}): {}",
                    v.name,
                    r.cmdline,
                    r.warnings.join("; ")
                );
            }
            m.clock = r.clock.clone();
            m.accel = r.accel.clone();
            m.unit = crate::model::unit(&r).unwrap_or_else(|| r.unit.clone());
            m.infos.extend(r.metric_info());
            m.provenance
                .entry(v.name.clone())
                .or_insert_with(|| Provenance {
                    clock: r.clock.clone(),
                    accel: r.accel.clone(),
                    emulator: emulator.clone(),
                    cpu_model: machine.cpu_model(),
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
                        .map(|p| crate::model::label(p, r.model_virt))
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
    progress(done, total, started, "");
    eprintln!();
    Ok(m)
}

/// How a metric is renamed for the comparison.
type Rename = fn(&str) -> String;

/// Step 4: the sets side by side, the baseline first; variants that each
/// measured one mechanism compared call by call, variants that each measured
/// one pool layout layout against layout. Returns the table, the order of
/// its sets, and how metrics were renamed.
fn sets_to_compare(
    mut table: Table,
    baseline: Option<&Baseline>,
    variants: &[Variant],
) -> (Table, Vec<String>, Rename) {
    let mut order: Vec<String> = Vec::new();
    if let Some(b) = baseline {
        let name = format!("{} (baseline)", b.label);
        table.insert(name.clone(), b.metrics.clone());
        order.push(name);
    }
    order.extend(variants.iter().map(|v| v.name.clone()));
    let rename: Rename = if compare::one_mechanism_each(&table) {
        compare::call_key
    } else if compare::one_layout_each(&table) {
        compare::layout_key
    } else {
        str::to_string
    };
    (compare::renamed(table, rename), order, rename)
}

/// Step 5: each chosen metric compared across the sets, on stdout. A
/// metric some sets lack is said to be "only in" the others.
fn compare_all(
    a: &BenchArgs,
    table: &Table,
    order: &[String],
    reading: Reading,
    info_of: &dyn Fn(&str) -> MetricInfo,
) -> Result<Vec<Compared>> {
    let metrics = compare::chosen_metrics(table, &a.metrics)?;
    let opts = RenderOptions {
        confidence: a.confidence,
        ..RenderOptions::default()
    };
    if metrics.is_empty() {
        let all: std::collections::BTreeSet<&str> = table
            .values()
            .flat_map(|m| m.keys().map(String::as_str))
            .collect();
        println!(
            "no metric differs between the variants; identical: {}",
            all.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    let mut out = Vec::new();
    for m in &metrics {
        let info = info_of(m);
        if let Some(have) = compare::only_in(table, order, m) {
            println!(
                "== {m} ({}): only in {}",
                info.describe(),
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            );
            out.push(Compared {
                metric: m.clone(),
                info: info.clone(),
                reading,
                sets: order
                    .iter()
                    .map(|n| {
                        let v = table.get(n).and_then(|t| t.get(m)).cloned();
                        (n.clone(), v.unwrap_or_default())
                    })
                    .collect(),
                verdicts: order[1..]
                    .iter()
                    .map(|n| {
                        let of = |s: &String| table.get(s).and_then(|t| t.get(m)).cloned();
                        let v = match (of(&order[0]), of(n)) {
                            (Some(x), Some(y)) => {
                                let pair = [(order[0].clone(), x), (n.clone(), y)];
                                compare::compare_metric(m, &pair, reading, &info, &opts)
                                    .verdicts
                                    .remove(0)
                                    .1
                            }
                            _ => compare::Verdict::Absent,
                        };
                        (n.clone(), v)
                    })
                    .collect(),
                text: String::new(),
            });
            continue;
        }
        let sets: Vec<(String, Vec<f64>)> = order
            .iter()
            .map(|n| (n.clone(), table[n][m].clone()))
            .collect();
        let c = compare::compare_metric(m, &sets, reading, &info, &opts);
        print!("{}", c.text);
        out.push(c);
    }
    Ok(out)
}

/// What the comparison found, over every metric measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Summary {
    /// Metrics that changed (by at least the threshold).
    pub changed: Vec<String>,
    /// Metrics compared and found unchanged (under an exact clock, those no
    /// set differs in are unchanged without a comparison of their own).
    pub unchanged: Vec<String>,
    pub threshold: f64,
}

impl Summary {
    pub fn of(compared: &[Compared], all: &[String], threshold: f64) -> Summary {
        let big = |c: &Compared| {
            c.verdicts.iter().any(|(_, v)| {
                v.changed()
                    && match v {
                        compare::Verdict::Exact { percent, .. } => percent.abs() >= threshold,
                        compare::Verdict::Proven(x) => x.percent.abs() >= threshold,
                        _ => true,
                    }
            })
        };
        let changed: Vec<String> = compared
            .iter()
            .filter(|c| big(c))
            .map(|c| c.metric.clone())
            .collect();
        Summary {
            unchanged: all
                .iter()
                .filter(|m| !changed.contains(m))
                .cloned()
                .collect(),
            changed,
            threshold,
        }
    }

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

/// Step 6: the first variant's figures as baseline `name`, with where they
/// come from.
fn save_baseline(
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

fn describe(v: &Variant) -> String {
    let mut d = Vec::new();
    if !v.cmdline.is_empty() {
        d.push(format!("cmdline: {}", v.cmdline));
    }
    if !v.features.is_empty() {
        d.push(format!("features: {}", v.features.join(",")));
    }
    if let Some(r) = &v.rev {
        d.push(format!("rev: {r}"));
    }
    if d.is_empty() {
        "as built".into()
    } else {
        d.join("; ")
    }
}

/// A one-line progress bar on stderr: boots done, ETA, the variant running.
fn progress(done: usize, total: usize, started: Instant, running: &str) {
    let width = 30;
    let filled = done * width / total.max(1);
    let eta = if done == 0 {
        "?".to_string()
    } else {
        let per = started.elapsed().as_secs_f64() / done as f64;
        format!("{:.0} s", per * (total - done) as f64)
    };
    eprint!(
        "\r[{}{}] {done}/{total} boots, ETA {eta}{}   ",
        "#".repeat(filled),
        ".".repeat(width - filled),
        if running.is_empty() {
            String::new()
        } else {
            format!(", running {running}")
        }
    );
    let _ = std::io::stderr().flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> BenchArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            b: BenchArgs,
        }
        let mut v = vec!["x"];
        v.extend_from_slice(extra);
        T::try_parse_from(v).unwrap().b
    }

    #[test]
    fn variants_from_flags() {
        let a = args(&[
            "--variant",
            "a=entry=int80",
            "--variant",
            "b=entry=sysenter",
            "--rev",
            "old=HEAD~1",
        ]);
        let v = a.variants().unwrap();
        assert_eq!(
            v[0],
            Variant {
                name: "a".into(),
                cmdline: "entry=int80".into(),
                features: vec![],
                rev: None
            }
        );
        assert_eq!(v[2].rev.as_deref(), Some("HEAD~1"));
        assert_eq!(args(&[]).variants().unwrap()[0].name, "default");
    }

    #[test]
    fn bad_variant_specs() {
        assert!(args(&["--variant", "noequals"])
            .variants()
            .unwrap_err()
            .to_string()
            .contains("NAME=VALUE"));
        assert!(args(&["--variant", "a b=x"]).variants().is_err());
        assert!(args(&["--variant", "a=x", "--variant", "a=y"])
            .variants()
            .unwrap_err()
            .to_string()
            .contains("two variants"));
        assert!(args(&["--rev", "a="]).variants().is_err());
        assert!(args(&["--confidence", "100"]).variants().is_err());
    }

    #[test]
    fn an_invalid_variant_command_line_fails_before_any_boot() {
        let e = args(&["--variant", "a=entry=sysentr"])
            .variants()
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("variant a: its kernel command line is invalid: entry=sysentr"),
            "{e}"
        );
        let e = args(&["--variant", "a=colour=red"]).variants().unwrap_err();
        assert!(e.to_string().contains("unknown key \"colour\""), "{e}");
        // --append reaches every variant and is checked with it.
        assert!(args(&["--append", "batches=0"]).variants().is_err());
        assert!(args(&["--variant", "a=entry=int80,callgate"])
            .variants()
            .is_ok());
    }

    #[test]
    fn an_export_directory_that_cannot_be_made_fails_naming_it() {
        let e = export_dir(Path::new("/proc/no/such/dir")).unwrap_err();
        assert!(
            format!("{e:#}").contains("cannot create the export directory /proc/no/such/dir"),
            "{e:#}"
        );
        let tmp = std::env::temp_dir().join(format!("testbed-out-{}", std::process::id()));
        let (a, da) = export_dir(&tmp).unwrap();
        let (b, db) = export_dir(&tmp).unwrap();
        assert!(da.is_dir() && db.is_dir() && a != b, "{a} {b}");
        let _ = std::fs::remove_dir_all(&tmp);
    }

    #[test]
    fn baseline_names_stay_inside_the_baseline_directory() {
        assert_eq!(baseline_name("/tmp/x").unwrap(), "_tmp_x");
        assert_eq!(baseline_name("../up").unwrap(), "___up");
        assert!(baseline_name("").is_err());
        assert!(baseline_name("  ").is_err());
        assert!(args(&["--save-baseline", ""]).variants().is_err());
        assert!(args(&["--baseline", "/"]).variants().is_err());
    }

    #[test]
    fn metric_names_are_checked_before_the_boots() {
        for ok in [
            "int80.null",
            "macro.sysenter",
            "macro",
            "null",
            "loop",
            "locks.contended.128",
            "locks.contended",
            "ebizzy",
            "smp.pingpong",
            "forktest.cr3",
        ] {
            assert!(check_metric_name(ok).is_ok(), "{ok}");
        }
        for bad in ["int80.nul", "nul", "sysentr.null", ""] {
            // `int80.nul` is a mechanism's group: only the boots can say it
            // is absent; the others name nothing any boot reports.
            if bad == "int80.nul" {
                continue;
            }
            let e = check_metric_name(bad).unwrap_err().to_string();
            assert!(e.contains("not a metric name"), "{bad}: {e}");
        }
        assert!(args(&["--metric", "sysentr.null"]).variants().is_err());
    }

    fn provenance() -> Provenance {
        Provenance {
            clock: "icount".into(),
            accel: "tcg".into(),
            emulator: "QEMU 7.2.0".into(),
            cpu_model: "qemu32".into(),
            cpu: "QEMU Virtual CPU version 2.5+".into(),
            rev: "abc".into(),
            cmdline: "mode=run prog=bench clock=icount accel=tcg".into(),
            batches: "64".into(),
            batch_size: "4096".into(),
            host: "h".into(),
            ..Provenance::default()
        }
    }

    #[test]
    fn a_baseline_compares_only_like_with_like() {
        let base = provenance();
        assert_eq!(baseline_mismatch(&base, &base), (vec![], vec![]));
        let tsc = Provenance {
            clock: "tsc".into(),
            ..provenance()
        };
        let (refuse, _) = baseline_mismatch(&base, &tsc);
        assert_eq!(refuse, ["clock: baseline \"icount\", this run \"tsc\""]);
        let pentium = Provenance {
            cpu_model: "pentium".into(),
            cpu: "Intel Pentium".into(),
            ..provenance()
        };
        assert_eq!(baseline_mismatch(&base, &pentium).0.len(), 2);
        let modelled = Provenance {
            profile: "modelled, profile p6".into(),
            ..provenance()
        };
        assert!(baseline_mismatch(&base, &modelled).0[0].starts_with("model profile"));
        let edited = Provenance {
            rev: "abc-dirty.123".into(),
            dirty: true,
            emulator: "QEMU 8.0.0".into(),
            ..provenance()
        };
        let (refuse, flag) = baseline_mismatch(&base, &edited);
        assert!(refuse.is_empty());
        assert!(flag[0].starts_with("revision: baseline \"abc\", this run \"abc-dirty.123\""));
        assert!(flag[1].starts_with("emulator version"));
        // A baseline that does not say what it was measured on is refused.
        let old = Baseline {
            label: "old".into(),
            provenance: None,
            metrics: BTreeMap::new(),
        };
        let e = check_baseline(&old, &base).unwrap_err().to_string();
        assert!(e.contains("older xtask"), "{e}");
        let b = Baseline {
            provenance: Some(base.clone()),
            ..old
        };
        let e = check_baseline(&b, &tsc).unwrap_err().to_string();
        assert!(e.contains("another machine") && e.contains("clock"), "{e}");
        let old_file = r#"{"label":"x","clock":"icount","metrics":{}}"#;
        assert!(serde_json::from_str::<Baseline>(old_file)
            .unwrap()
            .provenance
            .is_none());
    }

    #[test]
    fn cached_worktrees_are_pruned_least_recently_used_first() {
        let t = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
        let cached = vec![
            ("rev-a".to_string(), t(1)),
            ("rev-b".to_string(), t(5)),
            ("rev-c".to_string(), t(3)),
            ("rev-d".to_string(), t(4)),
        ];
        assert_eq!(
            stale_worktrees(cached.clone(), &["rev-a".into()], 1),
            ["rev-d", "rev-c"]
        );
        assert_eq!(stale_worktrees(cached.clone(), &[], 2), ["rev-c", "rev-a"]);
        assert!(stale_worktrees(cached, &[], CACHED_REVS).is_empty());
        let commit = "0123456789abcdef0123456789abcdef01234567";
        assert_eq!(
            rev_dir(Path::new("/t"), commit),
            Path::new("/t/rev-0123456789ab")
        );
    }

    #[test]
    fn a_revision_worktree_is_reused_by_commit() {
        let root = std::env::temp_dir().join(format!("testbed-wt-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(&root).unwrap();
        let git = |args: &[&str]| {
            let o = std::process::Command::new("git")
                .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                .args(args)
                .current_dir(&root)
                .output()
                .unwrap();
            assert!(o.status.success(), "git {args:?}");
        };
        git(&["init", "-q"]);
        std::fs::write(root.join("Cargo.toml"), "# one\n").unwrap();
        git(&["add", "Cargo.toml"]);
        git(&["commit", "-q", "-m", "one"]);
        let commit = resolve_commit(&root, "HEAD").unwrap();
        assert!(resolve_commit(&root, "no-such-rev").is_err());
        let tmp = root.join("cache");
        let dir = rev_dir(&tmp, &commit);
        worktree(&root, &dir, &commit).unwrap();
        // What a build leaves in the worktree survives the next call.
        std::fs::write(dir.join("built"), "").unwrap();
        worktree(&root, &dir, &commit).unwrap();
        assert!(dir.join("built").is_file(), "the worktree was made again");
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn the_summary_lists_changed_and_unchanged_metrics() {
        let info = MetricInfo {
            unit: "instructions".into(),
            measure: abi::report::Measure::PerOp,
        };
        let exact = Reading::of(Some(Clock::Icount), true);
        let c = |m: &str, b: f64| {
            compare::compare_metric(
                m,
                &[("a".into(), vec![100.0; 3]), ("b".into(), vec![b; 3])],
                exact,
                &info,
                &RenderOptions::default(),
            )
        };
        let compared = [c("null", 102.0), c("getpid", 100.0)];
        let all = ["getpid", "loop", "null"].map(String::from);
        let s = Summary::of(&compared, &all, 0.0);
        assert_eq!(s.changed, ["null"]);
        assert_eq!(s.unchanged, ["getpid", "loop"]);
        assert_eq!(
            s.line(),
            "bench: 3 metrics compared: 1 changed (null); 2 unchanged (getpid, loop)"
        );
        // A 2% change under a 5% threshold is not a change.
        let s = Summary::of(&compared, &all, 5.0);
        assert!(s.changed.is_empty() && s.unchanged.len() == 3);
        assert!(args(&["--threshold=-1"]).variants().is_err());
        assert!(args(&["--fail-on-change"]).fail_on_change);
    }
}
