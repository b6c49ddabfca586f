//! `cargo xtask lab`: the jobs `cargo xtask lava` writes, submitted to a
//! LAVA server over its REST API, waited for (all of them in flight at
//! once), their logs and results fetched and imported into results/ as
//! `cargo xtask import` would, the lab, device, device type and job id
//! recorded (a model job's figures with the model file its log carries;
//! a test boot's job as its tests, LAVA's case list checked against the
//! kernel's KTAP lines). `lab fetch JOB...` waits for and imports jobs submitted
//! before (after the server went away mid-wait, say); `lab up` and
//! `lab down` bring a LAVA instance up on this machine and take it down.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, Subcommand};

use super::import::LabTests;
use super::lava::LavaArgs;
use crate::kbuild;
use crate::lava::instance::Instance;
use crate::lava::server::{JobState, Server, Unreachable, TOKEN_ENV};
use crate::lava::Lab;
use crate::results::Results;

#[derive(Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct LabArgs {
    #[command(subcommand)]
    cmd: Option<LabCmd>,
    #[command(flatten)]
    submit: SubmitArgs,
}

#[derive(Subcommand)]
enum LabCmd {
    /// Bring up a LAVA instance on this machine (root; Debian's packages,
    /// installed when missing): one worker, QEMU devices.
    Up(InstanceArgs),
    /// Take the instance down: no daemon left, no database, no state.
    Down(InstanceArgs),
    /// Wait for jobs submitted before and import them.
    Fetch(FetchArgs),
}

#[derive(Args)]
struct InstanceArgs {
    /// The instance's state directory.
    #[arg(long, default_value = DEFAULT_STATE)]
    state: PathBuf,
    /// The web server's port (the event publisher takes the next).
    #[arg(long, default_value_t = 8000)]
    port: u16,
    /// `up`: how many QEMU devices (jobs that run at once).
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=16))]
    devices: u32,
}

/// Where `lab up` keeps the instance's state.
pub const DEFAULT_STATE: &str = "target/lab";

#[derive(Args, Clone)]
pub struct ServerArgs {
    /// The LAVA server (http(s)://host[:port]/); default: the instance
    /// `lab up` brought up here.
    #[arg(long, value_name = "URL")]
    pub server: Option<String>,
    /// A file holding the API token (default: $LAVA_TOKEN, or the local
    /// instance's token file).
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<PathBuf>,
    /// The lab's name in the results (default: the server's host:port).
    #[arg(long, value_name = "NAME")]
    pub lab: Option<String>,
    /// Seconds to wait for the jobs to finish.
    #[arg(long, default_value_t = 1800)]
    pub wait: u64,
}

/// What to do with the imported results.
#[derive(Clone, Copy)]
pub struct Output {
    pub save: bool,
    pub quiet: bool,
}

#[derive(Args)]
struct SubmitArgs {
    #[command(flatten)]
    server: ServerArgs,
    #[command(flatten)]
    lava: LavaArgs,
}

#[derive(Args)]
struct FetchArgs {
    #[command(flatten)]
    server: ServerArgs,
    /// The job ids.
    #[arg(required = true)]
    jobs: Vec<u64>,
    /// Do not write results files.
    #[arg(long)]
    no_save: bool,
    /// One line per job, on stderr, instead of its table.
    #[arg(long)]
    quiet: bool,
}

