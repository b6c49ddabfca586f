//! The in-kernel test runner (`mode=test`): kernel tests first, then the
//! user programs that test every mechanism and every fault class. Each test
//! prints a PASS/FAIL line and a `test` record; the summary decides the exit
//! status.

use abi::cases::{Expect, FAULT_CASES};
use abi::cmdline::Options;
use abi::layout::{KERNEL_MAP_END, PAGE_SIZE, USER_BASE, USER_TOP};
use abi::report::kind;
use abi::syscall::errno::EFAULT;
use abi::Mechanism;

use crate::arch::{cpu, frames, paging};
use crate::boot::info::BootInfo;
use crate::syscall::usercopy::{check, Access};
use crate::task::{self, End};
use crate::{entry, kprintln, record};

type Test = (&'static str, fn() -> Result<(), &'static str>);

const KERNEL_TESTS: &[Test] = &[
    (
        "kernel: identity map is supervisor-only",
        kernel_map_supervisor_only,
    ),
    (
        "kernel: page 0 and stack guard pages are unmapped",
        guards_unmapped,
    ),
    ("kernel: frames are zeroed and reused", frames_reused),
    (
        "kernel: user-pointer checks refuse bad ranges",
        user_pointer_checks,
    ),
    (
        "kernel: exception table turns a fault into a fixup",
        extable_fixup,
    ),
    ("kernel: mechanisms match CPUID", mechanisms_match_cpuid),
];

struct Tally {
    passed: u32,
    failed: u32,
}

impl Tally {
    fn report(&mut self, name: &str, result: Result<(), &str>) {
        match result {
            Ok(()) => {
                self.passed += 1;
                kprintln!("PASS {name}");
                record!(kind::TEST, "name" => name, "result" => "pass", "detail" => "");
            }
            Err(why) => {
                self.failed += 1;
                kprintln!("FAIL {name}: {why}");
                record!(kind::TEST, "name" => name, "result" => "fail", "detail" => why);
            }
        }
    }
}

/// Runs every test whose name contains `opts.test`; true when all passed.
pub fn run_all(bi: &BootInfo<'static>, opts: &Options) -> bool {
    let wanted = |name: &str| opts.test.is_none_or(|t| name.contains(t));
    let mut t = Tally {
        passed: 0,
        failed: 0,
    };
    for &(name, test) in KERNEL_TESTS {
        if wanted(name) {
            t.report(name, test());
        }
    }
    // The user test program checks every syscall through every mechanism
    // and prints its own records; its exit status is its failure count.
    let name = "user: every mechanism, every syscall, registers preserved";
    if wanted(name) {
        let r = match bi.module("utest") {
            None => Err("no 'utest' module"),
            Some(m) => match task::run(m, 0) {
                Ok(End::Exit(0)) => Ok(()),
                Ok(End::Exit(_)) => Err("utest reported failures"),
                Ok(_) => Err("utest faulted"),
                Err(_) => Err("utest would not load"),
            },
        };
        t.report(name, r);
    }
    for (i, &(case, expect)) in FAULT_CASES.iter().enumerate() {
        let mut full = heapless_name::Name::new();
        full.push("user fault: ");
        full.push(case);
        if !wanted(full.as_str()) {
            continue;
        }
        let r = match bi.module("faults") {
            None => Err("no 'faults' module"),
            Some(m) => match (task::run(m, i as u32), expect) {
                (Ok(End::Fault { vector, .. }), Expect::Fault(v)) if vector == v => Ok(()),
                (Ok(End::BadStack { .. }), Expect::BadStack) => Ok(()),
                (Ok(End::Exit(c)), Expect::Exit(e)) if c == e => Ok(()),
                (Ok(End::Exit(2)), _) => Err("skipped: the mechanism is unavailable here"),
                (Ok(_), _) => Err("ended another way than expected"),
                (Err(_), _) => Err("faults would not load"),
            },
        };
        // A case for a mechanism this CPU lacks counts as passed-by-skip.
        let r = match r {
            Err(s) if s.starts_with("skipped") => {
                kprintln!("SKIP {}: {}", full.as_str(), s);
                Ok(())
            }
            other => other,
        };
        t.report(full.as_str(), r);
    }
    let (used, total) = frames::usage();
    kprintln!(
        "tests: {} passed, {} failed ({} of {} frames in use)",
        t.passed,
        t.failed,
        used,
        total
    );
    record!(kind::TESTS, "passed" => t.passed, "failed" => t.failed);
    t.failed == 0
}

