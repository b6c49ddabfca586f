//! The scheduler lock: one word, taken at the outermost entry and held
//! across a switch (the thread that runs next lets it go).
//!
//! Hand-written, not the `spin` crate's mutex: the word records which CPU
//! holds it (what `held_here` asserts, and what an unlock by another CPU
//! is caught with), a CPU that waits for it answers TLB shootdowns while it
//! spins, and it is let go by another thread than the one that took it,
//! which a guard cannot say. It is also on every path the entry and
//! context-switch benchmarks time.

use core::sync::atomic::{AtomicU32, Ordering};

use crate::arch::gdt::cpu;

/// The scheduler lock: the thread table, the run states, the turnstiles and
/// the sleepqueues. Holds this CPU's index + 1 while taken.
///
/// A test-and-set lock. Under QEMU's icount a CPU that waits for it ends
/// its turn at every `pause` and looks again only at its next turn, so it
/// can miss every moment the lock is free: the turn pacer (`arch::pacer`)
/// parks CPUs only where they hold no lock, so the CPU whose turn it is
/// finds the lock free (docs/threads.md, "Turns").
static LOCK: AtomicU32 = AtomicU32::new(0);

/// Takes the scheduler lock for this CPU.
#[track_caller]
pub fn lock() {
    let me = cpu() as u32 + 1;
    assert!(
        LOCK.load(Ordering::Relaxed) != me,
        "scheduler lock taken twice on one CPU"
    );
    while LOCK
        .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        // The holder may be waiting for this CPU to flush its TLB, which
        // the IPI cannot ask of it with interrupts off.
        crate::vm::pmap::shootdown::poll();
        core::hint::spin_loop();
    }
}

/// Lets the scheduler lock go; only its holder may (FreeBSD's
/// `mtx_assert(MA_OWNED)` before `mtx_unlock`).
#[track_caller]
pub fn unlock() {
    let me = cpu() as u32 + 1;
    let held = LOCK.load(Ordering::Relaxed);
    if held != me {
        crate::console::take_over();
        panic!(
            "scheduler lock released by CPU {} while it is held by {held} (0: nobody)",
            me - 1
        );
    }
    LOCK.store(0, Ordering::Release);
}

/// Whether this CPU holds the scheduler lock (what the sync objects assert).
pub fn held_here() -> bool {
    LOCK.load(Ordering::Relaxed) == cpu() as u32 + 1
}

/// The lock for a scope: released when the guard goes.
pub struct Guard(bool);

impl Drop for Guard {
    fn drop(&mut self) {
        if self.0 {
            unlock();
        }
    }
}

/// Takes the lock unless this CPU holds it already (paths that end a task
/// are entered both ways).
pub fn locked() -> Guard {
    if held_here() {
        Guard(false)
    } else {
        lock();
        Guard(true)
    }
}
