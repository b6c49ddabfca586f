//! CPU profiles: the numbers that describe one CPU family to the model,
//! read from `profiles.toml` (embedded in the plugin, so it needs no path).
//!
//! The file is TOML, of which this reader takes the small part it uses: a
//! `[name]` table per profile, `key = integer` or `key = "text"` lines, and
//! `#` comments (where each number's source is written). Anything else is
//! an error, so the file cannot silently say something the model ignores.

use std::collections::BTreeSet;

use crate::cache::Geometry;
use crate::decode::Class;
use crate::tlb::TlbGeometry;

/// The profiles file, as built into the crate.
pub const PROFILES_TOML: &str = include_str!("../profiles.toml");

macro_rules! profile_fields {
    ($($(#[$doc:meta])* $field:ident,)*) => {
        /// One CPU family. All sizes in bytes, all costs in core cycles.
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Profile {
            pub name: String,
            pub description: String,
            $($(#[$doc])* pub $field: u32,)*
        }

        /// The numeric keys every profile must give, in file order.
        pub const KEYS: &[&str] = &[$(stringify!($field)),*];

        impl Profile {
            fn empty(name: &str) -> Profile {
                Profile { name: name.into(), description: String::new(), $($field: 0,)* }
            }

            fn set(&mut self, key: &str, v: u32) -> bool {
                match key {
                    $(stringify!($field) => self.$field = v,)*
                    _ => return false,
                }
                true
            }

            /// Every numeric parameter as (key, value), in [`KEYS`] order.
            pub fn params(&self) -> Vec<(&'static str, u32)> {
                vec![$((stringify!($field), self.$field)),*]
            }
        }
    };
}

profile_fields! {
    /// Line size of every cache level.
    line,
    l1d_size, l1d_ways,
    /// Load-to-use latency of an L1 hit (already inside an instruction's base cost).
    l1d_latency,
    l2_size, l2_ways, l2_latency,
    /// 1: one L2 shared by all CPUs; 0: one per CPU.
    l2_shared,
    /// 0 = no L3. The L3 is shared by all CPUs.
    l3_size, l3_ways, l3_latency,
    /// Load-to-use latency of an access that misses every cache level.
    mem_latency,
    /// 1: a miss in L2 also fills the other line(s) of its 128-byte pair.
    pair_prefetch,
    dtlb_entries, dtlb_ways, itlb_entries, itlb_ways,
    /// 0 = no second-level TLB; else shared by instructions and data.
    stlb_entries, stlb_ways, stlb_latency,
    /// Cost of a page walk after a miss in every TLB level.
    walk,
    /// Cost of every instruction; the fields below are extras on top of it.
    base,
    int_n, iret, sysenter, sysexit, syscall, sysret, lcall_gate, lret_far,
    mov_cr3, invlpg, wrmsr, rdmsr, cpuid, rdtsc, lfence, popf, sreg_load, locked,
    /// `virt=on`: a VM exit and re-entry, added to CR3 writes, invlpg and
    /// IPI sends (the ICR write; no posted interrupts); `virt=ept`: to IPI
    /// sends only.
    vmexit,
    /// `virt=ept`: a page walk after a miss in every TLB level, replacing
    /// `walk`: the guest's two-level walk with each of its references, and
    /// the final guest-physical address, translated through the EPT's.
    ept_walk,
    /// Load-to-use latency of a line another CPU's cache supplies (it held
    /// it E or M): replaces the latency of the level below.
    c2c_latency,
    /// Invalidating other CPUs' copies before a write (an upgrade from S,
    /// or a write miss to a line others share).
    upgrade_latency,
    /// An access to the local APIC's registers (uncacheable MMIO): the ICR
    /// write that sends an IPI, the EOI write that acknowledges one.
    apic_access,
    /// From an IPI's send (the ICR write) to its delivery at the target.
    ipi_latency,
    /// `virt` (either paging): what a vCPU halted in HLT waits beyond
    /// `ipi_latency` when an IPI comes for it. Its HLT exited, the host
    /// blocked the vCPU's thread, and without posted interrupts the
    /// sender's exit has the host wake that thread through its scheduler;
    /// the re-entry injects the interrupt.
    vcpu_wake,
}

/// How the guest's pages are virtualised (`--virt`), or not at all.
///
/// - `Shadow`: the hypervisor keeps shadow page tables, so every CR3 write
///   and `invlpg` exits to it (SDM Vol. 3C §25.1.3, "CR3-load exiting",
///   "INVLPG exiting"); a TLB miss walks the shadow tables as a bare
///   machine walks its own.
/// - `Ept`: extended page tables (SDM Vol. 3C §28.2): neither exits, but a
///   TLB miss walks two dimensions, [`Profile::ept_walk`].
///
/// Under both an IPI send exits: no posted interrupts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Virt {
    /// A bare machine.
    #[default]
    Off,
    /// Shadow paging (the default of `--virt`).
    Shadow,
    /// Extended page tables.
    Ept,
}

impl Virt {
    /// The plugin argument's value (`virt=...`): `on` is shadow paging.
    pub fn arg(self) -> &'static str {
        match self {
            Virt::Off => "off",
            Virt::Shadow => "on",
            Virt::Ept => "ept",
        }
    }

    /// Reads a plugin argument's value (`on`, `shadow`, `ept`, `off`).
    pub fn parse(v: &str) -> Option<Virt> {
        match v {
            "off" | "false" | "no" => Some(Virt::Off),
            "on" | "true" | "yes" | "shadow" => Some(Virt::Shadow),
            "ept" => Some(Virt::Ept),
            _ => None,
        }
    }

    /// The model file's `virt=` number: 0 bare, 1 shadow, 2 EPT.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The inverse of [`Virt::code`].
    pub fn from_code(c: u8) -> Option<Virt> {
        [Virt::Off, Virt::Shadow, Virt::Ept]
            .get(usize::from(c))
            .copied()
    }

    /// Under a hypervisor at all.
    pub fn on(self) -> bool {
        self != Virt::Off
    }

    /// Whether an instruction of `class` exits to the hypervisor: CR3
    /// writes and invlpg under shadow paging (the hypervisor keeps the
    /// shadow tables; EPT leaves both to the guest), and HLT under either
    /// (KVM sets HLT exiting: the host blocks the vCPU until an interrupt
    /// comes). The one rule both the cost and the count of exits follow.
    pub fn exits_on(self, class: Class) -> bool {
        match class {
            Class::MovCr3 | Class::Invlpg => self == Virt::Shadow,
            Class::Hlt => self.on(),
            _ => false,
        }
    }
}

/// Size in bytes of the pair the adjacent-line prefetch completes.
pub const PAIR_BYTES: u32 = 128;

impl Profile {
    pub fn l1d(&self) -> Geometry {
        Geometry {
            size: self.l1d_size,
            ways: self.l1d_ways,
            line: self.line,
        }
    }

    pub fn l2(&self) -> Geometry {
        Geometry {
            size: self.l2_size,
            ways: self.l2_ways,
            line: self.line,
        }
    }

    pub fn l3(&self) -> Option<Geometry> {
        (self.l3_size != 0).then_some(Geometry {
            size: self.l3_size,
            ways: self.l3_ways,
            line: self.line,
        })
    }

    pub fn dtlb(&self) -> TlbGeometry {
        TlbGeometry {
            entries: self.dtlb_entries,
            ways: self.dtlb_ways,
        }
    }

    pub fn itlb(&self) -> TlbGeometry {
        TlbGeometry {
            entries: self.itlb_entries,
            ways: self.itlb_ways,
        }
    }

    pub fn stlb(&self) -> Option<TlbGeometry> {
        (self.stlb_entries != 0).then_some(TlbGeometry {
            entries: self.stlb_entries,
            ways: self.stlb_ways,
        })
    }

    /// The extra cycles of an instruction class, on top of `base`.
    pub fn extra(&self, class: Class) -> u32 {
        match class {
            Class::Plain | Class::MovCrPaging | Class::Hlt | Class::Marker => 0,
            Class::IntN => self.int_n,
            Class::Iret => self.iret,
            Class::Sysenter => self.sysenter,
            Class::Sysexit => self.sysexit,
            Class::Syscall => self.syscall,
            Class::Sysret => self.sysret,
            Class::LcallGate => self.lcall_gate,
            Class::LretFar => self.lret_far,
            Class::MovCr3 => self.mov_cr3,
            Class::Invlpg => self.invlpg,
            Class::Wrmsr => self.wrmsr,
            Class::Rdmsr => self.rdmsr,
            Class::Cpuid => self.cpuid,
            Class::Rdtsc => self.rdtsc,
            Class::Lfence => self.lfence,
            Class::Popf => self.popf,
            Class::SregLoad => self.sreg_load,
            Class::Locked => self.locked,
        }
    }

    /// The profile key that prices `class` on top of `base` (`lfence`,
    /// `sreg_load`); `None` for the classes charged `base` alone.
    pub fn key_of(class: Class) -> Option<&'static str> {
        Some(match class {
            Class::Plain | Class::MovCrPaging | Class::Hlt | Class::Marker => return None,
            Class::IntN => "int_n",
            Class::Iret => "iret",
            Class::Sysenter => "sysenter",
            Class::Sysexit => "sysexit",
            Class::Syscall => "syscall",
            Class::Sysret => "sysret",
            Class::LcallGate => "lcall_gate",
            Class::LretFar => "lret_far",
            Class::MovCr3 => "mov_cr3",
            Class::Invlpg => "invlpg",
            Class::Wrmsr => "wrmsr",
            Class::Rdmsr => "rdmsr",
            Class::Cpuid => "cpuid",
            Class::Rdtsc => "rdtsc",
            Class::Lfence => "lfence",
            Class::Popf => "popf",
            Class::SregLoad => "sreg_load",
            Class::Locked => "locked",
        })
    }

    /// The whole cost of one instruction of `class` (markers cost nothing).
    /// Under shadow paging CR3 writes and invlpg also pay a VM exit; under
    /// EPT they do not; under either HLT does.
    pub fn insn_cost(&self, class: Class, virt: Virt) -> u32 {
        if class == Class::Marker {
            return 0;
        }
        let exit = if virt.exits_on(class) { self.vmexit } else { 0 };
        self.base + self.extra(class) + exit
    }

    /// The cost of a page walk after a miss in every TLB level.
    pub fn walk_cost(&self, virt: Virt) -> u32 {
        match virt {
            Virt::Ept => self.ept_walk,
            Virt::Off | Virt::Shadow => self.walk,
        }
    }

    /// The geometry is one the model can index, and the latencies grow
    /// level by level.
    pub fn check(&self) -> Result<(), String> {
        let n = &self.name;
        self.l1d().check(&format!("{n}: L1D"))?;
        self.l2().check(&format!("{n}: L2"))?;
        if let Some(l3) = self.l3() {
            l3.check(&format!("{n}: L3"))?;
        }
        self.dtlb().check(&format!("{n}: DTLB"))?;
        self.itlb().check(&format!("{n}: ITLB"))?;
        if let Some(s) = self.stlb() {
            s.check(&format!("{n}: STLB"))?;
        }
        let last = if self.l3_size != 0 {
            self.l3_latency
        } else {
            self.l2_latency
        };
        if !(self.l1d_latency <= self.l2_latency
            && self.l2_latency <= last
            && last <= self.mem_latency)
        {
            return Err(format!("{n}: latencies must grow from L1 to memory"));
        }
        if self.pair_prefetch > 1 || self.l2_shared > 1 {
            return Err(format!("{n}: pair_prefetch and l2_shared are 0 or 1"));
        }
        if self.pair_prefetch == 1 && self.line >= PAIR_BYTES {
            return Err(format!(
                "{n}: a pair prefetch needs lines under {PAIR_BYTES} bytes"
            ));
        }
        Ok(())
    }
}

/// Parses a profiles file: every profile, checked, in file order.
pub fn parse(text: &str) -> Result<Vec<Profile>, String> {
    let mut out: Vec<Profile> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for (n, raw) in text.lines().enumerate() {
        let at = || format!("profiles.toml line {}", n + 1);
        let line = strip_comment(raw).trim();
        if line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let name = name.trim();
            if name.is_empty() || !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
                return Err(format!("{}: bad profile name [{name}]", at()));
            }
            if out.iter().any(|p| p.name == name) {
                return Err(format!("{}: profile {name} given twice", at()));
            }
            if let Some(p) = out.last() {
                complete(p, &seen)?;
            }
            out.push(Profile::empty(name));
            seen.clear();
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            return Err(format!("{}: expected key = value", at()));
        };
        let (key, value) = (key.trim(), value.trim());
        let Some(p) = out.last_mut() else {
            return Err(format!("{}: {key} outside a [profile]", at()));
        };
        if !seen.insert(key.to_string()) {
            return Err(format!("{}: {key} given twice", at()));
        }
        if key == "description" {
            p.description = value
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .ok_or_else(|| format!("{}: description must be a quoted string", at()))?
                .to_string();
            continue;
        }
        let v: u32 = value
            .replace('_', "")
            .parse()
            .map_err(|_| format!("{}: {key} = {value} is not a whole number", at()))?;
        if !p.set(key, v) {
            return Err(format!("{}: unknown key {key}", at()));
        }
    }
    if let Some(p) = out.last() {
        complete(p, &seen)?;
    }
    for p in &out {
        p.check()?;
    }
    Ok(out)
}

