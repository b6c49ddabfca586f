//! `cargo xtask gdb`: QEMU paused with a gdb stub, and gdb with the kernel's
//! and the user program's symbols and a breakpoint on the entry stub of the
//! mechanism `--stop-at` names.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::Args;

use super::trace::MechArg;
use super::BootArgs;
use crate::kbuild;
use crate::machine::{qemu, Backend, Machine};
use crate::preflight;

#[derive(Args)]
pub struct GdbArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// The entry mechanism to stop at: gdb breaks on its full entry stub
    /// (and the variant a single-stepped entry resumes at).
    #[arg(long, value_enum, default_value = "int80")]
    pub stop_at: MechArg,
    /// The user program to run. Default: the test program makes one traced
    /// call through the --stop-at mechanism (the call `cargo xtask trace`
    /// shows), so the stop comes with its recognisable registers.
    #[arg(long)]
    pub prog: Option<String>,
    /// Non-interactive: run to the entry stub, show the registers and what
    /// the mechanism pushed, and stop (what the tests use).
    #[arg(long)]
    pub batch: bool,
    /// TCP port for QEMU's gdb stub.
    #[arg(long, default_value_t = 1234, value_parser = clap::value_parser!(u16).range(1..))]
    pub port: u16,
}

pub fn script_path() -> PathBuf {
    kbuild::root().join("xtask/gdb/testbed.gdb")
}

/// The symbols gdb breaks on for a mechanism: its full entry stub, and the
/// one the debug task resumes a single-stepped entry at (int 0x80 has none:
/// its gate clears TF). AMD syscall has one entry per CPU; the first is
/// the bootstrap processor's, the only one that runs user code.
pub fn breakpoints(m: MechArg) -> &'static [&'static str] {
    match m {
        MechArg::Int80 => &["int80_full"],
        MechArg::Sysenter => &["sysenter_full", "sysenter_traced"],
        MechArg::Callgate => &["callgate_full", "callgate_traced"],
        MechArg::Syscall => &["syscall_full_0", "syscall_traced_0"],
    }
}

