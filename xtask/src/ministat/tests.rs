//! The command end to end: `--classic` against Debian's ministat on the
//! fixture cases, the default formulas on the same inputs, and the errors.

use std::ffi::OsStr;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

use clap::Parser;

use super::{execute, Args, Error};

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    args: Args,
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/ministat")
}

/// Runs the command as `ministat ARGS` from the fixture folder, standard
/// input read from `stdin` (a fixture file), stdout not a terminal.
fn run(args: &[&str], stdin: Option<&str>) -> Result<String, Error> {
    let cli = Cli::try_parse_from(std::iter::once("ministat").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"));
    let a = cli.args;
    let dir = fixtures();
    let mut open = |name: Option<&OsStr>| -> io::Result<Box<dyn BufRead>> {
        let path = match name {
            Some(n) => dir.join(n),
            None => dir.join(stdin.expect("this case reads standard input")),
        };
        Ok(Box::new(io::BufReader::new(std::fs::File::open(path)?)))
    };
    let width = a.width.map_or(74, |w| w as usize);
    execute(&a, width, &mut open)
}

/// One line of cases.txt: name, arguments, file for standard input.
struct Case {
    name: String,
    args: Vec<String>,
    stdin: Option<String>,
}

fn cases() -> Vec<Case> {
    let text = std::fs::read_to_string(fixtures().join("cases.txt")).unwrap();
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

fn run_case(case: &Case, extra: &[&str]) -> String {
    let args: Vec<&str> = extra
        .iter()
        .copied()
        .chain(case.args.iter().map(String::as_str))
        .collect();
    run(&args, case.stdin.as_deref()).unwrap_or_else(|e| panic!("{}: {e}", case.name))
}

/// Every fixture, byte for byte as Debian's ministat printed it.
#[test]
fn classic_matches_debian_ministat() {
    let cases = cases();
    assert!(cases.len() >= 30, "cases.txt lost its cases");
    let mut failed = Vec::new();
    for case in &cases {
        let expect = std::fs::read_to_string(fixtures().join(format!("{}.out", case.name)))
            .unwrap_or_else(|e| panic!("{}.out: {e} (run regen.sh)", case.name));
        let got = run_case(case, &["--classic"]);
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
fn default_median_variance_and_percentage() {
    // even.dat is 4 1 3 2 8 6: sorted 1 2 3 4 6 8, median (3 + 4) / 2.
    let text = run(&["-n", "even.dat", "odd.dat"], None).unwrap();
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
    let text = run(&["-A", "huge1.dat", "huge2.dat"], None).unwrap();
    assert!(!text.contains("nan"), "{text}");

    // The percentage interval: fast.dat vs slow.dat, worked by hand:
    //   n 7 and 5, means 10.092857 and 11.1, variances 0.017024 and 0.025;
    //   t(95 %, 10) = 2.228139; relative term
    //   pooled s = sqrt((6*0.017024 + 4*0.025) / 10) = 0.142177,
    //   interval = t * s * sqrt(1/7 + 1/5) = 0.185493;
    //   (5-1)*0.025 + (7-1)*0.017024*(11.1/10.092857)^2 = 0.223545;
    //   * 12 / (35 * 10) = 0.0076644; sqrt * t * 100 / 10.092857 = 1.93271 %.
    let text = run(&["-A", "fast.dat", "slow.dat"], None).unwrap();
    let expect = "\
Difference at 95.0% confidence
\t1.00714 +/- 0.185493
\t9.97877% +/- 1.93271%
\t(Student's t, pooled s = 0.142177)
";
    assert!(text.ends_with(expect), "{text}");
}

#[test]
fn default_plot_keeps_every_point() {
    // differ: fast.dat has 10.1 twice, which Debian's plot drops because
    // slow.dat, drawn last, has no stack.
    let text = run(&["fast.dat", "slow.dat"], None).unwrap();
    let x_count: usize = text
        .lines()
        .filter(|l| l.starts_with('|') && !l.contains('_'))
        .map(|l| l.matches('x').count())
        .sum();
    assert_eq!(x_count, 7, "{text}");
}

#[test]
fn any_confidence_level() {
    let text = run(&["-A", "-c", "97.5", "fast.dat", "slow.dat"], None).unwrap();
    assert!(text.contains("Difference at 97.5% confidence"), "{text}");
    let text = run(&["-A", "-c", "99.95", "fast.dat", "slow.dat"], None).unwrap();
    assert!(text.contains("at 99.95% confidence"), "{text}");
    for bad in ["0", "100", "x", "-5"] {
        assert!(
            Cli::try_parse_from(["ministat", "-c", bad]).is_err(),
            "{bad}"
        );
    }
}

#[test]
fn errors_name_the_file() {
    let e = run(&["fast.dat", "missing.dat"], None).unwrap_err();
    assert!(
        e.to_string().starts_with("Cannot open missing.dat: "),
        "{e}"
    );
    // Column 2 of fast.dat is empty: no points.
    let e = run(&["-C", "2", "fast.dat"], None).unwrap_err();
    assert_eq!(
        e.to_string(),
        "Dataset fast.dat must contain at least 3 data points"
    );
    // Column 1 of cols.csv read with blanks as delimiters is "h0,105,110".
    let e = run(&["cols.csv"], None).unwrap_err();
    assert_eq!(e.to_string(), "Invalid data on line 2 in cols.csv");
    let e = run(&["a.dat"; 8], None).unwrap_err();
    assert!(matches!(e, Error::TooManySets { count: 8, max: 7 }), "{e}");
    assert!(Cli::try_parse_from(["ministat", "-w", "1"]).is_err());
    assert!(Cli::try_parse_from(["ministat", "-C", "0"]).is_err());
    assert!(Cli::try_parse_from(["ministat", "-d", ""]).is_err());
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
