//! The lab path end to end, for real: `cargo xtask lava --local` writes
//! jobs for a QEMU worker and runs each with `lava-run` (LAVA's own
//! dispatcher, no server), `import` reads each job's log, and the figures
//! must be exactly those of a direct boot under icount. A job that LAVA
//! ends early must be refused by `import`, never read as figures.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::OnceLock;

use anyhow::{bail, ensure, Context, Result};

use crate::cmd::import::{case_id, from_lava};
use crate::cmd::lava::LavaArgs;
use crate::kbuild;
use crate::lava::{log, Lab};
use crate::machine::{Machine, Scratch};
use crate::preflight;
use crate::results::Results;

use super::unit::Test;

/// Small batches: the figures are per call and exact under icount, so a
/// short run shows every difference a long one would.
pub(super) const APPEND: &str = "batches=3 batch_size=64";

/// `cargo xtask lava --local` with `flags` into `out`; the logs it wrote,
/// by variant (`<variant>-1.log`).
fn lava_local(out: &Path, flags: &[&str]) -> Result<()> {
    use clap::Parser;
    #[derive(Parser)]
    struct Cli {
        #[command(flatten)]
        a: LavaArgs,
    }
    let _ = std::fs::remove_dir_all(out);
    let out_arg = out.to_str().context("path")?;
    let mut argv = vec!["lava", "--local", "--no-save", "--quiet", "--out", out_arg];
    argv.extend_from_slice(flags);
    let cli = Cli::try_parse_from(argv)?;
    // A job that failed is the import's to report; the status says so too.
    crate::cmd::lava::lava(cli.a)?;
    Ok(())
}

/// The log of variant `variant`'s first job, imported.
fn imported(out: &Path, variant: &str) -> Result<(Results, log::JobLog)> {
    let path = out.join("logs").join(format!("{variant}-1.log"));
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("no log {}", path.display()))?;
    let job = log::parse_log(&text)?;
    let lab = Lab {
        device: crate::cmd::lava::LOCAL_DEVICE.into(),
        device_type: "qemu".into(),
        job: job.job_id.clone().unwrap_or_default(),
        lab: String::new(),
    };
    let r = from_lava(&text, None, lab, variant)
        .with_context(|| format!("importing {}", path.display()))?;
    Ok((r, job))
}

/// A direct boot (what `cargo xtask run --accel tcg --clock icount` does)
/// with `append`, through GRUB if `grub`.
pub(super) fn direct(append: &str, grub: bool) -> Result<Results> {
    direct_on(append, grub, None)
}

/// A direct boot under the model with profile `profile`, its plugin's
/// file merged (what `cargo xtask run --clock model --profile P` does).
pub(super) fn direct_model(append: &str, profile: &str) -> Result<Results> {
    direct_on(append, false, Some(profile))
}

fn direct_on(append: &str, grub: bool, profile: Option<&str>) -> Result<Results> {
    let art = kbuild::build(true)?;
    let mut b = crate::cmd::test_boot_args(None);
    b.append = append.into();
    b.grub = grub;
    if let Some(p) = profile {
        b.clock = Some(crate::machine::Clock::Model);
        b.profile = Some(p.into());
    }
    let scratch = Scratch::new("lab-direct")?;
    let m = Machine::build(
        &b.spec()?,
        &art,
        &format!("mode=run prog={}", abi::cmdline::DEFAULT_PROG),
        scratch.path(),
    )?;
    let log = m.boot(&mut |_| {})?;
    ensure!(
        log.succeeded(),
        "the direct boot failed: {}",
        log.explain(20)
    );
    let mut r = Results::from_log(&log.serial, "direct", m.backend.source())?;
    crate::model::finish(m.model.as_ref(), &log.serial, &mut r)?;
    Ok(r)
}

