//! Reading the snapshot file the plugin writes (format: `abi::model`), so
//! that the host reads it with the same code that is tested against the
//! writer ([`crate::machine::Machine::report`]).

use std::collections::BTreeMap;

use crate::coherence::MAX_CPUS;
use crate::machine::Counters;
use crate::profile::Virt;

/// One `snap` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapLine {
    pub cpu: usize,
    pub stream: u16,
    pub seq: u64,
    /// The CPU's counters; the coherence ones and the IPIs are the whole
    /// machine's.
    pub counters: Counters,
    /// The CPU's modelled time (cycles plus waiting).
    pub clock: u64,
}

/// The numbers of a `snap` line, in the file's order: the counters, then
/// the clock ([`SnapLine::values`]).
pub const FIELDS: [&str; 14] = [
    "insns",
    "cycles",
    "l1_misses",
    "l2_misses",
    "tlb_misses",
    "tlb_flushes",
    "coherence_misses",
    "invalidations",
    "transfers",
    "invalidations_received",
    "upgrades",
    "ipis",
    "vm_exits",
    "clock",
];

impl SnapLine {
    /// Its numbers, in the order of [`FIELDS`].
    pub fn values(&self) -> [u64; FIELDS.len()] {
        let c = &self.counters;
        [
            c.insns,
            c.cycles,
            c.l1_misses,
            c.l2_misses,
            c.tlb_misses,
            c.tlb_flushes,
            c.coherence_misses,
            c.invalidations,
            c.transfers,
            c.invalidations_received,
            c.upgrades,
            c.ipis,
            c.vm_exits,
            self.clock,
        ]
    }
}

/// A whole file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    pub profile: String,
    pub virt: Virt,
    pub ncpus: usize,
    /// The `param` line: the profile's numbers, then the plugin's `pge`.
    pub params: BTreeMap<String, u64>,
    pub snaps: Vec<SnapLine>,
    /// The streams past the plugin's cap: (cpu, stream) to (kept,
    /// dropped) (`abi::model::MAX_SNAPS_PER_STREAM`).
    pub capped: BTreeMap<(usize, u16), (u64, u64)>,
    /// Events the plugin applied out of modelled-clock order because more
    /// than `limit` waited: (events, limit); (0, 0) without a `forced` line.
    pub forced: (u64, u64),
    /// (cpu, stream, seq) to the place in `snaps`.
    index: BTreeMap<(usize, u16, u64), usize>,
}

impl SnapshotFile {
    /// The `seq`-th snapshot of `stream` on `cpu`.
    pub fn find(&self, cpu: usize, stream: u16, seq: u64) -> Option<&SnapLine> {
        self.index.get(&(cpu, stream, seq)).map(|&i| &self.snaps[i])
    }

    /// The `param` line is the named profile's: every parameter of the
    /// embedded profile with its value, and the plugin's `pge` (0 or 1),
    /// nothing else. A file whose header names one profile and whose
    /// numbers are another's is refused, not labelled with the name.
    pub fn check_profile(&self) -> Result<(), String> {
        let p = crate::profile::find(&self.profile)?;
        let mut want: BTreeMap<&str, u64> = p
            .params()
            .into_iter()
            .map(|(k, v)| (k, u64::from(v)))
            .collect();
        match self.params.get("pge") {
            Some(&v) if v <= 1 => want.insert("pge", v),
            Some(v) => return Err(format!("param pge={v}: pge is 0 or 1")),
            None => return Err("the param line has no pge".into()),
        };
        for (k, v) in &self.params {
            match want.get(k.as_str()) {
                None => return Err(format!("param {k}={v}: profile {} has no {k}", p.name)),
                Some(w) if w != v => {
                    return Err(format!(
                        "param {k}={v}: profile {} has {k}={w} (the numbers are not the named profile's)",
                        p.name
                    ))
                }
                Some(_) => {}
            }
        }
        if let Some(k) = want.keys().find(|k| !self.params.contains_key(**k)) {
            return Err(format!("the param line has no {k} (profile {})", p.name));
        }
        Ok(())
    }
}

fn fields(line: &str, n: usize) -> Result<BTreeMap<&str, &str>, String> {
    line.split_whitespace()
        .skip(1)
        .map(|kv| {
            kv.split_once('=')
                .ok_or_else(|| format!("line {n}: {} is not key=value", quoted(kv)))
        })
        .collect()
}

