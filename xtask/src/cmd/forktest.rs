//! `cargo xtask forktest`: the pmap mail's experiment as its table, one
//! command. Each row is a system (a model profile, bare or under a
//! hypervisor, one CPU or several); each boots forktest twice under the
//! model clock, the old kernel (`pmap=apte`) and the new (`pmap=direct`),
//! and the row gives both boots' instructions (the guest's icount clock)
//! beside their modelled cycles, and the speed-up, old over new.
//!
//! `cargo xtask docs --table forktest` prints its table through the same
//! functions ([`measure`], [`markdown`]), with its own list of systems.

use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use crate::machine::{self, qemu, AccelChoice, Clock, Machine, Scratch};
use crate::model::{self, ModelOpts, Virt};
use crate::results::{Results, Share};
use crate::{kbuild, preflight};

/// The boots' settings besides `pmap=`: the parent's 64 touched pages,
/// fork=cow (as the experiment's kernel forked); `batches=` is added.
pub const SETTINGS: &str = "fork=cow fork_pages=64";

/// The batches of 8 rounds each boot times, unless asked otherwise.
pub const DEFAULT_BATCHES: u32 = 4;

/// The two kernels the mail compared: (column, `pmap=` strategy).
pub const OLD: &str = "apte";
pub const NEW: &str = "direct";

/// What the table needs to know of the machine a profile describes: how
/// many CPUs its MP rows boot (the part's cores), whether it walked two
/// dimensions under a hypervisor, which decides the paging a hypervisor on
/// it used (EPT or AMD's nested paging where the part had it, shadow page
/// tables where it did not), and QEMU's CPU model of the part, where its
/// rows boot one.
struct Part {
    profile: &'static str,
    cores: u32,
    ept: bool,
    /// `None`: QEMU's default model (qemu32), as the Intel rows boot.
    cpu: Option<&'static str>,
}

impl Part {
    /// Not an Intel part: the mail had no such row, and asked for one.
    fn non_intel(&self) -> bool {
        self.cpu.is_some_and(qemu::is_amd_model)
    }
}

/// The parts of model/profiles.toml (each description names its part).
/// EPT first shipped with Nehalem (SDM Vol. 3C, "VMX Support for Address
/// Translation"; profiles.toml's rules); AMD's nested paging, the same two
/// dimensions, with family 10h (the AMD64 manual's "Nested Paging").
const PARTS: &[Part] = &[
    // One core; SMP Pentium III systems had two sockets.
    Part {
        profile: "p3",
        cores: 2,
        ept: false,
        cpu: None,
    },
    // Pentium D: two Prescott cores.
    Part {
        profile: "p4",
        cores: 2,
        ept: false,
        cpu: None,
    },
    // Core 2 Duo: two cores.
    Part {
        profile: "core2",
        cores: 2,
        ept: false,
        cpu: None,
    },
    // Core 2 Duo T8100 (ark.intel.com): two cores, VT-x without EPT.
    Part {
        profile: "penryn",
        cores: 2,
        ept: false,
        cpu: None,
    },
    // Core i7-920 (ark.intel.com): four cores, VT-x with EPT.
    Part {
        profile: "nehalem",
        cores: 4,
        ept: true,
        cpu: None,
    },
    // Phenom X4 9550 (AMD's product data; QEMU's phenom model): four
    // cores, AMD-V with nested paging, walked by the model's EPT rule.
    Part {
        profile: "k10",
        cores: 4,
        ept: true,
        cpu: Some("phenom"),
    },
    // Core i7-6700: four cores, EPT.
    Part {
        profile: "modern",
        cores: 4,
        ept: true,
        cpu: None,
    },
];

fn part(profile: &str) -> Option<&'static Part> {
    PARTS.iter().find(|p| p.profile == profile)
}

