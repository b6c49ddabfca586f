//! The post: what a kernel developer pastes under a patch, made from a
//! bench's typed results file ([`BenchFile`]) alone, as plain text (a
//! mail) or Markdown (a forge's pull request).
//!
//! In order: one line of environment (emulator and accelerator, host CPU,
//! guest CPU model, clock and profile, each set's revision, boots per
//! side); per changed metric its ministat block, its verdict in words and,
//! where the spread is zero, why; a table of before, after, delta, delta %
//! and unit with the unchanged metrics in one line; the code that differs
//! and, under the model, the fixed costs the figures rest on; the command
//! that reproduces it all.

use std::fmt::Write as _;

use crate::compare::{aligned, fmt_num, median};
use crate::ministat::{self, RenderOptions};
use crate::results::bench::{BenchFile, CodeDiff, SetInfo};
use crate::results::Clock;

/// Plain text (a mail) or Markdown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Form {
    Text,
    Markdown,
}

/// The whole post of `f` in `form`.
pub fn post(f: &BenchFile, form: Form) -> String {
    let md = form == Form::Markdown;
    let mut out = String::new();
    let env = environment(f);
    let _ = writeln!(out, "{}", if md { format!("**{env}**") } else { env });
    out += "\n";
    for set in f.later() {
        let _ = writeln!(out, "{}\n", headline(f, set));
    }
    for m in &f.summary.changed {
        out += &changed_block(f, m, form);
        out += "\n";
    }
    for set in f.later() {
        out += &table(f, set, form);
        out += "\n";
    }
    if let Some(line) = unchanged_line(f) {
        let _ = writeln!(out, "{line}\n");
    }
    for d in &f.code {
        out += &code_section(f, d, form);
        out += "\n";
    }
    out += &reproduce(f, form);
    out
}

/// What the clock's figures are, in a few words.
pub fn clock_words(f: &BenchFile) -> String {
    let tcg = f.accel == abi::cmdline::ACCEL_TCG;
    match f.clock() {
        Some(Clock::Icount) => "clock=icount (exact instruction counts, not cycles)".into(),
        Some(Clock::Model) => format!(
            "clock=model (modelled cycles of profile {}; the guest counted instructions)",
            f.profile.as_deref().unwrap_or("?")
        ),
        Some(Clock::Tsc) if tcg => {
            "clock=tsc (TCG ticks: host time under emulation, not cycles)".into()
        }
        Some(Clock::Tsc) if f.accel == abi::cmdline::ACCEL_BOCHS => {
            format!("clock=tsc ({})", abi::syscall::BOCHS_TICK)
        }
        Some(Clock::Tsc) => "clock=tsc (cycles)".into(),
        None => format!("clock={}", f.clock),
    }
}

/// A set's revision and how it differs: `a900354-dirty.1f2e (features:
/// x)`; `rev: HEAD~1` shows as the revision alone.
fn set_words(s: &SetInfo) -> String {
    let rev = s.provenance.revision();
    if s.how.starts_with("rev: ") || s.how == "as built" || s.how.is_empty() {
        rev
    } else {
        format!("{rev} ({})", s.how)
    }
}

/// The environment in one line.
pub fn environment(f: &BenchFile) -> String {
    let p = &f.sets[0].provenance;
    let emulator = if p.emulator.is_empty() {
        f.accel.clone()
    } else {
        format!("{} {}", p.emulator, f.accel.to_uppercase())
    };
    let sets: Vec<String> = f
        .sets
        .iter()
        .map(|s| format!("{}={}", s.name, set_words(s)))
        .collect();
    format!(
        "i386 testbed: {emulator}, host CPU {}, guest cpu={}, {}, {}, {} boots per side",
        if p.host_cpu.is_empty() {
            "?"
        } else {
            &p.host_cpu
        },
        if p.cpu_model.is_empty() {
            "?"
        } else {
            &p.cpu_model
        },
        clock_words(f),
        sets.join(" "),
        f.boots
    )
}

