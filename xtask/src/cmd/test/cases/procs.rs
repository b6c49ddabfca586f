//! Processes: the `procs` program's cases under every `pmap=` strategy and
//! both `fork=` modes on 1, 2 and 4 CPUs (24 boots), the kernel's leak test (10,000
//! fork/exit/wait rounds, every frame and page back), and the forktest
//! figure on 1 and 2 CPUs.

use abi::report::{kind, names, Measure};

use crate::machine::BootLog;
use crate::report::{self, Record};
use crate::results::Results;

use super::checks::{all_tests_pass, clock_is, contains, has_bench, succeeded, ICOUNT};
use super::{Case, CASE};

/// A `procs` boot: every case passed, as the program counts them.
fn procs_pass(log: &BootLog, _: &[Record]) -> Result<(), String> {
    succeeded(log)?;
    if let Some(l) = log.serial.lines().find(|l| l.starts_with("procs: FAIL")) {
        return Err(l.to_string());
    }
    contains(log, "procs: 20 passed, 0 failed")
}

/// The kernel's process tests: the cases and the leak test ran and passed.
fn leaks_pass(log: &BootLog, r: &[Record]) -> Result<(), String> {
    succeeded(log)?;
    all_tests_pass(log, r, 2)?;
    let names: Vec<&str> = report::of_kind(r, kind::TEST)
        .filter_map(|t| t.get("name"))
        .collect();
    for want in ["user: processes", "processes: 10,000 fork/exit/wait rounds"] {
        if !names.iter().any(|n| n.starts_with(want)) {
            return Err(format!("no test {want:?} ran: {names:?}"));
        }
    }
    Ok(())
}

/// A forktest boot: `forktest.fork_exit` with its samples, per round, on
/// the CPUs `cpus` names.
fn forktest_figure(log: &BootLog, r: &[Record], cpus: &[u32]) -> Result<(), String> {
    succeeded(log)?;
    let res = Results::from_records(r, "forktest", "qemu").map_err(|e| e.to_string())?;
    clock_is(&res, ICOUNT)?;
    has_bench(&res, names::FORKTEST_FORK_EXIT, 8, Measure::PerOp)?;
    let b = res.bench(names::FORKTEST_FORK_EXIT).expect("checked above");
    if b.cpus != cpus {
        return Err(format!(
            "forktest ran on CPUs {:?}, expected {cpus:?}",
            b.cpus
        ));
    }
    Ok(())
}

macro_rules! procs_case {
    ($cpus:expr, $pmap:literal, $fork:literal) => {
        Case {
            name: concat!(
                "processes on ",
                stringify!($cpus),
                " CPU(s), pmap=",
                $pmap,
                " fork=",
                $fork,
                ": fork through every mechanism, private writes, exit status, WNOHANG, ECHILD and EFAULT, a faulting child, orphans to pid 1, fork with threads, sbrk, a fork bomb"
            ),
            cmdline: concat!("mode=run prog=procs pmap=", $pmap, " fork=", $fork),
            cpus: $cpus,
            timeout: 60,
            check: procs_pass,
            ..CASE
        }
    };
}

pub(super) const PROCS: &[Case] = &[
    procs_case!(1, "apte", "copy"),
    procs_case!(1, "apte", "cow"),
    procs_case!(1, "cr3", "copy"),
    procs_case!(1, "cr3", "cow"),
    procs_case!(1, "window", "copy"),
    procs_case!(1, "window", "cow"),
    procs_case!(1, "direct", "copy"),
    procs_case!(1, "direct", "cow"),
    procs_case!(2, "apte", "copy"),
    procs_case!(2, "apte", "cow"),
    procs_case!(2, "cr3", "copy"),
    procs_case!(2, "cr3", "cow"),
    procs_case!(2, "window", "copy"),
    procs_case!(2, "window", "cow"),
    procs_case!(2, "direct", "copy"),
    procs_case!(2, "direct", "cow"),
    procs_case!(4, "apte", "copy"),
    procs_case!(4, "apte", "cow"),
    procs_case!(4, "cr3", "copy"),
    procs_case!(4, "cr3", "cow"),
    procs_case!(4, "window", "copy"),
    procs_case!(4, "window", "cow"),
    procs_case!(4, "direct", "copy"),
    procs_case!(4, "direct", "cow"),
    Case {
        name: "processes: 10,000 fork/exit/wait rounds leave every frame and page where they were (1 CPU, pmap=apte fork=cow)",
        cmdline: "mode=test test=processes pmap=apte fork=cow",
        timeout: 120,
        check: leaks_pass,
        ..CASE
    },
    Case {
        name: "processes: 10,000 fork/exit/wait rounds leave every frame and page where they were (2 CPUs, pmap=cr3 fork=copy)",
        cmdline: "mode=test test=processes pmap=cr3 fork=copy",
        cpus: 2,
        timeout: 120,
        check: leaks_pass,
        ..CASE
    },
    Case {
        name: "forktest: forktest.fork_exit with its samples (1 CPU, 8 pages, 8 batches)",
        cmdline: "mode=run prog=forktest fork_pages=8 batches=8",
        check: |log, r| forktest_figure(log, r, &[0]),
        ..CASE
    },
    Case {
        name: "forktest on 2 CPUs: one forking parent per CPU, the figure names both (pmap=apte, shootdowns)",
        cmdline: "mode=run prog=forktest fork_pages=8 batches=8 pmap=apte",
        cpus: 2,
        check: |log, r| forktest_figure(log, r, &[0, 1]),
        ..CASE
    },
];
