//! The boot cache of one `cargo xtask test` run: a deterministic boot that
//! one test has run is read back, not booted again, by the next test (or
//! the next command a test starts) that asks for the very same boot.
//!
//! Why it is sound: under QEMU's `-icount` on single-threaded TCG (the
//! icount clock, and the model clock, which is icount with the plugin) the
//! guest's virtual time advances by instructions only, so what the guest
//! prints, its verdict and the plugin's file are a function of the bytes
//! booted (kernel, modules, plugin), the emulator and its version, and its
//! whole command line (on several CPUs nearly always, not always, and the
//! plugin's file less often still: see [`takes_turns`]; the cache then
//! serves the one boot that ran to every test that asks for it, so the
//! tests of one run agree). The key is exactly that (see [`material`]): the
//! QEMU arguments with each file replaced by a hash of its bytes, the
//! plugin's file name left out, and the emulator's version. The boots
//! whose output depends on anything else are never cached: the TSC clock,
//! multi-threaded TCG, KVM, Bochs, GRUB images, a gdb stub, a boot paused
//! or with its serial port in a file, the plugin's shadow mode (a second
//! file), and a boot that did not end by
//! itself (a hang is a matter of the host's wall time).
//!
//! Why it exists: the docs check, the teaching tests and the tables each
//! start `cargo xtask run` and friends, and many of them ask for a boot
//! another test has already run in the same run (the same model boot of
//! the same chapter's command, the table's boots and the chapter's). Each
//! such boot runs once per `cargo xtask test`.
//!
//! Its limits: the cache lives in `target/xtask/boot-cache-<pid>` for one
//! `cargo xtask test` (made empty when the run starts, removed when it
//! ends) and reaches the commands the run starts through
//! [`ENV`]; it is never read by another run or outside a test run. A test
//! whose point is to boot twice (determinism, the fast plugin against its
//! reference, repeated races, the soak, wall-time measurements) boots with
//! [`super::Machine::boot_fresh`] and never sees it; `bench`'s repeated
//! boots of one variant are told apart by their round
//! ([`super::Machine::series`]), so each of them really runs.

use std::fs::File;
use std::hash::{Hash, Hasher};
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use abi::exit::{self, Outcome};
use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use super::{qemu, Backend, BootLog, Clock, Ending, Loader, Machine};

/// The environment variable that names the run's cache directory to the
/// commands a test run starts.
pub const ENV: &str = "TESTBED_BOOT_CACHE";

/// A run's cache, made by `cargo xtask test` for its run: empty at the
/// start, removed at the end (when dropped). A test run started by
/// another (the docs show one) uses the outer run's and leaves it.
pub struct RunCache {
    dir: PathBuf,
    owned: bool,
}

impl RunCache {
    /// Starts the run's cache under `target` (its `xtask` folder), or joins
    /// the one of the run this process was started by.
    pub fn start(target: &Path) -> Result<RunCache> {
        if let Some(dir) = std::env::var_os(ENV) {
            return Ok(RunCache {
                dir: PathBuf::from(dir),
                owned: false,
            });
        }
        let dir = target
            .join("xtask")
            .join(format!("boot-cache-{}", std::process::id()));
        // A directory of this name is a dead run's (pids come round again):
        // never read, emptied.
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        // SAFETY: set once, while the run has started no thread of its own
        // yet (`cargo xtask test` calls this first); every process the run
        // starts inherits it.
        unsafe { std::env::set_var(ENV, &dir) };
        Ok(RunCache { dir, owned: true })
    }

    /// What the cache saved: boots run, boots read back, and the wall time
    /// the read-back boots took when they ran.
    /// `None` for a run that uses an outer run's cache.
    pub fn summary(&self) -> Option<Summary> {
        if !self.owned {
            return None;
        }
        let log = std::fs::read_to_string(self.dir.join(LOG)).unwrap_or_default();
        Some(Summary::of(&log))
    }

    /// Keeps the run's boot log at `to` ([`LAST_LOG`]) before the cache
    /// goes. Nothing for a run that uses an outer run's cache.
    pub fn keep_log(&self, to: &Path) -> Result<()> {
        if !self.owned {
            return Ok(());
        }
        let log = std::fs::read(self.dir.join(LOG)).unwrap_or_default();
        std::fs::write(to, log).with_context(|| format!("cannot write {}", to.display()))
    }
}

