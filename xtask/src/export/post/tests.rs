use super::*;
use crate::results::bench::{
    ChangedFunction, FixedCost, FixedInsn, MetricEntry, Provenance, Summary,
};

/// A bench file as `bench` writes one: `before` against `after` (an
/// `lfence` after `pushfl` in `sysenter_full`), 3 boots each, under
/// `clock` (`icount`, or `model` with profile modern), one metric
/// changed and two not.
fn file(clock: Clock) -> BenchFile {
    let model = clock == Clock::Model;
    let unit = if model {
        "modelled cycles (profile modern)"
    } else {
        "instructions"
    };
    let (b, a) = if model { (210.0, 214.0) } else { (46.0, 47.0) };
    let prov = |rev: &str, dirty: bool| Provenance {
        clock: clock.key().into(),
        accel: "tcg".into(),
        emulator: "QEMU 7.2.22".into(),
        cpu_model: "qemu32".into(),
        rev: rev.into(),
        dirty,
        diff: if dirty {
            "aa9e898de534".into()
        } else {
            String::new()
        },
        host_cpu: "AMD EPYC".into(),
        profile: if model {
            "modelled, profile modern".into()
        } else {
            String::new()
        },
        ..Provenance::default()
    };
    let mut f = BenchFile {
        schema: crate::results::bench::BENCH_SCHEMA,
        kind: crate::results::bench::BENCH_KIND.into(),
        boots: 3,
        clock: clock.key().into(),
        profile: model.then(|| "modern".to_string()),
        accel: "tcg".into(),
        baseline: "before".into(),
        confidence: 95.0,
        sets: vec![
            SetInfo {
                name: "before".into(),
                how: "rev: HEAD".into(),
                provenance: prov("79be713d8be3", false),
            },
            SetInfo {
                name: "after".into(),
                how: "as built".into(),
                provenance: prov("79be713d8be3-dirty.aa9e898de534", true),
            },
        ],
        summary: Summary {
            changed: vec!["sysenter.null".into()],
            unchanged: vec!["int80.null".into(), "callgate.null".into()],
            threshold: 0.0,
        },
        command: "cargo xtask bench -n 3 --rev before=79be713d8be3 --variant after= --post".into(),
        ..BenchFile::default()
    };
    for (set, v) in [("before", b), ("after", a)] {
        let m = f.values.entry(set.into()).or_default();
        m.insert("sysenter.null".into(), vec![v; 3]);
        m.insert("int80.null".into(), vec![24.0; 3]);
        m.insert("callgate.null".into(), vec![26.0; 3]);
    }
    f.metrics.insert(
        "sysenter.null".into(),
        MetricEntry {
            unit: unit.into(),
            reads: format!("{unit} per operation, lower is better"),
            changed: true,
            verdicts: [(
                "after".to_string(),
                "after takes 2.17% more instructions than before".to_string(),
            )]
            .into(),
            ..MetricEntry::default()
        },
    );
    f.code = vec![CodeDiff {
        set: "after".into(),
        base: "before".into(),
        note: String::new(),
        functions: vec![ChangedFunction {
            binary: "kernel".into(),
            name: "sysenter_full".into(),
            added: vec!["lfence".into()],
            removed: vec![],
            fixed: vec![FixedInsn {
                side: "+".into(),
                text: "lfence".into(),
                key: "lfence".into(),
            }],
            constants_only: false,
        }],
    }];
    if model {
        f.fixed_costs = vec![FixedCost {
            profile: "modern".into(),
            key: "lfence".into(),
            cycles: 3,
            source: "AGNER-T Skylake: LFENCE, reciprocal throughput 4".into(),
        }];
    }
    f
}

