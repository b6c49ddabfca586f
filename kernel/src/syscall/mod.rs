//! The one dispatcher every full entry calls, and the system calls.
//!
//! `dispatch` receives the user's registers as PUSHAL saved them: the number
//! in EAX, arguments in EBX, ECX, EDX, ESI, EDI, EBP. It writes the result
//! (or a negative errno) into the saved EAX, which the entry's POPAL returns.

mod ipc;
mod threads;
mod trace;
pub mod usercopy;

use abi::syscall::{errno, fd, nr, CpuInfo};
use abi::Mechanism;

use crate::arch::regs::Regs;
use crate::entry;
use crate::task;
use spin::Once;

/// What the `cpuinfo` system call reports: learnt once at boot (`kmain`).
static SYSINFO: Once<CpuInfo> = Once::new();

pub fn set_sysinfo(info: CpuInfo) {
    assert!(!SYSINFO.is_completed(), "cpuinfo set twice");
    SYSINFO.call_once(|| info);
}

/// The boot's `cpuinfo` record (set before any user program runs).
pub fn sysinfo() -> CpuInfo {
    *SYSINFO.get().expect("cpuinfo is set during boot")
}

const _: entry::upcall::Dispatch = dispatch;

fn err(e: i32) -> u32 {
    (-e) as u32
}

/// A system call: reads its arguments from the saved registers and writes
/// its result into the saved EAX.
type Handler = extern "fastcall" fn(&mut Regs);

/// The system-call table, indexed by number (`abi::nr`). Built by a const
/// fn so each handler is placed by its name, not by its position.
///
/// Two entries change while the kernel runs: `read` and `write` point at
/// `sys_read`/`sys_write`, the fixed descriptors' paths (0..=4), whenever
/// no pipe exists, and at `ipc`'s pipe-aware entries while one does
/// ([`route_pipes`]), which send a pipe descriptor to the pipes and any
/// other to the same `sys_read`/`sys_write`. So the fixed descriptors'
/// paths are the same instructions as before pipes existed (the icount
/// figures of `write` and the macro mix do not move), and cost two more
/// (a compare and a branch) only while a pipe is open somewhere.
static mut TABLE: [Handler; nr::COUNT as usize] = table();

/// Points `read` and `write` at the pipe-aware entries (`on`) or back at
/// the fixed descriptors' own.
pub(crate) fn route_pipes(on: bool) {
    let (read, write): (Handler, Handler) = if on {
        (ipc::sys_read_any, ipc::sys_write_any)
    } else {
        (sys_read, sys_write)
    };
    // SAFETY: aligned word stores into the table, which every CPU reads a
    // whole word at a time (x86 keeps aligned word accesses atomic: SDM
    // Vol. 3A §9.1.1); either value is a valid handler for the number.
    unsafe {
        core::ptr::addr_of_mut!(TABLE[nr::READ as usize]).write_volatile(read);
        core::ptr::addr_of_mut!(TABLE[nr::WRITE as usize]).write_volatile(write);
    }
}

const fn table() -> [Handler; nr::COUNT as usize] {
    let mut t: [Handler; nr::COUNT as usize] = [sys_enosys; nr::COUNT as usize];
    t[nr::NULL as usize] = sys_null;
    t[nr::EXIT as usize] = sys_exit;
    t[nr::WRITE as usize] = sys_write;
    t[nr::READ as usize] = sys_read;
    t[nr::GETPID as usize] = sys_getpid;
    t[nr::GETEUID as usize] = sys_geteuid;
    t[nr::CPUINFO as usize] = sys_cpuinfo;
    t[nr::ENTRY_FLOOR as usize] = sys_entry_floor;
    t[nr::ARGSUM as usize] = sys_argsum;
    t[nr::TRACE as usize] = trace::sys_trace;
    t[nr::YIELD as usize] = threads::sys_yield;
    t[nr::SLEEP as usize] = threads::sys_sleep;
    t[nr::THREAD_CREATE as usize] = threads::sys_thread_create;
    t[nr::THREAD_EXIT as usize] = threads::sys_thread_exit;
    t[nr::UMTX_LOCK as usize] = threads::sys_umtx_lock;
    t[nr::UMTX_UNLOCK as usize] = threads::sys_umtx_unlock;
    t[nr::SLEEP_ON as usize] = threads::sys_sleep_on;
    t[nr::WAKEUP as usize] = threads::sys_wakeup;
    t[nr::POOL_ALIGN as usize] = threads::sys_pool_align;
    t[nr::GETTID as usize] = threads::sys_gettid;
    t[nr::GETPRIO as usize] = threads::sys_getprio;
    t[nr::LOOKUP_BENCH as usize] = threads::sys_lookup_bench;
    t[nr::RECORD as usize] = sys_record;
    t[nr::CPU as usize] = threads::sys_cpu;
    t[nr::FORK as usize] = sys_fork;
    t[nr::WAITPID as usize] = sys_waitpid;
    t[nr::GETPPID as usize] = sys_getppid;
    t[nr::SBRK as usize] = sys_sbrk;
    t[nr::PIPE as usize] = ipc::sys_pipe;
    t[nr::CLOSE as usize] = ipc::sys_close;
    t[nr::DUP2 as usize] = ipc::sys_dup2;
    t[nr::KILL as usize] = ipc::sys_kill;
    t[nr::SIGACTION as usize] = ipc::sys_sigaction;
    t[nr::SIGRETURN as usize] = ipc::sys_sigreturn;
    t
}

