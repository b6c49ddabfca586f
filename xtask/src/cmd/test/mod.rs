//! `cargo xtask test`: host unit tests, then real boots of the real kernel in
//! QEMU (TCG is enough) and in Bochs, each checked against what the kernel
//! printed; Bochs's path lengths against QEMU's icount; then `bench` end to
//! end, the docs' outputs, and the teaching tools.
//!
//! The run is meant to fit a two-core CI machine in minutes, so its time
//! goes where the checks are: boots that each use one host thread run two
//! at a time, each pool starting its longest tests first (by the wall time
//! the book's record gives them), and the docs check is one test per
//! command the book shows rather than one test of nine minutes. A boot is
//! the unit of cost, and many tests ask for the same deterministic boot (a
//! chapter's command, the table beside it, the teaching test typing it):
//! the run's boot cache ([`crate::machine::replay`]) makes each such boot
//! run once per run, while the tests that are about booting twice bypass
//! it ([`crate::machine::Machine::boot_fresh`]).

pub(crate) mod agreement;
mod cases;
pub(crate) use cases::PATH_LENGTH_LIMITS;
mod junit;
mod lab;
mod labserver;
mod model;
pub(crate) use model::{FORK_FLUSHES, FORK_FLUSH_PROFILE, FORK_FLUSH_WORDS};
pub mod soak;
mod teaching;
pub(crate) mod times;
mod unit;
pub(crate) use unit::{Test, SKIP};

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::Args;

use crate::cmd::Emulator;
use crate::kbuild::{self, Artifacts};
use crate::machine::{BootLog, Machine};
use crate::preflight;
use crate::report;
use crate::results::Results;
use cases::Case;

#[derive(Args)]
pub struct TestArgs {
    /// Only the host unit tests.
    #[arg(long, conflicts_with = "boots_only")]
    host_only: bool,
    /// Only the boots (QEMU and Bochs).
    #[arg(long)]
    boots_only: bool,
    /// Only boot tests whose name contains this.
    #[arg(long)]
    filter: Option<String>,
    /// How often the repeated boots run (the multi-threaded TCG boot of the
    /// cross-CPU tests; default: what fits CI, see `cases::REPEATED_BOOTS`).
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    repeat_boots: Option<u32>,
    /// Only the boots on this emulator (default: QEMU's and Bochs's).
    #[arg(long, value_enum)]
    emulator: Option<Emulator>,
    /// Instead of the built-in boots: the kernel tests and the hostile suite
    /// on this CPU model of --emulator (QEMU's or Bochs's names).
    #[arg(long, requires = "emulator")]
    cpu: Option<String>,
    /// Instead of the built-in boots: mode=smp with this many CPUs on
    /// --emulator (with --cpu, on that model).
    #[arg(long, requires = "emulator", value_parser = clap::value_parser!(u32).range(2..=16))]
    smp: Option<u32>,
    /// Name the tests the other flags select, section by section, and run
    /// none.
    #[arg(long, conflicts_with_all = ["cpu", "smp"])]
    list: bool,
    /// After the run, merge each test's wall time into the book's record of
    /// them (docs/data/test-times.json, which docs/tests.md shows).
    #[arg(long, conflicts_with = "list")]
    record_times: bool,
    /// After the run, write every test's result as JUnit XML to FILE (for
    /// CI systems): one test suite per section.
    #[arg(long, value_name = "FILE", conflicts_with = "list")]
    junit: Option<PathBuf>,
}

/// Every test of the run counted in one place, as the kernel's own runner
/// counts its tests: one PASS, FAIL or SKIP line each, the totals at the end.
/// Listing (`--list`), each test is named under its section instead.
#[derive(Default)]
struct Tally {
    passed: u32,
    failed: u32,
    skipped: u32,
    /// Name the tests, run none.
    listing: bool,
    /// Print nothing (the list the book's table reads in-process).
    quiet: bool,
    /// The heading of the section the tests now belong to.
    section: String,
    /// Every test so far, in order.
    ran: Vec<times::Ran>,
    /// Why a test failed or was skipped, by its index in `ran`.
    why: std::collections::HashMap<usize, String>,
    /// Each section's heading, the instant it started and, for a section
    /// run beside another ([`Tally::beside`]), the instant it ended; any
    /// other section ends where the next starts, the last at the run's end.
    spans: Vec<(String, Instant, Option<Instant>)>,
    /// The lines of a tally whose sections run beside another's, held
    /// back until they are merged into it (`None`: printed as they come).
    held: Option<Vec<String>>,
}

impl Test<'_> {
    /// Runs the test and counts it in `tally`, its wall time on its line.
    fn run_in(self, tally: &mut Tally) {
        let t = Instant::now();
        match (self.run)() {
            Ok(what) if !what.is_empty() => {
                let shown = format!("{}: {what}", self.name);
                tally.report_as(&self.name, &shown, Some(t), Ok(()))
            }
            r => tally.report(&self.name, Some(t), r.map(|_| ())),
        }
    }
}

impl Tally {
    /// Starts a section: its heading line (`== title`) and the section the
    /// next tests are counted in.
    fn section(&mut self, title: &str) {
        self.section = title.to_string();
        self.say(format!("== {title}"));
        self.spans.push((title.to_string(), Instant::now(), None));
    }

    /// A line of the run's output: printed, held back in a tally that runs
    /// beside another, or dropped when quiet.
    fn say(&mut self, line: String) {
        match &mut self.held {
            _ if self.quiet => {}
            Some(lines) => lines.push(line),
            None => println!("{line}"),
        }
    }

    /// Runs `main` here and `other` at the same time on a thread of its own,
    /// in a tally of its own whose lines are held back; then prints those
    /// lines after `main`'s and counts `other`'s tests in this tally.
    /// For sections that mostly wait (a LAVA server polling its jobs, a
    /// dispatcher starting QEMU) beside one that keeps the host's cores
    /// busy. Listing, the two run one after the other.
    fn beside(
        &mut self,
        main: impl FnOnce(&mut Tally) -> Result<()>,
        other: impl FnOnce(&mut Tally) + Send,
    ) -> Result<()> {
        if self.listing {
            main(self)?;
            other(self);
            return Ok(());
        }
        let mut side = Tally {
            quiet: self.quiet,
            held: Some(Vec::new()),
            ..Tally::default()
        };
        let done = std::thread::scope(|s| {
            let worker = s.spawn(|| {
                other(&mut side);
                Instant::now()
            });
            let r = main(self);
            let main_ended = Instant::now();
            let joined = worker.join();
            // The time the run waits for `other` after `main` has ended
            // is a span of its own, not `main`'s last section's.
            if matches!(&joined, Ok(end) if end.duration_since(main_ended).as_secs_f64() >= 1.0) {
                let title = "(waiting for the sections run beside the ones above)";
                self.spans.push((title.to_string(), main_ended, None));
            }
            (r, joined)
        });
        let (r, ended) = done;
        let ended = ended.map_err(|_| anyhow::anyhow!("a section run beside another panicked"))?;
        self.merge(side, ended);
        r
    }

