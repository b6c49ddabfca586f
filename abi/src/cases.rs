//! The hostile user suite: what the test program `faults` does in each run
//! (its argument is the index of a case in [`FAULT_CASES`]) and how each run
//! must end. Shared so the kernel's expectations and the program cannot
//! drift apart: the program matches on [`Act`], the kernel on [`Expect`].
//!
//! Every case runs as a fresh task; the kernel checks how it ended, then
//! runs the next. A case that needs a mechanism this CPU lacks exits with
//! [`EXIT_SKIPPED`] and counts as skipped, with the reason printed.

use crate::layout::{PAGE_SIZE, USER_STACK_SIZE, USER_STACK_TOP, USER_TOP};
use crate::syscall::{errno, nr, Mechanism};

/// The EFLAGS bits the cases set and check (the one table is `abi::eflags`).
/// A ring-3 program can change them with POPF, except IF and IOPL: at
/// CPL 3 with IOPL 0 POPF leaves those alone (SDM Vol. 2B, POPF).
pub use crate::eflags;

/// The exit status a case uses for "this CPU lacks the mechanism I need".
pub const EXIT_SKIPPED: i32 = 2;

/// What the `rogue` program does (its argument): a program that tries to
/// outlive its task or to speak for the kernel. The kernel's tests run the
/// `SPOIL_*` acts and then every other user test; `mode=run prog=rogue`
/// runs [`rogue::FORGE`].
pub mod rogue {
    /// Prints forged records on the console (whole, split across writes,
    /// mid-line) and offers the `record` call bodies it must refuse; exits 0
    /// when every refusal came back as expected.
    pub const FORGE: u32 = 0;
    /// Moves sysenter's and syscall's entries to their floors, lays the
    /// pools out in another alignment, fills the ring buffer, unmasks every
    /// x87 exception, and exits 0.
    pub const SPOIL_EXIT: u32 = 1;
    /// The same, then ends by a fault (#UD).
    pub const SPOIL_FAULT: u32 = 2;
    /// The same, then ends by its last thread's `thread_exit`.
    pub const SPOIL_THREAD_EXIT: u32 = 3;
    /// Every spoiling act, for the kernel's test.
    pub const SPOILS: [u32; 3] = [SPOIL_EXIT, SPOIL_FAULT, SPOIL_THREAD_EXIT];
}

/// How a case must end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Expect {
    /// Ended by this CPU exception vector, raised in ring 3, with a report.
    Fault(u8),
    /// Ended by either vector: where CPU generations differ (RDMSR and
    /// WRMSR are #GP in ring 3 where MSRs exist, #UD on a 486 without them).
    FaultEither(u8, u8),
    /// A fast entry (sysenter, syscall) without a valid user stack: the
    /// kernel ends the task instead of reading its own memory.
    BadStack,
    /// `exit(code)`: 0 when the program saw every result it checks for.
    Exit(i32),
    /// The call returned `-errno` through every usable mechanism; the
    /// program exits with that errno.
    Errno(i32),
}

impl Expect {
    /// True when a task that ended this way is what the case expects.
    pub fn matches_fault(self, vector: u8) -> bool {
        match self {
            Expect::Fault(v) => v == vector,
            Expect::FaultEither(a, b) => vector == a || vector == b,
            _ => false,
        }
    }

    /// The exit status this expectation stands for, if it is one.
    pub fn exit_code(self) -> Option<i32> {
        match self {
            Expect::Exit(c) | Expect::Errno(c) => Some(c),
            _ => None,
        }
    }
}

/// A privileged instruction (each #GP in ring 3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Privileged {
    Cli,
    Sti,
    Hlt,
    InPort,
    OutPort,
    Lgdt,
    Lidt,
    Ltr,
    MovToCr0,
    MovFromCr0,
    MovToCr3,
    MovToDr7,
    Clts,
    Wbinvd,
    Rdmsr,
    Wrmsr,
    Invlpg,
    /// Load the kernel data selector (DPL 0) into DS.
    LoadKernelDs,
    /// `ljmp` to the kernel code selector (DPL 0).
    FarJumpKernelCode,
    /// `iret` with a frame whose CS is the kernel's.
    IretToRing0,
    /// `int $13`: an exception vector, gate DPL 0.
    IntDplZero,
    /// `int $8`: the double-fault task gate, DPL 0.
    IntTaskGate,
}

/// Where a sysenter's stack pointers point (see `kernel/src/entry/sysenter.rs`:
/// the kernel reads the return EIP at `[EBP-4]` and argument 6 at `[EBP]`,
/// both only after checking `[EBP-4, EBP+4)` lies in user space, and
/// returns with ESP = EBP; the user's ESP it never reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SysenterStack {
    /// EBP at the kernel's first megabyte: refused by the range check.
    EbpKernel,
    /// EBP in the unmapped hole between the program and its stack: the
    /// kernel's read faults and the exception table ends the task.
    EbpUnmapped,
    /// EBP at an odd address inside a writable buffer: the reads work.
    EbpMisaligned,
    /// EBP = USER_STACK_TOP - 4: `[EBP-4, EBP+4)` is the stack's last 8 bytes.
    EbpLastWord,
    /// EBP = USER_STACK_TOP: argument 6 would be read from above the stack.
    EbpStackTop,
    /// EBP = USER_TOP - 2: the frame straddles the top of user space.
    EbpStraddlesUserTop,
    /// EBP = 0xffff_fffe: `EBP+4` wraps past 4 GiB.
    EbpWraps,
    /// EBP = USER_BASE + 2: `EBP-4` is below user space.
    EbpBelowUserBase,
    /// ESP misaligned, EBP a good frame: ESP is not read.
    EspMisaligned,
    /// ESP in kernel memory, EBP a good frame.
    EspKernel,
    /// ESP unmapped, EBP a good frame.
    EspUnmapped,
    /// A good frame whose return address `[EBP-4]` is kernel code: SYSEXIT
    /// goes there in ring 3 and the fetch page-faults in user mode.
    ReturnToKernel,
    /// EBP = 0: `EBP-4` wraps below user space.
    EbpNull,
}

