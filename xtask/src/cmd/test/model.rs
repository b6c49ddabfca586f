//! The model clock's boot tests, part of `cargo xtask test`: real boots
//! under QEMU with the model plugin loaded.
//!
//! - The pointer chase (`prog=chase`) shows, under every profile, the misses
//!   the profile's geometry predicts: none for a working set that fits L1
//!   (after the warm-up batch), one L1 miss per load and no L2 miss for one
//!   between L1 and L2.
//! - Two model boots give byte-identical records and plugin files, on one
//!   CPU (the benchmark driver, its macro mix modelled too) and with `mode=smp` on 2 and on 4 CPUs.
//! - Across CPUs: words of two CPUs in one line make it move between their
//!   caches; words 64 bytes apart (with the pair prefetch on: `p4`) and
//!   4 KiB apart cause no coherence miss after the warm-up batch; a remote
//!   shootdown takes at least the IPI's send, flight and delivery.
//! - forktest flushes the TLB exactly as often a round as each `pmap=`
//!   strategy's code does.
//! - lmbench's `lat_ctx` rings spread over 2 CPUs send one reschedule IPI
//!   per hand-off, exactly; on 1 CPU none.
//! - An unknown profile is refused before booting, with the known ones.
//! - A saved model run imports back with its figures (`import --model`).
//! - The plugin with its debug assertions on (the model's ordering window
//!   checks its invariant at every entry point) runs a 2-CPU boot without a
//!   failed check, and gives the release plugin's file.

use std::path::{Path, PathBuf};
use std::time::Instant;

use abi::model::chase::{SETS, STRIDE};
use anyhow::{bail, ensure, Context, Result};

use crate::cmd::{test_boot_args, VirtArg};
use crate::kbuild::{self, Artifacts};
use crate::machine::{BootLog, Clock, Machine};
use crate::model;
use crate::results::Results;

use super::unit::Test;

/// Lines the code between a chase batch's loop and its closing snapshot
/// touches (stack and the chase's position): L1 misses a thrashing chase
/// may add per batch beyond one per load.
const HARNESS_LINES: u64 = 4;

/// One model boot: the serial log, the plugin's file as text, the results
/// with the model merged.
fn boot(
    art: &Artifacts,
    dir: &Path,
    words: &str,
    profile: &str,
) -> Result<(BootLog, String, Results)> {
    boot_on(art, dir, words, profile, 1)
}

fn boot_on(
    art: &Artifacts,
    dir: &Path,
    words: &str,
    profile: &str,
    cpus: u32,
) -> Result<(BootLog, String, Results)> {
    boot_full(art, dir, words, profile, How::on(cpus))
}

/// How a model boot runs, beyond its command line and profile.
#[derive(Clone, Copy)]
struct How {
    cpus: u32,
    /// As `--virt` says (`None`: bare).
    virt: Option<VirtArg>,
    /// The plugin in its reference mode (every instruction a call).
    reference: bool,
    /// The turn pacer's grain, as `--turn` says (`None`: its default).
    turn: Option<u32>,
    /// A real boot, never read back from the run's cache: for the tests
    /// whose point is to boot again.
    fresh: bool,
}

impl How {
    /// A boot on `cpus` CPUs, bare, the fast plugin, the default grain,
    /// through the run's cache.
    fn on(cpus: u32) -> How {
        How {
            cpus,
            virt: None,
            reference: false,
            turn: None,
            fresh: false,
        }
    }

    /// As [`How::on`], a real boot.
    fn fresh_on(cpus: u32) -> How {
        How {
            fresh: true,
            ..How::on(cpus)
        }
    }
}

/// One model boot as `how` says.
fn boot_full(
    art: &Artifacts,
    dir: &Path,
    words: &str,
    profile: &str,
    how: How,
) -> Result<(BootLog, String, Results)> {
    let reference = how.reference;
    let (log, text, r, _) = boot_lib(
        art,
        dir,
        words,
        profile,
        how,
        |o| o.reference = reference,
        None,
    )?;
    Ok((log, text, r))
}

/// [`boot_full`] with the plugin's options as `plugin` sets them and the
/// plugin library at `lib` (`None`: the release build); also the path of the
/// plugin's file (read, and removed).
fn boot_lib(
    art: &Artifacts,
    dir: &Path,
    words: &str,
    profile: &str,
    how: How,
    plugin: impl FnOnce(&mut model::ModelOpts),
    lib: Option<PathBuf>,
) -> Result<(BootLog, String, Results, PathBuf)> {
    let mut a = test_boot_args(None);
    a.smp = how.cpus;
    a.turn = how.turn;
    a.virt = how.virt;
    a.clock = Some(Clock::Model);
    a.profile = Some(profile.to_string());
    a.timeout = 300;
    let mut spec = a.spec()?;
    if let Some(o) = &mut spec.model {
        plugin(o);
    }
    let mut m = Machine::build(&spec, art, words, dir)?;
    if let (Some(p), Some(lib)) = (&mut m.model, lib) {
        p.lib = lib;
    }
    let log = if how.fresh {
        m.boot_fresh(&mut |_| {})?
    } else {
        m.boot(&mut |_| {})?
    };
    if !log.succeeded() {
        bail!("{}", log.explain(20));
    }
    let mut r = Results::from_log(&log.serial, "model", m.backend.source())?;
    let text = model::finish(m.model.as_ref(), &log.serial, &mut r)?
        .context("a model boot without its file")?;
    let out = m.model.as_ref().map(|p| p.out.clone()).unwrap_or_default();
    Ok((log, text, r, out))
}

/// A profile parameter the plugin reported, as a number.
fn param(r: &Results, key: &str) -> Result<u64> {
    r.model_params
        .get(key)
        .and_then(|v| v.parse().ok())
        .with_context(|| format!("the plugin reported no parameter {key}"))
}

/// What the geometry predicts for the chase over `bytes`, per load, after
/// the warm-up: (L1 misses, L2 misses). A cyclic walk over more lines than
/// an LRU set holds misses on every access; one that fits misses nothing.
/// Every load has a line of its own (STRIDE >= line), and the working sets
/// cover whole pages, so each cache set sees the same number of lines.
/// Returns an error where the working set sits too close to a cache size
/// for the prediction to be clear-cut: the chase must then change, never
/// the profile.
fn predicted(r: &Results, bytes: u64) -> Result<(f64, f64)> {
    let (line, l1, l2) = (
        param(r, "line")?,
        param(r, "l1d_size")?,
        param(r, "l2_size")?,
    );
    ensure!(
        line <= STRIDE as u64,
        "line {line} is larger than the chase's stride {STRIDE}"
    );
    // Lines the chase keeps in L2: its own, plus the other line of each
    // 128-byte pair where the adjacent-line prefetch brings it in.
    let pair = param(r, "pair_prefetch")? != 0;
    let l2_footprint = if pair {
        bytes
    } else {
        bytes / STRIDE as u64 * line
    };
    let l1_miss = if bytes * 2 <= l1 {
        0.0
    } else if bytes >= 2 * l1 {
        1.0
    } else {
        bail!("a {bytes}-byte working set is too close to the {l1}-byte L1");
    };
    ensure!(
        l2_footprint * 2 <= l2,
        "a {bytes}-byte working set does not fit the {l2}-byte L2 with room to spare"
    );
    Ok((l1_miss, 0.0))
}

