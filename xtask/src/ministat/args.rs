//! The command line as FreeBSD's ministat reads it: `getopt(3)` with the
//! option string `AC:c:d:nqsw:` as BSD's getopt treats it (options end at
//! the first operand, at `--`, or at a lone `-`; a cluster like `-An` holds
//! several flags; an option's argument is glued on or the next word), each
//! value checked as FreeBSD checks it, and its messages word for word.
//! `--classic` takes options after operands too, as glibc's getopt does
//! for Debian's tool.

use std::ffi::OsString;

use super::plot::MAX_SETS;
use super::stats::CLASSIC_LEVELS;

/// Which formulas (and so which checks of `-c`) the command line asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Today's FreeBSD ministat, byte for byte.
    FreeBsd,
    /// `--exact`: FreeBSD's formulas with the exact t, at any level.
    Exact,
    /// `--classic`: Debian's ministat 20150715.
    Classic,
}

/// What the options ask for.
#[derive(Clone, Debug, PartialEq)]
pub struct Invocation {
    pub mode: Mode,
    /// `-A`: no plot.
    pub no_plot: bool,
    /// `-C`: the column, from 1.
    pub column: usize,
    /// `-c`: the confidence level, in percent: one of FreeBSD's table, or
    /// (`--exact`, `--classic`) any level strictly between 0 and 100.
    pub level: f64,
    /// `-d`: the delimiter bytes.
    pub delimiters: Vec<u8>,
    /// `-n`: summary statistics only.
    pub summary_only: bool,
    /// `-q`: no legend, no table header.
    pub quiet: bool,
    /// `-s`: one bar line per set.
    pub separate_bars: bool,
    /// `-w`: the plot width, when given (FreeBSD accepts 0 and up).
    pub width: Option<usize>,
    /// The operands: files, `-` for standard input.
    pub files: Vec<OsString>,
}

/// The options of FreeBSD's `getopt` string; `true` when it takes an argument.
const OPTIONS: [(u8, bool); 8] = [
    (b'A', false),
    (b'C', true),
    (b'c', true),
    (b'd', true),
    (b'n', false),
    (b'q', false),
    (b's', false),
    (b'w', true),
];

/// FreeBSD's usage text, printed after the complaint that led to it.
pub fn usage_text() -> String {
    let levels: Vec<String> = CLASSIC_LEVELS
        .iter()
        .map(|l| format!("{}%", super::cfmt::g(*l, 6)))
        .collect();
    format!(
        "Usage: ministat [-Anqs] [-C column] [-c confidence] [-d delimiter(s)] [-w width] [file ...]]\n\
         \tconfidence = {{{}}}\n\
         \t-A : print statistics only. suppress the graph.\n\
         \t-C : column number to extract (starts and defaults to 1)\n\
         \t-d : delimiter(s) string, default to \" \\t\"\n\
         \t-n : print summary statistics only, no graph/test\n\
         \t-q : suppress printing summary-statistics headers and data-set names\n\
         \t-s : print avg/median/stddev bars on separate lines\n\
         \t-w : width of graph/test output (default 74 or terminal width)\n",
        levels.join(", ")
    )
}

/// A usage error: what goes to stderr (getopt's own line, if any, then the
/// complaint and the usage text). The exit status is 2.
/// The widest plot `-w` takes, in columns.
pub const MAX_WIDTH: usize = 10_000;
const WIDTH_TOO_WIDE: &str = "Invalid width, wider than 10000 columns.";
const _: () = assert!(MAX_WIDTH == 10_000, "WIDTH_TOO_WIDE says the number");

pub fn usage_error(prefix: &str, complaint: &str) -> String {
    format!("{prefix}{complaint}\n{}", usage_text())
}

