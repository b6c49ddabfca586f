// The threads phase (`fuzz_threads=N`): worker threads of this one process,
// spread over every CPU, make N calls in all of `pipe`, `close`, `dup2`,
// `read`, `write`, `sbrk` and `fork` on the same descriptor numbers and the
// same heap, while the main thread closes descriptors under them (so that
// no read or write waits for ever). Included into main.rs.
//
// What is checked:
//
// - every result is one the call may give whatever the others did: a
//   count (whole), or an errno among those the race allows (EBADF for a
//   descriptor another thread closed, EPIPE for a pipe whose readers went,
//   ENFILE while children hold pipes, EAGAIN for a full process table,
//   EFAULT for a bad pointer, ENOMEM for a break out of bounds);
// - no byte crosses pipes. A write is whole messages of [`MSG`] bytes
//   (at most `PIPE_BUF`: it goes in whole), each naming the descriptor it
//   was written through and that descriptor's version (see [`Log`]) when
//   the writer looked. A read of whole messages traces each one back: some
//   pipe its own descriptor named while the call ran must be some pipe the
//   writer's descriptor named since the writer looked. A message that fails
//   is a cross-pipe byte count of [`MSG`]; bytes that are no whole message
//   are torn (no write is split, no read takes part of a message: both
//   must be 0).
//
// The calls that change the descriptors (`pipe`, `close`, `dup2`, and
// `fork`, which copies them) take [`LOG_LOCK`] around the call and its
// entry in the log, so the log's order is the kernel's; the kernel takes
// one lock (the scheduler's) for every one of them anyway, so the user lock
// removes no interleaving the kernel would allow. `read` and `write` take
// it only to look at versions, never across the call: they sleep in the
// kernel while the others close, dup2 and make pipes under them.

/// One message: magic, (descriptor slot, writer, sequence), the
/// descriptor's version, and a check word over the two.
const MSG: usize = 16;
const MSG_MAGIC: u32 = 0x5049_5045;
/// The most messages one read or write moves.
const MAX_MSGS: u32 = 8;
/// Pipe descriptor slots (`fd::FIRST_PIPE + slot`).
const NFD: usize = fd::PIPE_FDS as usize;
/// Versions each slot's history keeps.
const HIST: usize = 2048;
/// At most this many workers (the children they fork need threads too).
const MAX_WORKERS: u32 = 6;
/// A worker's own heap growth is at most this; the heap pointers its reads
/// use fall below `USER_HEAP_BASE + MAX_WORKERS * HEAP_CAP` (mapped or not).
const HEAP_CAP: u32 = 16 * PAGE_SIZE;
/// A forked child's exit code when every call gave what it should.
const CHILD_OK: i32 = 0x3c;
/// The main thread's waits (one tick each) before it calls the phase hung.
const RACE_MAX_WAITS: u32 = 200_000;

/// What each pipe descriptor slot of this process has named, in order: an
/// entry is 0 (closed) or `pipe << 1 | write end`, a pipe being a number
/// this program gives each successful `pipe`. Guarded by [`LOG_LOCK`] (a
/// forked child reads its own copy, alone).
struct Log {
    version: [u32; NFD],
    hist: [[u32; HIST]; NFD],
    next_pipe: u32,
    /// Children forked and not yet reaped (they may hold pipes).
    children: u32,
}

impl Log {
    fn cur(&self, k: usize) -> u32 {
        self.hist[k][self.version[k] as usize % HIST]
    }
    fn set(&mut self, k: usize, e: u32) {
        self.version[k] += 1;
        self.hist[k][self.version[k] as usize % HIST] = e;
    }
    /// Whether pipe `id`'s `write` end was behind slot `k` at some version
    /// from `from` to now; `None` when that history is no longer kept.
    fn named_since(&self, k: usize, from: u32, id: u32, write: bool) -> Option<bool> {
        let now = self.version[k];
        if now.wrapping_sub(from) as usize >= HIST {
            return None;
        }
        let want = id << 1 | write as u32;
        Some((from..=now).any(|v| self.hist[k][v as usize % HIST] == want))
    }
    /// Distinct pipes behind this process's descriptors.
    fn pipes(&self) -> usize {
        let mut ids = [0u32; NFD];
        let mut n = 0;
        for k in 0..NFD {
            let id = self.cur(k) >> 1;
            if id != 0 && !ids[..n].contains(&id) {
                ids[n] = id;
                n += 1;
            }
        }
        n
    }
}

