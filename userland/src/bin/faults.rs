//! The hostile user suite, one act per run: the argument is an index into
//! `abi::cases::FAULT_CASES`, whose table says how the run must end. The
//! kernel runs every case as a fresh task and checks that.
//!
//! Exit statuses: 0 = every result this case checks came out right (and the
//! expected errno for the errno cases); [`EXIT_SKIPPED`] = this CPU lacks
//! the mechanism; 1 = the act should have ended the task and did not;
//! 3 = no such case; 90-92 = a check failed (a line says which).
#![no_std]
#![no_main]

use core::arch::{asm, global_asm};

use userland::abi::cases::eflags::{self, AC, DF, HOSTILE, ID, IF, NT, RESERVED_1, TF};
use userland::abi::cases::{
    Act, Before, Call, DataSelector, HeldOnto, PipeReuse, Privileged, Sharer, Start, SysenterStack,
    TfStack, EXIT_SKIPPED, FAULT_CASES, KERNEL_ADDRESS, PTR, UNMAPPED_USER_ADDRESS, X87,
};
use userland::abi::layout::{selector, USER_BASE, USER_STACK_SIZE, USER_STACK_TOP, USER_TOP};
use userland::abi::syscall::{argsum, decode, fd, nr, CpuInfo, ARGSUM_PROBE};
use userland::abi::Mechanism;
use userland::{capture_state, flagged, println, sys, threads, State};

/// The act should have ended the task but it came back.
const EXIT_NOT_ENDED: i32 = 1;
const EXIT_NO_SUCH_CASE: i32 = 3;
/// A result this case checks was wrong.
const EXIT_WRONG: i32 = 90;
/// The mechanisms gave different results for the same call.
const EXIT_DISAGREE: i32 = 91;
/// An errno case returned a positive value.
const EXIT_POSITIVE: i32 = 92;

/// Arguments whose `argsum` proves each one arrived in its place.
const ARGS: [u32; 6] = ARGSUM_PROBE;

/// Read-only data for the pointer cases.
static READ_ONLY: [u8; 16] = *b"read-only buffer";
/// Writable memory for the pointer cases and for sysenter frames.
static mut WRITABLE: [u32; 32] = [0; 32];
/// A descriptor-table operand for lgdt/lidt (never loaded: they #GP).
static mut TABLE: [u16; 4] = [0; 4];

// Saved and observed stack pointers for the acts that move ESP away.
#[unsafe(no_mangle)]
static mut TB_HOSTILE_SAVED_ESP: u32 = 0;
#[unsafe(no_mangle)]
static mut TB_HOSTILE_RET_ESP: u32 = 0;

fn writable() -> u32 {
    (&raw mut WRITABLE) as u32
}

/// PUSHF, TF or-ed in, POPF: the single-step trap then comes after the
/// instruction that follows the POPF (SDM Vol. 3A §17.3.1.4). The asm block
/// passes `tf = const TF`.
macro_rules! set_tf {
    () => {
        "pushfl\n orl ${tf}, (%esp)\n popfl"
    };
}

/// A sysenter in the frame the library's stub builds, with the
/// instructions `[before]` right ahead of it, then the block's operands:
/// EBP kept (an asm block may not name it), ECX, EDX and EBP saved, EBP
/// pointing at the saved EBP and the return address pushed, so the kernel
/// finds the return EIP at [EBP-4]; all of it popped after the return.
macro_rules! sysenter_after {
    ([$($before:expr),*], $($operands:tt)*) => {
        asm!(
            "pushl %ebp",
            "pushl %ecx",
            "pushl %edx",
            "pushl %ebp",
            "movl %esp, %ebp",
            "pushl $1f",
            $($before,)*
            "sysenter",
            "1:",
            "popl %ebp",
            "popl %edx",
            "popl %ecx",
            "popl %ebp",
            $($operands)*
        )
    };
}

/// The instructions `[before]`, then the entry through mechanism `$m` the
/// way the library's stubs make it, then the block's operands (AT&T syntax
/// is added): int 0x80 and the call gate with a NOP after them (where a
/// trap held off past the entry lands), sysenter in its stub's frame
/// ([`sysenter_after`]), syscall with ECX (its return EIP) saved around it.
macro_rules! through {
    ($m:expr, [$($before:expr),*], $($operands:tt)*) => {
        match $m {
            Mechanism::Sysenter => sysenter_after!(
                [$($before),*],
                $($operands)*
                options(att_syntax)
            ),
            Mechanism::Int80 => asm!(
                $($before,)*
                "int $0x80",
                "nop",
                $($operands)*
                options(att_syntax)
            ),
            Mechanism::CallGate => asm!(
                $($before,)*
                "lcall ${gate}, $0",
                "nop",
                gate = const selector::CALL_GATE,
                $($operands)*
                options(att_syntax)
            ),
            Mechanism::Syscall => asm!(
                "pushl %ecx",
                $($before,)*
                "syscall",
                "popl %ecx",
                $($operands)*
                out("ecx") _,
                options(att_syntax)
            ),
        }
    };
}

#[unsafe(no_mangle)]
extern "C" fn main(case: u32) -> i32 {
    let Some(c) = FAULT_CASES.get(case as usize) else {
        return EXIT_NO_SUCH_CASE;
    };
    let info = sys::cpuinfo();
    match c.act {
        Act::WriteKernel => {
            // SAFETY: faults on purpose (a supervisor page); the kernel ends
            // the task, so nothing after it runs.
            unsafe { (KERNEL_ADDRESS as *mut u32).write_volatile(1) }
        }
        Act::ReadUnmapped => {
            // SAFETY: faults on purpose (nothing is mapped there); as above.
            unsafe { (UNMAPPED_USER_ADDRESS as *const u32).read_volatile() };
        }
        Act::JumpKernel => {
            // SAFETY: the fetch faults on purpose (supervisor code); as above.
            unsafe { asm!("jmp *{}", in(reg) KERNEL_ADDRESS, options(att_syntax)) }
        }
        Act::StackOverflow => {
            #[allow(unconditional_recursion)]
            fn deeper(n: u32) -> u32 {
                let pad = core::hint::black_box([n; 256]);
                deeper(pad[3] + 1) + pad[0]
            }
            deeper(0);
        }
        Act::Privileged(p) => privileged(p),
        // SAFETY: raises #UD on purpose; the kernel ends the task.
        Act::Ud2 => unsafe { asm!("ud2") },
        // SAFETY: raises #DE on purpose (divides by zero); as above.
        Act::DivideError => unsafe {
            asm!("xorl %ecx, %ecx", "divl %ecx", out("eax") _, out("edx") _, out("ecx") _, options(att_syntax))
        },
        // SAFETY: raises #BP on purpose; as above.
        Act::Int3 => unsafe { asm!("int3") },
        Act::TfBefore(m) if !info.has(m) => return EXIT_SKIPPED,
        Act::TfBefore(m) => tf_before(m),
        Act::FlagBefore(m, _) if !info.has(m) => return EXIT_SKIPPED,
        Act::FlagBefore(m, flag) => return flag_before(m, flag),
        Act::SsBefore { mech, .. } if !info.has(mech) => return EXIT_SKIPPED,
        Act::SsBefore { mech, pop, tf } => return ss_before(mech, pop, tf),
        Act::HeldOnto(h) => held_onto(h),
        Act::Sysenter(_) if !info.has(Mechanism::Sysenter) => return EXIT_SKIPPED,
        Act::Sysenter(s) => return sysenter_stack(s),
        Act::SyscallEsp(_) | Act::TfSyscallEsp(_) if !info.has(Mechanism::Syscall) => {
            return EXIT_SKIPPED
        }
        Act::SyscallEsp(esp) => syscall_esp(esp),
        Act::TfSyscallEsp(at) => tf_syscall_esp(at),
        Act::BadEsp(m, _) if !info.has(m) => return EXIT_SKIPPED,
        Act::BadEsp(m, esp) => return bad_esp(m, esp),
        Act::Call(c) => return errno_case(&info, c),
        Act::DataSegments(m, _) if !info.has(m) => return EXIT_SKIPPED,
        Act::DataSegments(m, sel) => return data_segments(m, sel),
        Act::TfSysenter(_) if !info.has(Mechanism::Sysenter) => return EXIT_SKIPPED,
        Act::TfSysenter(s) => return sysenter_stack_traced(s, true),
        Act::TfSyscallStackTop if !info.has(Mechanism::Syscall) => return EXIT_SKIPPED,
        Act::TfSyscallStackTop => {
            let top = (USER_STACK_TOP - 4) as *mut u32;
            // SAFETY: the stack's last word (main's argument, read no more).
            unsafe { top.write_volatile(TF_FLAGS[0]) };
            tf_syscall_from(top as u32)
        }
        Act::Icebp(b) => icebp(b),
        Act::IntOne(b) => int_one(b),
        Act::TfWith(m, _) if !info.has(m) => return EXIT_SKIPPED,
        Act::TfWith(m, flag) => tf_with(m, flag),
        Act::InitialState(at) => return initial_state(at, case),
        Act::FsGs(Sharer::Thread) => return fs_gs_threads(&info),
        Act::FsGs(Sharer::Fork) => return fs_gs_fork(),
        Act::X87(_) if !has_x87(&info) => {
            println!("faults: no x87 on this CPU: nothing to carry over");
            return 0;
        }
        Act::X87(x) => return x87(x),
        Act::Floor(m, _) if !info.has(m) => return EXIT_SKIPPED,
        Act::Floor(m, flags) => return floor(&info, m, flags),
        Act::PipeReuse(how) => return pipe_reuse(how),
    }
    // Reaching here means the act did not end the task.
    EXIT_NOT_ENDED
}

