//! `cargo xtask layers`: the kernel's import graph and its largest circle.
//!
//! Every `.rs` file under `kernel/src` is a node. A file imports another when
//! it names a path into it (`use crate::arch::gdt`, `crate::task::current()`,
//! `super::pit`, or from `main.rs` a bare `arch::cpu`) or invokes a macro the
//! other file exports (`kprintln!` is `console/mod.rs`'s). A path names the
//! file of its longest prefix that is a module: `crate::arch::gdt::init`
//! is `arch/gdt.rs`, `crate::arch::Foo` is `arch/mod.rs`.
//!
//! A circle is a strongly connected component of that graph: files each
//! of which imports, directly or through the others, every other. A reader
//! of one file of a circle must read them all; the layers (bottom to top:
//! arch, sync, entry beside vm, task with proc, then syscall, trap and
//! main) keep every circle small. The check fails when the largest holds more than
//! [`MAX_CIRCLE`] files, and prints it with the imports that close it; it
//! also fails when a file of a bottom layer imports from above it
//! ([`BELOW`]: arch knows the CPU and nothing of the kernel above it).
//!
//! The reading is lexical (comments and literals blanked, no macro
//! expansion but the exported macros' names): a path in a `cfg`'d-out
//! block still counts, which errs on the side of a larger circle.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;

/// The largest circle the kernel may hold.
pub const MAX_CIRCLE: usize = 6;

/// The bottom layers and all they may import: a file under the first
/// folder imports only files under the others (or a file named exactly).
/// `boot` (the loader's facts) and `sync/cell.rs` (a global's cell) import
/// nothing of the kernel; the console prints for every layer.
pub const BELOW: &[(&str, &[&str])] = &[
    ("arch/", &["arch/", "boot/", "console/", "sync/cell.rs"]),
    ("sync/", &["sync/", "arch/", "boot/", "console/"]),
    ("entry/", &["entry/", "sync/", "arch/", "boot/", "console/"]),
    ("vm/", &["vm/", "sync/", "arch/", "boot/", "console/"]),
    ("task/", TASK_PROC),
    ("proc/", TASK_PROC),
];

/// What task and proc may import: one layer (a process owns threads, and a
/// switch loads its process's space), above entry and vm.
const TASK_PROC: &[&str] = &[
    "task/", "proc/", "vm/", "entry/", "sync/", "arch/", "boot/", "console/",
];

#[derive(Args, Debug)]
pub struct LayersArgs {
    /// The source tree to read (default: the workspace's kernel/src).
    #[arg(long)]
    pub src: Option<PathBuf>,
    /// Also print every file's imports.
    #[arg(long)]
    pub verbose: bool,
}

/// The import graph: files (relative to the source root, `/`-separated)
/// and, per file, the files it imports.
#[derive(Debug, Default)]
pub struct Graph {
    pub files: Vec<String>,
    pub imports: Vec<BTreeSet<usize>>,
}

pub fn layers(a: LayersArgs) -> Result<i32> {
    let src = a
        .src
        .unwrap_or_else(|| crate::kbuild::root().join("kernel/src"));
    let (ok, text) = check(&src, a.verbose)?;
    print!("{text}");
    Ok(if ok { 0 } else { 1 })
}

/// Reads `src`, and says whether its largest circle is within
/// [`MAX_CIRCLE`], with the report to print.
pub fn check(src: &Path, verbose: bool) -> Result<(bool, String)> {
    let g = scan(src)?;
    let mut out = String::new();
    if verbose {
        for (i, f) in g.files.iter().enumerate() {
            let to: Vec<&str> = g.imports[i].iter().map(|&j| g.files[j].as_str()).collect();
            out += &format!("{f} -> {}\n", to.join(", "));
        }
    }
    let circles = circles(&g);
    let largest = circles.first().cloned().unwrap_or_default();
    let upward = upward(&g);
    let ok = largest.len() <= MAX_CIRCLE && upward.is_empty();
    for (from, to, allowed) in &upward {
        out += &format!(
            "{from} imports {to}: a file under {} may import only {}\n",
            layer_of(from).unwrap_or(""),
            allowed.join(", ")
        );
    }
    out += &format!(
        "kernel/src: {} files; largest import circle: {} file{} (limit {MAX_CIRCLE}){}\n",
        g.files.len(),
        largest.len(),
        if largest.len() == 1 { "" } else { "s" },
        if largest.len() <= MAX_CIRCLE {
            ""
        } else {
            ": too large"
        },
    );
    for c in circles.iter().filter(|c| c.len() > 1) {
        out += &format!("circle of {}:\n", c.len());
        for &i in c {
            let inside: Vec<&str> = g.imports[i]
                .iter()
                .filter(|j| c.contains(j))
                .map(|&j| g.files[j].as_str())
                .collect();
            out += &format!("  {} -> {}\n", g.files[i], inside.join(", "));
        }
    }
    Ok((ok, out))
}

