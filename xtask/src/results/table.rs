//! The human table of one run, as `run` and `import` print it.

use abi::report::Measure;

use super::Clock;

use super::{Bench, Results};

impl Results {
    /// The human table: median and min per call, full/floor, and the ratio
    /// to int 0x80 for the same call; then the macro mix.
    pub fn table(&self) -> String {
        if self.model_profile.is_some() {
            return self.cycles_table();
        }
        let mut s = String::new();
        let bochs_note = format!(
            "  ({}; emulator figures, not cycles)",
            abi::syscall::BOCHS_TICK
        );
        let emulated = if self.clock().is_some_and(|c| c.emulated(self.tcg())) {
            "  (TCG: emulator artefacts, not cycles)"
        } else if self.bochs() && self.clock() == Some(Clock::Tsc) {
            bochs_note.as_str()
        } else {
            ""
        };
        let clock = if self.guest_clock.is_empty() {
            self.clock.clone()
        } else {
            format!("{}, the guest's {}", self.clock, self.guest_clock)
        };
        s += &format!(
            "clock={} ({} per tick)  accel={}  cpu={} \"{}\"{}\n",
            clock,
            self.unit.trim_end_matches('s'),
            self.accel,
            self.cpu.get("vendor").map_or("?", String::as_str),
            self.cpu.get("brand").map_or("?", String::as_str),
            emulated
        );
        if let Some(p) = &self.model_profile {
            s += &format!(
                "modelled: cycles per call from the model plugin ({}); the other columns are {}\n",
                super::figures::label(p, self.virt()),
                self.unit
            );
        }
        s += &format!(
            "{:<10} {:<8} {:>10} {:>10} {:>11} {:>12}{}\n",
            "entry",
            "call",
            "median",
            "min",
            "full/floor",
            "vs int 0x80",
            if self.model_profile.is_some() {
                format!(" {:>10}", "modelled")
            } else {
                String::new()
            }
        );
        // Each column's unit; both ratios are time over time, as in the
        // macro lines (below 1: faster).
        let short = if self.unit == "instructions" {
            "insns"
        } else {
            self.unit.as_str()
        };
        s += &format!(
            "{:<10} {:<8} {:>10} {:>10} {:>11} {:>12}{}\n",
            "",
            "",
            short,
            short,
            "time ratio",
            "time ratio",
            if self.model_profile.is_some() {
                format!(" {:>10}", "cycles")
            } else {
                String::new()
            }
        );
        for m in abi::Mechanism::ALL {
            if let Some(line) = self.unavailable(&m) {
                s += &line;
                continue;
            }
            let floor = self.bench(&format!("{}.floor", m.key())).map(|b| b.median);
            for b in self.benches.iter().filter(|b| b.mech == m.key()) {
                let ratio = match (b.call.as_str(), floor) {
                    ("null", Some(f)) if f > 0.0 => format!("{:.2}x", b.median / f),
                    _ => String::new(),
                };
                let vs = self
                    .bench(&format!("int80.{}", b.call))
                    .filter(|base| base.median > 0.0)
                    .map(|base| format!("{:.2}", b.median / base.median))
                    .unwrap_or_default();
                let pmc = match (b.instructions, b.cycles) {
                    (Some(i), Some(c)) => {
                        format!("   {i:.1} instructions, {c:.1} cycles (counters)")
                    }
                    _ => String::new(),
                };
                let modelled = match (&self.model_profile, &b.model) {
                    (None, _) => String::new(),
                    (Some(_), Some(x)) => format!(" {:>10.1}", x.cycles),
                    (Some(_), None) => format!(" {:>10}", "-"),
                };
                s += &format!(
                    "{:<10} {:<8} {:>10.2} {:>10.2} {:>11} {:>12}{}{}\n",
                    m.title(),
                    b.call,
                    b.median,
                    b.min,
                    ratio,
                    vs,
                    modelled,
                    pmc
                );
            }
        }
        if let Some(l) = self.bench("loop") {
            s += &format!(
                "{:<10} {:<8} {:>10.2}   (decl + jnz, included above)\n",
                "loop", "empty", l.median
            );
        }
        let base = self
            .macros
            .iter()
            .find(|m| m.mech == "int80")
            .map(|m| m.ticks_per_op);
        for m in &self.macros {
            let vs = base
                .filter(|b| *b > 0.0)
                .map(|b| format!("  {:.2} vs int 0x80", m.ticks_per_op / b))
                .unwrap_or_default();
            let modelled = m
                .model
                .as_ref()
                .map(|x| format!("  {:.1} modelled cycles/op", x.cycles))
                .unwrap_or_default();
            s += &format!(
                "macro mix  {:<9} {:>12.0} ops/s{}  {:>9.1} {}/op{}{}\n",
                mech_title(&m.mech),
                m.ops_per_s,
                if self.clock().is_some_and(Clock::virtual_time) {
                    " (virtual)"
                } else {
                    ""
                },
                m.ticks_per_op,
                self.unit,
                vs,
                modelled
            );
        }
        let others = self.others();
        if !others.is_empty() {
            s += &format!(
                "{:<28} {:>12} {:>12}  unit (median and min of each benchmark's batches)\n",
                "benchmark", "median", "min"
            );
        }
        for b in others {
            s += &format!(
                "{:<28} {:>12.2} {:>12.2}  {}{}{}\n",
                b.name,
                b.median,
                b.min,
                b.unit,
                match b.measure {
                    Measure::PerOp => " per op",
                    Measure::Throughput => " (throughput: higher is better)",
                },
                b.share.as_ref().map(share_note).unwrap_or_default()
            );
        }
        s
    }
}

