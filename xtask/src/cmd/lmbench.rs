//! `cargo xtask lmbench`: boots the `lmbench` program (`abi::lmbench`) and
//! prints its rows as one table in lmbench's summary order and units:
//! microseconds (MB/s for `bw_pipe`) where the clock has a frequency, else
//! clock ticks per operation with the clock named (icount instructions,
//! Bochs ticks; under `--clock model` modelled cycles with the model's
//! misses beside them). The run is saved like `run`'s, so `cargo xtask
//! table A B` compares two of them.

use anyhow::{bail, Context, Result};
use clap::Args;

use super::BootArgs;
use crate::machine::{Clock, CmdlineCheck, Machine, Scratch};
use crate::results::{Bench, Results};
use crate::{kbuild, model, preflight};
use abi::lmbench as lm;

#[derive(Args)]
pub struct LmbenchArgs {
    #[command(flatten)]
    boot: BootArgs,
    /// The row groups (`bench=`): all, or a comma list of syscall, sig,
    /// proc, ctx, pipe, pagefault, bw_pipe, smack.
    #[arg(long, default_value = "all")]
    bench: String,
    /// Show the kernel's and the program's text too, not only the table.
    #[arg(long)]
    verbose: bool,
    /// Label in the results file name: results/<timestamp>-<label>.json.
    #[arg(long, default_value = "lmbench")]
    label: String,
    /// Do not write a results file.
    #[arg(long)]
    no_save: bool,
}

pub fn lmbench(a: LmbenchArgs) -> Result<i32> {
    if lm::parse_groups(&a.bench).is_none() {
        bail!(
            "--bench {}: not `all` nor a comma list of {}",
            a.bench,
            lm::GROUPS.map(|(_, k)| k).join(", ")
        );
    }
    a.boot.check()?;
    let words = format!("mode=run prog={} bench={}", lm::PROG, a.bench);
    let check = CmdlineCheck::of(&format!("{words} {}", a.boot.append));
    if let Some(w) = check.repeat_warning() {
        eprintln!("{w}");
    }
    preflight::ensure(a.boot.need())?;
    let art = kbuild::build(true)?;
    let scratch = Scratch::new("lmbench")?;
    let m = Machine::build(&a.boot.spec()?, &art, &words, scratch.path())?;
    println!("lmbench rows  {}", m.describe());
    let verbose = a.verbose;
    let log = m
        .boot(&mut |line| {
            if verbose && !line.contains(abi::report::MARKER) {
                println!("{line}");
            }
        })
        .with_context(|| format!("booting {}", m.backend.name()))?;
    if !log.succeeded() {
        eprintln!("lmbench failed: {}", log.explain(20));
        return Ok(1);
    }
    let mut results = Results::from_log(&log.serial, &a.label, m.backend.source())
        .context("reading the kernel's report")?;
    model::finish(m.model.as_ref(), &log.serial, &mut results)?;
    print!("{}", table(&results)?);
    if !a.no_save && !results.benches.is_empty() {
        let path = results.save(&kbuild::root().join("results"))?;
        eprintln!("results: {}", path.display());
    }
    Ok(0)
}

/// lmbench's caption for a row (its summary's column), where it has one.
fn caption(name: &str) -> String {
    let fixed = match name {
        lm::LAT_SYSCALL_NULL => "null call",
        lm::LAT_SYSCALL_WRITE => "null I/O (write)",
        lm::LAT_SIG_INSTALL => "sig inst",
        lm::LAT_SIG_CATCH => "sig hndl",
        lm::LAT_PROC_FORK => "fork proc",
        lm::LAT_PIPE => "Pipe latency",
        lm::LAT_PAGEFAULT_ZERO => "Page Fault (zero)",
        lm::LAT_PAGEFAULT_COW => "Page Fault (cow)",
        lm::BW_PIPE => "Pipe bandwidth",
        _ => "",
    };
    if !fixed.is_empty() {
        return fixed.into();
    }
    if let Some(rest) = name.strip_prefix("lat_ctx.") {
        // `2p.16k` → lmbench's `2p/16K ctxsw`.
        return format!("{} ctxsw", rest.replace(".", "/").replace('k', "K"));
    }
    if let Some(m) = name.strip_prefix("smack.") {
        return format!("queries, {m}");
    }
    String::new()
}

/// What the table's figure column holds for a run.
#[derive(Clone, Debug, PartialEq)]
enum Unit {
    /// The clock has a frequency (`tsc_hz` ticks per second): µs, MB/s.
    Micro { hz: f64, emulated: bool },
    /// Ticks per operation of the clock named.
    Ticks(String),
    /// Modelled cycles per operation, the profile named.
    Model(String),
}

