//! `cargo xtask run`: build, boot, and show what the kernel reports.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use super::BootArgs;
use crate::machine::{Clock, CmdlineCheck, Loader, Machine, Scratch};
use crate::{compare, kbuild, model, preflight, results};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Run,
    Test,
    /// Start every CPU and run the SMP benchmarks (use with --smp N).
    Smp,
}

impl ModeArg {
    /// The command-line word.
    pub fn word(self) -> &'static str {
        match self {
            ModeArg::Run => "mode=run",
            ModeArg::Test => "mode=test",
            ModeArg::Smp => "mode=smp",
        }
    }
}

#[derive(Args)]
pub struct RunArgs {
    #[command(flatten)]
    boot: BootArgs,
    /// What the kernel does: run a user program, or its tests.
    #[arg(long, value_enum, default_value = "run")]
    mode: ModeArg,
    /// The user program to run.
    #[arg(long, default_value = abi::cmdline::DEFAULT_PROG)]
    prog: String,
    /// Show the machine records too, not only the human text.
    #[arg(long)]
    records: bool,
    /// Print the results JSON on stdout (the kernel's text goes to stderr).
    #[arg(long)]
    json: bool,
    /// Label in the results file name: results/<timestamp>-<label>.json.
    #[arg(long, default_value = "default")]
    label: String,
    /// Do not write a results file.
    #[arg(long)]
    no_save: bool,
    /// Compare mechanisms over this boot's batches, e.g. int80,sysenter.
    #[arg(long, value_name = "MECHS")]
    compare: Option<String>,
    /// The call --compare looks at: floor, null, getpid, geteuid, write1
    /// (default null).
    #[arg(long)]
    call: Option<String>,
    /// Confidence level for --compare, in percent.
    #[arg(long, default_value_t = 95.0)]
    confidence: f64,
    /// With --clock model: keep the model plugin's file at FILE. With the
    /// boot's records (--records > LOG) it is a saved model run, which
    /// `import LOG --model FILE` reads back.
    #[arg(long, value_name = "FILE")]
    model_file: Option<PathBuf>,
    /// Build the kernel with these cargo features, e.g. an exercise of
    /// docs/exercises.md (`--mode test --features exercise-sysexit-always`),
    /// into a target directory of their own; the modules are this build's.
    #[arg(long, value_name = "FEATURE[,FEATURE]", value_delimiter = ',')]
    features: Vec<String>,
}

/// `--compare`, `--call` and `--confidence` make sense before any boot:
/// two or more real mechanisms, a real call, `--call` only with
/// `--compare`, a level strictly between 0 and 100.
fn check_compare(a: &RunArgs) -> Result<()> {
    use abi::report::names::CALLS;
    let Some(m) = &a.compare else {
        if a.call.is_some() {
            bail!("--call chooses the call --compare looks at: give --compare too (e.g. --compare int80,sysenter)");
        }
        return Ok(());
    };
    let mut seen = Vec::new();
    for k in m.split(',') {
        if abi::Mechanism::from_key(k).is_none() {
            bail!("--compare {m}: {k:?} is not a mechanism (int80, sysenter, callgate, syscall)");
        }
        if seen.contains(&k) {
            bail!("--compare {m}: {k} is named twice");
        }
        seen.push(k);
    }
    if seen.len() < 2 {
        bail!("--compare {m}: needs at least two mechanisms, e.g. int80,sysenter");
    }
    if let Some(call) = &a.call {
        if !CALLS.contains(&call.as_str()) {
            bail!("--call {call}: not one of {}", CALLS.join(", "));
        }
    }
    if !(a.confidence > 0.0 && a.confidence < 100.0) {
        bail!("--confidence must lie strictly between 0 and 100");
    }
    Ok(())
}

