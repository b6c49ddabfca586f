//! The in-kernel test runner (`mode=test`): kernel tests first, then the
//! user programs that test every mechanism and every fault class. Each test
//! prints a PASS/FAIL line and a `test` record; the summary decides the exit
//! status. Beside them the run is KTAP (the format of Linux's kselftest and
//! KUnit), for LAVA and any KTAP reader: `KTAP version 1` first, an
//! `ok N name` or `not ok N name` line per test (`# SKIP why` for a skip),
//! and the plan `1..N` last (TAP lets the plan close the run when the count
//! is known only then: which tests run depends on the CPU and `test=`).

use core::fmt::Write as _;

use abi::cases::{Expect, EXIT_SKIPPED, FAULT_CASES};
use abi::cmdline::Options;
use abi::exit::vector_name;
use abi::layout::{KERNEL_MAP_END, PAGE_SIZE, USER_BASE, USER_TOP};
use abi::report::kind;
use abi::syscall::errno::{self, EFAULT};
use abi::Mechanism;

use crate::arch::{cpu, frames, paging};
use crate::boot::info::BootInfo;
use crate::syscall::usercopy::{check, Access};
use crate::task::{self, End};
use crate::{entry, kprintln, record};

type Test = (&'static str, fn() -> Result<(), &'static str>);

const KERNEL_TESTS: &[Test] = &[
    (
        "kernel: identity map is supervisor-only",
        kernel_map_supervisor_only,
    ),
    (
        "kernel: page 0 and stack guard pages are unmapped",
        guards_unmapped,
    ),
    ("kernel: frames are zeroed and reused", frames_reused),
    (
        "kernel: user-pointer checks refuse bad ranges",
        user_pointer_checks,
    ),
    (
        "kernel: exception table turns a fault into a fixup",
        extable_fixup,
    ),
    (
        "kernel: RDPMC of a counter no CPU has faults into its fixup",
        rdpmc_invalid_counter,
    ),
    ("kernel: mechanisms match CPUID", mechanisms_match_cpuid),
    ("kernel: mutex lock, relock (EDEADLK), unlock", kernel_mutex),
    (
        "kernel: kernel threads lend priority through the kernel mutex",
        kernel_threads,
    ),
    ("kernel: pools keep 128-byte objects apart", pool_layout),
    (
        "kernel: a trap held off by MOV SS onto any exception stub is resumed",
        crate::trap::held_trap_check,
    ),
];

struct Tally {
    passed: u32,
    failed: u32,
    /// Tests reported so far (KTAP's test number of the last).
    ktap: u32,
}

/// A test's name as a KTAP description: `#` (which would start a
/// directive) escaped as `\#`, a line end as a space.
struct KtapName<'a>(&'a str);

impl core::fmt::Display for KtapName<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter) -> core::fmt::Result {
        for c in self.0.chars() {
            match c {
                '#' => f.write_str("\\#")?,
                '\n' | '\r' => f.write_char(' ')?,
                c => f.write_char(c)?,
            }
        }
        Ok(())
    }
}

impl Tally {
    /// A test that cannot run here; it counts as neither passed nor failed.
    fn skip(&mut self, name: &str, why: &str) {
        kprintln!("SKIP {name}: {why}");
        record!(kind::TEST, "name" => name, "result" => "skip", "detail" => why);
        self.ktap += 1;
        kprintln!(
            "ok {} {} # SKIP {}",
            self.ktap,
            KtapName(name),
            KtapName(why)
        );
    }

    fn report(&mut self, name: &str, result: Result<(), &str>) {
        self.ktap += 1;
        match result {
            Ok(()) => {
                self.passed += 1;
                kprintln!("PASS {name}");
                record!(kind::TEST, "name" => name, "result" => "pass", "detail" => "");
                kprintln!("ok {} {}", self.ktap, KtapName(name));
            }
            Err(why) => {
                self.failed += 1;
                kprintln!("FAIL {name}: {why}");
                record!(kind::TEST, "name" => name, "result" => "fail", "detail" => why);
                kprintln!("# {}", KtapName(why));
                kprintln!("not ok {} {}", self.ktap, KtapName(name));
            }
        }
    }
}

