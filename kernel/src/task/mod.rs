//! User tasks, one at a time: load a program from a Multiboot module, run
//! its threads, and come back here when it exits or faults.
//!
//! `run` maps the program, creates its first thread, and blocks the boot
//! thread until the task is over. Whatever ends the task — `exit`, a fault,
//! a bad stack on a fast entry, the last thread's `thread_exit`, a deadlock
//! — calls [`end_current`], which records why, drops every thread and
//! switches back to the boot thread, so `run` returns.
//!
//! Beside them the objects a thread blocks on, FreeBSD's model: turnstiles
//! (a contested lock), sleepqueues (a wait channel) and the kernel mutex
//! built on turnstiles. They lend priorities and make threads ready, so
//! they live with the scheduler, above `sync`'s spin locks and pools.

pub mod elf;
pub mod key;
pub mod mutex;
pub mod sched;
pub mod sleepqueue;
pub mod turnstile;

pub use elf::LoadError;

use abi::layout::USER_STACK_TOP;
use abi::report::kind;
use abi::syscall::{wait, DEFAULT_EUID};

use crate::boot::info::Module;
use crate::sync::cell::BootCell;
use crate::{kprintln, record};
use spin::Once;

/// The running task's identity.
#[derive(Clone, Copy, Debug)]
pub struct Task {
    pub pid: u32,
    pub euid: u32,
    pub name: &'static str,
}

/// Why a task stopped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// `exit(status)`.
    Exit(i32),
    /// A CPU exception in ring 3.
    Fault { vector: u8, eip: u32 },
    /// A fast entry (sysenter, syscall) found no valid user stack to read.
    BadStack { mechanism: &'static str },
    /// Every thread blocked, none with a timeout.
    Deadlock,
}

static CURRENT: BootCell<Task> = BootCell::new(Task {
    pid: 0,
    euid: 0,
    name: "kernel",
});
static NEXT_PID: BootCell<u32> = BootCell::new(1);
static ENDED: BootCell<Option<End>> = BootCell::new(None);

/// What the layers above keep for a task and empty between tasks (the
/// syscall layer's ring behind `fd::RING`): set once at boot, so that
/// `task` need not import them.
static RESET_ABOVE: Once<fn()> = Once::new();

/// Names what [`run`] empties before each task and after it (once, in `kmain`).
pub fn set_reset_above(reset: fn()) {
    assert!(!RESET_ABOVE.is_completed(), "the reset above set twice");
    RESET_ABOVE.call_once(|| reset);
}

fn reset_above() {
    if let Some(reset) = RESET_ABOVE.get() {
        reset();
    }
}

pub fn current() -> &'static Task {
    // SAFETY: written only by `run`, between tasks.
    unsafe { CURRENT.get_mut() }
}

/// Ends the running task, from any of its threads on any CPU, and returns
/// to whoever called `run` (the boot thread on CPU 0). The first reason
/// given is the one reported: threads stopped on other CPUs may end it too.
pub fn end_current(why: End) -> ! {
    // Held until the next thread of this CPU lets it go (on CPU 0 the boot
    // thread, resumed in `run`).
    core::mem::forget(sched::locked());
    // A process other than pid 1 ends alone: a zombie whose status says why.
    if crate::proc::current().is_some_and(|p| !crate::proc::is_init(p)) {
        let status = match why {
            End::Exit(code) => wait::exited(code),
            End::Fault { vector, .. } => wait::faulted(vector),
            End::BadStack { .. } => wait::BAD_STACK,
            End::Deadlock => wait::exited(0),
        };
        crate::proc::exit_current(status);
    }
    note_end(why);
    sched::end_task()
}

/// Records why the task ends, unless a reason is known already. Under the
/// scheduler lock.
pub fn note_end(why: End) {
    debug_assert!(
        sched::held_here(),
        "a task's end without the scheduler lock"
    );
    // SAFETY: the scheduler lock (held) guards ENDED while a task runs;
    // `run` reads it after the task is over.
    let e = unsafe { ENDED.get_mut() };
    if e.is_none() {
        *e = Some(why);
    }
}

/// Loads `module` as a user program, runs it with EAX = `arg`, and reports
/// how it ended.
pub fn run(module: &Module<'static>, arg: u32) -> Result<End, LoadError> {
    run_on(module, arg, 0)
}

