//! The system calls of pipes and signals: thin, each reads its registers,
//! calls `proc::pipe` or `proc::signal` with the user-copy routines
//! (`usercopy::USER_MEM`), and stores the result. A pipe's `read` and
//! `write` come through the pipe-aware entries the table holds while a
//! pipe exists (`syscall::route_pipes`), so the fixed descriptors' paths
//! are what they were.
//!
//! Those that may post a signal to their caller or wait end with
//! `signal::on_return`, which delivers a pending signal on the way out.

use abi::syscall::fd::FIRST_PIPE;
use abi::syscall::sig::SIG_IGN;

use super::usercopy::{self, USER_MEM};
use super::{err, Regs};
use crate::proc::{pipe, signal};

fn result(r: Result<u32, i32>) -> u32 {
    match r {
        Ok(v) => v,
        Err(e) => err(e),
    }
}

/// `pipe(fds)`: from now on `read` and `write` look for pipe descriptors.
pub extern "fastcall" fn sys_pipe(r: &mut Regs) {
    r.eax = result(pipe::pipe(r.ebx, &USER_MEM).map(|()| 0));
    if r.eax == 0 {
        super::route_pipes(true);
    }
}

/// `close(fd)`.
pub extern "fastcall" fn sys_close(r: &mut Regs) {
    r.eax = result(pipe::close(r.ebx).map(|()| 0));
}

/// `dup2(old, new)`.
pub extern "fastcall" fn sys_dup2(r: &mut Regs) {
    r.eax = result(pipe::dup2(r.ebx, r.ecx));
}

/// `read` while a pipe exists (see `syscall::route_pipes`): a pipe
/// descriptor here, any other on the fixed path. Once no pipe is left,
/// the table goes back to the fixed path.
pub extern "fastcall" fn sys_read_any(r: &mut Regs) {
    if r.ebx < FIRST_PIPE {
        if pipe::open() == 0 {
            super::route_pipes(false);
        }
        return super::sys_read(r);
    }
    r.eax = result(pipe::read(r.ebx, r.ecx, r.edx, &USER_MEM));
    signal::on_return(r, r.eax, &USER_MEM);
}

/// `write` while a pipe exists (as `sys_read_any`).
pub extern "fastcall" fn sys_write_any(r: &mut Regs) {
    if r.ebx < FIRST_PIPE {
        if pipe::open() == 0 {
            super::route_pipes(false);
        }
        return super::sys_write(r);
    }
    r.eax = result(pipe::write(r.ebx, r.ecx, r.edx, &USER_MEM));
    signal::on_return(r, r.eax, &USER_MEM);
}

/// `kill(pid, sig)`.
pub extern "fastcall" fn sys_kill(r: &mut Regs) {
    let (pid, sig) = (r.ebx, r.ecx);
    let v = result(signal::kill(pid, sig, &USER_MEM, r).map(|()| 0));
    r.eax = v;
}

/// `sigaction(sig, handler, old)`: `old` is checked before anything
/// changes.
pub extern "fastcall" fn sys_sigaction(r: &mut Regs) {
    let (sig, handler, old) = (r.ebx, r.ecx, r.edx);
    if old != 0 {
        if let Err(e) = usercopy::check(old, 4, usercopy::Access::Write) {
            r.eax = err(e);
            return;
        }
    }
    // A handler is a user address (or SIG_DFL / SIG_IGN): one in the
    // kernel would only fault in ring 3, but say so at once.
    if handler > SIG_IGN && usercopy::check(handler, 1, usercopy::Access::Read).is_err() {
        r.eax = err(abi::syscall::errno::EFAULT);
        return;
    }
    r.eax = match signal::sigaction(sig, handler) {
        Ok(was) => {
            if old != 0 && usercopy::copy_out(old, &was.to_le_bytes()).is_err() {
                err(abi::syscall::errno::EFAULT)
            } else {
                0
            }
        }
        Err(e) => err(e),
    };
}

/// `sigreturn()`: the registers come back from the signal frame.
pub extern "fastcall" fn sys_sigreturn(r: &mut Regs) {
    signal::sigreturn(r, &USER_MEM);
}
