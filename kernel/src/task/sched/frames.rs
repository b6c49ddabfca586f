//! The frames on a thread's kernel stack that a switch pops: what
//! `switch_stacks` saved, and the start frame of a new thread.

use abi::layout::selector;

use super::table::sched;
use crate::arch::regs::{EntryFrame, IretFrame};

/// What `switch_stacks` pops when it resumes a thread: FS and GS, the
/// callee-saved registers, then the address `ret` goes to.
#[repr(C)]
pub(super) struct SwitchFrame {
    pub(super) gs: u32,
    pub(super) fs: u32,
    pub(super) eflags: u32,
    pub(super) edi: u32,
    pub(super) esi: u32,
    pub(super) ebx: u32,
    pub(super) ebp: u32,
    pub(super) ret: u32,
}

impl SwitchFrame {
    /// A first switch to a new thread on `cpu`: zero registers, then
    /// `start`; FS the kernel's data and GS `cpu`'s per-CPU segment, as
    /// the boot left them (a new user thread's start routine loads its own).
    pub(super) fn to(start: *const u8, cpu: usize) -> SwitchFrame {
        SwitchFrame {
            gs: (selector::PERCPU_BASE + 8 * cpu as u16) as u32,
            fs: selector::KERNEL_DATA as u32,
            // The kernel's known flags (interrupts off: the start routine
            // runs under the scheduler lock).
            eflags: abi::eflags::KERNEL_ENTRY,
            edi: 0,
            esi: 0,
            ebx: 0,
            ebp: 0,
            ret: start as u32,
        }
    }
}

/// A new kernel thread's stack: `kthread_start` pops the entry and its argument.
#[repr(C)]
pub(super) struct KernelStart {
    pub(super) switch: SwitchFrame,
    pub(super) entry: u32,
    pub(super) arg: u32,
}

/// A new user thread's stack: `uthread_start` pops the argument into EAX
/// and IRETs to ring 3.
#[repr(C)]
pub(super) struct UserStart {
    pub(super) switch: SwitchFrame,
    pub(super) arg: u32,
    pub(super) iret: IretFrame,
}

/// A forked thread's stack: `fork_start` restores the parent's registers
/// (EAX = 0) and segments and IRETs to ring 3.
#[repr(C)]
pub(super) struct ForkStart {
    pub(super) switch: SwitchFrame,
    pub(super) frame: EntryFrame,
}

/// Pushes `frame` below the thread's saved ESP (a new thread's start frame).
pub(super) fn push_frame<F>(i: usize, frame: F) {
    let t = &mut sched().threads[i];
    let new_esp = t.esp - core::mem::size_of::<F>() as u32;
    // SAFETY: inside the thread's own kernel stack, which nothing uses yet
    // (the thread has never run); u32-aligned like every frame here.
    unsafe { (new_esp as *mut F).write(frame) };
    t.esp = new_esp;
}

/// FS and GS as they are now: in a system call, the user's (the entries
/// leave them alone, and [`switch_stacks`] gives each thread its own back).
pub(super) fn user_fs_gs() -> (u32, u32) {
    let (fs, gs): (u32, u32);
    // SAFETY: reading segment registers has no side effect; the upper
    // halves are zeroed first (MOV from a segment register to a 32-bit
    // register leaves them undefined before the Pentium Pro).
    unsafe {
        core::arch::asm!(
            "xorl {f}, {f}",
            "xorl {g}, {g}",
            "movw %fs, {f:x}",
            "movw %gs, {g:x}",
            f = out(reg) fs,
            g = out(reg) gs,
            options(att_syntax, nomem, nostack, preserves_flags)
        )
    };
    (fs, gs)
}