/// Parses `args` (what follows `ministat` on the command line). `mode` is
/// what `--classic`/`--exact` before them chose; either may also appear
/// among the options. Returns the stderr text of a usage error otherwise.
pub fn parse(args: &[OsString], mut mode: Mode) -> Result<Invocation, String> {
    let mut inv = Invocation {
        mode,
        no_plot: false,
        column: 1,
        level: 95.0,
        delimiters: b" \t".to_vec(),
        summary_only: false,
        quiet: false,
        separate_bars: false,
        width: None,
        files: Vec::new(),
    };
    // FreeBSD keeps the last level that matched its table; a later -c that
    // matches nothing is then not an error.
    let mut level: Option<f64> = None;
    let mut operands: Vec<OsString> = Vec::new();
    let mut i = 0;
    'words: while i < args.len() {
        let word = args[i].as_encoded_bytes();
        if word == b"--classic" || word == b"--exact" {
            mode = if word == b"--classic" {
                Mode::Classic
            } else {
                Mode::Exact
            };
            i += 1;
            continue;
        }
        if word.len() < 2 || word[0] != b'-' {
            if mode != Mode::Classic {
                break;
            }
            // Debian's tool reads its options with glibc's getopt, which
            // takes options after operands too.
            operands.push(args[i].clone());
            i += 1;
            continue;
        }
        if word == b"--" {
            i += 1;
            break;
        }
        let mut k = 1;
        while k < word.len() {
            let c = word[k];
            k += 1;
            let Some(&(_, takes_arg)) = OPTIONS.iter().find(|&&(o, _)| o == c) else {
                if c == b'-' {
                    // BSD getopt: an unknown `-` in a cluster ends the options.
                    break 'words;
                }
                let prefix = format!("ministat: illegal option -- {}\n", char::from(c));
                return Err(usage_error(&prefix, "Unknown option"));
            };
            let value: Option<Vec<u8>> = if !takes_arg {
                None
            } else if k < word.len() {
                let v = word[k..].to_vec();
                k = word.len();
                Some(v)
            } else if i + 1 < args.len() {
                i += 1;
                Some(args[i].as_encoded_bytes().to_vec())
            } else {
                let prefix = format!(
                    "ministat: option requires an argument -- {}\n",
                    char::from(c)
                );
                return Err(usage_error(&prefix, "Unknown option"));
            };
            match (c, value) {
                (b'A', _) => inv.no_plot = true,
                (b'n', _) => inv.summary_only = true,
                (b'q', _) => inv.quiet = true,
                (b's', _) => inv.separate_bars = true,
                (b'C', Some(v)) => {
                    let (n, whole) = c_strtol(&v);
                    if !whole {
                        return Err(usage_error("", "Invalid column number."));
                    }
                    // C stores strtol's long in an int.
                    let n = n as i32;
                    if n <= 0 {
                        return Err(usage_error("", "Column number should be positive."));
                    }
                    inv.column = n as usize;
                }
                (b'c', Some(v)) => {
                    let Some(a) = c_strtod(&v) else {
                        return Err(usage_error("", "Not a floating point number"));
                    };
                    if mode == Mode::FreeBsd {
                        if CLASSIC_LEVELS.contains(&a) {
                            level = Some(a);
                        }
                        if level.is_none() {
                            return Err(usage_error("", "No support for confidence level"));
                        }
                    } else {
                        level = Some(a);
                    }
                }
                (b'd', Some(v)) => {
                    if v.is_empty() {
                        return Err(usage_error("", "Can't use empty delimiter string"));
                    }
                    inv.delimiters = v;
                }
                (b'w', Some(v)) => {
                    let (n, whole) = c_strtol(&v);
                    if !whole {
                        return Err(usage_error("", "Invalid width, not a number."));
                    }
                    let n = n as i32;
                    if n < 0 {
                        return Err(usage_error("", "Unable to move beyond left margin."));
                    }
                    // C keeps whatever int strtol's long became (`-w
                    // 99999999999` is 1,215,752,191 columns, a plot of
                    // gigabytes); here a width past MAX_WIDTH is a usage
                    // error.
                    if n as usize > MAX_WIDTH {
                        return Err(usage_error("", WIDTH_TOO_WIDE));
                    }
                    inv.width = Some(n as usize);
                }
                _ => unreachable!("every option of OPTIONS is handled"),
            }
        }
        i += 1;
    }
    inv.mode = mode;
    if let Some(l) = level {
        if mode != Mode::FreeBsd && !(l > 0.0 && l < 100.0) {
            return Err(usage_error("", "No support for confidence level"));
        }
        inv.level = l;
    }
    operands.extend_from_slice(&args[i..]);
    inv.files = operands;
    if inv.files.len() > MAX_SETS {
        return Err(usage_error("", "Too many datasets."));
    }
    Ok(inv)
}

/// C's `isspace` in the C locale.
fn is_c_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\n' | b'\x0b' | b'\x0c' | b'\r')
}

/// C's `strtol(s, &end, 10)`: the value (saturated to the 64-bit `long`)
/// and whether the number took all of `s` (`*end == '\0'`). With no digits
/// the value is 0 and nothing is taken, so only an empty `s` is whole.
pub fn c_strtol(s: &[u8]) -> (i64, bool) {
    let mut k = 0;
    while k < s.len() && is_c_space(s[k]) {
        k += 1;
    }
    let negative = k < s.len() && s[k] == b'-';
    if k < s.len() && (s[k] == b'-' || s[k] == b'+') {
        k += 1;
    }
    let digits_start = k;
    let mut value: i128 = 0;
    while k < s.len() && s[k].is_ascii_digit() {
        value = (value * 10 + i128::from(s[k] - b'0')).min(i128::from(i64::MAX) + 1);
        k += 1;
    }
    if k == digits_start {
        return (0, s.is_empty());
    }
    let value = if negative { -value } else { value };
    let value = value.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64;
    (value, k == s.len())
}

