use super::baseline::{baseline_mismatch, baseline_name, Baseline, Provenance};
use super::build::{resolve_commit, rev_dir, stale_worktrees, worktree, CACHED_REVS};
use super::plan::{check_metric_name, Variant};
use super::*;
use crate::compare::{self, Reading};
use crate::machine::Clock;
use crate::ministat::RenderOptions;
use crate::results::MetricInfo;
use std::collections::BTreeMap;
use std::path::Path;

/// The flags as `cargo xtask bench` parses them, the variants' order
/// included.
fn args(extra: &[&str]) -> BenchArgs {
    try_args(extra).unwrap()
}

fn try_args(extra: &[&str]) -> Result<BenchArgs, clap::Error> {
    use clap::{CommandFactory, FromArgMatches, Parser};
    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        b: BenchArgs,
    }
    let mut v = vec!["x"];
    v.extend_from_slice(extra);
    let m = T::command().try_get_matches_from(v)?;
    Ok(T::from_arg_matches(&m)?.b.in_order(&m))
}

fn names(a: &BenchArgs) -> Vec<String> {
    a.variants().unwrap().into_iter().map(|v| v.name).collect()
}

/// The first variant named is the baseline, whichever flag named it; `--base`
/// names another.
#[test]
fn the_baseline_is_the_first_variant_named_or_base() {
    let a = args(&["--rev", "lfence=HEAD", "--variant", "lfence_nops="]);
    assert_eq!(names(&a), ["lfence", "lfence_nops"]);
    let a = args(&[
        "--features",
        "f=exercise-sysexit-always",
        "--rev",
        "r=HEAD",
        "--variant",
        "c=entry=int80",
        "--features",
        "g=",
    ]);
    assert_eq!(names(&a), ["f", "r", "c", "g"]);
    let a = args(&["--variant", "a=", "--rev", "b=HEAD", "--base", "b"]);
    assert_eq!(names(&a), ["b", "a"]);
    // Flags not parsed from a command line keep the order of their kinds.
    let mut a = args(&["--rev", "r=HEAD", "--variant", "c="]);
    a.given.clear();
    assert_eq!(names(&a), ["c", "r"]);
    let e = args(&["--variant", "a=", "--variant", "b=", "--base", "x"])
        .variants()
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--base \"x\"") && e.contains("the variants: a, b"),
        "{e}"
    );
    // A saved baseline is the first set already.
    assert!(try_args(&["--variant", "a=", "--base", "a", "--baseline", "old"]).is_err());
}

/// A misspelled feature fails with the plan, before any variant is built,
/// and names the kernel's features.
#[test]
fn a_variant_s_features_are_checked_before_any_build() {
    let a = args(&[
        "--variant",
        "before=",
        "--features",
        "after=exercise-sysexit-alwys",
    ]);
    let e = a.variants().unwrap_err().to_string();
    assert!(
        e.starts_with("variant after: no kernel feature \"exercise-sysexit-alwys\"")
            && e.contains("exercise-sysexit-always"),
        "{e}"
    );
    let a = args(&["--features", "after=exercise-sysexit-always"]);
    assert_eq!(
        a.variants().unwrap()[0].features,
        ["exercise-sysexit-always"]
    );
}

/// The verdict names the set and the baseline in words, with the direction
/// of the unit: slower or faster, more or fewer instructions, a
/// throughput higher or lower.
#[test]
fn the_verdict_names_the_set_and_its_baseline() {
    let exact = Reading::of(Some(Clock::Model), true);
    let tsc = Reading::of(Some(Clock::Tsc), false);
    let cycles = MetricInfo::per_op("modelled cycles (profile modern)");
    let insns = MetricInfo::per_op("instructions");
    let rate = MetricInfo {
        unit: "records/s".into(),
        measure: abi::report::Measure::Throughput,
        ..MetricInfo::default()
    };
    // Two boots of one figure each, or four around a median.
    let twice = |x: f64| vec![x, x];
    let spread = |x: f64| vec![x, x + 1.0, x - 1.0, x + 0.5];
    let compared = |metric: &str, before, after, reading, info: &MetricInfo| {
        let sets = [("before".to_string(), before), ("after".to_string(), after)];
        compare::compare_metric(metric, &sets, reading, info, &RenderOptions::default())
    };
    // (metric, before's values, after's, their clock, how they read, the
    // verdict line's start; none: no difference, no sentence of direction)
    for (metric, before, after, reading, info, verdict) in [
        (
            "null",
            twice(50.0),
            twice(57.375),
            exact,
            &cycles,
            Some("verdict after: after is 14.75% slower than before\n"),
        ),
        (
            "null",
            twice(100.0),
            twice(98.0),
            exact,
            &insns,
            Some("verdict after: after takes 2.00% fewer instructions than before"),
        ),
        (
            "ebizzy",
            spread(100.0),
            spread(120.0),
            tsc,
            &rate,
            Some("verdict after: after is 20.0% higher than before: differs by"),
        ),
        ("null", twice(5.0), twice(5.0), exact, &insns, None),
    ] {
        let c = compared(metric, before, after, reading, info);
        match verdict {
            Some(v) => assert!(c.text.contains(v), "{}", c.text),
            None => assert!(!c.text.contains("verdict"), "{}", c.text),
        }
    }
    let faster = compared("null", twice(50.0), twice(40.0), exact, &cycles);
    assert_eq!(
        faster.said("after", &faster.verdicts[0].1),
        "after is 20.00% faster than before: differs by -10 modelled cycles (profile modern) in every boot alike (-20.00%, better)"
    );
}

