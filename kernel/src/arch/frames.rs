//! Physical frames (4 KiB) from the loader's memory map.
//!
//! A bump pointer walks the usable regions below `KERNEL_MAP_END` (so each
//! frame is reachable through the kernel's identity map), stepping over the
//! kernel image, the boot information and the modules; freed frames go on a
//! free list threaded through the frames themselves.
//!
//! The allocator stays a `BootCell` (each use says why it is alone), not
//! a `spin::Mutex`: fork and exit allocate and free a page directory here,
//! inside forktest's and lmbench's timed rounds, and the mutex's take and
//! release added 34 instructions to every `forktest.fork_exit` round under
//! icount (118281.375 to 118315.375 per fork on one CPU).

use abi::layout::{KERNEL_MAP_END, PAGE_SIZE};

use crate::boot::info::{BootInfo, Region};
use crate::sync::cell::BootCell;

const MAX_RESERVED: usize = 1 + crate::boot::info::MAX_EXTENTS + crate::boot::info::MAX_MODULES;
const LOW_MEMORY_END: u64 = 1 << 20;

struct Allocator {
    regions: [Region; 32],
    nregions: usize,
    reserved: [(u32, u32); MAX_RESERVED],
    nreserved: usize,
    region: usize,
    next: u64,
    free_list: u32,
    allocated: u32,
    total: u32,
}

static ALLOC: BootCell<Allocator> = BootCell::new(Allocator {
    regions: [Region { start: 0, end: 0 }; 32],
    nregions: 0,
    reserved: [(0, 0); MAX_RESERVED],
    nreserved: 0,
    region: 0,
    next: 0,
    free_list: 0,
    allocated: 0,
    total: 0,
});

fn align_up(v: u64) -> u64 {
    (v + PAGE_SIZE as u64 - 1) & !(PAGE_SIZE as u64 - 1)
}

/// Sets up the allocator. `kernel` is the image's `[start, end)`.
pub fn init(bi: &BootInfo, kernel: (u32, u32)) {
    // SAFETY: boot, single CPU.
    let a = unsafe { ALLOC.get_mut() };
    let mut reserve = |r: (u32, u32)| {
        if a.nreserved < MAX_RESERVED {
            a.reserved[a.nreserved] = r;
            a.nreserved += 1;
        }
    };
    reserve(kernel);
    for &e in bi.extents() {
        reserve(e);
    }
    for m in bi.modules() {
        reserve((m.start, m.end));
    }
    for r in bi.regions() {
        let start = align_up(r.start.max(LOW_MEMORY_END));
        let end = r.end.min(KERNEL_MAP_END as u64) & !(PAGE_SIZE as u64 - 1);
        if start < end && a.nregions < a.regions.len() {
            a.regions[a.nregions] = Region { start, end };
            a.nregions += 1;
            a.total += ((end - start) / PAGE_SIZE as u64) as u32;
        }
    }
    a.next = a.regions.first().map(|r| r.start).unwrap_or(0);
}

impl Allocator {
    fn reserved_end(&self, frame: u64) -> Option<u64> {
        let f = frame as u32;
        self.reserved[..self.nreserved]
            .iter()
            .find(|&&(s, e)| s < e && f < e && f + PAGE_SIZE > s)
            .map(|&(_, e)| align_up(e as u64))
    }

    fn bump(&mut self) -> Option<u32> {
        while self.region < self.nregions {
            let r = self.regions[self.region];
            self.next = self.next.max(r.start);
            while self.next + PAGE_SIZE as u64 <= r.end {
                let f = self.next;
                match self.reserved_end(f) {
                    Some(skip) => self.next = skip,
                    None => {
                        self.next += PAGE_SIZE as u64;
                        return Some(f as u32);
                    }
                }
            }
            self.region += 1;
        }
        None
    }
}

/// A zeroed frame, or `None` when memory is exhausted.
pub fn alloc() -> Option<u32> {
    // SAFETY: one context at a time (kernel, interrupts off).
    let a = unsafe { ALLOC.get_mut() };
    let f = if a.free_list != 0 {
        let f = a.free_list;
        // SAFETY: a free frame holds the next free frame's address in its first word.
        a.free_list = unsafe { (f as *const u32).read() };
        f
    } else {
        a.bump()?
    };
    a.allocated += 1;
    // SAFETY: the frame is ours, identity-mapped and PAGE_SIZE long.
    unsafe { core::ptr::write_bytes(f as *mut u8, 0, PAGE_SIZE as usize) };
    Some(f)
}

/// Returns a frame from `alloc`.
pub fn free(frame: u32) {
    // SAFETY: one context at a time; the caller no longer uses the frame.
    let a = unsafe { ALLOC.get_mut() };
    // SAFETY: the frame is identity-mapped and unused now.
    unsafe { (frame as *mut u32).write(a.free_list) };
    a.free_list = frame;
    a.allocated -= 1;
}

/// (frames in use, frames the allocator manages).
pub fn usage() -> (u32, u32) {
    // SAFETY: read of counters, one context at a time.
    let a = unsafe { ALLOC.get_mut() };
    (a.allocated, a.total)
}
