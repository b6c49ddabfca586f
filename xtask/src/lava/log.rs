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

/// The longest line of a LAVA log (or of a results file) this reader
/// takes, in bytes. The longest serial line the kernel prints is a record
/// of some 24 KiB (`abi::report::MAX_USER_RECORD`), which LAVA's escapes
/// can at most double; LAVA's own messages are shorter.
pub const MAX_LINE: usize = 128 << 10;

/// The deepest nesting of flow mappings and sequences this reader takes. A
/// LAVA message nests three (a `results` line's `extra`); each level is a
/// frame of the reader's recursion, so the bound is what keeps a line of
/// brackets from overflowing its stack.
pub const MAX_DEPTH: usize = 32;

/// A line beyond a bound of this reader ([`MAX_LINE`], [`MAX_DEPTH`]):
/// never what a cut or garbled line looks like, so never passed over.
#[derive(Debug)]
pub struct Beyond(String);

impl std::fmt::Display for Beyond {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Beyond {}

/// Reads one flow node (a mapping, a sequence or a scalar) of a LAVA log
/// line: the subset of YAML that PyYAML writes with `default_style='"'`.
/// It walks the line's text in place (`i` is a byte offset at a character
/// boundary), so its memory is the nodes it builds.
struct Parser<'a> {
    s: &'a str,
    i: usize,
    /// Flow collections open around the current node.
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(s: &'a str) -> Self {
        Parser { s, i: 0, depth: 0 }
    }

    fn peek(&self) -> Option<char> {
        self.s[self.i..].chars().next()
    }

    /// The character after the next one.
    fn peek2(&self) -> Option<char> {
        let mut c = self.s[self.i..].chars();
        c.next();
        c.next()
    }

    /// Steps over the next character (there must be one).
    fn bump(&mut self) {
        self.i += self.peek().map_or(1, char::len_utf8);
    }

    /// The column (in characters, from 1) of the next character, for errors.
    fn column(&self) -> usize {
        self.s[..self.i].chars().count() + 1
    }

    fn ws(&mut self) {
        while self.peek().is_some_and(char::is_whitespace) {
            self.bump();
        }
    }

    fn expect(&mut self, c: char) -> Result<()> {
        self.ws();
        if self.peek() != Some(c) {
            bail!("expected {c:?} at column {}", self.column());
        }
        self.bump();
        Ok(())
    }

    /// Opens a flow collection: one level deeper, within [`MAX_DEPTH`].
    fn open(&mut self) -> Result<()> {
        if self.depth == MAX_DEPTH {
            return Err(Beyond(format!(
                "mappings and sequences nested deeper than {MAX_DEPTH} levels at column {} (a LAVA log message nests 3)",
                self.column()
            ))
            .into());
        }
        self.depth += 1;
        self.bump();
        Ok(())
    }

