//! Synchronisation primitives that know no thread: the boot cell and the
//! set-once cell, spin locks, and the 128-byte-aligned pools the sync
//! objects live in. The objects a thread blocks on (turnstiles,
//! sleepqueues, the kernel mutex) need the thread table, so they sit one
//! layer up, in `task`.

pub mod cell;
pub mod pool;
pub mod spin;
