//! `cargo xtask bench`: many boots per variant, interleaved, compared with
//! ministat's statistics, and exported (`export.rs`) for a reviewer: JSON,
//! CSV, Markdown, ministat's text, data files and an SVG plot per metric.
//!
//! This file is the run from start to end ([`bench`]). The steps live apart:
//! `plan` (the variants and every flag, checked before a boot), `build`
//! (each variant's kernel, revisions in cached worktrees), `baseline`
//! (where figures come from, saved and loaded baselines), `boots` (the
//! interleaved boots and what they measured) and `report` (the
//! comparison and its summary).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Instant;

use anyhow::{Context, Result};

use crate::compare;
use crate::export;
use crate::kbuild;
use crate::machine::{Clock, Scratch};
use crate::preflight;
use crate::results::{utc_timestamp, MetricInfo};

pub(crate) mod baseline;
mod boots;
mod build;
pub(crate) mod code;
pub(crate) mod plan;
mod report;
#[cfg(test)]
mod tests;

use baseline::{check_baseline, load_baseline, save_baseline};
use boots::boot_interleaved;
use build::build_variants;
use plan::describe;
pub use plan::BenchArgs;
pub use report::Summary;
use report::{compare_all, sets_to_compare};

/// The exit status of `bench --fail-on-change` when a metric changed (1
/// stays "the bench itself failed").
pub const CHANGED_EXIT: i32 = 3;

/// `cargo xtask bench`: check every flag, build the variants, boot them in
/// turn, compare, save the baseline if asked, export; with
/// `--fail-on-change`, exit with [`CHANGED_EXIT`] when a metric changed.
pub fn bench(a: BenchArgs) -> Result<i32> {
    if a.turns.is_empty() {
        return bench_once(&a).map(|(status, _)| status);
    }
    by_grain(a)
}

/// `bench --turns`: the comparison at each grain, in the order given, each
/// with its own output and exports; then the table across grains. Every
/// grain is checked before the first build.
fn by_grain(a: BenchArgs) -> Result<i32> {
    let clock = a.boot.clock.unwrap_or(Clock::Icount);
    anyhow::ensure!(
        a.boot.smp >= 2,
        "--turns compares interleaving grains of several CPUs: add --smp 2 or more"
    );
    let mut runs = Vec::new();
    for &t in &a.turns {
        let mut spec = a.boot.spec()?;
        spec.turn = Some(t);
        spec.turn_word(clock)?;
    }
    let mut status = 0;
    for &t in &a.turns {
        println!("== bench at turn={t}");
        let mut one = a.clone();
        one.turns.clear();
        one.boot.turn = Some(t);
        let (s, compared) = bench_once(&one)?;
        status = status.max(s);
        runs.push((t, compared));
    }
    print!("{}", report::by_grain(&runs));
    Ok(status)
}

