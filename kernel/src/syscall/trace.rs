//! `trace()`: a system call that explains its own arrival. It behaves like
//! getpid, but first prints which entry it came through, what the CPU did
//! to get here, the frame the dispatcher sees, and the way back.
//!
//! The dispatcher is not told how it was entered: every full entry ends in
//! `movl %esp, %ecx; call dispatch`, so the word just below the saved
//! registers is a return address inside the entry stub, and the stub that
//! contains it names the mechanism.

use abi::layout::{selector, VECTOR_SYSCALL};
use abi::Mechanism;

use super::Regs;
use crate::arch::msr::{rdmsr, EFER, IA32_SYSENTER_CS, IA32_SYSENTER_EIP, IA32_SYSENTER_ESP, STAR};
use crate::arch::{gdt, idt};
use crate::entry::addr;
use crate::{kprintln, task};

/// Which entry stub contains `ret`: the one with the highest start at or
/// below it.
fn entered_through(ret: u32) -> Option<Mechanism> {
    let starts = [
        (addr!(int80_full), Mechanism::Int80),
        (addr!(sysenter_full), Mechanism::Sysenter),
        (addr!(callgate_full), Mechanism::CallGate),
        (addr!(syscall_full), Mechanism::Syscall),
    ];
    starts
        .iter()
        .filter(|(a, _)| *a <= ret)
        .max_by_key(|(a, _)| *a)
        .map(|&(_, m)| m)
}

fn flag_names(f: u32) -> heapless::Flags {
    heapless::Flags(f)
}

mod heapless {
    use core::fmt;

    /// EFLAGS with its set flags named.
    pub struct Flags(pub u32);

    impl fmt::Display for Flags {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            write!(f, "{:#010x} [", self.0)?;
            let mut first = true;
            for (bit, name) in abi::eflags::named() {
                if self.0 & bit != 0 {
                    write!(f, "{}{name}", if first { "" } else { " " })?;
                    first = false;
                }
            }
            write!(f, "]")
        }
    }
}