/// Runs every test whose name contains `opts.test`; true when all passed.
pub fn run_all(bi: &BootInfo<'static>, opts: &Options) -> bool {
    let wanted = |name: &str| opts.test.is_none_or(|t| name.contains(t));
    let mut t = Tally {
        passed: 0,
        failed: 0,
        ktap: 0,
    };
    kprintln!("KTAP version 1");
    for &(name, test) in KERNEL_TESTS {
        if wanted(name) {
            t.report(name, test());
        }
    }
    // First a task that changes every piece of machine state it can and
    // ends (each way a task can end): everything after runs on what the
    // boot chose, or fails.
    let name = "user: a task's entry floors, pool layout and x87 go back to the boot's choice, on every CPU";
    if wanted(name) {
        t.report(name, spoiled_state_restored(bi));
    }
    // The user test program checks every syscall through every mechanism
    // and prints its own records; its exit status is its failure count.
    let name = "user: every mechanism, every syscall, registers preserved";
    if wanted(name) {
        let r = match bi.module("utest") {
            None => Err("no 'utest' module"),
            Some(m) => match task::run(m, 0) {
                Ok(End::Exit(0)) => Ok(()),
                Ok(End::Exit(_)) => Err("utest reported failures"),
                Ok(_) => Err("utest faulted"),
                Err(_) => Err("utest would not load"),
            },
        };
        t.report(name, r);
    }
    // Threads, turnstiles and sleepqueues from ring 3 (the `locks` program's
    // tests: priority propagation, wake-up order, a stress, exhaustion,
    // EDEADLK); it prints a check record for each.
    let name = "user: threads, user mutexes on turnstiles, sleep/wakeup";
    if wanted(name) {
        let r = match bi.module("locks") {
            None => Err("no 'locks' module"),
            Some(m) => match task::run(m, abi::syscall::locks_arg::TESTS) {
                Ok(End::Exit(0)) => Ok(()),
                Ok(End::Exit(_)) => Err("locks reported failures"),
                Ok(End::Deadlock) => Err("the locks tests deadlocked"),
                Ok(_) => Err("locks faulted"),
                Err(_) => Err("locks would not load"),
            },
        };
        t.report(name, r);
    }
    ending_elsewhere(bi, &wanted, &mut t);
    processes(bi, &wanted, opts.test.is_some(), &mut t);
    hostile_suite(bi, &wanted, &mut t);
    let (used, total) = frames::usage();
    kprintln!(
        "tests: {} passed, {} failed ({} of {} frames in use)",
        t.passed,
        t.failed,
        used,
        total
    );
    record!(kind::TESTS, "passed" => t.passed, "failed" => t.failed);
    kprintln!("1..{}", t.ktap);
    t.failed == 0
}

/// The `procs` program: its cases (fork, exit, waitpid, orphans, a fork
/// bomb, sbrk...), then 10,000 bare fork/exit/wait rounds, after which
/// the kernel's frames and the user pages in use must be exactly what they
/// were before (no page, page table, directory or kernel stack leaked).
/// The rounds run only when `test=` names them (`named`): the CPU matrix's
/// test boots would repeat them on every model.
fn processes(bi: &BootInfo<'static>, wanted: &dyn Fn(&str) -> bool, named: bool, t: &mut Tally) {
    use abi::syscall::procs_arg::ROUNDS;
    const LEAK_ROUNDS: u32 = 10_000;
    let cases = "user: processes (fork, exit, waitpid, orphans to pid 1, a fork bomb, sbrk)";
    let leaks =
        "processes: 10,000 fork/exit/wait rounds leave every frame and page where they were";
    let leak_test = named && wanted(leaks);
    if !wanted(cases) && !leak_test {
        return;
    }
    let Some(m) = bi.module("procs") else {
        t.report(cases, Err("no 'procs' module"));
        return;
    };
    if wanted(cases) {
        let r = match task::run(m, 0) {
            Ok(End::Exit(0)) => Ok(()),
            Ok(End::Exit(_)) => Err("procs reported failures"),
            Ok(_) => Err("procs faulted"),
            Err(_) => Err("procs would not load"),
        };
        t.report(cases, r);
    }
    if leak_test {
        let before = (frames::usage().0, crate::vm::page::usage().0);
        let r = match task::run(m, ROUNDS | LEAK_ROUNDS) {
            Ok(End::Exit(0)) => Ok(()),
            _ => Err("the rounds did not end with exit 0"),
        };
        let after = (frames::usage().0, crate::vm::page::usage().0);
        let pipes_left = crate::proc::pipe::left_at_reset();
        // The strategy's own tables are in both counts (taken at boot, never
        // given back): named apart, so the direct map's tables are not read
        // as a leak and a leak cannot hide among them.
        kprintln!(
            "processes: frames in use {} before, {} after ({} of them pmap={}'s own page tables); user pages {} before, {} after; {} forks since boot; {} pipes left open",
            before.0,
            after.0,
            crate::vm::pmap::own_frames(),
            crate::vm::pmap::strategy().key(),
            before.1,
            after.1,
            crate::proc::forks(),
            pipes_left
        );
        t.report(
            leaks,
            r.and(if before != after {
                Err("frames or pages were left in use")
            } else if pipes_left != 0 {
                Err("pipes were left open when the rounds ended")
            } else {
                Ok(())
            }),
        );
    }
}

