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
//! - A sleeper only ever sees the pipe it went to sleep on. Each slot has a
//!   generation, bumped when `pipe` takes it, and a descriptor names the
//!   generation with the slot ([`End`]). After every wake-up the call looks
//!   its descriptor up again and goes on only if it still names the same
//!   end of the same generation; otherwise another thread closed it (and
//!   perhaps made a new pipe in the slot, or put another end behind the
//!   number) and the call returns `-EBADF`, as a fresh call on that
//!   descriptor would, or the count written so far: no byte is taken from
//!   or put into another pipe, in this process or another. The sleeper
//!   holds no reference: a descriptor closed under it stops counting at
//!   once (its writers may meet `EPIPE`, its readers end of file). Closing
//!   a descriptor wakes the sleepers of its own end as well as, when it
//!   was the last, those of the other, so a call whose descriptor went
//!   comes back without waiting for a byte.
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

/// One pipe; a free slot has no buffer. Every field is (s).
#[derive(Clone, Copy)]
struct Pipe {
    /// The buffer's frame (identity-mapped), 0 while the slot is free.
    buf: u32,
    /// How many times `pipe` has taken this slot (kept while it is free).
    generation: u32,
    /// Where the oldest byte is, and how many bytes there are.
    head: usize,
    len: usize,
    /// Open descriptors on each end, over every process.
    readers: u32,
    writers: u32,
}

const FREE: Pipe = Pipe {
    buf: 0,
    generation: 0,
    head: 0,
    len: 0,
    readers: 0,
    writers: 0,
};

/// What a descriptor holds: a pipe (its slot and the slot's generation
/// when `pipe` made it) and which end of it.
#[derive(Clone, Copy, PartialEq, Eq)]
struct End {
    pipe: u8,
    write: bool,
    generation: u32,
}

struct Pipes {
    pipes: [Pipe; MAX_PIPES],
    /// Each process slot's pipe descriptors (`FIRST_PIPE + index`).
    fds: [[Option<End>; PIPE_FDS as usize]; MAX_PROCS],
    /// Each process slot's open descriptors, one bit each: fork and exit
    /// skip a process without any (the fork experiment's path).
    used: [u32; MAX_PROCS],
    /// Pipes still open when the last task ended (the leak test wants 0).
    left_at_reset: u32,
}

static PIPES: BootCell<Pipes> = BootCell::new(Pipes {
    pipes: [FREE; MAX_PIPES],
    fds: [[None; PIPE_FDS as usize]; MAX_PROCS],
    used: [0; MAX_PROCS],
    left_at_reset: 0,
});

/// Descriptor slot `k` of process `i` now holds `e` (or nothing).
fn set_fd(i: usize, k: usize, e: Option<End>) -> Option<End> {
    let t = pipes();
    if e.is_some() {
        t.used[i] |= 1 << k;
    } else {
        t.used[i] &= !(1 << k);
    }
    core::mem::replace(&mut t.fds[i][k], e)
}

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

/// One descriptor on `e` goes: the sleepers of its end look at their
/// descriptors again (the one asleep on this descriptor ends its call), the
/// other side learns it when this was the last of its end; the buffer goes
/// back with the last descriptor, the slot keeping its generation.
fn drop_ref(e: End) {
    let k = e.pipe as usize;
    let p = &mut pipes().pipes[k];
    let (mine, theirs) = if e.write {
        p.writers -= 1;
        (write_chan(k), (p.writers == 0).then(|| read_chan(k)))
    } else {
        p.readers -= 1;
        (read_chan(k), (p.readers == 0).then(|| write_chan(k)))
    };
    sleepqueue::wakeup(mine, true);
    if let Some(c) = theirs {
        sleepqueue::wakeup(c, true);
    }
    let p = &mut pipes().pipes[k];
    if p.readers == 0 && p.writers == 0 {
        frames::free(p.buf);
        *p = Pipe {
            generation: p.generation,
            ..FREE
        };
    }
}

