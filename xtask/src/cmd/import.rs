//! `cargo xtask import`: a serial log (e.g. captured from real hardware)
//! turned into results JSON; with `--model FILE`, the model plugin's file
//! of the same boot joins it, as `run --clock model` merges them. A LAVA
//! job's log (`lava-run`'s, or the server's `lavacli jobs logs --raw`) is
//! recognised as such: its serial output is imported, the lab's device as
//! the system, and a job that ended early is said so, never imported.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use clap::Args;

use crate::lava::{self, log::Verdict, Lab};
use crate::machine::Clock;
use crate::{kbuild, model, results};

#[derive(Args)]
pub struct ImportArgs {
    /// The serial log (what the kernel printed on COM1).
    log: PathBuf,
    /// The model plugin's file of the same boot (a `--clock model` boot:
    /// `run --model-file`, or QEMU's `-plugin ...,out=FILE`): its modelled
    /// figures join the log's.
    #[arg(long, value_name = "FILE")]
    model: Option<PathBuf>,
    /// A LAVA job's log: the device that ran it (its hostname in the lab).
    #[arg(long, value_name = "NAME")]
    device: Option<String>,
    /// A LAVA job's log: the device type (`qemu`, or the lab's type of PC).
    #[arg(long, value_name = "TYPE")]
    device_type: Option<String>,
    /// A LAVA job's log: the job id (default: the id the log's paths show).
    #[arg(long, value_name = "ID")]
    job: Option<String>,
    /// A LAVA job's log: the job's results too (`lavacli results JOB
    /// --yaml`), checked against the log (verdict and every figure).
    #[arg(long, value_name = "FILE")]
    lava_results: Option<PathBuf>,
    /// Label in the results file name.
    #[arg(long, default_value = "import")]
    label: String,
    /// Print the JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Do not write a results file.
    #[arg(long)]
    no_save: bool,
}

/// What an import of an icount log without `--model` says: the figures
/// are instruction counts, whatever clock the host computed beside them.
pub const NO_MODEL_NOTE: &str = "no modelled figures: a serial log holds the guest's instruction counts only; the model plugin writes its figures to a file of its own (for a --clock model boot give it with --model FILE)";

