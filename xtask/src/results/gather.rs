//! From a boot's records to [`Results`]: every record checked as it is
//! read (a malformed one fails, naming its line), and the whole checked
//! for consistency (samples per benchmark, a cut log).

use std::collections::BTreeMap;
use std::time::SystemTime;

use abi::report::{kind, Measure};
use anyhow::{anyhow, bail, Result};

use super::Clock;
use crate::report::{self, Record};

use super::{
    dirty_of_rev, utc_timestamp, Bench, Macro, Mech, Perf, Results, Share, IMPORT_SOURCE,
    JSON_SCHEMA,
};

impl Results {
    /// Gathers the records of one boot. Fails, naming the line, on a
    /// malformed record, a benchmark without its samples, or a sample count
    /// that is not the configured number of batches.
    pub fn from_log(log: &str, label: &str, source: &str) -> Result<Results> {
        let records = report::parse_log(log)?;
        Self::from_records(&records, label, source)
    }

    pub fn from_records(records: &[Record], label: &str, source: &str) -> Result<Results> {
        let mut r = Results {
            schema: JSON_SCHEMA,
            label: label.to_string(),
            timestamp: utc_timestamp(SystemTime::now()),
            source: source.to_string(),
            // An import's host is named from its CPU record, below.
            host: std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_else(|_| "localhost".into()),
            ..Results::default()
        };
        let mut samples: BTreeMap<String, (u64, Vec<u64>, usize)> = BTreeMap::new();
        let mut shares: BTreeMap<String, (Share, usize)> = BTreeMap::new();
        let mut ended: Option<(String, usize)> = None;
        // The line of the boot record, and the clock its command line names:
        // the host wrote that word (xtask, or the loader's configuration of
        // a real machine), so it decides the clock.
        let mut boot_line: Option<usize> = None;
        let mut host_clock: Option<String> = None;
        // The frequency each program's clock record gave (the kernel's
        // under `None`): its rates are ticks over it.
        let mut hz_of: BTreeMap<Option<String>, u64> = BTreeMap::new();
        // Each bench record's line and the frequency its rates stand on.
        let mut bench_at: Vec<(usize, u64)> = Vec::new();
        for rec in records {
            match rec.kind.as_str() {
                kind::BOOT => {
                    if let Some(first) = boot_line {
                        bail!(
                            "line {}: a second boot record (the first is on line {first}): this log holds more than one boot, and one run's figures come from one boot; cut it into one log per boot",
                            rec.line
                        );
                    }
                    boot_line = Some(rec.line);
                    r.rev = field(rec, "rev")?.into();
                    (r.dirty, r.diff) = dirty_of_rev(&r.rev);
                    r.cmdline = field(rec, "cmdline")?.into();
                    r.protocol = field(rec, "protocol")?.into();
                    for w in r.cmdline.split_whitespace() {
                        if let Some(a) = w.strip_prefix("accel=") {
                            r.accel = a.into();
                        }
                        // What the host booted (the last word counts, as in
                        // the kernel); a clock record may only agree, or
                        // say `none` (a CPU without a TSC).
                        if let Some(c) = w.strip_prefix("clock=") {
                            host_clock = Some(c.into());
                            r.clock = c.into();
                        }
                    }
                }
                kind::CPU => r.cpu = rec.fields.clone().into_iter().collect(),
                kind::SETTINGS => r.settings = rec.fields.clone().into_iter().collect(),
                kind::WARN => r.warnings.push(warning_text(rec)),
                kind::END => ended = Some((rec.get("status").unwrap_or("").to_string(), rec.line)),
                kind::MECH => r.mechanisms.push(Mech {
                    name: field(rec, "name")?.into(),
                    status: field(rec, "status")?.into(),
                    reason: rec.get("reason").unwrap_or("").into(),
                }),
                kind::PERF => r.perf.push(Perf {
                    status: field(rec, "status")?.into(),
                    reason: rec.get("reason").unwrap_or("").into(),
                }),
                kind::CLOCK => {
                    let c = field(rec, "clock")?;
                    if !CLOCK_KEYS.contains(&c) {
                        bail!(
                            "line {}: {} clock record: clock={c:?} is none of {}",
                            rec.line,
                            who(rec),
                            CLOCK_KEYS.join(", ")
                        );
                    }
                    if let Some(h) = host_clock.as_deref().filter(|h| c != *h && c != "none") {
                        bail!(
                            "line {}: {} clock record says clock={c}, but the host booted clock={h}: the host decides the clock, unit and accelerator, so the record is refused",
                            rec.line,
                            who(rec)
                        );
                    }
                    r.clock = c.into();
                    r.tsc_hz = check_clock(rec, c)?;
                    hz_of.insert(rec.get(abi::report::KEY_PROG).map(str::to_string), r.tsc_hz);
                    for (k, v) in &rec.fields {
                        if !matches!(k.as_str(), "clock" | "tsc_hz") {
                            r.timing.insert(k.clone(), v.clone());
                        }
                    }
                }
                kind::BENCH => {
                    r.benches.push(Bench {
                    name: field(rec, "name")?.into(),
                    mech: field(rec, "mech")?.into(),
                    path: field(rec, "path")?.into(),
                    call: field(rec, "call")?.into(),
                    measure: match rec.get("measure") {
                        None => Measure::PerOp,
                        Some(k) => Measure::from_key(k).ok_or_else(|| {
                            anyhow!(
                                "line {}: bench record: measure={k:?} is not per_op or throughput",
                                rec.line
                            )
                        })?,
                    },
                    unit: rec.get("unit").unwrap_or("").into(),
                    n: num(rec, "n")?,
                    min: real(rec, "min")?,
                    p25: real(rec, "p25")?,
                    median: real(rec, "median")?,
                    mean: real(rec, "mean")?,
                    p75: real(rec, "p75")?,
                    max: real(rec, "max")?,
                    sd: real(rec, "sd")?,
                    outliers: num(rec, "outliers")?,
                    instructions: optional_real(rec, "instructions")?,
                    cycles: optional_real(rec, "cycles")?,
                    cpus: match rec.get("cpus") {
                        None => vec![],
                        Some(list) => list
                            .split(',')
                            .map(|c| {
                                c.parse::<u32>().map_err(|_| {
                                    anyhow!(
                                        "line {}: bench record: cpus={list:?} is not a list of CPU numbers",
                                        rec.line
                                    )
                                })
                            })
                            .collect::<Result<Vec<_>>>()?,
                    },
                    share: None,
                    batch_size: 0,
                    samples: vec![],
                    model: None,
                    });
                    if let Some(b) = r.benches.last() {
                        check_bench_fields(rec, b)?;
                    }
                    bench_at.push((rec.line, frequency(&hz_of, rec, r.tsc_hz)));
                }
                kind::SHARE => {
                    let name = field(rec, "name")?.to_string();
                    let work = field(rec, "work")?;
                    let per_cpu: Vec<u64> = comma_list(field(rec, "per_cpu")?, |v| {
                        anyhow!("line {}: share of {name}: {v:?} is not a count", rec.line)
                    })?;
                    if per_cpu.iter().sum::<u64>() == 0 {
                        bail!(
                            "line {}: {} share record of {name}: no CPU did any work (a figure of nothing)",
                            rec.line,
                            who(rec)
                        );
                    }
                    if let Some((_, first)) = shares.get(&name) {
                        bail!(
                            "line {}: {} second share record of {name} (the first is on line {first})",
                            rec.line,
                            who(rec)
                        );
                    }
                    let mut share = Share::new(work, per_cpu);
                    share.parts = parts(rec, &name, share.per_cpu.len())?;
                    shares.insert(name, (share, rec.line));
                }
                kind::SAMPLES => {
                    let name = field(rec, "name")?.to_string();
                    let size = num(rec, "batch_size")?;
                    if size == 0 {
                        bail!(
                            "line {}: {} samples record of {name}: batch_size=0 (a batch of no operations has no per-operation figure)",
                            rec.line,
                            who(rec)
                        );
                    }
                    if let Some((_, _, first)) = samples.get(&name) {
                        bail!(
                            "line {}: {} second samples record of {name} (the first is on line {first}): which one holds the figures cannot be told",
                            rec.line,
                            who(rec)
                        );
                    }
                    let values: Vec<u64> = comma_list(field(rec, "values")?, |v| {
                        anyhow!("line {}: samples of {name}: {v:?} is not a count", rec.line)
                    })?;
                    samples.insert(name, (size, values, rec.line));
                }
                kind::MACRO => {
                    let m = Macro {
                        mech: field(rec, "mech")?.into(),
                        ops: num(rec, "ops")?,
                        ticks_per_op: real(rec, "ticks_per_op")?,
                        ops_per_s: real(rec, "ops_per_s")?,
                        syscalls_per_op: num(rec, "syscalls_per_op")?,
                        model: None,
                    };
                    check_macro(rec, &m, frequency(&hz_of, rec, r.tsc_hz))?;
                    r.macros.push(m);
                }
                _ => {}
            }
        }
        if r.accel.is_empty() {
            r.accel = "hw".into();
        }
        if source == IMPORT_SOURCE {
            r.host = host_of_signature(r.cpu.get("hypervisor").map(String::as_str));
        }
        r.unit = match r.clock() {
            Some(Clock::Tsc) if r.bochs() => abi::syscall::tsc_unit(abi::syscall::EMULATOR_BOCHS),
            Some(c) => c.unit(r.tcg()),
            None => "ticks",
        }
        .into();
        for (b, &(bench_line, hz)) in r.benches.iter_mut().zip(&bench_at) {
            let (size, values, line) = samples.remove(&b.name).ok_or_else(|| {
                anyhow!(
                    "benchmark {} has no samples record (a truncated log?)",
                    b.name
                )
            })?;
            if values.len() != b.n {
                bail!(
                    "line {line}: {} has {} samples, but the summary says n={}",
                    b.name,
                    values.len(),
                    b.n
                );
            }
            if b.measure == Measure::PerOp || b.unit.is_empty() {
                b.unit = r.unit.clone();
            }
            b.batch_size = size;
            b.samples = values;
            check_summary(b, bench_line, line, hz)?;
            if let Some((share, line)) = shares.remove(&b.name) {
                check_share(b, &share, line)?;
                b.share = Some(share);
            }
        }
        if let Some(name) = samples.keys().next() {
            bail!("samples for {name} without a bench record (a truncated log?)");
        }
        if let Some((name, (_, line))) = shares.iter().next() {
            bail!("line {line}: share of {name} without a bench record");
        }
        match ended {
            None => bail!(
                "the log ends before the kernel's end record (cut short?); missing: {}",
                r.missing().join(", ")
            ),
            Some((status, line)) if status != "success" => {
                bail!("line {line}: the kernel ended with status={status:?}, not success")
            }
            Some(_) => {}
        }
        report::check_origins(records, true).map_err(anyhow::Error::msg)?;
        Ok(r)
    }

