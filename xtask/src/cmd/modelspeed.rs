//! `cargo xtask model-speed`: what the model clock costs in wall time. The
//! same boot under `--clock icount` and `--clock model`, in turn (icount,
//! model, icount, model, ...), on 1, 2 and 4 CPUs; per CPU count the ratio
//! model / icount of each pair's boot times (QEMU's run only: the builds are
//! done first), as min, median and max, and each clock's peak memory (the
//! QEMU process's resident set at its highest). A benchmark, not a test:
//! the figures are this host's, and a busy host moves the times.

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::cmd::test_boot_args;
use crate::machine::{Clock, Machine, Scratch};
use crate::{kbuild, model};

#[derive(Args)]
pub struct ModelSpeedArgs {
    /// Pairs of boots per CPU count.
    #[arg(short, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=50))]
    n: u32,
    /// The CPU counts, e.g. 1,2,4.
    #[arg(long, value_delimiter = ',', default_value = "1,2,4")]
    cpus: Vec<u32>,
    /// The model's profile on several CPUs (on one: the default run's,
    /// modern for qemu32).
    #[arg(long, default_value = "p4")]
    profile: String,
}

/// What each CPU count boots: the default run on one CPU, the locks
/// program (locks, sleep/wakeup and cache lines across CPUs) on several.
fn workload(cpus: u32) -> &'static str {
    if cpus == 1 {
        "mode=run prog=bench"
    } else {
        "mode=run prog=locks"
    }
}

/// The highest resident set (`VmHWM`, in KiB) of the QEMU processes this
/// process started while `f` ran, read from /proc every 20 ms (the kernel
/// keeps the high-water mark, so a sample misses only what grew in the
/// last 20 ms of a process's life); `None` where /proc has no such
/// figure.
fn peak_rss_during<T>(f: impl FnOnce() -> T) -> (T, Option<u64>) {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let me = std::process::id();
    let done = AtomicBool::new(false);
    let peak = AtomicU64::new(0);
    let sample = || {
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return;
        };
        for e in dir.flatten() {
            let Some(pid) = e.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) else {
                continue;
            };
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                continue;
            };
            // `pid (comm) state ppid ...`: the name may hold spaces, so
            // split after its closing parenthesis.
            let (Some(open), Some(close)) = (stat.find('('), stat.rfind(')')) else {
                continue;
            };
            let comm = &stat[open + 1..close];
            let ppid = stat[close + 1..].split_whitespace().nth(1);
            if !comm.starts_with("qemu-system") || ppid != Some(&me.to_string()) {
                continue;
            }
            let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
            let kib = status
                .lines()
                .find_map(|l| l.strip_prefix("VmHWM:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok());
            if let Some(k) = kib {
                peak.fetch_max(k, Ordering::Relaxed);
            }
        }
    };
    let out = std::thread::scope(|s| {
        s.spawn(|| {
            while !done.load(Ordering::Relaxed) {
                sample();
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        let out = f();
        done.store(true, Ordering::Relaxed);
        out
    });
    let k = peak.load(Ordering::Relaxed);
    (out, (k > 0).then_some(k))
}

/// Min, median and max of `v` (not empty).
fn spread(v: &[f64]) -> (f64, f64, f64) {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    let n = s.len();
    let median = if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    };
    (s[0], median, s[n - 1])
}

pub fn model_speed(a: ModelSpeedArgs) -> Result<i32> {
    if let Some(c) = a.cpus.iter().find(|&&c| !(1..=4).contains(&c)) {
        bail!("--cpus: {c}: the model handles 1 to 4 CPUs here");
    }
    model::check_profile(&a.profile, &model::known_profiles())?;
    crate::preflight::ensure(crate::preflight::Need::Qemu)?;
    let art = kbuild::build(true)?;
    let scratch = Scratch::new("model-speed")?;
    println!(
        "model / icount wall time of whole boots (QEMU TCG, this host), {} pair(s) per row, booted in turn",
        a.n
    );
    println!(
        "{:<5} {:<20} {:<8} {:>10} {:>10} {:>11} {:>11}   model/icount min / median / max",
        "cpus", "boot", "profile", "icount s", "model s", "icount MiB", "model MiB"
    );
    for &cpus in &a.cpus {
        let words = workload(cpus);
        let profile = if cpus == 1 {
            model::profile_for_cpu("qemu32").unwrap_or(model::DEFAULT_PROFILE)
        } else {
            a.profile.as_str()
        };
        let machine = |clock: Clock| -> Result<Machine> {
            let mut b = test_boot_args(None);
            b.smp = cpus;
            b.clock = Some(clock);
            b.timeout = 600;
            if clock == Clock::Model {
                b.profile = Some(profile.to_string());
            }
            Machine::build(&b.spec()?, &art, words, scratch.path())
        };
        let (icount, modelled) = (machine(Clock::Icount)?, machine(Clock::Model)?);
        let (mut ti, mut tm, mut ratios) = (Vec::new(), Vec::new(), Vec::new());
        let (mut ri, mut rm) = (Vec::new(), Vec::new());
        for _ in 0..a.n {
            let wall = |m: &Machine| -> Result<(f64, Option<u64>)> {
                let (log, rss) = peak_rss_during(|| m.boot_fresh(&mut |_| {}));
                let log = log.context("booting")?;
                if !log.succeeded() {
                    bail!("{cpus} CPU(s), {words}: {}", log.explain(10));
                }
                if let Some(p) = &m.model {
                    let _ = std::fs::remove_file(&p.out);
                }
                Ok((log.wall.as_secs_f64(), rss))
            };
            let (i, i_rss) = wall(&icount)?;
            let (m, m_rss) = wall(&modelled)?;
            ti.push(i);
            tm.push(m);
            ratios.push(m / i);
            ri.extend(i_rss.map(|k| k as f64 / 1024.0));
            rm.extend(m_rss.map(|k| k as f64 / 1024.0));
        }
        let (lo, mid, hi) = spread(&ratios);
        let mib = |v: &[f64]| {
            if v.is_empty() {
                "n/a".to_string()
            } else {
                format!("{:.0}", spread(v).2)
            }
        };
        println!(
            "{:<5} {:<20} {:<8} {:>10.2} {:>10.2} {:>11} {:>11}   {lo:.2}x / {mid:.2}x / {hi:.2}x",
            cpus,
            words.trim_start_matches("mode=run "),
            profile,
            spread(&ti).1,
            spread(&tm).1,
            mib(&ri),
            mib(&rm)
        );
    }
    println!("(seconds: medians; each ratio is one pair's, so a host that slows down between pairs moves the spread, not the median much; MiB: the QEMU process's highest resident set over the boots, the model's plugin included)");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spread_is_min_median_max() {
        assert_eq!(spread(&[3.0, 1.0, 2.0]), (1.0, 2.0, 3.0));
        assert_eq!(spread(&[4.0, 1.0]), (1.0, 2.5, 4.0));
    }
}
