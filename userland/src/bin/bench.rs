//! The default program: for now, one line per mechanism showing it works
//! (a getpid, a geteuid and a floor round trip through it).
#![no_std]
#![no_main]

use userland::abi::syscall::nr;
use userland::abi::Mechanism;
use userland::{println, sys};

#[unsafe(no_mangle)]
extern "C" fn main(_arg: u32) -> i32 {
    let info = sys::cpuinfo();
    let mut failures = 0;
    for m in Mechanism::ALL {
        if !info.has(m) {
            println!(
                "{:<10} unavailable on this CPU (see the kernel's mech line)",
                m.title()
            );
            continue;
        }
        let pid = sys::call(m, nr::GETPID, [0; 6]);
        let euid = sys::call(m, nr::GETEUID, [0; 6]);
        let null = sys::call(m, nr::NULL, [0; 6]);
        let floor = sys::floor(m, 16);
        let ok = pid == sys::call(Mechanism::Int80, nr::GETPID, [0; 6])
            && euid == userland::abi::syscall::DEFAULT_EUID
            && null == 0
            && floor == 0;
        if !ok {
            failures += 1;
        }
        println!(
            "{:<10} works: getpid={} geteuid={} null={} floor x16 {}",
            m.title(),
            pid,
            euid,
            null,
            if floor == 0 { "ok" } else { "FAILED" }
        );
    }
    failures
}
