use super::*;
use abi::report::Measure;
use anyhow::{Context, Result};
use std::path::Path;
use std::time::Duration;
use std::time::UNIX_EPOCH;

const LOG: &str = "\
i386 testbed kernel abc
@@tb1 boot loader=qemu protocol=mb1 cmdline=mode%3Drun%20clock%3Dicount%20accel%3Dtcg mem_kib=1 modules=3 rev=abc
@@tb1 cpu vendor=GenuineIntel brand=QEMU%20Virtual%20CPU family=6 model=6 stepping=3
@@tb1 mech name=int80 status=ok reason=%00
@@tb1 mech name=syscall status=unavailable reason=not%20AMD
@@tb1 clock clock=icount fence=lfence+rdtsc tsc_hz=1000000000 timer_overhead=28 batches=2 batch_size=64 interrupts=masked perf=n/a
@@tb1 bench name=int80.floor mech=int80 path=floor call=floor n=2 min=4.0000 p25=4.0000 median=4.0000 mean=4.0000 p75=4.0000 max=4.0000 sd=0.0000 outliers=0
@@tb1 samples name=int80.floor batch_size=64 values=256,256
@@tb1 bench name=int80.null mech=int80 path=full call=null n=2 min=24.0000 p25=24.0000 median=24.0000 mean=24.0000 p75=24.0000 max=24.0000 sd=0.0000 outliers=0
@@tb1 samples name=int80.null batch_size=64 values=1536,1536
@@tb1 macro mech=int80 ops=16 batches=2 ticks_per_op=1700.0 ops_per_s=588235.3 syscalls_per_op=4
@@tb1 end status=success
";

/// The error reading `log` (a boot's, through `source`) ends in.
fn refused(log: &str, source: &str) -> String {
    Results::from_log(log, "x", source).unwrap_err().to_string()
}

/// `log` (read through `source`) is refused with an error that says `says`.
fn refused_saying(log: &str, source: &str, says: &str) {
    let e = refused(log, source);
    assert!(e.contains(says), "{e}");
}

#[test]
fn gathers_a_boot() {
    let r = Results::from_log(LOG, "default", "qemu").unwrap();
    assert_eq!(
        (r.clock.as_str(), r.unit.as_str(), r.accel.as_str()),
        ("icount", "instructions", "tcg")
    );
    assert_eq!(r.tsc_hz, 1_000_000_000);
    assert_eq!(r.benches.len(), 2);
    let null = r.bench("int80.null").unwrap();
    assert_eq!(null.samples, [1536, 1536]);
    assert_eq!(null.batch_size, 64);
    assert_eq!(r.mechanisms[1].status, "unavailable");
    let t = r.table();
    for says in [
        "int 0x80   null          24.00      24.00       6.00x         1.00",
        "syscall    unavailable: not AMD",
        "macro mix  int 0x80",
    ] {
        assert!(t.contains(says), "{says:?} in {t}");
    }
    // Units named per column; "vs int 0x80" is time over time in the
    // micro table and in the macro lines alike.
    assert!(
        t.contains("insns      insns  time ratio   time ratio"),
        "{t}"
    );
    assert!(t.contains("1.00 vs int 0x80"), "{t}");
}

#[test]
fn perf_records_in_order() {
    let log = LOG.replace(
        "@@tb1 end",
        "@@tb1 perf status=on reason=pmc%3Dpretend\n\
         @@tb1 perf status=off reason=RDPMC%20(ECX%200x40000000)%20raised%20#GP%20in%20ring%203\n\
         @@tb1 end",
    );
    let r = Results::from_log(&log, "default", "qemu").unwrap();
    let perf: Vec<_> = r
        .perf
        .iter()
        .map(|p| (p.status.as_str(), p.reason.as_str()))
        .collect();
    assert_eq!(
        perf,
        [
            ("on", "pmc=pretend"),
            ("off", "RDPMC (ECX 0x40000000) raised #GP in ring 3")
        ]
    );
    assert!(Results::from_log(LOG, "default", "qemu")
        .unwrap()
        .perf
        .is_empty());
}

/// Two CPUs' ebizzy with each CPU's share: `{found}` records per CPU.
fn shared_log(found: &str) -> String {
    LOCKS_LOG.replace(
        "@@tb1 end status=success",
        &format!("@@tb1 share prog=locks pid=1 name=ebizzy.128 work=records per_cpu={found}\n@@tb1 task prog=locks pid=1 how=exit code=0 last_pid=1\n@@tb1 end status=success"),
    )
}