    /// What a cut log lacks, for the error that says so: the end record,
    /// every usable mechanism the benchmark program had not measured yet,
    /// and its macro mix.
    fn missing(&self) -> Vec<String> {
        let mut m = vec!["the end record".to_string()];
        let words: Vec<&str> = self.cmdline.split_whitespace().collect();
        let bench_prog = !words
            .iter()
            .any(|w| w.starts_with("mode=") && *w != "mode=run")
            && words
                .iter()
                .rev()
                .find_map(|w| w.strip_prefix("prog="))
                .unwrap_or(abi::cmdline::DEFAULT_PROG)
                == abi::cmdline::DEFAULT_PROG;
        if bench_prog {
            for mech in self.mechanisms.iter().filter(|x| x.status == "ok") {
                if !self.benches.iter().any(|b| b.mech == mech.name) {
                    m.push(format!("the {} benchmarks", mech.name));
                }
            }
            if self.macros.is_empty() {
                m.push("the macro mix".into());
            }
        }
        m
    }
}

fn field<'a>(r: &'a Record, k: &str) -> Result<&'a str> {
    r.get(k)
        .ok_or_else(|| anyhow!("line {}: {} record without {k}", r.line, r.kind))
}

fn num<T: std::str::FromStr>(r: &Record, k: &str) -> Result<T> {
    let v = field(r, k)?;
    v.parse().map_err(|_| {
        anyhow!(
            "line {}: {} record: {k}={v:?} is not a number",
            r.line,
            r.kind
        )
    })
}