pub fn import(a: ImportArgs) -> Result<i32> {
    let bytes =
        std::fs::read(&a.log).with_context(|| format!("cannot read {}", a.log.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    if lava::log::is_lava_log(&text) {
        return import_lava(&a, &text);
    }
    if let Some(cases) = lava::log::results_file(&text) {
        bail!(
            "{} is a LAVA job's results (`lavacli results --yaml`: {} test cases, {}): they hold LAVA's copies of the medians, not the kernel's records; import the job's log (`lavacli jobs logs --raw JOB > job.log`), with --lava-results {} to check the two against each other",
            a.log.display(),
            cases.len(),
            match lava::log::verdict(&cases) {
                Verdict::Complete => "the job complete".to_string(),
                Verdict::Failed(e) => format!("the job ended early: {e}"),
                Verdict::Unfinished => "no verdict on the job".to_string(),
            },
            a.log.display()
        );
    }
    if a.device.is_some() || a.device_type.is_some() || a.job.is_some() || a.lava_results.is_some()
    {
        bail!(
            "{} is not a LAVA job's log: --device, --device-type, --job and --lava-results describe one",
            a.log.display()
        );
    }
    let model = match &a.model {
        Some(file) => Some((
            file.as_path(),
            std::fs::read_to_string(file)
                .with_context(|| format!("cannot read the model file {}", file.display()))?,
        )),
        None => None,
    };
    let (results, modelled) = from_serial(
        &text,
        &a.log,
        model.as_ref().map(|(p, t)| (*p, t.as_str())),
        &a.label,
    )?;
    match (&a.model, modelled) {
        (Some(file), Some(n)) => eprintln!(
            "import: {n} figures {} from {}",
            model::label(
                results.model_profile.as_deref().unwrap_or_default(),
                results.virt()
            ),
            file.display()
        ),
        _ if results.clock() == Some(Clock::Icount) => {
            eprintln!("import: {}: {NO_MODEL_NOTE}", a.log.display())
        }
        _ => {}
    }
    if a.json {
        print!("{}", results.to_json()?);
    } else {
        print!("{}", results.table());
        if results.model_profile.is_some() {
            println!();
            print!("{}", model::table(&results));
        }
    }
    if !a.no_save {
        let path = results.save(&kbuild::root().join("results"))?;
        eprintln!("results: {}", path.display());
    }
    Ok(0)
}

/// The results of a serial log `text` (read from `log_path`, which errors
/// name) that is not a LAVA job's, with the model plugin's file `model`
/// (its path and text) merged in when given; and then how many figures
/// are modelled. What `import` does between reading its files and printing.
pub(crate) fn from_serial(
    text: &str,
    log_path: &Path,
    model: Option<(&Path, &str)>,
    label: &str,
) -> Result<(results::Results, Option<usize>)> {
    let mut results = results::Results::from_log(text, label, results::IMPORT_SOURCE)
        .with_context(|| format!("{} is not a usable testbed log", log_path.display()))?;
    if results.benches.is_empty() {
        bail!(
            "{} holds no benchmark records (was the kernel run with prog=bench, prog=locks or mode=smp?)",
            log_path.display()
        );
    }
    let modelled = match model {
        Some((file, model_text)) => {
            Some(with_model(&mut results, text, log_path, file, model_text)?)
        }
        None => None,
    };
    Ok((results, modelled))
}

/// Merges the plugin's file `file` (text `text`) into the results of the
/// log `log_path` (text `log`): the file must be a finished model file,
/// the log an icount boot's with model snapshots, and every snapshot the
/// log names must be in the file. Returns how many figures are modelled.
fn with_model(
    r: &mut results::Results,
    log: &str,
    log_path: &Path,
    file: &Path,
    text: &str,
) -> Result<usize> {
    let parsed = model::parse_file(text)
        .with_context(|| format!("{} is not a finished model plugin file", file.display()))?;
    if r.clock() != Some(Clock::Icount) {
        bail!(
            "{} is a clock={} boot's log: a model boot runs under icount, so {} cannot be its model file",
            log_path.display(),
            r.clock,
            file.display()
        );
    }
    model::apply(r, log, &parsed).with_context(|| {
        format!(
            "{} and {} are not the log and the model file of one boot",
            log_path.display(),
            file.display()
        )
    })?;
    // The entry benchmarks count the same instructions under icount and in
    // the model (the boot tests hold them to it): a file of another build
    // or command line shows here, even where its snapshots pair.
    for b in r
        .benches
        .iter()
        .filter(|b| abi::Mechanism::from_key(&b.mech).is_some())
    {
        if let Some(m) = b.model.as_ref().filter(|m| m.insns != b.median) {
            bail!(
                "{} and {} are not the log and the model file of one boot: {}: the model counted {} instructions per call, the log {}",
                log_path.display(),
                file.display(),
                b.name,
                m.insns,
                b.median
            );
        }
    }
    let modelled = model::metrics(r).len();
    if modelled == 0 {
        bail!(
            "{} names no model snapshots (a kernel older than the model clock?): nothing of {} to import",
            log_path.display(),
            file.display()
        );
    }
    Ok(modelled)
}

/// Where imported LAVA figures come from, as the results JSON's `source` says.
pub const LAVA_SOURCE: &str = "lava";

fn import_lava(a: &ImportArgs, text: &str) -> Result<i32> {
    if a.model.is_some() {
        bail!("--model joins a model plugin's file to a serial log; a LAVA model job's log carries its plugin's file itself");
    }
    let job = match &a.job {
        Some(j) => j.clone(),
        // A log that cannot be read says why, not that its id is missing.
        None => lava::log::parse_log(text)
            .with_context(|| format!("{}: nothing imported", a.log.display()))?
            .job_id
            .context("the log does not show its job id: give --job ID")?,
    };
    let (Some(device), Some(device_type)) = (&a.device, &a.device_type) else {
        bail!(
            "{} is a LAVA job's log, which does not name its device: give --device NAME and --device-type TYPE (`lavacli jobs show {job}` prints them)",
            a.log.display()
        );
    };
    let lab = Lab {
        device: device.clone(),
        device_type: device_type.clone(),
        job,
        lab: String::new(),
    };
    let lava_results = a
        .lava_results
        .as_ref()
        .map(|p| {
            std::fs::read_to_string(p)
                .map(|t| (p.as_path(), t))
                .with_context(|| format!("cannot read the LAVA results file {}", p.display()))
        })
        .transpose()?;
    let label = if a.label == "import" {
        format!("lava-{}", lab.job)
    } else {
        a.label.clone()
    };
    // A test boot's job: its tests, LAVA's list checked against the
    // kernel's (no figures, nothing saved).
    let serial = lava::log::parse_log(text)
        .map(|l| l.serial)
        .unwrap_or_default();
    if is_test_boot(&serial) {
        let t = tests_from_lava(text, lava_results.as_ref().map(|(_, t)| t.as_str()), &lab)
            .with_context(|| format!("{}: LAVA's test cases", a.log.display()))?;
        println!("job {}: {}", lab.job, t.summary());
        return Ok(if t.count("fail") == 0 { 0 } else { 1 });
    }
    let results = from_lava(
        text,
        lava_results.as_ref().map(|(p, t)| (*p, t.as_str())),
        lab,
        &label,
    )
    .with_context(|| format!("{}: nothing imported", a.log.display()))?;
    if a.json {
        print!("{}", results.to_json()?);
    } else {
        print!("{}", results.table());
    }
    if !a.no_save {
        let path = results.save(&kbuild::root().join("results"))?;
        eprintln!("results: {}", path.display());
    }
    Ok(0)
}

/// The results of a LAVA job from its log `text` (and its results file,
/// `lavacli results --yaml`, its path and text, when given): the job must
/// have completed, the kernel must have ended with success, and every
/// figure LAVA recorded must be a finite number and the one the kernel's
/// records hold.
pub fn from_lava(
    text: &str,
    lava_results: Option<(&Path, &str)>,
    lab: Lab,
    label: &str,
) -> Result<results::Results> {
    let log = lava::log::parse_log(text)?;
    let mut cases = log.cases.clone();
    // Every figure LAVA recorded, in the log and in the results file: each
    // is checked, one source never hiding the other's.
    let mut figures: Vec<(String, f64)> = lava::log::figures(&log.cases)
        .context("the job's log")?
        .into_iter()
        .map(|(case, (m, _))| (case, m))
        .collect();
    if let Some((path, r)) = lava_results {
        let file = || format!("the LAVA results file {}", path.display());
        let more = lava::log::parse_results(r).with_context(file)?;
        if let Verdict::Failed(e) = lava::log::verdict(&more) {
            bail!("job {} ended early: {e}", lab.job);
        }
        figures.extend(
            lava::log::figures(&more)
                .with_context(file)?
                .into_iter()
                .map(|(case, (m, _))| (case, m)),
        );
        cases.extend(more);
    }
    ended_well(&cases, &log, &lab)?;
    if log.serial.trim().is_empty() {
        bail!(
            "job {} completed but its log holds no serial output",
            lab.job
        );
    }
    let (serial, model_text) = split_model(&log.serial)?;
    let mut r = results::Results::from_log(&serial, label, LAVA_SOURCE)
        .context("the job's serial output")?;
    if let Some(text) = &model_text {
        with_model(
            &mut r,
            &serial,
            Path::new(&format!("job {}'s serial output", lab.job)),
            Path::new(&format!("job {}'s model plugin output", lab.job)),
            text,
        )?;
    }
    for (case, m) in figures {
        let Some(b) = r.benches.iter().find(|b| case_id(&b.name) == case) else {
            bail!("LAVA recorded a figure {case} = {m} that no record of the kernel holds");
        };
        if (b.median - m).abs() > 1e-9 * b.median.abs().max(1.0) {
            bail!(
                "LAVA recorded {case} = {m}, the kernel's record {} = {}: the job's results and log disagree",
                b.name,
                b.median
            );
        }
    }
    r.host = lab.system();
    r.lab = Some(lab);
    Ok(r)
}

/// A LAVA job's serial output split into the kernel's and the model
/// plugin's file, which a `--clock model` job's plugin writes to QEMU's
/// stderr when QEMU exits: after the kernel's end record, from its
/// `model1` line to its `end` line (a worker's console turns each line
/// end into `\r\n`). Nothing follows the end record in an icount job's
/// output; a plugin that refused (`error ...`) is an error.
pub fn split_model(serial: &str) -> Result<(String, Option<String>)> {
    let end = format!(
        "{}{} {} ",
        abi::report::MARKER,
        abi::report::SCHEMA,
        abi::report::kind::END
    );
    let lines: Vec<&str> = serial.lines().map(|l| l.trim_end_matches('\r')).collect();
    let Some(after) = lines.iter().rposition(|l| l.starts_with(&end)) else {
        return Ok((serial.to_string(), None));
    };
    let tail = &lines[after + 1..];
    if let Some(e) = tail.iter().find(|l| l.starts_with("error ")) {
        bail!("the model plugin wrote no figures: {e}");
    }
    let Some(from) = tail.iter().position(|l| l.starts_with("model1 ")) else {
        return Ok((serial.to_string(), None));
    };
    let Some(to) = tail[from..].iter().position(|l| *l == "end") else {
        bail!("the model plugin's output in the job's log has no `end` line (cut short: did LAVA stop reading before QEMU ended?)");
    };
    let model: String = tail[from..=from + to]
        .iter()
        .map(|l| format!("{l}\n"))
        .collect();
    let kernel: String = lines[..=after]
        .iter()
        .chain(&tail[..from])
        .chain(&tail[from + to + 1..])
        .map(|l| format!("{l}\n"))
        .collect();
    Ok((kernel, Some(model)))
}

/// The job's verdict from its cases: an error unless LAVA says it
/// finished.
fn ended_well(cases: &[lava::log::TestCase], log: &lava::log::JobLog, lab: &Lab) -> Result<()> {
    match lava::log::verdict(cases) {
        Verdict::Complete => {}
        Verdict::Failed(e) => bail!(
            "job {} ended early: {e}{}",
            lab.job,
            match log.errors.last() {
                Some(last) if !e.contains(last.as_str()) => format!(" (LAVA said: {last})"),
                _ => String::new(),
            }
        ),
        Verdict::Unfinished => bail!(
            "the log ends before LAVA's verdict on job {} (the job still running, or the log cut short)",
            lab.job
        ),
    }
    Ok(())
}

/// Whether a LAVA job's serial output is a test boot's (`mode=test` on the
/// kernel's command line, as its boot record says).
pub fn is_test_boot(serial: &str) -> bool {
    crate::report::parse_log(serial).is_ok_and(|r| {
        crate::report::of_kind(&r, abi::report::kind::BOOT).any(|b| {
            b.get("cmdline")
                .is_some_and(|c| c.split_whitespace().any(|w| w == "mode=test"))
        })
    })
}

/// A test boot run in a lab: its tests as LAVA listed them, each checked
/// against the kernel's KTAP line and `test` record.
#[derive(Debug)]
pub struct LabTests {
    /// (the kernel's name of the test, its result: `pass`, `fail`, `skip`).
    pub cases: Vec<(String, String)>,
}

impl LabTests {
    pub fn count(&self, result: &str) -> usize {
        self.cases.iter().filter(|(_, r)| r == result).count()
    }

    /// One line: how many, how they ended.
    pub fn summary(&self) -> String {
        format!(
            "{} tests as LAVA lists them, each the kernel's KTAP line and record: {} passed, {} failed, {} skipped",
            self.cases.len(),
            self.count("pass"),
            self.count("fail"),
            self.count("skip")
        )
    }
}

/// A test boot's job (`lava --mode test`): LAVA's verdict, then LAVA's
/// cases of the KTAP monitor (from `lava_results`, the server's results,
/// when given; else the log's) checked against the kernel: the same tests
/// in the same order with the same results, as many as KTAP's plan, and
/// the KTAP lines the same as the kernel's `test` records. A mismatch is
/// an error naming the first case that differs.
pub fn tests_from_lava(text: &str, lava_results: Option<&str>, lab: &Lab) -> Result<LabTests> {
    let log = lava::log::parse_log(text)?;
    let mut cases = log.cases.clone();
    let lava_cases = match lava_results {
        Some(r) => {
            let more = lava::log::parse_results(r).context("the job's LAVA results")?;
            cases.extend(more.iter().cloned());
            more
        }
        None => log.cases.clone(),
    };
    ended_well(&cases, &log, lab)?;
    let records = crate::report::parse_log(&log.serial).context("the job's serial output")?;
    let tests: Vec<_> = crate::report::of_kind(&records, abi::report::kind::TEST).collect();
    let ktap = crate::ktap::parse(&log.serial)
        .context("the job's KTAP lines")?
        .context("the test boot printed no KTAP (no `KTAP version 1` line)")?;
    let plan = ktap
        .plan
        .context("the kernel's KTAP has no plan (`1..N`): the run did not end")?;
    if plan as usize != tests.len() {
        bail!(
            "the kernel's KTAP plan is 1..{plan}, its records count {} tests",
            tests.len()
        );
    }
    for (c, t) in ktap.cases.iter().zip(&tests) {
        c.is_record(t.get("name"), t.get("result"))
            .map_err(anyhow::Error::msg)?;
    }
    let listed: Vec<_> = lava_cases
        .iter()
        .filter(|c| lava::log::in_suite(c, lava::SUITE))
        .collect();
    for (k, c) in ktap.cases.iter().enumerate() {
        let Some(l) = listed.get(k) else {
            bail!(
                "LAVA lists {} test cases, the kernel's KTAP plan is 1..{plan}: test {} ({:?}, {}) is not on LAVA's list",
                listed.len(),
                c.number,
                c.name,
                c.result.word()
            );
        };
        if l.case != case_id(&c.name) || l.result != c.result.word() {
            bail!(
                "LAVA's case {} is {} ({}), the kernel's KTAP test {} is {:?} ({}): LAVA's results and the kernel's disagree",
                k + 1,
                l.case,
                l.result,
                c.number,
                c.name,
                c.result.word()
            );
        }
    }
    if listed.len() != ktap.cases.len() {
        let extra = &listed[ktap.cases.len()];
        bail!(
            "LAVA lists {} test cases, the kernel's KTAP plan is 1..{plan}: case {} ({}) is none of the kernel's",
            listed.len(),
            extra.case,
            extra.result
        );
    }
    Ok(LabTests {
        cases: ktap
            .cases
            .iter()
            .map(|c| (c.name.clone(), c.result.word().to_string()))
            .collect(),
    })
}

/// LAVA's test case id for a figure's name: lower case, every run of
/// other characters than letters, digits and `_` made one `_`.
pub fn case_id(name: &str) -> String {
    let mut s = String::new();
    let mut in_run = false;
    for c in name.to_lowercase().chars() {
        if c.is_alphanumeric() || c == '_' {
            s.push(c);
            in_run = false;
        } else if !in_run {
            s.push('_');
            in_run = true;
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The serial output of a test boot of three tests, one skipped.
    const SERIAL: &[&str] = &[
        "KTAP version 1",
        "@@tb1 test name=a%20one result=pass",
        "ok 1 a one",
        "@@tb1 test name=b result=skip detail=no%20SEP",
        "ok 2 b # SKIP no SEP",
        "@@tb1 test name=c result=pass",
        "ok 3 c",
        "1..3",
        "@@tb1 end status=success",
    ];

    /// A LAVA log of that boot: its serial lines, then LAVA's cases
    /// (`(case, result)`) and its verdict.
    fn job_log(cases: &[(&str, &str)]) -> String {
        let mut s = String::new();
        for l in SERIAL {
            s += &format!("{{\"dt\": \"x\", \"lvl\": \"target\", \"msg\": \"{l}\"}}\n");
        }
        for (c, r) in cases {
            s += &format!("{{\"dt\": \"x\", \"lvl\": \"results\", \"msg\": {{\"case\": \"{c}\", \"definition\": \"testbed\", \"result\": \"{r}\"}}}}\n");
        }
        s + "{\"dt\": \"x\", \"lvl\": \"results\", \"msg\": {\"case\": \"job\", \"definition\": \"lava\", \"result\": \"pass\"}}\n"
    }

    /// A model job's console: the kernel's lines, its end record, then
    /// the plugin's file from QEMU's stderr, each line ending in `\r`.
    #[test]
    fn the_model_plugins_file_is_split_from_the_kernels_output() {
        let serial = "@@tb1 boot x\r\nhello\r\n@@tb1 end status=success\r\nmodel1 profile=p4 virt=0 ncpus=1\r\nparam a=1\r\nend\r\nmodel plugin: a note\r\n";
        let (kernel, model) = split_model(serial).unwrap();
        assert_eq!(
            kernel,
            "@@tb1 boot x\nhello\n@@tb1 end status=success\nmodel plugin: a note\n"
        );
        assert_eq!(
            model.as_deref(),
            Some("model1 profile=p4 virt=0 ncpus=1\nparam a=1\nend\n")
        );
        // An icount job's output is left as it is.
        let icount = "@@tb1 boot x\n@@tb1 end status=success\n";
        assert_eq!(split_model(icount).unwrap(), (icount.to_string(), None));
        // A cut file, and a plugin that refused, are errors.
        let cut = serial.replace("end\r\n", "");
        let e = split_model(&cut).unwrap_err().to_string();
        assert!(e.contains("has no `end` line"), "{e}");
        let refused = "@@tb1 end status=success\nerror QEMU ran the vCPUs on several threads\n";
        let e = split_model(refused).unwrap_err().to_string();
        assert!(e.contains("wrote no figures: error QEMU ran"), "{e}");
    }

    fn lab() -> Lab {
        Lab {
            job: "7".into(),
            ..Lab::default()
        }
    }

    #[test]
    fn lavas_cases_equal_the_kernels_tests() {
        let good = [("a_one", "pass"), ("b", "skip"), ("c", "pass")];
        let t = tests_from_lava(&job_log(&good), None, &lab()).unwrap();
        assert_eq!((t.count("pass"), t.count("skip")), (2, 1));
        assert_eq!(t.cases[0], ("a one".to_string(), "pass".to_string()));
        // The server's results file is LAVA's list when given.
        let file = "- suite: lava\n  name: job\n  result: pass\n- suite: 0_testbed\n  name: a_one\n  result: pass\n- suite: 0_testbed\n  name: b\n  result: skip\n- suite: 0_testbed\n  name: c\n  result: pass\n";
        assert!(tests_from_lava(&job_log(&good), Some(file), &lab()).is_ok());
        let e = tests_from_lava(&job_log(&good), Some(&file.replace("skip", "pass")), &lab())
            .unwrap_err()
            .to_string();
        assert_eq!(e, "LAVA's case 2 is b (pass), the kernel's KTAP test 2 is \"b\" (skip): LAVA's results and the kernel's disagree");
    }

    #[test]
    fn a_case_list_that_differs_is_an_error() {
        for (cases, says) in [
            (
                vec![("a_one", "pass"), ("b", "pass"), ("c", "pass")],
                "LAVA's case 2 is b (pass), the kernel's KTAP test 2 is \"b\" (skip)",
            ),
            (
                vec![("a_one", "pass"), ("c", "pass"), ("b", "skip")],
                "LAVA's case 2 is c (pass), the kernel's KTAP test 2 is \"b\" (skip)",
            ),
            (
                vec![("a_one", "pass"), ("b", "skip")],
                "LAVA lists 2 test cases, the kernel's KTAP plan is 1..3: test 3 (\"c\", pass) is not on LAVA's list",
            ),
            (
                vec![("a_one", "pass"), ("b", "skip"), ("c", "pass"), ("d", "fail")],
                "LAVA lists 4 test cases, the kernel's KTAP plan is 1..3: case d (fail) is none of the kernel's",
            ),
        ] {
            let e = tests_from_lava(&job_log(&cases), None, &lab())
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(says), "{cases:?}: {e}");
        }
    }
}
