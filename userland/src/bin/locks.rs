//! Turnstiles and sleepqueues from ring 3: with argument 1 the tests
//! (priority propagation, wake-up order, a stress with no lost wake-ups,
//! pool exhaustion, EDEADLK; with more than one CPU also across CPUs),
//! with 2 and 3 a task that ends while its threads run on other CPUs, with
//! 4 one that single-steps on every CPU at once
//! (`abi::syscall::locks_arg`), otherwise the benchmarks for each pool
//! alignment in one boot.
#![no_std]
#![no_main]

use core::fmt::Write as _;
use core::sync::atomic::{AtomicU32, Ordering::SeqCst};

use userland::abi::model::{Snaps, SNAP_USER};
use userland::abi::report::{kind, names, Figure, Measure};
use userland::abi::syscall::{
    errno, locks_arg, nr, CpuInfo, FEATURE_TSC, MAX_THREADS, POOL_ALIGN_EVERY,
};
use userland::abi::Mechanism;
use userland::bench::{self, Fence};
use userland::threads::{self, Umtx};
use userland::{println, record, sys, Line};

#[unsafe(no_mangle)]
extern "C" fn main(arg: u32) -> i32 {
    match arg {
        locks_arg::TESTS => tests(),
        locks_arg::END_EXIT => end_elsewhere(false),
        locks_arg::END_FAULT => end_elsewhere(true),
        locks_arg::END_STEP => step_everywhere(),
        _ => benches(),
    }
}

/// How many CPUs run (threads may be created on `0..cpus()`).
fn cpus() -> u32 {
    sys::cpuinfo().cpus.max(1)
}

/// The CPUs threads of the running figure ran on (bit n: CPU n).
static RAN_ON: AtomicU32 = AtomicU32::new(0);

/// Notes the caller's CPU in RAN_ON.
fn note_cpu() {
    RAN_ON.fetch_or(1 << threads::cpu(), SeqCst);
}

static FAILED: AtomicU32 = AtomicU32::new(0);

fn check(name: &str, ok: bool, got: u32) {
    if !ok {
        FAILED.fetch_add(1, SeqCst);
        println!("locks: FAIL {} (got {})", name, got);
    }
    record!(kind::CHECK, "mech" => "locks", "name" => Esc(name),
        "result" => if ok { "pass" } else { "fail" }, "got" => got);
}

/// `check` with a prefix on the name ("across CPUs: ...").
fn checkp(prefix: &str, name: &str, ok: bool, got: u32) {
    let mut l = Line::new();
    let _ = write!(l, "{prefix}{name}");
    check(l.as_str(), ok, got);
}

struct Esc<'a>(&'a str);
impl core::fmt::Display for Esc<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        userland::abi::report::Escaped(self.0).fmt(f)
    }
}

/// The channel finished threads wake their creator on.
const CHAN_DONE: u32 = 0x0d0e;

/// A thread's last act: count itself done and wake the joiner.
fn finished() {
    DONE.fetch_add(1, SeqCst);
    threads::wakeup(CHAN_DONE, true);
}

/// Waits until `done` reaches `n`. The timeout covers the gap between the
/// check and the sleep, where a wake-up could come too early.
fn join(done: &AtomicU32, n: u32) {
    let mut rounds = 0;
    while done.load(SeqCst) < n && rounds < 10_000 {
        let _ = threads::sleep_on(CHAN_DONE, 2);
        rounds += 1;
    }
}

// ---- priority propagation -------------------------------------------------

static M: Umtx = Umtx::new();
static L_HAS_M: AtomicU32 = AtomicU32::new(0);
static L_TID: AtomicU32 = AtomicU32::new(0);
static PRIO_WHILE_WAITED: AtomicU32 = AtomicU32::new(0);
static PRIO_AFTER: AtomicU32 = AtomicU32::new(0);
static H_GOT_M: AtomicU32 = AtomicU32::new(0);
static L_WOKE: AtomicU32 = AtomicU32::new(0);
static DONE: AtomicU32 = AtomicU32::new(0);
const CHAN_L_READY: u32 = 0x1000;
const CHAN_GO: u32 = 0x1001;
const LOW: u32 = 20;
const HIGH: u32 = 5;

fn low(_: u32) {
    note_cpu();
    let me = threads::gettid();
    L_TID.store(me, SeqCst);
    let _ = M.lock(me);
    L_HAS_M.store(1, SeqCst);
    threads::wakeup(CHAN_L_READY, true);
    let _ = threads::sleep_on(CHAN_GO, 0);
    L_WOKE.store(1, SeqCst);
    PRIO_WHILE_WAITED.store(threads::getprio(me), SeqCst);
    let _ = M.unlock(me);
    PRIO_AFTER.store(threads::getprio(me), SeqCst);
    finished();
}

fn high(_: u32) {
    let me = threads::gettid();
    let _ = M.lock(me);
    H_GOT_M.store(1, SeqCst);
    let _ = M.unlock(me);
    finished();
}

