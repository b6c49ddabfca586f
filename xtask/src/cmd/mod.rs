//! One file per command; `main.rs` only dispatches. The boot flags that
//! `run`, `bench`, `trace` and `gdb` share are here, and become a
//! [`machine::Spec`] in one place.

pub mod bench;
pub mod build;
pub mod docs;
pub mod forktest;
pub mod fuzz;
pub mod gdb;
pub mod import;
pub mod iso;
pub mod lab;
pub mod lava;
pub mod layers;
pub mod lmbench;
pub mod modelspeed;
pub mod post;
pub mod run;
pub mod setup;
pub mod table;
pub mod test;
pub mod trace;

use std::time::Duration;

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};

use crate::machine::{self, bochs, qemu, AccelChoice, Clock};
use crate::model::{self, ModelOpts};
use crate::preflight;

/// Which emulator boots the kernel.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum)]
pub enum Emulator {
    /// QEMU (TCG or KVM), the kernel loaded directly or through GRUB.
    #[default]
    Qemu,
    /// Bochs, through the GRUB image; its TSC counts instructions.
    Bochs,
}

/// How to boot: shared by `run` and the tests.
#[derive(Args, Clone, Debug)]
pub struct BootArgs {
    /// The machine: QEMU, or Bochs (a second x86 implementation with real CPUs' CPUID).
    #[arg(long, value_enum, default_value = "qemu")]
    pub emulator: Emulator,
    /// QEMU's accelerator: auto picks KVM only when /dev/kvm opens and the host CPU has vmx or svm.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelChoice,
    /// CPU model. QEMU: default qemu32 under TCG, host under KVM; AMD models
    /// (athlon, phenom, ...) boot with qemu-system-x86_64 so SYSCALL is visible.
    /// Bochs: its model names (`bochs --help cpu`), default p4_prescott_celeron_336.
    #[arg(long)]
    pub cpu: Option<String>,
    /// Number of CPUs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub smp: u32,
    /// Extra kernel command-line words (key=value), appended last.
    #[arg(long, default_value = "")]
    pub append: String,
    /// Boot through GRUB (a Multiboot 2 image) instead of QEMU's -kernel (Bochs always does).
    #[arg(long)]
    pub grub: bool,
    /// Seconds before a hung guest is killed.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
    /// Clock for timed regions (default: icount under TCG, tsc under KVM and
    /// Bochs; `run` uses model under TCG).
    #[arg(long, value_enum)]
    pub clock: Option<Clock>,
    /// With --clock model: the CPU profile (model/profiles.toml; default: the
    /// one matching --cpu, e.g. pentium3 → p3, core2duo → core2, Penryn →
    /// penryn, Nehalem → nehalem, phenom → k10, qemu32 and recent Intel
    /// models → modern; else modern).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// With --clock model: model a guest under a hypervisor. `shadow` (the
    /// default of a bare `--virt`): shadow page tables, a VM exit on every
    /// CR3 write, invlpg and IPI send. `ept`: extended page tables, a VM exit
    /// on IPI sends only, and every TLB miss a two-dimensional walk (under
    /// k10, AMD's nested paging, which walks the same two dimensions).
    #[arg(long, value_enum, value_name = "PAGING", num_args = 0..=1, default_missing_value = "shadow")]
    pub virt: Option<VirtArg>,
    /// With --clock model: the kernel's identity-map pages are global in
    /// the model's TLB (the plugin's pge=on; this kernel sets no CR4.PGE).
    #[arg(long)]
    pub pge: bool,
    /// With several CPUs under icount (and the model): the interleaving
    /// grain in instructions, each CPU's turn while the others wait (the
    /// kernel's turn pacer); 0 leaves the interleaving to QEMU, whose CPU 1
    /// then runs only while CPU 0 waits. Default 10000.
    #[arg(long, value_name = "INSTRUCTIONS")]
    pub turn: Option<u32>,
    /// Under TCG, one host thread per CPU (`-accel tcg,thread=multi`): the
    /// CPUs truly in parallel, where races show. The clock is then the TSC
    /// (QEMU's icount, and with it the model, runs one CPU at a time).
    #[arg(long)]
    pub parallel: bool,
}

/// `--virt`'s value: how the hypervisor virtualises the guest's paging.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum VirtArg {
    /// Shadow page tables: CR3 writes and invlpg exit.
    Shadow,
    /// Extended page tables: no exit on either; two-dimensional TLB walks.
    Ept,
}

impl VirtArg {
    /// The model's name for it.
    pub fn model(v: Option<VirtArg>) -> model::Virt {
        match v {
            None => model::Virt::Off,
            Some(VirtArg::Shadow) => model::Virt::Shadow,
            Some(VirtArg::Ept) => model::Virt::Ept,
        }
    }
}

