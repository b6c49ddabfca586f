//! The user test program: every syscall through every available mechanism,
//! results and preserved registers checked. Prints a `check` record per
//! check; exits with the number of failures.
#![no_std]
#![no_main]

use userland::abi::cases::eflags;
use userland::abi::layout::{USER_STACK_TOP, USER_TOP};
use userland::abi::report::kind;
use userland::abi::syscall::{
    argsum, errno, fd, nr, ARGSUM_PROBE, DEFAULT_EUID, TRACE_ARG, TRACE_ARG_MASK,
};
use userland::abi::Mechanism;
use userland::{flagged, println, record, sys};

struct Checks {
    failed: i32,
    mech: &'static str,
}

impl Checks {
    fn check(&mut self, what: &str, ok: bool, got: u32) {
        if !ok {
            self.failed += 1;
            println!("utest: FAIL {}: {} (got {:#x})", self.mech, what, got);
        }
        record!(kind::CHECK, "mech" => self.mech, "name" => Name(what),
            "result" => if ok { "pass" } else { "fail" }, "got" => got);
    }
}

/// A check name, escaped for a record (spaces become %20).
struct Name<'a>(&'a str);

impl core::fmt::Display for Name<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        userland::abi::report::Escaped(self.0).fmt(f)
    }
}

fn neg(e: i32) -> u32 {
    (-e) as u32
}

static READ_ONLY: [u8; 8] = *b"readonly";

/// Trace mode (`trace=<mechanism>` on the kernel command line): one traced
/// call, with the user's registers printed before and after.
fn trace(m: Mechanism) -> i32 {
    let seq = match m {
        Mechanism::Int80 => "int $0x80",
        Mechanism::Sysenter => "push ecx; push edx; push ebp; mov esp,ebp; push $ret; sysenter",
        Mechanism::CallGate => "lcall $0x3b, $0",
        Mechanism::Syscall => "push ecx; syscall",
    };
    println!("user: about to enter through {}: {}", m.title(), seq);
    println!(
        "user: before: EAX={:#x} (trace) EBX=0x11111111 ECX=0x22222222 EDX=0x33333333 ESI=0x44444444 EDI=0x55555555 EBP=0x66666666",
        nr::TRACE
    );
    let (before, after) = sys::trace(m);
    let [edi, esi, ebp, esp, ebx, edx, ecx, eax, eflags] = after;
    println!(
        "user: ESP={:#x} EFLAGS={:#010x} before the sequence",
        before[0], before[1]
    );
    println!(
        "user: after:  EAX={:#x} (pid) EBX={:#x} ECX={:#x} EDX={:#x} ESI={:#x} EDI={:#x} EBP={:#x} ESP={:#x} EFLAGS={:#010x}",
        eax, ebx, ecx, edx, esi, edi, ebp, esp, eflags
    );
    let kept = [ebx, ecx, edx, esi, edi, ebp] == sys::KNOWN_REGS && esp == before[0];
    println!(
        "user: {}",
        if kept {
            "every register the ABI promises came back unchanged"
        } else {
            "REGISTERS CHANGED"
        }
    );
    if kept {
        0
    } else {
        1
    }
}