/// Builds the kernel and the user programs with `features` where an
/// exercise build goes: the copies in target/xtask/exercise/<features>/, the
/// build in target/exercise (every build with features goes there, so none
/// replaces the normal kernel: [`kbuild::target_dir_of`]). `cargo xtask run --features` and the
/// exercise tests both build this way, so they boot the same modules.
pub fn feature_build(features: &[String]) -> Result<kbuild::Artifacts> {
    if let Some(bad) = features
        .iter()
        .find(|f| f.is_empty() || !f.chars().all(|c| c.is_ascii_alphanumeric() || c == '-'))
    {
        bail!("--features: {bad:?} is not a feature name (e.g. exercise-sysexit-always)");
    }
    if let Some(known) = kbuild::kernel_features(None) {
        kbuild::check_features("--features", features, &known)?;
    }
    let root = kbuild::root();
    let dest = root.join("target/xtask/exercise").join(features.join("+"));
    kbuild::build_into(&root, features, &dest, None)
}

pub fn run(a: RunArgs) -> Result<i32> {
    check_args(&a)?;
    let json = a.json;
    let results_dir = kbuild::root().join("results");
    if !a.no_save {
        // Before the boot: a directory that cannot be made fails first.
        std::fs::create_dir_all(&results_dir).with_context(|| {
            format!(
                "cannot create the results directory {}",
                results_dir.display()
            )
        })?;
    }
    // With --json, stdout carries the JSON alone.
    let say = |line: &str| {
        if json {
            eprintln!("{line}");
        } else {
            println!("{line}");
        }
    };
    let mut blank = false;
    let booted = boot(&a, &mut |line| {
        blank = line.is_empty();
        say(line);
    })?;
    let ran = match booted {
        Ok(ran) => ran,
        Err(why) => {
            eprintln!("run failed: {why}");
            return Ok(1);
        }
    };
    let results = ran.results;
    if let Some(text) = ran.model_text {
        if let Some(p) = &a.model_file {
            std::fs::write(p, &text)
                .with_context(|| format!("cannot write the model file {}", p.display()))?;
        }
        if !json {
            // One blank line before the table: the guest may have left one.
            if !blank {
                println!();
            }
            print!("{}", results.table());
        }
    }
    if !results.benches.is_empty() && !a.no_save {
        let path = results.save(&results_dir)?;
        eprintln!("results: {}", path.display());
    }
    if json {
        print!("{}", results.to_json()?);
    }
    if let Some(mechs) = &a.compare {
        println!();
        print!(
            "{}",
            compare::within_boot(
                &results,
                mechs,
                a.call.as_deref().unwrap_or("null"),
                a.confidence
            )?
        );
    }
    eprintln!("run: finished in {:.2} s", ran.wall.as_secs_f64());
    Ok(0)
}

/// One `run` boot, read back: the kernel's serial log, its results, and
/// under the model the plugin's file.
pub struct Ran {
    pub serial: String,
    pub results: results::Results,
    pub model_text: Option<String>,
    pub wall: std::time::Duration,
}

/// Refuses `a`'s mistakes before anything is built, and says where its
/// command line repeats a key.
fn check_args(a: &RunArgs) -> Result<()> {
    check_compare(a)?;
    if a.model_file.is_some() && !matches!(a.boot.clock, None | Some(Clock::Model)) {
        bail!("--model-file keeps the model plugin's file: use it with --clock model");
    }
    // Under TCG the default clock is the model (cycles); elsewhere the
    // backend's own (tsc), which refuses model options as usual.
    a.boot.check_for(match a.boot.emulator {
        super::Emulator::Qemu => Clock::Model,
        super::Emulator::Bochs => Clock::Tsc,
    })?;
    let check = CmdlineCheck::of(&format!(
        "{} prog={} {}",
        a.mode.word(),
        a.prog,
        a.boot.append
    ));
    if let Some(w) = check.repeat_warning() {
        eprintln!("{w}");
    }
    Ok(())
}

