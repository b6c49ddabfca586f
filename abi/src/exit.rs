//! Exit codes written to QEMU's `isa-debug-exit` device (port [`PORT`]).
//!
//! QEMU exits with status `value * 2 + 1`, so 0 cannot be produced by the
//! guest: a 0 status means QEMU stopped for another reason (under `-no-reboot`,
//! a triple fault resets the machine and QEMU exits with 0).

/// I/O port of the isa-debug-exit device (`-device isa-debug-exit,iobase=0xf4,iosize=0x04`).
pub const PORT: u16 = 0xf4;

/// Everything the kernel was asked to do succeeded.
pub const SUCCESS: u32 = 0x10;
/// A test or benchmark failed, or a fatal condition other than a fault.
pub const FAILURE: u32 = 0x11;
/// A Rust panic in the kernel.
pub const PANIC: u32 = 0x12;
/// A CPU exception in the kernel: `EXCEPTION_BASE + vector` (vectors 0..32).
pub const EXCEPTION_BASE: u32 = 0x20;

/// What the kernel prints on the serial line after writing its exit value,
/// followed by the value in hex and `); halting...`. A machine without the
/// debug-exit device (Bochs, a real PC) reads the verdict from this line.
pub const FINISHED: &str = "testbed: finished (exit code ";

/// The exit value a [`FINISHED`] line carries.
pub fn finished_value(line: &str) -> Option<u32> {
    let rest = line.strip_prefix(FINISHED)?;
    let hex = rest.split(')').next()?.strip_prefix("0x")?;
    u32::from_str_radix(hex, 16).ok()
}

/// The host exit status QEMU produces for a debug-exit value.
pub const fn qemu_status(value: u32) -> i32 {
    (value * 2 + 1) as i32
}

/// What a QEMU exit status means, for xtask's messages.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    Success,
    Failure,
    Panic,
    /// A kernel-mode CPU exception with this vector.
    Exception(u8),
    /// Status 0: the guest reset (a triple fault under `-no-reboot`) or powered off.
    ResetOrTripleFault,
    /// Any other status (QEMU itself failed, or an unknown code).
    Other(i32),
}

pub fn outcome(status: i32) -> Outcome {
    if status == 0 {
        return Outcome::ResetOrTripleFault;
    }
    if status < 0 || status % 2 == 0 {
        return Outcome::Other(status);
    }
    let v = (status as u32 - 1) / 2;
    match v {
        SUCCESS => Outcome::Success,
        FAILURE => Outcome::Failure,
        PANIC => Outcome::Panic,
        v if (EXCEPTION_BASE..EXCEPTION_BASE + 32).contains(&v) => {
            Outcome::Exception((v - EXCEPTION_BASE) as u8)
        }
        _ => Outcome::Other(status),
    }
}

/// The 32 exception vectors (Intel SDM Vol. 3A, Table 6-1; AMD APM Vol. 2
/// §8.2 for 29 and 30): (mnemonic, what it is), by vector.
pub const VECTORS: [(&str, &str); 32] = [
    ("#DE", "divide error"),
    ("#DB", "debug"),
    ("NMI", "NMI"),
    ("#BP", "breakpoint"),
    ("#OF", "overflow"),
    ("#BR", "bound range exceeded"),
    ("#UD", "invalid opcode"),
    ("#NM", "device not available"),
    ("#DF", "double fault"),
    ("CSO", "coprocessor segment overrun"),
    ("#TS", "invalid TSS"),
    ("#NP", "segment not present"),
    ("#SS", "stack-segment fault"),
    ("#GP", "general protection"),
    ("#PF", "page fault"),
    ("#15", "reserved"),
    ("#MF", "x87 floating-point error"),
    ("#AC", "alignment check"),
    ("#MC", "machine check"),
    ("#XM", "SIMD floating-point"),
    ("#VE", "virtualization exception"),
    ("#CP", "control protection"),
    ("#22", "reserved"),
    ("#23", "reserved"),
    ("#24", "reserved"),
    ("#25", "reserved"),
    ("#26", "reserved"),
    ("#27", "reserved"),
    ("#HV", "hypervisor injection"),
    ("#VC", "VMM communication"),
    ("#SX", "security exception"),
    ("#31", "reserved"),
];

/// Short mnemonic of an exception vector ("#??" beyond 31).
pub fn vector_name(v: u8) -> &'static str {
    VECTORS.get(v as usize).map_or("#??", |&(m, _)| m)
}

/// What an exception vector is, in words ("reserved" beyond 31).
pub fn vector_title(v: u8) -> &'static str {
    VECTORS.get(v as usize).map_or("reserved", |&(_, t)| t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_round_trip() {
        assert_eq!(outcome(qemu_status(SUCCESS)), Outcome::Success);
        assert_eq!(outcome(33), Outcome::Success);
        assert_eq!(outcome(qemu_status(FAILURE)), Outcome::Failure);
        assert_eq!(outcome(qemu_status(PANIC)), Outcome::Panic);
        assert_eq!(
            outcome(qemu_status(EXCEPTION_BASE + 8)),
            Outcome::Exception(8)
        );
        assert_eq!(outcome(0), Outcome::ResetOrTripleFault);
        assert_eq!(outcome(1), Outcome::Other(1));
        assert_eq!(outcome(2), Outcome::Other(2));
    }

    #[test]
    fn finished_lines() {
        let l = "testbed: finished (exit code 0x10); halting. Power off or reset the machine.";
        assert_eq!(finished_value(l), Some(SUCCESS));
        assert_eq!(
            finished_value("testbed: finished (exit code 0x2e); halting."),
            Some(EXCEPTION_BASE + 14)
        );
        assert_eq!(finished_value("testbed: finished (exit code 16)"), None);
        assert_eq!(
            finished_value("user: testbed: finished (exit code 0x10)"),
            None
        );
    }

    #[test]
    fn vector_names() {
        assert_eq!(vector_name(14), "#PF");
        assert_eq!(vector_title(14), "page fault");
        assert_eq!(vector_name(8), "#DF");
        assert_eq!(vector_name(32), "#??");
        assert_eq!(vector_title(200), "reserved");
    }
}
