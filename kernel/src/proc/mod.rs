//! Processes: a pid, a parent, an address space, threads, an exit status.
//!
//! The program the kernel starts is pid 1 (`task::run`). Its descendants
//! come from [`fork`]: a copy of the calling thread in a copy of the
//! calling process's address space. A process ends ([`exit_current`]) by
//! `exit`, by a fault, or with its last thread; it is then a zombie that
//! keeps its status until its parent reaps it ([`waitpid`]), which also
//! gives its memory back (the address space is destroyed by the reaper, a
//! space that is not the current one: that is what the `pmap=` strategies
//! are measured on). Children of a process that ends are handed to pid 1.
//! When pid 1 ends, the task ends everywhere (`task::end_current`), and
//! [`reset`] drops whatever processes are left.
//!
//! Beside them, a process's signals ([`signal`]: which are pending, what
//! each does) and its pipe descriptors ([`pipe`]). Those two files sit on
//! top of this one and the scheduler; this file reaches the pipes only
//! through the [`Hooks`] the boot sets, so the circle of files that import
//! each other (this one and `task`'s) does not grow.
//!
//! Locking key:
//!   (s) the scheduler lock: the process table, every process's fields, and
//!       the address spaces (`vm`). [`table`] asserts it.

pub mod pipe;
pub mod signal;

use core::sync::atomic::{AtomicU32, Ordering};

use abi::syscall::{errno, sig, wait, MAX_PROCS, MAX_THREADS};

use crate::arch::regs::EntryFrame;
use crate::sync::cell::{BootCell, SetOnce};
use crate::task::sched;
use crate::task::sleepqueue;
use crate::vm::{self, Space};

pub type Pid = u32;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum State {
    Free,
    Alive,
    /// Every thread stopped; waiting for the parent to collect `status`.
    Zombie,
}

/// A process; every field is (s).
#[derive(Clone, Debug)]
pub struct Proc {
    pub state: State,
    pub pid: Pid,
    /// The parent's slot (pid 1's is its own).
    pub parent: usize,
    pub space: Option<Space>,
    /// `waitpid`'s status word once a zombie.
    pub status: u32,
    /// Live threads (not yet stopped).
    pub threads: u32,
    /// Ending: its threads are not run again, each stops where it is.
    pub exiting: bool,
    pub name: &'static str,
}

/// A process's signals, beside its [`Proc`] (a table of its own, so the
/// process table's layout, which the scheduler indexes on its paths, stays
/// as it was); every field is (s).
#[derive(Clone, Copy, Debug)]
pub struct Signals {
    /// Caught signals posted and not yet delivered (bit `sig`).
    pub pending: u32,
    /// `sigaction`'s handler per signal: `SIG_DFL`, `SIG_IGN` or a user
    /// address. Copied by fork.
    pub handlers: [u32; sig::NSIG as usize],
    /// Some handler is not `SIG_DFL`: only then do fork and a new process
    /// copy or reset the handlers (the fork experiment's path stays short).
    pub changed: bool,
}

const NO_SIGNALS: Signals = Signals {
    pending: 0,
    changed: false,
    handlers: [sig::SIG_DFL; sig::NSIG as usize],
};

static SIGNALS: BootCell<[Signals; MAX_PROCS]> = BootCell::new([NO_SIGNALS; MAX_PROCS]);

/// Process `i`'s signals, under the scheduler lock.
pub fn signals(i: usize) -> &'static mut Signals {
    debug_assert!(sched::held_here(), "signals without the scheduler lock");
    // SAFETY: (s) held (asserted), as for the process table.
    unsafe { &mut SIGNALS.get_mut()[i] }
}

const EMPTY: Proc = Proc {
    state: State::Free,
    pid: 0,
    parent: 0,
    space: None,
    status: 0,
    threads: 0,
    exiting: false,
    name: "",
};

/// What the files above this one keep per process, reached through plain
/// function pointers set once at boot (`kmain`), so this file need not
/// import them: the pipe descriptors.
pub struct Hooks {
    /// `fork`: the child (second) gets copies of the parent's descriptors.
    pub fork: fn(usize, usize),
    /// A process ended (its last thread stopped): its descriptors close.
    pub exit: fn(usize),
    /// After a task: everything left is dropped; says how many pipes were
    /// still open.
    pub reset: fn() -> u32,
}