fn chase_under(art: &Artifacts, dir: &Path, profile: &str) -> Result<String> {
    // Two passes over the largest chain per batch: the warm-up batch alone
    // fills the caches.
    let size = 2 * SETS.iter().max().copied().unwrap_or(0) / STRIDE;
    let words = format!("mode=run prog=chase batches=4 batch_size={size}");
    let (_, _, r) = boot(art, dir, &words, profile)?;
    let mut seen = Vec::new();
    for bytes in SETS {
        let name = format!("chase.{}k", bytes >> 10);
        let b = r
            .bench(&name)
            .with_context(|| format!("no benchmark {name}"))?;
        let m = b
            .model
            .as_ref()
            .with_context(|| format!("{name} has no model figures"))?;
        let (l1, l2) = predicted(&r, bytes as u64)?;
        // Every batch, not only the median: each load misses or none does.
        // A chase that misses L1 on every load has also evicted what the
        // code after its loop touches before the closing snapshot (the
        // saved registers and return address, the chase's position), which
        // the calibration run finds in L1: at most HARNESS_LINES more.
        let want = |per_load: f64| (per_load * size as f64) as u64;
        for (counter, per_load) in [("l1_misses", l1), ("l2_misses", l2)] {
            let got = &m.samples[counter];
            let slack = if per_load > 0.0 { HARNESS_LINES } else { 0 };
            ensure!(
                got.iter().all(|v| (want(per_load)..=want(per_load) + slack).contains(v)),
                "{profile}: {name}: {counter} per batch {got:?}, the geometry predicts {} ({per_load} per load, {size} loads{})",
                want(per_load),
                if slack > 0 { format!(", plus at most {slack} for the code around the loop") } else { String::new() }
            );
        }
        seen.push(format!(
            "{name} L1 {:.3} L2 {:.3} per load",
            m.l1_misses, m.l2_misses
        ));
    }
    Ok(seen.join(", "))
}

/// Two boots of the benchmark driver under the model: the same records,
/// the same plugin file, byte for byte; every call benchmark's instructions
/// icount's; the macro mix's a batch icount's plus one constant, which is
/// returned.
fn deterministic(art: &Artifacts, dir: &Path) -> Result<i64> {
    let words = "mode=run prog=bench batches=3 batch_size=64";
    let r = boot_twice(art, dir, words, model::DEFAULT_PROFILE, 1)?;
    // The pairing of snapshots and batches, checked against icount: the
    // model's own instruction count per call is the guest's.
    let mut modelled = 0;
    for b in &r.benches {
        let m = b
            .model
            .as_ref()
            .with_context(|| format!("{} has no model figures", b.name))?;
        ensure!(
            m.insns == b.median,
            "{}: the model counted {} instructions per call, icount {}",
            b.name,
            m.insns,
            b.median
        );
        modelled += 1;
    }
    ensure!(modelled > 0, "no benchmark has model figures");
    // The macro mix: its ticks keep the timer's own instructions (the
    // guest subtracts no overhead from them), the model's count keeps the
    // loop's setup outside the timer pair and loses the timer's to its
    // calibration. So per batch the two differ by one constant: the same in
    // every batch and for every mechanism (the code around the loop is the
    // same), a few instructions, never the loop's own.
    ensure!(!r.macros.is_empty(), "no macro mix");
    let mut apart = Vec::new();
    for x in &r.macros {
        let m = x
            .model
            .as_ref()
            .with_context(|| format!("{} has no model figures", x.name()))?;
        let batches = &m.samples["insns"];
        let ticks = x.ticks_per_op * x.ops as f64;
        ensure!(
            ticks.fract() == 0.0 && batches.iter().all(|&b| b == batches[0]),
            "{}: icount {ticks} instructions a batch, the model {batches:?}: not whole and the same in every batch",
            x.name()
        );
        apart.push((x.name(), batches[0] as i64 - ticks as i64));
    }
    let d = apart[0].1;
    ensure!(
        apart.iter().all(|(_, x)| *x == d) && d.unsigned_abs() <= MACRO_BATCH_APART,
        "the macro mix: the model's instructions a batch minus icount's, per mechanism: {apart:?}; expected one constant for all, at most {MACRO_BATCH_APART}"
    );
    Ok(d)
}

/// How far apart icount's and the model's instructions a batch of the
/// macro mix may be: the timer's and the setup's instructions, a few.
const MACRO_BATCH_APART: u64 = 32;

/// The report records in a boot's serial output, in order.
fn records(log: &BootLog) -> Vec<String> {
    log.serial
        .lines()
        .filter(|l| l.contains(abi::report::MARKER))
        .map(str::to_string)
        .collect()
}

/// Boots `words` twice on `cpus` CPUs under `profile`: the two boots'
/// records and plugin files must be byte-identical; the results of one.
///
/// On several CPUs a third boot decides when the two differ: such a boot
/// (the CPUs in turns on QEMU's one host thread) is the same from boot to
/// boot nearly always, not always
/// ([`crate::machine::replay::takes_turns`]). The third
/// must be byte-identical to one of the two, and the test says on stderr
/// that it was needed; two differences in three boots fail.
fn boot_twice(
    art: &Artifacts,
    dir: &Path,
    words: &str,
    profile: &str,
    cpus: u32,
) -> Result<Results> {
    // Real boots, never the run's boot cache's: the test is that boots
    // agree.
    let boot = || boot_full(art, dir, words, profile, How::fresh_on(cpus));
    let (a, fa, r) = boot()?;
    let (b, fb, rb) = boot()?;
    let (ka, kb) = ((records(&a), fa), (records(&b), fb));
    if ka == kb {
        return Ok(r);
    }
    if cpus > 1 {
        let (c, fc, _) = boot()?;
        let kc = (records(&c), fc);
        if kc == ka || kc == kb {
            crate::machine::replay::note_moved(format!(
                "model: {profile}, {cpus} CPUs, {words}: two boots differed, a third is \
                 byte-identical to the {}",
                if kc == ka { "first" } else { "second" }
            ));
            return Ok(if kc == ka { r } else { rb });
        }
        bail!("{profile}, {cpus} CPUs: three boots, no two byte-identical");
    }
    ensure!(
        ka.0 == kb.0,
        "{profile}, {cpus} CPUs: the two boots' records differ"
    );
    bail!("{profile}, {cpus} CPUs: the two boots' plugin files differ")
}

/// One boot whose plugin (library `lib`, `None`: the release build) runs
/// the reference machine beside the fast one (`reference=shadow`): the fast
/// machine's file and the reference machine's (read, and removed).
fn boot_shadow(
    art: &Artifacts,
    dir: &Path,
    words: &str,
    profile: &str,
    cpus: u32,
    lib: Option<PathBuf>,
) -> Result<(String, String)> {
    let (_, fast, _, out) = boot_lib(
        art,
        dir,
        words,
        profile,
        How::fresh_on(cpus),
        |o| o.shadow = true,
        lib,
    )?;
    let shadow = ::model::shadow_path(&out);
    let reference = std::fs::read_to_string(&shadow)
        .with_context(|| format!("the plugin wrote no {}", shadow.display()))?;
    let _ = std::fs::remove_file(&shadow);
    Ok((fast, reference))
}

