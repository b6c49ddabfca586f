//! Two-level 32-bit paging with 4 KiB pages (Intel SDM Vol. 3A §4.3).
//!
//! The low `KERNEL_MAP_END` bytes are identity-mapped, supervisor-only: ring 3
//! can touch none of the kernel. Page 0 stays unmapped (a null pointer
//! faults) and so does the guard page under each kernel stack. User mappings
//! live in `[USER_BASE, USER_TOP)`, in page tables taken from the frame
//! allocator and given back when the task ends.

use core::arch::asm;

use abi::layout::{KERNEL_MAP_END, PAGE_SIZE, USER_BASE, USER_TOP};

use super::frames;
use crate::boot::entry::Stacks;
use crate::sync::cell::BootCell;

/// Page-table entry bits (SDM Vol. 3A Table 4-5, 4-6).
pub const PRESENT: u32 = 1 << 0;
pub const WRITABLE: u32 = 1 << 1;
pub const USER: u32 = 1 << 2;
const FRAME_MASK: u32 = !(PAGE_SIZE - 1);
/// CR0.PG: paging on; CR0.WP: ring 0 honours read-only pages too.
const CR0_PG: u32 = 1 << 31;
const CR0_WP: u32 = 1 << 16;

const KERNEL_TABLES: usize = (KERNEL_MAP_END / (4 << 20)) as usize;

#[repr(C, align(4096))]
struct Table([u32; 1024]);

static DIRECTORY: BootCell<Table> = BootCell::new(Table([0; 1024]));
static KERNEL_TABLES_: BootCell<[Table; KERNEL_TABLES]> =
    BootCell::new([const { Table([0; 1024]) }; KERNEL_TABLES]);

