//! `cargo xtask ministat`: FreeBSD's ministat, the small tool that says
//! whether two sets of measurements differ, with a plot, a table and
//! Student's t test.
//!
//! Input is as ministat reads it (see the `input` module): one number per line, `#`
//! comments, a column picked from delimited lines (`-C`, `-d`), standard
//! input when no file (or `-`) is named. Each later set is compared with the
//! first. The options are read as FreeBSD's `getopt` reads them (the `args`
//! module), with FreeBSD's messages.
//!
//! # Three sets of formulas
//!
//! The default ([`Formula::FreeBsd`]) prints byte for byte what today's
//! FreeBSD ministat (`usr.bin/ministat`) prints, errors and exit statuses
//! included:
//! - the median of an even count is the mean of the two middle values;
//! - the mean comes from the running sum in input order, the variance is
//!   summed in a second pass around it over the sorted values;
//! - the percentage interval is t·sqrt(((n₂-1)·v₂ + (n₁-1)·v₁·m₂²/m₁²) ·
//!   (n₁+n₂)/(n₁·n₂·(n₁+n₂-2))) · 100/m₁, each set's spread taken relative
//!   to its own mean (set 1 is the baseline);
//! - t comes from FreeBSD's 3-decimal table for six levels (80, 90, 95, 98,
//!   99, 99.5) and 1 to 100 degrees of freedom, its row for infinity past
//!   100; `-c` with another level is refused;
//! - the plot is as tall as the last set's tallest stack (an earlier set's
//!   taller stacks are cut), as the C tool draws it.
//!
//! Where the C tool has no defined output we say why instead: `-w 1`
//! crashes it (it indexes memory with NaN), so we refuse it (exit 2). A
//! `-` after the first file makes the C tool read an uninitialised stream;
//! we read standard input there. We part from it on purpose in one place:
//! a value that is `nan`, `inf` or beyond ±1e100 is refused (exit 2),
//! naming its file and line, in every mode; the C tool prints `nan` and
//! `inf` statistics of such sets, or crashes plotting them.
//!
//! `--exact` ([`Formula::Exact`]) keeps those formulas with the exact
//! two-sided t quantile for any degrees of freedom and any level (`-c 97.5`),
//! and a plot that keeps every point.
//!
//! `--classic` ([`Formula::Classic`]) reproduces Debian's `ministat`
//! package line for line. Its version, 20150715, is FreeBSD's tool as of
//! July 2015, before the changes above (the percentage interval was
//! reworked in November 2016):
//! - the median of an even count is the upper middle value, values[n/2];
//! - the variance is (Σx² - (Σx)²/n)/(n-1) from running sums in input
//!   order, so a constant set can print a stddev of `-nan`;
//! - the percentage interval is the absolute interval · 100 / m₁;
//! - t comes from ministat's table (the same as FreeBSD's); at a level not
//!   in the table, where the C tool refuses, the exact t;
//! - the plot is cut to the last set's tallest stack, as the C tool does.
//!
//! `--classic` reads input as the default does except for FreeBSD's
//! 1023-byte line pieces (white space at the end of a line is dropped;
//! Debian's tool calls a CRLF line invalid), names standard input
//! `<stdin>`, takes options after files as Debian's glibc build does, and
//! exits with status 2 on every error (Debian's tool exits 1 when a file
//! cannot be opened); its usage messages are FreeBSD's wording.
//!
//! # Library
//!
//! [`summarize`], [`compare`], [`compare_summaries`] and [`render`] serve
//! other commands (`cargo xtask bench`) without going through files or
//! text; [`RenderOptions::default`] uses [`Formula::Exact`], which takes
//! any level.

mod args;
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
    classic_t, compare, compare_summaries, freebsd_t, student_t, summarize, Comparison, Formula,
    Summary,
};

use args::{Invocation, Mode};
use input::Error;

/// Opens a set's input: `None` is standard input, `Some(name)` a file.
pub(crate) type Opener<'a> = dyn FnMut(Option<&OsStr>) -> io::Result<Box<dyn BufRead>> + 'a;

