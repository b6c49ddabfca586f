//! `cargo xtask table`: the speed-up table across results files
//! (time without the change / time with it; for a throughput, rate with /
//! rate without), per system and benchmark.

use std::collections::BTreeMap;
use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::compare::{layout_key, layout_of, metrics_of};
use crate::results::{other_kind, speedup, MetricInfo, Results};

#[derive(Args, Debug)]
pub struct TableArgs {
    /// Results files (results/*.json) and `bench` exports
    /// (results/bench/<timestamp>/bench.json: each one system, its variants
    /// against the first); a directory stands for those in it.
    #[arg(required = true)]
    pub files: Vec<PathBuf>,
    /// The label of the runs "without the change"; default: the first file of each system.
    #[arg(long)]
    pub base: Option<String>,
    /// Benchmarks to show (default: every one); repeated, or a comma list.
    #[arg(long = "bench", value_delimiter = ',')]
    pub benches: Vec<String>,
    /// Markdown instead of plain text.
    #[arg(long)]
    pub md: bool,
}

/// The system a result comes from: host, accelerator, CPU model. Under
/// Bochs the brand is a real CPU's, so the accelerator says what a tick is.
/// For a model run, the profile, bare or `virt`. Then `SP` or `MP` (the
/// fork experiment's columns): MP when the run's figures crossed CPUs.
fn system_of(r: &Results) -> String {
    // The CPUs that started, where the boot says (its `settings` record);
    // an older boot's are what its figures show.
    let cpus = r.cpus_started().map_or_else(
        || {
            (r.model_cpus as usize)
                .max(r.benches.iter().map(|b| b.cpus.len()).max().unwrap_or(0))
                .max(1)
        },
        |n| n as usize,
    );
    let sp_mp = if cpus > 1 {
        format!("MP ({cpus} CPUs)")
    } else {
        "SP".to_string()
    };
    format!("{} {sp_mp}", machine_of(r))
}

/// [`system_of`] without the CPU count.
fn machine_of(r: &Results) -> String {
    // A model run's system is its profile.
    if let Some(p) = &r.model_profile {
        return crate::model::label(p, r.virt());
    }
    let model = r.cpu.get("brand").cloned().unwrap_or_default();
    let model = if model.is_empty() {
        r.cpu.get("vendor").cloned().unwrap_or_default()
    } else {
        model
    };
    let accel = if r.bochs() {
        format!("{}(ticks=instructions)", r.accel)
    } else {
        r.accel.clone()
    };
    format!(
        "{} {} {}",
        if r.host.is_empty() { "?" } else { &r.host },
        accel,
        model.replace(' ', "_")
    )
}

/// Why the medians `without` and `with` give no speed-up `s`, or `None`
/// when they do: both must be positive normal numbers (a median of 0, a
/// negative one or a subnormal such as 5e-324 is no time or rate anything
/// took), and so must their ratio (30 over 5e-324 is `inf`).
fn unusable(without: f64, with: f64, s: f64) -> Option<String> {
    // Very large and very small numbers in exponent form (Rust writes
    // every digit of 5e-324 otherwise).
    let show = |x: f64| {
        if x != 0.0 && x.is_finite() && !(1e-6..1e15).contains(&x.abs()) {
            format!("{x:e}")
        } else {
            format!("{x}")
        }
    };
    let pair = format!("median {} against {}", show(with), show(without));
    if !(with > 0.0 && without > 0.0) {
        return Some(format!("{pair} (a speed-up needs two positive medians)"));
    }
    if let Some(x) = [with, without].into_iter().find(|x| !x.is_normal()) {
        return Some(format!(
            "{pair} ({} is not a normal number: no time or rate a benchmark measures is {})",
            show(x),
            if x.is_infinite() {
                "infinite"
            } else {
                "that small"
            }
        ));
    }
    if !s.is_normal() {
        return Some(format!(
            "{pair} (their ratio is {s}, beyond what a number holds)"
        ));
    }
    None
}

