//! `bench`'s exports: what a reviewer needs to post a result, in one
//! directory per bench (`<out>/<timestamp>/`):
//!
//! - `bench.json`: every figure (per boot and per batch), where each set
//!   comes from (revision and dirty flag, command line, emulator and its
//!   version, CPU model, host CPU), the clock, and each metric's verdict;
//! - `bench.csv` and `batches.csv`: one value a line, with its unit and clock;
//! - `bench.md`: the system, the variants, and per metric the medians, the
//!   delta with its interval and the verdict, each linked to its plot;
//! - `ministat.txt`: the comparison as printed;
//! - `post.txt`, `post.md`: the post to paste under a patch ([`post`]);
//! - `data/<metric>.<set>.dat`: ministat-ready files, one value a line;
//! - `<metric>.svg`: each set's samples, median and interval ([`svg`]).

pub mod post;
pub mod svg;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::compare::{fmt_num, median, Compared, Reading, Table, Verdict};
use crate::results::bench::{BenchFile, CodeDiff, FixedCost, MetricEntry, Summary};
pub use crate::results::bench::{BENCH_KIND, BENCH_SCHEMA};
use crate::results::Clock;
use crate::results::{sanitize, MetricInfo};

/// A set as the exports describe it.
pub type VariantInfo = crate::results::bench::SetInfo;

/// What the figures of a bench are and what they are compared against:
/// the one value every label of stdout and of every export is written from
/// (the header, `ministat.txt`, the CSV columns, the plots' titles, the
/// Markdown and `bench.json`), so that no two of them can disagree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Labels {
    /// The clock the figures are in: the machine's, as `--clock` chose it
    /// (under the model the guest reads icount, but the figures are
    /// modelled cycles).
    #[serde(serialize_with = "clock_key")]
    pub clock: Clock,
    /// Under the model: the profile and virt (`modern`, `p4, virt ept`);
    /// `None` under every other clock.
    pub profile: Option<String>,
    /// The accelerator (`tcg`, `kvm`, `bochs`).
    pub accel: String,
    /// The set every other is compared against.
    pub baseline: String,
}

fn clock_key<S: serde::Serializer>(c: &Clock, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(c.key())
}

impl Labels {
    /// How the figures are to be read.
    pub fn reading(&self) -> Reading {
        Reading::of(Some(self.clock), self.accel == abi::cmdline::ACCEL_TCG)
    }

    /// `model (profile modern)`, `icount`.
    pub fn clock_text(&self) -> String {
        match &self.profile {
            Some(p) => format!("{} (profile {p})", self.clock.key()),
            None => self.clock.key().to_string(),
        }
    }

    /// `clock=model (profile modern), accel=tcg, baseline a`.
    pub fn line(&self) -> String {
        format!(
            "clock={}, accel={}, baseline {}",
            self.clock_text(),
            self.accel,
            self.baseline
        )
    }

    /// The line `bench` prints first, and `ministat.txt` starts with.
    pub fn header(&self, boots: u32) -> String {
        let caveat = if self.reading().host_time {
            " (TCG ticks: host time under emulation, not cycles)".to_string()
        } else if self.accel == abi::cmdline::ACCEL_BOCHS {
            format!(
                " ({}; emulator figures, not cycles)",
                abi::syscall::BOCHS_TICK
            )
        } else {
            String::new()
        };
        format!("bench: {boots} boots per variant, {}{caveat}", self.line())
    }
}

/// Everything a bench exports.
pub struct Report<'a> {
    pub stamp: &'a str,
    pub boots: u32,
    /// Clock, profile, accelerator and baseline, for every label.
    pub labels: &'a Labels,
    /// The first boot's machine (`QEMU 7.2.0 TCG  clock=...  cpu=qemu32`).
    pub machine: &'a str,
    pub confidence: f64,
    pub variants: Vec<VariantInfo>,
    pub baseline: Option<VariantInfo>,
    /// What differs between the baseline and this run but still compares.
    pub notes: &'a [String],
    pub compared: &'a [Compared],
    pub summary: &'a Summary,
    /// Per set, per metric, one value per boot.
    pub values: &'a Table,
    /// Per set, per metric, every batch's value per operation.
    pub batches: &'a Table,
    pub info_of: &'a dyn Fn(&str) -> MetricInfo,
    /// The command that reproduces the bench.
    pub command: &'a str,
    /// What code differs between each later set's build and the baseline's.
    pub code: &'a [CodeDiff],
    /// Under the model: the profile entries that price what `code` lists.
    pub fixed_costs: &'a [FixedCost],
}

