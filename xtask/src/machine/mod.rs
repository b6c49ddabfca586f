//! The machines the kernel boots on, described once.
//!
//! A boot is asked for as a [`Spec`] (what the flags or a test case want:
//! the accelerator may still be `auto`, the clock unset), and
//! [`Machine::build`] turns it into a [`Machine`]: the host looked at, the
//! clock chosen and checked against the backend, the kernel command line
//! written, the GRUB image made when asked. Nothing else assembles a boot.
//!
//! Every backend gives the same interface ([`Running`]): start, stream the
//! serial log, the verdict, stop. [`Machine::boot`] drives it with the
//! timeout, so every boot of every backend ends the same way ([`BootLog`]).
//!
//! Adding a backend: a module beside `qemu.rs` with its typed options and
//! a type implementing [`Running`], a variant in [`BackendSpec`] and
//! [`Backend`], and an arm in each `match` on them (the compiler lists
//! them). Adding a clock: a variant in [`Clock`] with its arms (its name,
//! the guest clock it reads, its unit), and in each backend's
//! `check_clock`, `default_clock` and arguments.

pub mod bochs;
pub mod core;
pub mod qemu;
pub mod replay;

/// The clocks are the results' vocabulary: a results file names one.
pub use crate::results::Clock;
pub use qemu::AccelChoice;

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use abi::exit::{self, Outcome};
use anyhow::{bail, Result};

use crate::iso;
use crate::kbuild::Artifacts;

/// A boot as asked for, before the host is looked at.
#[derive(Clone, Debug)]
pub struct Spec {
    pub backend: BackendSpec,
    /// CPU model; `None`: the backend's default.
    pub cpu: Option<String>,
    /// Number of CPUs.
    pub cpus: u32,
    pub memory_mib: u32,
    /// `None`: the backend's default for its accelerator.
    pub clock: Option<Clock>,
    pub timeout: Duration,
    /// Boot through a GRUB image (Multiboot 2) instead of the backend's own loader.
    pub grub: bool,
    /// Extra kernel command-line words, appended last.
    pub append: String,
    /// The model's profile and options; `None`: the defaults (only with
    /// [`Clock::Model`]; the profile follows the CPU model).
    pub model: Option<crate::model::ModelOpts>,
    /// With no clock asked for: the model clock wherever the backend's own
    /// default would be icount (QEMU TCG), so the figures are cycles
    /// (`run`'s default; the tests and `bench` keep icount).
    pub cycles_by_default: bool,
    /// The interleaving grain of several CPUs under icount (the kernel's
    /// turn pacer, `turn=`): `None` is [`abi::cmdline::DEFAULT_TURN`], 0
    /// leaves the interleaving to QEMU. Only for icount and model boots of
    /// more than one CPU.
    pub turn: Option<u32>,
}

/// Memory every boot gets.
pub const MEMORY_MIB: u32 = 128;

impl Spec {
    /// One CPU, the default memory, nothing appended, on `backend`.
    pub fn new(backend: BackendSpec, timeout: Duration) -> Spec {
        Spec {
            backend,
            cpu: None,
            cpus: 1,
            memory_mib: MEMORY_MIB,
            clock: None,
            timeout,
            grub: false,
            append: String::new(),
            model: None,
            cycles_by_default: false,
            turn: None,
        }
    }

    /// The `turn=` word of a boot on `clock`, or why the grain cannot be
    /// asked for. Paced: several CPUs under icount (the model too); on one
    /// CPU there is nothing to interleave, and on real parallel CPUs (tsc)
    /// the machine interleaves by itself.
    pub fn turn_word(&self, clock: Clock) -> Result<Option<String>> {
        let icount = matches!(clock, Clock::Icount | Clock::Model);
        match self.turn {
            Some(t) if t != 0 && !(abi::cmdline::MIN_TURN..=abi::cmdline::MAX_TURN).contains(&t) => bail!(
                "--turn {t}: the grain is 0 (off) or from {} to {} instructions",
                abi::cmdline::MIN_TURN,
                abi::cmdline::MAX_TURN
            ),
            Some(t) if t != 0 && !icount => bail!(
                "--turn paces several CPUs under icount (--clock icount or model); under clock={} the CPUs run in parallel",
                clock.guest().key()
            ),
            _ if self.cpus < 2 || !icount => Ok(None),
            t => Ok(Some(format!(
                "{}={}",
                abi::cmdline::KEY_TURN,
                t.unwrap_or(abi::cmdline::DEFAULT_TURN)
            ))),
        }
    }
}

