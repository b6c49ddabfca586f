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
    pub text: String,
    pub why: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "line {}: {}: {:?}", self.line, self.why, self.text)
    }
}

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
        text: text.to_string(),
        why,
    };
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

    #[test]
    fn record_after_other_text_on_the_line() {
        let r = parse_line("garbage\x1b[0m@@tb1 end status=success", 7)
            .unwrap()
            .unwrap();
        assert_eq!(r.get("status"), Some("success"));
    }

    #[test]
    fn empty_value_round_trips() {
        let r = parse_line("@@tb1 mech name=int80 reason=%00", 1)
            .unwrap()
            .unwrap();
        assert_eq!(r.get("reason"), Some(""));
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

    #[test]
    fn garbage_without_marker_is_ignored() {
        let r = parse_log("\u{0}\u{1}binary noise @@t b1\n\u{7f}\n").unwrap();
        assert!(r.is_empty());
    }
}
