//! `cargo xtask ministat`: FreeBSD's ministat, the small tool that says
//! whether two sets of measurements differ, with a plot, a table and
//! Student's t test.
//!
//! Input is as ministat reads it (see the `input` module): one number per line, `#`
//! comments, a column picked from delimited lines (`-C`, `-d`), standard
//! input when no file (or `-`) is named. Each later set is compared with the
//! first.
//!
//! # Two generations of formulas
//!
//! The default ([`Formula::Modern`]) is today's FreeBSD ministat:
//! - the median of an even count is the mean of the two middle values;
//! - the variance is summed in two passes, around the mean;
//! - the percentage interval is t·sqrt(((n₂-1)·v₂ + (n₁-1)·v₁·m₂²/m₁²) ·
//!   (n₁+n₂)/(n₁·n₂·(n₁+n₂-2))) · 100/m₁, each set's spread taken relative
//!   to its own mean (set 1 is the baseline);
//! - and, where FreeBSD looks t up in a 3-decimal table for six levels and
//!   up to 100 degrees of freedom, we use the exact two-sided quantile for
//!   any degrees of freedom and any level (`-c 97.5` works). Our plot also
//!   keeps every point, where FreeBSD's cuts stacks down to the height of
//!   the last set's tallest stack. `-q` is FreeBSD's: no legend, no header.
//!
//! `--classic` ([`Formula::Classic`]) reproduces Debian's `ministat`
//! package line for line. Its version, 20150715, is FreeBSD's tool as of
//! July 2015, before the changes above (the percentage interval was
//! reworked in November 2016):
//! - the median of an even count is the upper middle value, values[n/2];
//! - the variance is (Σx² - (Σx)²/n)/(n-1) from running sums in input
//!   order, so a constant set can print a stddev of `-nan`;
//! - the percentage interval is the absolute interval · 100 / m₁;
//! - t comes from ministat's table (its "99.5 %" column holds the one-sided
//!   99.9 % points; past 100 degrees of freedom it uses the normal row); at
//!   a level not in the table, where the C tool refuses, the exact t;
//! - the plot is cut to the last set's tallest stack, as the C tool does.
//!
//! Both modes read input alike, as today's FreeBSD does: white space at
//! the end of a line is dropped (Debian's tool calls a CRLF line invalid).
//! Every error exits with status 2 (Debian's tool exits 1 when a file cannot
//! be opened), and `-w` must be at least 2 (the C tools misdraw or crash
//! below that).
//!
//! # Library
//!
//! [`summarize`], [`compare`], [`compare_summaries`] and [`render`] serve
//! other commands (the coming `cargo xtask bench`) without going through
//! files or text.

mod cfmt;
mod input;
mod plot;
mod render;
mod stats;

use std::ffi::{OsStr, OsString};
use std::io::{self, BufRead, IsTerminal, Write};

// The library surface; what only `cargo xtask bench` will use is unused here.
#[allow(unused_imports)]
pub use render::{comparison_text, render, RenderOptions};
#[allow(unused_imports)]
pub use stats::{
    classic_t, compare, compare_summaries, student_t, summarize, Comparison, Formula, Summary,
};

use input::Error;

/// Opens a set's input: `None` is standard input, `Some(name)` a file.
type Opener<'a> = dyn FnMut(Option<&OsStr>) -> io::Result<Box<dyn BufRead>> + 'a;

/// Text `--help` adds after the options.
const FORMULAS_HELP: &str = "\
Each later FILE is compared with the first; with no FILE, or FILE '-', standard input is read.

Formulas: by default those of today's FreeBSD ministat (median of an even count = mean of the
two middle values; two-pass variance; percentage interval from each set's own relative spread),
with the exact Student's t quantile for any degrees of freedom and any -c level, and a plot that
keeps every point.
--classic reproduces Debian's ministat 20150715 (FreeBSD's tool before 2016) line for line:
median = upper middle value; variance from running sums; percentage interval = interval * 100 /
mean of the first set; t from ministat's 3-decimal table at 80, 90, 95, 98, 99 and 99.5 (exact t
at other levels); the plot cut to the last set's tallest stack, as the C tool draws it.

Errors (a non-number, fewer than 3 points, an unreadable file) exit with status 2.";

/// `cargo xtask ministat [-Anqs] [-C column] [-c level] [-d delims] [-w width] [--classic] [file ...]`
#[derive(clap::Args, Debug)]
#[command(after_long_help = FORMULAS_HELP)]
pub struct Args {
    /// Statistics and comparisons only: no plot.
    #[arg(short = 'A')]
    pub no_plot: bool,
    /// The column to read, counting from 1.
    #[arg(short = 'C', value_name = "COLUMN", default_value_t = 1,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub column: u32,
    /// Confidence level in percent for Student's t test: any level between 0 and 100
    /// (ministat's table has 80, 90, 95, 98, 99, 99.5).
    #[arg(short = 'c', value_name = "LEVEL", default_value_t = 95.0, value_parser = parse_level)]
    pub confidence: f64,
    /// Column delimiter characters, any of which separates fields [default: space and tab].
    #[arg(short = 'd', value_name = "DELIMS", value_parser = parse_delimiters)]
    pub delimiters: Option<String>,
    /// Summary statistics only: no plot, no comparisons.
    #[arg(short = 'n')]
    pub summary_only: bool,
    /// No legend and no table header (FreeBSD's -q; typically with -n).
    #[arg(short = 'q')]
    pub quiet: bool,
    /// One bar line (mean, median, stddev) per set under the plot.
    #[arg(short = 's')]
    pub separate_bars: bool,
    /// Plot width in characters [default: the terminal's width less 2, or 74 off a terminal].
    #[arg(short = 'w', value_name = "WIDTH", value_parser = clap::value_parser!(u32).range(2..))]
    pub width: Option<u32>,
    /// Reproduce Debian's ministat 20150715 (FreeBSD's pre-2016 formulas) line for line.
    #[arg(long)]
    pub classic: bool,
    /// Files of numbers; '-' is standard input.
    #[arg(value_name = "FILE")]
    pub files: Vec<OsString>,
}

