//! Logs a guest or a hand made hostile: each is refused with an error that
//! names the record, never gathered into figures that lie.

use super::Results;

const LOG: &str = "\
@@tb1 boot loader=qemu protocol=mb1 cmdline=mode%3Drun%20clock%3Dicount%20accel%3Dtcg mem_kib=1 modules=3 rev=abc
@@tb1 cpu vendor=GenuineIntel brand=QEMU%20Virtual%20CPU family=6 model=6 stepping=3
@@tb1 clock clock=icount fence=lfence+rdtsc tsc_hz=1000000000 batches=2 batch_size=64 prog=bench pid=1
@@tb1 bench name=int80.null mech=int80 path=full call=null n=2 min=24.0000 p25=24.0000 median=24.0000 mean=24.0000 p75=24.0000 max=24.0000 sd=0.0000 outliers=0 prog=bench pid=1
@@tb1 samples name=int80.null batch_size=64 values=1536,1536 prog=bench pid=1 tid=1
@@tb1 task prog=bench pid=1 how=exit code=0 last_pid=1
@@tb1 end status=success
";

fn refused(log: &str) -> String {
    format!("{:#}", Results::from_log(log, "x", "qemu").unwrap_err())
}

/// `log` is refused with an error that says `says`.
fn refused_saying(log: &str, says: &str) {
    let e = refused(log);
    assert!(e.contains(says), "{e}");
}

#[test]
fn the_fixture_is_a_good_boot() {
    let r = Results::from_log(LOG, "x", "qemu").unwrap();
    assert_eq!(
        (r.clock.as_str(), r.unit.as_str()),
        ("icount", "instructions")
    );
}

/// A user program's clock record that relabels an icount boot as the TSC
/// (or a TSC boot as icount) is refused, naming its line and program;
/// `none` (a CPU without a TSC) is no relabelling.
#[test]
fn a_clock_record_the_host_did_not_boot_is_refused() {
    let e = refused(&LOG.replace(
        "clock clock=icount fence=lfence+rdtsc tsc_hz=1000000000",
        "clock clock=tsc fence=lfence+rdtsc tsc_hz=3000000000",
    ));
    assert!(
        e.contains("line 3: program bench's clock record says clock=tsc")
            && e.contains("host booted clock=icount"),
        "{e}"
    );
    let tsc_boot = LOG.replace("clock%3Dicount", "clock%3Dtsc");
    refused_saying(
        &tsc_boot.replace(" prog=bench pid=1\n@@tb1 bench", "\n@@tb1 bench"),
        "the kernel's clock record says clock=icount",
    );
    let none = LOG.replace(
        "clock clock=icount fence=lfence+rdtsc tsc_hz=1000000000",
        "clock clock=none tsc_hz=0",
    );
    assert_eq!(Results::from_log(&none, "x", "qemu").unwrap().clock, "none");
    // Without a clock= word in the boot (a log of a real machine), the
    // record says what was used, as before.
    let bare = LOG
        .replace("%20clock%3Dicount", "")
        .replace("clock clock=icount", "clock clock=tsc");
    assert_eq!(Results::from_log(&bare, "x", "qemu").unwrap().clock, "tsc");
}

/// Two logs end to end (an int80 icount boot and a TSC boot) are two
/// boots: one run's figures cannot come from both.
#[test]
fn a_log_of_two_boots_is_refused() {
    let two = format!("{LOG}{}", LOG.replace("clock%3Dicount", "clock%3Dtsc"));
    refused_saying(
        &two,
        "line 8: a second boot record (the first is on line 1)",
    );
}

/// A summary out of order (median=12 with min=24), or one that is not its
/// samples' (median 30 where the samples give 24), is refused.
#[test]
fn a_summary_that_contradicts_its_samples_is_refused() {
    let e = refused(&LOG.replace("median=24.0000", "median=12.0000"));
    assert!(
        e.contains("min=24 above") || e.contains("p25=24 above median=12"),
        "{e}"
    );
    refused_saying(
        &LOG.replace(
            "min=24.0000 p25=24.0000 median=24.0000 mean=24.0000 p75=24.0000 max=24.0000",
            "min=24.0000 p25=24.0000 median=30.0000 mean=30.0000 p75=30.0000 max=30.0000",
        ),
        "line 5: benchmark int80.null: the summary says median=30, its samples give median=24.0000",
    );
    refused_saying(
        &LOG.replace("mean=24.0000", "mean=99.0000"),
        "mean=99 lies outside",
    );
}

#[test]
fn a_second_samples_record_is_refused() {
    let line =
        "@@tb1 samples name=int80.null batch_size=64 values=1536,1536 prog=bench pid=1 tid=1\n";
    refused_saying(
        &LOG.replace(
            line,
            &format!("{line}{}", line.replace("1536,1536", "64,64")),
        ),
        "line 6: program bench's second samples record of int80.null (the first is on line 5)",
    );
}

