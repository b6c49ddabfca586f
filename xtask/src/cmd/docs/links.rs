//! The book's internal links: every relative Markdown link in README.md and
//! docs/ must name a file of the repository, and a `#anchor` into a Markdown
//! file must name one of its headings (GitHub's heading ids). Links with a
//! scheme (`https:`, `mailto:`) are not followed.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};

/// One link found in a Markdown text: its line (1-based) and its target as
/// written (`chapter.md#section`, `../kernel/src/main.rs`, `#here`).
#[derive(Debug, PartialEq, Eq)]
pub struct Link {
    pub line: usize,
    pub target: String,
}

/// Removes inline code spans (`` `...` ``), so a link written as code
/// (`` `[a](b)` ``) is not taken for one.
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(i) = rest.find('`') {
        out.push_str(&rest[..i]);
        let ticks = rest[i..].chars().take_while(|&c| c == '`').count();
        let fence = &rest[i..i + ticks];
        match rest[i + ticks..].find(fence) {
            Some(j) => rest = &rest[i + ticks + j + ticks..],
            None => {
                // An unmatched backtick is literal text.
                out.push_str(fence);
                rest = &rest[i + ticks..];
            }
        }
    }
    out.push_str(rest);
    out
}

/// Whether `line` opens or closes a fenced code block (```` ``` ```` or `~~~`).
fn is_fence(line: &str) -> bool {
    let t = line.trim_start();
    t.starts_with("```") || t.starts_with("~~~")
}

/// The lines of `text` outside fenced code blocks, with their numbers.
fn prose_lines(text: &str) -> impl Iterator<Item = (usize, &str)> {
    let mut in_fence = false;
    text.lines().enumerate().filter_map(move |(i, l)| {
        if is_fence(l) {
            in_fence = !in_fence;
            return None;
        }
        (!in_fence).then_some((i + 1, l))
    })
}

/// The target of a link destination: `<a b.md>` unwrapped, a `"title"` dropped.
fn destination(raw: &str) -> String {
    let raw = raw.trim();
    if let Some(inner) = raw.strip_prefix('<') {
        return inner.split('>').next().unwrap_or("").to_string();
    }
    raw.split_whitespace().next().unwrap_or("").to_string()
}

/// Every inline link (`[text](target)`, images too) and reference
/// definition (`[label]: target`) of `text` outside code.
pub fn links_in(text: &str) -> Vec<Link> {
    let mut out = Vec::new();
    for (line, raw) in prose_lines(text) {
        let l = without_code_spans(raw);
        // Reference definitions: `[label]: target` at the start of a line.
        let t = l.trim_start();
        if t.starts_with('[') && !t.starts_with("[^") {
            if let Some(i) = t.find("]:") {
                out.push(Link {
                    line,
                    target: destination(&t[i + 2..]),
                });
                continue;
            }
        }
        let mut rest = l.as_str();
        while let Some(i) = rest.find("](") {
            let after = &rest[i + 2..];
            // The destination ends at the parenthesis that balances the opening one.
            let mut depth = 0usize;
            let mut end = None;
            for (j, c) in after.char_indices() {
                match c {
                    '(' => depth += 1,
                    ')' if depth == 0 => {
                        end = Some(j);
                        break;
                    }
                    ')' => depth -= 1,
                    _ => {}
                }
            }
            let Some(end) = end else { break };
            out.push(Link {
                line,
                target: destination(&after[..end]),
            });
            rest = &after[end + 1..];
        }
    }
    out
}

/// GitHub's id for a heading: the text lowercased, everything but letters,
/// digits, `-`, `_` and spaces removed, spaces made `-`. Links in a heading
/// count by their text.
pub fn slug(heading: &str) -> String {
    let text = without_code_spans_keep_text(heading);
    // `[text](target)` counts as `text`.
    let mut plain = String::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find("](") {
        plain.push_str(&rest[..i]);
        match rest[i..].find(')') {
            Some(j) => rest = &rest[i + j + 1..],
            None => {
                rest = &rest[i..];
                break;
            }
        }
    }
    plain.push_str(rest);
    plain
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// A heading's text with the backticks of its code spans dropped (their
/// text stays: it is part of the heading's id).
fn without_code_spans_keep_text(s: &str) -> String {
    s.replace('`', "")
}

/// The anchors a Markdown text offers: its headings' ids (a repeated id
/// gets `-1`, `-2`, ... as on GitHub) and any `id="..."`/`name="..."` of
/// inline HTML.
pub fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    for (_, l) in prose_lines(text) {
        let t = l.trim_start();
        let hashes = t.chars().take_while(|&c| c == '#').count();
        if (1..=6).contains(&hashes) && t[hashes..].starts_with(' ') {
            let title = t[hashes..].trim().trim_end_matches('#').trim();
            let base = slug(title);
            let n = seen.entry(base.clone()).or_insert(0);
            let id = if *n == 0 {
                base.clone()
            } else {
                format!("{base}-{n}")
            };
            *n += 1;
            out.insert(id);
        }
        for attr in ["id=\"", "name=\""] {
            let mut rest = l;
            while let Some(i) = rest.find(attr) {
                let v = &rest[i + attr.len()..];
                if let Some(j) = v.find('"') {
                    out.insert(v[..j].to_string());
                }
                rest = v;
            }
        }
    }
    out
}