/// The low thread on CPU `low_cpu`, the high one on `high_cpu`; `what`
/// prefixes the check names ("" on one CPU).
fn priority_propagation(low_cpu: u32, high_cpu: u32, what: &str) {
    DONE.store(0, SeqCst);
    L_HAS_M.store(0, SeqCst);
    H_GOT_M.store(0, SeqCst);
    L_WOKE.store(0, SeqCst);
    let l = threads::spawn_on(low, 0, LOW, low_cpu).unwrap_or(0);
    while L_HAS_M.load(SeqCst) == 0 {
        let _ = threads::sleep_on(CHAN_L_READY, 5);
    }
    let _ = threads::spawn_on(high, 0, HIGH, high_cpu);
    // Let H run: it blocks on M, which L owns. On another CPU it may take
    // a while to get there (the host runs that CPU when it can): wait for
    // the lent priority, boundedly, rather than for a fixed time.
    threads::yield_now();
    threads::sleep(2);
    let mut lent = threads::getprio(l);
    let mut rounds = 0;
    while lent != HIGH && rounds < 5_000 {
        threads::sleep(1);
        lent = threads::getprio(l);
        rounds += 1;
    }
    checkp(
        what,
        "a low-priority owner inherits its waiter's priority",
        lent == HIGH,
        lent,
    );
    // L may not be asleep yet on its CPU: wake it until it says it woke.
    let mut rounds = 0;
    while L_WOKE.load(SeqCst) == 0 && rounds < 5_000 {
        threads::wakeup(CHAN_GO, true);
        threads::sleep(1);
        rounds += 1;
    }
    join(&DONE, 2);
    let w = PRIO_WHILE_WAITED.load(SeqCst);
    checkp(
        what,
        "the owner still runs at the lent priority until it unlocks",
        w == HIGH,
        w,
    );
    let after = PRIO_AFTER.load(SeqCst);
    checkp(
        what,
        "the owner gives the priority back when it unlocks",
        after == LOW,
        after,
    );
    checkp(
        what,
        "the waiter gets the mutex",
        H_GOT_M.load(SeqCst) == 1,
        H_GOT_M.load(SeqCst),
    );
}

// ---- wake-up order --------------------------------------------------------

static ORDER: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];
static ORDER_LEN: AtomicU32 = AtomicU32::new(0);
static M2: Umtx = Umtx::new();
const CHAN_ORDER: u32 = 0x2000;

fn log(tag: u32) {
    let i = ORDER_LEN.fetch_add(1, SeqCst) as usize;
    if i < ORDER.len() {
        ORDER[i].store(tag, SeqCst);
    }
}

fn sleeper(tag: u32) {
    let _ = threads::sleep_on(CHAN_ORDER, 0);
    log(tag);
    finished();
}

fn locker(tag: u32) {
    let me = threads::gettid();
    let _ = M2.lock(me);
    log(tag);
    let _ = M2.unlock(me);
    finished();
}

fn order() -> [u32; 3] {
    [0, 1, 2].map(|i| ORDER[i].load(SeqCst))
}

fn wakeup_order() {
    // Sleepqueue: first asleep, first woken.
    DONE.store(0, SeqCst);
    ORDER_LEN.store(0, SeqCst);
    for tag in [1, 2, 3] {
        let _ = threads::spawn(sleeper, tag, 10);
        threads::sleep(2);
    }
    for _ in 0..3 {
        threads::wakeup(CHAN_ORDER, false);
        threads::sleep(2);
    }
    join(&DONE, 3);
    let o = order();
    check(
        "sleepqueue wakes in the order of sleeping",
        o == [1, 2, 3],
        o[0] * 100 + o[1] * 10 + o[2],
    );
    // Turnstile: most urgent first, whatever the order of blocking.
    DONE.store(0, SeqCst);
    ORDER_LEN.store(0, SeqCst);
    let me = threads::gettid();
    let _ = M2.lock(me);
    for (tag, prio) in [(1, 12), (2, 6), (3, 9)] {
        let _ = threads::spawn(locker, tag, prio);
        threads::sleep(2);
    }
    let _ = M2.unlock(me);
    join(&DONE, 3);
    let o = order();
    check(
        "turnstile hands the mutex to the most urgent waiter first",
        o == [2, 3, 1],
        o[0] * 100 + o[1] * 10 + o[2],
    );
}

// ---- stress: no lost wake-ups --------------------------------------------

static COUNTER: AtomicU32 = AtomicU32::new(0);
static M3: Umtx = Umtx::new();
const WORKERS: u32 = 4;
const ROUNDS: u32 = 300;

fn worker(_: u32) {
    note_cpu();
    let me = threads::gettid();
    for i in 0..ROUNDS {
        let _ = M3.lock(me);
        let c = COUNTER.load(SeqCst);
        if i % 8 == 0 {
            // Hold the mutex across a yield: the others must block on it.
            threads::yield_now();
        }
        COUNTER.store(c + 1, SeqCst);
        let _ = M3.unlock(me);
    }
    finished();
}

fn stress() {
    DONE.store(0, SeqCst);
    COUNTER.store(0, SeqCst);
    for _ in 0..WORKERS {
        let _ = threads::spawn(worker, 0, 16);
    }
    join(&DONE, WORKERS);
    let c = COUNTER.load(SeqCst);
    check(
        "stress: 4 threads x 300 locked increments, none lost, nobody stuck",
        c == WORKERS * ROUNDS,
        c,
    );
}