/// `text` quoted for an error, its first 80 characters when it is longer
/// (a hostile file's line may be megabytes).
fn quoted(text: &str) -> String {
    match text.char_indices().nth(80) {
        None => format!("{text:?}"),
        Some((at, _)) => format!("{:?}... ({} bytes)", &text[..at], text.len()),
    }
}

fn num<T: std::str::FromStr>(f: &BTreeMap<&str, &str>, key: &str, n: usize) -> Result<T, String> {
    f.get(key)
        .ok_or_else(|| format!("line {n}: no {key}"))?
        .parse()
        .map_err(|_| format!("line {n}: {key} is not a number"))
}

/// The longest profile name a file may give (the embedded ones are a few
/// letters).
const MAX_PROFILE_NAME: usize = 64;

/// Parses a snapshot file; a missing header or `end` line (QEMU killed
/// before its exit) is an error, and so is a CPU count the model does not
/// run or a line about a CPU beyond it.
pub fn parse(text: &str) -> Result<SnapshotFile, String> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (n, head) = lines.next().ok_or("empty model file")?;
    if let Some(why) = head.strip_prefix("error ") {
        // The plugin refused to give figures, and says why.
        return Err(format!("the plugin gave no figures: {why}"));
    }
    if !head.starts_with("model1 ") {
        return Err(format!("line {n}: not a model1 file: {}", quoted(head)));
    }
    let h = fields(head, n)?;
    let mut file = SnapshotFile {
        profile: h.get("profile").ok_or("line 1: no profile")?.to_string(),
        virt: Virt::from_code(num::<u8>(&h, "virt", n)?)
            .ok_or_else(|| format!("line {n}: virt is 0, 1 or 2"))?,
        ncpus: num(&h, "ncpus", n)?,
        params: BTreeMap::new(),
        snaps: Vec::new(),
        capped: BTreeMap::new(),
        forced: (0, 0),
        index: BTreeMap::new(),
    };
    if file.profile.len() > MAX_PROFILE_NAME {
        return Err(format!(
            "line {n}: profile {}: no profile's name is that long",
            quoted(&file.profile)
        ));
    }
    if !(1..=MAX_CPUS).contains(&file.ncpus) {
        return Err(format!(
            "line {n}: ncpus={}: the model runs 1 to {MAX_CPUS} CPUs",
            file.ncpus
        ));
    }
    // A snapshot or cap of a CPU the file does not have.
    let no_such_cpu = |cpu: usize, n: usize, what: &str| -> Result<(), String> {
        if cpu >= file.ncpus {
            return Err(format!(
                "line {n}: {what} of CPU {cpu}, in a file of ncpus={}",
                file.ncpus
            ));
        }
        Ok(())
    };
    let mut ended = false;
    // The line of each snapshot, for the monotonicity check.
    let mut at: Vec<usize> = Vec::new();
    for (n, line) in lines {
        if ended {
            return Err(format!("line {n}: text after end"));
        }
        match line.split_whitespace().next() {
            Some("param") => {
                for (k, v) in fields(line, n)? {
                    let v = v
                        .parse()
                        .map_err(|_| format!("line {n}: param {k} is not a number"))?;
                    file.params.insert(k.to_string(), v);
                }
            }
            Some("snap") => {
                let f = fields(line, n)?;
                let counters = Counters {
                    insns: num(&f, "insns", n)?,
                    cycles: num(&f, "cycles", n)?,
                    l1_misses: num(&f, "l1_misses", n)?,
                    l2_misses: num(&f, "l2_misses", n)?,
                    tlb_misses: num(&f, "tlb_misses", n)?,
                    tlb_flushes: num(&f, "tlb_flushes", n)?,
                    coherence_misses: num(&f, "coherence_misses", n)?,
                    invalidations: num(&f, "invalidations", n)?,
                    transfers: num(&f, "transfers", n)?,
                    invalidations_received: num(&f, "invalidations_received", n)?,
                    upgrades: num(&f, "upgrades", n)?,
                    ipis: num(&f, "ipis", n)?,
                    vm_exits: num(&f, "vm_exits", n)?,
                };
                let snap = SnapLine {
                    cpu: num(&f, "cpu", n)?,
                    stream: num(&f, "stream", n)?,
                    seq: num(&f, "seq", n)?,
                    counters,
                    clock: num(&f, "clock", n)?,
                };
                no_such_cpu(snap.cpu, n, "a snapshot")?;
                let key = (snap.cpu, snap.stream, snap.seq);
                if file.index.insert(key, file.snaps.len()).is_some() {
                    return Err(format!(
                        "line {n}: snapshot {} of stream {} on CPU {} appears twice",
                        snap.seq, snap.stream, snap.cpu
                    ));
                }
                file.snaps.push(snap);
                at.push(n);
            }
            Some("capped") => {
                let f = fields(line, n)?;
                let key = (num(&f, "cpu", n)?, num(&f, "stream", n)?);
                no_such_cpu(key.0, n, "a capped line")?;
                let v = (num(&f, "kept", n)?, num(&f, "dropped", n)?);
                if file.capped.insert(key, v).is_some() {
                    return Err(format!("line {n}: a second capped line for one stream"));
                }
            }
            Some("forced") => {
                let f = fields(line, n)?;
                if file.forced != (0, 0) {
                    return Err(format!("line {n}: a second forced line"));
                }
                file.forced = (num(&f, "events", n)?, num(&f, "limit", n)?);
            }
            Some("end") => ended = true,
            _ => return Err(format!("line {n}: unknown line {}", quoted(line))),
        }
    }
    if !ended {
        return Err("model file has no end line (QEMU did not exit normally?)".into());
    }
    monotonic(&file, &at)?;
    Ok(file)
}

