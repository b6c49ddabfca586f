//! The CPU matrix: test mode on every i386 model QEMU has, and what a
//! model's boot must show (its features, the hostile suite).

use abi::report::kind;

use crate::machine::BootLog;
use crate::report::{self, Record};

use super::case::{Case, CASE};
use super::checks::{all_tests_pass, contains, end, mech, one, succeeded};

/// A CPU-matrix boot of an Intel family-6 model with SEP and no AMD
/// syscall, in test mode under one `pmap=`/`fork=` pair.
macro_rules! intel_family6 {
    ($cpu:literal, $also:literal, $settings:literal) => {
        Case {
            name: concat!(
                "cpu matrix: ",
                $cpu,
                $also,
                ": tests and the hostile suite (",
                $settings,
                ")"
            ),
            cpu: Some($cpu),
            cmdline: concat!("mode=test ", $settings),
            check: |log, r| {
                matrix(
                    log,
                    r,
                    "GenuineIntel",
                    "6",
                    ["ok", "ok", "ok", "unavailable"],
                )
            },
            ..CASE
        }
    };
}

pub(super) const MATRIX: &[Case] = &[
    // The CPU matrix: test mode on every i386 model QEMU has (qemu32,
    // pentium and phenom are the test boots above). Correct means the
    // features detected, unavailable mechanisms skipped with a reason, the
    // hostile suite all as expected, no crash. Each model boots under its
    // own `pmap=`/`fork=` pair, so that with qemu32's, pentium's and
    // phenom's the eight pairs each pass the tests on one CPU without a
    // boot of their own (`tests::every_pmap_and_fork_on_1_and_2_cpus`).
    // The fuzzer boots follow.
    Case {
        name: "cpu matrix: 486 (no TSC, no SEP): tests and the hostile suite (pmap=cr3 fork=cow)",
        cpu: Some("486"),
        cmdline: "mode=test pmap=cr3 fork=cow",
        check: |log, r| {
            matrix(
                log,
                r,
                "GenuineIntel",
                "4",
                ["ok", "unavailable", "ok", "unavailable"],
            )?;
            match one(r, kind::CPU)?.get("tsc") {
                Some("false") => Ok(()),
                other => Err(format!("the 486 model reports tsc={other:?}")),
            }
        },
        ..CASE
    },
    Case {
        name: "cpu matrix: 486 runs the benchmark program, which says it cannot time",
        cpu: Some("486"),
        cmdline: "mode=run prog=bench",
        check: |log, r| {
            succeeded(log)?;
            contains(log, "no TSC")?;
            end(r, "success")
        },
        ..CASE
    },
    intel_family6!("pentium2", " (SEP)", "pmap=apte fork=copy"),
    intel_family6!("pentium3", "", "pmap=window fork=cow"),
    intel_family6!("coreduo", "", "pmap=direct fork=copy"),
    intel_family6!("core2duo", "", "pmap=direct fork=cow"),
];

/// A CPU-matrix boot in test mode: every test passed, the CPU record has
/// this vendor and family, the mechanisms (int80, sysenter, callgate,
/// syscall) have these statuses and each unavailable one a reason, and the
/// hostile suite ran whole and all as expected.
pub(super) fn matrix(
    log: &BootLog,
    r: &[Record],
    vendor: &str,
    family: &str,
    mechs: [&str; 4],
) -> Result<(), String> {
    all_tests_pass(log, r, hostile_runnable(r))?;
    let c = one(r, kind::CPU)?;
    if c.get("vendor") != Some(vendor) || c.get("family") != Some(family) {
        return Err(format!(
            "cpu record {:?} family {:?}, expected {vendor} family {family}",
            c.get("vendor"),
            c.get("family")
        ));
    }
    for (m, status) in abi::Mechanism::ALL.iter().zip(mechs) {
        mech(r, m.key(), status)?;
    }
    for m in report::of_kind(r, kind::MECH) {
        if m.get("status") == Some("unavailable") && m.get("reason").unwrap_or("").is_empty() {
            return Err(format!(
                "{:?} is unavailable without a reason",
                m.get("name")
            ));
        }
    }
    hostile_all_expected(log, r)?;
    selectors_16bit(log)
}

