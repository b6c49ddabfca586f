//! The lab path through a real LAVA server: `cargo xtask lab up` brings
//! up a LAVA 2023.01 instance here (Debian's packages, its daemons started
//! directly), `lab` submits the jobs `lava` writes over the REST API,
//! waits for them in flight together, fetches each log and results and
//! imports them; the figures must be exactly a direct icount boot's. Jobs
//! that fail, a wrong token and a server that goes away mid-wait must each
//! end in a clear error, with nothing imported; `lab fetch` then resumes.
//! The instance is taken down after the last test (no daemon, no
//! database left).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};

use super::lab::{direct, direct_model, same_as_direct, tests_sharing, Check, APPEND};
use super::unit::{Test, SKIP};
use crate::cmd::lab::{self as labcmd, Output, ServerArgs, Submitted};
use crate::cmd::lava::LavaArgs;
use crate::kbuild;
use crate::lava::instance::{self, Instance};
use crate::lava::log;
use crate::lava::server::Server;

/// The test instance's web port (not `lab up`'s 8000, so that a user's
/// instance and the tests' are told apart in errors).
const PORT: u16 = 8090;

fn state() -> PathBuf {
    kbuild::root().join("target/xtask/lab-server-test")
}

fn the_instance() -> Instance {
    Instance::new(state(), PORT, 2)
}

/// Why the tests cannot run here, if they cannot.
fn cannot_run() -> Option<String> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("a LAVA instance needs root (its daemons, PostgreSQL)".into());
    }
    if !instance::packages_present() && !Path::new("/usr/bin/apt-get").exists() {
        return Some("LAVA's server is not installed and there is no apt-get".into());
    }
    instance::closed_to_others(&state())
}

/// The server flags for the test instance, its token from `token`.
fn server_args(token: &Path) -> ServerArgs {
    ServerArgs {
        server: Some(the_instance().url()),
        token_file: Some(token.to_path_buf()),
        lab: Some("test-lab".into()),
        wait: 300,
    }
}

fn connect() -> Result<Server> {
    labcmd::connect(&server_args(&the_instance().token_file()))
}

/// `cargo xtask lava`'s jobs for `flags`, written to `out`.
fn write_jobs(out: &Path, flags: &[&str]) -> Result<Vec<crate::cmd::lava::Written>> {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: LavaArgs,
    }
    let _ = std::fs::remove_dir_all(out);
    let mut argv = vec!["lava", "--out", out.to_str().context("path")?];
    argv.extend_from_slice(flags);
    crate::cmd::lava::write(&Cli::try_parse_from(argv)?.a)
}

fn submit(server: &Server, written: &[crate::cmd::lava::Written]) -> Result<Vec<Submitted>> {
    written
        .iter()
        .map(|w| {
            Ok(Submitted {
                id: server.submit(&w.definition)?,
                file: Some(w.path.clone()),
            })
        })
        .collect()
}

/// Two variants' jobs in flight at once on the instance's two devices,
/// fetched and imported: each equal to its direct boot, to the
/// instruction, and naming the lab, the device, its type and the job.
fn in_flight(dir: &Path) -> Result<String> {
    let server = connect()?;
    let variants = [("a", "entry=int80"), ("b", "entry=sysenter")];
    let specs: Vec<String> = variants.iter().map(|(n, w)| format!("{n}={w}")).collect();
    let mut flags = vec!["--append", APPEND];
    for s in &specs {
        flags.extend(["--variant", s.as_str()]);
    }
    let written = write_jobs(&dir.join("two"), &flags)?;
    let t = Instant::now();
    let jobs = submit(&server, &written)?;
    let states = labcmd::wait(&server, &jobs, Duration::from_secs(300))?;
    let both = t.elapsed();
    for ((name, words), s) in variants.iter().zip(&states) {
        let r = labcmd::import(&server, s, "test-lab")?;
        let l = r.lab.as_ref().context("no lab in the results")?;
        ensure!(
            l.lab == "test-lab"
                && l.job == s.id.to_string()
                && l.device_type == "qemu"
                && l.device.starts_with("qemu-"),
            "job {}: the results name the lab {:?}, job {:?}, device {:?} of type {:?}",
            s.id,
            l.lab,
            l.job,
            l.device,
            l.device_type
        );
        ensure!(r.label == *name, "job {}: label {:?}", s.id, r.label);
        let job = log::parse_log(&server.log(s.id)?)?;
        same_as_direct(&r, &job, &direct(&format!("{words} {APPEND}"), false)?)
            .with_context(|| format!("variant {name} (job {})", s.id))?;
    }
    Ok(format!(
        "jobs {} and {} submitted to finished in {:.1} s together, each equal to its direct boot",
        jobs[0].id,
        jobs[1].id,
        both.as_secs_f64()
    ))
}