/// What a data-segment case loads into DS and ES before the entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DataSelector {
    /// The null selector: any access through it would #GP.
    Null,
    /// The user code selector: a readable code segment loads into DS and
    /// ES (SDM Vol. 3A §5.6) and makes them read-only.
    ReadOnly,
}

/// What precedes an `icebp` or `int $1` ([`Act::Icebp`], [`Act::IntOne`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Before {
    Nothing,
    /// TF set by the POPF right before.
    Tf,
    /// `mov %ss` right before.
    MovSs,
    /// TF, then `mov %ss` right before.
    TfMovSs,
    /// TF, then `pop %ss` right before.
    TfPopSs,
}

/// Whose first instruction [`Act::InitialState`] checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Start {
    /// The task's (the program's `_start`).
    Task,
    /// A new thread's.
    Thread,
    /// A forked child's (the instruction after its `int $0x80`).
    Fork,
}

/// Who shares the CPU in the FS/GS and x87 cases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sharer {
    /// A second thread of the process, same CPU, same priority: the two
    /// take turns through `yield`.
    Thread,
    /// A forked child, which runs while the parent waits for it.
    Fork,
}

/// The x87 cases ([`Act::X87`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum X87 {
    /// Loads a value into every x87 register and exits: the next case's
    /// task must not see them.
    Leave,
    /// At the task's start: FNINIT's control word, every register empty
    /// and zero.
    Fresh,
    /// Registers of its own on both sides of [`Sharer`].
    Kept(Sharer),
}

/// The pipe cases ([`Act::PipeReuse`]): a thread sleeps in a pipe call
/// while another closes every descriptor of that pipe and at once makes a
/// new pipe, which takes the freed slot (the pool hands out the lowest
/// free one), and uses it. The sleeper must come back with `EBADF` (its
/// descriptor was closed), and the new pipe must hold exactly its own
/// bytes: a sleeper only ever sees the pipe it slept on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PipeReuse {
    /// A second thread sleeps in `read` of an empty pipe; the first makes
    /// the new pipe and writes into it.
    Read,
    /// A second thread sleeps in `write` to a full pipe; the first makes
    /// the new pipe, writes into it and reads it back.
    Write,
    /// A forked child's second thread sleeps in `read`, and the child's
    /// first thread closes the child's descriptor; pid 1 then closes its
    /// own, makes the new pipe and writes into it.
    Process,
}

/// Where ESP points for [`Act::TfSyscallEsp`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TfStack {
    /// 4 bytes above the stack's lowest byte: below it is the guard page.
    AboveGuard,
    /// In the program's read-only data.
    ReadOnly,
}

/// The pointer a system call gets in an errno case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pointer {
    Null,
    /// The kernel's first megabyte (kernel code).
    Kernel,
    /// Between the program and its stack, never mapped.
    Unmapped,
    /// 16 bytes below 4 GiB (with a length that carries past it).
    Wrapping,
    /// The first byte of user space's end, `USER_TOP`.
    AboveUser,
    /// Two bytes below USER_STACK_TOP: the rest of the buffer is unmapped.
    StraddlesStackTop,
    /// Two bytes below the stack's lowest page: they lie in the guard page.
    StraddlesGuard,
    /// The program's read-only data.
    ReadOnly,
    /// A writable buffer of the program (for the length cases).
    Writable,
}

impl Pointer {
    /// The address, given the program's own read-only and writable buffers.
    pub fn address(self, read_only: u32, writable: u32) -> u32 {
        match self {
            Pointer::Null => 0,
            Pointer::Kernel => KERNEL_ADDRESS,
            Pointer::Unmapped => UNMAPPED_USER_ADDRESS,
            Pointer::Wrapping => 0xffff_fff0,
            Pointer::AboveUser => USER_TOP,
            Pointer::StraddlesStackTop => USER_STACK_TOP - 2,
            Pointer::StraddlesGuard => USER_STACK_TOP - USER_STACK_SIZE - 2,
            Pointer::ReadOnly => read_only,
            Pointer::Writable => writable,
        }
    }
}

/// An address inside user space that no program maps: between a program
/// (linked at USER_BASE, far smaller than this) and its stack.
pub const UNMAPPED_USER_ADDRESS: u32 = 0x7000_0000;
/// An address in the kernel's identity map (its code starts at 1 MiB).
pub const KERNEL_ADDRESS: u32 = 0x0010_0000;
/// The page just below the user stack, never mapped.
pub const STACK_GUARD: u32 = USER_STACK_TOP - USER_STACK_SIZE - PAGE_SIZE;

/// The instruction after a MOV SS with TF set ([`Act::HeldOnto`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeldOnto {
    /// #BP through its DPL-3 gate.
    Int3,
    /// With OF set: #OF's gate is DPL 0, so #GP.
    Into,
    /// `int $0x20` (the timer's DPL-0 gate): #GP.
    IntKernelGate,
}

/// A system call in an errno case: `(number, a1, a2, a3)`, where
/// [`PTR`] in an argument stands for the case's [`Pointer`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Call {
    pub nr: u32,
    pub args: [u32; 3],
    pub ptr: Pointer,
}

/// Placeholder for "the pointer" in [`Call::args`].
pub const PTR: u32 = 0xdead_0001;

