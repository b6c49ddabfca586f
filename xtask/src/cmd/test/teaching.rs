//! The teaching tools' own checks for `cargo xtask test`: a trace of each
//! mechanism, gdb stopping at an entry stub, and the exercises (kernels built
//! without one piece of entry hygiene, and what their test boots then show).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::cmd::trace::{trace_output, MechArg, TraceArgs};
use crate::kbuild;
use crate::machine::{self, qemu, BootLog, Ending, Machine};
use crate::preflight;

use super::unit::{Test, SKIP};

/// An exercise: a kernel feature that removes one piece of entry hygiene,
/// and what a test boot then shows (docs/exercises.md asks the question).
pub struct Exercise {
    pub feature: &'static str,
    pub question: &'static str,
    /// The boot's log, its records, and the kernel it booted (for the
    /// symbol at a reported address).
    pub check: fn(&BootLog, &[crate::report::Record], &Path) -> Result<(), String>,
}

/// The test `name` ran and its result is `want` ("pass" or "fail").
fn test_result(r: &[crate::report::Record], name: &str, want: &str) -> Result<(), String> {
    let t = crate::report::of_kind(r, abi::report::kind::TEST)
        .find(|t| t.get("name") == Some(name))
        .ok_or_else(|| format!("the test {name:?} did not run"))?;
    match t.get("result") {
        Some(got) if got == want => Ok(()),
        other => Err(format!("the test {name:?} should {want} but is {other:?}")),
    }
}

fn failed_test(r: &[crate::report::Record], name: &str) -> Result<(), String> {
    test_result(r, name, "fail")
}

fn failed_check(r: &[crate::report::Record], mech: &str, name: &str) -> Result<(), String> {
    let found = crate::report::of_kind(r, abi::report::kind::CHECK).any(|c| {
        c.get("mech") == Some(mech)
            && c.get("name") == Some(name)
            && c.get("result") == Some("fail")
    });
    if found {
        Ok(())
    } else {
        Err(format!("the {mech} check {name:?} should fail"))
    }
}

/// The boot printed `text` (an answer quotes it).
fn said(log: &BootLog, text: &str) -> Result<(), String> {
    if log.serial.contains(text) {
        Ok(())
    } else {
        Err(format!("the boot did not print {text:?}"))
    }
}

/// The per-mechanism check `name` of `mech` ran and passed.
fn passed_check(r: &[crate::report::Record], mech: &str, name: &str) -> Result<(), String> {
    let found = crate::report::of_kind(r, abi::report::kind::CHECK).any(|c| {
        c.get("mech") == Some(mech)
            && c.get("name") == Some(name)
            && c.get("result") == Some("pass")
    });
    if found {
        Ok(())
    } else {
        Err(format!("the {mech} check {name:?} should pass"))
    }
}

/// The instruction at `addr` in the ELF file `kernel`, as gdb shows it
/// with its symbol (`0x1016de <sysenter_iret+19>:\tiret`). Without gdb
/// the test cannot look, and says so (SKIP, counted).
fn instruction_at(kernel: &Path, addr: &str) -> Result<String, String> {
    preflight::ensure_gdb().map_err(|e| format!("{}no gdb here: {e:#}", SKIP))?;
    let o = Command::new("gdb")
        .args(["-batch", "-nx", "-ex", &format!("x/i {addr}")])
        .arg(kernel)
        .output()
        .map_err(|e| format!("gdb: {e}"))?;
    let text = String::from_utf8_lossy(&o.stdout);
    text.lines()
        .rev()
        .find(|l| l.contains(addr.trim_start_matches("0x")))
        .map(str::to_string)
        .ok_or_else(|| format!("gdb did not show the instruction at {addr}: {text}"))
}