/// A test boot's job (`lava --mode test`): LAVA's own results (the
/// server's `jobs/ID/yaml/`, what its results page and `lavacli results`
/// show) list every KTAP case with its result, in the kernel's order and
/// as many as its plan, equal to the kernel's `test` records in the job's
/// log; `lab` imports it as such. Read here apart from `lab`'s own check.
fn test_mode(dir: &Path) -> Result<String> {
    let server = connect()?;
    let written = write_jobs(&dir.join("test-mode"), &["--mode", "test"])?;
    let t = Instant::now();
    let jobs = submit(&server, &written)?;
    let states = labcmd::wait(&server, &jobs, Duration::from_secs(300))?;
    let took = t.elapsed();
    let s = &states[0];
    ensure!(s.health == "Complete", "job {}: {}", s.id, s.health);
    let listed: Vec<_> = log::parse_results(&server.results(s.id)?)?
        .into_iter()
        .filter(|c| log::in_suite(c, crate::lava::SUITE))
        .collect();
    let job = log::parse_log(&server.log(s.id)?)?;
    let records = crate::report::parse_log(&job.serial)?;
    let tests: Vec<_> = crate::report::of_kind(&records, abi::report::kind::TEST).collect();
    let plan = job
        .serial
        .lines()
        .find_map(|l| l.trim_end().strip_prefix("1..")?.parse::<usize>().ok());
    ensure!(
        plan == Some(tests.len()) && tests.len() > 100,
        "the kernel's plan {plan:?}, {} test records",
        tests.len()
    );
    ensure!(
        listed.len() == tests.len(),
        "LAVA lists {} cases, the kernel ran {} tests",
        listed.len(),
        tests.len()
    );
    for (k, (c, t)) in listed.iter().zip(&tests).enumerate() {
        let name = t.get("name").unwrap_or("");
        let result = t.get("result").unwrap_or("");
        ensure!(
            c.case == crate::cmd::import::case_id(name) && c.result == result,
            "LAVA's case {} is {} ({}), the kernel's test {name:?} ({result})",
            k + 1,
            c.case,
            c.result
        );
    }
    let count = |r: &str| listed.iter().filter(|c| c.result == r).count();
    ensure!(
        count("skip") > 0 && count("fail") == 0,
        "{} skipped, {} failed",
        count("skip"),
        count("fail")
    );
    match labcmd::fetch(&server, s, "test-lab")? {
        labcmd::Imported::Tests(t) => ensure!(
            t.cases.len() == tests.len(),
            "lab imported {} tests",
            t.cases.len()
        ),
        labcmd::Imported::Figures(_) => bail!("lab imported a test boot's job as figures"),
    }
    Ok(format!(
        "job {} submitted to finished in {:.1} s: {} cases on LAVA's list ({} pass, {} skip), each the kernel's",
        s.id,
        took.as_secs_f64(),
        listed.len(),
        count("pass"),
        count("skip")
    ))
}

/// The profile of the model job.
const PROFILE: &str = "p4";