/// The stress with two workers on every CPU: the mutex is contended from
/// several CPUs at once (fast paths racing the kernel's slow paths).
fn stress_across(n: u32) {
    DONE.store(0, SeqCst);
    COUNTER.store(0, SeqCst);
    RAN_ON.store(0, SeqCst);
    let mut made = 0;
    for c in 0..n {
        for _ in 0..2 {
            made += threads::spawn_on(worker, 0, 16, c).is_ok() as u32;
        }
    }
    join(&DONE, made);
    let c = COUNTER.load(SeqCst);
    let mut name = Line::new();
    let _ = write!(
        name,
        "across CPUs: {made} threads on {n} CPUs x {ROUNDS} locked increments, none lost, nobody stuck"
    );
    check(name.as_str(), made == 2 * n && c == made * ROUNDS, c);
    let all = (1u32 << n) - 1;
    let ran = RAN_ON.load(SeqCst);
    check("across CPUs: the workers ran on every CPU", ran == all, ran);
}

static MECH_OK: AtomicU32 = AtomicU32::new(0);
static MECH_BAD: AtomicU32 = AtomicU32::new(0);
const ARGS: [u32; 6] = [1, 2, 3, 4, 5, 6];

/// On CPU `cpu`: every usable mechanism enters and returns there (`cpu()`
/// through it names this CPU; getpid and argsum come back right).
fn every_mechanism(cpu: u32) {
    let info = sys::cpuinfo();
    let pid = sys::call(Mechanism::Int80, nr::GETPID, [0; 6]);
    for m in Mechanism::ALL {
        if info.mechanisms & (1 << m as u32) == 0 {
            continue;
        }
        let ok = sys::call(m, nr::CPU, [0; 6]) == cpu
            && sys::call(m, nr::GETPID, [0; 6]) == pid
            && sys::call(m, nr::ARGSUM, ARGS) == userland::abi::syscall::argsum(ARGS);
        if ok {
            MECH_OK.fetch_add(1, SeqCst);
        } else {
            MECH_BAD.fetch_add(1, SeqCst);
            println!("locks: {} fails on CPU {cpu}", m.title());
        }
    }
    finished();
}

/// A thread on every CPU makes calls through every usable mechanism.
fn mechanisms_across(n: u32) {
    DONE.store(0, SeqCst);
    MECH_OK.store(0, SeqCst);
    MECH_BAD.store(0, SeqCst);
    let usable = sys::cpuinfo().mechanisms.count_ones();
    let mut made = 0;
    for c in 0..n {
        made += threads::spawn_on(every_mechanism, c, 16, c).is_ok() as u32;
    }
    join(&DONE, made);
    let ok = MECH_OK.load(SeqCst);
    check(
        "across CPUs: every usable mechanism enters and returns on every CPU",
        made == n && MECH_BAD.load(SeqCst) == 0 && ok == n * usable,
        ok,
    );
}

/// Sleep/wakeup round trips with the ponger on CPU 1: every one completes.
fn sleep_wakeup_across() {
    DONE.store(0, SeqCst);
    PONGS.store(0, SeqCst);
    let _ = threads::spawn_on(ponger, ROUND_TRIPS, 16, 1);
    for _ in 0..ROUND_TRIPS {
        ping();
    }
    join(&DONE, 1);
    let p = PONGS.load(SeqCst);
    check(
        "across CPUs: sleep/wakeup round trips between CPU 0 and CPU 1 all complete",
        p == ROUND_TRIPS && DONE.load(SeqCst) == 1,
        p,
    );
}

// ---- exhaustion and EDEADLK ------------------------------------------------

fn parked(_: u32) {
    let _ = threads::sleep_on(0x3000, 0);
    finished();
}

fn exhaustion() {
    DONE.store(0, SeqCst);
    let mut made = 0;
    let mut last = Ok(0);
    for _ in 0..MAX_THREADS + 2 {
        last = threads::spawn(parked, 0, 16);
        if last.is_err() {
            break;
        }
        made += 1;
    }
    check(
        "thread pool exhaustion gives EAGAIN, not a panic",
        last == Err(errno::EAGAIN),
        made,
    );
    threads::sleep(2);
    threads::wakeup(0x3000, true);
    join(&DONE, made);
}

fn deadlock() {
    let me = threads::gettid();
    let m = Umtx::new();
    let _ = m.lock(me);
    let again = m.lock(me);
    check(
        "locking a mutex it owns gives EDEADLK",
        again == Err(errno::EDEADLK),
        0,
    );
    let _ = m.unlock(me);
    let other = m.unlock(me);
    check(
        "unlocking a mutex it does not own gives EPERM",
        other == Err(errno::EPERM),
        0,
    );
}

fn tests() -> i32 {
    priority_propagation(0, 0, "");
    wakeup_order();
    stress();
    let n = cpus();
    if n > 1 {
        // The owner on CPU 1, its waiter on CPU 0: lending and hand-off
        // across CPUs; then the other way round.
        priority_propagation(1, 0, "across CPUs (owner on 1, waiter on 0): ");
        priority_propagation(0, 1, "across CPUs (owner on 0, waiter on 1): ");
        stress_across(n);
        sleep_wakeup_across();
        mechanisms_across(n);
    }
    deadlock();
    exhaustion();
    let f = FAILED.load(SeqCst);
    println!("locks: {} failures", f);
    f as i32
}

