//! The user side of each mechanism: the instruction sequence that enters the
//! kernel with EAX and EBX..EBP loaded, and leaves the result in EAX and
//! every other register as it was. `sys` wraps them in callable stubs;
//! `bench` in timed loops. Read these to see what each mechanism costs the
//! user side.

/// The instruction sequence of each full entry, with EAX and EBX..EBP
/// loaded. Each leaves the result in EAX and every other register as it was.
macro_rules! seq_int80 {
    () => {
        "int $0x80\n"
    };
}
macro_rules! seq_callgate {
    () => {
        concat!("lcall $", stringify!(0x3b), ", $0\n")
    };
}
/// sysenter: save ECX (arg 2) and EDX (arg 3), which SYSEXIT will overwrite,
/// and EBP (arg 6); point EBP at the saved EBP and push the return address,
/// so the kernel finds arg 6 at [EBP] and the return EIP at [EBP-4].
macro_rules! seq_sysenter {
    () => {
        "pushl %ecx
        pushl %edx
        pushl %ebp
        movl %esp, %ebp
        pushl $1f
        sysenter
1:      popl %ebp
        popl %edx
        popl %ecx
"
    };
}
/// AMD syscall: SYSCALL overwrites ECX with the return EIP, so arg 2 travels
/// on the stack, where the kernel reads it at [ESP].
macro_rules! seq_syscall {
    () => {
        "pushl %ecx\n syscall\n popl %ecx\n"
    };
}

/// The start of an assembly function `name` (cdecl) in its own section:
/// the label, and the callee-saved registers pushed (so its arguments start
/// at 20(%esp)).
macro_rules! asm_fn_head {
    ($name:expr) => {
        concat!(
            ".pushsection .text.",
            $name,
            ", \"ax\"\n",
            ".global ",
            $name,
            "\n",
            $name,
            ":\n",
            "pushl %ebp\n pushl %ebx\n pushl %esi\n pushl %edi\n"
        )
    };
}

/// The end of an `asm_fn_head!` function: callee-saved registers back, return.
macro_rules! asm_fn_tail {
    () => {
        "popl %edi\n popl %esi\n popl %ebx\n popl %ebp\n ret\n.popsection\n"
    };
}

/// A whole assembly function: `asm_fn_head!(name)`, the body's strings,
/// `asm_fn_tail!()`, with the block's operands (`name = const value`) last.
macro_rules! asm_fn {
    ($name:expr, [$($body:expr),* $(,)?] $(, $($operands:tt)+)?) => {
        core::arch::global_asm!(
            concat!(asm_fn_head!($name), $($body,)* asm_fn_tail!()),
            $($($operands)+,)?
            options(att_syntax)
        );
    };
}

/// `$stub!(name, sequence)` once per mechanism: `<prefix>_int80` with
/// `seq_int80!()`, `<prefix>_callgate`, `<prefix>_sysenter`, `<prefix>_syscall`.
macro_rules! per_mechanism {
    ($stub:ident, $prefix:literal) => {
        $stub!(concat!($prefix, "_int80"), seq_int80!());
        $stub!(concat!($prefix, "_callgate"), seq_callgate!());
        $stub!(concat!($prefix, "_sysenter"), seq_sysenter!());
        $stub!(concat!($prefix, "_syscall"), seq_syscall!());
    };
}