/// Speed-up = time without the change / time with it (for a throughput:
/// rate with / rate without), per system and benchmark. Runs that each
/// measured one pool layout (`pool_align=`) pair layout against layout.
/// Also returns the pairs left out because a median or their ratio is not
/// a positive normal number (see [`unusable`]), each in a sentence.
pub fn speedup_rows(
    results: &[Results],
    base: Option<&str>,
    benches: &[String],
) -> Result<(Vec<[String; 4]>, Vec<String>)> {
    let mut dropped = Vec::new();
    let mut by_system: BTreeMap<String, Vec<&Results>> = BTreeMap::new();
    for r in results {
        // A run whose records contradict what its label and command line
        // ask is not the run its row would name.
        let c = r.contradicted();
        if !c.is_empty() {
            bail!(
                "run {:?}: the boot's settings record contradicts it: {}; a row under this label would show another configuration's figures",
                r.label,
                c.join("; ")
            );
        }
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
        let one_layout = |r: &Results| {
            let l: std::collections::BTreeSet<&str> = r
                .benches
                .iter()
                .filter_map(|x| layout_of(&x.name))
                .collect();
            l.len() == 1
        };
        let rename: fn(&str) -> String = if rs.iter().all(|r| one_layout(r)) {
            layout_key
        } else {
            str::to_string
        };
        let metrics = |r: &Results| -> BTreeMap<String, f64> {
            metrics_of(r)
                .into_iter()
                .map(|(k, v)| (rename(&k), v))
                .collect()
        };
        if let Some(r) = rs.iter().find(|r| r.like() != b.like()) {
            bail!(
                "{system}: run {:?} ({}) does not compare with base {:?} ({}): rows compare like with like (clock, accelerator, source); give files of one clock",
                r.label,
                r.like(),
                b.label,
                b.like()
            );
        }
        let infos: BTreeMap<String, MetricInfo> = b
            .metric_info()
            .into_iter()
            .map(|(k, i)| (rename(&k), i))
            .collect();
        for r in rs.iter().filter(|r| !std::ptr::eq(**r, b)) {
            let with = metrics(r);
            // A multi-CPU figure one CPU did alone, or whose CPUs barely
            // overlapped in modelled time, in either run: its speed-up is
            // not the machine's, and the row says so.
            let mut flagged: BTreeMap<String, &str> = BTreeMap::new();
            for (k, i) in b.metric_info().into_iter().chain(r.metric_info()) {
                if let Some(mark) = flag_mark(&i.one_cpu) {
                    flagged.entry(rename(&k)).or_insert(mark);
                }
            }
            // lmbench's rows in its summary's order, every other figure
            // after them by name.
            let mut ordered: Vec<(String, f64)> = metrics(b).into_iter().collect();
            ordered.sort_by_cached_key(|(k, _)| {
                (abi::lmbench::rank(k).unwrap_or(usize::MAX), k.clone())
            });
            for (name, without) in ordered {
                if !benches.is_empty() && !benches.contains(&name) {
                    continue;
                }
                let measure = infos.get(&name).map_or(Default::default(), |i| i.measure);
                let Some(&w) = with.get(&name) else { continue };
                let s = speedup(measure, without, w);
                match unusable(without, w, s) {
                    None => rows.push([
                        system.clone(),
                        r.label.clone(),
                        match flagged.get(&name) {
                            Some(mark) => format!("{name} {mark}"),
                            None => name.clone(),
                        },
                        format!("{s:.2}"),
                    ]),
                    Some(why) => dropped.push(format!(
                        "{system}: {name} of {:?} against {:?} left out: {why}",
                        r.label, b.label
                    )),
                }
            }
        }
    }
    some_pairs(
        &rows,
        &dropped,
        "each system needs a base run and at least one other run (labels: use --label on run, --base here)",
    )?;
    Ok((rows, dropped))
}

/// An error where there are no `rows` to compare: every pair `dropped`
/// (the reasons given), or none at all (`need` says what there must be).
fn some_pairs<T>(rows: &[T], dropped: &[String], need: &str) -> Result<()> {
    if rows.is_empty() && !dropped.is_empty() {
        bail!(
            "no pairs to compare: every pair was left out: {}",
            dropped.join("; ")
        );
    }
    if rows.is_empty() {
        bail!("no pairs to compare: {need}");
    }
    Ok(())
}

/// The results files among `files`; baselines (which a `results/*` glob
/// may catch) are skipped with a note, and so are bench exports (see
/// [`load`], which reads those too).
#[cfg(test)]
pub fn load_results(files: &[PathBuf]) -> Result<Vec<Results>> {
    Ok(load(files, false)?.0)
}

