// The tests (argument 1): priority propagation, wake-up order, a stress
// with no lost wake-ups, pool exhaustion and EDEADLK; with more than one
// CPU also across CPUs. Included into main.rs (see there why).

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

/// Once the three threads are done: checks that they logged in the
/// order `want` (the figure says the order they did log in, as digits).
fn check_order(name: &str, want: [u32; 3]) {
    join(&DONE, 3);
    let o = [0, 1, 2].map(|i| ORDER[i].load(SeqCst));
    check(name, o == want, o[0] * 100 + o[1] * 10 + o[2]);
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
    check_order("sleepqueue wakes in the order of sleeping", [1, 2, 3]);
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
    check_order(
        "turnstile hands the mutex to the most urgent waiter first",
        [2, 3, 1],
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
    } else {
        for name in userland::abi::syscall::locks_arg::ACROSS_SKIPPED {
            skip(name, "needs a second CPU");
        }
    }
    deadlock();
    exhaustion();
    let f = FAILED.load(SeqCst);
    println!("locks: {} failures", f);
    f as i32
}