fn unit_of(r: &Results) -> Unit {
    if let Some(p) = &r.model_profile {
        let pge = r.model_params.get("pge").is_some_and(|v| v == "1");
        return Unit::Model(format!(
            "{}{}",
            model::label(p, r.virt()),
            if pge { ", pge=on" } else { "" }
        ));
    }
    let clock = Clock::from_key(&r.clock);
    match clock {
        Some(Clock::Tsc) if r.tsc_hz > 0 && !r.bochs() => Unit::Micro {
            hz: r.tsc_hz as f64,
            emulated: r.tcg(),
        },
        _ => Unit::Ticks(if r.unit.is_empty() {
            "ticks".into()
        } else {
            r.unit.clone()
        }),
    }
}

/// The lmbench rows of a run, in lmbench's order (rows of one family in
/// the order the program made them).
pub fn rows(r: &Results) -> Vec<&Bench> {
    let mut v: Vec<(usize, usize, &Bench)> = r
        .benches
        .iter()
        .enumerate()
        .filter_map(|(i, b)| Some((lm::rank(&b.name)?, i, b)))
        .collect();
    v.sort_by_key(|&(rank, i, _)| (rank, i));
    v.into_iter().map(|(_, _, b)| b).collect()
}

/// The summary table of one run.
pub fn table(r: &Results) -> Result<String> {
    let rows = rows(r);
    if rows.is_empty() {
        bail!("the run holds no lmbench row (was the program `lmbench`?)");
    }
    let unit = unit_of(r);
    let width = rows
        .iter()
        .map(|b| b.name.len())
        .max()
        .unwrap_or(0)
        .max("row".len());
    let cap = rows
        .iter()
        .map(|b| caption(&b.name).len())
        .max()
        .unwrap_or(0)
        .max("lmbench".len());
    let mut s = String::new();
    let (head, per) = match &unit {
        Unit::Micro { emulated, .. } => (
            format!(
                "microseconds per operation, bw_pipe in MB/s (10^6 bytes){}",
                if *emulated {
                    "; TCG's TSC: emulator figures, not a CPU's"
                } else {
                    ""
                }
            ),
            "us",
        ),
        Unit::Ticks(u) => (
            format!("{u} per operation (the clock has no frequency), bw_pipe in bytes per tick"),
            "ticks",
        ),
        Unit::Model(label) => (
            format!(
                "modelled cycles per operation ({label}), bw_pipe in bytes per cycle; misses per operation (per byte for bw_pipe)"
            ),
            "cycles",
        ),
    };
    s += &format!("lmbench rows: {head}\n");
    s += &format!("{:<width$}  {:<cap$}  {:>12}", "row", "lmbench", per);
    let model = matches!(unit, Unit::Model(_));
    if model {
        s += &format!(
            " {:>10} {:>9} {:>9} {:>9} {:>8}",
            "insns", "L1 miss", "L2 miss", "TLB miss", "flushes"
        );
    } else {
        s += &format!(" {:>12} {:>6}", "best", "n");
    }
    s += "  note\n";
    let int80 = r.bench("smack.int80").map(|b| value(b, &unit));
    let mut any_clamped = false;
    for b in rows {
        let v = value(b, &unit);
        let cycles_clamped = model && b.model.as_ref().is_some_and(|m| m.is_clamped("cycles"));
        s += &format!(
            "{:<width$}  {:<cap$}  {:>12}",
            b.name,
            caption(&b.name),
            if cycles_clamped {
                CLAMPED.to_string()
            } else {
                fmt(v)
            }
        );
        any_clamped |= cycles_clamped;
        if model {
            match &b.model {
                Some(m) => {
                    let cell = |key: &str, x: f64, width: usize, decimals: usize| {
                        if m.is_clamped(key) {
                            format!(" {CLAMPED:>width$}")
                        } else {
                            format!(" {x:>width$.decimals$}")
                        }
                    };
                    s += &cell("insns", m.insns, 10, 1);
                    s += &cell("l1_misses", m.l1_misses, 9, 2);
                    s += &cell("l2_misses", m.l2_misses, 9, 2);
                    s += &cell("tlb_misses", m.tlb_misses, 9, 2);
                    s += &cell("tlb_flushes", m.tlb_flushes, 8, 2);
                    any_clamped |= !m.clamped.is_empty();
                }
                None => s += &format!(" {:>10}", "no model figures"),
            }
        } else {
            let mut min = b.clone();
            min.median = b.min;
            s += &format!(" {:>12} {:>6}", fmt(value(&min, &unit)), b.n);
        }
        let mut note = Vec::new();
        if b.name == lm::LAT_PAGEFAULT_COW && b.path == "no_fault" {
            note.push("fork=copy: no fault (the copy was made in fork)".to_string());
        }
        if b.name.starts_with("smack.") {
            if let (Some(base), Some(v)) = (int80, v) {
                if b.name != "smack.int80" && base.is_some_and(|x| x > 0.0) {
                    note.push(format!("{:.2}x int80's time", v / base.unwrap_or(1.0)));
                }
            }
        }
        if let Some(m) = b.model.as_ref().filter(|m| m.ipis >= 0.005) {
            note.push(ipi_note(&b.name, m.ipis, r.virt().on()));
        }
        if model && b.cpus.len() > 1 {
            // The parent's snapshots count its own CPU's instructions and
            // misses; the other CPUs' part of each hand-off is not in them,
            // and the one-process calibration subtracted from them was all
            // on one CPU.
            note.push("insns and misses: the parent's CPU alone".to_string());
        }
        if b.cpus.len() > 1 {
            note.push(format!(
                "CPUs {}",
                b.cpus
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(",")
            ));
        }
        s += &format!("  {}", note.join("; "));
        s = s.trim_end().to_string();
        s += "\n";
    }
    s += "(lat_ctx: per hand-off, the same hand-offs in one process subtracted, as lmbench does; smack: one query and its answer)\n";
    if any_clamped {
        s += &format!("({CLAMPED}: in some batch the calibration counted more than the operations did; the subtraction would go below zero, so there is no figure)\n");
    }
    for note in &r.model_incomplete {
        s += &format!("model: incomplete: {note}\n");
    }
    if let Some(note) = r.model_forced_note() {
        s += &format!("{note}\n");
    }
    Ok(s)
}