/// Tasks that end while their threads run on other CPUs: by `exit(0)` on
/// CPU 0, by a #UD on the last CPU, and by single steps on every CPU at
/// once (each CPU through its own debug task); each twice, so the second
/// run shows the first left no thread running, and no frame in use.
fn ending_elsewhere(bi: &BootInfo<'static>, wanted: &dyn Fn(&str) -> bool, t: &mut Tally) {
    use abi::syscall::locks_arg::{END_EXIT, END_FAULT, END_STEP};
    let name =
        "smp: a task ends everywhere while its threads run on other CPUs (exit, #UD, #DB on every CPU at once), twice each";
    if !wanted(name) {
        return;
    }
    if crate::arch::smp::cpus().started < 2 {
        // On one CPU there is no elsewhere: a skip, never a pass.
        t.skip(name, "needs a second CPU");
        return;
    }
    let Some(m) = bi.module("locks") else {
        t.report(name, Err("no 'locks' module"));
        return;
    };
    let before = frames::usage().0;
    let mut r = Ok(());
    for _ in 0..2 {
        match task::run(m, END_EXIT) {
            Ok(End::Exit(0)) => {}
            _ => r = Err("ending by exit(0) on CPU 0 did not come back as exit 0"),
        }
        match task::run(m, END_FAULT) {
            Ok(End::Fault { vector, .. }) if vector == crate::arch::idt::vector::INVALID_OPCODE => {
            }
            _ => r = Err("a #UD on another CPU did not end the task as a fault"),
        }
        match task::run(m, END_STEP) {
            Ok(End::Fault { vector, .. }) if vector == crate::arch::idt::vector::DEBUG => {}
            _ => r = Err("single steps on every CPU did not end the task by a #DB"),
        }
    }
    if r.is_ok() && frames::usage().0 != before {
        r = Err("frames were left in use");
    }
    t.report(name, r);
}

