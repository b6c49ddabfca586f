//! Teaching tools: `cargo xtask trace` (one system call, explained step by
//! step by the kernel and the user program) and `cargo xtask gdb` (QEMU
//! paused under gdb with a breakpoint on every entry stub).

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::{kbuild, preflight, qemu, BootArgs};

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MechArg {
    Int80,
    Sysenter,
    Callgate,
    Syscall,
}

impl MechArg {
    pub fn mechanism(self) -> abi::Mechanism {
        match self {
            MechArg::Int80 => abi::Mechanism::Int80,
            MechArg::Sysenter => abi::Mechanism::Sysenter,
            MechArg::Callgate => abi::Mechanism::CallGate,
            MechArg::Syscall => abi::Mechanism::Syscall,
        }
    }
}

#[derive(Args)]
pub struct TraceArgs {
    /// The entry mechanism to trace.
    #[arg(value_enum)]
    pub mechanism: MechArg,
    #[command(flatten)]
    pub boot: BootArgs,
}

/// The lines of a trace boot worth showing: the user's and the kernel's
/// narration, not the banner and the machine records.
pub fn trace_lines(serial: &str) -> Vec<String> {
    serial
        .lines()
        .filter(|l| {
            [
                "user: ",
                "kernel: ",
                "cpu: ",
                "stub: ",
                "dispatch: ",
                "return: ",
                "       [",
            ]
            .iter()
            .any(|p| l.starts_with(p))
                && !l.starts_with("cpu: GenuineIntel")
                && !l.starts_with("cpu: AuthenticAMD")
        })
        .map(str::to_string)
        .collect()
}

/// Boots with `trace=<mechanism>` and returns the narration.
pub fn trace_output(a: &TraceArgs) -> Result<Vec<String>> {
    preflight::ensure(if a.boot.grub {
        preflight::Need::QemuAndGrub
    } else {
        preflight::Need::Qemu
    })?;
    let art = kbuild::build(true)?;
    let mut boot_args = a.boot.clone();
    // The AMD path needs an AMD model (and qemu-system-x86_64, chosen by model).
    if a.mechanism == MechArg::Syscall && boot_args.cpu.is_none() {
        boot_args.cpu = Some("phenom".into());
    }
    let words = format!("mode=run trace={}", a.mechanism.mechanism().key());
    let p = crate::prepare(
        &boot_args,
        &art,
        &words,
        &kbuild::root().join("target/xtask"),
    )?;
    let log = qemu::run(&p.boot, &mut |_| {})?;
    if !log.succeeded() {
        bail!("the trace boot failed: {}", log.explain(20));
    }
    Ok(trace_lines(&log.serial))
}

pub fn trace(a: TraceArgs) -> Result<i32> {
    for l in trace_output(&a)? {
        println!("{l}");
    }
    Ok(0)
}

#[derive(Args)]
pub struct GdbArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// The user program to run.
    #[arg(long, default_value = abi::cmdline::DEFAULT_PROG)]
    pub prog: String,
    /// Non-interactive: run to the first entry stub, show the registers and
    /// the stack, and stop (what the tests use).
    #[arg(long)]
    pub batch: bool,
    /// TCP port for QEMU's gdb stub.
    #[arg(long, default_value_t = 1234, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
}

pub fn script_path() -> PathBuf {
    kbuild::root().join("xtask/gdb/testbed.gdb")
}

/// The gdb command line: the kernel's symbols, the user program's, the
/// script, and for `--batch` the commands that stop at the first entry.
pub fn gdb_args(kernel: &str, program: &str, script: &str, port: u16, batch: bool) -> Vec<String> {
    let mut a: Vec<String> = vec!["-q".into(), "-nx".into()];
    if batch {
        a.push("-batch".into());
    }
    a.push(kernel.into());
    a.extend(["-ex".into(), format!("add-symbol-file {program}")]);
    a.extend(["-ex".into(), "set confirm off".into()]);
    a.extend(["-ex".into(), "set architecture i386".into()]);
    a.extend(["-ex".into(), format!("target remote localhost:{port}")]);
    a.extend(["-x".into(), script.into()]);
    if batch {
        for c in [
            "continue",
            "info registers eip esp cs ss eflags",
            "frame-words",
            "x/4i $eip",
            "kill",
        ] {
            a.extend(["-ex".into(), c.into()]);
        }
    }
    a
}