/// Whether descriptor `fd` of process `i` (the caller's, looked up once
/// before the call's first sleep) still names `e` after a sleep: another
/// thread may have closed it, and made a new pipe in the same slot or put
/// another end behind the number.
fn still_names(i: usize, fd: u32, e: End) -> bool {
    end_of(i, fd) == Some(e)
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
    let generation = t.pipes[k].generation.wrapping_add(1);
    t.pipes[k] = Pipe {
        buf,
        generation,
        readers: 1,
        writers: 1,
        ..FREE
    };
    let (re, we) = (
        End {
            pipe: k as u8,
            write: false,
            generation,
        },
        End {
            pipe: k as u8,
            write: true,
            generation,
        },
    );
    set_fd(me, r, Some(re));
    set_fd(me, w, Some(we));
    let (rfd, wfd) = (FIRST_PIPE + r as u32, FIRST_PIPE + w as u32);
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&rfd.to_le_bytes());
    out[4..].copy_from_slice(&wfd.to_le_bytes());
    if let Err(e) = (mem.write)(fds, &out) {
        set_fd(me, r, None);
        set_fd(me, w, None);
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
    set_fd(me, (fd - FIRST_PIPE) as usize, None);
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
    if let Some(was) = set_fd(me, slot, Some(e)) {
        drop_ref(was);
    }
    Ok(new)
}

/// `read(fd, buf, len)` on a pipe descriptor: the count, or an errno.
pub fn read(fd: u32, buf: u32, len: u32, mem: &UserMem) -> Result<u32, i32> {
    let _g = sched::locked();
    // The buffer first, as for the fixed descriptors.
    (mem.check)(buf, len, true)?;
    let i = me();
    let e = end_of(i, fd).ok_or(errno::EBADF)?;
    if e.write {
        return Err(errno::EBADF);
    }
    if len == 0 {
        return Ok(0);
    }
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
        if !still_names(i, fd, e) {
            return Err(errno::EBADF);
        }
    }
}

/// `write(fd, buf, len)` on a pipe descriptor: the count, or an errno.
pub fn write(fd: u32, buf: u32, len: u32, mem: &UserMem) -> Result<u32, i32> {
    let _g = sched::locked();
    (mem.check)(buf, len, false)?;
    let i = me();
    let e = end_of(i, fd).ok_or(errno::EBADF)?;
    if !e.write {
        return Err(errno::EBADF);
    }
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
        let woken = super::sleep_interruptible(write_chan(k), 0);
        let gone = !still_names(i, fd, e);
        if woken == Woken::Interrupted || gone {
            return if done > 0 {
                Ok(done as u32)
            } else if gone {
                Err(errno::EBADF)
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
    t.used[child] = t.used[parent];
    if t.used[parent] == 0 {
        return;
    }
    t.fds[child] = t.fds[parent];
    for e in t.fds[child].into_iter().flatten() {
        take_ref(e);
    }
}

/// A process ended: its descriptors close (hook).
pub fn exit(i: usize) {
    if pipes().used[i] == 0 {
        return;
    }
    pipes().used[i] = 0;
    let fds = core::mem::replace(&mut pipes().fds[i], [None; PIPE_FDS as usize]);
    for e in fds.into_iter().flatten() {
        drop_ref(e);
    }
}

/// After a task: every pipe left goes, counted (hook): how many.
pub fn reset() -> u32 {
    let t = pipes();
    let mut left = 0;
    for p in t.pipes.iter_mut() {
        if p.buf != 0 {
            frames::free(p.buf);
            left += 1;
        }
        *p = Pipe {
            generation: p.generation,
            ..FREE
        };
    }
    t.fds = [[None; PIPE_FDS as usize]; MAX_PROCS];
    t.used = [0; MAX_PROCS];
    t.left_at_reset = left;
    left
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
