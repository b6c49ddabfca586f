//! `cargo xtask layers`: the kernel's (or xtask's) import graph and its
//! largest circle.
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
//! of one file of a circle must read them all. The check fails when the
//! largest holds more than [`MAX_CIRCLE`] files, and prints it with the
//! imports that close it.
//!
//! The layers, bottom to top: `arch` (the CPU) → `sync` → `entry` beside
//! `vm` → `task` with `proc` → `syscall`, `trap` and `main`; `boot` (the
//! loader's facts) and `console` (which prints for every layer) sit beside
//! them all. The rule: a file of a layer imports only its own layer, the
//! layers below it, `boot` and `console` ([`BELOW`] lists each layer's
//! allowance; `arch` may also reach `sync/cell.rs`, a global's cell). The
//! check fails on any other import of those layers.
//!
//! xtask's own tree (`--src xtask/src`) has its layers too ([`XTASK`]),
//! bottom to top: `report.rs` (the record parser), `ministat/` (the
//! statistics) and the leaves `testalloc.rs`, `ktap.rs` → `results/` (a
//! run's results as types: records, benchmarks, samples, shares, model
//! figures, clocks, provenance; imports only the record parser) → `lava/`
//! beside `model.rs` (the model's host side: plugin, file, merge) →
//! `compare.rs` → `export/` → the machines (`machine/`, `kbuild.rs`,
//! `preflight.rs`, `iso.rs`: build and boot, which carry the model plugin)
//! → the commands (`cmd/`, `fuzzing.rs`, `lib.rs`, `main.rs`), which may
//! import anything. No circle may exceed [`MAX_CIRCLE`] there either: the
//! sections of `cargo xtask test` build on `cmd/test/unit.rs` (one test),
//! not on the runner that lists them, so only the book's check and the
//! runner (which runs it) import each other.
//!
//! The files are parsed by `syn`; a path inside a macro's arguments (which
//! `syn` leaves as tokens) is read from the tokens. Every path counts,
//! `cfg`'d-out code too, which errs on the side of a larger circle; what a
//! path names is decided here (`syn` parses, it does not resolve names),
//! by the module tree the files make.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use clap::Args;
use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use syn::visit::Visit;

/// The largest circle the kernel (and xtask) may hold.
pub const MAX_CIRCLE: usize = 6;

/// One tree's layering: each layer's allowance ([`BELOW`]'s form) and the
/// largest circle.
pub struct Rules {
    pub below: &'static [(&'static str, &'static [&'static str])],
    pub max_circle: usize,
}

/// The kernel's rules.
pub static KERNEL: Rules = Rules {
    below: BELOW,
    max_circle: MAX_CIRCLE,
};

/// xtask's rules (see the file's header for the order).
pub static XTASK: Rules = Rules {
    below: XTASK_BELOW,
    max_circle: MAX_CIRCLE,
};

/// xtask's layers, each with what it may import.
pub const XTASK_BELOW: &[(&str, &[&str])] = &[
    ("report.rs", &["report.rs"]),
    ("ministat/", &["ministat/"]),
    ("testalloc.rs", &["testalloc.rs"]),
    ("ktap.rs", &["ktap.rs"]),
    ("parallel.rs", &["parallel.rs"]),
    ("results/", &["results/", "report.rs"]),
    ("lava/", &["lava/", "results/", "report.rs", "testalloc.rs"]),
    ("model.rs", &["model.rs", "results/", "report.rs"]),
    (
        "compare.rs",
        &[
            "compare.rs",
            "model.rs",
            "results/",
            "report.rs",
            "ministat/",
        ],
    ),
    (
        "export/",
        &[
            "export/",
            "compare.rs",
            "model.rs",
            "results/",
            "report.rs",
            "ministat/",
        ],
    ),
    ("machine/", MACHINES),
    ("kbuild.rs", MACHINES),
    ("preflight.rs", MACHINES),
    ("iso.rs", MACHINES),
];

/// What the machines' layer may import: itself, the model it loads and the
/// results it reads.
const MACHINES: &[&str] = &[
    "machine/",
    "kbuild.rs",
    "preflight.rs",
    "iso.rs",
    "model.rs",
    "results/",
    "report.rs",
];