#[unsafe(no_mangle)]
extern "C" fn main(arg: u32) -> i32 {
    if arg & TRACE_ARG_MASK == TRACE_ARG {
        return match Mechanism::from_u32(arg & !TRACE_ARG_MASK) {
            Some(m) => trace(m),
            None => 2,
        };
    }
    let info = sys::cpuinfo();
    let pid = sys::call(Mechanism::Int80, nr::GETPID, [0; 6]);
    let mut failed = 0;
    for m in Mechanism::ALL {
        let mut c = Checks {
            failed: 0,
            mech: m.key(),
        };
        if !info.has(m) {
            record!(kind::CHECK, "mech" => m.key(), "name" => "available", "result" => "skip", "got" => 0);
            continue;
        }
        let call = |n: u32, a: [u32; 6]| sys::call(m, n, a);
        c.check(
            "null returns 0",
            call(nr::NULL, [0; 6]) == 0,
            call(nr::NULL, [0; 6]),
        );
        let p = call(nr::GETPID, [0; 6]);
        c.check("getpid matches int 0x80", p == pid && p > 0, p);
        let e = call(nr::GETEUID, [0; 6]);
        c.check("geteuid is the task's credential", e == DEFAULT_EUID, e);
        let y = call(nr::YIELD, [0; 6]);
        c.check("yield returns 0", y == 0, y);
        let args = ARGSUM_PROBE;
        let s = call(nr::ARGSUM, args);
        c.check("all six arguments arrive", s == argsum(args), s);

        let msg = b"utest: console write\n";
        let w = call(
            nr::WRITE,
            [fd::STDOUT, msg.as_ptr() as u32, msg.len() as u32, 0, 0, 0],
        );
        c.check("write to the console", w == msg.len() as u32, w);
        let w = call(nr::WRITE, [fd::NULL, msg.as_ptr() as u32, 1, 0, 0, 0]);
        c.check("1-byte write to the null device", w == 1, w);
        let w = call(nr::WRITE, [fd::RING, b"abc".as_ptr() as u32, 3, 0, 0, 0]);
        let mut back = [0u8; 8];
        let r = call(nr::READ, [fd::RING, back.as_mut_ptr() as u32, 8, 0, 0, 0]);
        c.check(
            "ring buffer write then read",
            w == 3 && r == 3 && &back[..3] == b"abc",
            r,
        );
        let w = call(nr::WRITE, [99, msg.as_ptr() as u32, 1, 0, 0, 0]);
        c.check("bad fd gives EBADF", w == neg(errno::EBADF), w);

        for n in [nr::COUNT, nr::COUNT + 1, 0x8000_0000, u32::MAX] {
            let r = call(n, [0; 6]);
            c.check("unknown number gives ENOSYS", r == neg(errno::ENOSYS), r);
        }
        let efault = neg(errno::EFAULT);
        let bad: [(&str, u32, u32); 6] = [
            ("pointer into the kernel gives EFAULT", 0x0010_0000, 4),
            ("unmapped pointer gives EFAULT", 0x7000_0000, 4),
            ("range wrapping past 4 GiB gives EFAULT", 0xffff_fff0, 0x20),
            (
                "overflowing length gives EFAULT",
                msg.as_ptr() as u32,
                u32::MAX,
            ),
            ("partly unmapped buffer gives EFAULT", USER_STACK_TOP - 2, 4),
            ("pointer above user space gives EFAULT", USER_TOP, 4),
        ];
        for (what, p, len) in bad {
            let r = call(nr::WRITE, [fd::NULL, p, len, 0, 0, 0]);
            c.check(what, r == efault, r);
        }
        let r = call(nr::READ, [fd::RING, READ_ONLY.as_ptr() as u32, 1, 0, 0, 0]);
        c.check("read into read-only memory gives EFAULT", r == efault, r);
        let r = call(nr::WRITE, [fd::NULL, 0x0010_0000, 0, 0, 0, 0]);
        c.check("zero length is not checked", r == 0, r);

        // A user may enter with DF, AC or NT set. The kernel must not run
        // with them (its copies use `rep movsb`, which DF turns backwards),
        // and the user must get its flags back.
        for (flag, what) in [(eflags::DF, "DF"), (eflags::AC, "AC"), (eflags::NT, "NT")] {
            let data = *b"0123456789abcdef";
            let a = flagged::call(
                m,
                nr::WRITE,
                [fd::RING, data.as_ptr() as u32, 16, 0, 0, 0],
                flag,
            );
            let (w, after) = (a.eax, a.eflags);
            let mut back = [0u8; 16];
            let r = call(nr::READ, [fd::RING, back.as_mut_ptr() as u32, 16, 0, 0, 0]);
            let mut name = userland::Line::new();
            let _ = core::fmt::Write::write_fmt(
                &mut name,
                format_args!("{what} set before the call: ring data intact"),
            );
            c.check(name.as_str(), w == 16 && r == 16 && back == data, r);
            let mut name = userland::Line::new();
            let _ = core::fmt::Write::write_fmt(
                &mut name,
                format_args!("{what} set before the call: the user gets it back"),
            );
            c.check(name.as_str(), after & flag != 0, after);
        }

        let regs = sys::registers_after(m);
        let [set_ebx, set_ecx, set_edx, set_esi, set_edi, set_ebp] = sys::KNOWN_REGS;
        let [gs, fs, es, edi, esi, ebp, _esp, ebx, edx, ecx, eax] = regs;
        c.check("EAX holds the result", eax == 0, eax);
        c.check("EBX preserved", ebx == set_ebx, ebx);
        c.check("ECX preserved", ecx == set_ecx, ecx);
        c.check("EDX preserved", edx == set_edx, edx);
        c.check("ESI preserved", esi == set_esi, esi);
        c.check("EDI preserved", edi == set_edi, edi);
        c.check("EBP preserved", ebp == set_ebp, ebp);
        c.check(
            "ES, FS, GS preserved (null)",
            es == 0 && fs == 0 && gs == 0,
            es | fs | gs,
        );

        let f = sys::floor(m, 8);
        c.check("floor round trips return", f == 0, f);
        let p = call(nr::GETPID, [0; 6]);
        c.check("full entry works again after the floor", p == pid, p);
        failed += c.failed;
    }
    println!("utest: {} failures", failed);
    failed
}