pub fn gdb(a: GdbArgs) -> Result<i32> {
    preflight::ensure(preflight::Need::Qemu)?;
    preflight::ensure_gdb()?;
    let art = kbuild::build(true)?;
    let words = format!("mode=run prog={}", a.prog);
    let mut p = crate::prepare(&a.boot, &art, &words, &kbuild::root().join("target/xtask"))?;
    let serial_log = kbuild::root().join("target/xtask/gdb-serial.log");
    p.boot.extra = vec![
        "-S".into(),
        "-gdb".into(),
        format!("tcp:127.0.0.1:{}", a.port),
    ];
    p.boot.timeout = Duration::from_secs(a.boot_timeout());
    let mut args = p.boot.args()?;
    let i = args
        .iter()
        .position(|x| x == "stdio")
        .context("serial argument")?;
    args[i] = format!("file:{}", serial_log.display());
    let mut qemu = Command::new(p.boot.binary())
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot start {}", p.boot.binary()))?;
    // Give the stub a moment to listen.
    std::thread::sleep(Duration::from_millis(300));
    if let Some(st) = qemu.try_wait()? {
        bail!("QEMU exited at once ({st}); is port {} in use?", a.port);
    }
    let program = art
        .programs
        .iter()
        .find(|(_, n)| *n == a.prog)
        .map(|(p, _)| p.display().to_string())
        .with_context(|| format!("no user program {:?}", a.prog))?;
    eprintln!(
        "gdb: QEMU paused, stub on 127.0.0.1:{}; serial output goes to {}",
        a.port,
        serial_log.display()
    );
    let status = Command::new("gdb")
        .args(gdb_args(
            &art.kernel.display().to_string(),
            &program,
            &script_path().display().to_string(),
            a.port,
            a.batch,
        ))
        .status()
        .context("cannot start gdb")?;
    let _ = qemu.kill();
    let _ = qemu.wait();
    Ok(if status.success() { 0 } else { 1 })
}

impl GdbArgs {
    fn boot_timeout(&self) -> u64 {
        self.boot.timeout_secs()
    }
}

/// An exercise: a kernel feature that removes one piece of entry hygiene,
/// and what a test boot then shows (docs/exercises.md asks the question).
pub struct Exercise {
    pub feature: &'static str,
    pub question: &'static str,
    pub check: fn(&qemu::BootLog, &[crate::report::Record]) -> Result<(), String>,
}

fn failed_test(r: &[crate::report::Record], name: &str) -> Result<(), String> {
    let t = crate::report::of_kind(r, abi::report::kind::TEST)
        .find(|t| t.get("name") == Some(name))
        .ok_or_else(|| format!("the test {name:?} did not run"))?;
    match t.get("result") {
        Some("fail") => Ok(()),
        other => Err(format!("the test {name:?} should fail but is {other:?}")),
    }
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

fn ended(log: &qemu::BootLog, want: abi::exit::Outcome) -> Result<(), String> {
    if log.ending == qemu::Ending::Exited(want) {
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
        check: |log, r| {
            ended(log, abi::exit::Outcome::Failure)?;
            failed_test(
                r,
                "user fault: TF set before sysenter (#DB after the return)",
            )
        },
    },
    Exercise {
        feature: "exercise-trust-user-pointers",
        question: "Let usercopy::check accept every pointer.",
        check: |log, r| {
            failed_test(r, "kernel: user-pointer checks refuse bad ranges")?;
            failed_check(r, "int80", "pointer into the kernel gives EFAULT")?;
            // Sooner or later a hostile case hands the kernel an unmapped
            // buffer it then touches: a page fault in ring 0.
            ended(log, abi::exit::Outcome::Exception(14))
        },
    },
    Exercise {
        feature: "exercise-sysenter-no-flags-reset",
        question: "Remove `pushl $2; popfl` (the cld, and more) from the sysenter path.",
        check: |log, r| {
            failed_check(r, "sysenter", "DF set before the call: ring data intact")?;
            ended(log, abi::exit::Outcome::Exception(10))?;
            if !log.serial.contains("#TS invalid TSS") {
                return Err("no #TS report".into());
            }
            Ok(())
        },
    },
];

/// Builds each exercise's kernel (in target/exercise) and boots its tests;
/// (name, result) per exercise.
pub fn run_exercises(filter: Option<&str>) -> Vec<(String, Result<(), String>)> {
    let mut out = Vec::new();
    let root = kbuild::root();
    for e in EXERCISES {
        let name = format!("exercise {}: {}", e.feature, e.question);
        if filter.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let dest = root.join("target/xtask/exercise").join(e.feature);
        // A target directory of their own: an exercise build never replaces
        // the normal kernel, and nothing else builds into it meanwhile.
        let target = root.join("target/exercise");
        let r = kbuild::build_into(&root, &[e.feature.to_string()], &dest, Some(&target))
            .map_err(|err| format!("{err:#}"))
            .and_then(|art| {
                let boot = qemu::Boot {
                    kernel: art.kernel.clone(),
                    modules: art.programs.clone(),
                    cmdline: "mode=test clock=icount accel=tcg".into(),
                    cdrom: None,
                    cpu: None,
                    smp: 1,
                    accel: qemu::Accel::Tcg,
                    icount: true,
                    memory_mib: 128,
                    timeout: Duration::from_secs(60),
                    extra: vec![],
                };
                let log = qemu::run(&boot, &mut |_| {}).map_err(|err| format!("{err:#}"))?;
                let records =
                    crate::report::parse_log(&log.serial).map_err(|err| err.to_string())?;
                (e.check)(&log, &records).map_err(|err| format!("{err}\n{}", log.explain(20)))
            });
        out.push((name, r));
    }
    out
}

/// The teaching tools' own checks, for `cargo xtask test`: a trace of each
/// mechanism, gdb stopping at an entry stub, and the exercises.
pub fn self_tests(filter: Option<&str>) -> Vec<(String, Result<(), String>)> {
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
        let a = TraceArgs {
            mechanism: m,
            boot: crate::test_boot_args(cpu),
        };
        let r = trace_output(&a)
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
            });
        out.push((name, r));
    }
    let name = "gdb: stops at the first entry stub with symbols".to_string();
    if wanted(&name) && preflight::ensure_gdb().is_ok() {
        let r = gdb_batch_output().and_then(|text| {
            if text.contains("Breakpoint 1, ")
                && text.contains("in int80_full ()")
                && text.contains("<int80_full>")
            {
                Ok(())
            } else {
                Err(format!("gdb did not stop in int80_full:\n{text}"))
            }
        });
        out.push((name, r));
    }
    out.extend(run_exercises(filter));
    out
}