static mut LOG: Log = Log {
    version: [0; NFD],
    hist: [[0; HIST]; NFD],
    next_pipe: 1,
    children: 0,
};
static LOG_LOCK: Umtx = Umtx::new();

/// Runs `f` on the log under [`LOG_LOCK`].
fn with_log<R>(me: u32, f: impl FnOnce(&mut Log) -> R) -> R {
    if LOG_LOCK.lock(me).is_err() {
        race_fail(me, "umtx_lock of the log's lock failed");
    }
    // SAFETY: LOG_LOCK is held: no other thread of this process touches LOG.
    let r = f(unsafe { &mut *(&raw mut LOG) });
    if LOG_LOCK.unlock(me).is_err() {
        race_fail(me, "umtx_unlock of the log's lock failed");
    }
    r
}

/// The phase's counters, summed over the workers.
static RACE_CALLS: AtomicU32 = AtomicU32::new(0);
static RACE_FAILS: AtomicU32 = AtomicU32::new(0);
static CROSS: AtomicU32 = AtomicU32::new(0);
static TORN: AtomicU32 = AtomicU32::new(0);
static CHECKED: AtomicU32 = AtomicU32::new(0);
static UNRESOLVED: AtomicU32 = AtomicU32::new(0);
static RACE_DONE: AtomicU32 = AtomicU32::new(0);
static RACE_CPUS: AtomicU32 = AtomicU32::new(0);
/// Calls by kind, in [`Op`]'s order.
static BY_OP: [AtomicU32; 7] = [const { AtomicU32::new(0) }; 7];
/// Results that were an errno, in [`RACE_ERRNOS`]' order.
const RACE_ERRNOS: [i32; 7] = [
    errno::EBADF,
    errno::EPIPE,
    errno::EFAULT,
    errno::EMFILE,
    errno::ENFILE,
    errno::EAGAIN,
    errno::ENOMEM,
];
static BY_ERRNO: [AtomicU32; 7] = [const { AtomicU32::new(0) }; 7];
/// What each worker needs: its calls and the seed.
static RACE_SEED: AtomicU32 = AtomicU32::new(0);
static RACE_EACH: AtomicU32 = AtomicU32::new(0);
static RACE_EXTRA: AtomicU32 = AtomicU32::new(0);

#[derive(Clone, Copy)]
enum Op {
    Pipe,
    Close,
    Dup2,
    Read,
    Write,
    Sbrk,
    Fork,
}

fn race_fail(me: u32, why: &str) {
    println!("fuzz: threads phase, tid {me}: FAILED: {why}");
    RACE_FAILS.fetch_add(1, SeqCst);
}

/// Counts a result's errno, if it is one.
fn count_errno(r: u32) {
    if let Err(e) = decode(r) {
        if let Some(k) = RACE_ERRNOS.iter().position(|&x| x == e) {
            BY_ERRNO[k].fetch_add(1, SeqCst);
        }
    }
}

fn race_call(n: u32, a: [u32; 3]) -> u32 {
    sys::call(Mechanism::Int80, n, [a[0], a[1], a[2], 0, 0, 0])
}

fn check_word(w1: u32, w2: u32) -> u32 {
    (w1 ^ w2.rotate_left(16) ^ MSG_MAGIC).wrapping_mul(0x9e37_79b1)
}

