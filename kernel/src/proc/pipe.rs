//! Pipes: a one-page ring buffer between a read end and a write end, each
//! end reached through a process's descriptors `fd::FIRST_PIPE..`.
//!
//! - `pipe` takes a pipe from a pool of [`MAX_PIPES`] (`-ENFILE` when none
//!   is left or no frame is) and two free descriptors of the process
//!   (`-EMFILE`); its buffer is one frame from the frame allocator, given
//!   back when the last end closes. `fork` copies the descriptors, `dup2`
//!   copies one, `close` and the end of a process drop them.
//! - A read takes what is there (at most what was asked), sleeps while the
//!   pipe is empty and a writer exists, and returns 0 (end of file) once
//!   every write end is closed.
//! - A write of at most [`PIPE_BUF`] bytes waits until it fits whole
//!   (atomic: never interleaved with another writer's); a longer one goes in
//!   piece by piece as room appears. When no read end is left, the writer
//!   gets `SIGPIPE` and `-EPIPE` (or the count written so far).
//! - Both waits are interruptible (`proc::sleep_interruptible`): a caught
//!   signal makes the call return `-EINTR` (or the count written so far),
//!   after its handler ran. No restart.
//! - Readers sleep on the pipe's read channel and writers on its write
//!   channel; each side wakes the other after it moved bytes, with the
//!   sleepqueues' wake-up, which sends a reschedule IPI to a sleeper's CPU.
//! - User memory is copied with the caller's `UserMem`: the whole buffer
//!   is checked first (`-EFAULT` before anything moves or waits), and each
//!   copy checks its piece again (after a sleep the buffer may have been
//!   unmapped by another thread); a piece that fails ends the call with
//!   the count moved so far.
//!
//! Locking key:
//!   (s) the scheduler lock: the pool, every pipe, every descriptor table.

use abi::syscall::fd::{FIRST_PIPE, PIPE_BUF, PIPE_FDS, PIPE_SIZE};
use abi::syscall::{errno, sig, MAX_PIPES, MAX_PROCS};

use super::{UserMem, Woken};
use crate::arch::frames;
use crate::sync::cell::BootCell;
use crate::task::{sched, sleepqueue};

/// One pipe; a free slot has no buffer.
#[derive(Clone, Copy)]
struct Pipe {
    /// The buffer's frame (identity-mapped), 0 while the slot is free.
    buf: u32,
    /// Where the oldest byte is, and how many bytes there are.
    head: usize,
    len: usize,
    /// Open descriptors on each end, over every process.
    readers: u32,
    writers: u32,
}

const FREE: Pipe = Pipe {
    buf: 0,
    head: 0,
    len: 0,
    readers: 0,
    writers: 0,
};

/// What a descriptor holds: a pipe and which end of it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct End {
    pipe: u8,
    write: bool,
}

struct Pipes {
    pipes: [Pipe; MAX_PIPES],
    /// Each process slot's pipe descriptors (`FIRST_PIPE + index`).
    fds: [[Option<End>; PIPE_FDS as usize]; MAX_PROCS],
    /// Pipes still open when the last task ended (the leak test wants 0).
    left_at_reset: u32,
}

static PIPES: BootCell<Pipes> = BootCell::new(Pipes {
    pipes: [FREE; MAX_PIPES],
    fds: [[None; PIPE_FDS as usize]; MAX_PROCS],
    left_at_reset: 0,
});

fn pipes() -> &'static mut Pipes {
    debug_assert!(sched::held_here(), "pipes without the scheduler lock");
    // SAFETY: (s) held (asserted): no other CPU touches the pipes, and on
    // this CPU one path runs at a time (interrupts off in ring 0).
    unsafe { PIPES.get_mut() }
}

/// The wait channels of pipe `k`: kernel addresses inside its slot, one
/// for its readers and one for its writers.
fn read_chan(k: usize) -> u32 {
    &raw const PIPES as u32 + (k * core::mem::size_of::<Pipe>()) as u32
}

fn write_chan(k: usize) -> u32 {
    read_chan(k) + 1
}

/// The pipe buffer of pipe `p` (one page).
fn buffer(p: &Pipe) -> &'static mut [u8] {
    // SAFETY: `p.buf` is a frame from `frames::alloc` that this pipe owns
    // until its last end closes, identity-mapped, PIPE_SIZE long; used
    // only under the lock.
    unsafe { core::slice::from_raw_parts_mut(p.buf as *mut u8, PIPE_SIZE) }
}