impl Rules {
    /// The rules of the tree at `src`: xtask's for a folder `xtask/src`,
    /// else the kernel's.
    pub fn of(src: &Path) -> &'static Rules {
        if src.ends_with("xtask/src") {
            &XTASK
        } else {
            &KERNEL
        }
    }

    fn layer_of(&self, file: &str) -> Option<&'static str> {
        self.below
            .iter()
            .map(|(l, _)| *l)
            .find(|l| file.starts_with(l))
    }

    /// The imports the allowances forbid: (importer, imported, what it
    /// may import).
    pub fn upward(&self, g: &Graph) -> Vec<(String, String, Vec<&'static str>)> {
        let mut out = Vec::new();
        for (i, from) in g.files.iter().enumerate() {
            let Some((_, allowed)) = self.below.iter().find(|(l, _)| from.starts_with(l)) else {
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
}

/// Every layer's allowance: a file under the first folder imports only
/// files under the others (or a file named exactly).
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

/// Reads `src`, and says whether its circles are within [`MAX_CIRCLE`]
/// and no file imports above its
/// layer, with the report to print; the rules are the tree's ([`Rules::of`]).
pub fn check(src: &Path, verbose: bool) -> Result<(bool, String)> {
    check_with(src, Rules::of(src), verbose)
}

/// [`check`] under `rules`.
pub fn check_with(src: &Path, rules: &Rules, verbose: bool) -> Result<(bool, String)> {
    let g = scan(src)?;
    let root = crate::kbuild::root();
    let shown = src.strip_prefix(&root).unwrap_or(src).display().to_string();
    Ok(judge(&g, rules, &shown, verbose))
}

/// The verdict on the graph of the tree `shown` under `rules`, and its
/// report.
pub fn judge(g: &Graph, rules: &Rules, shown: &str, verbose: bool) -> (bool, String) {
    let mut out = String::new();
    if verbose {
        for (i, f) in g.files.iter().enumerate() {
            let to: Vec<&str> = g.imports[i].iter().map(|&j| g.files[j].as_str()).collect();
            out += &format!("{f} -> {}\n", to.join(", "));
        }
    }
    let circles = circles(g);
    let over: Vec<&Vec<usize>> = circles
        .iter()
        .filter(|c| c.len() > rules.max_circle)
        .collect();
    let largest = circles.first().cloned().unwrap_or_default();
    let upward = rules.upward(g);
    let ok = over.is_empty() && upward.is_empty();
    for (from, to, allowed) in &upward {
        out += &format!(
            "{from} imports {to}: a file under {} may import only {}\n",
            rules.layer_of(from).unwrap_or(""),
            allowed.join(", ")
        );
    }
    out += &format!(
        "{shown}: {} files; largest import circle: {} file{} (limit {}){}\n",
        g.files.len(),
        largest.len(),
        if largest.len() == 1 { "" } else { "s" },
        rules.max_circle,
        if over.is_empty() { "" } else { ": too large" },
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
    (ok, out)
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
    graph_of(&texts)
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

/// What one file names: each path with the inline modules (`mod m { }`)
/// it sits in, and the macros it invokes by a bare name.
#[derive(Default)]
struct Names {
    inline: Vec<String>,
    paths: Vec<(Vec<String>, Vec<String>)>,
    macros: BTreeSet<String>,
    exported: Vec<String>,
}

impl Names {
    fn path(&mut self, p: Vec<String>) {
        self.paths.push((self.inline.clone(), p));
    }

    /// The paths and macro calls in a macro's tokens: `a::b::c` runs,
    /// `a::{b, c::d}` groups (a `use` inside a macro), `name!` calls.
    /// `$crate::` is the macro's own crate at its caller: not a path here.
    fn tokens(&mut self, ts: TokenStream, prefix: &[String]) {
        let t: Vec<TokenTree> = ts.into_iter().collect();
        let colons = |k: usize| {
            matches!((t.get(k), t.get(k + 1)), (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':')
        };
        let mut k = 0;
        while k < t.len() {
            let start = k;
            k += 1;
            let id = match &t[start] {
                TokenTree::Group(g) => {
                    self.tokens(g.stream(), &[]);
                    continue;
                }
                TokenTree::Ident(id) => id.to_string(),
                _ => continue,
            };
            let after_path = start >= 2 && colons(start - 2);
            let after_dollar = matches!(start.checked_sub(1).map(|j| &t[j]), Some(TokenTree::Punct(p)) if p.as_char() == '$');
            if after_path || after_dollar {
                continue;
            }
            let mut path: Vec<String> = prefix.iter().cloned().chain([id]).collect();
            while colons(k) {
                match t.get(k + 2) {
                    Some(TokenTree::Ident(n)) => path.push(n.to_string()),
                    Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Brace => {
                        self.tokens(g.stream(), &path);
                        k += 3;
                        path.clear();
                        break;
                    }
                    _ => break,
                }
                k += 3;
            }
            let bang = matches!(t.get(k), Some(TokenTree::Punct(p)) if p.as_char() == '!');
            if path.len() > 1 {
                self.path(path);
            } else if path.len() == 1 && bang {
                self.macros.insert(path.remove(0));
            }
        }
    }
}

/// Every path of a `use` tree: `a::b::{c, d::e, self}` is `a::b::c`,
/// `a::b::d::e`, `a::b::self`; a glob `a::*` is `a`.
fn use_paths(tree: &syn::UseTree, prefix: &mut Vec<String>, out: &mut Vec<Vec<String>>) {
    match tree {
        syn::UseTree::Path(p) => {
            prefix.push(p.ident.to_string());
            use_paths(&p.tree, prefix, out);
            prefix.pop();
        }
        syn::UseTree::Name(n) => out.push([prefix.clone(), vec![n.ident.to_string()]].concat()),
        syn::UseTree::Rename(r) => out.push([prefix.clone(), vec![r.ident.to_string()]].concat()),
        syn::UseTree::Glob(_) => out.push(prefix.clone()),
        syn::UseTree::Group(g) => g.items.iter().for_each(|t| use_paths(t, prefix, out)),
    }
}

impl<'ast> Visit<'ast> for Names {
    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        self.inline.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.inline.pop();
    }

    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        let mut found = Vec::new();
        use_paths(&u.tree, &mut Vec::new(), &mut found);
        found.into_iter().for_each(|p| self.path(p));
    }

    fn visit_item_macro(&mut self, m: &'ast syn::ItemMacro) {
        if let Some(name) = &m.ident {
            if m.attrs.iter().any(|a| a.path().is_ident("macro_export")) {
                self.exported.push(name.to_string());
            }
        }
        syn::visit::visit_item_macro(self, m);
    }

    fn visit_macro(&mut self, m: &'ast syn::Macro) {
        if let Some(name) = m.path.get_ident() {
            self.macros.insert(name.to_string());
        }
        syn::visit::visit_macro(self, m);
        self.tokens(m.tokens.clone(), &[]);
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        if p.segments.len() > 1 {
            self.path(p.segments.iter().map(|s| s.ident.to_string()).collect());
        }
        syn::visit::visit_path(self, p);
    }
}

/// The graph of files given as (path, text).
pub fn graph_of(texts: &[(String, String)]) -> Result<Graph> {
    let files: Vec<String> = texts.iter().map(|(p, _)| p.clone()).collect();
    let modules: BTreeMap<Vec<String>, usize> = files
        .iter()
        .enumerate()
        .map(|(i, f)| (module_of(f), i))
        .collect();
    let mut names = Vec::new();
    for (p, t) in texts {
        let ast = syn::parse_file(t).with_context(|| format!("parsing {p}"))?;
        let mut n = Names::default();
        n.visit_file(&ast);
        names.push(n);
    }
    // The exported macros and the file of each.
    let macros: BTreeMap<String, usize> = names
        .iter()
        .enumerate()
        .flat_map(|(i, n)| n.exported.iter().map(move |m| (m.clone(), i)))
        .collect();
    let mut imports = vec![BTreeSet::new(); files.len()];
    for (i, n) in names.iter().enumerate() {
        let mut to: BTreeSet<usize> = n
            .macros
            .iter()
            .filter_map(|m| macros.get(m))
            .copied()
            .collect();
        for (inline, p) in &n.paths {
            let here = [module_of(&files[i]), inline.clone()].concat();
            to.extend(resolve(p, &here, &modules, &macros));
        }
        to.remove(&i);
        imports[i] = to;
    }
    Ok(Graph { files, imports })
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

/// The strongly connected components (petgraph's Tarjan), largest first,
/// each sorted by file name.
pub fn circles(g: &Graph) -> Vec<Vec<usize>> {
    let mut dg = petgraph::graph::DiGraph::<(), ()>::new();
    let nodes: Vec<_> = g.files.iter().map(|_| dg.add_node(())).collect();
    for (i, to) in g.imports.iter().enumerate() {
        for &j in to {
            dg.add_edge(nodes[i], nodes[j], ());
        }
    }
    let mut out: Vec<Vec<usize>> = petgraph::algo::tarjan_scc(&dg)
        .into_iter()
        .map(|c| {
            let mut c: Vec<usize> = c.into_iter().map(|n| n.index()).collect();
            c.sort();
            c
        })
        .collect();
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
        graph_of(&texts).unwrap()
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
    fn paths_inside_a_macro_call_and_a_use_inside_a_macro_count() {
        let g = graph(&[
            (
                "main.rs",
                "fn f() { assert!(crate::a::ok(), \"{}\", b::c::X); }",
            ),
            ("a.rs", "m! { use crate::{b, d::e}; }"),
            ("b/mod.rs", ""),
            ("b/c.rs", ""),
            ("d.rs", ""),
        ]);
        assert_eq!(imports(&g, "main.rs"), ["a.rs", "b/c.rs"]);
        assert_eq!(imports(&g, "a.rs"), ["b/mod.rs", "d.rs"]);
    }

    #[test]
    fn a_file_that_does_not_parse_is_named() {
        let texts = [("x/y.rs".to_string(), "fn (".to_string())];
        let e = graph_of(&texts).unwrap_err();
        assert!(format!("{e:#}").contains("x/y.rs"), "{e:#}");
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
        let up = KERNEL.upward(&g);
        assert_eq!(up.len(), 1, "{up:?}");
        assert_eq!(
            (up[0].0.as_str(), up[0].1.as_str()),
            ("arch/smp.rs", "task/sched.rs")
        );
    }

    #[test]
    fn vm_below_task_and_proc_below_syscall() {
        let g = graph(&[
            (
                "vm/mod.rs",
                "use crate::sync::spin; fn f() { crate::task::yield_now(); }",
            ),
            ("sync/spin.rs", ""),
            (
                "task/mod.rs",
                "use crate::vm; use crate::proc::signal; use crate::entry;",
            ),
            ("entry/mod.rs", ""),
            (
                "proc/signal.rs",
                "use crate::task; use crate::syscall::table;",
            ),
            ("syscall/table.rs", ""),
        ]);
        let up = KERNEL.upward(&g);
        let up: Vec<(&str, &str)> = up
            .iter()
            .map(|(f, t, _)| (f.as_str(), t.as_str()))
            .collect();
        assert_eq!(
            up,
            [
                ("vm/mod.rs", "task/mod.rs"),
                ("proc/signal.rs", "syscall/table.rs")
            ]
        );
    }

    /// xtask's layers: the results at the bottom import only the record
    /// parser; the model's host side nothing above the results; a file of
    /// a command may import anything.
    #[test]
    fn a_results_file_that_imports_a_machine_or_a_command_is_refused() {
        let g = graph(&[
            ("lib.rs", ""),
            ("report.rs", ""),
            (
                "results/mod.rs",
                "use crate::report::Record; use crate::machine::Clock;",
            ),
            ("results/bench.rs", "use super::Results;"),
            (
                "model.rs",
                "use crate::results::Results; use crate::compare;",
            ),
            ("compare.rs", "use crate::results::Results;"),
            ("machine/mod.rs", "use crate::model::Plugin;"),
            (
                "cmd/run.rs",
                "use crate::machine::Machine; use crate::results;",
            ),
        ]);
        let up: Vec<(String, String)> = XTASK
            .upward(&g)
            .into_iter()
            .map(|(f, t, _)| (f, t))
            .collect();
        assert_eq!(
            up,
            [
                ("results/mod.rs".to_string(), "machine/mod.rs".to_string()),
                ("model.rs".into(), "compare.rs".into())
            ]
        );
    }

    /// A circle of seven files is one too many, in any tree.
    #[test]
    fn a_circle_over_six_files_is_too_large() {
        let files = [
            "cmd/a.rs",
            "cmd/b.rs",
            "cmd/c.rs",
            "cmd/d.rs",
            "cmd/e.rs",
            "cmd/f.rs",
            "cmd/test/mod.rs",
        ];
        let texts: Vec<(&str, String)> = files
            .iter()
            .enumerate()
            .map(|(i, f)| {
                let next = files[(i + 1) % files.len()];
                let m = next
                    .trim_end_matches(".rs")
                    .trim_end_matches("/mod")
                    .replace('/', "::");
                (*f, format!("use crate::{m};"))
            })
            .collect();
        let refs: Vec<(&str, &str)> = texts.iter().map(|(f, t)| (*f, t.as_str())).collect();
        let (ok, text) = judge(&graph(&refs), &XTASK, "x", false);
        assert!(
            !ok && text.contains("7 files (limit 6): too large"),
            "{text}"
        );
    }

    /// xtask's own rule, on the real tree: every layer imports only its
    /// own and those below it, and no circle is larger than its limit.
    #[test]
    fn xtask_keeps_its_layers() {
        let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        assert!(std::ptr::eq(Rules::of(&src), &XTASK));
        let (ok, text) = check(&src, false).unwrap();
        assert!(ok, "{text}");
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
