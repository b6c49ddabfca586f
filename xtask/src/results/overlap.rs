//! How much of a multi-CPU figure's work overlapped in modelled time
//! (`--clock model` only).
//!
//! Under icount QEMU runs one vCPU at a time in long turns, so a `share`
//! record says which CPU did the work but not whether the CPUs worked at
//! the same time in the model's clock. The guest brackets each CPU's part
//! of every batch with snapshots (the timed CPU, CPU 0: its timed region;
//! another CPU: its first and last snapshot of that batch) and names them
//! in the share record (`snap_first`, `snap_per_batch`). Each snapshot
//! carries the CPU's modelled time (`clock`, `abi::model`), so each part
//! is an interval on the one modelled time line, and:
//!
//! > overlap of CPU c = sum over the batches of the length of
//! > (CPU 0's timed interval ∩ CPU c's part), divided by the sum of CPU
//! > 0's timed intervals, in percent.
//!
//! 100% means CPU c was working during all of CPU 0's timed region; 0%
//! that its part lay wholly before or after it. The figure says when the
//! work happened in the model, not who raced whom: the control flow (which
//! CPU ran which loop when) is still the emulator's.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use model::report::SnapshotFile;
use serde::{Deserialize, Serialize};

use super::figures::{Span, BENCH_CPU};
use super::{Results, Share};

/// Below this overlap (in percent of the timed CPU's modelled time) a CPU
/// counts as having worked apart from the timed CPU, and the figure is
/// flagged (`Share::apart`): then most of the timed region had the timed
/// CPU working alone, so the figure is mostly one CPU's, however the work
/// was shared. The mirror of [`super::ONE_CPU_SHARE`] (90% of the work
/// on one CPU): at most 10% of the time together.
pub const APART_PERCENT: f64 = 10.0;

/// One CPU's overlap with the timed CPU.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Overlap {
    pub cpu: u32,
    /// Percent of the timed CPU's modelled time (all batches) during which
    /// this CPU's part of the same batch ran.
    pub percent: f64,
}

/// Where each CPU's part of every batch lies in its snapshot stream (the
/// share record's `stream`, `snap_first` and `snap_per_batch`): CPU c's
/// part of batch i runs from snapshot `first[c] + per_batch[c] * i` to
/// the last of its `per_batch[c]` snapshots; `per_batch` 0: no part.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Parts {
    pub stream: u16,
    pub first: Vec<u32>,
    pub per_batch: Vec<u32>,
}

/// The length of `a ∩ b`, two half-open intervals `(start, end)` of
/// modelled time (0 when disjoint or either is empty).
pub fn intersection(a: (u64, u64), b: (u64, u64)) -> u64 {
    a.1.min(b.1).saturating_sub(a.0.max(b.0))
}

/// The overlap in percent of `parts` with `timed`, batch by batch (the
/// i-th part with the i-th timed interval); `None` when the timed
/// intervals have no length (nothing to be a fraction of).
pub fn percent(timed: &[(u64, u64)], parts: &[(u64, u64)]) -> Option<f64> {
    let total: u64 = timed.iter().map(|t| t.1.saturating_sub(t.0)).sum();
    let both: u64 = timed
        .iter()
        .zip(parts)
        .map(|(&t, &p)| intersection(t, p))
        .sum();
    (total > 0).then(|| 100.0 * both as f64 / total as f64)
}

impl Share {
    /// The CPU that overlapped the timed CPU least, when it did so below
    /// [`APART_PERCENT`].
    fn least_overlap(&self) -> Option<u32> {
        self.overlap
            .iter()
            .filter(|o| o.percent < APART_PERCENT)
            .min_by(|a, b| a.percent.total_cmp(&b.percent))
            .map(|o| o.cpu)
    }

    /// `overlap 97%` (one other CPU) or `overlap 97/95/96%` (CPUs 1, 2, 3),
    /// empty without overlap figures.
    pub fn overlaps(&self) -> String {
        if self.overlap.is_empty() {
            return String::new();
        }
        let v: Vec<String> = self
            .overlap
            .iter()
            .map(|o| format!("{:.0}", o.percent))
            .collect();
        format!("overlap {}%", v.join("/"))
    }
}

/// The modelled clock of `cpu`'s snapshot `seq` of `stream`.
fn clock(file: &SnapshotFile, cpu: usize, stream: u16, seq: u64, what: &str) -> Result<u64> {
    match file.find(cpu, stream, seq) {
        Some(s) => Ok(s.clock),
        None => bail!(
            "{what}: the model file has no {} snapshot {seq} of CPU {cpu} (the plugin and the guest disagree on the count)",
            abi::model::stream_key(stream)
        ),
    }
}