/// Prints why a check failed; the status for it.
fn wrong(what: &str, got: u32, want: u32) -> i32 {
    println!("faults: {what}: got {got:#x}, expected {want:#x}");
    EXIT_WRONG
}

fn privileged(p: Privileged) {
    let table = (&raw mut TABLE) as u32;
    // SAFETY (every asm block below): each instruction is privileged and
    // raises #GP in ring 3 (or #UD where the CPU lacks it); the kernel ends
    // the task, so none of them takes effect and nothing after it runs.
    unsafe {
        match p {
            Privileged::Cli => asm!("cli"),
            Privileged::Sti => asm!("sti"),
            Privileged::Hlt => asm!("hlt"),
            Privileged::InPort => asm!("inb $0x60, %al", out("al") _, options(att_syntax)),
            Privileged::OutPort => asm!("outb %al, $0x80", in("al") 0u8, options(att_syntax)),
            Privileged::Lgdt => asm!("lgdt ({})", in(reg) table, options(att_syntax)),
            Privileged::Lidt => asm!("lidt ({})", in(reg) table, options(att_syntax)),
            Privileged::Ltr => asm!("ltr %ax", in("ax") selector::TSS, options(att_syntax)),
            Privileged::MovToCr0 => asm!("movl {}, %cr0", in(reg) 0x11u32, options(att_syntax)),
            Privileged::MovFromCr0 => asm!("movl %cr0, {}", out(reg) _, options(att_syntax)),
            Privileged::MovToCr3 => asm!("movl {}, %cr3", in(reg) 0u32, options(att_syntax)),
            Privileged::MovToDr7 => asm!("movl {}, %dr7", in(reg) 0u32, options(att_syntax)),
            Privileged::Clts => asm!("clts"),
            Privileged::Wbinvd => asm!("wbinvd"),
            // MSR 0x10 is the TSC.
            Privileged::Rdmsr => {
                asm!("rdmsr", in("ecx") 0x10u32, out("eax") _, out("edx") _)
            }
            Privileged::Wrmsr => asm!("wrmsr", in("ecx") 0x10u32, in("eax") 0u32, in("edx") 0u32),
            Privileged::Invlpg => asm!("invlpg ({})", in(reg) table, options(att_syntax)),
            Privileged::LoadKernelDs => asm!(
                "movw %ax, %ds",
                in("ax") selector::KERNEL_DATA,
                options(att_syntax)
            ),
            Privileged::FarJumpKernelCode => asm!(
                "ljmp ${cs}, ${eip}",
                cs = const selector::KERNEL_CODE,
                eip = const KERNEL_ADDRESS,
                options(att_syntax)
            ),
            // A same-level IRET frame (EIP, CS, EFLAGS) naming ring 0's CS.
            Privileged::IretToRing0 => asm!(
                "pushfl",
                "pushl ${cs}",
                "pushl $1f",
                "iret",
                "1:",
                cs = const selector::KERNEL_CODE,
                options(att_syntax)
            ),
            Privileged::IntDplZero => asm!("int $13"),
            Privileged::IntTaskGate => asm!("int $8"),
        }
    }
}

/// TF set by POPF right before the entry instruction: the single-step trap
/// comes after that instruction (SDM Vol. 3A §17.3.1.4), which for sysenter,
/// the call gate and syscall is the kernel's first instruction.
///
/// For int 0x80 and the call gate the program first prints where the NOP
/// after the entry instruction is, and the instruction after that NOP, so
/// the EIP the kernel reports for the #DB can be read against them
/// (docs/exercises.md, exercise 8; xtask's teaching test compares them).
fn tf_before(m: Mechanism) {
    let entry = match m {
        Mechanism::Int80 => Some((
            "int 0x80",
            tb_tf_int80 as unsafe extern "C" fn(),
            tb_tf_int80_nop as unsafe extern "C" fn() as usize,
            tb_tf_int80_next as unsafe extern "C" fn() as usize,
        )),
        Mechanism::CallGate => Some((
            "the call gate",
            tb_tf_gate as unsafe extern "C" fn(),
            tb_tf_gate_nop as unsafe extern "C" fn() as usize,
            tb_tf_gate_next as unsafe extern "C" fn() as usize,
        )),
        _ => None,
    };
    match entry {
        Some((what, f, nop, next)) => {
            println!("faults: TF before {what}: its nop at {nop:#010x}, the instruction after that nop at {next:#010x}");
            // SAFETY: the entry with TF set; the trap after the return ends
            // the task (the kernel gives TF back).
            unsafe { f() }
        }
        // SAFETY: the trap ends the task after the return (the kernel gives
        // TF back); the stack layout is the stubs'.
        None => unsafe { through!(m, [set_tf!()], tf = const TF, in("eax") nr::NULL,) },
    }
}

// `tb_tf_int80()` and `tb_tf_gate()`: a null call through int 0x80 or the
// call gate with TF set by the POPF right before it, the entry followed by
// a NOP (`_nop`) and another instruction (`_next`), as `through!` places
// them; never returns (the single-step trap ends the task). The labels
// are global so that `tf_before` can print their addresses.
global_asm!(
    r#"
    .pushsection .text.tb_tf_entries, "ax"
    .global tb_tf_int80, tb_tf_int80_nop, tb_tf_int80_next
tb_tf_int80:
    movl ${null}, %eax
    pushfl
    orl ${tf}, (%esp)
    popfl
    int $0x80
tb_tf_int80_nop:
    nop
tb_tf_int80_next:
    nop
    ret

    .global tb_tf_gate, tb_tf_gate_nop, tb_tf_gate_next
tb_tf_gate:
    movl ${null}, %eax
    pushfl
    orl ${tf}, (%esp)
    popfl
    lcall ${gate}, $0
tb_tf_gate_nop:
    nop
tb_tf_gate_next:
    nop
    ret
    .popsection
    "#,
    null = const nr::NULL,
    tf = const TF,
    gate = const selector::CALL_GATE,
    options(att_syntax)
);

unsafe extern "C" {
    fn tb_tf_int80();
    fn tb_tf_int80_nop();
    fn tb_tf_int80_next();
    fn tb_tf_gate();
    fn tb_tf_gate_nop();
    fn tb_tf_gate_next();
}