/// What a model cell shows instead of a figure whose subtraction of the
/// calibration stopped at zero in some batch.
const CLAMPED: &str = "clamped";

/// The note of a model row whose operations sent IPIs: how many per
/// operation (per hand-off for `lat_ctx`), every CPU's; under `--virt`
/// each is a VM exit, already inside the row's cycles.
fn ipi_note(name: &str, ipis: f64, virt: bool) -> String {
    let per = if name.starts_with("lat_ctx.") {
        "hand-off"
    } else if lm::per_byte(name) {
        "byte"
    } else {
        "op"
    };
    format!(
        "IPIs sent {ipis:.2} per {per} (every CPU's{})",
        if virt { "; each a VM exit" } else { "" }
    )
}

/// A row's figure in the table's unit: µs or MB/s, ticks, or modelled
/// cycles (bytes per tick or cycle for `bw_pipe`). `None`: no figure
/// (a model run without this row's model figures).
fn value(b: &Bench, unit: &Unit) -> Option<f64> {
    let ticks = match unit {
        Unit::Model(_) => b.model.as_ref()?.cycles,
        _ => b.median,
    };
    let bytes = lm::per_byte(&b.name);
    Some(match unit {
        Unit::Micro { hz, .. } if bytes => {
            if ticks > 0.0 {
                hz / ticks / 1e6
            } else {
                0.0
            }
        }
        Unit::Micro { hz, .. } => ticks / hz * 1e6,
        _ if bytes => {
            if ticks > 0.0 {
                1.0 / ticks
            } else {
                0.0
            }
        }
        _ => ticks,
    })
}