// ---- benchmarks ------------------------------------------------------------

static M4: Umtx = Umtx::new();
const CHAN_A: u32 = 0x5000;
const CHAN_B: u32 = 0x5001;
static SHARED: [AtomicU32; 1024] = [const { AtomicU32::new(0) }; 1024];
static RECORDS: AtomicU32 = AtomicU32::new(0);
/// Records found by each CPU's searchers (ebizzy per CPU).
static FOUND: [AtomicU32; 8] = [const { AtomicU32::new(0) }; 8];

const CHAN_START: u32 = 0x5002;

fn contender(n: u32) {
    note_cpu();
    let me = threads::gettid();
    let _ = threads::sleep_on(CHAN_START, 0);
    for _ in 0..n {
        let _ = M4.lock(me);
        threads::yield_now();
        let _ = M4.unlock(me);
    }
    finished();
}

static PONGS: AtomicU32 = AtomicU32::new(0);

/// Wakes the thread asleep on `chan`, waiting for it to get there first.
/// `wakeup` has no condition to recheck: one that finds nobody asleep is
/// lost, as in FreeBSD, and on two CPUs the partner may not have gone back
/// to sleep yet. So retry until a sleeper was woken (`yield` lets a partner
/// on this CPU run, `pause` ends this CPU's turn under icount).
fn wake_sleeper(chan: u32) {
    while threads::wakeup(chan, false) == 0 {
        core::hint::spin_loop();
        threads::yield_now();
    }
}

/// Sleeps on `chan` until woken, with no timeout: the partner wakes it
/// only once it sleeps (`wake_sleeper`), and if the partner is gone the
/// kernel's deadlock check ends the task with a report.
fn sleep_until_woken(chan: u32) {
    while threads::sleep_on(chan, 0).is_err() {}
}

/// One sleep/wakeup round trip, the pinger's half: wake the ponger, sleep
/// until it wakes us back.
fn ping() {
    wake_sleeper(CHAN_B);
    sleep_until_woken(CHAN_A);
}

fn ponger(n: u32) {
    note_cpu();
    for _ in 0..n {
        sleep_until_woken(CHAN_B);
        wake_sleeper(CHAN_A);
        PONGS.fetch_add(1, SeqCst);
    }
    finished();
}

/// ebizzy-like: search shared memory for a key under the lock, one record
/// per search, until the two searchers have found `target` records.
fn searcher(target: u32) {
    note_cpu();
    let me = threads::gettid();
    let slot = (threads::cpu() as usize).min(FOUND.len() - 1);
    loop {
        let _ = M4.lock(me);
        if RECORDS.load(SeqCst) >= target {
            let _ = M4.unlock(me);
            break;
        }
        let key = RECORDS.load(SeqCst) & 1023;
        let mut found = 0;
        for (i, w) in SHARED.iter().enumerate() {
            if w.load(SeqCst) == key {
                found = i as u32;
                break;
            }
        }
        SHARED[(found as usize + 1) & 1023].store(key, SeqCst);
        RECORDS.fetch_add(1, SeqCst);
        FOUND[slot].fetch_add(1, SeqCst);
        let _ = M4.unlock(me);
    }
    finished();
}

/// Batches per figure, for each layout.
const BATCHES: usize = 8;
/// Lock/unlock pairs per uncontended batch.
const UNCONTENDED_OPS: u32 = 2_000;
/// Hand-offs per contender per contended batch (two contenders).
const HANDOFFS: u32 = 50;
/// Sleep/wakeup round trips per batch.
const ROUND_TRIPS: u32 = 50;
/// Turnstile-chain lookups per batch.
const LOOKUPS: u32 = 1_000;
/// Records the two ebizzy searchers find per batch.
const EBIZZY_RECORDS: u32 = 1_000;

/// The layouts `pool_align(bytes)` takes, and their names in records.
const LAYOUTS: [(u32, &str); 3] = [
    (128, names::LAYOUTS[0]),
    (64, names::LAYOUTS[1]),
    (0, names::LAYOUTS[2]),
];

/// The timer's calibration: its overhead in ticks, and where its model
/// snapshots are (`BATCHES` empty timed regions).
#[derive(Clone, Copy)]
struct Timer {
    fence: Fence,
    overhead: u64,
    calib: u32,
}

impl Timer {
    /// Times `f` once (`bench::timed_region`), the timer's overhead subtracted.
    fn time(&self, f: impl FnOnce()) -> u64 {
        bench::timed_region(self.fence, f).saturating_sub(self.overhead)
    }

    /// Where a figure's snapshots are whose first batch began at user
    /// snapshot `first`, with this calibration.
    fn snaps(&self, first: u32) -> Snaps {
        Snaps {
            stream: SNAP_USER,
            calib: self.calib,
            calib_runs: BATCHES as u32,
            batches: first,
        }
    }

    /// Times `BATCHES` batches of `f`; each sample is a batch's ticks, the
    /// timer's own overhead subtracted.
    fn batches(&self, mut f: impl FnMut()) -> ([u64; BATCHES], Snaps) {
        let first = userland::model::next_seq();
        let mut out = [0u64; BATCHES];
        for v in out.iter_mut() {
            *v = self.time(&mut f);
        }
        (out, self.snaps(first))
    }
}

