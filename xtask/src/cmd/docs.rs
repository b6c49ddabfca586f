//! `cargo xtask docs`: the command outputs the README and the book (docs/)
//! show, regenerated from the commands themselves; `--check`: fail if any is
//! stale or any internal link is broken (`cargo xtask test` checks).
//!
//! A generated block sits between two HTML comments Markdown does not show:
//! `<!-- output: xtask CMD -->` (the output goes in a `text` code block) or
//! `<!-- markdown: xtask CMD -->` (the output is Markdown, e.g. a table, and
//! goes in as it is), closed by `<!-- end output -->`.

mod claims;
mod links;
pub use links::{line_of, markdown};
mod table;

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::kbuild;
use crate::machine::replay;

/// `cargo xtask docs`: the outputs shown in README.md and docs/, regenerated.
#[derive(Args)]
pub struct DocsArgs {
    /// Do not write: fail if any block differs from what the command prints
    /// now, or if an internal link does not resolve.
    #[arg(long)]
    pub check: bool,
    /// Print one of the generated tables the book shows, and nothing else.
    #[arg(long, value_enum, conflicts_with = "check")]
    pub table: Option<table::Table>,
    /// Check only the internal links and the tests claims name (`` `test:
    /// NAME` ``), without a boot: fast, for editing the book.
    #[arg(long, conflicts_with_all = ["check", "table", "only"])]
    pub claims: bool,
    /// Regenerate (or check) only these files' blocks, e.g. `--only
    /// docs/int80.md` (repeatable); links are checked everywhere.
    #[arg(long, value_name = "FILE")]
    pub only: Vec<PathBuf>,
}

/// Opens a block whose output is shown as text.
const BLOCK_START: &str = "<!-- output: xtask ";
/// Opens a block whose output is Markdown, shown as it is.
const MARKDOWN_START: &str = "<!-- markdown: xtask ";
const BLOCK_END: &str = "<!-- end output -->";