/// `batch_size=0` would divide by zero (`run --compare` printed nan and
/// inf, and "no difference proven").
#[test]
fn batch_size_zero_is_refused() {
    let e = refused(&LOG.replace("batch_size=64 values", "batch_size=0 values"));
    assert!(e.contains("line 5") && e.contains("batch_size=0"), "{e}");
}

/// A user record whose pid no process of its task had (the kernel ran
/// pid 1 alone), or that no task record accounts for, is refused.
#[test]
fn a_record_of_a_process_that_never_ran_is_refused() {
    refused_saying(&LOG.replace(
        "values=1536,1536 prog=bench pid=1",
        "values=1536,1536 prog=bench pid=4",
    ), "line 5: program bench's samples record says pid=4, but no process of its task had that pid (line 6: pids 1 to 1)");
    refused_saying(
        &LOG.replace(
            "@@tb1 task prog=bench pid=1 how=exit code=0 last_pid=1\n",
            "",
        ),
        "no task record after it",
    );
    // A child's record (pid 2 of pids 1 to 2) is a process that ran.
    let forked = LOG
        .replace(
            "values=1536,1536 prog=bench pid=1",
            "values=1536,1536 prog=bench pid=2",
        )
        .replace("last_pid=1", "last_pid=2");
    assert!(Results::from_log(&forked, "x", "qemu").is_ok());
}

/// The fixture with a macro mix: 1700 ticks an operation at 1 GHz.
fn with_macro(line: &str) -> String {
    LOG.replace("@@tb1 task", &format!("{line}\n@@tb1 task"))
}

const MACRO: &str = "@@tb1 macro mech=int80 ops=16 batches=2 ticks_per_op=1700.0000 ops_per_s=588235.2941 syscalls_per_op=4 prog=bench pid=1";

/// A macro record's rate must be its ticks at the clock's frequency, and
/// every figure positive: `ops_per_s=-1` was stored and shown.
#[test]
fn a_macro_rate_that_is_not_its_ticks_is_refused() {
    assert!(Results::from_log(&with_macro(MACRO), "x", "qemu").is_ok());
    for (from, to, says) in [
        (
            "ops_per_s=588235.2941",
            "ops_per_s=-1",
            "line 6: program bench's macro record of int80: ops_per_s=-1: a rate of operations that took time is above 0",
        ),
        (
            "ops_per_s=588235.2941",
            "ops_per_s=0.0000",
            "ops_per_s=0: a rate",
        ),
        (
            "ops_per_s=588235.2941",
            "ops_per_s=688235.2941",
            "line 6: program bench's macro record of int80: ops_per_s=688235.2941, but ticks_per_op=1700 at tsc_hz=1000000000 is 588235.2941 operations per second",
        ),
        (
            "ticks_per_op=1700.0000",
            "ticks_per_op=0.0000",
            "ticks_per_op=0: an operation of system calls takes time",
        ),
        (
            "ticks_per_op=1700.0000",
            "ticks_per_op=-1700.0000",
            "ticks_per_op=-1700",
        ),
        ("ops=16", "ops=0", "ops=0: a mix of nothing"),
        ("batches=2 ticks", "batches=0 ticks", "batches=0: a mix of nothing"),
        (
            "syscalls_per_op=4",
            "syscalls_per_op=0",
            "syscalls_per_op=0: a mix of nothing",
        ),
    ] {
        let e = refused(&with_macro(&MACRO.replace(from, to)));
        assert!(e.contains(says), "{to}: {e}");
    }
    // Within the rounding of the printed digits, a rate is its ticks'.
    let tiny = MACRO
        .replace("ticks_per_op=1700.0000", "ticks_per_op=0.0001")
        .replace("ops_per_s=588235.2941", "ops_per_s=10000000000000.0000");
    assert!(Results::from_log(&with_macro(&tiny), "x", "qemu").is_ok());
    // Without a frequency there is no rate to check it against.
    let none = LOG.replace(
        "clock clock=icount fence=lfence+rdtsc tsc_hz=1000000000",
        "clock clock=none tsc_hz=0",
    );
    refused_saying(
        &none.replace("@@tb1 task", &format!("{MACRO}\n@@tb1 task")),
        "no clock record gives a frequency",
    );
}