/// Every failure of the boot is one the answer lists, and every one it
/// lists failed: the tests (`test` records) and the per-mechanism checks
/// (`check` records, as (mechanism, name)). An answer that leaves a
/// failure out, or names one that passed, fails its exercise.
fn failures_exactly(
    r: &[crate::report::Record],
    tests: &[&str],
    checks: &[(&str, &str)],
) -> Result<(), String> {
    use std::collections::BTreeSet;
    let got_tests: BTreeSet<String> = crate::report::of_kind(r, abi::report::kind::TEST)
        .filter(|t| t.get("result") == Some("fail"))
        .filter_map(|t| t.get("name").map(str::to_string))
        .collect();
    let want_tests: BTreeSet<String> = tests.iter().map(|t| t.to_string()).collect();
    let got_checks: BTreeSet<(String, String)> =
        crate::report::of_kind(r, abi::report::kind::CHECK)
            .filter(|c| c.get("result") == Some("fail"))
            .filter_map(|c| Some((c.get("mech")?.to_string(), c.get("name")?.to_string())))
            .collect();
    let want_checks: BTreeSet<(String, String)> = checks
        .iter()
        .map(|(m, n)| (m.to_string(), n.to_string()))
        .collect();
    if got_tests == want_tests && got_checks == want_checks {
        return Ok(());
    }
    Err(format!(
        "the failures are not the answer's: tests failed but not listed {:?}, listed but not failed {:?}; checks failed but not listed {:?}, listed but not failed {:?}",
        got_tests.difference(&want_tests).collect::<Vec<_>>(),
        want_tests.difference(&got_tests).collect::<Vec<_>>(),
        got_checks.difference(&want_checks).collect::<Vec<_>>(),
        want_checks.difference(&got_checks).collect::<Vec<_>>(),
    ))
}

fn ended(log: &BootLog, want: abi::exit::Outcome) -> Result<(), String> {
    if log.ending == Ending::Exited(want) {
        Ok(())
    } else {
        Err(format!("expected {want:?}: {}", log.verdict()))
    }
}

