//! The teaching tools' own checks for `cargo xtask test`: a trace of each
//! mechanism, gdb stopping at an entry stub, and the exercises (kernels built
//! without one piece of entry hygiene, and what their test boots then show).

use std::process::Command;
use std::time::Duration;

use crate::cmd::trace::{trace_output, MechArg, TraceArgs};
use crate::kbuild;
use crate::machine::{self, qemu, BootLog, Ending, Machine};
use crate::preflight;

/// An exercise: a kernel feature that removes one piece of entry hygiene,
/// and what a test boot then shows (docs/exercises.md asks the question).
pub struct Exercise {
    pub feature: &'static str,
    pub question: &'static str,
    pub check: fn(&BootLog, &[crate::report::Record]) -> Result<(), String>,
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

/// Seconds an exercise boot may take.
const EXERCISE_TIMEOUT: Duration = Duration::from_secs(60);

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
                let spec = machine::Spec::new(
                    machine::BackendSpec::Qemu(qemu::Spec::new(machine::AccelChoice::Tcg)),
                    EXERCISE_TIMEOUT,
                );
                let log = Machine::build(&spec, &art, "mode=test", &dest)
                    .and_then(|m| m.boot(&mut |_| {}))
                    .map_err(|err| format!("{err:#}"))?;
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
            boot: crate::cmd::test_boot_args(cpu),
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
    if wanted(&name) {
        let r = preflight::ensure_gdb()
            .map_err(|e| format!("{}no gdb here: {e:#}", super::SKIP))
            .and_then(|()| gdb_batch_output())
            .and_then(|text| {
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
