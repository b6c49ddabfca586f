//! The one dispatcher every full entry calls, and the system calls.
//!
//! `dispatch` receives the user's registers as PUSHAL saved them: the number
//! in EAX, arguments in EBX, ECX, EDX, ESI, EDI, EBP. It writes the result
//! (or a negative errno) into the saved EAX, which the entry's POPAL returns.

pub mod usercopy;

use abi::syscall::{errno, fd, nr, CpuInfo};
use abi::Mechanism;

use crate::entry::{self, Regs};
use crate::task;

fn err(e: i32) -> u32 {
    (-e) as u32
}

/// Called by every full entry stub with ECX = &mut Regs (fastcall).
pub extern "fastcall" fn dispatch(r: &mut Regs) {
    r.eax = match r.eax {
        nr::NULL => 0,
        nr::GETPID => task::current().pid,
        nr::GETEUID => task::current().euid,
        nr::YIELD => 0,
        nr::WRITE => write(r.ebx, r.ecx, r.edx),
        nr::READ => read(r.ebx, r.ecx, r.edx),
        nr::CPUINFO => cpuinfo(r.ebx, r.ecx),
        nr::ENTRY_FLOOR => entry_floor(r.ebx, r.ecx),
        nr::ARGSUM => abi::syscall::argsum([r.ebx, r.ecx, r.edx, r.esi, r.edi, r.ebp]),
        nr::EXIT => task::end_current(task::End::Exit(r.ebx as i32)),
        _ => err(errno::ENOSYS),
    };
}

/// `write(fd, buf, len)`.
#[inline(never)]
fn write(fd: u32, buf: u32, len: u32) -> u32 {
    let bytes = match usercopy::user_slice(buf, len, usercopy::Access::Read) {
        Ok(b) => b,
        Err(e) => return err(e),
    };
    match fd {
        fd::STDOUT | fd::STDERR => crate::console::write_bytes(bytes),
        fd::NULL => {}
        fd::RING => return ring::write(bytes) as u32,
        _ => return err(errno::EBADF),
    }
    len
}

/// `read(fd, buf, len)`.
#[inline(never)]
fn read(fd: u32, buf: u32, len: u32) -> u32 {
    let bytes = match usercopy::user_slice_mut(buf, len) {
        Ok(b) => b,
        Err(e) => return err(e),
    };
    match fd {
        fd::STDIN | fd::NULL => 0,
        fd::RING => ring::read(bytes) as u32,
        _ => err(errno::EBADF),
    }
}

#[inline(never)]
fn cpuinfo(buf: u32, len: u32) -> u32 {
    let info = CpuInfo {
        mechanisms: crate::usable_mechanisms(),
        signature: crate::arch::cpu::features().signature,
    };
    if (len as usize) < core::mem::size_of::<CpuInfo>() {
        return err(errno::EINVAL);
    }
    match usercopy::user_slice_mut(buf, core::mem::size_of::<CpuInfo>() as u32) {
        Ok(out) => {
            // SAFETY: `out` is exactly one CpuInfo of writable user memory.
            unsafe { (out.as_mut_ptr() as *mut CpuInfo).write_unaligned(info) };
            0
        }
        Err(e) => err(e),
    }
}

#[inline(never)]
fn entry_floor(mechanism: u32, on: u32) -> u32 {
    match Mechanism::from_u32(mechanism) {
        Some(m) if crate::usable_mechanisms() & (1 << m as u32) != 0 && on <= 1 => {
            entry::select_floor(m, on == 1);
            0
        }
        _ => err(errno::EINVAL),
    }
}

/// The kernel ring buffer behind `fd::RING`.
mod ring {
    use abi::syscall::fd::RING_SIZE;

    use crate::sync::cell::BootCell;

    struct Ring {
        buf: [u8; RING_SIZE],
        head: usize,
        len: usize,
    }

    static RING: BootCell<Ring> = BootCell::new(Ring {
        buf: [0; RING_SIZE],
        head: 0,
        len: 0,
    });

    /// Appends what fits; returns the count.
    pub fn write(b: &[u8]) -> usize {
        // SAFETY: one context at a time (syscalls run with IF=0).
        let r = unsafe { RING.get_mut() };
        let n = b.len().min(RING_SIZE - r.len);
        for &byte in &b[..n] {
            r.buf[(r.head + r.len) % RING_SIZE] = byte;
            r.len += 1;
        }
        n
    }

    /// Takes up to `out.len()` bytes; returns the count.
    pub fn read(out: &mut [u8]) -> usize {
        // SAFETY: as in write.
        let r = unsafe { RING.get_mut() };
        let n = out.len().min(r.len);
        for o in &mut out[..n] {
            *o = r.buf[r.head];
            r.head = (r.head + 1) % RING_SIZE;
            r.len -= 1;
        }
        n
    }

    /// Empties the ring (between user programs).
    pub fn reset() {
        // SAFETY: as in write.
        let r = unsafe { RING.get_mut() };
        r.head = 0;
        r.len = 0;
    }
}

pub use ring::reset as reset_ring;