impl Drop for RunCache {
    fn drop(&mut self) {
        if self.owned {
            // SAFETY: at the run's end; its threads have all been joined.
            unsafe { std::env::remove_var(ENV) };
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// The cache's log: one line per boot of the run (cacheable or not),
/// `what <TAB> seconds <TAB> machine <TAB> command line`, where `what` is
/// `ran` or `replayed` (a cacheable boot), `fresh` (a boot that must run,
/// [`super::Machine::boot_fresh`]) or `uncached: <why>`.
const LOG: &str = "log.tsv";

/// Where a whole run's boot log is kept after the run (the cache itself
/// goes): which boots ran, how long each took and why it was not read back.
pub const LAST_LOG: &str = "target/xtask/last-boots.tsv";

/// What a run's cache did, and where the boots it could not save went.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub ran: u32,
    pub replayed: u32,
    /// The wall time the replayed boots took when they ran.
    pub saved: Duration,
    /// The boots that really ran, by kind (`ran`, `fresh`, or why not
    /// cached): (kind, boots, wall time), the most time first.
    pub real: Vec<(String, u32, Duration)>,
}

impl Summary {
    fn of(log: &str) -> Summary {
        let mut s = Summary::default();
        for l in log.lines() {
            let mut f = l.split('\t');
            let (what, secs) = (f.next(), f.next().and_then(|x| x.parse::<f64>().ok()));
            let (Some(what), Some(x)) = (what, secs) else {
                continue;
            };
            let took = Duration::from_secs_f64(x.max(0.0));
            match what {
                "replayed" => {
                    s.replayed += 1;
                    s.saved += took;
                    continue;
                }
                "ran" => s.ran += 1,
                _ => {}
            }
            let kind = what.strip_prefix("uncached: ").unwrap_or(what);
            match s.real.iter_mut().find(|(k, ..)| k == kind) {
                Some((_, n, t)) => {
                    *n += 1;
                    *t += took;
                }
                None => s.real.push((kind.to_string(), 1, took)),
            }
        }
        s.real.sort_by_key(|r| std::cmp::Reverse(r.2));
        s
    }
}

/// The environment variable naming a file to which every boot of the
/// process appends one line (the docs check asks whether a command's
/// output rests on boots whose CPUs took turns on QEMU's one host thread).
pub const SEEN_ENV: &str = "TESTBED_BOOTS_SEEN";

/// Whether `m` runs several CPUs in turns on one host thread under
/// instruction counting (QEMU, icount or the model clock). Such a boot is
/// the same to the instruction from boot to boot nearly always, not
/// always: rarely QEMU's host threads move it by a few instructions (2
/// boots in about 940 of forktest on 2 CPUs on a loaded host), and the
/// model plugin's file, which follows QEMU's interleaving of the CPUs,
/// differed at nearly every boot where they share data (`locks`), its
/// printed figures not (QEMU's main-loop thread kicks the vCPU thread at
/// host-timed moments). Such a QEMU now runs on one host core
/// ([`super::core`]), where boots measured agreed: docs/threads.md, "When
/// a multi-CPU boot moves".
pub fn takes_turns(m: &Machine) -> bool {
    matches!(&m.backend, Backend::Qemu(o) if o.threads == qemu::Threads::Single)
        && matches!(m.clock, Clock::Icount | Clock::Model)
        && m.cpus > 1
}

/// What this process's checks said when a boot on several CPUs had moved
/// and another boot decided, for a test run's last lines.
static MOVED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// Says on stderr that a check found a boot that took turns moved and
/// another boot decided, and keeps it for [`moved`].
pub fn note_moved(what: String) {
    eprintln!("note: {what}");
    MOVED.lock().unwrap_or_else(|e| e.into_inner()).push(what);
}

/// Every [`note_moved`] of this process so far.
pub fn moved() -> Vec<String> {
    MOVED.lock().unwrap_or_else(|e| e.into_inner()).clone()
}

/// Appends `m`'s line to the file [`SEEN_ENV`] names, if it names one:
/// `turns` or `alone` ([`takes_turns`]), then the machine and its command
/// line. Best effort: a boot never fails for it.
pub fn witness(m: &Machine) {
    let Some(path) = std::env::var_os(SEEN_ENV).filter(|p| !p.is_empty()) else {
        return;
    };
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
    {
        let how = if takes_turns(m) { "turns" } else { "alone" };
        let _ = writeln!(f, "{how}\t{}\t{}", machine_words(m), m.cmdline);
    }
}

/// The machine in a log line: backend, clock, CPU model and count.
fn machine_words(m: &Machine) -> String {
    let cpu = m.cpu.as_deref().unwrap_or("default");
    format!(
        "{} {} cpu={cpu} cpus={}",
        m.backend.name(),
        m.clock.key(),
        m.cpus
    )
}

/// The cache directory of the run this process belongs to, if any.
fn dir() -> Option<PathBuf> {
    std::env::var_os(ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
}

/// Why `m`'s output is not a function of its key, or `None` if it is:
/// QEMU under icount or the model clock on single-threaded TCG, loaded by
/// `-kernel`, serial on stdout, no gdb stub, not paused.
pub fn why_not_cached(m: &Machine) -> Option<&'static str> {
    let o = match &m.backend {
        Backend::Qemu(o) => o,
        Backend::Bochs(_) => return Some("Bochs"),
    };
    if !matches!(m.clock, Clock::Icount | Clock::Model) {
        Some("the TSC clock")
    } else if o.accel != qemu::Accel::Tcg {
        Some("KVM")
    } else if o.threads != qemu::Threads::Single {
        Some("multi-threaded TCG")
    } else if o.paused || o.gdb_port.is_some() {
        Some("a gdb stub")
    } else if o.serial != qemu::Serial::Stdout {
        Some("serial to a file")
    } else if m.loader != Loader::Direct {
        Some("a GRUB image")
    } else if m.model.as_ref().is_some_and(|p| p.opts.shadow) {
        // The shadow plugin writes a second file the cache does not keep.
        Some("the shadow plugin")
    } else {
        None
    }
}

/// A 128-bit digest of `bytes` (two SipHash sums, salted apart): a name for
/// a file's contents in a key, not a defence against forgery (the cache
/// lives for one run, in the run's own target directory).
fn digest(bytes: &[u8]) -> String {
    let half = |salt: u8| {
        let mut h = std::collections::hash_map::DefaultHasher::new();
        salt.hash(&mut h);
        bytes.hash(&mut h);
        h.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

/// The key of `m`'s boot, as text: the emulator and its version, the boot's
/// round in a series, and QEMU's arguments with each file booted or loaded
/// replaced by its digest and the plugin's output file by `<out>`.
pub fn material(
    m: &Machine,
    version: &str,
    file: &dyn Fn(&Path) -> Result<String>,
) -> Result<String> {
    let Backend::Qemu(o) = &m.backend else {
        anyhow::bail!("only QEMU boots are cached");
    };
    let mut swaps: Vec<(String, String)> = Vec::new();
    let mut swap = |p: &Path, what: String| -> Result<()> {
        let s = p.to_str().context("path is not UTF-8")?.to_string();
        swaps.push((s, what));
        Ok(())
    };
    swap(&m.kernel, format!("<kernel {}>", file(&m.kernel)?))?;
    for (p, name) in &m.modules {
        swap(p, format!("<module {name} {}>", file(p)?))?;
    }
    if let Some(p) = &m.model {
        swap(&p.lib, format!("<plugin {}>", file(&p.lib)?))?;
        swap(&p.out, "<out>".to_string())?;
    }
    // Longest first, so no path is replaced inside a longer one.
    swaps.sort_by_key(|(s, _)| std::cmp::Reverse(s.len()));
    let args = qemu::args(m, o)?
        .into_iter()
        .map(|a| {
            swaps
                .iter()
                .fold(a, |a, (from, to)| a.replace(from.as_str(), to))
        })
        .collect::<Vec<_>>();
    Ok(format!(
        "{} {version}\nround {}\n{}\n",
        qemu::binary(m),
        m.series,
        args.join("\n")
    ))
}

/// A stored boot.
#[derive(Serialize, Deserialize)]
struct Entry {
    material: String,
    /// The emulator's exit status ([`exit::outcome`] reads it).
    status: i32,
    serial: String,
    stderr: String,
    wall_secs: f64,
    /// The model plugin's file, if the boot had the plugin.
    plugin: Option<String>,
}

/// The exit status [`exit::outcome`] reads as `o`.
pub fn status_of(o: Outcome) -> i32 {
    let code = |v: u32| (v * 2 + 1) as i32;
    match o {
        Outcome::Success => code(exit::SUCCESS),
        Outcome::Failure => code(exit::FAILURE),
        Outcome::Panic => code(exit::PANIC),
        Outcome::Exception(v) => code(exit::EXCEPTION_BASE + u32::from(v)),
        Outcome::ResetOrTripleFault => 0,
        Outcome::Other(s) => s,
    }
}

/// The QEMU version of `m`'s binary, asked once per binary and process.
fn version(m: &Machine) -> String {
    use std::sync::{Mutex, OnceLock};
    static SEEN: OnceLock<Mutex<Vec<(&'static str, String)>>> = OnceLock::new();
    let bin = qemu::binary(m);
    let seen = SEEN.get_or_init(|| Mutex::new(Vec::new()));
    let mut seen = seen.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, v)) = seen.iter().find(|(b, _)| *b == bin) {
        return v.clone();
    }
    let v = qemu::version(m);
    seen.push((bin, v.clone()));
    v
}

/// A real boot, streaming its serial lines to the callback it is given.
pub type RealBoot<'a> = dyn FnMut(&mut dyn FnMut(&str)) -> Result<BootLog> + 'a;

/// Boots `m` through the run's cache: read back if this run has booted
/// the same, else booted by `fresh` and stored. Outside a test run, or for
/// a boot that is not deterministic, `fresh` alone. `echo` sees every
/// serial line either way.
pub fn boot(m: &Machine, echo: &mut dyn FnMut(&str), fresh: &mut RealBoot) -> Result<BootLog> {
    let Some(dir) = dir() else {
        return fresh(echo);
    };
    if let Some(why) = why_not_cached(m) {
        let log = fresh(echo)?;
        note(&dir, &format!("uncached: {why}"), log.wall.as_secs_f64(), m);
        return Ok(log);
    }
    let material = material(m, &version(m), &|p: &Path| {
        Ok(digest(
            &std::fs::read(p).with_context(|| format!("cannot read {}", p.display()))?,
        ))
    })?;
    let key = digest(material.as_bytes());
    // One boot of a key at a time, across the run's processes: whoever
    // holds the lock boots, the others wait and read it back.
    let lock = File::create(dir.join(format!("{key}.lock")))
        .with_context(|| format!("cannot open the boot cache in {}", dir.display()))?;
    lock.lock()?;
    let path = dir.join(format!("{key}.json"));
    let stored: Option<Entry> = std::fs::read(&path)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .filter(|e: &Entry| e.material == material)
        // A boot that took longer than this one may take would have hung.
        .filter(|e| Duration::from_secs_f64(e.wall_secs) <= m.timeout);
    if let Some(e) = stored {
        for line in e.serial.lines() {
            echo(line);
        }
        if let (Some(p), Some(text)) = (&m.model, &e.plugin) {
            std::fs::write(&p.out, text)
                .with_context(|| format!("cannot write {}", p.out.display()))?;
        }
        note(&dir, "replayed", e.wall_secs, m);
        return Ok(BootLog {
            backend: m.backend.name(),
            ending: Ending::Exited(exit::outcome(e.status)),
            serial: e.serial,
            stderr: e.stderr,
            wall: Duration::from_secs_f64(e.wall_secs),
        });
    }
    let log = fresh(echo)?;
    let status = match &log.ending {
        Ending::Exited(Outcome::Other(_)) | Ending::TimedOut(_) => None,
        Ending::Exited(o) => Some(status_of(*o)),
    };
    let plugin = match &m.model {
        Some(p) => std::fs::read_to_string(&p.out).ok(),
        None => None,
    };
    // A model boot whose file is missing is not stored: its reader says so.
    if let Some(status) = status.filter(|_| m.model.is_none() || plugin.is_some()) {
        let e = Entry {
            material,
            status,
            serial: log.serial.clone(),
            stderr: log.stderr.clone(),
            wall_secs: log.wall.as_secs_f64(),
            plugin,
        };
        let tmp = dir.join(format!("{key}.tmp"));
        std::fs::write(&tmp, serde_json::to_vec(&e)?)?;
        std::fs::rename(&tmp, &path)?;
        note(&dir, "ran", e.wall_secs, m);
    }
    Ok(log)
}

/// Notes a boot that had to run whatever the cache held
/// ([`super::Machine::boot_fresh`]) in the run's log, if in a run.
pub fn note_fresh(m: &Machine, took: Duration) {
    if let Some(dir) = dir() {
        note(&dir, "fresh", took.as_secs_f64(), m);
    }
}

/// One line of the cache's log.
fn note(dir: &Path, what: &str, secs: f64, m: &Machine) {
    if let Ok(mut f) = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(dir.join(LOG))
    {
        let _ = writeln!(f, "{what}\t{secs:.3}\t{}\t{}", machine_words(m), m.cmdline);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verdict_goes_back_to_its_status() {
        for o in [
            Outcome::Success,
            Outcome::Failure,
            Outcome::Panic,
            Outcome::Exception(14),
            Outcome::Exception(0),
            Outcome::ResetOrTripleFault,
        ] {
            assert_eq!(exit::outcome(status_of(o)), o);
        }
    }

    #[test]
    fn the_log_says_what_was_saved() {
        let s = Summary::of(
            "ran\t2.000\tQEMU\tmode=run\nreplayed\t2.500\tQEMU\tmode=run\nreplayed\t1.5\tQEMU\tx\nbad line\n\
             uncached: Bochs\t3.0\tBochs\tmode=test\nuncached: Bochs\t4.0\tBochs\tx\nfresh\t1.0\tQEMU\tx\n",
        );
        let secs = Duration::from_secs;
        assert_eq!(
            s,
            Summary {
                ran: 1,
                replayed: 2,
                saved: secs(4),
                real: vec![
                    ("Bochs".into(), 2, secs(7)),
                    ("ran".into(), 1, secs(2)),
                    ("fresh".into(), 1, secs(1)),
                ],
            }
        );
    }

    /// The key holds what the guest's output depends on and nothing else:
    /// the same bytes under other paths are the same boot; another
    /// command line, CPU, round or file's contents is another.
    #[test]
    fn the_key_is_the_boot_not_its_paths() {
        let (m, _) = qemu::tests::machine();
        let bytes = |p: &Path| -> Result<String> {
            Ok(digest(p.file_name().unwrap_or_default().as_encoded_bytes()))
        };
        let key = |m: &Machine| material(m, "7.2.0", &bytes).unwrap();
        let base = key(&m);
        assert!(!base.contains("/k/"), "{base}");
        let mut moved = m.clone();
        moved.kernel = "/elsewhere/kernel".into();
        assert_eq!(key(&moved), base);
        let changes: [&dyn Fn(&mut Machine); 5] = [
            &|m: &mut Machine| m.cmdline.push_str(" batches=2"),
            &|m: &mut Machine| m.cpus = 2,
            &|m: &mut Machine| m.cpu = Some("pentium".into()),
            &|m: &mut Machine| m.series = 1,
            &|m: &mut Machine| m.kernel = "/k/kernel2".into(),
        ];
        for change in changes {
            let mut other = m.clone();
            change(&mut other);
            assert_ne!(key(&other), base);
        }
        assert_ne!(material(&m, "8.0.0", &bytes).unwrap(), base);
    }

    #[test]
    fn only_cpus_in_turns_on_one_host_thread_take_turns() {
        let (m, o) = qemu::tests::machine();
        let on = |cpus: u32, clock: Clock, threads: qemu::Threads| {
            let mut o = o.clone();
            o.threads = threads;
            let mut m = m.clone();
            m.backend = Backend::Qemu(o);
            m.cpus = cpus;
            m.clock = clock;
            takes_turns(&m)
        };
        use qemu::Threads::{Multi, Single};
        assert!(!on(1, Clock::Icount, Single));
        assert!(on(2, Clock::Icount, Single));
        assert!(on(4, Clock::Model, Single));
        assert!(!on(2, Clock::Tsc, Multi));
        assert!(!on(2, Clock::Tsc, Single));
    }

    #[test]
    fn only_deterministic_boots_are_cached() {
        let (m, o) = qemu::tests::machine();
        assert_eq!(why_not_cached(&m), None);
        let with = |f: &dyn Fn(&mut qemu::Options)| {
            let mut o = o.clone();
            f(&mut o);
            let mut m = m.clone();
            m.backend = Backend::Qemu(o);
            why_not_cached(&m)
        };
        assert_eq!(
            with(&|o| o.threads = qemu::Threads::Multi),
            Some("multi-threaded TCG")
        );
        assert_eq!(with(&|o| o.accel = qemu::Accel::Kvm), Some("KVM"));
        assert_eq!(with(&|o| o.gdb_port = Some(1234)), Some("a gdb stub"));
        assert_eq!(with(&|o| o.paused = true), Some("a gdb stub"));
        let mut tsc = m.clone();
        tsc.clock = Clock::Tsc;
        assert_eq!(why_not_cached(&tsc), Some("the TSC clock"));
        let mut grub = m.clone();
        grub.loader = Loader::Grub("/k/run.iso".into());
        assert_eq!(why_not_cached(&grub), Some("a GRUB image"));
    }

    #[test]
    fn digests_tell_contents_apart() {
        assert_eq!(digest(b"kernel"), digest(b"kernel"));
        assert_ne!(digest(b"kernel"), digest(b"kernel "));
        assert_eq!(digest(b"").len(), 32);
    }
}
