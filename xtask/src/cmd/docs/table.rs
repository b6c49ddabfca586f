//! Tables the book shows that no single command prints: each is made from
//! the results of real boots (what `cargo xtask run ARGS` boots, booted
//! here in process and read as [`Results`]), printed as Markdown, and kept
//! current by `cargo xtask docs` like any output block.

use anyhow::{bail, Context, Result};
use clap::ValueEnum;

use crate::kbuild;
use crate::model::{ModelFigures, Virt};
use crate::results::Results;

/// The tables `cargo xtask docs --table` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Table {
    /// Each entry mechanism's round trips: icount's instructions beside the
    /// modelled cycles of every model profile.
    Mechanisms,
    /// The fork experiment in the mail's form: forktest under `pmap=apte`
    /// (old) and `pmap=direct` (new), one row per system.
    Forktest,
    /// Where the modelled cycles of int 0x80's `null` round trip go, by profile.
    CostInt80,
    /// The same for sysenter.
    CostSysenter,
    /// int 0x80's `null` round trip counted instruction by instruction:
    /// one loop round stepped under gdb, by where each instruction runs,
    /// its total checked against icount's measured path.
    PathInt80,
    /// The same for sysenter.
    PathSysenter,
    /// The same for the call gate.
    PathCallgate,
    /// The same for the call gate.
    CostCallgate,
    /// The same for AMD syscall (on an AMD model, under the profiles that
    /// give SYSCALL a cost).
    CostSyscall,
    /// The kernel-side SMP benchmarks (`--mode smp`, 2 CPUs) under every
    /// model profile, with and without `--virt`: modelled cycles and
    /// coherence misses per operation.
    Smp,
    /// The `locks` program's cross-CPU figures (2 CPUs, 128-byte pools)
    /// under every model profile: coherence misses per operation, and
    /// ebizzy's division of its records between the CPUs.
    Locks,
    /// The path-length targets `cargo xtask test` asserts, each beside its
    /// figure from an icount boot.
    Targets,
    /// Every lmbench row under every model profile, bare and under `--virt`
    /// (shadow paging), beside its instructions (icount).
    Lmbench,
    /// forktest's TLB flushes per round under each `pmap=` strategy, beside
    /// the count `cargo xtask test` asserts.
    ForkFlushes,
    /// The agreement check's figures: each Bochs model's ticks beside the
    /// instructions QEMU's icount counts on its partner, per round trip.
    Agreement,
    /// `cargo xtask test`'s tests, section by section, from the test list
    /// itself, each with the wall time its last recorded run measured
    /// (docs/data/test-times.json).
    Tests,
    /// The same record, each Bochs boot beside the QEMU boot of the same
    /// work.
    WallTimes,
    /// Every CPU model of the matrix booted twice, `mode=test` and
    /// `mode=run`: what CPUID says, the mechanisms the kernel used, the
    /// tests and the hostile suite, and the benchmark.
    CpuMatrix,
    /// booting.md's GDT: each entry's index and selector, from the
    /// selectors `abi` names (the ones boot asserts each descriptor lands on).
    Gdt,
    /// docs/experiment-sysenter.md's ladder: each operation's modelled
    /// cycles under `p4` through int 0x80 and through sysenter (one boot
    /// each), the cycles saved and the share of the old time left.
    SysenterLadder,
    /// docs/experiment-turnstiles.md's layouts across CPUs: the `locks`
    /// program's ebizzy under `p4` on 2 and 4 CPUs and `p3` on 4, one boot
    /// per pool layout.
    TurnstileLayouts,
}

/// One kind of instruction on a round trip that a profile charges more than
/// `base`: what the row says, the profile key of its extra cycles, how many
/// the `null` path executes and how many the floor does.
struct Charge {
    what: &'static str,
    key: &'static str,
    null: u32,
    floor: u32,
}

/// A mechanism's cost table: its key, the CPU to boot, and the instructions
/// of its paths (docs/int80.md etc. walk them) that cost more than `base`.
/// The table is refused when these do not add up to the plugin's figure.
struct CostPath {
    mech: &'static str,
    cpu: Option<&'static str>,
    charges: &'static [Charge],
}

const fn charge(what: &'static str, key: &'static str, null: u32, floor: u32) -> Charge {
    Charge {
        what,
        key,
        null,
        floor,
    }
}

/// The segment-register loads of every full path: `movl %ecx, %ds`,
/// `movl %ecx, %es` on the way in, `popl %es`, `popl %ds` on the way out.
const SREG: Charge = charge(
    "segment-register loads: `movl` to DS and ES, `popl %es`, `popl %ds` (a GDT descriptor each)",
    "sreg_load",
    4,
    0,
);

const COST_PATHS: &[CostPath] = &[
    CostPath {
        mech: "int80",
        cpu: None,
        charges: &[
            charge(
                "`int $0x80`: IDT gate, privilege checks, SS0:ESP0 from the TSS, five pushes",
                "int_n",
                1,
                1,
            ),
            charge(
                "`iret`: five pops, the checks of a return to ring 3",
                "iret",
                1,
                1,
            ),
            charge("`popfl` of the EFLAGS reset", "popf", 1, 0),
            SREG,
        ],
    },
    CostPath {
        mech: "sysenter",
        cpu: None,
        charges: &[
            charge(
                "`sysenter`: CS, SS, ESP, EIP from MSRs, no descriptor read, no push",
                "sysenter",
                1,
                1,
            ),
            charge(
                "`sysexit`: CS, SS from the MSR, EIP, ESP from EDX, ECX",
                "sysexit",
                1,
                1,
            ),
            charge("`popfl` of the EFLAGS reset", "popf", 1, 0),
            SREG,
        ],
    },
    CostPath {
        mech: "callgate",
        cpu: None,
        charges: &[
            charge(
                "`lcall`: GDT call gate, privilege checks, SS0:ESP0 from the TSS, four pushes",
                "lcall_gate",
                1,
                1,
            ),
            charge(
                "`lret`: four pops, the checks of a return to ring 3",
                "lret_far",
                1,
                1,
            ),
            charge(
                "`popfl`: the EFLAGS reset, and the user's EFLAGS before `lret`",
                "popf",
                2,
                0,
            ),
            SREG,
        ],
    },
    CostPath {
        mech: "syscall",
        cpu: Some("phenom"),
        charges: &[
            charge(
                "`syscall`: CS, SS, EIP from STAR, no descriptor read, no stack switch",
                "syscall",
                1,
                1,
            ),
            charge("`sysret`: CS, SS from STAR, EIP from ECX", "sysret", 1, 1),
            charge(
                "`xchgl %esp, slot`: an exchange with memory, locked by the CPU",
                "locked",
                1,
                0,
            ),
            charge("`popfl` of the EFLAGS reset", "popf", 1, 0),
            SREG,
        ],
    },
];

/// A profile's number for `key`.
fn param(p: &model::profile::Profile, key: &str) -> Result<u32> {
    p.params()
        .into_iter()
        .find(|(k, _)| *k == key)
        .map(|(_, v)| v)
        .with_context(|| format!("model profile {} has no {key}", p.name))
}

/// One benchmark's model object, after checking its instruction count
/// against icount's; (instructions, the model object).
fn model_of<'a>(
    results: &'a Results,
    name: &str,
    profile: &str,
) -> Result<(f64, &'a ModelFigures)> {
    let (insns, _) = mechanism_figures(results, name, profile)?;
    Ok((insns, modelled(results, name, profile)?))
}

/// One benchmark's model figures.
fn modelled<'a>(results: &'a Results, name: &str, profile: &str) -> Result<&'a ModelFigures> {
    results
        .bench(name)
        .with_context(|| format!("profile {profile}: no benchmark {name} in the results"))?
        .model
        .as_ref()
        .with_context(|| format!("profile {profile}: {name} has no model figures"))
}

/// The rest of a modelled round trip once base and the charged instructions
/// are counted: memory stalls. Refused when the model saw no miss and
/// something is left over, or when the charges exceed the figure: then the
/// table's list of instructions is not the path's.
fn stalls(model: &ModelFigures, cycles: f64, explained: f64, what: &str) -> Result<f64> {
    let rest = cycles - explained;
    let misses: f64 = [model.l1_misses, model.l2_misses, model.tlb_misses]
        .iter()
        .sum();
    if rest < 0.0 || (misses == 0.0 && rest != 0.0) {
        bail!(
            "{what}: the listed instructions explain {explained} modelled cycles, the plugin measured {cycles} \
             ({misses} misses per call): the path changed; update COST_PATHS in xtask/src/cmd/docs/table.rs"
        );
    }
    Ok(rest)
}