#[test]
fn variants_from_flags() {
    let a = args(&[
        "--variant",
        "a=entry=int80",
        "--variant",
        "b=entry=sysenter",
        "--rev",
        "old=HEAD~1",
    ]);
    let v = a.variants().unwrap();
    assert_eq!(
        v[0],
        Variant {
            name: "a".into(),
            cmdline: "entry=int80".into(),
            features: vec![],
            rev: None
        }
    );
    assert_eq!(v[2].rev.as_deref(), Some("HEAD~1"));
    assert_eq!(args(&[]).variants().unwrap()[0].name, "default");
}

#[test]
fn bad_variant_specs() {
    assert!(args(&["--variant", "noequals"])
        .variants()
        .unwrap_err()
        .to_string()
        .contains("NAME=VALUE"));
    assert!(args(&["--variant", "a b=x"]).variants().is_err());
    assert!(args(&["--variant", "a=x", "--variant", "a=y"])
        .variants()
        .unwrap_err()
        .to_string()
        .contains("two variants"));
    assert!(args(&["--rev", "a="]).variants().is_err());
    assert!(args(&["--confidence", "100"]).variants().is_err());
}

#[test]
fn an_invalid_variant_command_line_fails_before_any_boot() {
    let e = args(&["--variant", "a=entry=sysentr"])
        .variants()
        .unwrap_err()
        .to_string();
    assert!(
        e.starts_with("variant a: its kernel command line is invalid: entry=sysentr"),
        "{e}"
    );
    let e = args(&["--variant", "a=colour=red"]).variants().unwrap_err();
    assert!(e.to_string().contains("unknown key \"colour\""), "{e}");
    // --append reaches every variant and is checked with it.
    assert!(args(&["--append", "batches=0"]).variants().is_err());
    assert!(args(&["--variant", "a=entry=int80,callgate"])
        .variants()
        .is_ok());
}

#[test]
fn an_export_directory_that_cannot_be_made_fails_naming_it() {
    let e = export_dir(Path::new("/proc/no/such/dir")).unwrap_err();
    assert!(
        format!("{e:#}").contains("cannot create the export directory /proc/no/such/dir"),
        "{e:#}"
    );
    let tmp = std::env::temp_dir().join(format!("testbed-out-{}", std::process::id()));
    let (a, da) = export_dir(&tmp).unwrap();
    let (b, db) = export_dir(&tmp).unwrap();
    assert!(da.is_dir() && db.is_dir() && a != b, "{a} {b}");
    let _ = std::fs::remove_dir_all(&tmp);
}

#[test]
fn baseline_names_stay_inside_the_baseline_directory() {
    assert_eq!(baseline_name("/tmp/x").unwrap(), "_tmp_x");
    assert_eq!(baseline_name("../up").unwrap(), "___up");
    assert!(baseline_name("").is_err());
    assert!(baseline_name("  ").is_err());
    assert!(args(&["--save-baseline", ""]).variants().is_err());
    assert!(args(&["--baseline", "/"]).variants().is_err());
}

#[test]
fn metric_names_are_checked_before_the_boots() {
    for ok in [
        "int80.null",
        "macro.sysenter",
        "macro",
        "null",
        "loop",
        "locks.contended.128",
        "locks.contended",
        "ebizzy",
        "smp.pingpong",
        "forktest.cr3",
    ] {
        assert!(check_metric_name(ok).is_ok(), "{ok}");
    }
    for bad in ["int80.nul", "nul", "sysentr.null", ""] {
        // `int80.nul` is a mechanism's group: only the boots can say it
        // is absent; the others name nothing any boot reports.
        if bad == "int80.nul" {
            continue;
        }
        let e = check_metric_name(bad).unwrap_err().to_string();
        assert!(e.contains("not a metric name"), "{bad}: {e}");
    }
    assert!(args(&["--metric", "sysentr.null"]).variants().is_err());
}