/// `after against before: 5 of 23 metrics changed`.
fn headline(f: &BenchFile, set: &str) -> String {
    let all = f.all_metrics().len();
    let changed = f
        .summary
        .changed
        .iter()
        .filter(|m| {
            f.metrics
                .get(*m)
                .is_some_and(|e| e.verdicts.contains_key(set))
        })
        .count();
    format!(
        "{set} against {}: {changed} of {all} metrics changed{}",
        f.baseline,
        if f.summary.threshold > 0.0 {
            format!(" by {}% or more", f.summary.threshold)
        } else {
            String::new()
        }
    )
}

/// Every set's values of `metric` vary not at all.
fn no_spread(f: &BenchFile, metric: &str) -> bool {
    f.sets.iter().all(|s| {
        let v = f.values_of(&s.name, metric);
        v.windows(2).all(|w| w[0] == w[1])
    })
}

/// Why the spread is zero, where it is, in words: under a deterministic
/// clock `+/- 0` says the boots agree, not that the figure is right.
pub fn spread_note(f: &BenchFile) -> Option<String> {
    match f.clock() {
        Some(Clock::Icount) => Some(
            "The spread is 0 because icount is deterministic: every boot executes the same instructions, so the interval of 0 says the boots agree. The count is exact; what the instructions cost in cycles it does not say.".into(),
        ),
        Some(Clock::Model) => Some(format!(
            "The spread is 0 because the model is deterministic: every boot is modelled alike, so the interval of 0 says the boots agree, not that the figure is right. The uncertainty lies in the model: profile {} prices each instruction from a fixed table, one after another, where a real CPU overlaps, drains or reorders them (see what the figures rest on, below).",
            f.profile.as_deref().unwrap_or("?")
        )),
        _ => None,
    }
}

/// A changed metric: its heading, ministat's block (or bench's own lines
/// when a set has fewer than 3 values), each verdict in words, and the
/// spread's note where there is none.
fn changed_block(f: &BenchFile, metric: &str, form: Form) -> String {
    let Some(e) = f.metrics.get(metric) else {
        return String::new();
    };
    let sets: Vec<(String, Vec<f64>)> = f
        .sets
        .iter()
        .map(|s| (s.name.clone(), f.values_of(&s.name, metric).to_vec()))
        .collect();
    let block = if sets.iter().all(|(_, v)| v.len() >= 3) && sets.len() <= 7 {
        let opts = RenderOptions {
            confidence: f.confidence,
            ..RenderOptions::default()
        };
        ministat::render(&sets, &opts)
    } else {
        e.text
            .lines()
            .skip(1)
            .filter(|l| !l.trim_start().starts_with("verdict "))
            .map(|l| format!("{l}\n"))
            .collect()
    };
    let mut out = match form {
        Form::Text => format!("{metric} ({}):\n{block}", e.reads),
        Form::Markdown => format!("`{metric}` ({}):\n\n```text\n{block}```\n\n", e.reads),
    };
    for (set, v) in &e.verdicts {
        let _ = writeln!(
            out,
            "{}{set}: {v}",
            if form == Form::Markdown { "- " } else { "" }
        );
    }
    if no_spread(f, metric) {
        if let Some(n) = spread_note(f) {
            let _ = writeln!(out, "{}{n}", if form == Form::Markdown { "\n" } else { "" });
        }
    }
    out
}

/// One row of the table: metric, unit, before, after, delta, delta %.
fn row(f: &BenchFile, set: &str, metric: &str) -> Option<[String; 6]> {
    let e = f.metrics.get(metric)?;
    let (b, a) = (f.values_of(&f.baseline, metric), f.values_of(set, metric));
    if b.is_empty() || a.is_empty() {
        return Some([
            metric.into(),
            e.unit.clone(),
            if b.is_empty() {
                "-".into()
            } else {
                fmt_num(median(b))
            },
            if a.is_empty() {
                "-".into()
            } else {
                fmt_num(median(a))
            },
            "-".into(),
            "-".into(),
        ]);
    }
    let (mb, ma) = (median(b), median(a));
    let d = ma - mb;
    let pct = if mb == 0.0 {
        "-".to_string()
    } else {
        format!("{:+.2}%", 100.0 * d / mb)
    };
    Some([
        metric.into(),
        e.unit.clone(),
        fmt_num(mb),
        fmt_num(ma),
        if d > 0.0 {
            format!("+{}", fmt_num(d))
        } else {
            fmt_num(d)
        },
        pct,
    ])
}