pub const EXERCISES: &[Exercise] = &[
    Exercise {
        feature: "exercise-sysexit-always",
        question:
            "Return from sysenter with SYSEXIT every time, even when the saved EFLAGS is dirty.",
        check: |log, r, _| {
            ended(log, abi::exit::Outcome::Failure)?;
            // The flags that are state come back as the kernel's: utest's
            // checks and the hostile suite's cases for each (the answer
            // names them).
            for flag in ["DF", "AC", "NT"] {
                failed_check(
                    r,
                    "sysenter",
                    &format!("{flag} set before the call: the user gets it back"),
                )?;
                failed_test(
                    r,
                    &format!(
                        "user fault: {flag} set before sysenter: right result, {flag} given back"
                    ),
                )?;
            }
            failed_test(
                r,
                "user fault: TF set before sysenter (#DB after the return)",
            )?;
            // The values the answer quotes: each flag's utest check saw
            // EFLAGS 0x202 after the call, and the TF cases' tasks were not
            // ended.
            for flag in ["DF", "AC", "NT"] {
                said(
                    log,
                    &format!("utest: FAIL sysenter: {flag} set before the call: the user gets it back (got 0x202)"),
                )?;
            }
            for case in [
                "TF set before sysenter",
                "TF and pop ss right before sysenter",
                "NT and TF set before sysenter",
            ] {
                said(
                    log,
                    &format!("FAIL user fault: {case} (#DB after the return): expected #DB, got exit(1): the act did not end the task"),
                )?;
            }
            // The answer lists every failure the boot has, no more.
            failures_exactly(
                r,
                &[
                    "user: every mechanism, every syscall, registers preserved",
                    "user fault: TF set before sysenter (#DB after the return)",
                    "user fault: TF and pop ss right before sysenter (#DB after the return)",
                    "user fault: NT and TF set before sysenter (#DB after the return)",
                    "user fault: DF set before sysenter: right result, DF given back",
                    "user fault: AC set before sysenter: right result, AC given back",
                    "user fault: NT set before sysenter: right result, NT given back",
                    "user fault: ID set before sysenter: right result, ID given back",
                ],
                &[
                    ("sysenter", "DF set before the call: the user gets it back"),
                    ("sysenter", "AC set before the call: the user gets it back"),
                    ("sysenter", "NT set before the call: the user gets it back"),
                ],
            )
        },
    },
    Exercise {
        feature: "exercise-trust-user-pointers",
        question: "Let usercopy::check accept every pointer.",
        check: |log, r, _| {
            failed_test(r, "kernel: user-pointer checks refuse bad ranges")?;
            failed_check(r, "int80", "pointer into the kernel gives EFAULT")?;
            // The kernel's own memory is mapped: a copy into it succeeds,
            // and the kernel wrote where the user said.
            failed_test(r, "user fault: cpuinfo into kernel memory (EFAULT)")?;
            // An unmapped buffer faults on the listed copy, and the
            // exception table turns that into EFAULT: no stop in ring 0.
            test_result(
                r,
                "user fault: write to the ring from an unmapped page (EFAULT)",
                "pass",
            )?;
            failed_test(
                r,
                "user fault: sigaction storing the old handler into kernel memory (EFAULT)",
            )?;
            // The values the answer quotes.
            for text in [
                "FAIL kernel: user-pointer checks refuse bad ranges: write to read-only",
                "utest: FAIL int80: pointer into the kernel gives EFAULT (got 0x4)",
                "utest: FAIL int80: read into read-only memory gives EFAULT (got 0x0)",
                "faults: the call returned 0x4, not an errno",
                "FAIL user fault: cpuinfo into kernel memory (EFAULT): expected EFAULT (exit 14), got exit(0)",
                "FAIL user fault: sigaction storing the old handler into kernel memory (EFAULT): expected EFAULT (exit 14), got exit(0)",
            ] {
                said(log, text)?;
            }
            // Every utest -EFAULT check fails, through every mechanism
            // the boot has (int 0x80, sysenter and the call gate on qemu32).
            let efault: Vec<_> = crate::report::of_kind(r, abi::report::kind::CHECK)
                .filter(|c| c.get("name").is_some_and(|n| n.ends_with("gives EFAULT")))
                .collect();
            for mech in ["int80", "sysenter", "callgate"] {
                if !efault.iter().any(|c| c.get("mech") == Some(mech)) {
                    return Err(format!("no -EFAULT check ran through {mech}"));
                }
            }
            if let Some(c) = efault.iter().find(|c| c.get("result") != Some("fail")) {
                return Err(format!(
                    "the {} check {:?} did not fail",
                    c.get("mech").unwrap_or("?"),
                    c.get("name").unwrap_or("?")
                ));
            }
            ended(log, abi::exit::Outcome::Failure)
        },
    },
    Exercise {
        feature: "exercise-sysenter-no-flags-reset",
        question: "Remove `pushl $2; popfl` (the cld, and more) from the sysenter path.",
        check: |log, r, kernel| {
            failed_check(r, "sysenter", "DF set before the call: ring data intact")?;
            // The first failure of the boot is that one, with the value
            // the answer quotes.
            let first = log.serial.lines().find(|l| l.contains("FAIL "));
            let df = "utest: FAIL sysenter: DF set before the call: ring data intact (got 0x10)";
            if first != Some(df) {
                return Err(format!("the first failure is {first:?}, not {df:?}"));
            }
            // AC does no harm: both its checks pass through sysenter.
            for name in [
                "AC set before the call: ring data intact",
                "AC set before the call: the user gets it back",
            ] {
                passed_check(r, "sysenter", name)?;
            }
            ended(log, abi::exit::Outcome::Exception(10))?;
            let ts = "#TS invalid TSS (vector 10) in kernel mode, error code 0x0";
            if !log.serial.contains(ts) {
                return Err(format!("the boot did not print {ts:?}"));
            }
            // EFLAGS 0x4006 (NT set), EIP at the `iret` of `sysenter_iret`.
            let e = crate::report::of_kind(r, abi::report::kind::EXCEPTION)
                .find(|e| e.get("name") == Some("#TS"))
                .ok_or("no #TS record")?;
            if e.get("eflags") != Some("0x4006") {
                return Err(format!("#TS with EFLAGS {:?}, not 0x4006", e.get("eflags")));
            }
            let eip = e.get("eip").ok_or("the #TS record has no EIP")?;
            let at = instruction_at(kernel, eip)?;
            if !(at.contains("<sysenter_iret+") && at.trim_end().ends_with("iret")) {
                return Err(format!(
                    "#TS at {eip}, which is not the iret of sysenter_iret: {at}"
                ));
            }
            Ok(())
        },
    },
];

/// Seconds an exercise boot may take.
const EXERCISE_TIMEOUT: Duration = Duration::from_secs(60);

/// Builds each exercise's kernel (in target/exercise) and boots its tests;
/// (name, result) per exercise.
pub fn run_exercises(filter: Option<&str>) -> Vec<Test<'static>> {
    let mut out = Vec::new();
    let root = kbuild::root();
    for e in EXERCISES {
        let name = format!("exercise {}: {}", e.feature, e.question);
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let dest = root.join("target/xtask/exercise").join(e.feature);
        out.push(Test::plain(name, move || {
            crate::cmd::run::feature_build(&[e.feature.to_string()])
                .map_err(|err| format!("{err:#}"))
                .and_then(|art| {
                    let spec = machine::Spec::new(
                        machine::BackendSpec::Qemu(qemu::Spec::new(machine::AccelChoice::Tcg)),
                        EXERCISE_TIMEOUT,
                    );
                    let log = Machine::build(&spec, &art, "mode=test", &dest)
                        .and_then(|m| m.boot(&mut |_| {}))
                        .map_err(|err| format!("{err:#}"))?;
                    let records =
                        crate::report::parse_log(&log.serial).map_err(|err| err.to_string())?;
                    (e.check)(&log, &records, &art.kernel)
                        .map_err(|err| format!("{err}\n{}", log.explain(20)))
                })
        }));
    }
    out
}

