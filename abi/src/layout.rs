//! Memory layout and segment selectors that both sides of the user/kernel
//! boundary depend on.
//!
//! The kernel is identity-mapped in the low [`KERNEL_MAP_END`] bytes,
//! supervisor-only. User programs live in `[USER_BASE, USER_TOP)`, far above
//! the kernel and any Multiboot module GRUB places after it.

/// End of the kernel's identity map; physical frames the kernel hands out
/// come from below it so the kernel can reach them at their own address.
pub const KERNEL_MAP_END: u32 = 32 << 20;
/// Lowest user address (user programs are linked here).
pub const USER_BASE: u32 = 0x4000_0000;
/// One past the highest user address.
pub const USER_TOP: u32 = 0xC000_0000;
/// Initial user ESP; the stack grows down from here.
pub const USER_STACK_TOP: u32 = 0xB000_0000;
/// Size of the user stack; the page below it is a guard page, never mapped.
pub const USER_STACK_SIZE: u32 = 64 << 10;
pub const PAGE_SIZE: u32 = 4096;
/// The most Multiboot modules (user programs) the kernel keeps; a loader
/// that passes more has the rest dropped, and the kernel says so at boot.
pub const MAX_MODULES: usize = 16;
/// The heap `sbrk` grows, page by page, demand-zero.
pub const USER_HEAP_BASE: u32 = 0x8000_0000;
/// The most the heap may grow (it stays far below the stack).
pub const USER_HEAP_MAX: u32 = 256 << 20;

/// The kernel half above user space (Intel SDM Vol. 3A §4.3: a 32-bit page
/// directory's entry `i` maps `[i << 22, (i + 1) << 22)`), shared by every
/// address space:
///
/// - the direct map of physical memory at [`DIRECT_MAP_BASE`] (`pmap=direct`
///   only: every other strategy must reach memory above [`KERNEL_MAP_END`]
///   through a mapping it pays for);
/// - each CPU's windows at [`WINDOW_BASE`] (page tables and frames of
///   another address space, one PTE each);
/// - the alternate recursive slot at [`APTE_BASE`] (`pmap=apte`: another
///   space's page tables through the current directory);
/// - the recursive slot at [`RECURSIVE_BASE`]: the current space's page
///   tables, its directory at [`RECURSIVE_DIR`].
pub const DIRECT_MAP_BASE: u32 = 0xC000_0000;
/// One past the direct map: physical memory above `DIRECT_MAP_END -
/// DIRECT_MAP_BASE` (768 MiB) is not direct-mapped. Above it the kernel
/// identity-maps the local and I/O APICs (at 0xFEC0_0000 and up).
pub const DIRECT_MAP_END: u32 = 0xF000_0000;
pub const WINDOW_BASE: u32 = 0xFF40_0000;
pub const APTE_BASE: u32 = 0xFF80_0000;
pub const RECURSIVE_BASE: u32 = 0xFFC0_0000;
/// The current directory, seen through its own last entry.
pub const RECURSIVE_DIR: u32 = 0xFFFF_F000;

/// GDT selectors. The kernel builds its GDT through typed wrappers and checks
/// at boot that each descriptor lands on the selector named here.
pub mod selector {
    /// Ring-0 code. Also IA32_SYSENTER_CS: SYSENTER derives SS = CS+8 and
    /// SYSEXIT derives the user CS = CS+16 and SS = CS+24 (Intel SDM Vol. 2B,
    /// SYSENTER/SYSEXIT), which fixes the order of the next three entries.
    pub const KERNEL_CODE: u16 = 0x08;
    pub const KERNEL_DATA: u16 = 0x10;
    /// Ring-3 code and data (RPL 3).
    pub const USER_CODE: u16 = 0x18 | 3;
    pub const USER_DATA: u16 = 0x20 | 3;
    /// The TSS that gives ESP0 for ring 3 → ring 0 transitions.
    pub const TSS: u16 = 0x28;
    /// The double-fault TSS, entered through a task gate.
    pub const DOUBLE_FAULT_TSS: u16 = 0x30;
    /// The DPL-3 call gate to the full system-call entry.
    pub const CALL_GATE: u16 = 0x38 | 3;
    /// The DPL-3 call gate to the floor entry (lcall → lret, no work).
    pub const CALL_GATE_FLOOR: u16 = 0x40 | 3;
    /// The debug-exception TSS, entered through a task gate (see
    /// kernel/src/arch/exceptions.rs: a #DB must never push on a user stack).
    pub const DEBUG_TSS: u16 = 0x48;
    /// Each application processor's TSS: `AP_TSS_BASE + 8 * (cpu - 1)`.
    pub const AP_TSS_BASE: u16 = 0x50;
    /// Each CPU's per-CPU data segment (its base is that CPU's `PerCpu`):
    /// `PERCPU_BASE + 8 * cpu`, loaded into GS.
    pub const PERCPU_BASE: u16 = 0x50 + 8 * (super::MAX_CPUS as u16 - 1);
    /// Each application processor's own double-fault and debug TSSs:
    /// `AP_DF_TSS_BASE + 8 * (cpu - 1)`, `AP_DB_TSS_BASE + 8 * (cpu - 1)`.
    /// A handler task's TSS is busy while it runs, so CPUs that share one
    /// could not take the exception at once; each has its own, on its own
    /// stack.
    pub const AP_DF_TSS_BASE: u16 = PERCPU_BASE + 8 * super::MAX_CPUS as u16;
    pub const AP_DB_TSS_BASE: u16 = AP_DF_TSS_BASE + 8 * (super::MAX_CPUS as u16 - 1);
    /// One past the last descriptor.
    pub const END: u16 = AP_DB_TSS_BASE + 8 * (super::MAX_CPUS as u16 - 1);

