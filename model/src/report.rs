//! Reading the snapshot file the plugin writes (format: `abi::model`), so
//! that the host reads it with the same code that is tested against the
//! writer ([`crate::machine::Machine::report`]).

use std::collections::BTreeMap;

use crate::machine::Counters;

/// One `snap` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SnapLine {
    pub cpu: usize,
    pub stream: u16,
    pub seq: u64,
    /// The CPU's counters; the coherence ones are the whole machine's.
    pub counters: Counters,
    /// The CPU's modelled time (cycles plus waiting).
    pub clock: u64,
}

/// The numbers of a `snap` line, in the file's order: the counters, then
/// the clock ([`SnapLine::values`]).
pub const FIELDS: [&str; 12] = [
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
            self.clock,
        ]
    }
}

/// A whole file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotFile {
    pub profile: String,
    pub virt: bool,
    pub ncpus: usize,
    /// The `param` line: the profile's numbers, then the plugin's `pge`.
    pub params: BTreeMap<String, u64>,
    pub snaps: Vec<SnapLine>,
    /// (cpu, stream, seq) to the place in `snaps`.
    index: BTreeMap<(usize, u16, u64), usize>,
}

impl SnapshotFile {
    /// The `seq`-th snapshot of `stream` on `cpu`.
    pub fn find(&self, cpu: usize, stream: u16, seq: u64) -> Option<&SnapLine> {
        self.index.get(&(cpu, stream, seq)).map(|&i| &self.snaps[i])
    }
}

fn fields(line: &str, n: usize) -> Result<BTreeMap<&str, &str>, String> {
    line.split_whitespace()
        .skip(1)
        .map(|kv| {
            kv.split_once('=')
                .ok_or_else(|| format!("line {n}: {kv:?} is not key=value"))
        })
        .collect()
}

fn num<T: std::str::FromStr>(f: &BTreeMap<&str, &str>, key: &str, n: usize) -> Result<T, String> {
    f.get(key)
        .ok_or_else(|| format!("line {n}: no {key}"))?
        .parse()
        .map_err(|_| format!("line {n}: {key} is not a number"))
}

/// Parses a snapshot file; a missing header or `end` line (QEMU killed
/// before its exit) is an error.
pub fn parse(text: &str) -> Result<SnapshotFile, String> {
    let mut lines = text.lines().enumerate().map(|(i, l)| (i + 1, l));
    let (n, head) = lines.next().ok_or("empty model file")?;
    if !head.starts_with("model1 ") {
        return Err(format!("line {n}: not a model1 file: {head:?}"));
    }
    let h = fields(head, n)?;
    let mut file = SnapshotFile {
        profile: h.get("profile").ok_or("line 1: no profile")?.to_string(),
        virt: num::<u8>(&h, "virt", n)? == 1,
        ncpus: num(&h, "ncpus", n)?,
        params: BTreeMap::new(),
        snaps: Vec::new(),
        index: BTreeMap::new(),
    };
    let mut ended = false;
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
                };
                let snap = SnapLine {
                    cpu: num(&f, "cpu", n)?,
                    stream: num(&f, "stream", n)?,
                    seq: num(&f, "seq", n)?,
                    counters,
                    clock: num(&f, "clock", n)?,
                };
                let key = (snap.cpu, snap.stream, snap.seq);
                if file.index.insert(key, file.snaps.len()).is_some() {
                    return Err(format!(
                        "line {n}: snapshot {} of stream {} on CPU {} appears twice",
                        snap.seq, snap.stream, snap.cpu
                    ));
                }
                file.snaps.push(snap);
            }
            Some("end") => ended = true,
            _ => return Err(format!("line {n}: unknown line {line:?}")),
        }
    }
    if !ended {
        return Err("model file has no end line (QEMU did not exit normally?)".into());
    }
    Ok(file)
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
                virt: true,
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
        assert_eq!((f.profile.as_str(), f.virt, f.ncpus), ("core2", true, 1));
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
        let snap = "snap cpu=0 stream=1 seq=0 insns=1 cycles=1 l1_misses=0 l2_misses=0 tlb_misses=0 tlb_flushes=0 coherence_misses=0 invalidations=0 transfers=0 invalidations_received=0 upgrades=0 clock=1\n";
        let twice = text.replace("end", &format!("{snap}{snap}end"));
        assert!(parse(&twice).unwrap_err().contains("appears twice"));
    }
}
