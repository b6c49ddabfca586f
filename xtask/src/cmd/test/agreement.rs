//! The agreement check: two x86 implementations count the same path.
//!
//! Bochs's TSC advances one tick per instruction; QEMU's `-icount` counts
//! instructions. The kernel's system-call paths do not depend on time, so
//! the same kernel on CPUs with the same mechanisms must take exactly as
//! many Bochs ticks as QEMU counts instructions, call for call. A
//! difference is an emulator difference or a path that depends on timing,
//! and fails the test.
//!
//! One counting rule differs, and is checked as such: a REP string
//! instruction. The architecture retires it as one instruction whatever
//! ECX is; Bochs ticks once per iteration ([`bochs_rep_ticks`]), QEMU's
//! icount once per iteration plus once for the pass that finds ECX = 0
//! ([`icount_rep_instructions`]). `prog=strings` measures both rules
//! ([`STRINGS`]); the macro mix, whose operation copies with `rep movsb`
//! twice, must differ by exactly that ([`MACRO_REP_COPIES`]).

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
    // The K6-2 has SYSCALL, no SEP, no SSE2 (so no LFENCE: the timer
    // fences with CPUID) and no RDTSCP; the Phenom with those three taken
    // away is the same to the kernel, and its fence costs the same.
    Pair {
        bochs: "amd_k6_2_chomper",
        qemu: "phenom,-sep,-sse2,-rdtscp",
        mechs: &["int80", "callgate", "syscall"],
    },
];

/// The round trips compared, for every mechanism: none runs a string
/// instruction (`write1` writes one byte to the null device, no copy).
pub const CALLS: &[&str] = &["null", "geteuid", "write1"];

/// REP string instructions with ECX > 0 in one macro-mix operation: the
/// 64-byte write copies into the kernel ring with one `rep movsb`, the read
/// copies out with another (`kernel/src/syscall/usercopy.rs`; the ring's
/// size is a multiple of 64, so no copy is split at its end); getpid and
/// yield copy nothing.
pub const MACRO_REP_COPIES: u32 = 2;

/// Bochs ticks for one REP string instruction with `ecx` iterations: one
/// per iteration, and one when ECX = 0 (the instruction still executes).
/// This is also how many single-step traps the instruction raises.
pub fn bochs_rep_ticks(ecx: u32) -> u32 {
    ecx.max(1)
}

/// QEMU `-icount` instructions for the same: under icount, TCG translates
/// a REP string instruction as one iteration that jumps back to itself, and
/// the last pass only finds ECX = 0 and leaves, so ECX > 0 costs one more.
pub fn icount_rep_instructions(ecx: u32) -> u32 {
    if ecx == 0 {
        1
    } else {
        ecx + 1
    }
}

/// What `icount_rep_instructions` counts beyond `bochs_rep_ticks` for a REP
/// string instruction that iterates at least once.
const ICOUNT_EXTRA_PER_REP: u32 = 1;
/// Few, short batches: the counts are exact, one batch would do.
pub const CMDLINE: &str = "mode=run prog=bench batches=4 batch_size=256";
/// The string-instruction counts' boot.
const STRINGS_CMDLINE: &str = "mode=run prog=strings batches=4 batch_size=256";
/// Seconds before either boot is called hung.
const TIMEOUT: u64 = 180;

impl Pair {
    pub fn name(&self) -> String {
        format!(
            "bochs agreement: Bochs ticks on {} == QEMU icount instructions on {}, null, geteuid and write1 of {}; \
             the macro mix {} per op apart",
            self.bochs,
            self.qemu,
            self.mechs.join(", "),
            MACRO_REP_COPIES * ICOUNT_EXTRA_PER_REP
        )
    }

    /// Boots both and compares; `dir`: this pair's scratch directory.
    pub fn check(&self, art: &Artifacts, dir: &Path) -> Result<(), String> {
        let (on_bochs, on_qemu) = (
            spec(Backend::Bochs, self.bochs),
            spec(Backend::Qemu, self.qemu),
        );
        let b = measure(&on_bochs, art, CMDLINE, dir)?;
        let q = measure(&on_qemu, art, CMDLINE, dir)?;
        compare(self, &b, &q)
    }
}

/// The two machines one boot of `prog=strings` runs on.
pub struct Strings {
    pub bochs: &'static str,
    pub qemu: &'static str,
}

/// The string counts do not depend on the CPU model: one pair is enough.
pub const STRINGS: Strings = Strings {
    bochs: "p4_prescott_celeron_336",
    qemu: "qemu32",
};