/// A metric's name as a file name.
pub fn file_stem(metric: &str) -> String {
    sanitize(&metric.replace('.', "-"))
}

/// The delta against the first set and its interval, as the Markdown shows it.
pub fn delta_text(v: &Verdict, unit: &str) -> String {
    match v {
        Verdict::Identical => "0 (exact)".into(),
        Verdict::Exact { delta, percent } => {
            format!("{} {unit} ({percent:+.2}%), exact", signed(*delta))
        }
        Verdict::Proven(c) | Verdict::NotProven(c) => format!(
            "{} ± {} {unit} ({:+.1}% ± {:.1}%)",
            signed(c.difference),
            fmt_num(c.interval),
            c.percent,
            c.percent_interval
        ),
        Verdict::TooFew { delta } => format!("{} {unit} (medians)", signed(*delta)),
        Verdict::Absent => "—".into(),
    }
}

fn signed(v: f64) -> String {
    if v > 0.0 {
        format!("+{}", fmt_num(v))
    } else {
        fmt_num(v)
    }
}

/// The sets of a report, the baseline first.
fn sets<'a>(r: &'a Report) -> Vec<&'a VariantInfo> {
    r.baseline.iter().chain(&r.variants).collect()
}

/// The Markdown: the system, the sets, the results with their plots.
pub fn markdown(r: &Report) -> String {
    let first = sets(r)
        .first()
        .map(|s| s.provenance.clone())
        .unwrap_or_default();
    let mut md = format!("# bench {}\n\n", r.stamp);
    md += &format!(
        "{} boots per variant, interleaved. Machine: {}. Clock: {}; {}. Accelerator: {}. Baseline: {}. Host: {} ({}). Guest CPU: {} (model {}).\n\n",
        r.boots,
        r.machine,
        r.labels.clock_text(),
        r.compared
            .first()
            .map_or_else(|| clock_words(r, ""), |c| clock_words(r, &c.info.unit)),
        r.labels.accel,
        r.labels.baseline,
        first.host,
        first.host_cpu,
        first.cpu,
        first.cpu_model,
    );
    for n in r.notes {
        md += &format!("> **note:** {n}\n\n");
    }
    md += "| set | how | revision | kernel command line |\n|---|---|---|---|\n";
    for s in sets(r) {
        md += &format!(
            "| {} | {} | `{}` | `{}` |\n",
            s.name,
            s.how,
            s.provenance.revision(),
            s.provenance.cmdline
        );
    }
    let names: Vec<&str> = sets(r).iter().map(|s| s.name.as_str()).collect();
    md += &format!(
        "\n| metric | unit | {} | delta vs {} | verdict | plot |\n|---|---|{}---|---|---|\n",
        names.join(" | "),
        r.labels.baseline,
        "---:|".repeat(names.len())
    );
    for c in r.compared {
        let medians: Vec<String> = c
            .sets
            .iter()
            .map(|(_, v)| {
                if v.is_empty() {
                    "—".into()
                } else {
                    fmt_num(median(v))
                }
            })
            .collect();
        let deltas: Vec<String> = c
            .verdicts
            .iter()
            .map(|(n, v)| {
                let d = delta_text(v, &c.info.unit);
                if c.verdicts.len() > 1 {
                    format!("{n}: {d}")
                } else {
                    d
                }
            })
            .collect();
        let verdicts: Vec<String> = c
            .verdicts
            .iter()
            .map(|(n, v)| {
                let s = c.said(n, v);
                if c.verdicts.len() > 1 {
                    format!("{n}: {s}")
                } else {
                    s
                }
            })
            .collect();
        let stem = file_stem(&c.metric);
        md += &format!(
            "| {} | {} | {} | {} | {} | [plot]({stem}.svg) |\n",
            c.metric,
            c.info.describe(),
            medians.join(" | "),
            deltas.join("<br>"),
            verdicts.join("<br>"),
        );
    }
    md += &format!(
        "\n{}\n\nMedians of the per-boot values; intervals at {}% confidence (Student's t). Data: `bench.csv`, `batches.csv`, `data/`; the comparison as printed: `ministat.txt`.\n",
        r.summary.line(),
        r.confidence
    );
    md
}

