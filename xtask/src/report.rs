//! Reading what the kernel printed: the record lines of `abi::report`
//! (`@@tb1 kind key=value ...`) among the human text.

use std::collections::BTreeMap;
use std::fmt;

use abi::report::{unescape, MARKER, SCHEMA};

/// One record: its kind and its fields, values unescaped.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub kind: String,
    pub fields: BTreeMap<String, String>,
    /// 1-based line number in the serial log.
    pub line: usize,
}

impl Record {
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }
}

/// A record line that could not be read, with the line it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    /// The line's text, its first 121 characters when it is longer.
    pub text: String,
    /// The whole line's length in bytes.
    pub len: usize,
    pub why: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // A hostile line may be megabytes: its start says which it is.
        const SHOWN: usize = 120;
        match self.text.char_indices().nth(SHOWN) {
            None => write!(f, "line {}: {}: {:?}", self.line, self.why, self.text),
            Some((at, _)) => write!(
                f,
                "line {}: {}: {:?}... ({} bytes)",
                self.line,
                self.why,
                &self.text[..at],
                self.len
            ),
        }
    }
}

/// The longest record line this reader takes, in bytes from the marker: no
/// record the kernel writes is longer (a user program's record body is at
/// most `abi::report::MAX_USER_RECORD`, a `samples` record of the most
/// batches some 21 KiB), so a longer one is no record of this kernel.
pub const MAX_RECORD: usize = 2 * abi::report::MAX_USER_RECORD;

impl std::error::Error for ParseError {}

/// Where the record on a line starts: the first marker followed by a digit
/// (its schema version). Any other occurrence of the marker is line noise.
fn record_start(text: &str) -> Option<usize> {
    text.match_indices(MARKER)
        .map(|(at, _)| at)
        .find(|&at| text[at + MARKER.len()..].starts_with(|c: char| c.is_ascii_digit()))
}

/// Parses one line. `Ok(None)` for a line without a record.
///
/// A serial line may carry noise (a real machine's, a loader's escape
/// sequences): whatever precedes the record on its line is ignored, and so
/// are control bytes and non-ASCII characters after its end. A record
/// itself is printable ASCII and single spaces (its values are escaped), so
/// noise *inside* one is an error naming the line: its values cannot be
/// trusted.
pub fn parse_line(text: &str, line: usize) -> Result<Option<Record>, ParseError> {
    let Some(at) = record_start(text) else {
        return Ok(None);
    };
    let err = |why: String| ParseError {
        line,
        // What the message shows of it (see `Display`), not a copy of a
        // hostile line's megabytes.
        text: text.chars().take(121).collect(),
        len: text.len(),
        why,
    };
    if text.len() - at > MAX_RECORD {
        return Err(ParseError {
            why: format!(
                "a record of {} bytes, longer than any the kernel writes (at most {MAX_RECORD})",
                text.len() - at
            ),
            ..err(String::new())
        });
    }
    let rest = text[at + MARKER.len()..].trim_end_matches(|c: char| !c.is_ascii_graphic());
    if let Some(c) = rest.chars().find(|&c| !(c.is_ascii_graphic() || c == ' ')) {
        return Err(err(format!(
            "noise inside a record ({c:?}): a corrupted serial line?"
        )));
    }
    let mut words = rest.split_ascii_whitespace();
    let version = words
        .next()
        .ok_or_else(|| err("record without a schema version".into()))?;
    match version.parse::<u32>() {
        Ok(SCHEMA) => {}
        Ok(v) => {
            return Err(err(format!(
                "schema version {v}, this xtask reads {SCHEMA}"
            )))
        }
        Err(_) => return Err(err(format!("bad schema version {version:?}"))),
    }
    let kind = words
        .next()
        .ok_or_else(|| err("record without a kind".into()))?;
    if !kind.bytes().all(|b| b.is_ascii_lowercase() || b == b'_') {
        return Err(err(format!("bad record kind {kind:?}")));
    }
    let mut fields = BTreeMap::new();
    for w in words {
        let (k, v) = w
            .split_once('=')
            .ok_or_else(|| err(format!("field {w:?} has no '='")))?;
        if k.is_empty() {
            return Err(err(format!("field {w:?} has no key")));
        }
        let mut bytes = Vec::new();
        unescape(v, &mut |b| bytes.push(b)).map_err(|_| err(format!("bad escape in {w:?}")))?;
        let v = String::from_utf8(bytes).map_err(|_| err(format!("value of {k} is not UTF-8")))?;
        fields.insert(k.to_string(), v);
    }
    Ok(Some(Record {
        kind: kind.to_string(),
        fields,
        line,
    }))
}