/// A backend as asked for, with its own typed options.
#[derive(Clone, Debug)]
pub enum BackendSpec {
    Qemu(qemu::Spec),
    Bochs(bochs::Spec),
}

/// The backend a machine runs on, decided.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Backend {
    Qemu(qemu::Options),
    Bochs(bochs::Options),
}

impl Backend {
    /// Looks at the host where the spec leaves a choice (`--accel auto`);
    /// a notice about it goes to stderr once per process.
    pub fn decide(spec: &BackendSpec) -> Backend {
        match spec {
            BackendSpec::Qemu(s) => Backend::Qemu(qemu::Options::decide(s)),
            BackendSpec::Bochs(s) => Backend::Bochs(bochs::Options::decide(s)),
        }
    }

    /// The backend's name as reports print it.
    pub fn name(&self) -> &'static str {
        match self {
            Backend::Qemu(_) => "QEMU",
            Backend::Bochs(_) => "Bochs",
        }
    }

    /// Where the figures come from, as the results JSON's `source` says.
    pub fn source(&self) -> &'static str {
        match self {
            Backend::Qemu(_) => "qemu",
            Backend::Bochs(_) => "bochs",
        }
    }

    /// The accelerator, as the kernel command line's `accel=` says.
    pub fn accel_key(&self) -> &'static str {
        match self {
            Backend::Qemu(o) => o.accel.key(),
            Backend::Bochs(_) => bochs::ACCEL,
        }
    }

    fn default_clock(&self) -> Clock {
        match self {
            Backend::Qemu(o) => o.default_clock(),
            Backend::Bochs(o) => o.default_clock(),
        }
    }

    fn check_clock(&self, clock: Clock) -> Result<()> {
        match self {
            Backend::Qemu(o) => o.check_clock(clock),
            Backend::Bochs(o) => o.check_clock(clock),
        }
    }

    /// Whether the backend has this CPU model (`None`: its default).
    fn check_cpu(&self, cpu: Option<&str>) -> Result<()> {
        match self {
            // QEMU names a bad model itself.
            Backend::Qemu(_) => Ok(()),
            Backend::Bochs(o) => o.check_cpu(cpu),
        }
    }

    /// Whether the backend boots only the GRUB image (no Multiboot loader).
    fn grub_only(&self) -> bool {
        match self {
            Backend::Qemu(_) => false,
            Backend::Bochs(_) => true,
        }
    }

    /// Whether this host can run the backend as decided (KVM asked for on a
    /// host without it fails here, saying why).
    fn check_host(&self) -> Result<()> {
        match self {
            Backend::Qemu(o) => o.check_host(),
            // Bochs emulates every instruction: any host runs it.
            Backend::Bochs(_) => Ok(()),
        }
    }
}

/// The kernel command line fits what the kernel reads: the loader passes
/// the image's path, a space and the words, and the kernel reads at most
/// [`abi::cmdline::MAX_LEN`] bytes of it.
pub fn check_length(cmdline: &str, kernel: &Path) -> Result<()> {
    let len = kernel.as_os_str().len() + 1 + cmdline.len();
    if len > abi::cmdline::MAX_LEN {
        anyhow::bail!(
            "the kernel command line is too long: {len} bytes with the image's path ({}), the kernel reads at most {}",
            kernel.display(),
            abi::cmdline::MAX_LEN
        );
    }
    Ok(())
}

