// The threads: crowd rounds of helper threads making their own checked
// calls and contending for a shared mutex, the pool filled until EAGAIN,
// and a nap no `wakeup` may cut short. Included into main.rs.

/// The main thread's calls per round. Each round is solo or a crowd (one
/// to [`MAX_HELPERS`] helper threads run their own calls meanwhile).
const ROUND_CALLS: u32 = 1_000;
const MAX_HELPERS: u32 = 3;
/// Calls each helper makes, and how many times it takes [`SHARED`].
const HELPER_CALLS: u32 = 200;
const LOCK_ROUNDS: u32 = 4;
/// How long the main thread waits (sleeps of one tick, or yields) for the
/// helpers before it calls the round hung.
const MAX_WAITS: u32 = 10_000;

/// The helpers' mutex; [`COUNTER`] is what it guards.
static SHARED: Umtx = Umtx::new();
static mut COUNTER: u32 = 0;
/// What the helpers need from the main thread: a seed per round, the
/// mechanisms (`1 << Mechanism`), the pid.
static HELPER_SEED: AtomicU32 = AtomicU32::new(0);
static MECH_MASK: AtomicU32 = AtomicU32::new(0);
static PID: AtomicU32 = AtomicU32::new(0);
/// Helpers that saw a wrong result (each printed it), and calls made.
static HELPER_FAILS: AtomicU32 = AtomicU32::new(0);
static HELPER_MADE: AtomicU32 = AtomicU32::new(0);

fn mechs_of(mask: u32, out: &mut [Mechanism; 4]) -> usize {
    let mut n = 0;
    for m in Mechanism::ALL {
        if mask & (1 << m as u32) != 0 {
            out[n] = m;
            n += 1;
        }
    }
    n
}

/// A helper's call: the ones whose result does not depend on what the
/// main thread does, with hostile arguments.
fn helper_plan(r: &mut Rng, mechs: &[Mechanism], tid: u32, h: u32) -> Plan {
    let mech = r.pick(mechs);
    let flags = r.next() & HOSTILE;
    let mut args = [word(r), word(r), word(r), word(r), word(r), word(r)];
    let (number, want) = match r.below(12) {
        0 => (nr::NULL, Want::Value(0)),
        1 => (nr::GETPID, Want::Value(PID.load(SeqCst))),
        2 => (nr::GETEUID, Want::Value(DEFAULT_EUID)),
        3 => (nr::GETTID, Want::Value(tid)),
        4 => (nr::ARGSUM, Want::Value(argsum(args))),
        5 => {
            args[0] = 0x8000_0000 | r.next();
            (nr::GETPRIO, Want::Errno(errno::ESRCH))
        }
        6 => {
            // To the null device: only whether the range is readable counts.
            let (p, len, kind) = range(r, None);
            args[..3].copy_from_slice(&[fd::NULL, p, len]);
            let want = if kind.readable() {
                Want::Value(len)
            } else {
                Want::Errno(errno::EFAULT)
            };
            (nr::WRITE, want)
        }
        7 => {
            // From stdin: nothing is written, whether the range is writable counts.
            let (p, len, kind) = range(r, None);
            args[..3].copy_from_slice(&[fd::STDIN, p, len]);
            let want = if kind.writable() {
                Want::Value(0)
            } else {
                Want::Errno(errno::EFAULT)
            };
            (nr::READ, want)
        }
        8 => {
            // A mutex this thread does not hold: another may.
            args[0] = &SHARED.0 as *const AtomicU32 as u32;
            (nr::UMTX_UNLOCK, Want::Errno(errno::EPERM))
        }
        9 => {
            args[0] = HELPER_CHAN + h;
            args[1] = 1;
            (nr::SLEEP_ON, Want::Errno(errno::ETIMEDOUT))
        }
        10 => match r.below(4) {
            0 => {
                args[0] = 1;
                (nr::SLEEP, Want::Value(0))
            }
            _ => (nr::YIELD, Want::Value(0)),
        },
        _ => match r.below(2) {
            0 => {
                args[0] = LOOKUP_BENCH_MAX + 1 + r.below(0x1000);
                (nr::LOOKUP_BENCH, Want::Errno(errno::EINVAL))
            }
            _ => (nr::COUNT + r.below(64), Want::Errno(errno::ENOSYS)),
        },
    };
    Plan {
        mech,
        nr: number,
        args,
        flags,
        want,
        out: None,
    }
}

