//! Signals, minimal and real: `kill` posts one to a process, `sigaction`
//! says what it does, and a caught one is delivered on the way back to
//! ring 3 through a frame on the user stack, which `sigreturn` checks and
//! unwinds.
//!
//! - **Posting** ([`kill`], [`post`]). SIGKILL, and any signal whose handler
//!   is `SIG_DFL` and whose default is to end the process, ends it at once
//!   (`proc::terminate`: its threads stop wherever they are, as for an
//!   exit; `waitpid` says [`wait::signalled`]). `SIG_IGN`, and `SIG_DFL`
//!   for SIGCHLD, drop it. A caught one becomes pending
//!   (`proc::post_caught`), which wakes the process's threads that wait
//!   interruptibly (a pipe, `sleep`, `waitpid`: they return `-EINTR`) and
//!   sends a reschedule IPI to a CPU running one of them. Pid 1 is never
//!   ended by a signal's default action (as Linux's init): only its
//!   handlers run.
//! - **Delivery** ([`deliver`]) happens where the kernel already is on a
//!   slow path back to ring 3, so the fast system-call paths do not change
//!   by one instruction: after an interrupt from ring 3 (the tick, the
//!   APIC timer, the reschedule IPI: [`at_interrupt_return`], one load and
//!   a branch when nothing is pending anywhere), and at the end of the
//!   calls that may post to their own caller or wait (pipe reads and
//!   writes, `kill`, `sigreturn`, `sleep`, `waitpid`: [`on_return`]). A
//!   thread woken in another wait (a user mutex, `sleep_on`, `yield`)
//!   takes its signal at its next interrupt from ring 3, within a tick.
//! - **The frame** (`abi::syscall::sig::Frame`) holds the return address
//!   into its own trampoline, the signal number (the handler's argument),
//!   the interrupted EIP, ESP, EFLAGS and general registers after a magic
//!   word, and the trampoline's 12 bytes (`addl $4, %esp; movl
//!   $SIGRETURN, %eax; int $0x80`). It sits below the interrupted ESP,
//!   aligned so that the handler starts as a cdecl callee of a 16-byte
//!   aligned call. No room on the user stack ends the process (SIGSEGV).
//! - **sigreturn** ([`sigreturn`]) reads the saved context at the caller's
//!   ESP. A frame it cannot read, or whose magic is wrong, ends the process
//!   as SIGSEGV would, and nothing else happens. Otherwise it restores the
//!   registers, EIP and ESP as they are (a bad EIP or ESP only faults in
//!   ring 3), EFLAGS masked to `eflags::USER_SETTABLE` with IF set (never
//!   IOPL, VM, NT, RF or TF); CS and SS are never read from user memory:
//!   the frame the CPU pushed keeps the user's selectors.
//!
//! Everything here runs under the scheduler lock (s), like the process
//! table that holds each process's pending set and handlers.

use abi::eflags;
use abi::syscall::sig::{self, Frame, Saved, FRAME_MAGIC, NSIG, SIGKILL, SIG_DFL, SIG_IGN};
use abi::syscall::{errno, wait};

use super::UserMem;
use crate::arch::regs::{EntryFrame, Regs};
use crate::entry;
use crate::task::{self, sched};

/// `kill(pid, sig)` from the running process.
pub fn kill(pid: u32, sig: u32, mem: &UserMem, r: &mut Regs) -> Result<(), i32> {
    if sig >= NSIG || (pid as i32) <= 0 {
        return Err(errno::EINVAL);
    }
    let _g = sched::locked();
    let target = super::slot_of(pid).ok_or(errno::ESRCH)?;
    if sig != 0 {
        post(target, sig);
        // A signal to oneself is taken before `kill` returns.
        deliver(r, 0, mem);
    }
    Ok(())
}

/// Posts `sig` (1..NSIG) to process `i`, as its handler says. May not
/// return when `i` is the running process and the signal ends it.
pub fn post(i: usize, sig: u32) {
    let p = super::get(i);
    if p.state != super::State::Alive || p.exiting {
        return;
    }
    let h = super::signals(i).handlers[sig as usize];
    if sig == SIGKILL || h == SIG_DFL {
        if sig != SIGKILL && sig::ignored_by_default(sig) || super::is_init(i) {
            return;
        }
        end(i, wait::signalled(sig));
        return;
    }
    if h == SIG_IGN {
        return;
    }
    super::post_caught(i, sig);
}

/// Ends process `i` with `status` (the running one: does not return).
fn end(i: usize, status: u32) {
    if super::current() == Some(i) {
        core::mem::forget(sched::locked());
        super::exit_current(status);
    }
    super::terminate(i, status);
}

/// `sig` to the running process (SIGPIPE from a write).
pub fn post_self(sig: u32) {
    let _g = sched::locked();
    if let Some(me) = super::current() {
        post(me, sig);
    }
}

/// `sigaction(sig, handler)` for the running process: the old handler.
pub fn sigaction(sig: u32, handler: u32) -> Result<u32, i32> {
    if sig == 0 || sig >= NSIG || sig == SIGKILL {
        return Err(errno::EINVAL);
    }
    let _g = sched::locked();
    let me = super::current().ok_or(errno::EINVAL)?;
    let p = super::signals(me);
    let old = core::mem::replace(&mut p.handlers[sig as usize], handler);
    // A pending signal that is no longer caught is dropped (POSIX: setting
    // SIG_IGN discards it; here SIG_DFL too, since a default action that
    // ends the process is taken when the signal is posted).
    if handler <= SIG_IGN {
        let bits = p.pending & !(1 << sig);
        super::set_pending(me, bits);
    }
    Ok(old)
}