/// What the clock's figures are, in words.
fn clock_words(r: &Report, unit: &str) -> String {
    let host_time = r.compared.first().is_some_and(|c| c.reading.host_time);
    let exact = r.compared.first().is_some_and(|c| c.reading.exact);
    if host_time {
        format!(
            "{unit}: host time under emulation, not cycles; a difference is not a cycle difference"
        )
    } else if exact {
        format!("{unit}, exact: every boot counts the same")
    } else if unit.is_empty() {
        "as the kernel reported it".into()
    } else {
        unit.to_string()
    }
}

/// `variant,boot,metric,value,unit,clock,profile,accel,baseline,flag`,
/// one value a line; `profile` is empty but under the model; `flag` is
/// empty, or says one CPU did a multi-CPU figure's work
/// (`MetricInfo::one_cpu`, its commas made semicolons). The `csv` crate
/// writes it: a field with a comma, a quote or a line break (`modelled
/// cycles (profile p4, virt ept)`) is quoted, as RFC 4180 says.
pub fn csv(t: &Table, index: &str, l: &Labels, info_of: &dyn Fn(&str) -> MetricInfo) -> String {
    let mut w = csv::Writer::from_writer(Vec::new());
    let mut put = |rec: &[&str]| w.write_record(rec).expect("writing to memory");
    put(&[
        "variant", index, "metric", "value", "unit", "clock", "profile", "accel", "baseline",
        "flag",
    ]);
    let profile = l.profile.as_deref().unwrap_or("");
    for (v, ms) in t {
        for (m, vals) in ms {
            let info = info_of(m);
            let flag = info.one_cpu.replace(',', ";");
            for (i, x) in vals.iter().enumerate() {
                let (n, x) = ((i + 1).to_string(), x.to_string());
                put(&[
                    v,
                    &n,
                    m,
                    &x,
                    &info.unit,
                    l.clock.key(),
                    profile,
                    &l.accel,
                    &l.baseline,
                    &flag,
                ]);
            }
        }
    }
    let bytes = w.into_inner().expect("writing to memory");
    String::from_utf8(bytes).expect("UTF-8 fields make UTF-8")
}

/// The typed `bench.json` of a report, its compared metrics `metrics`.
pub fn bench_file(r: &Report, metrics: BTreeMap<String, MetricEntry>) -> BenchFile {
    BenchFile {
        schema: BENCH_SCHEMA,
        kind: BENCH_KIND.into(),
        timestamp: r.stamp.into(),
        boots: r.boots,
        clock: r.labels.clock.key().into(),
        profile: r.labels.profile.clone(),
        accel: r.labels.accel.clone(),
        baseline: r.labels.baseline.clone(),
        machine: r.machine.into(),
        confidence: r.confidence,
        sets: sets(r).into_iter().cloned().collect(),
        notes: r.notes.to_vec(),
        metrics,
        summary: r.summary.clone(),
        values: r.values.clone(),
        batches: r.batches.clone(),
        command: r.command.into(),
        code: r.code.to_vec(),
        fixed_costs: r.fixed_costs.to_vec(),
    }
}