/// Refuses a boot of more program modules than the kernel keeps
/// (`abi::layout::MAX_MODULES`): it would cut the rest, and a program among
/// them would be missing from a boot that names it.
pub fn check_modules(programs: &[(PathBuf, String)]) -> Result<()> {
    let most = abi::layout::MAX_MODULES;
    if programs.len() > most {
        anyhow::bail!(
            "{} program modules, but the kernel keeps at most {most} boot modules (abi::layout::MAX_MODULES): the rest would be cut ({})",
            programs.len(),
            programs[most..]
                .iter()
                .map(|(_, n)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(())
}

/// What is wrong with kernel command-line words, found on the host with the
/// kernel's own parser before any boot: words the kernel would warn about
/// (`invalid`), and keys given more than once (`repeated`: the last wins).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CmdlineCheck {
    pub invalid: Vec<String>,
    pub repeated: Vec<String>,
}

impl CmdlineCheck {
    pub fn of(words: &str) -> CmdlineCheck {
        let mut c = CmdlineCheck::default();
        abi::cmdline::Options::parse(words, &mut |w| {
            c.invalid.push(match w {
                abi::cmdline::Warning::UnknownKey(k) => format!(
                    "unknown key {k:?} (valid keys: {})",
                    abi::cmdline::KEYS.join(", ")
                ),
                abi::cmdline::Warning::BadValue {
                    key,
                    value,
                    expected,
                } => format!("{key}={value}: {key} takes {expected}"),
            })
        });
        let mut seen = std::collections::BTreeSet::new();
        for w in words.split_ascii_whitespace() {
            let key = w.split_once('=').map_or(w, |(k, _)| k);
            if !seen.insert(key) && !c.repeated.iter().any(|r| r == key) {
                c.repeated.push(key.to_string());
            }
        }
        c
    }

    /// The repeated keys as one warning line, if any.
    pub fn repeat_warning(&self) -> Option<String> {
        (!self.repeated.is_empty()).then(|| {
            format!(
                "warning: the kernel command line gives {} more than once; the last one counts",
                self.repeated.join(", ")
            )
        })
    }
}

/// How the kernel is loaded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Loader {
    /// The backend's own Multiboot (1) loader: QEMU's `-kernel`.
    Direct,
    /// This GRUB image, booted as a CD; its menu holds the command line.
    Grub(PathBuf),
}

/// A scratch directory of one command's own for its boots
/// (`target/xtask/<name>-<pid>`: the GRUB image, the bochsrc, Bochs's
/// serial and log files), so two commands at once never boot or read each
/// other's files. Removed when dropped.
pub struct Scratch(PathBuf);

impl Scratch {
    /// A fresh directory `target/xtask/<name>-<pid>-<n>`: `n` counts this
    /// process's scratch directories, so boots on several threads (the
    /// book's CPU matrix) never share one.
    pub fn new(name: &str) -> Result<Scratch> {
        use std::sync::atomic::{AtomicUsize, Ordering};
        static MADE: AtomicUsize = AtomicUsize::new(0);
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let dir = crate::kbuild::root()
            .join("target/xtask")
            .join(format!("{name}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir)?;
        Ok(Scratch(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// One boot, every setting decided.
#[derive(Clone, Debug)]
pub struct Machine {
    pub kernel: PathBuf,
    /// (path, name) of each Multiboot module.
    pub modules: Vec<(PathBuf, String)>,
    /// The whole kernel command line (`clock=` and `accel=` included).
    pub cmdline: String,
    pub loader: Loader,
    /// CPU model; `None`: the backend's default ([`Machine::cpu_model`]).
    pub cpu: Option<String>,
    pub cpus: u32,
    pub memory_mib: u32,
    pub clock: Clock,
    /// A guest that has not ended by then is stopped and called hung.
    pub timeout: Duration,
    pub backend: Backend,
    /// [`Clock::Model`]: the plugin, its options and the file it writes.
    pub model: Option<crate::model::Plugin>,
    /// Which boot of a series of the same machine this is (`bench`'s
    /// round; 0 for a single boot): a test run's boot cache keeps the
    /// rounds apart, so each of them really boots ([`replay`]).
    pub series: u32,
}

/// The kernel command-line words xtask writes itself, from its own flags,
/// and the flag that sets each. Given again (`--append`, a bench variant)
/// they would override what xtask booted (the kernel takes the last word),
/// and the figures would carry another clock's or accelerator's label.
pub const HOST_WORDS: &[(&str, &str)] = &[
    (abi::cmdline::KEY_CLOCK, "--clock"),
    (abi::cmdline::KEY_ACCEL, "--accel (or --emulator)"),
    (abi::cmdline::KEY_TURN, "--turn"),
];

/// Refuses a word of [`HOST_WORDS`] in `words` (what `from` gave).
pub fn refuse_host_words(from: &str, words: &str) -> Result<()> {
    for w in words.split_ascii_whitespace() {
        let key = w.split_once('=').map_or(w, |(k, _)| k);
        if let Some((_, flag)) = HOST_WORDS.iter().find(|(k, _)| *k == key) {
            bail!(
                "{from}: {w:?}: xtask writes {key}= itself from {flag} and labels the figures by what it booted; give {flag} instead"
            );
        }
    }
    Ok(())
}

impl Machine {
    /// The one place a boot is put together. `words`: the command-line words
    /// of the mode (`mode=run prog=bench`); `scratch`: where a GRUB image goes.
    pub fn build(spec: &Spec, art: &Artifacts, words: &str, scratch: &Path) -> Result<Machine> {
        let backend = Backend::decide(&spec.backend);
        backend.check_host()?;
        let clock = spec.clock.unwrap_or_else(|| match backend.default_clock() {
            Clock::Icount if spec.cycles_by_default => Clock::Model,
            c => c,
        });
        backend.check_clock(clock)?;
        let cpu_model = match &backend {
            Backend::Qemu(o) => qemu::cpu_model(spec.cpu.as_deref(), o.accel),
            Backend::Bochs(_) => bochs::cpu_model(spec.cpu.as_deref()),
        };
        let model = crate::model::Plugin::for_clock(
            clock,
            spec.model.as_ref(),
            &cpu_model,
            &crate::kbuild::root(),
            scratch,
        )?;
        backend.check_cpu(spec.cpu.as_deref())?;
        refuse_host_words("--append", &spec.append)?;
        refuse_host_words("the kernel command line", words)?;
        let turn = spec
            .turn_word(clock)?
            .map(|w| format!(" {w}"))
            .unwrap_or_default();
        let cmdline = format!(
            "{words} clock={} accel={}{turn} {}",
            clock.guest().key(),
            backend.accel_key(),
            spec.append
        )
        .trim()
        .to_string();
        check_length(&cmdline, &art.kernel)?;
        check_modules(&art.programs)?;
        let loader = if spec.grub || backend.grub_only() {
            std::fs::create_dir_all(scratch)?;
            let entry = iso::Entry {
                title: "i386 testbed".into(),
                cmdline: cmdline.clone(),
                multiboot2: true,
            };
            Loader::Grub(iso::build(art, &[entry], 0, &scratch.join("run.iso"))?)
        } else {
            Loader::Direct
        };
        Ok(Machine {
            kernel: art.kernel.clone(),
            modules: art.programs.clone(),
            cmdline,
            loader,
            cpu: spec.cpu.clone(),
            cpus: spec.cpus,
            memory_mib: spec.memory_mib,
            clock,
            timeout: spec.timeout,
            backend,
            model,
            series: 0,
        })
    }

    /// The CPU model the guest sees.
    pub fn cpu_model(&self) -> String {
        match &self.backend {
            Backend::Qemu(o) => qemu::cpu_model(self.cpu.as_deref(), o.accel),
            Backend::Bochs(_) => bochs::cpu_model(self.cpu.as_deref()),
        }
    }

    /// The emulator and its version (`QEMU 7.2.0`).
    pub fn emulator(&self) -> String {
        match &self.backend {
            Backend::Qemu(_) => format!("QEMU {}", qemu::version(self)),
            Backend::Bochs(_) => format!("Bochs {}", bochs::about().version),
        }
    }

    /// Which machine, accelerator, clock and CPU: what a report says first
    /// (`QEMU 7.2.0 TCG  clock=icount (...)  cpu=qemu32`).
    pub fn describe(&self) -> String {
        let (backend, banner) = match &self.backend {
            Backend::Qemu(o) => (
                format!(
                    "QEMU {} {}",
                    qemu::version(self),
                    o.accel.key().to_uppercase()
                ),
                self.clock.banner().to_string(),
            ),
            Backend::Bochs(_) => (
                format!("Bochs {}", bochs::about().version),
                format!("{} ({})", self.clock.key(), abi::syscall::BOCHS_TICK),
            ),
        };
        let banner = match &self.model {
            Some(p) => format!(
                "model ({}{}; the guest counts instructions)",
                p.opts.label(),
                if p.opts.from_cpu {
                    format!(", as cpu={}", self.cpu_model())
                } else {
                    String::new()
                }
            ),
            None => banner,
        };
        format!("{backend}  clock={banner}  cpu={}", self.cpu_model())
    }

    /// Starts the machine.
    pub fn start(&self) -> Result<Box<dyn Running>> {
        match &self.backend {
            Backend::Qemu(o) => Ok(Box::new(qemu::start(self, o)?)),
            Backend::Bochs(o) => Ok(Box::new(bochs::start(self, o)?)),
        }
    }

    /// Boots: starts the machine, streams its serial log (each line to
    /// `echo` as it arrives), waits for the verdict or the timeout, stops it.
    /// Inside `cargo xtask test`, a deterministic boot the run has already
    /// made is read back from the run's boot cache instead ([`replay`]).
    pub fn boot(&self, echo: &mut dyn FnMut(&str)) -> Result<BootLog> {
        replay::witness(self);
        replay::boot(self, echo, &mut |echo| self.boot_real(echo))
    }

    /// [`Machine::boot`], always a real boot: for the tests whose point is
    /// to boot twice (determinism, the plugin against its reference,
    /// repeated races) and for wall-time measurements.
    pub fn boot_fresh(&self, echo: &mut dyn FnMut(&str)) -> Result<BootLog> {
        replay::witness(self);
        let log = self.boot_real(echo)?;
        replay::note_fresh(self, log.wall);
        Ok(log)
    }

    /// The boot itself, with no cache in the way and no note in its log.
    fn boot_real(&self, echo: &mut dyn FnMut(&str)) -> Result<BootLog> {
        let started = Instant::now();
        let deadline = started + self.timeout;
        let mut running = self.start()?;
        let mut serial = String::new();
        let mut take = |line: String, serial: &mut String| {
            echo(&line);
            serial.push_str(&line);
            serial.push('\n');
        };
        let ending = loop {
            while let Some(line) = running.next_line(Duration::ZERO) {
                take(line, &mut serial);
            }
            if let Some(outcome) = running.verdict(&serial)? {
                break Ending::Exited(outcome);
            }
            if Instant::now() >= deadline {
                break Ending::TimedOut(self.timeout);
            }
            if let Some(line) = running.next_line(POLL) {
                take(line, &mut serial);
            }
        };
        let stopped = running.stop();
        for line in stopped.rest {
            take(line, &mut serial);
        }
        Ok(BootLog {
            backend: self.backend.name(),
            ending,
            serial,
            stderr: stopped.messages,
            wall: started.elapsed(),
        })
    }
}

/// How long [`Machine::boot`] waits for a serial line before it looks at the
/// verdict and the clock again.
const POLL: Duration = Duration::from_millis(20);

/// A started machine: the interface every backend gives.
pub trait Running {
    /// The next line the guest printed on its serial port (COM1), line end
    /// removed, waiting at most `wait`; `None` if none came.
    fn next_line(&mut self, wait: Duration) -> Option<String>;
    /// The verdict once the machine has ended by itself, `None` while it
    /// runs. `serial` is the log so far, for a backend that has no exit
    /// device and reads the kernel's end record instead.
    fn verdict(&mut self, serial: &str) -> Result<Option<Outcome>>;
    /// Stops the machine if it still runs and collects what is left.
    fn stop(self: Box<Self>) -> Stopped;
}

/// What a stopped machine leaves.
pub struct Stopped {
    /// Serial lines not yet taken.
    pub rest: Vec<String>,
    /// The backend's own messages (QEMU's stderr; the panics and errors of
    /// Bochs's log).
    pub messages: String,
}

/// How a boot ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The machine ended by itself; what its verdict means.
    Exited(Outcome),
    /// No verdict within the timeout: the guest hung (the machine was stopped).
    TimedOut(Duration),
}

#[derive(Clone, Debug)]
pub struct BootLog {
    /// The backend's name ("QEMU").
    pub backend: &'static str,
    pub ending: Ending,
    /// Everything the guest printed on COM1, CR LF folded to LF.
    pub serial: String,
    /// The backend's own messages.
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
            Ending::Exited(Outcome::ResetOrTripleFault) => format!(
                "the guest reset without reporting: a triple fault ({})",
                if self.backend == "Bochs" {
                    "Bochs stops on it with reset_on_triple_fault=0"
                } else {
                    "QEMU exits with 0 under -no-reboot"
                }
            ),
            Ending::Exited(Outcome::Other(s)) => {
                format!(
                    "{} exited with status {s}, which is not a kernel verdict",
                    self.backend
                )
            }
            Ending::TimedOut(t) => {
                format!(
                    "the guest hung: no exit after {} s, {} was killed",
                    t.as_secs(),
                    self.backend
                )
            }
        }
    }

    /// The verdict, the backend's messages and the last `n` serial lines.
    pub fn explain(&self, n: usize) -> String {
        let mut s = format!("{}\n", self.verdict());
        if !self.stderr.trim().is_empty() {
            s += &format!("{} said:\n{}\n", self.backend, self.stderr.trim_end());
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_names_are_the_kernels() {
        for c in Clock::ALL {
            assert_eq!(Clock::from_key(c.key()), Some(*c));
            // What the kernel's clock record will say for it.
            assert_eq!(
                Clock::from_key(c.guest().key()).map(Clock::guest),
                Some(c.guest())
            );
        }
        assert_eq!(Clock::Icount.key(), "icount");
        assert_eq!(Clock::from_key("none"), None);
        assert_eq!(Clock::Tsc.unit(true), "TCG ticks");
        assert_eq!(Clock::Tsc.unit(false), "cycles");
        assert!(Clock::Icount.exact() && !Clock::Tsc.exact());
        assert!(Clock::Tsc.emulated(true) && !Clock::Icount.emulated(true));
        // The model's guest counts instructions; its cycles come from the plugin.
        assert_eq!(Clock::Model.guest(), abi::cmdline::Clock::Icount);
        assert!(Clock::Model.exact() && Clock::Model.virtual_time());
    }

    fn art() -> Artifacts {
        Artifacts {
            kernel: "/k/kernel".into(),
            programs: vec![("/k/bench".into(), "bench".into())],
        }
    }

    fn tcg(threads: qemu::Threads) -> Spec {
        let q = qemu::Spec {
            threads,
            ..qemu::Spec::new(AccelChoice::Tcg)
        };
        Spec::new(BackendSpec::Qemu(q), Duration::from_secs(3))
    }

    #[test]
    fn build_decides_clock_and_writes_the_command_line() {
        let mut spec = tcg(qemu::Threads::Single);
        spec.append = "batches=2".into();
        let m = Machine::build(
            &spec,
            &art(),
            "mode=run prog=bench",
            Path::new("/nonexistent"),
        )
        .unwrap();
        assert_eq!(m.clock, Clock::Icount);
        assert_eq!(
            m.cmdline,
            "mode=run prog=bench clock=icount accel=tcg batches=2"
        );
        assert_eq!(
            (m.loader, m.cpus, m.memory_mib),
            (Loader::Direct, 1, MEMORY_MIB)
        );
        assert_eq!(m.backend.accel_key(), "tcg");
        // CPUs in parallel cannot count instructions: the TSC, or a refusal.
        let mut spec = tcg(qemu::Threads::Multi);
        let m = Machine::build(&spec, &art(), "mode=smp", Path::new("/nonexistent")).unwrap();
        assert_eq!(m.clock, Clock::Tsc);
        assert!(m.cmdline.contains("clock=tsc accel=tcg"));
        spec.clock = Some(Clock::Icount);
        assert!(Machine::build(&spec, &art(), "mode=smp", Path::new("/nonexistent")).is_err());
    }

    /// `--append "clock=tsc accel=kvm"` would relabel a TCG icount boot as
    /// KVM cycles (the kernel takes the last word): the words xtask writes
    /// itself are refused wherever else they come from.
    #[test]
    fn words_xtask_sets_itself_are_refused_in_append() {
        for (append, key) in [
            ("clock=tsc", "clock="),
            ("batches=2 accel=kvm", "accel="),
            ("clock=tsc accel=kvm", "clock="),
            ("clock", "clock="),
        ] {
            let mut spec = tcg(qemu::Threads::Single);
            spec.append = append.into();
            let e = Machine::build(&spec, &art(), "mode=run", Path::new("/nonexistent"))
                .unwrap_err()
                .to_string();
            assert!(
                e.starts_with("--append") && e.contains(key),
                "{append}: {e}"
            );
        }
        // A bench variant's words, likewise.
        let e = Machine::build(
            &tcg(qemu::Threads::Single),
            &art(),
            "mode=run accel=kvm",
            Path::new("/nonexistent"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("accel="), "{e}");
        // Other keys, and keys that only contain the words, pass.
        let mut spec = tcg(qemu::Threads::Single);
        spec.append = "batches=2 clocks=1".into();
        assert!(refuse_host_words("--append", &spec.append).is_ok());
    }

    #[test]
    fn command_lines_are_checked_on_the_host() {
        let c = CmdlineCheck::of("mode=run entry=sysentr colour=red");
        assert_eq!(c.invalid.len(), 2, "{c:?}");
        assert!(c.invalid[0].starts_with("entry=sysentr: entry takes a comma list"));
        assert!(c.invalid[1].starts_with("unknown key \"colour\""));
        let c = CmdlineCheck::of("mode=test mode=run prog=bench");
        assert!(c.invalid.is_empty());
        assert_eq!(c.repeated, ["mode"]);
        assert!(c.repeat_warning().unwrap().contains("mode more than once"));
        assert_eq!(
            CmdlineCheck::of("mode=run entry=int80").repeat_warning(),
            None
        );
        // Too long for the kernel: said so, before any boot.
        let long = format!("mode=run test={}", "x".repeat(abi::cmdline::MAX_LEN));
        let e = Machine::build(
            &tcg(qemu::Threads::Single),
            &art(),
            &long,
            Path::new("/nonexistent"),
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("command line is too long"), "{e}");
    }

    /// More program modules than the kernel keeps: refused before any
    /// boot, naming the limit and the programs that would be cut.
    #[test]
    fn more_modules_than_the_kernel_keeps_are_refused() {
        let mut a = art();
        a.programs = (0..abi::layout::MAX_MODULES)
            .map(|i| (PathBuf::from(format!("/k/p{i}")), format!("p{i}")))
            .collect();
        let spec = tcg(qemu::Threads::Single);
        assert!(Machine::build(&spec, &a, "mode=run", Path::new("/nonexistent")).is_ok());
        a.programs.push(("/k/p16".into(), "p16".into()));
        a.programs.push(("/k/p17".into(), "p17".into()));
        let e = Machine::build(&spec, &a, "mode=run", Path::new("/nonexistent"))
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "18 program modules, but the kernel keeps at most 16 boot modules (abi::layout::MAX_MODULES): the rest would be cut (p16, p17)"
        );
        let iso = crate::iso::build(&a, &[], 0, Path::new("/nonexistent/run.iso"))
            .unwrap_err()
            .to_string();
        assert_eq!(iso, e);
    }

    #[test]
    fn bochs_boots_grub_on_the_tsc() {
        let b = Backend::decide(&BackendSpec::Bochs(bochs::Spec::default()));
        assert!(
            b.grub_only()
                && !Backend::Qemu(qemu::Options::decide(&qemu::Spec::new(AccelChoice::Tcg)))
                    .grub_only()
        );
        assert_eq!(
            (b.default_clock(), b.accel_key(), b.source()),
            (Clock::Tsc, "bochs", "bochs")
        );
        assert!(b.check_clock(Clock::Icount).is_err());
        assert!(b.check_cpu(None).is_ok());
    }

    #[test]
    fn verdicts_say_what_happened() {
        let log = |ending| BootLog {
            backend: "QEMU",
            ending,
            serial: (1..=30).map(|i| format!("line {i}\n")).collect(),
            stderr: String::new(),
            wall: Duration::ZERO,
        };
        let t = log(Ending::TimedOut(Duration::from_secs(7))).explain(20);
        assert!(t.contains("hung") && t.contains("7 s") && t.contains("QEMU was killed"));
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