    fn node(&mut self) -> Result<Node> {
        self.ws();
        // A tag (`!`, `!!float`) says how to read the scalar; text it stays.
        if self.peek() == Some('!') {
            while self.peek().is_some_and(|c| !c.is_whitespace()) {
                self.bump();
            }
            self.ws();
        }
        match self.peek() {
            Some('{') => {
                self.open()?;
                let mut m = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some('}') {
                        self.bump();
                        self.depth -= 1;
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
                        Some(',') => self.bump(),
                        Some('}') => {}
                        _ => bail!("expected ',' or '}}' at column {}", self.column()),
                    }
                }
            }
            Some('[') => {
                self.open()?;
                let mut v = Vec::new();
                loop {
                    self.ws();
                    if self.peek() == Some(']') {
                        self.bump();
                        self.depth -= 1;
                        return Ok(Node::Seq(v));
                    }
                    v.push(self.node()?);
                    self.ws();
                    match self.peek() {
                        Some(',') => self.bump(),
                        Some(']') => {}
                        _ => bail!("expected ',' or ']' at column {}", self.column()),
                    }
                }
            }
            Some('"') => self.double_quoted().map(Node::Str),
            Some('\'') => {
                self.bump();
                let mut out = String::new();
                loop {
                    match self.peek() {
                        None => bail!("a quoted string without its end"),
                        Some('\'') if self.peek2() == Some('\'') => {
                            out.push('\'');
                            self.i += 2;
                        }
                        Some('\'') => {
                            self.bump();
                            return Ok(Node::Str(out));
                        }
                        Some(c) => {
                            out.push(c);
                            self.bump();
                        }
                    }
                }
            }
            _ => {
                // A plain scalar: up to the next flow indicator.
                let from = self.i;
                while let Some(c) = self.peek() {
                    if ",}]".contains(c) || c == ':' && self.peek2().is_none_or(char::is_whitespace)
                    {
                        break;
                    }
                    self.bump();
                }
                Ok(Node::Str(self.s[from..self.i].trim().into()))
            }
        }
    }

    /// A double-quoted scalar with YAML's escapes.
    fn double_quoted(&mut self) -> Result<String> {
        self.bump();
        let mut out = String::new();
        loop {
            let Some(c) = self.peek() else {
                bail!("a quoted string without its end (a cut line?)")
            };
            self.bump();
            match c {
                '"' => return Ok(out),
                '\\' => {
                    let Some(e) = self.peek() else {
                        bail!("a quoted string without its end (a cut line?)")
                    };
                    self.bump();
                    let hex = |p: &mut Self, n: usize| -> Result<char> {
                        let digits = p.s.get(p.i..p.i + n).unwrap_or("");
                        p.i += digits.len();
                        Some(digits)
                            .filter(|d| d.len() == n && d.bytes().all(|b| b.is_ascii_hexdigit()))
                            .and_then(|d| u32::from_str_radix(d, 16).ok())
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

/// One line of a LAVA log as a node (`- ` of the stored list removed). A
/// line longer than [`MAX_LINE`] or nested deeper than [`MAX_DEPTH`] fails
/// with a [`Beyond`].
pub fn parse_line(line: &str) -> Result<Node> {
    if line.len() > MAX_LINE {
        return Err(Beyond(format!(
            "{} bytes on one line, more than any LAVA log message (this reader takes {MAX_LINE})",
            line.len()
        ))
        .into());
    }
    let line = line.trim();
    let line = line.strip_prefix("- ").unwrap_or(line);
    let mut p = Parser::new(line);
    let n = p.node()?;
    p.ws();
    if p.i != line.len() {
        bail!("text after the mapping at column {}", p.column());
    }
    if !matches!(n, Node::Map(_)) {
        bail!("not a mapping");
    }
    Ok(n)
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
        let node = match parse_line(line) {
            Ok(node) => node,
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
        let (Some(Node::Str(lvl)), Some(msg)) = (node.get("lvl"), node.get("msg")) else {
            bail!(
                "line {}: not a LAVA log message: no text `lvl` and a `msg`: {}",
                n + 1,
                excerpt(line)
            );
        };
        if log.job_id.is_none() {
            log.job_id = msg.str().and_then(job_of_path);
        }
        match lvl.as_str() {
            "target" | "feedback" => match msg.str() {
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
            "results" => match msg {
                m @ Node::Map(_) => log.cases.push(case_of(m, "definition", "case", n + 1)),
                _ => bail!(
                    "line {}: a results message that is not a mapping of a test case: {}",
                    n + 1,
                    excerpt(line)
                ),
            },
            "error" | "exception" => {
                if let Some(m) = msg.str() {
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
fn case_of(m: &Node, suite: &str, case: &str, line: usize) -> TestCase {
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
        line,
        suite: text(suite).unwrap_or_default(),
        case: text(case).unwrap_or_default(),
        result: text("result").unwrap_or_default(),
        // A measurement that is no scalar is kept as what it is, so that
        // `figures` refuses it rather than passing over it.
        measurement: match m.get("measurement") {
            Some(Node::Str(s)) => Some(s.clone()),
            Some(Node::Map(_)) => Some("(a mapping)".into()),
            Some(Node::Seq(_)) => Some("(a sequence)".into()),
            None => None,
        }
        .filter(|s| !s.is_empty() && s != "None"),
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

/// A field of a results file's item: its indent, key and value.
type Field = (usize, String, String);

/// Reads `lavacli results <job> --yaml`: a block list of mappings. Only
/// the scalars are kept; a nested mapping's (`metadata:`) keys are read
/// into it.
pub fn parse_results(text: &str) -> Result<Vec<TestCase>> {
    // Each item's first line and its fields.
    let mut items: Vec<(usize, Vec<Field>)> = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        if raw.len() > MAX_LINE {
            bail!(
                "line {}: {} bytes on one line, more than any test case's (this reader takes {MAX_LINE}): {}",
                n + 1,
                raw.len(),
                excerpt(raw)
            );
        }
        if raw.trim().is_empty() || raw.trim_start().starts_with('#') || raw.trim() == "---" {
            continue;
        }
        let indent = raw.len() - raw.trim_start().len();
        let mut body = raw.trim_start();
        let mut depth = indent;
        if let Some(rest) = body.strip_prefix("- ") {
            if indent == 0 {
                items.push((n + 1, Vec::new()));
            }
            body = rest;
            depth += 2;
        }
        let Some((_, item)) = items.last_mut() else {
            bail!(
                "line {}: not a YAML list of test cases: {}",
                n + 1,
                excerpt(raw)
            );
        };
        let Some((k, v)) = body.split_once(':') else {
            continue;
        };
        let (k, v) = (k.trim(), v.trim());
        let v = match Parser::scalar(v) {
            Some(s) => s,
            // A nested mapping (or a block scalar) follows: `metadata`'s
            // keys are read into it; another key's value is no scalar on
            // its line, and kept as such.
            None if k != "metadata" => "(not a scalar)".to_string(),
            None => continue,
        };
        item.push((depth, k.to_string(), v));
    }
    if items.is_empty() {
        bail!("no test cases (is it `lavacli results JOB --yaml`'s output?)");
    }
    items
        .into_iter()
        .map(|(line, fields)| {
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
            let c = case_of(&Node::Map(top_level), "suite", "name", line);
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

impl Parser<'_> {
    /// A block scalar value (`'...'`, `"..."` or plain); `None` for an
    /// empty value (a nested mapping follows).
    fn scalar(v: &str) -> Option<String> {
        if v.is_empty() || v == "|" || v == ">" {
            return None;
        }
        match Parser::new(v).node() {
            Ok(Node::Str(s)) => Some(s),
            _ => Some(v.to_string()),
        }
    }
}

/// The figures LAVA recorded as test cases of the testbed's suite, by the
/// benchmark's name (LAVA's case id is the name with `.` made `_`). A
/// measurement that is not a finite number is refused, naming its line:
/// compared with the kernel's figure, `NaN` would pass any check.
pub fn figures(cases: &[TestCase]) -> Result<BTreeMap<String, (f64, Option<String>)>> {
    cases
        .iter()
        // A server may number suites (`0_testbed`).
        .filter(|c| {
            c.suite == super::SUITE
                || c.suite.split_once('_').is_some_and(|(n, s)| {
                    s == super::SUITE && n.chars().all(|d| d.is_ascii_digit())
                })
        })
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
            figures(&c).unwrap()["int80_null"],
            (24.0, Some("instructions".into()))
        );
        assert!(parse_results("").is_err());
    }

    /// A LAVA log line as `lava-run` writes it, `msg` its message.
    fn line(lvl: &str, msg: &str) -> String {
        format!("{{\"dt\": \"2026-12-01T18:33:04.615729\", \"lvl\": \"{lvl}\", \"msg\": {msg}}}\n")
    }

    /// 20 KB of `[` and `{` overflowed the reader's stack (the process
    /// aborted); nesting past `MAX_DEPTH` is refused, naming the line,
    /// wherever the line is (it is no cut last line).
    #[test]
    fn deep_nesting_is_refused() {
        let deep = line("info", &"[{\"a\": ".repeat(10_000));
        for log in [format!("{LOG}{deep}{LOG}"), format!("{LOG}{deep}")] {
            let e = parse_log(&log).unwrap_err().to_string();
            assert!(
                e.starts_with(
                    "line 7: mappings and sequences nested deeper than 32 levels at column 166 "
                ),
                "{e}"
            );
            assert!(e.len() < 300, "{e}");
        }
        // As deep as the bound reads; one more level does not.
        let nested = |n: usize| line("info", &format!("{}1{}", "[".repeat(n), "]".repeat(n)));
        assert!(parse_line(&nested(MAX_DEPTH - 1)).is_ok());
        assert!(parse_line(&nested(MAX_DEPTH)).unwrap_err().is::<Beyond>());
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

    /// The reader's memory is a small multiple of its input: a line was a
    /// `Vec<char>` (4 bytes a byte of ASCII) and a sequence of one-letter
    /// scalars some 30 bytes a byte.
    #[test]
    fn memory_is_a_small_multiple_of_the_input() {
        // One long line: refused without a copy of it.
        let long = format!(
            "{LOG}{}",
            line("target", &format!("\"{}\"", "é".repeat(4 << 20)))
        );
        let (r, peak) = crate::testalloc::peak_during(|| parse_log(&long));
        assert!(r.is_err());
        assert!(
            peak < 64 << 10,
            "{peak} bytes for a {}-byte log",
            long.len()
        );
        // A log of many lines, as long as they may be, half of them serial
        // output: about the serial output's size (a string that grows by
        // doubling), and each line's nodes while it is read.
        let serial = line("target", &format!("\"{}\"", "@".repeat(MAX_LINE - 100)));
        let seq = line("debug", &format!("[{}1]", "1,".repeat(MAX_LINE / 2 - 100)));
        let big: String = format!("{LOG}{}", format!("{serial}{seq}").repeat(16));
        let (r, peak) = crate::testalloc::peak_during(|| parse_log(&big));
        assert_eq!(
            r.unwrap().serial.len(),
            parse_log(LOG).unwrap().serial.len() + 16 * (MAX_LINE - 99)
        );
        assert!(
            peak < 2 * big.len(),
            "{peak} bytes for a {}-byte log",
            big.len()
        );
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
            ("[1, 2]", "\"[1, 2]\""),
            ("\n    a: 1", "\"(not a scalar)\""),
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
                "line 3: a test case without a suite or a name",
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