/// A `cargo xtask bench` export: its variants' medians, the first variant
/// the base (`old` against `new`), and the system they ran on.
pub struct Export {
    /// The system, as [`system_of`] names a run's.
    system: String,
    /// (variant, metric, median), in the export's order.
    medians: Vec<(String, String, f64)>,
    /// Metrics whose higher value is better (throughputs).
    higher_better: Vec<String>,
    /// Multi-CPU metrics one CPU did (nearly) alone in some boot: the
    /// export's `reads` carries the share's flag.
    one_cpu: Vec<String>,
    /// Multi-CPU metrics whose CPUs barely overlapped in modelled time.
    apart: Vec<String>,
}

/// What a speed-up row adds to a flagged metric's name: the share's flag
/// (`MetricInfo::one_cpu`) in a few words, or `None` when it has none.
fn flag_mark(flag: &str) -> Option<&'static str> {
    if flag.contains("one CPU: ") {
        Some("[one CPU did the work]")
    } else if flag.contains("apart: ") {
        Some("[CPUs apart in modelled time]")
    } else {
        None
    }
}

/// Reads a bench export (`results/bench/<timestamp>/bench.json`), typed
/// ([`BenchFile`](crate::results::bench::BenchFile)).
fn read_export(text: &str) -> Result<Export> {
    let f = crate::results::bench::BenchFile::parse(text)?;
    let prov = f.sets[0].provenance.clone();
    for set in &f.sets {
        let p = &set.provenance;
        let c = crate::results::contradictions(&p.cmdline, &p.settings);
        if !c.is_empty() {
            bail!(
                "variant {:?}: its boots' settings record contradicts its command line: {}",
                set.name,
                c.join("; ")
            );
        }
    }
    let machine = if prov.profile.is_empty() {
        format!(
            "{} {} {}",
            if prov.host.is_empty() {
                "?"
            } else {
                &prov.host
            },
            prov.accel,
            prov.cpu.replace(' ', "_")
        )
    } else {
        prov.profile.clone()
    };
    // An export older than the CPU count does not say how many CPUs it
    // had: it is neither SP nor MP, and never shares a row with either.
    let system = match prov.cpus {
        0 => format!("{machine} (CPUs unknown)"),
        1 => format!("{machine} SP"),
        n => format!("{machine} MP ({n} CPUs)"),
    };
    let mut medians = Vec::new();
    for set in &f.sets {
        let name = &set.name;
        let values = f
            .values
            .get(name)
            .with_context(|| format!("variant {name}: no values"))?;
        for (metric, xs) in values {
            if xs.is_empty() {
                continue;
            }
            medians.push((name.clone(), metric.clone(), crate::compare::median(xs)));
        }
    }
    let reading = |says: &str| -> Vec<String> {
        f.metrics
            .iter()
            .filter(|(_, e)| e.reads.contains(says))
            .map(|(k, _)| k.clone())
            .collect()
    };
    Ok(Export {
        system,
        medians,
        higher_better: reading("higher is better"),
        one_cpu: reading("; one CPU: "),
        apart: reading("; apart: "),
    })
}

/// The speed-up rows of bench exports: each variant against the first (or
/// the one `base` names), per metric; and the pairs left out, as in
/// [`speedup_rows`].
pub fn export_rows(
    exports: &[Export],
    base: Option<&str>,
    benches: &[String],
) -> (Vec<[String; 4]>, Vec<String>) {
    let mut rows = Vec::new();
    let mut dropped = Vec::new();
    for e in exports {
        let Some(base) = base.or_else(|| e.medians.first().map(|m| m.0.as_str())) else {
            continue;
        };
        for (variant, metric, with) in &e.medians {
            if variant == base || (!benches.is_empty() && !benches.contains(metric)) {
                continue;
            }
            let Some((_, _, without)) = e.medians.iter().find(|m| m.0 == base && &m.1 == metric)
            else {
                continue;
            };
            let s = if e.higher_better.contains(metric) {
                with / without
            } else {
                without / with
            };
            if let Some(why) = unusable(*without, *with, s) {
                dropped.push(format!(
                    "{}: {metric} of {variant:?} against {base:?} left out: {why}",
                    e.system
                ));
                continue;
            }
            rows.push([
                e.system.clone(),
                variant.clone(),
                if e.one_cpu.contains(metric) {
                    format!("{metric} [one CPU did the work]")
                } else if e.apart.contains(metric) {
                    format!("{metric} [CPUs apart in modelled time]")
                } else {
                    metric.clone()
                },
                format!("{s:.2}"),
            ]);
        }
    }
    (rows, dropped)
}