    /// The selector of a per-CPU TSS: `cpu0`'s on the bootstrap processor,
    /// else `ap_base`'s entry for AP `cpu`.
    const fn per_cpu(cpu: usize, cpu0: u16, ap_base: u16) -> u16 {
        if cpu == 0 {
            cpu0
        } else {
            ap_base + 8 * (cpu as u16 - 1)
        }
    }

    /// CPU `cpu`'s main TSS (ESP0 for its ring-3 → ring-0 transitions).
    pub const fn tss(cpu: usize) -> u16 {
        per_cpu(cpu, TSS, AP_TSS_BASE)
    }

    /// CPU `cpu`'s double-fault TSS (its IDT's task gate for #DF names it).
    pub const fn double_fault_tss(cpu: usize) -> u16 {
        per_cpu(cpu, DOUBLE_FAULT_TSS, AP_DF_TSS_BASE)
    }

    /// CPU `cpu`'s debug TSS (its IDT's task gate for #DB names it).
    pub const fn debug_tss(cpu: usize) -> u16 {
        per_cpu(cpu, DEBUG_TSS, AP_DB_TSS_BASE)
    }

    /// The CPU whose task register can hold `tr` (any of its three TSSs;
    /// the RPL and TI bits ignored): what `str` tells a CPU about itself.
    /// `None` for a selector that is no TSS.
    pub const fn cpu_of_tss(tr: u16) -> Option<usize> {
        let s = tr & !7;
        if s == TSS || s == DOUBLE_FAULT_TSS || s == DEBUG_TSS {
            return Some(0);
        }
        let mut base = 0;
        while base < 3 {
            let first = [AP_TSS_BASE, AP_DF_TSS_BASE, AP_DB_TSS_BASE][base];
            if s >= first && s < first + 8 * (super::MAX_CPUS as u16 - 1) {
                return Some(((s - first) / 8) as usize + 1);
            }
            base += 1;
        }
        None
    }
}

/// CPUs the kernel starts at most (the bootstrap processor included).
pub const MAX_CPUS: usize = 8;
/// Where the application processors' real-mode start code is copied (a
/// page below 1 MiB: the SIPI vector is its page number).
pub const AP_TRAMPOLINE: u32 = 0x8000;

/// The int 0x80 vector (full entry) and the floor vector (int → iret, no work).
pub const VECTOR_SYSCALL: u8 = 0x80;
pub const VECTOR_SYSCALL_FLOOR: u8 = 0x81;
/// The IPI that tells another CPU a thread of its own became ready, or a
/// command waits in its mailbox (it may be waiting in HLT).
pub const VECTOR_RESCHEDULE: u8 = 0xF2;

#[cfg(test)]
mod tests {
    use super::selector::*;
    use super::MAX_CPUS;

    #[test]
    fn every_cpus_tss_names_that_cpu() {
        for cpu in 0..MAX_CPUS {
            for s in [tss(cpu), double_fault_tss(cpu), debug_tss(cpu)] {
                assert_eq!(cpu_of_tss(s), Some(cpu), "selector {s:#x}");
                assert!(s < END);
            }
        }
        assert_eq!(cpu_of_tss(KERNEL_CODE), None);
        assert_eq!(cpu_of_tss(PERCPU_BASE), None);
        assert_eq!(cpu_of_tss(END), None);
        // The AP ranges do not overlap the per-CPU segments.
        assert!(AP_TSS_BASE + 8 * (MAX_CPUS as u16 - 1) <= PERCPU_BASE);
        assert_eq!(AP_DF_TSS_BASE, PERCPU_BASE + 8 * MAX_CPUS as u16);
    }
}