/// The post names the environment in one line, gives ministat's block for
/// the changed metric and the table's before, after, delta, delta % and
/// unit, sums up the unchanged in one line and ends with the command.
#[test]
fn a_post_holds_environment_ministat_table_and_command() {
    let f = file(Clock::Icount);
    let p = post(&f, Form::Text);
    let first = p.lines().next().unwrap();
    assert_eq!(
        first,
        "i386 testbed: QEMU 7.2.22 TCG, host CPU AMD EPYC, guest cpu=qemu32, clock=icount (exact instruction counts, not cycles), before=79be713d8be3 after=79be713d8be3-dirty.aa9e898de534, 3 boots per side"
    );
    for says in [
        "after against before: 1 of 3 metrics changed\n",
        "x   3            46            46            46            46             0\n",
        "Difference at 95.0% confidence\n\t1 +/- 0\n",
        "The spread is 0 because icount is deterministic",
    ] {
        assert!(p.contains(says), "{says:?} in {p}");
    }
    let table: Vec<&str> = p
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("metric "))
        .take(2)
        .collect();
    assert_eq!(
        table,
        [
            "  metric         unit          before  after  delta  delta %",
            "  sysenter.null  instructions      46     47     +1   +2.17%",
        ]
    );
    assert!(
        p.contains(
            "Unchanged (2, the same in every boot of every set): int80.null, callgate.null.\n"
        ),
        "{p}"
    );
    assert!(p.contains("  kernel sysenter_full: +lfence\n"), "{p}");
    // Under icount the instructions' costs are not the figures' subject.
    assert!(!p.contains("What the modelled figures rest on"), "{p}");
    assert!(p.contains(
        "Reproduce: cargo xtask bench -n 3 --rev before=79be713d8be3 --variant after= --post\n"
    ));
    assert!(p.contains("after was built from uncommitted changes (diff aa9e898de534)"));
}

/// Under the model the post names the profile as the clock's, says the
/// zero spread comes from a deterministic model, and lists the
/// instructions of the changed code the model prices from its table, with
/// each entry's value and source.
#[test]
fn a_modelled_post_says_what_its_figures_rest_on() {
    let f = file(Clock::Model);
    let p = post(&f, Form::Text);
    assert!(
        p.lines().next().unwrap().contains(
            "clock=model (modelled cycles of profile modern; the guest counted instructions)"
        ),
        "{p}"
    );
    assert!(!p.contains("clock=icount"), "{p}");
    assert!(
        p.contains("The spread is 0 because the model is deterministic")
            && p.contains("not that the figure is right"),
        "{p}"
    );
    for says in [
        "  sysenter.null  modelled cycles (profile modern)     210    214     +4   +1.90%",
        "What the modelled figures rest on: the instructions of that code the model prices from profile modern's fixed table",
        "  + lfence in sysenter_full: profile key lfence\n",
        "  lfence = 3: AGNER-T Skylake: LFENCE, reciprocal throughput 4. On a real CPU, it waits until every earlier instruction has completed",
    ] {
        assert!(p.contains(says), "{says:?} in {p}");
    }
}

/// The Markdown form: the same figures as a pipe table, ministat's block
/// and the command in fences.
#[test]
fn a_markdown_post_fences_its_blocks() {
    let p = post(&file(Clock::Model), Form::Markdown);
    assert!(p.starts_with("**i386 testbed: QEMU 7.2.22 TCG"), "{p}");
    for says in [
        "| metric | unit | before | after | delta | delta % |\n|---|---|---:|---:|---:|---:|\n| sysenter.null | modelled cycles (profile modern) | 210 | 214 | +4 | +1.90% |\n",
        "```text\nx before\n+ after\n",
        "- + `lfence` in `sysenter_full`: profile key `lfence`\n",
        "```sh\ncargo xtask bench -n 3 --rev before=79be713d8be3 --variant after= --post\n```\n",
    ] {
        assert!(p.contains(says), "{says:?} in {p}");
    }
}

/// A bench file read back is the one written: every field by name.
#[test]
fn a_bench_file_reads_back_as_written() {
    let f = file(Clock::Model);
    let text = serde_json::to_string_pretty(&f).unwrap();
    assert_eq!(BenchFile::parse(&text).unwrap(), f);
    let e = BenchFile::parse(&text[..text.len() / 2])
        .unwrap_err()
        .to_string();
    assert!(e.contains("truncated"), "{e}");
    let e = BenchFile::parse(&text.replace("\"kind\": \"bench\"", "\"kind\": \"baseline\""))
        .unwrap_err()
        .to_string();
    assert!(e.contains("not \"bench\""), "{e}");
}
