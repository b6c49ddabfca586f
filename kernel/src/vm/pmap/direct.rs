//! `pmap=direct`: all physical memory (up to 768 MiB) mapped once, at boot,
//! at `DIRECT_MAP_BASE` in the kernel half every space shares: any page
//! table or page is at `DIRECT_MAP_BASE + its physical address`, reached
//! with no TLB work at all (Linux's lowmem, xv6's `P2V`, the amd64 direct
//! map the fork experiment's kernel moved to).
//!
//! The other strategies have no such map: on them, memory above the
//! kernel's identity map costs a window or a flush to reach.

use abi::layout::{DIRECT_MAP_BASE, DIRECT_MAP_END, PAGE_SIZE};

use crate::arch::paging::{self, OutOfMemory};

/// Boot: maps `[0, phys_end)` (as far as the map reaches).
pub(super) fn init(phys_end: u64) -> Result<(), OutOfMemory> {
    let end = phys_end.min((DIRECT_MAP_END - DIRECT_MAP_BASE) as u64) as u32;
    let mut pa = 0;
    while pa < end {
        paging::map_kernel(DIRECT_MAP_BASE + pa, pa)?;
        pa += PAGE_SIZE;
    }
    Ok(())
}

/// Where `frame` is in the direct map.
pub(super) fn address(frame: u32) -> *mut u8 {
    debug_assert!(frame < DIRECT_MAP_END - DIRECT_MAP_BASE);
    (DIRECT_MAP_BASE + frame) as *mut u8
}
