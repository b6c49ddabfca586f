//! The command end to end: the default against FreeBSD's ministat and
//! `--classic` against Debian's on the fixture cases, `--exact`, and the
//! errors.

use std::ffi::{OsStr, OsString};
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use clap::Parser;

use super::{execute, Args, Failure};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ministat")
}

/// Runs the command as `ministat ARGS` from the fixture folder, standard
/// input read from `stdin` (a fixture file, or empty), stdout not a terminal.
/// The words reach the command as `main` passes them, unparsed by clap.
fn run(args: &[&str], stdin: Option<&str>) -> Result<String, Failure> {
    let raw = Args {
        help: None,
        classic: false,
        exact: false,
        args: args.iter().map(OsString::from).collect(),
    };
    let dir = fixtures();
    let mut open = |name: Option<&OsStr>| -> io::Result<Box<dyn BufRead>> {
        match name {
            Some(n) => Ok(Box::new(io::BufReader::new(std::fs::File::open(
                dir.join(n),
            )?))),
            None => match stdin {
                Some(f) => Ok(Box::new(io::BufReader::new(std::fs::File::open(
                    dir.join(f),
                )?))),
                None => Ok(Box::new(io::empty())),
            },
        }
    };
    execute(&raw, 74, &mut open)
}

/// The stderr text of a run that must fail with status 2.
fn fails(args: &[&str]) -> String {
    let f = run(args, None).expect_err("must fail");
    assert_eq!(f.status, 2, "{args:?}");
    f.stderr
}

/// One line of cases.txt: name, arguments, file for standard input.
struct Case {
    name: String,
    args: Vec<String>,
    stdin: Option<String>,
}

fn cases(file: &Path) -> Vec<Case> {
    let text = std::fs::read_to_string(file).unwrap();
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (name, rest) = l.split_once(':').expect("name: arguments");
            let (args, stdin) = match rest.split_once('<') {
                Some((a, s)) => (a, Some(s.trim().to_string())),
                None => (rest, None),
            };
            Case {
                name: name.to_string(),
                args: args.split_whitespace().map(str::to_string).collect(),
                stdin,
            }
        })
        .collect()
}

fn run_case(case: &Case, extra: &[&str]) -> Result<String, Failure> {
    let args: Vec<&str> = extra
        .iter()
        .copied()
        .chain(case.args.iter().map(String::as_str))
        .collect();
    run(&args, case.stdin.as_deref())
}

/// The FreeBSD fixture cases whose data hold `nan` or `inf`, which
/// FreeBSD's tool reads (printing `nan` and `inf` statistics) and we
/// refuse: each case's first such value, as the message names it.
const REFUSED_NONFINITE: &[(&str, &str)] = &[
    ("nonfinite-n", "line 3 in nonfinite.dat: nan"),
    ("nonfinite-A", "line 3 in nonfinite.dat: nan"),
    ("nan-sort-A", "line 3 in nan11.dat: NaN"),
    ("inf-A", "line 2 in inf.dat: inf"),
    ("nan-sort-big", "line 3 in nanbig.dat: nan"),
];

