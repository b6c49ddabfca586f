//! Two-level 32-bit paging with 4 KiB pages (Intel SDM Vol. 3A §4.3).
//!
//! The low `KERNEL_MAP_END` bytes are identity-mapped, supervisor-only: ring 3
//! can touch none of the kernel. Page 0 stays unmapped (a null pointer
//! faults) and so does the guard page under each kernel stack. This is the
//! kernel's own directory, the template of every address space's kernel
//! half; user mappings live in each process's directory (`vm::pmap`).

use core::arch::asm;

use abi::layout::{KERNEL_MAP_END, PAGE_SIZE, RECURSIVE_BASE, RECURSIVE_DIR, USER_BASE, USER_TOP};

use super::frames;
use crate::boot::entry::Stacks;
use crate::sync::cell::BootCell;

bitflags::bitflags! {
    /// The flag bits of a page-directory or page-table entry that maps a
    /// 4 KiB page or a page table (SDM Vol. 3A Tables 4-5, 4-6): bits 0-11;
    /// bits 12-31 are the frame.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Flags: u32 {
        const PRESENT = 1 << 0;
        const WRITABLE = 1 << 1;
        /// Ring 3 may use it (at both levels, SDM Vol. 3A §4.6).
        const USER = 1 << 2;
        /// Page-level write-through (PWT) and cache disable (PCD).
        const WRITE_THROUGH = 1 << 3;
        const CACHE_DISABLE = 1 << 4;
        /// Bit 9 is ignored by the CPU, the software's own (bits 9-11,
        /// "Ignored" in Table 4-6); `vm::pmap` gives it its meaning.
        const SOFTWARE_9 = 1 << 9;
    }
}

pub const PRESENT: Flags = Flags::PRESENT;
pub const WRITABLE: Flags = Flags::WRITABLE;
pub const USER: Flags = Flags::USER;
const FRAME_MASK: u32 = !(PAGE_SIZE - 1);

/// One entry of a page directory or a page table: a frame and its
/// [`Flags`] in one word, as the CPU reads it. x86's `bits32::paging`
/// entry types are not used: their flags drop the software bits (the
/// pmap's copy-on-write mark), their constructor asserts (a branch and a
/// panic path on every mapping), and they are not inlined across crates.
#[repr(transparent)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pte(u32);

impl Pte {
    /// Not present: nothing mapped.
    pub const NONE: Pte = Pte(0);

    /// `frame` (page-aligned) with `flags`.
    #[inline(always)]
    pub const fn new(frame: u32, flags: Flags) -> Pte {
        Pte(frame | flags.bits())
    }

    #[inline(always)]
    pub const fn frame(self) -> u32 {
        self.0 & FRAME_MASK
    }

    /// The flag bits (software bits included).
    #[inline(always)]
    pub const fn flags(self) -> Flags {
        Flags::from_bits_retain(self.0 & !FRAME_MASK)
    }

    #[inline(always)]
    pub const fn is_present(self) -> bool {
        self.0 & Flags::PRESENT.bits() != 0
    }

    /// Whether any of `f` is set.
    #[inline(always)]
    pub const fn any(self, f: Flags) -> bool {
        self.0 & f.bits() != 0
    }

    /// With `f` set too.
    #[inline(always)]
    pub const fn or(self, f: Flags) -> Pte {
        Pte(self.0 | f.bits())
    }

    /// The same frame with `flags` instead.
    #[inline(always)]
    pub const fn with_flags(self, flags: Flags) -> Pte {
        Pte::new(self.frame(), flags)
    }
}
/// CR0.PG: paging on; CR0.WP: ring 0 honours read-only pages too.
const CR0_PG: u32 = 1 << 31;
const CR0_WP: u32 = 1 << 16;

const KERNEL_TABLES: usize = (KERNEL_MAP_END / (4 << 20)) as usize;

#[repr(C, align(4096))]
struct Table([Pte; 1024]);

