//! The pmap: the machine-dependent half of an address space, its i386 page
//! directory and page tables (Intel SDM Vol. 3A §4.3).
//!
//! Every address space owns a page directory. Its kernel half (everything
//! outside `[USER_BASE, USER_TOP)`) is a copy of the kernel directory's
//! entries, made at creation, so the kernel's page tables are shared by all;
//! its last entry points at the directory itself (the recursive slot): the
//! *current* space's page tables appear at `RECURSIVE_BASE`, one page each,
//! and its directory at `RECURSIVE_DIR`. Directories live in the kernel's
//! identity map (as an i386 kernel keeps `pm_pdir` in kernel memory);
//! page tables and user pages are [`super::page`]s above it.
//!
//! How the kernel reaches a page table or a page of a space that is *not*
//! the current one is the boot's choice (`pmap=`), one file each:
//!
//! | strategy | page tables of another space | a page's contents |
//! |---|---|---|
//! | [`apte`] | the alternate recursive slot in the current directory: a full TLB flush when it changes (and a shootdown to the other CPUs running the current space) | the CPU's data window |
//! | [`cr3`] | load the other directory into CR3 and back (two full flushes) | the CPU's data window |
//! | [`window`] | the CPU's one-PTE table window: one `invlpg` when its frame changes | the CPU's data window |
//! | [`direct`] | the direct map of all physical memory: nothing | the direct map |
//!
//! The data window (one PTE per CPU, one `invlpg` per new frame) is
//! FreeBSD i386's CMAP2, the table window its PMAP1/PADDR1.
//!
//! Every CR3 write is a `mov %cr3` the model decodes; every `invlpg` is
//! announced (`arch::paging::invlpg`); every shootdown is an IPI whose
//! delivery the handler marks.
//!
//! Locking: (s) address spaces are guarded by the lock the process layer
//! holds around every call here (the scheduler lock); interrupts are off.

pub mod apte;
pub mod cr3;
pub mod direct;
pub mod shootdown;
pub mod window;

use abi::cmdline::Pmap as Strategy;
use abi::layout::{PAGE_SIZE, RECURSIVE_BASE, RECURSIVE_DIR, USER_BASE, USER_TOP};
use core::sync::atomic::{AtomicU32, Ordering};

use abi::layout::MAX_CPUS;

use crate::arch::{frames, paging};
use crate::sync::cell::{BootCell, SetOnce};
use core::ops::Range;

pub use paging::{Flags, Pte, PRESENT, USER, WRITABLE};
/// A PTE bit the CPU ignores (SDM Vol. 3A Table 4-6, bits 9-11 "Ignored"):
/// this page is shared copy-on-write.
pub const COW: Flags = Flags::SOFTWARE_9;
const RECURSIVE_SLOT: usize = 1023;

static STRATEGY: SetOnce<Strategy> = SetOnce::new();

/// The frames `init` took for the strategy's own kernel page tables (the
/// windows' table, the direct map's tables): held from boot to the end, so
/// the leak test names them beside its count of frames in use.
static OWN_FRAMES: SetOnce<u32> = SetOnce::new();

/// The directory each CPU's CR3 holds (c: written by that CPU under (s)).
static LOADED: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

pub fn strategy() -> Strategy {
    STRATEGY.get().copied().unwrap_or(Strategy::Window)
}

/// The frames the strategy keeps for its own page tables from boot on.
pub fn own_frames() -> u32 {
    OWN_FRAMES.get().copied().unwrap_or(0)
}

/// Boot, after paging is on and before the first address space: the
/// strategy, the kernel page tables the windows (and the direct map) live
/// in, and the shootdown's vector.
pub fn init(s: Strategy, phys_end: u64) -> Result<(), paging::OutOfMemory> {
    STRATEGY.set(s);
    let before = frames::usage().0;
    window::init()?;
    if s == Strategy::Direct {
        direct::init(phys_end)?;
    }
    OWN_FRAMES.set(frames::usage().0 - before);
    shootdown::init();
    for l in LOADED.iter() {
        l.store(paging::directory_address(), Ordering::Relaxed);
    }
    Ok(())
}

/// An address space's page directory (its physical address, the CR3 value).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pmap {
    pub dir: u32,
}

fn dir_entries(dir: u32) -> &'static mut [Pte; 1024] {
    // SAFETY: directories are kernel frames inside the identity map, owned
    // by their space; (s) keeps two contexts from editing one at once.
    unsafe { &mut *(dir as *mut [Pte; 1024]) }
}

fn pdi(va: u32) -> usize {
    (va >> 22) as usize
}

fn pti(va: u32) -> usize {
    ((va >> 12) & 1023) as usize
}

const USER_PDES: Range<usize> = (USER_BASE >> 22) as usize..(USER_TOP >> 22) as usize;

