//! What the kernel says when it breaks: exceptions, a panic, a triple
//! fault, a hang.

use abi::exit::Outcome;
use abi::report::kind;

use crate::machine::{BootLog, Ending};
use crate::report::Record;

use super::case::{Case, CASE};
use super::checks::{contains, one, outcome};

/// What the kernel says when it breaks, and a guest that hangs.
pub(super) const FAULTS: &[Case] = &[
    Case {
        name:
            "kernel stack overflow is reported by the #DF task, CR2 four bytes below the saved ESP",
        cmdline: "crash=overflow",
        check: |log, r| {
            outcome(log, Outcome::Exception(8))?;
            contains(log, "#DF double fault")?;
            contains(log, "kernel stack overflow")?;
            exception(r, 8, "kernel")?;
            // The push that crossed into the guard page faulted one word
            // below where ESP stood (docs/booting.md).
            let e = one(r, kind::EXCEPTION)?;
            let hex = |k: &str| {
                e.get(k)
                    .and_then(|v| u32::from_str_radix(v.trim_start_matches("0x"), 16).ok())
                    .ok_or(format!("the exception record's {k} is not a number"))
            };
            let (esp, cr2) = (hex("esp")?, hex("cr2")?);
            if cr2 != esp.wrapping_sub(4) {
                return Err(format!("CR2 {cr2:#x} is not four bytes below ESP {esp:#x}"));
            }
            Ok(())
        },
        ..CASE
    },
    Case {
        name: "kernel #BP is reported",
        cmdline: "crash=bp",
        check: |log, r| kernel_exception(log, r, 3),
        ..CASE
    },
    Case {
        name: "kernel #UD is reported",
        cmdline: "crash=ud",
        check: |log, r| kernel_exception(log, r, 6),
        ..CASE
    },
    Case {
        name: "kernel #DE is reported",
        cmdline: "crash=de",
        check: |log, r| kernel_exception(log, r, 0),
        ..CASE
    },
    Case {
        name: "kernel #PF is reported with CR2",
        cmdline: "crash=pf",
        check: kernel_pf_with_cr2,
        ..CASE
    },
    Case {
        name: "kernel panic prints its location and message",
        cmdline: "crash=panic",
        check: |log, _| {
            outcome(log, Outcome::Panic)?;
            contains(log, "kernel panic at kernel/src/main.rs")?;
            contains(log, "deliberate panic")
        },
        ..CASE
    },
    Case {
        name: "a triple fault is told apart from a verdict",
        cmdline: "crash=triple",
        check: triple_fault,
        ..CASE
    },
    Case {
        name: "a hung guest is killed at the timeout",
        cmdline: "mode=run",
        timeout: 2,
        // -S: the CPU never starts, the surest hang there is.
        paused: true,
        check: |log, _| timed_out(log, "hung"),
        ..CASE
    },
];

fn exception(r: &[Record], vector: u8, mode: &str) -> Result<(), String> {
    let e = one(r, kind::EXCEPTION)?;
    let v = vector.to_string();
    if e.get("vector") == Some(v.as_str()) && e.get("mode") == Some(mode) {
        for k in [
            "eip", "cs", "eflags", "eax", "ebx", "ecx", "edx", "esi", "edi", "ebp", "esp", "cr2",
        ] {
            if e.get(k).is_none() {
                return Err(format!("the exception record lacks {k}"));
            }
        }
        Ok(())
    } else {
        Err(format!("exception record {:?}", e.fields))
    }
}

fn kernel_exception(log: &BootLog, r: &[Record], vector: u8) -> Result<(), String> {
    outcome(log, Outcome::Exception(vector))?;
    contains(log, abi::exit::vector_name(vector))?;
    exception(r, vector, "kernel")
}

/// The kernel's deliberate #PF (`crash=pf`) reported, with the address it
/// touched in CR2.
pub(super) fn kernel_pf_with_cr2(log: &BootLog, r: &[Record]) -> Result<(), String> {
    kernel_exception(log, r, 14)?;
    match one(r, kind::EXCEPTION)?.get("cr2") {
        Some("0xc0000000") => Ok(()),
        other => Err(format!("CR2 is {other:?}, expected 0xc0000000")),
    }
}

/// A triple fault (`crash=triple`): the machine reset, and the verdict
/// says it was a triple fault rather than a kernel verdict.
pub(super) fn triple_fault(log: &BootLog, _: &[Record]) -> Result<(), String> {
    outcome(log, Outcome::ResetOrTripleFault)?;
    if !log.verdict().contains("triple fault") {
        return Err(log.verdict());
    }
    Ok(())
}

/// The guest was stopped at the timeout, and the verdict says `why`.
pub(super) fn timed_out(log: &BootLog, why: &str) -> Result<(), String> {
    match log.ending {
        Ending::TimedOut(_) if log.verdict().contains(why) => Ok(()),
        _ => Err(format!("not a timeout: {}", log.verdict())),
    }
}