/// A helper thread of a crowd round: its calls, each checked; the shared
/// mutex taken [`LOCK_ROUNDS`] times around a read-yield-write of
/// [`COUNTER`]; then it sleeps on [`DONE_CHAN`] until the round ends.
/// The CPUs the helpers ran on (bit n: CPU n), for the record.
static HELPER_CPUS: AtomicU32 = AtomicU32::new(0);

fn helper(h: u32) {
    let me = threads::gettid();
    HELPER_CPUS.fetch_or(1 << threads::cpu(), SeqCst);
    let seed = HELPER_SEED.load(SeqCst) ^ (h + 1).wrapping_mul(0x9e37_79b9);
    let mut r = Rng::new(seed);
    let mut all = [Mechanism::Int80; 4];
    let n = mechs_of(MECH_MASK.load(SeqCst), &mut all);
    let mechs = &all[..n];
    let fail = |what: &str| {
        println!("fuzz: helper {h} (tid {me}) FAILED: {what}");
        HELPER_FAILS.fetch_add(1, SeqCst);
    };
    for i in 0..HELPER_CALLS {
        if i % (HELPER_CALLS / LOCK_ROUNDS) == 0 {
            if SHARED.lock(me).is_err() {
                fail("umtx_lock of the shared mutex failed");
                break;
            }
            // SAFETY: guarded by SHARED; the yield lets the others try it.
            let c = unsafe { COUNTER };
            threads::yield_now();
            unsafe { COUNTER = c + 1 };
            if SHARED.unlock(me).is_err() {
                fail("umtx_unlock of the shared mutex failed");
                break;
            }
        }
        let p = helper_plan(&mut r, mechs, me, h);
        let a = flagged::call(p.mech, p.nr, p.args, p.flags);
        HELPER_MADE.fetch_add(1, SeqCst);
        if let Err(why) = judge(&p, &a) {
            report_failure(seed, i, &p, &a, why);
            fail("a call's result");
            break;
        }
    }
    if threads::sleep_on(DONE_CHAN, 0).is_err() {
        fail("the sleep until the round's end timed out");
    }
}

/// Sleeps on [`DONE_CHAN`] until woken: the threads that fill the pools.
fn sleeper(_: u32) {
    if threads::sleep_on(DONE_CHAN, 0).is_err() {
        println!("fuzz: a sleeper's sleep without timeout timed out");
        HELPER_FAILS.fetch_add(1, SeqCst);
    }
}

/// Wakes the `n` threads that are, or will soon be, asleep on
/// [`DONE_CHAN`]; then waits until each of `tids` is gone (getprio gives
/// ESRCH).
/// Yields while joining a helper before the join sleeps between looks.
const YIELDS_BEFORE_SLEEP: u32 = 8;

fn wake_and_join(n: u32, tids: &[u32]) -> Result<(), &'static str> {
    let mut woken = 0;
    let mut waits = 0;
    while woken < n {
        let w = threads::wakeup(DONE_CHAN, true);
        if w > n - woken {
            return Err("wakeup woke more threads than sleep on the channel");
        }
        woken += w;
        if woken < n {
            threads::sleep(1);
            waits += 1;
            if waits > MAX_WAITS {
                return Err("the helpers never went to sleep at the round's end");
            }
        }
    }
    for &tid in tids {
        let mut waits = 0;
        loop {
            match decode(threads::getprio(tid)) {
                Err(errno::ESRCH) => break,
                Ok(_) if waits < MAX_WAITS => {
                    // A helper here exits after a yield or two; one on
                    // another CPU needs the scheduler lock, which a loop of
                    // yields would keep from it most of the time: sleep.
                    if waits < YIELDS_BEFORE_SLEEP {
                        threads::yield_now();
                    } else {
                        threads::sleep(1);
                    }
                    waits += 1;
                }
                Ok(_) => return Err("a woken thread never exited"),
                Err(_) => return Err("getprio of a thread gave an errno other than ESRCH"),
            }
        }
    }
    if HELPER_FAILS.load(SeqCst) != 0 {
        return Err("a helper thread saw a wrong result (printed above)");
    }
    Ok(())
}

