//! Two cells for globals.
//!
//! [`BootCell`]: a global the kernel mutates from one context at a time.
//! Each access is an `unsafe` call whose `SAFETY` line has to name what
//! makes it exclusive: the lock that guards it (the scheduler lock for the
//! thread table and the sync objects), or "boot, before any other CPU runs".
//!
//! [`SetOnce`]: a fact learnt once during boot and read afterwards, from any
//! CPU, without `unsafe`, where a timed path reads it: the usable entry
//! mechanisms (`entry`: every thread switch), the benchmarks' worker
//! (`arch::smp`: the application processors' command loop), the pmap
//! strategy and its window (`vm::pmap`: every fork and exec), the process
//! hooks (`proc`: fork and exit), the counters' status (`arch::pmu`: a
//! ring-3 #GP or #UD). `spin::Once` does the same job for the facts no
//! timed path reads (the CPU's features, the TSC frequency, the `cpuinfo`
//! record, the pools' boot layout, the task's reset hook); on the worker
//! it changed the `mode=smp` TLB-shootdown samples under icount, so the
//! cells above keep this one.

use core::cell::UnsafeCell;
use core::mem::MaybeUninit;
use core::sync::atomic::{AtomicU8, Ordering};

pub struct BootCell<T>(UnsafeCell<T>);

// SAFETY: every access goes through `get_mut`, whose contract is that no two
// contexts use the cell at once; each caller names the lock or the boot
// phase that makes it so.
unsafe impl<T> Sync for BootCell<T> {}

impl<T> BootCell<T> {
    pub const fn new(v: T) -> Self {
        BootCell(UnsafeCell::new(v))
    }

    /// # Safety
    /// No other reference to the contents may be live.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn get_mut(&self) -> &mut T {
        // SAFETY: exclusivity is the caller's contract.
        unsafe { &mut *self.0.get() }
    }

    pub fn as_ptr(&self) -> *mut T {
        self.0.get()
    }
}

const EMPTY: u8 = 0;
const WRITING: u8 = 1;
const SET: u8 = 2;

/// A value written once (a second `set` panics) and then only read.
pub struct SetOnce<T> {
    state: AtomicU8,
    value: UnsafeCell<MaybeUninit<T>>,
}

// SAFETY: the value is written by the one `set` that won the EMPTY ->
// WRITING exchange, before the Release store of SET; readers see it only
// after an Acquire load of SET, and never write it. So it is shared
// read-only between CPUs, which `T: Sync` allows.
unsafe impl<T: Sync + Send> Sync for SetOnce<T> {}

impl<T> SetOnce<T> {
    pub const fn new() -> Self {
        SetOnce {
            state: AtomicU8::new(EMPTY),
            value: UnsafeCell::new(MaybeUninit::uninit()),
        }
    }

    /// Stores the value. Panics if it was set already.
    pub fn set(&self, v: T) {
        if self
            .state
            .compare_exchange(EMPTY, WRITING, Ordering::Acquire, Ordering::Relaxed)
            .is_err()
        {
            panic!("a set-once boot fact was set twice");
        }
        // SAFETY: winning the exchange makes this the only writer, and no
        // reader looks before SET is published below.
        unsafe { (*self.value.get()).write(v) };
        self.state.store(SET, Ordering::Release);
    }

    /// The value, once `set` has finished.
    pub fn get(&self) -> Option<&T> {
        if self.state.load(Ordering::Acquire) == SET {
            // SAFETY: SET is stored only after the value was written, and
            // the value is never written again.
            Some(unsafe { (*self.value.get()).assume_init_ref() })
        } else {
            None
        }
    }
}