impl Strings {
    pub fn name(&self) -> String {
        format!(
            "bochs agreement: a REP string instruction of ECX iterations is max(ECX, 1) Bochs ticks on {}, \
             ECX + 1 (1 at ECX = 0) QEMU icount instructions on {}",
            self.bochs, self.qemu
        )
    }

    pub fn check(&self, art: &Artifacts, dir: &Path) -> Result<(), String> {
        let b = measure(&spec(Backend::Bochs, self.bochs), art, STRINGS_CMDLINE, dir)?;
        let q = measure(&spec(Backend::Qemu, self.qemu), art, STRINGS_CMDLINE, dir)?;
        check_strings(&b, &q)
    }
}

enum Backend {
    Bochs,
    /// TCG with its default clock, icount.
    Qemu,
}

/// A boot of `cpu` on `backend`.
fn spec(backend: Backend, cpu: &str) -> machine::Spec {
    let b = match backend {
        Backend::Bochs => machine::BackendSpec::Bochs(bochs::Spec::default()),
        Backend::Qemu => machine::BackendSpec::Qemu(qemu::Spec::new(AccelChoice::Tcg)),
    };
    machine::Spec {
        cpu: Some(cpu.into()),
        ..machine::Spec::new(b, Duration::from_secs(TIMEOUT))
    }
}

/// One benchmark boot's results.
fn measure(
    spec: &machine::Spec,
    art: &Artifacts,
    cmdline: &str,
    dir: &Path,
) -> Result<Results, String> {
    let m = Machine::build(spec, art, cmdline, dir).map_err(|e| format!("{e:#}"))?;
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
    // The macro mix's figure carries its timed region's fences: compare it
    // only between machines that fence alike.
    let fence = |r: &Results| r.timing.get("fence").cloned().unwrap_or_default();
    if fence(bochs) != fence(qemu) {
        return Err(format!(
            "the pair fences its timer differently (Bochs {:?}, QEMU {:?}): give the QEMU model the Bochs model's SSE2 and RDTSCP",
            fence(bochs),
            fence(qemu)
        ));
    }
    for m in p.mechs {
        for call in CALLS {
            let name = format!("{m}.{call}");
            let (x, y) = (exact(bochs, &name, "Bochs")?, exact(qemu, &name, "QEMU")?);
            if x != y {
                diffs.push(format!("{name}: Bochs {x} ticks, QEMU {y} instructions"));
            }
        }
        // The mix's figure per op carries the timer's overhead over the
        // ops, the same on both: the difference is still exact.
        let per_op = |r: &Results, who: &str| -> Result<f64, String> {
            r.macros
                .iter()
                .find(|x| x.mech == *m)
                .map(|x| x.ticks_per_op)
                .ok_or_else(|| format!("{who} has no macro mix for {m}"))
        };
        let (x, y) = (per_op(bochs, "Bochs")?, per_op(qemu, "QEMU")?);
        let want = f64::from(MACRO_REP_COPIES * ICOUNT_EXTRA_PER_REP);
        if ((y - x) - want).abs() > EXACT {
            diffs.push(format!(
                "macro.{m}: Bochs {x} ticks per op, QEMU {y} instructions: {} apart, not {want} \
                 ({MACRO_REP_COPIES} rep movsb copies per op)",
                y - x
            ));
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!("the emulators disagree: {}", diffs.join("; ")))
    }
}

/// Figures printed with four decimals differ by exactly an integer within this.
const EXACT: f64 = 1e-3;

/// Benchmark `name`'s count under `who`, which must be exact: every batch
/// the same whole number.
fn exact(r: &Results, name: &str, who: &str) -> Result<f64, String> {
    let b = r
        .bench(name)
        .ok_or_else(|| format!("{who} has no {name} benchmark"))?;
    if b.min != b.max || b.median.fract() != 0.0 {
        return Err(format!("{name} is not exact under {who}: {:?}", b.samples));
    }
    Ok(b.median)
}

