//! A system call entered with chosen EFLAGS bits set (DF, AC, NT, ID), that
//! reports every register and EFLAGS as the user got them back. The hostile
//! cases in `faults` and the fuzzer check both: the result, the six argument
//! registers unchanged, and the flags given back as they were at entry.
//!
//! `tb_flagged_NAME(nr, args: *const [u32; 6], set, out: *mut After) -> u32`
//! (cdecl) ORs `set` into EFLAGS with the POPF right before the mechanism's
//! instruction sequence, so no Rust code ever runs with those flags; right
//! after the sequence it saves EFLAGS and the registers (PUSHFL, PUSHAL),
//! copies them to `out` with plain MOVs (DF may be set: no string
//! instructions), and restores the caller's EFLAGS before returning.

use abi::cases::eflags;
use abi::Mechanism;

/// The user's registers right after the entry sequence returned, in PUSHAL
/// order, then EFLAGS. `esp` is ESP right after the sequence (the same as
/// before it, when the mechanism keeps its promise).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct After {
    pub edi: u32,
    pub esi: u32,
    pub ebp: u32,
    pub esp: u32,
    pub ebx: u32,
    pub edx: u32,
    pub ecx: u32,
    pub eax: u32,
    pub eflags: u32,
}

impl After {
    /// EBX, ECX, EDX, ESI, EDI, EBP: the six argument registers.
    pub fn args(&self) -> [u32; 6] {
        [self.ebx, self.ecx, self.edx, self.esi, self.edi, self.ebp]
    }
}

macro_rules! flagged_stub {
    ($name:expr, $seq:expr) => {
        // Callee-saved registers pushed; then nr at 20, args 24, set 28, out 32.
        asm_fn!(
            $name,
            [
                // The caller's EFLAGS, restored at the end: nr at 24 now.
                "pushfl\n",
                // The flags to enter with, kept on the stack for the POPF.
                "pushfl\n popl %eax\n orl 32(%esp), %eax\n pushl %eax\n",
                // Arguments: nr at 28, args at 32.
                "movl 32(%esp), %eax\n",
                "movl 0(%eax), %ebx\n movl 4(%eax), %ecx\n movl 8(%eax), %edx\n",
                "movl 12(%eax), %esi\n movl 16(%eax), %edi\n movl 20(%eax), %ebp\n",
                "movl 28(%esp), %eax\n",
                "popfl\n",
                $seq,
                // What came back: EFLAGS, then the registers; out at 72.
                "pushfl\n pushal\n",
                // PUSHAL saved ESP after the PUSHFL: give the value before it.
                "addl $4, 12(%esp)\n",
                "movl 72(%esp), %edi\n",
                "movl 0(%esp), %eax\n movl %eax, 0(%edi)\n",
                "movl 4(%esp), %eax\n movl %eax, 4(%edi)\n",
                "movl 8(%esp), %eax\n movl %eax, 8(%edi)\n",
                "movl 12(%esp), %eax\n movl %eax, 12(%edi)\n",
                "movl 16(%esp), %eax\n movl %eax, 16(%edi)\n",
                "movl 20(%esp), %eax\n movl %eax, 20(%edi)\n",
                "movl 24(%esp), %eax\n movl %eax, 24(%edi)\n",
                "movl 28(%esp), %eax\n movl %eax, 28(%edi)\n",
                "movl 32(%esp), %eax\n movl %eax, 32(%edi)\n",
                "movl 28(%esp), %eax\n",
                "addl $36, %esp\n",
                // The caller's EFLAGS: DF, AC, NT clear again.
                "popfl\n"
            ]
        );
    };
}

per_mechanism!(flagged_stub, "tb_flagged");

unsafe extern "C" {
    fn tb_flagged_int80(nr: u32, args: *const [u32; 6], set: u32, out: *mut After) -> u32;
    fn tb_flagged_callgate(nr: u32, args: *const [u32; 6], set: u32, out: *mut After) -> u32;
    fn tb_flagged_sysenter(nr: u32, args: *const [u32; 6], set: u32, out: *mut After) -> u32;
    fn tb_flagged_syscall(nr: u32, args: *const [u32; 6], set: u32, out: *mut After) -> u32;
}

/// System call `nr` through `m` with `args`, entered with `set` (only its
/// DF, AC, NT and ID bits; never TF, which would end the task by design) added
/// to EFLAGS. Returns what the user had right after the entry sequence.
/// The mechanism must be usable (see `sys::cpuinfo`).
pub fn call(m: Mechanism, nr: u32, args: [u32; 6], set: u32) -> After {
    let f = match m {
        Mechanism::Int80 => tb_flagged_int80,
        Mechanism::CallGate => tb_flagged_callgate,
        Mechanism::Sysenter => tb_flagged_sysenter,
        Mechanism::Syscall => tb_flagged_syscall,
    };
    let mut out = After::default();
    // SAFETY: the stub preserves the C ABI's callee-saved registers and the
    // stack, writes exactly one `After` to `out`, and restores the caller's
    // EFLAGS before it returns.
    unsafe { f(nr, &args, set & (eflags::HOSTILE | eflags::ID), &mut out) };
    out
}
