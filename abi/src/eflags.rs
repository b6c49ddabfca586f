//! EFLAGS bits (Intel SDM Vol. 1 §3.4.3, Figure 3-8), named once for the
//! kernel's entry stubs, the user test programs and the reports.

bitflags::bitflags! {
    /// The EFLAGS bits the testbed names, lowest first: the one list the
    /// constants below, [`name`] and the reports that spell out a value
    /// (`trace`, the hostile-flag tests) come from.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub struct Eflags: u32 {
        /// Carry, parity, zero and sign: arithmetic status.
        const CF = 1 << 0;
        const PF = 1 << 2;
        const ZF = 1 << 6;
        const SF = 1 << 7;
        /// Trap flag: single-step (SDM Vol. 3A §17.3.1.4).
        const TF = 1 << 8;
        /// Interrupt enable (read-only for the user; must be on after every return).
        const IF = 1 << 9;
        /// Direction flag: string instructions run backwards.
        const DF = 1 << 10;
        /// Nested task: an IRET with NT set is a task return (SDM Vol. 3A §7.4).
        const NT = 1 << 14;
        /// Alignment check (faults only where CR0.AM is set, which this kernel
        /// leaves clear).
        const AC = 1 << 18;
        /// Software can flip ID only when CPUID exists (SDM Vol. 1 §20.1).
        const ID = 1 << 21;
    }
}

// The bits as plain words, for `asm!` operands and masks.
pub const CF: u32 = Eflags::CF.bits();
pub const PF: u32 = Eflags::PF.bits();
pub const ZF: u32 = Eflags::ZF.bits();
pub const SF: u32 = Eflags::SF.bits();
pub const TF: u32 = Eflags::TF.bits();
pub const IF: u32 = Eflags::IF.bits();
pub const DF: u32 = Eflags::DF.bits();
pub const NT: u32 = Eflags::NT.bits();
pub const AC: u32 = Eflags::AC.bits();
pub const ID: u32 = Eflags::ID.bits();
/// Bit 1 is reserved and always reads 1: EFLAGS with nothing else set is
/// 0x2. Not a flag, so not in [`Eflags`].
pub const RESERVED_1: u32 = 1 << 1;

/// What every full entry loads with `pushl; popfl` before Rust runs: DF
/// (Rust assumes it clear), AC, NT (a stale NT would make a later IRET a
/// task return), TF and IF all clear.
pub const KERNEL_ENTRY: u32 = RESERVED_1;
/// A new user thread's flags: interrupts on, nothing else.
pub const USER_START: u32 = RESERVED_1 | IF;
/// The bits SYSEXIT and SYSRET cannot give back (they leave the kernel's
/// flags in place): a user whose saved flags have any of them set returns
/// through IRET instead, which restores all of EFLAGS.
pub const NOT_RESTORED_BY_FAST_RETURN: u32 = TF | DF | NT | AC | ID;
/// The bits a user may set before an entry and must get back.
pub const HOSTILE: u32 = DF | NT | AC;

/// Auxiliary carry and overflow: arithmetic status like CF..SF (not in
/// [`Eflags`], since no report spells them out).
pub const AF: u32 = 1 << 4;
pub const OF: u32 = 1 << 11;
/// I/O privilege level (bits 12-13): with 3, ring 3 could use `in`, `out`,
/// `cli` (SDM Vol. 1 §3.4.3.3). Only ring 0 may change it.
pub const IOPL: u32 = 3 << 12;
/// Resume flag and virtual-8086 mode (SDM Vol. 3A §2.3).
pub const RF: u32 = 1 << 16;
pub const VM: u32 = 1 << 17;
/// What `sigreturn` takes from a signal frame in user memory: the bits ring
/// 3 may change itself with POPF (arithmetic status, DF, AC, ID). Never
/// IOPL, VM, NT, RF or TF; IF is always set on the way back.
pub const USER_SETTABLE: u32 = CF | PF | AF | ZF | SF | DF | OF | AC | ID;

/// The named bits, lowest first, for reports that spell out a value.
pub fn named() -> impl Iterator<Item = (u32, &'static str)> {
    Eflags::all().iter_names().map(|(n, f)| (f.bits(), n))
}

/// The name of one bit ("?" for a bit not in [`Eflags`]).
pub fn name(bit: u32) -> &'static str {
    named().find(|&(b, _)| b == bit).map_or("?", |(_, n)| n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sets() {
        assert_eq!(name(TF), "TF");
        assert_eq!(name(AC), "AC");
        assert_eq!(name(1 << 3), "?");
        assert_eq!(USER_START, 0x202);
        assert_eq!(KERNEL_ENTRY, 0x2);
        assert_eq!(NOT_RESTORED_BY_FAST_RETURN, 0x0024_4500);
        assert_eq!(USER_SETTABLE, 0x0024_0cd5);
        assert_eq!(USER_SETTABLE & (IOPL | VM | NT | RF | TF | IF), 0);
        assert!(named()
            .map(|(_, n)| n)
            .eq(["CF", "PF", "ZF", "SF", "TF", "IF", "DF", "NT", "AC", "ID"]));
    }
}
