//! What a lab hands back, read: a job's log and its results.
//!
//! The log is one YAML flow mapping per line, `{"dt": ..., "lvl": ...,
//! "msg": ...}`, as `lava-run` writes it to stderr and as the server stores
//! it (each line then starts with `- `, the log being a YAML list). The
//! serial output is in the `target` lines (and `feedback` lines: what
//! arrives after the test action has matched its end), with `"` written
//! as `\"`. Test cases and the job's verdict are the `results` lines.
//!
//! `lavacli results <job> --yaml` (and the server's `jobs/ID/yaml/`)
//! gives the same test cases as a YAML list (`suite`, `name`, `result`,
//! `measurement`, `unit`, and `metadata` holding the job's error);
//! [`parse_results`] reads it. Both are read with `serde_norway`, a line
//! of the log at a time.

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde::Deserialize;
use serde_norway::{Mapping, Value};

/// The longest line of a LAVA log (or of a results file) this reader
/// takes, in bytes. The longest serial line the kernel prints is a record
/// of some 24 KiB (`abi::report::MAX_USER_RECORD`), which LAVA's escapes
/// can at most double; LAVA's own messages are shorter.
pub const MAX_LINE: usize = 128 << 10;

/// A line beyond a bound of this reader ([`MAX_LINE`], or the YAML
/// reader's nesting limit): never what a cut or garbled line looks like,
/// so never passed over.
#[derive(Debug)]
pub struct Beyond(String);

impl std::fmt::Display for Beyond {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Beyond {}

/// One message of a LAVA log (`dt` and `ns` are not read).
#[derive(Debug, Deserialize)]
struct Message {
    #[serde(default)]
    lvl: Option<Value>,
    #[serde(default)]
    msg: Option<Value>,
}

/// A YAML error that is a bound of the reader (its nesting limit: the
/// reader's recursion stops there) made a [`Beyond`].
fn yaml_error(e: serde_norway::Error) -> anyhow::Error {
    let text = e.to_string();
    if text.starts_with("recursion limit exceeded") {
        Beyond(format!(
            "mappings and sequences nested deeper than the YAML reader takes ({text}; a LAVA log message nests 3)"
        ))
        .into()
    } else {
        anyhow::Error::new(e)
    }
}

/// One line of a LAVA log (`- ` of the stored list removed), read. A line
/// longer than [`MAX_LINE`] or nested deeper than the YAML reader takes
/// fails with a [`Beyond`].
fn parse_line(line: &str) -> Result<Message> {
    if line.len() > MAX_LINE {
        return Err(Beyond(format!(
            "{} bytes on one line, more than any LAVA log message (this reader takes {MAX_LINE})",
            line.len()
        ))
        .into());
    }
    let line = line.trim();
    let line = line.strip_prefix("- ").unwrap_or(line);
    if !line.starts_with('{') {
        bail!("not a mapping");
    }
    serde_norway::from_str(line).map_err(yaml_error)
}

/// The start of `line` for an error message: a long line is cut.
fn excerpt(line: &str) -> String {
    const SHOWN: usize = 80;
    match line.char_indices().nth(SHOWN) {
        None => format!("{line:?}"),
        Some((at, _)) => format!("{:?}... ({} bytes)", &line[..at], line.len()),
    }
}

/// Whether `text` looks like a LAVA job log (its first line a log message).
pub fn is_lava_log(text: &str) -> bool {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty())
        .is_some_and(|l| {
            let l = l.strip_prefix("- ").unwrap_or(l);
            l.starts_with("{\"dt\":") || l.starts_with("{dt:")
        })
}

