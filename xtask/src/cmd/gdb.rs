//! `cargo xtask gdb`: QEMU paused with a gdb stub, and gdb with the kernel's
//! and the user program's symbols and a breakpoint on every entry stub.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::BootArgs;
use crate::kbuild;
use crate::machine::{qemu, Backend, Machine};
use crate::preflight;

#[derive(Args)]
pub struct GdbArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// The user program to run.
    #[arg(long, default_value = abi::cmdline::DEFAULT_PROG)]
    pub prog: String,
    /// Non-interactive: run to the first entry stub, show the registers and
    /// the stack, and stop (what the tests use).
    #[arg(long)]
    pub batch: bool,
    /// TCP port for QEMU's gdb stub.
    #[arg(long, default_value_t = 1234, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
}

pub fn script_path() -> PathBuf {
    kbuild::root().join("xtask/gdb/testbed.gdb")
}

/// The gdb command line: the kernel's symbols, the user program's, the
/// script, and for `--batch` the commands that stop at the first entry.
pub fn gdb_args(kernel: &str, program: &str, script: &str, port: u16, batch: bool) -> Vec<String> {
    let mut a: Vec<String> = vec!["-q".into(), "-nx".into()];
    if batch {
        a.push("-batch".into());
    }
    a.push(kernel.into());
    a.extend(["-ex".into(), format!("add-symbol-file {program}")]);
    a.extend(["-ex".into(), "set confirm off".into()]);
    a.extend(["-ex".into(), "set architecture i386".into()]);
    a.extend(["-ex".into(), format!("target remote localhost:{port}")]);
    a.extend(["-x".into(), script.into()]);
    if batch {
        for c in [
            "continue",
            "info registers eip esp cs ss eflags",
            "frame-words",
            "x/4i $eip",
            "kill",
        ] {
            a.extend(["-ex".into(), c.into()]);
        }
    }
    a
}

pub fn gdb(a: GdbArgs) -> Result<i32> {
    if a.boot.emulator != super::Emulator::Qemu {
        bail!("gdb needs QEMU's gdb stub (Debian's Bochs has none built in): use --emulator qemu");
    }
    preflight::ensure(preflight::Need::Qemu)?;
    preflight::ensure_gdb()?;
    let art = kbuild::build(true)?;
    let words = format!("mode=run prog={}", a.prog);
    let mut m = Machine::build(
        &a.boot.spec()?,
        &art,
        &words,
        &kbuild::root().join("target/xtask"),
    )?;
    let serial_log = kbuild::root().join("target/xtask/gdb-serial.log");
    let mut qemu = match &mut m.backend {
        Backend::Qemu(o) => {
            o.paused = true;
            o.gdb_port = Some(a.port);
            o.serial = qemu::Serial::File(serial_log.clone());
            let o = o.clone();
            qemu::command(&m, &o)?
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .with_context(|| format!("cannot start {}", qemu::binary(&m)))?
        }
        Backend::Bochs(_) => unreachable!("refused above"),
    };
    // Give the stub a moment to listen.
    std::thread::sleep(Duration::from_millis(300));
    if let Some(st) = qemu.try_wait()? {
        bail!("QEMU exited at once ({st}); is port {} in use?", a.port);
    }
    let program = art
        .programs
        .iter()
        .find(|(_, n)| *n == a.prog)
        .map(|(p, _)| p.display().to_string())
        .with_context(|| format!("no user program {:?}", a.prog))?;
    eprintln!(
        "gdb: QEMU paused, stub on 127.0.0.1:{}; serial output goes to {}",
        a.port,
        serial_log.display()
    );
    let status = Command::new("gdb")
        .args(gdb_args(
            &art.kernel.display().to_string(),
            &program,
            &script_path().display().to_string(),
            a.port,
            a.batch,
        ))
        .status()
        .context("cannot start gdb")?;
    let _ = qemu.kill();
    let _ = qemu.wait();
    Ok(if status.success() { 0 } else { 1 })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_command_line() {
        let a = gdb_args("/k/kernel", "/k/bench", "/r/testbed.gdb", 1234, true).join(" ");
        assert!(
            a.starts_with("-q -nx -batch /k/kernel -ex add-symbol-file /k/bench"),
            "{a}"
        );
        assert!(
            a.contains("-x /r/testbed.gdb")
                && a.contains("-ex continue")
                && a.ends_with("-ex kill")
        );
        assert!(
            a.contains("-ex target remote localhost:1234 -x /r/testbed.gdb"),
            "{a}"
        );
        let b = gdb_args("/k/kernel", "/k/bench", "/r/s.gdb", 4000, false).join(" ");
        assert!(b.contains("target remote localhost:4000") && !b.contains("-batch"));
    }
}
