//! Processes: the `procs` program's cases (pipes and signals included)
//! under every `pmap=` strategy and both `fork=` modes on 1, 2 and 4 CPUs
//! (24 boots), the kernel's leak test (10,000 fork/exit/wait rounds, each
//! with a pipe, every frame and page back and no pipe left open), and the
//! forktest figure on 1 and 2 CPUs.

use abi::report::{kind, names, Measure};

use crate::machine::BootLog;
use crate::report::{self, Record};
use crate::results::Results;

use super::case::{Case, CASE};
use super::checks::{
    all_tests_pass, clock_is, contains, has_bench, one, succeeded, test_passed, ICOUNT,
};

/// A `procs` boot on `cpus` CPUs: every case passed, as the program counts
/// them, but on one CPU the cases that need a second, which are skipped
/// (each with its `skip` record); and the forked child's lines name it.
fn procs_pass(log: &BootLog, r: &[Record], cpus: u32) -> Result<(), String> {
    use abi::syscall::procs_arg::ACROSS_CASES;
    succeeded(log)?;
    if let Some(l) = log.serial.lines().find(|l| l.starts_with("procs: FAIL")) {
        return Err(l.to_string());
    }
    let all = 21 + SPACE_KEY_CASES;
    let skipped = if cpus > 1 {
        0
    } else {
        ACROSS_CASES.len() as u32
    };
    contains(
        log,
        &format!(
            "procs: {} passed, 0 failed, {skipped} skipped",
            all - skipped
        ),
    )?;
    // The two docs/threads.md leans on for its keys: one address in two
    // processes is two keys.
    for name in [
        "sleep_on at one address in two processes: a wakeup stays in its process",
        "user mutexes at one address in two processes: an unlock stays in its process",
    ] {
        contains(log, &format!("procs: PASS {name}"))?;
    }
    let skips: Vec<&str> = report::of_kind(r, kind::CHECK)
        .filter(|c| c.get("mech") == Some("procs") && c.get("result") == Some("skip"))
        .filter_map(|c| c.get("name"))
        .collect();
    let want: &[&str] = if cpus > 1 { &[] } else { &ACROSS_CASES };
    if skips != want {
        return Err(format!(
            "procs on {cpus} CPU(s) skipped {skips:?}, expected {want:?}"
        ));
    }
    child_named(log, r)
}

/// The forked child of the `procs` cases printed its pid and tid
/// (`procs_arg::CHILD_SAYS`): its `check` record carries the same two,
/// and so does the kernel's line for its fault; its pid is not its
/// task's first (pid 1's).
fn child_named(log: &BootLog, r: &[Record]) -> Result<(), String> {
    use abi::syscall::procs_arg::{CHILD_RECORD, CHILD_SAYS};
    let said = log
        .serial
        .lines()
        .find_map(|l| l.strip_prefix(CHILD_SAYS))
        .ok_or_else(|| format!("no line {CHILD_SAYS:?}"))?;
    let ids = match said.split_whitespace().collect::<Vec<_>>()[..] {
        ["pid", p, "tid", t] => p.parse::<u32>().ok().zip(t.parse::<u32>().ok()),
        _ => None,
    };
    let (pid, tid) = ids.ok_or_else(|| format!("the child said {said:?}"))?;
    let task = report::of_kind(r, kind::TASK)
        .find(|t| t.get("prog") == Some("procs"))
        .ok_or("no task record of procs")?;
    if task.get("pid") == Some(pid.to_string().as_str()) {
        return Err(format!("the forked child has pid {pid}, its task's first"));
    }
    let rec = report::of_kind(r, kind::CHECK)
        .find(|c| c.get("name") == Some(CHILD_RECORD))
        .ok_or_else(|| format!("no check record {CHILD_RECORD:?}"))?;
    let origin = rec
        .origin()?
        .ok_or("the child's record is not a program's")?;
    if (origin.pid, origin.tid) != (pid, Some(tid)) || rec.get("got") != Some(&pid.to_string()) {
        return Err(format!(
            "the child (pid {pid} tid {tid}) printed a record tagged pid={} tid={:?} (line {})",
            origin.pid, origin.tid, rec.line
        ));
    }
    contains(log, &format!("task procs (pid {pid}, tid {tid}):"))
}

/// The `procs` cases of wait channels and user mutexes keyed by (space,
/// address), and of a child ending with a thread on a turnstile.
const SPACE_KEY_CASES: u32 = 3;

/// The kernel's process tests: the cases and the leak test ran and passed.
fn leaks_pass(log: &BootLog, r: &[Record]) -> Result<(), String> {
    succeeded(log)?;
    all_tests_pass(log, r, 2)?;
    for want in ["user: processes", "processes: 10,000 fork/exit/wait rounds"] {
        test_passed(r, want)?;
    }
    frames_named(log, r)
}