/// Makes a command's output stable across builds and machines: the kernel's
/// git revision and the QEMU version become placeholders.
pub fn normalize(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("results: ") && !l.starts_with("run: finished"))
        // A post's note on a set built from uncommitted changes says the
        // state of the tree the book was generated in.
        .filter(|l| !l.contains(" was built from uncommitted changes (diff "))
        .map(|l| {
            let mut l = l.to_string();
            if l.starts_with(POST_ENVIRONMENT) {
                l = post_environment(&l);
            }
            if let Some(rest) = l.strip_prefix("i386 testbed kernel ") {
                let _ = rest;
                l = "i386 testbed kernel <rev>".into();
            }
            // `cargo xtask test`'s PASS lines end in the test's wall time.
            if l.starts_with("PASS ") && l.ends_with(" s)") {
                if let Some(i) = l.rfind(" (") {
                    if l[i + 2..l.len() - 3].parse::<f64>().is_ok() {
                        l = format!("{} (<secs> s)", &l[..i]);
                    }
                }
            }
            if let Some(i) = l.find("QEMU ") {
                let tail = &l[i + 5..];
                if tail.starts_with(|c: char| c.is_ascii_digit()) {
                    let end = tail.find(' ').unwrap_or(tail.len());
                    l = format!("{}QEMU <version>{}", &l[..i], &tail[end..]);
                }
            }
            l.trim_end().to_string()
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// How a post's environment line starts (`export::post::environment`).
const POST_ENVIRONMENT: &str = "i386 testbed: ";

/// A post's environment line made stable: the host's CPU and each set's
/// revision (`before=79be713d8be3-dirty.aa9e898de534`) become placeholders.
fn post_environment(line: &str) -> String {
    let mut l = line.to_string();
    if let (Some(a), Some(b)) = (l.find("host CPU "), l.find(", guest cpu=")) {
        if a < b {
            l.replace_range(a + "host CPU ".len()..b, "<host>");
        }
    }
    let rev_like = |r: &str| {
        r.len() >= 7
            && r.split("-dirty.")
                .all(|p| !p.is_empty() && p.chars().all(|c| c.is_ascii_hexdigit()))
    };
    l.split(' ')
        .map(|w| {
            let (core, tail) = w.strip_suffix(',').map_or((w, ""), |c| (c, ","));
            match core.split_once('=') {
                Some((name, rev)) if rev_like(rev) => format!("{name}=<rev>{tail}"),
                _ => w.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// Splits a block's command line into words, keeping "quoted phrases" whole.
pub fn words(cmd: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in cmd.chars() {
        match c {
            '"' => quoted = !quoted,
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

/// How the docs check starts a command: whether every boot runs fresh
/// (the run's boot cache out of its reach), and the file its boots are
/// witnessed in ([`replay::SEEN_ENV`]).
struct Child<'a> {
    fresh: bool,
    seen: Option<&'a Path>,
}

/// Runs `cargo xtask <cmd>` (this binary), started as `how` says, and
/// returns its normalised stdout.
fn command_output_as(cmd: &str, how: &Child) -> Result<String> {
    let exe = crate::kbuild::xtask_exe()?;
    let mut c = Command::new(exe);
    c.args(words(cmd)).current_dir(kbuild::root());
    if how.fresh {
        c.env_remove(replay::ENV);
    }
    if let Some(p) = how.seen {
        c.env(replay::SEEN_ENV, p);
    }
    let o = c
        .output()
        .with_context(|| format!("cannot run xtask {cmd}"))?;
    let out = String::from_utf8_lossy(&o.stdout);
    if out.trim().is_empty() {
        bail!(
            "`cargo xtask {cmd}` printed nothing on stdout:\n{}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
    Ok(normalize(&out))
}

/// The first block marker in `text`: its offset and whether its output is Markdown.
fn next_marker(text: &str) -> Option<(usize, bool)> {
    let out = text.find(BLOCK_START).map(|i| (i, false));
    let md = text.find(MARKDOWN_START).map(|i| (i, true));
    match (out, md) {
        (Some(a), Some(b)) => Some(if a.0 < b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

/// One generated block of a file: its command, whether its output is
/// Markdown, and where its body (between the opening marker's line and
/// the closing marker) lies in the text.
struct Block {
    cmd: String,
    markdown: bool,
    body: std::ops::Range<usize>,
}

/// Every generated block of `text`, in order.
fn blocks(text: &str) -> Result<Vec<Block>> {
    let mut out = Vec::new();
    let mut at = 0;
    while let Some((start, markdown)) = next_marker(&text[at..]) {
        let start = at + start;
        let opener = if markdown {
            MARKDOWN_START
        } else {
            BLOCK_START
        };
        let line_end = text[start..]
            .find('\n')
            .map(|i| start + i + 1)
            .context("unterminated output marker")?;
        let cmd = text[start..line_end]
            .trim()
            .strip_prefix(opener)
            .and_then(|m| m.strip_suffix("-->"))
            .context("malformed output marker")?
            .trim()
            .to_string();
        let end = text[line_end..]
            .find(BLOCK_END)
            .map(|i| line_end + i)
            .with_context(|| format!("no `{BLOCK_END}` after `xtask {cmd}`"))?;
        out.push(Block {
            cmd,
            markdown,
            body: line_end..end,
        });
        at = end;
    }
    Ok(out)
}

/// A block's body for a command's (normalised) output.
fn body(markdown: bool, output: &str) -> String {
    if markdown {
        format!("{output}\n")
    } else {
        format!("```text\n{output}\n```\n")
    }
}

/// Rewrites every output block of `text`; returns the new text and the
/// commands whose output changed.
pub fn regenerate(
    text: &str,
    run: &mut dyn FnMut(&str) -> Result<String>,
) -> Result<(String, Vec<String>)> {
    let mut out = String::new();
    let mut changed = Vec::new();
    let mut from = 0;
    for b in blocks(text)? {
        let new = body(b.markdown, &run(&b.cmd)?);
        if text[b.body.clone()] != new {
            changed.push(b.cmd);
        }
        out.push_str(&text[from..b.body.start]);
        out.push_str(&new);
        from = b.body.end;
    }
    out.push_str(&text[from..]);
    Ok((out, changed))
}

/// A command of the generated blocks, with the files that show it
/// (README.md and docs/, relative to the root), in the order the files
/// first show the commands.
#[derive(Clone, Debug, PartialEq)]
pub struct Shown {
    pub cmd: String,
    pub files: Vec<String>,
}

/// Every command the README and the book show the output of, once each.
pub fn shown_commands() -> Result<Vec<Shown>> {
    let root = kbuild::root();
    let mut out: Vec<Shown> = Vec::new();
    for f in generated_files()? {
        let text = std::fs::read_to_string(&f)?;
        let name = f
            .strip_prefix(&root)
            .unwrap_or(&f)
            .to_string_lossy()
            .to_string();
        for b in blocks(&text).with_context(|| f.display().to_string())? {
            match out.iter_mut().find(|s| s.cmd == b.cmd) {
                Some(s) if !s.files.contains(&name) => s.files.push(name.clone()),
                Some(_) => {}
                None => out.push(Shown {
                    cmd: b.cmd,
                    files: vec![name.clone()],
                }),
            }
        }
    }
    Ok(out)
}

/// Runs `s`'s command and checks every block that shows it: the blocks
/// whose text is not what the command prints now, as `FILE: xtask CMD:
/// the first line that differs` (none: all current).
///
/// A command whose boots ran several CPUs in turns on QEMU's one host
/// thread ([`replay::takes_turns`]) and whose output differs is run once
/// more with every boot fresh, and that run decides: such a boot is the
/// same from boot to boot nearly always, not always (docs/threads.md, "When
/// a multi-CPU boot moves"). Both runs are said on stderr. Any other command's output
/// is a function of what it booted, so a difference is the book's.
pub fn check_shown(s: &Shown) -> Result<Vec<String>> {
    let files = s.files.join(", ");
    let (output, turns) = witnessed(&files, &s.cmd)?;
    let stale = stale_blocks(s, &output)?;
    if stale.is_empty() || turns == 0 {
        return Ok(stale);
    }
    let again = stale_blocks(s, &again_fresh(&files, &s.cmd, &stale.join("; "), turns)?)?;
    if again.is_empty() {
        replay::note_moved(format!(
            "docs: {files}: xtask {}: a second run, every boot fresh, prints what the book shows",
            s.cmd
        ));
    }
    Ok(again)
}

/// Runs `cmd` once more with every boot fresh (the run's boot cache out of
/// its reach), after saying why on stderr: its output differs from the book
/// (`how`), and `turns` of its boots took turns on several CPUs.
fn again_fresh(file: &str, cmd: &str, how: &str, turns: usize) -> Result<String> {
    eprintln!(
        "docs: {file}: xtask {cmd}: differs from the book ({how}); {turns} of its boots ran \
         several CPUs in turns on QEMU's one host thread; such a boot moves by a few \
         instructions now and then: running it again, every boot fresh"
    );
    timed_as(
        file,
        cmd,
        &Child {
            fresh: true,
            seen: None,
        },
    )
}

/// A command's output, and how many of its boots took turns on several
/// CPUs.
type Witnessed = (String, usize);

/// [`timed_as`], its boots witnessed ([`replay::witness`]): the output, and
/// how many of its boots ran several CPUs in turns on QEMU's one host
/// thread ([`replay::takes_turns`]).
fn witnessed(file: &str, cmd: &str) -> Result<Witnessed> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let dir = kbuild::root().join("target/xtask");
    std::fs::create_dir_all(&dir)?;
    let seen = dir.join(format!(
        "docs-seen-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
    ));
    let _ = std::fs::remove_file(&seen);
    let how = Child {
        fresh: false,
        seen: Some(&seen),
    };
    let output = timed_as(file, cmd, &how);
    let turns = std::fs::read_to_string(&seen)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("turns\t"))
        .count();
    let _ = std::fs::remove_file(&seen);
    Ok((output?, turns))
}

/// The blocks showing `s`'s command whose text is not `output`, each with
/// the first line where they part.
fn stale_blocks(s: &Shown, output: &str) -> Result<Vec<String>> {
    let root = kbuild::root();
    let mut stale = Vec::new();
    for f in &s.files {
        let text = std::fs::read_to_string(root.join(f))?;
        for b in blocks(&text).with_context(|| f.clone())? {
            let now = body(b.markdown, output);
            if b.cmd == s.cmd && text[b.body.clone()] != now {
                stale.push(format!(
                    "{f}: xtask {}: {}",
                    s.cmd,
                    first_difference(&text[b.body.clone()], &now)
                ));
                break;
            }
        }
    }
    Ok(stale)
}

/// Where two texts part: the first line that differs, as the book has it
/// and as the command prints it.
fn first_difference(book: &str, now: &str) -> String {
    let (mut b, mut n) = (book.lines(), now.lines());
    let mut line = 1;
    loop {
        match (b.next(), n.next()) {
            (Some(x), Some(y)) if x == y => line += 1,
            (None, None) => return "the same lines, other line ends".into(),
            (x, y) => {
                return format!(
                    "line {line} of the block: the book has {}, the command prints {}",
                    x.map_or("nothing".into(), |x| format!("`{x}`")),
                    y.map_or("nothing".into(), |y| format!("`{y}`"))
                )
            }
        }
    }
}

/// Whether the command may run while others run (see
/// [`runs_beside_others`]), among every command the book shows.
pub fn shown_runs_beside_others(s: &Shown, all: &[Shown]) -> bool {
    let commands: Vec<(String, String)> = all
        .iter()
        .map(|x| (x.cmd.clone(), x.files.join(", ")))
        .collect();
    runs_beside_others(&s.cmd, &commands)
}

pub fn docs_dir() -> PathBuf {
    kbuild::root().join("docs")
}

/// Every `.md` file under `dir`, at any depth, sorted.
fn markdown_under(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).with_context(|| format!("no {} directory", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(markdown_under(&p)?);
        } else if p.extension().is_some_and(|x| x == "md") {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

/// The files whose output blocks are generated and whose links are
/// checked: the README and every Markdown file of the book (docs/).
pub fn generated_files() -> Result<Vec<PathBuf>> {
    let mut files = vec![kbuild::root().join("README.md")];
    files.extend(markdown_under(&docs_dir())?);
    Ok(files)
}

/// Regenerates (or checks) the generated files among `only` (all when
/// empty); returns the stale blocks.
/// A file `only` names that has no generated blocks' place is refused.
pub fn docs_stale_in(check: bool, only: &[PathBuf]) -> Result<Vec<String>> {
    let mut stale = Vec::new();
    let mut files = generated_files()?;
    if !only.is_empty() {
        let root = kbuild::root();
        let mut wanted = Vec::new();
        for o in only {
            let p = if o.is_absolute() {
                o.clone()
            } else {
                root.join(o)
            };
            let p = p
                .canonicalize()
                .with_context(|| format!("--only {}: no such file", o.display()))?;
            if !files
                .iter()
                .any(|f| f.canonicalize().ok().as_ref() == Some(&p))
            {
                bail!(
                    "--only {}: not README.md or a Markdown file under docs/",
                    o.display()
                );
            }
            wanted.push(p);
        }
        files.retain(|f| f.canonicalize().is_ok_and(|c| wanted.contains(&c)));
    }
    // Each command runs once even when several chapters show it, and the
    // commands run side by side (each is a boot or a few, one host thread
    // each) before any file is rewritten.
    let mut texts = Vec::new();
    let mut commands: Vec<(String, String)> = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f)?;
        let name = f.file_name().unwrap_or_default().to_string_lossy();
        regenerate(&text, &mut |cmd: &str| {
            if !commands.iter().any(|(c, _)| c == cmd) {
                commands.push((cmd.to_string(), name.to_string()));
            }
            Ok(String::new())
        })
        .with_context(|| f.display().to_string())?;
        texts.push(text);
    }
    let mut cache = run_all(&commands)?;
    let compare = |cache: &std::collections::HashMap<String, Witnessed>| {
        let mut out = Vec::new();
        for (f, text) in files.iter().zip(&texts) {
            let mut run = |cmd: &str| -> Result<String> {
                cache
                    .get(cmd)
                    .map(|(o, _)| o.clone())
                    .with_context(|| format!("xtask {cmd} did not run"))
            };
            let (new, changed) =
                regenerate(text, &mut run).with_context(|| f.display().to_string())?;
            out.push((new, changed));
        }
        anyhow::Ok(out)
    };
    let mut compared = compare(&cache)?;
    if check {
        // A command whose boots took turns on several CPUs and whose output
        // differs runs once more, every boot fresh, and that run decides
        // (as in `cargo xtask test`'s docs tests: see [`check_shown`]).
        let changed: std::collections::HashSet<&String> =
            compared.iter().flat_map(|(_, c)| c).collect();
        let mut again = false;
        for (c, file) in &commands {
            let turns = cache.get(c).map_or(0, |(_, t)| *t);
            if turns > 0 && changed.contains(c) {
                let out = again_fresh(file, c, "a block shows other text", turns)?;
                cache.insert(c.clone(), (out, 0));
                again = true;
            }
        }
        if again {
            compared = compare(&cache)?;
        }
    }
    for ((f, text), (new, changed)) in files.iter().zip(&texts).zip(compared) {
        for c in changed {
            stale.push(format!("{}: xtask {c}", f.display()));
        }
        if !check && &new != text {
            std::fs::write(f, new)?;
        }
    }
    Ok(stale)
}

/// Whether `cmd` may run beside the other `commands`: those that boot into
/// their own scratch directories or boot nothing. A `bench` writes its
/// `--out` directory: beside others when no other command names the same
/// one. `gdb` listens on a fixed port and `test` runs boots side by side
/// itself: those run alone. Nothing else is a reason to run alone: each
/// command boots files no other command writes. (Three multi-CPU blocks
/// once came out different beside others and the same alone. Two ways let
/// a command boot files another had just written: a bench's build with
/// features put its kernel where the normal kernel lies, under a
/// `forktest` booting it, whose model figures move with the code's layout;
/// and two benches side by side copied their variants of the same name
/// into one shared directory, where one could rewrite the files the other
/// was booting. Builds with features now have a target directory of their own,
/// a bench's variants a directory of the bench's own, and every copy is
/// renamed into place whole: [`crate::kbuild::build_into`].)
pub(crate) fn runs_beside_others(cmd: &str, commands: &[(String, String)]) -> bool {
    const ALONE: &[&str] = &["gdb", "test"];
    let w = words(cmd);
    match w.first().map(String::as_str) {
        None => false,
        Some(first) if ALONE.contains(&first) => false,
        Some("bench") => {
            let out = out_dir(&w);
            out.is_some()
                && commands
                    .iter()
                    .filter(|(c, _)| c != cmd)
                    .all(|(c, _)| out_dir(&words(c)) != out)
        }
        Some(_) => true,
    }
}

/// The directory a command's `--out` names, if it names one.
fn out_dir(words: &[String]) -> Option<&str> {
    words
        .windows(2)
        .find(|p| p[0] == "--out")
        .map(|p| p[1].as_str())
}

/// Runs every `(command, file that shows it)`: those that may, as many at a
/// time as the host has CPUs (at most 4), then the others one by one; the
/// outputs by command, each with how many of its boots took turns on
/// several CPUs ([`witnessed`]). The first failure, in the commands' order, is the
/// error.
fn run_all(commands: &[(String, String)]) -> Result<std::collections::HashMap<String, Witnessed>> {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    let workers = cpus.clamp(1, 4).min(commands.len().max(1));
    // The side-by-side commands first, in the order the files show them.
    let order: Vec<usize> = (0..commands.len())
        .filter(|&k| runs_beside_others(&commands[k].0, commands))
        .collect();
    let alone: Vec<usize> = (0..commands.len())
        .filter(|&k| !runs_beside_others(&commands[k].0, commands))
        .collect();
    let ran = crate::parallel::map(&order, workers, |&k| {
        let (cmd, file) = &commands[k];
        witnessed(file, cmd)
    });
    let mut outputs: Vec<Option<Result<Witnessed>>> = commands.iter().map(|_| None).collect();
    for (&k, o) in order.iter().zip(ran) {
        outputs[k] = Some(o);
    }
    for k in alone {
        let (cmd, file) = &commands[k];
        outputs[k] = Some(witnessed(file, cmd));
    }
    let mut cache = std::collections::HashMap::new();
    for ((cmd, _), o) in commands.iter().zip(outputs) {
        let o = o.with_context(|| format!("xtask {cmd} did not run"))??;
        cache.insert(cmd.clone(), o);
    }
    Ok(cache)
}

/// [`command_output_as`], its line on stderr saying which file shows the
/// command and how long it took (where the docs check spends its time).
fn timed_as(file: &str, cmd: &str, how: &Child) -> Result<String> {
    let t = std::time::Instant::now();
    let o = command_output_as(cmd, how);
    eprintln!(
        "docs: {file}: xtask {cmd} ({:.1} s{})",
        t.elapsed().as_secs_f64(),
        if o.is_ok() { "" } else { ", failed" }
    );
    o
}

/// The internal links of the README and the book that do not resolve.
pub fn broken_links() -> Result<Vec<String>> {
    links::broken_links(&kbuild::root(), &generated_files()?)
}

/// The tests README.md and docs/ name (`` `test: NAME` ``) that no test
/// of `cargo xtask test --list` is.
pub fn unknown_tests() -> Result<Vec<String>> {
    let tests: Vec<String> = crate::cmd::test::list(None)?
        .into_iter()
        .map(|t| t.name)
        .collect();
    let root = kbuild::root();
    let mut sources = Vec::new();
    for dir in ["abi", "xtask", "model"] {
        rust_under(&root.join(dir), &mut sources)?;
    }
    let texts: Vec<String> = sources
        .iter()
        .map(std::fs::read_to_string)
        .collect::<std::io::Result<_>>()?;
    let host = claims::host_unit_tests(texts.iter().map(String::as_str));
    claims::unknown_tests(&root, &generated_files()?, &tests, &host)
}

/// Every `.rs` file under `dir` (`target` and hidden folders left out).
fn rust_under(dir: &Path, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("no {} directory", dir.display()))? {
        let p = e?.path();
        let name = p.file_name().unwrap_or_default().to_string_lossy();
        if p.is_dir() {
            if name != "target" && !name.starts_with('.') {
                rust_under(&p, out)?;
            }
        } else if name.ends_with(".rs") {
            out.push(p);
        }
    }
    Ok(())
}

/// How many `` `test: NAME` `` spans README.md and docs/ hold.
fn named_test_count() -> Result<usize> {
    let mut n = 0;
    for f in generated_files()? {
        n += claims::named_tests(&std::fs::read_to_string(&f)?).len();
    }
    Ok(n)
}

pub fn docs(a: DocsArgs) -> Result<i32> {
    if let Some(t) = a.table {
        return table::print(t);
    }
    let broken = broken_links()?;
    let unknown = unknown_tests()?;
    if a.claims {
        for b in &broken {
            eprintln!("broken link: {b}");
        }
        for u in &unknown {
            eprintln!("unknown test: {u}");
        }
        let named = named_test_count()?;
        eprintln!(
            "docs: {} broken link(s), {} of {named} named test(s) unknown",
            broken.len(),
            unknown.len()
        );
        return Ok(if broken.is_empty() && unknown.is_empty() {
            0
        } else {
            1
        });
    }
    let stale = docs_stale_in(a.check, &a.only)?;
    if !broken.is_empty() {
        eprintln!("docs: these internal links do not resolve:");
        for b in &broken {
            eprintln!("  {b}");
        }
    }
    if !unknown.is_empty() {
        eprintln!("docs: these claims name a test that does not exist:");
        for u in &unknown {
            eprintln!("  {u}");
        }
    } else {
        eprintln!("docs: every named test exists");
    }
    if a.check && !stale.is_empty() {
        eprintln!("docs: these outputs no longer match the code (run `cargo xtask docs`):");
        for s in &stale {
            eprintln!("  {s}");
        }
    }
    if !a.check {
        eprintln!("docs: {} block(s) updated", stale.len());
    } else if stale.is_empty() {
        eprintln!("docs: every output block matches");
    }
    if broken.is_empty() {
        eprintln!("docs: every internal link resolves");
    }
    Ok(
        if broken.is_empty() && unknown.is_empty() && (!a.check || stale.is_empty()) {
            0
        } else {
            1
        },
    )
}

#[cfg(test)]
mod docs_tests {
    use super::*;

    #[test]
    fn commands_that_share_a_directory_or_a_port_run_alone() {
        let bench = |out: &str| format!("bench --prog forktest -n 1 --out {out}");
        let all: Vec<(String, String)> = [
            "run --no-save --clock icount --prog locks".to_string(),
            bench("target/a"),
            bench("target/b"),
            format!("{} --clock model", bench("target/b")),
            "bench --prog forktest -n 1".to_string(),
        ]
        .into_iter()
        .map(|c| (c, "x.md".to_string()))
        .collect();
        let beside = |c: &str| runs_beside_others(c, &all);
        assert!(beside("run --no-save --clock icount --prog locks"));
        assert!(beside("docs --table lmbench"));
        assert!(beside("lmbench --no-save --append \"batches=4\""));
        // Its own --out: beside the others; one another names too, or
        // none (results/): alone.
        assert!(beside(&bench("target/a")));
        assert!(!beside(&bench("target/b")));
        assert!(!beside("bench --prog forktest -n 1"));
        assert!(!beside("gdb --batch --stop-at sysenter --port 12350"));
        assert!(!beside("test --boots-only --filter x"));
        // Several CPUs, or a build with features: beside the others.
        assert!(beside("bench --smp 2 -n 1 --out target/c"));
        assert!(beside("bench -n 1 --features after=x --out target/c"));
        assert!(beside("forktest --profiles k10"));
        assert!(!beside(""));
    }

    #[test]
    fn blocks_are_regenerated_and_reported() {
        let text = "# T\n<!-- output: xtask trace int80 -->\n```text\nold\n```\n<!-- end output -->\ntail\n";
        let (new, changed) = regenerate(text, &mut |c| Ok(format!("out of {c}"))).unwrap();
        assert_eq!(new, "# T\n<!-- output: xtask trace int80 -->\n```text\nout of trace int80\n```\n<!-- end output -->\ntail\n");
        assert_eq!(changed, ["trace int80"]);
        let (again, changed) = regenerate(&new, &mut |c| Ok(format!("out of {c}"))).unwrap();
        assert_eq!(again, new);
        assert!(changed.is_empty());
        assert!(regenerate("<!-- output: xtask x -->\nno end", &mut |_| Ok(
            String::new()
        ))
        .is_err());
    }

    /// A post's environment line loses the host's CPU and the sets'
    /// revisions; the note on uncommitted changes goes.
    #[test]
    fn a_post_is_made_stable() {
        let post = "i386 testbed: QEMU 7.2.22 TCG, host CPU AMD EPYC 7B13, guest cpu=qemu32, clock=icount (exact instruction counts, not cycles), before=79be713d8be3 after=79be713d8be3-dirty.aa9e898de534 (features: x), 3 boots per side\nafter was built from uncommitted changes (diff aa9e898de534): commit them for the command to rebuild it.\nReproduce: cargo xtask bench -n 3";
        assert_eq!(
            normalize(post),
            "i386 testbed: QEMU <version> TCG, host CPU <host>, guest cpu=qemu32, clock=icount (exact instruction counts, not cycles), before=<rev> after=<rev> (features: x), 3 boots per side\nReproduce: cargo xtask bench -n 3"
        );
    }

    #[test]
    fn normalizes_volatile_tokens() {
        let n = normalize("i386 testbed  QEMU 7.2.22 TCG  clock=icount\ni386 testbed kernel 92c760b-dirty\nresults: x\nkeep  \n");
        assert_eq!(
            n,
            "i386 testbed  QEMU <version> TCG  clock=icount\ni386 testbed kernel <rev>\nkeep"
        );
    }

    #[test]
    fn the_readme_and_the_book_are_generated() {
        let files = generated_files().unwrap();
        let readme = kbuild::root().join("README.md");
        assert!(files.contains(&readme));
        assert!(files.contains(&docs_dir().join("SUMMARY.md")));
        // Its figures are output blocks, not hand-copied text.
        let text = std::fs::read_to_string(readme).unwrap();
        for marker in [
            format!("{BLOCK_START}run --no-save -->"),
            format!("{MARKDOWN_START}docs --table mechanisms -->"),
        ] {
            assert!(text.contains(&marker), "{marker}");
        }
    }

    #[test]
    fn markdown_blocks_go_in_unfenced() {
        let text = "<!-- markdown: xtask docs --table t -->\nold\n<!-- end output -->\n<!-- output: xtask x -->\n<!-- end output -->\n";
        let (new, changed) = regenerate(text, &mut |c| Ok(format!("| {c} |"))).unwrap();
        assert_eq!(new, "<!-- markdown: xtask docs --table t -->\n| docs --table t |\n<!-- end output -->\n<!-- output: xtask x -->\n```text\n| x |\n```\n<!-- end output -->\n");
        assert_eq!(changed, ["docs --table t", "x"]);
    }

    #[test]
    fn pass_lines_lose_their_time() {
        assert_eq!(
            normalize("PASS kernel tests on qemu32 (Intel: no AMD syscall) (2.0 s)\nPASS x (a s)"),
            "PASS kernel tests on qemu32 (Intel: no AMD syscall) (<secs> s)\nPASS x (a s)"
        );
    }

    /// The book's links are checked by the host tests too, without the
    /// boots `docs --check` needs for its output blocks.
    #[test]
    fn every_internal_link_of_the_book_resolves() {
        let broken = broken_links().unwrap();
        assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    }

    /// Every test the book names exists (checked without a boot: the list
    /// is `cargo xtask test --list`'s).
    #[test]
    fn every_test_the_book_names_exists() {
        let unknown = unknown_tests().unwrap();
        assert!(unknown.is_empty(), "unknown tests:\n{}", unknown.join("\n"));
    }

    /// `--only` names book files; anything else is refused before a
    /// command runs.
    #[test]
    fn only_takes_book_files() {
        let e = docs_stale_in(true, &[PathBuf::from("docs/no-such-chapter.md")]).unwrap_err();
        assert!(e.to_string().contains("no such file"), "{e}");
        let e = docs_stale_in(true, &[PathBuf::from("Cargo.toml")]).unwrap_err();
        assert!(e.to_string().contains("not README.md"), "{e}");
        // A file with no output blocks runs nothing and finds nothing stale.
        assert!(docs_stale_in(true, &[PathBuf::from("docs/SUMMARY.md")])
            .unwrap()
            .is_empty());
    }

    /// Each command once, with every file that shows it; its blocks are
    /// found again where they are, whatever their kind.
    #[test]
    fn blocks_are_found_with_their_bodies() {
        let text = "a\n<!-- output: xtask trace int80 -->\n```text\nold\n```\n<!-- end output -->\n<!-- markdown: xtask docs --table t -->\n| x |\n<!-- end output -->\n";
        let b = blocks(text).unwrap();
        assert_eq!(b.len(), 2);
        assert_eq!((b[0].cmd.as_str(), b[0].markdown), ("trace int80", false));
        assert_eq!(&text[b[0].body.clone()], body(false, "old"));
        assert_eq!((b[1].cmd.as_str(), b[1].markdown), ("docs --table t", true));
        assert_eq!(&text[b[1].body.clone()], body(true, "| x |"));
        let shown = shown_commands().unwrap();
        let mechanisms = shown
            .iter()
            .find(|s| s.cmd == "docs --table mechanisms")
            .unwrap();
        assert!(mechanisms.files.len() >= 2, "{mechanisms:?}");
        assert!(mechanisms.files.contains(&"README.md".to_string()));
        let mut cmds: Vec<&str> = shown.iter().map(|s| s.cmd.as_str()).collect();
        let n = cmds.len();
        cmds.sort();
        cmds.dedup();
        assert_eq!(cmds.len(), n, "a command listed twice");
    }

    #[test]
    fn quoted_words() {
        assert_eq!(
            words(r#"run --append "crash=overflow x=1" --no-save"#),
            ["run", "--append", "crash=overflow x=1", "--no-save"]
        );
    }

    #[test]
    fn a_stale_block_names_the_first_line_that_differs() {
        assert_eq!(
            first_difference("a\nb\nc\n", "a\nb\nd\n"),
            "line 3 of the block: the book has `c`, the command prints `d`"
        );
        assert_eq!(
            first_difference("a\n", "a\nmore\n"),
            "line 2 of the block: the book has nothing, the command prints `more`"
        );
        assert_eq!(
            first_difference("a\nb", "a\nb\n"),
            "the same lines, other line ends"
        );
    }
}