fn layer_of(file: &str) -> Option<&'static str> {
    BELOW.iter().map(|(l, _)| *l).find(|l| file.starts_with(l))
}

/// The imports [`BELOW`] forbids: (importer, imported, what it may import).
pub fn upward(g: &Graph) -> Vec<(String, String, Vec<&'static str>)> {
    let mut out = Vec::new();
    for (i, from) in g.files.iter().enumerate() {
        let Some((_, allowed)) = BELOW.iter().find(|(l, _)| from.starts_with(l)) else {
            continue;
        };
        for &j in &g.imports[i] {
            let to = &g.files[j];
            let fits = |a: &&str| {
                if a.ends_with('/') {
                    to.starts_with(a)
                } else {
                    to == a
                }
            };
            if !allowed.iter().any(fits) {
                out.push((from.clone(), to.clone(), allowed.to_vec()));
            }
        }
    }
    out
}

/// The graph of every `.rs` file under `src`.
pub fn scan(src: &Path) -> Result<Graph> {
    let mut paths = Vec::new();
    collect(src, src, &mut paths)?;
    paths.sort();
    let mut texts = Vec::new();
    for p in &paths {
        let full = src.join(p);
        let text = std::fs::read_to_string(&full).with_context(|| format!("{}", full.display()))?;
        texts.push((p.clone(), text));
    }
    Ok(graph_of(&texts))
}

fn collect(root: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    let entries = std::fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))?;
    for e in entries {
        let p = e?.path();
        if p.is_dir() {
            collect(root, &p, out)?;
        } else if p.extension().is_some_and(|x| x == "rs") {
            let rel = p.strip_prefix(root).expect("under the root");
            let parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            out.push(parts.join("/"));
        }
    }
    Ok(())
}

/// The module path of a file: `main.rs`/`lib.rs` is the crate root,
/// `a/mod.rs` and `a.rs` are `a`, `a/b.rs` is `a::b`.
fn module_of(file: &str) -> Vec<String> {
    let mut parts: Vec<String> = file.split('/').map(str::to_string).collect();
    let last = parts.pop().unwrap_or_default();
    let stem = last.trim_end_matches(".rs");
    if !(stem == "mod" || (parts.is_empty() && (stem == "main" || stem == "lib"))) {
        parts.push(stem.to_string());
    }
    parts
}

/// The graph of files given as (path, text).
pub fn graph_of(texts: &[(String, String)]) -> Graph {
    let files: Vec<String> = texts.iter().map(|(p, _)| p.clone()).collect();
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (module_of(f), i))
        .collect();
    let stripped: Vec<String> = texts.iter().map(|(_, t)| blank(t)).collect();
    // The exported macros and the file of each.
    let mut macros = BTreeMap::new();
    for (i, t) in stripped.iter().enumerate() {
        let mut rest = t.as_str();
        while let Some(at) = rest.find("#[macro_export]") {
            rest = &rest[at + "#[macro_export]".len()..];
            let after = rest.trim_start();
            if let Some(def) = after.strip_prefix("macro_rules!") {
                let name = ident_at(def.trim_start());
                if !name.is_empty() {
                    macros.insert(name.to_string(), i);
                }
            }
        }
    }
    let mut imports = vec![BTreeSet::new(); files.len()];
    for (i, t) in stripped.iter().enumerate() {
        let here = module_of(&files[i]);
        for target in targets(t, &here, &inline_mods(t), &modules, &macros) {
            if target != i {
                imports[i].insert(target);
            }
        }
    }
    Graph { files, imports }
}