/// The teaching tools' own checks, for `cargo xtask test`: a trace of each
/// mechanism, gdb stopping at an entry stub, and the exercises.
pub fn self_tests(filter: Option<&str>) -> Vec<Test<'static>> {
    let mut out = Vec::new();
    let wanted = |n: &str| filter.is_none_or(|f| n.contains(f));
    for (m, cpu, must) in [
        (MechArg::Int80, None, "return: iret"),
        (MechArg::Sysenter, None, "return: sysexit"),
        (MechArg::Callgate, None, "return: popfl then lret"),
        (MechArg::Syscall, Some("phenom"), "return: sysret"),
    ] {
        let name = format!(
            "trace {}: every step printed, registers kept",
            m.mechanism().key()
        );
        if !wanted(&name) {
            continue;
        }
        out.push(Test::plain(name, move || {
            let a = TraceArgs {
                mechanism: m,
                boot: crate::cmd::test_boot_args(cpu),
            };
            trace_output(&a)
                .map_err(|e| format!("{e:#}"))
                .and_then(|lines| {
                    let text = lines.join("\n");
                    for needle in [
                        "user: before:",
                        "kernel: entered through",
                        "cpu: ",
                        "dispatch: frame",
                        must,
                        "user: after:",
                        "came back unchanged",
                    ] {
                        if !text.contains(needle) {
                            return Err(format!("the trace lacks {needle:?}:\n{text}"));
                        }
                    }
                    Ok(())
                })
        }));
    }
    // What frame-words must say at each mechanism's stub, and what it must
    // not: a read past the stack's top.
    // At the sysenter stop, also where the stack ends: the guard page that
    // makes `x/8wx $esp` fail there (issue 47's "Cannot access memory").
    for (mech, says) in [
        (
            "int80",
            &["int $0x80 pushed the IRET frame, five words (top of the stack last):\n  ["][..],
        ),
        (
            "sysenter",
            &[
                "sysenter pushed nothing: ESP = IA32_SYSENTER_ESP =",
                "the stack ends: the page there is the guard page under the next thread's kernel stack",
            ][..],
        ),
        (
            "callgate",
            &["lcall through the gate pushed four words and no EFLAGS (top of the stack last):\n  ["][..],
        ),
    ] {
        let name = format!(
            "gdb --stop-at {mech}: stops at {mech}'s stub on the traced call, frame-words says what it pushed"
        );
        if !wanted(&name) {
            continue;
        }
        // gdb's stub listens on a fixed port: one at a time.
        out.push(Test::plain(name, move || {
            let stub = format!("{mech}_full");
            // No gdb here: the test cannot run, and says so (SKIP, counted).
            preflight::ensure_gdb()
                .map_err(|e| format!("{}no gdb here: {e:#}", SKIP))
                .and_then(|()| gdb_batch_output(&["--stop-at", mech]))
                .and_then(|text| {
                    let stopped = text.contains("Breakpoint 1, ")
                        && text.contains(&format!("in {stub} ()"))
                        && text.contains(&format!("<{stub}>"));
                    // The traced call: EAX = the trace number, EBX the trace's value.
                    let traced = text.contains(&format!(
                        "EAX={:#x} EBX=0x11111111",
                        abi::syscall::nr::TRACE
                    ));
                    if !stopped || !traced {
                        return Err(format!(
                            "gdb did not stop in {stub} on the traced call:\n{text}"
                        ));
                    }
                    if !says.iter().all(|w| text.contains(w))
                        || text.contains("Cannot access memory")
                    {
                        return Err(format!("frame-words did not say {says:?}:\n{text}"));
                    }
                    Ok(())
                })
        })
        .alone_if(true));
    }
    out.extend(run_exercises(filter));
    out.extend(chapter_tests(filter));
    out
}

/// The chapters whose commands a student runs, in reading order.
pub const CHAPTERS: &[&str] = &[
    "docs/teaching.md",
    "docs/int80.md",
    "docs/sysenter.md",
    "docs/callgate.md",
    "docs/syscall.md",
    "docs/exercises.md",
    "docs/experiment-sysenter.md",
    "docs/experiment-turnstiles.md",
    "docs/experiment-directmap.md",
];