/// `flag` (DF, AC or NT) set before entering through `m`: the call must give
/// the right result and leave the argument registers alone, the user must
/// get the flag back (with IF on), and the kernel must not have run with
/// it: its copies use `rep movsb`, which DF would turn backwards, so a ring
/// round trip and a cpuinfo copy must land exactly where they belong.
fn flag_before(m: Mechanism, flag: u32) -> i32 {
    if flag == ID && sys::cpuinfo().signature == 0 {
        // Without CPUID, POPF cannot set ID (the bit is how CPUID is found).
        println!("faults: no CPUID, so ID cannot be set: nothing to give back");
        return 0;
    }
    let a = flagged::call(m, nr::ARGSUM, ARGS, flag);
    if a.eax != argsum(ARGS) {
        return wrong("argsum with the flag set", a.eax, argsum(ARGS));
    }
    if a.args() != ARGS {
        println!("faults: argument registers changed: {:#x?}", a.args());
        return EXIT_WRONG;
    }
    if a.eflags & (HOSTILE | ID) != flag || a.eflags & IF == 0 {
        return wrong("EFLAGS after the return", a.eflags, flag | IF);
    }

    let data = *b"0123456789abcdefghijklmnopqrstuv";
    let w = flagged::call(
        m,
        nr::WRITE,
        [fd::RING, data.as_ptr() as u32, 32, 0, 0, 0],
        flag,
    );
    // 32 bytes into the middle of 96: the rest must stay untouched.
    let mut back = [0xaau8; 96];
    let r = flagged::call(
        m,
        nr::READ,
        [fd::RING, back[32..].as_mut_ptr() as u32, 32, 0, 0, 0],
        flag,
    );
    if w.eax != 32 || r.eax != 32 {
        return wrong("ring write, read", w.eax << 16 | r.eax, 32 << 16 | 32);
    }
    let outside_ok = back[..32].iter().chain(&back[64..]).all(|&b| b == 0xaa);
    if back[32..64] != data || !outside_ok {
        println!(
            "faults: the ring read with {} set landed wrong",
            eflags::name(flag)
        );
        return EXIT_WRONG;
    }

    let size = core::mem::size_of::<CpuInfo>();
    let mut buf = [0x55u8; 256];
    let at = 64;
    let c = flagged::call(
        m,
        nr::CPUINFO,
        [buf[at..].as_mut_ptr() as u32, size as u32, 0, 0, 0, 0],
        flag,
    );
    if c.eax != 0 {
        return wrong("cpuinfo with the flag set", c.eax, 0);
    }
    // SAFETY: `buf[at..at+size]` holds the CpuInfo the kernel wrote.
    let got = unsafe { (buf[at..].as_ptr() as *const CpuInfo).read_unaligned() };
    let outside_ok = buf[..at]
        .iter()
        .chain(&buf[at + size..])
        .all(|&b| b == 0x55);
    if got != sys::cpuinfo() || !outside_ok {
        println!(
            "faults: cpuinfo with {} set landed wrong",
            eflags::name(flag)
        );
        return EXIT_WRONG;
    }
    0
}

/// TF set, then MOV SS right before an instruction that raises an
/// exception: the task ends by that exception (or by the #DB, where the CPU
/// delivers it in ring 3); a real CPU's #DB at the stub's first instruction
/// in ring 0 must not stop the kernel.
fn held_onto(h: HeldOnto) {
    // SAFETY (each block): the instruction after MOV SS raises an exception
    // on purpose (for INTO, OF is set by adding 1 to 0x7fffffff before the
    // flags are pushed, so POPF keeps it); the kernel
    // ends the task, so nothing after it runs.
    unsafe {
        match h {
            HeldOnto::Int3 => asm!(
                "movw %ss, {t:x}",
                set_tf!(),
                "movw {t:x}, %ss",
                "int3",
                t = out(reg) _,
                tf = const TF,
                options(att_syntax)
            ),
            HeldOnto::Into => asm!(
                "movl $0x7fffffff, {o}",
                "addl $1, {o}",
                "movw %ss, {t:x}",
                set_tf!(),
                "movw {t:x}, %ss",
                "into",
                t = out(reg) _,
                o = out(reg) _,
                tf = const TF,
                options(att_syntax)
            ),
            HeldOnto::IntKernelGate => asm!(
                "movw %ss, {t:x}",
                set_tf!(),
                "movw {t:x}, %ss",
                "int $0x20",
                t = out(reg) _,
                tf = const TF,
                options(att_syntax)
            ),
        }
    }
}

/// MOV SS or POP SS immediately before the entry instruction. Without TF
/// it is an ordinary getpid. With TF (set by a POPF placed so that the
/// MOV SS is the instruction its trap would follow), the trap is held off
/// past the entry; the task must end with #DB in ring 3 after the return.
fn ss_before(m: Mechanism, pop: bool, tf: bool) -> i32 {
    let pid = sys::call(Mechanism::Int80, nr::GETPID, [0; 6]);
    let got: u32;
    // SAFETY (every block): SS is reloaded with its own value; the entries
    // are the stubs' (sysenter's builds their stack layout); the TF variants
    // end the task with #DB after the return.
    unsafe {
        match (pop, tf) {
            (false, false) => through!(
                m,
                ["movw %ss, {t:x}", "movw {t:x}, %ss"],
                t = out(reg) _,
                inout("eax") nr::GETPID => got,
            ),
            (true, false) => through!(
                m,
                ["pushl %ss", "popl %ss"],
                inout("eax") nr::GETPID => got,
            ),
            (false, true) => through!(
                m,
                ["movw %ss, {t:x}", set_tf!(), "movw {t:x}, %ss"],
                t = out(reg) _,
                tf = const TF,
                inout("eax") nr::GETPID => got,
            ),
            (true, true) => through!(
                m,
                ["pushl %ss", set_tf!(), "popl %ss"],
                tf = const TF,
                inout("eax") nr::GETPID => got,
            ),
        }
    }
    if tf {
        return EXIT_NOT_ENDED;
    }
    if got != pid {
        return wrong("getpid", got, pid);
    }
    0
}

// `tb_hostile_sysenter(nr, args, ebp, esp, ret, write) -> eax` (cdecl):
// a sysenter with EBP = `ebp` and, unless `esp` is 0, ESP = `esp`. With
// `write` bit 0 it first stores the return address (`ret`, or its own
// label when 0) at [EBP-4], with bit 1 argument 6 at [EBP]: the frame the
// kernel reads. It records ESP as the kernel returned it in
// TB_HOSTILE_RET_ESP and goes back to the caller's stack.
global_asm!(
    r#"
    .pushsection .text.tb_hostile_sysenter, "ax"
    .global tb_hostile_sysenter
tb_hostile_sysenter:
    pushl %ebp
    pushl %ebx
    pushl %esi
    pushl %edi
    /* nr 20, args 24, ebp 28, esp 32, ret 36, write 40 */
    movl %esp, TB_HOSTILE_SAVED_ESP
    movl 24(%esp), %eax
    movl 28(%esp), %ebp
    testl $1, 40(%esp)
    jz 2f
    movl 36(%esp), %ecx
    testl %ecx, %ecx
    jnz 3f
    movl $1f, %ecx
3:  movl %ecx, -4(%ebp)
2:  testl $2, 40(%esp)
    jz 4f
    movl 20(%eax), %ecx
    movl %ecx, (%ebp)
4:  movl 0(%eax), %ebx
    movl 4(%eax), %ecx
    movl 8(%eax), %edx
    movl 12(%eax), %esi
    movl 16(%eax), %edi
    movl 20(%esp), %eax
    cmpl $0, 32(%esp)
    je 6f
    movl 32(%esp), %esp
    jmp 5f
    /* With `write` bit 2 (and ESP left alone): TF set by the POPF right
       before SYSENTER, so the trap comes at the kernel's first instruction. */
6:  testl $4, 40(%esp)
    jz 5f
    pushfl
    orl ${tf}, (%esp)
    popfl
5:  sysenter
1:  movl %esp, TB_HOSTILE_RET_ESP
    movl TB_HOSTILE_SAVED_ESP, %esp
    popl %edi
    popl %esi
    popl %ebx
    popl %ebp
    ret
    .popsection
    "#,
    tf = const TF,
    options(att_syntax)
);