/// The inline modules (`mod name { ... }`) of a blanked text: each its
/// name and the byte range of its body.
fn inline_mods(t: &str) -> Vec<(String, std::ops::Range<usize>)> {
    let b = t.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(at) = t[i..].find("mod ") {
        let start = i + at;
        i = start + 4;
        if start > 0 && is_ident(b[start - 1]) {
            continue;
        }
        let rest = t[i..].trim_start();
        let name = ident_at(rest);
        let after = rest[name.len()..].trim_start();
        if name.is_empty() || !after.starts_with('{') {
            continue;
        }
        let open = t.len() - after.len();
        let mut depth = 0;
        let mut end = t.len();
        for (j, &c) in b.iter().enumerate().skip(open) {
            depth += match c {
                b'{' => 1,
                b'}' => -1,
                _ => 0,
            };
            if depth == 0 {
                end = j;
                break;
            }
        }
        out.push((name.to_string(), open..end));
    }
    out
}

/// The files one file's text (blanked) names; `inline` are its inline
/// modules, which `super::` inside them counts from.
fn targets(
    t: &str,
    file_module: &[String],
    inline: &[(String, std::ops::Range<usize>)],
    modules: &BTreeMap<Vec<String>, usize>,
    macros: &BTreeMap<String, usize>,
) -> BTreeSet<usize> {
    let b = t.as_bytes();
    let mut out = BTreeSet::new();
    let mut i = 0;
    while i < b.len() {
        if !is_ident_start(b[i]) || (i > 0 && (is_ident(b[i - 1]) || b[i - 1] == b'$')) {
            i += 1;
            continue;
        }
        let name = ident_at(&t[i..]);
        let end = i + name.len();
        let preceded_by_path = t[..i].trim_end().ends_with("::");
        let after = t[end..].trim_start();
        if after.starts_with("::") && !preceded_by_path {
            let mut here = file_module.to_vec();
            here.extend(
                inline
                    .iter()
                    .filter(|(_, r)| r.contains(&i))
                    .map(|(n, _)| n.clone()),
            );
            let (tree, used) = path_tree(&t[i..]);
            for p in tree {
                if let Some(f) = resolve(&p, &here, modules, macros) {
                    out.insert(f);
                }
            }
            i += used.max(name.len());
            continue;
        }
        if after.starts_with('!') && !preceded_by_path && !after.starts_with("!=") {
            let before = t[..i].trim_end();
            if !before.ends_with("macro_rules!") {
                if let Some(&f) = macros.get(name) {
                    out.insert(f);
                }
            }
        }
        i = end;
    }
    out
}

/// A path's segments made absolute (`crate`, `super`, `self`, or a child
/// module of `here`), resolved to the file of its longest module prefix.
fn resolve(
    p: &[String],
    here: &[String],
    modules: &BTreeMap<Vec<String>, usize>,
    macros: &BTreeMap<String, usize>,
) -> Option<usize> {
    let mut abs: Vec<String>;
    let mut rest = p;
    match p.first().map(String::as_str) {
        Some("crate") => {
            abs = Vec::new();
            rest = &p[1..];
        }
        Some("self") => {
            abs = here.to_vec();
            rest = &p[1..];
        }
        Some("super") => {
            abs = here.to_vec();
            while rest.first().is_some_and(|s| s == "super") {
                abs.pop()?;
                rest = &rest[1..];
            }
        }
        Some(first) => {
            // A bare path names a child module of this one, or nothing of ours.
            let mut child = here.to_vec();
            child.push(first.to_string());
            if !modules.contains_key(&child) {
                return None;
            }
            abs = here.to_vec();
        }
        None => return None,
    }
    if abs.is_empty() && rest.len() == 1 {
        if let Some(&f) = macros.get(&rest[0]) {
            return Some(f);
        }
    }
    abs.extend(rest.iter().filter(|s| *s != "self").cloned());
    while !modules.contains_key(&abs) {
        abs.pop()?;
    }
    modules.get(&abs).copied()
}