/// Runs `rogue`'s spoiling acts (`abi::cases::rogue`), each a task that
/// moves the fast entries to their floors, re-lays the pools and changes
/// the x87 control word, then ends
/// by exit, fault or `thread_exit`; after each, the entries, the pools'
/// layout and the x87 must be the boot's again.
fn spoiled_state_restored(bi: &BootInfo<'static>) -> Result<(), &'static str> {
    use crate::arch::smp;
    use crate::task::sched;
    use crate::task::{sleepqueue, turnstile};
    use abi::cases::rogue;
    let m = bi.module("rogue").ok_or("no 'rogue' module")?;
    let layouts = || {
        let _g = sched::locked();
        (turnstile::layout(), sleepqueue::layout())
    };
    let boot = layouts();
    for act in rogue::SPOILS {
        let ok = match task::run(m, act) {
            Ok(End::Exit(0)) => act != rogue::SPOIL_FAULT,
            Ok(End::Fault { vector, .. }) => act == rogue::SPOIL_FAULT && vector == 6,
            _ => false,
        };
        if !ok {
            return Err("the rogue task did not end as its act says (a refused call?)");
        }
        // Every CPU's own: the task spoiled them on each.
        let left = (0..smp::cpus().started).fold(0, |acc, c| {
            acc | if c == 0 {
                task::cpu_state_left()
            } else {
                smp::ask(c, smp::command::STATE)
            }
        });
        if left & task::STATE_FLOOR != 0 {
            return Err("a fast entry still points at its floor after the task (on some CPU)");
        }
        if layouts() != boot {
            return Err("the pools kept the task's alignment");
        }
        if left & task::STATE_X87 != 0 {
            return Err("the x87 control word is the task's (on some CPU)");
        }
    }
    Ok(())
}

/// How one hostile case came out.
enum Verdict {
    AsExpected,
    /// The case needs a mechanism this CPU lacks (it exited with
    /// `EXIT_SKIPPED`): the expected outcome here.
    Skipped,
    Wrong,
}

/// Runs every wanted case of `abi::cases::FAULT_CASES` as a fresh task and
/// checks how it ended; prints "N cases, N as expected" and a `hostile`
/// record.
/// With more than one CPU every case runs on the last one (an AP: its own
/// TSS, entry MSRs, SYSCALL slots and #DB/#DF tasks); the boots with one
/// CPU cover the bootstrap processor.
fn hostile_suite(bi: &BootInfo<'static>, wanted: &dyn Fn(&str) -> bool, t: &mut Tally) {
    let (mut cases, mut expected, mut skipped) = (0u32, 0u32, 0u32);
    let on = crate::arch::smp::cpus().started.max(1) - 1;
    for (i, c) in FAULT_CASES.iter().enumerate() {
        let mut full = Name::new();
        full.push("user fault: ");
        full.push(c.name);
        if !wanted(full.as_str()) {
            continue;
        }
        cases += 1;
        let mut why = Name::new();
        let verdict = match bi.module("faults") {
            None => {
                why.push("no 'faults' module");
                Verdict::Wrong
            }
            Some(m) => judge(task::run_on(m, i as u32, on), c.expect, &mut why),
        };
        match verdict {
            Verdict::AsExpected => {
                expected += 1;
                t.report(full.as_str(), Ok(()));
            }
            Verdict::Skipped => {
                // Passed-by-skip: the reason is the mechanism's, printed at boot.
                expected += 1;
                skipped += 1;
                t.skip(full.as_str(), "the mechanism is unavailable on this CPU");
            }
            Verdict::Wrong => t.report(full.as_str(), Err(why.as_str())),
        }
    }
    if cases > 0 {
        kprintln!(
            "hostile: {cases} case{}, {expected} as expected ({skipped} skipped: mechanism unavailable), on CPU {on}",
            if cases == 1 { "" } else { "s" }
        );
        record!(kind::HOSTILE, "cases" => cases, "expected" => expected, "skipped" => skipped,
            "cpu" => on);
    }
}

/// Compares how a case's task ended with what the table expects; on a
/// mismatch, says both in `why`.
fn judge(end: Result<End, task::LoadError>, expect: Expect, why: &mut Name) -> Verdict {
    let ok = match end {
        Ok(End::Fault { vector, .. }) => expect.matches_fault(vector),
        Ok(End::BadStack { .. }) => expect == Expect::BadStack,
        Ok(End::Exit(EXIT_SKIPPED)) => return Verdict::Skipped,
        Ok(End::Exit(c)) => expect.exit_code() == Some(c),
        Ok(End::Deadlock) | Err(_) => false,
    };
    if ok {
        return Verdict::AsExpected;
    }
    let _ = write!(why, "expected ");
    let _ = match expect {
        Expect::Fault(v) => write!(why, "{}", vector_name(v)),
        Expect::FaultEither(a, b) => write!(why, "{} or {}", vector_name(a), vector_name(b)),
        Expect::BadStack => write!(why, "the task ended for a bad stack"),
        Expect::Exit(c) => write!(why, "exit({c})"),
        Expect::Errno(e) => write!(why, "{} (exit {e})", errno::name(e)),
    };
    let _ = write!(why, ", got ");
    let _ = match end {
        Ok(End::Fault { vector, eip }) => write!(why, "{} at {eip:#x}", vector_name(vector)),
        Ok(End::BadStack { mechanism }) => write!(why, "a bad stack on {mechanism}"),
        Ok(End::Exit(1)) if expect.exit_code().is_none() => {
            write!(why, "exit(1): the act did not end the task")
        }
        Ok(End::Exit(c)) if c >= 90 => write!(why, "exit({c}): a check failed"),
        Ok(End::Exit(c)) => write!(why, "exit({c})"),
        Ok(End::Deadlock) => write!(why, "a deadlock"),
        Err(_) => write!(why, "a program that would not load"),
    };
    Verdict::Wrong
}

/// A test name built at run time.
type Name = crate::console::Line<128>;

fn kernel_map_supervisor_only() -> Result<(), &'static str> {
    let mut a = PAGE_SIZE;
    while a < KERNEL_MAP_END {
        if let Some(f) = paging::flags(a) {
            if f.contains(paging::USER) {
                return Err("a kernel page is user-accessible");
            }
        }
        a += 64 * PAGE_SIZE;
    }
    Ok(())
}

