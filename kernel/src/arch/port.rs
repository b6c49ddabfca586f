//! Port I/O (Intel SDM Vol. 1 §19.3). One small function per instruction.

use core::arch::asm;

/// `outb`: write a byte to an I/O port.
///
/// # Safety
/// Writing a device register can have any effect the device defines.
pub unsafe fn outb(port: u16, value: u8) {
    // SAFETY: the caller owns the device behind `port`.
    unsafe {
        asm!("outb %al, %dx", in("dx") port, in("al") value, options(att_syntax, nomem, nostack))
    };
}

/// `outl`: write a doubleword to an I/O port.
///
/// # Safety
/// As [`outb`].
pub unsafe fn outl(port: u16, value: u32) {
    // SAFETY: the caller owns the device behind `port`.
    unsafe {
        asm!("outl %eax, %dx", in("dx") port, in("eax") value, options(att_syntax, nomem, nostack))
    };
}

/// `inb`: read a byte from an I/O port.
///
/// # Safety
/// Reading a device register can have side effects.
pub unsafe fn inb(port: u16) -> u8 {
    let v: u8;
    // SAFETY: the caller owns the device behind `port`.
    unsafe {
        asm!("inb %dx, %al", in("dx") port, out("al") v, options(att_syntax, nomem, nostack))
    };
    v
}