static HOOKS: SetOnce<Hooks> = SetOnce::new();

/// Names the [`Hooks`] (once, in `kmain`).
pub fn set_hooks(h: Hooks) {
    HOOKS.set(h);
}

fn hooks() -> Option<&'static Hooks> {
    HOOKS.get()
}

/// How this layer reaches user memory: the checked copies of the system
/// calls' layer (`syscall::usercopy::USER_MEM`), handed down by the caller
/// so that nothing here imports the layer above.
pub struct UserMem {
    /// Copies the user bytes at `ptr` into `dst`, or `EFAULT`.
    pub read: fn(ptr: u32, dst: &mut [u8]) -> Result<(), i32>,
    /// Copies `src` to user memory at `ptr`, or `EFAULT`.
    pub write: fn(ptr: u32, src: &[u8]) -> Result<(), i32>,
    /// Whether `len` bytes at `ptr` may be read (`false`) or written
    /// (`true`) by ring 3, or `EFAULT`.
    pub check: fn(ptr: u32, len: u32, write: bool) -> Result<(), i32>,
}

/// How many processes have a caught signal pending: the one word the way
/// back to ring 3 from an interrupt reads before anything else
/// (`signal::at_interrupt_return`). (s) for writes.
static SIGNALLED: AtomicU32 = AtomicU32::new(0);

/// Whether any process has a caught signal pending (no lock: a hint; the
/// slow path looks again under the lock).
#[inline(always)]
pub fn signals_pending_anywhere() -> bool {
    SIGNALLED.load(Ordering::Relaxed) != 0
}

/// Sets process `i`'s pending signals to `bits` (keeping [`SIGNALLED`]).
pub fn set_pending(i: usize, bits: u32) {
    let p = signals(i);
    match (p.pending != 0, bits != 0) {
        (false, true) => SIGNALLED.fetch_add(1, Ordering::Relaxed),
        (true, false) => SIGNALLED.fetch_sub(1, Ordering::Relaxed),
        _ => 0,
    };
    p.pending = bits;
}

/// Per thread slot, the tid of the thread asleep there in a wait a signal
/// may cut short ([`sleep_interruptible`]), 0 for none: a tid, not a flag,
/// so a slot whose thread was stopped asleep (its process ended) says
/// nothing about the slot's next thread. (s)
static INTERRUPTIBLE: BootCell<[u32; MAX_THREADS]> = BootCell::new([0; MAX_THREADS]);

fn interruptible() -> &'static mut [u32; MAX_THREADS] {
    debug_assert!(
        sched::held_here(),
        "interruptible sleepers without the scheduler lock"
    );
    // SAFETY: (s) held (asserted), as for the table.
    unsafe { INTERRUPTIBLE.get_mut() }
}

/// Why an interruptible wait came back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Woken {
    /// Woken (or, with a timeout, timed out: `false`).
    Done(bool),
    /// A caught signal is pending: the call returns `-EINTR` (after the
    /// handler ran: the signal is delivered on the way out).
    Interrupted,
}

/// Sleeps on `chan` (as `sleepqueue::sleep`; `chan` 0: a nap of `timeout`
/// ticks on no channel) unless a caught signal is pending for the running
/// process, and comes back early when one is posted ([`post_caught`]
/// wakes it). A process that is ending stops here instead of sleeping: its
/// thread may have been running in the kernel when it was told to end.
/// Under the lock.
pub fn sleep_interruptible(chan: u32, timeout: u64) -> Woken {
    let me = current().expect("a user thread belongs to a process");
    if get(me).exiting {
        sched::stop_current_of_process();
    }
    if signals(me).pending != 0 {
        return Woken::Interrupted;
    }
    let t = sched::current_index();
    interruptible()[t] = sched::thread(t).tid;
    let done = if chan == 0 {
        sched::nap(timeout);
        true
    } else {
        sleepqueue::sleep(chan, timeout)
    };
    interruptible()[t] = 0;
    if signals(me).pending != 0 {
        return Woken::Interrupted;
    }
    Woken::Done(done)
}