/// Every key given: a profile never falls back on a default.
fn complete(p: &Profile, seen: &BTreeSet<String>) -> Result<(), String> {
    let missing: Vec<&str> = std::iter::once("description")
        .chain(KEYS.iter().copied())
        .filter(|k| !seen.contains(*k))
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "profile {}: missing {}",
            p.name,
            missing.join(", ")
        ))
    }
}

fn strip_comment(line: &str) -> &str {
    // Quoted strings in this file never hold '#'.
    line.split_once('#').map_or(line, |(a, _)| a)
}

/// Profile `name`'s sources in a profiles file: each key with the comment
/// written beside its number (`AGNER-T Skylake: LFENCE, reciprocal
/// throughput 4`). Empty when the file has no such profile.
pub fn sources(text: &str, name: &str) -> std::collections::BTreeMap<String, String> {
    let mut out = std::collections::BTreeMap::new();
    let mut inside = false;
    for raw in text.lines() {
        let line = strip_comment(raw).trim();
        if let Some(n) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            inside = n.trim() == name;
            continue;
        }
        if !inside {
            continue;
        }
        if let (Some((key, _)), Some((_, comment))) = (line.split_once('='), raw.split_once('#')) {
            out.insert(key.trim().to_string(), comment.trim().to_string());
        }
    }
    out
}

