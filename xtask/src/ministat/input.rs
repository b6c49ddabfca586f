//! Reading one data set the way ministat reads it.
//!
//! A line is cut into fields at any of the delimiter characters, runs of
//! delimiters counting as one (C's `strtok`). The fields are counted from 1;
//! a field that starts with `#` ends the line, so `# note` lines and
//! trailing `# notes` are comments. A line without the chosen column is
//! skipped. The field in the column must be a whole number as C's `strtod`
//! reads it (decimal, exponent, `inf`, `nan`, hexadecimal `0x1.8p3`), or the
//! set is rejected. White space at the end of a line is dropped first, as
//! today's FreeBSD does, so files with CRLF line ends read.
//!
//! Where we part from the C tools: a number that is not finite (`nan`,
//! `inf`) or beyond ±[`MAX_MAGNITUDE`] is refused, naming its file and
//! line. No measurement is either, and the C tools print `nan` and `inf`
//! statistics of them or crash plotting them.

use std::fmt;
use std::io::{self, BufRead};

/// Fewest points a set may have: a sample variance needs two, ministat asks three.
pub const MIN_POINTS: usize = 3;

/// The largest magnitude a value may have. Its square stays far from the
/// largest double (about 1.8e308) however many values are summed, so no
/// mean, variance or plot span overflows to `inf`.
pub const MAX_MAGNITUDE: f64 = 1e100;

/// Why a set (or the command line naming the sets) was refused. Every one
/// of these makes the command exit with status 2.
#[derive(Debug)]
pub enum Error {
    /// The file could not be opened.
    Open { name: String, source: io::Error },
    /// Reading the file failed part-way.
    Read { name: String, source: io::Error },
    /// The chosen field of a line is not a number (`line` counts from 1).
    Invalid { line: usize, name: String },
    /// The set has fewer than [`MIN_POINTS`] points.
    TooFew { name: String },
    /// The chosen field of a line is a number that is not finite or whose
    /// magnitude is beyond [`MAX_MAGNITUDE`] (`field`: its text, `why`:
    /// which).
    Unusable {
        line: usize,
        name: String,
        field: String,
        why: &'static str,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Open { name, source } => {
                write!(f, "Cannot open {name}: {}", c_strerror(source))
            }
            Error::Read { name, source } => write!(f, "Cannot read {name}: {source}"),
            Error::Invalid { line, name } => write!(f, "Invalid data on line {line} in {name}"),
            Error::TooFew { name } => write!(
                f,
                "Dataset {name} must contain at least {MIN_POINTS} data points"
            ),
            Error::Unusable {
                line,
                name,
                field,
                why,
            } => write!(f, "Invalid data on line {line} in {name}: {field} is {why}"),
        }
    }
}

impl std::error::Error for Error {}

impl Error {
    /// What the C tool writes to stderr for this error: `err(3)`'s
    /// "ministat: " in front, except for too few points, which it prints
    /// bare.
    pub fn c_message(&self) -> String {
        match self {
            Error::TooFew { .. } => format!("{self}\n"),
            _ => format!("ministat: {self}\n"),
        }
    }
}

/// An OS error as C's `strerror` words it (Rust adds " (os error N)").
fn c_strerror(e: &io::Error) -> String {
    let text = e.to_string();
    match e.raw_os_error() {
        Some(code) => text
            .strip_suffix(&format!(" (os error {code})"))
            .unwrap_or(&text)
            .to_string(),
        None => text,
    }
}

/// Hands each line of `reader` (its newline kept) to `take`, up to the end
/// of the input or a read error, which it gives back; `take`'s error ends
/// the reading.
fn each_line(
    mut reader: impl BufRead,
    mut take: impl FnMut(&[u8]) -> Result<(), Error>,
) -> Result<Option<std::io::Error>, Error> {
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return Ok(None),
            Ok(_) => take(&line)?,
            Err(e) => return Ok(Some(e)),
        }
    }
}

