//! The Bochs backend: a second x86 implementation, with CPU models taken
//! from real processors' CPUID. It boots the GRUB image as a CD (Bochs has
//! no Multiboot loader), runs headless through SDL2's dummy driver, and
//! writes COM1 to a file. It has no exit device: the kernel prints its exit
//! value ([`abi::exit::FINISHED`]) and halts, as on a real PC, and the
//! session reads the verdict from that line and stops Bochs.
//!
//! Its TSC advances one tick per instruction with `clock: sync=none`
//! (measured: every null and geteuid round trip takes as many Bochs ticks
//! as QEMU's icount counts instructions; `cargo xtask test` checks it).
//! The host says `accel=bochs` on the kernel command line, so the guest and
//! the reports call the figures Bochs ticks, never cycles.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

use abi::exit::{self, Outcome};
use anyhow::{bail, Context, Result};

use super::{Clock, Loader, Machine, Running, Stopped};

/// The kernel command line's `accel=` under Bochs.
pub const ACCEL: &str = abi::cmdline::ACCEL_BOCHS;
/// The model when `--cpu` names none: a Pentium 4 (SEP, no AMD SYSCALL).
pub const DEFAULT_CPU: &str = "p4_prescott_celeron_336";
/// Instructions per emulated second: the guest's virtual time (the PIT the
/// kernel calibrates its TSC against). With `clock: sync=none` it does not
/// change how fast Bochs runs.
pub const IPS: u32 = 50_000_000;
/// The emulated RTC's start, fixed so that boots repeat (2000-01-01 UTC).
const TIME0: u64 = 946_684_800;
const BIOS: &str = crate::preflight::BOCHS_FILES[0].0;
const VGA_BIOS: &str = crate::preflight::BOCHS_FILES[1].0;

/// Bochs as asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Instructions per emulated second.
    pub ips: u32,
}

impl Default for Spec {
    fn default() -> Spec {
        Spec { ips: IPS }
    }
}

/// Bochs, decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub ips: u32,
}

impl Options {
    pub fn decide(spec: &Spec) -> Options {
        Options { ips: spec.ips }
    }

    /// The TSC: Bochs has no -icount, but its TSC counts instructions.
    pub fn default_clock(&self) -> Clock {
        Clock::Tsc
    }

    pub fn check_clock(&self, clock: Clock) -> Result<()> {
        match clock {
            Clock::Tsc => Ok(()),
            Clock::Icount => bail!(
                "--clock icount is QEMU's -icount; under Bochs use --clock tsc (the default), whose ticks count instructions"
            ),
            Clock::Model => bail!(
                "--clock model is a QEMU TCG plugin; use --emulator qemu (the default)"
            ),
        }
    }

    /// `cpu` is one of this Bochs's models.
    pub fn check_cpu(&self, cpu: Option<&str>) -> Result<()> {
        let Some(cpu) = cpu else { return Ok(()) };
        let models = &about().models;
        if models.is_empty() {
            bail!("cannot list Bochs's CPU models (`bochs --help cpu`); is Bochs installed? (`cargo xtask setup`)");
        }
        check_model(cpu, models)
    }
}

/// `cpu` among `models`, or an error listing them.
fn check_model(cpu: &str, models: &[String]) -> Result<()> {
    if models.iter().any(|m| m == cpu) {
        Ok(())
    } else {
        bail!(
            "--cpu {cpu}: not a Bochs CPU model; Bochs has: {}",
            models.join(", ")
        )
    }
}

/// What `bochs --help cpu` says: the version and the CPU models.
pub struct About {
    pub version: String,
    pub models: Vec<String>,
}

/// Asks Bochs once per process.
pub fn about() -> &'static About {
    static ABOUT: OnceLock<About> = OnceLock::new();
    ABOUT.get_or_init(|| {
        let text = Command::new("bochs")
            .args(["--help", "cpu"])
            .stdin(Stdio::null())
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout).into_owned()
                    + &String::from_utf8_lossy(&o.stderr)
            })
            .unwrap_or_default();
        parse_about(&text)
    })
}