/// Text `--help` adds after the options.
const FORMULAS_HELP: &str = "\
Options, read as FreeBSD's ministat reads them (options end at the first FILE; with --classic,
as Debian's build reads them, they may follow FILEs):
  -A            statistics and comparisons only: no plot
  -C COLUMN     the column to read, counting from 1
  -c LEVEL      confidence level in percent: 80, 90, 95 (the default), 98, 99 or 99.5,
                the levels of FreeBSD's t table; any level between 0 and 100 with --exact
  -d DELIMS     column delimiter characters, any of which separates fields [default: space, tab]
  -n            summary statistics only: no plot, no comparisons
  -q            no legend and no table header (typically with -n)
  -s            one bar line (mean, median, stddev) per set under the plot
  -w WIDTH      plot width [default: the terminal's width less 2, or 74 off a terminal]
Each later FILE is compared with the first; with no FILE, or FILE '-', standard input is read;
at most 7 FILEs.

By default the output is byte for byte today's FreeBSD ministat's (usr.bin/ministat): median of
an even count = mean of the two middle values; variance summed around the mean; percentage
interval from each set's own relative spread; t from FreeBSD's 3-decimal table (its row for
infinity past 100 degrees of freedom); the plot cut to the last set's tallest stack; FreeBSD's
messages and exit statuses. -w 1 crashes FreeBSD's tool, so it is refused here; so is a value
that is nan, inf or beyond 1e100 in magnitude (FreeBSD's tool prints nan and inf statistics of
it, or crashes plotting it), naming its file and line.
--exact: the same formulas with the exact Student's t quantile for any degrees of freedom and any
-c level between 0 and 100 (levels FreeBSD's table lacks, e.g. 97.5), and a plot that keeps
every point.
--classic reproduces Debian's ministat 20150715 (FreeBSD's tool before 2016) line for line:
median = upper middle value; variance from running sums; percentage interval = interval * 100 /
mean of the first set; t from the same table (exact t at other levels).

Errors (a bad option, a non-number, fewer than 3 points, an unreadable file) exit with status 2.";

/// `cargo xtask ministat [--exact | --classic] [-Anqs] [-C column] [-c level] [-d delims] [-w width] [file ...]`
#[derive(clap::Args, Debug)]
#[command(after_long_help = FORMULAS_HELP, disable_help_flag = true)]
pub struct Args {
    /// Print help (`-h` is an unknown option to ministat, as to FreeBSD's).
    #[arg(long, action = clap::ArgAction::Help)]
    help: Option<bool>,
    /// Reproduce Debian's ministat 20150715 (FreeBSD's pre-2016 formulas) line for line.
    #[arg(long, conflicts_with = "exact")]
    pub classic: bool,
    /// The exact Student's t quantile, at any confidence level (not FreeBSD's table).
    #[arg(long)]
    pub exact: bool,
    /// ministat's options and files: [-Anqs] [-C column] [-c level] [-d delims] [-w width]
    /// [file ...] (see --help).
    #[arg(
        value_name = "ARGS",
        trailing_var_arg = true,
        allow_hyphen_values = true
    )]
    pub args: Vec<OsString>,
}

/// Why the command printed no report: what goes to stderr, and the exit status.
#[derive(Debug, PartialEq)]
pub struct Failure {
    pub stderr: String,
    pub status: i32,
}

impl Failure {
    fn new(stderr: String) -> Failure {
        Failure { stderr, status: 2 }
    }
}

impl From<Error> for Failure {
    fn from(e: Error) -> Failure {
        Failure::new(e.c_message())
    }
}

/// The words after `ministat` on this process's command line, as given:
/// clap drops a `--` before the first operand, where FreeBSD's getopt
/// keeps what follows it as files (`ministat -- -n` reads a file `-n`).
fn raw_args() -> Option<Vec<OsString>> {
    let mut words = std::env::args_os().skip(1);
    (words.next()? == "ministat").then(|| words.collect())
}

/// Runs the command; the exit status: 0, or 2 after an error on stderr.
pub fn main(a: Args) -> i32 {
    // `--classic` and `--exact` among the raw words are read by `args::parse`.
    let a = match raw_args() {
        Some(args) => Args {
            help: None,
            classic: false,
            exact: false,
            args,
        },
        None => a,
    };
    let stdin = io::stdin();
    let mut open = |name: Option<&OsStr>| -> io::Result<Box<dyn BufRead>> {
        match name {
            None => Ok(Box::new(stdin.lock())),
            Some(path) => Ok(Box::new(io::BufReader::new(std::fs::File::open(path)?))),
        }
    };
    match execute(&a, default_width(), &mut open) {
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
        Err(f) => {
            eprint!("{}", f.stderr);
            f.status
        }
    }
}