/// One comparison: its exit status and what it compared.
fn bench_once(a: &BenchArgs) -> Result<(i32, Vec<compare::Compared>)> {
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
    // Each --rev as the commit it names now, as its build checks it out
    // (resolved after the boots, a commit made meanwhile would be named).
    let command = reproduce(a, &variants);
    // The revisions' worktrees are kept between runs; the variants' builds
    // and the boots' files are this run's own.
    let scratch = Scratch::new("bench")?;
    let builds = build_variants(&variants, &tmp, scratch.path())?;
    let started = Instant::now();
    let m = boot_interleaved(a, &variants, &builds, scratch.path(), started)?;
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
    let info_of = |k: &str| infos.get(k).cloned().unwrap_or(MetricInfo::per_op(unit));
    // Every label of stdout and of the exports is written from this one value.
    let labels = export::Labels {
        clock: m.clock,
        profile: m.profile.clone(),
        accel: m.accel.clone(),
        baseline: order[0].clone(),
    };
    let reading = labels.reading();
    let header = labels.header(a.boots);
    // With --post, stdout holds the post alone (to redirect into a mail);
    // the comparison as printed goes to stderr.
    let say = |s: &str| {
        if a.post {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    };
    say(&header);
    for n in &notes {
        say(&format!("note: {n}"));
    }
    let compared = compare_all(a, &table, &order, reading, &info_of)?;
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
    say(&summary.line());
    if let Some(name) = &a.save_baseline {
        save_baseline(&a.out, name, &variants[0].name, &now, first_raw)?;
    }
    // What code each later set's build changed against the baseline's.
    let code: Vec<crate::results::bench::CodeDiff> = if baseline.is_some() {
        variants
            .iter()
            .map(|v| crate::results::bench::CodeDiff {
                set: v.name.clone(),
                base: order[0].clone(),
                note: "a saved baseline: its build is not at hand to compare the code with".into(),
                functions: Vec::new(),
            })
            .collect()
    } else {
        variants[1..]
            .iter()
            .zip(&builds[1..])
            .map(|(v, b)| code::diff(&variants[0].name, &builds[0], &v.name, b))
            .collect()
    };
    let fixed_costs = match &labels.profile {
        Some(p) => code::fixed_costs(p.split(',').next().unwrap_or(p).trim(), &code),
        None => Vec::new(),
    };
    let report = export::Report {
        stamp: &stamp,
        boots: a.boots,
        labels: &labels,
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
        command: &command,
        code: &code,
        fixed_costs: &fixed_costs,
    };
    export::write(&dir, &report)?;
    if a.post {
        let text = std::fs::read_to_string(dir.join("post.txt"))?;
        print!("{text}");
    }
    eprintln!(
        "exports: {}/ (bench.json, bench.csv, bench.md, ministat.txt, post.txt, post.md, data/, plots)",
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
        return Ok((CHANGED_EXIT, compared));
    }
    Ok((0, compared))
}

/// The command that reproduces this bench: the words its command line gave
/// (or, without them, its variants), each `--rev`'s revision as the commit
/// it named, quoted for a POSIX shell.
fn reproduce(a: &BenchArgs, variants: &[plan::Variant]) -> String {
    let root = kbuild::root();
    let commit = |spec: &str| -> String {
        match spec.split_once('=') {
            Some((n, r)) => match build::resolve_commit(&root, r) {
                Ok(c) => format!("{n}={}", &c[..c.len().min(12)]),
                Err(_) => spec.to_string(),
            },
            None => spec.to_string(),
        }
    };
    let mut words: Vec<String> = Vec::new();
    if a.argv.is_empty() {
        words.push("bench".into());
        words.push(format!("-n{}", a.boots));
        for v in variants {
            match (&v.rev, v.features.is_empty()) {
                (Some(r), _) => words.extend(["--rev".into(), commit(&format!("{}={r}", v.name))]),
                (None, false) => words.extend([
                    "--features".into(),
                    format!("{}={}", v.name, v.features.join(",")),
                ]),
                (None, true) => {
                    words.extend(["--variant".into(), format!("{}={}", v.name, v.cmdline)])
                }
            }
        }
    } else {
        let mut next_is_rev = false;
        for w in &a.argv {
            if next_is_rev {
                words.push(commit(w));
                next_is_rev = false;
            } else if let Some(spec) = w.strip_prefix("--rev=") {
                words.push(format!("--rev={}", commit(spec)));
            } else {
                next_is_rev = w == "--rev";
                words.push(w.clone());
            }
        }
    }
    let quoted: Vec<String> = words.iter().map(|w| shell_word(w)).collect();
    format!("cargo xtask {}", quoted.join(" "))
}

/// `w` as one word of a POSIX shell: as it is when it holds nothing the
/// shell reads specially, else in single quotes.
pub fn shell_word(w: &str) -> String {
    if !w.is_empty()
        && w.chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=,:@%+".contains(c))
    {
        w.to_string()
    } else {
        format!("'{}'", w.replace('\'', "'\\''"))
    }
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