/// One share's overlaps: `n` batches, CPU 0's timed regions from the
/// figure's `span`. A CPU whose snapshots lie past the plugin's cap gets
/// none.
fn overlaps(
    file: &SnapshotFile,
    name: &str,
    parts: &Parts,
    span: &Span,
    n: u32,
) -> Result<Vec<Overlap>> {
    if parts.first.first() != Some(&span.batches) || parts.stream != span.stream {
        bail!(
            "line {}: share of {name}: the timed CPU's snapshots ({} from {:?}) are not its samples record's ({} from {})",
            span.line,
            abi::model::stream_key(parts.stream),
            parts.first.first(),
            abi::model::stream_key(span.stream),
            span.batches
        );
    }
    let interval = |cpu: usize, first: u32, per: u32, i: u32| -> Result<(u64, u64)> {
        let start = u64::from(first) + u64::from(per) * u64::from(i);
        let end = start + u64::from(per) - 1;
        Ok((
            clock(file, cpu, parts.stream, start, name)?,
            clock(file, cpu, parts.stream, end, name)?,
        ))
    };
    let capped = |cpu: usize, last: u64| {
        file.capped
            .get(&(cpu, parts.stream))
            .is_some_and(|&(kept, _)| last >= kept)
    };
    let last = |first: u32, per: u32| u64::from(first) + u64::from(per) * u64::from(n.max(1)) - 1;
    if capped(BENCH_CPU, last(span.batches, 2)) {
        return Ok(vec![]);
    }
    let timed: Vec<(u64, u64)> = (0..n)
        .map(|i| interval(BENCH_CPU, span.batches, 2, i))
        .collect::<Result<_>>()?;
    let mut out = Vec::new();
    for (c, (&first, &per)) in parts.first.iter().zip(&parts.per_batch).enumerate() {
        if c == BENCH_CPU || per == 0 || capped(c, last(first, per)) {
            continue;
        }
        let mine: Vec<(u64, u64)> = (0..n)
            .map(|i| interval(c, first, per, i))
            .collect::<Result<_>>()?;
        if let Some(p) = percent(&timed, &mine) {
            out.push(Overlap {
                cpu: c as u32,
                percent: p,
            });
        }
    }
    Ok(out)
}