/// A figure: a finite number. `NaN` and `inf` parse as floats, but no
/// measurement is one, and JSON cannot hold them.
fn real(r: &Record, k: &str) -> Result<f64> {
    let x: f64 = num(r, k)?;
    if !x.is_finite() {
        bail!(
            "line {}: {} record: {k}={:?} is not a finite number",
            r.line,
            r.kind,
            field(r, k)?
        );
    }
    Ok(x)
}

/// An optional counter figure (`instructions`, `cycles`): `n/a` where the
/// CPU has no counters; anything else must be a finite number.
fn optional_real(r: &Record, k: &str) -> Result<Option<f64>> {
    match r.get(k) {
        None | Some("n/a") => Ok(None),
        Some(_) => real(r, k).map(Some),
    }
}

/// What a hypervisor signature in the CPU record says about where an
/// imported log ran (`none`: no hypervisor bit, a real machine).
pub fn host_of_signature(sig: Option<&str>) -> String {
    match sig.map(str::trim) {
        None | Some("") | Some("none") => "hardware".into(),
        Some("TCGTCGTCGTCG") => "QEMU TCG guest".into(),
        Some("KVMKVMKVM") => "KVM guest".into(),
        Some(s) => format!("{s} guest"),
    }
}

/// Who wrote a record, for an error that names it: a user program's
/// record carries its name (the kernel adds `prog=`), the kernel's none.
fn who(rec: &Record) -> String {
    match rec.get(abi::report::KEY_PROG) {
        Some(p) => format!("program {p}'s"),
        None => "the kernel's".into(),
    }
}