/// What a chapter's block of commands must do, from the HTML comment
/// `<!-- expect: ... -->` on the line before its fence: `exit=N` (default
/// 0), `says="TEXT"` (somewhere in stdout or stderr; repeatable, each
/// must be there), `interactive` (gdb
/// waits for a person: not run; its `--batch` form is tested), or
/// `skip="WHY"`.
#[derive(Clone, Debug, PartialEq)]
pub struct Expect {
    pub exit: i32,
    /// Each must be in the output (`says=` may be given more than once).
    pub says: Vec<String>,
    pub run: bool,
}

/// A command as a chapter states it: the chapter, the line (continuations
/// joined, comment dropped), and what it must do.
#[derive(Clone, Debug, PartialEq)]
pub struct Stated {
    pub chapter: String,
    pub line: String,
    pub expect: Expect,
}

fn parse_expect(c: &str) -> Result<Expect, String> {
    let mut e = Expect {
        exit: 0,
        says: Vec::new(),
        run: true,
    };
    let mut rest = c.trim();
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("interactive") {
            e.run = false;
            rest = r.trim_start();
        } else if let Some(r) = rest.strip_prefix("exit=") {
            let end = r.find(' ').unwrap_or(r.len());
            e.exit = r[..end]
                .parse()
                .map_err(|_| format!("expect: exit={} is not a number", &r[..end]))?;
            rest = r[end..].trim_start();
        } else if let Some(r) = rest
            .strip_prefix("says=\"")
            .or_else(|| rest.strip_prefix("skip=\""))
        {
            let end = r.find('"').ok_or("expect: an unclosed quote")?;
            if rest.starts_with("skip") {
                e.run = false;
            } else {
                e.says.push(r[..end].to_string());
            }
            rest = r[end + 1..].trim_start();
        } else {
            return Err(format!("expect: cannot read {rest:?}"));
        }
    }
    Ok(e)
}

/// Every `cargo xtask` command in `text`'s plain code blocks (fences with
/// no language: the ones a reader types; output blocks are `text`), as
/// `pulldown-cmark` finds them; the `<!-- expect: -->` comment right
/// before a block (blank lines between allowed) says what it must do.
pub fn stated_commands(chapter: &str, text: &str) -> Result<Vec<Stated>, String> {
    use pulldown_cmark::{CodeBlockKind, Event, Tag, TagEnd};
    let mut out = Vec::new();
    let mut pending: Option<Expect> = None;
    // The block being read: what it must do, and its text so far.
    let mut block: Option<(Expect, String)> = None;
    for (e, at) in crate::cmd::docs::markdown(text).into_offset_iter() {
        match e {
            Event::Html(h) if block.is_none() => {
                pending = match h.trim().strip_prefix("<!-- expect:") {
                    Some(c) => {
                        let c = c.strip_suffix("-->").unwrap_or(c);
                        let line = crate::cmd::docs::line_of(text, at.start);
                        Some(parse_expect(c).map_err(|e| format!("{chapter}:{line}: {e}"))?)
                    }
                    None => None,
                };
            }
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) if info.trim().is_empty() => {
                let expect = pending.take().unwrap_or(parse_expect("")?);
                block = Some((expect, String::new()));
            }
            Event::Text(t) => {
                if let Some((_, body)) = &mut block {
                    body.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                let Some((expect, body)) = block.take() else {
                    continue;
                };
                let mut joined = String::new();
                for t in body.lines().map(str::trim) {
                    if joined.is_empty() && !t.starts_with("cargo xtask ") {
                        continue;
                    }
                    let body = t.split(" #").next().unwrap_or(t).trim();
                    if let Some(b) = body.strip_suffix('\\') {
                        joined.push_str(b.trim_end());
                        joined.push(' ');
                        continue;
                    }
                    joined.push_str(body);
                    out.push(Stated {
                        chapter: chapter.to_string(),
                        line: std::mem::take(&mut joined),
                        expect: expect.clone(),
                    });
                }
            }
            Event::Start(_) => pending = None,
            _ => {}
        }
    }
    Ok(out)
}

/// Seconds one chapter command may take (a model run, a bench of two
/// builds, an exercise build from nothing).
const CHAPTER_COMMAND_TIMEOUT: Duration = Duration::from_secs(900);