    /// Takes in the tests, lines and sections of `side`, a tally that ran
    /// beside this one and ended at `ended`.
    fn merge(&mut self, side: Tally, ended: Instant) {
        for line in side.held.unwrap_or_default() {
            self.say(line);
        }
        let offset = self.ran.len();
        self.ran.extend(side.ran);
        self.why
            .extend(side.why.into_iter().map(|(i, why)| (i + offset, why)));
        self.passed += side.passed;
        self.failed += side.failed;
        self.skipped += side.skipped;
        let ends: Vec<Instant> = side
            .spans
            .iter()
            .skip(1)
            .map(|s| s.1)
            .chain([ended])
            .collect();
        for ((title, start, _), end) in side.spans.into_iter().zip(ends) {
            self.spans.push((title, start, Some(end)));
        }
    }

    /// Where the run's wall time went, a line per section, on stderr (what
    /// a chapter shows of a test run is its stdout, which these times would
    /// make different at every run).
    fn say_spans(&self) {
        let now = Instant::now();
        // A section ends where the next one run in turn starts.
        let in_turn: Vec<Instant> = self
            .spans
            .iter()
            .filter(|s| s.2.is_none())
            .map(|s| s.1)
            .collect();
        let mut all = 0.0;
        let mut lines = Vec::new();
        for (title, start, end) in &self.spans {
            let (end, beside) = match end {
                Some(end) => (*end, " (beside the sections above it)"),
                None => {
                    let next = in_turn.iter().find(|t| *t > start).copied();
                    (next.unwrap_or(now), "")
                }
            };
            let d = (end - *start).as_secs_f64();
            if beside.is_empty() {
                all += d;
            }
            lines.push(format!("  {:>10}  {title}{beside}", times::wall(d)));
        }
        eprintln!("test: wall time by section ({} in all):", times::wall(all));
        for l in lines {
            eprintln!("{l}");
        }
    }

    /// Names `name` (listing) or runs `f` and counts its result.
    fn case(&mut self, name: &str, f: impl FnOnce() -> Result<(), String>) {
        if self.listing {
            self.listed(name);
        } else {
            let t = Instant::now();
            self.report(name, Some(t), f());
        }
    }

    /// A test named, not run (`--list`).
    fn listed(&mut self, name: &str) {
        self.say(name.to_string());
        self.ran.push(times::Ran {
            section: self.section.clone(),
            name: name.to_string(),
            result: times::Outcome::Listed,
            secs: None,
            load: None,
        });
    }

    /// Names or runs a test of a section's list.
    fn test(&mut self, t: Test) {
        if self.listing {
            self.listed(&t.name);
        } else {
            t.run_in(self);
        }
    }

    /// Names or runs a section's tests, `workers` at a time (each is a
    /// boot or a few, one host thread each, in scratch files of its own),
    /// each counted as it ends. Those marked [`Test::alone`] run one after
    /// another, as the first job of the pool, beside the others.
    fn tests_parallel(&mut self, tests: Vec<Test>, workers: usize) {
        let (alone, beside): (Vec<Test>, Vec<Test>) = tests.into_iter().partition(|t| t.alone);
        if self.listing || workers <= 1 {
            for t in beside.into_iter().chain(alone) {
                self.test(t);
            }
            return;
        }
        let mut jobs: Vec<Vec<Test>> = Vec::new();
        if !alone.is_empty() {
            jobs.push(alone);
        }
        jobs.extend(beside.into_iter().map(|t| vec![t]));
        self.side_by_side(jobs, workers);
    }

    /// Runs `jobs` `workers` at a time, the tests of a job one after
    /// another, each test counted as it ends.
    fn side_by_side(&mut self, jobs: Vec<Vec<Test>>, workers: usize) {
        let queue = std::sync::Mutex::new(jobs.into_iter());
        let (tx, rx) = mpsc::channel::<(String, Instant, Result<String, String>)>();
        std::thread::scope(|s| {
            for _ in 0..workers {
                let tx = tx.clone();
                let queue = &queue;
                s.spawn(move || loop {
                    let next = queue.lock().unwrap_or_else(|e| e.into_inner()).next();
                    let Some(job) = next else { break };
                    for t in job {
                        let started = Instant::now();
                        let r = (t.run)();
                        if tx.send((t.name, started, r)).is_err() {
                            return;
                        }
                    }
                });
            }
            drop(tx);
            for (name, started, r) in rx {
                match r {
                    Ok(what) if !what.is_empty() => {
                        let shown = format!("{name}: {what}");
                        self.report_as(&name, &shown, Some(started), Ok(()))
                    }
                    r => self.report(&name, Some(started), r.map(|_| ())),
                }
            }
        });
    }

    /// Counts `result` and prints `PASS name (t s)` or `FAIL name: why`;
    /// `started`: when the test began, if its time is worth showing.
    fn report(&mut self, name: &str, started: Option<Instant>, result: Result<(), String>) {
        self.report_as(name, name, started, result);
    }

    /// As [`Tally::report`], the PASS line saying `what` the test showed
    /// (`bench: two variants ...`), the FAIL line naming it `name`.
    fn report_as(
        &mut self,
        name: &str,
        what: &str,
        started: Option<Instant>,
        result: Result<(), String>,
    ) {
        let outcome = match &result {
            Ok(()) => times::Outcome::Pass,
            Err(why) if why.starts_with(SKIP) => times::Outcome::Skip,
            Err(_) => times::Outcome::Fail,
        };
        self.ran.push(times::Ran {
            section: self.section.clone(),
            name: name.to_string(),
            result: outcome,
            secs: started.map(|t| t.elapsed().as_secs_f64()),
            load: times::load_average(),
        });
        if let Err(why) = &result {
            let why = why.strip_prefix(SKIP).unwrap_or(why);
            self.why.insert(self.ran.len() - 1, why.to_string());
        }
        match result {
            Ok(()) => {
                self.passed += 1;
                match started {
                    Some(t) => {
                        self.say(format!("PASS {what} ({:.1} s)", t.elapsed().as_secs_f64()))
                    }
                    None => self.say(format!("PASS {what}")),
                }
            }
            Err(why) => match why.strip_prefix(SKIP) {
                Some(reason) => {
                    self.skipped += 1;
                    self.say(format!("SKIP {name}: {reason}"));
                }
                None => {
                    self.failed += 1;
                    self.say(format!("FAIL {name}: {why}"));
                }
            },
        }
    }

    /// A test whose output speaks for itself (cargo's): counted, and only a
    /// failure gets a line.
    fn count(&mut self, name: &str, started: Instant, passed: bool) {
        self.ran.push(times::Ran {
            section: self.section.clone(),
            name: name.to_string(),
            result: if passed {
                times::Outcome::Pass
            } else {
                times::Outcome::Fail
            },
            secs: Some(started.elapsed().as_secs_f64()),
            load: times::load_average(),
        });
        if passed {
            self.passed += 1;
        } else {
            self.failed += 1;
            self.say(format!("FAIL {name}"));
        }
    }