static DIRECTORY: BootCell<Table> = BootCell::new(Table([Pte::NONE; 1024]));
static KERNEL_TABLES_: BootCell<[Table; KERNEL_TABLES]> =
    BootCell::new([const { Table([Pte::NONE; 1024]) }; KERNEL_TABLES]);

fn directory() -> &'static mut [Pte; 1024] {
    // SAFETY: one context at a time (single CPU, interrupts off in ring 0).
    unsafe { &mut DIRECTORY.get_mut().0 }
}

/// CR3 value: the physical address of the page directory.
pub fn directory_address() -> u32 {
    DIRECTORY.as_ptr() as u32
}

/// Builds the kernel map and turns paging on. The guard pages of the boot
/// stacks and `thread_guards` (one under each thread's kernel stack) stay
/// unmapped.
pub fn init(stacks: &Stacks, thread_guards: impl Iterator<Item = u32>) {
    // SAFETY: boot, single CPU.
    let tables = unsafe { KERNEL_TABLES_.get_mut() };
    let dir = directory();
    for (t, table) in tables.iter_mut().enumerate() {
        for (i, pte) in table.0.iter_mut().enumerate() {
            let addr = ((t * 1024 + i) as u32) * PAGE_SIZE;
            *pte = Pte::new(addr, PRESENT | WRITABLE);
        }
        dir[t] = Pte::new(table as *const Table as u32, PRESENT | WRITABLE);
    }
    // The recursive slot: the current directory's page tables at
    // RECURSIVE_BASE, itself at RECURSIVE_DIR (see vm::pmap).
    dir[1023] = Pte::new(directory_address(), PRESENT | WRITABLE);
    for unmapped in stacks.guards().chain(thread_guards) {
        let (t, i) = (
            (unmapped >> 22) as usize,
            ((unmapped >> 12) & 1023) as usize,
        );
        tables[t].0[i] = Pte::NONE;
    }
    // SAFETY: the directory identity-maps the running code, its stack and
    // data, so execution continues at the same addresses once PG is set.
    unsafe {
        asm!(
            "movl {dir}, %cr3",
            "movl %cr0, {t}",
            "orl ${pg}, {t}",
            "movl {t}, %cr0",
            "jmp 2f",
            "2:",
            dir = in(reg) directory_address(),
            t = out(reg) _,
            pg = const CR0_PG | CR0_WP,
            options(att_syntax, nostack)
        );
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory;

/// The PTE flags for `vaddr` in the current address space, if it is mapped
/// (kernel or user), read through the recursive slot every directory has.
pub fn flags(vaddr: u32) -> Option<Flags> {
    // SAFETY: RECURSIVE_DIR is the current directory (its last entry points
    // at itself: `init` sets it in the kernel's, the pmap in every other).
    let pde = unsafe {
        (RECURSIVE_DIR as *const Pte)
            .add((vaddr >> 22) as usize)
            .read()
    };
    if !pde.is_present() {
        return None;
    }
    // SAFETY: the directory entry is present, so the PTE is mapped at
    // RECURSIVE_BASE + page number * 4.
    let pte = unsafe {
        (RECURSIVE_BASE as *const Pte)
            .add((vaddr >> 12) as usize)
            .read()
    };
    // Writable and user-accessible only when both levels say so (SDM Vol. 3A §4.6).
    pte.is_present()
        .then_some(pte.flags() & pde.flags() & (PRESENT | WRITABLE | USER))
}

/// Reloading CR3 drops every TLB entry (no global pages here).
pub fn flush_all() {
    // SAFETY: CR3 keeps the same directory.
    unsafe {
        asm!("movl %cr3, {t}", "movl {t}, %cr3", t = out(reg) _, options(att_syntax, nostack))
    };
}

/// Page-level cache disable and write-through, for device memory.
pub const UNCACHED: Flags = Flags::CACHE_DISABLE.union(Flags::WRITE_THROUGH);

/// Identity-maps `[phys, phys + len)` for the kernel (supervisor,
/// writable), e.g. ACPI tables above the kernel map or the local APIC.
/// Pages already mapped are left as they are.
pub fn map_identity(phys: u32, len: u32, flags: Flags) -> Result<(), OutOfMemory> {
    let dir = directory();
    let mut page = phys & FRAME_MASK;
    let end = phys.saturating_add(len.max(1));
    while page < end {
        let pde = &mut dir[(page >> 22) as usize];
        if !pde.is_present() {
            *pde = Pte::new(frames::alloc().ok_or(OutOfMemory)?, PRESENT | WRITABLE);
        }
        // SAFETY: the table's frame is identity-mapped and the kernel's.
        let table = unsafe { &mut *(pde.frame() as *mut [Pte; 1024]) };
        let pte = &mut table[((page >> 12) & 1023) as usize];
        if !pte.is_present() {
            *pte = Pte::new(page, PRESENT | WRITABLE | flags);
        }
        match page.checked_add(PAGE_SIZE) {
            Some(p) => page = p,
            None => break,
        }
    }
    Ok(())
}

/// Unmaps kernel page `va` again (page 0, which the firmware-table search
/// maps to read the BIOS data area, goes back to being the null guard).
/// At boot, before other CPUs run: only this CPU's TLB entry is dropped.
pub fn unmap_kernel_page(va: u32) {
    let pde = directory()[(va >> 22) as usize];
    if !pde.is_present() {
        return;
    }
    // SAFETY: the table's frame is identity-mapped and the kernel's.
    let table = unsafe { &mut *(pde.frame() as *mut [Pte; 1024]) };
    table[((va >> 12) & 1023) as usize] = Pte::NONE;
    invlpg(va);
}

/// `invlpg`: drops the TLB entry for `va` (SDM Vol. 2A, INVLPG). The
/// model clock is told the page first (it cannot read the operand).
pub fn invlpg(va: u32) {
    super::marker::announce_invlpg(va);
    // SAFETY: only affects the TLB.
    unsafe { asm!("invlpg ({})", in(reg) va, options(att_syntax, nostack)) };
}

/// The kernel's page directory entries (everything outside user space but
/// each space's own slots, the alternate and the recursive one), for a new
/// address space to share.
pub fn kernel_pdes() -> impl Iterator<Item = (usize, Pte)> {
    let dir = directory();
    let user = (USER_BASE >> 22) as usize..(USER_TOP >> 22) as usize;
    let own = (abi::layout::APTE_BASE >> 22) as usize..1024;
    (0..1024)
        .filter(move |i| !user.contains(i) && !own.contains(i))
        .map(move |i| (i, dir[i]))
}

/// Loads CR3 (a full TLB flush of non-global pages).
///
/// # Safety
/// `dir` must map the running code, stack and data as the current one does.
pub unsafe fn load_cr3(dir: u32) {
    // SAFETY: the caller's contract.
    unsafe { asm!("movl {}, %cr3", in(reg) dir, options(att_syntax, nostack)) };
}

/// The kernel page table that maps `va` (in the kernel half), made present
/// in the kernel's directory if it is not; returns its frame. At boot,
/// before any address space copies the kernel's entries.
pub fn kernel_table(va: u32) -> Result<u32, OutOfMemory> {
    let pde = &mut directory()[(va >> 22) as usize];
    if !pde.is_present() {
        *pde = Pte::new(frames::alloc().ok_or(OutOfMemory)?, PRESENT | WRITABLE);
    }
    Ok(pde.frame())
}

/// Maps kernel page `va` to frame `phys` (supervisor, writable). At boot,
/// as [`kernel_table`].
pub fn map_kernel(va: u32, phys: u32) -> Result<(), OutOfMemory> {
    let table = kernel_table(va)?;
    // SAFETY: the table is a kernel frame inside the identity map.
    unsafe {
        (table as *mut Pte)
            .add(((va >> 12) & 1023) as usize)
            .write(Pte::new(phys, PRESENT | WRITABLE))
    };
    Ok(())
}
