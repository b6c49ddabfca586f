//! The agreement check: two x86 implementations count the same path.
//!
//! Bochs's TSC advances one tick per instruction; QEMU's `-icount` counts
//! instructions. The kernel's system-call paths do not depend on time, so
//! the same kernel on CPUs with the same mechanisms must take exactly as
//! many Bochs ticks as QEMU counts instructions, call for call. A
//! difference is an emulator difference or a path that depends on timing,
//! and fails the test.

use std::path::Path;
use std::time::Duration;

use crate::kbuild::Artifacts;
use crate::machine::{self, bochs, qemu, AccelChoice, Machine};
use crate::results::Results;

/// A Bochs model and the QEMU model with the same entry mechanisms.
pub struct Pair {
    pub bochs: &'static str,
    pub qemu: &'static str,
    /// The mechanisms both must offer, each compared.
    pub mechs: &'static [&'static str],
}

pub const PAIRS: &[Pair] = &[
    Pair {
        bochs: "p4_prescott_celeron_336",
        qemu: "qemu32",
        mechs: &["int80", "sysenter", "callgate"],
    },
    Pair {
        bochs: "amd_k6_2_chomper",
        qemu: "phenom",
        mechs: &["int80", "callgate", "syscall"],
    },
];

/// The round trips compared, for every mechanism.
const CALLS: &[&str] = &["null", "geteuid"];
/// Few, short batches: the counts are exact, one batch would do.
const CMDLINE: &str = "mode=run prog=bench batches=4 batch_size=256";
/// Seconds before either boot is called hung.
const TIMEOUT: u64 = 180;

impl Pair {
    pub fn name(&self) -> String {
        format!(
            "bochs agreement: Bochs ticks on {} == QEMU icount instructions on {}, null and geteuid of {}",
            self.bochs,
            self.qemu,
            self.mechs.join(", ")
        )
    }

    /// Boots both and compares; `dir`: this pair's scratch directory.
    pub fn check(&self, art: &Artifacts, dir: &Path) -> Result<(), String> {
        let on_bochs = machine::Spec {
            cpu: Some(self.bochs.into()),
            ..machine::Spec::new(
                machine::BackendSpec::Bochs(bochs::Spec::default()),
                Duration::from_secs(TIMEOUT),
            )
        };
        let on_qemu = machine::Spec {
            cpu: Some(self.qemu.into()),
            ..machine::Spec::new(
                machine::BackendSpec::Qemu(qemu::Spec::new(AccelChoice::Tcg)),
                Duration::from_secs(TIMEOUT),
            )
        };
        let b = measure(&on_bochs, art, dir)?;
        let q = measure(&on_qemu, art, dir)?;
        compare(self, &b, &q)
    }
}

/// One benchmark boot's results.
fn measure(spec: &machine::Spec, art: &Artifacts, dir: &Path) -> Result<Results, String> {
    let m = Machine::build(spec, art, CMDLINE, dir).map_err(|e| format!("{e:#}"))?;
    let log = m.boot(&mut |_| {}).map_err(|e| format!("{e:#}"))?;
    if !log.succeeded() {
        return Err(format!("{}: {}", m.describe(), log.explain(20)));
    }
    Results::from_log(&log.serial, "agreement", m.backend.source()).map_err(|e| format!("{e:#}"))
}

/// Every call of every mechanism of the pair: available on both, exact on
/// both (every batch the same), and the same count.
fn compare(p: &Pair, bochs: &Results, qemu: &Results) -> Result<(), String> {
    let mut diffs = Vec::new();
    for (r, who) in [(bochs, "Bochs"), (qemu, "QEMU")] {
        for m in p.mechs {
            let ok = r
                .mechanisms
                .iter()
                .any(|x| x.name == *m && x.status == "ok");
            if !ok {
                return Err(format!("{m} is not available under {who}"));
            }
        }
    }
    for m in p.mechs {
        for call in CALLS {
            let name = format!("{m}.{call}");
            let exact = |r: &Results, who: &str| -> Result<f64, String> {
                let b = r
                    .bench(&name)
                    .ok_or_else(|| format!("{who} has no {name} benchmark"))?;
                if b.min != b.max || b.median.fract() != 0.0 {
                    return Err(format!("{name} is not exact under {who}: {:?}", b.samples));
                }
                Ok(b.median)
            };
            let (x, y) = (exact(bochs, "Bochs")?, exact(qemu, "QEMU")?);
            if x != y {
                diffs.push(format!("{name}: Bochs {x} ticks, QEMU {y} instructions"));
            }
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!("the emulators disagree: {}", diffs.join("; ")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Bench, Mech};

    fn results(figures: &[(&str, f64)], mechs: &[&str]) -> Results {
        Results {
            mechanisms: mechs
                .iter()
                .map(|m| Mech {
                    name: m.to_string(),
                    status: "ok".into(),
                    reason: String::new(),
                })
                .collect(),
            benches: figures
                .iter()
                .map(|(n, v)| Bench {
                    name: n.to_string(),
                    min: *v,
                    median: *v,
                    max: *v,
                    ..Bench::default()
                })
                .collect(),
            ..Results::default()
        }
    }

    const PAIR: Pair = Pair {
        bochs: "b",
        qemu: "q",
        mechs: &["int80"],
    };

    #[test]
    fn equal_counts_agree_and_any_difference_fails() {
        let q = results(&[("int80.null", 24.0), ("int80.geteuid", 25.0)], &["int80"]);
        assert!(compare(&PAIR, &q.clone(), &q).is_ok());
        let b = results(&[("int80.null", 24.0), ("int80.geteuid", 26.0)], &["int80"]);
        let e = compare(&PAIR, &b, &q).unwrap_err();
        assert!(
            e.contains("int80.geteuid: Bochs 26 ticks, QEMU 25 instructions"),
            "{e}"
        );
        let none = results(&[], &[]);
        assert!(compare(&PAIR, &none, &q)
            .unwrap_err()
            .contains("not available under Bochs"));
        let mut inexact = q.clone();
        inexact.benches[0].max = 25.0;
        assert!(compare(&PAIR, &inexact, &q)
            .unwrap_err()
            .contains("not exact under Bochs"));
    }
}
