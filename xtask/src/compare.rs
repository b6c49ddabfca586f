//! Comparisons: many boots per variant (`cargo xtask bench`), batches of one
//! boot (`cargo xtask run --compare`), and the speed-up table across result
//! files (`cargo xtask table`). The statistics are ministat's.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use crate::kbuild::{self, Artifacts};
use crate::ministat::{self, RenderOptions};
use crate::results::{utc_timestamp, Results};
use crate::{preflight, qemu, BootArgs};

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
    /// Metrics to compare (benchmark names such as int80.null, or macro.int80);
    /// default: every metric that differs between the variants.
    #[arg(long = "metric")]
    pub metrics: Vec<String>,
    /// Confidence level in percent.
    #[arg(long, default_value_t = 95.0)]
    pub confidence: f64,
    /// Save the first variant's figures as a named baseline.
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// Compare against a saved baseline (it becomes the first set).
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Where to write the JSON, CSV and Markdown exports.
    #[arg(long, default_value = "results")]
    pub out: PathBuf,
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
        Ok(v)
    }
}

/// Every metric of one boot: benchmark medians (per call) and macro ticks
/// per op; for a model run, the modelled cycles per call of every benchmark
/// the model measured (see `model::metrics`).
pub fn metrics_of(r: &Results) -> BTreeMap<String, f64> {
    if r.model_profile.is_some() {
        return crate::model::metrics(r);
    }
    let mut m: BTreeMap<String, f64> = r
        .benches
        .iter()
        .map(|b| (b.name.clone(), b.median))
        .collect();
    for x in &r.macros {
        m.insert(format!("macro.{}", x.mech), x.ticks_per_op);
    }
    m
}

/// Per variant, per metric, one value per boot.
pub type Table = BTreeMap<String, BTreeMap<String, Vec<f64>>>;

/// The comparison of one metric across sets, as text. Under icount every
/// boot gives the same count, so there is no distribution to test: it says
/// "identical" or "differs by exactly N instructions".
pub fn compare_metric(
    metric: &str,
    sets: &[(String, Vec<f64>)],
    exact: bool,
    unit: &str,
    opts: &RenderOptions,
) -> String {
    let mut s = format!(
        "== {metric} ({unit} per call{})\n",
        if metric.starts_with("macro") {
            "; per op of the macro mix"
        } else {
            ""
        }
    );
    let constant = |v: &[f64]| v.windows(2).all(|w| w[0] == w[1]);
    if exact && sets.iter().all(|(_, v)| !v.is_empty() && constant(v)) {
        let base = sets[0].1[0];
        for (name, v) in sets {
            let d = v[0] - base;
            let what = if name == &sets[0].0 {
                "baseline".to_string()
            } else if d == 0.0 {
                "identical".to_string()
            } else {
                format!(
                    "differs by exactly {} {unit} ({:+.2}%)",
                    fmt_num(d),
                    100.0 * d / base
                )
            };
            s += &format!("  {name:<18} {:>10}  {what}\n", fmt_num(v[0]));
        }
        return s;
    }
    if sets.iter().any(|(_, v)| v.len() < 3) {
        s += "  (fewer than 3 values in a set: no statistics; use more boots)\n";
        for (name, v) in sets {
            s += &format!("  {name:<12} {:?}\n", v);
        }
        return s;
    }
    s + &ministat::render(sets, opts)
}

fn fmt_num(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.4}")
    }
}

fn mechanism_of(metric: &str) -> Option<&str> {
    let m = metric.strip_prefix("macro.").unwrap_or(metric);
    let mech = m.split('.').next()?;
    abi::Mechanism::from_key(mech).map(|x| x.key())
}

/// True when every variant measured exactly one mechanism (as with
/// `--variant a=entry=int80 --variant b=entry=sysenter`).
fn one_mechanism_each(t: &Table) -> bool {
    t.len() > 1
        && t.values().all(|ms| {
            let mechs: std::collections::BTreeSet<&str> =
                ms.keys().filter_map(|k| mechanism_of(k)).collect();
            mechs.len() == 1
        })
}

/// Renames `int80.null` to `null` and `macro.int80` to `macro`, so variants
/// that each use one mechanism are compared call by call.
fn by_call(t: Table) -> Table {
    t.into_iter()
        .map(|(v, ms)| {
            let renamed = ms
                .into_iter()
                .map(|(k, vals)| {
                    let key = if k.starts_with("macro.") {
                        "macro".to_string()
                    } else if mechanism_of(&k).is_some() {
                        k.split_once('.').map_or(k.clone(), |(_, c)| c.to_string())
                    } else {
                        k
                    };
                    (key, vals)
                })
                .collect();
            (v, renamed)
        })
        .collect()
}

