//! Address spaces: the machine-independent half of virtual memory (what a
//! process's memory *is*), over the pmap (how the i386 maps it) and the
//! physical pages.
//!
//! A [`Space`] is a pmap and a heap break. What it offers is the whole
//! story of a process's memory, xv6's `vm.c` in a page:
//!
//! - [`Space::new`], [`Space::map_zeroed`] and [`Space::load`] build a
//!   program's memory; [`Space::destroy`] gives all of it back;
//! - a space maps pages only inside its regions (its `vm_map`): the
//!   program image, the heap up to the highest break it had, the stack.
//!   The image's zero-filled tail (`.bss`), the heap and the stack are
//!   demand-zero: a page is mapped when first touched, so what a program
//!   never touches costs no page, and no fork copies it;
//! - [`Space::fork`] copies the current space for a child: every page at
//!   once (`fork=copy`), or shared read-only and marked copy-on-write
//!   (`fork=cow`), each page's reference count telling who still uses it;
//! - [`fault`] resolves a user page fault in the current space: a write to
//!   a copy-on-write page copies it (or, the last sharer, just takes it
//!   back writable), a touch of the heap below the break maps a zeroed page
//!   (demand-zero); anything else is the process's fault;
//! - [`Space::sbrk`] moves the break.
//!
//! Locking: (s) the caller (the process layer) holds the scheduler lock,
//! with interrupts off, around every call.

pub mod page;
pub mod pmap;

use core::ops::Range;

use abi::layout::{
    PAGE_SIZE, USER_BASE, USER_HEAP_BASE, USER_HEAP_MAX, USER_STACK_SIZE, USER_STACK_TOP, USER_TOP,
};

use crate::arch::paging::OutOfMemory;
use pmap::{Flags, Pmap, Pte, COW, PRESENT, USER, WRITABLE};

/// The stack's pages (the page below stays unmapped: the guard).
const STACK: Range<u32> = USER_STACK_TOP - USER_STACK_SIZE..USER_STACK_TOP;

/// An address space.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Space {
    pub pmap: Pmap,
    /// The heap's end: `[USER_HEAP_BASE, brk)` is demand-zero.
    pub brk: u32,
    /// The highest break the heap had, page-aligned: where its pages and
    /// page tables may be.
    heap_top: u32,
    /// The program image's pages (every loadable segment).
    image: Range<u32>,
    /// The image's demand-zero pages (`.bss` past the last file byte's page).
    bss: Range<u32>,
}

impl Space {
    pub fn new() -> Result<Space, OutOfMemory> {
        Ok(Space {
            pmap: Pmap::create().ok_or(OutOfMemory)?,
            brk: USER_HEAP_BASE,
            heap_top: USER_HEAP_BASE,
            image: 0..0,
            bss: 0..0,
        })
    }

    /// Every range this space may map pages in.
    fn regions(&self) -> [Range<u32>; 3] {
        [self.image.clone(), USER_HEAP_BASE..self.heap_top, STACK]
    }

    /// Adds `[lo, hi)` to the program image, the part from `zero` on
    /// demand-zero (the loader, once per segment).
    pub fn add_image(&mut self, lo: u32, hi: u32, zero: u32) {
        let hi = hi.next_multiple_of(PAGE_SIZE);
        let lo = lo & !(PAGE_SIZE - 1);
        let zero = zero.next_multiple_of(PAGE_SIZE).min(hi);
        self.image = if self.image.is_empty() {
            lo..hi
        } else {
            self.image.start.min(lo)..self.image.end.max(hi)
        };
        if zero < hi {
            self.bss = if self.bss.is_empty() {
                zero..hi
            } else {
                self.bss.start.min(zero)..self.bss.end.max(hi)
            };
        }
    }

    /// Whether `va` is a demand-zero page: the image's `.bss`, the heap
    /// below the break, the stack.
    fn demand_zero(&self, va: u32) -> bool {
        self.bss.contains(&va) || (USER_HEAP_BASE..self.brk).contains(&va) || STACK.contains(&va)
    }

    /// Maps a zeroed page at `va`, unless one is mapped (then only widens
    /// it to writable if asked). Returns the page.
    pub fn map_zeroed(&self, va: u32, writable: bool) -> Result<u32, OutOfMemory> {
        let old = self.pmap.extract(va);
        let w = if writable { WRITABLE } else { Flags::empty() };
        if old.is_present() {
            if writable && !old.any(WRITABLE) {
                self.pmap.enter(va, old.frame(), old.flags() | w)?;
            }
            return Ok(old.frame());
        }
        let page = page::alloc().ok_or(OutOfMemory)?;
        pmap::zero_page(page);
        if let Err(e) = self.pmap.enter(va, page, w) {
            page::release(page);
            return Err(e);
        }
        Ok(page)
    }

    /// Copies `bytes` to user address `va` (inside pages mapped already),
    /// through the pages themselves: read-only pages need no write access.
    pub fn load(&self, va: u32, bytes: &[u8]) {
        let mut at = 0;
        while at < bytes.len() {
            let addr = va + at as u32;
            let offset = addr & (PAGE_SIZE - 1);
            let n = ((PAGE_SIZE - offset) as usize).min(bytes.len() - at);
            let page = self.pmap.extract(addr & !(PAGE_SIZE - 1)).frame();
            pmap::write_page(page, offset, &bytes[at..at + n]);
            at += n;
        }
    }

