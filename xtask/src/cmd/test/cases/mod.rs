//! The boots of `cargo xtask test`: each a machine (typed settings, no
//! emulator arguments), a command line, and what the kernel must print.
//!
//! The cases by subject: `smp` (several CPUs), `basics` (one CPU under
//! QEMU: tests, records, path lengths, the table, GRUB, the command line),
//! `faults`, `matrix` (every CPU model), `procs` (processes), `lmbench`, `fuzz` and
//! `bochs_boots`; `checks`
//! holds what many of them ask of a boot.

use crate::cmd::Emulator;
use crate::machine;
use crate::report;

mod basics;
pub(crate) use basics::PATH_LENGTH_LIMITS;
mod case;
pub use case::Case;
use case::CASE;
mod bochs_boots;
mod checks;
mod faults;
mod fuzz;
mod lmbench;
mod matrix;
mod procs;
mod smp;
#[cfg(test)]
mod tests;

use basics::BASICS;
use bochs_boots::{BOCHS, BOCHS_TIMEOUT};
use checks::{all_tests_pass, BOCHS_TSC, ICOUNT};
use faults::FAULTS;
use fuzz::FUZZ;
use lmbench::LMBENCH;
use matrix::{hostile_all_expected, MATRIX};
use procs::PROCS;
use smp::{smp_check_on, SMP};
pub(crate) use smp::{LATE_AP, SOAK};

/// Every case, in the order the QEMU boots run.
pub fn all() -> impl Iterator<Item = &'static Case> {
    [SMP, BASICS, FAULTS, MATRIX, PROCS, LMBENCH, FUZZ, BOCHS]
        .into_iter()
        .flatten()
}

/// The case that boots `cpu` alone in test mode under `emulator` (no more
/// on its command line than its `pmap=`/`fork=` pair), if one does: the
/// CPU matrix's table reads that case's boot rather than booting the same
/// model's tests a second time.
pub fn test_mode_on(emulator: Emulator, cpu: &str) -> Option<&'static Case> {
    all().find(|c| {
        let mut words = c.cmdline.split_ascii_whitespace();
        c.emulator == emulator
            && c.cpu == Some(cpu)
            && c.cpus == 1
            && c.threads == machine::qemu::Threads::Single
            && !c.paused
            && !c.grub
            && !c.twice
            && c.repeat == 1
            && words.next() == Some("mode=test")
            && words.all(|w| w.starts_with("pmap=") || w.starts_with("fork="))
    })
}

/// A boot asked for on the command line (`cargo xtask test --emulator E
/// --cpu MODEL --smp N`): `mode=test` must pass every test and the hostile
/// suite, `mode=smp` must start `cpus` CPUs and pass the SMP checks.
pub fn model_case(
    emulator: Emulator,
    cpu: Option<&str>,
    cpus: u32,
    cmdline: &str,
    art: &crate::kbuild::Artifacts,
    dir: &std::path::Path,
) -> Result<(), String> {
    let base = Case {
        emulator,
        cpus,
        timeout: BOCHS_TIMEOUT,
        ..CASE
    };
    let spec = machine::Spec {
        cpu: cpu.map(str::to_string),
        ..base.spec()
    };
    let m = machine::Machine::build(&spec, art, cmdline, dir).map_err(|e| format!("{e:#}"))?;
    let log = m.boot(&mut |_| {}).map_err(|e| format!("{e:#}"))?;
    let r = report::parse_log(&log.serial).map_err(|e| e.to_string())?;
    let checked = if cmdline == "mode=smp" {
        let (clock, note) = match emulator {
            Emulator::Qemu => (ICOUNT, "TCG does not model caches"),
            Emulator::Bochs => (BOCHS_TSC, "Bochs does not model caches"),
        };
        smp_check_on(&log, &r, &cpus.to_string(), clock, note)
    } else {
        all_tests_pass(&log, &r, 20).and_then(|()| hostile_all_expected(&log, &r))
    };
    checked.map_err(|e| format!("{e}\n{}", log.explain(20)))
}