/// `files` with each directory replaced by the JSON files in it and the
/// `bench.json` one level down (`results/` or a `bench --out` directory),
/// in name order.
fn expand(files: &[PathBuf]) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for p in files {
        if !p.is_dir() {
            out.push(p.clone());
            continue;
        }
        let mut inside = Vec::new();
        for e in std::fs::read_dir(p).with_context(|| format!("cannot read {}", p.display()))? {
            let e = e?.path();
            if e.is_dir() {
                let export = e.join("bench.json");
                if export.is_file() {
                    inside.push(export);
                }
            } else if e.extension().is_some_and(|x| x == "json") {
                inside.push(e);
            }
        }
        if inside.is_empty() {
            bail!("{} holds no results file and no bench export", p.display());
        }
        inside.sort();
        out.extend(inside);
    }
    Ok(out)
}

/// Runs' results files and bench exports (`exports`: read them, else skip
/// them with a note).
fn load(files: &[PathBuf], exports: bool) -> Result<(Vec<Results>, Vec<Export>)> {
    let mut texts = Vec::new();
    for p in expand(files)? {
        let text =
            std::fs::read_to_string(&p).with_context(|| format!("cannot read {}", p.display()))?;
        texts.push((p.display().to_string(), text));
    }
    from_texts(&texts, exports)
}

/// [`load`] on files already read: each a name (for messages) and a text.
pub(crate) fn from_texts(
    texts: &[(String, String)],
    exports: bool,
) -> Result<(Vec<Results>, Vec<Export>)> {
    let mut out = Vec::new();
    let mut found = Vec::new();
    for (name, text) in texts {
        if exports && other_kind(text) == Some("a bench export") {
            found.push(read_export(text).with_context(|| format!("{name} is not a bench export"))?);
            continue;
        }
        if let Some(kind) = other_kind(text) {
            eprintln!("table: skipping {name}: {kind}, not a run's results");
            continue;
        }
        out.push(Results::parse(text).with_context(|| format!("{name} is not a results file"))?);
    }
    if out.is_empty() && found.is_empty() {
        bail!(
            "none of the files is a run's results file (results/<timestamp>-<label>.json){}",
            if exports {
                " or a bench export (results/bench/<timestamp>/bench.json)"
            } else {
                ""
            }
        );
    }
    Ok((out, found))
}

/// Every `--bench` and `--base` name must name something in the files:
/// a benchmark some run or export measured, a run's label or an export's
/// variant. A typo is said by name, with the names that exist, rather than
/// ending as "no pairs to compare".
fn check_names(
    benches: &[String],
    base: Option<&str>,
    results: &[Results],
    exports: &[Export],
) -> Result<()> {
    use std::collections::BTreeSet;
    let mut metrics: BTreeSet<String> = BTreeSet::new();
    for r in results {
        for k in metrics_of(r).into_keys() {
            metrics.insert(layout_key(&k));
            metrics.insert(k);
        }
    }
    for e in exports {
        metrics.extend(e.medians.iter().map(|m| m.1.clone()));
    }
    let missing: Vec<&str> = benches
        .iter()
        .filter(|b| !metrics.contains(*b))
        .map(String::as_str)
        .collect();
    if !missing.is_empty() {
        bail!(
            "--bench {}: no benchmark of {} in the files; their benchmarks: {}",
            missing
                .iter()
                .map(|m| format!("{m:?}"))
                .collect::<Vec<_>>()
                .join(", "),
            if missing.len() == 1 {
                "that name"
            } else {
                "those names"
            },
            metrics.into_iter().collect::<Vec<_>>().join(", ")
        );
    }
    if let Some(base) = base {
        let mut names: BTreeSet<String> = results.iter().map(|r| r.label.clone()).collect();
        for e in exports {
            names.extend(e.medians.iter().map(|m| m.0.clone()));
        }
        if !names.contains(base) {
            bail!(
                "--base {base:?}: no run is labelled so and no bench variant is named so; the files' labels and variants: {}",
                names.into_iter().collect::<Vec<_>>().join(", ")
            );
        }
    }
    Ok(())
}