/// Whether a link leaves the repository's files (a URL, a mail address).
fn is_external(target: &str) -> bool {
    target.contains("://") || target.starts_with("mailto:") || target.starts_with("data:")
}

/// `base/rel` with `.` and `..` resolved textually (the file need not exist).
fn join_clean(base: &Path, rel: &str) -> PathBuf {
    let mut out = PathBuf::new();
    for c in base.join(rel).components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            c => out.push(c),
        }
    }
    out
}

/// The broken links of `files` (paths inside `root`): for each, `file:line:
/// target: why`. A target resolves against its file's folder (or `root`
/// when it starts with `/`, as GitHub reads it); it must exist inside
/// `root`, and an anchor into a Markdown file must be one of its headings.
pub fn broken_links(root: &Path, files: &[PathBuf]) -> Result<Vec<String>> {
    let mut texts: HashMap<PathBuf, String> = HashMap::new();
    let mut read = |p: &Path| -> Result<String> {
        if let Some(t) = texts.get(p) {
            return Ok(t.clone());
        }
        let t = std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        texts.insert(p.to_path_buf(), t.clone());
        Ok(t)
    };
    let mut broken = Vec::new();
    for file in files {
        let text = read(file)?;
        let shown = file
            .strip_prefix(root)
            .unwrap_or(file)
            .display()
            .to_string();
        let dir = file.parent().unwrap_or(root);
        for link in links_in(&text) {
            let target = link.target.as_str();
            if target.is_empty() || is_external(target) {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((p, a)) => (p, Some(a)),
                None => (target, None),
            };
            let dest = if path.is_empty() {
                file.clone()
            } else if let Some(abs) = path.strip_prefix('/') {
                join_clean(root, abs)
            } else {
                join_clean(dir, path)
            };
            let why = if !dest.starts_with(root) {
                Some("outside the repository".to_string())
            } else if !dest.exists() {
                Some(format!(
                    "no such file {}",
                    dest.strip_prefix(root).unwrap_or(&dest).display()
                ))
            } else {
                match anchor {
                    Some(a) if dest.extension().is_some_and(|x| x == "md") => {
                        if anchors(&read(&dest)?).contains(a) {
                            None
                        } else {
                            Some(format!(
                                "no heading #{a} in {}",
                                dest.strip_prefix(root).unwrap_or(&dest).display()
                            ))
                        }
                    }
                    // Anchors into source files (`#L10`) are not checked.
                    _ => None,
                }
            };
            if let Some(why) = why {
                broken.push(format!("{shown}:{}: ({target}): {why}", link.line));
            }
        }
    }
    Ok(broken)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn links_outside_code_are_found() {
        let text = "See [a](a.md) and ![img](pic.png \"t\").\n\
                    `[not](code.md)` and [b](<b c.md>)\n\
                    ```\n[fenced](x.md)\n```\n\
                    [ref]: ref.md\n\
                    [x](f(1).md)";
        let got: Vec<(usize, String)> = links_in(text)
            .into_iter()
            .map(|l| (l.line, l.target))
            .collect();
        let want = [
            (1, "a.md"),
            (1, "pic.png"),
            (2, "b c.md"),
            (6, "ref.md"),
            (7, "f(1).md"),
        ]
        .map(|(n, t)| (n, t.to_string()));
        assert_eq!(got, want);
    }

    #[test]
    fn heading_ids_follow_github() {
        assert_eq!(slug("The `int $0x80` path"), "the-int-0x80-path");
        assert_eq!(slug("EFLAGS: `pushl $2; popfl`"), "eflags-pushl-2-popfl");
        assert_eq!(
            slug("Default formulas and `--classic`"),
            "default-formulas-and---classic"
        );
        assert_eq!(slug("AMD `syscall`/`sysret`"), "amd-syscallsysret");
        assert_eq!(slug("See [the model](model.md)"), "see-the-model");
        let a = anchors("# A\n## Same\n```\n# not a heading\n```\n## Same\n<a id=\"here\"></a>\n");
        for id in ["a", "same", "same-1", "here"] {
            assert!(a.contains(id), "{id}");
        }
        assert!(!a.contains("not-a-heading"));
    }

    #[test]
    fn a_broken_link_is_reported() {
        let root = std::env::temp_dir().join(format!("xtask-links-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("docs")).unwrap();
        std::fs::write(root.join("src.rs"), "").unwrap();
        std::fs::write(
            root.join("README.md"),
            "# Top\n[ok](docs/ch.md#part-one) [src](src.rs#L3) [web](https://example.org/x.md)\n\
             [gone](docs/gone.md)\n[bad anchor](docs/ch.md#part-two)\n[self](#top) [noself](#nowhere)\n",
        )
        .unwrap();
        std::fs::write(
            root.join("docs/ch.md"),
            "# Chapter\n## Part one\n[up](../README.md) [out](../../elsewhere.md)\n",
        )
        .unwrap();
        let files = [root.join("README.md"), root.join("docs/ch.md")];
        let broken = broken_links(&root, &files).unwrap();
        let _ = std::fs::remove_dir_all(&root);
        assert_eq!(
            broken,
            [
                "README.md:3: (docs/gone.md): no such file docs/gone.md",
                "README.md:4: (docs/ch.md#part-two): no heading #part-two in docs/ch.md",
                "README.md:5: (#nowhere): no heading #nowhere in README.md",
                "docs/ch.md:3: (../../elsewhere.md): outside the repository",
            ]
        );
    }
}