unsafe extern "C" {
    fn tb_hostile_sysenter(
        nr: u32,
        args: *const [u32; 6],
        ebp: u32,
        esp: u32,
        ret: u32,
        write: u32,
    ) -> u32;
}

const WRITE_RET: u32 = 1;
const WRITE_ARG6: u32 = 2;
/// Not a write: TF set right before the SYSENTER.
const SET_TF: u32 = 4;

/// sysenter with the stack pointers `s` names (see `SysenterStack`).
fn sysenter_stack(s: SysenterStack) -> i32 {
    sysenter_stack_traced(s, false)
}

/// The same, with TF set right before the SYSENTER when `tf`.
fn sysenter_stack_traced(s: SysenterStack, tf: bool) -> i32 {
    use SysenterStack::*;
    let good = writable() + 64;
    let (ebp, esp, ret, write) = match s {
        EbpKernel => (KERNEL_ADDRESS, 0, 0, 0),
        EbpUnmapped => (UNMAPPED_USER_ADDRESS, 0, 0, 0),
        EbpMisaligned => (good + 1, 0, 0, WRITE_RET | WRITE_ARG6),
        EbpLastWord => (USER_STACK_TOP - 4, 0, 0, WRITE_RET | WRITE_ARG6),
        // [EBP-4] is the stack's last word and may be written; [EBP] is not mapped.
        EbpStackTop => (USER_STACK_TOP, 0, 0, WRITE_RET),
        EbpStraddlesUserTop => (USER_TOP - 2, 0, 0, 0),
        EbpWraps => (0xffff_fffe, 0, 0, 0),
        EbpBelowUserBase => (USER_BASE + 2, 0, 0, 0),
        EspMisaligned => (good, good - 29, 0, WRITE_RET | WRITE_ARG6),
        EspKernel => (good, KERNEL_ADDRESS, 0, WRITE_RET | WRITE_ARG6),
        EspUnmapped => (good, UNMAPPED_USER_ADDRESS, 0, WRITE_RET | WRITE_ARG6),
        ReturnToKernel => (good, 0, KERNEL_ADDRESS, WRITE_RET | WRITE_ARG6),
        EbpNull => (0, 0, 0, 0),
    };
    let write = if tf { write | SET_TF } else { write };
    // The stack's last two words are _start's (main's return address and
    // its argument): keep them across a frame built on top of them.
    let top = (USER_STACK_TOP - 8) as *mut [u32; 2];
    // SAFETY: the stack's top page is mapped and writable, and nothing
    // reads these two words until main returns.
    let saved = unsafe { top.read_volatile() };
    // SAFETY: the frame words written lie in the program's writable buffer
    // or on the stack's last two words (restored below); the stub returns
    // on the caller's stack.
    let r = unsafe { tb_hostile_sysenter(nr::ARGSUM, &ARGS, ebp, esp, ret, write) };
    // SAFETY: as above.
    unsafe { top.write_volatile(saved) };
    // SAFETY: written by the stub, one thread.
    let ret_esp = unsafe { *(&raw const TB_HOSTILE_RET_ESP) };
    match s {
        EbpMisaligned | EbpLastWord | EspMisaligned | EspKernel | EspUnmapped => {
            if r != argsum(ARGS) {
                return wrong("argsum through the hostile frame", r, argsum(ARGS));
            }
            if ret_esp != ebp {
                return wrong("ESP after sysexit (must be EBP)", ret_esp, ebp);
            }
            0
        }
        _ => EXIT_NOT_ENDED,
    }
}

/// AMD syscall with ESP at `esp`: the kernel must refuse to read argument 2
/// there and end the task.
fn syscall_esp(esp: u32) {
    // SAFETY: the kernel ends the task; if it did not, ESP is restored
    // from the saved copy before anything touches the stack.
    unsafe {
        asm!(
            "movl %esp, {saved}",
            "movl {esp}, %esp",
            "syscall",
            "movl {saved}, %esp",
            saved = sym TB_HOSTILE_SAVED_ESP,
            esp = in(reg) esp,
            inout("eax") nr::GETPID => _,
            out("ecx") _,
            options(att_syntax)
        );
    }
}

/// EFLAGS with TF (and the always-one bit, and IF) for a POPF; then a
/// readable word for the kernel to take as argument 2.
static TF_FLAGS: [u32; 2] = [TF | IF | 2, 0];

/// AMD syscall with TF set and ESP where no frame may be pushed: POPF
/// takes the flags from `[ESP]` and leaves ESP 4 higher, so the trap
/// after the SYSCALL (at the kernel's first instruction) finds that ESP.
/// The kernel must take the trap elsewhere, run the call, and give TF back:
/// the task ends with #DB in ring 3 after the return.
fn tf_syscall_esp(at: TfStack) {
    tf_syscall_from(match at {
        TfStack::AboveGuard => {
            let lowest = (USER_STACK_TOP - USER_STACK_SIZE) as *mut u32;
            // SAFETY: the stack's lowest word is mapped and, this shallow in
            // the program, unused.
            unsafe { lowest.write_volatile(TF_FLAGS[0]) };
            lowest as u32
        }
        TfStack::ReadOnly => TF_FLAGS.as_ptr() as u32,
    })
}

/// POPF of the flags word at `flags` (TF set), then SYSCALL with ESP just
/// above that word.
fn tf_syscall_from(flags: u32) {
    // SAFETY: POPF reads the flags word; SYSCALL then enters with TF set.
    // The #DB after the return ends the task; should it not, ESP comes
    // back from the saved copy.
    unsafe {
        asm!(
            "movl %esp, {saved}",
            "movl {flags}, %esp",
            "popfl",
            "syscall",
            "movl {saved}, %esp",
            saved = sym TB_HOSTILE_SAVED_ESP,
            flags = in(reg) flags,
            inout("eax") nr::GETPID => _,
            out("ecx") _,
            options(att_syntax)
        );
    }
}

/// int 0x80 or the call gate with ESP at `esp`: the CPU takes SS:ESP for
/// ring 0 from the TSS and pushes the return frame there; the user's ESP is
/// only saved and given back. So the call works, and ESP comes back as it
/// was; the program restores its own before touching the stack.
fn bad_esp(m: Mechanism, esp: u32) -> i32 {
    let pid = sys::call(Mechanism::Int80, nr::GETPID, [0; 6]);
    let got: u32;
    // Either entry in the same block: ESP saved and set to `esp`, the
    // entry, ESP as it came back recorded, ESP restored.
    macro_rules! on_esp {
        ($entry:literal) => {
            asm!(
                "movl %esp, {saved}",
                "movl {esp}, %esp",
                $entry,
                "movl %esp, {ret}",
                "movl {saved}, %esp",
                saved = sym TB_HOSTILE_SAVED_ESP,
                ret = sym TB_HOSTILE_RET_ESP,
                esp = in(reg) esp,
                inout("eax") nr::GETPID => got,
                options(att_syntax)
            )
        };
    }
    // SAFETY: nothing between the two ESP loads touches the stack in ring 3.
    unsafe {
        match m {
            Mechanism::CallGate => on_esp!("lcall $0x3b, $0"),
            _ => on_esp!("int $0x80"),
        }
    }
    // SAFETY: written by the asm above, one thread.
    let ret_esp = unsafe { *(&raw const TB_HOSTILE_RET_ESP) };
    if got != pid {
        return wrong("getpid with a bad ESP", got, pid);
    }
    if ret_esp != esp {
        return wrong("ESP after the return", ret_esp, esp);
    }
    0
}

/// One call through every usable mechanism; all must agree. Exits with the
/// errno, or 0 when the call returned 0.
fn errno_case(info: &CpuInfo, c: Call) -> i32 {
    let ptr = c.ptr.address(READ_ONLY.as_ptr() as u32, writable());
    let a = c.args.map(|a| if a == PTR { ptr } else { a });
    let mut first: Option<(Mechanism, u32)> = None;
    for m in Mechanism::ALL {
        if !info.has(m) {
            continue;
        }
        let r = sys::call(m, c.nr, [a[0], a[1], a[2], 0, 0, 0]);
        match first {
            None => first = Some((m, r)),
            Some((m0, r0)) if r0 != r => {
                println!(
                    "faults: {} returned {:#x} but {} returned {:#x}",
                    m0.title(),
                    r0,
                    m.title(),
                    r
                );
                return EXIT_DISAGREE;
            }
            Some(_) => {}
        }
    }
    let Some((_, r)) = first else {
        return EXIT_SKIPPED;
    };
    match decode(r) {
        Err(e) => e,
        Ok(0) => 0,
        Ok(v) => {
            println!("faults: the call returned {v:#x}, not an errno");
            EXIT_POSITIVE
        }
    }
}