/// Where a share record says each CPU's part of each batch lies in the
/// model's snapshots (`stream`, `snap_first`, `snap_per_batch`: all three
/// or none; a list per CPU, as `per_cpu`); `None` in records that name no
/// snapshots (older logs, figures without them).
fn parts(rec: &Record, name: &str, cpus: usize) -> Result<Option<super::overlap::Parts>> {
    let keys = ["stream", "snap_first", "snap_per_batch"].map(|k| rec.get(k));
    let [Some(stream), Some(first), Some(per_batch)] = keys else {
        if keys.iter().any(Option::is_some) {
            bail!(
                "line {}: share of {name}: stream, snap_first and snap_per_batch come together",
                rec.line
            );
        }
        return Ok(None);
    };
    let stream = abi::model::stream_from_key(stream).ok_or_else(|| {
        anyhow!(
            "line {}: share of {name}: unknown snapshot stream {stream:?}",
            rec.line
        )
    })?;
    let list = |key: &str, v: &str| -> Result<Vec<u32>> {
        let l: Vec<u32> = comma_list(v, |_| {
            anyhow!(
                "line {}: share of {name}: {key}={v:?} is not a list of snapshot numbers",
                rec.line
            )
        })?;
        if l.len() != cpus {
            bail!(
                "line {}: share of {name}: {key} names {} CPUs, per_cpu {cpus}",
                rec.line,
                l.len()
            );
        }
        Ok(l)
    };
    let (first, per_batch) = (
        list("snap_first", first)?,
        list("snap_per_batch", per_batch)?,
    );
    if per_batch.first() != Some(&2) {
        bail!(
            "line {}: share of {name}: snap_per_batch {per_batch:?}: the timed CPU's part of a batch is its timed region, two snapshots",
            rec.line
        );
    }
    Ok(Some(super::overlap::Parts {
        stream,
        first,
        per_batch,
    }))
}

/// The numbers of a record's comma-separated field; `bad(item)` is the
/// error for an item that is not one.
fn comma_list<T: std::str::FromStr>(
    v: &str,
    bad: impl Fn(&str) -> anyhow::Error,
) -> Result<Vec<T>> {
    v.split(',')
        .map(|x| x.parse().map_err(|_| bad(x)))
        .collect()
}

/// A share must name a CPU for every CPU the record's threads ran on, and
/// give work only to CPUs they ran on.
fn check_share(b: &Bench, share: &Share, line: usize) -> Result<()> {
    for (c, &n) in share.per_cpu.iter().enumerate() {
        if n > 0 && !b.cpus.is_empty() && !b.cpus.contains(&(c as u32)) {
            bail!(
                "line {line}: share of {}: CPU {c} did {n} {} but the bench record says its threads ran on CPUs {:?}",
                b.name,
                share.work,
                b.cpus
            );
        }
    }
    if let Some(&c) = b.cpus.iter().find(|&&c| c as usize >= share.per_cpu.len()) {
        bail!(
            "line {line}: share of {}: no count for CPU {c}, where its threads ran",
            b.name
        );
    }
    Ok(())
}