#[test]
fn a_figure_one_cpu_did_alone_is_flagged_everywhere() {
    // CPU 1 found nothing: 0 is a figure, and the figure is CPU 0's.
    let r = Results::from_log(&shared_log("2000,0"), "x", "qemu").unwrap();
    let s = r.bench("ebizzy.128").unwrap().share.clone().unwrap();
    assert_eq!((s.per_cpu.as_slice(), s.one_cpu), (&[2000, 0][..], Some(0)));
    let t = r.table();
    assert!(
        t.contains(
            "records per CPU 100/0% [one CPU: CPU 0 did 2000 of 2000 records: not a 2-CPU figure]"
        ),
        "{t}"
    );
    let json = r.to_json().unwrap();
    assert!(json.contains("\"one_cpu\": 0"), "{json}");
    let back: Results = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    // The exports read the flag from the metric's info.
    let info = &r.metric_info()["ebizzy.128"];
    assert!(info
        .describe()
        .ends_with("; one CPU: CPU 0 did 2000 of 2000 records: not a 2-CPU figure"));
    // At 1800 of 2000 (90%) still one CPU's; at 1700 not.
    let flagged = |found: &str| {
        let r = Results::from_log(&shared_log(found), "x", "qemu").unwrap();
        r.bench("ebizzy.128")
            .unwrap()
            .share
            .as_ref()
            .unwrap()
            .one_cpu
    };
    assert_eq!(flagged("200,1800"), Some(1));
    assert_eq!(flagged("1700,300"), None);
    let t = Results::from_log(&shared_log("1000,1000"), "x", "qemu")
        .unwrap()
        .table();
    assert!(t.contains("records per CPU 50/50%\n"), "{t}");
}

#[test]
fn a_share_that_cannot_be_true_is_refused() {
    for (found, why) in [
        ("0,0", "no CPU did any work"),
        (
            "1000,0,5",
            "CPU 2 did 5 records but the bench record says its threads ran on CPUs [0, 1]",
        ),
        ("1000", "no count for CPU 1, where its threads ran"),
        ("1000,x", "\"x\" is not a count"),
    ] {
        let e = refused(&shared_log(found), "qemu");
        assert!(e.contains(why), "{found}: {e}");
    }
    let orphan = shared_log("1,1").replace("name=ebizzy.128 work", "name=ebizzy.64 work");
    refused_saying(&orphan, "qemu", "share of ebizzy.64 without a bench record");
}

#[test]
fn a_share_names_each_cpu_s_snapshots_or_none() {
    // Older logs name none: no parts, and no overlap to compute.
    let r = Results::from_log(&shared_log("1000,1000"), "x", "qemu").unwrap();
    assert_eq!(
        r.bench("ebizzy.128").unwrap().share.as_ref().unwrap().parts,
        None
    );
    let keys = "1000,1000 stream=kernel snap_first=10,4 snap_per_batch=2,50";
    let r = Results::from_log(&shared_log(keys), "x", "qemu").unwrap();
    let s = r.bench("ebizzy.128").unwrap().share.clone().unwrap();
    assert_eq!(
        s.parts,
        Some(super::overlap::Parts {
            stream: abi::model::SNAP_KERNEL,
            first: vec![10, 4],
            per_batch: vec![2, 50],
        })
    );
    // The parts stay out of the JSON: the overlap is what it keeps.
    assert!(!r.to_json().unwrap().contains("snap_first"));
    for (found, why) in [
        (
            "1,1 stream=kernel snap_first=10,4",
            "stream, snap_first and snap_per_batch come together",
        ),
        (
            "1,1 stream=kernel snap_first=10 snap_per_batch=2",
            "snap_first names 1 CPUs, per_cpu 2",
        ),
        (
            "1,1 stream=kernel snap_first=10,x snap_per_batch=2,2",
            "snap_first=\"10,x\" is not a list of snapshot numbers",
        ),
        (
            "1,1 stream=kernel snap_first=10,4 snap_per_batch=3,2",
            "the timed CPU's part of a batch is its timed region, two snapshots",
        ),
        (
            "1,1 stream=disk snap_first=10,4 snap_per_batch=2,2",
            "unknown snapshot stream \"disk\"",
        ),
    ] {
        let e = refused(&shared_log(found), "qemu");
        assert!(e.contains(why), "{found}: {e}");
    }
}