    /// Gives back every page, page table and the directory. No thread of
    /// it runs any more.
    pub fn destroy(self) {
        self.pmap.destroy(&self.regions());
    }

    /// A child's copy of the current space (`self`, of the calling
    /// process): every page copied, or, with `cow`, every page shared and
    /// the writable ones made read-only copy-on-write on both sides. On
    /// `Err` nothing of the child is left, and the parent is intact (at
    /// worst some pages are copy-on-write with a single sharer, which the
    /// next write takes back without a copy). The other CPUs running this
    /// space (its other threads) are shot down once when `cow` took write
    /// permission away.
    pub fn fork(&self, cow: bool) -> Result<Space, OutOfMemory> {
        let mut child = Space::new()?;
        child.brk = self.brk;
        child.heap_top = self.heap_top;
        child.image = self.image.clone();
        child.bss = self.bss.clone();
        let mut protected = false;
        let mut r = Ok(());
        for range in self.regions() {
            r = self.pmap.copy_range(child.pmap, &range, |va, pte| {
                let page = pte.frame();
                let w = pte.any(WRITABLE | COW);
                if cow {
                    if pte.any(WRITABLE) {
                        *pte = pte.with_flags((pte.flags() - WRITABLE) | COW);
                        protected = true;
                    }
                    page::share(page);
                    let c = if w { COW } else { Flags::empty() };
                    Ok(Pte::new(page, PRESENT | USER).or(c))
                } else {
                    let copy = page::alloc().ok_or(OutOfMemory)?;
                    pmap::copy_from_user_page(copy, va);
                    // A page the parent holds copy-on-write is its own to
                    // write: the child's copy is plainly writable.
                    let c = if w { WRITABLE } else { Flags::empty() };
                    Ok(Pte::new(copy, PRESENT | USER).or(c))
                }
            });
            if r.is_err() {
                break;
            }
        }
        if protected {
            // The parent's TLBs forget the write permissions at once: one
            // flush here, one shootdown of its other threads' CPUs.
            crate::arch::paging::flush_all();
            pmap::shootdown::flush_others(pmap::cpus_running(self.pmap.dir));
        }
        match r {
            Ok(()) => Ok(child),
            Err(e) => {
                child.destroy();
                Err(e)
            }
        }
    }

    /// Moves the break by `delta` bytes (current space); returns the old
    /// break, or `None` outside `[USER_HEAP_BASE, + USER_HEAP_MAX]`.
    /// Growing maps nothing (the pages come on first touch); shrinking
    /// unmaps the whole pages above the new break.
    pub fn sbrk(&mut self, delta: i32) -> Option<u32> {
        let old = self.brk;
        let new = old.checked_add_signed(delta)?;
        if !(USER_HEAP_BASE..=USER_HEAP_BASE + USER_HEAP_MAX).contains(&new) {
            return None;
        }
        self.heap_top = self.heap_top.max(new.next_multiple_of(PAGE_SIZE));
        let mut va = new.next_multiple_of(PAGE_SIZE);
        let mut removed = false;
        while va < old {
            let pte = self.pmap.remove(va);
            if pte.is_present() {
                page::release(pte.frame());
                removed = true;
            }
            va += PAGE_SIZE;
        }
        if removed {
            pmap::shootdown::flush_others(pmap::cpus_running(self.pmap.dir));
        }
        self.brk = new;
        Some(old)
    }
}

/// What a page fault in the current space came to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Resolved: the instruction can run again.
    Resolved,
    /// A real fault: the process did something it may not.
    Invalid,
    /// A page was needed and memory is exhausted.
    OutOfMemory,
}

/// Resolves a fault at user address `va` of the current space `s`, for a
/// write if `write`: copy-on-write, or a demand-zero page (`.bss`, heap,
/// stack). Also
/// what the user-pointer check calls before the kernel writes to a user
/// buffer (CR0.WP makes ring 0 honour read-only pages too).
pub fn fault(s: &Space, va: u32, write: bool) -> Fault {
    if !(USER_BASE..USER_TOP).contains(&va) {
        return Fault::Invalid;
    }
    let va = va & !(PAGE_SIZE - 1);
    let pte = pmap::current_flags(va);
    if pte.is_present() {
        // Another thread of this space, on another CPU, may have resolved
        // the same page between this CPU's fault and its taking the lock:
        // the access is allowed now, so the instruction just runs again.
        if !write || pte.any(WRITABLE) {
            return Fault::Resolved;
        }
        if !pte.any(COW) {
            return Fault::Invalid;
        }
        let old = pte.frame();
        let keep = (pte.flags() - COW) | WRITABLE | PRESENT | USER;
        if page::refs(old) == 1 {
            // The last sharer: the page is ours again.
            pmap::set_current_pte(va, Pte::new(old, keep));
        } else {
            let Some(copy) = page::alloc() else {
                return Fault::OutOfMemory;
            };
            pmap::copy_from_user_page(copy, va);
            pmap::set_current_pte(va, Pte::new(copy, keep));
            page::release(old);
            // Another thread's CPU may still read the old page through its
            // TLB: it must see the copy this thread writes to.
            pmap::shootdown::flush_others(pmap::cpus_running(s.pmap.dir));
        }
        return Fault::Resolved;
    }
    if s.demand_zero(va) {
        return match s.map_zeroed(va, true) {
            Ok(_) => Fault::Resolved,
            Err(_) => Fault::OutOfMemory,
        };
    }
    Fault::Invalid
}