fn guards_unmapped() -> Result<(), &'static str> {
    let s = crate::boot::entry::stacks();
    for g in s.guards() {
        if paging::flags(g).is_some() {
            return Err("a guard page is mapped");
        }
    }
    if paging::flags(s.kernel_top - 4).is_none() {
        return Err("the kernel stack itself is unmapped");
    }
    Ok(())
}

fn frames_reused() -> Result<(), &'static str> {
    let a = frames::alloc().ok_or("no frame")?;
    // SAFETY: the frame is ours and identity-mapped.
    unsafe { (a as *mut u32).write(0x5a5a_5a5a) };
    frames::free(a);
    let b = frames::alloc().ok_or("no frame")?;
    // SAFETY: as above.
    let first = unsafe { (b as *const u32).read() };
    frames::free(b);
    match (a == b, first) {
        (false, _) => Err("a freed frame was not reused"),
        (true, 0) => Ok(()),
        _ => Err("a reused frame was not zeroed"),
    }
}

fn user_pointer_checks() -> Result<(), &'static str> {
    let page = USER_BASE + 0x10_0000;
    // A scratch address space, current while the checks run.
    let space = {
        let _g = crate::task::sched::locked();
        let s = crate::vm::Space::new().map_err(|_| "out of memory")?;
        s.pmap.activate();
        s.map_zeroed(page, false).map_err(|_| "out of memory")?;
        s
    };
    let cases: [(u32, u32, Access, Result<(), i32>, &str); 9] = [
        (page, 16, Access::Read, Ok(()), "mapped read"),
        (page, 16, Access::Write, Err(EFAULT), "write to read-only"),
        (0x10_0000, 4, Access::Read, Err(EFAULT), "kernel pointer"),
        (page + PAGE_SIZE, 4, Access::Read, Err(EFAULT), "unmapped"),
        (
            page + PAGE_SIZE - 2,
            4,
            Access::Read,
            Err(EFAULT),
            "partly unmapped",
        ),
        (
            0xffff_fff0,
            0x20,
            Access::Read,
            Err(EFAULT),
            "wraps past 4 GiB",
        ),
        (
            page,
            u32::MAX,
            Access::Read,
            Err(EFAULT),
            "length overflows",
        ),
        (
            USER_TOP - 4,
            8,
            Access::Read,
            Err(EFAULT),
            "runs past USER_TOP",
        ),
        (0, 0, Access::Read, Ok(()), "zero length"),
    ];
    let mut r = Ok(());
    for (p, len, acc, want, what) in cases {
        if check(p, len, acc) != want {
            r = Err(what);
            break;
        }
    }
    let _g = crate::task::sched::locked();
    space.destroy();
    r
}

fn extable_fixup() -> Result<(), &'static str> {
    let got: u32;
    // A kernel stack's guard page: unmapped under every `pmap=` (the direct
    // map maps all of RAM at USER_TOP, which this test once read).
    let unmapped = crate::task::sched::stack_guards()
        .next()
        .ok_or("no kernel stack guard page to read")?;
    // SAFETY: the load faults on purpose (unmapped page); the exception
    // table entry sends it to label 3, which sets the result.
    unsafe {
        core::arch::asm!(
            "movl $0, {r}",
            "1: movl ({p}), {r}",
            "jmp 2f",
            "3: movl $1, {r}",
            "2:",
            ".pushsection .extable, \"a\"",
            ".long 1b, 3b",
            ".popsection",
            r = out(reg) got,
            p = in(reg) unmapped,
            options(att_syntax)
        );
    }
    if got == 1 {
        Ok(())
    } else {
        Err("the fixup did not run")
    }
}

/// The counter check's fault path, forced: fixed counter 31 exists on no
/// CPU (leaf 0xA counts at most 31 fixed counters, 0 to 30), so RDPMC of it
/// raises #GP, or #UD where RDPMC itself is missing (QEMU's TCG), and the
/// exception table resumes at the fixup.
fn rdpmc_invalid_counter() -> Result<(), &'static str> {
    use crate::arch::idt::vector;
    const NO_SUCH_FIXED_COUNTER: u32 = 31;
    match crate::arch::pmu::rdpmc_checked(abi::syscall::RDPMC_FIXED | NO_SUCH_FIXED_COUNTER) {
        Ok(_) => Err("RDPMC of fixed counter 31 did not fault"),
        Err(vector::GENERAL_PROTECTION | vector::INVALID_OPCODE) => Ok(()),
        Err(_) => Err("RDPMC faulted with a vector other than #GP or #UD"),
    }
}

