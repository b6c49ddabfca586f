//! Booting the kernel in QEMU: the accelerator, the command line, the
//! timeout, and what the exit status means. Every QEMU run in the testbed
//! goes through [`run`], so every run has a timeout and every failure the
//! same clear message.

use std::io::{BufRead, BufReader, Read};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use abi::exit::{self, Outcome};
use anyhow::{bail, Context, Result};

/// What the user asked for with `--accel`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum AccelChoice {
    /// KVM when /dev/kvm opens and the host CPU has VMX or SVM, else TCG.
    Auto,
    Kvm,
    Tcg,
}

/// What QEMU will use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Accel {
    Kvm,
    Tcg,
}

impl Accel {
    pub fn key(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// Decides the accelerator. `kvm_opens`: /dev/kvm opened read-write;
/// `cpuinfo`: the host's /proc/cpuinfo. Returns the choice and, for `auto`
/// falling back to TCG, a one-line notice saying why.
///
/// /dev/kvm alone is not enough: a paravirtual KVM (kvm-pvm) opens fine but
/// cannot run a 32-bit guest with paging, and shows no vmx/svm flag.
pub fn choose_accel(
    choice: AccelChoice,
    kvm_opens: bool,
    cpuinfo: &str,
) -> (Accel, Option<String>) {
    let virt = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    match choice {
        AccelChoice::Kvm => (Accel::Kvm, None),
        AccelChoice::Tcg => (Accel::Tcg, None),
        AccelChoice::Auto if kvm_opens && virt => (Accel::Kvm, None),
        AccelChoice::Auto => {
            let why = match (kvm_opens, virt) {
                (false, _) => "/dev/kvm cannot be opened",
                (true, false) => {
                    "/dev/kvm opens but the host CPU shows no vmx/svm flag (paravirtual KVM cannot run paged 32-bit guests)"
                }
                (true, true) => unreachable!(),
            };
            (Accel::Tcg, Some(format!("accel: TCG, because {why}")))
        }
    }
}

/// Looks at this host and decides. The notice is given once per process.
pub fn detect_accel(choice: AccelChoice) -> (Accel, Option<String>) {
    static NOTICE_GIVEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let (accel, notice) = detect_accel_uncached(choice);
    let first = !NOTICE_GIVEN.swap(true, std::sync::atomic::Ordering::Relaxed);
    (accel, notice.filter(|_| first))
}

fn detect_accel_uncached(choice: AccelChoice) -> (Accel, Option<String>) {
    let kvm_opens = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    choose_accel(choice, kvm_opens, &cpuinfo)
}

/// CPU models made by AMD. qemu-system-i386 hides the SYSCALL CPUID bit even
/// on these, so they boot under qemu-system-x86_64 (still in 32-bit mode).
pub fn is_amd_model(cpu: &str) -> bool {
    let c = cpu.to_ascii_lowercase();
    ["athlon", "phenom", "opteron", "epyc", "dhyana"]
        .iter()
        .any(|p| c.starts_with(p))
}

/// One boot.
#[derive(Clone, Debug)]
pub struct Boot {
    pub kernel: PathBuf,
    /// (path, name) of each Multiboot module.
    pub modules: Vec<(PathBuf, String)>,
    pub cmdline: String,
    /// Boot this CD image through its boot loader instead of `-kernel`.
    pub cdrom: Option<PathBuf>,
    pub cpu: Option<String>,
    pub smp: u32,
    pub accel: Accel,
    /// `-icount shift=0,sleep=off`: one TSC tick per guest instruction.
    pub icount: bool,
    pub memory_mib: u32,
    pub timeout: Duration,
    /// Extra arguments passed to QEMU as they are.
    pub extra: Vec<String>,
}

impl Boot {
    pub fn cpu_model(&self) -> String {
        self.cpu.clone().unwrap_or_else(|| match self.accel {
            Accel::Kvm => "host".into(),
            Accel::Tcg => "qemu32".into(),
        })
    }

    pub fn binary(&self) -> &'static str {
        if is_amd_model(&self.cpu_model()) {
            "qemu-system-x86_64"
        } else {
            "qemu-system-i386"
        }
    }

    /// QEMU's arguments (without the binary).
    pub fn args(&self) -> Result<Vec<String>> {
        let mut a: Vec<String> = Vec::new();
        let mut push = |s: &str| a.push(s.to_string());
        push("-machine");
        // An explicit `-accel ...` among the extra arguments (e.g.
        // tcg,thread=multi) takes the place of the machine's accel= option.
        push(if self.extra.iter().any(|e| e == "-accel") {
            "pc"
        } else {
            match self.accel {
                Accel::Kvm => "pc,accel=kvm",
                Accel::Tcg => "pc,accel=tcg",
            }
        });
        push("-cpu");
        push(&self.cpu_model());
        push("-smp");
        push(&self.smp.to_string());
        push("-m");
        push(&format!("{}M", self.memory_mib));
        if self.icount {
            if self.accel == Accel::Kvm {
                bail!("the icount clock needs TCG: use --clock tsc with KVM, or --accel tcg");
            }
            push("-icount");
            push("shift=0,sleep=off");
        }
        // Serial on stdout; no screen, no monitor; a reset (triple fault)
        // ends QEMU instead of rebooting; the debug-exit device carries the
        // kernel's verdict (abi::exit).
        for s in [
            "-serial",
            "stdio",
            "-display",
            "none",
            "-monitor",
            "none",
            "-no-reboot",
        ] {
            push(s);
        }
        push("-device");
        push(&format!(
            "isa-debug-exit,iobase={:#x},iosize=0x04",
            exit::PORT
        ));
        match &self.cdrom {
            Some(iso) => {
                push("-cdrom");
                push(&path_arg(iso)?);
                push("-boot");
                push("d");
            }
            None => {
                push("-kernel");
                push(&path_arg(&self.kernel)?);
                push("-append");
                push(&self.cmdline);
                if !self.modules.is_empty() {
                    // QEMU's Multiboot loader: comma-separated "file args".
                    let list = self
                        .modules
                        .iter()
                        .map(|(p, name)| Ok(format!("{} {}", path_arg(p)?, name)))
                        .collect::<Result<Vec<_>>>()?;
                    push("-initrd");
                    push(&list.join(","));
                }
            }
        }
        a.extend(self.extra.iter().cloned());
        Ok(a)
    }
}

fn path_arg(p: &std::path::Path) -> Result<String> {
    let s = p.to_str().context("path is not UTF-8")?;
    if s.contains(',') {
        bail!("QEMU cannot take a path with a comma here: {s}");
    }
    Ok(s.to_string())
}

/// How a boot ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// QEMU exited; what its status means.
    Exited(Outcome),
    /// No exit within the timeout: the guest hung (QEMU was killed).
    TimedOut(Duration),
}

