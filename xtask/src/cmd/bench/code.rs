//! What code differs between two builds, and which of its instructions the
//! model prices from a fixed table.
//!
//! How: `objdump -d` of both builds' kernel and user programs, cut into
//! functions at their symbols; a function whose instructions differ (once
//! addresses, which move when anything before them grows, are left out) is
//! in the changed code. Its instructions are classed by the model's own
//! decoder (`model::decode::classify`, the one the plugin charges with), so
//! an instruction listed as priced by `lfence` is one the model charges
//! `lfence` for. This finds what the change touched, not the whole path a
//! benchmark runs: an unchanged function the change now calls more often
//! is not listed.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use crate::kbuild::Artifacts;
use crate::results::bench::{ChangedFunction, CodeDiff, FixedCost, FixedInsn};

/// One instruction as the disassembler shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Insn {
    pub bytes: Vec<u8>,
    /// As printed, spaces collapsed (`mov %ebp,0x4(%esp)`).
    pub text: String,
    /// What two builds compare: `text` without what moves with the layout.
    pub key: String,
}

/// A binary's functions in address order: each symbol and its instructions.
pub type Functions = Vec<(String, Vec<Insn>)>;

/// The key of an instruction's text: branch and call targets lose their
/// address and offset (`jb 1016ec <sysenter_bad_stack>` and `jne 104501
/// <f+0x11>` read `jb <sysenter_bad_stack>`, `jne <f+off>`), and constants
/// of six hex digits or more (addresses at or above 1 MiB, where the
/// kernel and the programs are linked) read `0x...`.
pub fn key_of(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().collect();
    let mut out: Vec<String> = Vec::new();
    for (i, w) in words.iter().enumerate() {
        let next_is_symbol = words.get(i + 1).is_some_and(|n| n.starts_with('<'));
        if next_is_symbol && w.chars().all(|c| c.is_ascii_hexdigit()) {
            continue;
        }
        let w = match (w.starts_with('<'), w.rfind("+0x")) {
            (true, Some(p)) => format!("{}+off>", &w[..p]),
            _ => w.to_string(),
        };
        out.push(long_hex_hidden(&w));
    }
    out.join(" ")
}

/// An instruction's shape: its key with every number (`$0x34`, `0x8`,
/// `$2`) read as `#`. Two instructions of one shape differ in constants.
fn shape(key: &str) -> String {
    let mut out = String::new();
    let mut chars = key.chars().peekable();
    while let Some(c) = chars.next() {
        if c.is_ascii_digit() {
            while chars
                .peek()
                .is_some_and(|n| n.is_ascii_hexdigit() || *n == 'x' || *n == '.')
            {
                chars.next();
            }
            out.push('#');
        } else {
            out.push(c);
        }
    }
    out
}

/// `$0x40000004` → `$0x...`; shorter constants stay.
fn long_hex_hidden(w: &str) -> String {
    let mut out = String::new();
    let mut rest = w;
    while let Some(p) = rest.find("0x") {
        out += &rest[..p + 2];
        let tail = &rest[p + 2..];
        let n = tail.chars().take_while(char::is_ascii_hexdigit).count();
        if n >= 6 {
            out += "...";
        } else {
            out += &tail[..n];
        }
        rest = &tail[n..];
    }
    out + rest
}

/// Reads `objdump -d -w -C` output into functions.
pub fn parse_objdump(text: &str) -> Functions {
    let mut out: Functions = Vec::new();
    for line in text.lines() {
        // `00101684 <sysenter_full>:`
        if let Some(head) = line.strip_suffix(">:") {
            if let Some((addr, name)) = head.split_once(" <") {
                if !addr.is_empty() && addr.chars().all(|c| c.is_ascii_hexdigit()) {
                    out.push((name.to_string(), Vec::new()));
                    continue;
                }
            }
        }
        // `  101684:\t9c                   \tpushf`
        let mut cols = line.split('\t');
        let (Some(addr), Some(bytes), Some(text)) = (cols.next(), cols.next(), cols.next()) else {
            continue;
        };
        if !addr.trim_end().ends_with(':') {
            continue;
        }
        let Some(bytes) = bytes
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).ok())
            .collect::<Option<Vec<u8>>>()
        else {
            continue;
        };
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        if let (Some((_, insns)), false) = (out.last_mut(), bytes.is_empty()) {
            let key = key_of(&text);
            insns.push(Insn { bytes, text, key });
        }
    }
    // The linker fills the gap to the next function with `int3`: padding,
    // not code (its length changes whenever the function's does).
    for (_, insns) in &mut out {
        while insns.last().is_some_and(|i| i.bytes == [INT3]) {
            insns.pop();
        }
    }
    out
}

/// `int3`, the byte rust-lld pads code sections with.
const INT3: u8 = 0xcc;

/// The profile key the model prices `insn` with beyond `base`, if any.
pub fn priced_by(insn: &Insn) -> Option<&'static str> {
    let d = model::decode::classify(&insn.bytes);
    model::profile::Profile::key_of(d.class)
}