fn provenance() -> Provenance {
    Provenance {
        clock: "icount".into(),
        accel: "tcg".into(),
        emulator: "QEMU 7.2.0".into(),
        cpu_model: "qemu32".into(),
        cpu: "QEMU Virtual CPU version 2.5+".into(),
        rev: "abc".into(),
        cmdline: "mode=run prog=bench clock=icount accel=tcg".into(),
        batches: "64".into(),
        batch_size: "4096".into(),
        host: "h".into(),
        ..Provenance::default()
    }
}

#[test]
fn a_baseline_compares_only_like_with_like() {
    let base = provenance();
    assert_eq!(baseline_mismatch(&base, &base), (vec![], vec![]));
    let tsc = Provenance {
        clock: "tsc".into(),
        ..provenance()
    };
    let (refuse, _) = baseline_mismatch(&base, &tsc);
    assert_eq!(refuse, ["clock: baseline \"icount\", this run \"tsc\""]);
    let pentium = Provenance {
        cpu_model: "pentium".into(),
        cpu: "Intel Pentium".into(),
        ..provenance()
    };
    assert_eq!(baseline_mismatch(&base, &pentium).0.len(), 2);
    let modelled = Provenance {
        profile: "modelled, profile p6".into(),
        ..provenance()
    };
    // A model run saved before the clock field named the machine's clock
    // says icount beside its profile: its clock is the model's.
    let refused = baseline_mismatch(&base, &modelled).0;
    assert!(refused[0].starts_with("clock: baseline \"icount\", this run \"model\""));
    assert!(refused[1].starts_with("model profile"));
    let now_modelled = Provenance {
        clock: "model".into(),
        ..modelled.clone()
    };
    assert_eq!(
        baseline_mismatch(&modelled, &now_modelled),
        (vec![], vec![])
    );
    let edited = Provenance {
        rev: "abc-dirty.123".into(),
        dirty: true,
        emulator: "QEMU 8.0.0".into(),
        ..provenance()
    };
    let (refuse, flag) = baseline_mismatch(&base, &edited);
    assert!(refuse.is_empty());
    assert!(flag[0].starts_with("revision: baseline \"abc\", this run \"abc-dirty.123\""));
    assert!(flag[1].starts_with("emulator version"));
    // A baseline that does not say what it was measured on is refused.
    let old = Baseline {
        label: "old".into(),
        provenance: None,
        metrics: BTreeMap::new(),
    };
    let e = check_baseline(&old, &base).unwrap_err().to_string();
    assert!(e.contains("older xtask"), "{e}");
    let b = Baseline {
        provenance: Some(base.clone()),
        ..old
    };
    let e = check_baseline(&b, &tsc).unwrap_err().to_string();
    assert!(e.contains("another machine") && e.contains("clock"), "{e}");
    let old_file = r#"{"label":"x","clock":"icount","metrics":{}}"#;
    assert!(serde_json::from_str::<Baseline>(old_file)
        .unwrap()
        .provenance
        .is_none());
}

#[test]
fn cached_worktrees_are_pruned_least_recently_used_first() {
    let t = |s: u64| std::time::UNIX_EPOCH + std::time::Duration::from_secs(s);
    let cached = vec![
        ("rev-a".to_string(), t(1)),
        ("rev-b".to_string(), t(5)),
        ("rev-c".to_string(), t(3)),
        ("rev-d".to_string(), t(4)),
    ];
    assert_eq!(
        stale_worktrees(cached.clone(), &["rev-a".into()], 1),
        ["rev-d", "rev-c"]
    );
    assert_eq!(stale_worktrees(cached.clone(), &[], 2), ["rev-c", "rev-a"]);
    assert!(stale_worktrees(cached, &[], CACHED_REVS).is_empty());
    let commit = "0123456789abcdef0123456789abcdef01234567";
    assert_eq!(
        rev_dir(Path::new("/t"), commit),
        Path::new("/t/rev-0123456789ab")
    );
}

#[test]
fn a_revision_worktree_is_reused_by_commit() {
    let root = crate::kbuild::one_commit_repo(
        &format!("testbed-wt-{}", std::process::id()),
        "Cargo.toml",
        "# one\n",
    );
    let commit = resolve_commit(&root, "HEAD").unwrap();
    assert!(resolve_commit(&root, "no-such-rev").is_err());
    let tmp = root.join("cache");
    let dir = rev_dir(&tmp, &commit);
    worktree(&root, &dir, &commit).unwrap();
    // What a build leaves in the worktree survives the next call.
    std::fs::write(dir.join("built"), "").unwrap();
    worktree(&root, &dir, &commit).unwrap();
    assert!(dir.join("built").is_file(), "the worktree was made again");
    let _ = std::fs::remove_dir_all(&root);
}

