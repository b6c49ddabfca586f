//! The CPU: port I/O, MSRs, CPUID, descriptor tables, exceptions, paging,
//! physical frames, the PIC, the timers, the other CPUs, the register
//! frames, and leaving the machine.
//!
//! arch knows the CPU; the kernel above it decides what to do. It imports
//! nothing from the layers above (`sync` but its cells, `task`, `entry`,
//! `syscall`, `trap`, `bench`, `testing`: `cargo xtask layers` checks it).
//! Below it are `boot` (the memory map, the boot stacks) and
//! `sync::cell` (a global's cell, which imports nothing); beside it the
//! console, which asks `gdt::cpu` which CPU prints and through which the
//! register dumps and the counters' report print.
//!
//! Single instructions come from the `x86` crate where it fits: port I/O
//! (`port`), the MSR numbers (`msr`), LIDT (`idt`), LTR (`gdt`), CR2
//! (`cpu`). Assembly stays written here where the instruction sequence is
//! the subject: the exception,
//! interrupt and handler-task stubs, the model's marker NOPs (`marker`),
//! the counter probes that must fault at a listed instruction (`pmu`), and
//! RDMSR/WRMSR, which the thread switch runs in timed paths (`msr` says
//! why), and the TSC calibration's RDTSC (`pit`: `x86::time::rdtsc` is
//! the `_rdtsc` intrinsic, which compiles to a different loop, and the
//! boot's TSC frequency, which every per-second figure divides by, moved
//! with it). The unfenced reads of `apic` (the local timer's calibration)
//! and `smp` (the application processors' start-up waits) stay too: there
//! `x86::time::rdtsc` is an out-of-line call, and with it the local timers'
//! period and the moment each AP starts moved, which changed every
//! `mode=smp` and two-CPU `locks` figure under icount. The entry stubs and their floors (`entry`) and the timed regions
//! (`bench`) keep theirs for the same reason.
//!
//! What arch needs from the boot it is handed (`paging::init` gets the
//! stack guards, `smp::init` the AP's main loop, `gdt::init` the handler
//! tasks). It calls up only where the CPU hands it an event the policy must
//! answer: a stub saves the interrupted context and calls the trap module
//! (`crate::trap`) by link name, a direct `call` as before the policy moved
//! out, so no path length changed. These are all the upcalls, each typed in
//! [`upcall`] and checked against its definition there:
//!
//! - `exceptions` (`exc_common`) → `trap_exception(&mut TrapFrame)`: any
//!   of the 32 exceptions through its interrupt gate.
//! - `exceptions` (`debug_task`) → `trap_debug()`: a #DB, in the CPU's
//!   debug task; (`debug_kill`) → `trap_debug_kill()`: a user thread that
//!   single-stepped, back in ring 0.
//! - `exceptions` (`double_fault_task`) → `trap_double_fault()`: a #DF.
//! - `pit` (`irq0_entry`) → `trap_timer(cs)`: the PIT's tick.
//! - `smp` (`ipi_reschedule_entry`, `apic_timer_entry`) →
//!   `trap_reschedule(cs)`, `trap_apic_timer(cs)`.

pub mod apic;
pub mod cpu;
pub mod exceptions;
pub mod frames;
pub mod gdt;
pub mod idt;
pub mod marker;
pub mod msr;
pub mod pacer;
pub mod paging;
pub mod pic;
pub mod pit;
pub mod pmu;
pub mod port;
pub mod power;
pub mod regs;
pub mod smp;

/// The types of the upcalls arch's stubs make (see the module text); the
/// trap module checks each definition against them.
pub mod upcall {
    use super::exceptions::TrapFrame;

    /// `trap_exception`: ECX = the frame `exc_common` saved (fastcall).
    pub type Exception = extern "fastcall" fn(&mut TrapFrame);
    /// `trap_debug`: runs as the CPU's debug task; its IRET switches back.
    pub type HandlerTask = extern "C" fn();
    /// `trap_double_fault`, `trap_debug_kill`: never return.
    pub type Stop = extern "C" fn() -> !;
    /// `trap_timer`, `trap_reschedule`, `trap_apic_timer`,
    /// `trap_pacer_tick`: ECX = the interrupted CS (fastcall).
    pub type Interrupt = extern "fastcall" fn(u32);
}