/// Running totals never go back: along each CPU's stream, in sequence
/// order, no number of a snapshot is below the one before it. (A
/// difference of two would otherwise wrap or be clamped to 0.)
fn monotonic(file: &SnapshotFile, at: &[usize]) -> Result<(), String> {
    let mut prev: Option<(&(usize, u16, u64), usize)> = None;
    for (key, &i) in &file.index {
        if let Some((pk, pi)) = prev {
            if (pk.0, pk.1) == (key.0, key.1) {
                let (a, b) = (file.snaps[pi].values(), file.snaps[i].values());
                if let Some(f) = (0..FIELDS.len()).find(|&f| b[f] < a[f]) {
                    return Err(format!(
                        "line {}: snapshot {} of stream {} on CPU {} has {}={}, below snapshot {}'s {} (line {}): running totals never go back",
                        at[i], key.2, key.1, key.0, FIELDS[f], b[f], pk.2, a[f], at[pi]
                    ));
                }
            }
        }
        prev = Some((key, i));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::{Machine, Options};
    use crate::profile::find;
    use abi::model::{marker_disp, SNAP_USER};

    #[test]
    fn reads_what_the_machine_writes() {
        let mut m = Machine::new(
            find("core2").unwrap(),
            Options {
                virt: Virt::Shadow,
                pge: false,
            },
            1,
        )
        .unwrap();
        let d = marker_disp(SNAP_USER).to_le_bytes();
        let snap = m.decode(&[0x0f, 0x1f, 0x80, d[0], d[1], d[2], d[3]], 0x0010_0000);
        let nop = m.decode(&[0x90], 0x0010_0000);
        m.exec(0, &snap);
        m.exec(0, &nop);
        m.exec(0, &snap);
        let text = m.report(1);
        let f = parse(&text).unwrap();
        // The numbers of a snap line come in the order of FIELDS.
        let line = text.lines().find(|l| l.starts_with("snap")).unwrap();
        let keys: Vec<&str> = line
            .split_whitespace()
            .skip(4)
            .map(|kv| kv.split('=').next().unwrap())
            .collect();
        assert_eq!(keys, FIELDS);
        assert_eq!(f.snaps[0].values()[1], f.snaps[0].counters.cycles);
        assert_eq!(
            (f.profile.as_str(), f.virt, f.ncpus),
            ("core2", Virt::Shadow, 1)
        );
        assert_eq!(f.params["l2_shared"], 1);
        assert_eq!(f.params["pge"], 0);
        assert_eq!(f.snaps.len(), 2);
        let (a, b) = (
            f.find(0, SNAP_USER, 0).unwrap(),
            f.find(0, SNAP_USER, 1).unwrap(),
        );
        assert_eq!(b.counters.insns - a.counters.insns, 2);
        assert_eq!(b.counters.cycles - a.counters.cycles, m.counters(0).cycles);
        assert_eq!(b.clock, b.counters.cycles, "one CPU never waits");
    }

    #[test]
    fn events_forced_out_of_clock_order_are_written_and_read_back() {
        let mut m = Machine::new(find("p4").unwrap(), Options::default(), 2).unwrap();
        let none = m.report(2);
        assert!(
            !none.contains("forced"),
            "no line while every event was in order"
        );
        assert_eq!(parse(&none).unwrap().forced, (0, 0));
        m.set_forced(12);
        let text = m.report(2);
        let f = parse(&text).unwrap();
        assert_eq!(f.forced, (12, crate::machine::MAX_BUFFERED as u64));
        let twice = text.replace("end", "forced events=1 limit=2\nend");
        assert!(parse(&twice).unwrap_err().contains("a second forced line"));
        let bad = none.replace("end", "forced events=x limit=2\nend");
        assert!(parse(&bad).unwrap_err().contains("events is not a number"));
    }

    #[test]
    fn a_truncated_or_foreign_file_is_an_error() {
        let m = Machine::new(find("p3").unwrap(), Options::default(), 1).unwrap();
        let text = m.report(1);
        assert!(parse(text.trim_end().trim_end_matches("end"))
            .unwrap_err()
            .contains("no end"));
        assert!(parse("").is_err());
        assert!(parse("model2 profile=x\nend\n")
            .unwrap_err()
            .contains("not a model1"));
        assert!(parse(&text.replace("end", "snap cpu=x\nend")).is_err());
        let snap = "snap cpu=0 stream=1 seq=0 insns=1 cycles=1 l1_misses=0 l2_misses=0 tlb_misses=0 tlb_flushes=0 coherence_misses=0 invalidations=0 transfers=0 invalidations_received=0 upgrades=0 ipis=0 vm_exits=0 clock=1\n";
        let twice = text.replace("end", &format!("{snap}{snap}end"));
        assert!(parse(&twice).unwrap_err().contains("appears twice"));
        // A snapshot without its IPIs (an older plugin's) is refused, not
        // read as none sent.
        let with = |line: String| text.replace("end", &format!("{line}end"));
        let old = with(snap.replace(" ipis=0", ""));
        assert_eq!(parse(&old).unwrap_err(), "line 3: no ipis");
        let bad = with(snap.replace("ipis=0", "ipis=x"));
        assert_eq!(parse(&bad).unwrap_err(), "line 3: ipis is not a number");
        assert_eq!(
            parse(&with(snap.replace("ipis=0", "ipis=7")))
                .unwrap()
                .snaps[0]
                .counters
                .ipis,
            7
        );
    }

    /// Two snapshots of one stream, the second with `insns` and `cycles`.
    fn two_snaps(insns: u64, cycles: u64) -> String {
        let m = Machine::new(find("p3").unwrap(), Options::default(), 1).unwrap();
        let snap = |seq: u32, insns: u64, cycles: u64| {
            format!("snap cpu=0 stream=1 seq={seq} insns={insns} cycles={cycles} l1_misses=0 l2_misses=0 tlb_misses=0 tlb_flushes=0 coherence_misses=0 invalidations=0 transfers=0 invalidations_received=0 upgrades=0 ipis=0 vm_exits=0 clock={cycles}\n")
        };
        // The later snapshot first in the file: the order that counts is
        // the sequence's.
        m.report(1).replace(
            "end",
            &format!("{}{}end", snap(1, insns, cycles), snap(0, 10, 100)),
        )
    }

    /// Past the cap a stream's markers are counted, not kept, and the file
    /// says so; a guest looping on markers cannot grow it without bound.
    #[test]
    fn snapshots_past_the_cap_are_counted_not_kept() {
        use abi::model::MAX_SNAPS_PER_STREAM;
        let mut m = Machine::new(find("p3").unwrap(), Options::default(), 1).unwrap();
        let d = marker_disp(SNAP_USER).to_le_bytes();
        let snap = m.decode(&[0x0f, 0x1f, 0x80, d[0], d[1], d[2], d[3]], 0x0010_0000);
        for _ in 0..MAX_SNAPS_PER_STREAM + 5 {
            m.exec(0, &snap);
        }
        assert_eq!(m.snaps().len() as u64, MAX_SNAPS_PER_STREAM);
        assert_eq!(m.capped(), [(0, SNAP_USER, 5)]);
        let f = parse(&m.report(1)).unwrap();
        assert_eq!(f.capped[&(0, SNAP_USER)], (MAX_SNAPS_PER_STREAM, 5));
        assert!(f.find(0, SNAP_USER, MAX_SNAPS_PER_STREAM - 1).is_some());
        assert!(f.find(0, SNAP_USER, MAX_SNAPS_PER_STREAM).is_none());
        // Below the cap: no capped line, the file as before.
        let mut m = Machine::new(find("p3").unwrap(), Options::default(), 1).unwrap();
        m.exec(0, &snap);
        assert!(!m.report(1).contains("capped") && m.capped().is_empty());
    }

    #[test]
    fn a_snapshot_that_goes_back_is_refused() {
        assert!(parse(&two_snaps(20, 150)).is_ok());
        assert!(parse(&two_snaps(10, 100)).is_ok(), "equal is not back");
        let e = parse(&two_snaps(20, 99)).unwrap_err();
        assert!(e.contains("cycles=99, below snapshot 0's 100"), "{e}");
        let e = parse(&two_snaps(9, 150)).unwrap_err();
        assert!(e.contains("insns=9"), "{e}");
    }

    #[test]
    fn the_params_must_be_the_named_profiles() {
        let m = Machine::new(find("modern").unwrap(), Options::default(), 1).unwrap();
        let text = m.report(1);
        assert_eq!(parse(&text).unwrap().check_profile(), Ok(()));
        // The header renamed, the numbers modern's: refused.
        let renamed = text.replacen("profile=modern", "profile=p4", 1);
        let e = parse(&renamed).unwrap().check_profile().unwrap_err();
        assert!(e.contains("the numbers are not the named profile's"), "{e}");
        // One number changed.
        let l2 = find("modern").unwrap().l2_latency;
        let edited = text.replacen(
            &format!(" l2_latency={l2} "),
            &format!(" l2_latency={} ", l2 + 1),
            1,
        );
        assert_ne!(edited, text);
        assert!(parse(&edited).unwrap().check_profile().is_err());
        // A parameter dropped, one added, pge out of range, no such profile.
        let dropped = text.replacen(&format!(" l2_latency={l2}"), "", 1);
        assert!(parse(&dropped)
            .unwrap()
            .check_profile()
            .unwrap_err()
            .contains("no l2_latency"));
        let added = text.replacen(" pge=", " extra=1 pge=", 1);
        assert!(parse(&added)
            .unwrap()
            .check_profile()
            .unwrap_err()
            .contains("has no extra"));
        let pge = text.replacen(" pge=0", " pge=7", 1);
        assert!(parse(&pge).unwrap().check_profile().is_err());
        let unknown = text.replacen("profile=modern", "profile=nosuch", 1);
        assert!(parse(&unknown)
            .unwrap()
            .check_profile()
            .unwrap_err()
            .contains("unknown profile"));
    }

    /// A CPU count the model does not run, and snapshots of a CPU beyond
    /// the count, are refused (`ncpus=0` was imported and stored, and so
    /// was `ncpus=4000000000`, a table row of "MP (4000000000 CPUs)"); so
    /// is a profile name of megabytes, and a long line is quoted cut.
    #[test]
    fn cpus_beyond_the_file_s_count_are_refused() {
        let snap = |cpu: usize| {
            format!("snap cpu={cpu} stream=1 seq=0 insns=1 cycles=1 l1_misses=0 l2_misses=0 tlb_misses=0 tlb_flushes=0 coherence_misses=0 invalidations=0 transfers=0 invalidations_received=0 upgrades=0 ipis=0 vm_exits=0 clock=1\n")
        };
        let file = |ncpus: &str, body: &str| {
            format!("model1 profile=p4 virt=0 ncpus={ncpus}\n{body}end\n")
        };
        assert_eq!(parse(&file("2", &(snap(0) + &snap(1)))).unwrap().ncpus, 2);
        for (ncpus, body, says) in [
            (
                "0",
                String::new(),
                "line 1: ncpus=0: the model runs 1 to 16 CPUs",
            ),
            (
                "4000000000",
                String::new(),
                "line 1: ncpus=4000000000: the model runs 1 to 16 CPUs",
            ),
            (
                "2",
                snap(2),
                "line 2: a snapshot of CPU 2, in a file of ncpus=2",
            ),
            (
                "1",
                "capped cpu=1 stream=1 kept=1 dropped=1\n".to_string(),
                "line 2: a capped line of CPU 1, in a file of ncpus=1",
            ),
        ] {
            let e = parse(&file(ncpus, &body)).unwrap_err();
            assert_eq!(e, says);
        }
        let long = format!(
            "model1 profile={} virt=0 ncpus=1\nend\n",
            "[".repeat(40_000)
        );
        let e = parse(&long).unwrap_err();
        assert!(
            e.starts_with("line 1: profile \"[[[[")
                && e.ends_with("... (40000 bytes): no profile's name is that long"),
            "{e}"
        );
        let e = parse(&file("1", &format!("{}\n", "x".repeat(1 << 20)))).unwrap_err();
        assert!(e.len() < 200, "{e}");
    }
}