/// Every FreeBSD fixture: stdout, stderr and exit status byte for byte as
/// FreeBSD's ministat gave them (tests/data/ministat/freebsd/regen.sh),
/// but for [`REFUSED_NONFINITE`], refused with status 2.
#[test]
fn default_matches_freebsd_ministat() {
    let dir = fixtures().join("freebsd");
    let cases = cases(&dir.join("cases.txt"));
    assert!(cases.len() >= 60, "freebsd/cases.txt lost its cases");
    let read = |ext: &str, name: &str| std::fs::read_to_string(dir.join(format!("{name}.{ext}")));
    let mut failed = Vec::new();
    for case in &cases {
        let out = read("out", &case.name)
            .unwrap_or_else(|e| panic!("{}.out: {e} (run freebsd/regen.sh)", case.name));
        let err = read("err", &case.name).unwrap_or_default();
        let status: i32 = read("status", &case.name).map_or(0, |s| s.trim().parse().unwrap());
        let got = match run_case(case, &[]) {
            Ok(text) => (text, String::new(), 0),
            Err(f) => (String::new(), f.stderr, f.status),
        };
        if let Some((_, at)) = REFUSED_NONFINITE.iter().find(|(n, _)| *n == case.name) {
            let refused = format!(
                "ministat: Invalid data on {at} is not a finite number (no measurement is)\n"
            );
            if got != (String::new(), refused, 2) {
                eprintln!("=== {}: not refused as {at}: {got:?}", case.name);
                failed.push(case.name.clone());
            }
            continue;
        }
        if got != (out.clone(), err.clone(), status) {
            eprintln!(
                "=== {}: expected (status {status})\n{out}{err}=== got (status {})\n{}{}",
                case.name, got.2, got.0, got.1
            );
            failed.push(case.name.clone());
        }
    }
    assert!(
        failed.is_empty(),
        "differs from FreeBSD's ministat: {failed:?}"
    );
}

/// Every fixture, byte for byte as Debian's ministat printed it.
#[test]
fn classic_matches_debian_ministat() {
    let cases = cases(&fixtures().join("cases.txt"));
    assert!(cases.len() >= 30, "cases.txt lost its cases");
    let mut failed = Vec::new();
    for case in &cases {
        let expect = std::fs::read_to_string(fixtures().join(format!("{}.out", case.name)))
            .unwrap_or_else(|e| panic!("{}.out: {e} (run regen.sh)", case.name));
        let got = run_case(case, &["--classic"]).unwrap_or_else(|e| panic!("{}: {e:?}", case.name));
        if got != expect {
            eprintln!("=== {}: expected\n{expect}=== got\n{got}", case.name);
            failed.push(case.name.clone());
        }
    }
    assert!(
        failed.is_empty(),
        "differs from Debian's ministat: {failed:?}"
    );
}

#[test]
fn exact_median_variance_and_percentage() {
    // even.dat is 4 1 3 2 8 6: sorted 1 2 3 4 6 8, median (3 + 4) / 2.
    let text = run(&["--exact", "-n", "even.dat", "odd.dat"], None).unwrap();
    assert!(
        text.contains("x   6             1             8           3.5 "),
        "{text}"
    );
    let classic = run(&["-n", "--classic", "even.dat", "odd.dat"], None).unwrap();
    assert!(
        classic.contains("x   6             1             8             4 "),
        "{classic}"
    );

    // Two-pass variance survives values near 1e9 (Debian prints -nan here).
    let text = run(&["--exact", "-A", "huge1.dat", "huge2.dat"], None).unwrap();
    assert!(!text.contains("nan"), "{text}");

    // The percentage interval: fast.dat vs slow.dat, worked by hand:
    //   n 7 and 5, means 10.092857 and 11.1, variances 0.017024 and 0.025;
    //   t(95 %, 10) = 2.228139; relative term
    //   pooled s = sqrt((6*0.017024 + 4*0.025) / 10) = 0.142177,
    //   interval = t * s * sqrt(1/7 + 1/5) = 0.185493;
    //   (5-1)*0.025 + (7-1)*0.017024*(11.1/10.092857)^2 = 0.223545;
    //   * 12 / (35 * 10) = 0.0076644; sqrt * t * 100 / 10.092857 = 1.93271 %.
    // FreeBSD's table has t = 2.228 there: 0.185482 and 1.93259 %.
    let expect = |interval: &str, percent: &str| {
        format!(
            "Difference at 95.0% confidence\n\t1.00714 +/- {interval}\n\t9.97877% +/- {percent}%\n\
             \t(Student's t, pooled s = 0.142177)\n"
        )
    };
    let text = run(&["--exact", "-A", "fast.dat", "slow.dat"], None).unwrap();
    assert!(text.ends_with(&expect("0.185493", "1.93271")), "{text}");
    let text = run(&["-A", "fast.dat", "slow.dat"], None).unwrap();
    assert!(text.ends_with(&expect("0.185482", "1.93259")), "{text}");
}

