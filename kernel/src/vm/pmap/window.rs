//! `pmap=window`: each CPU has two one-PTE windows in a kernel page table
//! shared by every space (FreeBSD i386's PMAP1/PADDR1 and CMAP2, Linux's
//! `kmap_atomic` of a highmem page):
//!
//! - the *table* window shows one page table of another space;
//! - the *data* window shows one page's contents (every strategy but
//!   `direct` uses it to zero and copy pages).
//!
//! Contract: a window belongs to its CPU, used with interrupts off under
//! the address-space lock, so nothing else remaps it between setting it and
//! using it. Pointing it at a new frame rewrites its PTE and drops the old
//! translation with one `invlpg` on this CPU only: no other CPU ever uses
//! this CPU's window, so no other TLB can hold it, and a CR3 load (which
//! flushes it) only makes the next use walk the same PTE again. Pointing it
//! at the frame it shows already costs nothing.

use abi::layout::{MAX_CPUS, PAGE_SIZE, WINDOW_BASE};
use core::sync::atomic::{AtomicU32, Ordering};

use crate::arch::paging::{self, OutOfMemory, Pte, PRESENT, WRITABLE};
use crate::sync::cell::SetOnce;

const TABLE: u32 = 0;
const DATA: u32 = 1;
const PER_CPU: u32 = 2;

/// The kernel page table that holds every window's PTE (identity-mapped).
static PTES: SetOnce<u32> = SetOnce::new();
/// The frame each window shows (c), by `cpu * PER_CPU + window`.
static SHOWN: [AtomicU32; MAX_CPUS * PER_CPU as usize] =
    [const { AtomicU32::new(0) }; MAX_CPUS * PER_CPU as usize];

/// Boot: the windows' page table, in the kernel half every space copies.
pub(super) fn init() -> Result<(), OutOfMemory> {
    PTES.set(paging::kernel_table(WINDOW_BASE)?);
    Ok(())
}

fn show(which: u32, frame: u32) -> *mut u32 {
    let slot = super::cpu() as u32 * PER_CPU + which;
    let va = WINDOW_BASE + slot * PAGE_SIZE;
    let shown = &SHOWN[slot as usize];
    if shown.load(Ordering::Relaxed) != frame {
        let ptes = *PTES.get().expect("windows set up at boot") as *mut Pte;
        // SAFETY: the windows' page table is a kernel frame in the identity
        // map; entry `slot` is this CPU's window (see the contract above).
        unsafe {
            ptes.add(slot as usize)
                .write(Pte::new(frame, PRESENT | WRITABLE))
        };
        paging::invlpg(va);
        shown.store(frame, Ordering::Relaxed);
    }
    va as *mut u32
}

/// Page table `frame` through this CPU's table window.
pub(super) fn table(frame: u32) -> *mut u32 {
    show(TABLE, frame)
}

/// Page `frame` through this CPU's data window.
pub(super) fn data(frame: u32) -> *mut u8 {
    show(DATA, frame) as *mut u8
}