/// Which metrics to show: the asked ones, or those whose values differ.
pub fn chosen_metrics(table: &Table, asked: &[String]) -> Result<Vec<String>> {
    let all: Vec<String> = table
        .values()
        .flat_map(|m| m.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    if !asked.is_empty() {
        for a in asked {
            if !all.contains(a) {
                bail!("no metric {a:?}; the metrics are: {}", all.join(", "));
            }
        }
        return Ok(asked.to_vec());
    }
    Ok(all
        .into_iter()
        .filter(|m| {
            let vals: Vec<&Vec<f64>> = table.values().filter_map(|v| v.get(m)).collect();
            vals.len() > 1 && vals.iter().any(|v| *v != vals[0])
                || vals.iter().any(|v| v.windows(2).any(|w| w[0] != w[1]))
        })
        .collect())
}

#[derive(Serialize, Deserialize)]
struct Baseline {
    label: String,
    clock: String,
    metrics: BTreeMap<String, Vec<f64>>,
}

#[derive(Serialize)]
struct Export<'a> {
    timestamp: String,
    boots: u32,
    clock: &'a str,
    accel: &'a str,
    variants: Vec<(String, String)>,
    values: &'a Table,
}

fn build_variant(v: &Variant, tmp: &Path) -> Result<Artifacts> {
    let dest = tmp.join(format!("variant-{}", v.name));
    match &v.rev {
        None => kbuild::build_into(&kbuild::root(), &v.features, &dest, None),
        Some(rev) => {
            let dir = tmp.join(format!("rev-{}", v.name));
            let _ = std::process::Command::new("git")
                .args(["worktree", "remove", "--force"])
                .arg(&dir)
                .current_dir(kbuild::root())
                .output();
            let o = std::process::Command::new("git")
                .args(["worktree", "add", "--detach", "--force"])
                .arg(&dir)
                .arg(rev)
                .current_dir(kbuild::root())
                .output()
                .context("cannot run git")?;
            if !o.status.success() {
                bail!(
                    "variant {}: cannot check out {rev}: {}",
                    v.name,
                    String::from_utf8_lossy(&o.stderr).trim()
                );
            }
            kbuild::build_into(&dir, &v.features, &dest, None)
                .with_context(|| format!("variant {}: building {rev}", v.name))
        }
    }
}