/// A `bench` record's summary must be its samples': in order (min <= p25
/// <= median <= p75 <= max, the mean between min and max), and the same
/// numbers the guest's own summary gives for those samples (`abi::stats`
/// over `abi::report::Figure::value`, to the 4 decimals the record
/// prints): ticks per operation, or for a throughput operations per
/// second at the clock's frequency `hz`, every batch having taken time.
/// `bench_line` and `line`: the bench and samples records'.
fn check_summary(b: &Bench, bench_line: usize, line: usize, hz: u64) -> Result<()> {
    let order = [
        ("min", b.min),
        ("p25", b.p25),
        ("median", b.median),
        ("p75", b.p75),
        ("max", b.max),
    ];
    if let Some(w) = order.windows(2).find(|w| w[0].1 > w[1].1) {
        bail!(
            "line {bench_line}: benchmark {}: its summary says {}={} above {}={}: a summary that contradicts itself is refused",
            b.name,
            w[0].0,
            w[0].1,
            w[1].0,
            w[1].1
        );
    }
    if !(b.min..=b.max).contains(&b.mean) {
        bail!(
            "line {bench_line}: benchmark {}: its summary's mean={} lies outside min={} and max={}",
            b.name,
            b.mean,
            b.min,
            b.max
        );
    }
    if b.samples.is_empty() {
        return Ok(());
    }
    if b.measure == Measure::Throughput {
        if hz == 0 {
            bail!(
                "line {bench_line}: benchmark {} is a throughput, and no clock record gives the frequency that turns its ticks into a rate",
                b.name
            );
        }
        if let Some(i) = b.samples.iter().position(|&t| t == 0) {
            bail!(
                "line {line}: benchmark {}: batch {} took 0 ticks: a throughput of a batch that took no time is no rate",
                b.name,
                i + 1
            );
        }
    }
    let figure = abi::report::Figure {
        name: &b.name,
        mech: &b.mech,
        path: &b.path,
        call: &b.call,
        measure: b.measure,
        unit: &b.unit,
        batch_size: u32::try_from(b.batch_size).unwrap_or(u32::MAX),
        samples: &b.samples,
        tsc_hz: hz,
        counters: None,
        cpus: 0,
        snaps: None,
    };
    let mut vals = vec![0.0; b.samples.len()];
    let mut scratch = vec![0.0; vals.len()];
    let s = figure.summarize(&mut vals, &mut scratch);
    for (k, said, is) in [
        ("min", b.min, s.min),
        ("p25", b.p25, s.p25),
        ("median", b.median, s.median),
        ("mean", b.mean, s.mean),
        ("p75", b.p75, s.p75),
        ("max", b.max, s.max),
        ("sd", b.sd, s.sd),
        ("outliers", b.outliers as f64, s.outliers as f64),
    ] {
        // The record prints 4 decimals: a difference beyond the rounding
        // is a summary of other samples.
        if (said - is).abs() > 0.5e-4 * (1.0 + is.abs() * 1e-9) + 1e-9 {
            bail!(
                "line {line}: benchmark {}: the summary says {k}={said}, its samples give {k}={is:.4}: a summary that contradicts its samples is refused",
                b.name
            );
        }
    }
    Ok(())
}

/// The clocks a clock record may name: the guest's two, and `none` (a CPU
/// without a TSC, whose program measures nothing).
const CLOCK_KEYS: [&str; 3] = ["icount", "tsc", "none"];

/// The fastest time-stamp counter a clock record may claim, in Hz: no
/// CPU's runs at 100 GHz (the fastest run near 6).
pub const MAX_TSC_HZ: u64 = 100_000_000_000;

/// A clock record's figures: `tsc_hz` from 1 Hz to [`MAX_TSC_HZ`] (0 only
/// with `clock=none`, which has no counter), and where given `batches`
/// and `batch_size` within the kernel's bounds and `timer_overhead` a
/// count. Returns `tsc_hz`.
fn check_clock(rec: &Record, clock: &str) -> Result<u64> {
    let hz: u64 = num(rec, "tsc_hz")?;
    let bad = |why: String| -> Result<u64> {
        bail!("line {}: {} clock record: {why}", rec.line, who(rec))
    };
    match (clock, hz) {
        ("none", 0) => {}
        ("none", _) => return bad(format!(
            "tsc_hz={hz} with clock=none: a CPU without a time-stamp counter has no frequency"
        )),
        (_, 0) => return bad(format!(
            "tsc_hz=0: clock={clock} counts ticks, and a clock of no frequency turns no tick into a time or a rate"
        )),
        (_, hz) if hz > MAX_TSC_HZ => return bad(format!(
            "tsc_hz={hz}: faster than any time-stamp counter (at most {MAX_TSC_HZ} Hz)"
        )),
        _ => {}
    }
    for (k, most) in [
        ("batches", u64::from(abi::cmdline::MAX_BATCHES)),
        ("batch_size", u64::from(abi::cmdline::MAX_BATCH_SIZE)),
    ] {
        if rec.get(k).is_some() {
            let n: u64 = num(rec, k)?;
            if !(1..=most).contains(&n) {
                return bad(format!(
                    "{k}={n}: the kernel takes 1 to {most} (a batch of no operations has no per-operation figure)"
                ));
            }
        }
    }
    if rec.get("timer_overhead").is_some() {
        num::<u64>(rec, "timer_overhead")?;
    }
    Ok(hz)
}