#[test]
fn exact_plot_keeps_every_point() {
    // differ: fast.dat has 10.1 twice, which FreeBSD's plot drops because
    // slow.dat, drawn last, has no stack.
    let count = |text: &str| -> usize {
        text.lines()
            .filter(|l| l.starts_with('|') && !l.contains('_'))
            .map(|l| l.matches('x').count())
            .sum()
    };
    let text = run(&["--exact", "fast.dat", "slow.dat"], None).unwrap();
    assert_eq!(count(&text), 7, "{text}");
    let text = run(&["fast.dat", "slow.dat"], None).unwrap();
    assert_eq!(count(&text), 6, "{text}");
}

#[test]
fn exact_takes_any_confidence_level() {
    let text = run(
        &["--exact", "-A", "-c", "97.5", "fast.dat", "slow.dat"],
        None,
    )
    .unwrap();
    assert!(text.contains("Difference at 97.5% confidence"), "{text}");
    let text = run(
        &["-A", "--exact", "-c", "99.95", "fast.dat", "slow.dat"],
        None,
    )
    .unwrap();
    assert!(text.contains("at 99.95% confidence"), "{text}");
    for bad in ["0", "100", "-5"] {
        let e = fails(&["--exact", "-c", bad, "a.dat"]);
        assert!(
            e.starts_with("No support for confidence level\nUsage: "),
            "{e}"
        );
    }
    let e = fails(&["--exact", "-c", "x", "a.dat"]);
    assert!(e.starts_with("Not a floating point number\n"), "{e}");
    // Without --exact, FreeBSD's six levels only.
    let e = fails(&["-c", "97.5", "a.dat"]);
    assert!(e.starts_with("No support for confidence level\n"), "{e}");
    assert!(Cli::try_parse_from(["ministat", "--exact", "--classic"]).is_err());
}

/// nan and inf are numbers to strtod, and FreeBSD's ministat printed
/// their statistics (issue 17) or crashed plotting them; no measurement is
/// one, so every formula refuses them, naming the file and line that holds
/// one, whichever file comes first on the command line. `ministat a b`
/// blamed `a` when `b` held inf (the plot's span was inf, every set's
/// points unplottable). A value beyond 1e100 in magnitude (whose square
/// nears the largest double) is refused as well.
#[test]
fn nan_and_inf_are_refused_naming_file_and_line() {
    let nan = "ministat: Invalid data on line 3 in nonfinite.dat: nan is not a finite number (no measurement is)\n";
    for args in [
        &["odd.dat", "nonfinite.dat"][..],
        &["nonfinite.dat", "odd.dat"],
        &["-n", "nonfinite.dat"],
        &["--exact", "-A", "odd.dat", "nonfinite.dat"],
        &["--classic", "-n", "nonfinite.dat"],
    ] {
        assert_eq!(fails(args), nan, "{args:?}");
    }
    let e = fails(&["odd.dat", "inf.dat"]);
    assert_eq!(
        e,
        "ministat: Invalid data on line 2 in inf.dat: inf is not a finite number (no measurement is)\n"
    );
    let e = fails(&["--classic", "-n", "nan11.dat"]);
    assert!(
        e.starts_with("ministat: Invalid data on line 3 in nan11.dat: NaN is not"),
        "{e}"
    );
    // Finite, but too large to sum squares of; and what is not, cut.
    let huge = |text: &str| {
        super::input::read_set(text.as_bytes(), "big.dat", 1, b" ")
            .unwrap_err()
            .to_string()
    };
    assert_eq!(
        huge("1\n2\n-1e308\n"),
        "Invalid data on line 3 in big.dat: -1e308 is beyond 1e+100 in magnitude (no measurement is, and the sums of squares would overflow)"
    );
    let e = huge(&format!("1\n{}\n3\n", "9".repeat(400)));
    assert!(
        e.starts_with(&format!(
            "Invalid data on line 2 in big.dat: {}... is not a finite",
            "9".repeat(40)
        )),
        "{e}"
    );
    assert!(super::input::read_set("1e100\n-1e100\n0\n".as_bytes(), "f", 1, b" ").is_ok());
}