/// Posts caught signal `sig` to process `i`: pending, and every thread of
/// it that waits interruptibly is woken; one running on another CPU gets a
/// reschedule IPI, so it takes the signal at its way back to ring 3 (an
/// interrupt from ring 3 delivers: `signal::at_interrupt_return`). Under
/// the lock.
pub fn post_caught(i: usize, sig: u32) {
    let bits = signals(i).pending | 1 << sig;
    set_pending(i, bits);
    let here = sched::cpu();
    for t in 0..MAX_THREADS {
        let th = sched::thread(t);
        if !th.user || th.proc as usize != i {
            continue;
        }
        match th.state {
            sched::State::Sleeping if interruptible()[t] == th.tid => {
                sleepqueue::remove_waiter(t);
                sched::thread(t).deadline = 0;
                sched::make_ready(t);
            }
            sched::State::Running if th.cpu as usize != here => crate::arch::apic::send_ipi(
                crate::arch::smp::percpu(th.cpu as usize).apic_id as u8,
                abi::layout::VECTOR_RESCHEDULE,
            ),
            _ => {}
        }
    }
}

/// The slot of the process `pid` (alive or a zombie).
pub fn slot_of(pid: Pid) -> Option<usize> {
    table()
        .procs
        .iter()
        .position(|p| p.state != State::Free && p.pid == pid)
}

/// Ends process `i` (not the running one, not pid 1) with `status`, as if
/// it had exited: its threads stop wherever they are. Under the lock.
pub fn terminate(i: usize, status: u32) {
    let p = get(i);
    if p.state != State::Alive || p.exiting {
        return;
    }
    p.exiting = true;
    p.status = status;
    sched::stop_process(i);
}

struct Table {
    procs: [Proc; MAX_PROCS],
    next_pid: Pid,
    /// pid 1's slot while a task runs.
    init: Option<usize>,
    /// The boot's `fork=`.
    cow: bool,
    /// Forks and reaps since boot (for reports).
    forks: u32,
}

static TABLE: BootCell<Table> = BootCell::new(Table {
    procs: [EMPTY; MAX_PROCS],
    next_pid: 1,
    init: None,
    cow: false,
    forks: 0,
});

fn table() -> &'static mut Table {
    debug_assert!(
        sched::held_here(),
        "process table without the scheduler lock"
    );
    // SAFETY: (s) held (asserted above), so no other CPU touches the table;
    // on this CPU one path runs at a time (interrupts off in ring 0).
    unsafe { TABLE.get_mut() }
}

/// Boot: `fork=cow` or not.
pub fn init(cow: bool) {
    let _g = sched::locked();
    table().cow = cow;
}

/// How fork treats the parent's pages, as [`init`] set it.
pub fn fork_mode() -> abi::cmdline::Fork {
    let _g = sched::locked();
    if table().cow {
        abi::cmdline::Fork::Cow
    } else {
        abi::cmdline::Fork::Copy
    }
}

/// Process `i`, under the scheduler lock.
pub fn get(i: usize) -> &'static mut Proc {
    &mut table().procs[i]
}

/// The running thread's process slot (`None` in a kernel thread).
pub fn current() -> Option<usize> {
    sched::current_proc()
}

fn take_slot() -> Option<usize> {
    let t = table();
    let i = t.procs.iter().position(|p| p.state == State::Free)?;
    let pid = t.next_pid;
    t.next_pid += 1;
    t.procs[i] = Proc {
        state: State::Alive,
        pid,
        parent: i,
        ..EMPTY
    };
    set_pending(i, 0);
    if signals(i).changed {
        *signals(i) = NO_SIGNALS;
    }
    Some(i)
}

/// Makes the task's first process from a loaded `space` (under the lock),
/// with the task's `pid` (1 for the first task of a boot; "pid 1" in these
/// comments is this process whatever its number); its children are
/// numbered after it. Returns its slot, or the space back when the table
/// is full.
pub fn create_init(space: Space, pid: Pid, name: &'static str) -> Result<usize, Space> {
    table().next_pid = pid;
    let Some(i) = take_slot() else {
        return Err(space);
    };
    let p = get(i);
    p.space = Some(space);
    p.name = name;
    table().init = Some(i);
    Ok(i)
}

/// Loads a program image into a fresh address space (its stack is
/// demand-zero, the page below it never mapped: the guard); returns the
/// space and the entry point. The space is left current on this CPU.
pub fn load_program(image: &[u8]) -> Result<(Space, u32), crate::task::LoadError> {
    let _g = sched::locked();
    let mut space = Space::new().map_err(|_| crate::task::LoadError::OutOfMemory)?;
    space.pmap.activate();
    match crate::task::elf::load(&mut space, image) {
        Ok(entry) => Ok((space, entry)),
        Err(e) => {
            space.destroy();
            Err(e)
        }
    }
}