/// Fills `buf` with `n` messages through slot `k` at version `v`.
fn messages(buf: &mut [u8], n: usize, k: usize, writer: u32, seq: &mut u32, v: u32) {
    for m in 0..n {
        let w1 = k as u32 | (writer & 0xff) << 8 | (*seq & 0xffff) << 16;
        *seq += 1;
        let words = [MSG_MAGIC, w1, v, check_word(w1, v)];
        for (i, w) in words.iter().enumerate() {
            buf[m * MSG + 4 * i..m * MSG + 4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
    }
}

/// A pointer no call may use: kernel memory, unmapped, or past user space.
fn bad_pointer(r: &mut Rng) -> u32 {
    let unmapped = IMAGE_LIMIT + (r.below(0x1000) & !3);
    r.pick(&[
        4,
        0x0010_0000,
        KERNEL_MAP_END - 64,
        unmapped,
        USER_TOP - 8,
        u32::MAX - 8,
    ])
}

/// A slot among those whose entry `want` accepts (or any, one time in four).
fn pick_slot(r: &mut Rng, log: &Log, want: fn(u32) -> bool) -> usize {
    if r.below(4) != 0 {
        let mut ks = [0usize; NFD];
        let mut n = 0;
        for k in 0..NFD {
            if want(log.cur(k)) {
                ks[n] = k;
                n += 1;
            }
        }
        if n > 0 {
            return ks[r.below(n as u32) as usize];
        }
    }
    r.below(NFD as u32) as usize
}

fn is_read_end(e: u32) -> bool {
    e != 0 && e & 1 == 0
}
fn is_write_end(e: u32) -> bool {
    e & 1 == 1
}

/// One worker thread: `RACE_EACH` calls (worker 0 also `RACE_EXTRA`).
fn race_worker(w: u32) {
    let me = threads::gettid();
    RACE_CPUS.fetch_or(1 << threads::cpu(), SeqCst);
    let mut r = Rng::new(RACE_SEED.load(SeqCst) ^ (w + 1).wrapping_mul(0x85eb_ca6b));
    let calls = RACE_EACH.load(SeqCst) + if w == 0 { RACE_EXTRA.load(SeqCst) } else { 0 };
    let writer = w + 1;
    let mut seq = 0u32;
    let mut grown = 0u32;
    let mut buf = [0u8; MSG * MAX_MSGS as usize];
    for _ in 0..calls {
        let op = match r.below(100) {
            0..=9 => Op::Pipe,
            10..=21 => Op::Close,
            22..=31 => Op::Dup2,
            32..=57 => Op::Read,
            58..=85 => Op::Write,
            86..=95 => Op::Sbrk,
            _ => Op::Fork,
        };
        BY_OP[op as usize].fetch_add(1, SeqCst);
        RACE_CALLS.fetch_add(1, SeqCst);
        let verdict = match op {
            Op::Pipe => race_pipe(&mut r, me),
            Op::Close => race_close(&mut r, me),
            Op::Dup2 => race_dup2(&mut r, me),
            Op::Write => race_write(&mut r, me, writer, &mut seq, &mut buf),
            Op::Read => race_read(&mut r, me, &mut buf),
            Op::Sbrk => race_sbrk(&mut r, &mut grown),
            Op::Fork => race_fork(&mut r, me, w),
        };
        if let Err(why) = verdict {
            race_fail(me, why);
            break;
        }
    }
    // Give the heap back: the phase ends with the break at its base.
    if grown > 0 && decode(race_call(nr::SBRK, [(grown as i32).wrapping_neg() as u32, 0, 0])).is_err()
    {
        race_fail(me, "sbrk could not give back what this worker grew");
    }
    RACE_DONE.fetch_add(1, SeqCst);
}

fn race_pipe(r: &mut Rng, me: u32) -> Result<(), &'static str> {
    let mut fds = [0u32; 2];
    let bad = r.below(8) == 0;
    let ptr = if bad {
        bad_pointer(r)
    } else {
        fds.as_mut_ptr() as u32
    };
    with_log(me, |log| {
        let mut free = (0..NFD).filter(|&k| log.cur(k) == 0);
        let (a, b) = (free.next(), free.next());
        let ret = race_call(nr::PIPE, [ptr, 0, 0]);
        count_errno(ret);
        let (Some(a), Some(b)) = (a, b) else {
            return if ret == (-errno::EMFILE) as u32 {
                Ok(())
            } else {
                Err("pipe with fewer than two free descriptors did not give EMFILE")
            };
        };
        if ret == (-errno::ENFILE) as u32 {
            // Every pipe in use: only children (or this process) hold them.
            return if log.children > 0 || log.pipes() >= userland::abi::syscall::MAX_PIPES {
                Ok(())
            } else {
                Err("pipe gave ENFILE with pipes free")
            };
        }
        if bad {
            return if ret == (-errno::EFAULT) as u32 {
                Ok(())
            } else {
                Err("pipe with a bad pointer did not give EFAULT")
            };
        }
        if ret != 0 {
            return Err("pipe failed with an errno the race does not allow");
        }
        if fds != [fd::FIRST_PIPE + a as u32, fd::FIRST_PIPE + b as u32] {
            return Err("pipe did not give the two lowest free descriptors");
        }
        let id = log.next_pipe;
        log.next_pipe += 1;
        log.set(a, id << 1);
        log.set(b, id << 1 | 1);
        Ok(())
    })
}

/// A descriptor number: a pipe slot's mostly, else a fixed one or none.
fn race_fd(r: &mut Rng, k: usize) -> u32 {
    match r.below(16) {
        0 => r.below(fd::FIRST_PIPE),
        1 => fd::FIRST_PIPE + fd::PIPE_FDS + r.below(64),
        _ => fd::FIRST_PIPE + k as u32,
    }
}

/// The slot of descriptor `f`, if it is a pipe descriptor.
fn slot_of(f: u32) -> Option<usize> {
    f.checked_sub(fd::FIRST_PIPE)
        .filter(|&k| k < fd::PIPE_FDS)
        .map(|k| k as usize)
}

fn race_close(r: &mut Rng, me: u32) -> Result<(), &'static str> {
    with_log(me, |log| {
        let k = pick_slot(r, log, |e| e != 0);
        let f = race_fd(r, k);
        let ret = race_call(nr::CLOSE, [f, 0, 0]);
        count_errno(ret);
        let want = match slot_of(f) {
            Some(k) if log.cur(k) != 0 => {
                log.set(k, 0);
                0
            }
            _ => (-errno::EBADF) as u32,
        };
        if ret == want {
            Ok(())
        } else {
            Err("close gave other than 0 on an open descriptor, EBADF on another")
        }
    })
}

