//! Comparisons shared by the commands: the metrics of a boot, and one
//! metric compared across sets with ministat's statistics (exactly, under a
//! clock whose counts do not vary). `bench` compares boots, `run --compare`
//! the batches of one boot.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use crate::machine::Clock;
use crate::ministat::{self, RenderOptions};
use crate::results::{MetricInfo, Results};

/// Every metric of one boot: benchmark medians and macro ticks per op; for
/// a model run, modelled cycles per call (`Results::metrics`).
pub fn metrics_of(r: &Results) -> BTreeMap<String, f64> {
    r.metrics()
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
    info: &MetricInfo,
    opts: &RenderOptions,
) -> String {
    let unit = &info.unit;
    let mut s = format!(
        "== {metric} ({}{})\n",
        info.describe(),
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
                let better = (d > 0.0) == info.measure.higher_is_better();
                format!(
                    "differs by exactly {} {unit} ({:+.2}%, {})",
                    fmt_num(d),
                    100.0 * d / base,
                    if better { "better" } else { "worse" }
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
    t.len() > 1
        && t.values().all(|ms| {
            let mechs: std::collections::BTreeSet<&str> =
                ms.keys().filter_map(|k| mechanism_of(k)).collect();
            mechs.len() == 1
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
    t.len() > 1
        && t.values().all(|ms| {
            let layouts: std::collections::BTreeSet<&str> =
                ms.keys().filter_map(|k| layout_of(k)).collect();
            layouts.len() == 1
        })
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

/// `run --compare a,b`: the per-batch values of one call through each
/// mechanism, compared like separate runs.
pub fn within_boot(r: &Results, mechs: &str, call: &str, confidence: f64) -> Result<String> {
    let mut sets = Vec::new();
    for m in mechs.split(',') {
        let name = format!("{m}.{call}");
        let b = r.bench(&name).with_context(|| {
            format!("no benchmark {name} in this boot (mechanisms: int80, sysenter, callgate, syscall; calls: floor, null, getpid, geteuid, write1)")
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
    let info = MetricInfo {
        unit: crate::model::unit(r).unwrap_or_else(|| r.unit.clone()),
        measure: abi::report::Measure::PerOp,
    };
    Ok(compare_metric(
        call,
        &sets,
        r.clock().is_some_and(Clock::exact),
        &info,
        &opts,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icount_is_exact() {
        let sets = vec![
            ("a".to_string(), vec![24.0; 3]),
            ("b".to_string(), vec![46.0; 3]),
            ("c".to_string(), vec![24.0; 3]),
        ];
        let info = MetricInfo {
            unit: "instructions".into(),
            measure: abi::report::Measure::PerOp,
        };
        let s = compare_metric("int80.null", &sets, true, &info, &RenderOptions::default());
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
        let info = MetricInfo {
            unit: "cycles".into(),
            measure: abi::report::Measure::PerOp,
        };
        let s = compare_metric("x", &sets, false, &info, &RenderOptions::default());
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
        };
        let sets = vec![
            ("a".to_string(), vec![100.0; 3]),
            ("b".to_string(), vec![150.0; 3]),
        ];
        let s = compare_metric("ebizzy", &sets, true, &info, &RenderOptions::default());
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