/// Builds, boots and reads what `run` with `a` boots, in this process
/// (`a` checked by [`check_args`]): `show` gets the header and each line
/// a reader sees (the records only with `--records`; under the model the
/// guest's own tables left out, its headers rewritten). `Ok(Err)` is a
/// boot that failed, with what went wrong.
fn boot(a: &RunArgs, show: &mut dyn FnMut(&str)) -> Result<Result<Ran, String>> {
    preflight::ensure(a.boot.need())?;
    let art = if a.features.is_empty() {
        kbuild::build(true)?
    } else {
        feature_build(&a.features)?
    };
    let words = format!("{} prog={}", a.mode.word(), a.prog);
    let scratch = Scratch::new("run")?;
    let spec = crate::machine::Spec {
        cycles_by_default: true,
        ..a.boot.spec()?
    };
    let m = Machine::build(&spec, &art, &words, scratch.path())?;
    show(&format!(
        "i386 testbed  {}{}",
        m.describe(),
        match m.loader {
            Loader::Grub(_) => "  via GRUB (Multiboot 2)",
            Loader::Direct => "",
        }
    ));
    // Under the model the host prints the one table (instructions and
    // cycles side by side): the guest's own, in instructions, is left out.
    let host_table = m.model.is_some();
    let mut blank = false;
    let log = m
        .boot(&mut |line| {
            if host_table
                && (guest_table_line(line)
                    || guest_icount_caveat(line)
                    || (blank && line.is_empty()))
            {
                return;
            }
            let rewritten = host_table.then(|| guest_header_under_model(line)).flatten();
            let line = rewritten.as_deref().unwrap_or(line);
            if a.records || !line.contains(abi::report::MARKER) {
                blank = line.is_empty();
                show(line);
            }
        })
        .with_context(|| format!("booting {}", m.backend.name()))?;
    if !log.succeeded() {
        return Ok(Err(log.explain(20)));
    }
    let mut results = results::Results::from_log(&log.serial, &a.label, m.backend.source())
        .context("reading the kernel's report")?;
    let model_text = model::finish(m.model.as_ref(), &log.serial, &mut results)?;
    Ok(Ok(Ran {
        serial: log.serial,
        results,
        model_text,
        wall: log.wall,
    }))
}

/// The boot of `cargo xtask run ARGS...` (`args` as its command line
/// after `run`), in this process and silent: what the book's tables read.
/// Nothing is saved and nothing printed; a failed boot is an error.
pub fn ran(args: &[&str]) -> Result<Ran> {
    use clap::Parser;
    #[derive(Parser)]
    struct Line {
        #[command(flatten)]
        a: RunArgs,
    }
    let shown = args.join(" ");
    let a = Line::try_parse_from(std::iter::once("run").chain(args.iter().copied()))
        .with_context(|| format!("`cargo xtask run {shown}`"))?
        .a;
    check_args(&a)
        .and_then(|()| boot(&a, &mut |_| {}))
        .with_context(|| format!("`cargo xtask run {shown}`"))?
        .map_err(|why| anyhow::anyhow!("`cargo xtask run {shown}` failed: {why}"))
}

