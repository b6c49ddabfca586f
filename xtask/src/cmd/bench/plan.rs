//! What a bench run is to do: its flags, the variants they name, and every
//! check that can fail before the first boot.

use std::path::PathBuf;

use anyhow::{bail, Result};
use clap::Args;

use crate::cmd::run::ModeArg;
use crate::cmd::BootArgs;
use crate::machine::CmdlineCheck;

use super::baseline::baseline_name;

/// A variant: a name and how it differs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Variant {
    pub name: String,
    /// Extra kernel command-line words.
    pub cmdline: String,
    /// Kernel features to build with.
    pub features: Vec<String>,
    /// A git revision to build, in a temporary worktree.
    pub rev: Option<String>,
}

/// Splits `NAME=VALUE`, with a clear error.
pub fn split_spec<'a>(flag: &str, spec: &'a str) -> Result<(&'a str, &'a str)> {
    match spec.split_once('=') {
        Some((n, v))
            if !n.is_empty()
                && n.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c)) =>
        {
            Ok((n, v))
        }
        _ => bail!(
            "{flag} takes NAME=VALUE with a name of letters, digits, '-', '_' or '.': got {spec:?}"
        ),
    }
}

/// The flag that named a variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Given {
    /// `--variant NAME=CMDLINE`.
    Cmdline,
    /// `--features NAME=FEATURES`.
    Features,
    /// `--rev NAME=REV`.
    Rev,
}

impl Given {
    /// The flag, and the id clap gives its field.
    const FLAGS: [(Given, &'static str); 3] = [
        (Given::Cmdline, "variants"),
        (Given::Features, "features"),
        (Given::Rev, "revs"),
    ];
}

#[derive(Args, Clone, Debug)]
pub struct BenchArgs {
    #[command(flatten)]
    pub boot: BootArgs,
    /// Boots per variant.
    #[arg(short = 'n', long = "boots", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub boots: u32,
    /// A variant by kernel command line: NAME=WORDS (e.g. a="entry=int80").
    #[arg(long = "variant", value_name = "NAME=CMDLINE")]
    pub variants: Vec<String>,
    /// A variant by kernel features: NAME=FEATURE[,FEATURE].
    #[arg(long = "features", value_name = "NAME=FEATURES")]
    pub features: Vec<String>,
    /// A variant by git revision, built in a temporary worktree: NAME=REV.
    #[arg(long = "rev", value_name = "NAME=REV")]
    pub revs: Vec<String>,
    /// The variant the others are compared against (default: the first
    /// --variant, --features or --rev given, in command-line order).
    #[arg(long, value_name = "NAME", conflicts_with = "baseline")]
    pub base: Option<String>,
    /// The variant flags in the order the command line gave them: which
    /// flag and which of its values ([`BenchArgs::in_order`]); empty when
    /// the flags did not come from a command line, and then --variant's
    /// come first, then --features', then --rev's.
    #[arg(skip)]
    pub given: Vec<(Given, usize)>,
    /// What each boot runs: a user program (`--prog`), or the SMP benchmarks.
    #[arg(long, value_enum, default_value = "run")]
    pub mode: ModeArg,
    /// The user program each boot runs (bench, locks).
    #[arg(long, default_value = abi::cmdline::DEFAULT_PROG)]
    pub prog: String,
    /// Metrics to compare (benchmark names such as int80.null, or macro.int80);
    /// default: every metric that differs between the variants.
    #[arg(long = "metric")]
    pub metrics: Vec<String>,
    /// Confidence level in percent.
    #[arg(long, default_value_t = 95.0)]
    pub confidence: f64,
    /// Save the first variant's figures as a named baseline
    /// (<out>/baselines/NAME.json; NAME is cleaned as --label is).
    #[arg(long, value_name = "NAME")]
    pub save_baseline: Option<String>,
    /// Compare against a saved baseline (it becomes the first set). A
    /// baseline from another clock, accelerator, emulator or CPU model is
    /// refused.
    #[arg(long, value_name = "NAME")]
    pub baseline: Option<String>,
    /// Where the exports go: <out>/<timestamp>/ (JSON, CSV, Markdown,
    /// ministat text, data files, SVG plots); baselines in <out>/baselines.
    #[arg(long, default_value = "results/bench")]
    pub out: PathBuf,
    /// Exit with status 3 when any compared metric changed (a CI gate on
    /// path lengths); 0 when every one is unchanged.
    #[arg(long)]
    pub fail_on_change: bool,
    /// With --fail-on-change: a change smaller than this, in percent, does
    /// not count.
    #[arg(long, value_name = "PCT", default_value_t = 0.0)]
    pub threshold: f64,
    /// With several CPUs under icount or the model: the whole comparison
    /// once per interleaving grain (instructions per CPU turn, as --turn),
    /// then a table of each metric's difference per grain that says where
    /// its direction changes (e.g. 2000,10000,50000).
    #[arg(
        long,
        value_name = "LIST",
        value_delimiter = ',',
        conflicts_with = "turn"
    )]
    pub turns: Vec<u32>,
    /// Print the post on stdout: the text to paste under a patch (one
    /// line of environment, a ministat block per changed metric, a table
    /// of every metric, the command that reproduces it). Every bench also
    /// writes it as post.txt and post.md; `cargo xtask post DIR` prints it
    /// again from a bench's directory.
    #[arg(long)]
    pub post: bool,
    /// The words the command line gave (after `cargo xtask`), for the
    /// command a post says reproduces the bench; empty when the flags did
    /// not come from a command line.
    #[arg(skip)]
    pub argv: Vec<String>,
}

