//! Comparisons shared by the commands: the metrics of a boot, and one
//! metric compared across sets with ministat's statistics (exactly, under a
//! clock whose counts do not vary). `bench` compares boots, `run --compare`
//! the batches of one boot.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use crate::ministat::{self, RenderOptions};
use crate::results::Clock;
use crate::results::{MetricInfo, Results};

/// Every metric of one boot: benchmark medians and macro ticks per op; for
/// a model run, modelled cycles per call (`Results::metrics`).
pub fn metrics_of(r: &Results) -> BTreeMap<String, f64> {
    r.metrics()
}

/// Per variant, per metric, one value per boot.
pub use crate::results::bench::Table;

/// How a comparison's figures are to be read, from the clock and the
/// machine that made them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reading {
    /// Every boot gives the same count ([`Clock::exact`]): "identical" or
    /// "differs by exactly N", no t-test.
    pub exact: bool,
    /// The figures are host time under emulation ([`Clock::emulated`]): a
    /// difference between them is not a difference in cycles.
    pub host_time: bool,
    /// The figures are the model's ([`Clock::Model`]): deterministic, so
    /// exact across boots, yet only as sure as the profile's cost table.
    pub modelled: bool,
}

impl Reading {
    /// For figures read with `clock` (`None`: a clock this tool does not
    /// know) on a guest that ran under TCG (`tcg`).
    pub fn of(clock: Option<Clock>, tcg: bool) -> Reading {
        Reading {
            exact: clock.is_some_and(Clock::exact),
            host_time: clock.is_some_and(|c| c.emulated(tcg)),
            modelled: clock == Some(Clock::Model),
        }
    }
}

/// What a comparison found for one set against the first.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Exact counts, equal.
    Identical,
    /// Exact counts, `delta` apart (`percent` of the first set's).
    Exact { delta: f64, percent: f64 },
    /// A difference proven by Student's t at the comparison's level.
    Proven(ministat::Comparison),
    /// No difference proven at the comparison's level.
    NotProven(ministat::Comparison),
    /// Fewer than 3 values in a set: no statistics; `delta` between medians.
    TooFew { delta: f64 },
    /// The set has no value for the metric.
    Absent,
}

impl Verdict {
    /// The metric changed (or may have: too few values to tell, and the
    /// medians differ; or it is measured on one side only).
    pub fn changed(&self) -> bool {
        match self {
            Verdict::Identical | Verdict::NotProven(_) => false,
            Verdict::Exact { .. } | Verdict::Proven(_) | Verdict::Absent => true,
            Verdict::TooFew { delta } => *delta != 0.0,
        }
    }

    /// The verdict in words, with its unit and which way is better; under
    /// host time it says the difference is not one in cycles.
    pub fn sentence(&self, info: &MetricInfo, reading: Reading) -> String {
        let unit = &info.unit;
        let better = |d: f64| {
            if (d > 0.0) == info.measure.higher_is_better() {
                "better"
            } else {
                "worse"
            }
        };
        let caveat = if reading.host_time {
            format!(" ({unit} are host time under emulation: not a cycle difference)")
        } else {
            String::new()
        };
        match self {
            Verdict::Identical => "identical".into(),
            // The model repeats itself exactly; its figure is no more
            // exact than its cost table.
            Verdict::Exact { delta, percent } if reading.modelled => format!(
                "differs by {} {unit} in every boot alike ({percent:+.2}%, {})",
                fmt_num(*delta),
                better(*delta)
            ),
            Verdict::Exact { delta, percent } => format!(
                "differs by exactly {} {unit} ({percent:+.2}%, {})",
                fmt_num(*delta),
                better(*delta)
            ),
            Verdict::Proven(c) => format!(
                "differs by {} +/- {} {unit} ({:+.1}% +/- {:.1}%) at {}% confidence, {}{caveat}",
                fmt_signed(c.difference),
                fmt_num(c.interval),
                c.percent,
                c.percent_interval,
                c.confidence,
                better(c.difference)
            ),
            Verdict::NotProven(c) => {
                format!(
                    "no difference proven at {}% confidence{caveat}",
                    c.confidence
                )
            }
            Verdict::TooFew { delta } => format!(
                "medians {} {unit} apart; fewer than 3 values, so nothing proven{caveat}",
                fmt_signed(*delta)
            ),
            Verdict::Absent => "measured on one side only".into(),
        }
    }
}