/// As [`run`], with the program's first thread on CPU `cpu` (a started
/// one); the boot thread waits on CPU 0 all the same.
pub fn run_on(module: &Module<'static>, arg: u32, cpu: usize) -> Result<End, LoadError> {
    // The kernel's own counts before the program exists, to compare with
    // the same counts once every process's memory is back (the `task`
    // record): a frame or page a task's end did not give back shows there.
    let before = in_use();
    let image = module_bytes(module);
    let (space, entry) = crate::proc::load_program(image)?;
    reset_above();
    // SAFETY: between tasks, nothing else touches these cells.
    let pid = unsafe {
        let next = NEXT_PID.get_mut();
        let pid = *next;
        *next += 1;
        *CURRENT.get_mut() = Task {
            pid,
            euid: DEFAULT_EUID,
            name: module.name,
        };
        *ENDED.get_mut() = None;
        pid
    };
    crate::proc::reset_fork_counts();
    crate::vm::pmap::shootdown::reset_counts();
    let pipes_left = {
        // The boot thread blocks holding the scheduler lock; the task's
        // first thread lets it go, and the task's end hands it back.
        let _g = sched::locked();
        let p = match crate::proc::create_init(space, pid, module.name) {
            Ok(p) => p,
            Err(space) => {
                space.destroy();
                return Err(LoadError::OutOfMemory);
            }
        };
        if sched::spawn_user(entry, USER_STACK_TOP, arg, abi::syscall::PRIO_USER, cpu, p).is_err() {
            let _ = crate::proc::reset();
            return Err(LoadError::OutOfMemory);
        }
        sched::wait_for_task();
        sched::reset_all();
        reset_machine_state();
        // Every process's memory back (pid 1's, zombies', orphans').
        crate::proc::reset()
    };
    // Every other CPU puts back its own (its threads may have changed its
    // MSRs and x87 too), before the next task; not under the lock, which
    // the APs take on their way to the command.
    crate::arch::smp::on_every_ap(crate::arch::smp::command::RESET);
    // SAFETY: set by end_current before leave_user.
    let end = unsafe { ENDED.get_mut().take() }.expect("a task ends through end_current");
    let last = crate::proc::last_pid();
    let after = in_use();
    match end {
        End::Exit(code) => {
            record!(kind::TASK, "prog" => module.name, "pid" => pid, "how" => "exit", "code" => code,
                "last_pid" => last,
                "frames_before" => before.0, "frames_after" => after.0,
                "pages_before" => before.1, "pages_after" => after.1, "pipes_left" => pipes_left)
        }
        End::Fault { vector, eip } => {
            kprintln!(
                "task {} (pid {}) ended by {} at {:#x}",
                module.name,
                pid,
                abi::exit::vector_name(vector),
                eip
            );
            record!(kind::TASK, "prog" => module.name, "pid" => pid, "how" => "fault",
                "code" => vector, "name" => abi::exit::vector_name(vector), "last_pid" => last,
                "frames_before" => before.0, "frames_after" => after.0,
                "pages_before" => before.1, "pages_after" => after.1, "pipes_left" => pipes_left)
        }
        End::Deadlock => {
            kprintln!("task {} (pid {}) ended: deadlock", module.name, pid);
            record!(kind::TASK, "prog" => module.name, "pid" => pid, "how" => "deadlock", "code" => 0,
                "last_pid" => last,
                "frames_before" => before.0, "frames_after" => after.0,
                "pages_before" => before.1, "pages_after" => after.1, "pipes_left" => pipes_left)
        }
        End::BadStack { mechanism } => {
            kprintln!(
                "task {} (pid {}) ended: {mechanism} with no valid user stack",
                module.name,
                pid
            );
            record!(kind::TASK, "prog" => module.name, "pid" => pid, "how" => "badstack",
                "code" => 0, "name" => mechanism, "last_pid" => last,
                "frames_before" => before.0, "frames_after" => after.0,
                "pages_before" => before.1, "pages_after" => after.1, "pipes_left" => pipes_left)
        }
    }
    report_work(module.name);
    // SAFETY: between tasks.
    unsafe {
        *CURRENT.get_mut() = Task {
            pid: 0,
            euid: 0,
            name: "kernel",
        }
    };
    Ok(end)
}