/// The gdb command line: the kernel's symbols, the user program's, the
/// script, a breakpoint on each of `stops` (with `only_eax`, only when EAX
/// holds that system-call number), and for `--batch` the commands that stop
/// at the entry.
pub fn gdb_args(
    kernel: &str,
    program: &str,
    script: &str,
    port: u16,
    stops: &[&str],
    only_eax: Option<u32>,
    batch: bool,
) -> Vec<String> {
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
    for s in stops {
        let cond = only_eax
            .map(|n| format!(" if $eax == {n}"))
            .unwrap_or_default();
        a.extend(["-ex".into(), format!("break {s}{cond}")]);
    }
    if batch {
        for c in [
            "continue",
            // Plain numbers: `info registers` would name symbols whose
            // mangled crate hash differs from tree to tree.
            r#"printf "EIP=%#x ESP=%#x CS=%#x SS=%#x EFLAGS=%#x EAX=%#x EBX=%#x\n", $eip, $esp, $cs, $ss, $eflags, $eax, $ebx"#,
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
    if a.stop_at == MechArg::Syscall {
        // AMD models boot under qemu-system-x86_64 (the only QEMU that shows
        // SYSCALL), whose stub sends 64-bit registers gdb will not pair with
        // this 32-bit kernel.
        bail!("gdb cannot stop at syscall: AMD models boot under qemu-system-x86_64, whose gdb stub sends 64-bit registers that gdb refuses for this i386 kernel; `cargo xtask trace syscall` shows that path");
    }
    preflight::ensure(preflight::Need::Qemu)?;
    preflight::ensure_gdb()?;
    let art = kbuild::build(true)?;
    let mech = a.stop_at.mechanism();
    let boot = a.boot.clone();
    let (words, prog) = match &a.prog {
        None => (
            format!("mode=run trace={}", mech.key()),
            "utest".to_string(),
        ),
        Some(p) => (format!("mode=run prog={p}"), p.clone()),
    };
    let mut m = Machine::build(
        &boot.spec()?,
        &art,
        &words,
        &kbuild::root().join("target/xtask"),
    )?;
    let serial_log = kbuild::root().join("target/xtask/gdb-serial.log");
    // QEMU opens the file but makes no folder: in a fresh tree no other
    // command has made target/xtask yet.
    if let Some(dir) = serial_log.parent() {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    }
    let mut qemu = start_paused(&mut m, a.port, serial_log.clone(), Stdio::piped())?;
    // Give the stub a moment to listen.
    std::thread::sleep(Duration::from_millis(300));
    if let Some(st) = qemu.try_wait()? {
        // QEMU says why on stderr (a port in use, a missing file, an
        // option this QEMU lacks): pass it on.
        let mut why = String::new();
        if let Some(mut e) = qemu.stderr.take() {
            use std::io::Read;
            let _ = e.read_to_string(&mut why);
        }
        let why = why.trim();
        if why.is_empty() {
            bail!("QEMU exited at once ({st}); is port {} in use?", a.port);
        }
        bail!("QEMU exited at once ({st}): {why}");
    }
    let program = art
        .programs
        .iter()
        .find(|(_, n)| *n == prog)
        .map(|(p, _)| p.display().to_string())
        .with_context(|| format!("no user program {prog:?}"))?;
    eprintln!(
        "gdb: QEMU paused, stub on 127.0.0.1:{}; stopping at {}; serial output goes to {}",
        a.port,
        breakpoints(a.stop_at).join(", "),
        serial_log.display()
    );
    // Paths relative to the tree (gdb runs there), so what gdb prints is
    // the same in every checkout.
    let root = kbuild::root();
    let rel = |p: &std::path::Path| p.strip_prefix(&root).unwrap_or(p).display().to_string();
    let status = Command::new("gdb")
        .current_dir(&root)
        .args(gdb_args(
            &rel(&art.kernel),
            &rel(std::path::Path::new(&program)),
            &rel(&script_path()),
            a.port,
            breakpoints(a.stop_at),
            // The traced call, not the test program's writes around it.
            a.prog.is_none().then_some(abi::syscall::nr::TRACE),
            a.batch,
        ))
        .status()
        .context("cannot start gdb")?;
    let _ = qemu.kill();
    let _ = qemu.wait();
    Ok(if status.success() { 0 } else { 1 })
}

/// One instruction of a stepped round: whether it ran in ring 3, the
/// symbol gdb places it in (without the offset) and its text as gdb
/// disassembles it (AT&T).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Step {
    pub user: bool,
    pub symbol: String,
    pub text: String,
}

/// The marker the stepping script prints before each instruction.
const STEP: &str = "STEP cs=";

/// The gdb script that stops at `stub` on a `null` call (EAX = 0) and
/// steps one instruction at a time until the stub is entered again: one
/// round of the benchmark loop, each instruction printed after [`STEP`]
/// and the CPL's CS. At most `limit` steps.
pub fn round_script(stub: &str, limit: u32) -> String {
    format!(
        "set pagination off
set confirm off
set disassembly-flavor att
set language c
break {stub} if $eax == {null}
continue
delete
set $tb_n = 0
while $tb_n < {limit}
  printf \"{STEP}%#x \", $cs
  x/i $pc
  stepi
  set $tb_n = $tb_n + 1
  if (unsigned int)$pc == (unsigned int)&{stub}
    set $tb_n = {done}
  end
end
if $tb_n == {done}
  printf \"ROUND closed\\n\"
end
kill
",
        null = abi::syscall::nr::NULL,
        done = limit + 1,
    )
}

/// Reads the steps of [`round_script`]'s output: `STEP cs=0x1b => 0x... <sym+4>:\tinsn ops`.
pub fn parse_round(out: &str) -> Result<Vec<Step>> {
    if !out.contains("ROUND closed") {
        bail!("the stepped round did not come back to its entry stub:\n{out}");
    }
    let mut steps = Vec::new();
    for l in out.lines() {
        let Some(rest) = l.strip_prefix(STEP) else {
            continue;
        };
        let (cs, rest) = rest
            .split_once(' ')
            .with_context(|| format!("no CS in {l:?}"))?;
        let cs = u32::from_str_radix(cs.trim_start_matches("0x"), 16)
            .with_context(|| format!("CS {cs:?}"))?;
        let rest = rest.trim_start().trim_start_matches("=>").trim_start();
        let (head, text) = rest
            .split_once(":\t")
            .or_else(|| rest.split_once(": "))
            .with_context(|| format!("no instruction in {l:?}"))?;
        let symbol = head
            .split_once('<')
            .and_then(|(_, s)| s.strip_suffix('>'))
            .map(|s| s.split('+').next().unwrap_or(s).to_string())
            .unwrap_or_default();
        steps.push(Step {
            user: cs & 3 == 3,
            symbol,
            text: text.split_whitespace().collect::<Vec<_>>().join(" "),
        });
    }
    Ok(steps)
}

/// QEMU for the QEMU machine `m`, started paused with its gdb stub on
/// `port`, its serial output into `serial`, its stderr to `stderr`.
fn start_paused(
    m: &mut Machine,
    port: u16,
    serial: PathBuf,
    stderr: Stdio,
) -> Result<std::process::Child> {
    let Backend::Qemu(o) = &mut m.backend else {
        bail!("gdb needs a QEMU machine");
    };
    o.paused = true;
    o.gdb_port = Some(port);
    o.serial = qemu::Serial::File(serial);
    let o = o.clone();
    qemu::command(m, &o)?
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .with_context(|| format!("cannot start {}", qemu::binary(m)))
}

/// A free TCP port on the loopback (the OS's choice).
fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind(("127.0.0.1", 0)).context("no free TCP port")?;
    Ok(l.local_addr()?.port())
}