/// The imported results must be the direct boot's, field for field, but
/// for where they come from (the lab's device, LAVA as the source); and
/// LAVA must have made a test case of every per-operation figure, in
/// instructions.
pub(super) fn same_as_direct(lab: &Results, job: &log::JobLog, direct: &Results) -> Result<()> {
    let l = lab.lab.as_ref().context("no lab in the imported results")?;
    ensure!(
        lab.host == l.system() && lab.source == "lava" && l.device_type == "qemu",
        "the imported results do not name the lab's device: host {:?}, source {:?}",
        lab.host,
        lab.source
    );
    ensure!(
        !lab.benches.is_empty() && !lab.macros.is_empty(),
        "no figures imported"
    );
    let figures = log::figures(&job.cases)?;
    for b in lab
        .benches
        .iter()
        .filter(|b| b.measure == abi::report::Measure::PerOp)
    {
        match figures.get(&case_id(&b.name)) {
            Some((m, Some(u))) if *m == b.median && u == "instructions" => {}
            other => bail!(
                "LAVA's test case for {} is {other:?}, the record's median {} instructions",
                b.name,
                b.median
            ),
        }
    }
    let same = Results {
        host: direct.host.clone(),
        source: direct.source.clone(),
        label: direct.label.clone(),
        lab: None,
        ..lab.without_timestamp()
    };
    if same != direct.without_timestamp() {
        for (a, b) in lab.benches.iter().zip(&direct.benches) {
            ensure!(
                a.name == b.name && a.median == b.median && a.samples == b.samples,
                "{}: LAVA's job {} (median), the direct boot {} {} (median)",
                a.name,
                a.median,
                b.name,
                b.median
            );
        }
        bail!(
            "the imported results differ from the direct boot's:\nlab:    {}\ndirect: {}",
            serde_json::to_string(&same)?,
            serde_json::to_string(&direct.without_timestamp())?
        );
    }
    Ok(())
}

fn one_job(dir: &Path) -> Result<()> {
    let out = dir.join("one");
    lava_local(&out, &["--append", APPEND])?;
    let (lab, job) = imported(&out, "default")?;
    same_as_direct(&lab, &job, &direct(APPEND, false)?)
}

fn two_variants(dir: &Path) -> Result<()> {
    let out = dir.join("two");
    let variants = [("a", "entry=int80"), ("b", "entry=sysenter")];
    let mut argv = vec!["--append", APPEND];
    let specs: Vec<String> = variants.iter().map(|(n, w)| format!("{n}={w}")).collect();
    for s in &specs {
        argv.extend(["--variant", s.as_str()]);
    }
    lava_local(&out, &argv)?;
    for (name, words) in variants {
        let (lab, job) = imported(&out, name)?;
        ensure!(
            lab.cmdline.contains(words),
            "variant {name}: the kernel's command line {:?} lacks {words}",
            lab.cmdline
        );
        same_as_direct(&lab, &job, &direct(&format!("{words} {APPEND}"), false)?)
            .with_context(|| format!("variant {name}"))?;
    }
    Ok(())
}

fn grub_image(dir: &Path) -> Result<()> {
    let out = dir.join("grub");
    lava_local(&out, &["--grub", "--append", APPEND])?;
    let (lab, job) = imported(&out, "default")?;
    ensure!(
        lab.protocol == "mb2",
        "not booted through GRUB: protocol {}",
        lab.protocol
    );
    same_as_direct(&lab, &job, &direct(APPEND, true)?)
}

/// A model job under `lava-run`: the plugin deployed with the kernel
/// writes its file to QEMU's stderr, the console carries it into the log,
/// and the import's modelled figures are a direct model boot's.
fn model_job(dir: &Path) -> Result<()> {
    let out = dir.join("model");
    lava_local(
        &out,
        &["--clock", "model", "--profile", "p4", "--append", APPEND],
    )?;
    let (lab, job) = imported(&out, "default")?;
    ensure!(
        lab.model_profile.as_deref() == Some("p4") && lab.benches.iter().any(|b| b.model.is_some()),
        "no modelled figures imported"
    );
    same_as_direct(&lab, &job, &direct_model(APPEND, "p4")?)
}