/// The mail's own speed-ups (old / new), for the rows of its systems: its
/// Core i7 SP and MP, its Core 2 Duo (T8100) MP, and its KVM guest with 4
/// virtual CPUs (the host's part not named, but the mail's machines were
/// Intel's: it asked others for a non-Intel row, so none of those is one).
fn mail(s: &System) -> Option<(f64, &'static str)> {
    if asked(s) {
        return None;
    }
    match (s.profile.as_str(), s.virt, s.cpus) {
        ("nehalem", Virt::Off, 1) => Some((1.03, "Core i7 SP")),
        ("nehalem", Virt::Off, c) if c > 1 => Some((1.52, "Core i7 MP")),
        ("penryn", Virt::Off, c) if c > 1 => Some((1.11, "Core 2 Duo T8100 MP")),
        (_, Virt::Shadow | Virt::Ept, 4) => Some((3.26, "KVM guest with 4 vCPUs, MP")),
        _ => None,
    }
}

/// A row of a non-Intel part: the row the mail asked others for.
fn asked(s: &System) -> bool {
    part(&s.profile).is_some_and(Part::non_intel)
}

/// The mail column of a row: its figure, `asked` for a non-Intel row,
/// else nothing.
fn mail_cell(s: &System, none: &str) -> String {
    match mail(s) {
        Some((x, _)) => format!("{x:.2}"),
        None if asked(s) => "asked".into(),
        None => none.into(),
    }
}

/// One row: a profile, its paging, its CPUs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct System {
    pub profile: String,
    pub virt: Virt,
    pub cpus: u32,
}

impl System {
    pub fn new(profile: &str, virt: Virt, cpus: u32) -> System {
        System {
            profile: profile.into(),
            virt,
            cpus,
        }
    }

    /// `nehalem, virt (EPT), MP (4 CPUs)`.
    fn name(&self) -> String {
        format!(
            "{}, {}, {}",
            self.profile,
            virt_name(self.virt, self.npt()),
            if self.cpus > 1 {
                format!("MP ({} CPUs)", self.cpus)
            } else {
                "SP".into()
            }
        )
    }

    /// Two-dimensional paging on an AMD part: nested paging (NPT), which
    /// the model walks by the EPT rule.
    fn npt(&self) -> bool {
        self.virt == Virt::Ept && asked(self)
    }

    /// QEMU's CPU model of the row's part, where it has one.
    fn cpu(&self) -> Option<&'static str> {
        part(&self.profile).and_then(|p| p.cpu)
    }
}

/// The table's words for a paging (`npt`: EPT's rule on an AMD part).
fn virt_name(v: Virt, npt: bool) -> &'static str {
    match v {
        Virt::Off => "bare",
        Virt::Shadow => "virt (shadow paging)",
        Virt::Ept if npt => "virt (NPT, nested paging)",
        Virt::Ept => "virt (EPT)",
    }
}

/// forktest.fork_exit of one boot.
#[derive(Clone, Debug)]
pub struct Figures {
    /// Instructions per round: the guest's icount median (under the model
    /// the guest's clock still counts instructions), every CPU's while CPU
    /// 0's round ran.
    pub insns: f64,
    /// Modelled cycles per round on CPU 0: the model's median.
    pub cycles: f64,
    /// Each CPU's rounds while CPU 0 was timed, on several CPUs.
    pub share: Option<Share>,
}

/// A row measured: its system, the old kernel's boot and the new one's.
#[derive(Clone, Debug)]
pub struct Row {
    pub system: System,
    pub old: Figures,
    pub new: Figures,
}

impl Row {
    /// Old over new, on the modelled cycles.
    pub fn speedup(&self) -> f64 {
        self.old.cycles / self.new.cycles
    }
}

/// How the boots are made: the grain, the batches, the time limit.
#[derive(Clone, Debug)]
pub struct Settings {
    /// `--turn`: `None` is the kernel's default grain.
    pub turn: Option<u32>,
    pub batches: u32,
    pub timeout: Duration,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings {
            turn: None,
            batches: DEFAULT_BATCHES,
            timeout: Duration::from_secs(300),
        }
    }
}

impl Settings {
    /// The interleaving grain the MP rows ran at.
    pub fn grain(&self) -> u32 {
        self.turn.unwrap_or(abi::cmdline::DEFAULT_TURN)
    }

    /// How the MP rows' CPUs interleaved, in words: `turns of 10000
    /// instructions`, or QEMU's own turns where the pacer was off.
    pub fn grain_words(&self) -> String {
        match self.grain() {
            0 => "QEMU's own turns (the pacer off: --turn 0)".into(),
            n => format!("turns of {n} instructions"),
        }
    }