/// What a case does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Act {
    WriteKernel,
    ReadUnmapped,
    JumpKernel,
    StackOverflow,
    Privileged(Privileged),
    Ud2,
    DivideError,
    Int3,
    /// TF set just before the entry instruction.
    TfBefore(Mechanism),
    /// This EFLAGS bit (DF, AC or NT) set just before the entry: the call
    /// must give the right result, the kernel must not run with it (its
    /// copies use `rep movsb`), and the user must get it back.
    FlagBefore(Mechanism, u32),
    /// `mov %ss` (or `pop %ss` when `pop`) immediately before the entry
    /// instruction, with TF set too when `tf`.
    SsBefore {
        mech: Mechanism,
        pop: bool,
        tf: bool,
    },
    /// TF set, then `mov %ss` right before an instruction that raises an
    /// exception from ring 3: the single-step trap the MOV SS held off is
    /// delivered, on a real CPU, at the exception stub's first instruction
    /// in ring 0 (SDM Vol. 3A §6.8.3); the kernel must go on into the
    /// exception, which ends the task.
    HeldOnto(HeldOnto),
    /// sysenter with a chosen EBP/ESP.
    Sysenter(SysenterStack),
    /// AMD syscall with ESP at this address (the kernel reads argument 2 at [ESP]).
    SyscallEsp(u32),
    /// AMD syscall with TF set and ESP where a ring-0 trap frame cannot
    /// go. SYSCALL switches no stack, so the single-step trap at the
    /// kernel's first instruction must not be delivered on the user's ESP.
    /// (TF can only be set by a POPF reading `[ESP]` right before, so ESP
    /// is a readable word + 4: a kernel or unmapped ESP cannot carry TF.)
    TfSyscallEsp(TfStack),
    /// int 0x80 or the call gate with ESP at this address: the CPU pushes
    /// the return frame on the kernel stack, never on the user's.
    BadEsp(Mechanism, u32),
    /// One call through every usable mechanism.
    Call(Call),
    /// DS and ES loaded with this selector, then getpid through the
    /// mechanism with only SS-relative operands: the right result, and DS
    /// and ES given back as loaded.
    DataSegments(Mechanism, DataSelector),
    /// TF set by the POPF right before a sysenter whose EBP is bad: the
    /// traced entry and the bad-stack exit compose.
    TfSysenter(SysenterStack),
    /// TF set by a POPF that leaves ESP at the top of the user stack, then
    /// syscall: argument 2 would be read from above the stack.
    TfSyscallStackTop,
    /// `icebp` (0xf1) from ring 3: a #DB that ignores the gate's DPL.
    Icebp(Before),
    /// `int $1` from ring 3: the #DB gate's DPL is 0, so #GP.
    IntOne(Before),
    /// TF and this flag set together right before the entry.
    TfWith(Mechanism, u32),
    /// Every register and EFLAGS at a first instruction, as Linux's
    /// `check_initial_reg_state` asserts.
    InitialState(Start),
    /// FS and GS of their own on both sides of [`Sharer`].
    FsGs(Sharer),
    /// The x87 registers across tasks, threads and processes.
    X87(X87),
    /// These EFLAGS bits set right before a floor entry (the cheapest
    /// round trip, no hygiene): the kernel lives, the user goes on.
    Floor(Mechanism, u32),
    /// A pipe closed and its slot reused under a sleeping call.
    PipeReuse(PipeReuse),
}

const fn case(name: &'static str, act: Act, expect: Expect) -> Case {
    Case { name, act, expect }
}

/// One hostile case.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Case {
    pub name: &'static str,
    pub act: Act,
    pub expect: Expect,
}

const GP: Expect = Expect::Fault(13);
const OK: Expect = Expect::Exit(0);
const ICEBP: Expect = Expect::FaultEither(1, 6);
const PF: Expect = Expect::Fault(14);
const DB: Expect = Expect::Fault(1);
use eflags::{AC, DF, ID, NT, TF};
use Mechanism::{CallGate, Int80, Syscall, Sysenter};

const fn call(nr: u32, args: [u32; 3], ptr: Pointer) -> Act {
    Act::Call(Call { nr, args, ptr })
}
const fn privileged(p: Privileged) -> Act {
    Act::Privileged(p)
}
const NULL_FD: u32 = crate::syscall::fd::NULL;
const RING_FD: u32 = crate::syscall::fd::RING;
const STDIN_FD: u32 = crate::syscall::fd::STDIN;

