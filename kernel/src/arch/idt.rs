//! The IDTs (Intel SDM Vol. 3A §6.10–6.11): 256 gates, filled by vector,
//! one table per CPU. They differ only in the task gates of #DF and #DB,
//! each naming its CPU's own handler TSS (a handler task's TSS is busy
//! while it runs: two CPUs could not take the exception at once through
//! one).

use abi::layout::selector;

use abi::layout::MAX_CPUS;

use crate::sync::cell::BootCell;

/// Exception vectors (SDM Vol. 3A Table 6-1), named where the kernel uses them.
pub mod vector {
    pub const DEBUG: u8 = 1;
    pub const BREAKPOINT: u8 = 3;
    pub const INVALID_OPCODE: u8 = 6;
    pub const DEVICE_NOT_AVAILABLE: u8 = 7;
    pub const DOUBLE_FAULT: u8 = 8;
    pub const GENERAL_PROTECTION: u8 = 13;
    pub const PAGE_FAULT: u8 = 14;
}

/// Gate kinds (SDM Vol. 3A Figure 6-2). Only interrupt gates so far: the
/// kernel runs with IF clear, so every entry must clear it.
#[derive(Clone, Copy)]
pub enum GateKind {
    /// Clears IF on entry.
    Interrupt,
}

#[derive(Clone, Copy)]
#[repr(transparent)]
pub struct Gate(u64);

const PRESENT: u64 = 1 << 47;
const TYPE_INTERRUPT32: u64 = 0xE << 40;
const TYPE_TASK: u64 = 0x5 << 40;

impl Gate {
    const MISSING: Gate = Gate(0);

    /// A gate to `handler` in the kernel code segment, callable by `int n`
    /// from privilege `ring` and above.
    pub fn new(handler: u32, kind: GateKind, ring: u8) -> Gate {
        let h = handler as u64;
        let ty = match kind {
            GateKind::Interrupt => TYPE_INTERRUPT32,
        };
        Gate(
            (h & 0xFFFF)
                | ((selector::KERNEL_CODE as u64) << 16)
                | ty
                | ((ring as u64 & 3) << 45)
                | PRESENT
                | ((h >> 16) << 48),
        )
    }

    /// A task gate: delivery switches to the task whose TSS `tss_selector` names.
    pub fn task(tss_selector: u16) -> Gate {
        Gate(((tss_selector as u64) << 16) | TYPE_TASK | PRESENT)
    }
}

#[repr(C, align(8))]
pub struct Idt([Gate; 256]);

static IDT: BootCell<[Idt; MAX_CPUS]> =
    BootCell::new([const { Idt([Gate::MISSING; 256]) }; MAX_CPUS]);

/// Sets the gate for `vector` in every CPU's table. At boot, or before
/// anything can raise the vector.
pub fn set(vector: u8, gate: Gate) {
    for cpu in 0..MAX_CPUS {
        set_on(cpu, vector, gate);
    }
}

/// Sets the gate for `vector` in CPU `cpu`'s table only.
pub fn set_on(cpu: usize, vector: u8, gate: Gate) {
    // SAFETY: the CPU reads the table only on delivery, and nothing raises
    // this vector while its gate is being written (the caller's contract).
    unsafe { IDT.get_mut()[cpu].0[vector as usize] = gate };
}

/// The raw gate for `vector`, as CPU 0 will read it (for traces).
pub fn raw(vector: u8) -> u64 {
    // SAFETY: a read of a gate written only before it is used.
    unsafe { IDT.get_mut()[0].0[vector as usize].0 }
}

/// CPU `cpu`'s IDT's linear address (for the model clock's announcement).
pub fn address(cpu: usize) -> u32 {
    // SAFETY: only the address of a static element is taken.
    unsafe { &raw const (*IDT.as_ptr())[cpu] as u32 }
}

/// `lidt` of CPU `cpu`'s table (on that CPU).
pub fn load(cpu: usize) {
    let p = x86::dtables::DescriptorTablePointer::<Gate> {
        limit: (256 * 8 - 1) as u16,
        base: address(cpu) as *const Gate,
    };
    // SAFETY: the IDT is a static and every present gate points at a handler.
    unsafe { x86::dtables::lidt(&p) };
}