/// The leak test's line: frames in use the same before and after, the
/// strategy the boot applied named, with the frames it keeps for its own
/// page tables (the windows' table; the direct map's tables besides under
/// `pmap=direct`), and 0 pipes left.
fn frames_named(log: &BootLog, r: &[Record]) -> Result<(), String> {
    let pmap = one(r, kind::SETTINGS)?
        .get("pmap")
        .ok_or("the settings record names no pmap")?;
    let line = log
        .serial
        .lines()
        .find(|l| l.starts_with("processes: frames in use"))
        .ok_or("no line 'processes: frames in use ...'")?;
    let words: Vec<&str> = line.split_whitespace().collect();
    let parsed = match words[..] {
        ["processes:", "frames", "in", "use", before, "before,", after, "after", own, "of", "them", named, "own", "page", "tables);", ..] =>
        {
            let n = |s: &str| s.trim_start_matches('(').parse::<u32>().ok();
            n(before)
                .zip(n(after))
                .zip(n(own))
                .map(|((b, a), o)| (b, a, o, named))
        }
        _ => None,
    };
    let Some((before, after, own, named)) = parsed else {
        return Err(format!("the leak line does not parse: {line:?}"));
    };
    let want_named = format!("pmap={pmap}'s");
    // The windows' table is one frame under every strategy; the direct map
    // adds its tables (one per 4 MiB mapped), which the other strategies
    // must not have.
    let own_ok = if pmap == "direct" { own > 1 } else { own == 1 };
    if before != after || named != want_named || !own_ok || own > after {
        return Err(format!(
            "the leak line {line:?}: expected the same count before and after, {want_named} named, and its own tables (1 frame, more under pmap=direct) among them"
        ));
    }
    contains(log, "0 pipes left open")
}

/// A forktest boot: `forktest.fork_exit` with its samples, per round, on
/// the CPUs `cpus` names.
fn forktest_figure(log: &BootLog, r: &[Record], cpus: &[u32]) -> Result<(), String> {
    succeeded(log)?;
    let res = Results::from_records(r, "forktest", "qemu").map_err(|e| e.to_string())?;
    clock_is(&res, ICOUNT)?;
    has_bench(&res, names::FORKTEST_FORK_EXIT, 8, Measure::PerOp)?;
    let b = res.bench(names::FORKTEST_FORK_EXIT).expect("checked above");
    if b.cpus != cpus {
        return Err(format!(
            "forktest ran on CPUs {:?}, expected {cpus:?}",
            b.cpus
        ));
    }
    // On several CPUs: each CPU's rounds while CPU 0 was timed, as the
    // program counted them (CPU 0's too: every timed round it finished),
    // each other CPU at least half of CPU 0's; and the kernel's own count
    // of the shootdowns each CPU sent and took, which the strategy must
    // send (one process forks on every CPU, so every fork changes mappings
    // the others hold).
    match (&b.share, cpus.len()) {
        (None, 1) => {}
        (Some(_), 1) => return Err("forktest on 1 CPU reports a share".into()),
        (None, _) => return Err("forktest on several CPUs: no share record".into()),
        (Some(s), n) => {
            let timed = b.batch_size * b.samples.len() as u64;
            if s.work != "rounds" || s.per_cpu.len() != n || s.per_cpu[0] != timed {
                return Err(format!(
                    "forktest's share {:?} of {}: expected {n} CPUs, CPU 0's {timed} timed rounds first",
                    s.per_cpu, s.work
                ));
            }
            if let Some(c) = s.per_cpu.iter().position(|&k| 2 * k < s.per_cpu[0]) {
                return Err(format!(
                    "forktest's share {:?}: CPU {c} finished fewer than half of CPU 0's rounds while CPU 0 was timed",
                    s.per_cpu
                ));
            }
            if s.one_cpu.is_some() {
                return Err(format!(
                    "forktest's share {:?} is flagged as one CPU's",
                    s.per_cpu
                ));
            }
            shootdowns_on_every_cpu(r, n)?;
        }
    }
    Ok(())
}

/// The kernel's `work` record of the forktest task: every CPU forked, sent
/// shootdowns and took them.
fn shootdowns_on_every_cpu(r: &[Record], n: usize) -> Result<(), String> {
    let w = r
        .iter()
        .find(|x| x.kind == kind::WORK && x.get("prog") == Some("forktest"))
        .ok_or("forktest on several CPUs: no work record")?;
    for key in ["forks", "shootdowns_sent", "shootdowns_taken"] {
        let v: Vec<u64> = w
            .get(key)
            .unwrap_or("")
            .split(',')
            .map(|x| x.parse().map_err(|_| format!("work record: {key}={x:?}")))
            .collect::<Result<_, _>>()?;
        if v.len() != n || v.contains(&0) {
            return Err(format!(
                "forktest's work record: {key}={v:?}, expected a non-zero count on each of {n} CPUs"
            ));
        }
    }
    Ok(())
}