    /// The totals line; the exit status (0 when nothing failed).
    fn finish(self) -> i32 {
        if self.listing {
            println!("testbed: {} tests", self.ran.len());
            return 0;
        }
        println!(
            "testbed: {} passed, {} failed, {} skipped",
            self.passed, self.failed, self.skipped
        );
        if self.failed == 0 {
            0
        } else {
            1
        }
    }
}

/// The boot of the case that runs `cpu`'s tests alone under `emulator`
/// ([`cases::test_mode_on`]), as a test run boots it (inside one, read back
/// from the run's cache once the case has run), in `dir`: (its command
/// line, its log). `None` where no case does.
pub(crate) fn test_mode_boot(
    emulator: Emulator,
    cpu: &str,
    art: &Artifacts,
    dir: &Path,
) -> Option<Result<(&'static str, BootLog)>> {
    let c = cases::test_mode_on(emulator, cpu)?;
    Some(
        c.machine(art, dir)
            .and_then(|m| m.boot(&mut |_| {}))
            .map(|log| (c.cmdline, log)),
    )
}

/// One case: its boot, its check, and for `twice` a second boot of the
/// same machine with the same results.
fn run_case(c: &Case, art: &Artifacts, dir: &Path, repeat: u32) -> Result<(), String> {
    let m = c.machine(art, dir).map_err(|e| format!("{e:#}"))?;
    // A case that boots more than once is about the boots differing or
    // not: each of its boots is a real one, never the run's boot cache's.
    let real = repeat > 1 || c.twice;
    let boot = || {
        if real {
            m.boot_fresh(&mut |_| {})
        } else {
            m.boot(&mut |_| {})
        }
        .map_err(|e| format!("{e:#}"))
    };
    let mut log = boot()?;
    for i in 1..=repeat {
        if i > 1 {
            log = boot().map_err(|e| format!("boot {i} of {repeat}: {e}"))?;
        }
        let records = report::parse_log(&log.serial).map_err(|e| e.to_string())?;
        let ended_well = report::of_kind(&records, abi::report::kind::END)
            .any(|e| e.get("status") == Some("success"));
        report::check_origins(&records, ended_well)
            .and_then(|()| (c.check)(&log, &records))
            .and_then(|()| settings_as_asked(c, &records))
            .map_err(|e| {
                let which = if repeat > 1 {
                    format!("boot {i} of {repeat}: ")
                } else {
                    String::new()
                };
                format!("{which}{e}\n{}", log.explain(20))
            })?;
    }
    if c.twice {
        let again = boot()?;
        let results = |l: &BootLog| {
            Results::from_log(&l.serial, "a", m.backend.source()).map_err(|e| e.to_string())
        };
        if results(&log)?.without_timestamp() != results(&again)?.without_timestamp() {
            return Err("the second boot's results differ from the first".into());
        }
    }
    Ok(())
}

/// One boot of case `c` (the soak's `boot`-th), checked; a failed boot's
/// serial log is written to `keep` as `fail-<cpus>cpu-<boot>.log`, and the
/// error names it.
pub(crate) fn run_case_kept(
    c: &Case,
    art: &Artifacts,
    dir: &Path,
    boot: u32,
    keep: &Path,
) -> Result<(), String> {
    let m = c.machine(art, dir).map_err(|e| format!("{e:#}"))?;
    // The soak's point is the same boot again and again: each a real one.
    let log = m.boot_fresh(&mut |_| {}).map_err(|e| format!("{e:#}"))?;
    let checked = report::parse_log(&log.serial)
        .map_err(|e| e.to_string())
        .and_then(|records| {
            let ended_well = report::of_kind(&records, abi::report::kind::END)
                .any(|e| e.get("status") == Some("success"));
            report::check_origins(&records, ended_well)
                .and_then(|()| (c.check)(&log, &records))
                .and_then(|()| settings_as_asked(c, &records))
        });
    checked.map_err(|e| {
        let path = keep.join(format!("fail-{}cpu-{boot}.log", c.cpus));
        let kept = match std::fs::write(&path, &log.serial) {
            Ok(()) => format!("the serial log is in {}", path.display()),
            Err(w) => format!("its log could not be kept ({}: {w})", path.display()),
        };
        format!("{e}; {kept}\n{}", log.explain(12))
    })
}

/// A boot that ended well names in its `settings` record the configuration
/// the case asked for: the `pmap=` and `fork=` its command line says (where
/// it says), and the case's CPUs.
fn settings_as_asked(c: &Case, records: &[report::Record]) -> Result<(), String> {
    let ended_well = report::of_kind(records, abi::report::kind::END)
        .any(|e| e.get("status") == Some("success"));
    if !ended_well {
        return Ok(());
    }
    let s = report::of_kind(records, abi::report::kind::SETTINGS)
        .next()
        .ok_or("no settings record")?;
    let mut wrong = crate::results::contradictions(c.cmdline, &s.fields);
    if s.get("cpus") != Some(c.cpus.to_string().as_str()) {
        wrong.push(format!(
            "the case boots {} CPUs, the kernel says {:?} started",
            c.cpus,
            s.get("cpus")
        ));
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("settings record: {}", wrong.join("; ")))
    }
}

/// The test of boot's GDT check (docs/booting.md, "The GDT").
const GDT_ORDER: &str = "GDT check (feature test-gdt-order): with user code and user data added in the wrong order, boot panics naming the selector abi gives";

/// SMP start-up with one AP late: the kernel built with `test-late-ap`,
/// booted as [`cases::LATE_AP`] says.
fn late_ap(dest: &Path) -> Result<(), String> {
    let art = crate::cmd::run::feature_build(&["test-late-ap".to_string()])
        .map_err(|e| format!("{e:#}"))?;
    run_case(&cases::LATE_AP, &art, dest, 1)
}

/// Boots the kernel built with `test-gdt-order`, whose `gdt::init` adds
/// the user data descriptor before the user code one: `Gdt::add` then
/// returns user code's selector for the data descriptor, and the check
/// beside it must stop the boot with a panic that says so.
fn gdt_order(dest: &Path) -> Result<(), String> {
    use abi::layout::selector;
    let art = crate::cmd::run::feature_build(&["test-gdt-order".to_string()])
        .map_err(|e| format!("{e:#}"))?;
    let spec = crate::machine::Spec::new(
        crate::machine::BackendSpec::Qemu(crate::machine::qemu::Spec::new(
            crate::machine::AccelChoice::Tcg,
        )),
        std::time::Duration::from_secs(60),
    );
    let log = Machine::build(&spec, &art, "mode=test", dest)
        .and_then(|m| m.boot(&mut |_| {}))
        .map_err(|e| format!("{e:#}"))?;
    let said = format!(
        "GDT: user data at {:#x}, abi says {:#x}",
        selector::USER_CODE,
        selector::USER_DATA
    );
    let panicked = log.ending == crate::machine::Ending::Exited(abi::exit::Outcome::Panic);
    if !panicked || !log.serial.contains("kernel panic at ") || !log.serial.contains(&said) {
        return Err(format!(
            "expected a panic saying {said:?}: {}\n{}",
            log.verdict(),
            log.explain(20)
        ));
    }
    Ok(())
}