/// Parses `bochs --help cpu`: the models are listed one a line after
/// "Supported CPU models:" and a blank line, up to the next; the banner says
/// "Bochs x86 Emulator 2.7".
fn parse_about(text: &str) -> About {
    let mut models = Vec::new();
    let mut lines = text
        .lines()
        .skip_while(|l| !l.contains("Supported CPU models:"))
        .skip(1)
        .map(str::trim)
        .skip_while(|l| l.is_empty());
    for l in lines.by_ref() {
        if l.is_empty() {
            break;
        }
        models.push(l.to_string());
    }
    let version = text
        .lines()
        .find_map(|l| l.split("Bochs x86 Emulator").nth(1))
        .map(|v| v.trim().to_string())
        .unwrap_or_else(|| "?".into());
    About { version, models }
}

/// The CPU model Bochs gets.
pub fn cpu_model(cpu: Option<&str>) -> String {
    cpu.unwrap_or(DEFAULT_CPU).to_string()
}

/// The files of one boot, beside its GRUB image.
struct Files {
    rc: PathBuf,
    commands: PathBuf,
    serial: PathBuf,
    log: PathBuf,
    out: PathBuf,
}

fn files(iso: &Path) -> Files {
    let f = |ext: &str| iso.with_extension(ext);
    Files {
        rc: f("bochsrc"),
        commands: f("bochs-commands"),
        serial: f("serial.log"),
        log: f("bochs.log"),
        out: f("bochs.out"),
    }
}

/// The bochsrc for this machine. `iso`: the GRUB image; `serial`, `log`:
/// where COM1 and Bochs's own log go.
pub fn bochsrc(m: &Machine, o: &Options, iso: &Path, serial: &Path, log: &Path) -> Result<String> {
    let path = |p: &Path| -> Result<String> {
        let s = p.to_str().context("path is not UTF-8")?;
        if s.contains([',', ' ', '"']) {
            bail!("a bochsrc cannot take a path with a comma, a space or a quote: {s}");
        }
        Ok(s.to_string())
    };
    let mut s = String::from("# Written by cargo xtask for one boot.\n");
    s += &format!("megs: {}\n", m.memory_mib);
    s += &format!("romimage: file={BIOS}\nvgaromimage: file={VGA_BIOS}\n");
    s += &format!(
        "ata0-master: type=cdrom, path={}, status=inserted\nboot: cdrom\n",
        path(iso)?
    );
    // A triple fault stops Bochs (a panic, fatal) instead of resetting,
    // as QEMU's -no-reboot does.
    s += &format!(
        "cpu: model={}, count={}, ips={}, reset_on_triple_fault=0\n",
        m.cpu_model(),
        m.cpus,
        o.ips
    );
    // sync=none: time follows the instructions, not the host's clock.
    s += &format!("clock: sync=none, time0={TIME0}\n");
    s += "display_library: sdl2\n";
    s += &format!("com1: enabled=1, mode=file, dev={}\n", path(serial)?);
    s += &format!("log: {}\n", path(log)?);
    s += "panic: action=fatal\nerror: action=report\ninfo: action=report\ndebug: action=ignore\n";
    Ok(s)
}

/// A running Bochs.
pub struct Session {
    child: Child,
    files: Files,
    serial: Option<File>,
    /// Bytes of a line not yet ended.
    partial: Vec<u8>,
    lines: VecDeque<String>,
    /// How much of the serial log `verdict` has looked at.
    scanned: usize,
}

/// Writes the bochsrc and starts Bochs headless, its debugger told to
/// continue at once.
pub fn start(m: &Machine, o: &Options) -> Result<Session> {
    let Loader::Grub(iso) = &m.loader else {
        bail!("Bochs boots only the GRUB image (it has no Multiboot loader)");
    };
    let f = files(iso);
    for p in [&f.serial, &f.log] {
        let _ = std::fs::remove_file(p);
    }
    std::fs::write(&f.rc, bochsrc(m, o, iso, &f.serial, &f.log)?)?;
    // The debugger is compiled into Debian's Bochs: it waits for a command
    // before the first instruction.
    std::fs::write(&f.commands, "c\n")?;
    let out = File::create(&f.out)?;
    let child = Command::new("bochs")
        .arg("-q")
        .arg("-f")
        .arg(&f.rc)
        .arg("-rc")
        .arg(&f.commands)
        .env("SDL_VIDEODRIVER", "dummy")
        .env("SDL_AUDIODRIVER", "dummy")
        .stdin(Stdio::null())
        .stdout(out.try_clone()?)
        .stderr(out)
        .spawn()
        .context("cannot start bochs (run `cargo xtask setup` to install it)")?;
    Ok(Session {
        child,
        files: f,
        serial: None,
        partial: Vec::new(),
        lines: VecDeque::new(),
        scanned: 0,
    })
}

