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
    let e = refused(&tsc_boot.replace(" prog=bench pid=1\n@@tb1 bench", "\n@@tb1 bench"));
    assert!(
        e.contains("the kernel's clock record says clock=icount"),
        "{e}"
    );
    let none = LOG.replace("clock clock=icount", "clock clock=none");
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
    let e = refused(&two);
    assert!(
        e.contains("line 8: a second boot record (the first is on line 1)"),
        "{e}"
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
    let e = refused(&LOG.replace(
        "min=24.0000 p25=24.0000 median=24.0000 mean=24.0000 p75=24.0000 max=24.0000",
        "min=24.0000 p25=24.0000 median=30.0000 mean=30.0000 p75=30.0000 max=30.0000",
    ));
    assert!(
        e.contains("line 5: benchmark int80.null: the summary says median=30, its samples give median=24.0000"),
        "{e}"
    );
    let e = refused(&LOG.replace("mean=24.0000", "mean=99.0000"));
    assert!(e.contains("mean=99 lies outside"), "{e}");
}

#[test]
fn a_second_samples_record_is_refused() {
    let line =
        "@@tb1 samples name=int80.null batch_size=64 values=1536,1536 prog=bench pid=1 tid=1\n";
    let e = refused(&LOG.replace(
        line,
        &format!("{line}{}", line.replace("1536,1536", "64,64")),
    ));
    assert!(
        e.contains(
            "line 6: program bench's second samples record of int80.null (the first is on line 5)"
        ),
        "{e}"
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
    let e = refused(&LOG.replace(
        "values=1536,1536 prog=bench pid=1",
        "values=1536,1536 prog=bench pid=4",
    ));
    assert!(
        e.contains("line 5: program bench's samples record says pid=4, but no process of its task had that pid (line 6: pids 1 to 1)"),
        "{e}"
    );
    let e = refused(&LOG.replace(
        "@@tb1 task prog=bench pid=1 how=exit code=0 last_pid=1\n",
        "",
    ));
    assert!(e.contains("no task record after it"), "{e}");
    // A child's record (pid 2 of pids 1 to 2) is a process that ran.
    let forked = LOG
        .replace(
            "values=1536,1536 prog=bench pid=1",
            "values=1536,1536 prog=bench pid=2",
        )
        .replace("last_pid=1", "last_pid=2");
    assert!(Results::from_log(&forked, "x", "qemu").is_ok());
}
