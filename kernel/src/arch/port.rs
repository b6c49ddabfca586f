//! Port I/O (Intel SDM Vol. 1 §19.3): the `x86` crate's `io` module, one
//! small inline `unsafe fn` per instruction. Its contract, the caller's to
//! keep: the caller owns the device behind the port, since reading or
//! writing a device register can have any effect the device defines.

pub use x86::io::{inb, outb, outl};