/// The profiles of the embedded file.
pub fn builtin() -> Vec<Profile> {
    parse(PROFILES_TOML).expect("the embedded profiles.toml is checked by the tests")
}

/// The embedded profile `name`, or an error naming the ones there are.
pub fn find(name: &str) -> Result<Profile, String> {
    let all = builtin();
    let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
    let list = names.join(", ");
    all.iter()
        .find(|p| p.name == name)
        .cloned()
        .ok_or_else(|| format!("unknown profile {name:?} (known: {list})"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_profiles_parse_and_check() {
        let all = builtin();
        let names: Vec<&str> = all.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(
            names,
            ["p3", "p4", "core2", "penryn", "nehalem", "k10", "modern"]
        );
        let p4 = find("p4").unwrap();
        assert_eq!((p4.line, p4.pair_prefetch), (64, 1));
        assert_eq!(find("p3").unwrap().line, 32);
        assert_eq!(find("core2").unwrap().l2_shared, 1);
        // The mail's machines: a Core 2 Duo T8100 and a Core i7-920.
        let penryn = find("penryn").unwrap();
        assert_eq!(
            (penryn.l2_size, penryn.l2_ways, penryn.l2_shared),
            (3 << 20, 12, 1)
        );
        let nehalem = find("nehalem").unwrap();
        assert_eq!((nehalem.l3_size, nehalem.stlb_entries), (8 << 20, 512));
        // The row the mail asked others for: a Phenom X4 9550 (family 10h),
        // QEMU's phenom model. Fully associative L1 TLBs are one set; the
        // L2 is per core, the L3 shared; SYSCALL runs in 32-bit mode.
        let k10 = find("k10").unwrap();
        assert_eq!(
            (k10.l1d_size, k10.l1d_ways, k10.l2_size, k10.l2_shared),
            (64 << 10, 2, 512 << 10, 0)
        );
        assert_eq!((k10.l3_size, k10.l3_ways), (2 << 20, 32));
        assert_eq!(k10.dtlb().entries, k10.dtlb().ways);
        assert_eq!(k10.itlb().entries, k10.itlb().ways);
        assert!(k10.syscall > 0 && k10.sysret > 0);
    }

    #[test]
    fn every_number_has_a_source() {
        for (n, line) in PROFILES_TOML.lines().enumerate() {
            let t = line.trim();
            if t.is_empty()
                || t.starts_with('#')
                || t.starts_with('[')
                || t.starts_with("description")
            {
                continue;
            }
            let comment = line.split_once('#').map(|(_, c)| c.trim()).unwrap_or("");
            assert!(
                !comment.is_empty(),
                "profiles.toml line {}: no source: {line}",
                n + 1
            );
        }
    }

    /// The key [`Profile::key_of`] names holds the extra [`Profile::extra`]
    /// charges, and its source is the comment beside it in the file.
    #[test]
    fn each_priced_class_names_its_key_and_source() {
        let p = find("modern").unwrap();
        let params: std::collections::BTreeMap<&str, u32> = p.params().into_iter().collect();
        let src = sources(PROFILES_TOML, "modern");
        for c in crate::decode::CLASSES {
            match Profile::key_of(c) {
                Some(k) => {
                    assert_eq!(params[k], p.extra(c), "{c:?}");
                    assert!(!src[k].is_empty(), "{k}");
                }
                None => assert_eq!(p.extra(c), 0, "{c:?}"),
            }
        }
        assert_eq!(
            src["lfence"],
            "AGNER-T Skylake: LFENCE, reciprocal throughput 4"
        );
        assert!(sources(PROFILES_TOML, "p5").is_empty());
    }

    /// The tags of the header's list of sources: `#  TAG   text`.
    fn source_tags() -> Vec<&'static str> {
        PROFILES_TOML
            .lines()
            .filter_map(|l| l.strip_prefix("#  "))
            .filter_map(|l| l.split_once("  ").map(|(tag, _)| tag))
            .filter(|tag| {
                tag.starts_with(|c: char| c.is_ascii_uppercase())
                    && tag.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            })
            .collect()
    }

    #[test]
    fn every_nonzero_number_is_sourced_estimated_or_a_rule() {
        let tags = source_tags();
        for t in ["SDM-2A", "AGNER-T", "SOG-10h", "SOG-K8", "AT09", "APM-2"] {
            assert!(tags.contains(&t), "{t} not in the header: {tags:?}");
        }
        for (n, line) in PROFILES_TOML.lines().enumerate() {
            let Some((kv, comment)) = line.split_once('#') else {
                continue;
            };
            let Some((_, value)) = kv.split_once('=') else {
                continue;
            };
            if kv.trim_start().starts_with("description") || value.trim() == "0" {
                // A zero says what the part lacks (no L3, no SYSCALL).
                continue;
            }
            let c = comment.trim();
            // "(no L3)": the placeholder of a level the part lacks.
            let ok = ["estimate:", "rule", "as ", "(no "]
                .iter()
                .any(|p| c.starts_with(p))
                || tags.iter().any(|t| c.contains(t));
            assert!(
                ok,
                "profiles.toml line {}: neither a source from the header, an estimate nor a rule: {line}",
                n + 1
            );
        }
    }

    #[test]
    fn unknown_profile_names_the_known_ones() {
        let e = find("p5").unwrap_err();
        assert!(
            e.contains("unknown profile \"p5\"")
                && e.contains("p3, p4, core2, penryn, nehalem, k10, modern"),
            "{e}"
        );
    }

    fn one_profile(extra: &str, drop: &str) -> String {
        let p3 = PROFILES_TOML
            .split("\n[")
            .find(|s| s.starts_with("p3]"))
            .unwrap();
        let body: String = p3
            .lines()
            .skip(1)
            .filter(|l| drop.is_empty() || !l.starts_with(drop))
            .map(|l| format!("{l}\n"))
            .collect();
        format!("[x]\n{body}{extra}")
    }

    #[test]
    fn bad_files_are_refused() {
        assert!(parse(&one_profile("", "")).is_ok());
        let e = parse(&one_profile("speed = 3\n", "")).unwrap_err();
        assert!(e.contains("unknown key speed"), "{e}");
        let e = parse(&one_profile("", "walk ")).unwrap_err();
        assert!(e.contains("missing walk"), "{e}");
        let e = parse(&one_profile("base = 2\n", "")).unwrap_err();
        assert!(e.contains("base given twice"), "{e}");
        let e = parse(
            &one_profile("", "l1d_ways")
                .replace("l1d_size = 16384", "l1d_ways = 3\nl1d_size = 16384"),
        )
        .unwrap_err();
        assert!(
            e.contains("not a power of two") || e.contains("multiple"),
            "{e}"
        );
        assert!(parse("key = 1\n")
            .unwrap_err()
            .contains("outside a [profile]"));
        assert!(parse("[a]\nline = x\n")
            .unwrap_err()
            .contains("not a whole number"));
    }

    #[test]
    fn costs_add_extras_and_the_vm_exit() {
        let p = find("p4").unwrap();
        assert_eq!(p.insn_cost(Class::Plain, Virt::Off), p.base);
        assert_eq!(p.insn_cost(Class::IntN, Virt::Off), p.base + p.int_n);
        assert_eq!(
            p.insn_cost(Class::MovCr3, Virt::Shadow),
            p.base + p.mov_cr3 + p.vmexit
        );
        assert_eq!(
            p.insn_cost(Class::Invlpg, Virt::Shadow),
            p.base + p.invlpg + p.vmexit
        );
        assert_eq!(
            p.insn_cost(Class::Sysenter, Virt::Shadow),
            p.base + p.sysenter
        );
        assert_eq!(p.insn_cost(Class::Marker, Virt::Shadow), 0);
        // EPT: CR3 writes and invlpg do not exit.
        assert_eq!(p.insn_cost(Class::MovCr3, Virt::Ept), p.base + p.mov_cr3);
        assert_eq!(p.insn_cost(Class::Invlpg, Virt::Ept), p.base + p.invlpg);
    }

    #[test]
    fn an_ept_walk_is_fourteen_l2_references_and_shadow_walks_as_bare() {
        for p in builtin() {
            assert_eq!(p.walk_cost(Virt::Off), p.walk, "{}", p.name);
            assert_eq!(p.walk_cost(Virt::Shadow), p.walk, "{}", p.name);
            // profiles.toml's rule: 2 x 4 + 2 + 4 references, each an L2 hit.
            assert_eq!(p.walk_cost(Virt::Ept), 14 * p.l2_latency, "{}", p.name);
            assert!(p.ept_walk > p.walk, "{}", p.name);
        }
    }

    #[test]
    fn virt_codes_and_arguments_round_trip() {
        for v in [Virt::Off, Virt::Shadow, Virt::Ept] {
            assert_eq!(Virt::from_code(v.code()), Some(v));
            assert_eq!(Virt::parse(v.arg()), Some(v));
        }
        assert_eq!(Virt::from_code(3), None);
        assert_eq!(Virt::parse("shadow"), Some(Virt::Shadow));
        assert_eq!(Virt::parse("npt"), None);
    }
}