/// A job whose test action times out (1 s for a kernel that runs for
/// several): LAVA ends it early, and `import` must say so.
fn ended_early(dir: &Path) -> Result<()> {
    let out = dir.join("early");
    lava_local(&out, &["--timeout", "1", "--append", "batches=256"])?;
    let path = out.join("logs/default-1.log");
    let text = std::fs::read_to_string(&path)?;
    let job = log::parse_log(&text)?;
    ensure!(
        job.serial.contains("@@tb1 boot ") && !job.serial.contains("@@tb1 end "),
        "the job was not cut short (its serial output ends with the kernel's end record, or never began)"
    );
    let lab = Lab {
        device: "x".into(),
        device_type: "qemu".into(),
        job: "1".into(),
        lab: String::new(),
    };
    match from_lava(&text, None, lab, "early") {
        Ok(_) => bail!("a job that ended early was imported as figures"),
        Err(e) => {
            let e = format!("{e:#}");
            ensure!(
                e.contains("ended early"),
                "the refusal does not say the job ended early: {e}"
            );
        }
    }
    Ok(())
}

/// The lab tests the filter selects, in the order they run (none has run
/// yet). Each needs LAVA's dispatcher, checked once, and shares one
/// scratch directory, removed after the last.
pub fn self_tests(filter: Option<&str>) -> Vec<Test<'static>> {
    let tests: [(&str, Check); 5] = [
        (
            "lava run: a QEMU worker's job under lava-run, imported, equals a direct icount boot",
            |d| one_job(d).map(|()| String::new()),
        ),
        (
            "lava bench: two variants' jobs under lava-run, imported, equal their direct boots",
            |d| two_variants(d).map(|()| String::new()),
        ),
        (
            "lava grub: the GRUB image for icount (no menu countdown) under lava-run equals a direct GRUB boot",
            |d| grub_image(d).map(|()| String::new()),
        ),
        (
            "lava model: a model job's plugin file comes back in its lava-run log, imported equal to a direct model boot",
            |d| model_job(d).map(|()| String::new()),
        ),
        (
            "lava early end: a job LAVA timed out is refused by import",
            |d| ended_early(d).map(|()| String::new()),
        ),
    ];
    let dir: PathBuf = kbuild::root().join("target/xtask/lab-test");
    let scratch = dir.clone();
    tests_sharing(
        &tests,
        filter,
        move || {
            preflight::ensure_lava().map_err(|e| format!("{e:#}"))?;
            Ok(scratch.clone())
        },
        move || {
            let _ = std::fs::remove_dir_all(&dir);
            Ok(())
        },
    )
}

/// A test sharing a set-up with others: it checks in the scratch directory
/// the set-up gives, and says what its PASS line adds (empty: nothing).
pub(super) type Check = fn(&Path) -> Result<String>;

/// The `tests` the filter selects, in the order they run, sharing one
/// set-up: `setup` runs once, in the first test that runs (its error fails
/// each test), and gives the scratch directory every check runs in;
/// `teardown` runs after the last test's check, and its error is that
/// test's.
pub(super) fn tests_sharing(
    tests: &[(&str, Check)],
    filter: Option<&str>,
    setup: impl Fn() -> Result<PathBuf, String> + Send + Sync + 'static,
    teardown: impl Fn() -> Result<(), String> + Send + Sync + 'static,
) -> Vec<Test<'static>> {
    let wanted: Vec<(&str, Check)> = tests
        .iter()
        .copied()
        .filter(|(n, _)| filter.is_none_or(|f| n.contains(f)))
        .collect();
    let ready: Arc<OnceLock<Result<PathBuf, String>>> = Arc::default();
    let (setup, teardown) = (Arc::new(setup), Arc::new(teardown));
    let last = wanted.len();
    wanted
        .into_iter()
        .enumerate()
        .map(|(k, (name, check))| {
            let (ready, setup, teardown) = (ready.clone(), setup.clone(), teardown.clone());
            Test::new(name.to_string(), move || {
                let r = ready
                    .get_or_init(|| setup())
                    .clone()
                    .and_then(|dir| check(&dir).map_err(|e| format!("{e:#}")));
                if k + 1 == last {
                    teardown()?;
                }
                r
            })
        })
        .collect()
}