/// FreeBSD's `BUFSIZ`: ministat reads with `fgets` into a buffer this big,
/// so a line longer than `BUFSIZ - 1` bytes reads as several lines.
pub const FREEBSD_BUFSIZ: usize = 1024;

/// [`read_set`] as today's FreeBSD reads: `fgets` pieces of at most
/// [`FREEBSD_BUFSIZ`]` - 1` bytes are the lines (each counted for the line
/// numbers in messages), a NUL byte ends a piece, and a read error ends the
/// set as the end of the file would.
pub fn read_set_freebsd(
    reader: impl BufRead,
    name: &str,
    column: usize,
    delimiters: &[u8],
) -> Result<Vec<f64>, Error> {
    let mut set = Set::new(name, column, delimiters);
    // A read error ends the set as the end of the file would.
    let _ = each_line(reader, |line| {
        for piece in line.chunks(FREEBSD_BUFSIZ - 1) {
            let piece = match piece.iter().position(|&b| b == 0) {
                Some(nul) => &piece[..nul],
                None => piece,
            };
            set.take(piece)?;
        }
        Ok(())
    })?;
    set.finish()
}

/// Reads one set from `reader`: the numbers in `column` (counting from 1)
/// of fields cut at any byte of `delimiters`, in input order. `name` is
/// what error messages call the input.
///
/// Needs `column >= 1` and a non-empty `delimiters`; guarantees at least
/// [`MIN_POINTS`] values on success.
pub fn read_set(
    reader: impl BufRead,
    name: &str,
    column: usize,
    delimiters: &[u8],
) -> Result<Vec<f64>, Error> {
    let mut set = Set::new(name, column, delimiters);
    if let Some(source) = each_line(reader, |line| set.take(line))? {
        return Err(Error::Read {
            name: name.to_string(),
            source,
        });
    }
    set.finish()
}

/// How much of a refused field an error quotes.
const SHOWN: usize = 40;

/// A set being read: the numbers taken so far from the lines of `name`
/// (`number` of them read), each the field `column` of fields cut at
/// `delimiters`.
struct Set<'a> {
    name: &'a str,
    column: usize,
    delimiters: &'a [u8],
    number: usize,
    values: Vec<f64>,
}

impl<'a> Set<'a> {
    fn new(name: &'a str, column: usize, delimiters: &'a [u8]) -> Self {
        Set {
            name,
            column,
            delimiters,
            number: 0,
            values: Vec::new(),
        }
    }

    /// Reads the next line (trailing white space ignored): a line without
    /// the field adds nothing; a field that is not a number is an error.
    fn take(&mut self, mut line: &[u8]) -> Result<(), Error> {
        self.number += 1;
        while let Some((&last, rest)) = line.split_last() {
            if !is_c_space(last) {
                break;
            }
            line = rest;
        }
        let Some(field) = pick_field(line, self.column, self.delimiters) else {
            return Ok(());
        };
        let v = parse_c_double(field).ok_or_else(|| Error::Invalid {
            line: self.number,
            name: self.name.to_string(),
        })?;
        if !v.is_finite() || v.abs() > MAX_MAGNITUDE {
            // The field is a number, so printable; a long one is cut.
            let text = String::from_utf8_lossy(field);
            let text = text.trim();
            return Err(Error::Unusable {
                line: self.number,
                name: self.name.to_string(),
                field: match text.char_indices().nth(SHOWN) {
                    Some((at, _)) => format!("{}...", &text[..at]),
                    None => text.to_string(),
                },
                why: if v.is_finite() {
                    "beyond 1e+100 in magnitude (no measurement is, and the sums of squares would overflow)"
                } else {
                    "not a finite number (no measurement is)"
                },
            });
        }
        self.values.push(v);
        Ok(())
    }

