//! The boots of `cargo xtask test`: each a machine (typed settings, no
//! emulator arguments), a command line, and what the kernel must print.
//!
//! The cases by subject: `smp` (several CPUs), `basics` (one CPU under
//! QEMU: tests, records, path lengths, the table, GRUB, the command line),
//! `faults`, `matrix` (every CPU model), `procs` (processes), `lmbench`, `fuzz` and
//! `bochs_boots`; `checks`
//! holds what many of them ask of a boot.

use std::time::Duration;

use crate::cmd::Emulator;
use crate::machine::qemu::{self, Threads};
use crate::machine::{self, bochs, AccelChoice, BootLog};
use crate::report::{self, Record};

mod basics;
pub(crate) use basics::PATH_LENGTH_LIMITS;
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

pub type Check = fn(&BootLog, &[Record]) -> Result<(), String>;

/// One boot and what it must show. A QEMU case boots under TCG with the
/// backend's default clock: icount, or the TSC when the CPUs run in
/// parallel (`threads: Threads::Multi`), which -icount cannot. A Bochs
/// case boots the GRUB image with the TSC (1 tick = 1 instruction).
pub struct Case {
    pub name: &'static str,
    /// The machine: QEMU or Bochs.
    pub emulator: Emulator,
    /// The kernel command line (`clock=` and `accel=` are added).
    pub cmdline: &'static str,
    /// CPU model (QEMU's or Bochs's names); `None`: the backend's default.
    pub cpu: Option<&'static str>,
    /// Number of CPUs.
    pub cpus: u32,
    /// How TCG runs the CPUs (QEMU only).
    pub threads: Threads,
    /// Start with the CPUs stopped: the surest hang there is (QEMU only).
    pub paused: bool,
    /// Boot through a GRUB image whose only entry has this command line.
    pub grub: bool,
    /// Seconds before the guest is called hung.
    pub timeout: u64,
    pub check: Check,
    /// Boot a second time and require identical results (timestamps aside).
    pub twice: bool,
    /// Boot this many times, each boot checked (races that show once in a
    /// while); `cargo xtask test --repeat-boots N` sets it for every case
    /// that repeats.
    pub repeat: u32,
}

/// What a case is unless it says otherwise: one CPU of the default model,
/// booted directly, 60 s.
const CASE: Case = Case {
    name: "",
    emulator: Emulator::Qemu,
    cmdline: "",
    cpu: None,
    cpus: 1,
    threads: Threads::Single,
    paused: false,
    grub: false,
    timeout: 60,
    check: |_, _| Err("the case has no check".into()),
    twice: false,
    repeat: 1,
};

/// How often the multi-threaded TCG boot of the cross-CPU tests repeats in
/// `cargo xtask test`: what fits the CI's time; `--repeat-boots 20` runs
/// the twenty.
pub const REPEATED_BOOTS: u32 = 5;

impl Case {
    /// The machine this case asks for.
    pub fn spec(&self) -> machine::Spec {
        let backend = match self.emulator {
            Emulator::Qemu => machine::BackendSpec::Qemu(qemu::Spec {
                accel: AccelChoice::Tcg,
                threads: self.threads,
                paused: self.paused,
            }),
            Emulator::Bochs => machine::BackendSpec::Bochs(bochs::Spec::default()),
        };
        machine::Spec {
            cpu: self.cpu.map(str::to_string),
            cpus: self.cpus,
            grub: self.grub,
            ..machine::Spec::new(backend, Duration::from_secs(self.timeout))
        }
    }
}

/// Every case, in the order the QEMU boots run.
pub fn all() -> impl Iterator<Item = &'static Case> {
    [SMP, BASICS, FAULTS, MATRIX, PROCS, LMBENCH, FUZZ, BOCHS]
        .into_iter()
        .flatten()
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
