//! System-call stubs, one per mechanism (see `abi::Mechanism` for how each
//! carries the registers it consumes).

use abi::layout::selector::{CALL_GATE, CALL_GATE_FLOOR};
use abi::syscall::{fd, nr, CpuInfo};
use abi::Mechanism;

/// `tb_sys_NAME(nr, a1..a6) -> u32`, cdecl.
macro_rules! stub {
    ($name:expr, $seq:expr) => {
        asm_fn!(
            $name,
            [
                "movl 20(%esp), %eax\n movl 24(%esp), %ebx\n movl 28(%esp), %ecx\n",
                "movl 32(%esp), %edx\n movl 36(%esp), %esi\n movl 40(%esp), %edi\n",
                "movl 44(%esp), %ebp\n",
                $seq
            ]
        );
    };
}

per_mechanism!(stub, "tb_sys");

/// What the register stubs (`registers_after`, `trace`) load into EBX, ECX,
/// EDX, ESI, EDI and EBP before the call, in that order: values no result
/// or address looks like (the stubs' `movl`s spell them out).
pub const KNOWN_REGS: [u32; 6] = [
    0x1111_1111,
    0x2222_2222,
    0x3333_3333,
    0x4444_4444,
    0x5555_5555,
    0x6666_6666,
];

/// `tb_regs_NAME(out: *mut [u32; 11])`: a NULL call with every register set
/// to a known value and ES, FS, GS null; stores what came back as
/// `[gs, fs, es, edi, esi, ebp, esp, ebx, edx, ecx, eax]`.
macro_rules! regs_stub {
    ($name:expr, $seq:expr) => {
        asm_fn!(
            $name,
            [
                "xorl %eax, %eax\n movw %ax, %es\n movw %ax, %fs\n movw %ax, %gs\n",
                "movl $0x11111111, %ebx\n movl $0x22222222, %ecx\n movl $0x33333333, %edx\n",
                "movl $0x44444444, %esi\n movl $0x55555555, %edi\n movl $0x66666666, %ebp\n",
                "movl $0, %eax\n",
                $seq,
                "pushal\n",
                "xorl %eax, %eax\n",
                "movw %es, %ax\n pushl %eax\n movw %fs, %ax\n pushl %eax\n movw %gs, %ax\n pushl %eax\n",
                "pushl %ds\n popl %es\n",
                "movl %es, %eax\n movw %ax, %fs\n movw %ax, %gs\n",
                "movl 64(%esp), %edi\n movl %esp, %esi\n movl $11, %ecx\n cld\n rep movsl\n",
                "addl $44, %esp\n"
            ]
        );
    };
}

per_mechanism!(regs_stub, "tb_regs");

/// Floor round trips: `tb_floor_NAME(count)` runs `count` floor entries.
/// The sysenter and syscall floors must first be selected with
/// `entry_floor(m, 1)` (they share the MSR with the full entry).
macro_rules! floor_stub {
    ($name:literal, $seq:expr) => {
        asm_fn!(
            $name,
            [
                "movl 20(%esp), %edi\n",
                "testl %edi, %edi\n jz 3f\n",
                "2:\n",
                $seq,
                "decl %edi\n jnz 2b\n",
                "3:\n"
            ]
        );
    };
}

floor_stub!("tb_floor_int80", "int $0x81\n");
floor_stub!(
    "tb_floor_callgate",
    concat!("lcall $", stringify!(0x43), ", $0\n")
);
// SYSEXIT returns to EDX with ESP = ECX: hand over both.
floor_stub!(
    "tb_floor_sysenter",
    "movl %esp, %ecx\n movl $1f, %edx\n sysenter\n1:\n"
);
floor_stub!("tb_floor_syscall", "syscall\n");

