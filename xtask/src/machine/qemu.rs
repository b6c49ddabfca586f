//! The QEMU backend: the accelerator, QEMU's command line, and what its
//! exit status means. Every QEMU boot goes through [`super::Machine::boot`]
//! (so every one has a timeout and every failure the same clear message);
//! `cargo xtask gdb` alone spawns [`command`] itself, paused under gdb.

use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use abi::exit::{self, Outcome};
use anyhow::{bail, Context, Result};

use super::{Clock, Loader, Machine, Running, Stopped};

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
    match choice {
        AccelChoice::Kvm => (Accel::Kvm, None),
        AccelChoice::Tcg => (Accel::Tcg, None),
        AccelChoice::Auto => match kvm_unusable(kvm_opens, cpuinfo) {
            None => (Accel::Kvm, None),
            Some(why) => (Accel::Tcg, Some(format!("accel: TCG, because {why}"))),
        },
    }
}

/// Why this host cannot run the guest under KVM, or `None` if it can: what
/// `auto` falls back on, and what `--accel kvm` fails with.
pub fn kvm_unusable(kvm_opens: bool, cpuinfo: &str) -> Option<&'static str> {
    let virt = cpuinfo
        .lines()
        .filter(|l| l.starts_with("flags"))
        .any(|l| l.split_whitespace().any(|f| f == "vmx" || f == "svm"));
    match (kvm_opens, virt) {
        (false, _) => Some("/dev/kvm cannot be opened"),
        (true, false) => Some(
            "/dev/kvm opens but the host CPU shows no vmx/svm flag (paravirtual KVM cannot run paged 32-bit guests)",
        ),
        (true, true) => None,
    }
}

/// `accel` can run on a host where /dev/kvm opens (`kvm_opens`) and whose
/// /proc/cpuinfo is `cpuinfo`: KVM asked for on a host without it fails
/// here, with the reason, instead of in QEMU.
pub fn check_accel(accel: Accel, kvm_opens: bool, cpuinfo: &str) -> Result<()> {
    match (accel, kvm_unusable(kvm_opens, cpuinfo)) {
        (Accel::Kvm, Some(why)) => {
            bail!("--accel kvm: this host cannot run the guest under KVM: {why} (use --accel tcg or auto)")
        }
        _ => Ok(()),
    }
}

fn kvm_opens() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

/// Looks at this host and decides. The notice is given once per process.
pub fn detect_accel(choice: AccelChoice) -> (Accel, Option<String>) {
    static NOTICE_GIVEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
    let (accel, notice) = detect_accel_uncached(choice);
    let first = !NOTICE_GIVEN.swap(true, std::sync::atomic::Ordering::Relaxed);
    (accel, notice.filter(|_| first))
}

fn detect_accel_uncached(choice: AccelChoice) -> (Accel, Option<String>) {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    choose_accel(choice, kvm_opens(), &cpuinfo)
}

/// CPU models made by AMD. qemu-system-i386 hides the SYSCALL CPUID bit even
/// on these, so they boot under qemu-system-x86_64 (still in 32-bit mode).
pub fn is_amd_model(cpu: &str) -> bool {
    let c = cpu.to_ascii_lowercase();
    ["athlon", "phenom", "opteron", "epyc", "dhyana"]
        .iter()
        .any(|p| c.starts_with(p))
}

/// How TCG runs the guest's CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Threads {
    /// One host thread takes the CPUs in turn (what `-icount` needs).
    #[default]
    Single,
    /// One host thread per CPU, in parallel (`-accel tcg,thread=multi`).
    Multi,
}

/// QEMU as asked for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    pub accel: AccelChoice,
    /// TCG's threading (KVM always runs the CPUs in parallel).
    pub threads: Threads,
    /// Start with the CPUs stopped (`-S`), as under gdb.
    pub paused: bool,
}

impl Spec {
    pub fn new(accel: AccelChoice) -> Spec {
        Spec {
            accel,
            threads: Threads::Single,
            paused: false,
        }
    }
}

/// Where the guest's COM1 goes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Serial {
    /// QEMU's stdout, streamed back to the host tool.
    #[default]
    Stdout,
    /// A file (when stdout belongs to someone else, as under gdb).
    File(PathBuf),
}

/// QEMU, decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Options {
    pub accel: Accel,
    pub threads: Threads,
    pub paused: bool,
    /// A gdb stub on this TCP port of 127.0.0.1.
    pub gdb_port: Option<u16>,
    pub serial: Serial,
}