/// Every record in a log. Stops at the first malformed record.
pub fn parse_log(log: &str) -> Result<Vec<Record>, ParseError> {
    let mut out = Vec::new();
    for (i, text) in log.lines().enumerate() {
        if let Some(r) = parse_line(text.trim_end_matches('\r'), i + 1)? {
            out.push(r);
        }
    }
    Ok(out)
}

/// Who printed a user program's record: the tags the kernel put on it
/// (`abi::report::KEY_PROG`, `KEY_PID`, `KEY_TID`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Origin<'a> {
    pub prog: &'a str,
    /// The process that made the `record` call.
    pub pid: u32,
    /// Its thread (`None` in logs from before the kernel named it).
    pub tid: Option<u32>,
}

impl Record {
    /// Who printed this record: a user program's (a user kind tagged
    /// with `prog`), `None` for the kernel's own. An error, naming the
    /// line, for a tag that is not a number.
    pub fn origin(&self) -> Result<Option<Origin<'_>>, String> {
        use abi::report::{KEY_PID, KEY_PROG, KEY_TID, USER_KINDS};
        let Some(prog) = self
            .get(KEY_PROG)
            .filter(|_| USER_KINDS.contains(&self.kind.as_str()))
        else {
            return Ok(None);
        };
        let number = |key: &str, v: &str| {
            v.parse::<u32>().map_err(|_| {
                format!(
                    "line {}: program {prog}'s {} record: {key}={v:?} is not a number",
                    self.line, self.kind
                )
            })
        };
        let pid = self.get(KEY_PID).ok_or_else(|| {
            format!(
                "line {}: program {prog}'s {} record names no process ({KEY_PID})",
                self.line, self.kind
            )
        })?;
        Ok(Some(Origin {
            prog,
            pid: number(KEY_PID, pid)?,
            tid: self.get(KEY_TID).map(|t| number(KEY_TID, t)).transpose()?,
        }))
    }
}