/// Where a mechanism's modelled cycles go: one boot per profile that
/// charges its entry instruction.
fn cost(path: &CostPath) -> Result<String> {
    let entry_key = path.charges[0].key;
    let profiles: Vec<_> = model::profile::builtin()
        .into_iter()
        .filter(|p| param(p, entry_key).is_ok_and(|v| v > 0))
        .collect();
    if profiles.is_empty() {
        bail!("no model profile charges {entry_key}");
    }
    let entry = format!("{MECHANISM_BATCHING} entry={}", path.mech);
    let mut runs = Vec::new();
    for p in &profiles {
        let mut args = vec!["--clock", "model", "--profile", &p.name, "--append", &entry];
        if let Some(cpu) = path.cpu {
            args.extend(["--cpu", cpu]);
        }
        runs.push(results_of(&args)?);
    }
    let null = format!("{}.null", path.mech);
    let floor = format!("{}.floor", path.mech);
    let mut rows: Vec<(String, String, Vec<String>)> = Vec::new();
    let mut base_cells = Vec::new();
    let mut charge_cells: Vec<Vec<String>> = vec![Vec::new(); path.charges.len()];
    let mut stall_cells = Vec::new();
    let mut total_cells = Vec::new();
    let mut floor_cells = Vec::new();
    let mut insns_null = None;
    let mut insns_floor = None;
    for (p, r) in profiles.iter().zip(&runs) {
        let (n, m) = model_of(r, &null, &p.name)?;
        let cycles = m.cycles;
        let base = param(p, "base")? as f64;
        let mut explained = n * base;
        base_cells.push(cell(n * base));
        for (i, c) in path.charges.iter().enumerate() {
            let x = (c.null * param(p, c.key)?) as f64;
            explained += x;
            charge_cells[i].push(cell(x));
        }
        stall_cells.push(cell(stalls(
            m,
            cycles,
            explained,
            &format!("{null} under {}", p.name),
        )?));
        total_cells.push(format!("**{}**", cell(cycles)));
        let (fnum, fm) = model_of(r, &floor, &p.name)?;
        let fcycles = fm.cycles;
        let mut fexplained = fnum * base;
        for c in path.charges {
            fexplained += (c.floor * param(p, c.key)?) as f64;
        }
        stalls(
            fm,
            fcycles,
            fexplained,
            &format!("{floor} under {}", p.name),
        )?;
        floor_cells.push(cell(fcycles));
        for (seen, now) in [(&mut insns_null, n), (&mut insns_floor, fnum)] {
            match seen {
                Some(x) if *x != now => {
                    bail!("{}: instruction counts differ between profiles", path.mech)
                }
                _ => *seen = Some(now),
            }
        }
    }
    let n = insns_null.context("no profiles")?;
    rows.push((
        "every instruction: `base`, 1 cycle each".into(),
        cell(n),
        base_cells,
    ));
    for (c, cells) in path.charges.iter().zip(charge_cells) {
        rows.push((
            format!("{} (`{}`, beyond `base`)", c.what, c.key),
            c.null.to_string(),
            cells,
        ));
    }
    rows.push((
        "memory stalls: cache and TLB misses".into(),
        String::new(),
        stall_cells,
    ));
    rows.push((
        "**modelled cycles** (the plugin's figure)".into(),
        String::new(),
        total_cells,
    ));
    rows.push((
        format!(
            "the floor, for comparison ({} instructions)",
            cell(insns_floor.context("no profiles")?)
        ),
        String::new(),
        floor_cells,
    ));
    let mut out = table_head(
        &["`null` round trip, per call", "how many"],
        profiles.iter().map(|p| p.name.clone()),
    );
    for (what, count, cells) in rows {
        out.push_str(&format!("| {what} | {count} | {} |\n", cells.join(" | ")));
    }
    out.push_str(&format!(
        "\nModelled cycles per round trip, loop included; QEMU TCG, one boot per profile: \
         `cargo xtask run --clock model --profile P{} --append \"{entry}\"`; \
         the extras are the profile's numbers (model/profiles.toml), and the rows must add up to the plugin's figure.",
        path.cpu.map(|c| format!(" --cpu {c}")).unwrap_or_default(),
    ));
    Ok(out)
}

/// An instruction as a path table shows it: gdb's text with an address
/// operand (`0x101234 <sym+8>`) replaced by its symbol (`sym+8`), or dropped
/// where the symbol is a mangled Rust name (its hash differs from tree to
/// tree), and a memory operand's absolute address (≥ 64 KiB) as `ADDR`.
pub fn shown_instruction(text: &str) -> String {
    let mut out = Vec::new();
    let mut words = text.split(' ').peekable();
    while let Some(w) = words.next() {
        if w.starts_with("0x") && words.peek().is_some_and(|n| n.starts_with('<')) {
            let sym = words.next().unwrap_or_default();
            let name = sym.trim_start_matches('<').trim_end_matches('>');
            if !name.starts_with("_ZN") && !name.starts_with("_R") && !name.is_empty() {
                out.push(name.to_string());
            }
            continue;
        }
        out.push(hide_addresses(w));
    }
    out.join(" ")
}

/// `w` with each hexadecimal number of 5 digits or more that is not an
/// immediate (`$0x...`), a memory operand's address, as `ADDR`.
fn hide_addresses(w: &str) -> String {
    let mut out = String::new();
    let mut rest = w;
    while let Some(i) = rest.find("0x") {
        out.push_str(&rest[..i]);
        let digits = rest[i + 2..]
            .chars()
            .take_while(char::is_ascii_hexdigit)
            .count();
        if digits >= 5 && !out.ends_with('$') {
            out.push_str("ADDR");
        } else {
            out.push_str(&rest[i..i + 2 + digits]);
        }
        rest = &rest[i + 2 + digits..];
    }
    out.push_str(rest);
    out
}

/// The rows of a path table from one stepped round that starts at an entry
/// stub: (where, the instructions, how many), in the loop's order from the
/// user's side. The entry stub is the ring-0 code up to its first `call`,
/// the dispatcher what runs until the matching `ret`, the exit stub the
/// ring-0 code after it; each row names the symbols its code lies in.
/// Refused unless the round is ring 0 from its first step and ring 3 at its
/// end, with one call out of the stub.
pub fn path_rows(steps: &[crate::cmd::gdb::Step]) -> Result<Vec<(String, Vec<String>)>> {
    // 0: entry stub, 1: the call, 2: exit stub, 3: ring 3.
    let mut parts: [Vec<&crate::cmd::gdb::Step>; 4] = Default::default();
    let mut part = 0;
    let mut depth = 0u32;
    for s in steps {
        let op = s.text.split(' ').next().unwrap_or_default();
        if s.user {
            part = 3;
        } else if part == 3 {
            bail!("ring 0 again after ring 3 at {}: {}", s.symbol, s.text);
        }
        parts[part].push(s);
        if part == 0 && op.starts_with("call") {
            part = 1;
            depth = 1;
        } else if part == 1 && op.starts_with("call") {
            depth += 1;
        } else if part == 1 && op.starts_with("ret") {
            depth -= 1;
            if depth == 0 {
                part = 2;
            }
        }
    }
    if parts.iter().any(Vec::is_empty) {
        let seen: Vec<String> = steps
            .iter()
            .map(|s| {
                format!(
                    "{} {}: {}",
                    if s.user { "ring 3" } else { "ring 0" },
                    s.symbol,
                    s.text
                )
            })
            .collect();
        bail!(
            "the stepped round is not an entry stub, a call, the stub's exit and ring 3:\n{}",
            seen.join("\n")
        );
    }
    let symbols = |p: &[&crate::cmd::gdb::Step]| {
        let mut names: Vec<String> = Vec::new();
        for s in p {
            let n = shown_symbol(&s.symbol);
            if !names.contains(&n) {
                names.push(n);
            }
        }
        names.join(", ")
    };
    let texts =
        |p: &[&crate::cmd::gdb::Step]| p.iter().map(|s| shown_instruction(&s.text)).collect();
    Ok(vec![
        (
            format!(
                "user loop, from the return to ring 3 ({})",
                symbols(&parts[3])
            ),
            texts(&parts[3]),
        ),
        (
            format!("entry stub ({})", symbols(&parts[0])),
            texts(&parts[0]),
        ),
        (
            format!("dispatcher and `null` ({})", symbols(&parts[1])),
            texts(&parts[1]),
        ),
        (
            format!("exit stub ({})", symbols(&parts[2])),
            texts(&parts[2]),
        ),
    ])
}

/// A symbol as a path table names it: in a code span, a mangled Rust name
/// by its last path segment (the mangling's hash differs from tree to tree).
fn shown_symbol(name: &str) -> String {
    if let Some(rest) = name.strip_prefix("_R") {
        // v0 mangling ends in <length><identifier>: the function's own name.
        let bytes = rest.as_bytes();
        for end in (0..rest.len()).rev() {
            if !bytes[end].is_ascii_digit() {
                continue;
            }
            let start = rest[..=end]
                .rfind(|c: char| !c.is_ascii_digit())
                .map_or(0, |i| i + 1);
            if rest[start..=end].parse::<usize>().ok() == Some(rest.len() - end - 1) {
                return format!("`{}`", &rest[end + 1..]);
            }
        }
    }
    if name.starts_with("_R") || name.starts_with("_ZN") || name.is_empty() {
        return "Rust code".to_string();
    }
    format!("`{name}`")
}

/// The path table of `mech`: one `null` round stepped under gdb, by where
/// its instructions run, refused unless its count is the one icount
/// measures for `null` (docs/int80.md and sysenter.md show it).
fn path(mech: crate::cmd::trace::MechArg) -> Result<String> {
    let key = mech.mechanism().key();
    let steps = crate::cmd::gdb::null_round(mech)?;
    let rows = path_rows(&steps)?;
    let entry = format!("batches=2 batch_size=64 entry={key}");
    let r = results_of(&["--clock", "icount", "--append", &entry])?;
    let null = format!("{key}.null");
    let measured = r
        .bench(&null)
        .map(|b| b.median)
        .with_context(|| format!("no {null} in the icount boot"))?;
    if steps.len() as f64 != measured {
        bail!(
            "{null}: gdb stepped {} instructions in one round, icount measured {measured}",
            steps.len()
        );
    }
    let mut out = String::from("| where | instructions | count |\n| --- | --- | --- |\n");
    for (what, insns) in &rows {
        let shown: Vec<String> = insns.iter().map(|i| format!("`{i}`")).collect();
        out.push_str(&format!(
            "| {what} | {} | {} |\n",
            shown.join(", "),
            insns.len()
        ));
    }
    out.push_str(&format!(
        "\nOne round of the `null` loop stepped under gdb (`stepi`, QEMU TCG), from the entry stub on a call with EAX = 0 \
         until the stub is entered again, in gdb's AT&T text (addresses as symbols or `ADDR`); \
         its {} instructions are the `{null}` figure of an icount boot (`cargo xtask run --clock icount --append \"{entry}\"`).",
        steps.len()
    ));
    Ok(out)
}