/// A Bochs boot test: a case, or an agreement check (a Bochs boot and a QEMU one).
enum Job {
    /// A case, booted this many times.
    Case(&'static Case, u32),
    Agree(&'static agreement::Pair),
    Strings(&'static agreement::Strings),
    /// A check of its own (a kernel built with a test feature, booted), by
    /// name, in its scratch directory.
    Own(&'static str, fn(&Path) -> Result<(), String>),
}

impl Job {
    fn name(&self) -> String {
        match self {
            Job::Case(c, _) => c.name.to_string(),
            Job::Agree(p) => p.name(),
            Job::Strings(s) => s.name(),
            Job::Own(name, _) => name.to_string(),
        }
    }

    fn run(&self, art: &Artifacts, dir: &Path) -> Result<(), String> {
        match self {
            Job::Case(c, repeat) => run_case(c, art, dir, *repeat),
            Job::Agree(p) => p.check(art, dir),
            Job::Strings(s) => s.check(art, dir),
            Job::Own(_, check) => check(dir),
        }
    }
}

/// The Bochs tests the filter selects, the slowest first (they are
/// started in this order, so the long ones do not end the run alone).
fn bochs_jobs(wanted: &dyn Fn(&str) -> bool) -> Vec<Job> {
    let mut jobs: Vec<Job> = agreement::PAIRS.iter().map(Job::Agree).collect();
    jobs.push(Job::Strings(&agreement::STRINGS));
    let mut cases: Vec<&'static Case> = cases::all()
        .filter(|c| c.emulator == Emulator::Bochs)
        .collect();
    cases.sort_by_key(|c| std::cmp::Reverse(c.timeout));
    jobs.splice(0..0, cases.into_iter().map(|c| Job::Case(c, c.repeat)));
    jobs.retain(|j| wanted(&j.name()));
    jobs
}

/// Bochs runs one CPU on one host thread (as does QEMU under icount, the
/// model's plugin with it): as many boots at once as the host has CPUs, at
/// most [`MAX_BOCHS_WORKERS`].
fn bochs_workers() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, MAX_BOCHS_WORKERS)
}

/// Beyond two, CI's two-CPU machines only share the same cores.
const MAX_BOCHS_WORKERS: usize = 2;

/// Runs `jobs` on `workers` threads, each job in its own scratch directory
/// (`<dir>/<prefix>-<i>`: its GRUB image, bochsrc and logs), reporting each
/// as it ends.
fn run_parallel(
    jobs: &[Job],
    workers: usize,
    art: &Artifacts,
    dir: &Path,
    prefix: &str,
    tally: &mut Tally,
) {
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Instant, Result<(), String>)>();
    std::thread::scope(|s| {
        for _ in 0..workers {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(job) = jobs.get(i) else { break };
                let scratch: PathBuf = dir.join(format!("{prefix}-{i}"));
                let t = Instant::now();
                let r = std::fs::create_dir_all(&scratch)
                    .map_err(|e| format!("{}: {e}", scratch.display()))
                    .and_then(|()| job.run(art, &scratch));
                if tx.send((i, t, r)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (i, t, r) in rx {
            let name = jobs[i].name();
            tally.report(&name, Some(t), r);
        }
    });
}

/// `cargo test -p abi -p xtask -p model`; true when it passed.
fn host_unit_tests(root: &Path) -> Result<bool> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut c = Command::new(cargo);
    c.args(["test", "-p", "abi", "-p", "xtask", "-p", "model"])
        .current_dir(root);
    // `cargo run` gave this process the package's variables (CARGO_PKG_NAME
    // and the like). A build script that reads one (ring's, under ureq)
    // asks cargo to rerun when it changes, and cargo compares its own
    // environment: inherited, they would rebuild ring and link the xtask
    // binary anew under the running one, and again at the next `cargo
    // xtask`.
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CARGO_PKG_")
            || k.starts_with("CARGO_MANIFEST_")
            || [
                "CARGO_CRATE_NAME",
                "CARGO_BIN_NAME",
                "CARGO_PRIMARY_PACKAGE",
            ]
            .contains(&k.as_ref())
        {
            c.env_remove(k.as_ref());
        }
    }
    Ok(c.status()?.success())
}

/// The test of the book's links and of the tests its claims name.
const DOCS_LINKS: &str = "docs: every internal link resolves, every named test exists";

/// `cargo xtask docs --check` as tests of their own: the links and named
/// tests, then one test per command whose output the README and the book
/// show (the command run once, every block showing it compared). The
/// commands that may run beside others go two at a time, as the boots,
/// the longest first; the others (a `test`, `gdb` on its port, `bench`es
/// sharing an output directory) one by one, as the pool's first job.
fn docs_section(filter: Option<&str>, tally: &mut Tally) -> Result<()> {
    use crate::cmd::docs;
    // Picked by a filter the name starts with (`--filter docs`, `--filter
    // "docs: cargo xtask trace"`), not one it merely contains: a docs test
    // names its command, and the README shows a `cargo xtask test
    // --filter X`, whose test would otherwise pick itself and start again.
    let wanted = |name: &str| filter.is_none_or(|f| name.starts_with(f));
    let shown = docs::shown_commands()?;
    let name = |s: &docs::Shown| {
        format!(
            "docs: cargo xtask {}: the output {} show{} is current",
            s.cmd,
            s.files.join(" and "),
            if s.files.len() == 1 { "s" } else { "" }
        )
    };
    let check = |s: &docs::Shown| -> Result<(), String> {
        match docs::check_shown(s) {
            Ok(stale) if stale.is_empty() => Ok(()),
            Ok(stale) => Err(format!(
                "stale output (run `cargo xtask docs --only FILE`): {}",
                stale.join("; ")
            )),
            Err(e) => Err(format!("{e:#}")),
        }
    };
    let book = recorded_times();
    let mut beside = Vec::new();
    let mut alone = Vec::new();
    for s in &shown {
        let n = name(s);
        if !wanted(&n) {
            continue;
        }
        let guess = book.tests.get(&n).map(|m| m.secs);
        let t = Test::plain(n, move || check(s));
        if docs::shown_runs_beside_others(s, &shown) {
            beside.push((guess.unwrap_or_else(|| docs_guess(&s.cmd)), t));
        } else {
            alone.push(t.alone_if(true));
        }
    }
    let links = wanted(DOCS_LINKS);
    if !links && beside.is_empty() && alone.is_empty() {
        return Ok(());
    }
    tally.section("the book's outputs and links (cargo xtask docs --check, a test per command)");
    if links {
        tally.case(DOCS_LINKS, || {
            let mut problems: Vec<String> = docs::broken_links()
                .map_err(|e| format!("{e:#}"))?
                .into_iter()
                .map(|l| format!("broken link: {l}"))
                .collect();
            problems.extend(
                docs::unknown_tests()
                    .map_err(|e| format!("{e:#}"))?
                    .into_iter()
                    .map(|t| format!("unknown test: {t}")),
            );
            if problems.is_empty() {
                Ok(())
            } else {
                Err(problems.join("\n  "))
            }
        });
    }
    beside.sort_by(|a, b| b.0.total_cmp(&a.0));
    let tests = beside.into_iter().map(|(_, t)| t).chain(alone).collect();
    tally.tests_parallel(tests, bochs_workers());
    Ok(())
}

/// The wall times the book's record holds (none if it cannot be read).
fn recorded_times() -> times::Book {
    times::Book::read(&kbuild::root().join(times::BOOK_FILE)).unwrap_or_default()
}

/// The order that starts the longest tests first: by the book's recorded
/// wall time, a test it has not timed before all (it may be long), ties in
/// the order given (the sort is stable).
fn longest_first(book: &times::Book, a: &str, b: &str) -> std::cmp::Ordering {
    let secs = |n: &str| book.tests.get(n).map_or(f64::INFINITY, |m| m.secs);
    secs(b).total_cmp(&secs(a))
}

/// Seconds a docs command not timed before may take, to start the long
/// ones first: the tables (one boot per row or column, the CPU matrix's on
/// every model of both emulators), the other commands that boot many
/// times, then model boots, then the rest.
fn docs_guess(cmd: &str) -> f64 {
    let first = cmd.split_whitespace().next().unwrap_or("");
    if cmd.starts_with("docs --table") {
        120.0
    } else if ["bench", "forktest", "lmbench", "test"].contains(&first) {
        60.0
    } else if cmd.contains("--clock model") {
        10.0
    } else {
        3.0
    }
}
/// `cargo xtask bench -n n --accel tcg --clock icount args...`: its exit
/// status.
fn bench_under_icount(n: &str, args: &[&str]) -> Result<i32> {
    let mut argv = vec!["-n", n, "--accel", "tcg", "--clock", "icount"];
    argv.extend_from_slice(args);
    bench_cli(&argv)
}

/// `cargo xtask bench args...` as the command line gives it (its words
/// kept for the command a post says reproduces it): its exit status.
fn bench_cli(args: &[&str]) -> Result<i32> {
    use clap::{CommandFactory, FromArgMatches, Parser};
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        b: crate::cmd::bench::BenchArgs,
    }
    let argv: Vec<&str> = std::iter::once("bench")
        .chain(args.iter().copied())
        .collect();
    let m = Cli::command().try_get_matches_from(&argv)?;
    let cli = Cli::from_arg_matches(&m)?;
    let mut b = cli.b.in_order(&m);
    b.argv = argv.iter().map(|w| w.to_string()).collect();
    crate::cmd::bench::bench(b)
}