// ---- Issue 33: the hazards Linux's x86 selftests probe. ----

// `tb_data_segments(mech, sel, out: *mut [u32; 3])` (cdecl): DS and ES
// loaded with `sel`, getpid through `mech` (`Mechanism as u32`) with only
// register and SS-relative operands (a push, a call, EBP's frame), then
// `out` = [EAX, DS, ES] as the user got them back; the caller's DS and ES
// restored before `out` is written.
global_asm!(
    r#"
    .pushsection .text.tb_data_segments, "ax"
    .global tb_data_segments
tb_data_segments:
    pushl %ebp
    pushl %ebx
    pushl %esi
    pushl %edi
    /* mech 20, sel 24, out 28 */
    movl 20(%esp), %edi
    movl 24(%esp), %ebx
    pushl %ds
    pushl %es
    movl ${getpid}, %eax
    movw %bx, %ds
    movw %bx, %es
    cmpl ${sysenter}, %edi
    je 11f
    cmpl ${callgate}, %edi
    je 12f
    cmpl ${syscall}, %edi
    je 13f
    int $0x80
    jmp 19f
    /* The sysenter stub's frame: return EIP at [EBP-4], ESP = EBP after. */
11: pushl %ebp
    movl %esp, %ebp
    pushl $14f
    sysenter
14: popl %ebp
    jmp 19f
12: lcall ${gate}, $0
    jmp 19f
    /* Argument 2 on the stack for the kernel to read at [ESP]. */
13: pushl %ecx
    syscall
    popl %ecx
19: xorl %ecx, %ecx
    xorl %edx, %edx
    movw %ds, %cx
    movw %es, %dx
    popl %es
    popl %ds
    movl 28(%esp), %edi
    movl %eax, 0(%edi)
    movl %ecx, 4(%edi)
    movl %edx, 8(%edi)
    popl %edi
    popl %esi
    popl %ebx
    popl %ebp
    ret
    .popsection
    "#,
    getpid = const nr::GETPID,
    sysenter = const Mechanism::Sysenter as u32,
    callgate = const Mechanism::CallGate as u32,
    syscall = const Mechanism::Syscall as u32,
    gate = const selector::CALL_GATE,
    options(att_syntax)
);

unsafe extern "C" {
    fn tb_data_segments(mech: u32, sel: u32, out: *mut [u32; 3]);
}

/// DS and ES null or read-only through `m`: getpid works and both come
/// back as loaded (no entry reads or writes through them before loading
/// the kernel's, and every return path restores the user's).
fn data_segments(m: Mechanism, which: DataSelector) -> i32 {
    let sel = match which {
        DataSelector::Null => 0,
        DataSelector::ReadOnly => selector::USER_CODE as u32,
    };
    let pid = sys::getpid();
    let mut out = [0u32; 3];
    // SAFETY: the routine touches memory only through SS until it has put
    // the caller's DS and ES back; it returns on the caller's stack.
    unsafe { tb_data_segments(m as u32, sel, &mut out) };
    if out[0] != pid {
        return wrong("getpid with DS and ES loaded", out[0], pid);
    }
    if out[1] != sel || out[2] != sel {
        return wrong(
            "DS << 16 | ES after the return",
            out[1] << 16 | out[2],
            sel << 16 | sel,
        );
    }
    0
}

/// The instruction `$insn` right after `$b`: alone, after TF set by
/// POPF, after a MOV SS or POP SS (with TF) that holds a trap off it.
/// Expands to an unsafe asm block; SS is reloaded with its own value.
macro_rules! after {
    ($b:expr, $insn:literal) => {
        match $b {
            Before::Nothing => asm!($insn, options(att_syntax)),
            Before::Tf => asm!(set_tf!(), $insn, tf = const TF, options(att_syntax)),
            Before::MovSs => asm!(
                "movw %ss, {t:x}",
                "movw {t:x}, %ss",
                $insn,
                t = out(reg) _,
                options(att_syntax)
            ),
            Before::TfMovSs => asm!(
                "movw %ss, {t:x}",
                set_tf!(),
                "movw {t:x}, %ss",
                $insn,
                t = out(reg) _,
                tf = const TF,
                options(att_syntax)
            ),
            Before::TfPopSs => asm!(
                "pushl %ss",
                set_tf!(),
                "popl %ss",
                $insn,
                tf = const TF,
                options(att_syntax)
            ),
        }
    };
}

/// `icebp` (the one-byte INT1, 0xf1) after `b`: a #DB through the task
/// gate whatever its DPL (SDM Vol. 3A §6.12.1.1: the privilege check is for
/// INT n, INT3 and INTO only).
fn icebp(b: Before) {
    // SAFETY: the #DB ends the task; SS is reloaded with its own value.
    unsafe { after!(b, ".byte 0xf1") }
}

/// `int $1` after `b`: the #DB gate's DPL is 0, so #GP (with a held-off
/// trap, the #DB lands on the #GP stub's first instruction, as in
/// [`held_onto`]).
fn int_one(b: Before) {
    // SAFETY: the #GP ends the task; SS is reloaded with its own value.
    unsafe { after!(b, "int $1") }
}

/// TF and `flag` set by the POPF right before the entry: the kernel
/// survives the trap at its first instruction with `flag` in EFLAGS too,
/// and the user single-steps on after the return (#DB in ring 3).
fn tf_with(m: Mechanism, flag: u32) {
    let set = TF | flag;
    // SAFETY: as in tf_before; the flags are set only for the entry
    // instruction and the trap after it ends the task. EBX (the first
    // argument, which `null` ignores) carries the flags to set.
    unsafe {
        through!(
            m,
            ["pushfl", "orl %ebx, (%esp)", "popfl"],
            in("ebx") set,
            in("eax") nr::NULL,
        )
    }
}

/// A new thread's stack for [`initial_state`] (it only stores and exits).
#[repr(C, align(16))]
struct SmallStack([u8; 1024]);
static mut FIRST_THREAD_STACK: SmallStack = SmallStack([0; 1024]);
/// What the new thread found at its first instruction.
#[unsafe(no_mangle)]
static mut TB_THREAD_STATE: State = ZERO_STATE;
/// What the forked child (and, in its own memory, the parent) found right
/// after the fork.
#[unsafe(no_mangle)]
static mut TB_FORK_STATE: State = ZERO_STATE;
const ZERO_STATE: State = State {
    eax: 0,
    ebx: 0,
    ecx: 0,
    edx: 0,
    esi: 0,
    edi: 0,
    ebp: 0,
    esp: 0,
    eflags: 0,
    ds: 0,
    es: 0,
    fs: 0,
    gs: 0,
    ss: 0,
    cs: 0,
};
/// The thread's argument, and the register values the fork case sets
/// (EBX, ECX, EDX, ESI, EDI, EBP).
const THREAD_ARG: u32 = 0x5eed;
const FORK_REGS: [u32; 6] = sys::KNOWN_REGS;

