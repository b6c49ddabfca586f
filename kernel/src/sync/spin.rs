//! Spin locks for the hash chains and the sync objects. They are taken
//! inside the scheduler lock (`task::sched::lock`), which already
//! serialises every change to what they guard, so none is ever found held;
//! they mark where finer locking would split the big lock, and their words
//! are what false sharing between CPUs would hit.
//!
//! Written here rather than taken from the `spin` crate: the lock word is a
//! field of every turnstile and sleepqueue, whose size and layout the
//! pool-alignment and false-sharing benchmarks measure, and `spin`'s
//! `SpinMutex<()>` is a one-byte flag with its own instruction sequence;
//! the `xchg` loop on a 32-bit word is the subject here. The scheduler lock
//! (`task::sched::lock`) is hand-written too, and says why.
//!
//! Where a lock is not what a benchmark measures, the kernel takes the
//! `spin` crate's: the serial port (`console::serial`). And where one would
//! be but still changed a timed figure, the module says so and keeps its
//! own: the frame allocator (`arch::frames`), the VGA cursor
//! (`console::vga`), the console's line lock (`console`). The once-cells
//! are sorted the same way (`sync::cell`).

use core::sync::atomic::{AtomicU32, Ordering};

#[repr(transparent)]
pub struct SpinLock(AtomicU32);

impl core::fmt::Debug for SpinLock {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "SpinLock({})", self.0.load(Ordering::Relaxed))
    }
}

impl SpinLock {
    pub const fn new() -> SpinLock {
        SpinLock(AtomicU32::new(0))
    }

    /// Takes the lock (`xchg` until it was free).
    pub fn lock(&self) {
        while self.0.swap(1, Ordering::Acquire) != 0 {
            core::hint::spin_loop();
        }
    }

    pub fn unlock(&self) {
        self.0.store(0, Ordering::Release);
    }
}