pub fn lab(a: LabArgs) -> Result<i32> {
    match a.cmd {
        Some(LabCmd::Up(i)) => {
            instance(&i).up()?;
            Ok(0)
        }
        Some(LabCmd::Down(i)) => {
            instance(&i).down()?;
            eprintln!(
                "lab down: no LAVA daemon, no database, {} removed",
                i.state.display()
            );
            Ok(0)
        }
        Some(LabCmd::Fetch(f)) => {
            let server = connect(&f.server)?;
            let jobs: Vec<Submitted> = f
                .jobs
                .iter()
                .map(|id| Submitted {
                    id: *id,
                    file: None,
                })
                .collect();
            let out = Output {
                save: !f.no_save,
                quiet: f.quiet,
            };
            finish(&server, &f.server, out, &jobs, &results_dir())
        }
        None => {
            let s = a.submit;
            if s.lava.print || s.lava.local {
                bail!("`lab` submits the jobs to a server: --print and --local are `cargo xtask lava`'s");
            }
            let server = connect(&s.server)?;
            if s.lava.base_url.is_none() && !is_local(&server.url) {
                bail!("the server {} fetches the kernel from a file:// path on this machine: copy <out>/files to a web server and give its address with --base-url", server.url);
            }
            let written = super::lava::write(&s.lava)?;
            let mut jobs = Vec::new();
            for w in &written {
                let id = server
                    .submit(&w.definition)
                    .with_context(|| format!("submitting {}", w.path.display()))?;
                eprintln!("lab: job {id} submitted ({})", w.path.display());
                jobs.push(Submitted {
                    id,
                    file: Some(w.path.clone()),
                });
            }
            let out = Output {
                save: !s.lava.no_save,
                quiet: s.lava.quiet,
            };
            finish(&server, &s.server, out, &jobs, &results_dir())
        }
    }
}

fn instance(i: &InstanceArgs) -> Instance {
    Instance::new(absolute(&i.state), i.port, i.devices)
}

fn absolute(p: &Path) -> PathBuf {
    if p.is_absolute() {
        p.to_path_buf()
    } else {
        kbuild::root().join(p)
    }
}

fn results_dir() -> PathBuf {
    kbuild::root().join("results")
}

fn is_local(url: &str) -> bool {
    ["http://127.0.0.1", "http://localhost", "http://[::1]"]
        .iter()
        .any(|p| url.starts_with(p))
}

/// The server the flags name (or the local instance), its token read, and
/// the token checked with the server.
pub fn connect(a: &ServerArgs) -> Result<Server> {
    let state = absolute(Path::new(DEFAULT_STATE));
    let url = match &a.server {
        Some(u) => u.clone(),
        None => Instance::running(&state).with_context(|| {
            format!(
                "no --server, and no LAVA instance up here ({} has none): give --server URL, or `cargo xtask lab up`",
                state.display()
            )
        })?,
    };
    let (token, from) = match (&a.token_file, std::env::var(TOKEN_ENV)) {
        (Some(f), _) => (
            std::fs::read_to_string(f)
                .with_context(|| format!("cannot read the token file {}", f.display()))?,
            f.display().to_string(),
        ),
        (None, Ok(t)) => (t, format!("${TOKEN_ENV}")),
        (None, Err(_)) if a.server.is_none() => {
            let f = Instance::new(state, 0, 0).token_file();
            (
                std::fs::read_to_string(&f)
                    .with_context(|| format!("cannot read the token file {}", f.display()))?,
                f.display().to_string(),
            )
        }
        (None, Err(_)) => bail!(
            "no token for {url}: give --token-file FILE or set {TOKEN_ENV} (the server's web page: API → Authentication Tokens)"
        ),
    };
    let server = Server::new(&url, &token, &from)?;
    server.check_token()?;
    Ok(server)
}

/// A job on the server: its id and the file it was submitted from.
pub struct Submitted {
    pub id: u64,
    pub file: Option<PathBuf>,
}