/// The end of a system call that may have posted to its own caller or
/// waited: delivers what is pending for the running process into the
/// frame above `r`, the call's result `eax` saved in the signal frame.
pub fn on_return(r: &mut Regs, eax: u32, mem: &UserMem) {
    if super::signals_pending_anywhere() {
        let _g = sched::locked();
        deliver(r, eax, mem);
    }
}

/// After an interrupt from ring 3 (the tick, the APIC timer, a reschedule
/// IPI), before the stub's IRET: delivers a pending signal into the
/// interrupt's frame, at the top of the running thread's kernel stack.
#[inline(always)]
pub fn at_interrupt_return(mem: &UserMem) {
    if super::signals_pending_anywhere() {
        deliver_at_interrupt(mem);
    }
}

#[inline(never)]
fn deliver_at_interrupt(mem: &UserMem) {
    let _g = sched::locked();
    deliver_on_stack(mem);
}

/// The running thread's entry frame: at the top of its kernel stack.
fn entry_regs() -> *mut Regs {
    let top = sched::thread(sched::current_index()).kstack_top;
    (top - core::mem::size_of::<EntryFrame>() as u32) as *mut Regs
}

/// Delivers into the interrupt's frame at the top of the running thread's
/// kernel stack (an `EntryFrame`), saving the EAX it holds. Under the lock.
fn deliver_on_stack(mem: &UserMem) {
    if super::current().is_none() {
        return;
    }
    let frame = entry_regs();
    // SAFETY: the running thread came from ring 3 (it has a process) by an
    // interrupt, whose stub built the 60-byte frame at its kernel stack's
    // top and reads it again only after we return; nothing else refers to
    // it meanwhile.
    let r = unsafe { &mut *frame };
    let eax = r.eax;
    deliver(r, eax, mem);
}

/// Delivers the lowest pending caught signal of the running process into
/// the frame above `r`: the signal frame (with `eax`, the value the
/// interrupted code gets back) goes on the user stack and the way back
/// enters the handler. Under the lock.
pub fn deliver(r: &mut Regs, eax: u32, mem: &UserMem) {
    let Some(me) = super::current() else { return };
    loop {
        let pending = super::signals(me).pending;
        if pending == 0 || super::get(me).exiting {
            return;
        }
        let sig = pending.trailing_zeros();
        super::set_pending(me, pending & !(1 << sig));
        let handler = super::signals(me).handlers[sig as usize];
        if handler <= SIG_IGN {
            // Changed since it was posted (sigaction drops those; kept for safety).
            continue;
        }
        let saved = Saved {
            magic: FRAME_MAGIC,
            eip: 0,
            esp: 0,
            eflags: 0,
            eax,
            ecx: r.ecx,
            edx: r.edx,
            ebx: r.ebx,
            ebp: r.ebp,
            esi: r.esi,
            edi: r.edi,
        };
        let ret = entry::user_return(r);
        let saved = Saved {
            eip: *ret.eip,
            esp: *ret.esp,
            eflags: *ret.eflags,
            ..saved
        };
        let size = core::mem::size_of::<Frame>() as u32;
        // The handler starts as a callee whose caller's ESP was 16-aligned.
        let at = (saved.esp.wrapping_sub(size) & !15).wrapping_sub(4);
        let frame = Frame {
            ret: at + core::mem::offset_of!(Frame, code) as u32,
            sig,
            saved,
            code: sig::TRAMPOLINE,
        };
        // SAFETY: Frame is plain words and bytes (repr(C), no padding).
        let bytes = unsafe {
            core::slice::from_raw_parts(&frame as *const Frame as *const u8, size as usize)
        };
        if saved.esp < size || (mem.write)(at, bytes).is_err() {
            die(r, wait::signalled(sig::SIGSEGV));
        }
        *ret.eip = handler;
        *ret.esp = at;
        // The handler starts with DF clear (the ABI) and no single step.
        *ret.eflags &= !(eflags::DF | eflags::TF);
        return;
    }
}

/// `sigreturn()`: restores the context saved at the caller's ESP; a bad
/// frame ends the process (SIGSEGV) and nothing else.
pub fn sigreturn(r: &mut Regs, mem: &UserMem) {
    let _g = sched::locked();
    let sp = *entry::user_return(r).esp;
    let mut s = Saved::default();
    // SAFETY: Saved is plain words (repr(C), no padding, any bits valid).
    let buf = unsafe {
        core::slice::from_raw_parts_mut(
            &mut s as *mut Saved as *mut u8,
            core::mem::size_of::<Saved>(),
        )
    };
    if (mem.read)(sp, buf).is_err() || s.magic != FRAME_MAGIC {
        die(r, wait::signalled(sig::SIGSEGV));
    }
    r.eax = s.eax;
    r.ecx = s.ecx;
    r.edx = s.edx;
    r.ebx = s.ebx;
    r.ebp = s.ebp;
    r.esi = s.esi;
    r.edi = s.edi;
    let ret = entry::user_return(r);
    *ret.eip = s.eip;
    *ret.esp = s.esp;
    *ret.eflags = (s.eflags & eflags::USER_SETTABLE) | eflags::IF | eflags::RESERVED_1;
    // The next pending signal, if any, interrupts the restored context.
    deliver(r, s.eax, mem);
}

/// The running process dies of a bad signal frame (`status`); pid 1 ends
/// the task as a #GP would.
fn die(r: &mut Regs, status: u32) -> ! {
    core::mem::forget(sched::locked());
    let me = super::current().expect("a user thread belongs to a process");
    if super::is_init(me) {
        let eip = *entry::user_return(r).eip;
        task::end_current(task::End::Fault {
            vector: crate::arch::idt::vector::GENERAL_PROTECTION,
            eip,
        });
    }
    super::exit_current(status)
}