/// A line of a user program's own table of instruction counts, which the
/// host's table of a model run replaces: the benchmark driver's
/// (userland/src/bin/bench.rs: its header, unit line, mechanism rows, loop
/// row and macro lines), the locks program's (one row per pool alignment),
/// the pointer chase's (one per working set), the strings program's (one
/// per instruction and count) and `mode=smp`'s figures (indented rows in
/// ops/s or instructions).
fn guest_table_line(line: &str) -> bool {
    const STARTS: &[&str] = &[
        "entry ",
        "loop ",
        "macro mix ",
        "align ",
        "128 ",
        "64 ",
        "packed ",
        "working set ",
        "call ",
        "bare (set-up) ",
        "rep movs",
        "forktest: fork_exit ",
    ];
    let chase_row = line
        .split_once("k ")
        .is_some_and(|(n, _)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    // lmbench's own summary rows: "lmbench: lat_pipe   median  2957.4 ...".
    let lmbench_row = line
        .strip_prefix("lmbench: ")
        .and_then(|r| r.split_once(' '))
        .is_some_and(|(_, rest)| rest.trim_start().starts_with("median "));
    let smp_row =
        line.starts_with("  ") && (line.ends_with(" instructions") || line.contains(" ops/s"));
    STARTS.iter().any(|p| line.starts_with(p))
        || chase_row
        || lmbench_row
        || smp_row
        || line.trim_start().starts_with("insns ")
        || abi::Mechanism::ALL.iter().any(|m| {
            line.strip_prefix(m.title())
                .is_some_and(|rest| rest.starts_with("  "))
        })
}

/// The guest's warning that its clock sees no caches (smp, locks), which
/// the model's table answers: left out under the model.
fn guest_icount_caveat(line: &str) -> bool {
    (line.starts_with("smp: ") || line.starts_with("locks: "))
        && line.contains("TCG does not model caches")
}

/// A guest program's header line, rewritten for the host's model table:
/// the guest states its own clock (instructions under icount) and its
/// unit, which the table's header line replaces with the clock the ratios
/// use, so the reader meets one clock. What the line says of the method
/// (batches, fence, the subtracted overhead) stays. `None`: keep the line.
fn guest_header_under_model(line: &str) -> Option<String> {
    if let Some(rest) = line.strip_prefix("bench: clock=") {
        // "bench: clock=icount (1 instruction per tick; ...), 64 batches x
        // 4096 calls, fence F, timer+call overhead N ticks per batch
        // (subtracted), ...": the overhead's ticks are the guest clock's.
        let (_, method) = rest.split_once("), ")?;
        let (before, after) = method.split_once("timer+call overhead ")?;
        let (ticks, after) = after.split_once(" ticks per batch (subtracted)")?;
        return Some(format!(
            "bench: {before}timer+call overhead subtracted per batch on each clock ({ticks} instructions){after}"
        ));
    }
    // locks: "...; instructions per operation, medians of 8 batches".
    if line.starts_with("locks: ") && line.contains("; instructions per operation, ") {
        return Some(line.replacen("; instructions per operation, ", "; ", 1));
    }
    // lmbench: "lmbench: 32 batches per row, instructions per op (per byte
    // for bw_pipe), fork=copy".
    if line.starts_with("lmbench: ") {
        if let Some((head, tail)) =
            line.split_once(" per row, instructions per op (per byte for bw_pipe)")
        {
            return Some(format!("{head} per row{tail}"));
        }
    }
    // chase, strings and forktest end with the guest clock's unit: "...,
    // instructions per load", "...; instructions per call" or "per round".
    for sep in [", ", "; "] {
        for per in ["load", "call", "round"] {
            let tail = format!("{sep}instructions per {per}");
            if let Some(head) = line.strip_suffix(tail.as_str()) {
                return Some(head.to_string());
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> RunArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            r: RunArgs,
        }
        let mut v = vec!["x"];
        v.extend_from_slice(extra);
        T::try_parse_from(v).unwrap().r
    }

    #[test]
    fn the_guest_tables_are_known_and_the_rest_stays() {
        for l in [
            "entry      call         median        min  full/floor  vs int 0x80",
            "                         insns      insns  time ratio   time ratio",
            "int 0x80   null          24.00      24.00       6.00x         1.00",
            "call gate  floor          4.00       4.00                     1.00",
            "macro mix  sysenter        955027 ops/s (virtual: 1 insn = 1 ns)",
            "128k               3.00       3.00",
            "rep movsb 64        70.00      70.00      65.00",
            "forktest: fork_exit 64 pages: median 117717.2, min 117671.4 instructions per round",
            "lmbench: lat_ctx.2p.0k        median      763.3  min      763.3 instructions per op",
            "  words 64 bytes apart                   242642975.0 ops/s",
            "  shootdown by IPI (remote, acked)            230.3 instructions",
        ] {
            assert!(guest_table_line(l), "{l}");
        }
        for l in [
            "cpu: GenuineIntel \"QEMU Virtual CPU version 2.5+\" family 6",
            "syscall: unavailable: not an AMD CPU",
            "PASS a thread on CPU 1 wakes one asleep on CPU 0",
            "(c) TLB",
            "lmbench: lat_pagefault.cow: not measured: no heap",
            "lmbench: 32 batches per row, instructions per op (per byte for bw_pipe), fork=copy",
            "",
        ] {
            assert!(!guest_table_line(l), "{l}");
        }
    }

    #[test]
    fn under_the_model_the_guest_headers_name_no_clock() {
        let bench = "bench: clock=icount (1 instruction per tick; TCG: emulator figures, not cycles), 64 batches x 4096 calls, fence lfence+rdtsc, timer+call overhead 24 ticks per batch (subtracted), interrupts masked, perf counters n/a";
        assert_eq!(
            guest_header_under_model(bench).unwrap(),
            "bench: 64 batches x 4096 calls, fence lfence+rdtsc, timer+call overhead subtracted per batch on each clock (24 instructions), interrupts masked, perf counters n/a"
        );
        assert_eq!(
            guest_header_under_model(
                "chase: dependent loads every 128 bytes, 64 batches x 4096 loads, instructions per load"
            )
            .unwrap(),
            "chase: dependent loads every 128 bytes, 64 batches x 4096 loads"
        );
        assert_eq!(
            guest_header_under_model("strings: one REP string instruction per call, ECX set just before it; 64 batches x 4096 calls; instructions per call").unwrap(),
            "strings: one REP string instruction per call, ECX set just before it; 64 batches x 4096 calls"
        );
        assert!(guest_icount_caveat("smp: TCG does not model caches; icount counts instructions: false sharing and TLB costs need `--clock model`, real hardware or real KVM"));
        assert!(guest_icount_caveat("locks: TCG does not model caches, so alignment cannot change TCG figures: icount counts instructions"));
        assert!(!guest_icount_caveat("smp: medians of 8 batches"));
        assert_eq!(
            guest_header_under_model("forktest: fork + exit + wait, the parent holding 64 touched pages; 64 batches of 8 rounds on CPU 0, 1 CPU(s) forking; instructions per round").unwrap(),
            "forktest: fork + exit + wait, the parent holding 64 touched pages; 64 batches of 8 rounds on CPU 0, 1 CPU(s) forking"
        );
        assert_eq!(
            guest_header_under_model(
                "lmbench: 32 batches per row, instructions per op (per byte for bw_pipe), fork=copy"
            )
            .unwrap(),
            "lmbench: 32 batches per row, fork=copy"
        );
        assert_eq!(
            guest_header_under_model("locks: pool alignments compared in one boot; instructions per operation, medians of 8 batches").unwrap(),
            "locks: pool alignments compared in one boot; medians of 8 batches"
        );
        for keep in [
            "cpu: GenuineIntel \"QEMU Virtual CPU version 2.5+\" family 6",
            "syscall: unavailable: not an AMD CPU",
            "bench: clock=icount garbled",
        ] {
            assert_eq!(guest_header_under_model(keep), None, "{keep}");
        }
    }

    #[test]
    fn compare_mistakes_fail_before_the_boot() {
        let e = |x: &[&str]| check_compare(&args(x)).unwrap_err().to_string();
        assert!(e(&["--compare", "int80"]).contains("at least two mechanisms"));
        assert!(e(&["--compare", "int80,int80"]).contains("named twice"));
        assert!(e(&["--compare", "int80,sysentr"]).contains("not a mechanism"));
        assert!(e(&["--compare", "int80,sysenter", "--call", "nul"]).contains("not one of"));
        assert!(e(&["--call", "getpid"]).contains("give --compare too"));
        assert!(e(&["--compare", "int80,sysenter", "--confidence", "100"]).contains("--confidence"));
        assert!(check_compare(&args(&["--compare", "int80,sysenter", "--call", "getpid"])).is_ok());
        assert!(check_compare(&args(&[])).is_ok());
    }
}