/// The table of set `set` against the baseline: every changed metric's
/// medians, delta and delta % with its unit.
fn table(f: &BenchFile, set: &str, form: Form) -> String {
    let head = [
        "metric".to_string(),
        "unit".into(),
        f.baseline.clone(),
        set.to_string(),
        "delta".into(),
        "delta %".into(),
    ];
    let rows: Vec<[String; 6]> = f
        .summary
        .changed
        .iter()
        .filter_map(|m| row(f, set, m))
        .collect();
    if rows.is_empty() {
        return format!("{set} against {}: no metric changed.\n", f.baseline);
    }
    let mut out = String::new();
    match form {
        Form::Text => {
            let mut t = vec![head.to_vec()];
            t.extend(rows.iter().map(|r| r.to_vec()));
            for l in aligned(&t, 2) {
                let _ = writeln!(out, "  {}", l.trim_end());
            }
        }
        Form::Markdown => {
            let _ = writeln!(out, "| {} |", head.join(" | "));
            out += "|---|---|---:|---:|---:|---:|\n";
            for r in &rows {
                let _ = writeln!(out, "| {} |", r.join(" | "));
            }
        }
    }
    out
}

/// The unchanged metrics in one line, or `None` when every one changed.
fn unchanged_line(f: &BenchFile) -> Option<String> {
    let u = &f.summary.unchanged;
    if u.is_empty() {
        return None;
    }
    let how = match f.clock() {
        Some(Clock::Icount | Clock::Model) => "the same in every boot of every set",
        _ => "no difference proven",
    };
    Some(format!("Unchanged ({}, {how}): {}.", u.len(), u.join(", ")))
}

/// Why a real CPU's cost for an instruction priced by `key` varies where
/// the model's does not, as a clause.
fn why_it_varies(key: &str) -> &'static str {
    match key {
        "lfence" => "it waits until every earlier instruction has completed, so it costs what is in flight",
        "cpuid" | "wrmsr" | "mov_cr3" | "invlpg" => {
            "it is serializing (SDM Vol. 3A, \"Serializing Instructions\"): it drains the pipeline and the store buffer"
        }
        "iret" | "sysexit" | "sysret" | "lret_far" | "int_n" | "sysenter" | "syscall"
        | "lcall_gate" => "it changes privilege in microcode and costs more or less with what is in flight (IRET is serializing)",
        "popf" => "it writes EFLAGS' system flags in microcode, ordered with what is in flight",
        "sreg_load" => "it loads and checks a descriptor in microcode",
        "locked" => "it waits for the store buffer to drain",
        "rdtsc" | "rdmsr" => "it is microcoded, and how it orders with earlier instructions varies",
        _ => "it is microcoded",
    }
}