/// The plugin's fast counting (runs of instructions counted by QEMU's
/// inline adds, placed in clock order one by one on several CPUs) against
/// its reference mode (every instruction a call, as before the runs): the
/// plugin files of `words` on `cpus` CPUs under `profile` must be
/// byte-identical. On one CPU two boots, the reference one `reference=on`,
/// whose records must be identical too. On several, one boot whose plugin
/// runs the reference machine beside the fast one (`reference=shadow`): a
/// `reference=on` boot's calls end QEMU's blocks elsewhere, and at the
/// pacer's grain QEMU then hands the vCPUs their turns at other
/// instructions (in the locks boot under p4 first at CPU 0's `hlt` in the
/// idle loop, some 200 million events in: one boot switched to CPU 1
/// there, the other ran CPU 0 on into its interrupt), so the two models
/// ordered different streams (each CPU's event for event the same, their
/// interleaving not: 3 coherence misses of some 198,000 apart in one
/// snapshot). Says how long the boots took.
fn fast_is_reference(
    art: &Artifacts,
    dir: &Path,
    words: &str,
    profile: &str,
    cpus: u32,
) -> Result<String> {
    let t = Instant::now();
    if cpus > 1 {
        let (fa, fb) = boot_shadow(art, dir, words, profile, cpus, None)?;
        same_files(&fa, &fb, profile, cpus, words)?;
        let both = t.elapsed().as_secs_f64();
        return Ok(format!(
            "fast and reference machines in one boot, {both:.1} s"
        ));
    }
    // Both real boots (their wall times are shown too).
    let (a, fa, _) = boot_full(art, dir, words, profile, How::fresh_on(cpus))?;
    let fast = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (b, fb, _) = boot_full(
        art,
        dir,
        words,
        profile,
        How {
            reference: true,
            ..How::fresh_on(cpus)
        },
    )?;
    let slow = t.elapsed().as_secs_f64();
    ensure!(
        records(&a) == records(&b),
        "{profile}, {cpus} CPUs, {words}: the records differ from the reference plugin's"
    );
    same_files(&fa, &fb, profile, cpus, words)?;
    Ok(format!("fast {fast:.1} s, reference {slow:.1} s"))
}

/// The fast plugin's file `fa` is the reference's `fb`, byte for byte, and
/// has snapshots.
fn same_files(fa: &str, fb: &str, profile: &str, cpus: u32, words: &str) -> Result<()> {
    if fa != fb {
        let first = fa
            .lines()
            .zip(fb.lines())
            .find(|(x, y)| x != y)
            .map(|(x, y)| format!("fast: {x}\nreference: {y}"))
            .unwrap_or_else(|| "one file is longer".into());
        bail!("{profile}, {cpus} CPUs, {words}: the plugin file differs from the reference plugin's; first difference:\n{first}");
    }
    ensure!(
        fa.lines().filter(|l| l.starts_with("snap ")).count() > 0,
        "{profile}, {cpus} CPUs: no snapshots to compare"
    );
    Ok(())
}

/// The plugin built with its debug assertions on (cargo profile
/// `checked`: the release build's code, so a boot takes seconds, not the
/// minutes of a debug build), which check the model's ordering window at
/// the end of every entry point (`model/src/machine/window.rs`, its
/// invariant) on the real event stream of `words` on `cpus` CPUs, in the
/// fast machine and in the reference one beside it (`reference=shadow`):
/// a failed check panics, which aborts QEMU and fails the boot. Its file
/// must be the release plugin's of the same boot, byte for byte, and the
/// reference machine's. Says how long the boots took.
fn checked_plugin(
    art: &Artifacts,
    dir: &Path,
    words: &str,
    profile: &str,
    cpus: u32,
) -> Result<String> {
    let lib = model::build_plugin_as(&kbuild::root(), "checked")?;
    let t = Instant::now();
    // A real boot, not the run cache's: its wall time is shown.
    let (_, release, _) = boot_full(art, dir, words, profile, How::fresh_on(cpus))?;
    let fast = t.elapsed().as_secs_f64();
    let t = Instant::now();
    let (checked, reference) = boot_shadow(art, dir, words, profile, cpus, Some(lib))?;
    let slow = t.elapsed().as_secs_f64();
    same_files(&checked, &reference, profile, cpus, words)
        .context("the checked plugin's fast and reference machines")?;
    if cpus > 1 && same_files(&checked, &release, profile, cpus, words).is_err() {
        // Two boots on several CPUs: a second release boot decides, as in
        // [`boot_twice`].
        let (_, again, _) = boot_full(art, dir, words, profile, How::fresh_on(cpus))?;
        same_files(&checked, &again, profile, cpus, words)
            .context("the checked plugin against two boots of the release plugin")?;
        crate::machine::replay::note_moved(format!(
            "model: {profile}, {cpus} CPUs, {words}: the release plugin's first boot differed \
             from the checked plugin's, its second is byte-identical"
        ));
    } else {
        same_files(&checked, &release, profile, cpus, words)
            .context("the checked plugin against the release plugin")?;
    }
    Ok(format!(
        "release {fast:.1} s, checked with the reference beside {slow:.1} s"
    ))
}

/// `mode=smp` on `cpus` CPUs under `profile`, booted twice: the two boots'
/// records and plugin files are byte-identical; the results of one.
fn smp_twice(art: &Artifacts, dir: &Path, profile: &str, cpus: u32) -> Result<Results> {
    let r = boot_twice(art, dir, "mode=smp", profile, cpus)?;
    ensure!(
        r.model_cpus == cpus,
        "the model saw {} CPUs, not {cpus}",
        r.model_cpus
    );
    Ok(r)
}

/// Every multi-CPU figure (each with a `share`) names where each CPU's
/// part of a batch lies, every CPU that did any of the work has a part,
/// and under the model each other CPU with a part has one overlap in
/// modelled time, in 0..=100 percent. Returns the overlaps, `name overlap
/// 97%` each.
fn overlaps(r: &Results) -> Result<String> {
    let mut seen = Vec::new();
    for b in &r.benches {
        let Some(s) = &b.share else { continue };
        let parts = s
            .parts
            .as_ref()
            .with_context(|| format!("{}: its share names no snapshots", b.name))?;
        let part = |c: usize| parts.per_batch.get(c).is_some_and(|&k| k > 0);
        if let Some(c) = (0..s.per_cpu.len()).find(|&c| s.per_cpu[c] > 0 && !part(c)) {
            bail!("{}: CPU {c} did some of the work but has no part", b.name);
        }
        let others: Vec<u32> = (1..s.per_cpu.len())
            .filter(|&c| part(c))
            .map(|c| c as u32)
            .collect();
        let got: Vec<u32> = s.overlap.iter().map(|o| o.cpu).collect();
        ensure!(
            got == others,
            "{}: overlaps for CPUs {got:?}, expected one for each other CPU with a part, {others:?}",
            b.name
        );
        for o in &s.overlap {
            ensure!(
                (0.0..=100.0).contains(&o.percent),
                "{}: CPU {} overlapped {}% of CPU 0's modelled time, outside 0..=100",
                b.name,
                o.cpu,
                o.percent
            );
        }
        seen.push(format!("{} {}", b.name, s.overlaps()));
    }
    ensure!(!seen.is_empty(), "no multi-CPU figure");
    Ok(seen.join(", "))
}

/// Writes per line-distance batch on every CPU, as the kernel makes them
/// (kernel/src/bench/smp.rs, `LINE_WRITES`): the batch size over the CPUs.
fn line_writes(r: &Results, name: &str) -> Result<u64> {
    let b = r
        .bench(name)
        .with_context(|| format!("no benchmark {name}"))?;
    Ok(b.batch_size)
}

