//! Address spaces: the machine-independent half of virtual memory (what a
//! process's memory *is*), over the pmap (how the i386 maps it) and the
//! physical pages.
//!
//! A [`Space`] is a pmap and a heap break. What it offers is the whole
//! story of a process's memory, xv6's `vm.c` in a page:
//!
//! - [`Space::new`], [`Space::map_zeroed`] and [`Space::load`] build a
//!   program's memory; [`Space::destroy`] gives all of it back;
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

use abi::layout::{PAGE_SIZE, USER_BASE, USER_HEAP_BASE, USER_HEAP_MAX, USER_TOP};

use crate::arch::paging::OutOfMemory;
use pmap::{Pmap, COW, FRAME, PRESENT, USER, WRITABLE};

/// An address space.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Space {
    pub pmap: Pmap,
    /// The heap's end: `[USER_HEAP_BASE, brk)` is demand-zero.
    pub brk: u32,
}

impl Space {
    pub fn new() -> Result<Space, OutOfMemory> {
        Ok(Space {
            pmap: Pmap::create().ok_or(OutOfMemory)?,
            brk: USER_HEAP_BASE,
        })
    }

    /// Maps a zeroed page at `va`, unless one is mapped (then only widens
    /// it to writable if asked). Returns the page.
    pub fn map_zeroed(&self, va: u32, writable: bool) -> Result<u32, OutOfMemory> {
        let old = self.pmap.extract(va);
        let w = if writable { WRITABLE } else { 0 };
        if old & PRESENT != 0 {
            if writable && old & WRITABLE == 0 {
                self.pmap.enter(va, old & FRAME, (old & !FRAME) | w)?;
            }
            return Ok(old & FRAME);
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
            let page = self.pmap.extract(addr & !(PAGE_SIZE - 1)) & FRAME;
            pmap::write_page(page, offset, &bytes[at..at + n]);
            at += n;
        }
    }

    /// Gives back every page, page table and the directory. Not current on
    /// any CPU.
    pub fn destroy(self) {
        self.pmap.destroy();
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
        let child = Space::new()?;
        let mut r = Ok(());
        let mut protected = false;
        self.pmap.for_each_current(|va, pte| {
            if r.is_err() {
                return;
            }
            let page = *pte & FRAME;
            let flags = *pte & !FRAME & (WRITABLE | COW);
            let entered = if cow {
                if flags & WRITABLE != 0 {
                    *pte = (*pte & !WRITABLE) | COW;
                    crate::arch::paging::invlpg(va);
                    protected = true;
                }
                page::share(page);
                let shared = if flags & (WRITABLE | COW) != 0 { COW } else { 0 };
                child.pmap.enter(va, page, shared).inspect_err(|_| page::release(page))
            } else {
                match page::alloc() {
                    None => Err(OutOfMemory),
                    Some(copy) => {
                        pmap::copy_from_user_page(copy, va);
                        // A page the parent holds copy-on-write is its own
                        // to write: the child's copy is plainly writable.
                        let w = if flags & (WRITABLE | COW) != 0 { WRITABLE } else { 0 };
                        child.pmap.enter(va, copy, w).inspect_err(|_| page::release(copy))
                    }
                }
            };
            r = entered;
        });
        if protected {
            pmap::shootdown::flush_others(pmap::cpus_running(self.pmap.dir));
        }
        match r {
            Ok(()) => Ok(Space { brk: self.brk, ..child }),
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
        let mut va = new.next_multiple_of(PAGE_SIZE);
        let mut removed = false;
        while va < old {
            let pte = self.pmap.remove(va);
            if pte & PRESENT != 0 {
                page::release(pte & FRAME);
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
/// write if `write`: copy-on-write, or demand-zero below the break. Also
/// what the user-pointer check calls before the kernel writes to a user
/// buffer (CR0.WP makes ring 0 honour read-only pages too).
pub fn fault(s: &Space, va: u32, write: bool) -> Fault {
    if !(USER_BASE..USER_TOP).contains(&va) {
        return Fault::Invalid;
    }
    let va = va & !(PAGE_SIZE - 1);
    let pte = pmap::current_flags(va);
    if pte & PRESENT != 0 {
        if !write || pte & COW == 0 {
            return Fault::Invalid;
        }
        let old = pte & FRAME;
        let keep = (pte & !FRAME & !COW) | WRITABLE | PRESENT | USER;
        if page::refs(old) == 1 {
            // The last sharer: the page is ours again.
            pmap::set_current_pte(va, old | keep);
        } else {
            let Some(copy) = page::alloc() else {
                return Fault::OutOfMemory;
            };
            pmap::copy_from_user_page(copy, va);
            pmap::set_current_pte(va, copy | keep);
            page::release(old);
            // Another thread's CPU may still read the old page through its
            // TLB: it must see the copy this thread writes to.
            pmap::shootdown::flush_others(pmap::cpus_running(s.pmap.dir));
        }
        return Fault::Resolved;
    }
    if (USER_HEAP_BASE..s.brk).contains(&va) {
        return match s.map_zeroed(va, true) {
            Ok(_) => Fault::Resolved,
            Err(_) => Fault::OutOfMemory,
        };
    }
    Fault::Invalid
}