#[test]
fn an_overlap_is_shown_and_one_below_the_threshold_flagged_everywhere() {
    let mut r = Results::from_log(&shared_log("1000,1000"), "x", "qemu").unwrap();
    let set = |r: &mut Results, percent: f64| {
        let s = r.benches[1].share.as_mut().unwrap();
        s.overlap = vec![super::overlap::Overlap { cpu: 1, percent }];
        s.apart = (percent < super::overlap::APART_PERCENT).then_some(1);
    };
    set(&mut r, 97.4);
    let t = r.table();
    assert!(t.contains("records per CPU 50/50%, overlap 97%\n"), "{t}");
    let json = r.to_json().unwrap();
    assert!(json.contains("\"percent\": 97.4"), "{json}");
    assert!(!json.contains("apart"), "{json}");
    assert_eq!(serde_json::from_str::<Results>(&json).unwrap(), r);
    set(&mut r, 4.0);
    let flag =
        "apart: CPU 1 worked during 4% of CPU 0's timed modelled time: not a concurrent figure";
    let t = r.table();
    assert!(
        t.contains(&format!("records per CPU 50/50%, overlap 4% [{flag}]")),
        "{t}"
    );
    assert!(r.to_json().unwrap().contains("\"apart\": 1"));
    let info = &r.metric_info()["ebizzy.128"];
    assert!(
        info.describe().ends_with(&format!("; {flag}")),
        "{}",
        info.describe()
    );
}

/// A `locks` boot: no clock in the boot line's words the host did not
/// add, a per-operation figure and a throughput.
const LOCKS_LOG: &str = "\
@@tb1 boot loader=qemu protocol=mb1 cmdline=mode%3Drun%20prog%3Dlocks%20clock%3Dicount%20accel%3Dtcg mem_kib=1 modules=3 rev=abc
@@tb1 cpu vendor=GenuineIntel brand=QEMU%20Virtual%20CPU family=6 model=6 stepping=3
@@tb1 clock clock=icount tsc_hz=1000000000 batches=2
@@tb1 bench name=locks.contended.128 mech=locks path=contended call=128 measure=per_op n=2 min=1476.0000 p25=1476.0000 median=1476.0000 mean=1476.0000 p75=1476.0000 max=1476.0000 sd=0.0000 outliers=0 instructions=n/a cycles=n/a
@@tb1 samples name=locks.contended.128 batch_size=100 values=147600,147600
@@tb1 bench name=ebizzy.128 mech=locks path=ebizzy call=128 measure=throughput unit=records/s n=2 min=160000.0000 p25=160000.0000 median=160000.0000 mean=160000.0000 p75=160000.0000 max=160000.0000 sd=0.0000 outliers=0 instructions=n/a cycles=n/a cpus=0,1
@@tb1 samples name=ebizzy.128 batch_size=1000 values=6250000,6250000
@@tb1 end status=success
";

#[test]
fn lock_figures_and_throughputs() {
    let r = Results::from_log(LOCKS_LOG, "locks", "qemu").unwrap();
    // The clock the host asked for on the command line, as the clock
    // record says; its frequency turns ebizzy's ticks into records/s.
    assert_eq!(
        (r.clock.as_str(), r.unit.as_str()),
        ("icount", "instructions")
    );
    let c = r.bench("locks.contended.128").unwrap();
    assert_eq!(
        (c.measure, c.unit.as_str()),
        (Measure::PerOp, "instructions")
    );
    assert_eq!(c.samples, [147600, 147600]);
    let e = r.bench("ebizzy.128").unwrap();
    assert_eq!(
        (e.measure, e.unit.as_str()),
        (Measure::Throughput, "records/s")
    );
    assert_eq!((e.cpus.as_slice(), c.cpus.is_empty()), (&[0, 1][..], true));
    let info = r.metric_info();
    assert!(info["ebizzy.128"].describe().contains("higher is better"));
    assert!(info["locks.contended.128"]
        .describe()
        .contains("lower is better"));
    let t = r.table();
    assert!(
        t.contains("ebizzy.128") && t.contains("records/s (throughput: higher is better)"),
        "{t}"
    );
    // The JSON says which way is better, and reads back.
    let json = r.to_json().unwrap();
    assert!(json.contains("\"measure\": \"throughput\""), "{json}");
    let back: Results = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let bad = LOCKS_LOG.replace("measure=throughput", "measure=faster");
    let e = refused(&bad, "qemu");
    assert!(
        e.starts_with("line 6: bench record: measure=\"faster\""),
        "{e}"
    );
    let bad = LOCKS_LOG.replace("cpus=0,1", "cpus=0,x");
    refused_saying(&bad, "qemu", "cpus=\"0,x\" is not a list of CPU numbers");
}