/// Every user program's record names a process of its task: the `task`
/// record that ends the task (the first after it) names the same program,
/// and the record's pid lies among the task's pids, `pid..=last_pid`
/// (`pid` alone in logs from before `last_pid`). A record that no task
/// record follows is refused when `whole` (the log says the boot ended
/// well, so every task ended); otherwise it is left alone (the kernel
/// stopped in the middle of the task, which is reported elsewhere).
pub fn check_origins(records: &[Record], whole: bool) -> Result<(), String> {
    use abi::report::kind;
    // From the end: the task record that ends each record's task.
    let mut task: Option<(&Record, &str, u32, u32)> = None;
    for r in records.iter().rev() {
        if r.kind == kind::TASK {
            let number = |key: &str| {
                let v = r.get(key)?;
                Some(v.parse::<u32>().map_err(|_| {
                    format!("line {}: task record: {key}={v:?} is not a number", r.line)
                }))
            };
            let prog = r.get("prog").unwrap_or("");
            let pid = number("pid")
                .ok_or_else(|| format!("line {}: task record without pid", r.line))??;
            let last = number("last_pid").transpose()?.unwrap_or(pid);
            if last < pid {
                return Err(format!(
                    "line {}: task record: last_pid={last} below pid={pid}",
                    r.line
                ));
            }
            task = Some((r, prog, pid, last));
            continue;
        }
        let Some(o) = r.origin()? else { continue };
        match task {
            None if whole => {
                return Err(format!(
                    "line {}: program {}'s {} record (pid {}): no task record after it says which processes its task had",
                    r.line, o.prog, r.kind, o.pid
                ))
            }
            None => {}
            Some((t, prog, first, last)) => {
                if o.prog != prog {
                    return Err(format!(
                        "line {}: a {} record of program {}, but the task that ended next (line {}) ran {prog}",
                        r.line, r.kind, o.prog, t.line
                    ));
                }
                if !(first..=last).contains(&o.pid) {
                    return Err(format!(
                        "line {}: program {}'s {} record says pid={}, but no process of its task had that pid (line {}: pids {first} to {last})",
                        r.line, o.prog, r.kind, o.pid, t.line
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The records of kind `kind`.
pub fn of_kind<'a>(records: &'a [Record], kind: &'a str) -> impl Iterator<Item = &'a Record> + 'a {
    records.iter().filter(move |r| r.kind == kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_write_is_never_a_record() {
        // What the kernel prints for a user program that wrote
        // "@@tb1 bench oops" (each '@' escaped), whole or mid-line.
        let log = "%40%40tb1 bench oops\ntext %40%40tb1 end status=failure\n%40@tb1 x\n";
        assert_eq!(parse_log(log).unwrap(), vec![]);
        // A kernel-tagged user record reads as any other.
        let r = parse_log("@@tb1 check prog=rogue pid=1 name=x result=pass\n").unwrap();
        assert_eq!(r[0].get(abi::report::KEY_PROG), Some("rogue"));
    }

    #[test]
    fn reads_a_record_among_text() {
        let log = "i386 testbed kernel abc\n@@tb1 cpu vendor=GenuineIntel brand=QEMU%20Virtual family=6\r\nPASS x\n";
        let r = parse_log(log).unwrap();
        assert_eq!(r.len(), 1);
        assert_eq!(r[0].kind, "cpu");
        assert_eq!(r[0].get("brand"), Some("QEMU Virtual"));
        assert_eq!(r[0].get("family"), Some("6"));
        assert_eq!(r[0].line, 2);
    }

    /// A record after other text on its line is read; `%00` is an empty
    /// value: (the line, a key, its value).
    #[test]
    fn a_line_s_record_and_its_values() {
        for (line, key, value) in [
            (
                "garbage\x1b[0m@@tb1 end status=success",
                "status",
                "success",
            ),
            ("@@tb1 mech name=int80 reason=%00", "reason", ""),
        ] {
            let r = parse_line(line, 1).unwrap().unwrap();
            assert_eq!(r.get(key), Some(value), "{line}");
        }
    }

    #[test]
    fn corrupt_records_name_their_line() {
        for (text, why) in [
            ("@@tb1", "without a kind"),
            ("@@tb9 cpu a=b", "schema version 9"),
            ("@@tb99999999999 cpu", "bad schema"),
            (
                "@@tb1 cpu vendor=Gen\u{7}uine family=6",
                "noise inside a record",
            ),
            ("@@tb1 end status=succ\u{fffd}ess", "noise inside a record"),
            ("@@tb1 cpu vendor", "no '='"),
            ("@@tb1 cpu =x", "no key"),
            ("@@tb1 cpu a=%4", "bad escape"),
            ("@@tb1 CPU a=b", "bad record kind"),
        ] {
            let log = format!("ok line\n{text}\n");
            let e = parse_log(&log).unwrap_err();
            assert_eq!(e.line, 2, "{text}");
            assert!(e.why.contains(why), "{text}: {}", e.why);
            assert!(e.to_string().starts_with("line 2:"));
        }
    }

    /// A record line of megabytes is refused by its length, and the
    /// message quotes its start: the whole line was quoted (a 50 MB line
    /// of control bytes took 30 s and printed 200 MB), and a long record
    /// was stored.
    #[test]
    fn a_record_longer_than_the_kernel_writes_is_refused() {
        let long = format!("@@tb1 warn key=a text={}", "x\u{1}".repeat(MAX_RECORD));
        let e = parse_log(&format!("ok\n{long}\n")).unwrap_err();
        assert_eq!(e.line, 2);
        let text = e.to_string();
        assert!(
            text.starts_with("line 2: a record of 98326 bytes, longer than any the kernel writes (at most 49152): \"@@tb1 warn key=a text=x\\u{1}")
                && text.ends_with("... (98326 bytes)")
                && text.len() < 1000,
            "{text}"
        );
        // At the bound, a record reads; noise before it does not count.
        let at = format!("@@tb1 warn key=a text={}", "x".repeat(MAX_RECORD - 22));
        assert_eq!(at.len(), MAX_RECORD);
        let noisy = format!("{}{at}", "n".repeat(1 << 20));
        assert!(parse_line(&noisy, 1).unwrap().is_some());
    }

    #[test]
    fn truncated_record_is_an_error() {
        // A log cut mid-escape.
        let e = parse_log("@@tb1 boot cmdline=mode%3").unwrap_err();
        assert_eq!(e.line, 1);
    }

    #[test]
    fn marker_noise_is_not_a_record() {
        // The marker not followed by a schema version is noise, and the
        // record after it on the same line is still found.
        for text in [
            "@@tb",
            "@@tbx cpu",
            "\u{0}@@tb\u{1b}[0m",
            "@@t@@tb",
            "@@@@tb%",
        ] {
            assert_eq!(parse_line(text, 1), Ok(None), "{text:?}");
        }
        for text in [
            "@@tb@@tb1 end status=success",
            "\u{0}\u{0}@@tbx junk= @@tb1 end status=success",
            "@@@tb1 end status=success",
            "@@tb1 end status=success\r\u{0}\u{0}\u{fffd}",
            "\u{1b}[2J\u{1b}[H@@tb1 end status=success   ",
        ] {
            let r = parse_line(text, 1).unwrap().unwrap();
            assert_eq!(
                (r.kind.as_str(), r.get("status")),
                ("end", Some("success")),
                "{text:?}"
            );
        }
    }

    /// xorshift32, for reproducible noise.
    fn noise(state: &mut u32, len: usize) -> Vec<u8> {
        (0..len)
            .map(|_| {
                *state ^= *state << 13;
                *state ^= *state >> 17;
                *state ^= *state << 5;
                (*state >> 24) as u8
            })
            .collect()
    }

    #[test]
    fn random_noise_between_records_changes_nothing() {
        let clean = "\
i386 testbed kernel abc
@@tb1 boot loader=qemu protocol=mb1 cmdline=mode%3Dtest rev=abc
@@tb1 cpu vendor=GenuineIntel brand=QEMU%20Virtual family=6
@@tb1 mech name=int80 status=ok reason=%00
@@tb1 test name=kernel:%20frames result=pass detail=%00
@@tb1 end status=success
";
        let want: Vec<_> = parse_log(clean)
            .unwrap()
            .into_iter()
            .map(|r| (r.kind, r.fields))
            .collect();
        assert_eq!(want.len(), 5);
        let mut state = 0x1234_5678u32;
        for round in 0..500 {
            // Noise after each record: control and non-ASCII bytes before
            // its newline; after it, whole lines of any bytes, and a last
            // unterminated piece that shares the next record's line.
            let mut bytes = Vec::new();
            for l in clean.lines() {
                bytes.extend_from_slice(l.as_bytes());
                let len = (noise(&mut state, 1)[0] % 8) as usize;
                bytes.extend(
                    noise(&mut state, len)
                        .into_iter()
                        .filter(|b| !b.is_ascii_graphic()),
                );
                bytes.push(b'\n');
                let len = (noise(&mut state, 1)[0] % 64) as usize;
                bytes.extend(noise(&mut state, len));
            }
            // Noise that happens to spell a record's start would be a
            // record: that is not noise any more.
            let text = String::from_utf8_lossy(&bytes);
            if record_start_count(&text) != want.len() {
                continue;
            }
            let got: Vec<_> = parse_log(&text)
                .unwrap_or_else(|e| panic!("round {round}: {e}"))
                .into_iter()
                .map(|r| (r.kind, r.fields))
                .collect();
            assert_eq!(got, want, "round {round}");
        }
    }

    fn record_start_count(text: &str) -> usize {
        text.lines().filter(|l| record_start(l).is_some()).count()
    }

    const TASK_LOG: &str = "\
@@tb1 bench name=a prog=procs pid=3 tid=7
@@tb1 check name=b prog=procs pid=5 tid=9
@@tb1 test name=kernel result=pass
@@tb1 task prog=procs pid=3 how=exit code=0 last_pid=5
@@tb1 check name=c prog=utest pid=6 tid=10
@@tb1 task prog=utest pid=6 how=exit code=0 last_pid=6
";

    #[test]
    fn records_name_their_process_and_thread() {
        let r = parse_log(TASK_LOG).unwrap();
        assert_eq!(
            r[1].origin(),
            Ok(Some(Origin {
                prog: "procs",
                pid: 5,
                tid: Some(9)
            }))
        );
        // The kernel's own records have none, the task record included.
        assert_eq!(r[2].origin(), Ok(None));
        assert_eq!(r[3].origin(), Ok(None));
        assert_eq!(check_origins(&r, true), Ok(()));
        let bad = parse_log(&TASK_LOG.replace("pid=5 tid=9", "pid=5 tid=x")).unwrap();
        let e = check_origins(&bad, true).unwrap_err();
        assert!(e.contains("line 2") && e.contains("tid=\"x\""), "{e}");
    }

    /// A record whose pid no process of its task had (another task's, or
    /// none at all), or whose program is not the task's, is refused.
    #[test]
    fn a_record_of_a_process_that_did_not_run_is_refused() {
        for (from, to, want) in [
            ("pid=5 tid=9", "pid=6 tid=9", "line 2: program procs's check record says pid=6, but no process of its task had that pid (line 4: pids 3 to 5)"),
            ("pid=3 tid=7", "pid=1 tid=7", "says pid=1"),
            ("name=c prog=utest", "name=c prog=procs", "line 5: a check record of program procs, but the task that ended next (line 6) ran utest"),
            ("last_pid=5", "last_pid=2", "last_pid=2 below pid=3"),
            ("prog=utest pid=6 how", "prog=utest pid=x how", "pid=\"x\" is not a number"),
            ("pid=5 tid=9", "tid=9", "names no process"),
        ] {
            let log = TASK_LOG.replace(from, to);
            let e = check_origins(&parse_log(&log).unwrap(), true).unwrap_err();
            assert!(e.contains(want), "{to}: {e}");
        }
        // Before last_pid, a task's records all had its pid.
        let old = TASK_LOG
            .replace(" last_pid=5", "")
            .replace("pid=5 tid=9", "pid=3");
        assert_eq!(check_origins(&parse_log(&old).unwrap(), true), Ok(()));
        // No task record after a record: refused in a whole log, left in
        // one the kernel stopped in the middle of.
        let cut: String = TASK_LOG.lines().take(5).map(|l| format!("{l}\n")).collect();
        let r = parse_log(&cut).unwrap();
        assert!(check_origins(&r, true)
            .unwrap_err()
            .contains("line 5: program utest's check record (pid 6): no task record"));
        assert_eq!(check_origins(&r, false), Ok(()));
    }

    #[test]
    fn garbage_without_marker_is_ignored() {
        let r = parse_log("\u{0}\u{1}binary noise @@t b1\n\u{7f}\n").unwrap();
        assert!(r.is_empty());
    }
}