    /// The kernel command-line words every boot gets but `pmap=`.
    fn words(&self) -> String {
        format!("{SETTINGS} batches={}", self.batches)
    }

    /// The kernel command-line words of a boot under `pmap`.
    fn append(&self, pmap: &str) -> String {
        format!("{} pmap={pmap}", self.words())
    }
}

/// Boots forktest once: `system` under `pmap=`, the model clock.
fn boot(art: &kbuild::Artifacts, s: &System, pmap: &str, set: &Settings) -> Result<Figures> {
    let spec = machine::Spec {
        cpu: s.cpu().map(str::to_string),
        cpus: s.cpus,
        clock: Some(Clock::Model),
        turn: set.turn,
        append: set.append(pmap),
        model: Some(ModelOpts {
            profile: s.profile.clone(),
            virt: s.virt,
            pge: false,
            from_cpu: false,
            reference: false,
            shadow: false,
        }),
        ..machine::Spec::new(
            machine::BackendSpec::Qemu(qemu::Spec::new(AccelChoice::Tcg)),
            set.timeout,
        )
    };
    let scratch = Scratch::new("forktest")?;
    let words = format!("mode=run prog={}", abi::report::names::FORKTEST);
    let m = Machine::build(&spec, art, &words, scratch.path())?;
    let log = m
        .boot(&mut |_| {})
        .with_context(|| format!("booting {}", m.backend.name()))?;
    let what = format!("{} under pmap={pmap}", s.name());
    if !log.succeeded() {
        bail!("{what}: the boot failed: {}", log.explain(20));
    }
    let mut r = Results::from_log(&log.serial, "forktest", m.backend.source())
        .with_context(|| format!("{what}: reading the kernel's report"))?;
    model::finish(m.model.as_ref(), &log.serial, &mut r)?;
    figures(&r).with_context(|| what)
}

/// forktest.fork_exit's figures in a boot's results.
fn figures(r: &Results) -> Result<Figures> {
    let name = abi::report::names::FORKTEST_FORK_EXIT;
    if r.unit != "instructions" {
        bail!(
            "the guest's unit is {:?}, not instructions (icount)",
            r.unit
        );
    }
    let b = r
        .benches
        .iter()
        .find(|b| b.name == name)
        .with_context(|| format!("no {name} in the results"))?;
    let m = b
        .model
        .as_ref()
        .with_context(|| format!("{name} has no modelled cycles"))?;
    if m.clamped.iter().any(|k| k == "cycles") {
        bail!("{name}: its modelled cycles were clamped at zero");
    }
    Ok(Figures {
        insns: b.median,
        cycles: m.cycles,
        share: b.share.clone(),
    })
}

/// Boots every system under the old and the new kernel, in order, saying
/// on stderr what boots and how long each took.
pub fn measure(systems: &[System], set: &Settings) -> Result<Vec<Row>> {
    let known = model::known_profiles();
    for s in systems {
        model::check_profile(&s.profile, &known)?;
    }
    preflight::ensure(preflight::Need::Qemu)?;
    let art = kbuild::build(true)?;
    let mut rows = Vec::new();
    for s in systems {
        let mut two = Vec::new();
        for pmap in [OLD, NEW] {
            let t = Instant::now();
            two.push(boot(&art, s, pmap, set)?);
            eprintln!(
                "forktest: {} under pmap={pmap}: {:.1} s",
                s.name(),
                t.elapsed().as_secs_f64()
            );
        }
        let new = two.pop().expect("two boots");
        let old = two.pop().expect("two boots");
        rows.push(Row {
            system: s.clone(),
            old,
            new,
        });
    }
    Ok(rows)
}

