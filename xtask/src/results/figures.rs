//! A model run's figures as the results hold them: each benchmark's
//! [`ModelFigures`], where its snapshots lie ([`Span`]), and what a model
//! run's comparisons and table read from them. The host side of the model
//! (its plugin, its file, the merge into a boot's results) is `model.rs`,
//! above the results; this is the part the results need.

use std::collections::BTreeMap;

use model::Virt;
use serde::{Deserialize, Serialize};

use super::{Bench, Results};

/// "modelled, profile X" (with ", virt" under shadow paging, ", virt
/// ept" under EPT).
pub fn label(profile: &str, virt: Virt) -> String {
    format!(
        "modelled, profile {profile}{}",
        match virt {
            Virt::Off => "",
            Virt::Shadow => ", virt",
            Virt::Ept => ", virt ept",
        }
    )
}

/// One benchmark's model figures: the median per call of each counter over
/// the batches, and every batch's totals (calibration subtracted).
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct ModelFigures {
    /// "modelled, profile X".
    pub label: String,
    /// Modelled time on the benchmark's CPU: the cycles it executed plus
    /// the time it waited for other CPUs (on one CPU, `busy_cycles`).
    pub cycles: f64,
    /// The cycles the benchmark's CPU executed.
    #[serde(default)]
    pub busy_cycles: f64,
    pub l1_misses: f64,
    pub l2_misses: f64,
    pub tlb_misses: f64,
    pub tlb_flushes: f64,
    /// The coherence figures count every CPU's events between the
    /// benchmark CPU's two snapshots (the whole machine's).
    pub coherence_misses: f64,
    pub invalidations: f64,
    pub transfers: f64,
    #[serde(default)]
    pub invalidations_received: f64,
    #[serde(default)]
    pub upgrades: f64,
    /// IPIs sent per call, every CPU's (under `--virt` each one is a VM
    /// exit, inside `cycles`): on several CPUs, the reschedule IPIs of a
    /// wake-up across CPUs and the shootdowns.
    #[serde(default)]
    pub ipis: f64,
    /// VM exits per call the benchmark's CPU took under `--virt` (CR3
    /// writes and invlpg under shadow paging, `hlt`, its IPI sends, the
    /// kicks of IPIs that reached it running), each inside `cycles`; 0 on
    /// a bare machine.
    #[serde(default)]
    pub vm_exits: f64,
    /// Instructions the model counted per call (a cross-check of icount).
    pub insns: f64,
    /// Per batch, per figure (keyed by the figure names above).
    pub samples: BTreeMap<String, Vec<u64>>,
    /// The figures (keyed as `samples`) whose calibration exceeded some
    /// batch: the subtraction stopped at 0 there, so the figure is not a
    /// measurement and is shown as clamped, never as its number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub clamped: Vec<String>,
}

impl ModelFigures {
    /// Whether figure `key` (a `samples` key: `insns`, `l1_misses`,
    /// `cycles`...) was clamped at zero in some batch.
    pub fn is_clamped(&self, key: &str) -> bool {
        self.clamped.iter().any(|k| k == key)
    }
}

/// Where one benchmark's snapshots are, from its `samples` record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Span {
    /// The record's line in the serial log, for errors.
    pub line: usize,
    pub stream: u16,
    pub calib: u32,
    pub calib_runs: u32,
    pub batches: u32,
    pub n: u32,
    pub batch_size: u64,
}

/// The CPU whose streams the benchmarks use: the bootstrap processor runs
/// the user driver and the kernel-side benchmarks.
pub const BENCH_CPU: usize = 0;

/// Every figure of a run with model figures, by name: the benchmarks', then
/// the macro mix's (`macro.<mechanism>`).
fn modelled(r: &Results) -> Vec<(String, &ModelFigures)> {
    let benches = r
        .benches
        .iter()
        .filter_map(|b| Some((b.name.clone(), b.model.as_ref()?)));
    let macros = r
        .macros
        .iter()
        .filter_map(|m| Some((m.name(), m.model.as_ref()?)));
    benches.chain(macros).collect()
}

/// The model's table: every benchmark with model figures, per operation.
pub fn table(r: &Results) -> String {
    let Some(profile) = &r.model_profile else {
        return String::new();
    };
    let rows = modelled(r);
    let width = rows
        .iter()
        .map(|(name, _)| name.len())
        .max()
        .unwrap_or(0)
        .max("benchmark".len());
    let mut s = format!(
        "model: {} (per operation; insns: the instructions the model counted on the benchmark's CPU)\n",
        label(profile, r.virt())
    );
    // With several CPUs: the coherence figures, every CPU's, and the
    // cycles the benchmark's CPU executed beside the time that passed.
    let smp = r.model_cpus > 1;
    s += &format!(
        "{:<width$} {:>10} {:>10} {:>9} {:>9} {:>9} {:>9}",
        "benchmark", "insns", "cycles", "L1 miss", "L2 miss", "TLB miss", "flushes"
    );
    // Under a hypervisor: the exits the benchmark's CPU took.
    let virt = r.virt().on();
    if virt {
        s += &format!(" {:>9}", "VM exits");
    }
    if smp {
        s += &format!(
            " {:>10} {:>9} {:>9} {:>9} {:>9} {:>9} {:>7}",
            "busy", "coh miss", "inval", "inv recv", "upgrades", "dirty xfr", "IPIs"
        );
    }
    s += "\n";
    for (name, m) in rows {
        s += &format!(
            "{:<width$} {:>10.2} {:>10.1} {:>9.2} {:>9.2} {:>9.2} {:>9.2}",
            name, m.insns, m.cycles, m.l1_misses, m.l2_misses, m.tlb_misses, m.tlb_flushes
        );
        if virt {
            s += &format!(" {:>9.2}", m.vm_exits);
        }
        if smp {
            s += &format!(
                " {:>10.1} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>9.3} {:>7.3}",
                m.busy_cycles,
                m.coherence_misses,
                m.invalidations,
                m.invalidations_received,
                m.upgrades,
                m.transfers,
                m.ipis
            );
        }
        s += "\n";
    }
    for note in &r.model_incomplete {
        s += &format!("model: incomplete: {note}\n");
    }
    if let Some(note) = r.model_forced_note() {
        s += &format!("{note}\n");
    }
    if smp {
        s += &format!(
            "({} CPUs: cycles = modelled time on the benchmark's CPU, busy = the cycles it executed; the coherence columns count every CPU's misses, invalidations sent and received, S-to-M upgrades and dirty transfers; IPIs: every CPU's sent{})\n",
            r.model_cpus,
            if r.virt().on() {
                ", each a VM exit inside the cycles"
            } else {
                ""
            }
        );
    }
    s
}

