//! The KTAP lines of a test boot (`mode=test`), read back: what the kernel
//! prints for LAVA and other KTAP readers beside its own records, checked
//! against those records so that the two never tell different stories.
//!
//! Written here rather than taken from a crate: no maintained Rust crate
//! reads KTAP (the one TAP reader on crates.io, `tap_parser` 0.1, had one
//! release and reads TAP 14, whose version line and subtest syntax differ
//! from KTAP's), and the kernel prints a flat list only: the version line,
//! one result line per test, the plan last. Lines that are none of these
//! (the kernel's other output) are skipped, as KTAP readers do.

use anyhow::{bail, Result};

/// One test's line.
#[derive(Debug, PartialEq, Eq)]
pub struct Case {
    pub number: u32,
    /// The description, `\#` unescaped.
    pub name: String,
    pub result: Outcome,
}

impl Case {
    /// The case is the kernel's `test` record of `name` and `result` (as the
    /// record has them, `None` where it has not); else the error saying both.
    pub fn is_record(&self, name: Option<&str>, result: Option<&str>) -> Result<(), String> {
        if name == Some(self.name.as_str()) && result == Some(self.result.word()) {
            return Ok(());
        }
        Err(format!(
            "KTAP test {} is {:?} ({}), the kernel's record {:?} ({})",
            self.number,
            self.name,
            self.result.word(),
            name.unwrap_or("?"),
            result.unwrap_or("?")
        ))
    }
}

#[derive(Debug, PartialEq, Eq, Clone, Copy)]
pub enum Outcome {
    Pass,
    Fail,
    Skip,
}

impl Outcome {
    /// The word of the kernel's `test` record (`pass`, `fail`, `skip`).
    pub fn word(self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail => "fail",
            Outcome::Skip => "skip",
        }
    }
}

/// The run: its cases and its plan.
#[derive(Debug)]
pub struct Run {
    pub cases: Vec<Case>,
    pub plan: Option<u32>,
}

/// The KTAP run in `serial`, if it has one (`None` without a version line):
/// numbers must follow 1, 2, 3...; the plan, when there, must count them.
pub fn parse(serial: &str) -> Result<Option<Run>> {
    let mut lines = serial.lines().map(|l| l.trim_end_matches('\r'));
    if !lines.any(|l| l == "KTAP version 1") {
        return Ok(None);
    }
    let mut run = Run {
        cases: Vec::new(),
        plan: None,
    };
    for l in lines {
        if let Some(n) = l.strip_prefix("1..") {
            if let Ok(n) = n.parse() {
                run.plan = Some(n);
                continue;
            }
        }
        let (ok, rest) = if let Some(r) = l.strip_prefix("ok ") {
            (true, r)
        } else if let Some(r) = l.strip_prefix("not ok ") {
            (false, r)
        } else {
            continue;
        };
        let Some((num, desc)) = rest.split_once(' ') else {
            continue;
        };
        let Ok(number) = num.parse::<u32>() else {
            continue;
        };
        let (name, directive) = split_directive(desc);
        let result = match (ok, directive) {
            (true, Some(d)) if d.starts_with("SKIP") => Outcome::Skip,
            (true, _) => Outcome::Pass,
            (false, _) => Outcome::Fail,
        };
        let want = run.cases.len() as u32 + 1;
        if number != want {
            bail!("KTAP: test {number} where test {want} was due: {l:?}");
        }
        run.cases.push(Case {
            number,
            name,
            result,
        });
    }
    if let Some(n) = run.plan {
        if n as usize != run.cases.len() {
            bail!(
                "KTAP: the plan says 1..{n} but {} tests reported",
                run.cases.len()
            );
        }
    }
    Ok(Some(run))
}

/// A description and its directive (after an unescaped `#`), the name
/// unescaped.
fn split_directive(desc: &str) -> (String, Option<&str>) {
    let mut name = String::new();
    let mut chars = desc.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' if chars.peek().is_some_and(|(_, n)| *n == '#') => {
                name.push('#');
                chars.next();
            }
            '#' => return (name.trim_end().to_string(), Some(desc[i + 1..].trim())),
            c => name.push(c),
        }
    }
    (name, None)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_read_with_its_skips_failures_and_escapes() {
        let log = "boot\nKTAP version 1\nPASS a\nok 1 a\n# why\nnot ok 2 b (\\#UD)\nok 3 c # SKIP no CPU\n1..3\n";
        let r = parse(log).unwrap().unwrap();
        assert_eq!(r.plan, Some(3));
        let got: Vec<_> = r
            .cases
            .iter()
            .map(|c| (c.name.as_str(), c.result))
            .collect();
        assert_eq!(
            got,
            [
                ("a", Outcome::Pass),
                ("b (#UD)", Outcome::Fail),
                ("c", Outcome::Skip)
            ]
        );
        assert!(parse("no ktap\nok 1 a\n").unwrap().is_none());
    }

    #[test]
    fn a_wrong_plan_or_number_is_an_error() {
        assert!(parse("KTAP version 1\nok 1 a\n1..2\n").is_err());
        assert!(parse("KTAP version 1\nok 2 a\n").is_err());
    }
}