impl Options {
    /// Looks at the host for `auto` (the notice, if any, once per process).
    pub fn decide(spec: &Spec) -> Options {
        let (accel, notice) = detect_accel(spec.accel);
        if let Some(n) = notice {
            eprintln!("{n}");
        }
        Options {
            accel,
            threads: spec.threads,
            paused: spec.paused,
            gdb_port: None,
            serial: Serial::Stdout,
        }
    }

    /// icount where it can be had (single-threaded TCG), else the TSC.
    pub fn default_clock(&self) -> Clock {
        match (self.accel, self.threads) {
            (Accel::Tcg, Threads::Single) => Clock::Icount,
            _ => Clock::Tsc,
        }
    }

    /// Whether this host can run the accelerator decided.
    pub fn check_host(&self) -> Result<()> {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        check_accel(self.accel, kvm_opens(), &cpuinfo)
    }

    /// Whether this QEMU can provide `clock`.
    pub fn check_clock(&self, clock: Clock) -> Result<()> {
        match (clock, self.accel, self.threads) {
            (Clock::Icount, Accel::Kvm, _) => {
                bail!("--clock icount needs TCG (QEMU's -icount); use --clock tsc or --accel tcg")
            }
            (Clock::Icount, Accel::Tcg, Threads::Multi) => bail!(
                "the icount clock needs single-threaded TCG: QEMU's -icount cannot run CPUs in parallel"
            ),
            (Clock::Model, Accel::Kvm, _) => bail!(
                "--clock model needs TCG (a TCG plugin, under -icount); use --accel tcg"
            ),
            (Clock::Model, Accel::Tcg, Threads::Multi) => bail!(
                "the model clock needs single-threaded TCG: it runs under -icount"
            ),
            _ => Ok(()),
        }
    }
}

/// The CPU model QEMU gets: `cpu`, or qemu32 under TCG and host under KVM.
pub fn cpu_model(cpu: Option<&str>, accel: Accel) -> String {
    cpu.map(str::to_string).unwrap_or_else(|| match accel {
        Accel::Kvm => "host".into(),
        Accel::Tcg => "qemu32".into(),
    })
}

/// The QEMU binary for this machine: AMD models need qemu-system-x86_64.
pub fn binary(m: &Machine) -> &'static str {
    if is_amd_model(&m.cpu_model()) {
        "qemu-system-x86_64"
    } else {
        "qemu-system-i386"
    }
}

/// The version of the QEMU binary this machine would run ("?" if unknown).
pub fn version(m: &Machine) -> String {
    Command::new(binary(m))
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .unwrap_or_else(|| "?".into())
}

/// QEMU's arguments (without the binary).
pub fn args(m: &Machine, o: &Options) -> Result<Vec<String>> {
    let mut a: Vec<String> = Vec::new();
    let mut push = |s: &str| a.push(s.to_string());
    push("-machine");
    // Multi-threaded TCG is an option of -accel, which then takes the place
    // of the machine's accel= option.
    push(match (o.accel, o.threads) {
        (Accel::Kvm, _) => "pc,accel=kvm",
        (Accel::Tcg, Threads::Single) => "pc,accel=tcg",
        (Accel::Tcg, Threads::Multi) => "pc",
    });
    push("-cpu");
    push(&m.cpu_model());
    push("-smp");
    push(&m.cpus.to_string());
    push("-m");
    push(&format!("{}M", m.memory_mib));
    o.check_clock(m.clock)?;
    match m.clock {
        Clock::Icount | Clock::Model => {
            // One TSC tick per guest instruction, not slowed to real time.
            push("-icount");
            push("shift=0,sleep=off");
        }
        Clock::Tsc => {}
    }
    if let Some(p) = &m.model {
        for arg in p.qemu_args()? {
            push(&arg);
        }
    }
    // Serial on stdout (or a file); no screen, no monitor; a reset (triple
    // fault) ends QEMU instead of rebooting; the debug-exit device carries
    // the kernel's verdict (abi::exit).
    push("-serial");
    match &o.serial {
        Serial::Stdout => push("stdio"),
        Serial::File(p) => push(&format!("file:{}", p.display())),
    }
    for s in ["-display", "none", "-monitor", "none", "-no-reboot"] {
        push(s);
    }
    push("-device");
    push(&format!(
        "isa-debug-exit,iobase={:#x},iosize=0x04",
        exit::PORT
    ));
    match &m.loader {
        Loader::Grub(iso) => {
            push("-cdrom");
            push(&path_arg(iso)?);
            push("-boot");
            push("d");
        }
        Loader::Direct => {
            push("-kernel");
            push(&path_arg(&m.kernel)?);
            push("-append");
            push(&m.cmdline);
            if !m.modules.is_empty() {
                // QEMU's Multiboot loader: comma-separated "file args".
                let list = m
                    .modules
                    .iter()
                    .map(|(p, name)| Ok(format!("{} {}", path_arg(p)?, name)))
                    .collect::<Result<Vec<_>>>()?;
                push("-initrd");
                push(&list.join(","));
            }
        }
    }
    if (o.accel, o.threads) == (Accel::Tcg, Threads::Multi) {
        push("-accel");
        push("tcg,thread=multi");
    }
    if o.paused {
        push("-S");
    }
    if let Some(port) = o.gdb_port {
        push("-gdb");
        push(&format!("tcp:127.0.0.1:{port}"));
    }
    Ok(a)
}

