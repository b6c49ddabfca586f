//! The `lmbench` program: every row of lmbench's summary present with its
//! samples on 1 and 2 CPUs under icount, and the table renders from them.

use abi::lmbench as lm;
use abi::report::Measure;

use crate::machine::BootLog;
use crate::report::Record;
use crate::results::Results;

use super::case::{Case, CASE};
use super::checks::{clock_is, contains, has_bench, outcome, succeeded, ICOUNT};

/// Batches per row in these boots (`batches=`).
const BATCHES: usize = 4;

/// Every row the program must make on this boot: the fixed rows, the nine
/// `lat_ctx` rings, and `smack` through every mechanism the kernel offers.
fn expected(res: &Results) -> Vec<String> {
    let mut v: Vec<String> = [
        lm::LAT_SYSCALL_NULL,
        lm::LAT_SYSCALL_WRITE,
        lm::LAT_SIG_INSTALL,
        lm::LAT_SIG_CATCH,
        lm::LAT_PROC_FORK,
        lm::LAT_PIPE,
        lm::LAT_PAGEFAULT_ZERO,
        lm::LAT_PAGEFAULT_COW,
        lm::BW_PIPE,
    ]
    .map(String::from)
    .to_vec();
    for n in lm::CTX_PROCS {
        for k in lm::CTX_KIB {
            v.push(format!("{}.{n}p.{k}k", lm::LAT_CTX));
        }
    }
    for m in res.mechanisms.iter().filter(|m| m.status == "ok") {
        v.push(format!("{}.{}", lm::SMACK, m.name));
    }
    v
}

/// Every row with `BATCHES` samples, per operation, in the clock's unit;
/// the copy-on-write row's path says which `fork=` ran; on two CPUs every
/// `lat_ctx` ring went round both; the table shows every row.
fn every_row(log: &BootLog, r: &[Record], cow: bool, cpus: u32) -> Result<(), String> {
    succeeded(log)?;
    let res = Results::from_records(r, lm::PROG, "qemu").map_err(|e| e.to_string())?;
    clock_is(&res, ICOUNT)?;
    let want = expected(&res);
    if want.iter().filter(|n| n.starts_with("smack.")).count() < 2 {
        return Err("fewer than two mechanisms: smack compares them".into());
    }
    for name in &want {
        has_bench(&res, name, BATCHES, Measure::PerOp)?;
    }
    let path = &res.bench(lm::LAT_PAGEFAULT_COW).expect("checked").path;
    let want_path = if cow { "cow_fault" } else { "no_fault" };
    if path != want_path {
        return Err(format!(
            "lat_pagefault.cow: path {path}, expected {want_path}"
        ));
    }
    if cpus > 1 {
        for b in res
            .benches
            .iter()
            .filter(|b| b.name.starts_with("lat_ctx."))
        {
            if b.cpus != [0, 1] {
                return Err(format!("{}: ran on CPUs {:?}, not 0 and 1", b.name, b.cpus));
            }
        }
    }
    let t = crate::cmd::lmbench::table(&res).map_err(|e| e.to_string())?;
    for name in &want {
        if !t.lines().any(|l| l.starts_with(&format!("{name} "))) {
            return Err(format!("the table has no row {name}:\n{t}"));
        }
    }
    Ok(())
}

/// lmbench with hostile arguments (qemu32: no AMD syscall): `entry=`
/// allows only a mechanism the CPU lacks, and `batches=` asks past the
/// program's cap. Every row that goes through a mechanism is named as not
/// measured, the run fails, and no figure is made; the cap is said.
fn hostile_arguments(log: &BootLog, r: &[Record]) -> Result<(), String> {
    outcome(log, abi::exit::Outcome::Failure)?;
    for row in [lm::LAT_SYSCALL_NULL, lm::LAT_SYSCALL_WRITE, lm::SMACK] {
        contains(
            log,
            &format!("lmbench: {row}: not measured: entry= allows no mechanism this CPU has"),
        )?;
    }
    contains(log, "lmbench: 3 row(s) not measured")?;
    contains(
        log,
        "lmbench: batches=1024 asked: lmbench keeps at most 32 per row",
    )?;
    match crate::report::of_kind(r, abi::report::kind::BENCH).next() {
        None => Ok(()),
        Some(b) => Err(format!("a figure was made: {:?}", b.get("name"))),
    }
}

pub(super) const LMBENCH: &[Case] = &[
    Case {
        name: "lmbench with hostile arguments: entry= allowing no usable mechanism names each row it cannot measure and fails, batches= past the cap is said",
        cmdline: "mode=run prog=lmbench bench=syscall,smack entry=syscall batches=1024",
        check: hostile_arguments,
        ..CASE
    },
    Case {
        name: "lmbench: every row present with its samples (1 CPU, fork=cow), and the table renders",
        cmdline: "mode=run prog=lmbench batches=4 batch_size=64 fork=cow",
        timeout: 120,
        check: |log, r| every_row(log, r, true, 1),
        ..CASE
    },
    Case {
        name: "lmbench on 2 CPUs: every row present with its samples (fork=copy), the lat_ctx rings round both CPUs, and the table renders",
        cmdline: "mode=run prog=lmbench batches=4 batch_size=64",
        cpus: 2,
        timeout: 120,
        check: |log, r| every_row(log, r, false, 2),
        ..CASE
    },
];
