//! What a lab hands back, read: a job's log and its results.
//!
//! The log is one YAML flow mapping per line, `{"dt": ..., "lvl": ...,
//! "msg": ...}`, as `lava-run` writes it to stderr and as the server stores
//! it (each line then starts with `- `, the log being a YAML list). The
//! serial output is in the `target` lines (and `feedback` lines: what
//! arrives after the test action has matched its end), with `"` written
//! as `\"`. Test cases and the job's verdict are the `results` lines.
//!
//! `lavacli results <job> --yaml` prints the same test cases as a block
//! YAML list (`suite`, `name`, `result`, `measurement`, `unit`, and
//! `metadata` holding the job's error); [`parse_results`] reads it.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

/// A node of a YAML flow mapping, scalars kept as text.
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    Str(String),
    Map(Vec<(String, Node)>),
    Seq(Vec<Node>),
}

impl Node {
    pub fn get(&self, key: &str) -> Option<&Node> {
        match self {
            Node::Map(m) => m.iter().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    pub fn str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }

    fn text(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Node::str)
    }
}

/// Reads one flow node (a mapping, a sequence or a scalar) of a LAVA log
/// line: the subset of YAML that PyYAML writes with `default_style='"'`.
struct Parser<'a> {
    s: &'a [char],
    i: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<char> {
        self.s.get(self.i).copied()
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.i += 1;
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        self.ws();
        if self.peek() != Some(c) {
            bail!("expected {c:?} at column {}", self.i + 1);
        }
        self.i += 1;
        Ok(())
    }

    fn node(&mut self) -> Result<Node> {
        self.ws();
        // A tag (`!`, `!!float`) says how to read the scalar; text it stays.
        if self.peek() == Some('!') {
            while self.peek().is_some_and(|c| !c.is_whitespace()) {
                self.i += 1;
            }
            self.ws();
        }
        match self.peek() {
            Some('{') => {
                self.i += 1;
                let mut m = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some('}') {
                        self.i += 1;
                        return Ok(Node::Map(m));
                    }
                    let key = match self.node()? {
                        Node::Str(k) => k,
                        _ => bail!("a mapping key that is not a scalar"),
                    };
                    self.expect(':')?;
                    let value = self.node()?;
                    m.push((key, value));
                    self.ws();
                    match self.peek() {
                        Some(',') => self.i += 1,
                        Some('}') => {}
                        _ => bail!("expected ',' or '}}' at column {}", self.i + 1),
                    }
                }
            }
            Some('[') => {
                self.i += 1;
                let mut v = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(']') {
                        self.i += 1;
                        return Ok(Node::Seq(v));
                    }
                    v.push(self.node()?);
                    self.ws();
                    match self.peek() {
                        Some(',') => self.i += 1,
                        Some(']') => {}
                        _ => bail!("expected ',' or ']' at column {}", self.i + 1),
                    }
                }
            }
            Some('"') => self.double_quoted().map(Node::Str),
            Some('\'') => {
                self.i += 1;
                let mut out = String::new();
                loop {
                    match self.peek() {
                        None => bail!("a quoted string without its end"),
                        Some('\'') if self.s.get(self.i + 1) == Some(&'\'') => {
                            out.push('\'');
                            self.i += 2;
                        }
                        Some('\'') => {
                            self.i += 1;
                            return Ok(Node::Str(out));
                        }
                        Some(c) => {
                            out.push(c);
                            self.i += 1;
                        }
                    }
                }
            }
            _ => {
                // A plain scalar: up to the next flow indicator.
                let from = self.i;
                while let Some(c) = self.peek() {
                    if ",}]".contains(c)
                        || c == ':' && self.s.get(self.i + 1).is_none_or(|n| n.is_whitespace())
                    {
                        break;
                    }
                    self.i += 1;
                }
                Ok(Node::Str(
                    self.s[from..self.i]
                        .iter()
                        .collect::<String>()
                        .trim()
                        .into(),
                ))
            }
        }
    }

    /// A double-quoted scalar with YAML's escapes.
    fn double_quoted(&mut self) -> Result<String> {
        self.i += 1;
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                bail!("a quoted string without its end (a cut line?)")
            };
            self.i += 1;
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let Some(e) = self.peek() else {
                        bail!("a quoted string without its end (a cut line?)")
                    };
                    self.i += 1;
                    let hex = |p: &mut Self, n: usize| -> Result<char> {
                        let digits: String = p.s.get(p.i..p.i + n).unwrap_or(&[]).iter().collect();
                        p.i += n;
                        u32::from_str_radix(&digits, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or_else(|| anyhow::anyhow!("a bad escape \\{e}{digits}"))
                    };
                    out.push(match e {
                        '0' => '\0',
                        'a' => '\x07',
                        'b' => '\x08',
                        't' | '\t' => '\t',
                        'n' => '\n',
                        'v' => '\x0b',
                        'f' => '\x0c',
                        'r' => '\r',
                        'e' => '\x1b',
                        ' ' => ' ',
                        '"' => '"',
                        '/' => '/',
                        '\\' => '\\',
                        'N' => '\u{85}',
                        '_' => '\u{a0}',
                        'L' => '\u{2028}',
                        'P' => '\u{2029}',
                        'x' => hex(self, 2)?,
                        'u' => hex(self, 4)?,
                        'U' => hex(self, 8)?,
                        other => bail!("an unknown escape \\{other}"),
                    });
                }
                c => out.push(c),
            }
        }
    }
}

