//! `cargo xtask soak`: the kernel and user tests booted again and again
//! under multi-threaded TCG, where the CPUs run truly in parallel (one host
//! thread each) and the kernel's races show: a fault in ring 0, a hang, a
//! lost wake-up, a test that fails once in a while. Boots run `--jobs` at a
//! time, so they also load the host, which spreads the interleavings.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::Instant;

use anyhow::{bail, Result};
use clap::Args;

use super::cases::{Case, SOAK};
use crate::kbuild::{self, Artifacts};
use crate::preflight;

#[derive(Args)]
pub struct SoakArgs {
    /// The CPU counts to soak (a comma list; each has its own boot).
    #[arg(long, value_delimiter = ',', default_value = "2,4")]
    smp: Vec<u32>,
    /// Boots of each CPU count.
    #[arg(short = 'n', long, default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=10_000))]
    boots: u32,
    /// Boots at once (each takes one host thread per guest CPU).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    jobs: u32,
}

/// What one CPU count's boots came to.
#[derive(Default)]
struct Count {
    passed: u32,
    failed: u32,
    /// The first few failures' messages and where their logs went.
    first: Vec<String>,
}

/// How many failures a soak prints whole (the rest are counted).
const SHOWN: usize = 3;

pub fn soak(a: SoakArgs) -> Result<i32> {
    let cases: Vec<&'static Case> = a
        .smp
        .iter()
        .map(|&n| {
            SOAK.iter().find(|c| c.cpus == n).ok_or_else(|| {
                let have: Vec<String> = SOAK.iter().map(|c| c.cpus.to_string()).collect();
                anyhow::anyhow!("--smp {n}: the soak boots {} CPUs", have.join(" or "))
            })
        })
        .collect::<Result<_>>()?;
    if cases.is_empty() {
        bail!("--smp names no CPU count");
    }
    preflight::ensure_tools()?;
    println!("== building the kernel and the user programs");
    let art = kbuild::build(true)?;
    let dir = kbuild::root().join("target/xtask/soak");
    std::fs::create_dir_all(&dir)?;
    let jobs: Vec<(usize, u32)> = (1..=a.boots)
        .flat_map(|i| (0..cases.len()).map(move |c| (c, i)))
        .collect();
    println!(
        "== soak: {} boots of {} ({}), {} at a time, under multi-threaded TCG",
        a.boots,
        cases.len(),
        a.smp
            .iter()
            .map(|n| format!("{n} CPUs"))
            .collect::<Vec<_>>()
            .join(", "),
        a.jobs
    );
    let t = Instant::now();
    let counts = run(&cases, &jobs, a.jobs as usize, &art, &dir);
    let mut bad = false;
    for (c, n) in cases.iter().zip(&counts) {
        println!(
            "soak: {} CPUs: {} of {} boots green{}",
            c.cpus,
            n.passed,
            n.passed + n.failed,
            if n.failed > 0 {
                format!(", {} failed", n.failed)
            } else {
                String::new()
            }
        );
        for f in &n.first {
            println!("  {}", f.replace('\n', "\n  "));
        }
        bad |= n.failed > 0;
    }
    println!("soak: {:.0} s in all", t.elapsed().as_secs_f64());
    Ok(if bad { 1 } else { 0 })
}

/// Runs every (case, boot) job on `workers` threads; a failed boot's whole
/// serial log is kept in `dir` (`fail-<cpus>cpu-<boot>.log`).
fn run(
    cases: &[&'static Case],
    jobs: &[(usize, u32)],
    workers: usize,
    art: &Artifacts,
    dir: &Path,
) -> Vec<Count> {
    let mut counts: Vec<Count> = cases.iter().map(|_| Count::default()).collect();
    let next = AtomicUsize::new(0);
    let (tx, rx) = mpsc::channel::<(usize, Result<(), String>)>();
    std::thread::scope(|s| {
        for w in 0..workers {
            let tx = tx.clone();
            let next = &next;
            s.spawn(move || loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                let Some(&(c, boot)) = jobs.get(i) else { break };
                let scratch: PathBuf = dir.join(format!("worker-{w}"));
                let r = std::fs::create_dir_all(&scratch)
                    .map_err(|e| format!("{}: {e}", scratch.display()))
                    .and_then(|()| super::run_case_kept(cases[c], art, &scratch, boot, dir));
                if tx.send((i, r)).is_err() {
                    break;
                }
            });
        }
        drop(tx);
        for (i, r) in rx {
            let (c, boot) = jobs[i];
            let n = &mut counts[c];
            match r {
                Ok(()) => n.passed += 1,
                Err(e) => {
                    n.failed += 1;
                    println!("FAIL soak: {} CPUs, boot {boot}", cases[c].cpus);
                    if n.first.len() < SHOWN {
                        n.first.push(format!("boot {boot}: {e}"));
                    }
                }
            }
        }
    });
    counts
}