fn path_arg(p: &Path) -> Result<String> {
    let s = p.to_str().context("path is not UTF-8")?;
    if s.contains(',') {
        bail!("QEMU cannot take a path with a comma here: {s}");
    }
    Ok(s.to_string())
}

/// The QEMU command for this machine, stdin closed, nothing else set up.
pub fn command(m: &Machine, o: &Options) -> Result<Command> {
    let mut c = Command::new(binary(m));
    c.args(args(m, o)?).stdin(Stdio::null());
    Ok(c)
}

/// A running QEMU.
pub struct Session {
    child: Child,
    /// The host core a QEMU whose CPUs take turns runs on, held until it
    /// ends ([`super::core`]).
    _core: Option<super::core::Core>,
    lines: mpsc::Receiver<String>,
    reader: JoinHandle<()>,
    err_reader: JoinHandle<String>,
}

/// Starts QEMU, its stdout (the serial port) read line by line.
pub fn start(m: &Machine, o: &Options) -> Result<Session> {
    let mut c = command(m, o)?;
    // Several CPUs in turns on one vCPU thread: QEMU's threads on one
    // host core, so that its main loop cannot cut a CPU's turn short at a
    // host-timed moment (super::core).
    let core = if super::replay::takes_turns(m) {
        super::core::choose()
    } else {
        None
    };
    if let Some(k) = &core {
        super::core::pin(&mut c, k.cpu);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| {
            format!(
                "cannot start {} (run `cargo xtask setup` to install QEMU)",
                binary(m)
            )
        })?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    let (tx, lines) = mpsc::channel::<String>();
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
    Ok(Session {
        child,
        _core: core,
        lines,
        reader,
        err_reader,
    })
}

impl Running for Session {
    fn next_line(&mut self, wait: Duration) -> Option<String> {
        if wait.is_zero() {
            self.lines.try_recv().ok()
        } else {
            self.lines.recv_timeout(wait).ok()
        }
    }

    /// QEMU's exit status, through the isa-debug-exit device (abi::exit).
    fn verdict(&mut self, _serial: &str) -> Result<Option<Outcome>> {
        Ok(self
            .child
            .try_wait()?
            .map(|st| exit::outcome(st.code().unwrap_or(-1))))
    }

    fn stop(mut self: Box<Self>) -> Stopped {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
        let _ = self.reader.join();
        let rest = self.lines.try_iter().collect();
        let messages = self.err_reader.join().unwrap_or_default();
        Stopped { rest, messages }
    }
}

#[cfg(test)]
pub(crate) mod tests {
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

    #[test]
    fn kvm_asked_for_on_a_host_without_it_says_why() {
        let e = check_accel(Accel::Kvm, true, KVM_PVM)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--accel kvm") && e.contains("no vmx/svm"), "{e}");
        let e = check_accel(Accel::Kvm, false, VMX).unwrap_err().to_string();
        assert!(e.contains("cannot be opened"), "{e}");
        assert!(check_accel(Accel::Kvm, true, VMX).is_ok());
        assert!(check_accel(Accel::Tcg, false, "").is_ok());
    }

    pub(crate) fn machine() -> (Machine, Options) {
        let o = Options {
            accel: Accel::Tcg,
            threads: Threads::Single,
            paused: false,
            gdb_port: None,
            serial: Serial::Stdout,
        };
        let m = Machine {
            kernel: "/k/kernel".into(),
            modules: vec![
                ("/k/bench".into(), "bench".into()),
                ("/k/utest".into(), "utest".into()),
            ],
            cmdline: "mode=test clock=icount".into(),
            loader: Loader::Direct,
            cpu: None,
            cpus: 1,
            memory_mib: 128,
            clock: Clock::Icount,
            timeout: Duration::from_secs(5),
            backend: super::super::Backend::Qemu(o.clone()),
            model: None,
            series: 0,
        };
        (m, o)
    }