#[test]
fn speedup_follows_the_direction() {
    assert_eq!(speedup(Measure::PerOp, 30.0, 20.0), 1.5);
    assert_eq!(speedup(Measure::Throughput, 100.0, 150.0), 1.5);
}

#[test]
fn a_bochs_boot_says_bochs_ticks() {
    let log = LOG
        .replace(
            "clock%3Dicount%20accel%3Dtcg",
            "clock%3Dtsc%20accel%3Dbochs",
        )
        .replace("clock clock=icount", "clock clock=tsc");
    let r = Results::from_log(&log, "b", "bochs").unwrap();
    assert_eq!(
        (r.clock.as_str(), r.unit.as_str(), r.accel.as_str()),
        ("tsc", "Bochs ticks", "bochs")
    );
    assert!(r.bochs() && !r.tcg() && r.host != "hardware");
    let t = r.table();
    assert!(
        t.contains("Bochs: 1 tick = 1 instruction") && !t.contains("cycles per"),
        "{t}"
    );
}

#[test]
fn truncated_log_is_an_error() {
    let cut = &LOG[..LOG.find("@@tb1 samples name=int80.null").unwrap()];
    refused_saying(cut, "qemu", "int80.null has no samples record");
    refused_saying(&LOG[..LOG.len() - 200], "qemu", "line");
}

/// A record the log cannot hold is refused, the error naming its line and
/// what is wrong: (the text replaced, by what, the error's start, what it
/// says after).
#[test]
fn a_bad_record_names_its_line() {
    for (from, to, line, says) in [
        (
            "values=1536,1536",
            "values=1536",
            "line 10",
            "int80.null has 1 samples",
        ),
        (
            "median=24.0000",
            "median=lots",
            "line 9: bench record: median=\"lots\"",
            "",
        ),
    ] {
        let e = refused(&LOG.replace(from, to), "qemu");
        assert!(e.starts_with(line) && e.contains(says), "{to}: {e}");
    }
}

#[test]
fn non_finite_figures_are_refused() {
    for bad in ["NaN", "nan", "inf", "-inf", "infinity"] {
        let log = LOG.replace("median=24.0000", &format!("median={bad}"));
        let e = refused(&log, "qemu");
        assert!(
            e.starts_with("line 9: bench record: median=") && e.contains("not a finite number"),
            "{bad}: {e}"
        );
    }
    let log = LOG.replace("ticks_per_op=1700.0", "ticks_per_op=inf");
    let e = refused(&log, "import");
    assert!(e.starts_with("line 11: macro record"), "{e}");
    let log = LOCKS_LOG.replace("instructions=n/a", "instructions=NaN");
    assert!(Results::from_log(&log, "x", "qemu").is_err());
}

#[test]
fn a_cut_log_says_what_is_missing() {
    let log = LOG.replace("@@tb1 end status=success\n", "");
    refused_saying(&log, "import", "before the kernel's end record");
    // int80 was measured; no macro mix came. The call gate reported ok
    // but never got to its benchmarks.
    let log = log.replace(
        "@@tb1 macro mech=int80 ops=16 batches=2 ticks_per_op=1700.0 ops_per_s=588235.3 syscalls_per_op=4\n",
        "@@tb1 mech name=callgate status=ok reason=%00\n",
    );
    let e = refused(&log, "import");
    assert!(
        e.ends_with("missing: the end record, the callgate benchmarks, the macro mix"),
        "{e}"
    );
    let log = LOG.replace("end status=success", "end status=failure");
    refused_saying(&log, "import", "status=\"failure\"");
}

#[test]
fn an_import_names_its_host_from_the_log() {
    for (cpu, host) in [
        ("stepping=3", "hardware"),
        ("stepping=3 hypervisor=TCGTCGTCGTCG", "QEMU TCG guest"),
        ("stepping=3 hypervisor=KVMKVMKVM", "KVM guest"),
        ("stepping=3 hypervisor=none", "hardware"),
    ] {
        let log = LOG.replace("stepping=3", cpu);
        let r = Results::from_log(&log, "x", "import").unwrap();
        assert_eq!(r.host, host, "{cpu}");
    }
}

#[test]
fn a_dirty_build_is_flagged() {
    let r = Results::from_log(LOG, "x", "qemu").unwrap();
    assert!(!r.dirty && r.diff.is_empty());
    let log = LOG.replace("rev=abc", "rev=abc-dirty.0123456789ab");
    let r = Results::from_log(&log, "x", "qemu").unwrap();
    assert!(r.dirty);
    assert_eq!(r.diff, "0123456789ab");
    assert!(r.to_json().unwrap().contains("\"dirty\": true"));
}