/// The systems of the forktest table: (profile, virtualisation, CPUs).
/// Under shadow paging the pmap's flushes each exit; under EPT none does,
/// and every TLB miss walks two dimensions instead.
const FORKTEST_SYSTEMS: &[(&str, Virt, u32)] = &[
    ("p4", Virt::Off, 1),
    ("p4", Virt::Shadow, 1),
    ("p4", Virt::Ept, 1),
    ("modern", Virt::Off, 1),
    ("modern", Virt::Shadow, 1),
    ("modern", Virt::Ept, 1),
    ("modern", Virt::Off, 2),
    ("modern", Virt::Shadow, 2),
    ("modern", Virt::Ept, 2),
    // The mail's KVM guest had 4 vCPUs.
    ("modern", Virt::Ept, 4),
];

/// `--virt`'s words for `v`, and the table's name for it.
fn virt_words(v: Virt) -> (&'static [&'static str], &'static str) {
    match v {
        Virt::Off => (&[], "bare"),
        Virt::Shadow => (&["--virt", "shadow"], "virt (shadow paging)"),
        Virt::Ept => (&["--virt", "ept"], "virt (EPT)"),
    }
}

/// The forktest table: two model boots per system, measured and printed
/// by `cargo xtask forktest`'s code.
fn forktest() -> Result<String> {
    use crate::cmd::forktest;
    let systems: Vec<forktest::System> = FORKTEST_SYSTEMS
        .iter()
        .map(|&(p, v, c)| forktest::System::new(p, v, c))
        .collect();
    let set = forktest::Settings::default();
    Ok(forktest::markdown(
        &forktest::measure(&systems, &set)?,
        &set,
    ))
}

/// The batching of the mechanisms table's boots: small, because the
/// modelled cycles per call of these warm loops do not depend on it (the
/// default 64 x 4096 gives the same figures, four times slower).
const MECHANISM_BATCHING: &str = "batches=8 batch_size=512";

/// The rows of the mechanisms table: (benchmark name, what the row says).
const MECHANISM_ROWS: &[(&str, &str)] = &[
    ("int80.floor", "int 0x80 floor"),
    ("int80.null", "int 0x80 null"),
    ("int80.geteuid", "int 0x80 geteuid"),
    ("sysenter.floor", "sysenter floor"),
    ("sysenter.null", "sysenter null"),
    ("sysenter.geteuid", "sysenter geteuid"),
    ("callgate.floor", "call gate floor"),
    ("callgate.null", "call gate null"),
    ("callgate.geteuid", "call gate geteuid"),
];

/// The results of `cargo xtask run <args>`, booted in this process.
fn results_of(args: &[&str]) -> Result<Results> {
    Ok(crate::cmd::run::ran(args)?.results)
}

/// One benchmark of a run's results: (instructions per call, modelled
/// cycles per call). The instructions are the guest's own count (its clock
/// is icount under the model) and must equal the model's.
fn mechanism_figures(results: &Results, name: &str, profile: &str) -> Result<(f64, f64)> {
    if results.unit != "instructions" {
        bail!(
            "profile {profile}: the guest's unit is {:?}, not instructions",
            results.unit
        );
    }
    let bench = results
        .bench(name)
        .with_context(|| format!("profile {profile}: no benchmark {name} in the results"))?;
    let insns = bench.median;
    let model = modelled(results, name, profile)?;
    if model.insns != insns {
        bail!(
            "profile {profile}: {name}: the model counted {} instructions per call, icount {insns}",
            model.insns
        );
    }
    if model.is_clamped("cycles") {
        bail!("profile {profile}: {name}: its modelled cycles were clamped at zero");
    }
    Ok((insns, model.cycles))
}

/// What a table shows for a clamped figure.
const CLAMPED: &str = "clamped";

/// A table's head and rule, each ending in a newline: the `left` columns, then
/// one column a `columns` item; the first column left-aligned, all others
/// right-aligned.
fn table_head(left: &[&str], columns: impl IntoIterator<Item = String>) -> String {
    let mut head = String::from("|");
    let mut rule = String::from("|");
    for (i, h) in left
        .iter()
        .map(|h| h.to_string())
        .chain(columns)
        .enumerate()
    {
        head.push_str(&format!(" {h} |"));
        rule.push_str(if i == 0 { " --- |" } else { " ---: |" });
    }
    format!("{head}\n{rule}\n")
}

