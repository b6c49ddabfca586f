//! The user-fault cases the test program `faults` runs, one per boot of the
//! program (its argument selects the case), with the outcome each must have.
//! Shared so the kernel's expectations and the program cannot drift apart.

/// How a case must end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Ended by this CPU exception vector, with a report.
    Fault(u8),
    /// A fast entry without a valid user stack: the task is ended.
    BadStack,
    /// `exit(code)`.
    Exit(i32),
}

pub const FAULT_CASES: &[(&str, Expect)] = &[
    ("write to kernel memory (#PF)", Expect::Fault(14)),
    ("read of an unmapped page (#PF)", Expect::Fault(14)),
    ("jump into kernel code (#PF)", Expect::Fault(14)),
    ("cli (#GP)", Expect::Fault(13)),
    ("hlt (#GP)", Expect::Fault(13)),
    ("in from a port (#GP)", Expect::Fault(13)),
    ("out to a port (#GP)", Expect::Fault(13)),
    ("int to a DPL-0 vector (#GP)", Expect::Fault(13)),
    ("ud2 (#UD)", Expect::Fault(6)),
    ("divide by zero (#DE)", Expect::Fault(0)),
    ("int3 (#BP)", Expect::Fault(3)),
    (
        "user stack overflow into the guard page (#PF)",
        Expect::Fault(14),
    ),
    ("sysenter with EBP in the kernel", Expect::BadStack),
    ("sysenter with EBP unmapped", Expect::BadStack),
    (
        "TF set before sysenter (#DB after the return)",
        Expect::Fault(1),
    ),
    (
        "TF set before int 0x80 (#DB after the return)",
        Expect::Fault(1),
    ),
    (
        "TF set before the call gate (#DB after the return)",
        Expect::Fault(1),
    ),
];
