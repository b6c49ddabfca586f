//! Threads, processes and tasks ending: a thread's exit, a process's
//! threads stopped, a task ended on every CPU and its threads reset.

use abi::layout::VECTOR_RESCHEDULE;
use abi::syscall::MAX_THREADS;

use super::lock::{lock, unlock};
use super::table::{cpu, current_index, sched, State, CURRENT, EMPTY, QUANTUM, SLOT_PID};
use super::{block, make_ready, schedule};
use crate::arch::pit;
use crate::task::{sleepqueue, turnstile};
use core::sync::atomic::Ordering;

/// Process `p` ends: none of its threads runs again. Those that wait
/// (ready, asleep, blocked on a user mutex) stop now, taken off their
/// sleepqueue or turnstile; those running on other CPUs are sent a
/// reschedule IPI and stop at their next way back to ring 3, or before
/// they wait on a user channel or mutex (`syscall::threads`). The caller's own thread stops with
/// [`stop_current_of_process`]. Under the lock.
pub fn stop_process(p: usize) {
    let s = sched();
    let me = current_index();
    for i in 1..MAX_THREADS {
        let t = s.threads[i];
        if i == me || !t.user || t.proc as usize != p || t.state == State::Free {
            continue;
        }
        match t.state {
            State::Ready => stop_thread(i),
            State::Sleeping => {
                sleepqueue::remove_waiter(i);
                stop_thread(i);
            }
            // Its lock is a word of this process, so nobody outside it
            // would ever hand it over: it leaves the turnstile unserved.
            State::OnTurnstile => {
                turnstile::remove_waiter(i);
                stop_thread(i);
            }
            State::Running => crate::arch::apic::send_ipi(
                crate::arch::smp::percpu(t.cpu as usize).apic_id as u8,
                VECTOR_RESCHEDULE,
            ),
            _ => {}
        }
    }
}

/// Thread `i` (not running) of an ending process is gone for good.
fn stop_thread(i: usize) {
    let p = sched().threads[i].proc as usize;
    release(i);
    crate::proc::thread_stopped(p);
}

/// The running thread of an ending process stops for good and this CPU runs
/// its next thread. Under the lock.
pub fn stop_current_of_process() -> ! {
    stop_thread(current_index());
    schedule();
    unreachable!("a stopped thread was resumed");
}

/// Ends the current thread. The task ends with its last user thread.
pub fn exit_current() -> ! {
    let s = sched();
    let me = current_index();
    let t = s.threads[me];
    if t.user {
        let p = t.proc as usize;
        let last = !s
            .threads
            .iter()
            .enumerate()
            .any(|(i, o)| i != me && o.user && o.proc == t.proc && o.state != State::Free);
        if last && crate::proc::is_init(p) {
            // pid 1's last thread: the task is over.
            crate::task::end_current(crate::task::End::Exit(0));
        }
        stop_current_of_process();
    }
    release(me);
    schedule();
    unreachable!("a dead thread was scheduled");
}

fn release(i: usize) {
    SLOT_PID[i].store(0, Ordering::Relaxed);
    let t = &mut sched().threads[i];
    if let Some(ts) = t.turnstile.take() {
        turnstile::free(ts);
    }
    if let Some(sq) = t.sleepqueue.take() {
        sleepqueue::free(sq);
    }
    *t = EMPTY;
}

/// Ends every thread but the boot thread and the idle threads, and resets
/// the pools (a task ended). First waits, the lock let go meanwhile, until
/// no CPU runs one of the task's threads: each stops its own (see
/// [`end_task`]).
pub fn reset_all() {
    let cpus = crate::arch::smp::cpus().started;
    loop {
        let s = sched();
        let busy = (0..cpus).any(|c| s.threads[CURRENT[c].load(Ordering::Relaxed)].user);
        if !busy {
            break;
        }
        unlock();
        core::hint::spin_loop();
        lock();
    }
    let s = sched();
    for i in 1..MAX_THREADS {
        if s.threads[i].state != State::Idle {
            s.threads[i] = EMPTY;
        }
    }
    s.ending = false;
    for q in s.quantum_left.iter_mut() {
        *q = QUANTUM;
    }
    turnstile::reset();
    sleepqueue::reset();
    pit::stop_ticks();
}

/// The boot thread waits here while a task runs; `end_task` wakes it.
pub fn wait_for_task() {
    block(State::WaitingForTask);
}

/// The first steps of a task's end, on whichever CPU: no CPU picks the
/// task's threads again, the boot thread is ready (on CPU 0), and every
/// other CPU running one of the task's threads gets a reschedule IPI, on
/// which it stops it ([`interrupt`]). Called with the lock held.
pub(super) fn begin_end() {
    let s = sched();
    s.ending = true;
    if s.threads[0].state == State::WaitingForTask {
        make_ready(0);
    }
    let me = cpu();
    for c in 0..crate::arch::smp::cpus().started {
        if c != me && s.threads[CURRENT[c].load(Ordering::Relaxed)].user {
            crate::arch::apic::send_ipi(
                crate::arch::smp::percpu(c).apic_id as u8,
                VECTOR_RESCHEDULE,
            );
        }
    }
}

/// Ends the running task from one of its threads, on any CPU: stops this
/// thread for good (its objects go back with `reset_all`) and runs the
/// next thread of this CPU (on CPU 0 the boot thread, which resumes in
/// `wait_for_task` holding the lock). Called with the lock held.
pub fn end_task() -> ! {
    begin_end();
    stop_current();
    unreachable!("a thread of an ended task was resumed");
}

/// Parks the running user thread of an ending task and schedules.
pub(super) fn stop_current() {
    let s = sched();
    let me = current_index();
    if s.threads[me].state != State::Free {
        s.threads[me].state = State::Stopped;
    }
    schedule();
}
