//! Checks on user pointers: a system call touches user memory only after
//! these say the whole range is user space, mapped, and (for writes)
//! writable. Any failure is `-EFAULT`, never a kernel fault.
//!
//! Covered: a pointer into the kernel, an unmapped one, a range that wraps
//! past 4 GiB, a length that overflows, a buffer partly unmapped. A page
//! that is copy-on-write (for a write) or demand-zero is resolved first, as
//! the user's own access would. No preemption in ring 0, and only the
//! calling process's `sbrk` unmaps its pages: nothing unmaps a page between
//! check and use but another thread of the same process shrinking its heap.

use abi::layout::{PAGE_SIZE, USER_BASE, USER_TOP};
use abi::syscall::errno::EFAULT;

use crate::arch::paging::{self, PRESENT, USER, WRITABLE};

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
    let need = PRESENT | USER | if access == Access::Write { WRITABLE } else { 0 };
    let mut page = ptr & !(PAGE_SIZE - 1);
    while page < end {
        match paging::flags(page) {
            Some(f) if f & need == need => {}
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

/// The user bytes `[ptr, ptr+len)` once checked readable.
pub fn user_slice(ptr: u32, len: u32, access: Access) -> Result<&'static [u8], i32> {
    check(ptr, len, access)?;
    if len == 0 {
        return Ok(&[]);
    }
    // SAFETY: checked mapped and user-accessible just above; it stays so
    // until the call returns (no other context runs meanwhile).
    Ok(unsafe { core::slice::from_raw_parts(ptr as *const u8, len as usize) })
}

/// The user bytes `[ptr, ptr+len)` once checked writable.
pub fn user_slice_mut(ptr: u32, len: u32) -> Result<&'static mut [u8], i32> {
    check(ptr, len, Access::Write)?;
    if len == 0 {
        return Ok(&mut []);
    }
    // SAFETY: as in user_slice, and writable.
    Ok(unsafe { core::slice::from_raw_parts_mut(ptr as *mut u8, len as usize) })
}

/// Copies `src` into `dst` (equal lengths) with `rep movsb`, the string
/// copy user-copy routines use. It relies on the ABI's DF = 0: with DF set,
/// `rep movsb` runs backwards from the first byte, which is why every entry
/// path resets EFLAGS before Rust code runs.
///
/// However long the copy, it is one instruction retired; Bochs's TSC counts
/// its iterations and QEMU's icount one more (docs/machines.md).
pub fn copy_bytes(dst: &mut [u8], src: &[u8]) {
    assert_eq!(dst.len(), src.len());
    // SAFETY: both slices are valid for `len` bytes and do not overlap
    // (one is always kernel memory, the other a distinct buffer); ES is the
    // kernel data segment on every path into the kernel.
    unsafe {
        // ESI cannot be an operand on i686 (LLVM keeps it for itself): swap
        // the source in and the compiler's ESI back out around the copy.
        core::arch::asm!(
            "xchgl {src}, %esi",
            "rep movsb",
            "movl {src}, %esi",
            src = inout(reg) src.as_ptr() => _,
            inout("ecx") src.len() => _,
            inout("edi") dst.as_mut_ptr() => _,
            options(att_syntax, nostack, preserves_flags)
        );
    }
}

/// Copies the user bytes at `ptr` into `dst` (checked readable), or `EFAULT`.
pub fn copy_in(ptr: u32, dst: &mut [u8]) -> Result<(), i32> {
    let src = user_slice(ptr, dst.len() as u32, Access::Read)?;
    copy_bytes(dst, src);
    Ok(())
}

/// Copies `src` to the user bytes at `ptr` (checked writable), or `EFAULT`.
pub fn copy_out(ptr: u32, src: &[u8]) -> Result<(), i32> {
    let dst = user_slice_mut(ptr, src.len() as u32)?;
    copy_bytes(dst, src);
    Ok(())
}

/// The copies, for the process layer below (`proc::UserMem`).
pub const USER_MEM: crate::proc::UserMem = crate::proc::UserMem {
    read: copy_in,
    write: copy_out,
    check: |ptr, len, write| check(ptr, len, if write { Access::Write } else { Access::Read }),
};
