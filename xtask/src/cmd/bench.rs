//! `cargo xtask bench`: many boots per variant, interleaved, compared with
//! ministat's statistics, and exported as JSON, CSV and Markdown.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use serde::{Deserialize, Serialize};

use super::run::ModeArg;
use super::BootArgs;
use crate::compare::{self, Table};
use crate::kbuild::{self, Artifacts};
use crate::machine::{qemu, Backend, Clock, Machine};
use crate::ministat::RenderOptions;
use crate::preflight;
use crate::results::{utc_timestamp, MetricInfo, Results};

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
    /// Per metric: its unit and which way is better.
    units: BTreeMap<String, String>,
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

/// `cargo xtask bench`: build the variants, boot them in turn, compare,
/// save the baseline if asked, export.
pub fn bench(a: BenchArgs) -> Result<i32> {
    let variants = a.variants()?;
    a.boot.check()?;
    preflight::ensure(a.boot.need())?;
    let tmp = kbuild::root().join("target/xtask/bench");
    std::fs::create_dir_all(&tmp)?;
    let builds = build_variants(&variants, &tmp)?;
    let baseline = a
        .baseline
        .as_deref()
        .map(|n| load_baseline(&a.out, n))
        .transpose()?;
    let started = Instant::now();
    let m = boot_interleaved(&a, &variants, &builds, &tmp, started)?;
    let (table, order, rename) = sets_to_compare(m.table, baseline.as_ref(), &m.clock, &variants);
    let infos: BTreeMap<String, MetricInfo> =
        m.infos.into_iter().map(|(k, i)| (rename(&k), i)).collect();
    let unit = m.unit.as_str();
    let info_of = |k: &str| {
        infos.get(k).cloned().unwrap_or(MetricInfo {
            unit: unit.into(),
            measure: abi::report::Measure::PerOp,
        })
    };
    let md = print_comparison(&a, &table, &order, &m.clock, &m.accel, &info_of)?;
    if let Some(name) = &a.save_baseline {
        save_baseline(&a.out, name, &variants[0].name, &m.clock, &table)?;
    }
    let base = export(&a, &variants, &table, &m.clock, &m.accel, &info_of, &md)?;
    eprintln!("exports: {}.{{json,csv,md}}", base.display());
    eprintln!(
        "bench: {} boots in {:.1} s",
        a.boots as usize * variants.len(),
        started.elapsed().as_secs_f64()
    );
    Ok(0)
}

/// Step 1: each variant's kernel and programs, built apart.
fn build_variants(variants: &[Variant], tmp: &Path) -> Result<Vec<Artifacts>> {
    variants
        .iter()
        .map(|v| {
            eprintln!("bench: building variant {}", v.name);
            build_variant(v, tmp)
        })
        .collect()
}

/// Step 2: the saved baseline `name`, from `<out>/baselines/<name>.json`.
fn load_baseline(out: &Path, name: &str) -> Result<Baseline> {
    let p = out.join("baselines").join(format!("{name}.json"));
    let text = std::fs::read_to_string(&p)
        .with_context(|| format!("no saved baseline {name:?} ({})", p.display()))?;
    serde_json::from_str::<Baseline>(&text)
        .with_context(|| format!("{} is not a baseline file", p.display()))
}

/// What the boots measured: per variant, per metric, one value per boot,
/// how each metric reads, and the clock, accelerator and unit the kernel
/// reported.
struct Measured {
    table: Table,
    infos: BTreeMap<String, MetricInfo>,
    clock: String,
    accel: String,
    unit: String,
}