/// `fork()` from the running thread, whose entry left `frame` on its
/// kernel stack: the child's pid, or an errno.
pub fn fork(frame: &EntryFrame) -> Result<Pid, i32> {
    let _g = sched::locked();
    let parent = current().ok_or(errno::EPERM)?;
    let cow = table().cow;
    let child = take_slot().ok_or(errno::EAGAIN)?;
    let space = get(parent)
        .space
        .as_ref()
        .expect("a live process has a space");
    let copy = match space.fork(cow) {
        Ok(s) => s,
        Err(_) => {
            *get(child) = EMPTY;
            return Err(errno::EAGAIN);
        }
    };
    let mut f = *frame;
    f.regs.eax = 0;
    if sched::spawn_fork(&f, child).is_err() {
        copy.destroy();
        *get(child) = EMPTY;
        return Err(errno::EAGAIN);
    }
    let c = get(child);
    c.space = Some(copy);
    c.parent = parent;
    c.threads = 1;
    c.name = get(parent).name;
    if signals(parent).changed {
        *signals(child) = Signals {
            pending: 0,
            ..*signals(parent)
        };
    }
    if let Some(h) = hooks() {
        (h.fork)(parent, child);
    }
    table().forks += 1;
    FORKS_ON[sched::cpu()].fetch_add(1, Ordering::Relaxed);
    Ok(c.pid)
}

/// The wait channel of process slot `i`: a kernel address, so no user
/// channel (a user address) can equal it.
fn channel(i: usize) -> u32 {
    &raw const TABLE as u32 + (i * core::mem::size_of::<Proc>()) as u32
}

/// Ends the running thread's process (not pid 1) with `status`, from any
/// of its threads, with the scheduler lock held: its other threads stop
/// wherever they are, the process becomes a zombie once the last has, and
/// the parent is woken. Does not return.
pub fn exit_current(status: u32) -> ! {
    let i = current().expect("a user thread belongs to a process");
    let p = get(i);
    if !p.exiting {
        p.exiting = true;
        p.status = status;
        sched::stop_process(i);
    }
    sched::stop_current_of_process()
}

/// A thread of process `i` stopped for good (called by the scheduler under
/// the lock, before it switches away from that thread's stack): the last
/// one makes the process a zombie and wakes its parent; its children go to
/// pid 1.
pub fn thread_stopped(i: usize) {
    let t = table();
    let p = &mut t.procs[i];
    p.threads -= 1;
    if p.threads > 0 {
        return;
    }
    if !p.exiting {
        // The last thread_exit: the process exits with status 0.
        p.exiting = true;
        p.status = wait::exited(0);
    }
    p.state = State::Zombie;
    let parent = p.parent;
    set_pending(i, 0);
    if let Some(h) = hooks() {
        (h.exit)(i);
    }
    let t = table();
    let pp = &t.procs[parent];
    let catches = signals(parent).handlers[sig::SIGCHLD as usize] > sig::SIG_IGN;
    if parent != i && pp.state == State::Alive && !pp.exiting && catches {
        post_caught(parent, sig::SIGCHLD);
    }
    if let Some(init) = t.init {
        for c in t.procs.iter_mut() {
            if c.state != State::Free && c.parent == i {
                c.parent = init;
            }
        }
        sleepqueue::wakeup(channel(init), true);
    }
    sleepqueue::wakeup(channel(parent), true);
}

/// A new thread in process `i` (thread_create).
pub fn thread_started(i: usize) {
    get(i).threads += 1;
}

