//! Entry points for the fuzz targets (`fuzz/fuzz_targets/*.rs`): each runs
//! one reader of untrusted text the way a command runs it, on bytes instead
//! of files, and says whether the input was read (the targets ignore it; the
//! tests below hold every seed to it). A reader may refuse its input (an
//! error is the right answer to most inputs); what a target catches is a
//! panic, a hang or an allocation without bound.
//!
//! Inputs that carry more than one file (a log and its model file, several
//! results files, ministat's options and data) separate them with a NUL
//! byte, which none of these texts holds.

use std::ffi::OsString;
use std::io;
use std::path::Path;

use crate::cmd::bench::baseline::{self, Provenance};
use crate::cmd::{import, table};
use crate::{lava, model, report, results};

/// How the names of seeds that a reader must refuse start (see the tests).
pub const HOSTILE_SEED: &str = "hostile-";

/// The NUL-separated parts of a fuzz input, each as text (lossy, as
/// `import` reads a log). At most `max` parts; the last takes the rest.
fn parts(data: &[u8], max: usize) -> Vec<String> {
    data.splitn(max, |&b| b == 0)
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect()
}

/// What a run's results are turned into on the way out: the table, the
/// model's table, the JSON, the metrics.
fn render(r: &results::Results) {
    let _ = r.table();
    let _ = model::table(r);
    let _ = r.to_json();
    let _ = r.metrics();
    let _ = r.metric_info();
}

/// The serial record parser: the kernel's check of a user record body
/// (`abi::report::check_user_record`), the unescaping of values, and
/// xtask's reading of a log's records into a run's results.
pub fn records(data: &[u8]) -> bool {
    let _ = abi::report::check_user_record(data);
    let text = String::from_utf8_lossy(data);
    let _ = abi::report::unescape(&text, &mut |_| {});
    let Ok(records) = report::parse_log(&text) else {
        return false;
    };
    let _ = model::spans(&records);
    match results::Results::from_records(&records, "fuzz", results::IMPORT_SOURCE) {
        Ok(r) => {
            render(&r);
            true
        }
        Err(_) => false,
    }
}

/// `cargo xtask import LOG [--model FILE]`: the log, then (after a NUL)
/// the model plugin's file when there is one. A LAVA job's log is read as
/// `import` reads one, with the part after the NUL as `--lava-results`.
pub fn import(data: &[u8]) -> bool {
    let p = parts(data, 2);
    let (log, second) = (&p[0], p.get(1).map(String::as_str));
    if lava::log::is_lava_log(log) {
        let lab = lava::Lab {
            device: "fuzz".into(),
            device_type: "qemu".into(),
            job: "1".into(),
            lab: String::new(),
        };
        let results = second.map(|t| (Path::new("results.yaml"), t));
        return match import::from_lava(log, results, lab, "fuzz") {
            Ok(r) => {
                render(&r);
                true
            }
            Err(_) => false,
        };
    }
    if let Some(cases) = lava::log::results_file(log) {
        let _ = lava::log::verdict(&cases);
        let _ = lava::log::figures(&cases);
        return false;
    }
    let model = second.map(|t| (Path::new("model.txt"), t));
    match import::from_serial(log, Path::new("serial.log"), model, "fuzz") {
        Ok((r, _)) => {
            render(&r);
            true
        }
        Err(_) => false,
    }
}

/// The model plugin's file reader (`model::parse_file`), and its figures
/// merged into the boot whose serial log is `log` (a real model boot's, so
/// that a file close to a real one reaches the arithmetic).
pub fn model_file(data: &[u8], log: &str) -> bool {
    let text = String::from_utf8_lossy(data);
    let Ok(file) = model::parse_file(&text) else {
        return false;
    };
    let _ = model::merge_log(log, &file);
    let Ok(mut r) = results::Results::from_log(log, "fuzz", results::IMPORT_SOURCE) else {
        return false;
    };
    if model::apply(&mut r, log, &file).is_err() {
        return false;
    }
    render(&r);
    true
}