unsafe extern "C" {
    fn tb_sys_int80(nr: u32, a1: u32, a2: u32, a3: u32, a4: u32, a5: u32, a6: u32) -> u32;
    fn tb_sys_callgate(nr: u32, a1: u32, a2: u32, a3: u32, a4: u32, a5: u32, a6: u32) -> u32;
    fn tb_sys_sysenter(nr: u32, a1: u32, a2: u32, a3: u32, a4: u32, a5: u32, a6: u32) -> u32;
    fn tb_sys_syscall(nr: u32, a1: u32, a2: u32, a3: u32, a4: u32, a5: u32, a6: u32) -> u32;
    fn tb_regs_int80(out: *mut [u32; 11]);
    fn tb_regs_callgate(out: *mut [u32; 11]);
    fn tb_regs_sysenter(out: *mut [u32; 11]);
    fn tb_regs_syscall(out: *mut [u32; 11]);
    fn tb_floor_int80(count: u32);
    fn tb_floor_callgate(count: u32);
    fn tb_floor_sysenter(count: u32);
    fn tb_floor_syscall(count: u32);
}

// The call-gate selectors are spelled in the sequences above (the assembler
// needs literals); these checks keep them equal to abi's.
const _: () = assert!(CALL_GATE == 0x3b && CALL_GATE_FLOOR == 0x43);

/// A system call through `m`. Calling a mechanism the kernel did not set up
/// faults (#UD or #GP) and ends the task: check [`cpuinfo`] first.
pub fn call(m: Mechanism, nr: u32, a: [u32; 6]) -> u32 {
    let f = match m {
        Mechanism::Int80 => tb_sys_int80,
        Mechanism::CallGate => tb_sys_callgate,
        Mechanism::Sysenter => tb_sys_sysenter,
        Mechanism::Syscall => tb_sys_syscall,
    };
    // SAFETY: the stub preserves every callee-saved register and the stack.
    unsafe { f(nr, a[0], a[1], a[2], a[3], a[4], a[5]) }
}

/// A NULL call through `m` with known register values: what came back, as
/// `[gs, fs, es, edi, esi, ebp, esp, ebx, edx, ecx, eax]`.
pub fn registers_after(m: Mechanism) -> [u32; 11] {
    // SAFETY: each routine writes exactly 11 words to its argument.
    unsafe {
        words_from(
            m,
            [
                tb_regs_int80,
                tb_regs_sysenter,
                tb_regs_callgate,
                tb_regs_syscall,
            ],
        )
    }
}

/// Calls `m`'s stub of `stubs` (given in `Mechanism::ALL`'s order) with
/// room for `N` words, and returns what it wrote there.
///
/// # Safety
/// Each stub writes at most `N` words to its argument and keeps the C ABI.
unsafe fn words_from<const N: usize>(
    m: Mechanism,
    stubs: [unsafe extern "C" fn(*mut [u32; N]); 4],
) -> [u32; N] {
    let mut out = [0; N];
    // SAFETY: the caller's contract; `out` has room for N words.
    unsafe { m.pick(stubs)(&mut out) };
    out
}

/// `count` floor round trips through `m` (selecting and deselecting the
/// floor entry where the mechanism needs it).
pub fn floor(m: Mechanism, count: u32) -> u32 {
    let needs_select = matches!(m, Mechanism::Sysenter | Mechanism::Syscall);
    if needs_select {
        let r = call(Mechanism::Int80, nr::ENTRY_FLOOR, [m as u32, 1, 0, 0, 0, 0]);
        if r != 0 {
            return r;
        }
    }
    // SAFETY: the floor entries return with the stack as it was.
    unsafe {
        match m {
            Mechanism::Int80 => tb_floor_int80(count),
            Mechanism::CallGate => tb_floor_callgate(count),
            Mechanism::Sysenter => tb_floor_sysenter(count),
            Mechanism::Syscall => tb_floor_syscall(count),
        }
    }
    if needs_select {
        call(Mechanism::Int80, nr::ENTRY_FLOOR, [m as u32, 0, 0, 0, 0, 0])
    } else {
        0
    }
}

pub fn write(fd: u32, b: &[u8]) -> u32 {
    call(
        Mechanism::Int80,
        nr::WRITE,
        [fd, b.as_ptr() as u32, b.len() as u32, 0, 0, 0],
    )
}

/// One report record's body (`kind key=value ...`, no marker, no newline)
/// through the `record` system call, which checks it and prints it tagged
/// with this program. `Err(errno)` when the kernel refused it.
pub fn record(body: &[u8]) -> Result<(), i32> {
    abi::syscall::decode(call(
        Mechanism::Int80,
        nr::RECORD,
        [body.as_ptr() as u32, body.len() as u32, 0, 0, 0, 0],
    ))
    .map(|_| ())
}