/// What coherence predicts for words `4`, `64` and `4096` bytes apart
/// (calibration, the hand-shake's own misses, subtracted): one line moves
/// between the caches, at least once per four writes in every batch;
/// lines apart (adjacent ones too, under a pair prefetch: each CPU keeps
/// its own line Modified, so no L2 miss fetches the buddy) miss nothing
/// after the warm-up batch. (The hand-shake costs the same misses in every
/// run since each CPU's mailbox has a 128-byte block of its own and the
/// APs wait at a start barrier before the timed region: under every
/// profile, on 2 and 4 CPUs, none is left over.)
fn line_distances(r: &Results, profile: &str) -> Result<String> {
    let m = |name: &str| {
        r.bench(name)
            .and_then(|b| b.model.clone())
            .with_context(|| format!("no model figures for {name}"))
    };
    let same = m("smp.lines.same")?;
    let writes = line_writes(r, "smp.lines.same")?;
    let got = &same.samples["coherence_misses"];
    ensure!(
        got.iter().all(|&v| v * 4 >= writes),
        "{profile}: words in one line: coherence misses per batch {got:?}, fewer than one per four of the {writes} writes"
    );
    for name in ["smp.lines.adjacent", "smp.lines.page"] {
        let x = m(name)?;
        let got = &x.samples["coherence_misses"];
        ensure!(
            got.iter().skip(1).all(|&v| v == 0),
            "{profile}: {name}: coherence misses per batch {got:?}: expected none after the warm-up batch"
        );
    }
    Ok(format!(
        "{profile}: one line {:.2} coherence misses per write",
        same.coherence_misses
    ))
}

/// `mode=smp` on 2 CPUs, twice (byte-identical): every figure has the
/// model's, the packed pool false-shares and the 128-byte one does not,
/// and the TLB figures show what the code does: each local
/// `invlpg` round one flush and one refill walk (the kernel announced the
/// page); a remote shootdown waits at least for the IPI's APIC write, its
/// flight and its delivery; the line distances as [`line_distances`] says.
/// (A fork's flushes are [`fork_flushes`]'s.)
fn smp_figures(art: &Artifacts, dir: &Path) -> Result<String> {
    let r = smp_twice(art, dir, model::DEFAULT_PROFILE, 2)?;
    for b in &r.benches {
        ensure!(b.model.is_some(), "{} has no model figures", b.name);
    }
    let m = |name: &str| {
        r.bench(name)
            .and_then(|b| b.model.clone())
            .with_context(|| format!("no model figures for {name}"))
    };
    let invlpg = m("smp.tlb.invlpg")?;
    ensure!(
        (invlpg.tlb_flushes, invlpg.tlb_misses) == (1.0, 1.0),
        "smp.tlb.invlpg: {} flushes and {} TLB misses per round, expected 1 and 1",
        invlpg.tlb_flushes,
        invlpg.tlb_misses
    );
    let fs = false_sharing(&r, model::DEFAULT_PROFILE)?;
    let shoot = m("smp.tlb.shootdown")?;
    let floor = param(&r, "apic_access")? + param(&r, "ipi_latency")? + param(&r, "int_n")?;
    ensure!(
        shoot.cycles >= floor as f64,
        "smp.tlb.shootdown: {} modelled cycles, less than the IPI's send, flight and delivery ({floor})",
        shoot.cycles
    );
    let lines = line_distances(&r, model::DEFAULT_PROFILE)?;
    let overlap = overlaps(&r)?;
    Ok(format!(
        "{} figures; {fs}; shootdown {:.0} cycles; {lines}; {overlap}",
        r.benches.len(),
        shoot.cycles
    ))
}

/// Below this many coherence misses per operation a pool layout counts as
/// not false-sharing: what remains is the start and done words the CPUs
/// hand over once a batch, not the lock words.
const HANDSHAKE_PER_OP: f64 = 0.002;

/// How far from two coherence misses per lock/unlock pair a packed
/// pool's batch may lie, as a share of two per pair: the hand-shake's
/// misses, and the few pairs whose lock and unlock one CPU did twice in a
/// row between the other's (QEMU's turns, not the layout, decide those).
pub(crate) const PAIR_MISS_SLACK: f64 = 0.005;

/// The false sharing the book states for p4, core2 and modern (2 CPUs):
/// packed, both the lock and the unlock of every pair find the line in the
/// other CPU's cache: two coherence misses per pair, in every batch after
/// the warm-up within [`PAIR_MISS_SLACK`] of two per pair; aligned to 64
/// and to 128 bytes, no lock operation misses (below [`HANDSHAKE_PER_OP`]).
fn false_sharing(r: &Results, profile: &str) -> Result<String> {
    let m = |name: &str| {
        r.bench(name)
            .and_then(|b| b.model.clone())
            .with_context(|| format!("no model figures for {name}"))
    };
    let name = "smp.false_sharing.packed";
    let pairs = line_writes(r, name)? as f64;
    let packed = m(name)?;
    let got = &packed.samples["coherence_misses"];
    let two = 2.0 * pairs;
    ensure!(
        got.len() > 1
            && got
                .iter()
                .skip(1)
                .all(|&v| (v as f64 - two).abs() <= two * PAIR_MISS_SLACK),
        "{profile}: false sharing, packed pool: coherence misses per batch {got:?} of {pairs} lock/unlock pairs; expected two per pair (the lock and the unlock each miss) in every batch after the warm-up, within {}%",
        PAIR_MISS_SLACK * 100.0
    );
    let mut seen = vec![format!("packed {:.4}", packed.coherence_misses)];
    for layout in ["64", "128"] {
        let x = m(&format!("smp.false_sharing.{layout}"))?.coherence_misses;
        ensure!(
            x < HANDSHAKE_PER_OP,
            "{profile}: false sharing, pool aligned to {layout}: {x} coherence misses per pair, expected none beyond the hand-shake's (< {HANDSHAKE_PER_OP})"
        );
        seen.push(format!("{layout} {x:.3}"));
    }
    Ok(format!(
        "{profile} false sharing per pair: {}",
        seen.join(", ")
    ))
}

/// `mode=smp` on 2 CPUs under `profile`, once: the false sharing as
/// [`false_sharing`] says.
fn smp_false_sharing(art: &Artifacts, dir: &Path, profile: &str) -> Result<String> {
    let (_, _, r) = boot_on(art, dir, "mode=smp", profile, 2)?;
    false_sharing(&r, profile)
}

/// `mode=smp` on 4 CPUs under `p4` (the pair prefetch on), twice
/// (byte-identical), and the line distances.
fn smp_four_p4(art: &Artifacts, dir: &Path) -> Result<String> {
    let r = smp_twice(art, dir, "p4", 4)?;
    ensure!(param(&r, "pair_prefetch")? == 1, "p4 has no pair prefetch");
    Ok(format!("{}; {}", line_distances(&r, "p4")?, overlaps(&r)?))
}