/// Calls `f(table, entries)` for each page table `range` covers, with the
/// range's entries in it.
fn for_tables(range: &Range<u32>, mut f: impl FnMut(usize, Range<usize>)) {
    if range.start >= range.end {
        return;
    }
    let last = range.end - 1;
    for i in pdi(range.start)..=pdi(last) {
        let lo = if i == pdi(range.start) {
            pti(range.start)
        } else {
            0
        };
        let hi = if i == pdi(last) { pti(last) + 1 } else { 1024 };
        f(i, lo..hi);
    }
}

/// Each CPU's list of (entry, PTE) for one child table (`copy_range`).
static SCRATCH: BootCell<[[(u32, Pte); 1024]; MAX_CPUS]> =
    BootCell::new([[(0, Pte::NONE); 1024]; MAX_CPUS]);

/// This CPU's index.
fn cpu() -> usize {
    crate::arch::gdt::cpu()
}

impl Pmap {
    /// A new space: the kernel half shared, no user mapping, the recursive
    /// slot pointing at itself.
    pub fn create() -> Option<Pmap> {
        let dir = frames::alloc()?;
        let d = dir_entries(dir);
        for (i, e) in paging::kernel_pdes() {
            d[i] = e;
        }
        d[RECURSIVE_SLOT] = Pte::new(dir, PRESENT | WRITABLE);
        Some(Pmap { dir })
    }

    /// Whether this is the space the running CPU's CR3 holds.
    pub fn is_current(self) -> bool {
        LOADED[cpu()].load(Ordering::Relaxed) == self.dir
    }

    /// Makes this space the running CPU's current one (CR3), unless it is.
    pub fn activate(self) {
        activate_dir(self.dir);
    }

    /// Frees every user page in `ranges` (one reference each), every page
    /// table those ranges cover, and the directory: the space must map
    /// nothing outside them. One access to the space per page table. No
    /// thread of the space may run any more; a CPU that keeps it loaded is
    /// made to leave it first.
    pub fn destroy(self, ranges: &[Range<u32>]) {
        // CPUs that ran its last threads may keep it loaded (lazily).
        if loaded() == self.dir {
            activate_kernel();
        }
        shootdown::leave_others(cpus_running(self.dir));
        debug_assert!(!loaded_anywhere(self.dir), "destroying a space in use");
        let d = dir_entries(self.dir);
        for r in ranges {
            for_tables(r, |i, js| {
                if !d[i].is_present() {
                    return;
                }
                let mut o = Other::open(self);
                let ptes = o.table(i, d[i].frame());
                for pte in ptes[js].iter() {
                    if pte.is_present() {
                        super::page::release(pte.frame());
                    }
                }
                o.close();
            });
        }
        // The tables last: two ranges may share one.
        for r in ranges {
            for_tables(r, |i, _| {
                if d[i].is_present() {
                    super::page::release(d[i].frame());
                    d[i] = Pte::NONE;
                }
            });
        }
        debug_assert!(
            USER_PDES.clone().all(|i| d[i] == Pte::NONE),
            "a page table outside the ranges"
        );
        apte::forget(self.dir);
        frames::free(self.dir);
    }