global_asm!(
    concat!(
        r#"
    .pushsection .text.tb_first_thread, "ax"
    .global tb_first_thread, tb_fork_state
    /* A thread's first instruction: keep the registers, then thread_exit(0). */
tb_first_thread:
"#,
        capture_state!("TB_THREAD_STATE"),
        r#"
    movl ${thread_exit}, %eax
    xorl %ebx, %ebx
    int $0x80
    ud2

    /* tb_fork_state() -> fork's result: EBX, ECX, EDX, ESI, EDI, EBP and
       EFLAGS set to known values, fork through int 0x80, and at once (in
       parent and child) every register kept in TB_FORK_STATE. */
tb_fork_state:
    pushl %ebp
    pushl %ebx
    pushl %esi
    pushl %edi
    movl ${r0}, %ebx
    movl ${r1}, %ecx
    movl ${r2}, %edx
    movl ${r3}, %esi
    movl ${r4}, %edi
    movl ${r5}, %ebp
    movl ${fork}, %eax
    pushl ${flags}
    popfl
    int $0x80
"#,
        capture_state!("TB_FORK_STATE"),
        r#"
    popl %edi
    popl %esi
    popl %ebx
    popl %ebp
    ret
    .popsection
    "#
    ),
    thread_exit = const nr::THREAD_EXIT,
    fork = const nr::FORK,
    r0 = const FORK_REGS[0],
    r1 = const FORK_REGS[1],
    r2 = const FORK_REGS[2],
    r3 = const FORK_REGS[3],
    r4 = const FORK_REGS[4],
    r5 = const FORK_REGS[5],
    flags = const RESERVED_1 | IF,
    options(att_syntax)
);

unsafe extern "C" {
    fn tb_first_thread();
    fn tb_fork_state() -> u32;
}

/// What a first instruction must find besides the general registers: the
/// user selectors everywhere, EFLAGS = IF and the always-one bit (0x202).
fn fresh_state(eax: u32, esp: u32) -> State {
    let d = selector::USER_DATA as u32;
    State {
        eax,
        esp,
        eflags: RESERVED_1 | IF,
        ds: d,
        es: d,
        fs: d,
        gs: d,
        ss: d,
        cs: selector::USER_CODE as u32,
        ..ZERO_STATE
    }
}

fn compare_state(what: &str, got: &State, want: &State) -> i32 {
    if got == want {
        return 0;
    }
    println!("faults: {what}: got {got:#x?}");
    println!("faults: expected {want:#x?}");
    EXIT_WRONG
}

/// Linux's `check_initial_reg_state` for a task, a thread and a forked
/// child: a task and a thread start with every register zero except EAX
/// (the argument) and ESP, EFLAGS 0x202 and the user selectors; a child
/// resumes with its parent's registers and EFLAGS, EAX = 0.
fn initial_state(at: Start, case: u32) -> i32 {
    match at {
        Start::Task => {
            // SAFETY: written once by _start, before main.
            let got = unsafe { *(&raw const userland::TB_START_STATE) };
            compare_state("at _start", &got, &fresh_state(case, USER_STACK_TOP))
        }
        Start::Thread => {
            let top = (&raw mut FIRST_THREAD_STACK) as u32 + 1024;
            let r = sys::call(
                Mechanism::Int80,
                nr::THREAD_CREATE,
                [
                    tb_first_thread as *const () as u32,
                    top,
                    THREAD_ARG,
                    abi_prio(),
                    threads::cpu(),
                    0,
                ],
            );
            if decode(r).is_err() {
                return wrong("thread_create", r, 0);
            }
            // SAFETY: only the address is taken.
            let cs = unsafe { &raw const TB_THREAD_STATE.cs };
            // SAFETY: the thread writes the state once; CS last.
            while unsafe { cs.read_volatile() } == 0 {
                threads::yield_now();
            }
            threads::yield_now();
            // SAFETY: the thread has stored everything and exited.
            let got = unsafe { *(&raw const TB_THREAD_STATE) };
            compare_state("at a thread's start", &got, &fresh_state(THREAD_ARG, top))
        }
        Start::Fork => {
            // SAFETY: the routine keeps the callee-saved registers and the
            // stack; the child returns from it just as the parent does.
            let r = unsafe { tb_fork_state() };
            // SAFETY: written by the routine, in this process's own copy.
            let got = unsafe { *(&raw const TB_FORK_STATE) };
            if r != 0 {
                return wait_child(r);
            }
            let want = State {
                ebx: FORK_REGS[0],
                ecx: FORK_REGS[1],
                edx: FORK_REGS[2],
                esi: FORK_REGS[3],
                edi: FORK_REGS[4],
                ebp: FORK_REGS[5],
                ..fresh_state(0, got.esp)
            };
            sys::exit(compare_state("in the forked child", &got, &want))
        }
    }
}

fn abi_prio() -> u32 {
    userland::abi::syscall::PRIO_USER
}

/// The parent's side: the child's exit status, or EXIT_WRONG when it
/// failed to fork or ended otherwise.
fn wait_child(r: u32) -> i32 {
    if decode(r).is_err() {
        return wrong("fork", r, 0);
    }
    match sys::waitpid(r as i32, 0) {
        Ok((_, status)) => match userland::abi::syscall::wait::exit_code(status) {
            Some(code) => code,
            None => wrong("the child's status", status, 0),
        },
        Err(e) => wrong("waitpid", e as u32, 0),
    }
}

/// FS and GS as they are now.
fn fs_gs() -> (u32, u32) {
    let (fs, gs): (u32, u32);
    // SAFETY: reads two segment registers (upper halves zeroed first).
    unsafe {
        asm!(
            "xorl {f}, {f}",
            "xorl {g}, {g}",
            "movw %fs, {f:x}",
            "movw %gs, {g:x}",
            f = out(reg) fs,
            g = out(reg) gs,
            options(att_syntax, nomem, nostack, preserves_flags)
        )
    };
    (fs, gs)
}

fn set_fs_gs(fs: u32, gs: u32) {
    // SAFETY: both are the null selector or a DPL-3 one; nothing in this
    // program addresses memory through FS or GS.
    unsafe {
        asm!(
            "movw {f:x}, %fs",
            "movw {g:x}, %gs",
            f = in(reg) fs,
            g = in(reg) gs,
            options(att_syntax, nomem, nostack, preserves_flags)
        )
    };
}

/// Rounds of yields each side makes in the thread cases.
const ROUNDS: u32 = 8;
/// The second thread's verdict: 0 while it runs, then 1 or a failure status.
static SECOND: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(0);
const SECOND_OK: u32 = 1;

/// Yield through every usable mechanism in turn, `ROUNDS` times, calling
/// `check` after each; the first failure's status.
fn yield_rounds(check: &dyn Fn() -> i32) -> i32 {
    let info = sys::cpuinfo();
    for _ in 0..ROUNDS {
        for m in Mechanism::ALL {
            if info.has(m) {
                sys::call(m, nr::YIELD, [0; 6]);
                let r = check();
                if r != 0 {
                    return r;
                }
            }
        }
    }
    0
}

/// Waits (yielding) until the second thread has said how it went.
fn second_verdict() -> i32 {
    use core::sync::atomic::Ordering;
    loop {
        match SECOND.load(Ordering::Acquire) {
            0 => threads::yield_now(),
            SECOND_OK => return 0,
            bad => return bad as i32,
        }
    }
}

/// Two threads on this CPU take turns through `yield` (a blocking system
/// call: the thread that comes back returns through SYSEXIT, SYSRET, LRET
/// or IRET, none of which reloads FS or GS): each must find its own.
fn fs_gs_threads(_: &CpuInfo) -> i32 {
    use core::sync::atomic::Ordering;
    fn second(_: u32) {
        let ours = (0, selector::USER_CODE as u32);
        set_fs_gs(ours.0, ours.1);
        let r = yield_rounds(&|| {
            let now = fs_gs();
            if now != ours {
                return wrong(
                    "the second thread's FS << 16 | GS",
                    now.0 << 16 | now.1,
                    0x1b,
                );
            }
            0
        });
        SECOND.store(if r == 0 { SECOND_OK } else { r as u32 }, Ordering::Release);
    }
    let ours = fs_gs();
    if let Err(e) = threads::spawn(second, 0, abi_prio()) {
        return wrong("spawn", e as u32, 0);
    }
    let r = yield_rounds(&|| {
        let now = fs_gs();
        if now != ours {
            return wrong(
                "the first thread's FS << 16 | GS",
                now.0 << 16 | now.1,
                ours.0 << 16 | ours.1,
            );
        }
        0
    });
    let second = second_verdict();
    if r != 0 {
        return r;
    }
    second
}