/// What is in `a` and not in `b`, counting repeats (a multiset difference),
/// in `a`'s order.
fn only_in<'x>(a: &'x [Insn], b: &[Insn]) -> Vec<&'x Insn> {
    let mut left: BTreeMap<&str, usize> = BTreeMap::new();
    for i in b {
        *left.entry(i.key.as_str()).or_default() += 1;
    }
    a.iter()
        .filter(|i| match left.get_mut(i.key.as_str()) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .collect()
}

/// The functions of `binary` whose instructions differ between `base` and
/// `later` (a function in one build only counts as wholly added or removed).
pub fn changed(binary: &str, base: &Functions, later: &Functions) -> Vec<ChangedFunction> {
    let find = |fs: &Functions, name: &str| -> Vec<Insn> {
        fs.iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.clone())
            .unwrap_or_default()
    };
    let mut names: Vec<&str> = later.iter().map(|(n, _)| n.as_str()).collect();
    for (n, _) in base {
        if !names.contains(&n.as_str()) {
            names.push(n);
        }
    }
    let mut out = Vec::new();
    for name in names {
        let (b, l) = (find(base, name), find(later, name));
        let keys = |v: &[Insn]| v.iter().map(|i| i.key.clone()).collect::<Vec<_>>();
        if keys(&b) == keys(&l) {
            continue;
        }
        let added = only_in(&l, &b);
        let removed = only_in(&b, &l);
        let shapes = |v: &[&Insn]| {
            let mut s: Vec<String> = v.iter().map(|i| shape(&i.key)).collect();
            s.sort();
            s
        };
        let constants_only = !added.is_empty() && shapes(&added) == shapes(&removed);
        let mut fixed = Vec::new();
        let mut new_ones = added.clone();
        for i in &l {
            let in_change = new_ones.iter().any(|a| std::ptr::eq(*a, i));
            if constants_only && !in_change {
                continue;
            }
            if let Some(key) = priced_by(i) {
                let pos = new_ones.iter().position(|a| std::ptr::eq(*a, i));
                let side = if let Some(p) = pos {
                    new_ones.remove(p);
                    "+"
                } else {
                    " "
                };
                fixed.push(FixedInsn {
                    side: side.into(),
                    text: i.text.clone(),
                    key: key.into(),
                });
            }
        }
        for i in &removed {
            if let Some(key) = priced_by(i) {
                fixed.push(FixedInsn {
                    side: "-".into(),
                    text: i.text.clone(),
                    key: key.into(),
                });
            }
        }
        out.push(ChangedFunction {
            binary: binary.into(),
            name: name.into(),
            added: added.iter().map(|i| i.text.clone()).collect(),
            removed: removed.iter().map(|i| i.text.clone()).collect(),
            fixed,
            constants_only,
        });
    }
    out
}

/// `objdump -d -w -C` of one binary, as functions.
fn disassemble(path: &Path) -> Result<Functions, String> {
    let o = Command::new("objdump")
        .args(["-d", "-w", "-C"])
        .arg(path)
        .output()
        .map_err(|e| {
            format!("cannot run objdump ({e}): install binutils to list the changed code")
        })?;
    if !o.status.success() {
        return Err(format!(
            "objdump -d {} failed: {}",
            path.display(),
            String::from_utf8_lossy(&o.stderr).trim()
        ));
    }
    Ok(parse_objdump(&String::from_utf8_lossy(&o.stdout)))
}

/// Every binary of a build: `kernel` and each program by name.
fn binaries(a: &Artifacts) -> Vec<(String, &Path)> {
    std::iter::once(("kernel".to_string(), a.kernel.as_path()))
        .chain(a.programs.iter().map(|(p, n)| (n.clone(), p.as_path())))
        .collect()
}

/// The code that differs between build `later` (set `set`) and build
/// `base` (set `base_name`): every binary's changed functions.
pub fn diff(base_name: &str, base: &Artifacts, set: &str, later: &Artifacts) -> CodeDiff {
    let mut d = CodeDiff {
        set: set.into(),
        base: base_name.into(),
        ..CodeDiff::default()
    };
    let read = |p: &Path| std::fs::read(p).unwrap_or_default();
    let (bb, lb) = (binaries(base), binaries(later));
    let mut same = true;
    for (name, lp) in &lb {
        let Some((_, bp)) = bb.iter().find(|(n, _)| n == name) else {
            continue;
        };
        if read(bp) == read(lp) {
            continue;
        }
        same = false;
        match (disassemble(bp), disassemble(lp)) {
            (Ok(b), Ok(l)) => d.functions.extend(changed(name, &b, &l)),
            (Err(e), _) | (_, Err(e)) => {
                d.note = e;
                d.functions.clear();
                return d;
            }
        }
    }
    if same {
        d.note = format!(
            "{set} and {base_name} run the same build: no code differs (what differs is the command line, which picks the path)"
        );
    } else if d.functions.is_empty() {
        d.note =
            "the binaries differ, but no function's instructions do (data or layout only)".into();
    }
    d
}