/// How often the serial file is looked at while a caller waits.
const TAIL_POLL: Duration = Duration::from_millis(5);

impl Session {
    /// Reads what Bochs has written to the serial file since the last look.
    fn read_serial(&mut self) {
        if self.serial.is_none() {
            self.serial = File::open(&self.files.serial).ok();
        }
        let Some(file) = &mut self.serial else { return };
        let mut buf = Vec::new();
        if file.read_to_end(&mut buf).is_err() {
            return;
        }
        for b in buf {
            if b == b'\n' {
                self.lines.push_back(line_of(&self.partial));
                self.partial.clear();
            } else {
                self.partial.push(b);
            }
        }
    }

    /// The Bochs log's panics and errors; failing those, when Bochs ended
    /// by itself, the last words of its output. When the host stopped it (a
    /// verdict read, a timeout), its output is only the banner and the
    /// debugger's first prompt: nothing to show.
    fn messages(&self, stopped_by_host: bool) -> String {
        let log = std::fs::read_to_string(&self.files.log).unwrap_or_default();
        let mut s: String = log
            .lines()
            .filter(|l| is_panic_or_error(l))
            .map(|l| format!("{l}\n"))
            .collect();
        if s.is_empty() && !stopped_by_host {
            let out = std::fs::read_to_string(&self.files.out).unwrap_or_default();
            let lines: Vec<&str> = out.lines().filter(|l| !l.starts_with("ALSA lib")).collect();
            let from = lines.len().saturating_sub(5);
            for l in &lines[from..] {
                s += &format!("{l}\n");
            }
        }
        s
    }
}

/// A serial line without its CR; a guest may print any bytes.
fn line_of(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes)
        .trim_end_matches('\r')
        .to_string()
}

/// A Bochs log line of level error or panic: `<ticks>e[DEV ] ...`, `<ticks>p[...`.
fn is_panic_or_error(line: &str) -> bool {
    let t = line.trim_start_matches(|c: char| c.is_ascii_digit());
    t.len() < line.len() && (t.starts_with("e[") || t.starts_with("p["))
}

/// Bochs's panic on a third exception: a triple fault, with
/// `reset_on_triple_fault=0`.
fn triple_fault_in(log: &str) -> bool {
    log.lines()
        .any(|l| is_panic_or_error(l) && l.contains("exception with no resolution"))
}

/// The verdict in the serial lines of `text`: the kernel's exit value.
pub fn verdict_in(text: &str) -> Option<Outcome> {
    text.lines()
        .find_map(exit::finished_value)
        .map(|v| exit::outcome(exit::qemu_status(v)))
}

impl Running for Session {
    fn next_line(&mut self, wait: Duration) -> Option<String> {
        let until = Instant::now() + wait;
        loop {
            if self.lines.is_empty() {
                self.read_serial();
            }
            if let Some(l) = self.lines.pop_front() {
                return Some(l);
            }
            if Instant::now() >= until {
                return None;
            }
            std::thread::sleep(TAIL_POLL.min(until - Instant::now()));
        }
    }

    /// The kernel's exit line in the serial log; else, if Bochs has ended,
    /// a triple fault (its panic) or its exit status.
    fn verdict(&mut self, serial: &str) -> Result<Option<Outcome>> {
        // Only whole lines arrive in `serial`: look at each once.
        let from = self.scanned.min(serial.len());
        self.scanned = serial.len();
        if let Some(o) = verdict_in(&serial[from..]) {
            return Ok(Some(o));
        }
        match self.child.try_wait()? {
            None => Ok(None),
            Some(st) => {
                let log = std::fs::read_to_string(&self.files.log).unwrap_or_default();
                Ok(Some(if triple_fault_in(&log) {
                    Outcome::ResetOrTripleFault
                } else {
                    Outcome::Other(st.code().unwrap_or(-1))
                }))
            }
        }
    }

