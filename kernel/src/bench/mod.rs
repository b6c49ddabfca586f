//! Kernel-side benchmarks: what crosses CPUs (bench::smp).

pub mod smp;