impl BootArgs {
    /// The machine these flags ask for; flags of the other emulator are refused.
    pub fn spec(&self) -> Result<machine::Spec> {
        let backend = match self.emulator {
            Emulator::Qemu => machine::BackendSpec::Qemu(qemu::Spec {
                threads: if self.parallel {
                    qemu::Threads::Multi
                } else {
                    qemu::Threads::Single
                },
                ..qemu::Spec::new(self.accel)
            }),
            Emulator::Bochs if self.parallel => {
                bail!("--parallel is QEMU's multi-threaded TCG; Bochs runs its CPUs in turn")
            }
            Emulator::Bochs if self.accel != AccelChoice::Auto => {
                bail!("--accel chooses QEMU's accelerator; Bochs has none (drop --accel with --emulator bochs)")
            }
            Emulator::Bochs => machine::BackendSpec::Bochs(bochs::Spec::default()),
        };
        Ok(machine::Spec {
            cpu: self.cpu.clone(),
            cpus: self.smp,
            clock: self.clock,
            grub: self.grub,
            turn: self.turn,
            append: self.append.clone(),
            model: (self.profile.is_some() || self.virt.is_some() || self.pge).then(|| match &self
                .profile
            {
                Some(p) => ModelOpts {
                    profile: p.clone(),
                    virt: VirtArg::model(self.virt),
                    pge: self.pge,
                    from_cpu: false,
                    reference: false,
                    shadow: false,
                },
                None => ModelOpts {
                    pge: self.pge,
                    ..ModelOpts::for_cpu(
                        self.cpu.as_deref().unwrap_or("qemu32"),
                        VirtArg::model(self.virt),
                    )
                },
            }),
            ..machine::Spec::new(backend, Duration::from_secs(self.timeout))
        })
    }

    /// Refuses what cannot boot before anything is built: model options
    /// without the model clock, a profile the model does not know.
    pub fn check(&self) -> Result<()> {
        crate::machine::refuse_host_words("--append", &self.append)?;
        self.check_for(Clock::Icount)
    }

    /// [`BootArgs::check`] for a command whose default clock, when
    /// `--clock` is not given, is `default`.
    pub fn check_for(&self, default: Clock) -> Result<()> {
        crate::machine::refuse_host_words("--append", &self.append)?;
        model::options_for(
            self.clock.unwrap_or(default),
            self.spec()?.model.as_ref(),
            self.cpu.as_deref().unwrap_or("qemu32"),
        )
        .map(|_| ())
    }

    /// What must be installed for these flags.
    pub fn need(&self) -> preflight::Need {
        if self.emulator == Emulator::Bochs {
            preflight::Need::Bochs
        } else if self.grub {
            preflight::Need::QemuAndGrub
        } else {
            preflight::Need::Qemu
        }
    }
}

/// Boot flags as the tests use them: TCG, the icount clock, `cpu` if given.
pub fn test_boot_args(cpu: Option<&str>) -> BootArgs {
    BootArgs {
        emulator: Emulator::Qemu,
        accel: AccelChoice::Tcg,
        cpu: cpu.map(str::to_string),
        smp: 1,
        append: String::new(),
        grub: false,
        timeout: 60,
        clock: Some(Clock::Icount),
        profile: None,
        virt: None,
        pge: false,
        turn: None,
        parallel: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_emulator_flag_chooses_the_backend() {
        let mut a = test_boot_args(None);
        assert!(matches!(
            a.spec().unwrap().backend,
            machine::BackendSpec::Qemu(_)
        ));
        assert_eq!(a.need(), preflight::Need::Qemu);
        a.emulator = Emulator::Bochs;
        // --accel is QEMU's: refused unless left at auto.
        assert!(a.spec().unwrap_err().to_string().contains("--accel"));
        a.accel = AccelChoice::Auto;
        assert!(matches!(
            a.spec().unwrap().backend,
            machine::BackendSpec::Bochs(_)
        ));
        assert_eq!(a.need(), preflight::Need::Bochs);
    }

    #[test]
    fn parallel_asks_for_a_host_thread_per_cpu() {
        let mut a = test_boot_args(None);
        let threads = |a: &BootArgs| match a.spec().unwrap().backend {
            machine::BackendSpec::Qemu(q) => q.threads,
            _ => panic!("not QEMU"),
        };
        assert_eq!(threads(&a), qemu::Threads::Single);
        a.parallel = true;
        assert_eq!(threads(&a), qemu::Threads::Multi);
        // Bochs runs its CPUs in turn: refused, not ignored.
        a.emulator = Emulator::Bochs;
        a.accel = AccelChoice::Auto;
        assert!(a.spec().unwrap_err().to_string().contains("--parallel"));
    }

    #[test]
    fn virt_is_shadow_paging_unless_ept_is_named() {
        use clap::Parser;
        #[derive(Parser)]
        struct Cli {
            #[command(flatten)]
            b: BootArgs,
        }
        let virt = |args: &[&str]| {
            let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()));
            cli.map(|c| c.b.spec().unwrap().model.map(|m| m.virt))
        };
        assert_eq!(virt(&[]).unwrap(), None);
        assert_eq!(virt(&["--virt"]).unwrap(), Some(model::Virt::Shadow));
        assert_eq!(
            virt(&["--virt", "--smp", "2"]).unwrap(),
            Some(model::Virt::Shadow)
        );
        assert_eq!(
            virt(&["--virt", "shadow"]).unwrap(),
            Some(model::Virt::Shadow)
        );
        assert_eq!(virt(&["--virt=ept"]).unwrap(), Some(model::Virt::Ept));
        assert_eq!(virt(&["--virt", "ept"]).unwrap(), Some(model::Virt::Ept));
        assert!(virt(&["--virt", "npt"]).is_err());
    }
}
