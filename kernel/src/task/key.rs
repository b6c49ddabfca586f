//! What a sleepqueue or a turnstile is found by: an address and the
//! address space it names.
//!
//! A user address means nothing outside its process: after a `fork`, parent
//! and child hold different words at the same address, so two processes
//! sleeping on (or locking) "the same" user address must not meet. A key
//! is therefore (space, address): space 0 is the kernel's (its channels and
//! mutexes are kernel addresses, one for all), a user key's space is its
//! process's slot + 1. The space is xored into the hash chain's index; as
//! every space is below the number of chains, one address in two spaces
//! always lands on two chains, so a lookup still compares the address
//! alone, and a kernel channel's chain is the one it always was.
//!
//! The space tag lives in two spare bytes of each sleepqueue and turnstile
//! (their waiter counts are 16-bit), so neither object grew: their sizes,
//! strides and per-block counts (the `pool` record) are what they were.
//!
//! A process's keys cannot outlive it: its sleepers and turnstile waiters
//! are taken off their queues when it ends (`sched::stop_process`), so
//! a slot's tag is free when the slot is reused.

/// A wait channel or lock key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Key {
    pub addr: u32,
    /// 0: the kernel; else the process slot + 1.
    pub space: u16,
}

/// [`Key::space`] of kernel channels and mutexes.
pub const KERNEL_SPACE: u16 = 0;

impl Key {
    /// A kernel address (one space for all).
    #[inline(always)]
    pub const fn kernel(addr: u32) -> Key {
        Key {
            addr,
            space: KERNEL_SPACE,
        }
    }

    /// User address `addr` in process slot `proc`'s space.
    #[inline(always)]
    pub const fn user(proc: usize, addr: u32) -> Key {
        Key {
            addr,
            space: proc as u16 + 1,
        }
    }

    /// The hash chain (of `chains`, a power of two): FreeBSD's SC_HASH fold
    /// of the address, the space xored in (the fold of a kernel key is the
    /// address's alone).
    #[inline(always)]
    pub const fn chain(self, chains: usize) -> usize {
        let a = self.addr ^ self.space as u32;
        (((a >> 8) ^ a) as usize) & (chains - 1)
    }
}
