//! The CPU: port I/O, MSRs, CPUID, descriptor tables, exceptions, paging,
//! physical frames, the PIC, the timers, the other CPUs, the register
//! frames, and leaving the machine.
//!
//! arch knows the CPU; the kernel above it decides what to do. What arch
//! needs from the boot it is handed (`paging::init` gets the stack guards,
//! `smp::init` the AP's main loop, `gdt::init` the handler tasks). It calls
//! up into the kernel only where the CPU hands it an event the policy must
//! answer; these are all the upcalls:
//!
//! - `exceptions` → `task::current`, `task::end_current`: a fault or a
//!   single step in ring 3 ends the user task.
//! - `exceptions` → `entry::traced_entry`: a #DB at an entry stub's first
//!   instruction resumes at its traced variant.
//! - `pit` → `task::sched::tick`: the timer interrupt is the scheduler's tick.
//! - `power` → `kprintln!`, `exceptions` and `pmu` → `kprintln!`/`record!`:
//!   the console and the report.
//!
//! (`exceptions::double_fault` also reads `boot::entry::stacks()` to tell a
//! stack overflow by its guard page.)

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
pub mod regs;
pub mod smp;