/// Writes every export into `dir` (which exists).
pub fn write(dir: &Path, r: &Report) -> Result<()> {
    let put = |name: &str, text: String| -> Result<()> {
        let p = dir.join(name);
        std::fs::write(&p, text).with_context(|| format!("cannot write {}", p.display()))
    };
    let mut metrics = BTreeMap::new();
    for c in r.compared {
        let stem = file_stem(&c.metric);
        metrics.insert(
            c.metric.clone(),
            MetricEntry {
                unit: c.info.unit.clone(),
                reads: c.info.describe(),
                changed: c.changed(),
                verdicts: c
                    .verdicts
                    .iter()
                    .map(|(n, v)| (n.clone(), c.said(n, v)))
                    .collect(),
                plot: format!("{stem}.svg"),
                higher_is_better: c.info.measure.higher_is_better(),
                text: c.text.clone(),
            },
        );
        let batches: Vec<(String, Vec<f64>)> = c
            .sets
            .iter()
            .map(|(n, _)| {
                let b = r.batches.get(n).and_then(|t| t.get(&c.metric)).cloned();
                (n.clone(), b.unwrap_or_default())
            })
            .collect();
        let per_batch = batches.iter().all(|(_, v)| !v.is_empty());
        put(
            &format!("{stem}.svg"),
            svg::plot(
                c,
                if per_batch { &batches } else { &c.sets },
                if per_batch {
                    "every batch of every boot"
                } else {
                    "one value per boot"
                },
                &r.labels.line(),
                r.confidence,
            ),
        )?;
    }
    let file = bench_file(r, metrics);
    put("bench.json", serde_json::to_string_pretty(&file)? + "\n")?;
    put("bench.csv", csv(r.values, "boot", r.labels, r.info_of))?;
    put("batches.csv", csv(r.batches, "batch", r.labels, r.info_of))?;
    put("bench.md", markdown(r))?;
    let mut text = format!("{}\n", r.labels.header(r.boots));
    for n in r.notes {
        text += &format!("note: {n}\n");
    }
    for c in r.compared {
        text += &c.text;
    }
    text += &format!("{}\n", r.summary.line());
    put("ministat.txt", text)?;
    put("post.txt", post::post(&file, post::Form::Text))?;
    put("post.md", post::post(&file, post::Form::Markdown))?;
    let data = dir.join("data");
    std::fs::create_dir_all(&data).with_context(|| format!("cannot create {}", data.display()))?;
    for (set, ms) in r.values {
        for (m, vals) in ms {
            let p = data.join(format!("{}.{}.dat", file_stem(m), sanitize(set)));
            let body: String = vals.iter().map(|v| format!("{v}\n")).collect();
            std::fs::write(&p, body).with_context(|| format!("cannot write {}", p.display()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A metric's flags (one CPU did the work; the CPUs barely overlapped)
    /// reach the CSV's last column as the metric's info says them.
    #[test]
    fn a_metrics_flags_are_the_csvs_last_column() {
        let table = [(
            "a".to_string(),
            [("ebizzy.128".to_string(), vec![1.0])].into(),
        )]
        .into();
        for flag in [
            "one CPU: CPU 0 did 2000 of 2000 records: not a 2-CPU figure",
            "apart: CPU 1 worked during 4% of CPU 0's timed modelled time: not a concurrent figure",
        ] {
            let info = crate::results::MetricInfo {
                unit: "records/s".into(),
                measure: abi::report::Measure::Throughput,
                one_cpu: flag.into(),
            };
            let csv = csv(
                &table,
                "boot",
                &Labels {
                    clock: Clock::Icount,
                    profile: None,
                    accel: "tcg".into(),
                    baseline: "a".into(),
                },
                &|_| info.clone(),
            );
            assert!(csv.ends_with(&format!(",icount,,tcg,a,{flag}\n")), "{csv}");
        }
    }
    use crate::compare::{compare_metric, Reading};
    use crate::ministat::RenderOptions;
    use crate::results::bench::Provenance;

    fn info(_: &str) -> MetricInfo {
        MetricInfo::per_op("TCG ticks")
    }

    /// The values table of one metric: each set's values under `metric`.
    fn values_of(metric: &str, sets: &[(String, Vec<f64>)]) -> Table {
        let mut values: Table = BTreeMap::new();
        for (n, v) in sets {
            values
                .entry(n.clone())
                .or_default()
                .insert(metric.into(), v.clone());
        }
        values
    }

    /// An empty directory `name` under the system's temporary one.
    fn fresh_dir(name: &str) -> std::path::PathBuf {
        let dir = std::env::temp_dir().join(name);
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_bench_exports_what_a_reviewer_posts() {
        let sets = vec![
            ("a".to_string(), vec![100.0, 101.0, 99.0, 100.5]),
            ("b".to_string(), vec![77.0, 76.0, 78.0, 76.5]),
        ];
        let tcg = Reading::of(Some(crate::results::Clock::Tsc), true);
        let c = compare_metric(
            "sysenter.null",
            &sets,
            tcg,
            &info("x"),
            &RenderOptions::default(),
        );
        let values = values_of("sysenter.null", &sets);
        let prov = |rev: &str, dirty: bool| Provenance {
            clock: "tsc".into(),
            accel: "tcg".into(),
            emulator: "QEMU 7.2.0".into(),
            cpu_model: "qemu32".into(),
            cpu: "QEMU Virtual CPU".into(),
            rev: rev.into(),
            dirty,
            cmdline: "mode=run prog=bench clock=tsc accel=tcg".into(),
            host: "h".into(),
            host_cpu: "Some CPU".into(),
            ..Provenance::default()
        };
        let compared = [c];
        let summary = Summary::of(&compared, &["sysenter.null".into()], 0.0);
        let labels = Labels {
            clock: crate::results::Clock::Tsc,
            profile: None,
            accel: "tcg".into(),
            baseline: "a".into(),
        };
        let r = Report {
            stamp: "20261201T000000Z",
            boots: 4,
            labels: &labels,
            machine: "QEMU 7.2.0 TCG  clock=tsc  cpu=qemu32",
            confidence: 95.0,
            variants: vec![
                VariantInfo {
                    name: "a".into(),
                    how: "as built".into(),
                    provenance: prov("abc", false),
                },
                VariantInfo {
                    name: "b".into(),
                    how: "rev: x".into(),
                    provenance: prov("abc-dirty.0123", true),
                },
            ],
            baseline: None,
            notes: &[],
            compared: &compared,
            summary: &summary,
            values: &values,
            batches: &values,
            info_of: &info,
            command: "",
            code: &[],
            fixed_costs: &[],
        };
        let dir = fresh_dir(&format!("testbed-export-{}", std::process::id()));
        write(&dir, &r).unwrap();
        let read = |n: &str| std::fs::read_to_string(dir.join(n)).unwrap();
        let md = read("bench.md");
        assert!(md.contains("[plot](sysenter-null.svg)"), "{md}");
        assert!(md.contains("host time under emulation"), "{md}");
        assert!(
            md.contains("`abc-dirty.0123`") && md.contains("Some CPU") && md.contains("QEMU 7.2.0"),
            "{md}"
        );
        assert!(
            md.contains(" ± ") && md.contains("at 95% confidence, better"),
            "{md}"
        );
        assert!(
            md.contains("1 changed (sysenter.null); 0 unchanged"),
            "{md}"
        );
        let csv = read("bench.csv");
        assert!(
            csv.starts_with(
                "variant,boot,metric,value,unit,clock,profile,accel,baseline,flag\na,1,sysenter.null,100,TCG ticks,tsc,,tcg,a,\n"
            ),
            "{csv}"
        );
        let json = crate::results::bench::BenchFile::parse(&read("bench.json")).unwrap();
        assert_eq!(json.kind, "bench");
        assert!(json.sets[1].provenance.dirty);
        assert!(json.metrics["sysenter.null"].verdicts["b"].contains("not a cycle difference"));
        let mail = read("ministat.txt");
        assert!(
            mail.contains("Difference at 95.0% confidence") && mail.contains("verdict b:"),
            "{mail}"
        );
        assert_eq!(read("data/sysenter-null.b.dat"), "77\n76\n78\n76.5\n");
        let svg = read("sysenter-null.svg");
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<circle").count(), 8, "{svg}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A bench's exports, written under `labels` into a fresh directory:
    /// two sets of one metric, exact counts that differ.
    fn exports_under(labels: &Labels, unit: &str) -> BTreeMap<String, String> {
        let sets = vec![
            ("before".to_string(), vec![731.0, 731.0]),
            ("after".to_string(), vec![780.0, 780.0]),
        ];
        let info = MetricInfo::per_op(unit);
        let c = compare_metric(
            "int80.null",
            &sets,
            labels.reading(),
            &info,
            &RenderOptions::default(),
        );
        let values = values_of("int80.null", &sets);
        let prov = Provenance {
            clock: labels.clock.key().into(),
            accel: labels.accel.clone(),
            profile: labels
                .profile
                .as_ref()
                .map(|p| format!("modelled, profile {p}"))
                .unwrap_or_default(),
            cmdline: "mode=run prog=bench clock=icount accel=tcg".into(),
            ..Provenance::default()
        };
        let compared = [c];
        let summary = Summary::of(&compared, &["int80.null".into()], 0.0);
        let info_of = |_: &str| info.clone();
        let r = Report {
            stamp: "20261207T000000Z",
            boots: 2,
            labels,
            machine: "QEMU 7.2.0 TCG  cpu=qemu32",
            confidence: 95.0,
            variants: sets
                .iter()
                .map(|(n, _)| VariantInfo {
                    name: n.clone(),
                    how: "as built".into(),
                    provenance: prov.clone(),
                })
                .collect(),
            baseline: None,
            notes: &[],
            compared: &compared,
            summary: &summary,
            values: &values,
            batches: &values,
            info_of: &info_of,
            command: "",
            code: &[],
            fixed_costs: &[],
        };
        let dir = fresh_dir(&format!(
            "testbed-labels-{}-{}",
            labels.clock.key(),
            std::process::id()
        ));
        write(&dir, &r).unwrap();
        let files = [
            "bench.json",
            "bench.csv",
            "batches.csv",
            "bench.md",
            "ministat.txt",
            "int80-null.svg",
        ];
        let out = files
            .iter()
            .map(|f| (f.to_string(), std::fs::read_to_string(dir.join(f)).unwrap()))
            .collect();
        let _ = std::fs::remove_dir_all(&dir);
        out
    }

    /// Under each clock every export names the clock the figures are in,
    /// the profile (under the model), the accelerator and the baseline, as
    /// the one [`Labels`] value says: a model bench's guest reads icount,
    /// and no export may call its cycles icount's.
    #[test]
    fn every_export_names_the_clock_profile_accelerator_and_baseline() {
        use crate::results::Clock;
        for (clock, profile, unit) in [
            (Clock::Icount, None, "instructions"),
            (
                Clock::Model,
                Some("p4, virt ept"),
                "modelled cycles (profile p4, virt ept)",
            ),
        ] {
            let labels = Labels {
                clock,
                profile: profile.map(str::to_string),
                accel: "tcg".into(),
                baseline: "before".into(),
            };
            let x = exports_under(&labels, unit);
            let key = clock.key();
            let named = format!("clock={}", labels.clock_text());
            // The text exports: the header and the plot's title.
            for f in ["ministat.txt", "int80-null.svg"] {
                assert!(
                    x[f].contains(&named)
                        && x[f].contains("accel=tcg")
                        && x[f].contains("baseline before"),
                    "{f}: {}",
                    x[f]
                );
            }
            assert!(x["ministat.txt"].starts_with("bench: 2 boots per variant, clock="));
            let md = &x["bench.md"];
            assert!(
                md.contains(&format!("Clock: {}; ", labels.clock_text()))
                    && md.contains("Accelerator: tcg.")
                    && md.contains("Baseline: before."),
                "{md}"
            );
            for f in ["bench.csv", "batches.csv"] {
                let mut r = csv::Reader::from_reader(x[f].as_bytes());
                let head = r.headers().unwrap().clone();
                let col = |n: &str| head.iter().position(|h| h == n).unwrap();
                for l in r.records() {
                    let l = l.unwrap();
                    assert_eq!(&l[col("clock")], key, "{f}: {l:?}");
                    assert_eq!(&l[col("profile")], profile.unwrap_or(""), "{f}: {l:?}");
                    assert_eq!(&l[col("accel")], "tcg", "{f}: {l:?}");
                    assert_eq!(&l[col("baseline")], "before", "{f}: {l:?}");
                }
            }
            let json = crate::results::bench::BenchFile::parse(&x["bench.json"]).unwrap();
            assert_eq!(
                (
                    json.clock.as_str(),
                    json.accel.as_str(),
                    json.baseline.as_str()
                ),
                (key, "tcg", "before")
            );
            assert_eq!(json.profile.as_deref(), profile);
            for s in &json.sets {
                assert_eq!(s.provenance.clock, key, "{}", s.name);
            }
            if clock == Clock::Model {
                // The guest's icount appears only as its command line says it.
                for (f, text) in &x {
                    let rest = text.replace("clock=icount accel=tcg`", "");
                    let rest = rest.replace("clock=icount accel=tcg\"", "");
                    assert!(
                        !rest.contains("icount"),
                        "{f} calls modelled cycles icount: {text}"
                    );
                }
            }
        }
    }
}