/// The paths of one path expression or `use` tree at the start of `s`:
/// `a::b::{c, d::e, self}` is `a::b::c`, `a::b::d::e`, `a::b`. Returns them
/// and the bytes read.
fn path_tree(s: &str) -> (Vec<Vec<String>>, usize) {
    let mut prefix = Vec::new();
    let mut i = 0;
    loop {
        i += s[i..].len() - s[i..].trim_start().len();
        let name = ident_at(&s[i..]);
        if !name.is_empty() {
            prefix.push(name.to_string());
            i += name.len();
        } else if s[i..].starts_with('{') {
            i += 1;
            let mut out = Vec::new();
            loop {
                i += s[i..].len() - s[i..].trim_start().len();
                if s[i..].starts_with('}') || i >= s.len() {
                    i += 1;
                    break;
                }
                if s[i..].starts_with(',') {
                    i += 1;
                    continue;
                }
                let (sub, used) = path_tree(&s[i..]);
                for p in sub {
                    let mut full = prefix.clone();
                    full.extend(p);
                    out.push(full);
                }
                i += used.max(1);
            }
            return (out, i.min(s.len()));
        } else {
            // `*`, or the end of the path.
            if s[i..].starts_with('*') {
                i += 1;
            }
            break;
        }
        let ws = s[i..].len() - s[i..].trim_start().len();
        if s[i + ws..].starts_with("::") {
            i += ws + 2;
        } else {
            // `name as alias`: the path ends at `name`.
            break;
        }
    }
    (vec![prefix], i)
}

fn is_ident_start(c: u8) -> bool {
    c.is_ascii_alphabetic() || c == b'_'
}

fn is_ident(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'_'
}

fn ident_at(s: &str) -> &str {
    let b = s.as_bytes();
    if b.first().is_none_or(|&c| !is_ident_start(c)) {
        return "";
    }
    let n = b.iter().take_while(|&&c| is_ident(c)).count();
    &s[..n]
}

/// The text with comments, strings and character literals replaced by
/// spaces (lengths kept), so only code is read.
fn blank(t: &str) -> String {
    let b = t.as_bytes();
    let mut out = b.to_vec();
    let mut i = 0;
    let wipe = |out: &mut Vec<u8>, from: usize, to: usize| {
        for c in &mut out[from..to.min(b.len())] {
            if *c != b'\n' {
                *c = b' ';
            }
        }
    };
    while i < b.len() {
        if b[i..].starts_with(b"//") {
            let end = b[i..]
                .iter()
                .position(|&c| c == b'\n')
                .map_or(b.len(), |n| i + n);
            wipe(&mut out, i, end);
            i = end;
        } else if b[i..].starts_with(b"/*") {
            let (mut depth, mut j) = (1, i + 2);
            while j < b.len() && depth > 0 {
                if b[j..].starts_with(b"/*") {
                    depth += 1;
                    j += 2;
                } else if b[j..].starts_with(b"*/") {
                    depth -= 1;
                    j += 2;
                } else {
                    j += 1;
                }
            }
            wipe(&mut out, i, j);
            i = j;
        } else if b[i] == b'r' && (i == 0 || !is_ident(b[i - 1])) && raw_string_at(&b[i..]) > 0 {
            let n = raw_string_at(&b[i..]);
            wipe(&mut out, i, i + n);
            i += n;
        } else if b[i] == b'"' {
            let mut j = i + 1;
            while j < b.len() && b[j] != b'"' {
                j += if b[j] == b'\\' { 2 } else { 1 };
            }
            wipe(&mut out, i, j + 1);
            i = j + 1;
        } else if b[i] == b'\'' {
            // A character literal ('a', '\n', '\u{..}'), not a lifetime ('a).
            let n = if b.get(i + 1) == Some(&b'\\') {
                b[i + 2..].iter().position(|&c| c == b'\'').map(|p| p + 3)
            } else if b.get(i + 2) == Some(&b'\'') {
                Some(3)
            } else {
                // Multi-byte UTF-8 characters between the quotes.
                let ch = t[i + 1..].chars().next();
                ch.filter(|c| t[i + 1 + c.len_utf8()..].starts_with('\''))
                    .map(|c| c.len_utf8() + 2)
            };
            match n {
                Some(n) => {
                    wipe(&mut out, i, i + n);
                    i += n;
                }
                None => i += 1,
            }
        } else {
            i += 1;
        }
    }
    // Only ASCII bytes were replaced, each by a space: still UTF-8 where
    // whole characters were wiped; lossless on the code that remains.
    String::from_utf8_lossy(&out).into_owned()
}

