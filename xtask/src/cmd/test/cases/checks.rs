//! What many cases ask of a boot: its verdict, a line, a record, the
//! clock it ran under.

use abi::exit::Outcome;
use abi::report::{kind, Measure};

use crate::machine::{BootLog, Ending};
use crate::report::{self, Record};
use crate::results::Results;

/// A run's clock and unit: most test boots count instructions.
pub(super) const ICOUNT: (&str, &str) = ("icount", "instructions");
/// The TSC under TCG, which follows the host's clock.
pub(super) const TCG_TSC: (&str, &str) = ("tsc", "TCG ticks");
/// The TSC under Bochs, which counts instructions.
pub(super) const BOCHS_TSC: (&str, &str) = ("tsc", "Bochs ticks");

/// A results file's run-wide clock and unit.
pub(super) fn clock_is(res: &Results, want: (&str, &str)) -> Result<(), String> {
    if (res.clock.as_str(), res.unit.as_str()) != want {
        return Err(format!("clock {:?}, unit {:?}", res.clock, res.unit));
    }
    Ok(())
}

/// A benchmark with `n` samples, a positive median, and the right measure.
pub(super) fn has_bench(res: &Results, name: &str, n: usize, m: Measure) -> Result<(), String> {
    let b = res
        .bench(name)
        .ok_or_else(|| format!("no benchmark {name}"))?;
    let unit_ok = match m {
        Measure::PerOp => b.unit == res.unit,
        Measure::Throughput => b.unit.ends_with("/s"),
    };
    if b.samples.len() != n || b.n != n || b.median <= 0.0 || b.measure != m || !unit_ok {
        return Err(format!(
            "{name}: {} samples (n={}), median {}, measure {:?}, unit {:?}; expected {n} samples, {:?}",
            b.samples.len(),
            b.n,
            b.median,
            b.measure,
            b.unit,
            m
        ));
    }
    Ok(())
}

pub(super) fn succeeded(log: &BootLog) -> Result<(), String> {
    outcome(log, Outcome::Success)
}

pub(super) fn outcome(log: &BootLog, want: Outcome) -> Result<(), String> {
    if log.ending == Ending::Exited(want) {
        Ok(())
    } else {
        Err(format!("expected {want:?}; {}", log.verdict()))
    }
}

pub(super) fn contains(log: &BootLog, text: &str) -> Result<(), String> {
    if log.serial.contains(text) {
        Ok(())
    } else {
        Err(format!("the serial log does not say {text:?}"))
    }
}

pub(super) fn one<'a>(r: &'a [Record], k: &'a str) -> Result<&'a Record, String> {
    report::of_kind(r, k)
        .next()
        .ok_or_else(|| format!("no {k} record"))
}

pub(super) fn end(r: &[Record], status: &str) -> Result<(), String> {
    match one(r, kind::END)?.get("status") {
        Some(s) if s == status => Ok(()),
        other => Err(format!("end status {other:?}, expected {status}")),
    }
}

pub(super) fn mech(r: &[Record], name: &str, status: &str) -> Result<(), String> {
    let m = report::of_kind(r, kind::MECH)
        .find(|m| m.get("name") == Some(name))
        .ok_or_else(|| format!("no mech record for {name}"))?;
    match m.get("status") {
        Some(s) if s == status => Ok(()),
        other => Err(format!("{name} is {other:?}, expected {status}")),
    }
}