impl Results {
    /// The benchmarks of no mechanism, the empty loop aside.
    fn others(&self) -> Vec<&Bench> {
        self.benches
            .iter()
            .filter(|b| b.name != "loop" && abi::Mechanism::from_key(&b.mech).is_none())
            .collect()
    }

    /// The table's line for mechanism `m` where the boot found it unavailable.
    fn unavailable(&self, m: &abi::Mechanism) -> Option<String> {
        let mech = self.mechanisms.iter().find(|x| x.name == m.key())?;
        (mech.status != "ok").then(|| format!("{:<10} unavailable: {}\n", m.title(), mech.reason))
    }

    /// The table of a model run: per row the instructions (icount) and the
    /// modelled cycles side by side, the misses where there are any, and
    /// every ratio on the modelled cycles (the clock that decides).
    fn cycles_table(&self) -> String {
        let profile = self.model_profile.as_deref().unwrap_or("?");
        let label = super::figures::label(profile, self.virt());
        let mut s = format!(
            "ratios on modelled cycles ({}); insns: the instructions of the same boot (icount)\n",
            label.trim_start_matches("modelled, ")
        );
        let cycles = |name: &str| {
            self.bench(name)
                .and_then(|b| b.model.as_ref())
                .map(|m| m.cycles)
                .filter(|c| *c > 0.0)
        };
        let entries = self
            .benches
            .iter()
            .any(|b| abi::Mechanism::from_key(&b.mech).is_some());
        if entries {
            s += &format!(
                "{:<10} {:<8} {:>9} {:>9} {:>9} {:>11} {:>12}  {}\n",
                "entry",
                "call",
                "insns",
                "cycles",
                "min",
                "full/floor",
                "vs int 0x80",
                "misses per call"
            );
            s += &format!(
                "{:<10} {:<8} {:>9} {:>9} {:>9} {:>11} {:>12}\n",
                "", "", "median", "median", "cycles", "cycles", "cycles"
            );
        }
        for m in abi::Mechanism::ALL.iter().filter(|_| entries) {
            if let Some(line) = self.unavailable(m) {
                s += &line;
                continue;
            }
            let floor = cycles(&format!("{}.floor", m.key()));
            for b in self.benches.iter().filter(|b| b.mech == m.key()) {
                let Some(x) = &b.model else {
                    s += &format!(
                        "{:<10} {:<8} {:>9.2} {:>9}\n",
                        m.title(),
                        b.call,
                        b.median,
                        "-"
                    );
                    continue;
                };
                let ratio = match (b.call.as_str(), floor) {
                    ("null", Some(f)) => format!("{:.2}x", x.cycles / f),
                    _ => String::new(),
                };
                let vs = cycles(&format!("int80.{}", b.call))
                    .map(|base| format!("{:.2}", x.cycles / base))
                    .unwrap_or_default();
                let min = super::figures::cycle_samples(b)
                    .and_then(|v| v.into_iter().reduce(f64::min))
                    .map(|c| format!("{c:.1}"))
                    .unwrap_or_default();
                let row = format!(
                    "{:<10} {:<8} {:>9.2} {:>9.1} {:>9} {:>11} {:>12}  {}",
                    m.title(),
                    b.call,
                    b.median,
                    x.cycles,
                    min,
                    ratio,
                    vs,
                    misses(x, self.model_cpus > 1)
                );
                s += row.trim_end();
                s += "\n";
            }
        }
        if let Some(l) = self.bench("loop") {
            s += &format!(
                "{:<10} {:<8} {:>9.2} {:>9}   (decl + jnz, included above)\n",
                "loop",
                "empty",
                l.median,
                l.model
                    .as_ref()
                    .map(|x| format!("{:.1}", x.cycles))
                    .unwrap_or_default()
            );
        }
        let base = self
            .macros
            .iter()
            .find(|m| m.mech == "int80")
            .and_then(|m| m.model.as_ref())
            .map(|x| x.cycles)
            .filter(|c| *c > 0.0);
        for m in &self.macros {
            let Some(x) = &m.model else { continue };
            let vs = base
                .map(|b| format!("  {:.2} vs int 0x80", x.cycles / b))
                .unwrap_or_default();
            s += &format!(
                "macro mix  {:<9} {:>9.1} insns/op {:>9.1} cycles/op{}{}\n",
                mech_title(&m.mech),
                m.ticks_per_op,
                x.cycles,
                vs,
                match misses(x, self.model_cpus > 1) {
                    t if t.is_empty() => t,
                    t => format!("  misses per op: {t}"),
                }
            );
        }
        let others = self.others();
        if !others.is_empty() {
            s += &format!(
                "{:<28} {:>12} {:>12}  {}\n",
                "benchmark", "median", "cycles", "(median of the batches: the benchmark's unit, then modelled cycles per op; misses per op)"
            );
        }
        for b in others {
            let (cyc, miss) = match &b.model {
                Some(x) => (format!("{:.1}", x.cycles), misses(x, self.model_cpus > 1)),
                None => ("-".into(), String::new()),
            };
            s += &format!(
                "{:<28} {:>12.2} {:>12}  {}{}{}{}\n",
                b.name,
                b.median,
                cyc,
                b.unit,
                match b.measure {
                    Measure::PerOp => " per op",
                    Measure::Throughput => " (throughput: higher is better)",
                },
                b.share.as_ref().map(share_note).unwrap_or_default(),
                if miss.is_empty() {
                    miss
                } else {
                    format!("; {miss}")
                }
            );
        }
        for note in &self.model_incomplete {
            s += &format!("model: incomplete: {note}\n");
        }
        if let Some(note) = self.model_forced_note() {
            s += &format!("{note}\n");
        }
        if self.model_cpus > 1 {
            s += &format!(
                "({} CPUs: cycles = modelled time on the benchmark's CPU; coh = lines another CPU's cache supplied, IPI = IPIs sent, every CPU's)\n",
                self.model_cpus
            );
        }
        s
    }
}

