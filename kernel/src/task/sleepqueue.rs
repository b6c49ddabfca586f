//! Sleepqueues: where threads wait on a channel (any address, in the
//! kernel's space or a process's: a [`Key`]) until someone wakes it,
//! FreeBSD's model, the turnstile pattern again: each
//! thread owns one from a pool, the first sleeper on a channel lends its
//! own, later sleepers park theirs on its free list, a woken thread leaves
//! with one. 256 hash chains keyed by channel, each with a spin lock.
//! Sleepers wake in the order they went to sleep (found by a scan of the
//! thread table, as the turnstile's waiters are); a sleep may have a
//! timeout, counted in timer ticks. The chain hash is FreeBSD's SC_HASH
//! fold.
//!
//! Locking key (as in `turnstile`):
//!   (s) the scheduler lock: every field, the pool, the sleepers' thread
//!       state. `sleep` and `wakeup` take it; `take_off` and
//!       `remove_waiter` (the twins of the turnstile's unpend) assert it.
//!   (c) the chain's spin lock `LOCKS[h]`: `HEADS[h]` and the `chain_next`
//!       links on chain `h`.

use abi::syscall::MAX_THREADS;

use super::key::{Key, KERNEL_SPACE};
use super::sched::{self, State};
use crate::sync::cell::BootCell;
use crate::sync::pool::{self, Align, Arena, Pool};
use crate::sync::spin::SpinLock;

const NONE: u32 = u32::MAX;
pub const CHAINS: usize = 256;

#[derive(Debug)]
#[repr(C)]
pub struct SleepQueue {
    /// (s, c) The channel it is lent to (0: with a thread).
    pub chan: u32,
    /// (c) Next sleepqueue on the same hash chain.
    pub chain_next: u32,
    /// (s) Sleepqueues parked here by later sleepers.
    pub free_next: u32,
    pub spin: SpinLock,
    /// (s) Threads asleep here.
    pub sleepers: u16,
    /// (s, c) The space of `chan` ([`Key::space`]): what chain it is on.
    pub space: u16,
}

const _: () = assert!(core::mem::size_of::<SleepQueue>() <= 128);

static mut ARENA: Arena = Arena([0; pool::SLOT * MAX_THREADS]);
static POOL: BootCell<Pool<SleepQueue>> = BootCell::new(Pool::new(&raw mut ARENA));
static HEADS: BootCell<[u32; CHAINS]> = BootCell::new([NONE; CHAINS]);
static LOCKS: [SpinLock; CHAINS] = [const { SpinLock::new() }; CHAINS];

fn pool() -> &'static mut Pool<SleepQueue> {
    debug_assert!(
        sched::held_here(),
        "sleepqueue pool without the scheduler lock"
    );
    // SAFETY: the scheduler lock is held (asserted): no other CPU uses the
    // pool, and on this CPU one path runs at a time (the tick handler that
    // wakes timed-out sleepers takes the lock too).
    unsafe { POOL.get_mut() }
}

fn heads() -> &'static mut [u32; CHAINS] {
    debug_assert!(
        sched::held_here(),
        "sleepqueue chains without the scheduler lock"
    );
    // SAFETY: as for the pool (and the chain's spin lock around each walk).
    unsafe { HEADS.get_mut() }
}

/// The chain of kernel channel `chan` (FreeBSD's SC_HASH fold).
pub fn chain_of(chan: u32) -> usize {
    (((chan >> 8) ^ chan) as usize) & (CHAINS - 1)
}

/// The chain of `chan`: the fold with the space xored in ([`Key::chain`]).
/// As every space is below `CHAINS`, one address in two spaces always
/// hashes to two chains: a chain's queues lent to one address are all of
/// one space, and a lookup compares the address alone.
#[inline(always)]
fn chain_of_key(chan: u32, space: u16) -> usize {
    Key { addr: chan, space }.chain(CHAINS)
}

const _: () = assert!(abi::syscall::MAX_PROCS < CHAINS);

const FRESH: SleepQueue = SleepQueue {
    chan: 0,
    chain_next: NONE,
    free_next: NONE,
    spin: SpinLock::new(),
    sleepers: 0,
    space: 0,
};

pub fn alloc() -> Option<usize> {
    pool().alloc(FRESH)
}

pub fn free(i: usize) {
    pool().free(i);
}

fn get(i: usize) -> &'static mut SleepQueue {
    pool().get(i)
}

pub fn reset() {
    pool().reset();
    *heads() = [NONE; CHAINS];
}

pub fn set_align(a: Align) -> bool {
    pool().set_align(a)
}

pub fn layout() -> (usize, usize, usize, usize) {
    let p = pool();
    (
        core::mem::size_of::<SleepQueue>(),
        p.stride(),
        p.max_per_block(64),
        p.max_per_block(128),
    )
}

/// The queue lent to `chan` in `space` (see [`chain_of_key`]).
#[inline(always)]
fn lookup(chan: u32, space: u16) -> Option<usize> {
    let h = chain_of_key(chan, space);
    LOCKS[h].lock();
    let mut i = heads()[h];
    while i != NONE && get(i as usize).chan != chan {
        i = get(i as usize).chain_next;
    }
    LOCKS[h].unlock();
    (i != NONE).then_some(i as usize)
}