/// Waits for `jobs`, then fetches and imports each; the exit status (1 if
/// any job failed: each failure named, nothing of it imported).
pub fn finish(
    server: &Server,
    a: &ServerArgs,
    out: Output,
    jobs: &[Submitted],
    results: &Path,
) -> Result<i32> {
    let done = wait(server, jobs, Duration::from_secs(a.wait))?;
    let lab = a.lab.clone().unwrap_or_else(|| server.host());
    let mut failed = Vec::new();
    for (j, state) in jobs.iter().zip(&done) {
        let r = fetch(server, state, &lab).and_then(|imported| match imported {
            Imported::Figures(r) => {
                if out.quiet {
                    eprintln!("lab: job {} imported ({} figures)", j.id, r.benches.len());
                } else {
                    print!("{}", r.table());
                }
                if out.save {
                    let p = r.save(results)?;
                    eprintln!("results: {}", p.display());
                }
                Ok(())
            }
            Imported::Tests(t) => {
                if out.quiet {
                    eprintln!("lab: job {}: {}", j.id, t.summary());
                } else {
                    println!("lab: job {}: {}", j.id, t.summary());
                }
                let failed: Vec<_> = t
                    .cases
                    .iter()
                    .filter(|(_, r)| r == "fail")
                    .map(|(n, _)| n.as_str())
                    .collect();
                if !failed.is_empty() {
                    bail!(
                        "{} kernel tests failed: {}",
                        failed.len(),
                        failed.join("; ")
                    );
                }
                Ok(())
            }
        });
        if let Err(e) = r {
            eprintln!(
                "lab: job {}{}: {e:#}",
                j.id,
                j.file
                    .as_ref()
                    .map(|f| format!(" ({})", f.display()))
                    .unwrap_or_default()
            );
            failed.push(j.id);
        }
    }
    if !failed.is_empty() {
        bail!(
            "{} of {} jobs failed, nothing of them imported: {}",
            failed.len(),
            jobs.len(),
            failed
                .iter()
                .map(|i| format!("job {i}"))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    Ok(0)
}

/// How long the server may stay unreachable during a wait.
const UNREACHABLE_LIMIT: Duration = Duration::from_secs(10);

/// Polls the jobs until every one has finished: their final states. A
/// progress line on stderr (redrawn on a terminal; elsewhere a line when a
/// job's state changes).
pub fn wait(server: &Server, jobs: &[Submitted], limit: Duration) -> Result<Vec<JobState>> {
    let t = Instant::now();
    let tty = std::io::stderr().is_terminal();
    let mut states: Vec<Option<JobState>> = vec![None; jobs.len()];
    let mut lost: Option<Instant> = None;
    let ids = || {
        jobs.iter()
            .map(|j| j.id.to_string())
            .collect::<Vec<_>>()
            .join(" ")
    };
    loop {
        let mut changed = false;
        for (k, j) in jobs.iter().enumerate() {
            if states[k].as_ref().is_some_and(JobState::finished) {
                continue;
            }
            match server.job(j.id) {
                Ok(s) => {
                    lost = None;
                    if states[k].as_ref().map(|o| (&o.state, &o.health))
                        != Some((&s.state, &s.health))
                    {
                        changed = true;
                    }
                    states[k] = Some(s);
                }
                Err(e) if e.downcast_ref::<Unreachable>().is_some() => {
                    let since = *lost.get_or_insert_with(Instant::now);
                    if since.elapsed() > UNREACHABLE_LIMIT {
                        if tty {
                            eprintln!();
                        }
                        bail!(
                            "{e:#} (for {} s, while waiting for job {}): the jobs go on in the lab; when the server is back, `cargo xtask lab fetch {}{}` waits for them and imports them",
                            UNREACHABLE_LIMIT.as_secs(),
                            ids(),
                            ids(),
                            if is_local(&server.url) { String::new() } else { format!(" --server {}", server.url) }
                        );
                    }
                }
                Err(e) => return Err(e.context(format!("job {}", j.id))),
            }
        }
        let finished = states
            .iter()
            .filter(|s| s.as_ref().is_some_and(JobState::finished))
            .count();
        let line = format!(
            "lab: {finished}/{} finished, {:.0} s: {}",
            jobs.len(),
            t.elapsed().as_secs_f64(),
            jobs.iter()
                .zip(&states)
                .map(|(j, s)| format!(
                    "{} {}",
                    j.id,
                    s.as_ref().map_or("?", |s| if s.finished() {
                        s.health.as_str()
                    } else {
                        s.state.as_str()
                    })
                ))
                .collect::<Vec<_>>()
                .join(", ")
        );
        if tty {
            eprint!("\r\x1b[K{line}");
        } else if changed {
            eprintln!("{line}");
        }
        if finished == jobs.len() {
            if tty {
                eprintln!();
            }
            return Ok(states.into_iter().map(|s| s.expect("polled")).collect());
        }
        if t.elapsed() > limit {
            if tty {
                eprintln!();
            }
            bail!(
                "jobs {} not finished after {} s: `cargo xtask lab fetch {}` waits again",
                ids(),
                limit.as_secs(),
                ids()
            );
        }
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The variant a job of `cargo xtask lava` is for, from its name
/// (`i386 testbed VARIANT, boot I of N: ...`).
fn variant_of(description: &str) -> Option<&str> {
    description
        .strip_prefix("i386 testbed ")?
        .split(", boot ")
        .next()
}

/// What a finished job gave.
pub enum Imported {
    /// A `mode=run` boot's figures (not saved yet).
    Figures(Box<Results>),
    /// A test boot's tests, LAVA's list checked against the kernel's.
    Tests(LabTests),
}

/// A finished job's figures, fetched and imported (not saved); a test
/// boot's job is an error (it has no figures).
pub fn import(server: &Server, s: &JobState, lab: &str) -> Result<Results> {
    match fetch(server, s, lab)? {
        Imported::Figures(r) => Ok(*r),
        Imported::Tests(_) => bail!("job {} is a test boot: it has no figures", s.id),
    }
}

/// A finished job's log and results fetched and imported: its figures, or
/// a test boot's tests.
pub fn fetch(server: &Server, s: &JobState, lab: &str) -> Result<Imported> {
    if s.health != "Complete" {
        // Why, in LAVA's words: its comment, else the errors of the
        // failed actions in its results (the first is the cause, the
        // last LAVA's verdict), else the log's.
        let from_results = server
            .results(s.id)
            .ok()
            .and_then(|r| crate::lava::log::parse_results(&r).ok())
            .map(|cases| {
                cases
                    .into_iter()
                    .filter(|c| c.suite == "lava" && c.result == "fail")
                    .filter_map(|c| c.error)
                    .collect::<Vec<_>>()
            });
        let from_log = || {
            server
                .log(s.id)
                .ok()
                .and_then(|log| crate::lava::log::parse_log(&log).ok())
                .map(|l| l.errors)
        };
        let mut errors = from_results
            .filter(|e| !e.is_empty())
            .or_else(from_log)
            .unwrap_or_default();
        errors.dedup();
        let why = match (s.failure_comment.as_deref(), errors.as_slice()) {
            (Some(c), _) if !c.is_empty() => c.to_string(),
            (_, []) => "no reason given (see the job's log)".into(),
            (_, [one]) => one.clone(),
            (_, [first, .., last]) => format!("{first} (then: {last})"),
        };
        // What the kernel said last, if it panicked or faulted.
        let kernel = server
            .log(s.id)
            .ok()
            .and_then(|log| crate::lava::log::parse_log(&log).ok())
            .and_then(|l| {
                l.serial
                    .lines()
                    .find(|x| x.starts_with("kernel panic") || x.contains(" in kernel mode"))
                    .map(|x| format!("; the kernel printed: {}", x.trim()))
            })
            .unwrap_or_default();
        let why = why.split_whitespace().collect::<Vec<_>>().join(" ");
        bail!("LAVA ended job {} {}: {why}{kernel}", s.id, s.health);
    }
    let log = server.log(s.id)?;
    let results = server.results(s.id)?;
    let lab = Lab {
        device: s.actual_device.clone().unwrap_or_default(),
        device_type: s.requested_device_type.clone().unwrap_or_default(),
        job: s.id.to_string(),
        lab: lab.to_string(),
    };
    let variant = variant_of(&s.description).unwrap_or("lab");
    let serial = crate::lava::log::parse_log(&log)
        .map(|l| l.serial)
        .unwrap_or_default();
    if super::import::is_test_boot(&serial) {
        return super::import::tests_from_lava(&log, Some(&results), &lab)
            .map(Imported::Tests)
            .with_context(|| format!("job {}: LAVA's test cases", s.id));
    }
    let r = super::import::from_lava(
        &log,
        Some((Path::new(&format!("job {}'s results", s.id)), &results)),
        lab,
        variant,
    )
    .with_context(|| format!("job {}: nothing imported", s.id))?;
    let model_job = format!(" ({}", super::lava::MODEL_IN_NAME);
    if s.description.contains(&model_job) && r.model_profile.is_none() {
        bail!(
            "job {} ran the model plugin, but its log holds no model file (is the plugin at --plugin-path on the worker, and does the worker's QEMU write its stderr to the console?): nothing imported",
            s.id
        );
    }
    Ok(Imported::Figures(Box::new(r)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_variant_is_read_from_the_jobs_name() {
        assert_eq!(
            variant_of("i386 testbed a, boot 1 of 3: mode=run prog=bench"),
            Some("a")
        );
        assert_eq!(variant_of("someone else's job"), None);
    }
}