macro_rules! procs_case {
    ($cpus:expr, $pmap:literal, $fork:literal) => {
        Case {
            name: concat!(
                "processes on ",
                stringify!($cpus),
                " CPU(s), pmap=",
                $pmap,
                " fork=",
                $fork,
                ": fork through every mechanism, private writes, exit status, WNOHANG, ECHILD and EFAULT, a faulting child, a child's record and fault naming its pid and tid, orphans to pid 1, fork with threads, sbrk, a fork bomb, pipes (EOF, EPIPE, across CPUs, 10^6 bytes), signals (EINTR, catch, SIGKILL, forged sigreturn frames), wait channels and user mutexes per process, a child ending with a lock waiter"
            ),
            cmdline: concat!("mode=run prog=procs pmap=", $pmap, " fork=", $fork),
            cpus: $cpus,
            timeout: 90,
            check: |log, r| procs_pass(log, r, $cpus),
            ..CASE
        }
    };
}

pub(super) const PROCS: &[Case] = &[
    procs_case!(1, "apte", "copy"),
    procs_case!(1, "apte", "cow"),
    procs_case!(1, "cr3", "copy"),
    procs_case!(1, "cr3", "cow"),
    procs_case!(1, "window", "copy"),
    procs_case!(1, "window", "cow"),
    procs_case!(1, "direct", "copy"),
    procs_case!(1, "direct", "cow"),
    procs_case!(2, "apte", "copy"),
    procs_case!(2, "apte", "cow"),
    procs_case!(2, "cr3", "copy"),
    procs_case!(2, "cr3", "cow"),
    procs_case!(2, "window", "copy"),
    procs_case!(2, "window", "cow"),
    procs_case!(2, "direct", "copy"),
    procs_case!(2, "direct", "cow"),
    procs_case!(4, "apte", "copy"),
    procs_case!(4, "apte", "cow"),
    procs_case!(4, "cr3", "copy"),
    procs_case!(4, "cr3", "cow"),
    procs_case!(4, "window", "copy"),
    procs_case!(4, "window", "cow"),
    procs_case!(4, "direct", "copy"),
    procs_case!(4, "direct", "cow"),
    Case {
        name: "processes: 10,000 fork/exit/wait rounds leave every frame and page where they were, and no pipe open (1 CPU, pmap=apte fork=cow)",
        cmdline: "mode=test test=processes pmap=apte fork=cow",
        timeout: 120,
        check: leaks_pass,
        ..CASE
    },
    Case {
        name: "processes: 10,000 fork/exit/wait rounds leave every frame and page where they were, and no pipe open (2 CPUs, pmap=cr3 fork=copy)",
        cmdline: "mode=test test=processes pmap=cr3 fork=copy",
        cpus: 2,
        timeout: 120,
        check: leaks_pass,
        ..CASE
    },
    Case {
        name: "processes: 10,000 fork/exit/wait rounds leave every frame and page where they were, and no pipe open (2 CPUs, pmap=window fork=cow)",
        cmdline: "mode=test test=processes pmap=window fork=cow",
        cpus: 2,
        timeout: 120,
        check: leaks_pass,
        ..CASE
    },
    Case {
        name: "processes: 10,000 fork/exit/wait rounds leave every frame and page where they were, and no pipe open (1 CPU, pmap=direct fork=copy)",
        cmdline: "mode=test test=processes pmap=direct fork=copy",
        timeout: 120,
        check: leaks_pass,
        ..CASE
    },
    Case {
        name: "forktest: forktest.fork_exit with its samples (1 CPU, 8 pages, 8 batches)",
        cmdline: "mode=run prog=forktest fork_pages=8 batches=8",
        check: |log, r| forktest_figure(log, r, &[0]),
        ..CASE
    },
    Case {
        name: "forktest on 2 CPUs: one forking parent per CPU, each finishing at least half of CPU 0's rounds while CPU 0 is timed, shootdowns sent and taken on both (pmap=apte)",
        cmdline: "mode=run prog=forktest fork_pages=8 batches=8 pmap=apte",
        cpus: 2,
        check: |log, r| forktest_figure(log, r, &[0, 1]),
        ..CASE
    },
    Case {
        name: "forktest on 4 CPUs: every forker finishes at least half of CPU 0's rounds while CPU 0 is timed, shootdowns sent and taken on every CPU (pmap=apte fork=cow)",
        cmdline: "mode=run prog=forktest fork_pages=8 batches=8 pmap=apte fork=cow",
        cpus: 4,
        check: |log, r| forktest_figure(log, r, &[0, 1, 2, 3]),
        ..CASE
    },
];