/// Called by every full entry stub with ECX = &mut Regs (fastcall). The
/// number is checked against the table's length on every path: anything
/// out of range, negative numbers included (they are huge unsigned), is
/// `-ENOSYS`. The handler is reached by a tail jump. The stubs call it by
/// its link name, `syscall_dispatch` (entry's upcall).
#[unsafe(export_name = "syscall_dispatch")]
pub extern "fastcall" fn dispatch(r: &mut Regs) {
    // SAFETY: a shared read of one word of the table (see `route_pipes`).
    match unsafe { (*core::ptr::addr_of!(TABLE)).get(r.eax as usize) } {
        Some(handler) => handler(r),
        None => r.eax = err(errno::ENOSYS),
    }
}

extern "fastcall" fn sys_enosys(r: &mut Regs) {
    r.eax = err(errno::ENOSYS);
}

/// `null()`.
extern "fastcall" fn sys_null(r: &mut Regs) {
    r.eax = 0;
}

extern "fastcall" fn sys_getpid(r: &mut Regs) {
    r.eax = task::sched::pid_by_stack();
}

extern "fastcall" fn sys_getppid(r: &mut Regs) {
    r.eax = crate::proc::parent_pid();
}

/// `fork()`: the child resumes from a copy of this entry's frame.
extern "fastcall" fn sys_fork(r: &mut Regs) {
    let frame = entry::user_frame(r);
    r.eax = match crate::proc::fork(&frame) {
        Ok(pid) => pid,
        Err(e) => err(e),
    };
}

/// `waitpid(pid, status, flags)`: the status pointer is checked before
/// anything is reaped, and written after (a bad one leaves the child).
extern "fastcall" fn sys_waitpid(r: &mut Regs) {
    let (pid, status, flags) = (r.ebx as i32, r.ecx, r.edx);
    if status != 0 {
        if let Err(e) = usercopy::check(status, 4, usercopy::Access::Write) {
            r.eax = err(e);
            return;
        }
    }
    let store = |v: u32| {
        if status == 0 {
            return Ok(());
        }
        usercopy::copy_out(status, &v.to_le_bytes())
    };
    r.eax = match crate::proc::waitpid(pid, flags, store) {
        Ok(pid) => pid,
        Err(e) => err(e),
    };
    crate::proc::signal::on_return(r, r.eax, &usercopy::USER_MEM);
}

extern "fastcall" fn sys_sbrk(r: &mut Regs) {
    r.eax = match crate::proc::sbrk(r.ebx as i32) {
        Ok(old) => old,
        Err(e) => err(e),
    };
}

extern "fastcall" fn sys_geteuid(r: &mut Regs) {
    r.eax = task::current().euid;
}

extern "fastcall" fn sys_exit(r: &mut Regs) {
    task::end_current(task::End::Exit(r.ebx as i32))
}

pub(crate) extern "fastcall" fn sys_write(r: &mut Regs) {
    r.eax = write(r.ebx, r.ecx, r.edx);
}

pub(crate) extern "fastcall" fn sys_read(r: &mut Regs) {
    r.eax = read(r.ebx, r.ecx, r.edx);
}

extern "fastcall" fn sys_cpuinfo(r: &mut Regs) {
    r.eax = cpuinfo(r.ebx, r.ecx);
}

extern "fastcall" fn sys_entry_floor(r: &mut Regs) {
    r.eax = entry_floor(r.ebx, r.ecx);
}

extern "fastcall" fn sys_argsum(r: &mut Regs) {
    r.eax = abi::syscall::argsum([r.ebx, r.ecx, r.edx, r.esi, r.edi, r.ebp]);
}

extern "fastcall" fn sys_record(r: &mut Regs) {
    r.eax = record(r.ebx, r.ecx);
}