/// The results JSON readers: `cargo xtask table` on up to four files
/// (results files and bench exports, NUL-separated), and each part read as
/// a saved baseline of `bench --baseline` and, as a bench export, made
/// into its post.
pub fn results_json(data: &[u8]) -> bool {
    let texts: Vec<(String, String)> = parts(data, 4)
        .into_iter()
        .enumerate()
        .map(|(i, t)| (format!("file{i}.json"), t))
        .collect();
    let mut read = false;
    for (_, t) in &texts {
        let _ = baseline::read_and_check(t, Some(&Provenance::default()));
        read |= baseline::read_and_check(t, None).is_ok();
        if let Ok(r) = results::Results::parse(t) {
            render(&r);
        }
        // A bench export's post, in both forms.
        if let Ok(f) = results::bench::BenchFile::parse(t) {
            read = true;
            let _ = crate::export::post::post(&f, crate::export::post::Form::Text);
            let _ = crate::export::post::post(&f, crate::export::post::Form::Markdown);
        }
    }
    if let Ok((rs, exports)) = table::from_texts(&texts, true) {
        read = true;
        if !rs.is_empty() {
            let _ = table::speedup_rows(&rs, None, &[]);
        }
        let _ = table::export_rows(&exports, None, &[]);
    }
    read
}