/// Every register dump shows segment registers as 16-bit selectors
/// (`CS 0x001b`, `DS 0x0023 ES 0x0023`): the CPU need not write the upper
/// half of the 32-bit slot it saves one in, so printing the slot would show
/// whatever was there before (Bochs left `ES 0x40000023`).
pub(super) fn selectors_16bit(log: &BootLog) -> Result<(), String> {
    for line in log.serial.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.windows(2) {
            let is_dump = matches!(pair[0], "CS" | "DS" | "ES") && pair[1].starts_with("0x");
            if is_dump && pair[1].len() != "0x0000".len() {
                return Err(format!(
                    "a register dump shows {} {}: not a 16-bit selector",
                    pair[0], pair[1]
                ));
            }
        }
    }
    Ok(())
}

/// The hostile suite ran on CPU `cpu` (with several CPUs, the last: an AP)
/// and every case there came out as expected, the skipped ones counted.
pub(super) fn hostile_on(r: &[Record], cpu: u32) -> Result<(), String> {
    let h = one(r, kind::HOSTILE)?;
    let n = abi::cases::FAULT_CASES.len().to_string();
    if h.get("cpu") != Some(cpu.to_string().as_str()) || h.get("expected") != Some(n.as_str()) {
        return Err(format!(
            "hostile suite: {:?}, expected {n} of {n} on CPU {cpu}",
            h.fields
        ));
    }
    skipped_as_the_mechanisms_say(r, h)
}

/// The hostile suite's summary: every case of the table ran, all as
/// expected, the skipped ones counted.
pub(super) fn hostile_all_expected(log: &BootLog, r: &[Record]) -> Result<(), String> {
    let h = one(r, kind::HOSTILE)?;
    let n = abi::cases::FAULT_CASES.len().to_string();
    if h.get("cases") != Some(n.as_str()) || h.get("expected") != Some(n.as_str()) {
        return Err(format!(
            "hostile suite: {:?}, expected {n} of {n}",
            h.fields
        ));
    }
    skipped_as_the_mechanisms_say(r, h)?;
    contains(log, &format!("hostile: {n} cases, {n} as expected"))
}

/// The mechanism a hostile case needs, where it needs one: a case whose
/// mechanism this CPU lacks exits as skipped (`faults`), and the kernel
/// counts it among the cases "as expected".
fn needs(act: abi::cases::Act) -> Option<abi::Mechanism> {
    use abi::cases::Act;
    use abi::Mechanism;
    match act {
        Act::TfBefore(m)
        | Act::FlagBefore(m, _)
        | Act::BadEsp(m, _)
        | Act::DataSegments(m, _)
        | Act::TfWith(m, _)
        | Act::Floor(m, _) => Some(m),
        Act::SsBefore { mech, .. } => Some(mech),
        Act::Sysenter(_) | Act::TfSysenter(_) => Some(Mechanism::Sysenter),
        Act::SyscallEsp(_) | Act::TfSyscallEsp(_) | Act::TfSyscallStackTop => {
            Some(Mechanism::Syscall)
        }
        _ => None,
    }
}

/// The suite's `skipped` count is exactly the cases whose mechanism the
/// boot's `mech` records call unavailable: a case skipped for another
/// reason, or one that ran where it should have skipped, fails.
fn skipped_as_the_mechanisms_say(r: &[Record], h: &Record) -> Result<(), String> {
    let unavailable = unavailable(r);
    let want = (abi::cases::FAULT_CASES.len() - hostile_runnable(r)).to_string();
    if h.get("skipped") != Some(want.as_str()) {
        return Err(format!(
            "hostile suite: {:?} skipped, expected {want} (the cases of the unavailable mechanisms {unavailable:?})",
            h.get("skipped")
        ));
    }
    Ok(())
}

/// The mechanisms the boot's `mech` records call unavailable.
fn unavailable(r: &[Record]) -> Vec<String> {
    report::of_kind(r, kind::MECH)
        .filter(|m| m.get("status") == Some("unavailable"))
        .filter_map(|m| m.get("name").map(str::to_string))
        .collect()
}

/// The hostile cases this boot can run: every case but those whose
/// mechanism the `mech` records call unavailable. Each is a kernel test
/// that must pass (a skipped one is not among them).
pub(super) fn hostile_runnable(r: &[Record]) -> usize {
    let unavailable = unavailable(r);
    abi::cases::FAULT_CASES
        .iter()
        .filter(|c| !needs(c.act).is_some_and(|m| unavailable.iter().any(|u| u == m.key())))
        .count()
}
