//! Kernel-side benchmarks: what crosses CPUs (bench::smp), and the one
//! function every kernel figure leaves through ([`report`]).

pub mod smp;

use core::fmt;

use abi::report::{write_bench, Figure};
use abi::stats::Summary;

/// The most batches one kernel figure keeps (its summary is computed on
/// the stack).
pub const MAX_SAMPLES: usize = 64;

/// A figure's two record lines, formatted in one console write.
struct Lines<'a>(&'a Figure<'a>, &'a Summary);

impl fmt::Display for Lines<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write_bench(f, self.0, self.1)
    }
}

/// Summarises a figure and writes its `bench` and `samples` records (see
/// `abi::report::write_bench`). Samples past [`MAX_SAMPLES`] are left out
/// of the summary and the record alike.
pub fn report(f: &Figure) -> Summary {
    let f = Figure {
        samples: &f.samples[..f.samples.len().min(MAX_SAMPLES)],
        ..*f
    };
    let mut vals = [0f64; MAX_SAMPLES];
    let mut scratch = [0f64; MAX_SAMPLES];
    let s = f.summarize(&mut vals, &mut scratch);
    crate::kprint!("{}", Lines(&f, &s));
    s
}