/// `cargo xtask ministat`: the first line holds the words after `ministat`
/// (options and file names, split at white space); the rest, split at NUL
/// bytes, is standard input and then the files named `1`, `2`, ... (any
/// other name does not exist).
pub fn ministat(data: &[u8]) -> bool {
    let (head, rest) = match data.iter().position(|&b| b == b'\n') {
        Some(at) => (&data[..at], &data[at + 1..]),
        None => (data, &[][..]),
    };
    let words: Vec<OsString> = String::from_utf8_lossy(head)
        .split_whitespace()
        .map(OsString::from)
        .collect();
    let inputs: Vec<Vec<u8>> = rest.split(|&b| b == 0).map(<[u8]>::to_vec).collect();
    let mut open = |name: Option<&std::ffi::OsStr>| -> io::Result<Box<dyn io::BufRead>> {
        let i = match name {
            None => 0,
            Some(n) => n
                .to_str()
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&i| i > 0 && i < inputs.len())
                .ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))?,
        };
        Ok(Box::new(io::Cursor::new(inputs[i].clone())))
    };
    crate::ministat::execute_words(words, 74, &mut open).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `ministat` target's crash (`fuzz/artifacts/ministat/crash-2b60a370...`),
    /// a confidence level holding a multi-byte character: refused, no panic.
    #[test]
    fn the_ministat_crash_input_is_refused() {
        let mut input = b"--exact -c\xfe\xff\xff\xff\xff\xff\xff\xff 1 2\n\x001.356e-06\n1.242e-06\n1.370e-06\n\x000\n-0\n1\n".to_vec();
        input.extend_from_slice(b"-1\n");
        assert!(!ministat(&input));
    }

    /// Runs `data` through `target` (the model file's target with the
    /// seeds' serial log).
    fn run(target: &str, data: &[u8]) -> bool {
        let root = crate::kbuild::root().join("fuzz/seeds");
        match target {
            "records" => records(data),
            "import" => import(data),
            "model_file" => {
                let log = std::fs::read_to_string(root.join("model_file.serial.log")).unwrap();
                model_file(data, &log)
            }
            "results_json" => results_json(data),
            "ministat" => ministat(data),
            _ => panic!("no target {target}"),
        }
    }

    /// What a seed's name says it must be: a seed named `hostile-*` is an
    /// input its reader must refuse (beyond a bound, or a figure that
    /// cannot be), every other seed one it reads.
    fn refused_by_design(seed: &std::path::Path) -> bool {
        seed.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with(HOSTILE_SEED))
    }

    /// Every seed is read by its target (the seeds stay real inputs as the
    /// formats change: a seed that is refused fuzzes only the refusal), and
    /// every hostile seed refused, without a panic.
    #[test]
    fn every_seed_is_read_by_its_target() {
        let root = crate::kbuild::root().join("fuzz/seeds");
        for (t, _) in crate::cmd::fuzz::TARGETS {
            for e in std::fs::read_dir(root.join(t)).unwrap() {
                let p = e.unwrap().path();
                let data = std::fs::read(&p).unwrap();
                if refused_by_design(&p) {
                    assert!(!run(t, &data), "{t}: hostile seed {} is read", p.display());
                } else {
                    assert!(run(t, &data), "{t}: seed {} is refused", p.display());
                }
            }
        }
    }

    /// The hostile seeds of `records`, `model_file` and `ministat`: each
    /// refused for what it was made to hold, not for something else.
    #[test]
    fn hostile_seeds_say_why() {
        let root = crate::kbuild::root().join("fuzz/seeds");
        let text = |p: &str| std::fs::read_to_string(root.join(p)).unwrap();
        for (seed, says) in [
            (
                "records/hostile-negative-rate.log",
                "line 70: program bench's macro record of int80: ops_per_s=-1",
            ),
            (
                "records/hostile-zero-frequency.log",
                "line 15: program bench's clock record: tsc_hz=0",
            ),
        ] {
            let e = results::Results::from_log(&text(seed), "x", "x").unwrap_err();
            assert!(e.to_string().starts_with(says), "{seed}: {e}");
        }
        let e = model::parse_file(&text("model_file/hostile-ncpus-zero.model")).unwrap_err();
        assert!(e.to_string().contains("ncpus=0"), "{e}");
        for (seed, says) in [
            (
                "ministat/hostile-nan-second-file",
                "ministat: Invalid data on line 2 in 2: nan is not a finite number",
            ),
            (
                "ministat/hostile-huge-values",
                "ministat: Invalid data on line 3 in 2: 1e308 is beyond 1e+100",
            ),
        ] {
            let data = std::fs::read(root.join(seed)).unwrap();
            let (head, rest) = data.split_at(data.iter().position(|&b| b == b'\n').unwrap());
            let words = String::from_utf8_lossy(head)
                .split_whitespace()
                .map(OsString::from)
                .collect();
            let inputs: Vec<Vec<u8>> = rest[1..].split(|&b| b == 0).map(<[u8]>::to_vec).collect();
            let mut open = |name: Option<&std::ffi::OsStr>| -> io::Result<Box<dyn io::BufRead>> {
                let i = name.map_or(0, |n| n.to_str().unwrap().parse().unwrap());
                Ok(Box::new(io::Cursor::new(inputs[i].clone())))
            };
            let f = crate::ministat::execute_words(words, 74, &mut open).unwrap_err();
            assert!(f.stderr.starts_with(says), "{seed}: {}", f.stderr);
        }
    }

    /// The hostile seeds of `import`: each refused with the message that
    /// names its bound or its bad figure.
    #[test]
    fn hostile_import_seeds_say_why() {
        let root = crate::kbuild::root().join("fuzz/seeds/import");
        for (seed, says) in [
            (
                "hostile-deep-nesting.log",
                "line 2: mappings and sequences nested deeper than the YAML reader takes",
            ),
            (
                "hostile-long-line.log",
                "line 2: 131073 bytes on one line, more than any LAVA log message",
            ),
            (
                "hostile-lava-results-nan.log",
                "the LAVA results file results.yaml: line 4: test case int80_null of suite testbed: measurement \"NaN\" is not a finite number",
            ),
            (
                "hostile-model-ncpus-zero.log",
                "model.txt is not a finished model plugin file: the model file: line 1: ncpus=0: the model runs 1 to 16 CPUs",
            ),
        ] {
            let data = std::fs::read(root.join(seed)).unwrap();
            let p = parts(&data, 2);
            let (log, second) = (&p[0], p.get(1).map(String::as_str));
            let e = if lava::log::is_lava_log(log) {
                let results = second.map(|t| (Path::new("results.yaml"), t));
                import::from_lava(log, results, lava::Lab::default(), "x").map(|_| ())
            } else {
                let model = second.map(|t| (Path::new("model.txt"), t));
                import::from_serial(log, Path::new("serial.log"), model, "x").map(|_| ())
            };
            let e = format!("{:#}", e.unwrap_err());
            assert!(e.starts_with(says), "{seed}: {e}");
        }
    }
}