impl Verdict {
    /// The verdict as a sentence about the set `name` against the baseline
    /// `base`, naming both ("after is 6.70% slower than before", "after
    /// takes 2.10% fewer instructions than before"; of host time under
    /// emulation, "after reads 3.1% more TCG ticks than before", never
    /// slower); `None` where no difference was found or none can be told.
    pub fn words(
        &self,
        name: &str,
        base: &str,
        info: &MetricInfo,
        reading: Reading,
    ) -> Option<String> {
        let (percent, digits) = match self {
            Verdict::Exact { percent, .. } => (*percent, 2),
            Verdict::Proven(c) => (c.percent, 1),
            _ => return None,
        };
        let size = format!("{:.digits$}%", percent.abs());
        let up = percent > 0.0;
        let more = if up { "more" } else { "fewer" };
        Some(if info.unit.starts_with("instructions") {
            format!("{name} takes {size} {more} instructions than {base}")
        } else if reading.host_time {
            format!("{name} reads {size} {more} {} than {base}", info.unit)
        } else if info.measure.higher_is_better() {
            let higher = if up { "higher" } else { "lower" };
            format!("{name} is {size} {higher} than {base}")
        } else {
            let slower = if up { "slower" } else { "faster" };
            format!("{name} is {size} {slower} than {base}")
        })
    }

    /// [`Verdict::words`] then [`Verdict::sentence`]: what the exports and
    /// the verdict lines say of set `name` against `base`.
    pub fn said(&self, name: &str, base: &str, info: &MetricInfo, reading: Reading) -> String {
        let s = self.sentence(info, reading);
        match self.words(name, base, info, reading) {
            Some(w) => format!("{w}: {s}"),
            None => s,
        }
    }
}

fn fmt_signed(v: f64) -> String {
    if v > 0.0 {
        format!("+{}", fmt_num(v))
    } else {
        fmt_num(v)
    }
}

/// One metric compared across sets.
#[derive(Clone, Debug)]
pub struct Compared {
    pub metric: String,
    pub info: MetricInfo,
    pub reading: Reading,
    /// Each set's name and values, the first the one compared against.
    pub sets: Vec<(String, Vec<f64>)>,
    /// One per set after the first.
    pub verdicts: Vec<(String, Verdict)>,
    /// The comparison as `bench` prints it.
    pub text: String,
}

impl Compared {
    pub fn changed(&self) -> bool {
        self.verdicts.iter().any(|(_, v)| v.changed())
    }

    /// The set the others are compared against.
    pub fn base(&self) -> &str {
        self.sets.first().map_or("", |(n, _)| n.as_str())
    }

    /// Set `name`'s verdict in words, naming it and the baseline
    /// ([`Verdict::said`]).
    pub fn said(&self, name: &str, v: &Verdict) -> String {
        v.said(name, self.base(), &self.info, self.reading)
    }

    /// One line per later set: `verdict b: b is 6.70% slower than a: ...`.
    pub fn verdict_lines(&self) -> String {
        self.verdicts
            .iter()
            .map(|(n, v)| format!("  verdict {n}: {}\n", self.said(n, v)))
            .collect()
    }
}