pub fn exit(code: i32) -> ! {
    call(Mechanism::Int80, nr::EXIT, [code as u32, 0, 0, 0, 0, 0]);
    unreachable!("exit returned")
}

pub fn cpuinfo() -> CpuInfo {
    let mut info = CpuInfo::default();
    let p = &mut info as *mut CpuInfo as u32;
    call(
        Mechanism::Int80,
        nr::CPUINFO,
        [p, core::mem::size_of::<CpuInfo>() as u32, 0, 0, 0, 0],
    );
    info
}

pub const STDOUT: u32 = fd::STDOUT;

/// `tb_trace_NAME(out: *mut [u32; 9])`: one `trace` call through the
/// mechanism with known register values. Records ESP and EFLAGS just before
/// the sequence in `TRACE_BEFORE`, and everything after it in `out` as
/// `[edi, esi, ebp, esp, ebx, edx, ecx, eax, eflags]`.
macro_rules! trace_stub {
    ($name:expr, $seq:expr) => {
        asm_fn!(
            $name,
            [
                "movl 20(%esp), %eax\n movl %eax, tb_trace_out\n",
                "movl $0x11111111, %ebx\n movl $0x22222222, %ecx\n movl $0x33333333, %edx\n",
                "movl $0x44444444, %esi\n movl $0x55555555, %edi\n movl $0x66666666, %ebp\n",
                "movl %esp, TRACE_BEFORE\n",
                "pushfl\n popl TRACE_BEFORE+4\n",
                "movl ${nr}, %eax\n",
                $seq,
                "pushfl\n pushal\n",
                "addl $4, 12(%esp)\n",
                "movl tb_trace_out, %edi\n movl %esp, %esi\n movl $9, %ecx\n cld\n rep movsl\n",
                "addl $36, %esp\n"
            ],
            nr = const nr::TRACE
        );
    };
}

per_mechanism!(trace_stub, "tb_trace");

/// ESP and EFLAGS just before the traced instruction sequence.
#[unsafe(no_mangle)]
pub static mut TRACE_BEFORE: [u32; 2] = [0; 2];
#[unsafe(no_mangle)]
static mut tb_trace_out: u32 = 0;

unsafe extern "C" {
    fn tb_trace_int80(out: *mut [u32; 9]);
    fn tb_trace_callgate(out: *mut [u32; 9]);
    fn tb_trace_sysenter(out: *mut [u32; 9]);
    fn tb_trace_syscall(out: *mut [u32; 9]);
}

/// One traced call through `m`: (ESP, EFLAGS) before, and the registers
/// after as `[edi, esi, ebp, esp, ebx, edx, ecx, eax, eflags]`.
pub fn trace(m: Mechanism) -> ([u32; 2], [u32; 9]) {
    let stubs = [
        tb_trace_int80,
        tb_trace_sysenter,
        tb_trace_callgate,
        tb_trace_syscall,
    ];
    // SAFETY: each routine writes 9 words to its argument and two to
    // TRACE_BEFORE; one thread.
    unsafe {
        let out = words_from(m, stubs);
        (*(&raw const TRACE_BEFORE), out)
    }
}

/// `fork()` through mechanism `m`: `Ok(0)` in the child, `Ok(pid)` in the
/// parent, `Err(errno)` when the kernel refused (no child exists then).
pub fn fork_via(m: Mechanism) -> Result<u32, i32> {
    abi::syscall::decode(call(m, nr::FORK, [0; 6]))
}

/// `fork()` through int 0x80.
pub fn fork() -> Result<u32, i32> {
    fork_via(Mechanism::Int80)
}

/// `waitpid(pid, &status, flags)` (`pid` -1: any child): the reaped
/// child's pid and its status word (`abi::syscall::wait`), `Ok((0, 0))`
/// under `WNOHANG` while the children live.
pub fn waitpid(pid: i32, flags: u32) -> Result<(u32, u32), i32> {
    let mut status = 0u32;
    let r = call(
        Mechanism::Int80,
        nr::WAITPID,
        [pid as u32, &raw mut status as u32, flags, 0, 0, 0],
    );
    abi::syscall::decode(r).map(|p| (p, status))
}