/// Step 3: `--boots` rounds, each booting every variant once: A B A B ...,
/// so drift in the host hits every variant alike.
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
        infos: BTreeMap::new(),
        clock: String::new(),
        accel: String::new(),
        unit: String::new(),
    };
    let mut done = 0usize;
    for _round in 0..a.boots {
        for (v, art) in variants.iter().zip(builds) {
            progress(done, total, started, &v.name);
            let words = format!("{} prog={} {}", a.mode.word(), a.prog, v.cmdline);
            let machine = Machine::build(&spec, art, &words, tmp)?;
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
            let mut r = Results::from_log(&log.serial, &v.name, machine.backend.source())?;
            crate::model::finish(&machine, &log.serial, &mut r)?;
            m.clock = r.clock.clone();
            m.accel = r.accel.clone();
            m.unit = crate::model::unit(&r).unwrap_or_else(|| r.unit.clone());
            m.infos.extend(r.metric_info());
            for (k, val) in compare::metrics_of(&r) {
                m.table
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
    clock: &str,
    variants: &[Variant],
) -> (Table, Vec<String>, Rename) {
    let mut order: Vec<String> = Vec::new();
    if let Some(b) = baseline {
        if b.clock != clock {
            eprintln!(
                "warning: baseline {:?} was measured with clock={}, this run with clock={clock}",
                b.label, b.clock
            );
        }
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

/// Step 5: each chosen metric compared across the sets, on stdout; returns
/// the Markdown table of medians.
fn print_comparison(
    a: &BenchArgs,
    table: &Table,
    order: &[String],
    clock: &str,
    accel: &str,
    info_of: &dyn Fn(&str) -> MetricInfo,
) -> Result<String> {
    let metrics = compare::chosen_metrics(table, &a.metrics)?;
    let opts = RenderOptions {
        confidence: a.confidence,
        ..RenderOptions::default()
    };
    let known = Clock::from_key(clock);
    let tcg = accel == qemu::Accel::Tcg.key();
    println!(
        "bench: {} boots per variant, clock={clock}, accel={accel}{}",
        a.boots,
        if known.is_some_and(|c| c.emulated(tcg)) {
            " (TCG cycle counts are emulator artefacts)".to_string()
        } else if accel == crate::machine::bochs::ACCEL {
            format!(
                " ({}; emulator figures, not cycles)",
                abi::syscall::BOCHS_TICK
            )
        } else {
            String::new()
        }
    );
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
    let mut md = format!(
        "| metric | unit | {} |\n|---|---|{}\n",
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
        let exact = known.is_some_and(Clock::exact);
        let info = info_of(m);
        print!("{}", compare::compare_metric(m, &sets, exact, &info, &opts));
        let medians: Vec<String> = sets
            .iter()
            .map(|(_, v)| compare::fmt_num(compare::median(v)))
            .collect();
        md += &format!("| {m} | {} | {} |\n", info.describe(), medians.join(" | "));
    }
    Ok(md)
}

/// Step 6: the first variant's figures as baseline `name`.
fn save_baseline(out: &Path, name: &str, first: &str, clock: &str, table: &Table) -> Result<()> {
    let b = Baseline {
        label: name.to_string(),
        clock: clock.to_string(),
        metrics: table[first].clone(),
    };
    let dir = out.join("baselines");
    std::fs::create_dir_all(&dir)?;
    let p = dir.join(format!("{name}.json"));
    std::fs::write(&p, serde_json::to_string_pretty(&b)?)?;
    eprintln!(
        "baseline {name:?} saved from variant {first}: {}",
        p.display()
    );
    Ok(())
}

/// Step 7: `<out>/<stamp>-bench.{json,csv,md}`; returns the path without
/// its extension.
fn export(
    a: &BenchArgs,
    variants: &[Variant],
    table: &Table,
    clock: &str,
    accel: &str,
    info_of: &dyn Fn(&str) -> MetricInfo,
    md: &str,
) -> Result<PathBuf> {
    std::fs::create_dir_all(&a.out)?;
    let stamp = utc_timestamp(std::time::SystemTime::now()).replace([':', '-'], "");
    let base = a.out.join(format!("{stamp}-bench"));
    let export = Export {
        timestamp: stamp.clone(),
        boots: a.boots,
        clock,
        accel,
        variants: variants
            .iter()
            .map(|v| (v.name.clone(), describe(v)))
            .collect(),
        units: table
            .values()
            .flat_map(|m| m.keys())
            .map(|k| (k.clone(), info_of(k).describe()))
            .collect(),
        values: table,
    };
    std::fs::write(
        base.with_extension("json"),
        serde_json::to_string_pretty(&export)? + "\n",
    )?;
    let mut csv = String::from("variant,boot,metric,value\n");
    for (v, ms) in table {
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
            "Medians over {} boots (clock={clock}, accel={accel}).\n\n{md}",
            a.boots
        ),
    )?;
    Ok(base)
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
}