/// Reports one figure of layout `layout`: `group.figure.layout` (or
/// `group.layout` without a figure); returns its median.
#[allow(clippy::too_many_arguments)]
/// A per-operation locks figure of `layout`, naming the CPUs its threads
/// noted in `RAN_ON` (then CPU 0 alone again, for the next figure).
fn per_op_figure(fig: &str, layout: &str, ops: u32, samples: (&[u64], Snaps), tsc_hz: u64) -> f64 {
    let ran = RAN_ON.swap(1, SeqCst);
    figure(
        names::LOCKS,
        fig,
        layout,
        Measure::PerOp,
        "",
        ops,
        samples,
        tsc_hz,
        ran,
    )
}

fn figure(
    group: &str,
    figure: &str,
    layout: &str,
    measure: Measure,
    unit: &str,
    ops: u32,
    (samples, snaps): (&[u64], impl Into<Option<Snaps>>),
    tsc_hz: u64,
    cpus: u32,
) -> f64 {
    let mut name = Line::new();
    let _ = if figure.is_empty() {
        write!(name, "{group}.{layout}")
    } else {
        write!(name, "{group}.{figure}.{layout}")
    };
    bench::report(&Figure {
        name: name.as_str(),
        mech: names::LOCKS,
        path: if figure.is_empty() { group } else { figure },
        call: layout,
        measure,
        unit,
        batch_size: ops,
        samples,
        tsc_hz,
        counters: None,
        snaps: snaps.into(),
        cpus,
    })
    .median
}

fn benches() -> i32 {
    let info: CpuInfo = sys::cpuinfo();
    if info.features & FEATURE_TSC == 0 {
        println!("locks: this CPU has no TSC: nothing can be timed");
        record!(kind::CLOCK, "clock" => "none", "tsc_hz" => 0);
        return 0;
    }
    let fence = Fence::for_cpu(&info);
    let unit = info.unit();
    let clock = if info.clock == 1 { "icount" } else { "tsc" };
    // The fenced timer pair around nothing: the median of a few.
    let mut timer = Timer {
        fence,
        overhead: 0,
        calib: userland::model::next_seq(),
    };
    let (mut empty, _) = timer.batches(|| {});
    empty.sort_unstable();
    timer.overhead = empty[BATCHES / 2];
    let timer_overhead = timer.overhead;
    record!(kind::CLOCK, "clock" => clock, "fence" => Esc(fence.describe()),
        "tsc_hz" => info.tsc_hz, "timer_overhead" => timer_overhead, "batches" => BATCHES,
        "interrupts" => "preemption");
    let me = threads::gettid();
    let every = info.pool_align == POOL_ALIGN_EVERY;
    let n = info.cpus.max(1);
    println!(
        "locks: {} compared in one boot; {unit} per operation, medians of {BATCHES} batches",
        if every {
            "pool alignments"
        } else {
            "one pool alignment (pool_align=)"
        }
    );
    // No emulator here models caches: say which one ran, and what its
    // ticks are. On KVM or real hardware the cache effect is in the figures.
    if info.emulated == userland::abi::syscall::EMULATOR_BOCHS {
        println!(
            "locks: Bochs does not model caches, so alignment cannot change Bochs figures ({}): real KVM or hardware shows the cache effect",
            userland::abi::syscall::BOCHS_TICK
        );
    } else if info.emulated != userland::abi::syscall::EMULATOR_NONE || info.clock == 1 {
        println!("locks: TCG does not model caches, so alignment cannot change TCG figures: icount counts instructions; `--clock model` models the cache effect, real KVM or hardware shows it");
    }
    // The table is printed once every layout is measured: the kernel's
    // `pools:` line for each layout comes when it is set, not amid the rows.
    let mut rows: [Option<(&str, [f64; 5])>; LAYOUTS.len()] = [None; LAYOUTS.len()];
    for (row, (align, name)) in rows.iter_mut().zip(LAYOUTS) {
        if !every && info.pool_align != align {
            continue;
        }
        let r = sys::call(Mechanism::Int80, nr::POOL_ALIGN, [align, 0, 0, 0, 0, 0]);
        if r != 0 {
            println!("locks: pool_align({align}) failed: {}", r as i32);
            return 1;
        }
        // Each figure's threads note their CPUs in RAN_ON (the main
        // thread runs on CPU 0).
        let per_op = |fig: &str, ops: u32, samples: (&[u64], Snaps)| {
            per_op_figure(fig, name, ops, samples, info.tsc_hz)
        };
        RAN_ON.store(1, SeqCst);
        // Uncontended: the user fast path, no kernel entry.
        let (samples, snaps) = timer.batches(|| {
            for _ in 0..UNCONTENDED_OPS {
                let _ = M4.lock(me);
                let _ = M4.unlock(me);
            }
        });
        let unc = per_op("uncontended", UNCONTENDED_OPS, (&samples, snaps));
        // Contended: two threads hand the mutex back and forth.
        let mut samples = [0u64; BATCHES];
        let first = userland::model::next_seq();
        for v in samples.iter_mut() {
            DONE.store(0, SeqCst);
            let _ = threads::spawn(contender, HANDOFFS, 16);
            let _ = threads::spawn(contender, HANDOFFS, 16);
            threads::sleep(1);
            *v = timer.time(|| {
                threads::wakeup(CHAN_START, true);
                join(&DONE, 2);
            });
        }
        let con = per_op("contended", 2 * HANDOFFS, (&samples, timer.snaps(first)));
        // Sleep/wakeup round trip between two threads.
        let mut samples = [0u64; BATCHES];
        let first = userland::model::next_seq();
        for v in samples.iter_mut() {
            DONE.store(0, SeqCst);
            let _ = threads::spawn(ponger, ROUND_TRIPS, 16);
            threads::sleep(1);
            *v = timer.time(|| {
                for _ in 0..ROUND_TRIPS {
                    ping();
                }
            });
            join(&DONE, 1);
        }
        let rtt = per_op("sleep_wakeup", ROUND_TRIPS, (&samples, timer.snaps(first)));
        // One turnstile-chain lookup: n lookups against none.
        let call = |n: u32| sys::call(Mechanism::Int80, nr::LOOKUP_BENCH, [n, 0, 0, 0, 0, 0]);
        // The calibration is the same call with no lookups (its median),
        // so the figure is the lookups alone.
        let calib = userland::model::next_seq();
        let mut base = [0u64; BATCHES];
        for v in base.iter_mut() {
            *v = bench::timed_region(fence, || {
                call(0);
            });
        }
        base.sort_unstable();
        let empty_call = Timer {
            fence,
            overhead: base[BATCHES / 2],
            calib,
        };
        let (samples, snaps) = empty_call.batches(|| {
            call(LOOKUPS);
        });
        let look = per_op("lookup", LOOKUPS, (&samples, snaps));
        // ebizzy-like: two searchers find EBIZZY_RECORDS records.
        let mut samples = [0u64; BATCHES];
        let first = userland::model::next_seq();
        for v in samples.iter_mut() {
            DONE.store(0, SeqCst);
            RECORDS.store(0, SeqCst);
            *v = timer.time(|| {
                let _ = threads::spawn(searcher, EBIZZY_RECORDS, 16);
                let _ = threads::spawn(searcher, EBIZZY_RECORDS, 16);
                join(&DONE, 2);
            });
        }
        let per_s = figure(
            names::EBIZZY,
            "",
            name,
            Measure::Throughput,
            "records/s",
            EBIZZY_RECORDS,
            (&samples, timer.snaps(first)),
            info.tsc_hz,
            RAN_ON.swap(1, SeqCst),
        );
        *row = Some((name, [unc, con, rtt, look, per_s]));
        if n > 1 {
            across_cpus(timer, &info, name, n);
        }
    }
    println!(
        "{:<8} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "align", "uncontended", "contended", "sleep/wake", "lookup", "ebizzy rec/s"
    );
    let short = if unit == "instructions" {
        "insns"
    } else {
        unit
    };
    println!(
        "{:<8} {:>12} {:>12} {:>12} {:>12} {:>14}",
        "", short, short, short, short, "records/s"
    );
    for (name, [unc, con, rtt, look, per_s]) in rows.into_iter().flatten() {
        println!(
            "{:<8} {:>12.1} {:>12.1} {:>12.1} {:>12.1} {:>14.0}",
            name, unc, con, rtt, look, per_s
        );
    }
    0
}