/// `bench --post` on a real change, the flags reset dropped from the
/// sysenter path (feature `exercise-sysenter-no-flags-reset`: no `pushl
/// $2; popfl`), under icount and under the model (profile modern): the
/// post's labels, its table's figures, the zero spread said in words, the
/// changed code, the profile entry the modelled figure rests on with its
/// source, and the command that reproduces it.
fn bench_post(root: &Path) -> Result<()> {
    let feature = "exercise-sysenter-no-flags-reset";
    let features = format!("noreset={feature}");
    let runs: [(&str, &[&str], &[&str]); 2] = [
        (
            "icount",
            &["--clock", "icount"],
            &[
                "clock=icount (exact instruction counts, not cycles)",
                "sysenter.null instructions 46 44 -2 -4.35%",
                "The spread is 0 because icount is deterministic",
                "  kernel sysenter_common: -push $0x2, popf\n",
            ],
        ),
        (
            "model",
            &["--clock", "model", "--profile", "modern"],
            &[
                "clock=model (modelled cycles of profile modern; the guest counted instructions)",
                "sysenter.null modelled cycles (profile modern) 210 189 -21 -10.00%",
                "The spread is 0 because the model is deterministic",
                "  - popf in sysenter_common: profile key popf\n",
                "  popf = 19: AGNER-T Skylake: POPF, reciprocal throughput 20. On a real CPU, it ",
            ],
        ),
    ];
    for (clock, flags, says) in runs {
        let out = root.join(format!("target/xtask/bench-post-{clock}"));
        let _ = std::fs::remove_dir_all(&out);
        let out_arg = out.to_str().context("path")?;
        let mut argv = vec!["-n", "3", "--accel", "tcg"];
        argv.extend_from_slice(flags);
        argv.extend_from_slice(&[
            "--variant",
            "reset=",
            "--features",
            &features,
            "--append",
            "batches=4 batch_size=64",
            "--out",
            out_arg,
            "--post",
        ]);
        bench_cli(&argv)?;
        let dir = export_dir(&out)?;
        let post = std::fs::read_to_string(dir.join("post.txt"))?;
        let env = post.lines().next().unwrap_or("");
        anyhow::ensure!(
            env.starts_with("i386 testbed: QEMU ")
                && env.contains(" TCG, host CPU ")
                && env.contains(&format!("(features: {feature})"))
                && env.ends_with(", 3 boots per side"),
            "{clock}: the environment line: {env}"
        );
        // The table's rows with their blanks made one (the columns are as
        // wide as their widest cell).
        let rows: Vec<String> = post
            .lines()
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        for s in says
            .iter()
            .copied()
            .filter(|s| s.starts_with("sysenter.null "))
        {
            anyhow::ensure!(
                rows.iter().any(|r| r == s),
                "{clock}: the post's table has no row {s:?}:\n{post}"
            );
        }
        for s in says
            .iter()
            .copied()
            .filter(|s| !s.starts_with("sysenter.null "))
            .chain([
                "noreset against reset: ",
                "Reproduce: cargo xtask bench -n 3 --accel tcg ",
            ])
        {
            anyhow::ensure!(
                post.contains(s),
                "{clock}: the post does not say {s:?}:\n{post}"
            );
        }
        if clock == "model" {
            anyhow::ensure!(
                !post.contains("icount ("),
                "{clock}: the post calls modelled cycles icount's:\n{post}"
            );
        }
        // `post DIR` reads the same post back from bench.json, typed.
        let text = std::fs::read_to_string(dir.join("bench.json"))?;
        let f = crate::results::bench::BenchFile::parse(&text)?;
        anyhow::ensure!(
            crate::export::post::post(&f, crate::export::post::Form::Text) == post,
            "{clock}: the post made from bench.json differs from post.txt"
        );
    }
    Ok(())
}