/// The code that differs for one later set; under the model, the
/// instructions in it priced from the profile's table, with each entry's
/// value and source.
fn code_section(f: &BenchFile, d: &CodeDiff, form: Form) -> String {
    let md = form == Form::Markdown;
    let item = if md { "- " } else { "  " };
    let mut out = format!(
        "Code that differs between {} and {} (objdump -d of both builds, function by function, addresses left out):\n",
        d.set, d.base
    );
    if md {
        out += "\n";
    }
    if !d.note.is_empty() {
        let _ = writeln!(out, "{item}{}", d.note);
        return out;
    }
    for c in &d.functions {
        let mut parts = Vec::new();
        if !c.added.is_empty() {
            parts.push(format!("+{}", list(&c.added, md)));
        }
        if !c.removed.is_empty() {
            parts.push(format!("-{}", list(&c.removed, md)));
        }
        if parts.is_empty() {
            parts.push("the same instructions in another order".into());
        }
        let what = if c.constants_only {
            "constants only, "
        } else {
            ""
        };
        let _ = writeln!(
            out,
            "{item}{} {}: {what}{}",
            c.binary,
            code(&c.name, md),
            parts.join("; ")
        );
    }
    if f.clock() != Some(Clock::Model) {
        return out;
    }
    let profile = f.profile.as_deref().unwrap_or("?");
    if d.functions.iter().all(|c| c.fixed.is_empty()) {
        let _ = writeln!(
            out,
            "{}None of its instructions is one the model prices from profile {profile}'s table beyond the base cost.",
            if md { "\n" } else { "" }
        );
        return out;
    }
    let _ = writeln!(
        out,
        "{}What the modelled figures rest on: the instructions of that code the model prices from profile {profile}'s fixed table (+ only in {}, - only in {}), where a real CPU's cost varies with its out-of-order state:",
        if md { "\n" } else { "" },
        d.set,
        d.base
    );
    if md {
        out += "\n";
    }
    for c in &d.functions {
        for i in c.fixed.iter().filter(|i| i.side.trim() != "") {
            let _ = writeln!(
                out,
                "{item}{} {} in {}: profile key {}",
                i.side,
                code(&i.text, md),
                code(&c.name, md),
                code(&i.key, md)
            );
        }
        // The rest of the function, unchanged, by key.
        let mut same: Vec<(&str, usize)> = Vec::new();
        for i in c.fixed.iter().filter(|i| i.side.trim() == "") {
            match same.iter_mut().find(|(k, _)| *k == i.key) {
                Some((_, n)) => *n += 1,
                None => same.push((&i.key, 1)),
            }
        }
        if !same.is_empty() {
            let keys: Vec<String> = same
                .iter()
                .map(|(k, n)| {
                    if *n > 1 {
                        format!("{} x{n}", code(k, md))
                    } else {
                        code(k, md)
                    }
                })
                .collect();
            let _ = writeln!(
                out,
                "{item}  in both, elsewhere in {}: {}",
                code(&c.name, md),
                keys.join(", ")
            );
        }
    }
    let _ = writeln!(out, "{}The entries, in cycles on top of the base cost, with their sources (model/profiles.toml):", if md { "\n" } else { "" });
    if md {
        out += "\n";
    }
    for e in &f.fixed_costs {
        let _ = writeln!(
            out,
            "{item}{} = {}: {}. On a real CPU, {}.",
            code(&e.key, md),
            e.cycles,
            e.source,
            why_it_varies(&e.key)
        );
    }
    out
}

/// `a, b, c` of instructions (each in backticks in Markdown), at most 8.
fn list(v: &[String], md: bool) -> String {
    let shown: Vec<String> = v.iter().take(8).map(|s| code(s, md)).collect();
    let more = if v.len() > 8 {
        format!(" and {} more", v.len() - 8)
    } else {
        String::new()
    };
    format!("{}{more}", shown.join(", "))
}

fn code(s: &str, md: bool) -> String {
    if md {
        format!("`{s}`")
    } else {
        s.to_string()
    }
}

/// The command that reproduces the bench, and what keeps it from doing so
/// exactly (a set built from uncommitted changes).
fn reproduce(f: &BenchFile, form: Form) -> String {
    let mut out = String::new();
    if f.command.is_empty() {
        out += "Reproduce: this bench file does not record its command.\n";
    } else if form == Form::Markdown {
        let _ = write!(out, "Reproduce:\n\n```sh\n{}\n```\n", f.command);
    } else {
        let _ = writeln!(out, "Reproduce: {}", f.command);
    }
    for s in f.sets.iter().filter(|s| s.provenance.dirty) {
        let _ = writeln!(
            out,
            "{}{} was built from uncommitted changes (diff {}): commit them for the command to rebuild it.",
            if form == Form::Markdown { "\n" } else { "" },
            s.name,
            if s.provenance.diff.is_empty() { "?" } else { &s.provenance.diff }
        );
    }
    out
}

#[cfg(test)]
mod tests;
