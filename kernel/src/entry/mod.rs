//! System-call entry: one file per mechanism, each with a *floor* entry (the
//! cheapest legal round trip, no work) and a *full* entry into the one
//! dispatcher (`syscall::dispatch`).
//!
//! entry sits on `arch` and below `task`: the scheduler points the fast
//! entries at the next thread's kernel stack on every switch
//! ([`set_kernel_stack`]), and a task's end puts them back
//! ([`restore_full_entries`]). The stubs call up by link name (a direct
//! `call`, as before), the two upcalls typed in [`upcall`]:
//! `syscall_dispatch` (the dispatcher, in `syscall`) and, when a fast
//! entry finds no user stack, `trap_sysenter_bad_stack` or
//! `trap_syscall_bad_stack` (the task ends, in `trap`).
//!
//! Every full entry builds the same [`Regs`] block with PUSHAL (the
//! save and restore are written once, `arch::regs::frame_asm!`), so the
//! dispatcher reads the number and arguments in one place whichever way the
//! user came in, and writes the result into the saved EAX.
//!
//! The stubs address that block and the IRET frame above it through
//! [`EntryFrame`]'s named offsets ([`frame`]), never bare numbers.
//!
//! Hygiene on every full path: EFLAGS is reset to a known value
//! (`abi::eflags::KERNEL_ENTRY`, by `pushl; popfl`), which clears DF (Rust
//! assumes it clear), AC and NT (a stale NT would make a later IRET attempt
//! a task return), and TF; the
//! user's segment registers DS and ES are saved and restored (FS and GS no
//! entry touches: `task::sched::switch_stacks` keeps them per thread, since
//! SYSEXIT, SYSRET, LRET and IRET reload neither); the syscall number is
//! checked by the dispatcher.

pub mod callgate;
pub mod int80;
pub mod syscall_amd;
pub mod sysenter;

use abi::Mechanism;

use crate::arch::cpu::{Features, Has};
use crate::sync::cell::SetOnce;

use crate::arch::regs::{frame, EntryFrame, IretFrame, Regs};

/// Why a mechanism is not usable on this CPU.
pub fn unavailable_reason(m: Mechanism, f: &Features) -> Option<&'static str> {
    match m {
        Mechanism::Int80 | Mechanism::CallGate => None,
        Mechanism::Sysenter if !f.has_cpuid => Some("no CPUID, so no SEP bit"),
        Mechanism::Sysenter if !f.has.contains(Has::SEP) => {
            Some("CPUID has no usable SEP (absent, or a Pentium Pro below signature 0x633)")
        }
        Mechanism::Sysenter => None,
        Mechanism::Syscall if !f.is_amd() => {
            Some("not an AMD CPU: Intel CPUs raise #UD for SYSCALL outside 64-bit mode")
        }
        Mechanism::Syscall if !f.has.contains(Has::SYSCALL) => {
            Some("CPUID 0x80000001 has no SYSCALL bit")
        }
        Mechanism::Syscall => None,
    }
}

/// The bit set of mechanisms set up on this machine (`1 << Mechanism`),
/// learnt once by `init`.
static USABLE: SetOnce<u32> = SetOnce::new();

/// The bit set of usable mechanisms (0 before `init`).
pub fn usable() -> u32 {
    USABLE.get().copied().unwrap_or(0)
}

pub fn is_usable(m: Mechanism) -> bool {
    usable() & (1 << m as u32) != 0
}

/// Sets up every available mechanism; returns the bit set of usable ones.
pub fn init(f: &Features, kernel_stack_top: u32) -> u32 {
    int80::init();
    let mut usable = 1 << Mechanism::Int80 as u32 | 1 << Mechanism::CallGate as u32;
    if unavailable_reason(Mechanism::Sysenter, f).is_none() {
        sysenter::init(kernel_stack_top);
        usable |= 1 << Mechanism::Sysenter as u32;
    }
    if unavailable_reason(Mechanism::Syscall, f).is_none() {
        syscall_amd::init();
        usable |= 1 << Mechanism::Syscall as u32;
    }
    USABLE.set(usable);
    usable
}

/// An application processor's share of `init`: its own SYSENTER MSRs
/// (this one's stack, the same entry) and its own SYSCALL set-up (EFER,
/// STAR at this CPU's copy of the entry, this CPU's stack slots).
pub fn init_ap(kernel_stack_top: u32) {
    if is_usable(Mechanism::Sysenter) {
        sysenter::init(kernel_stack_top);
    }
    if is_usable(Mechanism::Syscall) {
        syscall_amd::init();
        syscall_amd::set_kernel_stack(kernel_stack_top);
    }
}

/// Points this CPU's SYSENTER and SYSCALL at the running thread's kernel stack (the
/// interrupt and call-gate entries read TSS.ESP0, which gdt::set_esp0_on sets).
pub fn set_kernel_stack(top: u32) {
    if is_usable(Mechanism::Sysenter) {
        sysenter::set_kernel_stack(top);
    }
    if is_usable(Mechanism::Syscall) {
        syscall_amd::set_kernel_stack(top);
    }
}

/// Points `m` at its floor or its full entry. Int 0x80 and the call gate
/// have a vector and a gate for each, so only the MSR-based ones change.
pub fn select_floor(m: Mechanism, floor: bool) {
    match m {
        Mechanism::Sysenter => sysenter::select(floor),
        Mechanism::Syscall => syscall_amd::select(floor),
        Mechanism::Int80 | Mechanism::CallGate => {}
    }
}

