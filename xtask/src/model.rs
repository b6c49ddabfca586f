//! The model clock on the host side: the profiles the plugin knows, the
//! plugin's build and its QEMU arguments, and the file the plugin writes
//! when QEMU exits, merged into the results of the same boot. The profiles,
//! the plugin's name and arguments and the file's reader are the model
//! crate's own (`model::profile`, `model::plugin_arg`, `model::report`):
//! one format, one reader, tested against the writer.
//!
//! A `--clock model` boot runs under `-icount shift=0,sleep=off` (so the
//! guest's figures are still exact instruction counts) with the model
//! plugin loaded. The guest brackets every timed run with snapshot markers
//! and says in its `samples` records (and the macro mix's `macro`
//! records) which snapshots belong to which benchmark (`abi::model::Snaps`); the plugin writes each snapshot's
//! running totals (`abi::model`, the file format). Here each batch becomes
//! the difference of its two snapshots, minus the median of the
//! calibration runs, as the guest does with ticks.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use abi::model::{stream_from_key, SNAP_KERNEL, SNAP_USER};
use abi::report::kind;
use anyhow::{anyhow, bail, Context, Result};
use model::report::{SnapshotFile, FIELDS};
pub use model::Virt;

use crate::report::{self, Record};
use crate::results::Clock;
use crate::results::Results;

/// The model's figures as a run's results hold them.
pub use crate::results::figures::{
    cycle_samples, label, metrics, table, unit, ModelFigures, Span, BENCH_CPU,
};

/// The profiles file of the model crate, relative to the workspace root.
pub const PROFILES_FILE: &str = "model/profiles.toml";
/// The profile `--clock model` uses when `--profile` is not given and no
/// profile matches the CPU model ([`profile_for_cpu`]).
pub const DEFAULT_PROFILE: &str = "modern";

/// The profile that models QEMU's CPU model `cpu`, where one does: the
/// Pentium III (and II: the same P6 core) is p3, the Pentium 4 p4, the
/// 65 nm Core 2 models (core2duo, Conroe) core2, Penryn penryn, Nehalem
/// and Westmere nehalem, the Phenom (phenom: a Phenom X4 9550, family 10h)
/// k10, and the Intel cores from Sandy Bridge on `modern`; QEMU's generic
/// models (qemu32, qemu64, kvm32, kvm64) are `modern` too. Others (486,
/// pentium, AMD's other models, host): `None`.
pub fn profile_for_cpu(cpu: &str) -> Option<&'static str> {
    let base = cpu.split(['-', ',']).next().unwrap_or(cpu);
    Some(match base {
        "pentium2" | "pentium3" | "p3" => "p3",
        "pentium4" | "p4" => "p4",
        "core2duo" | "Conroe" | "core2" => "core2",
        "Penryn" | "penryn" => "penryn",
        "Nehalem" | "Westmere" | "nehalem" => "nehalem",
        "phenom" | "k10" => "k10",
        "qemu32" | "qemu64" | "kvm32" | "kvm64" | "max" | "modern" | "SandyBridge"
        | "IvyBridge" | "Haswell" | "Broadwell" | "Skylake" | "Cascadelake" | "Cooperlake"
        | "Icelake" | "SapphireRapids" => "modern",
        _ => return None,
    })
}

/// What the user asked the model for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelOpts {
    pub profile: String,
    /// Under a hypervisor: a VM exit's cost on CR3 writes and invlpg
    /// (shadow page tables) or two-dimensional TLB walks (EPT), and on IPI
    /// sends (no posted interrupts) under both.
    pub virt: Virt,
    /// The plugin's `pge=on`: the kernel's identity-map pages are global
    /// (survive a CR3 write), as if the kernel set CR4.PGE and PTE.G.
    pub pge: bool,
    /// The profile was not asked for: it follows the CPU model.
    pub from_cpu: bool,
    /// The plugin's reference mode (every instruction a call): the tests'.
    pub reference: bool,
    /// The plugin's reference machine beside the fast one, on the same
    /// events (`reference=shadow`, several CPUs): the tests'.
    pub shadow: bool,
}

impl Default for ModelOpts {
    fn default() -> ModelOpts {
        ModelOpts {
            profile: DEFAULT_PROFILE.into(),
            virt: Virt::Off,
            pge: false,
            from_cpu: false,
            reference: false,
            shadow: false,
        }
    }
}

