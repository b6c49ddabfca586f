//! The testbed's ABI: every number that crosses a boundary (user ↔ kernel,
//! kernel ↔ host) is defined here once and nowhere else.
//!
//! `no_std`, no allocation: the kernel, the ring-3 programs and the host tool
//! all link it.
#![no_std]

pub mod cases;
pub mod cmdline;
pub mod eflags;
pub mod exit;
pub mod layout;
pub mod lmbench;
pub mod model;
pub mod report;
pub mod stats;
pub mod strings;
pub mod syscall;

pub use syscall::{errno, nr, Mechanism};