/// What a bench record carries besides its summary: a standard deviation
/// and counter figures that are not negative, and no more outliers than
/// values.
fn check_bench_fields(rec: &Record, b: &Bench) -> Result<()> {
    let bad = |why: String| -> Result<()> {
        bail!(
            "line {}: {} bench record of {}: {why}",
            rec.line,
            who(rec),
            b.name
        )
    };
    if b.outliers > b.n {
        return bad(format!("outliers={} among n={} values", b.outliers, b.n));
    }
    for (k, v) in [
        ("sd", Some(b.sd)),
        ("instructions", b.instructions),
        ("cycles", b.cycles),
    ] {
        if let Some(v) = v.filter(|&v| v < 0.0) {
            return bad(format!("{k}={v}: a negative spread or count"));
        }
    }
    Ok(())
}

/// The frequency under a record's rates: its program's clock record's
/// (the kernel's for a record without `prog=`), else the boot's last.
fn frequency(hz_of: &BTreeMap<Option<String>, u64>, rec: &Record, last: u64) -> u64 {
    hz_of
        .get(&rec.get(abi::report::KEY_PROG).map(str::to_string))
        .copied()
        .unwrap_or(last)
}

/// A macro record's figures: every count at least 1, ticks per operation
/// above 0, and the rate those ticks give at the clock's frequency `hz`
/// (`ops_per_s = hz / ticks_per_op`, both printed to 4 decimals).
fn check_macro(rec: &Record, m: &Macro, hz: u64) -> Result<()> {
    let bad = |why: String| -> Result<()> {
        bail!(
            "line {}: {} macro record of {}: {why}",
            rec.line,
            who(rec),
            m.mech
        )
    };
    let batches: u64 = num(rec, "batches")?;
    for (k, n) in [
        ("ops", m.ops),
        ("batches", batches),
        ("syscalls_per_op", u64::from(m.syscalls_per_op)),
    ] {
        if n == 0 {
            return bad(format!("{k}=0: a mix of nothing"));
        }
    }
    if m.ticks_per_op <= 0.0 {
        return bad(format!(
            "ticks_per_op={}: an operation of system calls takes time",
            m.ticks_per_op
        ));
    }
    if m.ops_per_s <= 0.0 {
        return bad(format!(
            "ops_per_s={}: a rate of operations that took time is above 0",
            m.ops_per_s
        ));
    }
    if hz == 0 {
        return bad(format!(
            "ops_per_s={}, but no clock record gives a frequency to turn ticks into a rate",
            m.ops_per_s
        ));
    }
    // Each figure within half its last printed digit.
    const HALF: f64 = 0.5e-4;
    let hz = hz as f64;
    let most = if m.ticks_per_op > HALF {
        hz / (m.ticks_per_op - HALF)
    } else {
        f64::INFINITY
    };
    let least = hz / (m.ticks_per_op + HALF);
    if !(least - HALF..=most + HALF).contains(&m.ops_per_s) {
        return bad(format!(
            "ops_per_s={}, but ticks_per_op={} at tsc_hz={hz} is {:.4} operations per second",
            m.ops_per_s,
            m.ticks_per_op,
            hz / m.ticks_per_op
        ));
    }
    Ok(())
}

/// A `warn` record as the sentence the kernel printed beside it.
fn warning_text(rec: &Record) -> String {
    let key = rec.get("key").unwrap_or("?");
    match rec.get("value") {
        Some(v) => format!("{key}={v}: {}", rec.get("text").unwrap_or("warning")),
        None => format!("{key}: {}", rec.get("text").unwrap_or("warning")),
    }
}