/// A figure: whole where it is, else one decimal.
fn cell(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// Each CPU's rounds, comma-separated (`32,30`).
fn rounds(f: &Figures) -> String {
    f.share.as_ref().map_or_else(
        || "?".into(),
        |s| {
            s.per_cpu
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(",")
        },
    )
}

/// The CPU that did 90% or more of an MP row's rounds, in either boot.
fn alone(r: &Row) -> Option<u32> {
    let one = |f: &Figures| f.share.as_ref().and_then(|s| s.one_cpu);
    one(&r.old).or(one(&r.new))
}

/// The profiles among `rows` whose part had no EPT but have an EPT row.
fn ept_what_ifs(rows: &[Row]) -> Vec<&str> {
    let mut out: Vec<&str> = Vec::new();
    for r in rows {
        let p = r.system.profile.as_str();
        if r.system.virt == Virt::Ept && part(p).is_some_and(|p| !p.ept) && !out.contains(&p) {
            out.push(p);
        }
    }
    out
}

/// The table in Markdown, as the book shows it; a column with the mail's
/// own figure where a row is one of its systems.
pub fn markdown(rows: &[Row], set: &Settings) -> String {
    let with_mail = rows
        .iter()
        .any(|r| mail(&r.system).is_some() || asked(&r.system));
    let mut out = String::from(
        "| system | old: pmap=apte (modelled cycles) | new: pmap=direct (modelled cycles) | speed up (old/new) | instructions (old, new) |",
    );
    out += if with_mail { " the mail |\n" } else { "\n" };
    out += "| --- | ---: | ---: | ---: | ---: |";
    out += if with_mail { " ---: |\n" } else { "\n" };
    for r in rows {
        // An MP row says how the CPUs interleaved (the turn pacer's grain)
        // and each CPU's rounds while CPU 0 was timed; one whose rounds one
        // CPU did nearly alone says so: it is not an N-CPU figure.
        let mp = match (alone(r), r.system.cpus > 1) {
            (Some(c), true) => format!("; CPU {c} did 90% or more of the rounds"),
            (None, true) => format!(
                "; {}; rounds per CPU while CPU 0 was timed: old {}, new {}",
                set.grain_words(),
                rounds(&r.old),
                rounds(&r.new)
            ),
            _ => String::new(),
        };
        out += &format!(
            "| {}{mp} | {} | {} | {:.2} | {}, {} |",
            r.system.name(),
            cell(r.old.cycles),
            cell(r.new.cycles),
            r.speedup(),
            cell(r.old.insns),
            cell(r.new.insns)
        );
        if with_mail {
            out += &format!(" {} |", mail_cell(&r.system, ""));
        }
        out += "\n";
    }
    let cpus: Vec<String> = {
        let mut c: Vec<u32> = rows
            .iter()
            .map(|r| r.system.cpus)
            .filter(|&c| c > 1)
            .collect();
        c.sort_unstable();
        c.dedup();
        c.iter().map(u32::to_string).collect()
    };
    out += &format!(
        "\nPer fork + exit + wait round (the parent's); QEMU TCG, one boot per cell: \
         `cargo xtask run --prog forktest --clock model --profile P [--virt shadow|ept]{} --append \"{}\"` \
         (medians of the batches; instructions from icount in the same boots).",
        if cpus.is_empty() {
            String::new()
        } else {
            format!(" [--smp {}]", cpus.join("|"))
        },
        set.append("S")
    );
    let what_ifs = ept_what_ifs(rows);
    match what_ifs.as_slice() {
        [] => {}
        [p] => out += &format!(" {p} had no EPT: its EPT row is a what-if of the profiles' rule."),
        ps => {
            out += &format!(
                " {} had no EPT: their EPT rows are what-ifs of the profiles' rule.",
                ps.join(", ")
            )
        }
    }
    if !cpus.is_empty() {
        out += " In an MP row the other CPUs fork all along (one forker each, in the same process), \
                so CPU 0's round includes its waits for the scheduler lock, which serialises forks, and for shootdowns; \
                its instructions are the icount clock's, every CPU's instructions while CPU 0's round ran. \
                The CPUs interleave at the turn pacer's grain, a choice of the run (`--turn`), \
                so an MP figure holds for that grain, not for parallel hardware.";
    }
    if rows.iter().any(|r| mail(&r.system).is_some()) {
        out += " The mail's column: its own speed-ups (Core i7 SP and MP, Core 2 Duo T8100 MP, \
                a KVM guest with 4 virtual CPUs on a host it does not name), \
                of a whole kernel's fork path; beside the model's they compare directions, not sizes.";
    }
    out += &non_intel_words(rows);
    out
}

/// What the rows of a non-Intel part need said, for the Markdown and the
/// text alike (empty without such rows): the mail had no such row, how
/// they boot, and what their nested paging is in the model.
fn non_intel_words(rows: &[Row]) -> String {
    let mut parts: Vec<(&str, &str)> = Vec::new();
    for r in rows.iter().filter(|r| asked(&r.system)) {
        let p = r.system.profile.as_str();
        if let Some(cpu) = r.system.cpu() {
            if !parts.contains(&(p, cpu)) {
                parts.push((p, cpu));
            }
        }
    }
    if parts.is_empty() {
        return String::new();
    }
    let names: Vec<String> = parts
        .iter()
        .map(|(p, cpu)| format!("{p} (`--cpu {cpu}`)"))
        .collect();
    let mut out = format!(
        " asked: the row the mail asked others for, a non-Intel CPU's; the mail gave none, so there is no figure beside it. \
         Those rows boot QEMU's model of the part: {}.",
        names.join(", ")
    );
    if rows.iter().any(|r| r.system.npt()) {
        out += " NPT: AMD's nested paging, which walks the guest's tables and the host's as EPT does; \
                the model charges it by the same rule (`--virt ept`: no exit on CR3 writes or invlpg, \
                a two-dimensional walk per TLB miss).";
    }
    out
}

/// One CPU's share of an MP boot: `old 32,30 (52%/48%)`, and under the
/// model each other CPU's overlap with CPU 0.
fn share_words(label: &str, f: &Figures) -> String {
    let Some(s) = &f.share else {
        return format!("{label}: no share record");
    };
    let mut w = format!("{label} {} ({}%)", rounds(f), s.percents());
    if !s.overlap.is_empty() {
        let o: Vec<String> = s
            .overlap
            .iter()
            .map(|o| format!("CPU {} {:.0}%", o.cpu, o.percent))
            .collect();
        w += &format!(", overlapping CPU 0: {}", o.join(", "));
    }
    let flags: Vec<String> = [s.flag(), s.apart_flag()]
        .into_iter()
        .filter(|f| !f.is_empty())
        .collect();
    if !flags.is_empty() {
        w += &format!(" [{}]", flags.join("; "));
    }
    w
}

/// The table as text, for the terminal.
pub fn text(rows: &[Row], set: &Settings) -> String {
    let mut out = format!(
        "forktest: fork + exit + wait, per round (the parent's): {}; old = pmap={OLD}, new = pmap={NEW}\n\
         insns: instructions (icount, the guest's clock); cycles: modelled cycles of CPU 0 (the profile named)\n\n",
        set.words()
    );
    let head = [
        "machine",
        "paging",
        "CPUs",
        "insns old",
        "insns new",
        "cycles old",
        "cycles new",
        "speed-up",
        "insn ratio",
        "mail",
    ];
    let mut table: Vec<Vec<String>> = vec![head.iter().map(|h| h.to_string()).collect()];
    let mut notes: Vec<Option<String>> = vec![None];
    for r in rows {
        let s = &r.system;
        table.push(vec![
            s.profile.clone(),
            match s.virt {
                Virt::Off => "bare".into(),
                Virt::Shadow => "shadow".into(),
                Virt::Ept if s.npt() => "NPT".into(),
                Virt::Ept => "EPT".into(),
            },
            if s.cpus > 1 {
                format!("MP {}", s.cpus)
            } else {
                "SP".into()
            },
            cell(r.old.insns),
            cell(r.new.insns),
            cell(r.old.cycles),
            cell(r.new.cycles),
            format!("{:.2}", r.speedup()),
            format!("{:.2}", r.old.insns / r.new.insns),
            mail_cell(s, "-"),
        ]);
        notes.push((s.cpus > 1).then(|| {
            format!(
                "  rounds per CPU while CPU 0 was timed, {}: {}; {}",
                set.grain_words(),
                share_words("old", &r.old),
                share_words("new", &r.new)
            )
        }));
    }
    // Machine, paging and CPUs to the left, the figures to the right.
    for (line, note) in crate::compare::aligned(&table, 3).iter().zip(&notes) {
        out += line;
        out += "\n";
        if let Some(n) = note {
            out += n;
            out += "\n";
        }
    }
    out +=
        "\nspeed-up: old cycles / new cycles; insn ratio: old instructions / new instructions.\n";
    let marked: Vec<String> = rows
        .iter()
        .filter_map(|r| mail(&r.system).map(|(x, what)| format!("{what} {x:.2}")))
        .collect();
    if !marked.is_empty() {
        out += &format!(
            "mail: the mail's own speed-up for that system ({}; the KVM host's part not named), \
             a whole kernel's fork path on the real machine.\n",
            marked.join("; ")
        );
    }
    let what_ifs = ept_what_ifs(rows);
    if !what_ifs.is_empty() {
        out += &format!(
            "{} had no EPT: an EPT row there is a what-if of the profiles' rule.\n",
            what_ifs.join(", ")
        );
    }
    let amd = non_intel_words(rows);
    if !amd.is_empty() {
        out += amd.trim_start();
        out += "\n";
    }
    if rows.iter().any(|r| r.system.cpus > 1) {
        out += "MP: one forker per CPU in one process; CPU 0's rounds are timed, and include its waits for the \
                scheduler lock and for shootdowns. The CPUs interleave as each MP row says (--turn): an MP figure \
                holds for that interleaving, not for parallel hardware.\n";
    }
    out
}

/// `--virt`'s values here: bare, or one of the two pagings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Paging {
    /// No hypervisor.
    Bare,
    /// Shadow page tables: CR3 writes, invlpg and IPI sends exit.
    Shadow,
    /// Extended page tables: IPI sends exit, TLB misses walk two dimensions
    /// (on k10, AMD's nested paging, by the same rule).
    Ept,
}