/// A mechanism's title, from its key (the key itself where no mechanism has it).
fn mech_title(key: &str) -> &str {
    abi::Mechanism::from_key(key).map_or(key, |m| m.title())
}

/// The model's misses of one figure where they are not zero
/// (`L1 0.02  TLB 1.00`), the VM exits under `--virt`, with the coherence
/// misses and the IPIs sent on several CPUs.
fn misses(m: &super::ModelFigures, smp: bool) -> String {
    let mut v = vec![
        ("L1", m.l1_misses),
        ("L2", m.l2_misses),
        ("TLB", m.tlb_misses),
        ("flush", m.tlb_flushes),
        ("exit", m.vm_exits),
    ];
    if smp {
        v.push(("coh", m.coherence_misses));
        v.push(("IPI", m.ipis));
    }
    let key = |k: &str| match k {
        "L1" => "l1_misses",
        "L2" => "l2_misses",
        "TLB" => "tlb_misses",
        "flush" => "tlb_flushes",
        "exit" => "vm_exits",
        "coh" => "coherence_misses",
        _ => "ipis",
    };
    // A figure clamped at zero is said, never left out as if it were none.
    v.into_iter()
        .filter_map(|(k, x)| {
            if m.is_clamped(key(k)) {
                Some(format!("{k} clamped"))
            } else {
                (x >= 0.005).then(|| format!("{k} {x:.2}"))
            }
        })
        .collect::<Vec<_>>()
        .join("  ")
}

/// A multi-CPU figure's share, as the table shows it after the unit:
/// `; records per CPU 100/0%`, under the model the other CPUs' overlap
/// with the timed one (`, overlap 97%`), and where one CPU did the work or
/// the CPUs barely overlapped, a flag that says the figure is not the
/// machine's.
pub fn share_note(share: &super::Share) -> String {
    let flag = super::one_cpu_flag(share);
    let overlap = share.overlaps();
    format!(
        "; {} per CPU {}%{}{}",
        share.work,
        share.percents(),
        if overlap.is_empty() {
            String::new()
        } else {
            format!(", {overlap}")
        },
        if flag.is_empty() {
            String::new()
        } else {
            format!(" [{flag}]")
        }
    )
}