impl BenchArgs {
    /// These flags with their variant flags in the order `m` (the matches
    /// they were parsed from) saw them: `--rev lfence=HEAD --variant
    /// lfence_nops=` compares lfence_nops against lfence, the first named.
    pub fn in_order(mut self, m: &clap::ArgMatches) -> BenchArgs {
        let mut at: Vec<(usize, Given, usize)> = Vec::new();
        for (g, id) in Given::FLAGS {
            if let Some(ix) = m.indices_of(id) {
                at.extend(ix.enumerate().map(|(i, pos)| (pos, g, i)));
            }
        }
        at.sort_unstable();
        self.given = at.into_iter().map(|(_, g, i)| (g, i)).collect();
        self
    }

    pub fn variants(&self) -> Result<Vec<Variant>> {
        let mut v = Vec::new();
        for s in &self.variants {
            let (n, c) = split_spec("--variant", s)?;
            v.push(Variant {
                name: n.into(),
                cmdline: c.into(),
                features: vec![],
                rev: None,
            });
        }
        for s in &self.features {
            let (n, f) = split_spec("--features", s)?;
            let features = f
                .split(',')
                .filter(|x| !x.is_empty())
                .map(str::to_string)
                .collect();
            v.push(Variant {
                name: n.into(),
                cmdline: String::new(),
                features,
                rev: None,
            });
        }
        for s in &self.revs {
            let (n, r) = split_spec("--rev", s)?;
            if r.is_empty() {
                bail!("--rev {s:?}: the revision is empty");
            }
            v.push(Variant {
                name: n.into(),
                cmdline: String::new(),
                features: vec![],
                rev: Some(r.into()),
            });
        }
        // Command-line order: the first variant named is the baseline.
        if !self.given.is_empty() {
            let (nc, nf) = (self.variants.len(), self.features.len());
            let mut slots: Vec<Option<Variant>> = v.into_iter().map(Some).collect();
            v = Vec::new();
            for &(g, i) in &self.given {
                let slot = match g {
                    Given::Cmdline => i,
                    Given::Features => nc + i,
                    Given::Rev => nc + nf + i,
                };
                v.extend(slots.get_mut(slot).and_then(Option::take));
            }
            // Whatever the order missed keeps its place after.
            v.extend(slots.into_iter().flatten());
        }
        if let Some(base) = &self.base {
            let Some(i) = v.iter().position(|x| &x.name == base) else {
                let names: Vec<&str> = v.iter().map(|x| x.name.as_str()).collect();
                bail!(
                    "--base {base:?}: no variant has that name; the variants: {}",
                    if names.is_empty() {
                        "none (name them with --variant, --features or --rev)".to_string()
                    } else {
                        names.join(", ")
                    }
                );
            };
            let b = v.remove(i);
            v.insert(0, b);
        }
        if v.is_empty() {
            v.push(Variant {
                name: "default".into(),
                cmdline: String::new(),
                features: vec![],
                rev: None,
            });
        }
        let mut names: Vec<&str> = v.iter().map(|x| x.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            bail!("two variants are named {:?}", w[0]);
        }
        if v.len() + usize::from(self.baseline.is_some()) > 7 {
            bail!("ministat tells at most 7 sets apart");
        }
        if !(self.confidence > 0.0 && self.confidence < 100.0) {
            bail!("--confidence must lie strictly between 0 and 100");
        }
        if !(self.threshold.is_finite() && self.threshold >= 0.0) {
            bail!("--threshold must be a percentage of 0 or more");
        }
        for name in self.save_baseline.iter().chain(&self.baseline) {
            baseline_name(name)?;
        }
        for m in &self.metrics {
            check_metric_name(m)?;
        }
        // Every variant's features exist in the kernel it builds (a --rev's
        // at that revision), before the first build.
        for x in v.iter().filter(|x| !x.features.is_empty()) {
            if let Some(known) = crate::kbuild::kernel_features(x.rev.as_deref()) {
                crate::kbuild::check_features(&format!("variant {}", x.name), &x.features, &known)?;
            }
        }
        for x in &v {
            let words = format!(
                "{} prog={} {} {}",
                self.mode.word(),
                self.prog,
                x.cmdline,
                self.boot.append
            );
            let check = CmdlineCheck::of(&words);
            if !check.invalid.is_empty() {
                bail!(
                    "variant {}: its kernel command line is invalid: {}",
                    x.name,
                    check.invalid.join("; ")
                );
            }
            if let Some(w) = check.repeat_warning() {
                eprintln!("variant {}: {w}", x.name);
            }
        }
        Ok(v)
    }
}