/// `waitpid` with a raw status pointer (the hostile cases).
pub fn waitpid_at(pid: i32, status: u32, flags: u32) -> Result<u32, i32> {
    abi::syscall::decode(call(
        Mechanism::Int80,
        nr::WAITPID,
        [pid as u32, status, flags, 0, 0, 0],
    ))
}

pub fn getpid() -> u32 {
    call(Mechanism::Int80, nr::GETPID, [0; 6])
}

pub fn getppid() -> u32 {
    call(Mechanism::Int80, nr::GETPPID, [0; 6])
}

/// `sbrk(delta)`: the old break, or `Err(ENOMEM)`.
pub fn sbrk(delta: i32) -> Result<u32, i32> {
    abi::syscall::decode(call(
        Mechanism::Int80,
        nr::SBRK,
        [delta as u32, 0, 0, 0, 0, 0],
    ))
}

/// `pipe()`: (read end, write end), or `Err(EMFILE | ENFILE)`.
pub fn pipe() -> Result<(u32, u32), i32> {
    let mut fds = [0i32; 2];
    abi::syscall::decode(call(
        Mechanism::Int80,
        nr::PIPE,
        [fds.as_mut_ptr() as u32, 0, 0, 0, 0, 0],
    ))?;
    Ok((fds[0] as u32, fds[1] as u32))
}

/// `read(fd, buf)`: the bytes read (0 at end of file), or an errno
/// (`EINTR` when a signal's handler ran before any byte came).
pub fn read(fd: u32, buf: &mut [u8]) -> Result<usize, i32> {
    abi::syscall::decode(call(
        Mechanism::Int80,
        nr::READ,
        [fd, buf.as_mut_ptr() as u32, buf.len() as u32, 0, 0, 0],
    ))
    .map(|n| n as usize)
}

/// `write(fd, buf)` with its result decoded: the bytes written, or an
/// errno (`EPIPE` for a pipe nobody reads; `SIGPIPE` came with it).
pub fn write_fd(fd: u32, buf: &[u8]) -> Result<usize, i32> {
    abi::syscall::decode(write(fd, buf)).map(|n| n as usize)
}

/// `close(fd)`.
pub fn close(fd: u32) -> Result<(), i32> {
    abi::syscall::decode(call(Mechanism::Int80, nr::CLOSE, [fd, 0, 0, 0, 0, 0])).map(|_| ())
}

/// `dup2(old, new)`: `new`, now the same pipe end as `old`.
pub fn dup2(old: u32, new: u32) -> Result<u32, i32> {
    abi::syscall::decode(call(Mechanism::Int80, nr::DUP2, [old, new, 0, 0, 0, 0]))
}

/// `kill(pid, sig)` (`abi::syscall::sig`).
pub fn kill(pid: u32, sig: u32) -> Result<(), i32> {
    abi::syscall::decode(call(Mechanism::Int80, nr::KILL, [pid, sig, 0, 0, 0, 0])).map(|_| ())
}

/// What [`sigaction`] installs for a signal.
#[derive(Clone, Copy)]
pub enum Handler {
    /// The default action (end the process; `SIGCHLD`: ignore).
    Default,
    /// Discard the signal.
    Ignore,
    /// Call this function with the signal number, on the interrupted
    /// stack, below a frame the kernel pushed; when it returns, the
    /// kernel's trampoline in that frame calls `sigreturn`.
    Catch(extern "C" fn(u32)),
}

impl Handler {
    /// The word `sigaction` takes.
    pub fn word(self) -> u32 {
        match self {
            Handler::Default => abi::syscall::sig::SIG_DFL,
            Handler::Ignore => abi::syscall::sig::SIG_IGN,
            Handler::Catch(f) => f as usize as u32,
        }
    }
}

/// `sigaction(sig, handler, 0)`.
pub fn sigaction(sig: u32, handler: Handler) -> Result<(), i32> {
    sigaction_raw(sig, handler.word(), 0).map(|_| ())
}

/// `sigaction` with raw words (the previous handler is stored at `old`
/// unless it is 0).
pub fn sigaction_raw(sig: u32, handler: u32, old: u32) -> Result<u32, i32> {
    abi::syscall::decode(call(
        Mechanism::Int80,
        nr::SIGACTION,
        [sig, handler, old, 0, 0, 0],
    ))
}