fn bench_smoke(root: &Path) -> Result<()> {
    let out = root.join("target/xtask/bench-test");
    let _ = std::fs::remove_dir_all(&out);
    let out_arg = out.to_str().context("path")?;
    // The two mechanisms differ: --fail-on-change says so in its status.
    let status = bench_under_icount(
        "2",
        &[
            "--variant",
            "a=entry=int80",
            "--variant",
            "b=entry=sysenter",
            "--append",
            "batches=3 batch_size=64",
            "--out",
            out_arg,
            "--save-baseline",
            "smoke",
            "--fail-on-change",
        ],
    )?;
    anyhow::ensure!(
        status == crate::cmd::bench::CHANGED_EXIT,
        "--fail-on-change exited with {status} on a change"
    );
    let dir = export_dir(&out)?;
    let md = std::fs::read_to_string(dir.join("bench.md"))?;
    anyhow::ensure!(
        md.contains("| null | instructions per operation, lower is better | 24 | 46 | +22 instructions (+91.67%), exact | b takes 91.67% more instructions than a: differs by exactly 22 instructions (+91.67%, worse) | [plot](null.svg) |"),
        "unexpected Markdown:\n{md}"
    );
    for f in [
        "bench.json",
        "bench.csv",
        "batches.csv",
        "ministat.txt",
        "null.svg",
        "data/null.a.dat",
    ] {
        anyhow::ensure!(
            dir.join(f).is_file(),
            "no {f} among the exports in {}",
            dir.display()
        );
    }
    anyhow::ensure!(
        out.join("baselines/smoke.json").is_file(),
        "the baseline was not saved"
    );
    // The same kernel against its baseline: nothing changed, status 0.
    let status = bench_under_icount(
        "1",
        &[
            "--variant",
            "a=entry=int80",
            "--append",
            "batches=3 batch_size=64",
            "--out",
            out_arg,
            "--baseline",
            "smoke",
            "--fail-on-change",
        ],
    )?;
    anyhow::ensure!(
        status == 0,
        "an unchanged kernel against its baseline exited with {status}"
    );
    Ok(())
}

/// `run --json`: stdout holds the results JSON and nothing else (the
/// header and the kernel's text go to stderr).
fn run_json() -> Result<()> {
    let o = Command::new(crate::kbuild::xtask_exe()?)
        .args([
            "run",
            "--clock",
            "icount",
            "--json",
            "--no-save",
            "--append",
            "batches=2 batch_size=16",
        ])
        .current_dir(kbuild::root())
        .output()?;
    anyhow::ensure!(
        o.status.success(),
        "run --json failed: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let out = String::from_utf8_lossy(&o.stdout);
    let r = Results::parse(&out)
        .with_context(|| format!("stdout is not the results JSON alone:\n{out}"))?;
    anyhow::ensure!(r.bench("int80.null").is_some(), "no int80.null in the JSON");
    anyhow::ensure!(
        String::from_utf8_lossy(&o.stderr).contains("i386 testbed  QEMU"),
        "the header is not on stderr"
    );
    Ok(())
}

/// The one export directory `bench` wrote under `out` (besides `baselines`).
fn export_dir(out: &Path) -> Result<std::path::PathBuf> {
    let mut dirs: Vec<_> = std::fs::read_dir(out)?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir() && !p.ends_with("baselines"))
        .collect();
    dirs.sort();
    dirs.pop().context("no export directory")
}

/// `cargo xtask bench` over two pool layouts (`pool_align=packed` against
/// `pool_align=128`), one boot each: the `locks` program's figures, then
/// `mode=smp`'s on 2 CPUs, compared layout against layout and exported.
fn bench_layouts(root: &Path) -> Result<()> {
    /// A bench run: its name, its flags, and each metric with what its
    /// export row must say about it.
    type Run<'a> = (&'a str, &'a [&'a str], &'a [(&'a str, &'a str)]);
    let runs: [Run; 2] = [
        (
            "locks",
            &["--prog", "locks"],
            &[
                ("locks.uncontended", "lower is better"),
                ("locks.contended", "lower is better"),
                ("locks.sleep_wakeup", "lower is better"),
                ("locks.lookup", "lower is better"),
                ("ebizzy", "records/s, a throughput: higher is better"),
            ],
        ),
        (
            "smp",
            &["--mode", "smp", "--smp", "2"],
            &[
                ("smp.false_sharing", "ops/s, a throughput: higher is better"),
                ("smp.pingpong", "lower is better"),
            ],
        ),
    ];
    for (what, flags, metrics) in runs {
        let out = root.join(format!("target/xtask/bench-layouts-{what}"));
        let _ = std::fs::remove_dir_all(&out);
        let mut argv = vec![
            "--variant",
            "a=pool_align=packed",
            "--variant",
            "b=pool_align=128",
            "--out",
            out.to_str().context("path")?,
        ];
        argv.extend_from_slice(flags);
        for (m, _) in metrics {
            argv.extend(["--metric", m]);
        }
        bench_under_icount("1", &argv)?;
        let md = std::fs::read_to_string(export_dir(&out)?.join("bench.md"))?;
        for (m, how) in metrics {
            anyhow::ensure!(
                md.lines()
                    .any(|l| l.starts_with(&format!("| {m} | ")) && l.contains(how)),
                "{what}: no row for {m} ({how}) in the Markdown export:\n{md}"
            );
        }
    }
    Ok(())
}

pub fn run(a: TestArgs) -> Result<i32> {
    let model = a.emulator.filter(|_| a.cpu.is_some() || a.smp.is_some());
    if let Some(emulator) = model.filter(|_| !a.host_only) {
        let mut tally = Tally::default();
        if !a.boots_only {
            host_sections(&kbuild::root(), &mut tally)?;
        }
        return model_boots(emulator, a.cpu.as_deref(), a.smp, &kbuild::root(), tally);
    }
    let mut tally = Tally {
        listing: a.list,
        ..Tally::default()
    };
    let started = (std::time::SystemTime::now(), Instant::now());
    // The run's boot cache (machine::replay): empty now, gone at the end.
    let cache = if a.list {
        None
    } else {
        Some(crate::machine::replay::RunCache::start(
            &kbuild::root().join("target"),
        )?)
    };
    plan(&a, &mut tally)?;
    if a.list {
        return Ok(tally.finish());
    }
    tally.say_spans();
    // On stderr: a test run a chapter shows (inside this one or not)
    // prints the same.
    if let Some(s) = cache.as_ref().and_then(|c| c.summary()) {
        eprintln!(
            "test: boot cache: {} deterministic boots ran, {} more asked for again and read back (they took {:.0} s when they ran)",
            s.ran,
            s.replayed,
            s.saved.as_secs_f64()
        );
        let real: Vec<String> = s
            .real
            .iter()
            .map(|(kind, n, t)| format!("{kind}: {n} in {:.0} s", t.as_secs_f64()))
            .collect();
        eprintln!(
            "test: the boots that ran, by kind (fresh: a test's point is to boot again; else why not cached): {}",
            real.join("; ")
        );
    }
    // A check that found a boot on several CPUs moved, and let another
    // boot decide, is said again at the end, where it is seen.
    let moved = crate::machine::replay::moved();
    if !moved.is_empty() {
        eprintln!(
            "test: {} check(s) found a boot on several CPUs moved from boot to boot and let \
             another boot decide (docs/threads.md, \"When a multi-CPU boot moves\"):",
            moved.len()
        );
        for m in &moved {
            eprintln!("  {m}");
        }
    }
    if let Some(c) = &cache {
        let to = kbuild::root().join(crate::machine::replay::LAST_LOG);
        if let Err(e) = c.keep_log(&to) {
            eprintln!("test: {e:#}");
        }
    }
    let whole = a.filter.is_none() && a.emulator.is_none() && !a.boots_only && !a.host_only;
    let file = times::Run::new(&tally.ran, a.filter.as_deref(), whole, started);
    let out = kbuild::root().join(times::LAST_RUN);
    if let Err(e) = file.save(&out) {
        eprintln!("test: cannot write {}: {e:#}", out.display());
    }
    if a.record_times {
        let book = kbuild::root().join(times::BOOK_FILE);
        times::merge_into(&book, &file)?;
        println!("test: wall times merged into {}", times::BOOK_FILE);
    }
    if let Some(path) = &a.junit {
        junit::write(path, &tally.ran, &tally.why)?;
        println!("test: JUnit XML in {}", path.display());
    }
    Ok(tally.finish())
}