    fn line(m: &Machine, o: &Options) -> String {
        args(m, o).unwrap().join(" ")
    }

    #[test]
    fn command_line() {
        let (m, o) = machine();
        let a = line(&m, &o);
        for says in [
            "-machine pc,accel=tcg -cpu qemu32 -smp 1 -m 128M",
            "-icount shift=0,sleep=off",
            "-serial stdio",
            "-no-reboot",
            "-device isa-debug-exit,iobase=0xf4,iosize=0x04",
            "-kernel /k/kernel -append mode=test clock=icount",
            "-initrd /k/bench bench,/k/utest utest",
        ] {
            assert!(a.contains(says), "{says:?} in {a}");
        }
        assert!(!a.contains("-S") && !a.contains("-gdb") && !a.contains("-accel"));
        assert_eq!(binary(&m), "qemu-system-i386");
    }

    #[test]
    fn the_model_clock_is_icount_with_the_plugin() {
        let (mut m, mut o) = machine();
        m.clock = Clock::Model;
        m.model = Some(crate::model::Plugin {
            opts: crate::model::ModelOpts {
                profile: "p4".into(),
                virt: crate::model::Virt::Off,
                pge: false,
                from_cpu: false,
                reference: false,
                shadow: false,
            },
            lib: "/t/libmodel.so".into(),
            out: "/t/m.txt".into(),
        });
        let a = line(&m, &o);
        assert!(
            a.contains("-icount shift=0,sleep=off")
                && a.contains("-plugin /t/libmodel.so,profile=p4,virt=off,out=/t/m.txt"),
            "{a}"
        );
        o.threads = Threads::Multi;
        assert!(o.check_clock(Clock::Model).is_err());
        o.accel = Accel::Kvm;
        assert!(o
            .check_clock(Clock::Model)
            .unwrap_err()
            .to_string()
            .contains("needs TCG"));
    }

    #[test]
    fn typed_options_become_arguments() {
        let (mut m, mut o) = machine();
        m.cpus = 4;
        m.clock = Clock::Tsc;
        o.threads = Threads::Multi;
        let a = line(&m, &o);
        assert!(a.starts_with("-machine pc -cpu qemu32 -smp 4 "), "{a}");
        assert!(a.ends_with("-accel tcg,thread=multi") && !a.contains("-icount"));
        // icount cannot run CPUs in parallel.
        m.clock = Clock::Icount;
        assert!(args(&m, &o).is_err());
        let (m, mut o) = machine();
        o.paused = true;
        o.gdb_port = Some(1234);
        o.serial = Serial::File("/t/serial.log".into());
        let a = line(&m, &o);
        assert!(a.ends_with("-S -gdb tcp:127.0.0.1:1234"), "{a}");
        assert!(a.contains("-serial file:/t/serial.log") && !a.contains("stdio"));
    }

    #[test]
    fn default_clocks() {
        let (_, mut o) = machine();
        assert_eq!(o.default_clock(), Clock::Icount);
        o.threads = Threads::Multi;
        assert_eq!(o.default_clock(), Clock::Tsc);
        o.accel = Accel::Kvm;
        assert_eq!(o.default_clock(), Clock::Tsc);
    }

    #[test]
    fn amd_models_use_the_64_bit_binary() {
        let (mut m, _) = machine();
        m.cpu = Some("phenom".into());
        assert_eq!(binary(&m), "qemu-system-x86_64");
        m.cpu = Some("pentium".into());
        assert_eq!(binary(&m), "qemu-system-i386");
        assert!(is_amd_model("EPYC-Rome") && is_amd_model("athlon"));
    }

    #[test]
    fn icount_with_kvm_is_refused() {
        let (mut m, mut o) = machine();
        o.accel = Accel::Kvm;
        m.backend = super::super::Backend::Qemu(o.clone());
        assert!(args(&m, &o)
            .unwrap_err()
            .to_string()
            .contains("--clock icount needs TCG"));
        m.clock = Clock::Tsc;
        assert!(line(&m, &o).contains("-cpu host"));
    }

    #[test]
    fn cdrom_boot_has_no_kernel() {
        let (mut m, o) = machine();
        m.loader = Loader::Grub("/x/testbed.iso".into());
        let a = line(&m, &o);
        assert!(a.contains("-cdrom /x/testbed.iso -boot d") && !a.contains("-kernel"));
    }

    #[test]
    fn comma_in_path_is_refused() {
        let (mut m, o) = machine();
        m.kernel = "/a,b/kernel".into();
        assert!(args(&m, &o).is_err());
    }
}
