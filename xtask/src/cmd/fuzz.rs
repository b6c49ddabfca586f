//! `cargo xtask fuzz [TARGET] [--time S]`: coverage-guided fuzzing of the
//! host's readers of untrusted text with cargo-fuzz and libFuzzer (nightly
//! Rust's `-Cpasses=sancov-module` coverage). The targets live in `fuzz/`,
//! a workspace of its own; each calls one function of `xtask::fuzzing`.
//!
//! Each target starts from its seeds (`fuzz/seeds/TARGET/`: real serial
//! logs, model files, results files and ministat inputs of this revision)
//! and grows its corpus in `fuzz/corpus/TARGET/` (not committed). The
//! targets build without a sanitizer (the readers are safe Rust: what a
//! fuzzer can find in them is a panic, a hang or an allocation without
//! bound, which libFuzzer catches itself) and with debug assertions, so an
//! arithmetic overflow panics as it does in `cargo xtask`'s own build. A
//! crash leaves its input in `fuzz/artifacts/TARGET/`; it becomes a unit
//! test beside the reader (`cargo xtask fuzz` names the file).

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::kbuild;

/// The targets: name, and what it reads.
pub const TARGETS: &[(&str, &str)] = &[
    (
        "records",
        "the serial record parser (abi::report, xtask's report and results)",
    ),
    (
        "import",
        "`cargo xtask import` of a serial log (with a model file, or a LAVA job's log)",
    ),
    (
        "model_file",
        "the model plugin's file, merged into a model boot's log",
    ),
    (
        "results_json",
        "results files, bench exports and baselines (`table`, `bench --baseline`)",
    ),
    (
        "ministat",
        "`cargo xtask ministat`: its options and its input",
    ),
];

/// libFuzzer's limits for one input: seconds (a hang), and megabytes of
/// memory (an allocation without bound).
const INPUT_TIMEOUT_S: u32 = 10;
const RSS_LIMIT_MB: u32 = 2048;

#[derive(Args)]
pub struct FuzzArgs {
    /// One target (default: every one, as many at a time as the host has
    /// cores): records, import,
    /// model_file, results_json, ministat.
    pub target: Option<String>,
    /// Seconds of fuzzing per target.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u64).range(1..))]
    pub time: u64,
}

/// What one target's run did, from libFuzzer's final statistics.
#[derive(Debug, Default, PartialEq)]
pub struct Summary {
    pub runs: u64,
    /// Coverage: code edges reached, and features (edges with counts).
    pub cov: u64,
    pub ft: u64,
    pub corpus: u64,
    pub peak_rss_mb: u64,
}

impl Summary {
    /// Reads libFuzzer's output: its last status line (`#N DONE cov: C ft:
    /// F corp: K/...`) and its `stat::` lines.
    pub fn of(text: &str) -> Summary {
        let mut s = Summary::default();
        let after = |line: &str, key: &str| -> Option<u64> {
            let mut words = line.split_whitespace();
            words.find(|w| *w == key)?;
            words
                .next()?
                .split('/')
                .next()?
                .trim_end_matches("Mb")
                .parse()
                .ok()
        };
        for line in text.lines() {
            if line.starts_with('#') {
                s.cov = after(line, "cov:").unwrap_or(s.cov);
                s.ft = after(line, "ft:").unwrap_or(s.ft);
                s.corpus = after(line, "corp:").unwrap_or(s.corpus);
            }
            let stat = |k: &str| line.strip_prefix(k).and_then(|v| v.trim().parse().ok());
            if let Some(n) = stat("stat::number_of_executed_units:") {
                s.runs = n;
            }
            if let Some(n) = stat("stat::peak_rss_mb:") {
                s.peak_rss_mb = n;
            }
        }
        s
    }
}