#[derive(Clone, Debug)]
pub struct BootLog {
    pub ending: Ending,
    /// Everything the guest printed on COM1, CR LF folded to LF.
    pub serial: String,
    /// QEMU's own messages.
    pub stderr: String,
    pub wall: Duration,
}

impl BootLog {
    pub fn succeeded(&self) -> bool {
        self.ending == Ending::Exited(Outcome::Success)
    }

    /// What went wrong, in one sentence.
    pub fn verdict(&self) -> String {
        match &self.ending {
            Ending::Exited(Outcome::Success) => "the kernel reported success".into(),
            Ending::Exited(Outcome::Failure) => "the kernel reported a failure".into(),
            Ending::Exited(Outcome::Panic) => "the kernel panicked".into(),
            Ending::Exited(Outcome::Exception(v)) => format!(
                "the kernel stopped on a CPU exception in ring 0: {} (vector {v})",
                exit::vector_name(*v)
            ),
            Ending::Exited(Outcome::ResetOrTripleFault) => {
                "the guest reset without reporting: a triple fault (QEMU exits with 0 under -no-reboot)".into()
            }
            Ending::Exited(Outcome::Other(s)) => {
                format!("QEMU exited with status {s}, which is not a kernel verdict")
            }
            Ending::TimedOut(t) => {
                format!("the guest hung: no exit after {} s, QEMU was killed", t.as_secs())
            }
        }
    }

    /// The verdict, QEMU's messages and the last `n` serial lines.
    pub fn explain(&self, n: usize) -> String {
        let mut s = format!("{}\n", self.verdict());
        if !self.stderr.trim().is_empty() {
            s += &format!("QEMU said:\n{}\n", self.stderr.trim_end());
        }
        let lines: Vec<&str> = self.serial.lines().collect();
        let from = lines.len().saturating_sub(n);
        s += &format!("last {} serial lines:\n", lines.len() - from);
        for l in &lines[from..] {
            s += &format!("  | {l}\n");
        }
        s
    }
}