impl ModelOpts {
    /// The options for CPU model `cpu` when no profile was asked for.
    pub fn for_cpu(cpu: &str, virt: Virt) -> ModelOpts {
        ModelOpts {
            profile: profile_for_cpu(cpu).unwrap_or(DEFAULT_PROFILE).into(),
            virt,
            pge: false,
            from_cpu: true,
            reference: false,
            shadow: false,
        }
    }
}

impl ModelOpts {
    /// How every model figure is labelled.
    pub fn label(&self) -> String {
        label(&self.profile, self.virt)
    }
}

/// The model's options for a boot on `clock`: under [`Clock::Model`] what
/// was asked, or the profile of CPU model `cpu`; an error when model
/// options come with another clock. The profile is checked against the
/// model's list (nothing is built).
pub fn options_for(
    clock: Clock,
    asked: Option<&ModelOpts>,
    cpu: &str,
) -> Result<Option<ModelOpts>> {
    match (clock, asked) {
        (Clock::Model, asked) => {
            let opts = asked
                .cloned()
                .unwrap_or_else(|| ModelOpts::for_cpu(cpu, Virt::Off));
            check_profile(&opts.profile, &known_profiles())?;
            Ok(Some(opts))
        }
        (_, Some(_)) => {
            bail!("--profile, --virt and --pge choose the model's CPU: use them with --clock model")
        }
        (_, None) => Ok(None),
    }
}

/// The plugin of one model boot: what it models, the library, the file it
/// writes when QEMU exits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plugin {
    pub opts: ModelOpts,
    pub lib: PathBuf,
    pub out: PathBuf,
}

impl Plugin {
    /// For a boot on `clock` (`None` unless [`Clock::Model`]): checks the
    /// options, builds the plugin in the workspace at `root`, picks a file
    /// in `scratch`.
    pub fn for_clock(
        clock: Clock,
        asked: Option<&ModelOpts>,
        cpu: &str,
        root: &Path,
        scratch: &Path,
    ) -> Result<Option<Plugin>> {
        let Some(opts) = options_for(clock, asked, cpu)? else {
            return Ok(None);
        };
        let lib = build_plugin(root)?;
        std::fs::create_dir_all(scratch)
            .with_context(|| format!("cannot create {}", scratch.display()))?;
        // One file per process and boot, so parallel runs never share one.
        static BOOTS: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = BOOTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let out = scratch.join(format!("model-{}-{n}.txt", std::process::id()));
        Ok(Some(Plugin { opts, lib, out }))
    }

    /// QEMU's arguments that load it.
    pub fn qemu_args(&self) -> Result<Vec<String>> {
        qemu_args(&self.lib, &self.opts, &self.out)
    }
}

/// The profiles the model knows (the `[name]` tables of [`PROFILES_FILE`],
/// which the model crate embeds), in file order.
pub fn known_profiles() -> Vec<String> {
    model::profile::builtin()
        .into_iter()
        .map(|p| p.name)
        .collect()
}

/// Refuses a profile the model does not know, naming the ones it does.
pub fn check_profile(name: &str, known: &[String]) -> Result<()> {
    if known.iter().any(|k| k == name) {
        Ok(())
    } else {
        bail!(
            "--profile {name:?}: no such model profile; known profiles: {} (from {PROFILES_FILE})",
            known.join(", ")
        )
    }
}

/// Builds the plugin (the model crate, for the host) and returns the
/// shared library's path.
pub fn build_plugin(root: &Path) -> Result<PathBuf> {
    build_plugin_as(root, "release")
}

/// Builds the plugin under cargo profile `profile` (`release`, or
/// `checked`: the release build with its debug assertions on) and returns
/// the shared library's path.
pub fn build_plugin_as(root: &Path, profile: &str) -> Result<PathBuf> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = Command::new(cargo)
        .args([
            "build",
            "--profile",
            profile,
            "--quiet",
            "-p",
            "model",
            "--lib",
        ])
        .current_dir(root)
        .status()
        .context("cannot run cargo to build the model plugin")?;
    if !status.success() {
        bail!("the model plugin build failed (cargo exited with {status})");
    }
    let lib = root.join("target").join(profile).join(model::PLUGIN_FILE);
    if !lib.is_file() {
        bail!("the model build did not produce {}", lib.display());
    }
    Ok(lib)
}

/// QEMU's arguments that load the plugin, writing its file to `out`.
pub fn qemu_args(lib: &Path, opts: &ModelOpts, out: &Path) -> Result<Vec<String>> {
    let mut arg = if opts.reference {
        model::reference_arg(lib, &opts.profile, opts.virt, out)
    } else if opts.shadow {
        model::shadow_arg(lib, &opts.profile, opts.virt, out)
    } else {
        model::plugin_arg(lib, &opts.profile, opts.virt, out)
    }
    .map_err(anyhow::Error::msg)?;
    if opts.pge {
        arg += ",pge=on";
    }
    Ok(vec!["-plugin".into(), arg])
}