/// The cross-CPU figures of layout `name` on `n` CPUs: the hand-off and the
/// sleep/wakeup round trip between CPUs 0 and 1, ebizzy with one searcher
/// per CPU (all, and each CPU's share), and the user-level false sharing.
fn across_cpus(timer: Timer, info: &CpuInfo, name: &str, n: u32) {
    let per_op = |fig: &str, ops: u32, samples: (&[u64], Snaps)| {
        per_op_figure(fig, name, ops, samples, info.tsc_hz)
    };
    // Contended: one contender on CPU 0, one on CPU 1.
    RAN_ON.store(0, SeqCst);
    let mut samples = [0u64; BATCHES];
    let first = userland::model::next_seq();
    for v in samples.iter_mut() {
        DONE.store(0, SeqCst);
        let _ = threads::spawn_on(contender, HANDOFFS, 16, 0);
        let _ = threads::spawn_on(contender, HANDOFFS, 16, 1);
        threads::sleep(1);
        *v = timer.time(|| {
            threads::wakeup(CHAN_START, true);
            join(&DONE, 2);
        });
    }
    let con = per_op(
        names::CONTENDED_SMP,
        2 * HANDOFFS,
        (&samples, timer.snaps(first)),
    );
    // Sleep/wakeup: this thread on CPU 0, the ponger on CPU 1.
    RAN_ON.store(1, SeqCst);
    let mut samples = [0u64; BATCHES];
    let first = userland::model::next_seq();
    for v in samples.iter_mut() {
        DONE.store(0, SeqCst);
        let _ = threads::spawn_on(ponger, ROUND_TRIPS, 16, 1);
        threads::sleep(1);
        *v = timer.time(|| {
            for _ in 0..ROUND_TRIPS {
                ping();
            }
        });
        join(&DONE, 1);
    }
    let rtt = per_op(
        names::SLEEP_WAKEUP_SMP,
        ROUND_TRIPS,
        (&samples, timer.snaps(first)),
    );
    // ebizzy: one searcher per CPU. Each CPU's share is reported as the
    // time its rate would take for the whole batch (samples scaled by
    // EBIZZY_RECORDS / its records), so its figure is its own records/s.
    RAN_ON.store(0, SeqCst);
    let mut samples = [0u64; BATCHES];
    let mut mine = [[0u64; BATCHES]; 8];
    let first = userland::model::next_seq();
    for (b, v) in samples.iter_mut().enumerate() {
        DONE.store(0, SeqCst);
        RECORDS.store(0, SeqCst);
        for f in FOUND.iter() {
            f.store(0, SeqCst);
        }
        *v = timer.time(|| {
            for c in 0..n {
                let _ = threads::spawn_on(searcher, EBIZZY_RECORDS, 16, c);
            }
            join(&DONE, n);
        });
        for c in 0..n as usize {
            let found = FOUND[c].load(SeqCst).max(1) as u64;
            mine[c][b] = *v * EBIZZY_RECORDS as u64 / found;
        }
    }
    let ran = RAN_ON.swap(1, SeqCst);
    let all = figure(
        names::EBIZZY,
        names::EBIZZY_SMP,
        name,
        Measure::Throughput,
        "records/s",
        EBIZZY_RECORDS,
        (&samples, timer.snaps(first)),
        info.tsc_hz,
        ran,
    );
    let mut each = Line::new();
    for (c, m) in mine.iter().enumerate().take(n as usize) {
        let mut fig = Line::new();
        let _ = write!(fig, "cpu{c}");
        let r = figure(
            names::EBIZZY,
            fig.as_str(),
            name,
            Measure::Throughput,
            "records/s",
            EBIZZY_RECORDS,
            // No model figures: the batch's snapshots are the whole
            // machine's, not this CPU's share.
            (m, None),
            info.tsc_hz,
            1 << c,
        );
        let _ = write!(each, " {r:.0}");
    }
    // False sharing: a thread on every CPU increments its own counter,
    // this one on CPU 0. One run: the others wait in the kernel; the timed
    // region wakes them, increments, and waits for them by spinning (with
    // `pause`), writing nothing they read: under the model a CPU that
    // woke follows the last write it saw in QEMU's order, and a system
    // call here (taking the scheduler lock) after the loop would be one.
    let run = |stride: u32, incs: u32| -> u64 {
        INCS.store(incs, SeqCst);
        DONE.store(0, SeqCst);
        GO.store(0, SeqCst);
        for c in 1..n {
            let _ = threads::spawn_on(incrementer, c * stride, 16, c);
        }
        // Time for each to reach its sleep.
        threads::sleep(1);
        RAN_ON.fetch_or(1, SeqCst);
        timer.time(|| {
            GO.store(1, SeqCst);
            threads::wakeup(CHAN_FS_GO, true);
            increment(&COUNTERS.0[0], incs);
            while DONE.load(SeqCst) < n - 1 {
                core::hint::spin_loop();
            }
        })
    };
    let mut fs = [0f64; 3];
    for (k, (fig, stride)) in [
        (names::FALSE_SHARING_LINE, 4u32),
        (names::FALSE_SHARING_ADJACENT, 64),
        (names::FALSE_SHARING_APART, 128),
    ]
    .into_iter()
    .enumerate()
    {
        // The model's calibration: the same runs without increments (its
        // coherence misses are the hand-shake's, subtracted from each batch).
        let calib = userland::model::next_seq();
        for _ in 0..FS_CALIB_RUNS {
            run(stride, 0);
        }
        RAN_ON.store(0, SeqCst);
        let mut samples = [0u64; BATCHES];
        let first = userland::model::next_seq();
        for v in samples.iter_mut() {
            *v = run(stride, INCREMENTS);
        }
        let ran = RAN_ON.swap(1, SeqCst);
        let snaps = Snaps {
            stream: SNAP_USER,
            calib,
            calib_runs: FS_CALIB_RUNS,
            batches: first,
        };
        fs[k] = figure(
            names::LOCKS,
            fig,
            name,
            Measure::Throughput,
            "ops/s",
            n * INCREMENTS,
            (&samples, snaps),
            info.tsc_hz,
            ran,
        );
    }
    println!(
        "{name:<8} across {n} CPUs: contended {con:.1}, sleep/wake {rtt:.1} per op; ebizzy {all:.0} rec/s (per CPU:{}); false sharing ops/s: one line {:.0}, adjacent lines {:.0}, 128 apart {:.0}",
        each.as_str(), fs[0], fs[1], fs[2]
    );
}

