//! `cargo xtask docs`: the command outputs docs/*.md and the README show,
//! regenerated from the commands themselves (`--check`: fail if any is
//! stale; `cargo xtask test` checks).

use std::path::PathBuf;
use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::kbuild;

/// `cargo xtask docs`: the outputs shown in docs/*.md, regenerated.
#[derive(Args)]
pub struct DocsArgs {
    /// Do not write: fail if any block differs from what the command prints now.
    #[arg(long)]
    pub check: bool,
}

const BLOCK_START: &str = "<!-- output: xtask ";
const BLOCK_END: &str = "<!-- end output -->";

/// Makes a command's output stable across builds and machines: the kernel's
/// git revision and the QEMU version become placeholders.
pub fn normalize(text: &str) -> String {
    text.lines()
        .filter(|l| !l.starts_with("results: ") && !l.starts_with("run: finished"))
        .map(|l| {
            let mut l = l.to_string();
            if let Some(rest) = l.strip_prefix("i386 testbed kernel ") {
                let _ = rest;
                l = "i386 testbed kernel <rev>".into();
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

/// Runs `cargo xtask <cmd>` (this binary) and returns its normalised stdout.
fn command_output(cmd: &str) -> Result<String> {
    let exe = std::env::current_exe()?;
    let o = Command::new(exe)
        .args(words(cmd))
        .current_dir(kbuild::root())
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

/// Rewrites every output block of `text`; returns the new text and the
/// commands whose output changed.
pub fn regenerate(
    text: &str,
    run: &mut dyn FnMut(&str) -> Result<String>,
) -> Result<(String, Vec<String>)> {
    let mut out = String::new();
    let mut changed = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find(BLOCK_START) {
        let line_end = rest[start..]
            .find('\n')
            .map(|i| start + i + 1)
            .context("unterminated output marker")?;
        let marker = &rest[start..line_end];
        let cmd = marker
            .trim()
            .strip_prefix(BLOCK_START)
            .and_then(|m| m.strip_suffix("-->"))
            .context("malformed output marker")?
            .trim()
            .to_string();
        let end = rest[line_end..]
            .find(BLOCK_END)
            .map(|i| line_end + i)
            .with_context(|| format!("no `{BLOCK_END}` after `xtask {cmd}`"))?;
        let old = &rest[line_end..end];
        let new = format!("```text\n{}\n```\n", run(&cmd)?);
        if old != new {
            changed.push(cmd);
        }
        out.push_str(&rest[..line_end]);
        out.push_str(&new);
        rest = &rest[end..];
    }
    out.push_str(rest);
    Ok((out, changed))
}

pub fn docs_dir() -> PathBuf {
    kbuild::root().join("docs")
}

/// The files whose output blocks are generated: every docs/*.md, and the
/// README (its figures are the same commands' output).
pub fn generated_files() -> Result<Vec<PathBuf>> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(docs_dir())
        .context("no docs/ directory")?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "md"))
        .collect();
    files.sort();
    files.push(kbuild::root().join("README.md"));
    Ok(files)
}

/// Regenerates (or checks) every generated file; returns the stale blocks.
pub fn docs_stale(check: bool) -> Result<Vec<String>> {
    let mut stale = Vec::new();
    let files = generated_files()?;
    // Each command runs once even when several chapters show it.
    let mut cache: std::collections::HashMap<String, String> = Default::default();
    for f in files {
        let text = std::fs::read_to_string(&f)?;
        let mut run = |cmd: &str| -> Result<String> {
            if let Some(o) = cache.get(cmd) {
                return Ok(o.clone());
            }
            eprintln!(
                "docs: {}: xtask {cmd}",
                f.file_name().unwrap_or_default().to_string_lossy()
            );
            let o = command_output(cmd)?;
            cache.insert(cmd.to_string(), o.clone());
            Ok(o)
        };
        let (new, changed) = regenerate(&text, &mut run)?;
        for c in changed {
            stale.push(format!("{}: xtask {c}", f.display()));
        }
        if !check && new != text {
            std::fs::write(&f, new)?;
        }
    }
    Ok(stale)
}

pub fn docs(a: DocsArgs) -> Result<i32> {
    let stale = docs_stale(a.check)?;
    if a.check && !stale.is_empty() {
        eprintln!("docs: these outputs no longer match the code (run `cargo xtask docs`):");
        for s in &stale {
            eprintln!("  {s}");
        }
        return Ok(1);
    }
    if !a.check {
        eprintln!("docs: {} block(s) updated", stale.len());
    } else {
        eprintln!("docs: every output block matches");
    }
    Ok(0)
}

#[cfg(test)]
mod docs_tests {
    use super::*;

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

    #[test]
    fn normalizes_volatile_tokens() {
        let n = normalize("i386 testbed  QEMU 7.2.22 TCG  clock=icount\ni386 testbed kernel 92c760b-dirty\nresults: x\nkeep  \n");
        assert_eq!(
            n,
            "i386 testbed  QEMU <version> TCG  clock=icount\ni386 testbed kernel <rev>\nkeep"
        );
    }

    #[test]
    fn the_readme_is_generated_too() {
        let files = generated_files().unwrap();
        let readme = kbuild::root().join("README.md");
        assert!(files.contains(&readme));
        // Its figures are output blocks, not hand-copied text.
        let text = std::fs::read_to_string(readme).unwrap();
        for cmd in ["run --no-save -->", "run --no-save --prog locks -->"] {
            assert!(text.contains(&format!("{BLOCK_START}{cmd}")), "{cmd}");
        }
    }

    #[test]
    fn quoted_words() {
        assert_eq!(
            words(r#"run --append "crash=overflow x=1" --no-save"#),
            ["run", "--append", "crash=overflow x=1", "--no-save"]
        );
    }
}