/// The frames and the user pages in use (the `task` record's counts),
/// read under the scheduler lock, which guards the page counts.
fn in_use() -> (u32, u32) {
    let _g = sched::locked();
    (crate::arch::frames::usage().0, crate::vm::page::usage().0)
}

/// On several CPUs, what each CPU did in the task that just ended
/// (`kind::WORK`): its forks, and the TLB shootdown requests it sent and
/// answered. Counted by the kernel, so a figure's share can be checked
/// against work that happened, not work that was planned.
fn report_work(prog: &str) {
    use core::sync::atomic::{AtomicU32, Ordering};
    let counts = |c: &'static [AtomicU32]| move || c.iter().map(|x| x.load(Ordering::Relaxed));
    let cpus = crate::arch::smp::cpus().started;
    if cpus < 2 {
        return;
    }
    use crate::console::{List, Text};
    use crate::vm::pmap::shootdown::{SENT, TAKEN};
    record!(kind::WORK, "prog" => prog,
        "forks" => Text(List(counts(&crate::proc::FORKS_ON[..cpus]))),
        "shootdowns_sent" => Text(List(counts(&SENT[..cpus]))),
        "shootdowns_taken" => Text(List(counts(&TAKEN[..cpus]))));
}

/// Puts back every piece of machine state a task may change, as the boot
/// chose it, whatever ended the task (every end comes back through `run`):
///
/// - the MSR-based entries (`entry_floor`): SYSENTER_EIP and STAR's target
///   back at the full entries;
/// - the sync-object pools' layout (`pool_align`): the boot's `pool_align=`;
/// - the ring buffer behind `fd::RING`: empty (also done before each task);
/// - the x87: the clean image (FNINIT's control word, every register empty
///   and zero; `cpu::reset_x87`), so no task's control word, pending
///   exception or register values meet the next one (each user thread's
///   own context is saved and loaded at every switch, `sched::switch_to`).
///
/// The entries and the x87 are each CPU's own ([`reset_cpu_state`]): this
/// does the running CPU's; `run` then has every other CPU do its own
/// (`smp::command::RESET`), since the task's threads ran on them too.
///
/// Segment registers, EFLAGS and the general registers are set afresh for
/// every thread (`sched::spawn_user`; FS and GS then follow each thread
/// through `sched::switch_stacks`); CR0, CR4, the debug registers, the
/// GDT, IDT and TSS are out of ring 3's reach.
///
/// Threads, their turnstiles and sleepqueues, and the timer are the
/// scheduler's (`sched::reset_all`, called just before). Needs the
/// scheduler lock (the pools are guarded by it) and no user thread left.
pub fn reset_machine_state() {
    debug_assert!(sched::held_here());
    let a = crate::sync::pool::boot_align();
    let laid_out = crate::task::turnstile::set_align(a) && crate::task::sleepqueue::set_align(a);
    debug_assert!(laid_out, "the pools are empty once every thread is gone");
    reset_above();
    reset_cpu_state();
}

/// The running CPU's share of [`reset_machine_state`]: its MSR-based
/// entries at the full entries, its x87 initialised.
pub fn reset_cpu_state() {
    crate::entry::restore_full_entries();
    crate::arch::cpu::reset_x87();
}

/// What of the running CPU's own state a task left changed (for the
/// tests): [`STATE_FLOOR`] if a fast entry points at its floor,
/// [`STATE_X87`] if the x87 control word is not FNINIT's; 0 for neither.
pub fn cpu_state_left() -> u32 {
    let floor = crate::entry::floors_selected().contains(&Some(true));
    let x87 =
        crate::arch::cpu::x87_control().is_some_and(|cw| cw != crate::arch::cpu::X87_CONTROL_INIT);
    (if floor { STATE_FLOOR } else { 0 }) | if x87 { STATE_X87 } else { 0 }
}

/// [`cpu_state_left`]'s bits.
pub const STATE_FLOOR: u32 = 1;
pub const STATE_X87: u32 = 2;

fn module_bytes(m: &Module<'static>) -> &'static [u8] {
    // SAFETY: the loader placed the module at [start, end), inside the
    // identity map, and the frame allocator never hands those frames out.
    unsafe { core::slice::from_raw_parts(m.start as *const u8, (m.end - m.start) as usize) }
}