fn race_dup2(r: &mut Rng, me: u32) -> Result<(), &'static str> {
    with_log(me, |log| {
        let k = pick_slot(r, log, |e| e != 0);
        let old = race_fd(r, k);
        let to = r.below(NFD as u32) as usize;
        let new = race_fd(r, to);
        let ret = race_call(nr::DUP2, [old, new, 0]);
        count_errno(ret);
        let want = match (slot_of(old), slot_of(new)) {
            (Some(o), Some(n)) if log.cur(o) != 0 => {
                if o != n {
                    let e = log.cur(o);
                    log.set(n, e);
                }
                new
            }
            _ => (-errno::EBADF) as u32,
        };
        if ret == want {
            Ok(())
        } else {
            Err("dup2 gave other than the new descriptor, or EBADF")
        }
    })
}

fn race_write(
    r: &mut Rng,
    me: u32,
    writer: u32,
    seq: &mut u32,
    buf: &mut [u8; MSG * MAX_MSGS as usize],
) -> Result<(), &'static str> {
    let (k, v) = with_log(me, |log| {
        let k = pick_slot(r, log, is_write_end);
        (k, log.version[k])
    });
    let n = 1 + r.below(MAX_MSGS) as usize;
    messages(buf, n, k, writer, seq, v);
    let len = (n * MSG) as u32;
    let bad = r.below(16) == 0;
    let ptr = if bad {
        bad_pointer(r)
    } else {
        buf.as_ptr() as u32
    };
    let ret = race_call(nr::WRITE, [fd::FIRST_PIPE + k as u32, ptr, len]);
    count_errno(ret);
    let ok = if bad {
        ret == (-errno::EFAULT) as u32
    } else {
        // Whole (an atomic write), or the descriptor went or its readers did.
        ret == len || ret == (-errno::EBADF) as u32 || ret == (-errno::EPIPE) as u32
    };
    if ok {
        Ok(())
    } else {
        Err("a pipe write gave other than its length, EBADF, EPIPE or (bad pointer) EFAULT")
    }
}