/// Every string instruction of `prog=strings`, less the bare call, counted
/// by each emulator's rule.
fn check_strings(bochs: &Results, qemu: &Results) -> Result<(), String> {
    use abi::report::names::STRING;
    use abi::strings::{COUNTS, NONE, OPS};
    let mut diffs = Vec::new();
    let bare = format!("{STRING}.{NONE}");
    let (bb, qb) = (exact(bochs, &bare, "Bochs")?, exact(qemu, &bare, "QEMU")?);
    if bb != qb {
        diffs.push(format!("{bare}: Bochs {bb} ticks, QEMU {qb} instructions"));
    }
    for op in OPS {
        for ecx in COUNTS {
            let name = format!("{STRING}.{op}.{ecx}");
            let b = exact(bochs, &name, "Bochs")? - bb;
            let q = exact(qemu, &name, "QEMU")? - qb;
            let (wb, wq) = (bochs_rep_ticks(ecx), icount_rep_instructions(ecx));
            if b != f64::from(wb) || q != f64::from(wq) {
                diffs.push(format!(
                    "rep {op} with ECX = {ecx}: Bochs {b} ticks (rule {wb}), QEMU {q} instructions (rule {wq})"
                ));
            }
        }
    }
    if diffs.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "a REP string instruction counts otherwise: {}",
            diffs.join("; ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{Bench, Macro, Mech};

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

    /// `figures` plus a macro mix of `per_op` ticks for `mech`.
    fn with_macro(mut r: Results, mech: &str, per_op: f64) -> Results {
        r.macros.push(Macro {
            mech: mech.into(),
            ticks_per_op: per_op,
            ..Macro::default()
        });
        r
    }

    const PAIR: Pair = Pair {
        bochs: "b",
        qemu: "q",
        mechs: &["int80"],
    };

    const CALLS_OF_INT80: [(&str, f64); 3] = [
        ("int80.null", 24.0),
        ("int80.geteuid", 25.0),
        ("int80.write1", 89.0),
    ];

    #[test]
    fn equal_calls_and_a_mix_two_copies_apart_agree_and_any_other_difference_fails() {
        let q = with_macro(results(&CALLS_OF_INT80, &["int80"]), "int80", 856.2031);
        let b = with_macro(results(&CALLS_OF_INT80, &["int80"]), "int80", 854.2031);
        assert!(compare(&PAIR, &b, &q).is_ok());
        let e = compare(&PAIR, &q.clone(), &q).unwrap_err();
        assert!(
            e.contains("macro.int80") && e.contains("0 apart, not 2"),
            "{e}"
        );
        let mut other = b.clone();
        other.benches[1].median = 26.0;
        (other.benches[1].min, other.benches[1].max) = (26.0, 26.0);
        let e = compare(&PAIR, &other, &q).unwrap_err();
        assert!(
            e.contains("int80.geteuid: Bochs 26 ticks, QEMU 25 instructions"),
            "{e}"
        );
        let mut lfence = q.clone();
        lfence.timing.insert("fence".into(), "lfence+rdtsc".into());
        assert!(compare(&PAIR, &b, &lfence)
            .unwrap_err()
            .contains("fences its timer differently"));
        let none = results(&[], &[]);
        assert!(compare(&PAIR, &none, &q)
            .unwrap_err()
            .contains("not available under Bochs"));
        let mut inexact = b.clone();
        inexact.benches[0].max = 25.0;
        assert!(compare(&PAIR, &inexact, &q)
            .unwrap_err()
            .contains("not exact under Bochs"));
        let no_mix = results(&CALLS_OF_INT80, &["int80"]);
        assert!(compare(&PAIR, &no_mix, &q)
            .unwrap_err()
            .contains("Bochs has no macro mix for int80"));
    }

    /// `prog=strings`'s figures as a machine with the rule `rule` and a
    /// bare call of 5 would report them.
    fn strings(rule: fn(u32) -> u32) -> Results {
        use abi::strings::{COUNTS, OPS};
        let mut figs = vec![("string.none".to_string(), 5.0)];
        for op in OPS {
            for n in COUNTS {
                figs.push((format!("string.{op}.{n}"), 5.0 + f64::from(rule(n))));
            }
        }
        let figs: Vec<(&str, f64)> = figs.iter().map(|(n, v)| (n.as_str(), *v)).collect();
        results(&figs, &[])
    }

    #[test]
    fn the_rep_rules_are_the_ones_measured_and_a_swap_fails() {
        // As measured (docs/machines.md): 0, 1, 2, 64 iterations.
        assert_eq!([0, 1, 2, 64].map(bochs_rep_ticks), [1, 1, 2, 64]);
        assert_eq!([0, 1, 2, 64].map(icount_rep_instructions), [1, 2, 3, 65]);
        assert_eq!(
            icount_rep_instructions(64) - bochs_rep_ticks(64),
            ICOUNT_EXTRA_PER_REP
        );
        let (b, q) = (strings(bochs_rep_ticks), strings(icount_rep_instructions));
        assert!(check_strings(&b, &q).is_ok());
        let e = check_strings(&q, &b).unwrap_err();
        assert!(
            e.contains(
                "rep movsb with ECX = 1: Bochs 2 ticks (rule 1), QEMU 1 instructions (rule 2)"
            ),
            "{e}"
        );
        assert!(!e.contains("ECX = 0"), "{e}");
    }
}