/// `record(buf, len)`: checks one user record and prints it tagged with the
/// calling program (`abi::report::check_user_record`, `nr::RECORD`).
///
/// The body is read from user memory once, into a kernel buffer, and the
/// check and the print both use that copy. Read twice, it could change in
/// between: another thread of the program, on another CPU truly in
/// parallel (KVM, multi-threaded TCG), may rewrite it after the check, and
/// the line printed would hold a newline and a record marker of its choice.
#[inline(never)]
fn record(buf: u32, len: u32) -> u32 {
    use abi::report::{
        check_user_record, KEY_PID, KEY_PROG, KEY_TID, MARKER, MAX_USER_RECORD, SCHEMA,
    };
    /// The copy of the record being checked and printed. Used only with
    /// the scheduler lock held, and no kernel code is preempted: one record
    /// at a time on the whole machine.
    static mut COPY: [u8; MAX_USER_RECORD] = [0; MAX_USER_RECORD];
    if len == 0 || len as usize > MAX_USER_RECORD {
        return err(errno::EINVAL);
    }
    // Lock order: the scheduler lock, then the console's. The copy may
    // fault and the fault takes the scheduler lock (`proc::fault`).
    let _g = task::sched::locked();
    let (pid, tid) = crate::proc::who();
    // SAFETY: COPY is touched only here, with the scheduler lock held (so
    // by one CPU), and this call runs to its end before another record call
    // on this CPU can start; `len` is at most COPY's length, checked above.
    let body = unsafe { &mut (&mut *core::ptr::addr_of_mut!(COPY))[..len as usize] };
    if let Err(e) = usercopy::copy_in(buf, body) {
        return err(e);
    }
    let _held = crate::console::lock();
    let Ok(kind) = check_user_record(body) else {
        return err(errno::EINVAL);
    };
    // Printable ASCII, checked: the rest of the line after the kind.
    let rest = core::str::from_utf8(&body[kind.len()..]).unwrap_or("");
    crate::kprintln!(
        "{MARKER}{SCHEMA} {kind} {KEY_PROG}={} {KEY_PID}={pid} {KEY_TID}={tid}{rest}",
        abi::report::Escaped(task::current().name),
    );
    0
}

/// A user program's bytes to the console, read from user memory once: a
/// piece at a time into a kernel buffer, each piece printed from the copy
/// (`console::write_bytes` escapes every `@` of it). Another thread that
/// rewrites the buffer meanwhile changes what is printed, never how it is
/// escaped; one that unmaps it ends the write with `EFAULT` (what was
/// printed stays printed). The console lock is held throughout, so the
/// write stays whole, and a character cut at a piece's end waits for the
/// rest of it; the scheduler lock before it, since a copy that faults
/// takes that one (lock order: scheduler, then console).
#[inline(never)]
fn print_user(ptr: u32, len: u32) -> Result<(), i32> {
    const PIECE: usize = 256;
    let _g = task::sched::locked();
    let _held = crate::console::lock();
    let mut buf = [0u8; PIECE + UTF8_MAX_TAIL];
    let (mut carry, mut at, end_at) = (0, ptr, ptr + len);
    while at < end_at {
        let n = ((end_at - at) as usize).min(PIECE);
        usercopy::copy_in(at, &mut buf[carry..carry + n])?;
        at += n as u32;
        let end = carry + n;
        let tail = if at == end_at {
            0
        } else {
            utf8_tail(&buf[..end])
        };
        crate::console::write_bytes(&buf[..end - tail]);
        buf.copy_within(end - tail..end, 0);
        carry = tail;
    }
    Ok(())
}

/// The most bytes of a UTF-8 character that can end a piece unfinished.
const UTF8_MAX_TAIL: usize = 3;

/// How many bytes at the end of `b` start a UTF-8 character that is not
/// complete yet (a lead byte with fewer continuation bytes than it needs).
fn utf8_tail(b: &[u8]) -> usize {
    for k in 1..=UTF8_MAX_TAIL.min(b.len()) {
        let need = match b[b.len() - k] {
            0x80..=0xBF => continue,
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => return 0,
        };
        return if need > k { k } else { 0 };
    }
    0
}

/// `write(fd, buf, len)`.
#[inline(never)]
fn write(fd: u32, buf: u32, len: u32) -> u32 {
    if let Err(e) = usercopy::check(buf, len, usercopy::Access::Read) {
        return err(e);
    }
    let done = match fd {
        fd::STDOUT | fd::STDERR => print_user(buf, len).map(|_| len),
        fd::NULL => Ok(len),
        fd::RING => ring::write(buf, len),
        _ => Err(errno::EBADF),
    };
    done.unwrap_or_else(err)
}

