//! The idle thread of each application processor (`ap_main` runs it).

use abi::syscall::MAX_THREADS;

use super::lock::{lock, locked, unlock};
use super::table::{sched, set_current, CreateError, State, Thread, EMPTY};
use super::{pick, switch_to};

/// Makes the running context of application processor `cpu` its idle
/// thread (from `ap_main`, before it looks for work).
pub fn become_idle(cpu: usize) -> Result<(), CreateError> {
    let _g = locked();
    let s = sched();
    let i = (1..MAX_THREADS)
        .find(|&i| s.threads[i].state == State::Free)
        .ok_or(CreateError::Exhausted)?;
    s.threads[i] = Thread {
        state: State::Idle,
        tid: s.next_tid,
        cpu: cpu as u8,
        ..EMPTY
    };
    s.next_tid += 1;
    s.idle[cpu] = i;
    set_current(cpu, i);
    Ok(())
}

/// One look for work by an idle thread: runs the most urgent ready thread
/// of this CPU, and returns when this CPU has nothing else to run.
pub fn idle_once() {
    lock();
    if let Some(next) = pick() {
        switch_to(next);
    }
    unlock();
}