/// Boots, collects the serial output, enforces the timeout. `echo` receives
/// each serial line as it arrives (for live output).
pub fn run(boot: &Boot, echo: &mut dyn FnMut(&str)) -> Result<BootLog> {
    let args = boot.args()?;
    let started = Instant::now();
    let mut child = Command::new(boot.binary())
        .args(&args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!(
                "cannot start {} (run `cargo xtask setup` to install QEMU)",
                boot.binary()
            )
        })?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (tx, rx) = mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        let mut r = BufReader::new(stdout);
        let mut buf = Vec::new();
        // Bytes, not strings: a guest may print anything.
        while let Ok(n) = r.read_until(b'\n', &mut buf) {
            if n == 0 {
                break;
            }
            let line = String::from_utf8_lossy(&buf)
                .trim_end_matches(['\n', '\r'])
                .to_string();
            if tx.send(line).is_err() {
                break;
            }
            buf.clear();
        }
    });
    let err_reader = std::thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let mut serial = String::new();
    let deadline = started + boot.timeout;
    let status = loop {
        while let Ok(line) = rx.try_recv() {
            echo(&line);
            serial.push_str(&line);
            serial.push('\n');
        }
        if let Some(st) = child.try_wait()? {
            break Some(st);
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        match rx.recv_timeout(Duration::from_millis(20)) {
            Ok(line) => {
                echo(&line);
                serial.push_str(&line);
                serial.push('\n');
            }
            Err(_) => continue,
        }
    };
    let _ = reader.join();
    while let Ok(line) = rx.try_recv() {
        echo(&line);
        serial.push_str(&line);
        serial.push('\n');
    }
    let stderr = err_reader.join().unwrap_or_default();
    let ending = match status {
        None => Ending::TimedOut(boot.timeout),
        Some(st) => Ending::Exited(exit::outcome(st.code().unwrap_or(-1))),
    };
    Ok(BootLog {
        ending,
        serial,
        stderr,
        wall: started.elapsed(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const KVM_PVM: &str = "processor: 0\nflags\t\t: fpu vme de pse tsc msr pae hypervisor\n";
    const VMX: &str = "flags\t\t: fpu vme vmx tsc\n";

    #[test]
    fn auto_needs_both_dev_kvm_and_vmx_or_svm() {
        assert_eq!(choose_accel(AccelChoice::Auto, true, VMX).0, Accel::Kvm);
        let (a, why) = choose_accel(AccelChoice::Auto, true, KVM_PVM);
        assert_eq!(a, Accel::Tcg);
        assert!(why.unwrap().contains("no vmx/svm"));
        let (a, why) = choose_accel(AccelChoice::Auto, false, VMX);
        assert_eq!(a, Accel::Tcg);
        assert!(why.unwrap().contains("cannot be opened"));
        assert_eq!(
            choose_accel(AccelChoice::Tcg, true, VMX),
            (Accel::Tcg, None)
        );
        assert_eq!(
            choose_accel(AccelChoice::Kvm, false, ""),
            (Accel::Kvm, None)
        );
    }

    fn boot() -> Boot {
        Boot {
            kernel: "/k/kernel".into(),
            modules: vec![
                ("/k/bench".into(), "bench".into()),
                ("/k/utest".into(), "utest".into()),
            ],
            cmdline: "mode=test clock=icount".into(),
            cdrom: None,
            cpu: None,
            smp: 1,
            accel: Accel::Tcg,
            icount: true,
            memory_mib: 128,
            timeout: Duration::from_secs(5),
            extra: vec![],
        }
    }

    #[test]
    fn command_line() {
        let a = boot().args().unwrap().join(" ");
        assert!(
            a.contains("-machine pc,accel=tcg -cpu qemu32 -smp 1 -m 128M"),
            "{a}"
        );
        assert!(a.contains("-icount shift=0,sleep=off"));
        assert!(a.contains("-no-reboot"));
        assert!(a.contains("-device isa-debug-exit,iobase=0xf4,iosize=0x04"));
        assert!(a.contains("-kernel /k/kernel -append mode=test clock=icount"));
        assert!(a.contains("-initrd /k/bench bench,/k/utest utest"));
        assert_eq!(boot().binary(), "qemu-system-i386");
    }

    #[test]
    fn amd_models_use_the_64_bit_binary() {
        let mut b = boot();
        b.cpu = Some("phenom".into());
        assert_eq!(b.binary(), "qemu-system-x86_64");
        b.cpu = Some("pentium".into());
        assert_eq!(b.binary(), "qemu-system-i386");
        assert!(is_amd_model("EPYC-Rome") && is_amd_model("athlon"));
    }

    #[test]
    fn icount_with_kvm_is_refused() {
        let mut b = boot();
        b.accel = Accel::Kvm;
        assert!(b
            .args()
            .unwrap_err()
            .to_string()
            .contains("icount clock needs TCG"));
        b.icount = false;
        assert!(b.args().unwrap().join(" ").contains("-cpu host"));
    }

    #[test]
    fn cdrom_boot_has_no_kernel() {
        let mut b = boot();
        b.cdrom = Some("/x/testbed.iso".into());
        let a = b.args().unwrap().join(" ");
        assert!(a.contains("-cdrom /x/testbed.iso -boot d") && !a.contains("-kernel"));
    }

    #[test]
    fn comma_in_path_is_refused() {
        let mut b = boot();
        b.kernel = "/a,b/kernel".into();
        assert!(b.args().is_err());
    }

    #[test]
    fn verdicts_say_what_happened() {
        let log = |ending| BootLog {
            ending,
            serial: (1..=30).map(|i| format!("line {i}\n")).collect(),
            stderr: String::new(),
            wall: Duration::ZERO,
        };
        let t = log(Ending::TimedOut(Duration::from_secs(7))).explain(20);
        assert!(t.contains("hung") && t.contains("7 s"));
        assert!(
            t.contains("last 20 serial lines")
                && t.contains("| line 30")
                && !t.contains("| line 10\n")
        );
        assert!(log(Ending::Exited(Outcome::ResetOrTripleFault))
            .verdict()
            .contains("triple fault"));
        assert!(log(Ending::Exited(Outcome::Exception(14)))
            .verdict()
            .contains("#PF"));
        assert!(log(Ending::Exited(Outcome::Panic))
            .verdict()
            .contains("panicked"));
    }
}