/// One line of a LAVA log as a node (`- ` of the stored list removed).
pub fn parse_line(line: &str) -> Result<Node> {
    let line = line.trim();
    let line = line.strip_prefix("- ").unwrap_or(line);
    let chars: Vec<char> = line.chars().collect();
    let mut p = Parser { s: &chars, i: 0 };
    let n = p.node()?;
    p.ws();
    if p.i != chars.len() {
        bail!("text after the mapping at column {}", p.i + 1);
    }
    if !matches!(n, Node::Map(_)) {
        bail!("not a mapping");
    }
    Ok(n)
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
    pub suite: String,
    pub case: String,
    pub result: String,
    pub measurement: Option<String>,
    pub units: Option<String>,
    /// For LAVA's own cases (`lava`/`job`): the error, if any.
    pub error: Option<String>,
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
/// (a cut last line excepted: the log of a job that died mid-line).
pub fn parse_log(text: &str) -> Result<JobLog> {
    let mut log = JobLog::default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    for (i, line) in lines.iter().enumerate() {
        let node = match parse_line(line) {
            Ok(n) => n,
            Err(_) if i + 1 == lines.len() => break,
            Err(e) => bail!("line {}: not a LAVA log message: {e}: {line:?}", i + 1),
        };
        let lvl = node.text("lvl").unwrap_or("");
        let msg = node.get("msg");
        if log.job_id.is_none() {
            log.job_id = msg.and_then(Node::str).and_then(job_of_path);
        }
        match lvl {
            "target" | "feedback" => {
                if let Some(m) = msg.and_then(Node::str) {
                    // LAVA writes a `"` of the serial output as `\"`.
                    log.serial.push_str(&m.replace("\\\"", "\""));
                    log.serial.push('\n');
                }
            }
            "results" => {
                if let Some(m) = msg {
                    log.cases.push(case_of(m, "definition", "case"));
                }
            }
            "error" | "exception" => {
                if let Some(m) = msg.and_then(Node::str) {
                    log.errors.push(m.to_string());
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

/// A test case from a mapping whose suite and case are under `suite` and
/// `case` (a log's `definition`/`case`, a results file's `suite`/`name`).
fn case_of(m: &Node, suite: &str, case: &str) -> TestCase {
    let text = |k: &str| m.text(k).map(str::to_string);
    let meta = m.get("metadata");
    let error = text("error_msg")
        .or_else(|| meta.and_then(|x| x.text("error_msg")).map(str::to_string))
        .map(|e| {
            match text("error_type")
                .or_else(|| meta.and_then(|x| x.text("error_type")).map(str::to_string))
            {
                Some(t) => format!("{t}: {e}"),
                None => e,
            }
        });
    TestCase {
        suite: text(suite).unwrap_or_default(),
        case: text(case).unwrap_or_default(),
        result: text("result").unwrap_or_default(),
        measurement: text("measurement").filter(|s| !s.is_empty() && s != "None"),
        units: text("units")
            .or_else(|| text("unit"))
            .filter(|s| !s.is_empty() && s != "None"),
        error,
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

/// Reads `lavacli results <job> --yaml`: a block list of mappings. Only
/// the scalars are kept; a nested mapping's (`metadata:`) keys are read
/// into it.
pub fn parse_results(text: &str) -> Result<Vec<TestCase>> {
    let mut items: Vec<Vec<(usize, String, String)>> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') || raw.trim() == "---" {
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        let mut body = raw.trim_start();
        let mut depth = indent;
        if let Some(rest) = body.strip_prefix("- ") {
            if indent == 0 {
                items.push(Vec::new());
            }
            body = rest;
            depth += 2;
        }
        let Some(item) = items.last_mut() else {
            bail!("line {}: not a YAML list of test cases: {raw:?}", n + 1);
        };
        let Some((k, v)) = body.split_once(':') else {
            continue;
        };
        let v = v.trim();
        let v = match Parser::scalar(v) {
            Some(s) => s,
            None => continue,
        };
        item.push((depth, k.trim().to_string(), v));
    }
    if items.is_empty() {
        bail!("no test cases (is it `lavacli results JOB --yaml`'s output?)");
    }
    Ok(items
        .into_iter()
        .map(|fields| {
            let mut top_level: Vec<(String, Node)> = Vec::new();
            let mut meta: Vec<(String, Node)> = Vec::new();
            let base = fields.first().map_or(0, |f| f.0);
            for (d, k, v) in fields {
                if d == base {
                    top_level.push((k, Node::Str(v)));
                } else {
                    meta.push((k, Node::Str(v)));
                }
            }
            top_level.push(("metadata".into(), Node::Map(meta)));
            case_of(&Node::Map(top_level), "suite", "name")
        })
        .collect())
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
    parse_results(text)
        .ok()
        .filter(|c| c.iter().all(|c| !c.suite.is_empty()))
}

impl Parser<'_> {
    /// A block scalar value (`'...'`, `"..."` or plain); `None` for an
    /// empty value (a nested mapping follows).
    fn scalar(v: &str) -> Option<String> {
        if v.is_empty() || v == "|" || v == ">" {
            return None;
        }
        let chars: Vec<char> = v.chars().collect();
        let mut p = Parser { s: &chars, i: 0 };
        match p.node() {
            Ok(Node::Str(s)) => Some(s),
            _ => Some(v.to_string()),
        }
    }
}

/// The figures LAVA recorded as test cases of the testbed's suite, by the
/// benchmark's name (LAVA's case id is the name with `.` made `_`).
pub fn figures(cases: &[TestCase]) -> BTreeMap<String, (f64, Option<String>)> {
    cases
        .iter()
        // A server may number suites (`0_testbed`).
        .filter(|c| {
            c.suite == super::SUITE
                || c.suite.split_once('_').is_some_and(|(n, s)| {
                    s == super::SUITE && n.chars().all(|d| d.is_ascii_digit())
                })
        })
        .filter_map(|c| {
            let m = c.measurement.as_ref()?.parse::<f64>().ok()?;
            Some((c.case.clone(), (m, c.units.clone())))
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
        let f = figures(&l.cases);
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

    #[test]
    fn escapes_and_tags() {
        let n = parse_line(r#"- {"a": "x\x41\u00e9\\ \"q\"", "b": !!float "1.5", c: [1, "2"]}"#)
            .unwrap();
        assert_eq!(n.text("a"), Some("xAé\\ \"q\""));
        assert_eq!(n.text("b"), Some("1.5"));
        assert_eq!(
            n.get("c"),
            Some(&Node::Seq(vec![
                Node::Str("1".into()),
                Node::Str("2".into())
            ]))
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
            figures(&c)["int80_null"],
            (24.0, Some("instructions".into()))
        );
        assert!(parse_results("").is_err());
    }
}
