//! `bench`'s exports: what a reviewer needs to post a result, in one
//! directory per bench (`<out>/<timestamp>/`):
//!
//! - `bench.json`: every figure (per boot and per batch), where each set
//!   comes from (revision and dirty flag, command line, emulator and its
//!   version, CPU model, host CPU), the clock, and each metric's verdict;
//! - `bench.csv` and `batches.csv`: one value a line, with its unit and clock;
//! - `bench.md`: the system, the variants, and per metric the medians, the
//!   delta with its interval and the verdict, each linked to its plot;
//! - `ministat.txt`: the comparison as printed, to paste into a mail;
//! - `data/<metric>.<set>.dat`: ministat-ready files, one value a line;
//! - `<metric>.svg`: each set's samples, median and interval ([`svg`]).

pub mod svg;

use std::collections::BTreeMap;
use std::path::Path;

use anyhow::{Context, Result};
use serde::Serialize;

use crate::cmd::bench::{Provenance, Summary};
use crate::compare::{fmt_num, median, Compared, Table, Verdict};
use crate::results::{sanitize, MetricInfo};

/// Schema of `bench.json`.
pub const BENCH_SCHEMA: u32 = 1;

/// A set as the exports describe it.
#[derive(Clone, Debug, Serialize)]
pub struct VariantInfo {
    pub name: String,
    /// How it differs (`cmdline: entry=int80`, `rev: HEAD~1`).
    pub how: String,
    pub provenance: Provenance,
}

/// Everything a bench exports.
pub struct Report<'a> {
    pub stamp: &'a str,
    /// The line `bench` printed first (boots, clock, accelerator).
    pub header: &'a str,
    pub boots: u32,
    pub clock: &'a str,
    pub accel: &'a str,
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
}

#[derive(Serialize)]
struct MetricJson {
    unit: String,
    /// Which way is better, in words.
    reads: String,
    changed: bool,
    /// Per later set: the verdict in words.
    verdicts: BTreeMap<String, String>,
    plot: String,
}

#[derive(Serialize)]
struct BenchJson<'a> {
    schema: u32,
    /// `bench.json`, told apart from a run's results file.
    kind: &'static str,
    timestamp: &'a str,
    boots: u32,
    clock: &'a str,
    accel: &'a str,
    machine: &'a str,
    confidence: f64,
    sets: Vec<&'a VariantInfo>,
    notes: &'a [String],
    metrics: BTreeMap<String, MetricJson>,
    summary: &'a Summary,
    values: &'a Table,
    batches: &'a Table,
}

/// The kind `bench.json` names itself with.
pub const BENCH_KIND: &str = "bench";

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
        "{} boots per variant, interleaved. Machine: {}. Clock: {} ({}). Host: {} ({}). Guest CPU: {} (model {}).\n\n",
        r.boots,
        r.machine,
        r.clock,
        r.compared
            .first()
            .map_or_else(|| clock_words(r, ""), |c| clock_words(r, &c.info.unit)),
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
        names.first().unwrap_or(&"?"),
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
                let s = v.sentence(&c.info, c.reading);
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

/// `variant,boot,metric,value,unit,clock,flag`, one value a line; `flag`
/// is empty, or says one CPU did a multi-CPU figure's work
/// (`MetricInfo::one_cpu`, its commas made semicolons).
pub fn csv(t: &Table, index: &str, clock: &str, info_of: &dyn Fn(&str) -> MetricInfo) -> String {
    let mut csv = format!("variant,{index},metric,value,unit,clock,flag\n");
    for (v, ms) in t {
        for (m, vals) in ms {
            let info = info_of(m);
            let (unit, flag) = (info.unit, info.one_cpu.replace(',', ";"));
            for (i, x) in vals.iter().enumerate() {
                csv += &format!("{v},{},{m},{x},{unit},{clock},{flag}\n", i + 1);
            }
        }
    }
    csv
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
            MetricJson {
                unit: c.info.unit.clone(),
                reads: c.info.describe(),
                changed: c.changed(),
                verdicts: c
                    .verdicts
                    .iter()
                    .map(|(n, v)| (n.clone(), v.sentence(&c.info, c.reading)))
                    .collect(),
                plot: format!("{stem}.svg"),
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
                r.clock,
                r.confidence,
            ),
        )?;
    }
    let json = BenchJson {
        schema: BENCH_SCHEMA,
        kind: BENCH_KIND,
        timestamp: r.stamp,
        boots: r.boots,
        clock: r.clock,
        accel: r.accel,
        machine: r.machine,
        confidence: r.confidence,
        sets: sets(r),
        notes: r.notes,
        metrics,
        summary: r.summary,
        values: r.values,
        batches: r.batches,
    };
    put("bench.json", serde_json::to_string_pretty(&json)? + "\n")?;
    put("bench.csv", csv(r.values, "boot", r.clock, r.info_of))?;
    put("batches.csv", csv(r.batches, "batch", r.clock, r.info_of))?;
    put("bench.md", markdown(r))?;
    let mut text = format!("{}\n", r.header);
    for n in r.notes {
        text += &format!("note: {n}\n");
    }
    for c in r.compared {
        text += &c.text;
    }
    text += &format!("{}\n", r.summary.line());
    put("ministat.txt", text)?;
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
    use crate::compare::{compare_metric, Reading};
    use crate::ministat::RenderOptions;

    fn info(_: &str) -> MetricInfo {
        MetricInfo {
            unit: "TCG ticks".into(),
            measure: abi::report::Measure::PerOp,
            ..MetricInfo::default()
        }
    }

    #[test]
    fn a_bench_exports_what_a_reviewer_posts() {
        let sets = vec![
            ("a".to_string(), vec![100.0, 101.0, 99.0, 100.5]),
            ("b".to_string(), vec![77.0, 76.0, 78.0, 76.5]),
        ];
        let tcg = Reading::of(Some(crate::machine::Clock::Tsc), true);
        let c = compare_metric(
            "sysenter.null",
            &sets,
            tcg,
            &info("x"),
            &RenderOptions::default(),
        );
        let mut values: Table = BTreeMap::new();
        for (n, v) in &sets {
            values
                .entry(n.clone())
                .or_default()
                .insert("sysenter.null".into(), v.clone());
        }
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
        let r = Report {
            stamp: "20261201T000000Z",
            header: "bench: 4 boots per variant, clock=tsc, accel=tcg",
            boots: 4,
            clock: "tsc",
            accel: "tcg",
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
        };
        let dir = std::env::temp_dir().join(format!("testbed-export-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
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
                "variant,boot,metric,value,unit,clock,flag\na,1,sysenter.null,100,TCG ticks,tsc,\n"
            ),
            "{csv}"
        );
        let json: serde_json::Value = serde_json::from_str(&read("bench.json")).unwrap();
        assert_eq!(json["kind"], "bench");
        assert_eq!(json["sets"][1]["provenance"]["dirty"], true);
        assert!(json["metrics"]["sysenter.null"]["verdicts"]["b"]
            .as_str()
            .unwrap()
            .contains("not a cycle difference"));
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
}