/// Points every MSR-based mechanism back at its full entry, the boot's
/// choice (a task may have moved one to its floor with `entry_floor`).
/// This CPU's MSRs only: each CPU that ran user threads resets its own.
pub fn restore_full_entries() {
    for m in [Mechanism::Sysenter, Mechanism::Syscall] {
        if is_usable(m) {
            select_floor(m, false);
        }
    }
}

/// Where the MSR-based mechanisms point on this CPU now: for each of
/// sysenter and syscall, `Some(true)` at its floor, `Some(false)` at its
/// full entry, `None` when unusable (for the tests).
pub fn floors_selected() -> [Option<bool>; 2] {
    [
        is_usable(Mechanism::Sysenter).then(sysenter::at_floor),
        is_usable(Mechanism::Syscall).then(syscall_amd::at_floor),
    ]
}

/// For a debug trap taken at `eip` in ring 0: if `eip` is the first
/// instruction of an entry stub, where to resume (with TF cleared). A user
/// with TF set traps there after SYSENTER, a call gate or SYSCALL (none of
/// them clears TF), and after an `int` that a MOV SS or POP SS delayed the
/// trap over (the trap held off by MOV SS lands after the next instruction,
/// SDM Vol. 3A §6.8.3). The full entries of the first three resume at their
/// "traced" variant, which gives the user back its TF; every other entry
/// simply goes on.
pub fn traced_entry(eip: u32) -> Option<u32> {
    let traced = [sysenter::traced(), callgate::traced()];
    if let Some(&(_, t)) = traced.iter().find(|&&(entry, _)| entry == eip) {
        return Some(t);
    }
    if let Some(t) = syscall_amd::traced_for(eip) {
        return Some(t);
    }
    [
        addr!(int80_full),
        addr!(int80_floor),
        addr!(sysenter_floor),
        addr!(callgate_floor),
        addr!(syscall_floor),
    ]
    .contains(&eip)
    .then_some(eip)
}

/// The types of the calls the stubs make up into the kernel (see the
/// module text); `syscall` and `trap` check their definitions against them.
pub mod upcall {
    use crate::arch::regs::Regs;

    /// `syscall_dispatch`: ECX = the saved registers (fastcall).
    pub type Dispatch = extern "fastcall" fn(&mut Regs);
    /// `trap_sysenter_bad_stack`, `trap_syscall_bad_stack`: the task ends.
    pub type BadStack = extern "C" fn() -> !;
}

/// `sym` addresses of entry stubs, as u32.
macro_rules! addr {
    ($s:ident) => {{
        unsafe extern "C" {
            static $s: u8;
        }
        &raw const $s as u32
    }};
}
pub(crate) use addr;

/// The slots of a frame that the way back to ring 3 loads EIP, ESP and
/// EFLAGS from (whichever layout: see [`user_frame`]). A signal's delivery
/// and `sigreturn` rewrite them; CS and SS stay what the CPU pushed (the
/// user's selectors), never anything from user memory.
pub struct UserReturn<'a> {
    pub eip: &'a mut u32,
    pub esp: &'a mut u32,
    pub eflags: &'a mut u32,
}

/// [`UserReturn`] of the frame above `r`: a full entry's, or an
/// interrupt's from ring 3 (the same [`EntryFrame`]).
pub fn user_return(r: &mut Regs) -> UserReturn<'_> {
    use abi::layout::selector::USER_CODE;
    // SAFETY: as in `user_frame`: `r` is the bottom of a 60-byte frame
    // built by an entry stub (or an interrupt stub) on the kernel stack,
    // and the caller holds the only reference to it.
    let words = unsafe { &mut *(r as *mut Regs as *mut [u32; 15]) };
    let [_, _, _, _, _, _, _, _, _, _, a, b, c, d, _] = words;
    if *b == USER_CODE as u32 {
        UserReturn {
            eip: a,
            eflags: c,
            esp: d,
        }
    } else {
        // The call gate's: EFLAGS, then EIP, CS, ESP, SS.
        UserReturn {
            eflags: a,
            eip: b,
            esp: d,
        }
    }
}

/// The user's whole context at a full entry (for `fork`, whose child
/// resumes from a copy of it), given the dispatcher's `Regs`.
///
/// The int 0x80, sysenter and syscall stubs leave an [`EntryFrame`] above
/// the registers; the call gate leaves the user's EFLAGS and then LRET's
/// EIP, CS, ESP and SS there instead. The word at the frame's CS slot tells
/// them apart: in an `EntryFrame` it is the user code selector, in the call
/// gate's frame the user's EIP, an address in user space, never 0x1b.
pub fn user_frame(r: &Regs) -> EntryFrame {
    use abi::layout::selector::USER_CODE;
    const _: () = assert!(core::mem::size_of::<EntryFrame>() == 60);
    // SAFETY: every full entry calls the dispatcher with `r` at the bottom
    // of a 60-byte frame it built on the kernel stack (both layouts are
    // 15 words: PUSHAL's 8, ES, DS, and 5 more).
    let words = unsafe { &*(r as *const Regs as *const [u32; 15]) };
    let f = EntryFrame {
        regs: *r,
        es: words[8],
        ds: words[9],
        iret: IretFrame {
            eip: words[10],
            cs: words[11],
            eflags: words[12],
            esp: words[13],
            ss: words[14],
        },
    };
    if f.iret.cs == USER_CODE as u32 {
        return f;
    }
    // The call gate's: EFLAGS, then EIP, CS, ESP, SS.
    EntryFrame {
        iret: IretFrame {
            eflags: words[10],
            eip: words[11],
            cs: words[12],
            esp: words[13],
            ss: words[14],
        },
        ..f
    }
}