/// One round of the benchmark loop of `mech`'s `null` call, stepped under
/// gdb instruction by instruction: the bench program booted with `entry=`
/// that mechanism, stopped at its full entry stub on a `null` call, then
/// stepped until the stub is entered again.
pub fn null_round(mech: MechArg) -> Result<Vec<Step>> {
    if mech == MechArg::Syscall {
        bail!("the syscall path cannot be stepped: its QEMU's gdb stub speaks 64-bit registers");
    }
    preflight::ensure(preflight::Need::Qemu)?;
    preflight::ensure_gdb()?;
    let art = kbuild::build(true)?;
    let m = mech.mechanism();
    let root = kbuild::root();
    let dir = root.join("target/xtask/round").join(m.key());
    std::fs::create_dir_all(&dir)?;
    let spec = crate::machine::Spec::new(
        crate::machine::BackendSpec::Qemu(qemu::Spec::new(crate::machine::AccelChoice::Tcg)),
        Duration::from_secs(120),
    );
    let mut machine = Machine::build(
        &spec,
        &art,
        &format!(
            "mode=run prog=bench entry={} batches=1 batch_size=16",
            m.key()
        ),
        &dir,
    )?;
    let port = free_port()?;
    let mut qemu = start_paused(&mut machine, port, dir.join("serial.log"), Stdio::null())?;
    std::thread::sleep(Duration::from_millis(300));
    let stub = breakpoints(mech)[0];
    let script = dir.join("round.gdb");
    std::fs::write(&script, round_script(stub, 400))?;
    let program = art
        .programs
        .iter()
        .find(|(_, n)| n == "bench")
        .map(|(p, _)| p.clone())
        .context("no user program bench")?;
    let out = Command::new("gdb")
        .args(["-q", "-nx", "-batch"])
        .arg(&art.kernel)
        .arg("-ex")
        .arg(format!("add-symbol-file {}", program.display()))
        .args(["-ex", "set architecture i386"])
        .arg("-ex")
        .arg(format!("target remote localhost:{port}"))
        .arg("-x")
        .arg(&script)
        .stdin(Stdio::null())
        .output()
        .context("cannot start gdb");
    let _ = qemu.kill();
    let _ = qemu.wait();
    let out = out?;
    parse_round(&String::from_utf8_lossy(&out.stdout))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn gdb_command_line() {
        let a = gdb_args(
            "/k/kernel",
            "/k/bench",
            "/r/testbed.gdb",
            1234,
            breakpoints(MechArg::Sysenter),
            None,
            true,
        )
        .join(" ");
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
        assert!(
            a.contains(
                "-x /r/testbed.gdb -ex break sysenter_full -ex break sysenter_traced -ex continue"
            ),
            "{a}"
        );
        let b = gdb_args(
            "/k/kernel",
            "/k/bench",
            "/r/s.gdb",
            4000,
            &["int80_full"],
            Some(10),
            false,
        )
        .join(" ");
        assert!(b.contains("target remote localhost:4000") && !b.contains("-batch"));
        assert!(b.ends_with("-ex break int80_full if $eax == 10"), "{b}");
    }
}