impl Paging {
    fn virt(self) -> Virt {
        match self {
            Paging::Bare => Virt::Off,
            Paging::Shadow => Virt::Shadow,
            Paging::Ept => Virt::Ept,
        }
    }
}

/// `cargo xtask forktest`.
#[derive(Args, Debug)]
pub struct ForktestArgs {
    /// Model profiles, one group of rows each (model/profiles.toml).
    /// Default: the mail's machines, nehalem (Core i7-920) and penryn
    /// (Core 2 Duo T8100).
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAMES",
        default_value = "nehalem,penryn"
    )]
    pub profiles: Vec<String>,
    /// CPUs of each row: 1 is SP, more is MP. Default: 1 and the part's
    /// cores (4 on nehalem, k10 and modern, 2 on the others).
    #[arg(long, value_delimiter = ',', value_name = "N,...", value_parser = clap::value_parser!(u32).range(1..=16))]
    pub smp: Vec<u32>,
    /// Pagings of each row. Default: bare and the part's own hypervisor
    /// paging (EPT on nehalem and modern, nested paging on k10, shadow on
    /// the parts without either). k10's rows boot QEMU's phenom model.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        value_name = "bare|shadow|ept,..."
    )]
    pub virt: Vec<Paging>,
    /// The interleaving grain of the MP rows, in instructions (the kernel's
    /// turn pacer; default 10000).
    #[arg(long, value_name = "INSTRUCTIONS")]
    pub turn: Option<u32>,
    /// Batches of 8 rounds each boot times (their median is the figure).
    #[arg(long, default_value_t = DEFAULT_BATCHES, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub batches: u32,
    /// Print the table as Markdown (the book's form).
    #[arg(long)]
    pub md: bool,
    /// Seconds before a hung boot is killed.
    #[arg(long, default_value_t = 300, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
}