/// The comparison of one metric across sets. Under an exact clock every
/// boot gives the same count, so there is no distribution to test: it says
/// "identical" or "differs by exactly N instructions". Otherwise ministat's
/// text, and each later set's verdict in words.
pub fn compare_metric(
    metric: &str,
    sets: &[(String, Vec<f64>)],
    reading: Reading,
    info: &MetricInfo,
    opts: &RenderOptions,
) -> Compared {
    let mut s = format!(
        "== {metric} ({}{})\n",
        info.describe(),
        if metric.starts_with("macro") {
            "; per op of the macro mix"
        } else {
            ""
        }
    );
    let mut out = Compared {
        metric: metric.to_string(),
        info: info.clone(),
        reading,
        sets: sets.to_vec(),
        verdicts: Vec::new(),
        text: String::new(),
    };
    let constant = |v: &[f64]| v.windows(2).all(|w| w[0] == w[1]);
    if reading.exact && sets.iter().all(|(_, v)| !v.is_empty() && constant(v)) {
        let base = sets[0].1[0];
        for (i, (name, v)) in sets.iter().enumerate() {
            let d = v[0] - base;
            let verdict = if d == 0.0 {
                Verdict::Identical
            } else {
                Verdict::Exact {
                    delta: d,
                    percent: 100.0 * d / base,
                }
            };
            let what = if i == 0 {
                "baseline".to_string()
            } else {
                verdict.sentence(info, reading)
            };
            if i > 0 {
                out.verdicts.push((name.clone(), verdict));
            }
            s += &format!("  {name:<18} {:>10}  {what}\n", fmt_num(v[0]));
        }
        for (name, v) in &out.verdicts {
            if let Some(w) = v.words(name, &sets[0].0, info, reading) {
                s += &format!("  verdict {name}: {w}\n");
            }
        }
        s += &format!("  spread: {}\n", no_spread_words(reading));
        out.text = s;
        return out;
    }
    if sets.iter().any(|(_, v)| v.len() < 3) {
        s += "  (fewer than 3 values in a set: no statistics; use more boots)\n";
        for (name, v) in sets {
            s += &format!("  {name:<12} {:?}\n", v);
        }
        let base = median(&sets[0].1);
        for (name, v) in &sets[1..] {
            out.verdicts.push((
                name.clone(),
                Verdict::TooFew {
                    delta: median(v) - base,
                },
            ));
        }
    } else {
        s += &ministat::render(sets, opts);
        for (name, v) in &sets[1..] {
            let c = ministat::compare(&sets[0].1, v, opts.confidence, opts.formula);
            let verdict = if c.proven {
                Verdict::Proven(c)
            } else {
                Verdict::NotProven(c)
            };
            out.verdicts.push((name.clone(), verdict));
        }
    }
    s += &out.verdict_lines();
    out.text = s;
    out
}

/// Why a comparison under a deterministic clock has no spread, and what
/// that does not mean.
pub fn no_spread_words(reading: Reading) -> &'static str {
    if reading.modelled {
        "none, because the model is deterministic: every boot models the same cycles. That says the boots agree, not that the figure is right: the model prices instructions from a fixed table, one after another, where a real CPU overlaps and drains them"
    } else {
        "none, because icount is deterministic: every boot counts the same instructions. The count is exact; what the instructions cost in cycles it does not say"
    }
}