    /// A child's copy of the current space's mappings in `range`: for each
    /// present PTE, `f(va, &mut pte)` may change the parent's PTE and returns
    /// the child's ([`Pte::NONE`] for none). The child's tables are made and filled one
    /// at a time, with one access to the child per table (the parent's
    /// entries are gathered first, while the parent is current: under
    /// `pmap=cr3` the child's directory is loaded only to write them).
    pub fn copy_range(
        self,
        child: Pmap,
        range: &Range<u32>,
        mut f: impl FnMut(u32, &mut Pte) -> Result<Pte, paging::OutOfMemory>,
    ) -> Result<(), paging::OutOfMemory> {
        debug_assert!(self.is_current() && !child.is_current());
        let d = dir_entries(self.dir);
        let cd = dir_entries(child.dir);
        let mut r = Ok(());
        for_tables(range, |i, js| {
            if r.is_err() || !d[i].is_present() {
                return;
            }
            // SAFETY: this CPU's own scratch; interrupts off and (s) held,
            // so nothing else on this CPU uses it until this table is done.
            let gathered = unsafe { &mut (*SCRATCH.as_ptr())[cpu()] };
            let mut n = 0;
            // SAFETY: the parent's table `i` through the recursive slot (its
            // directory entry is present).
            let ptes = unsafe { &mut *((RECURSIVE_BASE as *mut [Pte; 1024]).add(i)) };
            for j in js {
                let pte = &mut ptes[j];
                if !pte.is_present() {
                    continue;
                }
                let va = ((i as u32) << 22) | ((j as u32) << 12);
                match f(va, pte) {
                    Ok(Pte::NONE) => {}
                    Ok(v) => {
                        gathered[n] = (j as u32, v);
                        n += 1;
                    }
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            }
            if n == 0 {
                return;
            }
            if !cd[i].is_present() {
                let Some(table) = super::page::alloc() else {
                    // The gathered pages are the child's: give them back.
                    for &(_, v) in &gathered[..n] {
                        super::page::release(v.frame());
                    }
                    r = Err(paging::OutOfMemory);
                    return;
                };
                zero_page(table);
                cd[i] = Pte::new(table, PRESENT | WRITABLE | USER);
            }
            let mut o = Other::open(child);
            let t = o.table(i, cd[i].frame());
            for &(j, v) in &gathered[..n] {
                t[j as usize] = v;
            }
            o.close();
        });
        r
    }

    /// The PTE of user page `va` ([`Pte::NONE`] when unmapped).
    pub fn extract(self, va: u32) -> Pte {
        if self.is_current() {
            return current_pte(va).map(|p| *p).unwrap_or(Pte::NONE);
        }
        let d = dir_entries(self.dir);
        if !d[pdi(va)].is_present() {
            return Pte::NONE;
        }
        let mut o = Other::open(self);
        let v = o.table(pdi(va), d[pdi(va)].frame())[pti(va)];
        o.close();
        v
    }

    /// Maps user page `va` to `page` with `flags` (PRESENT and USER added),
    /// creating its page table if needed. An old mapping is replaced (its
    /// page is the caller's to release), and dropped from this CPU's TLB;
    /// the caller shoots it down elsewhere when the space runs there.
    pub fn enter(self, va: u32, page: u32, flags: Flags) -> Result<(), paging::OutOfMemory> {
        debug_assert!((USER_BASE..USER_TOP).contains(&va));
        let pte = Pte::new(page, flags | PRESENT | USER);
        let d = dir_entries(self.dir);
        let i = pdi(va);
        if !d[i].is_present() {
            let table = super::page::alloc().ok_or(paging::OutOfMemory)?;
            zero_page(table);
            d[i] = Pte::new(table, PRESENT | WRITABLE | USER);
        }
        if self.is_current() {
            let p = current_pte(va).expect("the table was just made present");
            let old = *p;
            *p = pte;
            if old.is_present() {
                paging::invlpg(va);
            }
            return Ok(());
        }
        let mut o = Other::open(self);
        o.table(i, d[i].frame())[pti(va)] = pte;
        o.close();
        Ok(())
    }

    /// Unmaps user page `va`; returns its old PTE (its page is the caller's
    /// to release). Same TLB rule as [`Pmap::enter`].
    pub fn remove(self, va: u32) -> Pte {
        let d = dir_entries(self.dir);
        if !d[pdi(va)].is_present() {
            return Pte::NONE;
        }
        if self.is_current() {
            let p = current_pte(va).expect("present table");
            let old = core::mem::replace(p, Pte::NONE);
            if old.is_present() {
                paging::invlpg(va);
            }
            return old;
        }
        let mut o = Other::open(self);
        let p = &mut o.table(pdi(va), d[pdi(va)].frame())[pti(va)];
        let old = core::mem::replace(p, Pte::NONE);
        o.close();
        old
    }
}

/// The current space's PTE for `va`, through the recursive slot; `None`
/// when its page table is absent.
fn current_pte(va: u32) -> Option<&'static mut Pte> {
    // SAFETY: RECURSIVE_DIR is the current directory (its last entry
    // points at itself), mapped supervisor-writable in every space.
    let pde = unsafe { ((RECURSIVE_DIR as *const Pte).add(pdi(va))).read() };
    if !pde.is_present() {
        return None;
    }
    // SAFETY: with the directory entry present, RECURSIVE_BASE + the page
    // number * 4 is that PTE, in the current space's own page table.
    Some(unsafe { &mut *((RECURSIVE_BASE as *mut Pte).add((va >> 12) as usize)) })
}

/// The current space's PTE for user page `va` ([`Pte::NONE`] when
/// unmapped): what a user-pointer check and the fault handler read.
pub fn current_flags(va: u32) -> Pte {
    current_pte(va).map(|p| *p).unwrap_or(Pte::NONE)
}

/// Sets the current space's PTE for `va` (its table present) and drops the
/// old translation from this CPU's TLB.
pub fn set_current_pte(va: u32, pte: Pte) {
    let p = current_pte(va).expect("the page's table is present");
    *p = pte;
    paging::invlpg(va);
}