/// The rows the flags ask for, profile by profile: SP before MP, bare
/// before virt.
pub fn systems(a: &ForktestArgs) -> Result<Vec<System>> {
    let known = model::known_profiles();
    let mut out = Vec::new();
    for p in &a.profiles {
        if !known.contains(p) {
            bail!(
                "--profiles {p}: no such model profile; known profiles: {} (from model/profiles.toml)",
                known.join(", ")
            );
        }
        let part = part(p);
        let cpus: Vec<u32> = if a.smp.is_empty() {
            vec![1, part.map_or(2, |x| x.cores)]
        } else {
            a.smp.clone()
        };
        let pagings: Vec<Virt> = if a.virt.is_empty() {
            vec![
                Virt::Off,
                if part.is_some_and(|x| x.ept) {
                    Virt::Ept
                } else {
                    Virt::Shadow
                },
            ]
        } else {
            a.virt.iter().map(|v| v.virt()).collect()
        };
        for &c in &cpus {
            for &v in &pagings {
                let s = System::new(p, v, c);
                if !out.contains(&s) {
                    out.push(s);
                }
            }
        }
    }
    if out.is_empty() {
        bail!("--profiles names no profile");
    }
    Ok(out)
}

pub fn forktest(a: ForktestArgs) -> Result<i32> {
    let systems = systems(&a)?;
    let set = Settings {
        turn: a.turn,
        batches: a.batches,
        timeout: Duration::from_secs(a.timeout),
    };
    // The grain is checked before anything boots.
    machine::Spec {
        cpus: 2,
        turn: set.turn,
        ..machine::Spec::new(
            machine::BackendSpec::Qemu(qemu::Spec::new(AccelChoice::Tcg)),
            set.timeout,
        )
    }
    .turn_word(Clock::Model)?;
    eprintln!(
        "forktest: {} system{}, 2 model boots each",
        systems.len(),
        if systems.len() == 1 { "" } else { "s" }
    );
    let t = Instant::now();
    let rows = measure(&systems, &set)?;
    if a.md {
        println!("{}", markdown(&rows, &set));
    } else {
        print!("{}", text(&rows, &set));
    }
    eprintln!("forktest: finished in {:.0} s", t.elapsed().as_secs_f64());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: ForktestArgs,
    }

    fn parse(args: &[&str]) -> Result<Vec<System>> {
        let cli = Cli::try_parse_from(std::iter::once("x").chain(args.iter().copied()))?;
        systems(&cli.a)
    }

    #[test]
    fn the_default_rows_are_the_mails_machines_sp_and_mp_bare_and_virt() {
        let s = parse(&[]).unwrap();
        let want = [
            System::new("nehalem", Virt::Off, 1),
            System::new("nehalem", Virt::Ept, 1),
            System::new("nehalem", Virt::Off, 4),
            System::new("nehalem", Virt::Ept, 4),
            System::new("penryn", Virt::Off, 1),
            System::new("penryn", Virt::Shadow, 1),
            System::new("penryn", Virt::Off, 2),
            System::new("penryn", Virt::Shadow, 2),
        ];
        assert_eq!(s, want);
        // Every row of the mail has its figure.
        let mails: Vec<f64> = s.iter().filter_map(mail).map(|m| m.0).collect();
        assert_eq!(mails, [1.03, 1.52, 3.26, 1.11]);
    }

    #[test]
    fn the_amd_part_gives_the_row_the_mail_asked_for() {
        let s = parse(&["--profiles", "k10"]).unwrap();
        let want = [
            System::new("k10", Virt::Off, 1),
            System::new("k10", Virt::Ept, 1),
            System::new("k10", Virt::Off, 4),
            System::new("k10", Virt::Ept, 4),
        ];
        assert_eq!(s, want);
        // QEMU's Phenom boots them; the mail has no figure for any, not
        // even its 4-vCPU KVM guest's: it asked others for this row.
        assert!(s.iter().all(|x| x.cpu() == Some("phenom") && asked(x)));
        assert!(s.iter().all(|x| mail(x).is_none()));
        assert_eq!(
            s.iter().map(System::npt).collect::<Vec<_>>(),
            [false, true, false, true]
        );
        // The Intel rows keep QEMU's default model and the mail's figures.
        let intel = parse(&[]).unwrap();
        assert!(intel.iter().all(|x| x.cpu().is_none() && !asked(x)));
        let rows: Vec<Row> = s
            .iter()
            .map(|x| Row {
                system: x.clone(),
                old: figures(3000.0, (x.cpus > 1).then(|| vec![32, 30, 31, 29])),
                new: figures(2000.0, (x.cpus > 1).then(|| vec![32, 31, 30, 30])),
            })
            .collect();
        let set = Settings::default();
        let md = markdown(&rows, &set);
        assert!(
            md.contains(
                "| k10, virt (NPT, nested paging), SP | 3000 | 2000 | 1.50 | 1000, 1000 | asked |"
            ),
            "{md}"
        );
        assert!(
            md.contains("the row the mail asked others for") && md.contains("k10 (`--cpu phenom`)"),
            "{md}"
        );
        assert!(md.contains("NPT: AMD's nested paging"), "{md}");
        assert!(!md.contains("The mail's column"), "{md}");
        let t = text(&rows, &set);
        assert!(t.contains("k10      NPT     MP 4"), "{t}");
        assert!(
            t.contains("asked: the row the mail asked others for"),
            "{t}"
        );
        assert!(!t.contains("3.26"), "{t}");
        // Without an AMD row, none of it is said.
        let intel_rows = [Row {
            system: System::new("nehalem", Virt::Ept, 4),
            old: figures(3000.0, Some(vec![32, 30, 31, 29])),
            new: figures(2000.0, Some(vec![32, 31, 30, 30])),
        }];
        let t = text(&intel_rows, &set);
        assert!(
            !t.contains("asked") && !t.contains("NPT") && t.contains("3.26"),
            "{t}"
        );
    }

    #[test]
    fn flags_pick_fewer_rows() {
        let s = parse(&[
            "--profiles",
            "modern",
            "--smp",
            "1",
            "--virt",
            "bare,shadow",
        ])
        .unwrap();
        assert_eq!(
            s,
            [
                System::new("modern", Virt::Off, 1),
                System::new("modern", Virt::Shadow, 1)
            ]
        );
    }

    #[test]
    fn bad_flags_are_refused_with_the_known_values() {
        let e = parse(&["--profiles", "nehalem,k7"])
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("--profiles k7: no such model profile") && e.contains("penryn, nehalem"),
            "{e}"
        );
        let e = parse(&["--virt", "npt"]).unwrap_err().to_string();
        assert!(e.contains("npt") && e.contains("ept"), "{e}");
        let e = parse(&["--smp", "0"]).unwrap_err().to_string();
        assert!(e.contains("0"), "{e}");
    }

    fn figures(cycles: f64, per_cpu: Option<Vec<u64>>) -> Figures {
        Figures {
            insns: 1000.0,
            cycles,
            share: per_cpu.map(|p| Share::new("rounds", p)),
        }
    }

    #[test]
    fn rows_print_the_speedup_the_share_and_the_mails_figure() {
        let set = Settings::default();
        let rows = [
            Row {
                system: System::new("nehalem", Virt::Off, 1),
                old: figures(3000.0, None),
                new: figures(2000.0, None),
            },
            Row {
                system: System::new("penryn", Virt::Off, 2),
                old: figures(4000.0, Some(vec![32, 30])),
                new: figures(2000.0, Some(vec![32, 29])),
            },
            Row {
                system: System::new("penryn", Virt::Ept, 2),
                old: figures(4000.0, Some(vec![32, 1])),
                new: figures(2000.0, Some(vec![32, 0])),
            },
        ];
        let md = markdown(&rows, &set);
        for says in [
            "| nehalem, bare, SP | 3000 | 2000 | 1.50 | 1000, 1000 | 1.03 |",
            "penryn, bare, MP (2 CPUs); turns of 10000 instructions; rounds per CPU while CPU 0 was timed: old 32,30, new 32,29 |",
            "penryn, virt (EPT), MP (2 CPUs); CPU 0 did 90% or more of the rounds |",
            "penryn had no EPT: its EPT row is a what-if",
        ] {
            assert!(md.contains(says), "{says:?} in {md}");
        }
        let t = text(&rows, &set);
        for says in ["old 32,30 (52/48%)", "1.50", "turns of 10000 instructions"] {
            assert!(t.contains(says), "{says:?} in {t}");
        }
        let off = Settings {
            turn: Some(0),
            ..Settings::default()
        };
        assert!(text(&rows, &off).contains("QEMU's own turns (the pacer off: --turn 0)"));
    }

    #[test]
    fn without_a_mail_row_the_markdown_has_no_mail_column() {
        let rows = [Row {
            system: System::new("p4", Virt::Shadow, 1),
            old: figures(3000.0, None),
            new: figures(2000.0, None),
        }];
        let md = markdown(&rows, &Settings::default());
        assert!(md.starts_with("| system | old: pmap=apte (modelled cycles) | new: pmap=direct (modelled cycles) | speed up (old/new) | instructions (old, new) |\n| --- | ---: | ---: | ---: | ---: |\n| p4, virt (shadow paging), SP |"), "{md}");
    }
}