pub fn bench(a: BenchArgs) -> Result<i32> {
    let variants = a.variants()?;
    preflight::ensure(if a.boot.grub {
        preflight::Need::QemuAndGrub
    } else {
        preflight::Need::Qemu
    })?;
    let tmp = kbuild::root().join("target/xtask/bench");
    std::fs::create_dir_all(&tmp)?;
    let mut builds = Vec::new();
    for v in &variants {
        eprintln!("bench: building variant {}", v.name);
        builds.push(build_variant(v, &tmp)?);
    }
    let baseline = match &a.baseline {
        Some(n) => {
            let p = a.out.join("baselines").join(format!("{n}.json"));
            let text = std::fs::read_to_string(&p)
                .with_context(|| format!("no saved baseline {n:?} ({})", p.display()))?;
            Some(
                serde_json::from_str::<Baseline>(&text)
                    .with_context(|| format!("{} is not a baseline file", p.display()))?,
            )
        }
        None => None,
    };
    // The accelerator notice once, before the progress bar takes the line.
    if let (_, Some(notice)) = qemu::detect_accel(a.boot.accel) {
        eprintln!("{notice}");
    }
    let total = a.boots as usize * variants.len();
    let mut table: Table = BTreeMap::new();
    let mut clock = String::new();
    let mut accel = String::new();
    let mut model_unit = None;
    let started = Instant::now();
    let mut done = 0usize;
    // Interleaved: A B A B ..., so drift in the host hits every variant alike.
    for _round in 0..a.boots {
        for (v, art) in variants.iter().zip(&builds) {
            progress(done, total, started, &v.name);
            let words = format!("mode=run prog=bench {}", v.cmdline);
            let p = crate::prepare(&a.boot, art, &words, &tmp)?;
            let log = qemu::run(&p.boot, &mut |_| {})?;
            if !log.succeeded() {
                eprintln!();
                bail!(
                    "variant {}: boot {} failed: {}",
                    v.name,
                    done + 1,
                    log.explain(20)
                );
            }
            let mut r = Results::from_log(&log.serial, &v.name, "qemu")?;
            crate::model::finish(&p, &log.serial, &mut r)?;
            if let Some(u) = crate::model::unit(&r) {
                model_unit = Some(u);
            }
            clock = r.clock.clone();
            accel = r.accel.clone();
            for (k, val) in metrics_of(&r) {
                table
                    .entry(v.name.clone())
                    .or_default()
                    .entry(k)
                    .or_default()
                    .push(val);
            }
            done += 1;
        }
    }
    progress(done, total, started, "");
    eprintln!();
    if let Some(b) = &baseline {
        if b.clock != clock {
            eprintln!(
                "warning: baseline {:?} was measured with clock={}, this run with clock={clock}",
                b.label, b.clock
            );
        }
        table.insert(format!("{} (baseline)", b.label), b.metrics.clone());
    }
    let table = if one_mechanism_each(&table) {
        by_call(table)
    } else {
        table
    };
    let mut order: Vec<String> = Vec::new();
    if let Some(b) = &baseline {
        order.push(format!("{} (baseline)", b.label));
    }
    order.extend(variants.iter().map(|v| v.name.clone()));
    let unit = match (clock.as_str(), accel.as_str()) {
        _ if model_unit.is_some() => model_unit.as_deref().unwrap_or_default(),
        ("icount", _) => "instructions",
        ("tsc", "tcg") => "TCG ticks",
        _ => "cycles",
    };
    let metrics = chosen_metrics(&table, &a.metrics)?;
    let opts = RenderOptions {
        confidence: a.confidence,
        ..RenderOptions::default()
    };
    println!(
        "bench: {} boots per variant, clock={clock}, accel={accel}{}",
        a.boots,
        if accel == "tcg" && clock == "tsc" {
            " (TCG cycle counts are emulator artefacts)"
        } else {
            ""
        }
    );
    if metrics.is_empty() {
        println!("no metric differs between the variants");
    }
    let mut md = format!(
        "| metric | {} |\n|---|{}\n",
        order.join(" | "),
        "---|".repeat(order.len())
    );
    for m in &metrics {
        let sets: Vec<(String, Vec<f64>)> = order
            .iter()
            .map(|n| {
                (
                    n.clone(),
                    table
                        .get(n)
                        .and_then(|t| t.get(m))
                        .cloned()
                        .unwrap_or_default(),
                )
            })
            .collect();
        if sets.iter().any(|(_, v)| v.is_empty()) {
            println!("== {m}: not measured by every variant");
            continue;
        }
        print!(
            "{}",
            compare_metric(m, &sets, clock == "icount", unit, &opts)
        );
        let medians: Vec<String> = sets.iter().map(|(_, v)| fmt_num(median(v))).collect();
        md += &format!("| {m} | {} |\n", medians.join(" | "));
    }
    if let Some(name) = &a.save_baseline {
        let first = &variants[0].name;
        let b = Baseline {
            label: name.clone(),
            clock: clock.clone(),
            metrics: table[first].clone(),
        };
        let dir = a.out.join("baselines");
        std::fs::create_dir_all(&dir)?;
        let p = dir.join(format!("{name}.json"));
        std::fs::write(&p, serde_json::to_string_pretty(&b)?)?;
        eprintln!(
            "baseline {name:?} saved from variant {first}: {}",
            p.display()
        );
    }
    // Exports.
    std::fs::create_dir_all(&a.out)?;
    let stamp = utc_timestamp(std::time::SystemTime::now()).replace([':', '-'], "");
    let base = a.out.join(format!("{stamp}-bench"));
    let export = Export {
        timestamp: stamp.clone(),
        boots: a.boots,
        clock: &clock,
        accel: &accel,
        variants: variants
            .iter()
            .map(|v| (v.name.clone(), describe(v)))
            .collect(),
        values: &table,
    };
    std::fs::write(
        base.with_extension("json"),
        serde_json::to_string_pretty(&export)? + "\n",
    )?;
    let mut csv = String::from("variant,boot,metric,value\n");
    for (v, ms) in &table {
        for (m, vals) in ms {
            for (i, x) in vals.iter().enumerate() {
                csv += &format!("{v},{},{m},{x}\n", i + 1);
            }
        }
    }
    std::fs::write(base.with_extension("csv"), csv)?;
    std::fs::write(
        base.with_extension("md"),
        format!(
            "Medians over {} boots, {unit} per call (clock={clock}, accel={accel}).\n\n{md}",
            a.boots
        ),
    )?;
    eprintln!("exports: {}.{{json,csv,md}}", base.display());
    eprintln!(
        "bench: {} boots in {:.1} s",
        total,
        started.elapsed().as_secs_f64()
    );
    Ok(0)
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

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
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

/// `run --compare a,b`: the per-batch values of one call through each
/// mechanism, compared like separate runs.
pub fn within_boot(r: &Results, mechs: &str, call: &str, confidence: f64) -> Result<String> {
    let mut sets = Vec::new();
    for m in mechs.split(',') {
        let name = format!("{m}.{call}");
        let b = r.bench(&name).with_context(|| {
            format!("no benchmark {name} in this boot (mechanisms: int80, sysenter, callgate, syscall; calls: floor, null, getpid, geteuid, write1)")
        })?;
        let per_call: Vec<f64> = match crate::model::cycle_samples(b) {
            Some(cycles) => cycles,
            None => b
                .samples
                .iter()
                .map(|s| *s as f64 / b.batch_size as f64)
                .collect(),
        };
        sets.push((name, per_call));
    }
    if sets.len() < 2 {
        bail!("--compare needs at least two mechanisms, e.g. int80,sysenter");
    }
    let opts = RenderOptions {
        confidence,
        ..RenderOptions::default()
    };
    Ok(compare_metric(
        call,
        &sets,
        r.clock == "icount",
        crate::model::unit(r).as_deref().unwrap_or(&r.unit),
        &opts,
    ))
}

#[derive(Args, Debug)]
pub struct TableArgs {
    /// Results files (results/*.json).
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The label of the runs "without the change"; default: the first file of each system.
    #[arg(long)]
    pub base: Option<String>,
    /// Benchmarks to show (default: every one).
    #[arg(long = "bench")]
    pub benches: Vec<String>,
    /// Markdown instead of plain text.
    #[arg(long)]
    pub md: bool,
}

/// The system a result comes from: host, accelerator, CPU model; for a
/// model run, the profile.
fn system_of(r: &Results) -> String {
    if let Some(p) = &r.model_profile {
        return crate::model::label(p, r.model_virt);
    }
    let model = r.cpu.get("brand").cloned().unwrap_or_default();
    let model = if model.is_empty() {
        r.cpu.get("vendor").cloned().unwrap_or_default()
    } else {
        model
    };
    format!(
        "{} {} {}",
        if r.host.is_empty() { "?" } else { &r.host },
        r.accel,
        model.replace(' ', "_")
    )
}

/// Speed-up = time without the change / time with it, per system and benchmark.
pub fn speedup_rows(
    results: &[Results],
    base: Option<&str>,
    benches: &[String],
) -> Result<Vec<[String; 4]>> {
    let mut by_system: BTreeMap<String, Vec<&Results>> = BTreeMap::new();
    for r in results {
        by_system.entry(system_of(r)).or_default().push(r);
    }
    let mut rows = Vec::new();
    for (system, rs) in by_system {
        let b = match base {
            Some(l) => match rs.iter().find(|r| r.label == l) {
                Some(b) => *b,
                None => continue,
            },
            None => rs[0],
        };
        for r in rs.iter().filter(|r| !std::ptr::eq(**r, b)) {
            let with = metrics_of(r);
            for (name, without) in metrics_of(b) {
                if !benches.is_empty() && !benches.contains(&name) {
                    continue;
                }
                if let Some(w) = with.get(&name).filter(|w| **w > 0.0) {
                    rows.push([
                        system.clone(),
                        r.label.clone(),
                        name.clone(),
                        format!("{:.2}", without / w),
                    ]);
                }
            }
        }
    }
    if rows.is_empty() {
        bail!("no pairs to compare: each system needs a base run and at least one other run (labels: use --label on run, --base here)");
    }
    Ok(rows)
}

pub fn table(a: TableArgs) -> Result<i32> {
    let results = a
        .files
        .iter()
        .map(|p| Results::load(p))
        .collect::<Result<Vec<_>>>()?;
    let rows = speedup_rows(&results, a.base.as_deref(), &a.benches)?;
    let head = ["system", "kernel", "benchmark", "speed up"];
    if a.md {
        println!("| {} |\n|---|---|---|---:|", head.join(" | "));
        for r in &rows {
            println!("| {} |", r.join(" | "));
        }
    } else {
        let w: Vec<usize> = (0..4)
            .map(|i| {
                rows.iter()
                    .map(|r| r[i].len())
                    .chain([head[i].len()])
                    .max()
                    .unwrap_or(0)
            })
            .collect();
        println!(
            "{:<a$}   {:<b$}   {:<c$}   {:>d$}",
            head[0],
            head[1],
            head[2],
            head[3],
            a = w[0],
            b = w[1],
            c = w[2],
            d = w[3]
        );
        for r in &rows {
            println!(
                "{:<a$}   {:<b$}   {:<c$}   {:>d$}",
                r[0],
                r[1],
                r[2],
                r[3],
                a = w[0],
                b = w[1],
                c = w[2],
                d = w[3]
            );
        }
    }
    Ok(0)
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
    fn icount_is_exact() {
        let sets = vec![
            ("a".to_string(), vec![24.0; 3]),
            ("b".to_string(), vec![46.0; 3]),
            ("c".to_string(), vec![24.0; 3]),
        ];
        let s = compare_metric(
            "int80.null",
            &sets,
            true,
            "instructions",
            &RenderOptions::default(),
        );
        assert!(
            s.contains("differs by exactly 22 instructions (+91.67%)"),
            "{s}"
        );
        assert!(s.contains("identical"), "{s}");
    }

    #[test]
    fn noisy_values_get_ministat() {
        let sets = vec![
            ("a".to_string(), vec![10.0, 11.0, 12.0, 10.5]),
            ("b".to_string(), vec![20.0, 21.0, 19.0, 20.5]),
        ];
        let s = compare_metric("x", &sets, false, "cycles", &RenderOptions::default());
        assert!(s.contains("Difference at 95.0% confidence"), "{s}");
    }

    #[test]
    fn metrics_that_differ() {
        let mut t: Table = BTreeMap::new();
        t.entry("a".into())
            .or_default()
            .insert("same".into(), vec![1.0, 1.0]);
        t.entry("b".into())
            .or_default()
            .insert("same".into(), vec![1.0, 1.0]);
        t.entry("a".into())
            .or_default()
            .insert("diff".into(), vec![1.0, 1.0]);
        t.entry("b".into())
            .or_default()
            .insert("diff".into(), vec![2.0, 2.0]);
        assert_eq!(chosen_metrics(&t, &[]).unwrap(), ["diff"]);
        assert!(chosen_metrics(&t, &["nope".into()])
            .unwrap_err()
            .to_string()
            .contains("no metric"));
    }

    #[test]
    fn one_mechanism_per_variant_compares_by_call() {
        let mut t: Table = BTreeMap::new();
        t.entry("a".into())
            .or_default()
            .insert("int80.null".into(), vec![24.0]);
        t.entry("a".into())
            .or_default()
            .insert("macro.int80".into(), vec![1700.0]);
        t.entry("a".into())
            .or_default()
            .insert("loop".into(), vec![2.0]);
        t.entry("b".into())
            .or_default()
            .insert("sysenter.null".into(), vec![46.0]);
        t.entry("b".into())
            .or_default()
            .insert("macro.sysenter".into(), vec![1780.0]);
        t.entry("b".into())
            .or_default()
            .insert("loop".into(), vec![2.0]);
        assert!(one_mechanism_each(&t));
        let t = by_call(t);
        assert_eq!(t["b"]["null"], [46.0]);
        assert_eq!(chosen_metrics(&t, &[]).unwrap(), ["macro", "null"]);
    }

    #[test]
    fn speedups() {
        let mk = |label: &str, median: f64| {
            let mut r = Results {
                label: label.into(),
                accel: "tcg".into(),
                host: "h".into(),
                ..Results::default()
            };
            r.cpu.insert("brand".into(), "QEMU CPU".into());
            r.benches.push(crate::results::Bench {
                name: "int80.null".into(),
                median,
                ..Default::default()
            });
            r
        };
        let rows = speedup_rows(&[mk("before", 30.0), mk("after", 20.0)], None, &[]).unwrap();
        assert_eq!(
            rows,
            [[
                "h tcg QEMU_CPU".to_string(),
                "after".into(),
                "int80.null".into(),
                "1.50".into()
            ]]
        );
        let rows = speedup_rows(
            &[mk("after", 20.0), mk("before", 30.0)],
            Some("before"),
            &[],
        )
        .unwrap();
        assert_eq!(rows[0][3], "1.50");
        assert!(speedup_rows(&[mk("only", 1.0)], None, &[]).is_err());
    }
}
