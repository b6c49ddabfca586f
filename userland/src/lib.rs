//! The ring-3 side: start-up, a panic handler, and one system-call stub per
//! mechanism, full and floor.
//!
//! Each stub is an assembly routine with the C calling convention:
//! `tb_sys_<mechanism>(nr, a1, a2, a3, a4, a5, a6) -> u32`. It loads the
//! ABI registers (EAX = nr, EBX, ECX, EDX, ESI, EDI, EBP = a1..a6), runs the
//! mechanism's instruction sequence, and returns EAX. The sequences are the
//! point: read `SEQ_*` below to see what each mechanism costs the user side.
#![no_std]

#[macro_use]
mod seq;
pub mod bench;
pub mod flagged;
pub mod model;
pub mod sys;
pub mod threads;

use core::fmt::{self, Write};

pub use abi;

/// Every register, EFLAGS and the segment selectors at one instant: what
/// [`capture_state!`] stores (Linux's `check_initial_reg_state` checks the
/// same at a program's first instruction).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[repr(C)]
pub struct State {
    pub eax: u32,
    pub ebx: u32,
    pub ecx: u32,
    pub edx: u32,
    pub esi: u32,
    pub edi: u32,
    pub ebp: u32,
    pub esp: u32,
    pub eflags: u32,
    pub ds: u32,
    pub es: u32,
    pub fs: u32,
    pub gs: u32,
    pub ss: u32,
    pub cs: u32,
}

/// Assembly that stores the registers into the [`State`] static named
/// `$sym` with plain MOVs (DS must be usable), changing no register and no
/// flag; PUSHFL/POPL take one word of stack.
#[macro_export]
macro_rules! capture_state {
    ($sym:literal) => {
        concat!(
            "movl %eax, ",
            $sym,
            "\n",
            "movl %ebx, ",
            $sym,
            "+4\n",
            "movl %ecx, ",
            $sym,
            "+8\n",
            "movl %edx, ",
            $sym,
            "+12\n",
            "movl %esi, ",
            $sym,
            "+16\n",
            "movl %edi, ",
            $sym,
            "+20\n",
            "movl %ebp, ",
            $sym,
            "+24\n",
            "movl %esp, ",
            $sym,
            "+28\n",
            "pushfl\n popl ",
            $sym,
            "+32\n",
            "movw %ds, ",
            $sym,
            "+36\n",
            "movw %es, ",
            $sym,
            "+40\n",
            "movw %fs, ",
            $sym,
            "+44\n",
            "movw %gs, ",
            $sym,
            "+48\n",
            "movw %ss, ",
            $sym,
            "+52\n",
            "movw %cs, ",
            $sym,
            "+56\n",
        )
    };
}

unsafe extern "C" {
    /// The registers at `_start`'s first instruction, as the kernel handed
    /// them over (zero until then, so each selector's upper half reads 0).
    /// Its own section, which `user.ld` places after every other `.bss`:
    /// the programs' other statics stay where they were without it (the
    /// benchmarks' buffers, whose page boundaries their figures depend on).
    pub static mut TB_START_STATE: State;
}

core::arch::global_asm!(
    concat!(
        r#"
    .pushsection .tb_start_state, "aw", @nobits
    .global TB_START_STATE
    .balign 4
TB_START_STATE:
    .skip {state_size}
    .popsection

    .pushsection .text.start, "ax"
    .global _start
    /* The kernel enters with EAX = the program's argument and ESP at the
       top of a fresh stack; what it handed over is kept first
       (TB_START_STATE). main(arg) -> exit status. */
_start:
"#,
        capture_state!("TB_START_STATE"),
        r#"
    pushl %eax
    call main
    pushl %eax
    call {exit}
    ud2
    .popsection
    "#
    ),
    exit = sym exit_from_start,
    state_size = const core::mem::size_of::<State>(),
    options(att_syntax)
);

extern "C" fn exit_from_start(code: i32) -> ! {
    sys::exit(code)
}