/// Where a read puts its bytes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Into {
    /// This thread's buffer: the messages are checked.
    Mine,
    /// The shared heap (mapped or not): a count or EFAULT, unchecked.
    Heap,
    /// Never user memory: EFAULT.
    Bad,
}

fn race_read(
    r: &mut Rng,
    me: u32,
    buf: &mut [u8; MSG * MAX_MSGS as usize],
) -> Result<(), &'static str> {
    let (k, u1) = with_log(me, |log| {
        let k = pick_slot(r, log, is_read_end);
        (k, log.version[k])
    });
    let len = (1 + r.below(MAX_MSGS)) * MSG as u32;
    // Mostly this thread's buffer (checked after); else a bad pointer, or
    // the heap, which other workers grow and shrink meanwhile.
    let (ptr, into) = match r.below(16) {
        0 => (bad_pointer(r), Into::Bad),
        1 | 2 => (
            USER_HEAP_BASE + (r.below(MAX_WORKERS * HEAP_CAP) & !(MSG as u32 - 1)),
            Into::Heap,
        ),
        _ => (buf.as_mut_ptr() as u32, Into::Mine),
    };
    let ret = race_call(nr::READ, [fd::FIRST_PIPE + k as u32, ptr, len]);
    count_errno(ret);
    if into == Into::Bad {
        return if ret == (-errno::EFAULT) as u32 {
            Ok(())
        } else {
            Err("a pipe read into a bad pointer did not give EFAULT")
        };
    }
    let mine = into == Into::Mine;
    let got = match decode(ret) {
        Ok(n) if n <= len && n % MSG as u32 == 0 => n as usize,
        Ok(_) => return Err("a pipe read gave a count past its length or not whole messages"),
        Err(errno::EBADF) => return Ok(()),
        Err(errno::EFAULT) if !mine => return Ok(()),
        Err(_) => return Err("a pipe read gave an errno the race does not allow"),
    };
    if !mine || got == 0 {
        return Ok(());
    }
    with_log(me, |log| {
        let u2 = log.version[k];
        for m in buf[..got].chunks_exact(MSG) {
            let w = |i: usize| u32::from_le_bytes([m[4 * i], m[4 * i + 1], m[4 * i + 2], m[4 * i + 3]]);
            let (w1, v) = (w(1), w(2));
            let from = (w1 & 0xff) as usize;
            if w(0) != MSG_MAGIC || w(3) != check_word(w1, v) || from >= NFD {
                TORN.fetch_add(MSG as u32, SeqCst);
                continue;
            }
            if u2.wrapping_sub(u1) as usize >= HIST {
                UNRESOLVED.fetch_add(1, SeqCst);
                continue;
            }
            // Some read end this slot named while the call ran, whose pipe
            // the writer's slot named (a write end) since the writer looked.
            let mut traced = Some(false);
            for u in u1..=u2 {
                let e = log.hist[k][u as usize % HIST];
                if !is_read_end(e) {
                    continue;
                }
                match log.named_since(from, v, e >> 1, true) {
                    Some(true) => {
                        traced = Some(true);
                        break;
                    }
                    Some(false) => {}
                    None => traced = None,
                }
            }
            match traced {
                Some(true) => CHECKED.fetch_add(1, SeqCst),
                Some(false) => {
                    println!(
                        "fuzz: cross-pipe message: read through slot {k} (versions {u1}..{u2}), written through slot {from} at version {v} by writer {:#x}, seq {}",
                        (w1 >> 8) & 0xff,
                        w1 >> 16
                    );
                    CROSS.fetch_add(MSG as u32, SeqCst)
                }
                None => UNRESOLVED.fetch_add(1, SeqCst),
            };
        }
    });
    Ok(())
}