/// A clock record's frequency is above 0 (0 only with `clock=none`) and
/// below any CPU's; its batch counts within the kernel's bounds; the clock
/// one the guest has.
#[test]
fn a_clock_record_that_cannot_be_is_refused() {
    for (from, to, says) in [
        (
            "tsc_hz=1000000000",
            "tsc_hz=0",
            "line 3: program bench's clock record: tsc_hz=0: clock=icount counts ticks, and a clock of no frequency turns no tick into a time or a rate",
        ),
        (
            "tsc_hz=1000000000",
            "tsc_hz=-1",
            "line 3: clock record: tsc_hz=\"-1\" is not a number",
        ),
        (
            "tsc_hz=1000000000",
            "tsc_hz=100000000001",
            "tsc_hz=100000000001: faster than any time-stamp counter",
        ),
        (
            "batches=2 batch_size=64 prog",
            "batches=2 batch_size=0 prog",
            "line 3: program bench's clock record: batch_size=0: the kernel takes 1 to 1048576",
        ),
        (
            "batches=2 batch_size=64 prog",
            "batches=1025 batch_size=64 prog",
            "batches=1025: the kernel takes 1 to 1024",
        ),
        (
            "clock clock=icount",
            "clock clock=sundial",
            "line 3: program bench's clock record: clock=\"sundial\" is none of icount, tsc, none",
        ),
        (
            "clock clock=icount fence=lfence+rdtsc tsc_hz=1000000000",
            "clock clock=none tsc_hz=1000000000",
            "tsc_hz=1000000000 with clock=none",
        ),
    ] {
        let e = refused(&LOG.replace(from, to));
        assert!(e.contains(says), "{to}: {e}");
    }
}

/// A bench record's spread and outliers are its samples' too, and a
/// throughput is its batches' operations over their ticks at the clock's
/// frequency: a summary of other figures, a batch of no time and a
/// throughput without a frequency are refused.
#[test]
fn every_figure_of_a_bench_record_is_its_samples() {
    for (from, to, says) in [
        (
            "sd=0.0000",
            "sd=-1.0000",
            "line 4: program bench's bench record of int80.null: sd=-1: a negative spread or count",
        ),
        (
            "sd=0.0000",
            "sd=3.0000",
            "line 5: benchmark int80.null: the summary says sd=3, its samples give sd=0.0000",
        ),
        ("outliers=0", "outliers=3", "outliers=3 among n=2 values"),
        (
            "outliers=0",
            "outliers=1",
            "the summary says outliers=1, its samples give outliers=0.0000",
        ),
    ] {
        let e = refused(&LOG.replace(from, to));
        assert!(e.contains(says), "{to}: {e}");
    }
    // Batches of 24 and 26 ticks a call: each quartile is the samples'.
    let spread = LOG
        .replace(
            "min=24.0000 p25=24.0000 median=24.0000 mean=24.0000 p75=24.0000 max=24.0000 sd=0.0000",
            "min=24.0000 p25=24.5000 median=25.0000 mean=25.0000 p75=25.5000 max=26.0000 sd=1.4142",
        )
        .replace("values=1536,1536", "values=1536,1664");
    assert!(Results::from_log(&spread, "x", "qemu").is_ok());
    refused_saying(
        &spread.replace("p25=24.5000", "p25=24.6000"),
        "the summary says p25=24.6, its samples give p25=24.5000",
    );
    refused_saying(
        &spread.replace("mean=25.0000", "mean=25.9000"),
        "mean=25.9, its samples give mean=25.0000",
    );
    // ebizzy's rate: 1000 records a batch, 6250000 ticks at 1 GHz.
    let rate = LOG
        .replace(
            "name=int80.null mech=int80 path=full call=null n=2 min=24.0000 p25=24.0000 median=24.0000 mean=24.0000 p75=24.0000 max=24.0000",
            "name=ebizzy.128 mech=locks path=ebizzy call=128 measure=throughput unit=records/s n=2 min=160000.0000 p25=160000.0000 median=160000.0000 mean=160000.0000 p75=160000.0000 max=160000.0000",
        )
        .replace(
            "samples name=int80.null batch_size=64 values=1536,1536",
            "samples name=ebizzy.128 batch_size=1000 values=6250000,6250000",
        );
    let r = Results::from_log(&rate, "x", "qemu").unwrap();
    assert_eq!(r.benches[0].median, 160_000.0);
    refused_saying(&rate.replace("tsc_hz=1000000000", "tsc_hz=2000000000"), "line 5: benchmark ebizzy.128: the summary says min=160000, its samples give min=320000.0000");
    refused_saying(
        &rate.replace("values=6250000,6250000", "values=6250000,0"),
        "line 5: benchmark ebizzy.128: batch 2 took 0 ticks",
    );
    refused_saying(
        &rate.replace(
            "clock clock=icount fence=lfence+rdtsc tsc_hz=1000000000",
            "clock clock=none tsc_hz=0",
        ),
        "line 4: benchmark ebizzy.128 is a throughput, and no clock record gives the frequency",
    );
}