fn mechanisms_match_cpuid() -> Result<(), &'static str> {
    let f = cpu::features();
    let usable = entry::usable();
    for m in Mechanism::ALL {
        let has = usable & (1 << m as u32) != 0;
        if has != entry::unavailable_reason(m, f).is_none() {
            return Err("usable set disagrees with CPUID");
        }
    }
    if f.is_amd() || usable & (1 << Mechanism::Syscall as u32) == 0 {
        Ok(())
    } else {
        Err("syscall enabled on a non-AMD CPU")
    }
}

fn kernel_mutex() -> Result<(), &'static str> {
    use crate::task::mutex::{Deadlock, Mutex};
    static M: Mutex = Mutex::new();
    M.lock().map_err(|_| "the first lock failed")?;
    if M.owner() != Some(crate::task::sched::current_index()) {
        return Err("the owner is not the locker");
    }
    if M.lock() != Err(Deadlock) {
        return Err("relocking did not report a deadlock");
    }
    M.unlock();
    if M.owner().is_some() {
        return Err("unlocked mutex still has an owner");
    }
    Ok(())
}

fn pool_layout() -> Result<(), &'static str> {
    use crate::sync::pool::Align;
    use crate::task::{sleepqueue, turnstile};
    let _g = crate::task::sched::locked();
    let mut r = Ok(());
    for (a, per128) in [(Align::A128, 1), (Align::A64, 2)] {
        if !(turnstile::set_align(a) && sleepqueue::set_align(a)) {
            return Err("a pool could not be laid out (objects in use)");
        }
        if turnstile::layout().3 != per128 || sleepqueue::layout().3 != per128 {
            r = Err("objects per 128-byte block differ from the alignment's promise");
        }
    }
    // Back to the boot's layout, as a task's end restores it.
    let boot = crate::sync::pool::boot_align();
    turnstile::set_align(boot);
    sleepqueue::set_align(boot);
    r
}

/// Two kernel threads and the boot thread: LOW (priority 20) takes the
/// mutex; HIGH (priority 5) then blocks on it and lends LOW its priority;
/// LOW sees it runs at 5, unlocks (handing HIGH the mutex), and is back at
/// 20; HIGH finishes and wakes the boot thread.
fn kernel_threads() -> Result<(), &'static str> {
    use core::sync::atomic::{AtomicU32, Ordering::SeqCst};

    use crate::task::mutex::Mutex;
    use crate::task::sched::{self, State};

    static M: Mutex = Mutex::new();
    static LENT: AtomicU32 = AtomicU32::new(0);
    static BACK: AtomicU32 = AtomicU32::new(0);
    static HIGH_GOT: AtomicU32 = AtomicU32::new(0);
    static LEFT: AtomicU32 = AtomicU32::new(2);

    extern "C" fn low(_: u32) {
        let me = sched::current_index();
        let _ = M.lock();
        // Hand the CPU back to the boot thread, which creates HIGH.
        {
            let _g = sched::locked();
            sched::make_ready(0);
            sched::block(State::WaitingForTask);
        }
        LENT.store(sched::prio_of(me) as u32, SeqCst);
        M.unlock();
        BACK.store(sched::prio_of(me) as u32, SeqCst);
        LEFT.fetch_sub(1, SeqCst);
    }
    extern "C" fn high(_: u32) {
        let _ = M.lock();
        HIGH_GOT.store(1, SeqCst);
        M.unlock();
        if LEFT.fetch_sub(1, SeqCst) == 1 {
            let _g = sched::locked();
            sched::make_ready(0);
        }
    }

    let _g = sched::locked();
    let low_tid = sched::spawn_kernel(low, 0, 20).map_err(|_| "no thread for LOW")?;
    sched::block(State::WaitingForTask); // LOW takes M and wakes us
    sched::spawn_kernel(high, 0, 5).map_err(|_| "no thread for HIGH")?;
    if let Some(i) = sched::index_of(low_tid) {
        sched::make_ready(i);
    }
    sched::block(State::WaitingForTask); // HIGH blocks, LOW unlocks, HIGH wakes us
    let r = match (LENT.load(SeqCst), BACK.load(SeqCst), HIGH_GOT.load(SeqCst)) {
        (5, 20, 1) => Ok(()),
        (l, _, _) if l != 5 => Err("the owner did not run at its waiter's priority"),
        (_, b, _) if b != 20 => Err("the owner kept the lent priority after unlocking"),
        _ => Err("the waiter never got the mutex"),
    };
    sched::reset_all();
    r
}