/// The parent loads null FS and GS and forks: the child must find them so,
/// load its own and exit; the parent, back from waiting, its own again.
fn fs_gs_fork() -> i32 {
    let user_code = selector::USER_CODE as u32;
    set_fs_gs(0, 0);
    match sys::fork() {
        Ok(0) => {
            let now = fs_gs();
            set_fs_gs(user_code, user_code);
            if now != (0, 0) {
                sys::exit(wrong("the child's FS << 16 | GS", now.0 << 16 | now.1, 0));
            }
            sys::exit(0)
        }
        Ok(pid) => {
            let child = wait_child(pid);
            let now = fs_gs();
            let d = selector::USER_DATA as u32;
            set_fs_gs(d, d);
            if now != (0, 0) {
                return wrong("the parent's FS << 16 | GS", now.0 << 16 | now.1, 0);
            }
            child
        }
        Err(e) => wrong("fork", e as u32, 0),
    }
}

/// CPUID leaf 1 EDX bit 0: an x87 on the chip (the kernel lets ring 3 use
/// it wherever there is one).
fn has_x87(info: &CpuInfo) -> bool {
    if info.signature == 0 {
        return false;
    }
    // CPUID exists: the kernel read a signature with it.
    let r = core::arch::x86::__cpuid(1);
    r.edx & 1 != 0
}

/// An FNSAVE image (32-bit protected mode): control, status, tag words,
/// pointers, then ST(0)..ST(7), 10 bytes each from byte 28.
type X87Image = [u32; 27];

/// The x87 context as FNSAVE writes it, loaded straight back (FNSAVE
/// reinitialises the x87).
fn x87_image() -> X87Image {
    let mut img = [0u32; 27];
    // SAFETY: 108 bytes out, then the same 108 bytes in.
    unsafe {
        asm!(
            "fnsave ({p})",
            "frstor ({p})",
            p = in(reg) &mut img,
            options(att_syntax, nostack)
        )
    };
    img
}

/// The bytes of register `i` in an image.
fn x87_reg(img: &X87Image, i: usize) -> [u8; 10] {
    // SAFETY: 27 words are 108 bytes; registers lie at 28 + 10 i.
    let bytes = unsafe { &*(img as *const X87Image as *const [u8; 108]) };
    let mut r = [0u8; 10];
    r.copy_from_slice(&bytes[28 + 10 * i..38 + 10 * i]);
    r
}

/// FNINIT, then `value` pushed into all eight registers (1.0 or pi).
fn x87_fill(pi: bool) {
    // SAFETY: x87 instructions on the x87's own registers only.
    unsafe {
        if pi {
            asm!("fninit", "fldpi", "fldpi", "fldpi", "fldpi", "fldpi", "fldpi", "fldpi", "fldpi")
        } else {
            asm!("fninit", "fld1", "fld1", "fld1", "fld1", "fld1", "fld1", "fld1", "fld1")
        }
    }
}

/// The 80-bit images of 1.0 and pi (SDM Vol. 1 §8.3.8: FLD1, FLDPI).
const X87_ONE: [u8; 10] = [0, 0, 0, 0, 0, 0, 0, 0x80, 0xff, 0x3f];
const X87_PI: [u8; 10] = [0x35, 0xc2, 0x68, 0x21, 0xa2, 0xda, 0x0f, 0xc9, 0x00, 0x40];

/// Every register holds `value` (all eight valid: tag word 0).
fn x87_holds(what: &str, value: [u8; 10]) -> i32 {
    let img = x87_image();
    for i in 0..8 {
        let r = x87_reg(&img, i);
        if r != value {
            println!("faults: {what}: ST({i}) is {r:02x?}, expected {value:02x?}");
            return EXIT_WRONG;
        }
    }
    if img[2] & 0xffff != 0 {
        return wrong(what, img[2] & 0xffff, 0);
    }
    0
}

/// FNINIT's control word, every register tagged empty and every bit zero.
fn x87_fresh(what: &str) -> i32 {
    let img = x87_image();
    if img[0] & 0xffff != 0x037f || img[2] & 0xffff != 0xffff {
        return wrong(what, (img[0] & 0xffff) << 16 | img[2] & 0xffff, 0x037f_ffff);
    }
    for i in 0..8 {
        let r = x87_reg(&img, i);
        if r != [0; 10] {
            println!("faults: {what}: ST({i}) holds {r:02x?}, expected zeros");
            return EXIT_WRONG;
        }
    }
    0
}

fn x87(x: X87) -> i32 {
    use core::sync::atomic::Ordering;
    match x {
        X87::Leave => {
            x87_fill(true);
            0
        }
        X87::Fresh => x87_fresh("a task's x87 at its start"),
        X87::Kept(Sharer::Thread) => {
            fn second(_: u32) {
                let mut r = x87_fresh("a new thread's x87");
                if r == 0 {
                    x87_fill(true);
                    r = yield_rounds(&|| x87_holds("the second thread's x87", X87_PI));
                }
                SECOND.store(if r == 0 { SECOND_OK } else { r as u32 }, Ordering::Release);
            }
            x87_fill(false);
            if let Err(e) = threads::spawn(second, 0, abi_prio()) {
                return wrong("spawn", e as u32, 0);
            }
            let r = yield_rounds(&|| x87_holds("the first thread's x87", X87_ONE));
            let second = second_verdict();
            if r != 0 {
                return r;
            }
            second
        }
        X87::Kept(Sharer::Fork) => {
            x87_fill(false);
            match sys::fork() {
                Ok(0) => {
                    let r = x87_holds("the child's inherited x87", X87_ONE);
                    x87_fill(true);
                    threads::yield_now();
                    sys::exit(r)
                }
                Ok(pid) => {
                    let child = wait_child(pid);
                    let r = x87_holds("the parent's x87 after the child ran", X87_ONE);
                    if r != 0 {
                        return r;
                    }
                    child
                }
                Err(e) => wrong("fork", e as u32, 0),
            }
        }
    }
}

/// `flags` set right before a floor entry (`sys::floor`'s sequences, one
/// round trip): int 0x80's floor IRETs the user's EFLAGS back; sysenter's
/// (STI; SYSEXIT), the call gate's (LRET) and syscall's (SYSRET) leave
/// EFLAGS as the kernel has them, which after a trap at the stub is the
/// user's minus TF (the debug task cleared it). So DF, AC and NT come
/// back, and TF comes back only through int 0x80's (ending the task with
/// #DB). After a dropped TF the x87 must still work: the debug task's
/// task switch set CR0.TS.
fn floor(info: &CpuInfo, m: Mechanism, flags: u32) -> i32 {
    let select = matches!(m, Mechanism::Sysenter | Mechanism::Syscall);
    if select {
        let r = sys::call(Mechanism::Int80, nr::ENTRY_FLOOR, [m as u32, 1, 0, 0, 0, 0]);
        if r != 0 {
            return wrong("entry_floor", r, 0);
        }
    }
    let after: u32;
    // SAFETY (every block): the caller's EFLAGS are pushed first and popped
    // last, so no Rust code runs with the flags; the floors return to the
    // next instruction with the stack as it was.
    unsafe {
        match m {
            Mechanism::Int80 => asm!(
                "pushfl",
                "pushfl",
                "orl %eax, (%esp)",
                "popfl",
                "int ${floor}",
                "pushfl",
                "popl %eax",
                "popfl",
                floor = const userland::abi::layout::VECTOR_SYSCALL_FLOOR,
                inout("eax") flags => after,
                options(att_syntax)
            ),
            Mechanism::Sysenter => asm!(
                "pushfl",
                "movl %esp, %ecx",
                "movl $2f, %edx",
                "pushfl",
                "orl %eax, (%esp)",
                "popfl",
                "sysenter",
                "2:",
                "pushfl",
                "popl %eax",
                "popfl",
                inout("eax") flags => after,
                out("ecx") _,
                out("edx") _,
                options(att_syntax)
            ),
            Mechanism::CallGate => asm!(
                "pushfl",
                "pushfl",
                "orl %eax, (%esp)",
                "popfl",
                "lcall ${gate}, $0",
                "pushfl",
                "popl %eax",
                "popfl",
                gate = const selector::CALL_GATE_FLOOR,
                inout("eax") flags => after,
                options(att_syntax)
            ),
            Mechanism::Syscall => asm!(
                "pushfl",
                "pushfl",
                "orl %eax, (%esp)",
                "popfl",
                "syscall",
                "pushfl",
                "popl %eax",
                "popfl",
                inout("eax") flags => after,
                out("ecx") _,
                options(att_syntax)
            ),
        }
    }
    if select {
        sys::call(Mechanism::Int80, nr::ENTRY_FLOOR, [m as u32, 0, 0, 0, 0, 0]);
    }
    if flags & TF != 0 {
        if after & TF != 0 {
            return wrong("TF after the floor", after, after & !TF);
        }
        if has_x87(info) {
            let mut cw: u16 = 0;
            // SAFETY: FNSTCW stores two bytes; a #NM here is the kernel's
            // to mend (CR0.TS left set by the debug task's switch).
            unsafe { asm!("fnstcw ({})", in(reg) &mut cw, options(att_syntax, nostack)) };
            if cw != 0x037f {
                return wrong("the x87 control word", cw as u32, 0x037f);
            }
        }
        return 0;
    }
    if after & (DF | AC | NT) != flags {
        return wrong("EFLAGS after the floor", after, flags | IF);
    }
    0
}