/// `read(fd, buf, len)`.
#[inline(never)]
fn read(fd: u32, buf: u32, len: u32) -> u32 {
    if let Err(e) = usercopy::check(buf, len, usercopy::Access::Write) {
        return err(e);
    }
    let done = match fd {
        fd::STDIN | fd::NULL => Ok(0),
        fd::RING => ring::read(buf, len),
        _ => Err(errno::EBADF),
    };
    done.unwrap_or_else(err)
}

#[inline(never)]
fn cpuinfo(buf: u32, len: u32) -> u32 {
    let mut info: CpuInfo = sysinfo();
    // The counters may have gone off since boot (a ring-3 RDPMC faulted).
    if !crate::arch::pmu::user_counters_on() {
        info.features &= !abi::syscall::FEATURE_FIXED_PMC;
    }
    if (len as usize) < core::mem::size_of::<CpuInfo>() {
        return err(errno::EINVAL);
    }
    // SAFETY: a CpuInfo is plain integers (`repr(C)`, no padding read as
    // anything but bytes): its bytes are what user space receives.
    let bytes = unsafe {
        core::slice::from_raw_parts(
            (&raw const info) as *const u8,
            core::mem::size_of::<CpuInfo>(),
        )
    };
    match usercopy::copy_out(buf, bytes) {
        Ok(()) => 0,
        Err(e) => err(e),
    }
}

#[inline(never)]
fn entry_floor(mechanism: u32, on: u32) -> u32 {
    match Mechanism::from_u32(mechanism) {
        Some(m) if entry::is_usable(m) && on <= 1 => {
            entry::select_floor(m, on == 1);
            0
        }
        _ => err(errno::EINVAL),
    }
}

/// The kernel ring buffer behind `fd::RING`.
mod ring {
    use abi::syscall::fd::RING_SIZE;

    use super::usercopy::{copy_in, copy_out};
    use crate::sync::cell::BootCell;

    struct Ring {
        buf: [u8; RING_SIZE],
        head: usize,
        len: usize,
    }

    static RING: BootCell<Ring> = BootCell::new(Ring {
        buf: [0; RING_SIZE],
        head: 0,
        len: 0,
    });

    /// Appends what fits of the user bytes at `ptr`; returns the count, or
    /// `EFAULT` when the first byte could not be read (a copy cut short
    /// keeps what came before it). Out of line, so the lock it takes does
    /// not lengthen `write`'s other paths.
    #[inline(never)]
    pub fn write(ptr: u32, len: u32) -> Result<u32, i32> {
        let _g = crate::task::sched::locked();
        // SAFETY: the scheduler lock (held) guards the ring: threads on
        // other CPUs may call at once; on this CPU IF is clear.
        let r = unsafe { RING.get_mut() };
        let n = (len as usize).min(RING_SIZE - r.len);
        let mut done = 0;
        while done < n {
            // At most two contiguous pieces: up to the end, then from 0.
            let tail = (r.head + r.len) % RING_SIZE;
            let k = (n - done).min(RING_SIZE - tail);
            if let Err(e) = copy_in(ptr + done as u32, &mut r.buf[tail..tail + k]) {
                return if done > 0 { Ok(done as u32) } else { Err(e) };
            }
            r.len += k;
            done += k;
        }
        Ok(n as u32)
    }

    /// Takes up to `len` bytes into user memory at `ptr`; returns the
    /// count, or `EFAULT` when nothing could be written (bytes not copied
    /// stay in the ring).
    #[inline(never)]
    pub fn read(ptr: u32, len: u32) -> Result<u32, i32> {
        let _g = crate::task::sched::locked();
        // SAFETY: as in write.
        let r = unsafe { RING.get_mut() };
        let n = (len as usize).min(r.len);
        let mut done = 0;
        while done < n {
            let k = (n - done).min(RING_SIZE - r.head);
            if let Err(e) = copy_out(ptr + done as u32, &r.buf[r.head..r.head + k]) {
                return if done > 0 { Ok(done as u32) } else { Err(e) };
            }
            r.head = (r.head + k) % RING_SIZE;
            r.len -= k;
            done += k;
        }
        Ok(n as u32)
    }

    /// Empties the ring (between user programs).
    pub fn reset() {
        let _g = crate::task::sched::locked();
        // SAFETY: as in write.
        let r = unsafe { RING.get_mut() };
        r.head = 0;
        r.len = 0;
    }
}

/// Between tasks: the ring empty, `read` and `write` on their fixed paths
/// (the last task's pipes are gone).
pub fn reset_ring() {
    ring::reset();
    route_pipes(false);
}
