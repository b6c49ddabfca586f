//! Synchronisation. For now the single-CPU boot cell; turnstiles and
//! sleepqueues arrive with the scheduler.

pub mod cell;
