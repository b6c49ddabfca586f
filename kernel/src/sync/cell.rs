//! [`BootCell`]: a global the kernel mutates from one context at a time.
//!
//! The kernel runs on one CPU with interrupts off in ring 0, so a global is
//! only ever touched by the code running now. `BootCell` makes each such
//! access an `unsafe` call whose `SAFETY` line has to say why that holds.

use core::cell::UnsafeCell;

pub struct BootCell<T>(UnsafeCell<T>);

// SAFETY: every access goes through `get_mut`, whose contract is that no two
// contexts use the cell at once (one CPU, no preemption in ring 0).
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