    fn stop(mut self: Box<Self>) -> Stopped {
        let stopped_by_host = matches!(self.child.try_wait(), Ok(None));
        if stopped_by_host {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        self.read_serial();
        if !self.partial.is_empty() {
            let l = line_of(&self.partial);
            self.lines.push_back(l);
        }
        let messages = self.messages(stopped_by_host);
        Stopped {
            rest: self.lines.drain(..).collect(),
            messages,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::Backend;

    const HELP: &str = "00000000000i[      ] LTDL_LIBRARY_PATH not set.\nSupported CPU models:\n\nbx_generic\npentium\namd_k6_2_chomper\np4_prescott_celeron_336\n\n00000000000i[SIM   ] quit_sim called with exit code 0\n=====\n                        Bochs x86 Emulator 2.7\n";

    #[test]
    fn models_and_version_from_help() {
        let a = parse_about(HELP);
        assert_eq!(a.version, "2.7");
        assert_eq!(
            a.models,
            [
                "bx_generic",
                "pentium",
                "amd_k6_2_chomper",
                "p4_prescott_celeron_336"
            ]
        );
        let e = check_model("pentium5", &a.models).unwrap_err().to_string();
        assert!(
            e.contains("not a Bochs CPU model") && e.contains("amd_k6_2_chomper"),
            "{e}"
        );
        assert!(check_model("pentium", &a.models).is_ok());
    }

    fn machine(cpus: u32) -> (Machine, Options) {
        let o = Options { ips: IPS };
        let m = Machine {
            kernel: "/k/kernel".into(),
            modules: vec![],
            cmdline: "mode=test clock=tsc accel=bochs".into(),
            loader: Loader::Grub("/x/run.iso".into()),
            cpu: Some("amd_k6_2_chomper".into()),
            cpus,
            memory_mib: 128,
            clock: Clock::Tsc,
            timeout: Duration::from_secs(5),
            backend: Backend::Bochs(o.clone()),
            model: None,
            series: 0,
        };
        (m, o)
    }

    #[test]
    fn the_bochsrc() {
        let (m, o) = machine(2);
        let f = files(Path::new("/x/run.iso"));
        let rc = bochsrc(&m, &o, Path::new("/x/run.iso"), &f.serial, &f.log).unwrap();
        for says in [
            "megs: 128\n",
            "ata0-master: type=cdrom, path=/x/run.iso, status=inserted\nboot: cdrom\n",
            "cpu: model=amd_k6_2_chomper, count=2, ips=50000000, reset_on_triple_fault=0\n",
            "clock: sync=none, time0=946684800\n",
            "display_library: sdl2\n",
            "com1: enabled=1, mode=file, dev=/x/run.serial.log\n",
            "log: /x/run.bochs.log\n",
            "panic: action=fatal\n",
        ] {
            assert!(rc.contains(says), "{says:?} in {rc}");
        }
        assert!(bochsrc(&m, &o, Path::new("/a b/run.iso"), &f.serial, &f.log).is_err());
        assert_eq!(f.rc, PathBuf::from("/x/run.bochsrc"));
    }

    #[test]
    fn verdicts_from_the_serial_log_and_the_bochs_log() {
        assert_eq!(verdict_in("@@tb1 end status=success\n"), None);
        assert_eq!(
            verdict_in("x\ntestbed: finished (exit code 0x10); halting. Power off.\n"),
            Some(Outcome::Success)
        );
        assert_eq!(
            verdict_in("testbed: finished (exit code 0x2e); halting.\n"),
            Some(Outcome::Exception(14))
        );
        assert_eq!(
            verdict_in("testbed: finished (exit code 0x12); halting.\n"),
            Some(Outcome::Panic)
        );
        let log = "00000000000i[CPU0  ] ok\n04000000000p[CPU0  ] >>PANIC<< exception(): 3rd (13) exception with no resolution\n";
        assert!(triple_fault_in(log));
        assert!(!triple_fault_in(
            "00000000000i[CPU0  ] exception with no resolution\n"
        ));
        assert!(is_panic_or_error(
            "60743150000p[SDL2  ] >>PANIC<< User requested shutdown."
        ));
        assert!(!is_panic_or_error("p[x] no ticks"));
    }

    #[test]
    fn icount_is_refused() {
        let (_, o) = machine(1);
        assert!(o
            .check_clock(Clock::Icount)
            .unwrap_err()
            .to_string()
            .contains("--clock tsc"));
        assert_eq!(o.default_clock(), Clock::Tsc);
        assert_eq!(cpu_model(None), DEFAULT_CPU);
    }
}
