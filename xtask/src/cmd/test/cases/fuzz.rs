//! The system-call fuzzer's boots, and what a clean run prints.

use abi::report::kind;

use crate::machine::BootLog;
use crate::report::Record;

use super::case::{Case, CASE};
use super::checks::{end, one, succeeded};

pub(super) const FUZZ: &[Case] = &[
    Case {
        name: "fuzzer: 50,000 seeded calls (seed=7), every result right, 0 kernel faults",
        cmdline: "mode=run prog=fuzz fuzz_calls=50000 seed=7",
        check: |log, r| fuzz_clean(log, r, 50_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on 486: 20,000 calls through int 0x80 and the call gate",
        cpu: Some("486"),
        cmdline: "mode=run prog=fuzz fuzz_calls=20000 seed=9",
        check: |log, r| fuzz_clean(log, r, 20_000, &["int80", "callgate"]),
        ..CASE
    },
    // The fuzzer on the rest of the CPU matrix, short (5,000 calls, every
    // system call, a crowd round of helper threads among them).
    Case {
        name: "fuzzer on pentium (no SEP): 5,000 calls",
        cpu: Some("pentium"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=11",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on pentium2: 5,000 calls",
        cpu: Some("pentium2"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=12",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on pentium3: 5,000 calls",
        cpu: Some("pentium3"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=13",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on coreduo: 5,000 calls",
        cpu: Some("coreduo"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=14",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on core2duo: 5,000 calls",
        cpu: Some("core2duo"),
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=15",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer with 2 CPUs: 5,000 calls",
        cpus: 2,
        cmdline: "mode=run prog=fuzz fuzz_calls=5000 seed=16",
        check: |log, r| fuzz_clean(log, r, 5_000, &["int80", "sysenter", "callgate"]),
        ..CASE
    },
    Case {
        name: "fuzzer on phenom: 20,000 calls, AMD syscall among the mechanisms",
        cpu: Some("phenom"),
        cmdline: "mode=run prog=fuzz fuzz_calls=20000 seed=8",
        check: |log, r| {
            fuzz_clean(
                log,
                r,
                20_000,
                &["int80", "sysenter", "callgate", "syscall"],
            )
        },
        ..CASE
    },
];

/// A fuzzer boot: success, the fuzz record says `calls` calls, no
/// failure, and each of `mechs` was used.
pub(super) fn fuzz_clean(
    log: &BootLog,
    r: &[Record],
    calls: u32,
    mechs: &[&str],
) -> Result<(), String> {
    succeeded(log)?;
    let f = one(r, kind::FUZZ)?;
    let calls = calls.to_string();
    if f.get("calls") != Some(calls.as_str()) || f.get("failures") != Some("0") {
        return Err(format!("fuzz record {:?}", f.fields));
    }
    for m in mechs {
        if f.get(m).unwrap_or("0") == "0" {
            return Err(format!("the fuzzer never used {m}: {:?}", f.fields));
        }
    }
    if f.get("flagged").unwrap_or("0") == "0" {
        return Err("no call entered with DF, AC or NT set".into());
    }
    // Several threads: helpers ran their calls, and the pool was filled.
    counted(f, &["helpers", "helper_calls", "exhausted"], "the fuzzer's")?;
    // The record came through the record call, tagged with the program.
    from_fuzzer(f, "fuzz")?;
    end(r, "success")
}

/// A boot of the fuzzer's threads phase (`fuzz_threads=calls`, no other
/// calls) on `cpus` CPUs: success; the `fuzz_threads` record says `calls`
/// calls, no failure, no cross-pipe or torn byte, no message left
/// untraced, messages traced, forks made, workers on every CPU; and the
/// kernel's own counts in the task's record: every frame and user page in
/// use after the task that was in use before it, no pipe left open.
pub(super) fn fuzz_threads_clean(
    log: &BootLog,
    r: &[Record],
    calls: u32,
    cpus: u32,
) -> Result<(), String> {
    succeeded(log)?;
    let f = one(r, kind::FUZZ_THREADS)?;
    let calls = calls.to_string();
    let mask = ((1u32 << cpus) - 1).to_string();
    let want = [
        ("calls", calls.as_str()),
        ("failures", "0"),
        ("cross", "0"),
        ("torn", "0"),
        ("unresolved", "0"),
        ("cpu_mask", mask.as_str()),
    ];
    for (k, v) in want {
        if f.get(k) != Some(v) {
            return Err(format!(
                "fuzz_threads record: {k} is {:?}, expected {v}: {:?}",
                f.get(k),
                f.fields
            ));
        }
    }
    // The race moved bytes and forked: a phase of EBADF alone proves nothing.
    counted(
        f,
        &["checked", "fork", "pipe", "dup2", "sbrk"],
        "the threads phase's",
    )?;
    from_fuzzer(f, "fuzz_threads")?;
    let task = one(r, kind::TASK)?;
    let count = |k: &str| {
        task.get(k)
            .ok_or_else(|| format!("the task record has no {k}: {:?}", task.fields))
    };
    if count("frames_before")? != count("frames_after")?
        || count("pages_before")? != count("pages_after")?
    {
        return Err(format!(
            "frames or user pages were left in use after the task: {:?}",
            task.fields
        ));
    }
    if count("pipes_left")? != "0" {
        return Err(format!("the task left pipes open: {:?}", task.fields));
    }
    if one(r, kind::FUZZ)?.get("failures") != Some("0") {
        return Err("the fuzz record says failures".into());
    }
    end(r, "success")
}

/// Each of `keys` in the record `f` is above 0 (`whose` names the record's
/// writer in the error).
fn counted(f: &Record, keys: &[&str], whose: &str) -> Result<(), String> {
    match keys.iter().find(|k| f.get(k).unwrap_or("0") == "0") {
        Some(k) => Err(format!("{whose} {k} is 0: {:?}", f.fields)),
        None => Ok(()),
    }
}

/// The record `f` (of kind `kind`) came through the record call, tagged
/// with the fuzzer.
fn from_fuzzer(f: &Record, kind: &str) -> Result<(), String> {
    if f.get(abi::report::KEY_PROG) != Some("fuzz") {
        return Err(format!(
            "the {kind} record is not tagged prog=fuzz: {:?}",
            f.fields
        ));
    }
    Ok(())
}
