//! What a case is: one boot's machine, command line and check. The case
//! files (`basics.rs`, `smp.rs`, ...) build on this file, not on
//! `mod.rs`, which lists them.

use std::time::Duration;

use crate::cmd::Emulator;
use crate::machine::qemu::{self, Threads};
use crate::machine::{self, bochs, AccelChoice, BootLog};
use crate::report::Record;

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
pub(super) const CASE: Case = Case {
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

    /// The machine this case boots, its scratch files in `dir`.
    pub fn machine(
        &self,
        art: &crate::kbuild::Artifacts,
        dir: &std::path::Path,
    ) -> anyhow::Result<machine::Machine> {
        machine::Machine::build(&self.spec(), art, self.cmdline, dir)
    }
}