/// A model job (`lava --clock model --profile P`): the plugin, deployed
/// with the kernel, writes its file to QEMU's stderr, which the worker's
/// console carries into the job's log; `lab` imports the modelled figures,
/// which must be exactly those of a direct `run --clock model --profile P`
/// boot of the same build (the model is deterministic under icount).
fn model_job(dir: &Path) -> Result<String> {
    let server = connect()?;
    let written = write_jobs(
        &dir.join("model"),
        &["--clock", "model", "--profile", PROFILE, "--append", APPEND],
    )?;
    let t = Instant::now();
    let jobs = submit(&server, &written)?;
    let states = labcmd::wait(&server, &jobs, Duration::from_secs(300))?;
    let took = t.elapsed();
    let s = &states[0];
    let r = labcmd::import(&server, s, "test-lab")?;
    ensure!(
        r.model_profile.as_deref() == Some(PROFILE),
        "job {}: the imported results' model profile is {:?}",
        s.id,
        r.model_profile
    );
    let modelled = r.benches.iter().filter(|b| b.model.is_some()).count();
    ensure!(modelled > 0, "job {}: no figure modelled", s.id);
    let job = log::parse_log(&server.log(s.id)?)?;
    same_as_direct(&r, &job, &direct_model(APPEND, PROFILE)?)
        .with_context(|| format!("job {}", s.id))?;
    Ok(format!(
        "job {} submitted to finished in {:.1} s: {modelled} figures modelled under {PROFILE}, equal to a direct model boot's",
        s.id,
        took.as_secs_f64()
    ))
}

/// Jobs that fail: a kernel URL that does not exist, a test action that
/// times out, a kernel that panics. Each is an error naming its job, and
/// no results file is written.
fn failing(dir: &Path) -> Result<()> {
    let server = connect()?;
    let mut jobs = Vec::new();
    // Each job, and what its error must say of the cause.
    for (name, flags, cause) in [
        (
            "bad URL",
            vec![
                "--base-url",
                "file:///nonexistent/testbed",
                "--append",
                APPEND,
            ],
            "/nonexistent/testbed/",
        ),
        (
            "timeout",
            vec!["--timeout", "1", "--append", "batches=256"],
            "timed out",
        ),
        ("panic", vec!["--append", "crash=panic"], "kernel panic"),
    ] {
        let w = write_jobs(&dir.join(name.replace(' ', "-")), &flags)?;
        let mut j = submit(&server, &w)?;
        jobs.push((name, j.remove(0), cause));
    }
    let results = dir.join("results");
    std::fs::create_dir_all(&results)?;
    let subs: Vec<Submitted> = jobs
        .iter()
        .map(|(_, j, _)| Submitted {
            id: j.id,
            file: j.file.clone(),
        })
        .collect();
    let out = Output {
        save: true,
        quiet: true,
    };
    let e = match labcmd::finish(
        &server,
        &server_args(&the_instance().token_file()),
        out,
        &subs,
        &results,
    ) {
        Ok(_) => bail!("three failing jobs were imported"),
        Err(e) => format!("{e:#}"),
    };
    for (name, j, cause) in &jobs {
        ensure!(
            e.contains(&format!("job {}", j.id)),
            "the error does not name the {name} job ({}): {e}",
            j.id
        );
        // Each job's own refusal, as the user sees it.
        let s = server.job(j.id)?;
        match labcmd::import(&server, &s, "test-lab") {
            Ok(_) => bail!("the {name} job ({}) was imported", j.id),
            Err(e) => {
                let e = format!("{e:#}");
                ensure!(
                    e.contains(&format!("job {}", j.id)) && e.contains(cause),
                    "the {name} job's error does not name it and say {cause:?}: {e}"
                );
            }
        }
    }
    let saved = std::fs::read_dir(&results)?.count();
    ensure!(saved == 0, "{saved} results files written for failed jobs");
    Ok(())
}

/// A wrong token: refused by the server, said so, the token not shown.
fn wrong_token(dir: &Path) -> Result<()> {
    let bad = dir.join("bad-token");
    let secret = "0123456789abcdefwrongtoken";
    std::fs::write(&bad, secret)?;
    match labcmd::connect(&server_args(&bad)) {
        Ok(_) => bail!("the server accepted a wrong token"),
        Err(e) => {
            let e = format!("{e:#}");
            ensure!(
                e.contains("refused the token") && e.contains(&bad.display().to_string()),
                "the refusal is not clear: {e}"
            );
            ensure!(!e.contains(secret), "the error shows the token: {e}");
        }
    }
    Ok(())
}