/// `--prog locks` on 2 CPUs under `profile` (the 128-byte pools): every
/// figure modelled; user threads on two CPUs incrementing counters in one
/// line move it between the caches in every batch, at least once per
/// hundred increments (how often depends on how the profile's costs
/// interleave the two loops); counters 64 bytes apart (one pair: under
/// `p4` too, since each CPU keeps its own line Modified) and 128 apart
/// move nothing after the warm-up batch; the sleep/wakeup round trip
/// across CPUs moves at least one line per round trip (the median of the
/// batches; a single round trip is not seen), the lock hand-off some (as
/// often as QEMU's turns pass the lock between the CPUs).
/// Every cross-CPU figure has CPU 1's overlap with CPU 0 in modelled
/// time ([`overlaps`]).
fn locks_across(art: &Artifacts, dir: &Path, profile: &str) -> Result<String> {
    // With QEMU's own interleaving (`--turn 0`), where this check's "none"
    // was measured and holds. At the pacer's grain the counters 64 and 128
    // bytes apart take a few coherence misses a batch after the warm-up
    // (under p4 6 in every batch of 40,000 increments; 5 to 12 seen), none
    // on the counters' lines. Logged per miss (a throwaway build), each
    // batch's, beyond the hand-shake the calibration subtracts, are the
    // pacer's at the turn boundaries inside the batch: its handler reading
    // the turn owner's idle state (`arch::smp::IDLE`, which that CPU writes
    // as it idles and wakes: 3), CPU 1's idle loop writing its own after
    // CPU 0's pacer read it (1), the park poll reading the scheduler's
    // lock word (`LOCK` in task/sched, 1); and the join's: the exiting
    // thread's slot in the thread library's `BUSY`, written at its spawn
    // on CPU 0 (1). Only the last is the program's; the pacer keeps its
    // own state in a block per CPU so as to add no miss to the figures,
    // but the state it reads is written by another CPU.
    let (_, _, r) = boot_full(
        art,
        dir,
        "mode=run prog=locks pool_align=128",
        profile,
        How {
            turn: Some(0),
            ..How::on(2)
        },
    )?;
    let m = |name: &str| {
        r.bench(name)
            .and_then(|b| b.model.clone())
            .with_context(|| format!("no model figures for {name}"))
    };
    for b in &r.benches {
        ensure!(b.model.is_some(), "{}: no model figures", b.name);
    }
    let line = m("locks.false_sharing_line.128")?;
    let ops = line_writes(&r, "locks.false_sharing_line.128")?;
    let got = &line.samples["coherence_misses"];
    ensure!(
        got.iter().all(|&v| v * 100 >= ops),
        "{profile}: counters in one line: coherence misses per batch {got:?}, fewer than one per hundred of the {ops} increments"
    );
    for name in [
        "locks.false_sharing_adjacent.128",
        "locks.false_sharing_apart.128",
    ] {
        let got = &m(name)?.samples["coherence_misses"];
        ensure!(
            got.iter().skip(1).all(|&v| v == 0),
            "{profile}: {name}: coherence misses per batch {got:?}: expected none after the warm-up batch"
        );
    }
    let mut seen = vec![format!(
        "{profile}: one line {:.3} coherence misses per increment",
        line.coherence_misses
    )];
    // The round trip moves the sleeping thread's state and the channel's
    // between the CPUs on every one; the hand-off moves the lock's line
    // only when the lock really passes to the other CPU, which QEMU's
    // turns decide (under icount a contender may take it many times in a
    // row on its own CPU): some operations, never none.
    for (name, at_least) in [
        ("locks.sleep_wakeup_smp.128", 1.0),
        ("locks.contended_smp.128", f64::MIN_POSITIVE),
    ] {
        let x = m(name)?;
        ensure!(
            x.coherence_misses >= at_least,
            "{profile}: {name}: {} coherence misses per operation, expected at least {at_least}",
            x.coherence_misses
        );
        seen.push(format!("{name} {:.2}", x.coherence_misses));
    }
    seen.push(overlaps(&r)?);
    Ok(seen.join(", "))
}

/// `cargo xtask run --clock model --profile <unknown>` fails before booting
/// and names the known profiles.
/// forktest (`pmap=apte`, 1 CPU) bare, under shadow paging and under
/// EPT: the same instructions, TLB flushes and misses in all three. Shadow
/// paging pays a VM exit on every flush (a CR3 write or an invlpg) and
/// walks as the bare machine does; EPT exits on neither, but every TLB miss
/// walks `ept_walk` instead of `walk`. So over the bare figure shadow adds
/// vmexit x flushes and EPT (ept_walk - walk) x misses, each within 2%
/// (the figures are medians over batches, each its own).
fn forktest_virt(art: &Artifacts, dir: &Path, profile: &str) -> Result<String> {
    let words = "mode=run prog=forktest fork=cow fork_pages=64 batches=4 pmap=apte";
    let name = abi::report::names::FORKTEST_FORK_EXIT;
    let under = |virt: Option<VirtArg>| -> Result<(model::ModelFigures, Results)> {
        let (_, _, r) = boot_full(art, dir, words, profile, How { virt, ..How::on(1) })?;
        let f = r
            .bench(name)
            .and_then(|b| b.model.clone())
            .with_context(|| format!("{virt:?}: no modelled {name}"))?;
        Ok((f, r))
    };
    let (bare, r) = under(None)?;
    let (shadow, _) = under(Some(VirtArg::Shadow))?;
    let (ept, re) = under(Some(VirtArg::Ept))?;
    ensure!(
        re.virt() == model::Virt::Ept && re.model_virt,
        "the EPT boot's results do not say EPT"
    );
    let close = |a: f64, b: f64, tol: f64| (a - b).abs() <= tol * b.abs().max(1.0);
    for (what, f) in [("shadow", &shadow), ("ept", &ept)] {
        ensure!(
            close(f.insns, bare.insns, 0.01)
                && close(f.tlb_flushes, bare.tlb_flushes, 0.01)
                && close(f.tlb_misses, bare.tlb_misses, 0.01),
            "{what}: {} instructions, {} flushes, {} misses per round against bare's {}, {}, {}: the guest did not do the same",
            f.insns, f.tlb_flushes, f.tlb_misses, bare.insns, bare.tlb_flushes, bare.tlb_misses
        );
    }
    let (vmexit, walk, ept_walk) = (
        param(&r, "vmexit")? as f64,
        param(&r, "walk")? as f64,
        param(&r, "ept_walk")? as f64,
    );
    let shadow_extra = shadow.cycles - bare.cycles;
    let exits = vmexit * shadow.tlb_flushes;
    ensure!(
        close(shadow_extra, exits, 0.02),
        "shadow paging adds {shadow_extra:.0} cycles per round over bare; {} flushes x {vmexit} (its VM exits) is {exits:.0}",
        shadow.tlb_flushes
    );
    let ept_extra = ept.cycles - bare.cycles;
    let walks = (ept_walk - walk) * ept.tlb_misses;
    ensure!(
        ept.tlb_misses > 0.0 && close(ept_extra, walks, 0.02),
        "EPT adds {ept_extra:.0} cycles per round over bare; {} misses x ({ept_walk} - {walk}) (its two-dimensional walks, no VM exit) is {walks:.0}",
        ept.tlb_misses
    );
    Ok(format!(
        "{profile}: bare {:.0}, shadow {:.0} ({:.0} flushes exit), EPT {:.0} ({:.0} misses walk {ept_walk} instead of {walk}) cycles per round",
        bare.cycles, shadow.cycles, shadow.tlb_flushes, ept.cycles, ept.tlb_misses
    ))
}

/// The forktest boots of the fork-flush test (1 CPU): `fork=cow`, the
/// parent's 64 touched pages, 4 batches of 8 rounds; `pmap=` follows.
pub(crate) const FORK_FLUSH_WORDS: &str = "mode=run prog=forktest fork=cow fork_pages=64 batches=4";

/// The profile of the fork-flush test's boots.
pub(crate) const FORK_FLUSH_PROFILE: &str = model::DEFAULT_PROFILE;