/// Runs `cargo xtask WORDS` (this binary) in the tree; (exit status, stdout
/// and stderr).
fn run_stated(words: &[String]) -> Result<(i32, String), String> {
    let exe = crate::kbuild::xtask_exe().map_err(|e| e.to_string())?;
    let mut child = Command::new(exe)
        .args(words)
        .current_dir(kbuild::root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let start = std::time::Instant::now();
    loop {
        if child.try_wait().map_err(|e| e.to_string())?.is_some() {
            break;
        }
        if start.elapsed() > CHAPTER_COMMAND_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!(
                "no end after {} s",
                CHAPTER_COMMAND_TIMEOUT.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let o = child.wait_with_output().map_err(|e| e.to_string())?;
    Ok((
        o.status.code().unwrap_or(-1),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    ))
}

/// The last lines of a command's output, for a failure message.
fn tail(text: &str, n: usize) -> String {
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// One test per command the teaching chapters and the exercises state, run
/// as stated; and the path counts of int80.md, sysenter.md and callgate.md
/// against the measured `null` paths.
pub fn chapter_tests(filter: Option<&str>) -> Vec<Test<'static>> {
    let mut out = Vec::new();
    let wanted = |n: &str| filter.is_none_or(|f| n.contains(f));
    let root = kbuild::root();
    let mut stated = Vec::new();
    for c in CHAPTERS {
        let r = std::fs::read_to_string(root.join(c))
            .map_err(|e| format!("{c}: {e}"))
            .and_then(|t| stated_commands(c, &t));
        match r {
            Ok(s) => stated.extend(s),
            Err(e) => out.push(Test::plain(
                format!("teaching: {c}: its commands can be read"),
                move || Err(e),
            )),
        }
    }
    // A command two places state the same way runs once, and must do what
    // each place expects of it: the words of both, the one exit status
    // they agree on (a disagreement is a failed test of its own). A place
    // that skips it, for the reason it gives, skips it everywhere.
    let mut merged: Vec<Stated> = Vec::new();
    for s in &stated {
        match merged.iter_mut().find(|m| m.line == s.line) {
            None => merged.push(s.clone()),
            Some(m) => {
                if m.expect.exit != s.expect.exit && m.expect.run && s.expect.run {
                    let e = format!(
                        "{} expects exit status {}, {} expects {}",
                        m.chapter, m.expect.exit, s.chapter, s.expect.exit
                    );
                    out.push(Test::plain(
                        format!(
                            "teaching: `{}`: the chapters agree on its exit status",
                            s.line
                        ),
                        move || Err(e),
                    ));
                }
                m.expect.run &= s.expect.run;
                for w in &s.expect.says {
                    if !m.expect.says.contains(w) {
                        m.expect.says.push(w.clone());
                    }
                }
            }
        }
    }
    // (command after `cargo xtask`, chapter): what may run beside what.
    let commands: Vec<(String, String)> = merged
        .iter()
        .map(|s| (after_xtask(&s.line), s.chapter.to_string()))
        .collect();
    for s in merged.iter().filter(|s| s.expect.run) {
        let alone = !crate::cmd::docs::runs_beside_others(&after_xtask(&s.line), &commands);
        let name = format!(
            "teaching: {}: `{}` works as the chapter says",
            s.chapter, s.line
        );
        if !wanted(&name) {
            continue;
        }
        let s = s.clone();
        out.push(
            Test::plain(name, move || {
                let words = crate::cmd::docs::words(&s.line);
                run_stated(&words[2..]).and_then(|(code, text)| {
                    if code != s.expect.exit {
                        return Err(format!(
                            "exit status {code}, the chapter expects {}:\n{}",
                            s.expect.exit,
                            tail(&text, 30)
                        ));
                    }
                    match s.expect.says.iter().find(|w| !text.contains(w.as_str())) {
                        Some(w) => Err(format!("the output lacks {w:?}:\n{}", tail(&text, 30))),
                        None => Ok(()),
                    }
                })
            })
            .alone_if(alone),
        );
    }
    let name =
        "teaching: the path counts of int80.md, sysenter.md and callgate.md add up to the measured null paths";
    if wanted(name) {
        out.push(Test::plain(name.to_string(), path_counts));
    }
    if wanted(EXERCISE_8) {
        out.push(Test::plain(EXERCISE_8.to_string(), single_step_eips));
    }
    out
}

/// A stated command line without its `cargo xtask `.
fn after_xtask(line: &str) -> String {
    line.strip_prefix("cargo xtask ")
        .unwrap_or(line)
        .to_string()
}

/// The test that holds exercise 8's answer (docs/exercises.md).
const EXERCISE_8: &str = "teaching: docs/exercises.md: exercise 8: the #DB after int 0x80 is reported at the instruction after its nop, after the call gate at the nop itself";

/// The first `0x...` number of `text`.
fn first_hex(text: &str) -> Option<u32> {
    let at = text.find("0x")?;
    let digits: String = text[at + 2..]
        .chars()
        .take_while(char::is_ascii_hexdigit)
        .collect();
    u32::from_str_radix(&digits, 16).ok()
}

/// Exercise 8: `cargo xtask run --mode test --append test=TF`, as the
/// chapter states it. Before each TF case through int 0x80 and the call
/// gate, `faults` prints where the NOP after the entry instruction is and
/// the instruction after that NOP; the kernel's report of the #DB that
/// ends the task follows, before the case's verdict line. The EIP it
/// reports must be the instruction after the NOP for int 0x80, the NOP
/// itself for the call gate.
fn single_step_eips() -> Result<(), String> {
    let (code, text) =
        run_stated(&["run", "--mode", "test", "--append", "test=TF"].map(String::from))?;
    if code != 0 {
        return Err(format!("exit status {code}:\n{}", tail(&text, 30)));
    }
    for (what, at_nop) in [("int 0x80", false), ("the call gate", true)] {
        let head = format!("faults: TF before {what}: its nop at ");
        let case = text
            .split(head.as_str())
            .nth(1)
            .ok_or_else(|| format!("the boot did not print {head:?}:\n{}", tail(&text, 30)))?;
        // This case's lines: up to its verdict.
        let case = case
            .split("\nPASS ")
            .next()
            .and_then(|c| c.split("\nFAIL ").next())
            .unwrap_or(case);
        let nop = first_hex(case);
        let next = case
            .split("the instruction after that nop at ")
            .nth(1)
            .and_then(first_hex);
        let eip = case
            .split("#DB debug (vector 1) in user mode")
            .nth(1)
            .and_then(|r| r.split("EIP ").nth(1))
            .and_then(first_hex);
        let (Some(nop), Some(next)) = (nop, next) else {
            return Err(format!("cannot read the places `faults` printed:\n{case}"));
        };
        let Some(eip) = eip else {
            return Err(format!("no #DB report with an EIP after {what}:\n{case}"));
        };
        let (want, said) = if at_nop {
            (nop, "the nop itself")
        } else {
            (next, "the instruction after the nop")
        };
        if eip != want {
            return Err(format!(
                "the #DB after {what} is reported at EIP {eip:#x}; its nop is at {nop:#x}, the instruction after it at {next:#x}; the answer says {said}"
            ));
        }
    }
    Ok(())
}

/// The sum of the `count` column of a chapter's "Counting the path" table.
pub fn counted_path(text: &str) -> Result<u32, String> {
    use pulldown_cmark::{Event, HeadingLevel, Tag, TagEnd};
    // The section runs to the next heading of its level or above.
    let (mut inside, mut found) = (false, false);
    let (mut heading, mut cell, mut cells) = (None::<String>, String::new(), Vec::new());
    let (mut sum, mut rows) = (0, 0);
    for e in crate::cmd::docs::markdown(text) {
        match e {
            Event::Start(Tag::Heading { level, .. }) if level <= HeadingLevel::H2 => {
                heading = Some(String::new());
            }
            Event::End(TagEnd::Heading(_)) => {
                if let Some(h) = heading.take() {
                    inside = h == "Counting the path";
                    found |= inside;
                }
            }
            Event::Text(t) | Event::Code(t) => heading.as_mut().unwrap_or(&mut cell).push_str(&t),
            Event::Start(Tag::TableCell) => cell.clear(),
            Event::End(TagEnd::TableCell) => cells.push(cell.trim().to_string()),
            Event::End(TagEnd::TableHead | TagEnd::TableRow) => {
                let row = std::mem::take(&mut cells);
                if let (true, [_, _, count]) = (inside, row.as_slice()) {
                    if let Ok(n) = count.parse::<u32>() {
                        sum += n;
                        rows += 1;
                    }
                }
            }
            _ => {}
        }
    }
    if !found {
        return Err("no section \"Counting the path\"".into());
    }
    if rows == 0 {
        return Err("the section has no table of counts".into());
    }
    Ok(sum)
}

fn path_counts() -> Result<(), String> {
    let results = crate::cmd::run::ran(&[
        "--clock",
        "icount",
        "--append",
        "batches=2 batch_size=64 entry=int80,sysenter,callgate",
    ])
    .map_err(|e| format!("the icount boot: {e:#}"))?
    .results;
    for (chapter, bench) in [
        ("docs/int80.md", "int80.null"),
        ("docs/sysenter.md", "sysenter.null"),
        ("docs/callgate.md", "callgate.null"),
    ] {
        let text =
            std::fs::read_to_string(kbuild::root().join(chapter)).map_err(|e| e.to_string())?;
        let counted = counted_path(&text).map_err(|e| format!("{chapter}: {e}"))?;
        let measured = results
            .bench(bench)
            .map(|b| b.median)
            .ok_or_else(|| format!("no {bench} in the results"))?;
        if f64::from(counted) != measured {
            return Err(format!(
                "{chapter} counts {counted} instructions for the null path, icount measured {measured}"
            ));
        }
    }
    Ok(())
}

/// `cargo xtask gdb --batch [extra]`, captured.
fn gdb_batch_output(extra: &[&str]) -> Result<String, String> {
    let exe = crate::kbuild::xtask_exe().map_err(|e| e.to_string())?;
    let o = Command::new(exe)
        .args(["gdb", "--batch", "--accel", "tcg", "--port", "12345"])
        .args(extra)
        .output()
        .map_err(|e| e.to_string())?;
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    if !o.status.success() {
        return Err(format!("xtask gdb --batch failed:\n{text}"));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_read_as_stated() {
        let text = "x\n<!-- expect: exit=1 says=\"run failed\" -->\n```\ncargo xtask run --mode test \\\n    --features a   # why\nnot a command\n```\n```text\ncargo xtask output\n```\n<!-- expect: interactive -->\n```\ncargo xtask gdb\n```\n```\ncargo xtask trace int80\n```\n";
        let s = stated_commands("c.md", text).unwrap();
        assert_eq!(s.len(), 3, "{s:?}");
        assert_eq!(s[0].line, "cargo xtask run --mode test --features a");
        assert_eq!(s[0].expect.exit, 1);
        assert_eq!(s[0].expect.says, ["run failed"]);
        let two = parse_expect(r#"says="a b" exit=1 says="c""#).unwrap();
        assert_eq!(
            (two.exit, two.says),
            (1, vec!["a b".to_string(), "c".to_string()])
        );
        assert!(!s[1].expect.run);
        assert_eq!(s[2].expect, parse_expect("").unwrap());
        assert!(stated_commands("c.md", "<!-- expect: exit=x -->\n```\n```\n").is_err());
    }

    #[test]
    fn path_tables_are_summed() {
        let t = "## Counting the path\n\n| where | instructions | count |\n| --- | --- | --- |\n| a | b | 4 |\n| c | d | 10 |\n\n## Next\n| x | y | 99 |\n";
        assert_eq!(counted_path(t), Ok(14));
        assert!(counted_path("## Other").is_err());
    }

    /// The chapters' commands parse, and each exercise's boot is among them.
    #[test]
    fn every_exercise_is_a_stated_command() {
        let text = std::fs::read_to_string(kbuild::root().join("docs/exercises.md")).unwrap();
        let s = stated_commands("docs/exercises.md", &text).unwrap();
        for e in EXERCISES {
            assert!(
                s.iter().any(|c| c.line
                    == format!("cargo xtask run --mode test --features {}", e.feature)
                    && c.expect.exit == 1),
                "{}",
                e.feature
            );
        }
        for c in CHAPTERS {
            let text = std::fs::read_to_string(kbuild::root().join(c)).unwrap();
            stated_commands(c, &text).unwrap();
        }
    }

    /// The section runs side by side but for gdb (a fixed port) and the
    /// benches that write the default output directory.
    #[test]
    fn gdb_and_the_benches_without_an_out_directory_run_alone() {
        let alone: Vec<String> = self_tests(None)
            .into_iter()
            .filter(|t| t.alone)
            .map(|t| t.name)
            .collect();
        assert_eq!(
            alone
                .iter()
                .filter(|n| n.starts_with("gdb --stop-at "))
                .count(),
            3,
            "{alone:?}"
        );
        assert!(
            alone
                .iter()
                .all(|n| n.starts_with("gdb --stop-at ") || n.contains("`cargo xtask bench ")),
            "{alone:?}"
        );
        assert!(alone.len() < 8, "{alone:?}");
    }
}