/// `--metric NAME` names a metric some boot can report: a benchmark name
/// (`<group>.<figure>...`, a mechanism or a group of `abi::report::names`)
/// or, for variants compared call by call, a call or `macro`. Checked
/// before any boot; whether the boots measured it is checked after.
pub fn check_metric_name(m: &str) -> Result<()> {
    use abi::report::names;
    let group = m.split('.').next().unwrap_or("");
    let known = abi::Mechanism::from_key(group).is_some()
        || names::GROUPS.contains(&group)
        || !m.contains('.') && names::CALLS.contains(&m);
    if known {
        return Ok(());
    }
    let mechs: Vec<&str> = abi::Mechanism::ALL.iter().map(|x| x.key()).collect();
    bail!(
        "--metric {m:?}: not a metric name: a benchmark such as int80.null, macro.int80, locks.contended.128, \
         a call ({}) when each variant uses one mechanism; groups: {}, {}",
        names::CALLS.join(", "),
        mechs.join(", "),
        names::GROUPS.join(", ")
    )
}

pub(super) fn describe(v: &Variant) -> String {
    let mut d = Vec::new();
    if !v.cmdline.is_empty() {
        d.push(format!("cmdline: {}", v.cmdline));
    }
    if !v.features.is_empty() {
        d.push(format!("features: {}", v.features.join(",")));
    }
    if let Some(r) = &v.rev {
        d.push(format!("rev: {r}"));
    }
    if d.is_empty() {
        "as built".into()
    } else {
        d.join("; ")
    }
}