/// The figure a number of a snapshot line becomes (`ModelFigures`, its
/// `samples` keys): a figure's `cycles` is the modelled time that passed
/// on the benchmark's CPU (the line's clock), `busy_cycles` the cycles it
/// executed; the others keep their names. The five coherence counters and
/// `ipis` are the whole machine's (every CPU's).
fn figure(field: &'static str) -> &'static str {
    match field {
        "cycles" => "busy_cycles",
        "clock" => "cycles",
        other => other,
    }
}

/// The numbers of one snapshot line, in the order of `FIELDS`.
type Values = [u64; FIELDS.len()];

/// `later - earlier`, number by number (0 where one went backwards, which
/// running totals never do; a calibration may: see [`clamped`]).
fn since(later: &Values, earlier: &Values) -> Values {
    std::array::from_fn(|i| later[i].saturating_sub(earlier[i]))
}

/// The numbers of a snapshot line (by `FIELDS` index) where some batch
/// counted fewer than the calibration: subtracting it would go below zero
/// and [`since`] stopped at 0, so those batches' figures are no
/// measurement.
fn clamped(raw: &[Values], over: &Values) -> Vec<usize> {
    (0..FIELDS.len())
        .filter(|&i| raw.iter().any(|b| b[i] < over[i]))
        .collect()
}

/// Reads the plugin's file (`abi::model`) with the model crate's reader.
/// Its `param` line must be the named profile's (a file that names one
/// profile and holds another's numbers is refused).
pub fn parse_file(text: &str) -> Result<SnapshotFile> {
    let file = model::report::parse(text).map_err(|e| anyhow!("the model file: {e}"))?;
    file.check_profile()
        .map_err(|e| anyhow!("the model file: {e}"))?;
    Ok(file)
}

fn median_u64(v: &mut [u64]) -> u64 {
    v.sort_unstable();
    if v.is_empty() {
        0
    } else {
        v[(v.len() - 1) / 2]
    }
}

fn median_f64(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    match s.len() {
        0 => 0.0,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

/// The snapshot spans of every benchmark in a log, by benchmark name: the
/// samples records that carry `snap_batches`, and the macro mix's records
/// (`macro.<mechanism>`, `batches` of `ops` operations) that do.
pub fn spans(records: &[Record]) -> Result<BTreeMap<String, Span>> {
    let mut m = BTreeMap::new();
    for r in records {
        let Some(batches) = r.get("snap_batches") else {
            continue;
        };
        let num = |k: &str, v: &str| -> Result<u64> {
            v.parse().map_err(|_| {
                anyhow!(
                    "line {}: {} record: {k}={v:?} is not a number",
                    r.line,
                    r.kind
                )
            })
        };
        let field = |k: &str| {
            r.get(k)
                .ok_or_else(|| anyhow!("line {}: {} record without {k}", r.line, r.kind))
        };
        // Snapshot numbers are 32-bit sequence numbers: a larger one is
        // refused, never cut to fit.
        let seq = |k: &str, v: &str| -> Result<u32> {
            u32::try_from(num(k, v)?).map_err(|_| {
                anyhow!(
                    "line {}: {} record: {k}={v} is beyond any snapshot number",
                    r.line,
                    r.kind
                )
            })
        };
        let (name, n, batch_size) = match r.kind.as_str() {
            kind::SAMPLES => (
                field("name")?.to_string(),
                r.get("values").map_or(0, |v| v.split(',').count()) as u32,
                num("batch_size", r.get("batch_size").unwrap_or("1"))?,
            ),
            kind::MACRO => (
                format!("{}.{}", abi::report::names::MACRO, field("mech")?),
                seq("batches", field("batches")?)?,
                num("ops", field("ops")?)?,
            ),
            _ => continue,
        };
        let stream = match r.get("stream") {
            None => SNAP_USER,
            Some(s) => stream_from_key(s)
                .ok_or_else(|| anyhow!("line {}: unknown snapshot stream {s:?}", r.line))?,
        };
        m.insert(
            name,
            Span {
                line: r.line,
                stream,
                calib: seq("snap_calib", r.get("snap_calib").unwrap_or("0"))?,
                calib_runs: seq("calib_runs", r.get("calib_runs").unwrap_or("0"))?,
                batches: seq("snap_batches", batches)?,
                n,
                batch_size: batch_size.max(1),
            },
        );
    }
    Ok(m)
}

/// A benchmark's figures from the model file.
pub fn figures(file: &SnapshotFile, span: &Span, label: &str) -> Result<ModelFigures> {
    let beyond = |start: u32| {
        anyhow!(
            "line {}: samples record: snapshots from {start} run past the last snapshot number",
            span.line
        )
    };
    let snap = |seq: u32| -> Result<Values> {
        file.find(BENCH_CPU, span.stream, u64::from(seq))
            .map(|s| s.values())
            .ok_or_else(|| {
            anyhow!(
                "line {}: the model file has no {} snapshot {seq} of CPU {BENCH_CPU} (the plugin and the guest disagree on the count)",
                span.line,
                if span.stream == SNAP_KERNEL { "kernel" } else { "user" }
            )
        })
    };
    let pair = |first: u32| -> Result<Values> {
        let next = first.checked_add(1).ok_or_else(|| beyond(first))?;
        Ok(since(&snap(next)?, &snap(first)?))
    };
    // The k-th pair from `start`: snapshots start + 2k and the one after,
    // with no wrap-around of a number the guest chose.
    let nth = |start: u32, k: u32| -> Result<Values> {
        let first = k
            .checked_mul(2)
            .and_then(|o| start.checked_add(o))
            .ok_or_else(|| beyond(start))?;
        pair(first)
    };
    let calib: Vec<Values> = (0..span.calib_runs)
        .map(|k| nth(span.calib, k))
        .collect::<Result<_>>()?;
    let over: Values = std::array::from_fn(|i| {
        let mut v: Vec<u64> = calib.iter().map(|c| c[i]).collect();
        median_u64(&mut v)
    });
    let raw: Vec<Values> = (0..span.n)
        .map(|i| nth(span.batches, i))
        .collect::<Result<_>>()?;
    let batches: Vec<Values> = raw.iter().map(|b| since(b, &over)).collect();
    let clamped = clamped(&raw, &over)
        .into_iter()
        .map(|i| figure(FIELDS[i]).to_string())
        .collect();
    // The median per call of the snapshot line's number `field`.
    let per_call = |field: &str| {
        let i = FIELDS.iter().position(|f| *f == field);
        let v: Vec<f64> = batches
            .iter()
            .filter_map(|b| Some(b[i?] as f64 / span.batch_size as f64))
            .collect();
        median_f64(&v)
    };
    let samples = FIELDS
        .iter()
        .enumerate()
        .map(|(i, k)| {
            let values = batches.iter().map(|b| b[i]).collect();
            (figure(k).to_string(), values)
        })
        .collect();
    Ok(ModelFigures {
        label: label.to_string(),
        insns: per_call("insns"),
        busy_cycles: per_call("cycles"),
        cycles: per_call("clock"),
        l1_misses: per_call("l1_misses"),
        l2_misses: per_call("l2_misses"),
        tlb_misses: per_call("tlb_misses"),
        tlb_flushes: per_call("tlb_flushes"),
        coherence_misses: per_call("coherence_misses"),
        invalidations: per_call("invalidations"),
        transfers: per_call("transfers"),
        invalidations_received: per_call("invalidations_received"),
        upgrades: per_call("upgrades"),
        ipis: per_call("ipis"),
        vm_exits: per_call("vm_exits"),
        samples,
        clamped,
    })
}

/// Every benchmark's model figures from a boot's serial log and the
/// plugin's file, by benchmark name; and a sentence for each benchmark left
/// out because a snapshot it needs lies past the plugin's cap on its stream.
pub fn merge_log(
    log: &str,
    file: &SnapshotFile,
) -> Result<(BTreeMap<String, ModelFigures>, Vec<String>)> {
    let records = report::parse_log(log)?;
    let label = label(&file.profile, file.virt);
    let mut figs = BTreeMap::new();
    let mut incomplete = Vec::new();
    for (name, span) in spans(&records)? {
        if let Some(&(kept, dropped)) = file.capped.get(&(BENCH_CPU, span.stream)) {
            if last_snapshot(&span).is_some_and(|last| last >= kept) {
                incomplete.push(format!(
                    "{name}: no model figures: its snapshots lie past the {kept} the plugin keeps per stream ({dropped} dropped)"
                ));
                continue;
            }
        }
        let f = figures(file, &span, &label).with_context(|| format!("benchmark {name}"))?;
        figs.insert(name, f);
    }
    Ok((figs, incomplete))
}

/// The highest snapshot number a span uses (`None`: it uses none).
fn last_snapshot(span: &Span) -> Option<u64> {
    let last =
        |start: u32, pairs: u32| (pairs > 0).then(|| u64::from(start) + 2 * u64::from(pairs) - 1);
    last(span.calib, span.calib_runs).max(last(span.batches, span.n))
}

/// Puts the model's figures into a boot's results: each benchmark's
/// `model` object, and the run's profile and parameters. A benchmark the
/// guest gave no snapshots keeps `model: None`.
pub fn apply(results: &mut Results, log: &str, file: &SnapshotFile) -> Result<()> {
    // The model saw every CPU the boot's figures name.
    for b in &results.benches {
        let named = b
            .share
            .as_ref()
            .map_or(0, |s| s.per_cpu.len())
            .max(b.cpus.iter().max().map_or(0, |&c| c as usize + 1));
        if named > file.ncpus {
            bail!(
                "benchmark {}: the log names {named} CPUs, the model file ncpus={}",
                b.name,
                file.ncpus
            );
        }
    }
    let (mut figs, incomplete) = merge_log(log, file)?;
    results.model_incomplete = incomplete;
    (results.model_forced, results.model_forced_limit) = file.forced;
    crate::results::overlap::apply(results, &spans(&report::parse_log(log)?)?, file)?;
    for b in &mut results.benches {
        b.model = figs.remove(&b.name);
    }
    for m in &mut results.macros {
        m.model = figs.remove(&m.name());
    }
    results.model_profile = Some(file.profile.clone());
    // The figures are the model's; the guest's clock keeps its own key.
    if results.clock != Clock::Model.key() {
        results.guest_clock = std::mem::replace(&mut results.clock, Clock::Model.key().into());
    }
    results.model_virt = file.virt.on();
    results.model_ept = file.virt == Virt::Ept;
    results.model_params = file
        .params
        .iter()
        .map(|(k, v)| (k.clone(), v.to_string()))
        .collect();
    results.model_cpus = file.ncpus as u32;
    Ok(())
}

/// After a boot: for a model boot, reads the plugin's file and merges it
/// into the boot's results (and removes the file); otherwise nothing.
/// Returns the file's text.
pub fn finish(plugin: Option<&Plugin>, log: &str, results: &mut Results) -> Result<Option<String>> {
    let Some(p) = plugin else {
        return Ok(None);
    };
    let text = std::fs::read_to_string(&p.out).with_context(|| {
        format!(
            "the model plugin wrote no file {} (did QEMU load it?)",
            p.out.display()
        )
    })?;
    let _ = std::fs::remove_file(&p.out);
    let file = parse_file(&text).with_context(|| format!("reading {}", p.out.display()))?;
    apply(results, log, &file)?;
    Ok(Some(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profiles_come_from_the_model() {
        let known = known_profiles();
        assert_eq!(
            known,
            ["p3", "p4", "core2", "penryn", "nehalem", "k10", "modern"]
        );
        assert!(check_profile("p4", &known).is_ok());
        let e = check_profile("k7", &known).unwrap_err().to_string();
        assert!(
            e.contains("\"k7\": no such model profile; known profiles: p3, p4, core2, penryn, nehalem, k10, modern"),
            "{e}"
        );
    }

    #[test]
    fn the_profile_follows_the_cpu_model() {
        for (cpu, p) in [
            ("qemu32", Some("modern")),
            ("pentium3", Some("p3")),
            ("pentium2", Some("p3")),
            ("pentium4", Some("p4")),
            ("core2duo", Some("core2")),
            ("Penryn-v1", Some("penryn")),
            ("Nehalem-IBRS", Some("nehalem")),
            ("Skylake-Client", Some("modern")),
            ("Haswell-noTSX", Some("modern")),
            ("phenom", Some("k10")),
            ("phenom-v1", Some("k10")),
            ("athlon", None),
            ("Opteron_G3", None),
            ("pentium", None),
            ("486", None),
        ] {
            assert_eq!(profile_for_cpu(cpu), p, "{cpu}");
        }
        let o = ModelOpts::for_cpu("athlon", Virt::Shadow);
        assert_eq!(
            (o.profile.as_str(), o.virt, o.from_cpu),
            ("modern", Virt::Shadow, true)
        );
        let o = options_for(Clock::Model, None, "pentium3")
            .unwrap()
            .unwrap();
        assert_eq!((o.profile.as_str(), o.from_cpu), ("p3", true));
        assert!(options_for(Clock::Icount, None, "pentium3")
            .unwrap()
            .is_none());
    }

    #[test]
    fn plugin_arguments() {
        let mut o = ModelOpts {
            profile: "p4".into(),
            virt: Virt::Shadow,
            pge: false,
            from_cpu: false,
            reference: false,
            shadow: false,
        };
        let a = qemu_args(Path::new("/t/libmodel.so"), &o, Path::new("/t/out.txt")).unwrap();
        assert_eq!(
            a,
            [
                "-plugin",
                "/t/libmodel.so,profile=p4,virt=on,out=/t/out.txt"
            ]
        );
        assert!(qemu_args(Path::new("/a,b/lib.so"), &o, Path::new("/o")).is_err());
        assert_eq!(o.label(), "modelled, profile p4, virt");
        let ept = ModelOpts {
            profile: "p4".into(),
            virt: Virt::Ept,
            pge: false,
            from_cpu: false,
            reference: false,
            shadow: false,
        };
        assert_eq!(ept.label(), "modelled, profile p4, virt ept");
        assert_eq!(
            qemu_args(Path::new("/t/libmodel.so"), &ept, Path::new("/t/out.txt")).unwrap()[1],
            "/t/libmodel.so,profile=p4,virt=ept,out=/t/out.txt"
        );
        o.pge = true;
        let a = qemu_args(Path::new("/t/libmodel.so"), &o, Path::new("/t/out.txt")).unwrap();
        assert_eq!(
            a[1],
            "/t/libmodel.so,profile=p4,virt=on,out=/t/out.txt,pge=on"
        );
    }

    fn snap(seq: u32, cycles: u64, l1: u64) -> String {
        format!(
            "snap cpu=0 stream=1 seq={seq} insns={} cycles={cycles} l1_misses={l1} l2_misses=0 tlb_misses=0 tlb_flushes=0 coherence_misses=0 invalidations=0 transfers=0 invalidations_received=0 upgrades=0 ipis={} vm_exits=0 clock={cycles}\n",
            cycles / 2,
            2 * l1
        )
    }

    /// Two calibration runs of 10 cycles (one of 14, cold), two batches.
    fn file() -> String {
        file_of(&[
            (0, 100, 0),
            (1, 114, 1),
            (2, 120, 1),
            (3, 130, 1),
            (4, 140, 1),
            (5, 150, 1),
            // batches: 4 calls each
            (6, 200, 1),
            (7, 250, 5),
            (8, 300, 5),
            (9, 342, 9),
        ])
    }

    /// A p3 model file of CPU 0's user snapshots: (seq, cycles, L1 misses).
    fn file_of(snaps: &[(u32, u64, u64)]) -> String {
        let params: String = model::profile::find("p3")
            .unwrap()
            .params()
            .iter()
            .map(|(k, v)| format!(" {k}={v}"))
            .collect();
        let mut s = format!("model1 profile=p3 virt=0 ncpus=1\nparam{params} pge=0\n");
        for &(seq, c, l1) in snaps {
            s += &snap(seq, c, l1);
        }
        s + "end\n"
    }

    const LOG: &str = "\
@@tb1 bench name=x.null mech=int80 path=full call=null n=2 min=1 p25=1 median=1 mean=1 p75=1 max=1 sd=0 outliers=0
@@tb1 samples name=x.null batch_size=4 stream=user snap_calib=0 calib_runs=3 snap_batches=6 values=4,4
@@tb1 samples name=old batch_size=4 values=4,4
";

    /// A guest's snapshot numbers at the edge of 32 bits are refused with
    /// the record's line, never added until they overflow (a panic) or
    /// cut to fit (another benchmark's snapshots).
    #[test]
    fn snapshot_numbers_past_32_bits_are_refused_naming_the_record() {
        let f = parse_file(&file()).unwrap();
        for (calib, why) in [
            ("4294967295", "run past the last snapshot number"),
            ("4294967294", "has no user snapshot 4294967295"),
            ("4294967296", "beyond any snapshot number"),
            ("99999999999999999999", "is not a number"),
        ] {
            let log = LOG.replace("snap_calib=0", &format!("snap_calib={calib}"));
            let e = format!("{:#}", merge_log(&log, &f).unwrap_err());
            assert!(e.contains("line 2") && e.contains(why), "{calib}: {e}");
        }
        let log = LOG.replace("snap_batches=6", "snap_batches=4294967295");
        let e = format!("{:#}", merge_log(&log, &f).unwrap_err());
        assert!(e.contains("line 2"), "{e}");
    }

    /// A stream past the plugin's cap: the benchmarks whose snapshots were
    /// dropped are left out, said, and the others keep their figures.
    #[test]
    fn figures_past_the_snapshot_cap_are_marked_incomplete() {
        let capped = file().replace("end\n", "capped cpu=0 stream=1 kept=8 dropped=100\nend\n");
        let f = parse_file(&capped).unwrap();
        let (figs, notes) = merge_log(LOG, &f).unwrap();
        assert!(figs.is_empty(), "x.null needs snapshots 6 to 9: {figs:?}");
        assert_eq!(notes.len(), 1);
        assert!(
            notes[0].starts_with("x.null: no model figures") && notes[0].contains("100 dropped"),
            "{notes:?}"
        );
        // A cap past every snapshot the benchmark uses: its figures stay.
        let f =
            parse_file(&file().replace("end\n", "capped cpu=0 stream=1 kept=10 dropped=1\nend\n"))
                .unwrap();
        let (figs, notes) = merge_log(LOG, &f).unwrap();
        assert!(figs.contains_key("x.null") && notes.is_empty());
    }

    /// A batch that counted fewer of something than the calibration: the
    /// subtraction stops at zero, and the figure says it was clamped.
    #[test]
    fn a_calibration_above_a_batch_marks_the_figure_clamped() {
        let f = parse_file(&file()).unwrap();
        let (figs, _) = merge_log(LOG, &f).unwrap();
        assert!(figs["x.null"].clamped.is_empty(), "{figs:?}");
        // Every calibration run misses L1 once; the first batch not at all.
        let f = parse_file(&file_of(&[
            (0, 100, 0),
            (1, 110, 1),
            (2, 120, 1),
            (3, 130, 2),
            (4, 140, 2),
            (5, 150, 3),
            (6, 200, 3),
            (7, 250, 3),
            (8, 300, 3),
            (9, 342, 7),
        ]))
        .unwrap();
        let (figs, _) = merge_log(LOG, &f).unwrap();
        let x = &figs["x.null"];
        assert_eq!(x.samples["l1_misses"], [0, 3]);
        assert!(
            x.is_clamped("l1_misses") && !x.is_clamped("cycles"),
            "{x:?}"
        );
        // A results file from before the field reads as nothing clamped.
        let old: ModelFigures = serde_json::from_str(
            r#"{"label":"","cycles":0,"l1_misses":0,"l2_misses":0,"tlb_misses":0,"tlb_flushes":0,"coherence_misses":0,"invalidations":0,"transfers":0,"insns":0,"samples":{}}"#,
        )
        .unwrap();
        assert!(old.clamped.is_empty());
    }

    #[test]
    fn events_applied_out_of_clock_order_are_said_in_every_table() {
        let f = parse_file(&file()).unwrap();
        let mut r = Results::default();
        apply(&mut r, LOG, &f).unwrap();
        assert_eq!(r.model_forced, 0);
        assert!(r.model_forced_note().is_none() && !table(&r).contains("out of"));
        let f =
            parse_file(&file().replace("end\n", "forced events=73 limit=4194304\nend\n")).unwrap();
        let mut r = Results::default();
        apply(&mut r, LOG, &f).unwrap();
        assert_eq!((r.model_forced, r.model_forced_limit), (73, 4194304));
        let note =
            "model: 73 events were applied out of modelled-clock order (more than 4194304 waited";
        assert!(table(&r).contains(note), "{}", table(&r));
        assert!(r.table().contains(note), "{}", r.table());
        assert!(r.to_json().unwrap().contains("\"model_forced\": 73"));
    }

    #[test]
    fn a_model_file_with_another_profiles_numbers_is_refused() {
        assert!(parse_file(&file()).is_ok());
        let e = parse_file(&file().replacen("profile=p3", "profile=p4", 1)).unwrap_err();
        assert!(
            format!("{e:#}").contains("not the named profile's"),
            "{e:#}"
        );
    }

    #[test]
    fn batches_minus_the_calibration_median() {
        let f = parse_file(&file()).unwrap();
        let m = merge_log(LOG, &f).unwrap().0;
        assert_eq!(m.len(), 1, "a samples record without snapshots is skipped");
        let x = &m["x.null"];
        // Calibration: 14, 10, 10 cycles -> median 10; l1 1, 0, 0 -> 0.
        // Batches: 50 and 42 cycles -> 40 and 32 -> per call 10 and 8.
        assert_eq!(x.samples["cycles"], [40, 32]);
        assert_eq!(x.cycles, 9.0);
        assert_eq!(x.samples["l1_misses"], [4, 4]);
        assert_eq!(x.l1_misses, 1.0);
        // IPIs (twice the L1 misses in this file): the same subtraction.
        assert_eq!(x.samples["ipis"], [8, 8]);
        assert_eq!(x.ipis, 2.0);
        assert_eq!(x.label, "modelled, profile p3");
    }

    #[test]
    fn the_macro_mix_gets_the_same_figures_per_operation() {
        let f = parse_file(&file()).unwrap();
        // The same snapshots as x.null's, named by a macro record: two
        // batches of 4 operations.
        let log = "@@tb1 macro mech=int80 ops=4 batches=2 ticks_per_op=1700.0 ops_per_s=588235.3 syscalls_per_op=4 stream=user snap_calib=0 calib_runs=3 snap_batches=6\n\
                   @@tb1 macro mech=sysenter ops=4 batches=2 ticks_per_op=1700.0 ops_per_s=588235.3 syscalls_per_op=4\n";
        let m = merge_log(log, &f).unwrap().0;
        assert_eq!(m.len(), 1, "a macro record without snapshots is skipped");
        let x = &m["macro.int80"];
        assert_eq!((x.samples["cycles"].clone(), x.cycles), (vec![40, 32], 9.0));
        let mut r = Results {
            macros: vec![crate::results::Macro {
                mech: "int80".into(),
                ops: 4,
                ..Default::default()
            }],
            ..Default::default()
        };
        apply(&mut r, log, &f).unwrap();
        assert_eq!(r.macros[0].model.as_ref().unwrap().cycles, 9.0);
        assert_eq!(metrics(&r)["macro.int80"], 9.0);
        assert!(table(&r).contains("macro.int80"), "{}", table(&r));
        assert!(
            r.table().contains("9.0 cycles/op  1.00 vs int 0x80"),
            "{}",
            r.table()
        );
    }

    #[test]
    fn a_missing_snapshot_names_the_benchmark() {
        let t = file().replace(&snap(9, 342, 9), "");
        let f = parse_file(&t).unwrap();
        let e = format!("{:#}", merge_log(LOG, &f).unwrap_err());
        assert!(
            e.contains("benchmark x.null") && e.contains("no user snapshot 9 of CPU 0"),
            "{e}"
        );
    }

    /// A model file that saw fewer CPUs than the boot's figures name is
    /// not that boot's: the 2-CPU forktest boot with `ncpus=1` was read,
    /// and stored as a 1-CPU model run.
    #[test]
    fn a_model_file_of_fewer_cpus_than_the_log_names_is_refused() {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/seeds");
        let log = std::fs::read_to_string(root.join("model_file.serial.log")).unwrap();
        let text = std::fs::read_to_string(root.join("model_file/forktest-modern-virt-smp2.model"))
            .unwrap();
        let mut r = Results::from_log(&log, "x", "import").unwrap();
        assert_eq!((r.clock.as_str(), r.guest_clock()), ("icount", "icount"));
        apply(&mut r, &log, &parse_file(&text).unwrap()).unwrap();
        assert_eq!(r.model_cpus, 2);
        // The results file names the clock its figures are in, the model,
        // and keeps the guest's apart; read back, it is a model run.
        assert_eq!((r.clock.as_str(), r.guest_clock()), ("model", "icount"));
        let back = Results::parse(&r.to_json().unwrap()).unwrap();
        assert_eq!(back.clock(), Some(Clock::Model));
        assert!(back.like().starts_with("clock=model "), "{}", back.like());
        // One written before the field said `icount` beside its profile.
        let old = Results {
            clock: "icount".into(),
            guest_clock: String::new(),
            ..back.clone()
        };
        assert_eq!((old.clock(), old.like()), (Some(Clock::Model), back.like()));
        // The same file as if one CPU had been modelled: its header, and
        // no snapshot of CPU 1 (which a file of one CPU cannot hold).
        let one: String = text
            .replacen("ncpus=2", "ncpus=1", 1)
            .lines()
            .filter(|l| !l.starts_with("snap cpu=1 "))
            .map(|l| format!("{l}\n"))
            .collect();
        let one = parse_file(&one).unwrap();
        let mut r = Results::from_log(&log, "x", "import").unwrap();
        let e = apply(&mut r, &log, &one).unwrap_err().to_string();
        assert_eq!(
            e,
            "benchmark forktest.fork_exit: the log names 2 CPUs, the model file ncpus=1"
        );
    }
}
