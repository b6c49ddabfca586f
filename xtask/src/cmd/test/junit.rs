//! `cargo xtask test --junit FILE`: the run's tests as JUnit XML, the
//! format CI systems (GitLab, Jenkins, GitHub's test reporters) read: one
//! test suite per section of the run, one test case per test, its wall
//! time, and for a failure or a skip the reason the run printed. Written
//! with `quick-junit` (cargo-nextest's JUnit writer).

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context, Result};
use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::times::{Outcome, Ran};

/// The JUnit report of `ran` (`why`: the reason of each failure or skip,
/// by index).
pub fn report(ran: &[Ran], why: &HashMap<usize, String>) -> Report {
    let mut report = Report::new("i386 testbed");
    let mut suites: Vec<TestSuite> = Vec::new();
    for (k, t) in ran.iter().enumerate() {
        let section = if t.section.is_empty() {
            "tests"
        } else {
            t.section.as_str()
        };
        if suites.last().is_none_or(|s| s.name.as_str() != section) {
            suites.push(TestSuite::new(section));
        }
        let mut status = match t.result {
            Outcome::Pass | Outcome::Listed => TestCaseStatus::success(),
            Outcome::Fail => TestCaseStatus::non_success(NonSuccessKind::Failure),
            Outcome::Skip => TestCaseStatus::skipped(),
        };
        if let Some(w) = why.get(&k) {
            status.set_message(w.as_str());
        }
        let mut case = TestCase::new(t.name.as_str(), status);
        if let Some(s) = t.secs {
            case.set_time(Duration::from_secs_f64(s));
        }
        suites.last_mut().expect("pushed").add_test_case(case);
    }
    report.add_test_suites(suites);
    report
}

/// Writes the report of `ran` to `path`.
pub fn write(path: &Path, ran: &[Ran], why: &HashMap<usize, String>) -> Result<()> {
    let xml = report(ran, why)
        .to_string()
        .context("cannot serialize the JUnit report")?;
    std::fs::write(path, xml).with_context(|| format!("cannot write {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ran(section: &str, name: &str, result: Outcome) -> Ran {
        Ran {
            section: section.into(),
            name: name.into(),
            result,
            secs: Some(1.5),
            load: None,
        }
    }

    #[test]
    fn sections_become_suites_and_failures_carry_their_reason() {
        let runs = [
            ran("boots", "a", Outcome::Pass),
            ran("boots", "b", Outcome::Fail),
            ran("lab", "c", Outcome::Skip),
        ];
        let why = HashMap::from([(1, "it broke <here>".to_string()), (2, "no root".into())]);
        let xml = report(&runs, &why).to_string().unwrap();
        assert!(
            xml.contains(
                r#"<testsuite name="boots" tests="2" disabled="0" errors="0" failures="1""#
            ),
            "{xml}"
        );
        assert!(
            xml.contains(r#"<failure message="it broke &lt;here&gt;""#),
            "{xml}"
        );
        assert!(xml.contains(r#"<skipped message="no root"/>"#), "{xml}");
        assert!(
            xml.contains(r#"<testcase name="a" time="1.500">"#)
                || xml.contains(r#"<testcase name="a" time="1.500"/>"#),
            "{xml}"
        );
    }
}