pub extern "fastcall" fn sys_trace(r: &mut Regs) {
    let base = r as *mut Regs as *const u32;
    // SAFETY: the word below the Regs block is the entry stub's return
    // address (see the module comment); the 7 words above it are the rest of
    // the frame every full entry builds; all lie on the ring-0 stack.
    let (ret, above) = unsafe { (*base.sub(1), core::slice::from_raw_parts(base.add(8), 7)) };
    let Some(m) = entered_through(ret) else {
        kprintln!("trace: entered from an unknown place ({ret:#x})");
        r.eax = task::current().pid;
        return;
    };
    let at = |i: usize| base as u32 + 32 + 4 * i as u32;
    kprintln!(
        "kernel: entered through {} (dispatch called from {:#x})",
        m.title(),
        ret
    );
    match m {
        Mechanism::Int80 => {
            let g = idt::raw(VECTOR_SYSCALL);
            let target = (g & 0xffff) as u32 | ((g >> 48) as u32) << 16;
            kprintln!(
                "cpu: int $0x80 read IDT[0x80]: interrupt gate, DPL {}, target {:#06x}:{:#x} (int80_full)",
                (g >> 45) & 3,
                (g >> 16) & 0xffff,
                target
            );
            kprintln!(
                "cpu: CPL 3 -> 0: new SS:ESP from TSS.SS0:ESP0 = {:#06x}:{:#x}; cleared IF, TF, NT",
                gdt::main_tss().ss0,
                gdt::main_tss().esp0
            );
            kprintln!("cpu: pushed on the kernel stack (top first):");
            for (i, name) in [(6, "SS"), (5, "ESP"), (4, "EFLAGS"), (3, "CS"), (2, "EIP")] {
                kprintln!("       [{:#x}] {:<6} = {:#010x}", at(i), name, above[i]);
            }
            kprintln!(
                "cpu: new CS:EIP = {:#06x}:{:#x}",
                selector::KERNEL_CODE,
                target
            );
        }
        Mechanism::Sysenter => {
            // SAFETY: sysenter was usable, so these MSRs exist.
            let (cs, esp, eip) = unsafe {
                (
                    rdmsr(IA32_SYSENTER_CS),
                    rdmsr(IA32_SYSENTER_ESP),
                    rdmsr(IA32_SYSENTER_EIP),
                )
            };
            kprintln!(
                "cpu: sysenter read IA32_SYSENTER_CS = {cs:#x}, _ESP = {esp:#x}, _EIP = {eip:#x}"
            );
            kprintln!(
                "cpu: new CS:EIP = {:#06x}:{:#x}, SS:ESP = {:#06x}:{:#x}; cleared IF; saved nothing, pushed nothing",
                cs,
                eip,
                cs + 8,
                esp
            );
            kprintln!(
                "stub: built an IRET frame from the user stack at EBP (= user ESP {:#x}):",
                above[5]
            );
            for (i, name, from) in [
                (5, "ESP", "EBP"),
                (4, "EFLAGS", "pushfl"),
                (3, "CS", "USER_CODE"),
                (2, "EIP", "[EBP-4]"),
            ] {
                kprintln!(
                    "       [{:#x}] {:<6} = {:#010x}  ({from})",
                    at(i),
                    name,
                    above[i]
                );
            }
            kprintln!("stub: argument 6 (EBP) from [EBP] = {:#x}; ECX and EDX still held arguments 2 and 3", r.ebp);
        }
        Mechanism::CallGate => {
            let d = gdt::raw(selector::CALL_GATE);
            let target = (d & 0xffff) as u32 | ((d >> 48) as u32) << 16;
            kprintln!(
                "cpu: lcall ${:#x} read GDT[{}]: call gate, DPL {}, {} parameters, target {:#06x}:{:#x}",
                selector::CALL_GATE,
                selector::CALL_GATE >> 3,
                (d >> 45) & 3,
                (d >> 32) & 0x1f,
                (d >> 16) & 0xffff,
                target
            );
            kprintln!(
                "cpu: CPL 3 -> 0: new SS:ESP from TSS = {:#06x}:{:#x}; EFLAGS untouched (IF still set)",
                gdt::main_tss().ss0,
                gdt::main_tss().esp0
            );
            kprintln!("cpu: pushed on the kernel stack (top first):");
            for (i, name) in [(6, "SS"), (5, "ESP"), (4, "CS"), (3, "EIP")] {
                kprintln!("       [{:#x}] {:<6} = {:#010x}", at(i), name, above[i]);
            }
            kprintln!(
                "stub: pushed the user's EFLAGS below them: {}",
                flag_names(above[2])
            );
        }
        Mechanism::Syscall => {
            // SAFETY: syscall was usable (an AMD CPU with the bit), so these MSRs exist.
            let (star, efer) = unsafe { (rdmsr(STAR), rdmsr(EFER)) };
            kprintln!(
                "cpu: syscall read STAR = {star:#018x} (EFER.SCE = {}): new CS = {:#x}, SS = {:#x}, EIP = {:#x}",
                efer & 1,
                (star >> 32) & 0xffff,
                ((star >> 32) & 0xffff) + 8,
                star & 0xffff_ffff
            );
            kprintln!(
                "cpu: ECX = return EIP {:#x}; cleared IF; ESP not changed (still the user's)",
                above[2]
            );
            kprintln!("stub: swapped in the kernel stack with one xchg, then built an IRET frame:");
            for (i, name) in [(6, "SS"), (5, "ESP"), (4, "EFLAGS"), (3, "CS"), (2, "EIP")] {
                kprintln!("       [{:#x}] {:<6} = {:#010x}", at(i), name, above[i]);
            }
            kprintln!(
                "stub: argument 2 (ECX) from the user stack at [ESP] = {:#x}",
                r.ecx
            );
        }
    }
    kprintln!(
        "dispatch: frame at {:#x}: EAX={:#x} (nr) EBX={:#x} ECX={:#x} EDX={:#x} ESI={:#x} EDI={:#x} EBP={:#x}; saved DS={:#x} ES={:#x}",
        base as u32,
        r.eax,
        r.ebx,
        r.ecx,
        r.edx,
        r.esi,
        r.edi,
        r.ebp,
        above[1],
        above[0]
    );
    let eflags = if m == Mechanism::CallGate {
        above[2]
    } else {
        above[4]
    };
    let dirty = eflags & abi::eflags::NOT_RESTORED_BY_FAST_RETURN;
    let back = match m {
        Mechanism::Int80 => "iret: restores EIP, CS, EFLAGS, ESP, SS from the frame".into(),
        Mechanism::CallGate => "popfl then lret: the user's EFLAGS, then EIP, CS, ESP, SS".into(),
        Mechanism::Sysenter | Mechanism::Syscall if dirty != 0 => {
            let mut s = Line::new();
            let _ = core::fmt::write(
                &mut s,
                format_args!(
                    "iret, because the saved EFLAGS {} has flags {} cannot restore",
                    flag_names(eflags),
                    if m == Mechanism::Sysenter {
                        "SYSEXIT"
                    } else {
                        "SYSRET"
                    }
                ),
            );
            s
        }
        Mechanism::Sysenter => {
            Line::from("sysexit: the saved EFLAGS has none of TF DF NT AC ID; EDX = EIP, ECX = ESP")
        }
        Mechanism::Syscall => Line::from(
            "sysret: the saved EFLAGS has none of TF DF NT AC ID; ECX = EIP, ESP restored",
        ),
    };
    kprintln!("return: {}", back.as_str());
    r.eax = task::current().pid;
}

/// A small line buffer for one message.
type Line = crate::console::Line<160>;