pub const FAULT_CASES: &[Case] = &[
    // Memory the user may not touch.
    case("write to kernel memory (#PF)", Act::WriteKernel, PF),
    case("read of an unmapped page (#PF)", Act::ReadUnmapped, PF),
    case("jump into kernel code (#PF)", Act::JumpKernel, PF),
    case(
        "user stack overflow into the guard page (#PF)",
        Act::StackOverflow,
        PF,
    ),
    // Privileged instructions: CPL 3 > IOPL 0, or CPL-0-only.
    case("cli (#GP)", privileged(Privileged::Cli), GP),
    case("sti (#GP)", privileged(Privileged::Sti), GP),
    case("hlt (#GP)", privileged(Privileged::Hlt), GP),
    case("in from a port (#GP)", privileged(Privileged::InPort), GP),
    case("out to a port (#GP)", privileged(Privileged::OutPort), GP),
    case("lgdt (#GP)", privileged(Privileged::Lgdt), GP),
    case("lidt (#GP)", privileged(Privileged::Lidt), GP),
    case("ltr (#GP)", privileged(Privileged::Ltr), GP),
    case("mov to CR0 (#GP)", privileged(Privileged::MovToCr0), GP),
    case("mov from CR0 (#GP)", privileged(Privileged::MovFromCr0), GP),
    case("mov to CR3 (#GP)", privileged(Privileged::MovToCr3), GP),
    case("mov to DR7 (#GP)", privileged(Privileged::MovToDr7), GP),
    case("clts (#GP)", privileged(Privileged::Clts), GP),
    case("wbinvd (#GP)", privileged(Privileged::Wbinvd), GP),
    case(
        "rdmsr (#GP; #UD without MSRs)",
        privileged(Privileged::Rdmsr),
        Expect::FaultEither(13, 6),
    ),
    case(
        "wrmsr (#GP; #UD without MSRs)",
        privileged(Privileged::Wrmsr),
        Expect::FaultEither(13, 6),
    ),
    case("invlpg (#GP)", privileged(Privileged::Invlpg), GP),
    case(
        "load the kernel data selector into DS (#GP)",
        privileged(Privileged::LoadKernelDs),
        GP,
    ),
    case(
        "far jump to the kernel code selector (#GP)",
        privileged(Privileged::FarJumpKernelCode),
        GP,
    ),
    case(
        "iret to ring 0 (#GP)",
        privileged(Privileged::IretToRing0),
        GP,
    ),
    case(
        "int to a DPL-0 vector (#GP)",
        privileged(Privileged::IntDplZero),
        GP,
    ),
    case(
        "int to the double-fault task gate (#GP)",
        privileged(Privileged::IntTaskGate),
        GP,
    ),
    // Exceptions the user raises itself.
    case("ud2 (#UD)", Act::Ud2, Expect::Fault(6)),
    case("divide by zero (#DE)", Act::DivideError, Expect::Fault(0)),
    case("int3 (#BP)", Act::Int3, Expect::Fault(3)),
    // EFLAGS before an entry. TF: the kernel survives the trap (at the
    // entry's first instruction for sysenter, the call gate and syscall,
    // which do not clear TF) and the user single-steps on after the return.
    case(
        "TF set before sysenter (#DB after the return)",
        Act::TfBefore(Sysenter),
        DB,
    ),
    case(
        "TF set before int 0x80 (#DB after the return)",
        Act::TfBefore(Int80),
        DB,
    ),
    case(
        "TF set before the call gate (#DB after the return)",
        Act::TfBefore(CallGate),
        DB,
    ),
    case(
        "TF set before syscall (#DB after the return)",
        Act::TfBefore(Syscall),
        DB,
    ),
    // DF, AC, NT: right result, flags given back (sysenter and syscall
    // return through IRET when the saved flags hold them).
    case(
        "DF set before int 0x80: right result, DF given back",
        Act::FlagBefore(Int80, DF),
        Expect::Exit(0),
    ),
    case(
        "AC set before int 0x80: right result, AC given back",
        Act::FlagBefore(Int80, AC),
        Expect::Exit(0),
    ),
    case(
        "NT set before int 0x80: right result, NT given back",
        Act::FlagBefore(Int80, NT),
        Expect::Exit(0),
    ),
    case(
        "DF set before sysenter: right result, DF given back",
        Act::FlagBefore(Sysenter, DF),
        Expect::Exit(0),
    ),
    case(
        "AC set before sysenter: right result, AC given back",
        Act::FlagBefore(Sysenter, AC),
        Expect::Exit(0),
    ),
    case(
        "NT set before sysenter: right result, NT given back",
        Act::FlagBefore(Sysenter, NT),
        Expect::Exit(0),
    ),
    case(
        "DF set before the call gate: right result, DF given back",
        Act::FlagBefore(CallGate, DF),
        Expect::Exit(0),
    ),
    case(
        "AC set before the call gate: right result, AC given back",
        Act::FlagBefore(CallGate, AC),
        Expect::Exit(0),
    ),
    case(
        "NT set before the call gate: right result, NT given back",
        Act::FlagBefore(CallGate, NT),
        Expect::Exit(0),
    ),
    case(
        "DF set before syscall: right result, DF given back",
        Act::FlagBefore(Syscall, DF),
        Expect::Exit(0),
    ),
    case(
        "AC set before syscall: right result, AC given back",
        Act::FlagBefore(Syscall, AC),
        Expect::Exit(0),
    ),
    case(
        "NT set before syscall: right result, NT given back",
        Act::FlagBefore(Syscall, NT),
        Expect::Exit(0),
    ),
    // MOV SS / POP SS hold off interrupts and debug traps for one
    // instruction (SDM Vol. 3A §6.8.3). With nothing pending the entry is
    // an ordinary call; with TF set, the trap the MOV SS held off lands
    // where TF alone would put it.
    case(
        "mov ss right before int 0x80: an ordinary call",
        Act::SsBefore {
            mech: Int80,
            pop: false,
            tf: false,
        },
        Expect::Exit(0),
    ),
    case(
        "pop ss right before int 0x80: an ordinary call",
        Act::SsBefore {
            mech: Int80,
            pop: true,
            tf: false,
        },
        Expect::Exit(0),
    ),
    case(
        "mov ss right before sysenter: an ordinary call",
        Act::SsBefore {
            mech: Sysenter,
            pop: false,
            tf: false,
        },
        Expect::Exit(0),
    ),
    case(
        "pop ss right before sysenter: an ordinary call",
        Act::SsBefore {
            mech: Sysenter,
            pop: true,
            tf: false,
        },
        Expect::Exit(0),
    ),
    case(
        "TF and mov ss right before int 0x80 (#DB after the return)",
        Act::SsBefore {
            mech: Int80,
            pop: false,
            tf: true,
        },
        DB,
    ),
    case(
        "TF and pop ss right before sysenter (#DB after the return)",
        Act::SsBefore {
            mech: Sysenter,
            pop: true,
            tf: true,
        },
        DB,
    ),
    // The same held-off trap onto an instruction that raises an exception:
    // QEMU delivers the exception (its TCG does not keep the trap pending
    // across the delivery); a real CPU traps at the stub's first
    // instruction in ring 0, which the kernel resumes. Either way the
    // exception ends the task (or the #DB, where a CPU delivers it in ring 3).
    case(
        "TF and mov ss right before int3 (#BP, not a kernel #DB)",
        Act::HeldOnto(HeldOnto::Int3),
        Expect::FaultEither(3, 1),
    ),
    case(
        "TF and mov ss right before into with OF set (#GP, not a kernel #DB)",
        Act::HeldOnto(HeldOnto::Into),
        Expect::FaultEither(13, 1),
    ),
    case(
        "TF and mov ss right before int through a DPL-0 gate (#GP, not a kernel #DB)",
        Act::HeldOnto(HeldOnto::IntKernelGate),
        Expect::FaultEither(13, 1),
    ),
    // sysenter's stack: the kernel reads [EBP-4, EBP+4) only.
    case(
        "sysenter with EBP in the kernel",
        Act::Sysenter(SysenterStack::EbpKernel),
        Expect::BadStack,
    ),
    case(
        "sysenter with EBP unmapped",
        Act::Sysenter(SysenterStack::EbpUnmapped),
        Expect::BadStack,
    ),
    case(
        "sysenter with EBP misaligned: the call works",
        Act::Sysenter(SysenterStack::EbpMisaligned),
        Expect::Exit(0),
    ),
    case(
        "sysenter with EBP on the stack's last word: the call works",
        Act::Sysenter(SysenterStack::EbpLastWord),
        Expect::Exit(0),
    ),
    case(
        "sysenter with EBP at the top of the user stack",
        Act::Sysenter(SysenterStack::EbpStackTop),
        Expect::BadStack,
    ),
    case(
        "sysenter with EBP straddling the top of user space",
        Act::Sysenter(SysenterStack::EbpStraddlesUserTop),
        Expect::BadStack,
    ),
    case(
        "sysenter with EBP wrapping past 4 GiB",
        Act::Sysenter(SysenterStack::EbpWraps),
        Expect::BadStack,
    ),
    case(
        "sysenter with EBP-4 below user space",
        Act::Sysenter(SysenterStack::EbpBelowUserBase),
        Expect::BadStack,
    ),
    case(
        "sysenter with ESP misaligned: the call works",
        Act::Sysenter(SysenterStack::EspMisaligned),
        Expect::Exit(0),
    ),
    case(
        "sysenter with ESP in the kernel: the call works",
        Act::Sysenter(SysenterStack::EspKernel),
        Expect::Exit(0),
    ),
    case(
        "sysenter with ESP unmapped: the call works",
        Act::Sysenter(SysenterStack::EspUnmapped),
        Expect::Exit(0),
    ),
    case(
        "sysenter returning to kernel code (#PF in ring 3)",
        Act::Sysenter(SysenterStack::ReturnToKernel),
        PF,
    ),
    // AMD syscall reads argument 2 at the user's [ESP].
    case(
        "syscall with ESP in the kernel",
        Act::SyscallEsp(KERNEL_ADDRESS),
        Expect::BadStack,
    ),
    case(
        "syscall with ESP unmapped",
        Act::SyscallEsp(UNMAPPED_USER_ADDRESS),
        Expect::BadStack,
    ),
    case(
        "syscall with ESP at the top of the user stack",
        Act::SyscallEsp(USER_STACK_TOP),
        Expect::BadStack,
    ),
    case(
        "TF set before syscall, ESP just above the guard page (#DB after the return)",
        Act::TfSyscallEsp(TfStack::AboveGuard),
        DB,
    ),
    case(
        "TF set before syscall, ESP in read-only memory (#DB after the return)",
        Act::TfSyscallEsp(TfStack::ReadOnly),
        DB,
    ),
    // A bad ESP is harmless to the slow entries: the CPU switches to the
    // TSS's ring-0 stack before it pushes anything.
    case(
        "call gate with ESP in the kernel: the call works",
        Act::BadEsp(CallGate, KERNEL_ADDRESS),
        Expect::Exit(0),
    ),
    case(
        "call gate with ESP unmapped: the call works",
        Act::BadEsp(CallGate, UNMAPPED_USER_ADDRESS),
        Expect::Exit(0),
    ),
    case(
        "int 0x80 with ESP in the kernel: the call works",
        Act::BadEsp(Int80, KERNEL_ADDRESS),
        Expect::Exit(0),
    ),
    case(
        "int 0x80 with ESP unmapped: the call works",
        Act::BadEsp(Int80, UNMAPPED_USER_ADDRESS),
        Expect::Exit(0),
    ),
    // Numbers and pointers: an errno, never a kernel fault.
    case(
        "number one past the table (ENOSYS)",
        call(nr::COUNT, [0; 3], Pointer::Null),
        Expect::Errno(errno::ENOSYS),
    ),
    case(
        "huge number 0x7fffffff (ENOSYS)",
        call(0x7fff_ffff, [0; 3], Pointer::Null),
        Expect::Errno(errno::ENOSYS),
    ),
    case(
        "negative number -1 (ENOSYS)",
        call(u32::MAX, [0; 3], Pointer::Null),
        Expect::Errno(errno::ENOSYS),
    ),
    case(
        "write from a null pointer (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 4], Pointer::Null),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write from kernel memory (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 4], Pointer::Kernel),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write from an unmapped page (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 4], Pointer::Unmapped),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write from a range wrapping past 4 GiB (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 0x20], Pointer::Wrapping),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write from above user space (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 4], Pointer::AboveUser),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write from a buffer straddling the stack top (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 4], Pointer::StraddlesStackTop),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write from a buffer straddling the guard page (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 4], Pointer::StraddlesGuard),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write with length 0xffffffff (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, u32::MAX], Pointer::Writable),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write with length 0x7fffffff (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 0x7fff_ffff], Pointer::Writable),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write with length 16 MiB past the program (EFAULT)",
        call(nr::WRITE, [NULL_FD, PTR, 16 << 20], Pointer::Writable),
        Expect::Errno(errno::EFAULT),
    ),
    // The process calls: a status pointer the kernel may not write, flags
    // it does not know, no child, a break outside the heap.
    case(
        "waitpid storing into kernel memory (EFAULT)",
        call(nr::WAITPID, [u32::MAX, PTR, 0], Pointer::Kernel),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "waitpid storing into read-only memory (EFAULT)",
        call(nr::WAITPID, [u32::MAX, PTR, 0], Pointer::ReadOnly),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "waitpid with unknown flags (EINVAL)",
        call(nr::WAITPID, [u32::MAX, PTR, 0x8000_0000], Pointer::Null),
        Expect::Errno(errno::EINVAL),
    ),
    case(
        "waitpid without a child (ECHILD)",
        call(nr::WAITPID, [u32::MAX, PTR, 0], Pointer::Null),
        Expect::Errno(errno::ECHILD),
    ),
    case(
        "sbrk below the heap's base (ENOMEM)",
        call(nr::SBRK, [0x8000_0000, 0, 0], Pointer::Null),
        Expect::Errno(errno::ENOMEM),
    ),
    // The same checks where the kernel would really copy: into the ring
    // buffer, and cpuinfo's copy out.
    case(
        "write to the ring from an unmapped page (EFAULT)",
        call(nr::WRITE, [RING_FD, PTR, 16], Pointer::Unmapped),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write to the ring from a range wrapping past 4 GiB (EFAULT)",
        call(nr::WRITE, [RING_FD, PTR, 0x20], Pointer::Wrapping),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "cpuinfo into an unmapped page (EFAULT)",
        call(nr::CPUINFO, [PTR, 4096, 0], Pointer::Unmapped),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "cpuinfo into read-only memory (EFAULT)",
        call(nr::CPUINFO, [PTR, 4096, 0], Pointer::ReadOnly),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "write of 0 bytes from kernel memory returns 0",
        call(nr::WRITE, [NULL_FD, PTR, 0], Pointer::Kernel),
        Expect::Exit(0),
    ),
    case(
        "read into read-only memory (EFAULT)",
        call(nr::READ, [STDIN_FD, PTR, 4], Pointer::ReadOnly),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "read into kernel memory (EFAULT)",
        call(nr::READ, [RING_FD, PTR, 4], Pointer::Kernel),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "cpuinfo into kernel memory (EFAULT)",
        call(nr::CPUINFO, [PTR, 4096, 0], Pointer::Kernel),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "cpuinfo into a too-short buffer (EINVAL)",
        call(nr::CPUINFO, [PTR, 4, 0], Pointer::Writable),
        Expect::Errno(errno::EINVAL),
    ),
    case(
        "write to a bad descriptor (EBADF)",
        call(nr::WRITE, [99, PTR, 4], Pointer::Writable),
        Expect::Errno(errno::EBADF),
    ),
    case(
        "entry_floor for no mechanism (EINVAL)",
        call(nr::ENTRY_FLOOR, [7, 0, 0], Pointer::Null),
        Expect::Errno(errno::EINVAL),
    ),
    // Counts that reach a kernel loop are bounded (issue 17: 2^32 - 1
    // lookups held the scheduler lock with interrupts masked for 90 s).
    case(
        "lookup_bench of 2^32 - 1 lookups (EINVAL, not a hang)",
        call(nr::LOOKUP_BENCH, [u32::MAX, 0, 0], Pointer::Null),
        Expect::Errno(errno::EINVAL),
    ),
    case(
        "lookup_bench one past its bound (EINVAL)",
        call(
            nr::LOOKUP_BENCH,
            [crate::syscall::LOOKUP_BENCH_MAX + 1, 0, 0],
            Pointer::Null,
        ),
        Expect::Errno(errno::EINVAL),
    ),
    // The record call: a body from kernel memory, and one too long.
    case(
        "record from kernel memory (EFAULT)",
        call(nr::RECORD, [PTR, 16, 0], Pointer::Kernel),
        Expect::Errno(errno::EFAULT),
    ),
    case(
        "record longer than any record (EINVAL)",
        call(
            nr::RECORD,
            [PTR, crate::report::MAX_USER_RECORD as u32 + 1, 0],
            Pointer::Writable,
        ),
        Expect::Errno(errno::EINVAL),
    ),
    // Issue 33: what Linux's x86 selftests probe that the cases above did
    // not (README, "The hostile suite", maps each group to its selftest).
    //
    // DS and ES null or read-only at each entry: no kernel access through
    // them before they are reloaded, and the user's selectors given back.
    case(
        "DS and ES null before int 0x80: kept",
        Act::DataSegments(Int80, DataSelector::Null),
        OK,
    ),
    case(
        "DS and ES null before sysenter: kept",
        Act::DataSegments(Sysenter, DataSelector::Null),
        OK,
    ),
    case(
        "DS and ES null before the call gate: kept",
        Act::DataSegments(CallGate, DataSelector::Null),
        OK,
    ),
    case(
        "DS and ES null before syscall: kept",
        Act::DataSegments(Syscall, DataSelector::Null),
        OK,
    ),
    case(
        "DS and ES read-only before int 0x80: kept",
        Act::DataSegments(Int80, DataSelector::ReadOnly),
        OK,
    ),
    case(
        "DS and ES read-only before sysenter: kept",
        Act::DataSegments(Sysenter, DataSelector::ReadOnly),
        OK,
    ),
    case(
        "DS and ES read-only before the call gate: kept",
        Act::DataSegments(CallGate, DataSelector::ReadOnly),
        OK,
    ),
    case(
        "DS and ES read-only before syscall: kept",
        Act::DataSegments(Syscall, DataSelector::ReadOnly),
        OK,
    ),
    // TF with a bad fast-entry stack: the debug task, the traced entry and
    // the bad-stack exit compose; the task ends as a bad stack.
    case(
        "sysenter with EBP 0",
        Act::Sysenter(SysenterStack::EbpNull),
        Expect::BadStack,
    ),
    case(
        "TF set before sysenter with EBP 0",
        Act::TfSysenter(SysenterStack::EbpNull),
        Expect::BadStack,
    ),
    case(
        "TF set before sysenter with EBP in the kernel",
        Act::TfSysenter(SysenterStack::EbpKernel),
        Expect::BadStack,
    ),
    case(
        "TF set before sysenter with EBP unmapped",
        Act::TfSysenter(SysenterStack::EbpUnmapped),
        Expect::BadStack,
    ),
    case(
        "TF set before syscall with ESP at the top of the user stack",
        Act::TfSyscallStackTop,
        Expect::BadStack,
    ),
    // ICEBP and int $1 from ring 3, alone, after TF, after MOV SS / POP SS.
    // Bochs runs ICEBP as the one-byte INT1, a #DB through the task gate
    // whatever its DPL; QEMU's TCG (7.2) decodes 0xf1 as #UD (its ICEBP is
    // compiled out), so either ends the task, never a kernel #DB.
    case(
        "icebp (#DB; #UD on QEMU)",
        Act::Icebp(Before::Nothing),
        ICEBP,
    ),
    case(
        "TF set before icebp (#DB; #UD on QEMU)",
        Act::Icebp(Before::Tf),
        ICEBP,
    ),
    case(
        "mov ss right before icebp (#DB; #UD on QEMU)",
        Act::Icebp(Before::MovSs),
        ICEBP,
    ),
    case(
        "TF and mov ss right before icebp (#DB; #UD on QEMU)",
        Act::Icebp(Before::TfMovSs),
        ICEBP,
    ),
    case(
        "TF and pop ss right before icebp (#DB; #UD on QEMU)",
        Act::Icebp(Before::TfPopSs),
        ICEBP,
    ),
    case("int $1 (#GP)", Act::IntOne(Before::Nothing), GP),
    case("TF set before int $1 (#GP)", Act::IntOne(Before::Tf), GP),
    case(
        "mov ss right before int $1 (#GP)",
        Act::IntOne(Before::MovSs),
        GP,
    ),
    case(
        "TF and mov ss right before int $1 (#GP, not a kernel #DB)",
        Act::IntOne(Before::TfMovSs),
        Expect::FaultEither(13, 1),
    ),
    case(
        "TF and pop ss right before int $1 (#GP, not a kernel #DB)",
        Act::IntOne(Before::TfPopSs),
        Expect::FaultEither(13, 1),
    ),
    // MOV SS / POP SS before the call gate and syscall.
    case(
        "mov ss right before the call gate: an ordinary call",
        Act::SsBefore {
            mech: CallGate,
            pop: false,
            tf: false,
        },
        OK,
    ),
    case(
        "pop ss right before the call gate: an ordinary call",
        Act::SsBefore {
            mech: CallGate,
            pop: true,
            tf: false,
        },
        OK,
    ),
    case(
        "TF and mov ss right before the call gate (#DB after the return)",
        Act::SsBefore {
            mech: CallGate,
            pop: false,
            tf: true,
        },
        DB,
    ),
    case(
        "mov ss right before syscall: an ordinary call",
        Act::SsBefore {
            mech: Syscall,
            pop: false,
            tf: false,
        },
        OK,
    ),
    case(
        "TF and pop ss right before syscall (#DB after the return)",
        Act::SsBefore {
            mech: Syscall,
            pop: true,
            tf: true,
        },
        DB,
    ),
    // NT and TF together through each mechanism; ID given back.
    case(
        "NT and TF set before int 0x80 (#DB after the return)",
        Act::TfWith(Int80, NT),
        DB,
    ),
    case(
        "NT and TF set before sysenter (#DB after the return)",
        Act::TfWith(Sysenter, NT),
        DB,
    ),
    case(
        "NT and TF set before the call gate (#DB after the return)",
        Act::TfWith(CallGate, NT),
        DB,
    ),
    case(
        "NT and TF set before syscall (#DB after the return)",
        Act::TfWith(Syscall, NT),
        DB,
    ),
    case(
        "ID set before int 0x80: right result, ID given back",
        Act::FlagBefore(Int80, ID),
        OK,
    ),
    case(
        "ID set before sysenter: right result, ID given back",
        Act::FlagBefore(Sysenter, ID),
        OK,
    ),
    case(
        "ID set before the call gate: right result, ID given back",
        Act::FlagBefore(CallGate, ID),
        OK,
    ),
    case(
        "ID set before syscall: right result, ID given back",
        Act::FlagBefore(Syscall, ID),
        OK,
    ),
    // Registers and EFLAGS at a first instruction.
    case(
        "a task's first instruction: registers zero, EFLAGS 0x202",
        Act::InitialState(Start::Task),
        OK,
    ),
    case(
        "a thread's first instruction: registers zero, EFLAGS 0x202",
        Act::InitialState(Start::Thread),
        OK,
    ),
    case(
        "a forked child's first instruction: the parent's registers, EAX 0",
        Act::InitialState(Start::Fork),
        OK,
    ),
    // FS and GS, which no entry saves, per thread and per process.
    case(
        "FS and GS per thread across yield through every mechanism",
        Act::FsGs(Sharer::Thread),
        OK,
    ),
    case(
        "FS and GS per process: inherited by fork, kept while the child runs",
        Act::FsGs(Sharer::Fork),
        OK,
    ),
    // The x87 registers: zero at a task's start (after a task that left
    // values: keep these two together), each thread's and process's own.
    case(
        "x87: a task leaves a value in every register",
        Act::X87(X87::Leave),
        OK,
    ),
    case(
        "x87: the next task starts with every register empty and zero",
        Act::X87(X87::Fresh),
        OK,
    ),
    case(
        "x87: threads sharing a CPU keep their own registers",
        Act::X87(X87::Kept(Sharer::Thread)),
        OK,
    ),
    case(
        "x87: inherited by fork, the parent's kept while the child runs",
        Act::X87(X87::Kept(Sharer::Fork)),
        OK,
    ),
    // TF and dirty flags against the floors: int 0x80's floor (IRET) gives
    // TF back; the others return with the kernel's EFLAGS minus the trap,
    // so TF is dropped (the x87 still works after the debug task set
    // CR0.TS); DF, AC and NT come back untouched.
    case(
        "TF set before the int 0x80 floor (#DB after the return)",
        Act::Floor(Int80, TF),
        DB,
    ),
    case(
        "TF set before the sysenter floor: dropped, the x87 usable after",
        Act::Floor(Sysenter, TF),
        OK,
    ),
    case(
        "TF set before the call gate floor: dropped, the x87 usable after",
        Act::Floor(CallGate, TF),
        OK,
    ),
    case(
        "TF set before the syscall floor: dropped, the x87 usable after",
        Act::Floor(Syscall, TF),
        OK,
    ),
    case(
        "DF, AC and NT set before the int 0x80 floor: given back",
        Act::Floor(Int80, DF | AC | NT),
        OK,
    ),
    case(
        "DF, AC and NT set before the sysenter floor: given back",
        Act::Floor(Sysenter, DF | AC | NT),
        OK,
    ),
    case(
        "DF, AC and NT set before the call gate floor: given back",
        Act::Floor(CallGate, DF | AC | NT),
        OK,
    ),
    case(
        "DF, AC and NT set before the syscall floor: given back",
        Act::Floor(Syscall, DF | AC | NT),
        OK,
    ),
    // Pipes and signals: a pipe's two descriptors stored into the kernel,
    // a kill to pid 0 (no process groups), an old handler stored into the
    // kernel. Nothing is made or changed before the refusal.
    case(
        "pipe storing its descriptors into kernel memory (EFAULT)",
        call(nr::PIPE, [PTR, 0, 0], Pointer::Kernel),
        Expect::Errno(errno::EFAULT),
    ),
    // A pipe closed under a sleeping call and its slot taken by a new pipe
    // at once: the sleeper gets EBADF, the new pipe keeps its own bytes.
    case(
        "pipe: a read asleep while its slot is reused gets EBADF, not the new pipe's bytes",
        Act::PipeReuse(PipeReuse::Read),
        OK,
    ),
    case(
        "pipe: a write asleep while its slot is reused gets EBADF, puts nothing in the new pipe",
        Act::PipeReuse(PipeReuse::Write),
        OK,
    ),
    case(
        "pipe: a child's read asleep while pid 1 reuses the slot never gets pid 1's bytes",
        Act::PipeReuse(PipeReuse::Process),
        OK,
    ),
    case(
        "kill to pid 0 (EINVAL)",
        call(
            nr::KILL,
            [0, crate::syscall::sig::SIGTERM, 0],
            Pointer::Null,
        ),
        Expect::Errno(errno::EINVAL),
    ),
    case(
        "sigaction storing the old handler into kernel memory (EFAULT)",
        call(
            nr::SIGACTION,
            [crate::syscall::sig::SIGUSR1, 0, PTR],
            Pointer::Kernel,
        ),
        Expect::Errno(errno::EFAULT),
    ),
];

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use crate::layout::USER_BASE;
    use std::collections::BTreeSet;

    #[test]
    fn names_are_unique_and_short() {
        let mut seen = BTreeSet::new();
        for c in FAULT_CASES {
            assert!(seen.insert(c.name), "duplicate case {:?}", c.name);
            // The kernel builds "user fault: NAME" in a 128-byte buffer.
            assert!(c.name.len() < 100, "{:?} is too long", c.name);
        }
    }

    #[test]
    fn every_errno_case_is_a_call() {
        for c in FAULT_CASES {
            if let Expect::Errno(e) = c.expect {
                assert!(matches!(c.act, Act::Call(_)), "{}", c.name);
                assert!(e > 0 && e != EXIT_SKIPPED, "{}", c.name);
            }
            if let Act::Call(k) = c.act {
                assert_ne!(k.nr, nr::EXIT, "{}", c.name);
            }
        }
    }

    #[test]
    fn pointers_are_where_their_names_say() {
        let ro = USER_BASE + 0x1000;
        let rw = USER_BASE + 0x2000;
        assert!(Pointer::Kernel.address(ro, rw) < USER_BASE);
        assert!(Pointer::AboveUser.address(ro, rw) >= USER_TOP);
        let g = Pointer::StraddlesGuard.address(ro, rw);
        assert!((STACK_GUARD..STACK_GUARD + PAGE_SIZE).contains(&g));
        assert!(Pointer::Wrapping
            .address(ro, rw)
            .checked_add(0x20)
            .is_none());
        let u = Pointer::Unmapped.address(ro, rw);
        assert!(u > USER_BASE + (16 << 20) && u < STACK_GUARD);
    }

    #[test]
    fn expectations_match() {
        assert!(Expect::FaultEither(13, 6).matches_fault(6));
        assert!(!Expect::Fault(13).matches_fault(6));
        assert_eq!(Expect::Errno(14).exit_code(), Some(14));
        assert_eq!(Expect::BadStack.exit_code(), None);
    }
}