/// The tests `cargo xtask test` runs with these flags, section by section
/// (`filter`: only those whose name contains it), named and not run.
pub(crate) fn list(filter: Option<&str>) -> Result<Vec<times::Ran>> {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        t: TestArgs,
    }
    let mut argv = vec!["test", "--list"];
    if let Some(f) = filter {
        argv.extend(["--filter", f]);
    }
    let a = Cli::try_parse_from(argv)?.t;
    let mut tally = Tally {
        listing: true,
        quiet: true,
        ..Tally::default()
    };
    plan(&a, &mut tally)?;
    Ok(tally.ran)
}

/// The host's own checks: the unit tests and the kernel's layers.
fn host_sections(root: &Path, tally: &mut Tally) -> Result<()> {
    tally.section("host unit tests (cargo test -p abi -p xtask -p model)");
    if tally.listing {
        tally.listed("host unit tests");
    } else {
        let t = Instant::now();
        let ok = host_unit_tests(root)?;
        tally.count("host unit tests", t, ok);
    }
    tally.section("the kernel's layers (cargo xtask layers)");
    let name = "layers: no import circle above the limit, arch imports nothing above it";
    if tally.listing {
        tally.listed(name);
    } else {
        let t = Instant::now();
        let (ok, text) = crate::cmd::layers::check(&root.join("kernel/src"), false)?;
        print!("{text}");
        tally.count(name, t, ok);
    }
    Ok(())
}

/// Every section of a run, in order: each test run and counted, or
/// (listing) only named.
fn plan(a: &TestArgs, tally: &mut Tally) -> Result<()> {
    let root = kbuild::root();
    if !a.boots_only {
        host_sections(&root, tally)?;
    }
    if a.host_only {
        return Ok(());
    }
    let on = |e: Emulator| a.emulator.is_none_or(|x| x == e);
    let wanted = |name: &str| a.filter.as_deref().is_none_or(|f| name.contains(f));
    let bochs_jobs = if on(Emulator::Bochs) {
        bochs_jobs(&wanted)
    } else {
        Vec::new()
    };
    let art = if tally.listing {
        // Named, never booted: no kernel needed.
        Artifacts {
            kernel: PathBuf::new(),
            programs: Vec::new(),
        }
    } else {
        preflight::ensure_tools()?;
        if !bochs_jobs.is_empty() {
            preflight::ensure(preflight::Need::Bochs)?;
        }
        tally.section("building the kernel and the user programs");
        kbuild::build(true)?
    };
    let dir = root.join("target/xtask");
    if !tally.listing {
        std::fs::create_dir_all(&dir)?;
    }
    tally.section("boots under QEMU TCG (clock=icount)");
    let repeat = |c: &Case| match (c.repeat, a.repeat_boots) {
        (1, _) => 1,
        (_, Some(n)) => n,
        (n, None) => n,
    };
    // An icount boot runs on one host thread and its figures do not depend
    // on the host's speed: as many at once as for Bochs. The boots whose
    // CPUs run in parallel (multi-threaded TCG) need the host's cores to
    // race each other: one at a time, after them.
    let (single, multi): (Vec<&'static Case>, Vec<&'static Case>) = cases::all()
        .filter(|c| c.emulator == Emulator::Qemu && on(Emulator::Qemu) && wanted(c.name))
        .partition(|c| c.threads == crate::machine::qemu::Threads::Single);
    // The kernels built with a test feature first: their builds are long,
    // and run beside the other boots.
    let own: [Job; 2] = [
        Job::Own(cases::LATE_AP.name, late_ap),
        Job::Own(GDT_ORDER, gdt_order),
    ];
    let own = own
        .into_iter()
        .filter(|j| on(Emulator::Qemu) && wanted(&j.name()));
    if tally.listing {
        for j in own {
            tally.listed(&j.name());
        }
        for c in &single {
            tally.listed(c.name);
        }
    } else {
        let mut single = single;
        let book = recorded_times();
        single.sort_by(|a, b| longest_first(&book, a.name, b.name));
        let jobs: Vec<Job> = own
            .chain(single.iter().map(|&c| Job::Case(c, repeat(c))))
            .collect();
        run_parallel(&jobs, bochs_workers(), &art, &dir, "qemu", tally);
    }
    for c in multi {
        tally.case(c.name, || run_case(c, &art, &dir, repeat(c)));
    }
    if on(Emulator::Qemu) {
        tally.section("boots under the model clock (QEMU TCG, icount, the model plugin)");
        // Two at a time, as the icount boots: each is one QEMU process on
        // one host thread, with a plugin file of its own.
        let mut tests = model::self_tests(&art, &dir, a.filter.as_deref());
        let book = recorded_times();
        tests.sort_by(|a, b| longest_first(&book, &a.name, &b.name));
        tally.tests_parallel(tests, bochs_workers());
    }
    if !bochs_jobs.is_empty() {
        tally.section(&format!(
            "boots under Bochs through GRUB (clock=tsc: {})",
            abi::syscall::BOCHS_TICK
        ));
        if tally.listing {
            for j in &bochs_jobs {
                tally.listed(&j.name());
            }
        } else {
            let workers = bochs_workers();
            println!("({workers} at a time)");
            run_parallel(&bochs_jobs, workers, &art, &dir, "bochs", tally);
        }
    }
    // The host-side checks, QEMU's: each its short name (the filter picks
    // one when it is part of it), its name, and the check.
    let selected =
        |short: &str| on(Emulator::Qemu) && a.filter.as_deref().is_none_or(|f| short.contains(f));
    type HostCheck<'a> = (&'a str, &'a str, &'a dyn Fn() -> Result<()>);
    let host_checks: [HostCheck; 4] = [
        (
            "bench",
            "bench: two variants interleaved, compared and exported",
            &|| bench_smoke(&root),
        ),
        (
            "bench post",
            "bench post: a change's post under icount and the model, its labels and figures",
            &|| bench_post(&root),
        ),
        (
            "bench layouts",
            "bench layouts: pool_align=packed against 128, the lock, ebizzy and SMP figures compared",
            &|| bench_layouts(&root),
        ),
        (
            "run json",
            "run --json: stdout holds the results JSON alone",
            &run_json,
        ),
    ];
    if host_checks.iter().any(|(short, _, _)| selected(short)) {
        tally.section("the host's commands end to end (QEMU TCG, clock=icount)");
    }
    for (short, name, check) in host_checks {
        if selected(short) {
            tally.case(name, || check().map_err(|e| format!("{e:#}")));
        }
    }
    if on(Emulator::Qemu) {
        // The lab sections mostly wait (lava-run and a LAVA server start
        // their daemons, QEMU and poll), one test at a time: they run
        // beside the docs' commands, which keep the cores busy, and print
        // after them.
        let lab = lab::self_tests(a.filter.as_deref());
        let server = labserver::self_tests(a.filter.as_deref());
        tally.beside(
            |tally| docs_section(a.filter.as_deref(), tally),
            |tally| {
                if !lab.is_empty() {
                    tally.section(
                        "the lab path: LAVA jobs under lava-run (QEMU TCG, clock=icount)",
                    );
                }
                for t in lab {
                    tally.test(t);
                }
                if !server.is_empty() {
                    tally.section("the lab path through a LAVA server: lab up, submit, wait, fetch, import (QEMU TCG, clock=icount)");
                }
                for t in server {
                    tally.test(t);
                }
            },
        )?;
        let teaching = teaching::self_tests(a.filter.as_deref());
        if !teaching.is_empty() {
            tally.section("the teaching tools: traces, gdb, the exercises, the chapters' commands");
        }
        // Side by side as the docs' commands (each boots in a scratch
        // directory of its own; the boots the docs ran are read back from
        // the run's cache); gdb's fixed port and the benches that write
        // the default output directory one by one, as the pool's first job.
        tally.tests_parallel(teaching, bochs_workers());
    }
    Ok(())
}

