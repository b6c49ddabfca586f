//! The CPU: port I/O, MSRs, CPUID, descriptor tables, exceptions, paging,
//! physical frames, the PIC, and leaving the machine.

pub mod apic;
pub mod cpu;
pub mod exceptions;
pub mod frames;
pub mod gdt;
pub mod idt;
pub mod marker;
pub mod msr;
pub mod paging;
pub mod pic;
pub mod pit;
pub mod pmu;
pub mod port;
pub mod power;
pub mod smp;