/// The length of a raw string literal (`r"..."`, `r#"..."#`) at the start,
/// or 0.
fn raw_string_at(b: &[u8]) -> usize {
    let hashes = b[1..].iter().take_while(|&&c| c == b'#').count();
    if b.get(1 + hashes) != Some(&b'"') {
        return 0;
    }
    let close: Vec<u8> = std::iter::once(b'"')
        .chain(std::iter::repeat_n(b'#', hashes))
        .collect();
    let body = 2 + hashes;
    b[body..]
        .windows(close.len())
        .position(|w| w == close.as_slice())
        .map_or(b.len(), |p| body + p + close.len())
}

/// The strongly connected components (Tarjan), largest first, each sorted
/// by file name.
pub fn circles(g: &Graph) -> Vec<Vec<usize>> {
    struct T<'a> {
        g: &'a Graph,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        on: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        out: Vec<Vec<usize>>,
    }
    fn visit(t: &mut T, v: usize) {
        t.index[v] = Some(t.next);
        t.low[v] = t.next;
        t.next += 1;
        t.stack.push(v);
        t.on[v] = true;
        for &w in &t.g.imports[v] {
            match t.index[w] {
                None => {
                    visit(t, w);
                    t.low[v] = t.low[v].min(t.low[w]);
                }
                Some(iw) if t.on[w] => t.low[v] = t.low[v].min(iw),
                Some(_) => {}
            }
        }
        if Some(t.low[v]) == t.index[v] {
            let mut c = Vec::new();
            while let Some(w) = t.stack.pop() {
                t.on[w] = false;
                c.push(w);
                if w == v {
                    break;
                }
            }
            c.sort();
            t.out.push(c);
        }
    }
    let n = g.files.len();
    let mut t = T {
        g,
        index: vec![None; n],
        low: vec![0; n],
        on: vec![false; n],
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in 0..n {
        if t.index[v].is_none() {
            visit(&mut t, v);
        }
    }
    let mut out = t.out;
    out.sort_by(|a, b| b.len().cmp(&a.len()).then(a.cmp(b)));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn graph(files: &[(&str, &str)]) -> Graph {
        let texts: Vec<(String, String)> = files
            .iter()
            .map(|(p, t)| (p.to_string(), t.to_string()))
            .collect();
        graph_of(&texts)
    }

    fn imports(g: &Graph, file: &str) -> Vec<String> {
        let i = g.files.iter().position(|f| f == file).unwrap();
        g.imports[i].iter().map(|&j| g.files[j].clone()).collect()
    }

    #[test]
    fn paths_resolve_to_the_file_of_their_longest_module_prefix() {
        let g = graph(&[
            (
                "main.rs",
                "mod arch; mod task; use arch::cpu; fn f() { task::run() }",
            ),
            ("arch/mod.rs", "pub mod cpu; pub struct Foo;"),
            (
                "arch/cpu.rs",
                "use super::Foo; use crate::task::sched::{tick, self};",
            ),
            ("task/mod.rs", "pub mod sched; fn g() { crate::arch::Foo; }"),
            (
                "task/sched.rs",
                "use super::super::arch::cpu::features as f;",
            ),
        ]);
        assert_eq!(imports(&g, "main.rs"), ["arch/cpu.rs", "task/mod.rs"]);
        assert_eq!(imports(&g, "arch/cpu.rs"), ["arch/mod.rs", "task/sched.rs"]);
        assert_eq!(imports(&g, "task/mod.rs"), ["arch/mod.rs"]);
        assert_eq!(imports(&g, "task/sched.rs"), ["arch/cpu.rs"]);
    }

    #[test]
    fn super_inside_an_inline_module_counts_from_it() {
        let g = graph(&[
            ("main.rs", ""),
            ("s/mod.rs", "mod ring { use super::copy::f; }"),
            ("s/copy.rs", "mod tests { use super::*; }"),
        ]);
        assert_eq!(imports(&g, "s/mod.rs"), ["s/copy.rs"]);
        assert!(imports(&g, "s/copy.rs").is_empty());
    }

    #[test]
    fn nested_use_trees_name_every_leaf() {
        let g = graph(&[
            ("main.rs", "use crate::{a::{b::X, c}, d as e, f::*};"),
            ("a/mod.rs", ""),
            ("a/b.rs", ""),
            ("a/c.rs", ""),
            ("d.rs", ""),
            ("f.rs", ""),
        ]);
        assert_eq!(imports(&g, "main.rs"), ["a/b.rs", "a/c.rs", "d.rs", "f.rs"]);
    }

    #[test]
    fn comments_strings_and_macro_internals_are_not_imports() {
        let g = graph(&[
            (
                "main.rs",
                "// crate::a::x\n/* crate::b */ const S: &str = \"crate::a\";\n\
                 const R: &str = r#\"crate::b\"#; const C: char = '\"'; fn f<'a>() {}",
            ),
            ("a.rs", "macro_rules! m { () => { $crate::b::y() } }"),
            ("b.rs", ""),
        ]);
        assert!(imports(&g, "main.rs").is_empty());
        assert!(imports(&g, "a.rs").is_empty());
    }

    #[test]
    fn an_exported_macro_is_an_import_of_its_file() {
        let g = graph(&[
            (
                "console.rs",
                "#[macro_export]\nmacro_rules! kprintln { () => {} }",
            ),
            (
                "arch/pit.rs",
                "fn f() { kprintln!(); crate::kprintln!(); let t = a != b; }",
            ),
        ]);
        assert_eq!(imports(&g, "arch/pit.rs"), ["console.rs"]);
    }

    #[test]
    fn the_largest_circle_comes_first_and_an_acyclic_graph_has_none() {
        // a -> b -> c -> a is a circle of 3; d -> a is outside it.
        let g = graph(&[
            ("a.rs", "use crate::b;"),
            ("b.rs", "use crate::c;"),
            ("c.rs", "use crate::a;"),
            ("d.rs", "use crate::a; use crate::e;"),
            ("e.rs", ""),
        ]);
        let c = circles(&g);
        let names: Vec<&str> = c[0].iter().map(|&i| g.files[i].as_str()).collect();
        assert_eq!(names, ["a.rs", "b.rs", "c.rs"]);
        assert!(c[1..].iter().all(|c| c.len() == 1));
        let line = graph(&[("a.rs", "use crate::b;"), ("b.rs", "")]);
        assert!(circles(&line).iter().all(|c| c.len() == 1));
    }

    #[test]
    fn an_arch_file_that_imports_the_scheduler_is_refused() {
        let g = graph(&[
            ("main.rs", ""),
            (
                "arch/pit.rs",
                "use crate::sync::cell::SetOnce; use super::port;",
            ),
            ("arch/port.rs", ""),
            ("arch/smp.rs", "fn f() { crate::task::sched::tick(); }"),
            ("sync/cell.rs", ""),
            ("sync/spin.rs", ""),
            (
                "task/sched.rs",
                "use crate::arch::pit; use crate::sync::spin;",
            ),
        ]);
        let up = upward(&g);
        assert_eq!(up.len(), 1, "{up:?}");
        assert_eq!(
            (up[0].0.as_str(), up[0].1.as_str()),
            ("arch/smp.rs", "task/sched.rs")
        );
    }

    /// The project's own rule, on the real tree: no import circle in
    /// kernel/src larger than MAX_CIRCLE.
    #[test]
    fn the_kernel_has_no_circle_larger_than_the_limit() {
        let src = crate::kbuild::root().join("kernel/src");
        let (ok, text) = check(&src, false).unwrap();
        assert!(ok, "{text}");
    }
}