/// The unit of a model run's comparisons: "modelled cycles (profile X)".
pub fn unit(r: &Results) -> Option<String> {
    r.model_profile.as_ref().map(|p| {
        format!(
            "modelled cycles ({})",
            label(p, r.virt()).trim_start_matches("modelled, ")
        )
    })
}

/// A model run's metrics: modelled cycles per call of each benchmark.
pub fn metrics(r: &Results) -> BTreeMap<String, f64> {
    modelled(r)
        .into_iter()
        .map(|(name, m)| (name, m.cycles))
        .collect()
}

/// A benchmark's modelled cycles per call, batch by batch.
pub fn cycle_samples(b: &Bench) -> Option<Vec<f64>> {
    let m = b.model.as_ref()?;
    let size = b.batch_size.max(1) as f64;
    Some(
        m.samples
            .get("cycles")?
            .iter()
            .map(|c| *c as f64 / size)
            .collect(),
    )
}

/// A model run's results with two mechanisms' null calls (int 0x80: 24
/// instructions, 1000 modelled cycles; sysenter: 46 and 300), for the
/// tests of what reads model runs.
#[cfg(test)]
pub fn two_mechanisms() -> Results {
    let bench = |name: &str, mech: &str, insns: f64, cycles: &[u64]| Bench {
        name: name.into(),
        mech: mech.into(),
        path: "full".into(),
        call: "null".into(),
        n: cycles.len(),
        median: insns,
        batch_size: 4,
        samples: vec![insns as u64 * 4; cycles.len()],
        model: Some(ModelFigures {
            label: label("p4", Virt::Off),
            cycles: cycles[0] as f64 / 4.0,
            insns,
            samples: [("cycles".to_string(), cycles.to_vec())].into(),
            ..ModelFigures::default()
        }),
        ..Default::default()
    };
    Results {
        clock: "icount".into(),
        unit: "instructions".into(),
        model_profile: Some("p4".into()),
        benches: vec![
            bench("int80.null", "int80", 24.0, &[4000, 4000, 4000]),
            bench("sysenter.null", "sysenter", 46.0, &[1200, 1200, 1200]),
        ],
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_runs_tables_show_modelled_cycles() {
        let r = two_mechanisms();
        assert_eq!(unit(&r).unwrap(), "modelled cycles (profile p4)");
        // One table: instructions beside modelled cycles, the ratio on
        // the cycles, the clock of the ratios said first.
        let t = r.table();
        assert!(
            t.starts_with("ratios on modelled cycles (profile p4)")
                && t.contains("int 0x80   null         24.00    1000.0")
                && t.contains(
                    "sysenter   null         46.00     300.0     300.0                     0.30"
                ),
            "{t}"
        );
        assert!(
            table(&r).contains("sysenter.null      46.00      300.0"),
            "{}",
            table(&r)
        );
    }

    #[test]
    fn several_cpus_add_the_coherence_columns() {
        let mut r = two_mechanisms();
        assert!(
            !table(&r).contains("coh miss"),
            "one CPU: no coherence columns"
        );
        r.model_cpus = 2;
        let m = r.benches[0].model.as_mut().unwrap();
        (m.busy_cycles, m.coherence_misses, m.transfers, m.ipis) = (400.0, 1.5, 0.25, 1.0);
        let t = table(&r);
        assert!(
            t.contains("coh miss") && t.contains("dirty xfr") && t.contains("IPIs"),
            "{t}"
        );
        assert!(
            t.contains("     400.0     1.500     0.000     0.000     0.000     0.250   1.000"),
            "{t}"
        );
        assert!(t.contains("(2 CPUs: cycles = modelled time"), "{t}");
        assert!(!t.contains("VM exit"), "{t}");
        // run's table: the IPIs among the misses, where there are any.
        let t = r.table();
        let row = t.lines().find(|l| l.starts_with("int 0x80")).unwrap();
        assert!(row.ends_with("coh 1.50  IPI 1.00"), "{t}");
        let row = t.lines().find(|l| l.starts_with("sysenter")).unwrap();
        assert!(!row.contains("IPI"), "{t}");
        r.model_virt = true;
        assert!(table(&r).contains("IPIs: every CPU's sent, each a VM exit inside the cycles"));
    }
}