/// A LAVA test case: from a log's `results` line or a results file.
#[derive(Clone, Debug, PartialEq)]
pub struct TestCase {
    /// Where it is: its line in the log, or its first in a results file.
    pub line: usize,
    pub suite: String,
    pub case: String,
    pub result: String,
    pub measurement: Option<String>,
    pub units: Option<String>,
    /// For LAVA's own cases (`lava`/`job`): the error, if any, whole.
    pub error: Option<String>,
    /// The case's name as the pattern matched it, before LAVA made an id
    /// of it (`extra: {test_case_id: ...}`), when LAVA kept it.
    pub matched: Option<String>,
}

/// A job's log, read.
#[derive(Clone, Debug, Default)]
pub struct JobLog {
    /// The serial output: every `target` and `feedback` line, in order.
    pub serial: String,
    pub cases: Vec<TestCase>,
    /// The error-level messages (what LAVA said went wrong).
    pub errors: Vec<String>,
    /// The job id the dispatcher's paths show (`.../dispatcher/tmp/<id>/`).
    pub job_id: Option<String>,
}

/// Reads a job's log. A line that is not a log message fails, naming it
/// (a cut last line excepted: the log of a job that died mid-line); so
/// does a line beyond a bound ([`Beyond`]), wherever it is. The log is
/// read a line at a time: what is kept is the serial output, the cases and
/// the errors, each no longer than the lines they come from.
pub fn parse_log(text: &str) -> Result<JobLog> {
    let mut log = JobLog::default();
    // A line that failed, held until another line shows it was not the last.
    let mut failed: Option<anyhow::Error> = None;
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        if let Some(e) = failed.take() {
            return Err(e);
        }
        let m = match parse_line(line) {
            Ok(m) => m,
            Err(e) if e.is::<Beyond>() => bail!("line {}: {e}: {}", n + 1, excerpt(line)),
            Err(e) => {
                failed = Some(anyhow::anyhow!(
                    "line {}: not a LAVA log message: {e}: {}",
                    n + 1,
                    excerpt(line)
                ));
                continue;
            }
        };
        // Every message has a level and a message; a level that is no text
        // is a line nobody can place (its serial output would be lost).
        let (Some(Value::String(lvl)), Some(msg)) = (&m.lvl, &m.msg) else {
            bail!(
                "line {}: not a LAVA log message: no text `lvl` and a `msg`: {}",
                n + 1,
                excerpt(line)
            );
        };
        if log.job_id.is_none() {
            log.job_id = msg.as_str().and_then(job_of_path);
        }
        match lvl.as_str() {
            "target" | "feedback" => match scalar(msg) {
                // LAVA writes a `"` of the serial output as `\"`.
                Some(m) => {
                    log.serial.push_str(&m.replace("\\\"", "\""));
                    log.serial.push('\n');
                }
                None => bail!(
                    "line {}: a {lvl} message (serial output) that is not text: {}",
                    n + 1,
                    excerpt(line)
                ),
            },
            "results" => match untag(msg) {
                Value::Mapping(m) => log.cases.push(case_of(m, "definition", "case", n + 1)),
                _ => bail!(
                    "line {}: a results message that is not a mapping of a test case: {}",
                    n + 1,
                    excerpt(line)
                ),
            },
            "error" | "exception" => {
                if let Some(m) = scalar(msg) {
                    log.errors.push(m);
                }
            }
            _ => {}
        }
    }
    Ok(log)
}

/// The job id in a dispatcher's path (`/var/lib/lava/dispatcher/tmp/<id>/`).
fn job_of_path(msg: &str) -> Option<String> {
    let (_, rest) = msg.split_once("/lava/dispatcher/tmp/")?;
    let id: String = rest.chars().take_while(char::is_ascii_digit).collect();
    (!id.is_empty() && rest[id.len()..].starts_with('/')).then_some(id)
}

/// A value with its tags (`! "24.0"`, `!!float "1.5"`) taken off.
fn untag(v: &Value) -> &Value {
    match v {
        Value::Tagged(t) => untag(&t.value),
        v => v,
    }
}