/// What `main` does with `words` (the words after `ministat`, `--classic`
/// or `--exact` among them), inputs from `open` and a plot `term_width`
/// wide when `-w` gives none: the report, or the failure. For the fuzz
/// target, which has no files or terminal.
pub(crate) fn execute_words(
    words: Vec<OsString>,
    term_width: usize,
    open: &mut Opener,
) -> Result<String, Failure> {
    let a = Args {
        help: None,
        classic: false,
        exact: false,
        args: words,
    };
    execute(&a, term_width, open)
}

/// Reads every set named in `a` (all before printing anything, so an error
/// leaves no partial report) and renders the report. `open(None)` is
/// standard input, `open(Some(name))` a file; `term_width` is the plot
/// width when `-w` does not give one.
fn execute(a: &Args, term_width: usize, open: &mut Opener) -> Result<String, Failure> {
    let mode = if a.classic {
        Mode::Classic
    } else if a.exact {
        Mode::Exact
    } else {
        Mode::FreeBsd
    };
    let inv = args::parse(&a.args, mode).map_err(Failure::new)?;
    let sets = read_sets(&inv, open)?;
    let opts = RenderOptions {
        width: inv.width.unwrap_or(term_width),
        confidence: inv.level,
        formula: match inv.mode {
            Mode::Classic => Formula::Classic,
            Mode::Exact => Formula::Exact,
            Mode::FreeBsd => Formula::FreeBsd,
        },
        plot: !(inv.no_plot || inv.summary_only),
        compare: !inv.summary_only,
        headers: !inv.quiet,
        separate_bars: inv.separate_bars,
    };
    if opts.plot {
        if let Some(why) = plot::unplottable(&sets, opts.width, opts.formula) {
            return Err(Failure::new(format!("ministat: {why}\n")));
        }
    }
    Ok(render(&sets, &opts))
}

/// Reads the sets `inv` names, each a name and its values in input order.
/// FreeBSD opens every file before it reads any, so an unopenable file is
/// reported before bad data in an earlier one; `--classic` opens and reads
/// one file after the other, as Debian's tool does.
fn read_sets(inv: &Invocation, open: &mut Opener) -> Result<Vec<(String, Vec<f64>)>, Failure> {
    let classic = inv.mode == Mode::Classic;
    let stdin_name = "<stdin>";
    let named: Vec<(String, Option<&OsStr>)> = if inv.files.is_empty() {
        vec![(stdin_name.to_string(), None)]
    } else {
        inv.files
            .iter()
            .map(|f| {
                let source = (f != "-").then_some(f.as_os_str());
                let name = if classic && source.is_none() {
                    stdin_name.to_string()
                } else {
                    f.to_string_lossy().into_owned()
                };
                (name, source)
            })
            .collect()
    };
    let delimiters = &inv.delimiters[..];
    let read = |reader: Box<dyn BufRead>, name: &str| {
        if classic {
            input::read_set(reader, name, inv.column, delimiters)
        } else {
            input::read_set_freebsd(reader, name, inv.column, delimiters)
        }
    };
    let mut sets = Vec::with_capacity(named.len());
    if classic {
        for (name, source) in named {
            let reader = open(source).map_err(|source| Error::Open {
                name: name.clone(),
                source,
            })?;
            let values = read(reader, &name)?;
            sets.push((name, values));
        }
    } else {
        // Standard input is taken when its set is read (it cannot fail to
        // open, and it is read once per `-`).
        let mut readers = Vec::with_capacity(named.len());
        for (name, source) in named {
            let reader = match source {
                None => None,
                Some(_) => Some(open(source).map_err(|source| Error::Open {
                    name: name.clone(),
                    source,
                })?),
            };
            readers.push((name, reader));
        }
        for (name, reader) in readers {
            let reader = match reader {
                Some(r) => r,
                None => open(None).map_err(|source| Error::Open {
                    name: name.clone(),
                    source,
                })?,
            };
            let values = read(reader, &name)?;
            sets.push((name, values));
        }
    }
    Ok(sets)
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