/// Whether `cargo fuzz` runs here.
pub fn cargo_fuzz_present() -> bool {
    Command::new(cargo())
        .args(["fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn cargo() -> String {
    std::env::var("CARGO").unwrap_or_else(|_| "cargo".into())
}

/// The sentence for a machine without cargo-fuzz.
pub const INSTALL: &str =
    "cargo-fuzz is not installed: `cargo install cargo-fuzz --locked` (about 90 s; it uses the nightly toolchain rust-toolchain.toml names)";

pub fn fuzz(a: FuzzArgs) -> Result<i32> {
    let targets: Vec<&str> = match &a.target {
        Some(t) if TARGETS.iter().any(|(n, _)| n == t) => vec![t.as_str()],
        Some(t) => bail!(
            "no fuzz target {t:?} (there are: {})",
            TARGETS
                .iter()
                .map(|(n, _)| *n)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => TARGETS.iter().map(|(n, _)| *n).collect(),
    };
    let root = kbuild::root();
    if !cargo_fuzz_present() {
        bail!("{INSTALL}");
    }
    // Each libFuzzer runs on one host thread: as many targets at a time as
    // the host has cores (cargo builds them one after another, under its
    // lock), each reported in the targets' order.
    let workers = std::thread::available_parallelism().map_or(1, |n| n.get());
    let results = crate::parallel::map(&targets, workers, |t| run(&root, t, a.time));
    let mut failed = 0;
    for (t, r) in targets.iter().zip(results) {
        match r {
            Ok(s) => println!(
                "fuzz {t}: {} runs in {} s, 0 crashes; coverage {} edges, {} features; corpus {} inputs; peak RSS {} MB",
                s.runs, a.time, s.cov, s.ft, s.corpus, s.peak_rss_mb
            ),
            Err(e) => {
                failed += 1;
                println!("fuzz {t}: FAILED: {e:#}");
            }
        }
    }
    Ok(i32::from(failed > 0))
}

/// Fuzzes `target` for `secs` seconds; an error names the crashing input.
pub fn run(root: &Path, target: &str, secs: u64) -> Result<Summary> {
    let corpus = root.join("fuzz/corpus").join(target);
    std::fs::create_dir_all(&corpus)
        .with_context(|| format!("cannot create {}", corpus.display()))?;
    let seeds = root.join("fuzz/seeds").join(target);
    let t = Instant::now();
    let out = Command::new(cargo())
        .current_dir(root)
        .args([
            "fuzz",
            "run",
            "--sanitizer",
            "none",
            "--debug-assertions",
            target,
        ])
        .arg(&corpus)
        .arg(&seeds)
        .arg("--")
        .arg(format!("-max_total_time={secs}"))
        .arg(format!("-timeout={INPUT_TIMEOUT_S}"))
        .arg(format!("-rss_limit_mb={RSS_LIMIT_MB}"))
        // The readers' own messages (table's notes) are not the fuzzer's.
        .arg("-close_fd_mask=3")
        .arg("-print_final_stats=1")
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .context("cannot run cargo fuzz")?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let crash = text
            .lines()
            .filter(|l| l.contains("Test unit written to") || l.contains("panicked at"))
            .collect::<Vec<_>>()
            .join("\n  ");
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        bail!(
            "cargo fuzz exited with {} after {:.0} s:\n  {crash}\n{}",
            out.status,
            t.elapsed().as_secs_f64(),
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        );
    }
    Ok(Summary::of(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_final_statistics_are_read() {
        let text = "INFO: Seed: 1\n#2\tINITED cov: 100 ft: 200 corp: 5/30Kb exec/s: 0 rss: 40Mb\n\
                    #123456\tDONE   cov: 1517 ft: 6120 corp: 404/210Kb lim: 4096 exec/s: 6172 rss: 391Mb\n\
                    Done 123456 runs in 21 second(s)\nstat::number_of_executed_units: 123456\n\
                    stat::average_exec_per_sec:     6172\nstat::peak_rss_mb:              391\n";
        assert_eq!(
            Summary::of(text),
            Summary {
                runs: 123_456,
                cov: 1517,
                ft: 6120,
                corpus: 404,
                peak_rss_mb: 391
            }
        );
    }

    #[test]
    fn every_target_has_a_source_and_seeds() {
        let root = kbuild::root();
        let manifest = std::fs::read_to_string(root.join("fuzz/Cargo.toml")).unwrap();
        for (t, _) in TARGETS {
            assert!(
                root.join(format!("fuzz/fuzz_targets/{t}.rs")).is_file(),
                "{t}: no source"
            );
            assert!(
                manifest.contains(&format!("name = \"{t}\"")),
                "{t}: not in fuzz/Cargo.toml"
            );
            let seeds = std::fs::read_dir(root.join("fuzz/seeds").join(t))
                .map(|d| d.count())
                .unwrap_or(0);
            assert!(seeds > 0, "{t}: no seeds");
        }
    }
}
