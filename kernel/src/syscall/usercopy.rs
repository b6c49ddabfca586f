//! The kernel's only ways into user memory: [`check`] says a range is user
//! space (and resolves what the user's own access would: a copy-on-write
//! page about to be written, a demand-zero page), and [`copy_in`] and
//! [`copy_out`] move the bytes. Any failure is `-EFAULT`, never a kernel
//! fault.
//!
//! Covered: a pointer into the kernel, an unmapped one, a range that wraps
//! past 4 GiB, a length that overflows, a buffer partly unmapped.
//!
//! A check alone proves nothing by the time of the copy: another thread of
//! the process, on another CPU truly in parallel (KVM, multi-threaded TCG,
//! a PC), may shrink the heap (`sbrk`) or fork with `fork=cow` (which makes
//! every page read-only) between the two. So the copy itself is the one
//! instruction the exception table lists for it, as Linux's
//! `copy_from_user` and FreeBSD's `copyin` are: a fault on it is mended
//! like the user's own (copy-on-write, demand-zero) or ends the copy with
//! `EFAULT`, whatever the other CPU did. No system call reads or writes
//! user memory through a pointer of its own; the exceptions are the entry
//! stubs' reads of the user stack (listed too) and the user mutex's word
//! (`threads::umtx_word`), used under the scheduler lock, which every
//! change to an address space holds.

use abi::layout::{PAGE_SIZE, USER_BASE, USER_TOP};
use abi::syscall::errno::EFAULT;

use crate::arch::paging::{self, Flags, PRESENT, USER, WRITABLE};

#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
}

/// Checks `[ptr, ptr+len)`; `Err(EFAULT)` unless every page qualifies.
pub fn check(ptr: u32, len: u32, access: Access) -> Result<(), i32> {
    if cfg!(feature = "exercise-trust-user-pointers") {
        // The exercise: believe the user. See docs/exercises.md.
        return Ok(());
    }
    if len == 0 {
        return Ok(());
    }
    let end = ptr.checked_add(len).ok_or(EFAULT)?;
    if ptr < USER_BASE || end > USER_TOP {
        return Err(EFAULT);
    }
    let need = PRESENT
        | USER
        | if access == Access::Write {
            WRITABLE
        } else {
            Flags::empty()
        };
    let mut page = ptr & !(PAGE_SIZE - 1);
    while page < end {
        match paging::flags(page) {
            Some(f) if f.contains(need) => {}
            // A copy-on-write page about to be written, or a heap page not
            // touched yet: resolved as the user's own access would be.
            _ if crate::proc::fault(page, access == Access::Write)
                == crate::vm::Fault::Resolved => {}
            _ => return Err(EFAULT),
        }
        page += PAGE_SIZE;
    }
    Ok(())
}

/// The copy between user and kernel memory: `rep movsb` from `src` to
/// `dst`, `len` bytes, listed in the exception table. It relies on the
/// ABI's DF = 0: with DF set, `rep movsb` runs backwards from the first
/// byte, which is why every entry path resets EFLAGS before Rust code runs.
/// However long the copy, it is one instruction retired; Bochs's TSC counts
/// its iterations and QEMU's icount one more (docs/machines.md). A page fault on it
/// goes first to the process's memory (`trap::page_fault`: a copy-on-write
/// page is copied, a demand-zero page mapped, and the copy goes on where it
/// stopped); one that nothing mends resumes at the fixup, the instruction
/// after the copy, with ECX the bytes not copied. Returns `Err(EFAULT)`
/// then: whatever another CPU did to the address space since the check.
///
/// # Safety
/// The kernel side of the copy is valid for `len` bytes, and the user side
/// lies in `[USER_BASE, USER_TOP)` ([`check`] has said so).
unsafe fn user_copy(dst: u32, src: u32, len: u32) -> Result<(), i32> {
    let left: u32;
    // SAFETY: the caller's contract; a fault on the user side is the
    // exception table's (the entry below), never a kernel stop.
    unsafe {
        core::arch::asm!(
            "xchgl {src}, %esi",
            "1: rep movsb",
            "2: movl {src}, %esi",
            ".pushsection .extable, \"a\"",
            ".long 1b, 2b",
            ".popsection",
            src = inout(reg) src => _,
            inout("ecx") len => left,
            inout("edi") dst => _,
            options(att_syntax, nostack, preserves_flags)
        );
    }
    if left == 0 {
        Ok(())
    } else {
        Err(EFAULT)
    }
}

/// Copies the user bytes at `ptr` into `dst`, or `EFAULT`.
pub fn copy_in(ptr: u32, dst: &mut [u8]) -> Result<(), i32> {
    check(ptr, dst.len() as u32, Access::Read)?;
    if dst.is_empty() {
        return Ok(());
    }
    // SAFETY: `dst` is kernel memory of its length; the user range checked.
    unsafe { user_copy(dst.as_mut_ptr() as u32, ptr, dst.len() as u32) }
}

/// Copies `src` to the user bytes at `ptr`, or `EFAULT`.
pub fn copy_out(ptr: u32, src: &[u8]) -> Result<(), i32> {
    check(ptr, src.len() as u32, Access::Write)?;
    if src.is_empty() {
        return Ok(());
    }
    // SAFETY: as in copy_in, the other way.
    unsafe { user_copy(ptr, src.as_ptr() as u32, src.len() as u32) }
}

/// The copies, for the process layer below (`proc::UserMem`).
pub const USER_MEM: crate::proc::UserMem = crate::proc::UserMem {
    read: copy_in,
    write: copy_out,
    check: |ptr, len, write| check(ptr, len, if write { Access::Write } else { Access::Read }),
};
