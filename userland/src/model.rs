//! Snapshots for the model clock (`abi::model`): a one-instruction marker
//! the model plugin sees, and the driver's own count of them.
//!
//! A snapshot asks the plugin to write down this CPU's running totals
//! (modelled cycles, misses, flushes) as the `seq`-th snapshot of the user
//! stream. The driver prints the sequence numbers a benchmark used in its
//! records, so the host pairs them with the plugin's file without
//! guessing. On a real CPU, and under every other clock, the marker is a
//! NOP and the count is all that happens.

use core::sync::atomic::{AtomicU32, Ordering};

use abi::model::{marker_disp, SNAP_USER};

/// How many user-stream snapshots this program has executed. The marker
/// and the increment are one `asm!` block, so they stay together and in
/// order against the timer's `asm!` blocks.
#[unsafe(no_mangle)]
static tb_user_snaps: AtomicU32 = AtomicU32::new(0);

/// The sequence number the next [`snap`] will have.
pub fn next_seq() -> u32 {
    tb_user_snaps.load(Ordering::Relaxed)
}

/// One snapshot of the user stream: the marker, then the count.
#[inline(always)]
pub fn snap() {
    // SAFETY: a NOP, then an increment of our own counter (one thread
    // snapshots; the plugin reads nothing of it).
    unsafe {
        core::arch::asm!(
            "nopl {disp}(%eax)",
            "incl {count}",
            disp = const marker_disp(SNAP_USER),
            count = sym tb_user_snaps,
            options(att_syntax, nostack)
        )
    };
}

/// Makes the count's page this process's own: a plain store of the value
/// it holds. After a copy-on-write `fork` the page is shared read-only, and
/// the first [`snap`] would otherwise take the copy-on-write fault between
/// the plugin's marker and the timer (inside the model's figure).
pub fn own_count() {
    tb_user_snaps.store(tb_user_snaps.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// One CPU's count of the user-stream snapshots this program's threads
/// took there, in a 128-byte block of its own (a count that shared a line
/// with CPU 0's data would move between the caches inside its figures).
#[repr(C, align(128))]
struct Count(AtomicU32);

/// Per CPU other than 0: the user-stream snapshots this program's threads
/// took on it ([`snap_on`]). CPU 0's are [`snap`]'s (the driver's count):
/// the plugin numbers each CPU's stream on its own.
static OTHER_CPUS: [Count; abi::layout::MAX_CPUS] =
    [const { Count(AtomicU32::new(0)) }; abi::layout::MAX_CPUS];

/// The sequence number the next [`snap_on`] of CPU `cpu` (not 0) will
/// have: exact while no thread snapshots there, as between two figures.
/// The count is this program's: it assumes no other program took user
/// snapshots on that CPU before it in the boot.
pub fn next_seq_on(cpu: usize) -> u32 {
    OTHER_CPUS[cpu].0.load(Ordering::Relaxed)
}

/// [`own_count`] for CPU `cpu`'s count (not 0's): before two back-to-back
/// [`snap_on`]s after a `fork`, so the copy-on-write fault falls before
/// the pair, not between its two snapshots.
pub fn own_count_on(cpu: usize) {
    let count = &OTHER_CPUS[cpu].0;
    count.store(count.load(Ordering::Relaxed), Ordering::Relaxed);
}

/// One snapshot of the user stream by a thread on CPU `cpu` (its own, not
/// 0: there the driver's timed pairs must stay consecutive), counted for
/// that CPU.
#[inline(always)]
pub fn snap_on(cpu: usize) {
    let count = &OTHER_CPUS[cpu].0;
    // SAFETY: a NOP, then an increment of that CPU's counter (only the
    // one thread working on that CPU in a figure snapshots there).
    unsafe {
        core::arch::asm!(
            "nopl {disp}(%eax)",
            "incl ({c})",
            disp = const marker_disp(SNAP_USER),
            c = in(reg) count.as_ptr(),
            options(att_syntax, nostack)
        )
    };
}
