//! Turnstiles: where threads wait for a contested lock, FreeBSD's model.
//!
//! Every thread owns one turnstile from a pool. The first thread to block
//! on a lock lends its turnstile to the lock; each later blocker parks its
//! own on that turnstile's free list. A woken thread leaves with one: a
//! parked one if any, else (the last waiter) the lock's turnstile itself.
//! So a lock costs nothing until it is contested, and there are always
//! exactly as many turnstiles as threads.
//!
//! Lent turnstiles hang on 128 hash chains keyed by the lock's [`Key`] (its
//! address and the space it is in: a user mutex is a word of one process),
//! each with its own spin lock. The waiters are not queued: the most urgent one
//! (0 first, then the longest waiting) is found by a scan of the thread
//! table, at most `MAX_THREADS` entries. A blocker lends its priority to
//! the lock's owner, and on along the chain of owners if that owner is
//! itself blocked.
//!
//! Locking key:
//!   (s) the scheduler lock (`task::sched::lock`): every field, the pool,
//!       and the waiters' thread state. `wait`, `signal` and `unpend`
//!       assert it; so does every access to the pool.
//!   (c) the hash chain's spin lock: a chain's head and the `chain_next`
//!       links on it (taken inside (s); it marks where finer locking would
//!       split the big lock, and its word is what false sharing hits).
//!
//! Differences from FreeBSD's subr_turnstile.c:
//! - `trywait` only answers "is anyone waiting on this lock?". FreeBSD's
//!   `turnstile_trywait` returns with the chain locked, so the caller can
//!   look at the lock word once more and then `turnstile_wait` or
//!   `turnstile_cancel`; here the caller holds the scheduler lock from its
//!   check to its `wait`, so no window needs closing.
//! - `lookup` takes and drops the chain lock itself; FreeBSD's expects the
//!   chain locked and returns with it still held.
//! - `signal` makes the woken thread ready at once (it calls `unpend`), and
//!   the kernel mutex hands it ownership directly; FreeBSD's
//!   `turnstile_signal` only moves it to a pending list, which
//!   `turnstile_unpend` wakes after the owner has released the lock.
//! - The chain hash is the xor fold of FreeBSD's sleepqueue (`SC_HASH`);
//!   its turnstile hash (`TC_HASH`) only shifts and masks.

use abi::syscall::MAX_THREADS;

use super::key::Key;
use super::sched::{self, State};
use crate::sync::cell::BootCell;
use crate::sync::pool::{self, Align, Arena, Pool};
use crate::sync::spin::SpinLock;

const NONE: u32 = u32::MAX;
pub const CHAINS: usize = 128;

/// One turnstile. Small on purpose: packed, four share a 128-byte block.
#[derive(Debug)]
#[repr(C)]
pub struct Turnstile {
    /// (s, c) The lock it is lent to (0: with a thread).
    pub lock: u32,
    /// (s) The lock's owner (thread index), NONE if unknown.
    pub owner: u32,
    /// (c) Next turnstile on the same hash chain.
    pub chain_next: u32,
    /// (s) Turnstiles parked here by later blockers.
    pub free_next: u32,
    /// Its own lock word (FreeBSD's ts_lock): what false sharing hits.
    pub spin: SpinLock,
    /// (s) Threads blocked here.
    pub waiters: u16,
    /// (s, c) The space of `lock` ([`Key::space`]): what chain it is on.
    pub space: u16,
}

const _: () = assert!(core::mem::size_of::<Turnstile>() <= 128);

/// The hash chains: `head[h]` (c: `lock[h]`) is the first turnstile lent
/// to a lock that hashes to `h`.
struct Chains {
    head: [u32; CHAINS],
    lock: [SpinLock; CHAINS],
}

static mut ARENA: Arena = Arena([0; pool::SLOT * MAX_THREADS]);
static POOL: BootCell<Pool<Turnstile>> = BootCell::new(Pool::new(&raw mut ARENA));
static CHAINS_: BootCell<Chains> = BootCell::new(Chains {
    head: [NONE; CHAINS],
    lock: [const { SpinLock::new() }; CHAINS],
});

fn pool() -> &'static mut Pool<Turnstile> {
    debug_assert!(
        sched::held_here(),
        "turnstile pool without the scheduler lock"
    );
    // SAFETY: the scheduler lock is held (asserted): no other CPU uses the
    // pool, and on this CPU one path runs at a time.
    unsafe { POOL.get_mut() }
}

