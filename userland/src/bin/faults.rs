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

use userland::abi::cases::eflags::{self, HOSTILE, IF, TF};
use userland::abi::cases::{
    Act, Call, HeldOnto, Privileged, SysenterStack, TfStack, EXIT_SKIPPED, FAULT_CASES,
    KERNEL_ADDRESS, PTR, UNMAPPED_USER_ADDRESS,
};
use userland::abi::layout::{selector, USER_BASE, USER_STACK_SIZE, USER_STACK_TOP, USER_TOP};
use userland::abi::syscall::{argsum, decode, fd, nr, CpuInfo};
use userland::abi::Mechanism;
use userland::{flagged, println, sys};

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
const ARGS: [u32; 6] = [
    0x0101_0101,
    0x0202_0202,
    0x0303_0303,
    0x0404_0404,
    0x0505_0505,
    0x0606_0606,
];

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
fn tf_before(m: Mechanism) {
    // SAFETY (every asm block below): the trap ends the task after the
    // return (the kernel gives TF back); the stack layout is the stubs'.
    unsafe {
        match m {
            Mechanism::Sysenter => sysenter_after!(
                [set_tf!()],
                tf = const TF,
                in("eax") nr::NULL,
                options(att_syntax)
            ),
            Mechanism::Int80 => asm!(
                set_tf!(),
                "int $0x80",
                "nop",
                tf = const TF,
                in("eax") nr::NULL,
                options(att_syntax)
            ),
            Mechanism::CallGate => asm!(
                set_tf!(),
                "lcall $0x3b, $0",
                "nop",
                tf = const TF,
                in("eax") nr::NULL,
                options(att_syntax)
            ),
            Mechanism::Syscall => asm!(
                "pushl %ecx",
                set_tf!(),
                "syscall",
                "popl %ecx",
                tf = const TF,
                in("eax") nr::NULL,
                out("ecx") _,
                options(att_syntax)
            ),
        }
    }
}

/// `flag` (DF, AC or NT) set before entering through `m`: the call must give
/// the right result and leave the argument registers alone, the user must
/// get the flag back (with IF on), and the kernel must not have run with
/// it: its copies use `rep movsb`, which DF would turn backwards, so a ring
/// round trip and a cpuinfo copy must land exactly where they belong.
fn flag_before(m: Mechanism, flag: u32) -> i32 {
    let a = flagged::call(m, nr::ARGSUM, ARGS, flag);
    if a.eax != argsum(ARGS) {
        return wrong("argsum with the flag set", a.eax, argsum(ARGS));
    }
    if a.args() != ARGS {
        println!("faults: argument registers changed: {:#x?}", a.args());
        return EXIT_WRONG;
    }
    if a.eflags & HOSTILE != flag || a.eflags & IF == 0 {
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
    // SAFETY (every asm block below): SS is reloaded with its own value;
    // the sysenter variants build the stub's stack layout; the TF variants
    // end the task with #DB after the return.
    unsafe {
        match (m, pop, tf) {
            (Mechanism::Int80, false, false) => asm!(
                "movw %ss, {t:x}",
                "movw {t:x}, %ss",
                "int $0x80",
                t = out(reg) _,
                inout("eax") nr::GETPID => got,
                options(att_syntax)
            ),
            (Mechanism::Int80, true, false) => asm!(
                "pushl %ss",
                "popl %ss",
                "int $0x80",
                inout("eax") nr::GETPID => got,
                options(att_syntax)
            ),
            (Mechanism::Int80, false, true) => asm!(
                "movw %ss, {t:x}",
                set_tf!(),
                "movw {t:x}, %ss",
                "int $0x80",
                "nop",
                t = out(reg) _,
                tf = const TF,
                inout("eax") nr::GETPID => got,
                options(att_syntax)
            ),
            (Mechanism::Int80, true, true) => asm!(
                "pushl %ss",
                set_tf!(),
                "popl %ss",
                "int $0x80",
                "nop",
                tf = const TF,
                inout("eax") nr::GETPID => got,
                options(att_syntax)
            ),
            (Mechanism::Sysenter, false, false) => sysenter_after!(
                ["movw %ss, %cx", "movw %cx, %ss"],
                inout("eax") nr::GETPID => got,
                out("ecx") _,
                options(att_syntax)
            ),
            (Mechanism::Sysenter, true, false) => sysenter_after!(
                ["pushl %ss", "popl %ss"],
                inout("eax") nr::GETPID => got,
                options(att_syntax)
            ),
            (Mechanism::Sysenter, false, true) => sysenter_after!(
                ["movw %ss, %cx", set_tf!(), "movw %cx, %ss"],
                tf = const TF,
                inout("eax") nr::GETPID => got,
                out("ecx") _,
                options(att_syntax)
            ),
            (Mechanism::Sysenter, true, true) => sysenter_after!(
                ["pushl %ss", set_tf!(), "popl %ss"],
                tf = const TF,
                inout("eax") nr::GETPID => got,
                options(att_syntax)
            ),
            _ => return EXIT_NO_SUCH_CASE,
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
    je 5f
    movl 32(%esp), %esp
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

/// sysenter with the stack pointers `s` names (see `SysenterStack`).
fn sysenter_stack(s: SysenterStack) -> i32 {
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
    };
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
    let flags = match at {
        TfStack::AboveGuard => {
            let lowest = (USER_STACK_TOP - USER_STACK_SIZE) as *mut u32;
            // SAFETY: the stack's lowest word is mapped and, this shallow in
            // the program, unused.
            unsafe { lowest.write_volatile(TF_FLAGS[0]) };
            lowest as u32
        }
        TfStack::ReadOnly => TF_FLAGS.as_ptr() as u32,
    };
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