/// -w 1 makes FreeBSD's plot divide by zero and crash; -w 0 draws an empty
/// frame (in the fixtures); a zero span needs no width.
#[test]
fn plot_widths() {
    let e = fails(&["-w", "1", "a.dat"]);
    assert!(
        e.starts_with("ministat: a plot needs a width of 0 or at least 2"),
        "{e}"
    );
    let text = run(&["-w", "1", "-A", "a.dat"], None).unwrap();
    assert!(text.starts_with("x a.dat\n    N "), "{text}");
    let text = run(&["-w", "1", "same.dat"], None).unwrap();
    assert!(text.contains("[no plot, span is zero width]\n"), "{text}");
    for mode in ["--exact", "--classic"] {
        let e = fails(&[mode, "-w", "0", "a.dat"]);
        assert_eq!(e, "ministat: a plot needs a width of at least 2\n");
    }
}

#[test]
fn errors_name_the_file() {
    let e = fails(&["fast.dat", "missing.dat"]);
    assert_eq!(
        e,
        "ministat: Cannot open missing.dat: No such file or directory\n"
    );
    // Column 2 of fast.dat is empty: no points.
    let e = fails(&["-C", "2", "fast.dat"]);
    assert_eq!(e, "Dataset fast.dat must contain at least 3 data points\n");
    // Column 1 of cols.csv read with blanks as delimiters is "h0,105,110".
    let e = fails(&["cols.csv"]);
    assert_eq!(e, "ministat: Invalid data on line 2 in cols.csv\n");
    let e = fails(&["a.dat"; 8]);
    assert!(e.starts_with("Too many datasets.\nUsage: ministat "), "{e}");
    for (args, first) in [
        (&["-w", "x"][..], "Invalid width, not a number.\n"),
        (&["-C", "0"][..], "Column number should be positive.\n"),
        (&["-d", ""][..], "Can't use empty delimiter string\n"),
    ] {
        let e = fails(args);
        assert!(e.starts_with(first), "{args:?}: {e}");
    }
    // --classic names standard input as Debian's tool does.
    let text = run(&["--classic", "-n", "-"], Some("fast.dat")).unwrap();
    assert!(text.starts_with("x <stdin>\n"), "{text}");
}

/// The command's entry point: a bad file gives exit status 2.
#[test]
fn exit_status_is_2() {
    let dir = std::env::temp_dir().join(format!("ministat-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let bad = dir.join("bad.dat");
    std::fs::write(&bad, "1\n2\nthree\n4\n").unwrap();
    let missing = dir.join("missing.dat");
    let status = |file: &Path| {
        let cli = Cli::try_parse_from([OsStr::new("ministat"), file.as_os_str()]).unwrap();
        super::main(cli.args)
    };
    let (bad_status, missing_status) = (status(&bad), status(&missing));
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(bad_status, 2);
    assert_eq!(missing_status, 2);
}

/// Found by the `ministat` fuzz target (`fuzz/artifacts/ministat/crash-2b60a370...`):
/// a confidence level holding a multi-byte character panicked in the number
/// parser; it is a usage error, status 2, as any other level that is not a
/// number.
#[test]
fn a_confidence_level_with_a_multibyte_character_is_a_usage_error() {
    for level in ["-c\u{FFFD}\u{FFFD}", "-c\u{e9}", "-c0\u{e9}"] {
        let err = fails(&[level, "s1.dat"]);
        assert!(
            err.contains("Not a floating point number"),
            "{level}: {err}"
        );
        let err = fails(&["--exact", level, "s1.dat"]);
        assert!(err.contains("ministat"), "{level}: {err}");
    }
    // The fuzz input itself: fuzzing.rs's tests run it through the
    // target's entry point.
}