/// `waitpid(pid, status, flags)` for the running process: the reaped
/// child's pid (its status through `store`, which may refuse with
/// `EFAULT`: the child is then left a zombie), 0 under `WNOHANG` while the
/// matching children live, or an errno.
pub fn waitpid(pid: i32, flags: u32, store: impl Fn(u32) -> Result<(), i32>) -> Result<Pid, i32> {
    let _g = sched::locked();
    let me = current().ok_or(errno::ECHILD)?;
    if flags & !wait::WNOHANG != 0 {
        return Err(errno::EINVAL);
    }
    loop {
        let t = table();
        let mine = |p: &Proc| {
            p.state != State::Free && p.parent == me && (pid == -1 || p.pid as i32 == pid)
        };
        let (mut any, mut zombie) = (false, None);
        for (c, p) in t.procs.iter().enumerate() {
            if c != me && mine(p) {
                any = true;
                if p.state == State::Zombie {
                    zombie = Some(c);
                    break;
                }
            }
        }
        if let Some(c) = zombie {
            store(t.procs[c].status)?;
            let p = core::mem::replace(&mut t.procs[c], EMPTY);
            if let Some(s) = p.space {
                s.destroy();
            }
            return Ok(p.pid);
        }
        if !any {
            return Err(errno::ECHILD);
        }
        if flags & wait::WNOHANG != 0 {
            return Ok(0);
        }
        if sleep_interruptible(channel(me), 0) == Woken::Interrupted {
            return Err(errno::EINTR);
        }
    }
}

/// Who is running, for the lines that name who did something (a user
/// record, a fault): the process's pid (0 in a kernel thread) and the
/// thread's tid. Takes the scheduler lock.
pub fn who() -> (Pid, sched::Tid) {
    let _g = sched::locked();
    let pid = current().map_or(0, |i| get(i).pid);
    (pid, sched::current_tid())
}

/// The last pid handed out: a task's processes are numbered from its
/// pid 1's number up to this one.
pub fn last_pid() -> Pid {
    let _g = sched::locked();
    table().next_pid - 1
}

/// The parent's pid of the running process (0 for pid 1).
pub fn parent_pid() -> Pid {
    let _g = sched::locked();
    let Some(me) = current() else { return 0 };
    let t = table();
    let parent = t.procs[me].parent;
    if parent == me {
        0
    } else {
        t.procs[parent].pid
    }
}

/// `sbrk(delta)` of the running process: the old break or `ENOMEM`.
pub fn sbrk(delta: i32) -> Result<u32, i32> {
    let _g = sched::locked();
    let me = current().ok_or(errno::ENOMEM)?;
    let s = get(me).space.as_mut().ok_or(errno::ENOMEM)?;
    s.sbrk(delta).ok_or(errno::ENOMEM)
}

/// A user page fault (or a user-pointer check before the kernel writes):
/// copy-on-write or demand-zero, in the running process's space.
pub fn fault(va: u32, write: bool) -> vm::Fault {
    let _g = sched::locked();
    let Some(me) = current() else {
        return vm::Fault::Invalid;
    };
    match &get(me).space {
        Some(s) => vm::fault(s, va, write),
        None => vm::Fault::Invalid,
    }
}

/// Whether slot `i` is pid 1.
pub fn is_init(i: usize) -> bool {
    table().init == Some(i)
}

/// The directory of process `i` (for the context switch).
pub fn directory(i: usize) -> Option<u32> {
    table().procs[i].space.as_ref().map(|s| s.pmap.dir)
}

/// Whether process `i` is ending (its threads are not run again).
pub fn exiting(i: usize) -> bool {
    table().procs[i].exiting
}

/// After a task: every process left (pid 1, zombies, children still
/// running when pid 1 ended) gives its memory back. No CPU runs a user
/// thread any more, and every CPU has left their spaces. Returns how many
/// pipes were still open (the hooks closed them).
pub fn reset() -> u32 {
    let pipes_left = hooks().map_or(0, |h| (h.reset)());
    SIGNALLED.store(0, Ordering::Relaxed);
    *interruptible() = [0; MAX_THREADS];
    // SAFETY: (s) held by the caller (as `table` asserts below).
    unsafe { *SIGNALS.get_mut() = [NO_SIGNALS; MAX_PROCS] };
    let t = table();
    for p in t.procs.iter_mut() {
        if let Some(s) = p.space.take() {
            s.destroy();
        }
        *p = EMPTY;
    }
    t.init = None;
    pipes_left
}

/// Forks each CPU made since the task began ([`reset_fork_counts`]).
pub static FORKS_ON: [AtomicU32; abi::layout::MAX_CPUS] =
    [const { AtomicU32::new(0) }; abi::layout::MAX_CPUS];

/// Zeroes [`FORKS_ON`] (a task begins).
pub fn reset_fork_counts() {
    for c in FORKS_ON.iter() {
        c.store(0, Ordering::Relaxed);
    }
}

/// Forks since boot.
pub fn forks() -> u32 {
    let _g = sched::locked();
    table().forks
}