// A pipe closed under a sleeping call, its slot reused at once
// (`Act::PipeReuse`). Every thread of these cases runs on this CPU, so the
// sleeper, made ready by the close, runs only once the first thread sleeps:
// after the new pipe holds its bytes.

/// What the sleeping thread's pipe call returned (its result word), or
/// [`NOT_BACK`] while it has not come back.
static PIPE_CALL: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(NOT_BACK);
/// No call's result: a count is below 2^31, `-errno` above `-4096`.
const NOT_BACK: u32 = 0x8000_0000;
/// Ticks the first thread gives the sleeper to fall asleep in its call.
const SETTLE: u32 = 3;
/// The most ticks to wait for the sleeper to come back.
const BACK_WITHIN: u32 = 200;
/// What the new pipe carries.
const NEW_BYTES: &[u8] = b"the new pipe's own bytes";
/// Fills a pipe whole, so the next write sleeps.
static FILL: [u8; fd::PIPE_SIZE] = [b'o'; fd::PIPE_SIZE];

fn pipe_reuse(how: PipeReuse) -> i32 {
    let Ok((r, w)) = sys::pipe() else {
        return wrong("pipe", 0, 0);
    };
    let r = match how {
        PipeReuse::Read => sleep_in(sleeping_read, r).and_then(|()| reuse(&[r, w], None)),
        PipeReuse::Write => {
            let ignored =
                sys::sigaction(userland::abi::syscall::sig::SIGPIPE, sys::Handler::Ignore);
            if ignored.is_err() || sys::write_fd(w, &FILL) != Ok(fd::PIPE_SIZE) {
                return wrong("filling the pipe", 0, 0);
            }
            sleep_in(sleeping_write, w).and_then(|()| reuse(&[w, r], None))
        }
        PipeReuse::Process => match sys::fork() {
            Ok(0) => {
                // The child: its read sleeps, its first thread closes the
                // child's descriptors; pid 1 still holds both ends.
                let _ = sys::close(w);
                if let Err(e) = sleep_in(sleeping_read, r) {
                    sys::exit(e);
                }
                let _ = sys::close(r);
                sys::exit(match back() {
                    b if b == ebadf() => 0,
                    NOT_BACK => CHILD_ASLEEP,
                    0 => CHILD_EOF,
                    b if b < NOT_BACK => CHILD_GOT_BYTES,
                    _ => CHILD_OTHER,
                })
            }
            Ok(pid) => {
                // Long after the child's close.
                threads::sleep(4 * SETTLE);
                reuse(&[r, w], Some(pid))
            }
            Err(e) => Err(wrong("fork", e as u32, 0)),
        },
    };
    r.err().unwrap_or(0)
}

/// The child's exit codes in [`PipeReuse::Process`] (0: `EBADF`).
const CHILD_ASLEEP: i32 = 10;
const CHILD_EOF: i32 = 11;
const CHILD_GOT_BYTES: i32 = 12;
const CHILD_OTHER: i32 = 13;

fn ebadf() -> u32 {
    (-userland::abi::syscall::errno::EBADF) as u32
}

fn sleeping_read(fd: u32) {
    let mut b = [0u8; 64];
    let len = b.len() as u32;
    let r = sys::call(
        Mechanism::Int80,
        nr::READ,
        [fd, b.as_mut_ptr() as u32, len, 0, 0, 0],
    );
    PIPE_CALL.store(r, core::sync::atomic::Ordering::Release);
}

fn sleeping_write(fd: u32) {
    let b = [b'x'; 16];
    let len = b.len() as u32;
    let r = sys::call(
        Mechanism::Int80,
        nr::WRITE,
        [fd, b.as_ptr() as u32, len, 0, 0, 0],
    );
    PIPE_CALL.store(r, core::sync::atomic::Ordering::Release);
}

/// Starts `call(fd)` in a second thread on this CPU and lets it fall
/// asleep in the kernel; `Err` with the status when it could not.
fn sleep_in(call: fn(u32), fd: u32) -> Result<(), i32> {
    PIPE_CALL.store(NOT_BACK, core::sync::atomic::Ordering::Relaxed);
    if let Err(e) = threads::spawn(call, fd, abi_prio()) {
        return Err(wrong("spawn", e as u32, 0));
    }
    threads::sleep(SETTLE);
    match back_now() {
        NOT_BACK => Ok(()),
        r => Err(wrong(
            "the pipe call came back before its pipe closed",
            r,
            NOT_BACK,
        )),
    }
}

fn back_now() -> u32 {
    PIPE_CALL.load(core::sync::atomic::Ordering::Acquire)
}

/// The sleeper's result once it is back, or [`NOT_BACK`] after
/// [`BACK_WITHIN`] ticks.
fn back() -> u32 {
    for _ in 0..BACK_WITHIN {
        if back_now() != NOT_BACK {
            break;
        }
        threads::sleep(1);
    }
    back_now()
}

/// Closes `fds` (the old pipe's, in that order), makes the new pipe at once
/// and writes [`NEW_BYTES`] into it, lets the sleeper (or the child `pid`)
/// come back, then reads the new pipe to its end: it must hold exactly
/// those bytes, and the sleeper must have got `EBADF`.
fn reuse(fds: &[u32], child: Option<u32>) -> Result<(), i32> {
    for &f in fds {
        let _ = sys::close(f);
    }
    let Ok((r, w)) = sys::pipe() else {
        return Err(wrong("the new pipe", 0, 0));
    };
    if sys::write_fd(w, NEW_BYTES) != Ok(NEW_BYTES.len()) {
        return Err(wrong("the write into the new pipe", 0, 0));
    }
    let sleeper = match child {
        None => back(),
        Some(pid) => match wait_child(pid) {
            0 => ebadf(),
            CHILD_ASLEEP => NOT_BACK,
            CHILD_EOF => 0,
            CHILD_GOT_BYTES => {
                println!("faults: the child's read returned bytes of pid 1's new pipe");
                1
            }
            code => return Err(wrong("the child's exit code", code as u32, 0)),
        },
    };
    let _ = sys::close(w);
    let mut got = [0u8; 128];
    let mut n = 0;
    while n < got.len() {
        match sys::read(r, &mut got[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) => return Err(wrong("a read of the new pipe", e as u32, 0)),
        }
    }
    let _ = sys::close(r);
    let mut status = Ok(());
    if &got[..n] != NEW_BYTES {
        println!(
            "faults: the new pipe held {n} bytes, {:?}, not its own {} bytes",
            core::str::from_utf8(&got[..n]).unwrap_or("(not UTF-8)"),
            NEW_BYTES.len()
        );
        status = Err(EXIT_WRONG);
    }
    if sleeper != ebadf() {
        status = Err(wrong("the sleeping call's result", sleeper, ebadf()));
    }
    status
}