fn parse_level(s: &str) -> Result<f64, String> {
    match s.trim_end_matches('%').parse::<f64>() {
        Ok(v) if v > 0.0 && v < 100.0 => Ok(v),
        _ => Err("a confidence level is a percentage between 0 and 100, e.g. 95".into()),
    }
}

fn parse_delimiters(s: &str) -> Result<String, String> {
    if s.is_empty() {
        Err("the delimiter string cannot be empty".into())
    } else {
        Ok(s.to_string())
    }
}

/// Runs the command; the exit status: 0, or 2 after an error on stderr.
pub fn main(a: Args) -> i32 {
    let stdin = io::stdin();
    let mut open = |name: Option<&OsStr>| -> io::Result<Box<dyn BufRead>> {
        match name {
            None => Ok(Box::new(stdin.lock())),
            Some(path) => Ok(Box::new(io::BufReader::new(std::fs::File::open(path)?))),
        }
    };
    let width = a.width.map_or_else(default_width, |w| w as usize);
    match execute(&a, width, &mut open) {
        Ok(text) => {
            let mut out = io::stdout().lock();
            match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
                Ok(()) => 0,
                // A reader that went away (`| head`) is not our failure.
                Err(e) if e.kind() == io::ErrorKind::BrokenPipe => 0,
                Err(e) => {
                    eprintln!("ministat: writing the report: {e}");
                    2
                }
            }
        }
        Err(e) => {
            eprintln!("ministat: {e}");
            2
        }
    }
}

/// Reads every set named in `a` (all before printing anything, so an error
/// leaves no partial report) and renders the report. `open(None)` is
/// standard input, `open(Some(name))` a file.
fn execute(a: &Args, width: usize, open: &mut Opener) -> Result<String, Error> {
    if a.files.len() > plot::MAX_SETS {
        return Err(Error::TooManySets {
            count: a.files.len(),
            max: plot::MAX_SETS,
        });
    }
    let stdin_only = [OsString::from("-")];
    let files = if a.files.is_empty() {
        &stdin_only[..]
    } else {
        &a.files[..]
    };
    let delimiters = a.delimiters.as_deref().unwrap_or(" \t").as_bytes();
    let mut sets = Vec::with_capacity(files.len());
    for file in files {
        let (name, source) = if file == "-" {
            ("<stdin>".to_string(), None)
        } else {
            (file.to_string_lossy().into_owned(), Some(file.as_os_str()))
        };
        let reader = open(source).map_err(|source| Error::Open {
            name: name.clone(),
            source,
        })?;
        let values = input::read_set(reader, &name, a.column as usize, delimiters)?;
        sets.push((name, values));
    }
    let opts = RenderOptions {
        width,
        confidence: a.confidence,
        formula: if a.classic {
            Formula::Classic
        } else {
            Formula::Modern
        },
        plot: !(a.no_plot || a.summary_only),
        compare: !a.summary_only,
        headers: !a.quiet,
        separate_bars: a.separate_bars,
    };
    Ok(render(&sets, &opts))
}

/// ministat's default width: on a terminal, `$COLUMNS` or the terminal's
/// width less 2; otherwise 74.
fn default_width() -> usize {
    const OFF_TERMINAL: usize = 74;
    if !io::stdout().is_terminal() {
        return OFF_TERMINAL;
    }
    if let Some(w) = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<usize>().ok())
    {
        if w >= 2 {
            return w;
        }
    }
    terminal_columns()
        .map(|c| c.saturating_sub(2))
        .filter(|&w| w >= 2)
        .unwrap_or(OFF_TERMINAL)
}

/// The terminal's width in columns, from the TIOCGWINSZ ioctl on stdout.
fn terminal_columns() -> Option<usize> {
    let mut size = libc::winsize {
        ws_row: 0,
        ws_col: 0,
        ws_xpixel: 0,
        ws_ypixel: 0,
    };
    // SAFETY: TIOCGWINSZ writes one `struct winsize` through the pointer,
    // which points at a live, writable `winsize` of the right layout.
    let rc = unsafe { libc::ioctl(libc::STDOUT_FILENO, libc::TIOCGWINSZ, &mut size) };
    (rc == 0 && size.ws_col > 0).then_some(usize::from(size.ws_col))
}

#[cfg(test)]
mod tests;