/// Sleeps on kernel channel `chan` until woken or, with `timeout` ticks >
/// 0, timed out. Returns false on a timeout.
pub fn sleep(chan: u32, timeout: u64) -> bool {
    sleep_keyed(chan, KERNEL_SPACE, timeout)
}

/// [`sleep`] on a user channel: an address of one process.
pub fn sleep_user(chan: Key, timeout: u64) -> bool {
    sleep_keyed(chan.addr, chan.space, timeout)
}

/// A queue not lent to a user channel has space [`KERNEL_SPACE`]: the
/// kernel's channels (waitpid's, every CPU test's) set nothing more than
/// they did before spaces existed, and take their queue back the same way.
#[inline(always)]
fn sleep_keyed(chan: u32, space: u16, timeout: u64) -> bool {
    let _g = sched::locked();
    let me = sched::current_index();
    let mine = sched::thread(me)
        .sleepqueue
        .take()
        .expect("a running thread owns a sleepqueue");
    let sq = match lookup(chan, space) {
        Some(sq) => {
            get(mine).free_next = get(sq).free_next;
            get(sq).free_next = mine as u32;
            sq
        }
        None => {
            let h = chain_of_key(chan, space);
            LOCKS[h].lock();
            let q = get(mine);
            q.chan = chan;
            if space != KERNEL_SPACE {
                q.space = space;
            }
            q.sleepers = 0;
            q.free_next = NONE;
            q.chain_next = heads()[h];
            heads()[h] = mine as u32;
            LOCKS[h].unlock();
            mine
        }
    };
    get(sq).sleepers += 1;
    let t = sched::thread(me);
    t.blocked_on = Some(sq);
    t.timed_out = false;
    t.deadline = if timeout > 0 {
        sched::ticks() + timeout
    } else {
        0
    };
    sched::block(State::Sleeping);
    !sched::thread(me).timed_out
}

/// The longest sleeper on sleepqueue `sq`.
fn first_sleeper(sq: usize) -> Option<usize> {
    (0..MAX_THREADS)
        .filter(|&i| {
            let t = sched::thread(i);
            t.state == State::Sleeping && t.blocked_on == Some(sq)
        })
        .min_by_key(|&i| sched::thread(i).seq)
}

/// Takes sleeper `w` off kernel channel queue `sq` and gives it one back
/// (not made ready here).
fn take_off(sq: usize, w: usize) {
    take_off_keyed(sq, w, false);
}

/// [`take_off`] from a queue lent to a user channel.
fn take_off_user(sq: usize, w: usize) {
    take_off_keyed(sq, w, true);
}

/// When the queue leaves its chain, a user channel's gives its space back
/// (see [`sleep_keyed`]).
#[inline(always)]
fn take_off_keyed(sq: usize, w: usize, user: bool) {
    debug_assert!(
        sched::held_here(),
        "sleepqueue::take_off without the scheduler lock"
    );
    let q = get(sq);
    q.sleepers -= 1;
    let given = if q.free_next != NONE {
        let f = q.free_next as usize;
        q.free_next = get(f).free_next;
        f
    } else {
        let h = if user {
            chain_of_key(q.chan, q.space)
        } else {
            chain_of(q.chan)
        };
        LOCKS[h].lock();
        let mut link = &mut heads()[h];
        while *link != NONE && *link != sq as u32 {
            link = &mut get(*link as usize).chain_next;
        }
        *link = q.chain_next;
        LOCKS[h].unlock();
        q.chan = 0;
        if user {
            q.space = KERNEL_SPACE;
        }
        sq
    };
    get(given).free_next = NONE;
    let t = sched::thread(w);
    t.sleepqueue = Some(given);
    t.deadline = 0;
}

/// A sleeper whose timeout fired (from the timer tick), or of a process
/// that ends: off its queue.
pub fn remove_waiter(w: usize) {
    debug_assert!(
        sched::held_here(),
        "sleepqueue::remove_waiter without the scheduler lock"
    );
    if let Some(sq) = sched::thread(w).blocked_on {
        if get(sq).space == KERNEL_SPACE {
            take_off(sq, w);
        } else {
            take_off_user(sq, w);
        }
    }
}

/// Wakes the longest sleeper on kernel channel `chan` (`all`: every
/// sleeper); returns how many.
pub fn wakeup(chan: u32, all: bool) -> u32 {
    wakeup_keyed(chan, KERNEL_SPACE, all)
}

/// [`wakeup`] of a user channel: only its own process's sleepers.
pub fn wakeup_user(chan: Key, all: bool) -> u32 {
    wakeup_keyed(chan.addr, chan.space, all)
}

#[inline(always)]
fn wakeup_keyed(chan: u32, space: u16, all: bool) -> u32 {
    let _g = sched::locked();
    let Some(sq) = lookup(chan, space) else {
        return 0;
    };
    let mut n = 0;
    while let Some(w) = first_sleeper(sq) {
        if space == KERNEL_SPACE {
            take_off(sq, w);
        } else {
            take_off_user(sq, w);
        }
        sched::make_ready(w);
        n += 1;
        if !all || get(sq).chan != chan {
            break;
        }
    }
    n
}