fn chains() -> &'static mut Chains {
    debug_assert!(
        sched::held_here(),
        "turnstile chains without the scheduler lock"
    );
    // SAFETY: as for the pool: the scheduler lock is held (and a chain's
    // own spin lock around each walk or change of it).
    unsafe { CHAINS_.get_mut() }
}

/// The chain of `lock`: fold the address so nearby locks spread out (the
/// fold of FreeBSD's SC_HASH, see the module text), the space xored in.
/// As every space is below `CHAINS`, one address in two spaces always
/// hashes to two chains: a chain's turnstiles lent to one address are all
/// of one space, and a lookup compares the address alone.
pub fn chain_of(lock: Key) -> usize {
    lock.chain(CHAINS)
}

const _: () = assert!(abi::syscall::MAX_PROCS < CHAINS);

/// Whether `t` is lent to `lock` (see [`chain_of`]).
fn is(t: &Turnstile, lock: Key) -> bool {
    t.lock == lock.addr
}

const FRESH: Turnstile = Turnstile {
    lock: 0,
    owner: NONE,
    chain_next: NONE,
    free_next: NONE,
    spin: SpinLock::new(),
    waiters: 0,
    space: 0,
};

pub fn alloc() -> Option<usize> {
    pool().alloc(FRESH)
}

pub fn free(i: usize) {
    pool().free(i);
}

pub fn get(i: usize) -> &'static mut Turnstile {
    pool().get(i)
}

/// Turnstile `i`'s own spin lock, shared between CPUs without the
/// scheduler lock (the false-sharing benchmark hammers each CPU's word).
pub fn spin(i: usize) -> &'static SpinLock {
    // SAFETY: only the pool's layout (base and stride) is read, which
    // changes in `set_align` alone, never while a benchmark uses the words.
    let addr = unsafe { (*POOL.as_ptr()).addr(i) };
    // SAFETY: `addr` is object `i` inside the arena; only its SpinLock is
    // referenced, and a SpinLock is an atomic, safe to share.
    unsafe { &(*(addr as *const Turnstile)).spin }
}

pub fn reset() {
    pool().reset();
    let c = chains();
    c.head = [NONE; CHAINS];
}

pub fn set_align(a: Align) -> bool {
    pool().set_align(a)
}

/// (object size, stride, most objects per 64-byte block, per 128-byte block).
pub fn layout() -> (usize, usize, usize, usize) {
    let p = pool();
    (
        core::mem::size_of::<Turnstile>(),
        p.stride(),
        p.max_per_block(64),
        p.max_per_block(128),
    )
}

/// The turnstile lent to `lock`, if any (walks one hash chain under its lock).
pub fn lookup(lock: Key) -> Option<usize> {
    let c = chains();
    let h = chain_of(lock);
    c.lock[h].lock();
    let mut i = c.head[h];
    while i != NONE {
        let ts = get(i as usize);
        if is(ts, lock) {
            break;
        }
        i = ts.chain_next;
    }
    c.lock[h].unlock();
    (i != NONE).then_some(i as usize)
}

/// `trywait`: is anyone waiting on `lock`?
pub fn trywait(lock: Key) -> bool {
    lookup(lock).is_some_and(|t| get(t).waiters > 0)
}

/// The most urgent waiter on turnstile `ts` (thread index).
pub fn top_waiter(ts: usize) -> Option<usize> {
    (0..MAX_THREADS)
        .filter(|&i| {
            let t = sched::thread(i);
            t.state == State::OnTurnstile && t.blocked_on == Some(ts)
        })
        .min_by_key(|&i| (sched::thread(i).prio, sched::thread(i).seq))
}