fn race_sbrk(r: &mut Rng, grown: &mut u32) -> Result<(), &'static str> {
    let (delta, fails) = match r.below(8) {
        // Out of bounds whatever the others did: ENOMEM.
        0 => (USER_HEAP_MAX as i32 + 1 + r.below(0x1000) as i32, true),
        1 => (-((MAX_WORKERS * HEAP_CAP) as i32) - 1 - r.below(0x1000) as i32, true),
        2..=4 if *grown > 0 => (-(1 + r.below(*grown) as i32), false),
        _ => (r.below(HEAP_CAP - *grown + 1) as i32, false),
    };
    let ret = race_call(nr::SBRK, [delta as u32, 0, 0]);
    count_errno(ret);
    match decode(ret) {
        Err(errno::ENOMEM) if fails => Ok(()),
        Ok(b) if !fails && (USER_HEAP_BASE..=USER_HEAP_BASE + MAX_WORKERS * HEAP_CAP).contains(&b) => {
            *grown = grown.wrapping_add_signed(delta);
            Ok(())
        }
        _ => Err("sbrk gave a break outside what the workers grew, or not ENOMEM out of bounds"),
    }
}

fn race_fork(r: &mut Rng, me: u32, w: u32) -> Result<(), &'static str> {
    // Under the log's lock, so the child's copy of the log is the
    // descriptors it gets. Not through `with_log`: the child must not
    // unlock (its copy of the word names a thread it does not have).
    if LOG_LOCK.lock(me).is_err() {
        return Err("umtx_lock of the log's lock failed");
    }
    let ret = race_call(nr::FORK, [0, 0, 0]);
    if ret == 0 {
        race_child(r, w);
    }
    if decode(ret).is_ok() {
        // SAFETY: LOG_LOCK is held.
        unsafe { (*(&raw mut LOG)).children += 1 };
    }
    if LOG_LOCK.unlock(me).is_err() {
        return Err("umtx_unlock of the log's lock failed");
    }
    count_errno(ret);
    match decode(ret) {
        Ok(pid) => {
            let reaped = sys::waitpid(pid as i32, 0);
            with_log(me, |log| log.children -= 1);
            match reaped {
                Ok((p, status))
                    if p == pid
                        && userland::abi::syscall::wait::exit_code(status) == Some(CHILD_OK) =>
                {
                    Ok(())
                }
                Ok((_, status)) => {
                    println!("fuzz: threads phase: a child ended with status {status:#x}");
                    Err("a forked child did not exit with its code")
                }
                Err(_) => Err("waitpid of a forked child failed"),
            }
        }
        Err(errno::EAGAIN) => Ok(()),
        Err(_) => Err("fork gave an errno other than EAGAIN"),
    }
}