/// Every kernel test passed or was skipped, no user check failed, at least
/// `at_least` tests passed (a skip is not a pass), and the boot ended well.
pub(super) fn all_tests_pass(log: &BootLog, r: &[Record], at_least: usize) -> Result<(), String> {
    let failed: Vec<_> = report::of_kind(r, kind::TEST)
        .filter(|t| !matches!(t.get("result"), Some("pass") | Some("skip")))
        .map(|t| {
            format!(
                "{} ({})",
                t.get("name").unwrap_or("?"),
                t.get("detail").unwrap_or("")
            )
        })
        .collect();
    if !failed.is_empty() {
        return Err(format!("kernel tests failed: {}", failed.join("; ")));
    }
    let checks_failed: Vec<_> = report::of_kind(r, kind::CHECK)
        .filter(|c| c.get("result") == Some("fail"))
        .map(|c| {
            format!(
                "{}: {}",
                c.get("mech").unwrap_or("?"),
                c.get("name").unwrap_or("?")
            )
        })
        .collect();
    if !checks_failed.is_empty() {
        return Err(format!("user checks failed: {}", checks_failed.join("; ")));
    }
    // A boot that did not end well (hung, crashed) says so before its
    // count, which it cut short.
    succeeded(log)?;
    ktap_agrees(log, r)?;
    // A skipped test ran nothing: only passes count toward `at_least`.
    let result = |want: &str| {
        report::of_kind(r, kind::TEST)
            .filter(|t| t.get("result") == Some(want))
            .count()
    };
    let (passed, skipped) = (result("pass"), result("skip"));
    if passed < at_least {
        return Err(format!(
            "only {passed} tests passed ({skipped} skipped), expected at least {at_least} to pass"
        ));
    }
    end(r, "success")
}

/// The boot's KTAP lines tell what its `test` records tell: the same
/// tests, in the same order, with the same results, and a plan that
/// counts them.
pub(super) fn ktap_agrees(log: &BootLog, r: &[Record]) -> Result<(), String> {
    let run = crate::ktap::parse(&log.serial)
        .map_err(|e| format!("{e:#}"))?
        .ok_or("the test boot printed no KTAP (no `KTAP version 1` line)")?;
    let tests: Vec<_> = report::of_kind(r, kind::TEST).collect();
    if run.plan != Some(tests.len() as u32) {
        return Err(format!(
            "KTAP's plan is {:?}, the kernel's records count {} tests",
            run.plan.map(|n| format!("1..{n}")),
            tests.len()
        ));
    }
    for (c, t) in run.cases.iter().zip(&tests) {
        c.is_record(t.get("name"), t.get("result"))?;
    }
    Ok(())
}

/// The kernel test whose name starts with `name` ran and passed (a skip
/// or a missing record is a failure).
pub(super) fn test_passed(r: &[Record], name: &str) -> Result<(), String> {
    test_is(r, name, "pass")
}

/// The kernel test whose name starts with `name` ran with result `want`
/// (`pass`, `skip`, `fail`).
pub(super) fn test_is(r: &[Record], name: &str, want: &str) -> Result<(), String> {
    let t = report::of_kind(r, kind::TEST)
        .find(|t| t.get("name").is_some_and(|n| n.starts_with(name)))
        .ok_or_else(|| format!("no test {name:?} ran"))?;
    match t.get("result") {
        Some(got) if got == want => Ok(()),
        other => Err(format!(
            "test {name:?}: result {other:?}, expected {want} ({})",
            t.get("detail").unwrap_or("")
        )),
    }
}

/// A check record of `mech` whose name contains `name` ran and passed (a
/// user program's own check, e.g. `locks`'s): the book names the checks
/// its sentences rest on, and a check that stopped running fails here
/// where a count of failures would not notice.
pub(super) fn check_passed(r: &[Record], mech: &str, name: &str) -> Result<(), String> {
    let mut found = report::of_kind(r, kind::CHECK)
        .filter(|c| c.get("mech") == Some(mech) && c.get("name").is_some_and(|n| n.contains(name)))
        .peekable();
    if found.peek().is_none() {
        return Err(format!("no {mech} check {name:?} ran"));
    }
    match found.find(|c| c.get("result") != Some("pass")) {
        None => Ok(()),
        Some(c) => Err(format!(
            "{mech} check {:?}: result {:?}, expected pass",
            c.get("name").unwrap_or("?"),
            c.get("result")
        )),
    }
}