/// `cargo xtask gdb --batch`, captured.
fn gdb_batch_output() -> Result<String, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let o = Command::new(exe)
        .args(["gdb", "--batch", "--accel", "tcg", "--port", "12345"])
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
    fn trace_lines_keep_the_narration() {
        let log = "i386 testbed kernel abc\ncpu: GenuineIntel \"QEMU\"\n@@tb1 end status=success\nuser: before\nkernel: entered\n       [0x1] SS = 0x23\ncpu: pushed\nreturn: iret\n";
        assert_eq!(
            trace_lines(log),
            [
                "user: before",
                "kernel: entered",
                "       [0x1] SS = 0x23",
                "cpu: pushed",
                "return: iret"
            ]
        );
    }

    #[test]
    fn gdb_command_line() {
        let a = gdb_args("/k/kernel", "/k/bench", "/r/testbed.gdb", 1234, true).join(" ");
        assert!(
            a.starts_with("-q -nx -batch /k/kernel -ex add-symbol-file /k/bench"),
            "{a}"
        );
        assert!(
            a.contains("-x /r/testbed.gdb")
                && a.contains("-ex continue")
                && a.ends_with("-ex kill")
        );
        assert!(
            a.contains("-ex target remote localhost:1234 -x /r/testbed.gdb"),
            "{a}"
        );
        let b = gdb_args("/k/kernel", "/k/bench", "/r/s.gdb", 4000, false).join(" ");
        assert!(b.contains("target remote localhost:4000") && !b.contains("-batch"));
    }
}

/// `cargo xtask docs`: the outputs shown in docs/*.md, regenerated.
#[derive(Args)]
pub struct DocsArgs {
    /// Do not write: fail if any block differs from what the command prints now.
    #[arg(long)]
    pub check: bool,
}

const BLOCK_START: &str = "<!-- output: xtask ";
const BLOCK_END: &str = "<!-- end output -->";