#[test]
fn the_summary_lists_changed_and_unchanged_metrics() {
    let info = MetricInfo::per_op("instructions");
    let exact = Reading::of(Some(Clock::Icount), true);
    let c = |m: &str, b: f64| {
        compare::compare_metric(
            m,
            &[("a".into(), vec![100.0; 3]), ("b".into(), vec![b; 3])],
            exact,
            &info,
            &RenderOptions::default(),
        )
    };
    let compared = [c("null", 102.0), c("getpid", 100.0)];
    let all = ["getpid", "loop", "null"].map(String::from);
    let s = Summary::of(&compared, &all, 0.0);
    assert_eq!(s.changed, ["null"]);
    assert_eq!(s.unchanged, ["getpid", "loop"]);
    assert_eq!(
        s.line(),
        "bench: 3 metrics compared: 1 changed (null); 2 unchanged (getpid, loop)"
    );
    // A 2% change under a 5% threshold is not a change.
    let s = Summary::of(&compared, &all, 5.0);
    assert!(s.changed.is_empty() && s.unchanged.len() == 3);
    assert!(args(&["--threshold=-1"]).variants().is_err());
    assert!(args(&["--fail-on-change"]).fail_on_change);
}

#[test]
fn by_grain_says_where_the_direction_changes() {
    let compared = |metric: &str, v: compare::Verdict| compare::Compared {
        metric: metric.into(),
        info: MetricInfo {
            unit: "instructions".into(),
            ..MetricInfo::default()
        },
        reading: Reading {
            exact: true,
            host_time: false,
            modelled: false,
        },
        sets: Vec::new(),
        verdicts: vec![("new".into(), v)],
        text: String::new(),
    };
    let exact = |percent: f64| compare::Verdict::Exact {
        delta: percent,
        percent,
    };
    let runs = vec![
        (
            2000,
            vec![compared("fork", exact(-10.0)), compared("lock", exact(5.0))],
        ),
        (
            10000,
            vec![
                compared("fork", exact(-4.0)),
                compared("lock", compare::Verdict::Identical),
            ],
        ),
        (
            50000,
            vec![compared("fork", exact(3.0)), compared("lock", exact(2.0))],
        ),
    ];
    let t = report::by_grain(&runs);
    let line = |m: &str| {
        t.lines()
            .find(|l| l.trim_start().starts_with(m))
            .unwrap_or_else(|| panic!("no row {m} in\n{t}"))
            .to_string()
    };
    // Per op: lower is better.
    let fork = line("fork");
    assert!(fork.contains("-10.00% better"), "{fork}");
    assert!(fork.contains("+3.00% worse"), "{fork}");
    assert!(
        fork.ends_with("changes between turn=10000 and turn=50000"),
        "{fork}"
    );
    let lock = line("lock");
    assert!(lock.contains("same"), "{lock}");
    assert!(lock.ends_with("worse where a difference shows"), "{lock}");
}

#[test]
fn turns_need_several_cpus_and_a_valid_grain() {
    let e = bench(args(&["--turns", "2000,10000"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--smp 2"), "{e}");
    let e = bench(args(&["--smp", "2", "--turns", "2000,5"]))
        .unwrap_err()
        .to_string();
    assert!(e.contains("--turn 5"), "{e}");
    use clap::Parser;
    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        b: BenchArgs,
    }
    assert!(T::try_parse_from(["x", "--turn", "2000", "--turns", "2000"]).is_err());
}

/// Under icount and the model every boot gives the same figure: the
/// comparison says the spread is none because the clock is
/// deterministic, and under the model that the figure is only as sure as
/// the cost table; the verdict never calls a modelled difference exact.
#[test]
fn a_deterministic_clock_says_why_its_spread_is_zero() {
    let sets = vec![
        ("before".to_string(), vec![210.0; 3]),
        ("after".to_string(), vec![213.0; 3]),
    ];
    // (the clock, the unit, what the text says, what it must not say)
    for (clock, unit, says, never) in [
        (
            Clock::Model,
            "modelled cycles (profile modern)",
            &[
                "spread: none, because the model is deterministic",
                "fixed table",
                "differs by 3 modelled cycles (profile modern) in every boot alike",
            ][..],
            Some("exactly"),
        ),
        (
            Clock::Icount,
            "instructions",
            &[
                "spread: none, because icount is deterministic",
                "differs by exactly 3 instructions",
            ][..],
            None,
        ),
    ] {
        let c = compare::compare_metric(
            "sysenter.null",
            &sets,
            Reading::of(Some(clock), true),
            &MetricInfo::per_op(unit),
            &RenderOptions::default(),
        );
        assert!(
            says.iter().all(|x| c.text.contains(x)) && never.is_none_or(|x| !c.text.contains(x)),
            "{}",
            c.text
        );
    }
}