#[test]
fn command_line_warnings_are_kept() {
    let log = LOG.replace(
        "@@tb1 cpu ",
        "@@tb1 warn text=bad%20value key=entry value=sysentr\n@@tb1 warn text=unknown%20key key=colour\n@@tb1 cpu ",
    );
    let r = Results::from_log(&log, "x", "qemu").unwrap();
    assert_eq!(
        r.warnings,
        ["entry=sysentr: bad value", "colour: unknown key"]
    );
}

/// As `table` reads a file.
fn load(path: &Path) -> Result<Results> {
    let text = std::fs::read_to_string(path)?;
    Results::parse(&text).with_context(|| format!("{} is not a results file", path.display()))
}

#[test]
fn json_round_trip_and_truncated_file() {
    let r = Results::from_log(LOG, "a b/c", "qemu").unwrap();
    let dir = std::env::temp_dir().join(format!("testbed-results-{}", std::process::id()));
    let p = r.save(&dir).unwrap();
    assert!(p
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .ends_with("-a_b_c.json"));
    assert_eq!(load(&p).unwrap(), r);
    let text = std::fs::read_to_string(&p).unwrap();
    std::fs::write(&p, &text[..text.len() / 2]).unwrap();
    let e = format!("{:#}", load(&p).unwrap_err());
    assert!(
        e.contains("is not a results file: it ends early") && e.contains("(truncated?)"),
        "{e}"
    );
    // A figure JSON cannot hold (an older xtask wrote NaN as null).
    std::fs::write(&p, text.replacen("\"median\": 4.0", "\"median\": null", 1)).unwrap();
    let e = format!("{:#}", load(&p).unwrap_err());
    assert!(
        e.contains("invalid type: null") && !e.contains("truncated"),
        "{e}"
    );
    // Another of xtask's files is named for what it is.
    std::fs::write(&p, r#"{"schema":1,"kind":"bench","values":{}}"#).unwrap();
    let e = format!("{:#}", load(&p).unwrap_err());
    assert!(
        e.contains("it is a bench export, not a run's results"),
        "{e}"
    );
    std::fs::write(&p, r#"{"label":"x","provenance":null,"metrics":{}}"#).unwrap();
    assert_eq!(
        other_kind(&std::fs::read_to_string(&p).unwrap()),
        Some("a bench baseline")
    );
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn timestamps() {
    assert_eq!(utc_timestamp(UNIX_EPOCH), "1970-01-01T00:00:00Z");
    let t = UNIX_EPOCH + Duration::from_secs(1_796_083_200 + 3661);
    assert_eq!(utc_timestamp(t), "2026-12-01T01:01:01Z");
    let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
    assert_eq!(utc_timestamp(leap), "2000-02-29T00:00:00Z");
}

/// The date the book shows beside a measured wall time.
#[test]
fn dates_are_civil() {
    assert_eq!(utc_date(0), "1970-01-01");
    assert_eq!(utc_date(951_782_400), "2000-02-29");
    assert_eq!(utc_date(1_796_601_600), "2026-12-07");
}

/// The words a run was asked for against the settings its kernel applied:
/// a key the record carries and the words name differently is a
/// contradiction; the last word of a key counts; other keys say nothing.
#[test]
fn asked_settings_are_checked_against_the_applied_ones() {
    let applied: BTreeMap<String, String> = [("pmap", "window"), ("fork", "cow"), ("cpus", "2")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert!(contradictions("mode=run pmap=window fork=cow batches=4", &applied).is_empty());
    assert_eq!(
        contradictions("pmap=direct fork=cow", &applied),
        ["asked pmap=direct, the kernel applied pmap=window"]
    );
    assert!(contradictions("pmap=direct pmap=window", &applied).is_empty());
    assert!(contradictions("pmap=apte", &BTreeMap::new()).is_empty());
    // The settings record is read into the results.
    let log = "@@tb1 boot loader=qemu protocol=mb1 cmdline=mode%3Drun%20pmap%3Ddirect%20clock%3Dicount rev=r\n@@tb1 settings pmap=window fork=copy cpus=1\n@@tb1 end status=success\n";
    let r = Results::from_log(log, "a", "qemu").unwrap();
    assert_eq!(r.cpus_started(), Some(1));
    assert_eq!(
        r.contradicted(),
        ["asked pmap=direct, the kernel applied pmap=window"]
    );
}
