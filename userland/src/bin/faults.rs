//! One hostile act per run, chosen by the argument (`abi::cases::FAULT_CASES`);
//! the kernel checks that each ends the way the table says. Exit 2 means
//! "this CPU lacks the mechanism the case needs".
#![no_std]
#![no_main]

use core::arch::asm;

use userland::abi::Mechanism;
use userland::sys;

const KERNEL_ADDRESS: u32 = 0x0010_0000;
const UNMAPPED_USER_ADDRESS: u32 = 0x7000_0000;
const TF: u32 = 1 << 8;

#[unsafe(no_mangle)]
extern "C" fn main(case: u32) -> i32 {
    let info = sys::cpuinfo();
    // SAFETY (every asm block below): each is meant to fault or trap; the
    // kernel ends this task, so nothing after it runs.
    unsafe {
        match case {
            0 => (KERNEL_ADDRESS as *mut u32).write_volatile(1),
            1 => {
                (UNMAPPED_USER_ADDRESS as *const u32).read_volatile();
            }
            2 => asm!("jmp *{}", in(reg) KERNEL_ADDRESS, options(att_syntax)),
            3 => asm!("cli"),
            4 => asm!("hlt"),
            5 => asm!("inb $0x60, %al", out("al") _, options(att_syntax)),
            6 => asm!("outb %al, $0x80", in("al") 0u8, options(att_syntax)),
            7 => asm!("int $13"),
            8 => asm!("ud2"),
            9 => {
                asm!("xorl %ecx, %ecx", "divl %ecx", out("eax") _, out("edx") _, out("ecx") _, options(att_syntax))
            }
            10 => asm!("int3"),
            11 => {
                #[allow(unconditional_recursion)]
                fn deeper(n: u32) -> u32 {
                    let pad = core::hint::black_box([n; 256]);
                    deeper(pad[3] + 1) + pad[0]
                }
                deeper(0);
            }
            12 | 13 => {
                if !info.has(Mechanism::Sysenter) {
                    return 2;
                }
                let ebp = if case == 12 {
                    KERNEL_ADDRESS
                } else {
                    UNMAPPED_USER_ADDRESS
                };
                asm!(
                    "pushl %ebp",
                    "movl {e}, %ebp",
                    "pushl $1f",
                    "sysenter",
                    "1:",
                    "popl %ebp",
                    e = in(reg) ebp,
                    in("eax") 0,
                    options(att_syntax)
                );
            }
            14 => {
                if !info.has(Mechanism::Sysenter) {
                    return 2;
                }
                // The stub's stack layout first, then TF, so the single step
                // is armed exactly for the SYSENTER (POPF's TF takes effect
                // after the next instruction).
                asm!(
                    "pushl %ebp",
                    "pushl %ecx",
                    "pushl %edx",
                    "pushl %ebp",
                    "movl %esp, %ebp",
                    "pushl $1f",
                    "pushfl",
                    "orl ${tf}, (%esp)",
                    "popfl",
                    "sysenter",
                    "1:",
                    "popl %ebp",
                    "popl %edx",
                    "popl %ecx",
                    "popl %ebp",
                    tf = const TF,
                    in("eax") 0,
                    options(att_syntax)
                );
            }
            15 => asm!(
                "pushfl",
                "orl ${tf}, (%esp)",
                "popfl",
                "int $0x80",
                "nop",
                tf = const TF,
                in("eax") 0,
                options(att_syntax)
            ),
            16 => asm!(
                "pushfl",
                "orl ${tf}, (%esp)",
                "popfl",
                "lcall $0x3b, $0",
                "nop",
                tf = const TF,
                in("eax") 0,
                options(att_syntax)
            ),
            _ => return 3,
        }
    }
    // Reaching here means the act did not end the task.
    1
}