/// `wait`: blocks the current thread on `lock`, owned by thread `owner`.
/// Returns when a `signal` picks it.
pub fn wait(lock: Key, owner: Option<usize>) {
    debug_assert!(
        sched::held_here(),
        "turnstile::wait without the scheduler lock"
    );
    let me = sched::current_index();
    let mine = sched::thread(me)
        .turnstile
        .take()
        .expect("a running thread owns a turnstile");
    let ts = match lookup(lock) {
        Some(ts) => {
            // Park ours on the lock's turnstile.
            get(mine).free_next = get(ts).free_next;
            get(ts).free_next = mine as u32;
            ts
        }
        None => {
            // Lend ours to the lock.
            let c = chains();
            let h = chain_of(lock);
            c.lock[h].lock();
            let t = get(mine);
            t.lock = lock.addr;
            t.space = lock.space;
            t.waiters = 0;
            t.free_next = NONE;
            t.chain_next = c.head[h];
            c.head[h] = mine as u32;
            c.lock[h].unlock();
            mine
        }
    };
    get(ts).owner = owner.map_or(NONE, |o| o as u32);
    get(ts).waiters += 1;
    sched::thread(me).blocked_on = Some(ts);
    propagate(me);
    sched::block(State::OnTurnstile);
}

/// Lends `from`'s priority along the chain of owners.
fn propagate(from: usize) {
    let prio = sched::thread(from).prio;
    let mut t = from;
    for _ in 0..MAX_THREADS {
        let Some(ts) = sched::thread(t).blocked_on else {
            return;
        };
        if sched::thread(t).state != State::OnTurnstile && t != from {
            return;
        }
        let owner = get(ts).owner;
        if owner == NONE {
            return;
        }
        let o = sched::thread(owner as usize);
        if o.prio <= prio {
            return;
        }
        o.prio = prio;
        t = owner as usize;
    }
}

/// The owner's priority after it gave up a lock: its own, or the most
/// urgent waiter's on any lock it still owns.
pub fn recompute(owner: usize) {
    let mut p = sched::thread(owner).base_prio;
    for ts in 0..MAX_THREADS {
        let t = get(ts);
        if t.owner == owner as u32 && t.lock != 0 && t.waiters > 0 {
            if let Some(w) = top_waiter(ts) {
                p = p.min(sched::thread(w).prio);
            }
        }
    }
    sched::thread(owner).prio = p;
}

/// `signal`: wakes the most urgent waiter on turnstile `ts`, hands it a
/// turnstile, and returns it. The turnstile leaves its chain with the last
/// waiter.
pub fn signal(ts: usize) -> Option<usize> {
    debug_assert!(
        sched::held_here(),
        "turnstile::signal without the scheduler lock"
    );
    let w = top_waiter(ts)?;
    unpend(ts, w);
    Some(w)
}

/// `unpend`: takes waiter `w` off turnstile `ts` and makes it ready.
pub fn unpend(ts: usize, w: usize) {
    debug_assert!(
        sched::held_here(),
        "turnstile::unpend without the scheduler lock"
    );
    take_off(ts, w);
    sched::make_ready(w);
}

/// A waiter of a process that ends (`sched::stop_process`): off its
/// turnstile with one turnstile of its own again, not made ready (it never
/// runs again) and not handed the lock; the owner's lent priority is
/// recomputed without it. FreeBSD has no twin: its threads leave a
/// turnstile only when woken.
pub fn remove_waiter(w: usize) {
    debug_assert!(
        sched::held_here(),
        "turnstile::remove_waiter without the scheduler lock"
    );
    let Some(ts) = sched::thread(w).blocked_on else {
        return;
    };
    let owner = get(ts).owner;
    take_off(ts, w);
    sched::thread(w).blocked_on = None;
    if owner != NONE {
        recompute(owner as usize);
    }
}

/// Takes waiter `w` off turnstile `ts` and gives it one: a parked one, or
/// (the last waiter) `ts` itself, which leaves its chain.
fn take_off(ts: usize, w: usize) {
    let t = get(ts);
    t.waiters -= 1;
    let given = if t.free_next != NONE {
        let f = t.free_next as usize;
        t.free_next = get(f).free_next;
        f
    } else {
        // The last waiter: the lock's turnstile goes with it.
        let c = chains();
        let h = chain_of(Key {
            addr: t.lock,
            space: t.space,
        });
        c.lock[h].lock();
        let mut link = &mut c.head[h];
        while *link != NONE && *link != ts as u32 {
            link = &mut get(*link as usize).chain_next;
        }
        *link = t.chain_next;
        c.lock[h].unlock();
        t.lock = 0;
        t.owner = NONE;
        ts
    };
    get(given).free_next = NONE;
    sched::thread(w).turnstile = Some(given);
}
