//! Ticks and preemption: the timer's count and sleepers' deadlines, and
//! ring 3 giving way to a more urgent thread or at the end of its quantum.
//! Above the rest of the scheduler (the trap module calls it).

use abi::syscall::MAX_THREADS;

use super::end::{stop_current, stop_current_of_process};
use super::lock::locked;
use super::table::{cpu, current_index, sched, State};
use super::{make_ready, pick, yield_now};
use crate::task::sleepqueue;

/// The timer tick (IRQ 0, on CPU 0), with the interrupted context's privilege.
pub fn tick(from_user: bool) {
    let _g = locked();
    let s = sched();
    s.ticks += 1;
    let now = s.ticks;
    for i in 0..MAX_THREADS {
        let t = &mut s.threads[i];
        if t.state == State::Sleeping && t.deadline != 0 && t.deadline <= now {
            t.timed_out = true;
            sleepqueue::remove_waiter(i);
            make_ready(i);
        }
    }
    preempt(from_user, true);
}

/// What interrupts an application processor does for the scheduler: its
/// local timer (`timer`) counts down the quantum; a reschedule IPI (on any
/// CPU) lets a more urgent ready thread in. Only ring 3 is preempted.
pub fn interrupt(from_user: bool, timer: bool) {
    // Ring 0 (an idle HLT, a benchmark's wait) needs nothing: the
    // interrupt has woken it. No lock then, whatever it was doing.
    if !from_user {
        return;
    }
    let _g = locked();
    preempt(from_user, timer);
}

/// Preemption of ring 3 on this CPU: a thread of an ending task stops; a
/// more urgent ready thread, or an equal one when the quantum is over
/// (`timer` ticks count it down), takes the CPU.
fn preempt(from_user: bool, timer: bool) {
    if !from_user {
        return;
    }
    let s = sched();
    let c = cpu();
    let me = current_index();
    if s.ending && s.threads[me].user {
        stop_current();
        return;
    }
    if s.threads[me].user && crate::proc::exiting(s.threads[me].proc as usize) {
        stop_current_of_process();
    }
    if timer {
        s.quantum_left[c] = s.quantum_left[c].saturating_sub(1);
    }
    let left = s.quantum_left[c];
    let contender = pick().filter(|&n| {
        let (np, mp) = (s.threads[n].prio, s.threads[me].prio);
        np < mp || (np == mp && left == 0)
    });
    if contender.is_some() {
        yield_now();
    }
}