/// Increments per thread per false-sharing batch.
const INCREMENTS: u32 = 20_000;
/// The counters of the false-sharing threads, placed at a byte offset
/// each (0, 4, 8... in one line; 0, 64, ...; 0, 128, ...).
#[repr(C, align(128))]
struct Counters([AtomicU32; 256]);
static COUNTERS: Counters = Counters([const { AtomicU32::new(0) }; 256]);
/// Released by the timing thread once every incrementer exists.
static GO: AtomicU32 = AtomicU32::new(0);
/// Where the incrementers wait for GO.
const CHAN_FS_GO: u32 = 0x5003;
/// Increments per thread in the running false-sharing run (0 in the
/// model's calibration runs).
static INCS: AtomicU32 = AtomicU32::new(0);
/// Calibration runs of each false-sharing figure (the model's).
const FS_CALIB_RUNS: u32 = 3;

/// A false-sharing thread: waits for GO, then increments the counter at
/// byte `offset` (plain loads and stores: the line moves between CPUs).
fn incrementer(offset: u32) {
    note_cpu();
    let c = &COUNTERS.0[(offset / 4) as usize % 256];
    // Asleep in the kernel until GO, not spinning: a CPU that idles until
    // the wake-up starts its modelled clock there (the model's rule), so
    // the CPUs' loops overlap in modelled time as on parallel hardware; a
    // spinning one would run its clock ahead of the others'.
    while GO.load(SeqCst) == 0 {
        let _ = threads::sleep_on(CHAN_FS_GO, 1);
    }
    increment(c, INCS.load(SeqCst));
    finished();
}