/// `--cpu`/`--smp`: the kernel tests and the hostile suite on one model,
/// and mode=smp with `smp` CPUs, on `emulator`.
fn model_boots(
    emulator: Emulator,
    cpu: Option<&str>,
    smp: Option<u32>,
    root: &Path,
    mut tally: Tally,
) -> Result<i32> {
    preflight::ensure(match emulator {
        Emulator::Qemu => preflight::Need::Qemu,
        Emulator::Bochs => preflight::Need::Bochs,
    })?;
    println!("== building the kernel and the user programs");
    let art = kbuild::build(true)?;
    let dir = root.join("target/xtask");
    std::fs::create_dir_all(&dir)?;
    let model = cpu.map_or_else(|| "the default CPU".to_string(), str::to_string);
    let emulator_name = match emulator {
        Emulator::Qemu => "QEMU",
        Emulator::Bochs => "Bochs",
    };
    if let Some(cpu) = cpu {
        let name = format!("{emulator_name} {cpu}: kernel tests and the hostile suite");
        let t = Instant::now();
        let r = cases::model_case(emulator, Some(cpu), 1, "mode=test", &art, &dir);
        tally.report(&name, Some(t), r);
    }
    if let Some(n) = smp {
        let name = format!("{emulator_name} {model}: mode=smp with {n} CPUs");
        let t = Instant::now();
        let r = cases::model_case(emulator, cpu, n, "mode=smp", &art, &dir);
        tally.report(&name, Some(t), r);
    }
    Ok(tally.finish())
}

#[cfg(test)]
mod tally_tests {
    use super::*;

    #[test]
    fn the_longest_tests_start_first_and_untimed_ones_before_all() {
        let mut book = times::Book::default();
        for (n, secs) in [("short", 1.0), ("long", 30.0), ("mid", 5.0)] {
            book.tests.insert(
                n.to_string(),
                times::Measured {
                    section: String::new(),
                    result: times::Outcome::Pass,
                    secs,
                    load: None,
                    rev: String::new(),
                    started: 0,
                },
            );
        }
        let mut names = vec!["short", "mid", "new", "long"];
        names.sort_by(|a, b| longest_first(&book, a, b));
        assert_eq!(names, ["new", "long", "mid", "short"]);
        assert_eq!(docs_guess("bench -n 3 --out x"), 60.0);
        assert!(docs_guess("docs --table cpu-matrix") > docs_guess("bench -n 3"));
        assert!(docs_guess("run --no-save --clock model") > docs_guess("trace int80"));
    }

    #[test]
    fn a_section_run_beside_another_prints_after_it_and_counts_in_it() {
        let mut t = Tally {
            held: Some(Vec::new()),
            ..Tally::default()
        };
        t.beside(
            |t| {
                t.section("busy");
                t.report("a", None, Ok(()));
                Ok(())
            },
            |t| {
                t.section("waits");
                t.report("b", None, Err("no".into()));
                t.report("c", None, Err(format!("{SKIP}none here")));
                t.section("waits more");
                t.report("d", None, Ok(()));
            },
        )
        .unwrap();
        assert_eq!(
            t.held.as_deref().unwrap(),
            [
                "== busy",
                "PASS a",
                "== waits",
                "FAIL b: no",
                "SKIP c: none here",
                "== waits more",
                "PASS d"
            ]
        );
        assert_eq!((t.passed, t.failed, t.skipped), (2, 1, 1));
        let named = |i: &usize| t.ran[*i].name.clone();
        let mut why: Vec<(String, &str)> =
            t.why.iter().map(|(i, w)| (named(i), w.as_str())).collect();
        why.sort();
        assert_eq!(why, [("b".into(), "no"), ("c".into(), "none here")]);
        assert_eq!(t.ran[3].section, "waits more");
        // The side's sections keep their own ends: the first ends where the
        // second starts.
        let spans: Vec<(&str, bool)> = t
            .spans
            .iter()
            .map(|s| (s.0.as_str(), s.2.is_some()))
            .collect();
        assert_eq!(
            spans,
            [("busy", false), ("waits", true), ("waits more", true)]
        );
        assert_eq!(t.spans[1].2, Some(t.spans[2].1));
        assert_eq!(t.finish(), 1);
    }

    #[test]
    fn a_test_that_cannot_run_is_counted_as_skipped() {
        let mut t = Tally::default();
        t.report("runs", None, Ok(()));
        t.report("gdb", None, Err(format!("{SKIP}no gdb here")));
        assert_eq!((t.passed, t.failed, t.skipped), (1, 0, 1));
        assert_eq!(t.finish(), 0);
        let mut t = Tally::default();
        t.report("breaks", None, Err("SKIPPED nothing: a failure".into()));
        assert_eq!((t.passed, t.failed, t.skipped), (0, 1, 0));
        assert_eq!(t.finish(), 1);
    }
}