pub fn fmt_num(v: f64) -> String {
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
pub fn one_mechanism_each(t: &Table) -> bool {
    one_each(t, mechanism_of)
}

/// True when there are several variants and the metrics of each give one
/// value of `of` (those it gives none for aside).
fn one_each(t: &Table, of: fn(&str) -> Option<&str>) -> bool {
    t.len() > 1
        && t.values().all(|ms| {
            let values: std::collections::BTreeSet<&str> =
                ms.keys().filter_map(|k| of(k)).collect();
            values.len() == 1
        })
}

/// `int80.null` → `null`, `macro.int80` → `macro`: the metric's name when
/// variants that each use one mechanism are compared call by call.
pub fn call_key(k: &str) -> String {
    if k.starts_with("macro.") {
        "macro".to_string()
    } else if mechanism_of(k).is_some() {
        k.split_once('.')
            .map_or(k.to_string(), |(_, c)| c.to_string())
    } else {
        k.to_string()
    }
}

/// Renames every variant's metrics with `key`.
pub fn renamed(t: Table, key: fn(&str) -> String) -> Table {
    t.into_iter()
        .map(|(v, ms)| (v, ms.into_iter().map(|(k, vals)| (key(&k), vals)).collect()))
        .collect()
}

/// The pool layout a metric's name ends in (`locks.contended.packed`).
pub fn layout_of(metric: &str) -> Option<&str> {
    let (_, last) = metric.rsplit_once('.')?;
    abi::report::names::LAYOUTS.into_iter().find(|l| *l == last)
}

/// `locks.contended.packed` → `locks.contended`: the metric's name when
/// variants that each use one pool layout are compared layout against layout.
pub fn layout_key(k: &str) -> String {
    match layout_of(k) {
        Some(l) => k[..k.len() - l.len() - 1].to_string(),
        None => k.to_string(),
    }
}

/// True when every variant measured exactly one pool layout (as with
/// `--variant a=pool_align=packed --variant b=pool_align=128`).
pub fn one_layout_each(t: &Table) -> bool {
    one_each(t, layout_of)
}

/// Which metrics to show: the asked ones, or those whose values differ,
/// and those some sets lack (a metric on one side only is a difference too).
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
            vals.len() < table.len()
                || vals.len() > 1 && vals.iter().any(|v| *v != vals[0])
                || vals.iter().any(|v| v.windows(2).any(|w| w[0] != w[1]))
        })
        .collect())
}

pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// The sets of `order` that measured `metric`, when not all did: what
/// "only in a" names.
pub fn only_in(table: &Table, order: &[String], metric: &str) -> Option<Vec<String>> {
    let have: Vec<String> = order
        .iter()
        .filter(|n| table.get(*n).is_some_and(|t| t.contains_key(metric)))
        .cloned()
        .collect();
    (have.len() < order.len()).then_some(have)
}

/// `run --compare a,b`: the per-batch values of one call through each
/// mechanism, compared like separate runs.
pub fn within_boot(r: &Results, mechs: &str, call: &str, confidence: f64) -> Result<String> {
    let mut sets = Vec::new();
    for m in mechs.split(',') {
        let name = format!("{m}.{call}");
        let b = r.bench(&name).with_context(|| {
            format!(
                "no benchmark {name} in this boot (mechanisms: int80, sysenter, callgate, syscall; calls: {})",
                abi::report::names::CALLS.join(", ")
            )
        })?;
        let per_call: Vec<f64> = crate::model::cycle_samples(b).unwrap_or_else(|| {
            b.samples
                .iter()
                .map(|s| *s as f64 / b.batch_size as f64)
                .collect()
        });
        sets.push((name, per_call));
    }
    if sets.len() < 2 {
        bail!("--compare needs at least two mechanisms, e.g. int80,sysenter");
    }
    let opts = RenderOptions {
        confidence,
        ..RenderOptions::default()
    };
    let info = MetricInfo::per_op(crate::model::unit(r).unwrap_or_else(|| r.unit.clone()));
    Ok(compare_metric(call, &sets, Reading::of(r.clock(), r.tcg()), &info, &opts).text)
}