/// TLB flushes (CR3 writes and `invlpg`, as the model counts them) per
/// forktest round under each `pmap=` strategy, with [`FORK_FLUSH_WORDS`]:
/// what the code does, asserted exactly in every batch after the first
/// (icount and the model are deterministic). `direct` reaches the other
/// space for nothing, so its flushes are the ones every strategy pays;
/// the others add those of their way into the child's space.
pub(crate) const FORK_FLUSHES: &[(&str, u64)] =
    &[("direct", 5), ("window", 14), ("apte", 16), ("cr3", 21)];

/// One forktest boot per `pmap=` strategy under [`FORK_FLUSH_PROFILE`]:
/// each batch after the first flushes the TLB exactly [`FORK_FLUSHES`]
/// times a round (the first may differ: it warms up).
fn fork_flushes(art: &Artifacts, dir: &Path) -> Result<String> {
    let name = abi::report::names::FORKTEST_FORK_EXIT;
    let mut seen = Vec::new();
    for &(pmap, want) in FORK_FLUSHES {
        let words = format!("{FORK_FLUSH_WORDS} pmap={pmap}");
        let (_, _, r) = boot_full(art, dir, &words, FORK_FLUSH_PROFILE, How::on(1))?;
        let b = r
            .bench(name)
            .with_context(|| format!("pmap={pmap}: no {name}"))?;
        let m = b
            .model
            .as_ref()
            .with_context(|| format!("pmap={pmap}: {name} has no model figures"))?;
        let got = &m.samples["tlb_flushes"];
        ensure!(
            got.len() > 1 && got.iter().skip(1).all(|&v| v == want * b.batch_size),
            "pmap={pmap}: TLB flushes per batch of {} rounds {got:?}; expected {want} a round ({}) in every batch after the first",
            b.batch_size,
            want * b.batch_size
        );
        seen.push(format!("{pmap} {}", m.tlb_flushes));
    }
    Ok(format!("flushes per round: {}", seen.join(", ")))
}

/// forktest on 2 CPUs: its share names each CPU's part of every batch
/// (CPU 0's timed regions, CPU 1's forker's two snapshots a batch), and
/// the host gives CPU 1 an overlap with CPU 0 in modelled time, in
/// 0..=100%.
fn forktest_overlap(art: &Artifacts, dir: &Path) -> Result<String> {
    let words = "mode=run prog=forktest fork=cow fork_pages=64 batches=4";
    let (_, _, r) = boot_full(art, dir, words, model::DEFAULT_PROFILE, How::on(2))?;
    let name = abi::report::names::FORKTEST_FORK_EXIT;
    let parts = r
        .bench(name)
        .and_then(|b| b.share.as_ref())
        .and_then(|s| s.parts.as_ref())
        .with_context(|| format!("{name}: no share naming its snapshots"))?;
    ensure!(
        parts.per_batch == [2, 2],
        "{name}: snapshots per batch {:?}, expected 2 on CPU 0 (its timed region) and 2 on CPU 1 (its forker's part)",
        parts.per_batch
    );
    overlaps(&r)
}

/// lmbench's `lat_ctx` rings (`bench=ctx`) under `profile`, on 2 CPUs and
/// on 1: spread over both CPUs every hand-off wakes a process on the
/// other one, and the kernel sends a reschedule IPI for each wake-up
/// across CPUs (`sched::make_ready`), so every row sends exactly one IPI
/// per hand-off in every batch; on one CPU there is no other CPU to send
/// one to, and every row's count is 0 in every batch.
fn lat_ctx_ipis(art: &Artifacts, dir: &Path, profile: &str) -> Result<String> {
    let words = "mode=run prog=lmbench bench=ctx batches=2";
    let rings = |r: &Results| -> Vec<crate::results::Bench> {
        r.benches
            .iter()
            .filter(|b| b.name.starts_with("lat_ctx."))
            .cloned()
            .collect()
    };
    let want = abi::lmbench::CTX_PROCS.len() * abi::lmbench::CTX_KIB.len();
    // With QEMU's own interleaving (`--turn 0`), where "one IPI per
    // hand-off" was measured: at the pacer's grain a hand-off now and then
    // finds its reader not yet asleep, and sends no IPI ([16, 15] in one
    // batch of 16), as on parallel hardware. Not yet a check of its own.
    let (_, _, two) = boot_full(
        art,
        dir,
        words,
        profile,
        How {
            turn: Some(0),
            ..How::on(2)
        },
    )?;
    let spread = rings(&two);
    ensure!(
        spread.len() == want,
        "2 CPUs: {} lat_ctx rows, not {want}",
        spread.len()
    );
    let mut seen = Vec::new();
    for b in &spread {
        let m = b
            .model
            .as_ref()
            .with_context(|| format!("2 CPUs: {} has no model figures", b.name))?;
        ensure!(
            b.cpus == [0, 1],
            "2 CPUs: {} ran on CPUs {:?}, not 0 and 1",
            b.name,
            b.cpus
        );
        let sent = &m.samples["ipis"];
        ensure!(
            !sent.is_empty() && sent.iter().all(|&v| v == b.batch_size),
            "2 CPUs: {} sent {sent:?} IPIs per batch of {} hand-offs, expected exactly one per hand-off in every batch",
            b.name,
            b.batch_size
        );
        seen.push(format!("{} {:.2}", b.name, m.ipis));
    }
    let (_, _, one) = boot_on(art, dir, words, profile, 1)?;
    let alone = rings(&one);
    ensure!(
        alone.len() == want,
        "1 CPU: {} lat_ctx rows, not {want}",
        alone.len()
    );
    for b in &alone {
        let m = b
            .model
            .as_ref()
            .with_context(|| format!("1 CPU: {} has no model figures", b.name))?;
        let sent = m.samples.get("ipis").map(|v| v.iter().sum::<u64>());
        ensure!(
            sent == Some(0) && m.ipis == 0.0,
            "1 CPU: {} sent IPIs ({:?} per batch)",
            b.name,
            m.samples.get("ipis")
        );
    }
    Ok(format!(
        "IPIs per hand-off on 2 CPUs: {}; 0 on 1 CPU",
        seen.join(", ")
    ))
}

/// The `locks` program on one CPU under `p3` (docs/experiment-turnstiles.md,
/// Run 2) and `modern` (`run`'s default profile, exercise 11): each
/// benchmark's modelled cycles are the same in the three pool layouts, at
/// the precision `run` prints them, and its misses within a hundredth an
/// operation. On one CPU the alignment only moves objects that all fit
/// the L1.
fn locks_layouts_alike(art: &Artifacts, dir: &Path) -> Result<String> {
    const OPS: [&str; 5] = [
        "locks.uncontended",
        "locks.contended",
        "locks.sleep_wakeup",
        "locks.lookup",
        "ebizzy",
    ];
    let mut seen = Vec::new();
    for profile in ["p3", "modern"] {
        let (_, _, r) = boot_on(art, dir, "mode=run prog=locks batches=4", profile, 1)?;
        for op in OPS {
            // As `run` shows them: cycles to a tenth (ebizzy's per record
            // differ below that: a few thousandths of a cycle), the same in
            // every layout; misses to a hundredth, within one hundredth of
            // each other (a contended hand-off may take 0.01 more L1 misses
            // in one layout than in another).
            let figures = |layout: &str| -> Result<(String, [f64; 3])> {
                let name = format!("{op}.{layout}");
                let m = r
                    .bench(&name)
                    .and_then(|b| b.model.as_ref())
                    .with_context(|| format!("{profile}: no model figures for {name}"))?;
                let shown = |x: f64| (x * 100.0).round() / 100.0;
                Ok((
                    format!("{:.1}", m.cycles),
                    [shown(m.l1_misses), shown(m.l2_misses), shown(m.tlb_misses)],
                ))
            };
            let aligned = figures("128")?;
            for layout in ["64", "packed"] {
                let other = figures(layout)?;
                ensure!(
                    other.0 == aligned.0,
                    "{profile}: {op}.{layout} takes {} modelled cycles, {op}.128 {}",
                    other.0,
                    aligned.0
                );
                let apart = other
                    .1
                    .iter()
                    .zip(&aligned.1)
                    .map(|(a, b)| (a - b).abs())
                    .fold(0.0, f64::max);
                ensure!(
                    apart <= 0.01 + 1e-9,
                    "{profile}: {op}.{layout} has L1, L2 and TLB misses {:?}, {op}.128 {:?}: more than 0.01 apart",
                    other.1,
                    aligned.1
                );
            }
            seen.push(format!("{profile} {op} {}", aligned.0));
        }
    }
    Ok(seen.join(", "))
}