/// Fills the kernel's thread pool with sleepers until `thread_create`
/// says EAGAIN; wakes and joins them. Returns how many it made.
fn exhaust() -> Result<u32, &'static str> {
    let mut tids = [0u32; MAX_THREADS];
    let mut n = 0;
    loop {
        match threads::spawn(sleeper, 0, PRIO_USER) {
            Ok(tid) if n < MAX_THREADS => {
                tids[n] = tid;
                n += 1;
            }
            Ok(_) => return Err("more threads than the kernel holds"),
            Err(errno::EAGAIN) => break,
            Err(_) => return Err("thread_create failed with an errno other than EAGAIN"),
        }
    }
    if n == 0 {
        return Err("not one thread could be created");
    }
    wake_and_join(n as u32, &tids[..n])?;
    Ok(n as u32)
}

/// A helper that naps: `sleep` must not be cut short by a `wakeup`.
fn napper(_: u32) {
    threads::sleep(NAP_TICKS);
}
const NAP_TICKS: u32 = 5;

/// `sleep` is no channel anyone can name: while a helper naps, `wakeup` of
/// every number a kernel might use for a thread's private channel (the
/// old `sleep` used `0xfffff000 | thread`) wakes nobody.
fn nap_unwakeable() -> Result<(), &'static str> {
    let tid = threads::spawn(napper, 0, PRIO_USER).map_err(|_| "no thread for the napper")?;
    // Let it start its nap.
    threads::sleep(1);
    for c in 0..MAX_THREADS as u32 {
        if threads::wakeup(0xffff_f000 | c, true) != 0 {
            return Err("a wakeup cut a sleep short");
        }
    }
    wait_ended(tid, "the napper never woke")
}

/// Waits, a tick at a time and at most [`MAX_WAITS`] ticks, until thread
/// `tid` has ended (`getprio` says `ESRCH`); `Err(why)` if it never does.
fn wait_ended(tid: u32, why: &'static str) -> Result<(), &'static str> {
    let mut waits = 0;
    while decode(threads::getprio(tid)) != Err(errno::ESRCH) {
        threads::sleep(1);
        waits += 1;
        if waits > MAX_WAITS {
            return Err(why);
        }
    }
    Ok(())
}

/// The helpers of the running round.
struct Round {
    tids: [u32; MAX_HELPERS as usize],
    n: u32,
}

impl Round {
    const SOLO: Round = Round {
        tids: [0; MAX_HELPERS as usize],
        n: 0,
    };

    /// Starts a round: solo, or a crowd of helpers (always the first, so
    /// that even a short run has one).
    fn start(r: &mut Rng, model: &mut Model, first: bool) -> Result<Round, &'static str> {
        let mut round = Round::SOLO;
        model.crowd = r.below(2) == 0 || first;
        if !model.crowd {
            return Ok(round);
        }
        HELPER_SEED.store(r.next(), SeqCst);
        // SAFETY: no helper runs between rounds.
        unsafe { COUNTER = 0 };
        round.n = 1 + r.below(MAX_HELPERS);
        // Spread over the CPUs (with one, all here): with several the
        // helpers' calls and the shared mutex cross CPUs.
        for h in 0..round.n {
            round.tids[h as usize] =
                threads::spawn_on(helper, h, PRIO_USER, userland::abi::syscall::CPU_ANY)
                    .map_err(|_| "thread_create refused a helper")?;
        }
        Ok(round)
    }

    /// Ends it: every helper done and gone, the mutex's count right.
    fn end(&self, model: &mut Model) -> Result<(), &'static str> {
        if self.n == 0 {
            return Ok(());
        }
        wake_and_join(self.n, &self.tids[..self.n as usize])?;
        model.crowd = false;
        // SAFETY: every helper has exited.
        if unsafe { COUNTER } != self.n * LOCK_ROUNDS {
            return Err("the shared mutex let two threads in at once");
        }
        Ok(())
    }
}
