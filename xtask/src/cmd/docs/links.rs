//! The book's internal links: every relative Markdown link in README.md and
//! docs/ must name a file of the repository, and a `#anchor` into a Markdown
//! file must name one of its headings (GitHub's heading ids). Links with a
//! scheme (`https:`, `mailto:`) are not followed. The Markdown is parsed by
//! `pulldown-cmark`: what is code (spans, fenced and indented blocks) holds
//! no link, as on GitHub.

use std::collections::{HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

use anyhow::{Context, Result};
use pulldown_cmark::{Event, LinkType, Options, Parser, Tag, TagEnd};

/// One link found in a Markdown text: its line (1-based) and its target as
/// written (`chapter.md#section`, `../kernel/src/main.rs`, `#here`).
#[derive(Debug, PartialEq, Eq)]
pub struct Link {
    pub line: usize,
    pub target: String,
}

/// How the book is read: GitHub's Markdown (tables, footnotes) as
/// `pulldown-cmark` parses it.
pub fn markdown(text: &str) -> Parser<'_> {
    Parser::new_ext(text, Options::ENABLE_TABLES | Options::ENABLE_FOOTNOTES)
}

/// The 1-based line of byte `offset` of `text`.
pub fn line_of(text: &str, offset: usize) -> usize {
    text[..offset].matches('\n').count() + 1
}

/// Every inline link (`[text](target)`, images too, `<autolinks>`) and
/// reference definition (`[label]: target`) of `text`, in the text's
/// order; code spans and code blocks hold none. A link by reference
/// (`[text][label]`) is its definition's, counted there once.
pub fn links_in(text: &str) -> Vec<Link> {
    let p = markdown(text);
    let mut found: Vec<(usize, String)> = p
        .reference_definitions()
        .iter()
        .map(|(_, d)| (d.span.start, d.dest.to_string()))
        .collect();
    for (e, at) in p.into_offset_iter() {
        if let Event::Start(
            Tag::Link {
                link_type,
                dest_url,
                ..
            }
            | Tag::Image {
                link_type,
                dest_url,
                ..
            },
        ) = e
        {
            if matches!(link_type, LinkType::Inline | LinkType::Autolink) {
                found.push((at.start, dest_url.to_string()));
            }
        }
    }
    found.sort_by_key(|(at, _)| *at);
    found
        .into_iter()
        .map(|(at, target)| Link {
            line: line_of(text, at),
            target,
        })
        .collect()
}

/// GitHub's id for a heading's text: lowercased, everything but letters,
/// digits, `-`, `_` and spaces removed, spaces made `-`.
pub fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | ' '))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

/// The anchors a Markdown text offers: its headings' ids (from their text:
/// a code span's and a link's text count; a repeated id gets `-1`, `-2`,
/// ... as on GitHub) and any `id="..."`/`name="..."` of its HTML.
pub fn anchors(text: &str) -> HashSet<String> {
    let mut out = HashSet::new();
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut heading: Option<String> = None;
    for e in markdown(text) {
        match e {
            Event::Start(Tag::Heading { .. }) => heading = Some(String::new()),
            Event::Text(t) | Event::Code(t) if heading.is_some() => {
                heading.get_or_insert_default().push_str(&t);
            }
            Event::End(TagEnd::Heading(_)) => {
                let base = slug(&heading.take().unwrap_or_default());
                let n = seen.entry(base.clone()).or_insert(0);
                out.insert(if *n == 0 {
                    base.clone()
                } else {
                    format!("{base}-{n}")
                });
                *n += 1;
            }
            Event::Html(h) | Event::InlineHtml(h) => {
                for attr in ["id=\"", "name=\""] {
                    for v in h.split(attr).skip(1) {
                        if let Some((id, _)) = v.split_once('"') {
                            out.insert(id.to_string());
                        }
                    }
                }
            }
            _ => {}
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
        let a = anchors(
            "# The `int $0x80` path\n## EFLAGS: `pushl $2; popfl`\n\
             ## Default formulas and `--classic`\n### AMD `syscall`/`sysret`\n\
             ## See [the model](model.md)\n",
        );
        for id in [
            "the-int-0x80-path",
            "eflags-pushl-2-popfl",
            "default-formulas-and---classic",
            "amd-syscallsysret",
            "see-the-model",
        ] {
            assert!(a.contains(id), "{id}: {a:?}");
        }
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
