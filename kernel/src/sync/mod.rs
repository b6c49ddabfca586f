//! Synchronisation: the boot cell, spin locks, the 128-byte-aligned pools,
//! turnstiles and sleepqueues (FreeBSD's model), and a kernel mutex.

pub mod cell;
pub mod mutex;
pub mod pool;
pub mod sleepqueue;
pub mod spin;
pub mod turnstile;
