//! Steps 4 and 5: the sets side by side, each metric compared, and the
//! summary of what changed.

use anyhow::Result;

use crate::compare::{self, Compared, Reading, Table};
use crate::ministat::RenderOptions;
use crate::results::MetricInfo;

use super::baseline::Baseline;
use super::plan::{BenchArgs, Variant};

/// How a metric is renamed for the comparison.
pub(super) type Rename = fn(&str) -> String;

/// Step 4: the sets side by side, the baseline first; variants that each
/// measured one mechanism compared call by call, variants that each measured
/// one pool layout layout against layout. Returns the table, the order of
/// its sets, and how metrics were renamed.
pub(super) fn sets_to_compare(
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
pub(super) fn compare_all(
    a: &BenchArgs,
    table: &Table,
    order: &[String],
    reading: Reading,
    info_of: &dyn Fn(&str) -> MetricInfo,
) -> Result<Vec<Compared>> {
    let metrics = compare::chosen_metrics(table, &a.metrics)?;
    // With --post, stdout is the post's alone.
    let say = |s: &str| {
        if a.post {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    };
    let opts = RenderOptions {
        confidence: a.confidence,
        ..RenderOptions::default()
    };
    if metrics.is_empty() {
        let all: std::collections::BTreeSet<&str> = table
            .values()
            .flat_map(|m| m.keys().map(String::as_str))
            .collect();
        say(&format!(
            "no metric differs between the variants; identical: {}",
            all.into_iter().collect::<Vec<_>>().join(", ")
        ));
    }
    let mut out = Vec::new();
    for m in &metrics {
        let info = info_of(m);
        if let Some(have) = compare::only_in(table, order, m) {
            say(&format!(
                "== {m} ({}): only in {}",
                info.describe(),
                if have.is_empty() {
                    "none".to_string()
                } else {
                    have.join(", ")
                }
            ));
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
        say(c.text.trim_end_matches('\n'));
        out.push(c);
    }
    Ok(out)
}

pub use crate::results::bench::Summary;

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
}

/// One cell of the by-grain table: the later set's difference from the
/// first in percent, when the comparison found one (exact counts apart, or
/// proven at the comparison's level); `Some(0.0)` when the sets are equal
/// or no difference is proven; `None` when a side has no value or too few
/// values to tell.
fn grain_cell(v: &compare::Verdict) -> Option<f64> {
    match v {
        compare::Verdict::Identical | compare::Verdict::NotProven(_) => Some(0.0),
        compare::Verdict::Exact { percent, .. } => Some(*percent),
        compare::Verdict::Proven(c) => Some(c.percent),
        compare::Verdict::TooFew { .. } | compare::Verdict::Absent => None,
    }
}

/// `bench --turns`: the same comparison at each interleaving grain, one
/// row per metric and later set, one column per grain, and whether the
/// direction (better, worse) changes with the grain. A figure whose sign
/// depends on the grain depends on the interleaving the emulation chose,
/// not only on the change measured.
pub fn by_grain(runs: &[(u32, Vec<Compared>)]) -> String {
    use std::fmt::Write as _;
    let mut rows: Vec<(String, String, bool)> = Vec::new();
    for (_, compared) in runs {
        for c in compared {
            for (n, _) in &c.verdicts {
                let key = (c.metric.clone(), n.clone());
                if !rows.iter().any(|(m, s, _)| (m, s) == (&key.0, &key.1)) {
                    rows.push((key.0, key.1, c.info.measure.higher_is_better()));
                }
            }
        }
    }
    let mut table = vec![{
        let mut h = vec!["metric".to_string(), "set".to_string()];
        h.extend(runs.iter().map(|(t, _)| format!("turn={t}")));
        h.push("direction".into());
        h
    }];
    for (metric, set, higher) in &rows {
        let cells: Vec<Option<f64>> = runs
            .iter()
            .map(|(_, compared)| {
                compared
                    .iter()
                    .find(|c| &c.metric == metric)
                    .and_then(|c| c.verdicts.iter().find(|(n, _)| n == set))
                    .and_then(|(_, v)| grain_cell(v))
            })
            .collect();
        let word = |p: f64| {
            if p == 0.0 {
                "same"
            } else if (p > 0.0) == *higher {
                "better"
            } else {
                "worse"
            }
        };
        let mut row = vec![metric.clone(), set.clone()];
        row.extend(cells.iter().map(|c| match c {
            Some(p) if *p == 0.0 => "same".to_string(),
            Some(p) => format!("{p:+.2}% {}", word(*p)),
            None => "-".to_string(),
        }));
        let signs: Vec<(u32, &str)> = runs
            .iter()
            .zip(&cells)
            .filter_map(|((t, _), c)| c.filter(|p| *p != 0.0).map(|p| (*t, word(p))))
            .collect();
        let change = signs
            .windows(2)
            .find(|w| w[0].1 != w[1].1)
            .map(|w| format!("changes between turn={} and turn={}", w[0].0, w[1].0));
        row.push(match (change, signs.first()) {
            (Some(c), _) => c,
            (None, Some((_, w))) if signs.len() == cells.len() => format!("{w} at every grain"),
            (None, Some((_, w))) => format!("{w} where a difference shows"),
            (None, None) => "no difference at any grain".into(),
        });
        table.push(row);
    }
    let mut out = String::from(
        "bench: the comparison at each grain (--turns; instructions per CPU turn under the kernel's turn pacer):\n",
    );
    for line in compare::aligned(&table, usize::MAX) {
        let _ = writeln!(out, "  {line}");
    }
    out
}