/// A forked child: alone in its process with a copy of the log as its
/// descriptors are (the parent forked under the lock, whose word here
/// names a thread this process does not have: the child never takes it).
/// It closes the read ends it got (so none of its writes waits on itself),
/// writes a few messages, grows, uses and shrinks its own heap, and exits
/// with [`CHILD_OK`] if everything gave what it must.
fn race_child(r: &mut Rng, w: u32) -> ! {
    // SAFETY: this process has one thread: no one else touches its LOG.
    let log = unsafe { &mut *(&raw mut LOG) };
    let mut bad = false;
    for k in 0..NFD {
        if is_read_end(log.cur(k)) {
            bad |= race_call(nr::CLOSE, [fd::FIRST_PIPE + k as u32, 0, 0]) != 0;
            log.set(k, 0);
        }
    }
    let mut buf = [0u8; MSG * 2];
    let mut seq = 0;
    for _ in 0..1 + r.below(3) {
        // A write end the child kept (its version is the parent's at the
        // fork), or any slot.
        let k = pick_slot(r, log, is_write_end);
        let e = log.cur(k);
        let n = 1 + r.below(2) as usize;
        messages(&mut buf, n, k, 0x80 | w, &mut seq, log.version[k]);
        let len = (n * MSG) as u32;
        let ret = race_call(nr::WRITE, [fd::FIRST_PIPE + k as u32, buf.as_ptr() as u32, len]);
        bad |= if is_write_end(e) {
            ret != len && ret != (-errno::EPIPE) as u32
        } else {
            ret != (-errno::EBADF) as u32
        };
    }
    // Its own heap: grow, write, read back, shrink.
    match sys::sbrk(0) {
        Ok(b0) => {
            let pages = 1 + r.below(4);
            bad |= sys::sbrk((pages * PAGE_SIZE) as i32) != Ok(b0);
            for i in 0..pages * PAGE_SIZE / 4 {
                // SAFETY: inside the break this child just grew (its own heap).
                unsafe { ((b0 + 4 * i) as *mut u32).write_volatile(i ^ 0xa5a5_a5a5) };
            }
            for i in 0..pages * PAGE_SIZE / 4 {
                // SAFETY: as above.
                bad |= unsafe { ((b0 + 4 * i) as *const u32).read_volatile() } != i ^ 0xa5a5_a5a5;
            }
            bad |= sys::sbrk(-((pages * PAGE_SIZE) as i32)) != Ok(b0 + pages * PAGE_SIZE);
            bad |= sys::sbrk(0) != Ok(b0);
        }
        Err(_) => bad = true,
    }
    if bad {
        println!("fuzz: threads phase: a forked child of worker {w} saw a wrong result");
        sys::exit(CHILD_OK + 1);
    }
    sys::exit(CHILD_OK)
}