/// Puts every share's overlaps into a model run's results (`spans`: each
/// benchmark's snapshots, from its samples record), and flags a figure
/// whose CPUs barely overlapped.
pub fn apply(
    results: &mut Results,
    spans: &BTreeMap<String, Span>,
    file: &SnapshotFile,
) -> Result<()> {
    for b in &mut results.benches {
        let n = b.samples.len() as u32;
        let Some(share) = b.share.as_mut() else {
            continue;
        };
        let Some(parts) = share.parts.as_ref() else {
            continue;
        };
        let Some(span) = spans.get(&b.name) else {
            bail!(
                "share of {}: snapshots, but its samples record names none",
                b.name
            );
        };
        share.overlap = overlaps(file, &b.name, parts, span, n)?;
        share.apart = share.least_overlap();
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_intersect_as_on_a_line() {
        assert_eq!(intersection((0, 10), (5, 20)), 5);
        assert_eq!(intersection((5, 20), (0, 10)), 5);
        assert_eq!(intersection((0, 10), (2, 3)), 1);
        assert_eq!(intersection((0, 10), (0, 10)), 10);
        // Touching, disjoint, empty, reversed: nothing in common.
        assert_eq!(intersection((0, 10), (10, 20)), 0);
        assert_eq!(intersection((0, 10), (30, 40)), 0);
        assert_eq!(intersection((30, 40), (0, 10)), 0);
        assert_eq!(intersection((5, 5), (0, 10)), 0);
        assert_eq!(intersection((0, 10), (8, 4)), 0);
    }

    #[test]
    fn overlap_is_summed_over_batches_as_a_share_of_the_timed_time() {
        // Batch 0: the other CPU inside the whole timed region; batch 1:
        // wholly after it. 100 of 200 timed cycles had both.
        let timed = [(0, 100), (1000, 1100)];
        assert_eq!(percent(&timed, &[(0, 100), (1100, 1200)]), Some(50.0));
        // Longer batches weigh more: 30 of 100 + 0 of 300.
        let timed = [(0, 100), (200, 500)];
        assert_eq!(percent(&timed, &[(70, 400), (0, 200)]), Some(7.5));
        // A part that starts before and ends after the region covers it.
        assert_eq!(percent(&[(10, 20)], &[(0, 50)]), Some(100.0));
        // No timed time: no figure, not 0% nor 100%.
        assert_eq!(percent(&[(5, 5)], &[(0, 50)]), None);
        assert_eq!(percent(&[], &[]), None);
    }

    /// A plugin file of CPU `c`'s kernel-stream snapshots `seq` at modelled
    /// time `clock`, each `(c, seq, clock)`.
    fn file(snaps: &[(usize, u64, u64)]) -> SnapshotFile {
        let mut t = String::from("model1 profile=p4 virt=0 ncpus=2\n");
        for &(c, seq, clock) in snaps {
            t += &format!(
                "snap cpu={c} stream={} seq={seq} insns={seq} cycles={clock} l1_misses=0 l2_misses=0 tlb_misses=0 tlb_flushes=0 coherence_misses=0 invalidations=0 transfers=0 invalidations_received=0 upgrades=0 ipis=0 vm_exits=0 clock={clock}\n",
                abi::model::SNAP_KERNEL
            );
        }
        t += "end\n";
        model::report::parse(&t).unwrap()
    }

    fn span(batches: u32) -> Span {
        Span {
            line: 7,
            stream: abi::model::SNAP_KERNEL,
            calib: 0,
            calib_runs: 0,
            batches,
            n: 2,
            batch_size: 1,
        }
    }

    #[test]
    fn each_cpu_s_part_is_read_at_its_own_snapshots_clocks() {
        // CPU 0 timed from snapshot 10: batches [100, 200] and [1000,
        // 1100]. CPU 1 from its snapshot 4, two per batch: [150, 300] (50
        // inside) and [900, 950] (before the second region: none).
        let f = file(&[
            (0, 10, 100),
            (0, 11, 200),
            (0, 12, 1000),
            (0, 13, 1100),
            (1, 4, 150),
            (1, 5, 300),
            (1, 6, 900),
            (1, 7, 950),
        ]);
        let parts = Parts {
            stream: abi::model::SNAP_KERNEL,
            first: vec![10, 4],
            per_batch: vec![2, 2],
        };
        let o = overlaps(&f, "x", &parts, &span(10), 2).unwrap();
        assert_eq!(
            o,
            [Overlap {
                cpu: 1,
                percent: 25.0
            }]
        );
        // Several snapshots a batch: the part runs from the first to the
        // last of them (CPU 1's 4..=5 and 6..=7 as one part each of 4).
        let one = Parts {
            first: vec![10, 4],
            per_batch: vec![2, 4],
            ..parts.clone()
        };
        let e = overlaps(&f, "x", &one, &span(10), 2).unwrap_err();
        assert!(
            e.to_string()
                .contains("no kernel snapshot 8 of CPU 1 (the plugin and the guest disagree"),
            "{e}"
        );
        let o = overlaps(&f, "x", &one, &span(10), 1).unwrap();
        assert_eq!(
            o[0].percent, 50.0,
            "[150, 950] covers [100, 200] from 150 on"
        );
        // A share whose timed snapshots are not its samples record's.
        let e = overlaps(&f, "x", &parts, &span(12), 2).unwrap_err();
        assert!(
            e.to_string()
                .contains("line 7: share of x: the timed CPU's snapshots"),
            "{e}"
        );
        // A CPU without a part gets no overlap, not 0%.
        let idle = Parts {
            per_batch: vec![2, 0],
            ..parts
        };
        assert!(overlaps(&f, "x", &idle, &span(10), 2).unwrap().is_empty());
    }

    #[test]
    fn a_figure_whose_cpus_barely_overlapped_is_flagged_by_the_least() {
        let mut s = Share::new("writes", vec![10, 10, 10]);
        s.overlap = vec![
            Overlap {
                cpu: 1,
                percent: 97.4,
            },
            Overlap {
                cpu: 2,
                percent: 3.0,
            },
        ];
        assert_eq!(s.least_overlap(), Some(2));
        assert_eq!(s.overlaps(), "overlap 97/3%");
        s.overlap[1].percent = APART_PERCENT;
        assert_eq!(s.least_overlap(), None, "at the threshold: not flagged");
        s.overlap.clear();
        assert_eq!((s.least_overlap(), s.overlaps()), (None, String::new()));
    }
}