/// docs/lmbench.md's `--smp 2` table, booted as the chapter does (p4, the
/// pacer's grain, 4 batches): in each `lat_ctx` row of `cargo xtask
/// lmbench`'s table a cell says `clamped` exactly where the results list
/// that figure as clamped (its calibration exceeded some batch), and
/// holds a number everywhere else. A boot with no clamped figure cannot
/// show the word, and fails saying so.
fn lat_ctx_clamped(art: &Artifacts, dir: &Path) -> Result<String> {
    let words = "mode=run prog=lmbench bench=ctx batches=4";
    let (_, _, r) = boot_on(art, dir, words, "p4", 2)?;
    let table = crate::cmd::lmbench::table(&r)?;
    // The model columns after the row's name and its two-word caption.
    const KEYS: [&str; 6] = [
        "cycles",
        "insns",
        "l1_misses",
        "l2_misses",
        "tlb_misses",
        "tlb_flushes",
    ];
    let mut clamped = 0;
    for b in r.benches.iter().filter(|b| b.name.starts_with("lat_ctx.")) {
        let m = b
            .model
            .as_ref()
            .with_context(|| format!("{} has no model figures", b.name))?;
        let row = table
            .lines()
            .find(|l| l.split_whitespace().next() == Some(b.name.as_str()))
            .with_context(|| format!("lmbench's table has no row {}:\n{table}", b.name))?;
        let cells: Vec<&str> = row.split_whitespace().skip(3).take(KEYS.len()).collect();
        ensure!(cells.len() == KEYS.len(), "a short row: {row}");
        for (key, cell) in KEYS.iter().zip(&cells) {
            let listed = m.is_clamped(key);
            let shown = *cell == "clamped";
            ensure!(
                listed == shown,
                "{}: the results {} {key} as clamped, the table shows {cell:?}:\n{row}",
                b.name,
                if listed { "list" } else { "do not list" }
            );
            ensure!(
                shown || cell.parse::<f64>().is_ok(),
                "{}: {key} shows {cell:?}, neither a number nor `clamped`:\n{row}",
                b.name
            );
            clamped += usize::from(listed);
        }
    }
    ensure!(
        clamped > 0,
        "no lat_ctx figure was clamped in this boot: the table's word cannot be checked\n{table}"
    );
    Ok(format!(
        "{clamped} clamped figures, each shown as `clamped`"
    ))
}

fn unknown_profile_refused(root: &Path) -> Result<()> {
    let t = Instant::now();
    let (ok, out, err) = xtask(
        root,
        &[
            "run",
            "--clock",
            "model",
            "--profile",
            "pentium9",
            "--no-save",
        ],
    )?;
    ensure!(!ok, "an unknown profile was accepted");
    let known = model::known_profiles().join(", ");
    ensure!(
        err.contains("--profile \"pentium9\": no such model profile")
            && err.contains(&format!("known profiles: {known}")),
        "unclear error: {err}"
    );
    ensure!(!out.contains("i386 testbed"), "it booted before refusing");
    ensure!(
        t.elapsed().as_secs() < 30,
        "the refusal took {:?}",
        t.elapsed()
    );
    Ok(())
}