/// Makes a command's output stable across builds and machines: the kernel's
/// git revision and the QEMU version become placeholders.
pub fn normalize(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("results: ") && !l.starts_with("run: finished"))
        .map(|l| {
            let mut l = l.to_string();
            if let Some(rest) = l.strip_prefix("i386 testbed kernel ") {
                let _ = rest;
                l = "i386 testbed kernel <rev>".into();
            }
            if let Some(i) = l.find("QEMU ") {
                let tail = &l[i + 5..];
                if tail.starts_with(|c: char| c.is_ascii_digit()) {
                    let end = tail.find(' ').unwrap_or(tail.len());
                    l = format!("{}QEMU <version>{}", &l[..i], &tail[end..]);
                }
            }
            l.trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// Splits a block's command line into words, keeping "quoted phrases" whole.
pub fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in cmd.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// Runs `cargo xtask <cmd>` (this binary) and returns its normalised stdout.
fn command_output(cmd: &str) -> Result<String> {
    let exe = std::env::current_exe()?;
    let o = Command::new(exe)
        .args(words(cmd))
        .current_dir(kbuild::root())
        .output()
        .with_context(|| format!("cannot run xtask {cmd}"))?;
    let out = String::from_utf8_lossy(&o.stdout);
    if out.trim().is_empty() {
        bail!(
            "`cargo xtask {cmd}` printed nothing on stdout:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(normalize(&out))
}

/// Rewrites every output block of `text`; returns the new text and the
/// commands whose output changed.
pub fn regenerate(
    text: &str,
    run: &mut dyn FnMut(&str) -> Result<String>,
) -> Result<(String, Vec<String>)> {
    let mut out = String::new();
    let mut changed = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BLOCK_START) {
        let line_end = rest[start..]
            .find('\n')
            .map(|i| start + i + 1)
            .context("unterminated output marker")?;
        let marker = &rest[start..line_end];
        let cmd = marker
            .trim()
            .strip_prefix(BLOCK_START)
            .and_then(|m| m.strip_suffix("-->"))
            .context("malformed output marker")?
            .trim()
            .to_string();
        let end = rest[line_end..]
            .find(BLOCK_END)
            .map(|i| line_end + i)
            .with_context(|| format!("no `{BLOCK_END}` after `xtask {cmd}`"))?;
        let old = &rest[line_end..end];
        let new = format!("```text\n{}\n```\n", run(&cmd)?);
        if old != new {
            changed.push(cmd);
        }
        out.push_str(&rest[..line_end]);
        out.push_str(&new);
        rest = &rest[end..];
    }
    out.push_str(rest);
    Ok((out, changed))
}

pub fn docs_dir() -> PathBuf {
    kbuild::root().join("docs")
}

/// Regenerates (or checks) every docs/*.md; returns the stale blocks.
pub fn docs_stale(check: bool) -> Result<Vec<String>> {
    let mut stale = Vec::new();
    let mut files: Vec<PathBuf> = std::fs::read_dir(docs_dir())
        .context("no docs/ directory")?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    // Each command runs once even when several chapters show it.
    let mut cache: std::collections::HashMap<String, String> = Default::default();
    for f in files {
        let text = std::fs::read_to_string(&f)?;
        let mut run = |cmd: &str| -> Result<String> {
            if let Some(o) = cache.get(cmd) {
                return Ok(o.clone());
            }
            eprintln!(
                "docs: {}: xtask {cmd}",
                f.file_name().unwrap_or_default().to_string_lossy()
            );
            let o = command_output(cmd)?;
            cache.insert(cmd.to_string(), o.clone());
            Ok(o)
        };
        let (new, changed) = regenerate(&text, &mut run)?;
        for c in changed {
            stale.push(format!("{}: xtask {c}", f.display()));
        }
        if !check && new != text {
            std::fs::write(&f, new)?;
        }
    }
    Ok(stale)
}

pub fn docs(a: DocsArgs) -> Result<i32> {
    let stale = docs_stale(a.check)?;
    if a.check && !stale.is_empty() {
        eprintln!("docs: these outputs no longer match the code (run `cargo xtask docs`):");
        for s in &stale {
            eprintln!("  {s}");
        }
        return Ok(1);
    }
    if !a.check {
        eprintln!("docs: {} block(s) updated", stale.len());
    } else {
        eprintln!("docs: every output block matches");
    }
    Ok(0)
}

#[cfg(test)]
mod docs_tests {
    use super::*;

    #[test]
    fn blocks_are_regenerated_and_reported() {
        let text = "# T\n<!-- output: xtask trace int80 -->\n```text\nold\n```\n<!-- end output -->\ntail\n";
        let (new, changed) = regenerate(text, &mut |c| Ok(format!("out of {c}"))).unwrap();
        assert_eq!(new, "# T\n<!-- output: xtask trace int80 -->\n```text\nout of trace int80\n```\n<!-- end output -->\ntail\n");
        assert_eq!(changed, ["trace int80"]);
        let (again, changed) = regenerate(&new, &mut |c| Ok(format!("out of {c}"))).unwrap();
        assert_eq!(again, new);
        assert!(changed.is_empty());
        assert!(regenerate("<!-- output: xtask x -->\nno end", &mut |_| Ok(
            String::new()
        ))
        .is_err());
    }

    #[test]
    fn normalizes_volatile_tokens() {
        let n = normalize("i386 testbed  QEMU 7.2.22 TCG  clock=icount\ni386 testbed kernel 92c760b-dirty\nresults: x\nkeep  \n");
        assert_eq!(
            n,
            "i386 testbed  QEMU <version> TCG  clock=icount\ni386 testbed kernel <rev>\nkeep"
        );
    }

    #[test]
    fn quoted_words() {
        assert_eq!(
            words(r#"run --append "crash=overflow x=1" --no-save"#),
            ["run", "--append", "crash=overflow x=1", "--no-save"]
        );
    }
}