/// The rows of a plain-text table as lines, laid out by `comfy-table`:
/// each column as wide as its widest cell, two spaces apart, the first
/// `left` columns aligned left and the rest right (numbers); no borders,
/// no trailing blanks.
pub fn aligned(rows: &[Vec<String>], left: usize) -> Vec<String> {
    use comfy_table::{presets::NOTHING, CellAlignment, Table};
    let mut t = Table::new();
    t.load_style(NOTHING).add_rows(rows.iter().cloned());
    let columns = t.column_count();
    for (i, c) in t.column_iter_mut().enumerate() {
        c.set_padding((u16::from(i > 0), u16::from(i + 1 < columns)));
        c.set_cell_alignment(if i < left {
            CellAlignment::Left
        } else {
            CellAlignment::Right
        });
    }
    t.lines().map(|l| l.trim_end().to_string()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A table of (variant, metric, values) rows.
    fn table_of(rows: &[(&str, &str, &[f64])]) -> Table {
        let mut t: Table = BTreeMap::new();
        for &(variant, metric, values) in rows {
            t.entry(variant.into())
                .or_default()
                .insert(metric.into(), values.to_vec());
        }
        t
    }

    #[test]
    fn comparisons_of_a_model_run_use_modelled_cycles() {
        let r = crate::results::figures::two_mechanisms();
        assert_eq!(
            metrics_of(&r),
            [
                ("int80.null".to_string(), 1000.0),
                ("sysenter.null".to_string(), 300.0)
            ]
            .into()
        );
        let s = within_boot(&r, "int80,sysenter", "null", 95.0).unwrap();
        assert!(
            s.contains("modelled cycles (profile p4) per operation")
                && s.contains(
                    "differs by -700 modelled cycles (profile p4) in every boot alike (-70.00%"
                ),
            "{s}"
        );
    }

    #[test]
    fn icount_is_exact() {
        let sets = vec![
            ("a".to_string(), vec![24.0; 3]),
            ("b".to_string(), vec![46.0; 3]),
            ("c".to_string(), vec![24.0; 3]),
        ];
        let info = MetricInfo::per_op("instructions");
        let exact = Reading {
            exact: true,
            host_time: false,
            modelled: false,
        };
        let c = compare_metric("int80.null", &sets, exact, &info, &RenderOptions::default());
        assert!(c.changed());
        let s = c.text;
        assert!(
            s.contains("differs by exactly 22 instructions (+91.67%, worse)"),
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
        let info = MetricInfo::per_op("cycles");
        let c = compare_metric(
            "x",
            &sets,
            Reading::default(),
            &info,
            &RenderOptions::default(),
        );
        assert!(c.changed());
        let s = c.text;
        assert!(s.contains("Difference at 95.0% confidence"), "{s}");
        assert!(
            s.contains("verdict b: b is ") && s.contains("slower than a: differs by +9.25"),
            "{s}"
        );
        assert!(!s.contains("host time"), "{s}");
    }

    #[test]
    fn metrics_that_differ() {
        let t = table_of(&[
            ("a", "same", &[1.0, 1.0]),
            ("b", "same", &[1.0, 1.0]),
            ("a", "diff", &[1.0, 1.0]),
            ("b", "diff", &[2.0, 2.0]),
        ]);
        assert_eq!(chosen_metrics(&t, &[]).unwrap(), ["diff"]);
        assert!(chosen_metrics(&t, &["nope".into()])
            .unwrap_err()
            .to_string()
            .contains("no metric"));
    }

    #[test]
    fn a_metric_on_one_side_only_is_shown() {
        // `--variant all="" --variant nosysenter="entry=int80,callgate"`.
        let mut t: Table = BTreeMap::new();
        for (v, mechs) in [
            ("all", &["int80", "sysenter", "callgate"][..]),
            ("nosysenter", &["int80", "callgate"][..]),
        ] {
            for m in mechs {
                t.entry(v.into())
                    .or_default()
                    .insert(format!("{m}.null"), vec![24.0; 3]);
            }
        }
        assert!(!one_mechanism_each(&t));
        assert_eq!(chosen_metrics(&t, &[]).unwrap(), ["sysenter.null"]);
        let order = ["all".to_string(), "nosysenter".to_string()];
        assert_eq!(
            only_in(&t, &order, "sysenter.null").unwrap(),
            ["all".to_string()]
        );
        assert_eq!(only_in(&t, &order, "int80.null"), None);
    }

    #[test]
    fn host_time_under_emulation_is_said_in_the_verdict() {
        // A patch that adds instructions, timed with tsc under TCG, came out
        // faster: the verdict itself must say what such a figure is.
        let sets = vec![
            ("a".to_string(), vec![100.0, 101.0, 99.0, 100.5, 100.2]),
            ("b".to_string(), vec![77.0, 76.0, 78.0, 76.5, 77.2]),
        ];
        let info = MetricInfo::per_op(Clock::Tsc.unit(true));
        let tcg = Reading::of(Some(Clock::Tsc), true);
        assert!(tcg.host_time && !tcg.exact);
        let c = compare_metric("null", &sets, tcg, &info, &RenderOptions::default());
        let line = c.verdict_lines();
        assert!(
            line.contains("verdict b: b reads 23.2% fewer TCG ticks than a: differs by -")
                && line.contains("TCG ticks are host time under emulation: not a cycle difference"),
            "{line}"
        );
        // The same figures from KVM are cycles.
        let kvm = Reading::of(Some(Clock::Tsc), false);
        let c = compare_metric("null", &sets, kvm, &info, &RenderOptions::default());
        assert!(!c.verdict_lines().contains("host time"));
        assert!(!Reading::of(Some(Clock::Icount), true).host_time);
    }

    #[test]
    fn one_mechanism_per_variant_compares_by_call() {
        let t = table_of(&[
            ("a", "int80.null", &[24.0]),
            ("a", "macro.int80", &[1700.0]),
            ("a", "loop", &[2.0]),
            ("b", "sysenter.null", &[46.0]),
            ("b", "macro.sysenter", &[1780.0]),
            ("b", "loop", &[2.0]),
        ]);
        assert!(one_mechanism_each(&t));
        let t = renamed(t, call_key);
        assert_eq!(t["b"]["null"], [46.0]);
        assert_eq!(chosen_metrics(&t, &[]).unwrap(), ["macro", "null"]);
    }

    #[test]
    fn one_layout_per_variant_compares_layout_against_layout() {
        let mut t: Table = BTreeMap::new();
        for (v, l) in [("a", "packed"), ("b", "128")] {
            let m = t.entry(v.into()).or_default();
            m.insert(format!("locks.contended.{l}"), vec![1476.0]);
            m.insert(format!("ebizzy.{l}"), vec![160000.0]);
            m.insert("smp.pingpong".into(), vec![37.5]);
        }
        assert!(one_layout_each(&t));
        assert!(!one_mechanism_each(&t));
        let t = renamed(t, layout_key);
        assert_eq!(t["a"]["locks.contended"], [1476.0]);
        assert_eq!(t["b"]["ebizzy"], [160000.0]);
        assert_eq!(t["b"]["smp.pingpong"], [37.5]);
        // A boot that measured every layout is not one layout.
        let mut all: Table = BTreeMap::new();
        for v in ["a", "b"] {
            for l in abi::report::names::LAYOUTS {
                all.entry(v.into())
                    .or_default()
                    .insert(format!("ebizzy.{l}"), vec![1.0]);
            }
        }
        assert!(!one_layout_each(&all));
    }

    #[test]
    fn throughputs_say_which_way_is_better() {
        let info = MetricInfo {
            unit: "records/s".into(),
            measure: abi::report::Measure::Throughput,
            ..MetricInfo::default()
        };
        let sets = vec![
            ("a".to_string(), vec![100.0; 3]),
            ("b".to_string(), vec![150.0; 3]),
        ];
        let exact = Reading::of(Some(Clock::Icount), true);
        let s = compare_metric("ebizzy", &sets, exact, &info, &RenderOptions::default()).text;
        assert!(
            s.contains("records/s, a throughput: higher is better"),
            "{s}"
        );
        assert!(
            s.contains("differs by exactly 50 records/s (+50.00%, better)"),
            "{s}"
        );
    }
}
