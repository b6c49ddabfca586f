//! A blocking kernel mutex on turnstiles: free until contested; a contested
//! unlock hands ownership straight to the most urgent waiter.

use core::cell::Cell;

use super::key::Key;
use super::sched;
use super::turnstile;

pub struct Mutex {
    /// Owner's thread index + 1; 0 when free. Guarded by the scheduler
    /// lock (`task::sched::lock`), like the turnstile it waits on.
    owner: Cell<u32>,
}

// SAFETY: `owner` is read and written only with the scheduler lock held
// (every method takes it), so no two CPUs use the cell at once.
unsafe impl Sync for Mutex {}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Deadlock;

impl Mutex {
    pub const fn new() -> Mutex {
        Mutex {
            owner: Cell::new(0),
        }
    }

    fn key(&self) -> Key {
        Key::kernel(self as *const Mutex as u32)
    }

    pub fn lock(&self) -> Result<(), Deadlock> {
        let _g = sched::locked();
        let me = sched::current_index() as u32 + 1;
        loop {
            match self.owner.get() {
                0 => {
                    self.owner.set(me);
                    return Ok(());
                }
                o if o == me => return Err(Deadlock),
                o => {
                    turnstile::wait(self.key(), Some(o as usize - 1));
                    if self.owner.get() == me {
                        return Ok(());
                    }
                }
            }
        }
    }

    pub fn unlock(&self) {
        let _g = sched::locked();
        let me = sched::current_index();
        match turnstile::lookup(self.key()).and_then(turnstile::signal) {
            Some(w) => self.owner.set(w as u32 + 1),
            None => self.owner.set(0),
        }
        turnstile::recompute(me);
    }

    pub fn owner(&self) -> Option<usize> {
        let _g = sched::locked();
        match self.owner.get() {
            0 => None,
            o => Some(o as usize - 1),
        }
    }
}
