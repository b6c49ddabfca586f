//! Physical pages for user memory and user page tables, with a reference
//! count each (a page shared copy-on-write by several address spaces is
//! freed when the last one lets go).
//!
//! They come from the memory *above* the kernel's identity map
//! (`KERNEL_MAP_END`), as on an i386 box with more RAM than its kernel maps:
//! the kernel cannot touch such a page at its physical address, so every
//! access goes through the pmap's chosen way ([`super::pmap`]), which is what
//! the strategies are compared on. Only when that memory is used up (or a
//! boot gives the machine less than 32 MiB) does a page come from the
//! kernel's own frames; the pmap treats it just the same.
//!
//! Locking: (s) every function runs under the lock that guards address
//! spaces (the scheduler lock, held by the process layer).

use abi::layout::{KERNEL_MAP_END, PAGE_SIZE};

use crate::arch::frames;
use crate::boot::info::BootInfo;
use crate::sync::cell::BootCell;

/// Physical memory the counts cover: 512 MiB (a page beyond it is not used).
pub const MAX_PHYS: u64 = 512 << 20;
const MAX_PAGES: usize = (MAX_PHYS / PAGE_SIZE as u64) as usize;
const HIGH_PAGES: usize = MAX_PAGES - (KERNEL_MAP_END / PAGE_SIZE) as usize;

struct Pages {
    /// References to each page, by page number (s).
    refs: [u16; MAX_PAGES],
    /// Free high pages, a stack of page numbers (s): the last freed is the
    /// next handed out.
    free: [u32; HIGH_PAGES],
    nfree: usize,
    /// Pages handed out and not yet freed (s), and the high pages in all.
    used: u32,
    high: u32,
}

static PAGES: BootCell<Pages> = BootCell::new(Pages {
    refs: [0; MAX_PAGES],
    free: [0; HIGH_PAGES],
    nfree: 0,
    used: 0,
    high: 0,
});

fn pages() -> &'static mut Pages {
    // SAFETY: (s): the caller holds the address-space lock (see the module
    // comment), or it is the boot, before any other CPU runs.
    unsafe { PAGES.get_mut() }
}

/// Takes every usable page above the identity map from the loader's memory
/// map (highest first on the stack, so the lowest is handed out first).
pub fn init(bi: &BootInfo) {
    let p = pages();
    let mut add = |pfn: u32| {
        if p.nfree < HIGH_PAGES {
            p.free[p.nfree] = pfn;
            p.nfree += 1;
        }
    };
    let mut regions = [(0u64, 0u64); 32];
    let mut n = 0;
    for r in bi.regions() {
        let start = r
            .start
            .max(KERNEL_MAP_END as u64)
            .div_ceil(PAGE_SIZE as u64);
        let end = r.end.min(MAX_PHYS) / PAGE_SIZE as u64;
        if start < end && n < regions.len() {
            regions[n] = (start, end);
            n += 1;
        }
    }
    for &(start, end) in regions[..n].iter().rev() {
        for pfn in (start..end).rev() {
            add(pfn as u32);
        }
    }
    p.high = p.nfree as u32;
}

/// A page (physical address) with one reference, or `None` when memory is
/// exhausted. Its contents are whatever it held: the caller fills it.
pub fn alloc() -> Option<u32> {
    let p = pages();
    let addr = if p.nfree > 0 {
        p.nfree -= 1;
        p.free[p.nfree] * PAGE_SIZE
    } else {
        frames::alloc()?
    };
    p.refs[(addr / PAGE_SIZE) as usize] = 1;
    p.used += 1;
    Some(addr)
}

/// One more reference to `addr` (a page shared copy-on-write).
pub fn share(addr: u32) {
    let r = &mut pages().refs[(addr / PAGE_SIZE) as usize];
    debug_assert!(*r > 0, "sharing a free page");
    *r += 1;
}

/// The references to `addr`.
pub fn refs(addr: u32) -> u16 {
    pages().refs[(addr / PAGE_SIZE) as usize]
}

/// Drops one reference to `addr`; the page is free when none is left.
pub fn release(addr: u32) {
    let p = pages();
    let pfn = addr / PAGE_SIZE;
    let r = &mut p.refs[pfn as usize];
    assert!(*r > 0, "page {addr:#x} released more often than taken");
    *r -= 1;
    if *r > 0 {
        return;
    }
    p.used -= 1;
    if addr < KERNEL_MAP_END {
        frames::free(addr);
    } else {
        p.free[p.nfree] = pfn;
        p.nfree += 1;
    }
}

/// (pages in use, high pages in all): what the leak tests compare.
pub fn usage() -> (u32, u32) {
    let p = pages();
    (p.used, p.high)
}
