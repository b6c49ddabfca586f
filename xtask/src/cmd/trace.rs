//! `cargo xtask trace`: one system call through a mechanism, explained step
//! by step by the kernel and the user program.

use anyhow::{bail, Result};
use clap::{Args, ValueEnum};

use super::BootArgs;
use crate::kbuild;
use crate::machine::{Machine, Scratch};
use crate::preflight;

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum MechArg {
    Int80,
    Sysenter,
    Callgate,
    Syscall,
}

impl MechArg {
    pub fn mechanism(self) -> abi::Mechanism {
        match self {
            MechArg::Int80 => abi::Mechanism::Int80,
            MechArg::Sysenter => abi::Mechanism::Sysenter,
            MechArg::Callgate => abi::Mechanism::CallGate,
            MechArg::Syscall => abi::Mechanism::Syscall,
        }
    }
}

#[derive(Args)]
pub struct TraceArgs {
    /// The entry mechanism to trace.
    #[arg(value_enum)]
    pub mechanism: MechArg,
    #[command(flatten)]
    pub boot: BootArgs,
}

/// The lines of a trace boot worth showing: the user's and the kernel's
/// narration, not the banner and the machine records.
pub fn trace_lines(serial: &str) -> Vec<String> {
    serial
        .lines()
        .filter(|l| {
            [
                "user: ",
                "kernel: ",
                "cpu: ",
                "stub: ",
                "dispatch: ",
                "return: ",
                "       [",
            ]
            .iter()
            .any(|p| l.starts_with(p))
                && !l.starts_with("cpu: GenuineIntel")
                && !l.starts_with("cpu: AuthenticAMD")
        })
        .map(str::to_string)
        .collect()
}

/// Boots with `trace=<mechanism>` and returns the narration.
pub fn trace_output(a: &TraceArgs) -> Result<Vec<String>> {
    preflight::ensure(a.boot.need())?;
    let art = kbuild::build(true)?;
    let mut boot_args = a.boot.clone();
    // The AMD path needs an AMD model (under QEMU, qemu-system-x86_64,
    // chosen by model).
    if a.mechanism == MechArg::Syscall && boot_args.cpu.is_none() {
        boot_args.cpu = Some(
            match boot_args.emulator {
                super::Emulator::Qemu => "phenom",
                super::Emulator::Bochs => "amd_k6_2_chomper",
            }
            .into(),
        );
    }
    let words = format!("mode=run trace={}", a.mechanism.mechanism().key());
    let scratch = Scratch::new("trace")?;
    let m = Machine::build(&boot_args.spec()?, &art, &words, scratch.path())?;
    let log = m.boot(&mut |_| {})?;
    if !log.succeeded() {
        bail!("the trace boot failed: {}", log.explain(20));
    }
    Ok(trace_lines(&log.serial))
}

pub fn trace(a: TraceArgs) -> Result<i32> {
    for l in trace_output(&a)? {
        println!("{l}");
    }
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trace_lines_keep_the_narration() {
        let log = "i386 testbed kernel abc\ncpu: GenuineIntel \"QEMU\"\n@@tb1 end status=success\nuser: before\nkernel: entered\n       [0x1] SS = 0x23\ncpu: pushed\nreturn: iret\n";
        assert_eq!(
            trace_lines(log),
            [
                "user: before",
                "kernel: entered",
                "       [0x1] SS = 0x23",
                "cpu: pushed",
                "return: iret"
            ]
        );
    }
}