/// The running process's slot.
fn me() -> usize {
    super::current().expect("a user thread belongs to a process")
}

/// The end behind descriptor `fd` of process `i`.
fn end_of(i: usize, fd: u32) -> Option<End> {
    let k = fd.checked_sub(FIRST_PIPE)?;
    *pipes().fds[i].get(k as usize)?
}

fn take_ref(e: End) {
    let p = &mut pipes().pipes[e.pipe as usize];
    if e.write {
        p.writers += 1;
    } else {
        p.readers += 1;
    }
}

/// One descriptor on `e` goes: the other side learns it when this was the
/// last of its end; the buffer goes back with the last descriptor.
fn drop_ref(e: End) {
    let k = e.pipe as usize;
    let p = &mut pipes().pipes[k];
    if e.write {
        p.writers -= 1;
        if p.writers == 0 {
            sleepqueue::wakeup(read_chan(k), true);
        }
    } else {
        p.readers -= 1;
        if p.readers == 0 {
            sleepqueue::wakeup(write_chan(k), true);
        }
    }
    let p = &mut pipes().pipes[k];
    if p.readers == 0 && p.writers == 0 {
        frames::free(p.buf);
        *p = FREE;
    }
}

/// `pipe(fds)`: the read and write ends' descriptors, stored at `fds`.
pub fn pipe(fds: u32, mem: &UserMem) -> Result<(), i32> {
    let _g = sched::locked();
    let me = me();
    let t = pipes();
    let mut free = (0..PIPE_FDS as usize).filter(|&k| t.fds[me][k].is_none());
    let (Some(r), Some(w)) = (free.next(), free.next()) else {
        return Err(errno::EMFILE);
    };
    let k = t
        .pipes
        .iter()
        .position(|p| p.buf == 0)
        .ok_or(errno::ENFILE)?;
    let buf = frames::alloc().ok_or(errno::ENFILE)?;
    t.pipes[k] = Pipe {
        buf,
        readers: 1,
        writers: 1,
        ..FREE
    };
    let (re, we) = (
        End {
            pipe: k as u8,
            write: false,
        },
        End {
            pipe: k as u8,
            write: true,
        },
    );
    t.fds[me][r] = Some(re);
    t.fds[me][w] = Some(we);
    let (rfd, wfd) = (FIRST_PIPE + r as u32, FIRST_PIPE + w as u32);
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&rfd.to_le_bytes());
    out[4..].copy_from_slice(&wfd.to_le_bytes());
    if let Err(e) = (mem.write)(fds, &out) {
        let t = pipes();
        t.fds[me][r] = None;
        t.fds[me][w] = None;
        drop_ref(re);
        drop_ref(we);
        return Err(e);
    }
    Ok(())
}

/// `close(fd)`.
pub fn close(fd: u32) -> Result<(), i32> {
    let _g = sched::locked();
    let me = me();
    let e = end_of(me, fd).ok_or(errno::EBADF)?;
    pipes().fds[me][(fd - FIRST_PIPE) as usize] = None;
    drop_ref(e);
    Ok(())
}

/// `dup2(old, new)`: `new`.
pub fn dup2(old: u32, new: u32) -> Result<u32, i32> {
    let _g = sched::locked();
    let me = me();
    let e = end_of(me, old).ok_or(errno::EBADF)?;
    let slot = new
        .checked_sub(FIRST_PIPE)
        .filter(|&k| k < PIPE_FDS)
        .ok_or(errno::EBADF)? as usize;
    if old == new {
        return Ok(new);
    }
    take_ref(e);
    if let Some(was) = pipes().fds[me][slot].replace(e) {
        drop_ref(was);
    }
    Ok(new)
}