/// The server goes away after a submission, while `lab` waits: a clear
/// error naming `lab fetch`; with the server back, `lab fetch` imports
/// the job.
fn server_gone(dir: &Path) -> Result<()> {
    let inst = the_instance();
    let server = connect()?;
    let w = write_jobs(&dir.join("gone"), &["--append", APPEND])?;
    let jobs = submit(&server, &w)?;
    inst.stop("gunicorn")?;
    let e = match labcmd::wait(&server, &jobs, Duration::from_secs(300)) {
        Ok(_) => bail!("the wait ended well with the server gone"),
        Err(e) => format!("{e:#}"),
    };
    let id = jobs[0].id;
    ensure!(
        e.contains("cannot reach the LAVA server") && e.contains(&format!("lab fetch {id}")),
        "the error does not say the server is gone and how to resume: {e}"
    );
    inst.start("gunicorn")?;
    let t = Instant::now();
    let server = loop {
        match connect() {
            Ok(s) => break s,
            Err(_) if t.elapsed() < Duration::from_secs(60) => {
                std::thread::sleep(Duration::from_millis(500))
            }
            Err(e) => return Err(e.context("the server did not come back")),
        }
    };
    // `lab fetch ID`, results into a scratch directory.
    let results = dir.join("results-fetch");
    std::fs::create_dir_all(&results)?;
    let out = Output {
        save: true,
        quiet: true,
    };
    let resumed = Submitted { id, file: None };
    labcmd::finish(
        &server,
        &server_args(&inst.token_file()),
        out,
        &[resumed],
        &results,
    )?;
    let saved = std::fs::read_dir(&results)?.count();
    ensure!(saved == 1, "lab fetch {id} wrote {saved} results files");
    let r = labcmd::import(&server, &server.job(id)?, "test-lab")?;
    let job = log::parse_log(&server.log(id)?)?;
    same_as_direct(&r, &job, &direct(APPEND, false)?)
}

/// The lab server tests the filter selects, in the order they run: the
/// first brings the instance up, the last takes it down. Skipped (each
/// said so) where there is no root or no way to install LAVA.
pub fn self_tests(filter: Option<&str>) -> Vec<Test<'static>> {
    let tests: [(&str, Check); 6] = [
        (
            "lab server: two variants' jobs in flight on a LAVA instance, fetched over REST and imported, equal their direct icount boots",
            in_flight,
        ),
        (
            "lab server: a test boot's job lists every KTAP case on LAVA's results with the kernel's pass, fail or skip",
            test_mode,
        ),
        (
            "lab server: a model job's plugin output comes back in its log; the imported model figures equal a direct run --clock model boot's",
            model_job,
        ),
        (
            "lab server: failing jobs (bad URL, timeout, kernel panic) each end in an error naming the job, nothing imported",
            |d| failing(d).map(|()| String::new()),
        ),
        (
            "lab server: a wrong token is refused, clearly and without showing it",
            |d| wrong_token(d).map(|()| String::new()),
        ),
        (
            "lab server: the server gone mid-wait is a clear error; lab fetch then imports the job",
            |d| server_gone(d).map(|()| String::new()),
        ),
    ];
    tests_sharing(
        &tests,
        filter,
        || {
            if let Some(why) = cannot_run() {
                return Err(format!("{SKIP}{why}"));
            }
            let t = Instant::now();
            let i = the_instance();
            // What an earlier run left (killed mid-test).
            let _ = i.down();
            i.up().map_err(|e| format!("lab up: {e:#}"))?;
            eprintln!("lab up: {:.0} s", t.elapsed().as_secs_f64());
            let dir = state().join("scratch");
            std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
            Ok(dir)
        },
        || match cannot_run() {
            None => the_instance()
                .down()
                .map_err(|e| format!("lab down: {e:#}")),
            Some(_) => Ok(()),
        },
    )
}