/// A fixed-size string for test names built at run time (no allocator).
mod heapless_name {
    pub struct Name {
        buf: [u8; 128],
        len: usize,
    }
    impl Name {
        pub fn new() -> Name {
            Name {
                buf: [0; 128],
                len: 0,
            }
        }
        pub fn push(&mut self, s: &str) {
            let n = s.len().min(self.buf.len() - self.len);
            self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
            self.len += n;
        }
        pub fn as_str(&self) -> &str {
            core::str::from_utf8(&self.buf[..self.len]).unwrap_or("?")
        }
    }
}

fn kernel_map_supervisor_only() -> Result<(), &'static str> {
    let mut a = PAGE_SIZE;
    while a < KERNEL_MAP_END {
        if let Some(f) = paging::flags(a) {
            if f & paging::USER != 0 {
                return Err("a kernel page is user-accessible");
            }
        }
        a += 64 * PAGE_SIZE;
    }
    Ok(())
}

fn guards_unmapped() -> Result<(), &'static str> {
    let s = crate::boot::entry::stacks();
    for g in [0, s.boot_guard, s.kernel_guard, s.df_guard] {
        if paging::flags(g).is_some() {
            return Err("a guard page is mapped");
        }
    }
    if paging::flags(s.kernel_top - 4).is_none() {
        return Err("the kernel stack itself is unmapped");
    }
    Ok(())
}

fn frames_reused() -> Result<(), &'static str> {
    let a = frames::alloc().ok_or("no frame")?;
    // SAFETY: the frame is ours and identity-mapped.
    unsafe { (a as *mut u32).write(0x5a5a_5a5a) };
    frames::free(a);
    let b = frames::alloc().ok_or("no frame")?;
    // SAFETY: as above.
    let first = unsafe { (b as *const u32).read() };
    frames::free(b);
    match (a == b, first) {
        (false, _) => Err("a freed frame was not reused"),
        (true, 0) => Ok(()),
        _ => Err("a reused frame was not zeroed"),
    }
}

fn user_pointer_checks() -> Result<(), &'static str> {
    let page = USER_BASE + 0x10_0000;
    paging::map_user(page, false).map_err(|_| "out of memory")?;
    let cases: [(u32, u32, Access, Result<(), i32>, &str); 9] = [
        (page, 16, Access::Read, Ok(()), "mapped read"),
        (page, 16, Access::Write, Err(EFAULT), "write to read-only"),
        (0x10_0000, 4, Access::Read, Err(EFAULT), "kernel pointer"),
        (page + PAGE_SIZE, 4, Access::Read, Err(EFAULT), "unmapped"),
        (
            page + PAGE_SIZE - 2,
            4,
            Access::Read,
            Err(EFAULT),
            "partly unmapped",
        ),
        (
            0xffff_fff0,
            0x20,
            Access::Read,
            Err(EFAULT),
            "wraps past 4 GiB",
        ),
        (
            page,
            u32::MAX,
            Access::Read,
            Err(EFAULT),
            "length overflows",
        ),
        (
            USER_TOP - 4,
            8,
            Access::Read,
            Err(EFAULT),
            "runs past USER_TOP",
        ),
        (0, 0, Access::Read, Ok(()), "zero length"),
    ];
    let mut r = Ok(());
    for (p, len, acc, want, what) in cases {
        if check(p, len, acc) != want {
            r = Err(what);
            break;
        }
    }
    paging::clear_user();
    r
}

fn extable_fixup() -> Result<(), &'static str> {
    let got: u32;
    // SAFETY: the load faults on purpose (unmapped page); the exception
    // table entry sends it to label 3, which sets the result.
    unsafe {
        core::arch::asm!(
            "movl $0, {r}",
            "1: movl ({p}), {r}",
            "jmp 2f",
            "3: movl $1, {r}",
            "2:",
            ".pushsection .extable, \"a\"",
            ".long 1b, 3b",
            ".popsection",
            r = out(reg) got,
            p = in(reg) USER_TOP,
            options(att_syntax)
        );
    }
    if got == 1 {
        Ok(())
    } else {
        Err("the fixup did not run")
    }
}

fn mechanisms_match_cpuid() -> Result<(), &'static str> {
    let f = cpu::features();
    let usable = crate::usable_mechanisms();
    for m in Mechanism::ALL {
        let has = usable & (1 << m as u32) != 0;
        if has != entry::unavailable_reason(m, f).is_none() {
            return Err("usable set disagrees with CPUID");
        }
    }
    if f.is_amd() || usable & (1 << Mechanism::Syscall as u32) == 0 {
        Ok(())
    } else {
        Err("syscall enabled on a non-AMD CPU")
    }
}