fn directory() -> &'static mut [u32; 1024] {
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
            *pte = addr | PRESENT | WRITABLE;
        }
        dir[t] = table as *const Table as u32 | PRESENT | WRITABLE;
    }
    for unmapped in stacks.guards().chain(thread_guards) {
        let (t, i) = (
            (unmapped >> 22) as usize,
            ((unmapped >> 12) & 1023) as usize,
        );
        tables[t].0[i] = 0;
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

fn user_table(vaddr: u32, create: bool) -> Option<&'static mut [u32; 1024]> {
    let dir = directory();
    let pde = &mut dir[(vaddr >> 22) as usize];
    if *pde & PRESENT == 0 {
        if !create {
            return None;
        }
        *pde = frames::alloc()? | PRESENT | WRITABLE | USER;
    }
    // SAFETY: the table's frame is identity-mapped and owned by this directory.
    Some(unsafe { &mut *((*pde & FRAME_MASK) as *mut [u32; 1024]) })
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OutOfMemory;

/// Maps a fresh zeroed frame at user page `vaddr`; returns the frame.
pub fn map_user(vaddr: u32, writable: bool) -> Result<u32, OutOfMemory> {
    debug_assert!((USER_BASE..USER_TOP).contains(&vaddr));
    let table = user_table(vaddr, true).ok_or(OutOfMemory)?;
    let pte = &mut table[((vaddr >> 12) & 1023) as usize];
    if *pte & PRESENT != 0 {
        if writable {
            *pte |= WRITABLE;
        }
        return Ok(*pte & FRAME_MASK);
    }
    let frame = frames::alloc().ok_or(OutOfMemory)?;
    *pte = frame | PRESENT | USER | if writable { WRITABLE } else { 0 };
    Ok(frame)
}

/// The PTE flags for `vaddr` if it is mapped (kernel or user).
pub fn flags(vaddr: u32) -> Option<u32> {
    let pde = directory()[(vaddr >> 22) as usize];
    if pde & PRESENT == 0 {
        return None;
    }
    // SAFETY: present tables are identity-mapped.
    let table = unsafe { &*((pde & FRAME_MASK) as *const [u32; 1024]) };
    let pte = table[((vaddr >> 12) & 1023) as usize];
    // Writable and user-accessible only when both levels say so (SDM Vol. 3A §4.6).
    (pte & PRESENT != 0).then_some(pte & pde & (PRESENT | WRITABLE | USER))
}

/// Unmaps every user page and frees its frame and its page tables.
pub fn clear_user() {
    let dir = directory();
    for pde in dir[(USER_BASE >> 22) as usize..(USER_TOP >> 22) as usize].iter_mut() {
        if *pde & PRESENT == 0 {
            continue;
        }
        let table = (*pde & FRAME_MASK) as *mut [u32; 1024];
        // SAFETY: the table's frame is identity-mapped and owned by us.
        for pte in unsafe { (*table).iter_mut() } {
            if *pte & PRESENT != 0 {
                frames::free(*pte & FRAME_MASK);
                *pte = 0;
            }
        }
        frames::free(table as u32);
        *pde = 0;
    }
    flush_all();
}

/// Reloading CR3 drops every TLB entry (no global pages here).
pub fn flush_all() {
    // SAFETY: CR3 keeps the same directory.
    unsafe {
        asm!("movl %cr3, {t}", "movl {t}, %cr3", t = out(reg) _, options(att_syntax, nostack))
    };
}

/// Page-level cache disable and write-through, for device memory.
pub const UNCACHED: u32 = (1 << 4) | (1 << 3);

/// Identity-maps `[phys, phys + len)` for the kernel (supervisor,
/// writable), e.g. ACPI tables above the kernel map or the local APIC.
/// Pages already mapped are left as they are.
pub fn map_identity(phys: u32, len: u32, flags: u32) -> Result<(), OutOfMemory> {
    let dir = directory();
    let mut page = phys & FRAME_MASK;
    let end = phys.saturating_add(len.max(1));
    while page < end {
        let pde = &mut dir[(page >> 22) as usize];
        if *pde & PRESENT == 0 {
            *pde = frames::alloc().ok_or(OutOfMemory)? | PRESENT | WRITABLE;
        }
        // SAFETY: the table's frame is identity-mapped and the kernel's.
        let table = unsafe { &mut *((*pde & FRAME_MASK) as *mut [u32; 1024]) };
        let pte = &mut table[((page >> 12) & 1023) as usize];
        if *pte & PRESENT == 0 {
            *pte = page | PRESENT | WRITABLE | flags;
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
    if pde & PRESENT == 0 {
        return;
    }
    // SAFETY: the table's frame is identity-mapped and the kernel's.
    let table = unsafe { &mut *((pde & FRAME_MASK) as *mut [u32; 1024]) };
    table[((va >> 12) & 1023) as usize] = 0;
    invlpg(va);
}

/// Points the kernel page `va` (outside the identity map) at frame `phys`
/// and drops its stale TLB entry: a temporary mapping window.
pub fn map_window(va: u32, phys: u32) -> Result<(), OutOfMemory> {
    let dir = directory();
    let pde = &mut dir[(va >> 22) as usize];
    if *pde & PRESENT == 0 {
        *pde = frames::alloc().ok_or(OutOfMemory)? | PRESENT | WRITABLE;
    }
    // SAFETY: the table's frame is identity-mapped and the kernel's.
    let table = unsafe { &mut *((*pde & FRAME_MASK) as *mut [u32; 1024]) };
    table[((va >> 12) & 1023) as usize] = (phys & FRAME_MASK) | PRESENT | WRITABLE;
    invlpg(va);
    Ok(())
}

/// `invlpg`: drops the TLB entry for `va` (SDM Vol. 2A, INVLPG). The
/// model clock is told the page first (it cannot read the operand).
pub fn invlpg(va: u32) {
    super::marker::announce_invlpg(va);
    // SAFETY: only affects the TLB.
    unsafe { asm!("invlpg ({})", in(reg) va, options(att_syntax, nostack)) };
}

/// The kernel's page directory entries (everything outside user space),
/// for a new address space to share.
pub fn kernel_pdes() -> impl Iterator<Item = (usize, u32)> {
    let dir = directory();
    let user = (USER_BASE >> 22) as usize..(USER_TOP >> 22) as usize;
    (0..1024)
        .filter(move |i| !user.contains(i))
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