/// C's `strtod` on a whole option argument: the value, or `None` when
/// anything is left after the number. An empty argument is 0, as C has it.
fn c_strtod(s: &[u8]) -> Option<f64> {
    if s.is_empty() {
        return Some(0.0);
    }
    super::input::parse_c_double(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(words: &[&str]) -> Result<Invocation, String> {
        let v: Vec<OsString> = words.iter().map(OsString::from).collect();
        parse(&v, Mode::FreeBsd)
    }

    #[test]
    fn clusters_glued_values_and_operands() {
        let inv = p(&["-An", "-C2", "-c", "99", "-d,", "a", "-n"]).unwrap();
        assert!(inv.no_plot && inv.summary_only && !inv.quiet);
        assert_eq!((inv.column, inv.level), (2, 99.0));
        assert_eq!(inv.delimiters, b",");
        // Options end at the first operand: "-n" is a file.
        assert_eq!(inv.files, ["a", "-n"]);
        let inv = p(&["--", "-n"]).unwrap();
        assert_eq!(inv.files, ["-n"]);
        let inv = p(&["-", "x"]).unwrap();
        assert_eq!(inv.files, ["-", "x"]);
        assert_eq!(p(&["-w", ""]).unwrap().width, Some(0));
        assert_eq!(p(&["-c", "9.5e1"]).unwrap().level, 95.0);
        // The last level that matched stands.
        assert_eq!(p(&["-c", "90", "-c", "97"]).unwrap().level, 90.0);
        let inv = parse(&["-c".into(), "97.5".into()], Mode::Exact).unwrap();
        assert_eq!(inv.level, 97.5);
        let inv = p(&["-n", "--exact", "-c", "97.5", "f"]).unwrap();
        assert_eq!((inv.mode, inv.level), (Mode::Exact, 97.5));
        let inv = p(&["--classic", "a", "-n", "b", "--", "-A"]).unwrap();
        assert_eq!(
            (inv.mode, inv.summary_only, inv.no_plot),
            (Mode::Classic, true, false)
        );
        assert_eq!(inv.files, ["a", "b", "-A"]);
    }

    #[test]
    fn freebsd_messages() {
        let first = |r: Result<Invocation, String>| {
            let e = r.unwrap_err();
            assert!(e.ends_with(&usage_text()), "{e}");
            e[..e.len() - usage_text().len()].to_string()
        };
        // (the arguments, the message before the usage)
        for (args, says) in [
            (
                &["-x"][..],
                "ministat: illegal option -- x\nUnknown option\n",
            ),
            (
                &["-c"][..],
                "ministat: option requires an argument -- c\nUnknown option\n",
            ),
            (&["-c", "97"][..], "No support for confidence level\n"),
            (&["-c", "95%"][..], "Not a floating point number\n"),
            (&["-C", "x"][..], "Invalid column number.\n"),
            (&["-C", "0"][..], "Column number should be positive.\n"),
            // strtol saturates; the int that holds it is then -1.
            (
                &["-C", "99999999999999999999"][..],
                "Column number should be positive.\n",
            ),
            (&["-d", ""][..], "Can't use empty delimiter string\n"),
            (&["-w", "7x"][..], "Invalid width, not a number.\n"),
            (&["-w", "-1"][..], "Unable to move beyond left margin.\n"),
            // Past MAX_WIDTH, and strtol's long that C's int wraps to 1.2e9.
            (
                &["-w", "10001"][..],
                "Invalid width, wider than 10000 columns.\n",
            ),
            (
                &["-w", "99999999999"][..],
                "Invalid width, wider than 10000 columns.\n",
            ),
            (
                &["1", "2", "3", "4", "5", "6", "7", "8"][..],
                "Too many datasets.\n",
            ),
        ] {
            assert_eq!(first(p(args)), says, "{args:?}");
        }
        // MAX_WIDTH itself is a width.
        assert_eq!(p(&["-w", "10000"]).unwrap().width, Some(MAX_WIDTH));
        assert!(usage_text().contains("confidence = {80%, 90%, 95%, 98%, 99%, 99.5%}"));
    }

    #[test]
    fn strtol() {
        assert_eq!(c_strtol(b" +12"), (12, true));
        assert_eq!(c_strtol(b"-3"), (-3, true));
        assert_eq!(c_strtol(b"4 "), (4, false));
        assert_eq!(c_strtol(b""), (0, true));
        assert_eq!(c_strtol(b"x"), (0, false));
        assert_eq!(c_strtol(b"99999999999999999999"), (i64::MAX, true));
        assert_eq!(c_strtol(b"-99999999999999999999"), (i64::MIN, true));
    }
}
