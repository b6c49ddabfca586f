//! Claims that a test asserts something name the test. In README.md and
//! docs/, an inline code span `` `test: NAME` `` outside code blocks names a
//! test of `cargo xtask test` by the start of its name (as `--filter`
//! picks it: `cargo xtask test --filter "NAME"` runs it); `docs --check`
//! fails where no test's name starts with it, so a sentence cannot go on
//! citing a test that was renamed or removed.

use std::path::Path;

use anyhow::Result;

/// What opens a test's name inside a code span.
pub const PREFIX: &str = "test: ";

/// One test a text names: the line its paragraph starts on, and the start
/// of the test's name.
#[derive(Debug, PartialEq, Eq)]
pub struct Named {
    pub line: usize,
    pub name: String,
}

/// Every `` `test: NAME` `` of `text` outside code blocks, with the line
/// its paragraph (list item, table row, heading) starts on; a code span
/// may wrap (`pulldown-cmark` reads its line break as a space).
pub fn named_tests(text: &str) -> Vec<Named> {
    use pulldown_cmark::{Event, Tag};
    let mut out = Vec::new();
    let mut block = 0;
    for (e, at) in super::markdown(text).into_offset_iter() {
        match e {
            Event::Start(
                Tag::Paragraph | Tag::Item | Tag::Heading { .. } | Tag::TableHead | Tag::TableRow,
            ) => block = at.start,
            Event::Code(c) => {
                if let Some(n) = c.trim().strip_prefix(PREFIX) {
                    out.push(Named {
                        line: super::line_of(text, block),
                        name: n.trim().to_string(),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// What opens the name of one host unit test: `` `test: host unit tests:
/// FN` `` names the `#[test] fn FN` of the host crates (`cargo xtask test`
/// runs them all as its first test, "host unit tests").
pub const HOST: &str = "host unit tests: ";

/// The host crates' unit tests: the name of each `fn` right after a
/// `#[test]` line in `sources` (file texts).
pub fn host_unit_tests<'a>(sources: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out = Vec::new();
    for text in sources {
        let mut after_attr = false;
        for l in text.lines() {
            let t = l.trim();
            if t == "#[test]" {
                after_attr = true;
                continue;
            }
            if after_attr {
                if let Some(rest) = t.strip_prefix("fn ") {
                    let name: String = rest
                        .chars()
                        .take_while(|c| c.is_alphanumeric() || *c == '_')
                        .collect();
                    out.push(name);
                    after_attr = false;
                } else if !t.starts_with("#[") && !t.starts_with("//") {
                    after_attr = false;
                }
            }
        }
    }
    out
}

/// Each named test of `files` (paths shown relative to `root`) that no
/// test of `tests` starts with, or, for a [`HOST`] name, that no host
/// unit test of `host` is: `file:line: `test: NAME``.
pub fn unknown_tests(
    root: &Path,
    files: &[std::path::PathBuf],
    tests: &[String],
    host: &[String],
) -> Result<Vec<String>> {
    let mut out = Vec::new();
    for f in files {
        let text = std::fs::read_to_string(f)?;
        for n in named_tests(&text) {
            let known = match n.name.strip_prefix(HOST) {
                Some(func) => host.iter().any(|h| h == func.trim()),
                None => tests.iter().any(|t| t.starts_with(&n.name)),
            };
            if !known {
                let of = if n.name.starts_with(HOST) {
                    "no #[test] fn of abi, xtask or model"
                } else {
                    "no test of `cargo xtask test --list`"
                };
                out.push(format!(
                    "{}:{}: `{PREFIX}{}` names {of}",
                    f.strip_prefix(root).unwrap_or(f).display(),
                    n.line,
                    n.name
                ));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_unit_tests_are_the_functions_after_a_test_attribute() {
        let src = "#[test]\nfn one() {}\n#[test]\n#[should_panic]\n// why\nfn two_2() {}\nfn not_a_test() {}\n#[test]\nlet x = 1;\nfn nor_this() {}\n";
        assert_eq!(host_unit_tests([src]), ["one", "two_2"]);
    }

    #[test]
    fn named_tests_are_found_outside_code_blocks_across_wrapped_lines() {
        let text = "A claim (`test: model: forktest\nunder modern`) and `other` code.\n\n```\n`test: inside a block`\n```\nAlso ``test: a `tick` name``.\n- one\n- two `test: x`\n";
        let got = named_tests(text);
        assert_eq!(
            got,
            [
                Named {
                    line: 1,
                    name: "model: forktest under modern".into()
                },
                Named {
                    line: 7,
                    name: "a `tick` name".into()
                },
                Named {
                    line: 9,
                    name: "x".into()
                },
            ]
        );
    }

    #[test]
    fn a_name_no_test_starts_with_is_reported_with_its_place() {
        let dir = std::env::temp_dir().join(format!("claims-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("c.md");
        std::fs::write(
            &f,
            "x\n\nSee `test: bochs agreement` and `test: gone test`.\n",
        )
        .unwrap();
        let tests = ["bochs agreement: Bochs ticks".to_string()];
        let got = unknown_tests(&dir, std::slice::from_ref(&f), &tests, &[]).unwrap();
        assert_eq!(
            got,
            ["c.md:3: `test: gone test` names no test of `cargo xtask test --list`"]
        );
        std::fs::write(
            &f,
            "`test: host unit tests: a_unit_test` `test: host unit tests: gone`\n",
        )
        .unwrap();
        let host = ["a_unit_test".to_string()];
        let got = unknown_tests(&dir, std::slice::from_ref(&f), &tests, &host).unwrap();
        assert_eq!(
            got,
            ["c.md:1: `test: host unit tests: gone` names no #[test] fn of abi, xtask or model"]
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
