//! What a run of `cargo xtask test` took, test by test: every run writes
//! [`LAST_RUN`]; `--record-times` merges it into [`BOOK_FILE`], the
//! measurements docs/tests.md shows beside the test list (`cargo xtask
//! docs --table tests`). A test keeps the wall time of the last run that
//! ran it, with that run's revision, date and load, so a partial run
//! (`--filter`) updates only its own tests.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::{Instant, SystemTime};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

/// The last run's file, under the workspace root.
pub const LAST_RUN: &str = "target/xtask/test-times.json";
/// The book's record of every test's wall time, under the workspace root.
pub const BOOK_FILE: &str = "docs/data/test-times.json";

/// How a test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    Pass,
    Fail,
    Skip,
    /// Named by `--list`, not run.
    Listed,
}

/// One test of a run: its section, its name, how it ended, its wall time
/// (where the run timed it) and the host's 1-minute load average as it
/// ended.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ran {
    pub section: String,
    pub name: String,
    pub result: Outcome,
    pub secs: Option<f64>,
    pub load: Option<f64>,
}

/// The 1-minute load average (`/proc/loadavg`), where the host has one.
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// One run's file: when it started, the kernel's revision, its filter, its
/// whole wall time, and every test.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    /// Seconds since the Unix epoch.
    pub started: u64,
    pub rev: String,
    pub filter: Option<String>,
    /// Every test ran: no filter, no emulator left out, host and boots.
    #[serde(default)]
    pub whole: bool,
    pub wall_secs: f64,
    pub tests: Vec<Ran>,
}

impl Run {
    /// The file of a run that started at `started` (the clock's time and
    /// the instant) and ran `tests`.
    pub fn new(
        tests: &[Ran],
        filter: Option<&str>,
        whole: bool,
        started: (SystemTime, Instant),
    ) -> Run {
        Run {
            started: started
                .0
                .duration_since(SystemTime::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs()),
            rev: crate::kbuild::revision(&crate::kbuild::root()),
            filter: filter.map(str::to_string),
            whole,
            wall_secs: started.1.elapsed().as_secs_f64(),
            tests: tests.to_vec(),
        }
    }

    pub fn save(&self, path: &Path) -> Result<()> {
        if let Some(d) = path.parent() {
            std::fs::create_dir_all(d)?;
        }
        std::fs::write(path, serde_json::to_string_pretty(self)? + "\n")?;
        Ok(())
    }
}

/// A test's wall time as the book keeps it: from the last run that ran it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Measured {
    pub section: String,
    pub result: Outcome,
    pub secs: f64,
    pub load: Option<f64>,
    pub rev: String,
    /// When its run started, seconds since the Unix epoch.
    pub started: u64,
}

/// The book's file: each test's last measurement, by name; and the last
/// whole run (no filter), if one was recorded.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Book {
    pub tests: BTreeMap<String, Measured>,
    pub whole_run: Option<WholeRun>,
}

/// A run of every test: its wall time, start and revision.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WholeRun {
    pub wall_secs: f64,
    pub started: u64,
    pub rev: String,
    pub tests: usize,
}

impl Book {
    pub fn read(path: &Path) -> Result<Book> {
        match std::fs::read_to_string(path) {
            Ok(t) => serde_json::from_str(&t).with_context(|| path.display().to_string()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Book::default()),
            Err(e) => Err(e).with_context(|| path.display().to_string()),
        }
    }

    /// Takes `run`'s timed tests (a test it did not time keeps its older
    /// measurement); a run of every test is also the whole run.
    pub fn merge(&mut self, run: &Run) {
        for t in &run.tests {
            let Some(secs) = t.secs else { continue };
            if t.result == Outcome::Listed {
                continue;
            }
            self.tests.insert(
                t.name.clone(),
                Measured {
                    section: t.section.clone(),
                    result: t.result,
                    secs,
                    load: t.load,
                    rev: run.rev.clone(),
                    started: run.started,
                },
            );
        }
        if run.whole {
            // A whole run ran every test there is: a recorded test it did
            // not run is one that is gone (renamed or removed).
            self.tests
                .retain(|name, _| run.tests.iter().any(|t| &t.name == name));
            self.whole_run = Some(WholeRun {
                wall_secs: run.wall_secs,
                started: run.started,
                rev: run.rev.clone(),
                tests: run.tests.len(),
            });
        }
    }
}

/// Merges `run` into the book's file at `path`.
pub fn merge_into(path: &Path, run: &Run) -> Result<()> {
    let mut book = Book::read(path)?;
    book.merge(run);
    if let Some(d) = path.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(path, serde_json::to_string_pretty(&book)? + "\n")?;
    Ok(())
}

/// A wall time as the tests table and the run's last lines show it:
/// `4.2 s`, `3 min 50 s`.
pub fn wall(secs: f64) -> String {
    if secs < 60.0 {
        format!("{secs:.1} s")
    } else {
        let s = secs.round() as u64;
        format!("{} min {} s", s / 60, s % 60)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(name: &str, result: Outcome, secs: Option<f64>) -> Ran {
        Ran {
            section: "s".into(),
            name: name.into(),
            result,
            secs,
            load: Some(1.5),
        }
    }

    #[test]
    fn a_partial_run_updates_only_its_own_tests() {
        let mut book = Book::default();
        let whole = Run {
            started: 100,
            rev: "a".into(),
            filter: None,
            whole: true,
            wall_secs: 60.0,
            tests: vec![
                ran("x", Outcome::Pass, Some(1.0)),
                ran("y", Outcome::Skip, Some(2.0)),
            ],
        };
        book.merge(&whole);
        let part = Run {
            started: 200,
            rev: "b".into(),
            filter: Some("x".into()),
            whole: false,
            wall_secs: 5.0,
            tests: vec![ran("x", Outcome::Fail, Some(3.0))],
        };
        book.merge(&part);
        // A partial run keeps the others; a whole run drops a test gone.
        book.merge(&Run {
            filter: Some("z".into()),
            tests: vec![ran("z", Outcome::Pass, Some(1.0))],
            ..Run::default()
        });
        assert!(book.tests.contains_key("z"));
        let mut again = book.clone();
        again.merge(&Run {
            whole: true,
            tests: vec![ran("x", Outcome::Pass, Some(1.0))],
            ..Run::default()
        });
        assert_eq!(again.tests.keys().collect::<Vec<_>>(), ["x"]);
        assert_eq!(book.tests["x"].secs, 3.0);
        assert_eq!(book.tests["x"].rev, "b");
        assert_eq!(book.tests["y"].result, Outcome::Skip);
        assert_eq!(book.whole_run.as_ref().unwrap().wall_secs, 60.0);
        // An untimed or listed test leaves nothing.
        let mut book = Book::default();
        book.merge(&Run {
            tests: vec![
                ran("z", Outcome::Pass, None),
                ran("w", Outcome::Listed, None),
            ],
            filter: Some("z".into()),
            ..Run::default()
        });
        assert!(book.tests.is_empty() && book.whole_run.is_none());
        // A run of one emulator's boots has no filter but is not whole.
        let mut book = Book::default();
        book.merge(&Run {
            tests: vec![ran("b", Outcome::Pass, Some(1.0))],
            ..Run::default()
        });
        assert!(book.whole_run.is_none() && book.tests.len() == 1);
    }
}