/// Loads `dir` into this CPU's CR3 unless it holds it already.
pub fn activate_dir(dir: u32) {
    let me = cpu();
    let l = &LOADED[me];
    if l.load(Ordering::Relaxed) != dir {
        l.store(dir, Ordering::Relaxed);
        // SAFETY: every directory maps the kernel half as the kernel's does.
        unsafe { paging::load_cr3(dir) };
        // The way back from a #DB or #DF task reloads CR3 from the TSS.
        crate::arch::gdt::set_cr3_on(me, dir);
    }
}

/// Back to the kernel's own directory (a CPU about to run no user thread,
/// so no CPU keeps a dead space loaded).
pub fn activate_kernel() {
    activate_dir(paging::directory_address());
}

/// The directory this CPU's CR3 holds.
pub fn loaded() -> u32 {
    LOADED[cpu()].load(Ordering::Relaxed)
}

fn loaded_anywhere(dir: u32) -> bool {
    LOADED.iter().any(|l| l.load(Ordering::Relaxed) == dir)
}

/// The other started CPUs whose CR3 holds `dir` (bit per CPU).
pub fn cpus_running(dir: u32) -> u32 {
    let me = cpu();
    (0..crate::arch::smp::cpus().started)
        .filter(|&c| c != me && LOADED[c].load(Ordering::Relaxed) == dir)
        .fold(0, |m, c| m | 1 << c)
}

/// Dwords in a page: pages are zeroed and copied a dword at a time (`rep
/// stosl`, `rep movsl`), as i386 kernels' `pagezero`/`bcopy` did: a quarter
/// of the iterations of the byte forms (each iteration is one instruction
/// to QEMU's icount, docs/machines.md).
const PAGE_DWORDS: u32 = PAGE_SIZE / 4;

/// Fills `page` with zeros, reached the strategy's way.
pub fn zero_page(page: u32) {
    let p = page_bytes(page);
    // SAFETY: `p` maps `page` writable for PAGE_SIZE bytes until the next
    // use of this CPU's data window, which is not before this returns; DF
    // is clear in the kernel (every entry resets EFLAGS); ES is the
    // kernel's data segment.
    unsafe {
        core::arch::asm!(
            "rep stosl",
            inout("ecx") PAGE_DWORDS => _,
            inout("edi") p => _,
            in("eax") 0u32,
            options(att_syntax, nostack, preserves_flags)
        )
    };
}

/// Copies the current space's user page at `va` into `page`.
pub fn copy_from_user_page(page: u32, va: u32) {
    let p = page_bytes(page);
    // SAFETY: `va` is a present page of the current space (the caller
    // found its PTE), `p` maps `page` for PAGE_SIZE bytes; they differ. DF
    // and ES as in `zero_page`. ESI cannot be an operand on i686 (LLVM
    // keeps it): the source is swapped in and the compiler's ESI back out.
    unsafe {
        core::arch::asm!(
            "xchgl {src}, %esi",
            "rep movsl",
            "movl {src}, %esi",
            src = inout(reg) va => _,
            inout("ecx") PAGE_DWORDS => _,
            inout("edi") p => _,
            options(att_syntax, nostack, preserves_flags)
        )
    };
}

/// Writes `bytes` at `offset` into `page` (the program loader).
pub fn write_page(page: u32, offset: u32, bytes: &[u8]) {
    assert!(offset as usize + bytes.len() <= PAGE_SIZE as usize);
    let p = page_bytes(page);
    // SAFETY: inside the page, which `p` maps.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), p.add(offset as usize), bytes.len()) };
}

/// A kernel address of `page`'s contents: the direct map, or this CPU's
/// data window (valid until its next use).
fn page_bytes(page: u32) -> *mut u8 {
    match strategy() {
        Strategy::Direct => direct::address(page),
        _ => window::data(page),
    }
}

/// Access to another space's page tables, opened for one operation.
struct Other {
    s: Strategy,
    /// `cr3`: the directory to load back.
    back: u32,
}

impl Other {
    fn open(p: Pmap) -> Other {
        let s = strategy();
        let back = loaded();
        match s {
            Strategy::Apte => apte::point_at(p.dir),
            Strategy::Cr3 => cr3::enter(p.dir),
            Strategy::Window | Strategy::Direct => {}
        }
        Other { s, back }
    }

    /// Page table `i` (whose frame is `table`) of the opened space.
    fn table(&mut self, i: usize, table: u32) -> &'static mut [Pte; 1024] {
        let p = match self.s {
            Strategy::Apte => apte::table(i),
            Strategy::Cr3 => cr3::table(i),
            Strategy::Window => window::table(table),
            Strategy::Direct => direct::address(table) as *mut u32,
        };
        // SAFETY: each strategy's address maps that page table, writable,
        // until the next `table` call or `close`.
        unsafe { &mut *(p as *mut [Pte; 1024]) }
    }

    fn close(self) {
        if self.s == Strategy::Cr3 {
            cr3::leave(self.back);
        }
    }
}