/// A figure as the table shows it: whole numbers without decimals.
fn cell(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The mechanisms table: one model boot per profile.
fn mechanisms() -> Result<String> {
    let profiles = crate::model::known_profiles();
    let mut runs = Vec::new();
    for p in &profiles {
        runs.push(results_of(&[
            "--clock",
            "model",
            "--profile",
            p,
            "--append",
            MECHANISM_BATCHING,
        ])?);
    }
    let mut out = table_head(
        &["round trip", "instructions (icount)"],
        profiles.iter().map(|p| format!("{p} (modelled cycles)")),
    );
    for (name, label) in MECHANISM_ROWS {
        let mut insns = None;
        let mut cells = Vec::new();
        for (p, r) in profiles.iter().zip(&runs) {
            let (i, c) = mechanism_figures(r, name, p)?;
            match insns {
                None => insns = Some(i),
                Some(first) if first != i => {
                    bail!("{name}: {first} instructions under one profile, {i} under {p}")
                }
                Some(_) => {}
            }
            cells.push(cell(c));
        }
        let insns = insns.context("no model profiles")?;
        out.push_str(&format!(
            "| {label} | {} | {} |\n",
            cell(insns),
            cells.join(" | ")
        ));
    }
    out.push_str(&format!(
        "\nPer round trip, loop included; QEMU TCG, one boot per profile: \
         `cargo xtask run --clock model --profile P --append \"{MECHANISM_BATCHING}\"` \
         (medians of the batches; instructions from icount in the same boots, equal under every profile)."
    ));
    Ok(out)
}

/// The rows of the SMP table: (benchmark, what the row says, under
/// `--virt`, the coherence misses shown).
const SMP_ROWS: &[(&str, &str, bool, bool)] = &[
    (
        "smp.false_sharing.packed",
        "false sharing, pool packed",
        false,
        true,
    ),
    (
        "smp.false_sharing.64",
        "false sharing, pool 64",
        false,
        true,
    ),
    (
        "smp.false_sharing.128",
        "false sharing, pool 128",
        false,
        true,
    ),
    (
        "smp.lines.same",
        "words 4 bytes apart (one line)",
        false,
        true,
    ),
    ("smp.lines.adjacent", "words 64 bytes apart", false, true),
    ("smp.lines.page", "words 4096 bytes apart", false, true),
    ("smp.pingpong", "ping-pong round trip", false, true),
    ("smp.tlb.shootdown", "remote shootdown, acked", false, true),
    (
        "smp.tlb.shootdown",
        "remote shootdown, `--virt`",
        true,
        true,
    ),
    ("smp.tlb.invlpg", "invlpg + refill (local)", false, false),
    ("smp.tlb.invlpg", "invlpg + refill, `--virt`", true, false),
    ("smp.tlb.cr3", "CR3 reload + refill (local)", false, false),
    ("smp.tlb.cr3", "CR3 reload + refill, `--virt`", true, false),
];

/// CPUs of the SMP table's boots.
const SMP_CPUS: &str = "2";

/// One figure of the SMP table: (instructions per operation, modelled
/// cycles, coherence misses per operation); a figure clamped at zero is
/// `None`.
fn smp_figures(
    results: &Results,
    name: &str,
    profile: &str,
) -> Result<(f64, Option<f64>, Option<f64>)> {
    // The model's own count per operation: some of these figures are
    // throughputs under icount (operations per second), not instructions.
    let model = modelled(results, name, profile)?;
    let measured = |key: &str, x: f64| (!model.is_clamped(key)).then_some(x);
    Ok((
        model.insns,
        measured("cycles", model.cycles),
        measured("coherence_misses", model.coherence_misses),
    ))
}

/// CPU `cpu`'s overlap with CPU 0 in modelled time, in percent, of a
/// figure both work in (its share's `overlap`); `None` where it has none.
fn overlap_of(results: &Results, name: &str, cpu: u32) -> Option<f64> {
    let share = results.bench(name)?.share.as_ref()?;
    share
        .overlap
        .iter()
        .find(|o| o.cpu == cpu)
        .map(|o| o.percent)
}

/// CPU 1's overlap with CPU 0 in modelled time, in percent, of a figure
/// both CPUs work in (its `share.overlap`); `None` for CPU 0's alone.
fn smp_overlap(results: &Results, name: &str) -> Option<f64> {
    overlap_of(results, name, 1)
}

/// Coherence misses per operation as the table shows them: up to three
/// decimals, no trailing zeros (`2.004`, `1`, `0`).
fn misses_cell(x: f64) -> String {
    let s = format!("{x:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Modelled cycles as the table shows them: one decimal below 10,000,
/// whole above (the forktest rows).
fn cycles_cell(x: f64) -> String {
    if x >= 10_000.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// A figure that may have been clamped (`None`) as its cell.
fn or_clamped(x: Option<f64>, cell: fn(f64) -> String) -> String {
    x.map_or_else(|| CLAMPED.to_string(), cell)
}

/// The SMP table: two model boots (without and with `--virt`) per profile.
fn smp() -> Result<String> {
    let profiles = crate::model::known_profiles();
    let mut runs = Vec::new();
    for p in &profiles {
        let mut pair = Vec::new();
        for virt in [false, true] {
            let mut args = vec![
                "--smp",
                SMP_CPUS,
                "--mode",
                "smp",
                "--clock",
                "model",
                "--profile",
                p,
            ];
            if virt {
                args.push("--virt");
            }
            pair.push(results_of(&args)?);
        }
        runs.push(pair);
    }
    let mut out = table_head(&["figure", "instructions"], profiles.iter().cloned());
    for (name, label, virt, coherent) in SMP_ROWS {
        let mut insns = None;
        let mut cells = Vec::new();
        for (p, pair) in profiles.iter().zip(&runs) {
            let (i, c, m) = smp_figures(&pair[*virt as usize], name, p)?;
            insns.get_or_insert(i);
            let overlap = smp_overlap(&pair[*virt as usize], name)
                .map(|o| format!(" / {o:.0}%"))
                .unwrap_or_default();
            cells.push(if *coherent {
                format!(
                    "{} / {}{overlap}",
                    or_clamped(c, cycles_cell),
                    or_clamped(m, misses_cell)
                )
            } else {
                format!("{}{overlap}", or_clamped(c, cycles_cell))
            });
        }
        let insns = insns.context("no model profiles")?;
        out.push_str(&format!(
            "| {label} | {} | {} |\n",
            cell(insns),
            cells.join(" | ")
        ));
    }
    out.push_str(&format!(
        "\nModelled cycles per operation (the modelled time that passed on CPU 0, waiting for CPU 1 included), \
         after the slash the coherence misses per operation, both CPUs' together, and after the second, for the figures both CPUs work in, \
         CPU 1's overlap: the part of CPU 0's timed modelled time during which CPU 1 did its part of the same batch; instructions: CPU 0's per operation, \
         as the model counted them. QEMU TCG, {SMP_CPUS} CPUs, two boots per profile: \
         `cargo xtask run --smp {SMP_CPUS} --mode smp --clock model --profile P [--virt]`."
    ));
    Ok(out)
}

/// The rows of the locks table: (benchmark, what the row says, what one
/// operation is).
const LOCKS_ROWS: &[(&str, &str)] = &[
    (
        "locks.false_sharing_line.128",
        "counters 4 bytes apart (one line), per increment",
    ),
    (
        "locks.false_sharing_adjacent.128",
        "counters 64 bytes apart, per increment",
    ),
    (
        "locks.false_sharing_apart.128",
        "counters 128 bytes apart, per increment",
    ),
    (
        "locks.contended_smp.128",
        "lock hand-off across CPUs, per hand-off",
    ),
    (
        "locks.sleep_wakeup_smp.128",
        "sleep/wakeup across CPUs, per round trip",
    ),
];

/// The command line of the locks table's boots, after the profile.
const LOCKS_APPEND: &str = "pool_align=128";

/// ebizzy's share as a cell: `100/0` (percent per CPU), and the flag;
/// under the model CPU 1's overlap, and its flag.
fn share_cell(results: &Results, name: &str, profile: &str) -> Result<String> {
    let share = results
        .bench(name)
        .and_then(|b| b.share.as_ref())
        .with_context(|| format!("profile {profile}: {name} has no share"))?;
    let overlap = smp_overlap(results, name).map_or(String::new(), |o| {
        format!(
            ", overlap {o:.0}%{}",
            if share.apart.is_none() {
                ""
            } else {
                " (apart)"
            }
        )
    });
    Ok(format!(
        "{}%{}{overlap}",
        share.percents(),
        if share.one_cpu.is_none() {
            ""
        } else {
            " (one CPU)"
        }
    ))
}

/// The locks table: one model boot per profile.
fn locks() -> Result<String> {
    let profiles = crate::model::known_profiles();
    let mut runs = Vec::new();
    for p in &profiles {
        runs.push(results_of(&[
            "--prog",
            "locks",
            "--smp",
            "2",
            "--clock",
            "model",
            "--profile",
            p,
            "--append",
            LOCKS_APPEND,
        ])?);
    }
    let mut out = table_head(&["coherence misses"], profiles.iter().cloned());
    for (name, label) in LOCKS_ROWS {
        let mut cells = Vec::new();
        for (p, r) in profiles.iter().zip(&runs) {
            let (_, _, m) = smp_figures(r, name, p)?;
            let overlap = smp_overlap(r, name)
                .map(|o| format!(" / {o:.0}%"))
                .unwrap_or_default();
            cells.push(format!("{}{overlap}", or_clamped(m, misses_cell)));
        }
        out.push_str(&format!("| {label} | {} |\n", cells.join(" | ")));
    }
    let mut cells = Vec::new();
    for (p, r) in profiles.iter().zip(&runs) {
        cells.push(share_cell(r, "ebizzy.smp.128", p)?);
    }
    out.push_str(&format!(
        "| ebizzy: records each CPU found (CPU 0/CPU 1) | {} |\n",
        cells.join(" | ")
    ));
    out.push_str(&format!(
        "\nCoherence misses per operation, both CPUs' together (calibration subtracted; medians of the batches), \
         and after the slash (and for ebizzy) CPU 1's overlap: the part of CPU 0's timed modelled time during which CPU 1 did its part of the same batch; \
         QEMU TCG, 2 CPUs, one boot per profile: \
         `cargo xtask run --prog locks --smp 2 --clock model --profile P --append {LOCKS_APPEND}`."
    ));
    Ok(out)
}

/// The batching of the targets table's boot (path lengths under icount do
/// not depend on it), the one the path-length test boots.
const TARGETS_APPEND: &str = "batches=4 batch_size=256";

/// What each path-length target's row says.
fn target_label(name: &str) -> String {
    let mech = name.split('.').next().unwrap_or(name);
    let title = abi::Mechanism::from_key(mech).map_or(mech, |m| m.title());
    format!("full null round trip, {title}")
}

/// The targets table: one icount boot; each limit is the test's own.
fn targets() -> Result<String> {
    let r = results_of(&["--clock", "icount", "--append", TARGETS_APPEND])?;
    if r.unit != "instructions" {
        bail!("the targets' boot counted {:?}, not instructions", r.unit);
    }
    let mut out = String::from(
        "| target (asserted by `cargo xtask test`) | limit (icount instructions, loop included) | figure now |\n| --- | ---: | ---: |\n",
    );
    for (name, limit) in crate::cmd::test::PATH_LENGTH_LIMITS {
        let got = r
            .bench(name)
            .map(|b| b.median)
            .with_context(|| format!("no benchmark {name} in the results"))?;
        out.push_str(&format!(
            "| {} | ≤ {} | {} |\n",
            target_label(name),
            cell(*limit),
            cell(got)
        ));
    }
    out.push_str(&format!(
        "\nQEMU TCG, icount: `cargo xtask run --append \"{TARGETS_APPEND}\"` (medians; exact under icount, every batch the same)."
    ));
    Ok(out)
}

/// The fork-flush table: one model boot per `pmap=` strategy, with the
/// settings and the profile of the test that asserts the counts.
fn fork_flushes() -> Result<String> {
    use crate::cmd::test::{FORK_FLUSHES, FORK_FLUSH_PROFILE, FORK_FLUSH_WORDS};
    let name = abi::report::names::FORKTEST_FORK_EXIT;
    let mut out = String::from(
        "| `pmap=` | TLB flushes per round (asserted by `cargo xtask test`) | TLB flushes now | TLB misses | modelled cycles | instructions |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    for &(pmap, want) in FORK_FLUSHES {
        let words = format!("{FORK_FLUSH_WORDS} pmap={pmap}");
        let r = results_of(&[
            "--clock",
            "model",
            "--profile",
            FORK_FLUSH_PROFILE,
            "--append",
            &words,
        ])?;
        let m = modelled(&r, name, &format!("{FORK_FLUSH_PROFILE}, pmap={pmap}"))?;
        if !m.clamped.is_empty() {
            bail!(
                "pmap={pmap}: {name}: figures clamped at zero: {:?}",
                m.clamped
            );
        }
        let (flushes, misses, cycles, insns) = (m.tlb_flushes, m.tlb_misses, m.cycles, m.insns);
        out.push_str(&format!(
            "| `{pmap}` | {want} | {} | {} | {} | {} |\n",
            cell(flushes),
            cell(misses),
            cycles_cell(cycles),
            cell(insns)
        ));
    }
    out.push_str(&format!(
        "\nPer fork + exit + wait round (the parent's), medians of the batches; a flush is a CR3 write or an `invlpg`, as the model counts them. \
         QEMU TCG, 1 CPU, one boot per row: `cargo xtask run --clock model --profile {FORK_FLUSH_PROFILE} --append \"{FORK_FLUSH_WORDS} pmap=S\"`."
    ));
    Ok(out)
}

/// booting.md's GDT table, from `abi::layout::selector`: no boot (the
/// boot itself asserts that every descriptor lands on these selectors).
fn gdt() -> String {
    use abi::layout::{selector as sel, MAX_CPUS};
    let aps = MAX_CPUS as u16 - 1;
    let one = |s: u16, what: &str| (s, 1, what.to_string());
    let rows = [
        (0, 1, "null (the CPU never uses entry 0)".to_string()),
        one(sel::KERNEL_CODE, "kernel code, DPL 0"),
        one(sel::KERNEL_DATA, "kernel data, DPL 0"),
        one(
            sel::USER_CODE,
            &format!(
                "user code, DPL 3 (`{:#04x}` with RPL 3)",
                sel::USER_CODE & !3
            ),
        ),
        one(
            sel::USER_DATA,
            &format!(
                "user data, DPL 3 (`{:#04x}` with RPL 3)",
                sel::USER_DATA & !3
            ),
        ),
        one(sel::TSS, "the main TSS"),
        one(sel::DOUBLE_FAULT_TSS, "the double-fault TSS"),
        one(sel::CALL_GATE, "call gate to the full entry, DPL 3"),
        one(sel::CALL_GATE_FLOOR, "call gate to the floor entry, DPL 3"),
        one(sel::DEBUG_TSS, "the debug TSS"),
        (
            sel::AP_TSS_BASE,
            aps,
            "one TSS per application processor (started when there are several CPUs, above)".into(),
        ),
        (
            sel::PERCPU_BASE,
            MAX_CPUS as u16,
            "one per-CPU data segment per CPU, loaded into GS in ring 0".into(),
        ),
        (
            sel::AP_DF_TSS_BASE,
            aps,
            "one double-fault TSS per application processor".into(),
        ),
        (
            sel::AP_DB_TSS_BASE,
            aps,
            "one debug TSS per application processor".into(),
        ),
    ];
    let mut out = String::from("| index | selector | descriptor |\n| --- | --- | --- |\n");
    for (s, n, what) in rows {
        let (first, last) = (s >> 3, (s >> 3) + n - 1);
        if n == 1 {
            out.push_str(&format!("| {first} | `{s:#04x}` | {what} |\n"));
        } else {
            let end = s + 8 * (n - 1);
            out.push_str(&format!(
                "| {first}–{last} | `{s:#04x}`–`{end:#04x}` | {what} |\n"
            ));
        }
    }
    out.push_str(&format!(
        "\nFrom [abi/src/layout.rs](../abi/src/layout.rs) (`selector`), for {MAX_CPUS} CPUs at most (`abi::layout::MAX_CPUS`)."
    ));
    out
}

/// The command line of the sysenter ladder's boots, after the entry.
const LADDER_APPEND: &str = "batches=16 batch_size=256";

/// The ladder's rows: what the row says, and the benchmark (`M` stands for
/// the mechanism).
const LADDER_ROWS: &[(&str, &str)] = &[
    ("floor (enter, leave)", "M.floor"),
    ("`null`", "M.null"),
    ("`geteuid`", "M.geteuid"),
    ("`write1` (1 byte to the null device)", "M.write1"),
    (
        "macro mix (one operation: 64 bytes written to a kernel ring and read back, `getpid`, `yield`: 4 calls)",
        "macro.M",
    ),
];

/// System calls one operation of the macro mix makes (`macro_op` in
/// userland/src/bin/bench.rs: a write, a read, `getpid`, `yield`).
const MACRO_CALLS: f64 = 4.0;

/// experiment-sysenter.md's ladder: one `p4` model boot per mechanism, as
/// the chapter's bench makes them; per operation the instructions through
/// int 0x80 (the guest's count: icount), both mechanisms' modelled cycles,
/// the cycles saved, and sysenter's time as a share of int 0x80's.
fn sysenter_ladder() -> Result<String> {
    let boot = |mech: &str| {
        results_of(&[
            "--clock",
            "model",
            "--profile",
            "p4",
            "--append",
            &format!("entry={mech} {LADDER_APPEND}"),
        ])
    };
    let (old, new) = (boot("int80")?, boot("sysenter")?);
    // A call's figures are a benchmark's (its median: instructions); the
    // macro mix's are its `macros` entry's (ticks, which are instructions
    // under the model, per operation).
    let figures = |r: &Results, name: &str| -> Result<(f64, f64)> {
        let (insns, model) = match name.strip_prefix("macro.") {
            Some(mech) => r
                .macros
                .iter()
                .find(|x| x.mech == mech)
                .map(|x| (x.ticks_per_op, x.model.as_ref())),
            None => r.bench(name).map(|b| (b.median, b.model.as_ref())),
        }
        .with_context(|| format!("no {name} in the results"))?;
        let m = model.with_context(|| format!("{name} has no modelled cycles"))?;
        if m.is_clamped("cycles") {
            bail!("{name}: its modelled cycles were clamped at zero");
        }
        Ok((insns, m.cycles))
    };
    let mut out = String::from(
        "| operation | instructions, int 0x80 (icount) | int 0x80 | sysenter | saved | time through sysenter, of int 0x80's |\n| --- | ---: | ---: | ---: | ---: | ---: |\n",
    );
    let mut per_call = None;
    for &(label, name) in LADDER_ROWS {
        let (insns, a) = figures(&old, &name.replace('M', "int80"))?;
        let (_, b) = figures(&new, &name.replace('M', "sysenter"))?;
        let saved = a - b;
        if name == "M.null" {
            per_call = Some(saved);
        }
        let saved_cell = match per_call {
            Some(c) if name.starts_with("macro.") && saved == MACRO_CALLS * c => {
                format!("{} = {MACRO_CALLS} x {}", cell(saved), cell(c))
            }
            _ => cell(saved),
        };
        out.push_str(&format!(
            "| {label} | {} | {} | {} | {saved_cell} | {:.0}% |\n",
            cell(insns),
            cell(a),
            cell(b),
            100.0 * b / a
        ));
    }
    out.push_str(&format!(
        "\nModelled cycles per operation under `p4` (medians of the batches); QEMU TCG, one boot per mechanism: \
         `cargo xtask run --clock model --profile p4 --append \"entry=M {LADDER_APPEND}\"`."
    ));
    Ok(out)
}

/// The turnstile chapter's boots: (profile, CPUs), each in every layout.
const LAYOUT_MACHINES: &[(&str, u32)] = &[("p4", 2), ("p4", 4), ("p3", 4)];

/// experiment-turnstiles.md's Run 3: the `locks` program on several CPUs,
/// one model boot per pool layout; per boot ebizzy's modelled cycles and
/// coherence misses a record, the records each CPU found, and each other
/// CPU's overlap with CPU 0 in modelled time.
fn turnstile_layouts() -> Result<String> {
    let mut out = String::from(
        "| profile, CPUs | layout | ebizzy.smp, modelled cycles a record | coherence misses a record | records found by each CPU | overlap with CPU 0 |\n| --- | --- | ---: | ---: | --- | --- |\n",
    );
    for &(profile, cpus) in LAYOUT_MACHINES {
        for layout in ["packed", "64", "128"] {
            let r = results_of(&[
                "--prog",
                "locks",
                "--smp",
                &cpus.to_string(),
                "--clock",
                "model",
                "--profile",
                profile,
                "--append",
                &format!("pool_align={layout}"),
            ])?;
            let name = format!("ebizzy.smp.{layout}");
            let (_, cycles, misses) = smp_figures(&r, &name, profile)?;
            let share = r
                .bench(&name)
                .with_context(|| format!("{profile}: no {name}"))?
                .share
                .as_ref()
                .with_context(|| format!("{profile}, {cpus} CPUs: {name} has no share"))?;
            if share.per_cpu.len() != cpus as usize {
                bail!(
                    "{profile}, {cpus} CPUs: {name}'s share names {} CPUs",
                    share.per_cpu.len()
                );
            }
            let overlap: Vec<String> = (1..cpus)
                .map(|cpu| {
                    overlap_of(&r, &name, cpu).map_or("-".to_string(), |p| format!("{p:.0}"))
                })
                .collect();
            out.push_str(&format!(
                "| {profile}, {cpus} | {layout} | {} | {} | {}% | {}% |\n",
                or_clamped(cycles, |x| format!("{x:.1}")),
                or_clamped(misses, |x| format!("{x:.2}")),
                share.percents(),
                overlap.join("/")
            ));
        }
    }
    out.push_str(
        "\nebizzy's figures per record found, all CPUs' coherence misses together (medians of the batches); QEMU TCG, the turn pacer's default grain, one boot per row: \
         `cargo xtask run --clock model --profile P --prog locks --smp N --append pool_align=L`.",
    );
    Ok(out)
}

/// The agreement table: the boots of `cargo xtask test`'s agreement check
/// (its pairs, its command line), one per machine, read back as results.
fn agreement() -> Result<String> {
    use crate::cmd::test::agreement::{CALLS, CMDLINE, PAIRS};
    let mut columns = Vec::new();
    for p in PAIRS {
        for (emulator, cpu) in [("bochs", p.bochs), ("qemu", p.qemu)] {
            let r = results_of(&["--emulator", emulator, "--cpu", cpu, "--append", CMDLINE])?;
            let head = match emulator {
                "bochs" => format!("Bochs {cpu}"),
                _ => format!("QEMU {cpu}, {}", r.clock),
            };
            columns.push((head, r));
        }
    }
    let mut out = table_head(
        &["ticks per round trip, loop included"],
        columns.iter().map(|(head, _)| head.clone()),
    );
    let ok = |r: &Results, m: &str| r.mechanisms.iter().any(|x| x.name == m && x.status == "ok");
    for m in abi::Mechanism::ALL {
        out.push_str(&format!("| {} {} |", m.title(), CALLS.join(" / ")));
        for (head, r) in &columns {
            if !ok(r, m.key()) {
                out.push_str(" unavailable |");
                continue;
            }
            let mut cells = Vec::new();
            for call in CALLS {
                let name = format!("{}.{call}", m.key());
                let b = r
                    .bench(&name)
                    .with_context(|| format!("{head}: no {name}"))?;
                cells.push(cell(b.median));
            }
            out.push_str(&format!(" {} |", cells.join(" / ")));
        }
        out.push('\n');
    }
    let titles: Vec<&str> = abi::Mechanism::ALL.iter().map(|m| m.title()).collect();
    out.push_str(&format!("| macro mix per op: {} |", titles.join(" / ")));
    for (_, r) in &columns {
        let cells: Vec<String> = abi::Mechanism::ALL
            .iter()
            .map(|m| {
                r.macros
                    .iter()
                    .find(|x| x.mech == m.key())
                    .map_or("-".to_string(), |x| cell(x.ticks_per_op))
            })
            .collect();
        out.push_str(&format!(" {} |", cells.join(" / ")));
    }
    out.push_str(&format!(
        "\n\nOne boot per column: `cargo xtask run [--emulator bochs] --cpu MODEL --append \"{CMDLINE}\"`, \
         the agreement check's command line (medians; every batch the same count on both emulators)."
    ));
    Ok(out)
}

use crate::cmd::test::times::wall;

/// The tests table: the list `cargo xtask test` runs (nothing booted), and
/// the book's record of each test's last measured wall time.
fn tests() -> Result<String> {
    use crate::cmd::test::times::{self, Book};
    let list = crate::cmd::test::list(None)?;
    let book = Book::read(&kbuild::root().join(times::BOOK_FILE))?;
    render_tests(&list, &book)
}

/// [`tests`] from a list and a book.
fn render_tests(
    list: &[crate::cmd::test::times::Ran],
    book: &crate::cmd::test::times::Book,
) -> Result<String> {
    use crate::cmd::test::times::Outcome;
    use crate::results::utc_date as date;
    let mut sections: Vec<(&str, Vec<&str>)> = Vec::new();
    for t in list {
        match sections.last_mut() {
            Some((s, names)) if *s == t.section => names.push(&t.name),
            _ => sections.push((&t.section, vec![&t.name])),
        }
    }
    let mut out = String::from(
        "| section | tests | measured | their wall time |\n| --- | ---: | ---: | ---: |\n",
    );
    let (mut all, mut measured, mut secs) = (0, 0, 0.0_f64);
    for (section, names) in &sections {
        let m: Vec<f64> = names
            .iter()
            .filter_map(|n| book.tests.get(*n).map(|x| x.secs))
            .collect();
        out.push_str(&format!(
            "| {section} | {} | {} | {} |\n",
            names.len(),
            m.len(),
            if m.is_empty() {
                "-".to_string()
            } else {
                wall(m.iter().sum())
            }
        ));
        all += names.len();
        measured += m.len();
        secs += m.iter().sum::<f64>();
    }
    out.push_str(&format!(
        "| **all** | **{all}** | **{measured}** | **{}** |\n",
        wall(secs)
    ));
    let gone = book
        .tests
        .keys()
        .filter(|k| !list.iter().any(|t| &t.name == *k))
        .count();
    out.push_str(&format!(
        "\nTests: `cargo xtask test --list` (nothing booted). Wall times: the last run that ran each test with \
         `--record-times` ({}), the icount, model and Bochs boots two at a time, the others one at a time{}; {} of the {all} tests have none yet{}.",
        crate::cmd::test::times::BOOK_FILE,
        match &book.whole_run {
            Some(w) => format!(
                "; the last whole run: {} tests in {} on {}, revision {}",
                w.tests,
                wall(w.wall_secs),
                date(w.started),
                w.rev
            ),
            None => "; no whole run recorded yet".to_string(),
        },
        all - measured,
        if gone > 0 {
            format!(" ({gone} recorded tests are no longer in the list)")
        } else {
            String::new()
        }
    ));
    for (section, names) in &sections {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!(
            "\n**{section}**\n\n| test | last result | wall time | load (1 min) | measured |\n| --- | --- | ---: | ---: | --- |\n"
        ));
        for n in names {
            let cells = match book.tests.get(*n) {
                Some(m) => format!(
                    "{} | {} | {} | {}, {}",
                    match m.result {
                        Outcome::Pass => "pass",
                        Outcome::Fail => "fail",
                        Outcome::Skip => "skip",
                        Outcome::Listed => "not run",
                    },
                    wall(m.secs),
                    m.load.map_or("-".to_string(), |l| format!("{l:.1}")),
                    date(m.started),
                    m.rev
                ),
                None => "not measured | - | - | -".to_string(),
            };
            out.push_str(&format!("| {} | {cells} |\n", n.replace('|', "\\|")));
        }
    }
    Ok(out.trim_end().to_string())
}

/// The pairs of the wall-time table: what both boots do, the start of the
/// Bochs test's name, the start of the QEMU test's.
const WALL_PAIRS: &[(&str, &str, &str)] = &[
    (
        "the tests and the hostile suite, 2 CPUs (Pentium 4 / qemu32)",
        "bochs p4_prescott_celeron_336 (SEP) on 2 CPUs",
        "kernel and user tests on 2 CPUs (icount)",
    ),
    (
        "the tests and the hostile suite (K6-2 / phenom)",
        "bochs amd_k6_2_chomper",
        "kernel and user tests on phenom",
    ),
    (
        "the tests and the hostile suite (Core 2)",
        "bochs core2_penryn_t9600: tests",
        "cpu matrix: core2duo: tests",
    ),
    ("`mode=smp`, 2 CPUs", "bochs SMP: 2", "SMP: 2 CPUs"),
    (
        "`prog=locks`, 2 CPUs",
        "bochs locks on 2 CPUs",
        "locks on 2 CPUs (icount)",
    ),
    ("a kernel #PF", "bochs: kernel #PF", "kernel #PF"),
    ("a triple fault", "bochs: a triple fault", "a triple fault"),
];

/// The wall-time table: from the book's record, each Bochs boot of
/// [`WALL_PAIRS`] beside its QEMU boot; a pair's names must each start
/// exactly one test of the list.
fn wall_times() -> Result<String> {
    use crate::cmd::test::times::{self, Book};
    use crate::results::utc_date as date;
    let list = crate::cmd::test::list(None)?;
    let book = Book::read(&kbuild::root().join(times::BOOK_FILE))?;
    let find = |start: &str| -> Result<&str> {
        let mut hits = list.iter().filter(|t| t.name.starts_with(start));
        match (hits.next(), hits.next()) {
            (Some(t), None) => Ok(&t.name),
            (None, _) => bail!("no test starts with {start:?}"),
            (Some(_), Some(_)) => bail!("more than one test starts with {start:?}"),
        }
    };
    let mut out = String::from(
        "| boot | Bochs (GRUB) | QEMU (`-kernel`, icount) | Bochs / QEMU |\n| --- | ---: | ---: | ---: |\n",
    );
    let shown = |m: Option<&times::Measured>| {
        m.map_or("not measured".to_string(), |m| {
            format!(
                "{} (load {}, {})",
                wall(m.secs),
                m.load.map_or("-".to_string(), |l| format!("{l:.1}")),
                date(m.started)
            )
        })
    };
    for (what, bochs, qemu) in WALL_PAIRS {
        let (b, q) = (book.tests.get(find(bochs)?), book.tests.get(find(qemu)?));
        let ratio = match (b, q) {
            (Some(b), Some(q)) if q.secs > 0.0 => format!("{:.1}", b.secs / q.secs),
            _ => "-".to_string(),
        };
        out.push_str(&format!(
            "| {what} | {} | {} | {ratio} |\n",
            shown(b),
            shown(q)
        ));
    }
    out.push_str(&format!(
        "\nEach boot's wall time inside `cargo xtask test` as its last run with `--record-times` measured it ({}), \
         with the host's 1-minute load average as it ended: a figure of one machine under its load, not of the build.",
        times::BOOK_FILE
    ));
    Ok(out)
}

/// The CPU matrix's models: (emulator, model), by CPU generation.
const MATRIX_MODELS: &[(&str, &str)] = &[
    ("qemu", "486"),
    ("qemu", "pentium"),
    ("bochs", "pentium"),
    ("bochs", "pentium_mmx"),
    ("bochs", "amd_k6_2_chomper"),
    ("qemu", "pentium2"),
    ("bochs", "p2_klamath"),
    ("qemu", "pentium3"),
    ("bochs", "p3_katmai"),
    ("bochs", "p4_willamette"),
    ("bochs", "p4_prescott_celeron_336"),
    ("qemu", "qemu32"),
    ("qemu", "coreduo"),
    ("bochs", "core_duo_t2400_yonah"),
    ("qemu", "core2duo"),
    ("bochs", "core2_penryn_t9600"),
    ("qemu", "n270"),
    ("bochs", "atom_n270"),
    ("qemu", "athlon"),
    ("bochs", "athlon64_clawhammer"),
    ("qemu", "phenom"),
    ("bochs", "phenom_8650_toliman"),
    ("bochs", "corei7_sandy_bridge_2600k"),
];

/// Seconds before a matrix boot is called hung: the test boots run the
/// hostile suite, two at a time, on a host that may be shared.
const MATRIX_TIMEOUT: &str = "600";

/// The matrix's benchmark boot: one small batch is enough to see it run.
const MATRIX_RUN: &str = "batches=2 batch_size=16";

/// The records of the boot of `cargo xtask run <args>`, booted in this
/// process (what `--records` shows).
fn records_of(args: &[&str]) -> Result<Vec<crate::report::Record>> {
    Ok(crate::report::parse_log(
        &crate::cmd::run::ran(args)?.serial,
    )?)
}

/// The records of the matrix's test boot of `model` on `emulator`: the
/// test case's boot where one runs that model's tests
/// ([`crate::cmd::test::test_mode_boot`]; in a test run one boot serves
/// both), else `cargo xtask run --records --mode test`'s.
fn matrix_test_records(
    emulator: &str,
    model: &str,
    art: &crate::kbuild::Artifacts,
) -> Result<Option<Vec<crate::report::Record>>> {
    let e = <crate::cmd::Emulator as clap::ValueEnum>::from_str(emulator, false)
        .map_err(|e| anyhow::anyhow!("emulator {emulator:?}: {e}"))?;
    let scratch = crate::machine::Scratch::new("matrix")?;
    let Some(booted) = crate::cmd::test::test_mode_boot(e, model, art, scratch.path()) else {
        return Ok(None);
    };
    let (cmdline, log) = booted?;
    if !log.succeeded() {
        bail!("{emulator} {model}, {cmdline}: {}", log.explain(20));
    }
    Ok(Some(crate::report::parse_log(&log.serial)?))
}

/// One row of the CPU matrix: two boots of `model` on `emulator`.
fn matrix_row(emulator: &str, model: &str, art: &crate::kbuild::Artifacts) -> Result<String> {
    use crate::report::of_kind;
    use abi::report::kind;
    let boot = |mode: &str, append: &str| {
        let mut args = vec![
            "--records",
            "--emulator",
            emulator,
            "--cpu",
            model,
            "--mode",
            mode,
            "--timeout",
            MATRIX_TIMEOUT,
        ];
        if emulator == "qemu" {
            args.extend(["--clock", "icount"]);
        }
        if !append.is_empty() {
            args.extend(["--append", append]);
        }
        records_of(&args).with_context(|| format!("{emulator} {model}, mode={mode}"))
    };
    let test = match matrix_test_records(emulator, model, art)
        .with_context(|| format!("{emulator} {model}: the test case's boot"))?
    {
        Some(records) => records,
        None => boot("test", "")?,
    };
    let run = boot("run", MATRIX_RUN)?;
    let one = |r: &[crate::report::Record], k: &str| -> Result<crate::report::Record> {
        of_kind(r, k)
            .next()
            .cloned()
            .with_context(|| format!("{emulator} {model}: no {k} record"))
    };
    let cpu = one(&test, kind::CPU)?;
    let get = |k: &str| cpu.get(k).unwrap_or("?").to_string();
    let yes = |k: &str| {
        if cpu.get(k) == Some("true") {
            "yes"
        } else {
            "no"
        }
    };
    let brand = cpu.get("brand").unwrap_or("").trim_matches('\0').trim();
    let perf = match (cpu.get("perfmon"), cpu.get("counters")) {
        (Some(v), Some(n)) if v != "0" => format!("v{v}/{n}"),
        _ => "none".to_string(),
    };
    let used: Vec<&str> = abi::Mechanism::ALL
        .iter()
        .filter(|m| {
            of_kind(&test, kind::MECH)
                .any(|x| x.get("name") == Some(m.key()) && x.get("status") == Some("ok"))
        })
        .map(|m| m.title())
        .collect();
    let tests = one(&test, kind::TESTS)?;
    let skipped = of_kind(&test, kind::TEST)
        .filter(|t| t.get("result") == Some("skip"))
        .count();
    let hostile = one(&test, kind::HOSTILE)?;
    let settings = one(&test, kind::SETTINGS)?;
    let under = format!(
        "pmap={} fork={}",
        settings.get("pmap").unwrap_or("?"),
        settings.get("fork").unwrap_or("?")
    );
    let results = crate::results::Results::from_records(&run, "matrix", emulator)?;
    let bench = match results.bench("int80.null") {
        Some(b) => format!("ok, int 0x80 null = {}", cell(b.median)),
        None if cpu.get("tsc") == Some("false") => "no TSC: says it cannot time".to_string(),
        None => bail!("{emulator} {model}: the benchmark boot has no int80.null"),
    };
    let perf_note = match results.perf.first() {
        Some(p) if p.status == "n/a" && perf != "none" => {
            format!("; perf counters n/a ({})", p.reason)
        }
        _ => String::new(),
    };
    Ok(format!(
        "| {} | `{model}` | {} {} | {}/{}/{} | {} | {} | {} | {} | {} | {perf} | {} | {} passed, {} failed, {skipped} skipped ({under}); {} of {} as expected ({} skipped) | {bench}{perf_note} |",
        if emulator == "qemu" { "QEMU" } else { "Bochs" },
        get("vendor"),
        if brand.is_empty() { "(no brand string)" } else { brand },
        get("family"),
        get("model"),
        get("stepping"),
        yes("tsc"),
        yes("sep"),
        yes("syscall"),
        yes("pae"),
        yes("apic"),
        used.join(", "),
        tests.get("passed").unwrap_or("?"),
        tests.get("failed").unwrap_or("?"),
        hostile.get("expected").unwrap_or("?"),
        hostile.get("cases").unwrap_or("?"),
        hostile.get("skipped").unwrap_or("?"),
    ))
}

/// The CPU matrix: two boots per model, two models at a time.
fn cpu_matrix() -> Result<String> {
    let art = crate::kbuild::build(true)?;
    let rows = crate::parallel::map(MATRIX_MODELS, 2, |&(e, m)| matrix_row(e, m, &art));
    let mut out = String::from(
        "| emulator | model | vendor, brand | family/model/stepping | TSC | SEP | SYSCALL | PAE | APIC | perf (version/counters) | mechanisms the kernel used | kernel tests; hostile suite | benchmark (`mode=run`) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for row in rows {
        out.push_str(&row?);
        out.push('\n');
    }
    out.push_str(&format!(
        "\nTwo boots per model, one CPU: `cargo xtask run [--emulator bochs] --cpu MODEL --records --mode test` \
         and `--mode run --append \"{MATRIX_RUN}\"` (QEMU under icount), read off the records. \
         Where a test case of `cargo xtask test` runs a model's tests alone (docs/tests.md), the first boot is that case's, \
         under its `pmap=`/`fork=` pair: one boot serves both."
    ));
    Ok(out)
}

/// The lmbench table's boots: small batches (the rows' figures are per
/// operation; more batches narrow nothing under the model), fork=cow so
/// `lat_pagefault.cow` is a copy-on-write fault.
const LMBENCH_SETTINGS: &str = "batches=4 fork=cow";

/// The lmbench table's columns: (profile, virtualisation). The Pentium III
/// had no VT-x, so it has no `--virt` column; the Pentium 4 662/672, Core 2
/// and every recent CPU did.
const LMBENCH_SYSTEMS: &[(&str, Virt)] = &[
    ("p3", Virt::Off),
    ("p4", Virt::Off),
    ("p4", Virt::Shadow),
    ("core2", Virt::Off),
    ("core2", Virt::Shadow),
    ("modern", Virt::Off),
    ("modern", Virt::Shadow),
];

/// The lmbench rows of one boot's results, in lmbench's order: (name,
/// instructions per operation, modelled cycles per operation, `None` where
/// clamped at zero).
fn lmbench_rows(results: &Results, what: &str) -> Result<Vec<(String, f64, Option<f64>)>> {
    if results.unit != "instructions" {
        bail!(
            "{what}: the guest's unit is {:?}, not instructions",
            results.unit
        );
    }
    let mut rows = Vec::new();
    for b in &results.benches {
        let name = &b.name;
        let Some(rank) = abi::lmbench::rank(name) else {
            continue;
        };
        let Some(m) = &b.model else {
            bail!("{what}: {name} has no instructions or no modelled cycles");
        };
        let cycles = (!m.is_clamped("cycles")).then_some(m.cycles);
        rows.push((rank, name.to_string(), b.median, cycles));
    }
    // Stable: a family's rows (lat_ctx.*, smack.*) keep the guest's order.
    rows.sort_by_key(|r| r.0);
    if rows.is_empty() {
        bail!("{what}: no lmbench rows in the results");
    }
    Ok(rows.into_iter().map(|(_, n, i, c)| (n, i, c)).collect())
}

/// The lmbench table: one boot per column.
fn lmbench() -> Result<String> {
    let mut columns = Vec::new();
    for &(profile, virt) in LMBENCH_SYSTEMS {
        let mut args = vec![
            "--prog",
            abi::lmbench::PROG,
            "--clock",
            "model",
            "--profile",
            profile,
            "--append",
            LMBENCH_SETTINGS,
        ];
        args.extend(virt_words(virt).0);
        let what = format!("{profile}, {}", virt_words(virt).1);
        columns.push(lmbench_rows(&results_of(&args)?, &what)?);
    }
    let first = &columns[0];
    let mut out = table_head(
        &["row", "instructions (icount)"],
        LMBENCH_SYSTEMS.iter().map(|&(profile, virt)| {
            format!(
                "{profile}{}",
                if virt == Virt::Off { "" } else { ", --virt" }
            )
        }),
    );
    for (k, (name, insns, _)) in first.iter().enumerate() {
        let mut cells = Vec::new();
        for (col, &(profile, _)) in columns.iter().zip(LMBENCH_SYSTEMS) {
            match col.get(k) {
                Some((n, _, c)) if n == name => cells.push(or_clamped(*c, lmbench_cell)),
                _ => bail!("{profile}: the rows differ from the first boot's at {name}"),
            }
        }
        let unit = if abi::lmbench::per_byte(name) {
            " (per byte)"
        } else {
            ""
        };
        out.push_str(&format!(
            "| `{name}`{unit} | {} | {} |\n",
            lmbench_cell(*insns),
            cells.join(" | ")
        ));
    }
    out.push_str(&format!(
        "\nModelled cycles per operation (per byte for `bw_pipe`), medians of the batches; \
         `--virt` is shadow paging. QEMU TCG, one boot per column, 1 CPU: \
         `cargo xtask run --prog lmbench --clock model --profile P [--virt] --append \"{LMBENCH_SETTINGS}\"` \
         (instructions from icount in the first column's boot: the p3 boot)."
    ));
    Ok(out)
}

/// An lmbench figure: a whole number from 100 up, else two decimals (bw_pipe
/// and the cheap rows per byte).
fn lmbench_cell(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.2}")
    }
}

/// Prints `table` on stdout.
pub fn print(table: Table) -> Result<i32> {
    let text = match table {
        Table::Mechanisms => mechanisms()?,
        Table::Forktest => forktest()?,
        Table::CostInt80 => cost(&COST_PATHS[0])?,
        Table::CostSysenter => cost(&COST_PATHS[1])?,
        Table::CostCallgate => cost(&COST_PATHS[2])?,
        Table::CostSyscall => cost(&COST_PATHS[3])?,
        Table::PathInt80 => path(crate::cmd::trace::MechArg::Int80)?,
        Table::PathSysenter => path(crate::cmd::trace::MechArg::Sysenter)?,
        Table::PathCallgate => path(crate::cmd::trace::MechArg::Callgate)?,
        Table::Smp => smp()?,
        Table::Locks => locks()?,
        Table::Targets => targets()?,
        Table::Lmbench => lmbench()?,
        Table::ForkFlushes => fork_flushes()?,
        Table::Agreement => agreement()?,
        Table::Tests => tests()?,
        Table::WallTimes => wall_times()?,
        Table::CpuMatrix => cpu_matrix()?,
        Table::Gdt => gdt(),
        Table::SysenterLadder => sysenter_ladder()?,
        Table::TurnstileLayouts => turnstile_layouts()?,
    };
    println!("{text}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_rows_split_a_stepped_round_at_the_call_and_its_return() {
        let step = |user: bool, symbol: &str, text: &str| crate::cmd::gdb::Step {
            user,
            symbol: symbol.into(),
            text: text.into(),
        };
        let steps = [
            step(false, "int80_full", "push %ds"),
            step(false, "int80_full", "call 0x126a80 <syscall_dispatch>"),
            step(false, "syscall_dispatch", "jmp *0x143434(,%eax,4)"),
            step(
                false,
                "_RNvNtCsgv0SBBwJajx_6kernel7syscall8sys_null",
                "call 0x1 <f>",
            ),
            step(false, "f", "ret"),
            step(false, "_RNvNtCsgv0SBBwJajx_6kernel7syscall8sys_null", "ret"),
            step(false, "int80_full", "iret"),
            step(true, "tb_loop", "jne 0x4000224b <tb_loop+27>"),
            step(true, "tb_loop", "cmp $0x40000004,%ebp"),
        ];
        let rows = path_rows(&steps).unwrap();
        let counts: Vec<usize> = rows.iter().map(|(_, v)| v.len()).collect();
        assert_eq!(counts, [2, 2, 4, 1]);
        assert_eq!(rows[0].1, ["jne tb_loop+27", "cmp $0x40000004,%ebp"]);
        assert_eq!(rows[1].1[1], "call syscall_dispatch");
        assert_eq!(rows[2].1[0], "jmp *ADDR(,%eax,4)");
        assert_eq!(
            rows[2].0,
            "dispatcher and `null` (`syscall_dispatch`, `sys_null`, `f`)"
        );
        // Ring 0 after ring 3, or no call out of the stub: refused.
        assert!(path_rows(&steps[..2]).is_err());
        let mut back = steps.to_vec();
        back.push(step(false, "int80_full", "push %ds"));
        assert!(path_rows(&back).is_err());
    }

    #[test]
    fn a_stepped_round_is_read_from_gdb_text() {
        let out = "Breakpoint 1, 0x001011fe in int80_full ()\nSTEP cs=0x8 => 0x1011fe <int80_full>:\tpush   %ds\n0x001011ff in int80_full ()\nSTEP cs=0x1b => 0x40002250 <tb_loop_int80_null+32>:\tint    $0x80\nROUND closed\n";
        let s = crate::cmd::gdb::parse_round(out).unwrap();
        assert_eq!(s.len(), 2);
        assert!(!s[0].user && s[1].user);
        assert_eq!(
            (s[1].symbol.as_str(), s[1].text.as_str()),
            ("tb_loop_int80_null", "int $0x80")
        );
        assert!(crate::cmd::gdb::parse_round("STEP cs=0x8 => 0x1 <a>:\tnop\n").is_err());
    }

    use crate::results::{overlap::Overlap, Bench, Share};

    /// A run's results in `unit` holding `benches`.
    fn run(unit: &str, benches: Vec<Bench>) -> Results {
        Results {
            unit: unit.into(),
            benches,
            ..Results::default()
        }
    }

    /// A benchmark with a median and model figures.
    fn bench(name: &str, median: f64, model: Option<ModelFigures>) -> Bench {
        Bench {
            name: name.into(),
            median,
            model,
            ..Bench::default()
        }
    }

    fn figures(cycles: f64, insns: f64) -> ModelFigures {
        ModelFigures {
            cycles,
            insns,
            ..ModelFigures::default()
        }
    }

    fn results(insns: f64, model_insns: f64) -> Results {
        run(
            "instructions",
            vec![bench(
                "int80.null",
                insns,
                Some(figures(990.0, model_insns)),
            )],
        )
    }

    #[test]
    fn lmbench_rows_come_in_lmbench_order_with_their_cycles() {
        let b =
            |name: &str, cycles: Option<f64>| bench(name, 10.0, cycles.map(|c| figures(c, 10.0)));
        let r = run(
            "instructions",
            vec![
                b("lat_pipe", Some(3.0)),
                b("int80.null", Some(1.0)),
                b("lat_ctx.2p.0k", Some(4.0)),
                b("lat_ctx.2p.16k", Some(5.0)),
                b("lat_syscall.null", Some(2.0)),
            ],
        );
        let rows = lmbench_rows(&r, "p4").unwrap();
        let names: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(
            names,
            [
                "lat_syscall.null",
                "lat_ctx.2p.0k",
                "lat_ctx.2p.16k",
                "lat_pipe"
            ]
        );
        assert_eq!(rows[1].2, Some(4.0));
        // A row without modelled cycles is refused, never shown empty.
        let r = run("instructions", vec![b("lat_pipe", None)]);
        assert!(lmbench_rows(&r, "p4")
            .unwrap_err()
            .to_string()
            .contains("lat_pipe"));
        let r = run("ticks", vec![]);
        assert!(lmbench_rows(&r, "p4").is_err());
    }

    /// A cost table must add up: a remainder without misses, or charges
    /// beyond the plugin's figure, mean the listed path is not the real one.
    #[test]
    fn cost_rows_must_add_up() {
        let warm = ModelFigures::default();
        assert_eq!(stalls(&warm, 990.0, 990.0, "x").unwrap(), 0.0);
        assert!(stalls(&warm, 990.0, 921.0, "x").is_err());
        assert!(stalls(&warm, 990.0, 1000.0, "x").is_err());
        let cold = ModelFigures {
            l1_misses: 1.0,
            ..ModelFigures::default()
        };
        assert_eq!(stalls(&cold, 1007.0, 990.0, "x").unwrap(), 17.0);
        // Every mechanism's table starts with its entry instruction, the
        // charge that picks the profiles.
        let keys: Vec<&str> = COST_PATHS.iter().map(|p| p.charges[0].key).collect();
        assert_eq!(keys, ["int_n", "sysenter", "lcall_gate", "syscall"]);
    }

    /// The tests table counts the list, not the record: a test without a
    /// measurement says so, and a recorded test no longer listed is counted
    /// as gone.
    #[test]
    fn the_tests_table_counts_the_list_and_shows_what_was_measured() {
        use crate::cmd::test::times::{Book, Measured, Outcome, Ran};
        let ran = |section: &str, name: &str| Ran {
            section: section.into(),
            name: name.into(),
            result: Outcome::Listed,
            secs: None,
            load: None,
        };
        let list = [ran("a", "x"), ran("a", "y"), ran("b", "z")];
        let mut book = Book::default();
        for (name, secs) in [("x", 2.0), ("z", 70.0), ("old", 1.0)] {
            book.tests.insert(
                name.into(),
                Measured {
                    section: "a".into(),
                    result: Outcome::Pass,
                    secs,
                    load: Some(1.25),
                    rev: "abc".into(),
                    started: 0,
                },
            );
        }
        let t = render_tests(&list, &book).unwrap();
        for says in [
            "| a | 2 | 1 | 2.0 s |",
            "| b | 1 | 1 | 1 min 10 s |",
            "| **all** | **3** | **2** | **1 min 12 s** |",
            "1 of the 3 tests have none yet (1 recorded tests are no longer in the list)",
            "| y | not measured | - | - | - |",
            "| x | pass | 2.0 s | 1.2 | 1970-01-01, abc |",
        ] {
            assert!(t.contains(says), "{says:?} in {t}");
        }
    }

    #[test]
    fn ebizzy_share_cells_say_who_found_the_records() {
        let shared = |name: &str, per_cpu: Vec<u64>, overlap: Option<f64>| {
            let mut share = Share::new("records", per_cpu);
            if let Some(percent) = overlap {
                share.overlap = vec![Overlap { cpu: 1, percent }];
                share.apart = (percent < 10.0).then_some(1);
            }
            Bench {
                share: Some(share),
                ..bench(name, 0.0, None)
            }
        };
        let r = run(
            "",
            vec![
                shared("a", vec![8000, 0], None),
                shared("b", vec![3000, 5000], None),
                bench("c", 0.0, None),
            ],
        );
        assert_eq!(share_cell(&r, "a", "p4").unwrap(), "100/0% (one CPU)");
        assert_eq!(share_cell(&r, "b", "p4").unwrap(), "38/62%");
        assert!(share_cell(&r, "c", "p4").is_err());
        // Under the model, CPU 1's overlap, flagged where it barely was.
        let m = run(
            "",
            vec![
                shared("a", vec![8000, 0], Some(0.4)),
                shared("b", vec![3000, 5000], Some(97.0)),
            ],
        );
        assert_eq!(
            share_cell(&m, "a", "p4").unwrap(),
            "100/0% (one CPU), overlap 0% (apart)"
        );
        assert_eq!(share_cell(&m, "b", "p4").unwrap(), "38/62%, overlap 97%");
        assert_eq!(smp_overlap(&m, "b"), Some(97.0));
        assert_eq!(smp_overlap(&r, "b"), None);
    }

    #[test]
    fn figures_come_from_the_results_and_must_agree() {
        assert_eq!(
            mechanism_figures(&results(24.0, 24.0), "int80.null", "p4").unwrap(),
            (24.0, 990.0)
        );
        let e = mechanism_figures(&results(24.0, 25.0), "int80.null", "p4").unwrap_err();
        assert!(e.to_string().contains("the model counted"), "{e}");
        assert!(mechanism_figures(&results(24.0, 24.0), "sysenter.null", "p4").is_err());
        let tsc = run("cycles", vec![]);
        assert!(mechanism_figures(&tsc, "int80.null", "p4").is_err());
        assert_eq!(cell(24.0), "24");
        assert_eq!(
            (
                misses_cell(2.0041),
                misses_cell(1.0),
                misses_cell(0.0),
                misses_cell(0.0014)
            ),
            ("2.004".into(), "1".into(), "0".into(), "0.001".into())
        );
        assert_eq!(
            (cycles_cell(14.14), cycles_cell(93013.4)),
            ("14.1".into(), "93013".into())
        );
        assert_eq!(cell(14.14), "14.1");
        // A figure clamped at zero is shown as such, or refused.
        let clamped = |cycles: f64, key: &str| ModelFigures {
            clamped: vec![key.into()],
            ..figures(cycles, 4.0)
        };
        let r = run(
            "instructions",
            vec![bench("x", 4.0, Some(clamped(9.0, "coherence_misses")))],
        );
        let (_, c, m) = smp_figures(&r, "x", "p4").unwrap();
        assert_eq!(
            (or_clamped(c, cycles_cell), or_clamped(m, misses_cell)),
            ("9.0".into(), CLAMPED.into())
        );
        let r = run(
            "instructions",
            vec![bench("x", 4.0, Some(clamped(0.0, "cycles")))],
        );
        assert!(mechanism_figures(&r, "x", "p4").is_err());
    }
}