/// The threads phase: `calls` calls by one worker per CPU and a second on
/// CPU 0 (at most [`MAX_WORKERS`]), the main thread closing descriptors
/// under them until they are done; then every descriptor closed, every
/// child reaped, the break at its base. Returns the failures' reason or
/// prints the summary and the `fuzz_threads` record.
fn race_phase(seed: u32, calls: u32, cpus: u32, has_tsc: bool, tsc_hz: u64) -> Result<(), &'static str> {
    let me = threads::gettid();
    let workers = (cpus + 1).clamp(2, MAX_WORKERS);
    // pid 1 ignores default actions, but a forked child would die of a
    // SIGPIPE: ignored here, the children inherit it.
    sys::sigaction(userland::abi::syscall::sig::SIGPIPE, sys::Handler::Ignore)
        .map_err(|_| "sigaction(SIGPIPE, SIG_IGN) failed")?;
    if sys::sbrk(0) != Ok(USER_HEAP_BASE) {
        return Err("the heap is not empty before the threads phase");
    }
    RACE_SEED.store(seed ^ 0x7468_7264, SeqCst);
    RACE_EACH.store(calls / workers, SeqCst);
    RACE_EXTRA.store(calls % workers, SeqCst);
    println!(
        "fuzz: threads phase: {calls} calls by {workers} threads on {cpus} CPU(s): \
         sbrk, fork, pipe, close, dup2, read, write on shared descriptors"
    );
    let start = if has_tsc { rdtsc() } else { 0 };
    let mut tids = [0u32; MAX_WORKERS as usize];
    for w in 0..workers {
        tids[w as usize] = threads::spawn_on(race_worker, w, PRIO_USER, w % cpus)
            .map_err(|_| "thread_create refused a worker")?;
    }
    // The janitor: a close now and then, every descriptor now and then, so
    // a read or write asleep on one wakes (EBADF, end of file or EPIPE).
    let mut r = Rng::new(seed ^ 0x6a61_6e69);
    let mut janitor = 0u32;
    let mut waits = 0u32;
    while RACE_DONE.load(SeqCst) < workers {
        with_log(me, |log| {
            let all = r.below(8) == 0;
            for k in 0..NFD {
                if log.cur(k) != 0 && (all || r.below(NFD as u32) == 0) {
                    if race_call(nr::CLOSE, [fd::FIRST_PIPE + k as u32, 0, 0]) != 0 {
                        race_fail(me, "the janitor's close of an open descriptor failed");
                    }
                    log.set(k, 0);
                    janitor += 1;
                }
            }
        });
        threads::sleep(1);
        waits += 1;
        if waits > RACE_MAX_WAITS {
            return Err("the workers never finished (hung)");
        }
    }
    for &tid in &tids[..workers as usize] {
        wait_ended(tid, "a worker never exited")?;
    }
    let ticks = if has_tsc { rdtsc() - start } else { 0 };
    // Milliseconds by the kernel's measure of the TSC (virtual time under
    // icount; the host's clock under multi-threaded TCG).
    let ms = (ticks as u128 * 1000 / tsc_hz.max(1) as u128) as u64;
    // Everything back: descriptors, children, heap.
    with_log(me, |log| {
        for k in 0..NFD {
            let want = if log.cur(k) != 0 { 0 } else { (-errno::EBADF) as u32 };
            if race_call(nr::CLOSE, [fd::FIRST_PIPE + k as u32, 0, 0]) != want {
                race_fail(me, "a close at the end disagreed with the log");
            }
            log.set(k, 0);
        }
    });
    if sys::waitpid(-1, userland::abi::syscall::wait::WNOHANG) != Err(errno::ECHILD) {
        return Err("a child was left unreaped after the threads phase");
    }
    if sys::sbrk(0) != Ok(USER_HEAP_BASE) {
        return Err("the break is not back at its base after the threads phase");
    }
    sys::sigaction(userland::abi::syscall::sig::SIGPIPE, sys::Handler::Default)
        .map_err(|_| "sigaction(SIGPIPE, SIG_DFL) failed")?;
    let made = RACE_CALLS.load(SeqCst);
    let fails = RACE_FAILS.load(SeqCst);
    let (cross, torn, checked, unresolved) = (
        CROSS.load(SeqCst),
        TORN.load(SeqCst),
        CHECKED.load(SeqCst),
        UNRESOLVED.load(SeqCst),
    );
    let op = |o: Op| BY_OP[o as usize].load(SeqCst);
    let er = |k: usize| BY_ERRNO[k].load(SeqCst);
    println!(
        "fuzz: threads phase: {made} calls, {fails} failures, {cross} cross-pipe bytes, {torn} torn; \
         {checked} messages traced to their pipe ({unresolved} unresolved); \
         pipe {}, close {}, dup2 {}, read {}, write {}, sbrk {}, fork {}; \
         EBADF {}, EPIPE {}, EFAULT {}, EMFILE {}, ENFILE {}, EAGAIN {}, ENOMEM {}; \
         {janitor} closes by the main thread; {ticks} TSC ticks ({}.{:03} s)",
        op(Op::Pipe),
        op(Op::Close),
        op(Op::Dup2),
        op(Op::Read),
        op(Op::Write),
        op(Op::Sbrk),
        op(Op::Fork),
        er(0),
        er(1),
        er(2),
        er(3),
        er(4),
        er(5),
        er(6),
        ms / 1000,
        ms % 1000,
    );
    record!(kind::FUZZ_THREADS, "seed" => seed, "calls" => made, "threads" => workers,
        "cpu_mask" => RACE_CPUS.load(SeqCst), "failures" => fails, "cross" => cross,
        "torn" => torn, "checked" => checked, "unresolved" => unresolved,
        "pipe" => op(Op::Pipe), "close" => op(Op::Close), "dup2" => op(Op::Dup2),
        "read" => op(Op::Read), "write" => op(Op::Write), "sbrk" => op(Op::Sbrk),
        "fork" => op(Op::Fork), "EBADF" => er(0), "EPIPE" => er(1), "EFAULT" => er(2),
        "EMFILE" => er(3), "ENFILE" => er(4), "EAGAIN" => er(5), "ENOMEM" => er(6),
        "janitor" => janitor, "ticks" => ticks, "ms" => ms);
    if fails != 0 {
        return Err("a worker saw a result the race does not allow (printed above)");
    }
    Ok(())
}
