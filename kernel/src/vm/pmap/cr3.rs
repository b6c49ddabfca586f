//! `pmap=cr3`: to edit another space's page tables, load its directory into
//! CR3, edit through its own recursive slot, and load the running space's
//! directory back: two CR3 writes, each a full flush of the TLB's
//! non-global entries (Intel SDM Vol. 3A §4.10.4.1), for every operation on
//! another space. No other CPU is involved: the space loaded for the
//! moment is only this CPU's, with interrupts off.

use abi::layout::{PAGE_SIZE, RECURSIVE_BASE};

use crate::arch::paging;

/// Loads `dir` for the duration of one operation.
pub(super) fn enter(dir: u32) {
    // SAFETY: every directory maps the kernel half as the kernel's does;
    // `leave` puts the running space back before anything else runs here.
    unsafe { paging::load_cr3(dir) };
}

/// Page table `i` of the loaded space, through its recursive slot.
pub(super) fn table(i: usize) -> *mut u32 {
    (RECURSIVE_BASE + i as u32 * PAGE_SIZE) as *mut u32
}

/// Loads the running space's directory back.
pub(super) fn leave(back: u32) {
    // SAFETY: as in `enter`.
    unsafe { paging::load_cr3(back) };
}