/// `n` increments of `c` by plain loads and stores (the line moves
/// between CPUs).
#[inline(never)]
fn increment(c: &AtomicU32, n: u32) {
    for _ in 0..n {
        c.store(
            c.load(core::sync::atomic::Ordering::Relaxed) + 1,
            core::sync::atomic::Ordering::Relaxed,
        );
    }
}

// ---- a task that ends while its threads run elsewhere ------------------------

/// Threads that have started on their CPU.
static RUNNING: AtomicU32 = AtomicU32::new(0);

/// Spins in ring 3 for good (the task's end must stop it).
fn spinner(_: u32) {
    RUNNING.fetch_add(1, SeqCst);
    let mut n = 0u32;
    loop {
        n = core::hint::black_box(n.wrapping_add(1));
    }
}

/// Makes system calls for good (stopped in or between them).
fn caller(_: u32) {
    RUNNING.fetch_add(1, SeqCst);
    loop {
        let _ = threads::gettid();
        threads::yield_now();
    }
}

/// Faults once every thread runs.
fn faulter(want: u32) {
    RUNNING.fetch_add(1, SeqCst);
    while RUNNING.load(SeqCst) < want {
        core::hint::spin_loop();
    }
    // SAFETY: not safe: #UD on purpose, which ends the task.
    unsafe { core::arch::asm!("ud2") };
}

/// Once `want` threads wait here: sets TF and enters the kernel through
/// the call gate, which keeps TF, so the single-step trap comes at the
/// gate's first instruction in ring 0 (SDM Vol. 3A §17.3.1.4); the kernel
/// resumes it there and gives TF back, and the next trap, in ring 3, ends
/// the task.
fn stepper(want: u32) {
    RUNNING.fetch_add(1, SeqCst);
    while RUNNING.load(SeqCst) < want {
        core::hint::spin_loop();
    }
    // SAFETY: not safe to go on from: the trap ends the task (on whichever
    // CPU comes first); the registers are the call gate's ABI.
    unsafe {
        core::arch::asm!(
            "pushfl",
            "orl ${tf}, (%esp)",
            "popfl",
            "lcall ${gate}, $0",
            "nop",
            tf = const userland::abi::eflags::TF,
            gate = const userland::abi::layout::selector::CALL_GATE,
            inout("eax") nr::GETPID => _,
            options(att_syntax)
        )
    };
    // Not reached: the task has ended.
    loop {
        core::hint::spin_loop();
    }
}

/// A stepper on every CPU, this thread the one on CPU 0.
fn step_everywhere() -> i32 {
    let n = cpus();
    for c in 1..n {
        if threads::spawn_on(stepper, n, 16, c).is_err() {
            println!("locks: no thread on CPU {c}");
            return 1;
        }
    }
    println!("locks: a thread on each of {n} CPUs single-steps into the kernel at once");
    stepper(n);
    1
}

/// A spinner and a caller on every other CPU; then this thread exits the
/// task (or, with `fault`, the last CPU's extra thread executes `ud2`).
/// The kernel must stop them all and go on.
fn end_elsewhere(fault: bool) -> i32 {
    let n = cpus();
    let mut want = 0;
    for c in 1..n {
        want += threads::spawn_on(spinner, 0, 16, c).is_ok() as u32;
        want += threads::spawn_on(caller, 0, 16, c).is_ok() as u32;
    }
    if fault {
        want += 1;
        let _ = threads::spawn_on(faulter, want, 16, n - 1);
    }
    let mut rounds = 0;
    while RUNNING.load(SeqCst) < want && rounds < 10_000 {
        threads::sleep(1);
        rounds += 1;
    }
    println!(
        "locks: {} of {want} threads run on CPUs 1..{n}; the task ends {}",
        RUNNING.load(SeqCst),
        if fault {
            "by a fault there"
        } else {
            "by exit(0) here"
        }
    );
    if fault {
        // Wait here for the fault to end the task.
        loop {
            threads::sleep(1);
        }
    }
    sys::call(Mechanism::Int80, nr::EXIT, [0; 6]);
    1
}
