//! `pmap=apte`: the alternate recursive slot. Entry `APTE_SLOT` of the
//! *current* directory points at another space's directory, so that
//! space's page tables appear at `APTE_BASE` (table `i` at `APTE_BASE + i *
//! PAGE_SIZE`), as OpenBSD and NetBSD i386 reached them before their direct
//! maps.
//!
//! Contract: the slot is rewritten only when it must point elsewhere, and
//! each rewrite flushes this CPU's whole TLB (the alternate tables' old
//! translations could be anywhere in those 4 MiB) and shoots down every
//! other CPU whose CR3 holds the current directory: they share the slot,
//! and their TLBs may hold the old translations too. Freeing a directory
//! clears any slot of the current directory still pointing at it, with the
//! same flushes, so a reused frame is never seen through stale entries.

use abi::layout::{APTE_BASE, PAGE_SIZE};

use crate::arch::paging::{self, Pte, PRESENT, WRITABLE};

const APTE_SLOT: usize = (APTE_BASE >> 22) as usize;

fn slot() -> &'static mut Pte {
    // SAFETY: the current directory is a kernel frame in the identity map;
    // (s) and interrupts off keep anyone else from editing its slot now.
    unsafe { &mut *((super::loaded() as *mut Pte).add(APTE_SLOT)) }
}

fn set(pde: Pte) {
    *slot() = pde;
    paging::flush_all();
    super::shootdown::flush_others(super::cpus_running(super::loaded()));
}

/// Points the current directory's slot at `dir`, unless it does already.
pub(super) fn point_at(dir: u32) {
    let want = Pte::new(dir, PRESENT | WRITABLE);
    if *slot() != want {
        set(want);
    }
}

/// Page table `i` of the space the slot points at.
pub(super) fn table(i: usize) -> *mut u32 {
    (APTE_BASE + i as u32 * PAGE_SIZE) as *mut u32
}

/// Clears the current directory's slot if it points at `dir` (about to be
/// freed).
pub(super) fn forget(dir: u32) {
    if super::strategy() == abi::cmdline::Pmap::Apte && slot().frame() == dir {
        set(Pte::NONE);
    }
}
