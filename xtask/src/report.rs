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

/// Parses one line. `Ok(None)` for a line without a record.
pub fn parse_line(text: &str, line: usize) -> Result<Option<Record>, ParseError> {
    let Some(at) = text.find(MARKER) else {
        return Ok(None);
    };
    let err = |why: String| ParseError {
        line,
        text: text.to_string(),
        why,
    };
    let rest = &text[at + MARKER.len()..];
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
            ("@@tb", "without a schema"),
            ("@@tb9 cpu a=b", "schema version 9"),
            ("@@tbx cpu", "bad schema"),
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
    fn garbage_without_marker_is_ignored() {
        let r = parse_log("\u{0}\u{1}binary noise @@t b1\n\u{7f}\n").unwrap();
        assert!(r.is_empty());
    }
}