fn fmt(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v.abs() >= 100.0 => format!("{v:.0}"),
        Some(v) if v.abs() >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.4}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bench(name: &str, median: f64) -> Bench {
        Bench {
            name: name.into(),
            median,
            min: median,
            n: 4,
            ..Bench::default()
        }
    }

    fn run(clock: &str, unit: &str, hz: u64) -> Results {
        Results {
            clock: clock.into(),
            unit: unit.into(),
            tsc_hz: hz,
            accel: "tcg".into(),
            benches: vec![
                bench("smack.sysenter", 900.0),
                bench(lm::BW_PIPE, 2.0),
                bench("lat_ctx.2p.0k", 500.0),
                bench(lm::LAT_SYSCALL_NULL, 24.0),
                bench("int80.null", 24.0),
                bench("smack.int80", 1000.0),
                bench("lat_ctx.2p.16k", 600.0),
            ],
            ..Results::default()
        }
    }

    #[test]
    fn rows_follow_lmbench_order_and_leave_other_figures_out() {
        let r = run("icount", "instructions", 1_000_000_000);
        let names: Vec<&str> = rows(&r).iter().map(|b| b.name.as_str()).collect();
        assert_eq!(
            names,
            [
                lm::LAT_SYSCALL_NULL,
                "lat_ctx.2p.0k",
                "lat_ctx.2p.16k",
                lm::BW_PIPE,
                "smack.sysenter",
                "smack.int80"
            ]
        );
    }

    #[test]
    fn units_name_the_clock_or_convert_with_its_frequency() {
        // icount: ticks per op, bw_pipe in bytes per tick.
        let t = table(&run("icount", "instructions", 1_000_000_000)).unwrap();
        assert!(t.contains("instructions per operation"), "{t}");
        assert!(t
            .lines()
            .any(|l| l.starts_with("bw_pipe") && l.contains("0.5000")));
        assert!(t.contains("0.90x int80's time"), "{t}");
        assert!(t.contains("2p/16K ctxsw"), "{t}");
        // tsc with a frequency: microseconds and MB/s.
        let t = table(&run("tsc", "TCG ticks", 2_000_000_000)).unwrap();
        assert!(t.contains("microseconds"), "{t}");
        // 24 ticks at 2 GHz = 0.012 us; 2 ticks per byte = 1000 MB/s.
        assert!(t
            .lines()
            .any(|l| l.starts_with("lat_syscall.null") && l.contains("0.0120")));
        assert!(t
            .lines()
            .any(|l| l.starts_with("bw_pipe") && l.contains("1000")));
        // No lmbench row: an error, not an empty table.
        let mut r = run("icount", "instructions", 0);
        r.benches.retain(|b| lm::rank(&b.name).is_none());
        assert!(table(&r).is_err());
    }

    #[test]
    fn a_model_row_on_several_cpus_says_its_counts_are_one_cpu_s() {
        let mut r = run("model", "modelled cycles", 0);
        r.model_profile = Some("modern".into());
        for b in &mut r.benches {
            b.model = Some(Default::default());
            if b.name == "lat_ctx.2p.0k" {
                b.cpus = vec![0, 1];
            }
        }
        let t = table(&r).unwrap();
        let ctx = t.lines().find(|l| l.starts_with("lat_ctx.2p.0k")).unwrap();
        assert!(
            ctx.contains("the parent's CPU alone") && ctx.contains("CPUs 0,1"),
            "{t}"
        );
        let one = t.lines().find(|l| l.starts_with("lat_ctx.2p.16k")).unwrap();
        assert!(!one.contains("alone"), "{t}");
        assert!(!ctx.contains("IPIs"), "no IPI sent, none said: {t}");
        // The reschedule IPIs of a ring spread over CPUs: per hand-off,
        // and under --virt each a VM exit.
        let b = r
            .benches
            .iter_mut()
            .find(|b| b.name == "lat_ctx.2p.0k")
            .unwrap();
        b.model.as_mut().unwrap().ipis = 1.0;
        let t = table(&r).unwrap();
        let ctx = t.lines().find(|l| l.starts_with("lat_ctx.2p.0k")).unwrap();
        assert!(
            ctx.contains("IPIs sent 1.00 per hand-off (every CPU's)"),
            "{t}"
        );
        r.model_virt = true;
        let t = table(&r).unwrap();
        assert!(
            t.contains("IPIs sent 1.00 per hand-off (every CPU's; each a VM exit)"),
            "{t}"
        );
        // Under icount the clock is the machine's, every CPU's work in it.
        let mut r = run("icount", "instructions", 0);
        r.benches[2].cpus = vec![0, 1];
        assert!(!table(&r).unwrap().contains("alone"));
    }

    /// A figure whose calibration exceeded some batch is shown as
    /// clamped, never as the zero the subtraction stopped at.
    #[test]
    fn clamped_model_figures_are_shown_as_clamped() {
        let mut r = run("model", "modelled cycles", 0);
        r.model_profile = Some("p4".into());
        for b in &mut r.benches {
            b.model = Some(Default::default());
        }
        let t = table(&r).unwrap();
        assert!(!t.contains(CLAMPED), "{t}");
        let b = r
            .benches
            .iter_mut()
            .find(|b| b.name == "lat_ctx.2p.16k")
            .unwrap();
        b.model.as_mut().unwrap().clamped = vec!["insns".into(), "l1_misses".into()];
        let t = table(&r).unwrap();
        let row = t.lines().find(|l| l.starts_with("lat_ctx.2p.16k")).unwrap();
        assert_eq!(row.matches(CLAMPED).count(), 2, "{t}");
        assert!(!row.contains(" 0.0 "), "{t}");
        assert!(t.contains("(clamped: in some batch the calibration"), "{t}");
        let b = r
            .benches
            .iter_mut()
            .find(|b| b.name == "lat_ctx.2p.16k")
            .unwrap();
        b.model.as_mut().unwrap().clamped = vec!["cycles".into()];
        let row = table(&r).unwrap();
        let row = row
            .lines()
            .find(|l| l.starts_with("lat_ctx.2p.16k"))
            .unwrap();
        assert_eq!(row.matches(CLAMPED).count(), 1, "{row}");
    }

    #[test]
    fn captions_are_lmbench_s() {
        assert_eq!(caption("lat_ctx.8p.64k"), "8p/64K ctxsw");
        assert_eq!(caption(lm::LAT_PROC_FORK), "fork proc");
        assert_eq!(caption("smack.sysenter"), "queries, sysenter");
    }
}
