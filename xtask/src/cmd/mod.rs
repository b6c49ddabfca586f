//! One file per command; `main.rs` only dispatches. The boot flags that
//! `run`, `bench`, `trace` and `gdb` share are here, and become a
//! [`machine::Spec`] in one place.

pub mod bench;
pub mod build;
pub mod docs;
pub mod gdb;
pub mod import;
pub mod iso;
pub mod run;
pub mod setup;
pub mod table;
pub mod test;
pub mod trace;

use std::time::Duration;

use clap::Args;

use anyhow::Result;

use crate::machine::{self, qemu, AccelChoice, Clock};
use crate::model::{self, ModelOpts};
use crate::preflight;

/// How to boot: shared by `run` and the tests.
#[derive(Args, Clone, Debug)]
pub struct BootArgs {
    /// Accelerator: auto picks KVM only when /dev/kvm opens and the host CPU has vmx or svm.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelChoice,
    /// QEMU CPU model (default: qemu32 under TCG, host under KVM). AMD models
    /// (athlon, phenom, ...) boot with qemu-system-x86_64 so SYSCALL is visible.
    #[arg(long)]
    pub cpu: Option<String>,
    /// Number of CPUs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub smp: u32,
    /// Extra kernel command-line words (key=value), appended last.
    #[arg(long, default_value = "")]
    pub append: String,
    /// Boot through GRUB (a Multiboot 2 image) instead of QEMU's -kernel.
    #[arg(long)]
    pub grub: bool,
    /// Seconds before a hung guest is killed.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
    /// Clock for timed regions (default: icount under TCG, tsc under KVM).
    #[arg(long, value_enum)]
    pub clock: Option<Clock>,
    /// With --clock model: the CPU profile (model/profiles.toml; default modern).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// With --clock model: add a VM exit's cost to CR3 writes and invlpg.
    #[arg(long)]
    pub virt: bool,
}

impl BootArgs {
    /// The machine these flags ask for.
    pub fn spec(&self) -> machine::Spec {
        machine::Spec {
            cpu: self.cpu.clone(),
            cpus: self.smp,
            clock: self.clock,
            grub: self.grub,
            append: self.append.clone(),
            model: (self.profile.is_some() || self.virt).then(|| ModelOpts {
                profile: self
                    .profile
                    .clone()
                    .unwrap_or_else(|| model::DEFAULT_PROFILE.into()),
                virt: self.virt,
            }),
            ..machine::Spec::new(
                machine::BackendSpec::Qemu(qemu::Spec::new(self.accel)),
                Duration::from_secs(self.timeout),
            )
        }
    }

    /// Refuses what cannot boot before anything is built: model options
    /// without the model clock, a profile the model does not know.
    pub fn check(&self) -> Result<()> {
        model::options_for(
            self.clock.unwrap_or(Clock::Icount),
            self.spec().model.as_ref(),
        )
        .map(|_| ())
    }

    /// What must be installed for these flags.
    pub fn need(&self) -> preflight::Need {
        if self.grub {
            preflight::Need::QemuAndGrub
        } else {
            preflight::Need::Qemu
        }
    }
}

/// Boot flags as the tests use them: TCG, the icount clock, `cpu` if given.
pub fn test_boot_args(cpu: Option<&str>) -> BootArgs {
    BootArgs {
        accel: AccelChoice::Tcg,
        cpu: cpu.map(str::to_string),
        smp: 1,
        append: String::new(),
        grub: false,
        timeout: 60,
        clock: Some(Clock::Icount),
        profile: None,
        virt: false,
    }
}
