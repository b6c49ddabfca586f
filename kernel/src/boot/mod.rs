//! From the boot loader's hand-off to Rust: the Multiboot headers, the 32-bit
//! entry stub, and [`info::BootInfo`] normalised from either protocol.

pub mod entry;
pub mod info;
pub mod revision;