    /// The values, if there are at least [`MIN_POINTS`] of them.
    fn finish(self) -> Result<Vec<f64>, Error> {
        if self.values.len() < MIN_POINTS {
            return Err(Error::TooFew {
                name: self.name.to_string(),
            });
        }
        Ok(self.values)
    }
}

/// The field numbered `column` (from 1) of `line`, or `None` when the line
/// has fewer fields or a comment (a field starting with `#`) comes first.
fn pick_field<'a>(line: &'a [u8], column: usize, delimiters: &[u8]) -> Option<&'a [u8]> {
    line.split(|b| delimiters.contains(b))
        .filter(|f| !f.is_empty())
        .take(column)
        .enumerate()
        .find_map(|(i, f)| {
            if f[0] == b'#' {
                Some(None)
            } else if i + 1 == column {
                Some(Some(f))
            } else {
                None
            }
        })
        .flatten()
}

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// The value of `field` when all of it is one number as C's `strtod`
/// reads it (leading white space allowed, nothing after the number).
pub fn parse_c_double(field: &[u8]) -> Option<f64> {
    let start = field.iter().position(|&b| !is_c_space(b))?;
    let text = std::str::from_utf8(&field[start..]).ok()?;
    let (negative, body) = match text.as_bytes()[0] {
        b'-' => (true, &text[1..]),
        b'+' => (false, &text[1..]),
        _ => (false, text),
    };
    // Compared as bytes: a field may hold any UTF-8 after its first byte
    // (`0é`), and a `str` cannot be cut inside a character.
    let magnitude = if body.len() > 2 && body.as_bytes()[..2].eq_ignore_ascii_case(b"0x") {
        parse_hex(&body[2..])?
    } else if is_nan_with_payload(body) {
        f64::NAN
    } else if body.starts_with(|c: char| {
        c.is_ascii_digit() || c == '.' || c == 'i' || c == 'I' || c == 'n' || c == 'N'
    }) {
        // Rust's grammar for the decimal, `inf`, `infinity` and `nan`
        // forms is strtod's, save the sign (taken off above).
        body.parse::<f64>().ok()?
    } else {
        return None;
    };
    Some(if negative { -magnitude } else { magnitude })
}