pub fn table(a: TableArgs) -> Result<i32> {
    let (results, exports) = load(&a.files, true)?;
    check_names(&a.benches, a.base.as_deref(), &results, &exports)?;
    let (mut rows, mut dropped) = if results.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        speedup_rows(&results, a.base.as_deref(), &a.benches)?
    };
    let (more, left_out) = export_rows(&exports, a.base.as_deref(), &a.benches);
    rows.extend(more);
    dropped.extend(left_out);
    some_pairs(
        &rows,
        &dropped,
        "a bench export needs two variants, a system's runs a base and another",
    )?;
    for d in &dropped {
        eprintln!("table: {d}");
    }
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
        // Text left-aligned in its column, the speed-up right-aligned.
        let line = |cells: [&str; 4]| {
            println!(
                "{:<a$}   {:<b$}   {:<c$}   {:>d$}",
                cells[0],
                cells[1],
                cells[2],
                cells[3],
                a = w[0],
                b = w[1],
                c = w[2],
                d = w[3]
            )
        };
        line(head);
        for r in &rows {
            line(r.each_ref().map(String::as_str));
        }
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_run_names_its_profile_as_the_system() {
        use crate::results::figures::two_mechanisms;
        let mut before = two_mechanisms();
        before.label = "before".into();
        let mut after = two_mechanisms();
        after.label = "after".into();
        after.benches[0].model.as_mut().unwrap().cycles = 500.0;
        let mut other = two_mechanisms();
        other.model_profile = Some("p3".into());
        let rows = speedup_rows(&[before, after, other], Some("before"), &[])
            .unwrap()
            .0;
        assert_eq!(
            rows[0],
            ["modelled, profile p4 SP", "after", "int80.null", "2.00"].map(String::from)
        );
    }

    #[test]
    fn bench_exports_among_the_files_are_skipped() {
        let dir = std::env::temp_dir().join(format!("testbed-table-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let export = dir.join("bench.json");
        std::fs::write(&export, r#"{"schema":1,"kind":"bench","values":{}}"#).unwrap();
        let run = dir.join("run.json");
        let r = Results {
            schema: crate::results::JSON_SCHEMA,
            label: "a".into(),
            ..Results::default()
        };
        std::fs::write(&run, r.to_json().unwrap()).unwrap();
        let got = load_results(&[export.clone(), run]).unwrap();
        assert_eq!(got.len(), 1);
        assert!(load_results(&[export]).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }

    use crate::results::bench::{BenchFile, MetricEntry, Provenance, SetInfo};

    /// A bench export's text, typed as `bench` writes it: its sets, each
    /// set's values of each metric, and how some metrics read.
    fn typed_export(
        sets: &[(&str, Provenance)],
        values: &[(&str, &str, Vec<f64>)],
        reads: &[(&str, &str)],
    ) -> String {
        let mut f = BenchFile {
            schema: crate::results::bench::BENCH_SCHEMA,
            kind: crate::results::bench::BENCH_KIND.into(),
            sets: sets
                .iter()
                .map(|(n, p)| SetInfo {
                    name: n.to_string(),
                    how: String::new(),
                    provenance: p.clone(),
                })
                .collect(),
            ..BenchFile::default()
        };
        for (set, metric, v) in values {
            f.values
                .entry(set.to_string())
                .or_default()
                .insert(metric.to_string(), v.clone());
        }
        for (metric, r) in reads {
            f.metrics.insert(
                metric.to_string(),
                MetricEntry {
                    reads: r.to_string(),
                    ..MetricEntry::default()
                },
            );
        }
        serde_json::to_string(&f).unwrap()
    }

    /// A `--bench` or `--base` that names nothing in the files is an error
    /// naming it and what exists; a comma list is several benchmarks.
    #[test]
    fn a_name_that_matches_nothing_is_said_with_those_that_exist() {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            t: TableArgs,
        }
        let t = T::try_parse_from(["x", "f.json", "--bench", "int80.null,sysenter.null"]).unwrap();
        assert_eq!(t.t.benches, ["int80.null", "sysenter.null"]);
        let export = typed_export(
            &[
                (
                    "before",
                    Provenance {
                        cpus: 1,
                        ..Default::default()
                    },
                ),
                ("after", Provenance::default()),
            ],
            &[
                ("before", "int80.null", vec![24.0]),
                ("before", "sysenter.null", vec![40.0]),
                ("after", "int80.null", vec![25.0]),
                ("after", "sysenter.null", vec![40.0]),
            ],
            &[],
        );
        let e = [read_export(&export).unwrap()];
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(check_names(
            &names(&["int80.null", "sysenter.null"]),
            Some("before"),
            &[],
            &e
        )
        .is_ok());
        let err = check_names(&names(&["int80.nul"]), None, &[], &e)
            .unwrap_err()
            .to_string();
        assert_eq!(
            err,
            "--bench \"int80.nul\": no benchmark of that name in the files; their benchmarks: int80.null, sysenter.null"
        );
        let err = check_names(&[], Some("befor"), &[], &e)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("--base \"befor\"") && err.ends_with("variants: after, before"),
            "{err}"
        );
    }

    #[test]
    fn bench_exports_give_one_system_each() {
        let export = |profile: &str, cpus: u32, old: f64, new: f64| {
            let prov = Provenance {
                clock: "icount".into(),
                accel: "tcg".into(),
                emulator: "QEMU 7.2".into(),
                cpu_model: "qemu32".into(),
                cpu: "QEMU".into(),
                rev: "r".into(),
                batches: "4".into(),
                batch_size: "8".into(),
                host: "h".into(),
                host_cpu: "c".into(),
                profile: profile.into(),
                cpus,
                ..Provenance::default()
            };
            typed_export(
                &[("old", prov), ("new", Provenance::default())],
                &[
                    ("old", "forktest.fork_exit", vec![old, old * 3.0, old]),
                    ("old", "ebizzy.128", vec![10.0]),
                    ("new", "forktest.fork_exit", vec![new]),
                    ("new", "ebizzy.128", vec![20.0]),
                ],
                &[
                    (
                        "forktest.fork_exit",
                        "modelled cycles per operation, lower is better",
                    ),
                    ("ebizzy.128", "records/s, higher is better"),
                ],
            )
        };
        let a = read_export(&export("modelled, profile p4", 1, 300.0, 200.0)).unwrap();
        let b = read_export(&export("modelled, profile p4, virt", 2, 900.0, 300.0)).unwrap();
        let rows = export_rows(&[a, b], None, &["forktest.fork_exit".to_string()]).0;
        assert_eq!(
            rows,
            [
                [
                    "modelled, profile p4 SP",
                    "new",
                    "forktest.fork_exit",
                    "1.50"
                ]
                .map(String::from),
                [
                    "modelled, profile p4, virt MP (2 CPUs)",
                    "new",
                    "forktest.fork_exit",
                    "3.00"
                ]
                .map(String::from),
            ]
        );
        // A throughput is better when higher.
        let c = read_export(&export("", 1, 1.0, 1.0)).unwrap();
        let rows = export_rows(&[c], None, &["ebizzy.128".to_string()]).0;
        assert_eq!(rows[0][0], "h tcg QEMU SP");
        assert_eq!(rows[0][3], "2.00");
        // An export that does not say how many CPUs it had is neither SP
        // nor MP.
        let d = read_export(&export("", 0, 1.0, 1.0)).unwrap();
        let rows = export_rows(&[d], None, &["ebizzy.128".to_string()]).0;
        assert_eq!(rows[0][0], "h tcg QEMU (CPUs unknown)");
        assert!(read_export("{\"kind\": \"bench\"}").is_err());
        // The row of forktest's figure in an export of `label` whose
        // metric carries `flag`.
        let flagged_row = |label: &str, flag: &str| {
            let text = export(label, 2, 900.0, 300.0).replace(
                "modelled cycles per operation, lower is better",
                &format!("modelled cycles per operation, lower is better; {flag}"),
            );
            let rows = export_rows(
                &[read_export(&text).unwrap()],
                None,
                &["forktest.fork_exit".to_string()],
            )
            .0;
            rows[0].clone()
        };
        // A figure one CPU did alone says so in its row.
        assert_eq!(
            flagged_row(
                "modelled, profile modern, virt ept",
                "one CPU: CPU 0 did 64 of 64 rounds: not a 2-CPU figure"
            ),
            [
                "modelled, profile modern, virt ept MP (2 CPUs)",
                "new",
                "forktest.fork_exit [one CPU did the work]",
                "3.00"
            ]
            .map(String::from)
        );
        // And one whose CPUs barely overlapped in modelled time.
        assert_eq!(
            flagged_row(
                "modelled, profile p4",
                "apart: CPU 1 worked during 3% of CPU 0's timed modelled time: not a concurrent figure"
            )[2],
            "forktest.fork_exit [CPUs apart in modelled time]"
        );
        assert_eq!(
            flag_mark("apart: CPU 1 worked during 3% of CPU 0's timed modelled time"),
            Some("[CPUs apart in modelled time]")
        );
        assert_eq!(flag_mark(""), None);
    }

    /// A run labelled `label` on host `h` under TCG, with a median per
    /// benchmark in `benches`.
    fn run_of(label: &str, benches: &[(&str, f64)]) -> Results {
        let mut r = Results {
            label: label.into(),
            accel: "tcg".into(),
            host: "h".into(),
            ..Results::default()
        };
        r.cpu.insert("brand".into(), "QEMU CPU".into());
        for &(name, median) in benches {
            r.benches.push(crate::results::Bench {
                name: name.into(),
                median,
                ..Default::default()
            });
        }
        r
    }

    #[test]
    fn speedups() {
        let mk = |label: &str, median: f64| run_of(label, &[("int80.null", median)]);
        let rows = speedup_rows(&[mk("before", 30.0), mk("after", 20.0)], None, &[])
            .unwrap()
            .0;
        assert_eq!(
            rows,
            [[
                "h tcg QEMU_CPU SP".to_string(),
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
        .unwrap()
        .0;
        assert_eq!(rows[0][3], "1.50");
        assert!(speedup_rows(&[mk("only", 1.0)], None, &[]).is_err());
        // An icount base against a tsc run: refused, not a row.
        let mut tsc = mk("after", 20.0);
        tsc.clock = "tsc".into();
        let mut icount = mk("before", 30.0);
        icount.clock = "icount".into();
        let e = speedup_rows(&[icount, tsc], None, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not compare") && e.contains("clock=tsc"),
            "{e}"
        );
        // Two model runs of one profile compare; the profile is part of
        // what must be equal.
        let mut a = mk("a", 1.0);
        a.model_profile = Some("p6".into());
        let mut b = a.clone();
        assert_eq!(a.like(), b.like());
        b.model_virt = true;
        assert_ne!(a.like(), b.like());
        let mut b = mk("x", 1.0);
        b.accel = "bochs".into();
        b.cpu
            .insert("brand".into(), "Intel(R) Celeron(R) CPU 2.80GHz".into());
        assert_eq!(
            system_of(&b),
            "h bochs(ticks=instructions) Intel(R)_Celeron(R)_CPU_2.80GHz SP"
        );
        b.model_cpus = 2;
        assert!(system_of(&b).ends_with(" MP (2 CPUs)"), "{}", system_of(&b));
        // The settings record's CPUs are the machine's, whatever the
        // figures touched.
        b.settings.insert("cpus".into(), "4".into());
        assert!(system_of(&b).ends_with(" MP (4 CPUs)"), "{}", system_of(&b));
        // A run whose records contradict its command line or its label has
        // no row.
        let mut asked = mk("after", 20.0);
        asked.cmdline = "mode=run prog=forktest pmap=direct".into();
        asked.settings.insert("pmap".into(), "window".into());
        let e = speedup_rows(&[mk("before", 30.0), asked.clone()], None, &[])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("\"after\"")
                && e.contains("asked pmap=direct, the kernel applied pmap=window"),
            "{e}"
        );
        asked.cmdline = "mode=run prog=forktest pmap=window".into();
        asked.label = "pmap=apte".into();
        let e = speedup_rows(&[mk("before", 30.0), asked.clone()], None, &[])
            .unwrap_err()
            .to_string();
        assert!(e.contains("its label says pmap=apte"), "{e}");
        asked.label = "after".into();
        assert!(speedup_rows(&[mk("before", 30.0), asked], None, &[]).is_ok());
        // A throughput is better when higher; runs of one layout each pair up.
        let rate = |label: &str, layout: &str, median: f64| {
            let mut r = mk(label, 1.0);
            r.benches[0] = crate::results::Bench {
                name: format!("ebizzy.{layout}"),
                measure: abi::report::Measure::Throughput,
                unit: "records/s".into(),
                median,
                ..Default::default()
            };
            r
        };
        let rows = speedup_rows(
            &[rate("packed", "packed", 100.0), rate("a128", "128", 150.0)],
            Some("packed"),
            &[],
        )
        .unwrap()
        .0;
        assert_eq!(
            (rows[0][2].as_str(), rows[0][3].as_str()),
            ("ebizzy", "1.50")
        );
        // A figure one CPU did alone, in either run, says so in its row.
        let mut alone = rate("a128", "128", 150.0);
        alone.benches[0].share = Some(crate::results::Share::new("records", vec![8000, 0]));
        let rows = speedup_rows(
            &[rate("packed", "packed", 100.0), alone],
            Some("packed"),
            &[],
        )
        .unwrap()
        .0;
        assert_eq!(rows[0][2], "ebizzy [one CPU did the work]");
        // lmbench's rows come in lmbench's order, not the alphabet's.
        let lm = |label: &str, median: f64| {
            let mut r = mk(label, median);
            r.benches = [
                "smack.int80",
                "lat_syscall.null",
                "bw_pipe",
                "lat_ctx.2p.0k",
            ]
            .into_iter()
            .map(|n| crate::results::Bench {
                name: n.into(),
                median,
                ..Default::default()
            })
            .collect();
            r
        };
        let rows = speedup_rows(&[lm("a", 2.0), lm("b", 1.0)], Some("a"), &[])
            .unwrap()
            .0;
        let names: Vec<&str> = rows.iter().map(|r| r[2].as_str()).collect();
        assert_eq!(
            names,
            [
                "lat_syscall.null",
                "lat_ctx.2p.0k",
                "bw_pipe",
                "smack.int80"
            ]
        );
    }

    /// A pair with a zero or negative median has no speed-up: it is left
    /// out and said, and a table of nothing else is an error saying why.
    #[test]
    fn rows_left_out_are_said() {
        let mk = |label: &str, median: f64| {
            run_of(label, &[("int80.null", median), ("sysenter.null", 10.0)])
        };
        let (rows, dropped) =
            speedup_rows(&[mk("before", 30.0), mk("after", 0.0)], None, &[]).unwrap();
        assert_eq!(rows.len(), 1, "{rows:?}");
        assert_eq!(rows[0][2], "sysenter.null");
        assert_eq!(dropped.len(), 1, "{dropped:?}");
        assert!(
            dropped[0].contains("int80.null") && dropped[0].contains("median 0"),
            "{dropped:?}"
        );
        let (_, dropped) =
            speedup_rows(&[mk("before", -3.0), mk("after", 20.0)], None, &[]).unwrap();
        assert!(dropped[0].contains("against -3"), "{dropped:?}");
        let e = speedup_rows(
            &[mk("before", 0.0), mk("after", 0.0)],
            None,
            &["int80.null".into()],
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("every pair was left out"), "{e}");
    }

    /// A median of 5e-324 (a subnormal) made a speed-up of `inf`; medians
    /// that are not positive normal numbers, and ratios beyond what a
    /// number holds, are left out and said, in results and exports alike.
    #[test]
    fn a_speedup_of_numbers_that_are_no_times_is_left_out() {
        let mk = |label: &str, median: f64| {
            let mut r = Results {
                label: label.into(),
                ..Results::default()
            };
            r.benches.push(crate::results::Bench {
                name: "int80.null".into(),
                median,
                ..Default::default()
            });
            r
        };
        for (before, after, says) in [
            (
                30.0,
                5e-324,
                "int80.null of \"after\" against \"before\" left out: median 5e-324 against 30 (5e-324 is not a normal number: no time or rate a benchmark measures is that small)",
            ),
            (
                f64::MIN_POSITIVE / 2.0,
                1.0,
                "is not a normal number",
            ),
            (
                1e300,
                1e-300,
                "median 1e-300 against 1e300 (their ratio is inf, beyond what a number holds)",
            ),
            (f64::INFINITY, 1.0, "inf is not a normal number"),
        ] {
            let e = speedup_rows(&[mk("before", before), mk("after", after)], None, &[])
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{before} {after}: {e}");
        }
        let prov = Provenance {
            clock: "icount".into(),
            accel: "tcg".into(),
            cpu: "QEMU".into(),
            host: "h".into(),
            cpus: 1,
            ..Provenance::default()
        };
        let export = typed_export(
            &[("old", prov), ("new", Provenance::default())],
            &[
                ("old", "int80.null", vec![30.0]),
                ("new", "int80.null", vec![5e-324]),
            ],
            &[],
        );
        let (rows, dropped) = export_rows(&[read_export(&export).unwrap()], None, &[]);
        assert!(rows.is_empty(), "{rows:?}");
        assert_eq!(
            dropped,
            ["h tcg QEMU SP: int80.null of \"new\" against \"old\" left out: median 5e-324 against 30 (5e-324 is not a normal number: no time or rate a benchmark measures is that small)"]
        );
    }
}
