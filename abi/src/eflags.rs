//! EFLAGS bits (Intel SDM Vol. 1 §3.4.3, Figure 3-8), named once for the
//! kernel's entry stubs, the user test programs and the reports.

/// Carry, parity, zero and sign: arithmetic status.
pub const CF: u32 = 1 << 0;
/// Bit 1 is reserved and always reads 1: EFLAGS with nothing else set is 0x2.
pub const RESERVED_1: u32 = 1 << 1;
pub const PF: u32 = 1 << 2;
pub const ZF: u32 = 1 << 6;
pub const SF: u32 = 1 << 7;
/// Trap flag: single-step (SDM Vol. 3A §17.3.1.4).
pub const TF: u32 = 1 << 8;
/// Interrupt enable (read-only for the user; must be on after every return).
pub const IF: u32 = 1 << 9;
/// Direction flag: string instructions run backwards.
pub const DF: u32 = 1 << 10;
/// Nested task: an IRET with NT set is a task return (SDM Vol. 3A §7.4).
pub const NT: u32 = 1 << 14;
/// Alignment check (faults only where CR0.AM is set, which this kernel
/// leaves clear).
pub const AC: u32 = 1 << 18;
/// Software can flip ID only when CPUID exists (SDM Vol. 1 §20.1).
pub const ID: u32 = 1 << 21;

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

/// The named bits, lowest first, for reports that spell out a value.
pub const NAMED: [(u32, &str); 10] = [
    (CF, "CF"),
    (PF, "PF"),
    (ZF, "ZF"),
    (SF, "SF"),
    (TF, "TF"),
    (IF, "IF"),
    (DF, "DF"),
    (NT, "NT"),
    (AC, "AC"),
    (ID, "ID"),
];

/// The name of one bit ("?" for a bit not in [`NAMED`]).
pub fn name(bit: u32) -> &'static str {
    NAMED
        .iter()
        .find(|&&(b, _)| b == bit)
        .map_or("?", |&(_, n)| n)
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
    }
}