/// `nan(chars)`, which strtod takes as a NaN.
fn is_nan_with_payload(s: &str) -> bool {
    s.len() >= 5
        && s.as_bytes()[..4].eq_ignore_ascii_case(b"nan(")
        && s.ends_with(')')
        && s[4..s.len() - 1]
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// A hexadecimal float after its `0x`: hex digits with an optional point,
/// then an optional binary exponent `p[+-]digits`.
fn parse_hex(s: &str) -> Option<f64> {
    let (digits, exp) = match s.find(['p', 'P']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let (int_part, frac_part) = digits.split_once('.').unwrap_or((digits, ""));
    if int_part.is_empty() && frac_part.is_empty() {
        return None;
    }
    let mut mantissa: u128 = 0;
    let mut shift: i64 = 0; // binary exponent contributed by the digits
    let mut lost_bits = false;
    for (i, c) in int_part.chars().chain(frac_part.chars()).enumerate() {
        let d = c.to_digit(16)?;
        let fraction_digit = i >= int_part.len();
        if mantissa >> 120 == 0 {
            mantissa = mantissa << 4 | u128::from(d);
            if fraction_digit {
                shift -= 4;
            }
        } else {
            // Past 120 bits: only whether anything non-zero follows can
            // still change the rounding; keep it as a sticky low bit.
            lost_bits |= d != 0;
            if !fraction_digit {
                shift += 4;
            }
        }
    }
    if lost_bits {
        mantissa |= 1;
    }
    let exponent: i64 = match exp {
        None => 0,
        Some(e) => {
            let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
            if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            // Saturate: anything this large is an overflow or zero anyway.
            e.parse::<i64>().unwrap_or(if e.starts_with('-') {
                -100_000
            } else {
                100_000
            })
        }
    };
    // The u128 -> f64 conversion rounds once to 53 bits; scaling by a power
    // of two is exact while the result stays normal.
    let total = (exponent + shift).clamp(-100_000, 100_000) as i32;
    Some(scale_by_pow2(mantissa as f64, total))
}

/// `x * 2^e` without overflow in the intermediate power.
fn scale_by_pow2(mut x: f64, mut e: i32) -> f64 {
    while e > 1000 {
        x *= 2f64.powi(1000);
        e -= 1000;
    }
    while e < -1000 {
        x *= 2f64.powi(-1000);
        e += 1000;
    }
    x * 2f64.powi(e)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(text: &str) -> Result<Vec<f64>, Error> {
        read_set(text.as_bytes(), "f", 1, b" \t")
    }

    /// Found by the `ministat` fuzz target: a field whose second byte
    /// starts a multi-byte character (`-c\u{FFFD}\u{FFFD}`, `0é`, `nan\u{FFFD}...`)
    /// cut a `str` inside a character and panicked; it is not a number.
    #[test]
    fn a_field_with_a_multibyte_character_is_not_a_number() {
        for field in [
            "\u{FFFD}\u{FFFD}",
            "0\u{e9}",
            "-0\u{FFFD}",
            "nan\u{FFFD}(x)",
            "nan(\u{e9})",
            "\u{e9}",
        ] {
            assert_eq!(parse_c_double(field.as_bytes()), None, "{field:?}");
        }
        assert!(matches!(
            read("1\n0\u{e9}\n3\n"),
            Err(Error::Invalid { line: 2, .. })
        ));
        // What is a number still is.
        assert_eq!(parse_c_double(b"0x10"), Some(16.0));
        assert!(parse_c_double(b"NaN(abc)").unwrap().is_nan());
    }

    #[test]
    fn numbers_comments_blank_lines() {
        let v = read("# header\n1\n\n  2.5  # trailing note\n3e2\n#4\n-0.5\n").unwrap();
        assert_eq!(v, vec![1.0, 2.5, 300.0, -0.5]);
    }

    #[test]
    fn crlf_and_trailing_space() {
        assert_eq!(read("1\r\n2 \r\n3\t\r\n").unwrap(), vec![1.0, 2.0, 3.0]);
    }

    #[test]
    fn columns_and_delimiters() {
        let text = "a,1,10\nb,2,20\n# c,3,30\nd,4\ne,5,50,extra\n";
        assert_eq!(
            read_set(text.as_bytes(), "f", 3, b",").unwrap(),
            vec![10.0, 20.0, 50.0]
        );
        // Runs of delimiters count as one, as strtok has it.
        let text = "x  1\ny\t\t2\nz \t 3\n";
        assert_eq!(
            read_set(text.as_bytes(), "f", 2, b" \t").unwrap(),
            vec![1.0, 2.0, 3.0]
        );
        // A comment field before the column ends the line.
        let text = "1 # 9\n2 3\n4 5\n6 7\n";
        assert_eq!(
            read_set(text.as_bytes(), "f", 2, b" ").unwrap(),
            vec![3.0, 5.0, 7.0]
        );
    }

    #[test]
    fn invalid_data_names_line_and_file() {
        let e = read_set("1\n2\n\nx3\n4\n".as_bytes(), "data.txt", 1, b" \t").unwrap_err();
        assert!(matches!(e, Error::Invalid { line: 4, .. }));
        assert_eq!(e.to_string(), "Invalid data on line 4 in data.txt");
        // Trailing garbage inside the field is as bad as a word.
        let e = read_set("1\n2\n3,5\n".as_bytes(), "g", 1, b" ").unwrap_err();
        assert_eq!(e.to_string(), "Invalid data on line 3 in g");
        // A comment glued to the number is part of the field.
        let e = read("1\n2#c\n").unwrap_err();
        assert_eq!(e.to_string(), "Invalid data on line 2 in f");
    }

    #[test]
    fn too_few_points_names_the_file() {
        let e = read_set("1\n2\n# 3\n".as_bytes(), "short.dat", 1, b" ").unwrap_err();
        assert!(matches!(e, Error::TooFew { .. }));
        assert_eq!(
            e.to_string(),
            "Dataset short.dat must contain at least 3 data points"
        );
        assert!(matches!(read(""), Err(Error::TooFew { .. })));
    }

    #[test]
    fn unreadable_input_names_the_file() {
        struct Broken;
        impl io::Read for Broken {
            fn read(&mut self, _: &mut [u8]) -> io::Result<usize> {
                Err(io::Error::other("disk on fire"))
            }
        }
        let e = read_set(io::BufReader::new(Broken), "bad.dat", 1, b" ").unwrap_err();
        assert_eq!(e.to_string(), "Cannot read bad.dat: disk on fire");
        let e = Error::Open {
            name: "nope.dat".into(),
            source: io::Error::from(io::ErrorKind::NotFound),
        };
        assert!(e.to_string().starts_with("Cannot open nope.dat: "));
    }

    #[test]
    fn freebsd_reads_in_bufsiz_pieces() {
        let read = |t: &[u8]| read_set_freebsd(t, "f", 1, b" \t");
        // 1023 bytes then the rest of the line: two lines, two numbers.
        let mut long = vec![b' '; 1020];
        long.extend_from_slice(b"1.5");
        long.extend_from_slice(b"2\n3\n");
        assert_eq!(read(&long).unwrap(), vec![1.5, 2.0, 3.0]);
        // A line of exactly 1023 bytes: its newline reads as an empty line.
        let mut exact = vec![b' '; 1022];
        exact.extend_from_slice(b"x\n4\n");
        let e = read(&exact).unwrap_err();
        assert_eq!(e.to_string(), "Invalid data on line 1 in f");
        let mut exact = vec![b' '; 1022];
        exact.extend_from_slice(b"7\nx\n");
        let e = read(&exact).unwrap_err();
        assert_eq!(e.to_string(), "Invalid data on line 3 in f");
        // A NUL ends what the C string holds.
        assert_eq!(read(b"1\x002junk\n2\n3\n").unwrap(), vec![1.0, 2.0, 3.0]);
        assert_eq!(
            Error::TooFew { name: "f".into() }.c_message(),
            "Dataset f must contain at least 3 data points\n"
        );
        let e = Error::Open {
            name: "g".into(),
            source: io::Error::from_raw_os_error(2),
        };
        assert_eq!(
            e.c_message(),
            "ministat: Cannot open g: No such file or directory\n"
        );
    }

    #[test]
    fn strtod_forms() {
        let p = |s: &str| parse_c_double(s.as_bytes());
        assert_eq!(p("42"), Some(42.0));
        assert_eq!(p("+.5"), Some(0.5));
        assert_eq!(p("5."), Some(5.0));
        assert_eq!(p("-1E-3"), Some(-0.001));
        assert_eq!(p(" 7"), Some(7.0));
        assert_eq!(p("INF"), Some(f64::INFINITY));
        assert_eq!(p("-infinity"), Some(f64::NEG_INFINITY));
        assert!(p("nan").unwrap().is_nan());
        assert!(p("NaN(0x12)").unwrap().is_nan());
        assert_eq!(p("nan(1.2)"), None);
        assert!(p("nan(12_ab)").unwrap().is_nan());
        assert_eq!(p("0x10"), Some(16.0));
        assert_eq!(p("0x1.8p1"), Some(3.0));
        assert_eq!(p("-0X.8P-1"), Some(-0.25));
        assert_eq!(p("0x1p-1074"), Some(f64::from_bits(1)));
        for bad in [
            "", " ", ".", "e5", "1e", "1e+", "--1", "0x", "0xp1", "1 2", "inf1", "1_0",
        ] {
            assert_eq!(p(bad), None, "{bad:?}");
        }
    }
}