/// Formats to the console (fd 1) through int 0x80.
pub struct Console;

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        sys::write(abi::syscall::fd::STDOUT, s.as_bytes());
        Ok(())
    }
}

#[macro_export]
macro_rules! println {
    ($($arg:tt)*) => {{
        use core::fmt::Write as _;
        let _ = writeln!($crate::Console, $($arg)*);
    }};
}

/// Where every timing program starts: `(info, fence, batches, size)`, the
/// CPU as `cpuinfo` describes it, the fence that suits it, the command
/// line's batch count (1 to `max_batches`) and batch size (at least 1).
/// When the CPU has no TSC nothing can be timed: a line under the program's
/// name `prog` says so and the program returns `none` (its exit status,
/// after what else it has to say). A macro, not a function: the programs'
/// `main`s hold their timed regions, and these lines, written out in each,
/// are the code those regions were measured in.
#[macro_export]
macro_rules! timing_start {
    ($prog:literal, $max_batches:expr, else $none:expr) => {{
        let info: $crate::abi::syscall::CpuInfo = $crate::sys::cpuinfo();
        if info.features & $crate::abi::syscall::FEATURE_TSC == 0 {
            $crate::println!(concat!(
                $prog,
                ": this CPU has no TSC: nothing can be timed"
            ));
            return $none;
        }
        let fence = $crate::bench::Fence::for_cpu(&info);
        let batches = (info.batches as usize).clamp(1, $max_batches);
        let size = info.batch_size.max(1);
        (info, fence, batches, size)
    }};
}

/// One record (see `abi::report`), from ring 3: its body goes to the
/// kernel through the `record` system call, which checks it and prints it
/// tagged with this program (a console write cannot carry a record).
#[macro_export]
macro_rules! record {
    ($kind:expr $(, $k:literal => $v:expr)* $(,)?) => {
        $crate::record!($kind $(, $k => $v)* ; "")
    };
    // `; tail`: a value whose Display writes more keys, each with a
    // leading space (`abi::model::Snaps`).
    ($kind:expr $(, $k:literal => $v:expr)* ; $tail:expr) => {{
        use core::fmt::Write as _;
        let mut buf = $crate::Line::new();
        let _ = write!(buf, "{}", $kind);
        $( let _ = write!(buf, " {}={}", $k, $v); )*
        let _ = write!(buf, "{}", $tail);
        buf.submit_record();
    }};
}

/// A line buffer, so a record reaches the console in one `write`.
pub struct Line {
    buf: [u8; Line::CAPACITY],
    len: usize,
}

impl Line {
    /// Bytes one line buffer holds.
    pub const CAPACITY: usize = 512;

    #[allow(clippy::new_without_default)]
    pub fn new() -> Line {
        Line {
            buf: [0; Line::CAPACITY],
            len: 0,
        }
    }
    pub fn len(&self) -> usize {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("?")
    }
    pub fn flush(&mut self) {
        sys::write(abi::syscall::fd::STDOUT, &self.buf[..self.len]);
        self.len = 0;
    }
    /// Sends the buffer as one record's body (`sys::record`); a refused
    /// record is said on the console.
    pub fn submit_record(&mut self) {
        submit_record(&self.buf[..self.len]);
        self.len = 0;
    }
}

impl Write for Line {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let n = s.len().min(self.buf.len() - self.len);
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

/// Sends one record's body through `sys::record`; says so on the console
/// when the kernel refuses it (a bug in the program: the body is ours).
pub fn submit_record(body: &[u8]) {
    if let Err(e) = sys::record(body) {
        println!(
            "record refused ({}): {}",
            abi::syscall::errno::name(e),
            core::str::from_utf8(body).unwrap_or("?")
        );
    }
}

#[panic_handler]
fn panic(info: &core::panic::PanicInfo) -> ! {
    println!("user panic: {}", info.message());
    sys::exit(101)
}