/// `read(fd, buf, len)` on a pipe descriptor: the count, or an errno.
pub fn read(fd: u32, buf: u32, len: u32, mem: &UserMem) -> Result<u32, i32> {
    let _g = sched::locked();
    let e = end_of(me(), fd).ok_or(errno::EBADF)?;
    if e.write {
        return Err(errno::EBADF);
    }
    if len == 0 {
        return Ok(0);
    }
    (mem.check)(buf, len, true)?;
    let k = e.pipe as usize;
    loop {
        let p = pipes().pipes[k];
        if p.len > 0 {
            let n = (len as usize).min(p.len);
            // At most two pieces: up to the buffer's end, then from 0.
            let first = n.min(PIPE_SIZE - p.head);
            let b = buffer(&p);
            (mem.write)(buf, &b[p.head..p.head + first])?;
            let mut done = first;
            if first < n && (mem.write)(buf + first as u32, &b[..n - first]).is_ok() {
                done = n;
            }
            let q = &mut pipes().pipes[k];
            q.head = (q.head + done) % PIPE_SIZE;
            q.len -= done;
            sleepqueue::wakeup(write_chan(k), true);
            return Ok(done as u32);
        }
        if p.writers == 0 {
            return Ok(0);
        }
        if super::sleep_interruptible(read_chan(k), 0) == Woken::Interrupted {
            return Err(errno::EINTR);
        }
    }
}

/// `write(fd, buf, len)` on a pipe descriptor: the count, or an errno.
pub fn write(fd: u32, buf: u32, len: u32, mem: &UserMem) -> Result<u32, i32> {
    let _g = sched::locked();
    let e = end_of(me(), fd).ok_or(errno::EBADF)?;
    if !e.write {
        return Err(errno::EBADF);
    }
    (mem.check)(buf, len, false)?;
    let k = e.pipe as usize;
    let atomic = len as usize <= PIPE_BUF;
    let mut done = 0usize;
    while done < len as usize {
        let p = pipes().pipes[k];
        if p.readers == 0 {
            super::signal::post_self(sig::SIGPIPE);
            return if done > 0 {
                Ok(done as u32)
            } else {
                Err(errno::EPIPE)
            };
        }
        let room = PIPE_SIZE - p.len;
        let left = len as usize - done;
        if room > 0 && (!atomic || room >= left) {
            let n = left.min(room);
            let tail = (p.head + p.len) % PIPE_SIZE;
            let first = n.min(PIPE_SIZE - tail);
            let b = buffer(&p);
            let at = buf + done as u32;
            let moved = match (mem.read)(at, &mut b[tail..tail + first]) {
                Err(e) if done == 0 => return Err(e),
                Err(_) => 0,
                Ok(()) if first < n => match (mem.read)(at + first as u32, &mut b[..n - first]) {
                    Ok(()) => n,
                    Err(_) => first,
                },
                Ok(()) => n,
            };
            pipes().pipes[k].len += moved;
            done += moved;
            sleepqueue::wakeup(read_chan(k), true);
            if moved < n {
                // The rest of the user buffer is bad: what went in counts.
                return Ok(done as u32);
            }
            continue;
        }
        if super::sleep_interruptible(write_chan(k), 0) == Woken::Interrupted {
            return if done > 0 {
                Ok(done as u32)
            } else {
                Err(errno::EINTR)
            };
        }
    }
    Ok(done as u32)
}

/// `fork`: the child's descriptors are the parent's (hook).
pub fn fork(parent: usize, child: usize) {
    let t = pipes();
    t.fds[child] = t.fds[parent];
    for e in t.fds[child].into_iter().flatten() {
        take_ref(e);
    }
}

/// A process ended: its descriptors close (hook).
pub fn exit(i: usize) {
    let fds = core::mem::replace(&mut pipes().fds[i], [None; PIPE_FDS as usize]);
    for e in fds.into_iter().flatten() {
        drop_ref(e);
    }
}

/// After a task: every pipe left goes, counted (hook).
pub fn reset() {
    let t = pipes();
    let mut left = 0;
    for p in t.pipes.iter_mut() {
        if p.buf != 0 {
            frames::free(p.buf);
            left += 1;
        }
        *p = FREE;
    }
    t.fds = [[None; PIPE_FDS as usize]; MAX_PROCS];
    t.left_at_reset = left;
}

/// Pipes the last task left open (dropped by [`reset`]).
pub fn left_at_reset() -> u32 {
    let _g = sched::locked();
    pipes().left_at_reset
}

/// Pipes open now.
pub fn open() -> usize {
    let _g = sched::locked();
    pipes().pipes.iter().filter(|p| p.buf != 0).count()
}