/// `xtask` itself, run in the workspace with `args`: (success, stdout,
/// stderr).
fn xtask(root: &Path, args: &[&str]) -> Result<(bool, String, String)> {
    let exe = crate::kbuild::xtask_exe().context("cannot find the xtask binary")?;
    let o = std::process::Command::new(exe)
        .args(args)
        .current_dir(root)
        .output()
        .context("cannot run xtask")?;
    Ok((
        o.status.success(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    ))
}

/// A saved model run (`run --clock model --records --model-file FILE`, its
/// records the log) imported back (`import LOG --model FILE`) gives the
/// run's model figures; without `--model` the import says it has none;
/// the file of a boot with another command line is refused.
fn import_round_trip(root: &Path, dir: &Path) -> Result<String> {
    std::fs::create_dir_all(dir)?;
    let save = |append: &str, name: &str| -> Result<(PathBuf, PathBuf, Results)> {
        let file = dir.join(format!("{name}.model"));
        let file_arg = file.to_str().context("scratch path is not UTF-8")?;
        let (ok, json, log) = xtask(
            root,
            &[
                "run",
                "--clock",
                "model",
                "--profile",
                "p3",
                "--records",
                "--json",
                "--no-save",
                "--append",
                append,
                "--model-file",
                file_arg,
            ],
        )?;
        ensure!(ok, "the model run failed: {log}");
        // With --json the kernel's text, records included, goes to stderr.
        let path = dir.join(format!("{name}.log"));
        std::fs::write(&path, &log)?;
        let r: Results = serde_json::from_str(&json).context("the run's JSON")?;
        Ok((path, file, r))
    };
    let (log, file, ran) = save("batches=3 batch_size=64", "a")?;
    let s = |p: &Path| p.to_str().unwrap_or_default().to_string();
    let (ok, json, err) = xtask(
        root,
        &[
            "import",
            &s(&log),
            "--model",
            &s(&file),
            "--json",
            "--no-save",
        ],
    )?;
    ensure!(ok, "the import failed: {err}");
    let got: Results = serde_json::from_str(&json).context("the import's JSON")?;
    ensure!(
        got.model_profile.as_deref() == Some("p3") && got.model_params == ran.model_params,
        "the import names profile {:?}",
        got.model_profile
    );
    let figures = |r: &Results| -> Vec<(String, Option<model::ModelFigures>)> {
        let b = r.benches.iter().map(|b| (b.name.clone(), b.model.clone()));
        let m = r.macros.iter().map(|m| (m.name(), m.model.clone()));
        b.chain(m).collect()
    };
    ensure!(
        figures(&got) == figures(&ran),
        "the imported model figures differ from the run's"
    );
    let modelled = figures(&got).iter().filter(|(_, m)| m.is_some()).count();
    ensure!(modelled > 0, "nothing modelled");
    let (ok, _, err) = xtask(root, &["import", &s(&log), "--no-save"])?;
    ensure!(
        ok && err.contains(crate::cmd::import::NO_MODEL_NOTE),
        "an import without the model file does not say it has none: {err}"
    );
    let (_, other, _) = save("batches=4 batch_size=64", "b")?;
    let (ok, _, err) = xtask(
        root,
        &["import", &s(&log), "--model", &s(&other), "--no-save"],
    )?;
    ensure!(
        !ok && err.contains("are not the log and the model file of one boot"),
        "another boot's model file was taken: {err}"
    );
    Ok(format!("{modelled} figures came back"))
}

/// The model's boot tests whose name contains `filter`, in the order they
/// run; none has run yet.
pub fn self_tests<'a>(art: &'a Artifacts, dir: &'a Path, filter: Option<&str>) -> Vec<Test<'a>> {
    let root = kbuild::root();
    let wanted = |n: &str| filter.is_none_or(|f| n.contains(f));
    let mut out = Vec::new();
    fn run<'a>(name: String, f: impl FnOnce() -> Result<String> + Send + 'a) -> Test<'a> {
        Test::new(name, move || f().map_err(|e| format!("{e:#}")))
    }
    let name =
        "model: an unknown profile is refused before booting, with the known ones".to_string();
    if wanted(&name) {
        let root = root.clone();
        out.push(run(name, move || {
            unknown_profile_refused(&root).map(|()| String::new())
        }));
    }
    for p in model::known_profiles() {
        let name = format!(
            "model: pointer chase under {p}: no misses in L1, one L1 miss per load between L1 and L2"
        );
        if wanted(&name) {
            out.push(run(name, move || chase_under(art, dir, &p)));
        }
    }
    let name = format!(
        "model: mode=smp on 2 CPUs, two boots byte-identical: every figure modelled; packed pools two coherence misses per lock/unlock pair (every batch after the warm-up within {slack}%), 64- and 128-byte ones only the hand-shake's; invlpg flushes as the code says; a shootdown pays the IPI; one shared line moves, lines apart do not; every multi-CPU figure has each other CPU's overlap in modelled time, in 0..=100%",
        slack = PAIR_MISS_SLACK * 100.0
    );
    if wanted(&name) {
        out.push(run(name, move || smp_figures(art, dir)));
    }
    for p in ["p4", "core2"] {
        let name = format!("model: mode=smp on 2 CPUs under {p}: packed pools two coherence misses per lock/unlock pair (every batch after the warm-up within {slack}%), 64- and 128-byte ones only the hand-shake's", slack = PAIR_MISS_SLACK * 100.0);
        if wanted(&name) {
            out.push(run(name, move || smp_false_sharing(art, dir, p)));
        }
    }
    let name = "model: mode=smp on 4 CPUs under p4 (pair prefetch), two boots byte-identical: one shared line moves, adjacent lines and pages apart do not after warm-up; every multi-CPU figure has each other CPU's overlap in modelled time, in 0..=100%".to_string();
    if wanted(&name) {
        out.push(run(name, move || smp_four_p4(art, dir)));
    }
    let name = "model: a saved model run (records and the plugin's file) imports back with its figures; without the file the import says it has none; another boot's file is refused".to_string();
    if wanted(&name) {
        out.push(run(name, move || {
            import_round_trip(&root, &dir.join("import"))
        }));
    }
    for p in [model::DEFAULT_PROFILE, "p4"] {
        let name = format!("model: locks on 2 CPUs under {p}: user counters in one line move between the caches, 64 and 128 bytes apart not after warm-up; the sleep/wakeup round trip across CPUs moves at least one line per round trip (the median), the hand-off some; every cross-CPU figure has each other CPU's overlap in modelled time, in 0..=100%");
        if wanted(&name) {
            out.push(run(name, move || locks_across(art, dir, p)));
        }
    }
    for p in ["p4", model::DEFAULT_PROFILE] {
        let name = format!("model: forktest under {p}, bare, --virt shadow and --virt ept: the same guest work; shadow paging's extra cycles are a VM exit per TLB flush, EPT's none but a two-dimensional walk per TLB miss");
        if wanted(&name) {
            out.push(run(name, move || forktest_virt(art, dir, p)));
        }
    }
    let name = format!(
        "model: forktest under {FORK_FLUSH_PROFILE} (fork=cow, 64 pages, 1 CPU): TLB flushes per round exactly {} in every batch after the first",
        FORK_FLUSHES
            .iter()
            .map(|(p, n)| format!("{p} {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if wanted(&name) {
        out.push(run(name, move || fork_flushes(art, dir)));
    }
    let name = "model: forktest on 2 CPUs: its share names each CPU's part of every batch, and CPU 1's forker has an overlap with CPU 0 in modelled time, in 0..=100%".to_string();
    if wanted(&name) {
        out.push(run(name, move || forktest_overlap(art, dir)));
    }
    let name = "model: lmbench's lat_ctx rings under p4 spread over 2 CPUs send exactly one reschedule IPI per hand-off in every batch, on 1 CPU none".to_string();
    if wanted(&name) {
        out.push(run(name, move || lat_ctx_ipis(art, dir, "p4")));
    }
    let name = "model: locks on 1 CPU under p3 and modern: the pool layouts 128, 64 and packed take the same modelled cycles as run prints them (to a tenth), and misses within 0.01 an operation".to_string();
    if wanted(&name) {
        out.push(run(name, move || locks_layouts_alike(art, dir)));
    }
    let name = "model: lmbench's lat_ctx rings under p4 on 2 CPUs: every figure the results list as clamped is shown as `clamped` in lmbench's table, every other as its number".to_string();
    if wanted(&name) {
        out.push(run(name, move || lat_ctx_clamped(art, dir)));
    }
    // Every profile on 1 CPU (the benchmark driver) and on 2 (mode=smp:
    // IPIs, shootdowns, lines moving); under p4, whose private L2s and pair
    // prefetch give the coherence the most to do, also the locks program
    // (sleep/wakeup across CPUs, halted CPUs woken) and mode=smp on 4 CPUs
    // (lanes that wait while three others move). At the pacer's grain the
    // locks boot forces no event out of clock order (with QEMU's own long
    // turns, `--turn 0`, its queues overflowed: 73 million forced, which the
    // fast plugin forces in a row, the reference one at a time).
    for p in model::known_profiles() {
        let p4 = [
            (2, "mode=run prog=locks batches=2 batch_size=64"),
            (4, "mode=smp batches=2 batch_size=64"),
        ];
        let cases = [
            (1, "mode=run prog=bench batches=4 batch_size=256"),
            (2, "mode=smp batches=2 batch_size=64"),
        ];
        let more: &[(u32, &str)] = if p == "p4" { &p4 } else { &[] };
        for (cpus, words) in cases.into_iter().chain(more.iter().copied()) {
            let name = format!(
                "model: under {p} on {cpus} CPU(s), {words}: the fast plugin's records and file are the reference plugin's (every instruction a call), byte for byte"
            );
            if wanted(&name) {
                let p = p.clone();
                out.push(run(name, move || {
                    fast_is_reference(art, dir, words, &p, cpus)
                }));
            }
        }
    }
    let (cpus, words) = (2, "mode=smp batches=2 batch_size=64");
    let name = format!("model: the plugin with its debug assertions on (the ordering window's invariant checked at every entry point) runs {words} on {cpus} CPUs under p4 without a failed check, its fast and reference machines' files the release plugin's, byte for byte");
    if wanted(&name) {
        out.push(run(name, move || {
            checked_plugin(art, dir, words, "p4", cpus)
        }));
    }
    let name = "model: two boots give byte-identical records and plugin files; the model counts the instructions icount does for every call benchmark, and for the macro mix icount's a batch plus one constant for every mechanism".to_string();
    if wanted(&name) {
        out.push(run(name, move || {
            deterministic(art, dir)
                .map(|d| format!("the macro mix's constant: {d:+} instructions a batch"))
        }));
    }
    out
}