/// Under the model: the profile entries that price the instructions the
/// diffs list (in profile order), each with its value in `profile` and
/// the source `model/profiles.toml` gives beside it.
pub fn fixed_costs(profile: &str, diffs: &[CodeDiff]) -> Vec<FixedCost> {
    let Ok(p) = model::profile::find(profile) else {
        return Vec::new();
    };
    let sources = model::profile::sources(model::profile::PROFILES_TOML, profile);
    let used: std::collections::BTreeSet<&str> = diffs
        .iter()
        .flat_map(|d| &d.functions)
        .flat_map(|f| &f.fixed)
        .map(|i| i.key.as_str())
        .collect();
    p.params()
        .into_iter()
        .filter(|(k, _)| used.contains(k))
        .map(|(k, v)| FixedCost {
            profile: profile.into(),
            key: k.into(),
            cycles: v.into(),
            source: sources.get(k).cloned().unwrap_or_default(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const BEFORE: &str = "\
00101684 <sysenter_full>:
  101684:\t9c                   \tpushf

00101685 <sysenter_common>:
  101685:\t6a 02                \tpush   $0x2
  101687:\t9d                   \tpopf
  101688:\t89 6c 24 04          \tmov    %ebp,0x4(%esp)
  10168c:\t81 fd 04 00 00 40    \tcmp    $0x40000004,%ebp
  101692:\t72 58                \tjb     1016ec <sysenter_bad_stack>
  101694:\t8e d9                \tmov    %ecx,%ds
  101696:\tcc                   \tint3
";

    /// The same code with an `lfence` after `pushf`: every later address
    /// moves by its three bytes.
    const AFTER: &str = "\
00101684 <sysenter_full>:
  101684:\t9c                   \tpushf
  101685:\t0f ae e8             \tlfence

00101688 <sysenter_common>:
  101688:\t6a 02                \tpush   $0x2
  10168a:\t9d                   \tpopf
  10168b:\t89 6c 24 04          \tmov    %ebp,0x4(%esp)
  10168f:\t81 fd 04 00 00 40    \tcmp    $0x40000004,%ebp
  101695:\t72 58                \tjb     1016ef <sysenter_bad_stack>
  101697:\t8e d9                \tmov    %ecx,%ds
";

    #[test]
    fn an_added_lfence_is_the_change_and_moved_addresses_are_not() {
        let (b, a) = (parse_objdump(BEFORE), parse_objdump(AFTER));
        assert_eq!(b.len(), 2);
        assert_eq!(b[1].1[4].key, "jb <sysenter_bad_stack>");
        assert_eq!(b[1].1[3].key, "cmp $0x...,%ebp");
        let c = changed("kernel", &b, &a);
        assert_eq!(c.len(), 1, "{c:?}");
        assert_eq!(c[0].name, "sysenter_full");
        assert_eq!(
            (c[0].added.clone(), c[0].removed.len()),
            (vec!["lfence".to_string()], 0)
        );
        assert_eq!(
            c[0].fixed,
            [FixedInsn {
                side: "+".into(),
                text: "lfence".into(),
                key: "lfence".into()
            }]
        );
        // The other way round the lfence is removed.
        let c = changed("kernel", &a, &b);
        assert_eq!(c[0].fixed[0].side, "-");
    }

    /// A function that differs only in a constant (the revision string's
    /// length) is said to, and its priced instructions are not listed.
    #[test]
    fn a_change_of_constants_only_is_told_apart() {
        let b = parse_objdump(BEFORE);
        let a = parse_objdump(&BEFORE.replace("push   $0x2", "push   $0x3"));
        let c = changed("kernel", &b, &a);
        assert_eq!(c.len(), 1);
        assert!(c[0].constants_only, "{c:?}");
        assert!(c[0].fixed.is_empty(), "{c:?}");
        assert_eq!(shape("movl $0x34,0x8(%esp)"), "movl $#,#(%esp)");
        // The lfence is no constant.
        assert!(!changed("kernel", &b, &parse_objdump(AFTER))[0].constants_only);
    }

    #[test]
    fn a_changed_function_lists_every_priced_instruction_in_it() {
        let b = parse_objdump(BEFORE);
        let mut a = parse_objdump(BEFORE);
        // The flags reset dropped: `push $0x2; popf` gone.
        a[1].1.drain(0..2);
        let c = changed("kernel", &b, &a);
        assert_eq!(c[0].name, "sysenter_common");
        let fixed: Vec<(&str, &str, &str)> = c[0]
            .fixed
            .iter()
            .map(|i| (i.side.as_str(), i.text.as_str(), i.key.as_str()))
            .collect();
        assert_eq!(
            fixed,
            [(" ", "mov %ecx,%ds", "sreg_load"), ("-", "popf", "popf")]
        );
        let costs = fixed_costs(
            "modern",
            &[CodeDiff {
                functions: c,
                ..CodeDiff::default()
            }],
        );
        let keys: Vec<(&str, u64)> = costs.iter().map(|f| (f.key.as_str(), f.cycles)).collect();
        assert_eq!(keys, [("popf", 19), ("sreg_load", 20)]);
        assert!(
            costs[0].source.starts_with("AGNER-T Skylake: POPF"),
            "{costs:?}"
        );
    }
}