/// A scalar as text (a number as written back); `None` for a mapping, a
/// sequence or null.
fn scalar(v: &Value) -> Option<String> {
    match untag(v) {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// A test case from a mapping whose suite and case are under `suite` and
/// `case` (a log's `definition`/`case`, a results file's `suite`/`name`).
fn case_of(m: &Mapping, suite: &str, case: &str, line: usize) -> TestCase {
    let text = |m: &Mapping, k: &str| m.get(k).and_then(scalar);
    let meta = match m.get("metadata").map(untag) {
        Some(Value::Mapping(x)) => Some(x),
        _ => None,
    };
    let either = |k: &str| text(m, k).or_else(|| meta.and_then(|x| text(x, k)));
    let error = either("error_msg").map(|e| match either("error_type") {
        Some(t) => format!("{t}: {e}"),
        None => e,
    });
    let extra = |m: &Mapping| match m.get("extra").map(untag) {
        Some(Value::Mapping(x)) => text(x, "test_case_id"),
        _ => None,
    };
    TestCase {
        line,
        suite: text(m, suite).unwrap_or_default(),
        case: text(m, case).unwrap_or_default(),
        result: text(m, "result").unwrap_or_default(),
        // A measurement that is no scalar is kept as what it is, so that
        // `figures` refuses it rather than passing over it.
        measurement: match m.get("measurement").map(untag) {
            Some(Value::Mapping(_)) => Some("(a mapping)".into()),
            Some(Value::Sequence(_)) => Some("(a sequence)".into()),
            Some(v) => scalar(v),
            None => None,
        }
        .filter(|s| !s.is_empty() && s != "None"),
        units: text(m, "units")
            .or_else(|| text(m, "unit"))
            .filter(|s| !s.is_empty() && s != "None"),
        error,
        matched: extra(m).or_else(|| meta.and_then(extra)),
    }
}

/// How a job ended, from its test cases: LAVA's `lava`/`job` case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The job finished (`job` passed).
    Complete,
    /// The job failed or was cancelled: LAVA's error.
    Failed(String),
    /// No `job` case: the job had not finished when the log was taken, or
    /// the log is cut.
    Unfinished,
}

pub fn verdict(cases: &[TestCase]) -> Verdict {
    match cases
        .iter()
        .rev()
        .find(|c| c.suite == "lava" && c.case == "job")
    {
        None => Verdict::Unfinished,
        Some(c) if c.result == "pass" => Verdict::Complete,
        Some(c) => Verdict::Failed(
            c.error
                .clone()
                .unwrap_or_else(|| format!("LAVA's job result is {:?}", c.result)),
        ),
    }
}

/// Reads `lavacli results <job> --yaml`: a YAML list of mappings, each a
/// test case. An item's line is that of its `- ` at the list's indent.
pub fn parse_results(text: &str) -> Result<Vec<TestCase>> {
    for (n, raw) in text.lines().enumerate() {
        if raw.len() > MAX_LINE {
            bail!(
                "line {}: {} bytes on one line, more than any test case's (this reader takes {MAX_LINE}): {}",
                n + 1,
                raw.len(),
                excerpt(raw)
            );
        }
    }
    let items = match serde_norway::from_str::<Value>(text).map_err(yaml_error)? {
        Value::Sequence(s) => s,
        Value::Null => Vec::new(),
        _ => bail!("not a YAML list of test cases"),
    };
    if items.is_empty() {
        bail!("no test cases (is it `lavacli results JOB --yaml`'s output?)");
    }
    // Where each item starts: the lines that open an item of a block list.
    let starts: Vec<usize> = text
        .lines()
        .enumerate()
        .filter(|(_, l)| *l == "-" || l.starts_with("- "))
        .map(|(n, _)| n + 1)
        .collect();
    items
        .iter()
        .enumerate()
        .map(|(k, item)| {
            let line = starts.get(k).copied().unwrap_or(1);
            let Value::Mapping(m) = untag(item) else {
                bail!("line {line}: a test case that is not a mapping");
            };
            let c = case_of(m, "suite", "name", line);
            if c.suite.is_empty() || c.case.is_empty() {
                bail!("line {line}: a test case without a suite or a name (lavacli's name both)");
            }
            Ok(c)
        })
        .collect()
}

/// The test cases of `text` when it is a LAVA results file (`lavacli
/// results JOB --yaml`): a block list whose items name a suite.
pub fn results_file(text: &str) -> Option<Vec<TestCase>> {
    let first = text
        .lines()
        .map(str::trim_end)
        .find(|l| !l.trim().is_empty())?;
    if !first.starts_with("- ") || is_lava_log(text) {
        return None;
    }
    parse_results(text).ok()
}

/// Whether `c` is of the suite `suite` (a server may number suites:
/// `0_testbed`).
pub fn in_suite(c: &TestCase, suite: &str) -> bool {
    c.suite == suite
        || c.suite
            .split_once('_')
            .is_some_and(|(n, s)| s == suite && n.chars().all(|d| d.is_ascii_digit()))
}

/// The figures LAVA recorded as test cases of the testbed's suite, by the
/// benchmark's name (LAVA's case id is the name with `.` made `_`). A
/// measurement that is not a finite number is refused, naming its line:
/// compared with the kernel's figure, `NaN` would pass any check.
pub fn figures(cases: &[TestCase]) -> Result<BTreeMap<String, (f64, Option<String>)>> {
    cases
        .iter()
        .filter(|c| in_suite(c, super::SUITE))
        .filter_map(|c| Some((c, c.measurement.as_ref()?)))
        .map(|(c, m)| match m.trim().parse::<f64>() {
            Ok(x) if x.is_finite() => Ok((c.case.clone(), (x, c.units.clone()))),
            _ => bail!(
                "line {}: test case {} of suite {}: measurement {} is not a finite number",
                c.line,
                c.case,
                c.suite,
                excerpt(m)
            ),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOG: &str = r#"{"dt": "2026-12-01T18:33:04.222109", "lvl": "info", "msg": "lava-dispatcher, installed at version: 2023.01"}
{"dt": "2026-12-01T18:33:04.242745", "lvl": "debug", "msg": "saving as /var/lib/lava/dispatcher/tmp/17/deployimages-tereiljz/kernel/kernel"}
{"dt": "2026-12-01T18:33:04.615729", "lvl": "target", "msg": "cpu: GenuineIntel \\\"QEMU Virtual CPU\\\" family 6"}
{"dt": "2026-12-01T18:33:04.771252", "lvl": "results", "msg": {"case": "int80_null", "definition": "testbed", "extra": {"test_case_id": "int80.null"}, "level": "3.1", "measurement": ! "24.0", "result": "pass", "units": "instructions"}}
{"dt": "2026-12-01T18:33:06.417131", "lvl": "feedback", "msg": "@@tb1 end status=success", "ns": "common"}
{"dt": "2026-12-01T18:33:06.625320", "lvl": "results", "msg": {"case": "job", "definition": "lava", "result": "pass"}}
"#;

    #[test]
    fn a_log_gives_the_serial_output_and_the_cases() {
        assert!(is_lava_log(LOG));
        assert!(!is_lava_log("i386 testbed kernel\n@@tb1 boot"));
        let l = parse_log(LOG).unwrap();
        assert_eq!(
            l.serial,
            "cpu: GenuineIntel \"QEMU Virtual CPU\" family 6\n@@tb1 end status=success\n"
        );
        assert_eq!(verdict(&l.cases), Verdict::Complete);
        assert_eq!(l.job_id.as_deref(), Some("17"));
        let f = figures(&l.cases).unwrap();
        assert_eq!(f["int80_null"], (24.0, Some("instructions".into())));
        // The server's stored log: the same lines as a YAML list.
        let stored: String = LOG.lines().map(|l| format!("- {l}\n")).collect();
        assert_eq!(parse_log(&stored).unwrap().serial, l.serial);
    }

    #[test]
    fn a_job_that_ended_early_says_why() {
        let failed = r#"{"dt": "x", "lvl": "results", "msg": {"case": "job", "definition": "lava", "error_msg": "lava test monitoring has timed out", "error_type": "Test", "result": "fail"}}"#;
        let l = parse_log(failed).unwrap();
        assert_eq!(
            verdict(&l.cases),
            Verdict::Failed("Test: lava test monitoring has timed out".into())
        );
        // Cut before the job's result (its last line cut mid-way too).
        let cut = &LOG[..LOG.find("{\"dt\": \"2026-12-01T18:33:06.625320\"").unwrap() + 30];
        let l = parse_log(cut).unwrap();
        assert_eq!(verdict(&l.cases), Verdict::Unfinished);
        // A line in the middle that is not a message is an error.
        let e = parse_log(&format!("{LOG}garbage\n{LOG}"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 7: not a LAVA log message"), "{e}");
    }

    /// YAML's escapes in a double-quoted message, and tags on a figure.
    #[test]
    fn escapes_and_tags() {
        let text = r#"{"dt": "x", "lvl": "target", "msg": "x\x41\u00e9\\ \"q\""}
{"dt": "x", "lvl": "results", "msg": {"case": "a", "definition": "testbed", "measurement": !!float "1.5", "result": "pass", "units": ! "cycles"}}
"#;
        let l = parse_log(text).unwrap();
        assert_eq!(l.serial, "xAé\\ \"q\"\n");
        assert_eq!(l.cases[0].measurement.as_deref(), Some("1.5"));
        assert_eq!(l.cases[0].units.as_deref(), Some("cycles"));
    }

    /// A job's error that runs over several lines is kept whole: the hand
    /// reader cut it at its first line.
    #[test]
    fn a_multi_line_error_is_kept_whole() {
        let text = "- suite: lava\n  name: job\n  result: fail\n  metadata:\n    error_msg: |\n      Unable to fetch the kernel\n      (404 Not Found)\n    error_type: Infrastructure\n";
        assert_eq!(
            verdict(&parse_results(text).unwrap()),
            Verdict::Failed("Infrastructure: Unable to fetch the kernel\n(404 Not Found)\n".into())
        );
        let quoted = "- suite: lava\n  name: job\n  result: fail\n  metadata:\n    error_msg: 'one\n\n      two'\n";
        assert_eq!(
            verdict(&parse_results(quoted).unwrap()),
            Verdict::Failed("one\ntwo".into())
        );
    }

    #[test]
    fn lavacli_results() {
        let text = "- suite: lava\n  name: job\n  result: fail\n  metadata:\n    error_msg: 'Connection closed'\n    error_type: Infrastructure\n- suite: testbed\n  name: int80_null\n  result: pass\n  measurement: '24.0000000000'\n  unit: instructions\n";
        let c = parse_results(text).unwrap();
        assert_eq!(c.len(), 2);
        assert_eq!(
            verdict(&c),
            Verdict::Failed("Infrastructure: Connection closed".into())
        );
        assert_eq!(
            figures(&c).unwrap()["int80_null"],
            (24.0, Some("instructions".into()))
        );
        assert!(parse_results("").is_err());
    }

    /// A LAVA log line as `lava-run` writes it, `msg` its message.
    fn line(lvl: &str, msg: &str) -> String {
        format!("{{\"dt\": \"2026-12-01T18:33:04.615729\", \"lvl\": \"{lvl}\", \"msg\": {msg}}}\n")
    }

    /// 20 KB of `[` and `{` overflowed the hand reader's stack (the
    /// process aborted); nesting past the YAML reader's limit is refused,
    /// naming the line, wherever the line is (it is no cut last line).
    #[test]
    fn deep_nesting_is_refused() {
        let deep = line("info", &"[{\"a\": ".repeat(10_000));
        for log in [format!("{LOG}{deep}{LOG}"), format!("{LOG}{deep}")] {
            let e = parse_log(&log).unwrap_err().to_string();
            assert!(
                e.starts_with(
                    "line 7: mappings and sequences nested deeper than the YAML reader takes (recursion limit exceeded at line 1 column "
                ),
                "{e}"
            );
            assert!(e.len() < 400, "{e}");
        }
        // As deep as LAVA's messages, and far deeper, reads.
        let nested = |n: usize| line("info", &format!("{}1{}", "[".repeat(n), "]".repeat(n)));
        assert!(parse_line(&nested(100)).is_ok());
        assert!(parse_line(&nested(1000)).unwrap_err().is::<Beyond>());
        let e = parse_results(&format!("- {}", "[".repeat(1000))).unwrap_err();
        assert!(e.is::<Beyond>(), "{e}");
    }

    /// A line longer than `MAX_LINE` is refused before it is read, and the
    /// message quotes only its start.
    #[test]
    fn a_long_line_is_refused() {
        let long = line("target", &format!("\"{}\"", "a".repeat(MAX_LINE)));
        for log in [format!("{LOG}{long}{LOG}"), format!("{LOG}{long}")] {
            let e = parse_log(&log).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!(
                    "line 7: {} bytes on one line, more than any LAVA log message (this reader takes 131072): \"{{\\\"dt\\\"",
                    long.len() - 1
                )),
                "{e}"
            );
            assert!(e.len() < 300, "{e}");
        }
        // At the bound, a line reads.
        let msg = format!(
            "\"{}\"",
            "a".repeat(MAX_LINE - line("target", "").len() - 1)
        );
        let at = line("target", &msg);
        assert_eq!(at.len() - 1, MAX_LINE);
        assert!(parse_log(&format!("{LOG}{at}")).is_ok());
        let results = format!("- suite: lava\n  name: {}\n", "x".repeat(MAX_LINE));
        let e = parse_results(&results).unwrap_err().to_string();
        assert!(e.starts_with("line 2: 131080 bytes on one line"), "{e}");
    }

    /// The reader's memory is bounded: a small multiple of the serial
    /// output it keeps, and one line's reading at a time.
    #[test]
    fn memory_is_a_small_multiple_of_the_input() {
        // One long line: refused without a copy of it (what is used is the
        // YAML reader's buffers for the short lines before it).
        let long = format!(
            "{LOG}{}",
            line("target", &format!("\"{}\"", "é".repeat(4 << 20)))
        );
        let (r, peak) = crate::testalloc::peak_during(|| parse_log(&long));
        assert!(r.is_err());
        assert!(
            peak < 128 << 10,
            "{peak} bytes for a {}-byte log",
            long.len()
        );
        // A log of many lines, as long as they may be, half of them serial
        // output: about the serial output's size (a string that grows by
        // doubling), and one line's YAML events while it is read. The YAML
        // reader holds a line's events (some 200 bytes each) until the line
        // is read: a line of one-letter scalars costs about 100 times its
        // size, but a line is at most `MAX_LINE`, so that is at most some
        // 13 MB, whatever the log's length.
        let serial = line("target", &format!("\"{}\"", "@".repeat(MAX_LINE - 100)));
        let seq = line("debug", &format!("[{}1]", "1,".repeat(MAX_LINE / 2 - 100)));
        let per_line = 16 << 20;
        for copies in [4, 16] {
            let big: String = format!("{LOG}{}", format!("{serial}{seq}").repeat(copies));
            let (r, peak) = crate::testalloc::peak_during(|| parse_log(&big));
            assert_eq!(
                r.unwrap().serial.len(),
                parse_log(LOG).unwrap().serial.len() + copies * (MAX_LINE - 99)
            );
            assert!(
                peak < 2 * big.len() + per_line,
                "{peak} bytes for a {}-byte log",
                big.len()
            );
        }
    }

    /// A figure LAVA recorded that is not a finite number is refused,
    /// naming its line: a `NaN` passed the check against the kernel's
    /// figure, and a measurement of text, a sequence or a mapping was
    /// passed over, so the check it asked for never ran.
    #[test]
    fn a_measurement_that_is_no_number_is_refused() {
        let result = |m: &str| {
            line(
                "results",
                &format!("{{\"case\": \"int80_null\", \"definition\": \"testbed\", \"measurement\": {m}, \"result\": \"pass\"}}"),
            )
        };
        for (m, shown) in [
            ("\"NaN\"", "\"NaN\""),
            ("\"-inf\"", "\"-inf\""),
            ("\"lots\"", "\"lots\""),
            ("[\"24.0\"]", "\"(a sequence)\""),
            ("{\"a\": \"24.0\"}", "\"(a mapping)\""),
        ] {
            let l = parse_log(&format!("{LOG}{}", result(m))).unwrap();
            let e = figures(&l.cases).unwrap_err().to_string();
            assert_eq!(
                e,
                format!("line 7: test case int80_null of suite testbed: measurement {shown} is not a finite number"),
                "{m}"
            );
        }
        let file = |m: &str| {
            format!("- suite: lava\n  name: job\n  result: pass\n- suite: testbed\n  name: int80_null\n  result: pass\n  measurement: {m}\n")
        };
        for (m, shown) in [
            ("'NaN'", "\"NaN\""),
            ("abc", "\"abc\""),
            ("[1, 2]", "\"(a sequence)\""),
            ("\n    a: 1", "\"(a mapping)\""),
        ] {
            let e = figures(&parse_results(&file(m)).unwrap())
                .unwrap_err()
                .to_string();
            assert_eq!(
                e,
                format!("line 4: test case int80_null of suite testbed: measurement {shown} is not a finite number"),
                "{m}"
            );
        }
        assert_eq!(
            figures(&parse_results(&file("'-24.5'")).unwrap()).unwrap()["int80_null"].0,
            -24.5
        );
    }

    /// What is not a test case or a log message is refused, naming its
    /// line: it was passed over, and the serial output or the verdict it
    /// held with it.
    #[test]
    fn what_is_no_test_case_or_message_is_refused() {
        for (text, says) in [
            (
                "- name: x\n  result: pass\n",
                "line 1: a test case without a suite or a name",
            ),
            (
                "- suite: lava\n  name: job\n- :\n  ::\n",
                "did not find expected key at line 3 column 3",
            ),
            (
                "- a:\n  - b:\n    - c:\n",
                "line 1: a test case without a suite or a name",
            ),
        ] {
            let e = parse_results(text).unwrap_err().to_string();
            assert!(e.starts_with(says), "{text:?}: {e}");
        }
        for (bad, says) in [
            (
                line("results", "\"garbage\""),
                "line 7: a results message that is not a mapping of a test case",
            ),
            (
                line("target", "{\"a\": 1}"),
                "line 7: a target message (serial output) that is not text",
            ),
            (
                line("feedback", "[\"x\"]"),
                "line 7: a feedback message (serial output) that is not text",
            ),
            (
                "{\"dt\": \"x\", \"lvl\": [\"target\"], \"msg\": \"@@tb1 end status=success\"}\n"
                    .to_string(),
                "line 7: not a LAVA log message: no text `lvl` and a `msg`",
            ),
            (
                "{\"dt\": \"x\", \"lvl\": \"target\"}\n".to_string(),
                "line 7: not a LAVA log message: no text `lvl` and a `msg`",
            ),
        ] {
            let e = parse_log(&format!("{LOG}{bad}{LOG}"))
                .unwrap_err()
                .to_string();
            assert!(e.starts_with(says), "{bad}: {e}");
        }
    }
}
