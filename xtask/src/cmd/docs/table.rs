//! Tables the book shows that no single command prints: each is made from
//! the results JSON of real boots (`cargo xtask run --json`), printed as
//! Markdown, and kept current by `cargo xtask docs` like any output block.

use std::process::Command;

use anyhow::{bail, Context, Result};
use clap::ValueEnum;
use serde_json::Value;

use crate::kbuild;

/// The tables `cargo xtask docs --table` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Table {
    /// Each entry mechanism's round trips: icount's instructions beside the
    /// modelled cycles of every model profile.
    Mechanisms,
    /// The fork experiment in the mail's form: forktest under `pmap=apte`
    /// (old) and `pmap=direct` (new), one row per system.
    Forktest,
}

/// The forktest boots' settings: the parent's 64 touched pages, fork=cow
/// (as the experiment's kernel forked), 4 batches of 8 rounds.
const FORKTEST_SETTINGS: &str = "fork=cow fork_pages=64 batches=4";

/// The systems of the forktest table: (profile, virt, CPUs).
const FORKTEST_SYSTEMS: &[(&str, bool, u32)] = &[
    ("p4", false, 1),
    ("p4", true, 1),
    ("modern", false, 1),
    ("modern", true, 1),
    ("modern", false, 2),
    ("modern", true, 2),
];

/// forktest.fork_exit of one boot: (instructions, modelled cycles) per round.
fn forktest_figures(profile: &str, virt: bool, cpus: u32, pmap: &str) -> Result<(f64, f64)> {
    let append = format!("{FORKTEST_SETTINGS} pmap={pmap}");
    let cpus = cpus.to_string();
    let mut args = vec![
        "run",
        "--no-save",
        "--json",
        "--prog",
        "forktest",
        "--clock",
        "model",
        "--profile",
        profile,
        "--smp",
        &cpus,
        "--append",
        &append,
    ];
    if virt {
        args.push("--virt");
    }
    let r = results_of(&args)?;
    let name = abi::report::names::FORKTEST_FORK_EXIT;
    let bench = r["benches"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == name))
        .with_context(|| format!("profile {profile}: no {name} in the results"))?;
    // The guest's icount median and the model's cycles. (The model's own
    // instruction count may differ by a few per round: a timer tick that
    // falls in one batch moves the two medians differently.)
    match (bench["median"].as_f64(), bench["model"]["cycles"].as_f64()) {
        (Some(i), Some(c)) if r["unit"] == "instructions" => Ok((i, c)),
        _ => bail!("profile {profile}: {name} has no instructions or no modelled cycles"),
    }
}

/// The forktest table: two model boots per system.
fn forktest() -> Result<String> {
    let mut out = String::from(
        "| system | old: pmap=apte (modelled cycles) | new: pmap=direct (modelled cycles) | speed up (old/new) | instructions (old, new) |\n| --- | ---: | ---: | ---: | ---: |\n",
    );
    for &(profile, virt, cpus) in FORKTEST_SYSTEMS {
        let (oi, oc) = forktest_figures(profile, virt, cpus, "apte")?;
        let (ni, nc) = forktest_figures(profile, virt, cpus, "direct")?;
        out.push_str(&format!(
            "| {profile}, {}, {} | {} | {} | {:.2} | {}, {} |\n",
            if virt { "virt" } else { "bare" },
            if cpus > 1 {
                format!("MP ({cpus} CPUs)")
            } else {
                "SP".to_string()
            },
            cell(oc),
            cell(nc),
            oc / nc,
            cell(oi),
            cell(ni)
        ));
    }
    out.push_str(&format!(
        "\nPer fork + exit + wait round (the parent's); QEMU TCG, one boot per cell: \
         `cargo xtask run --prog forktest --clock model --profile P [--virt] [--smp 2] --append \"{FORKTEST_SETTINGS} pmap=S\"` \
         (medians of the batches; instructions from icount in the same boots)."
    ));
    Ok(out)
}

/// The batching of the mechanisms table's boots: small, because the
/// modelled cycles per call of these warm loops do not depend on it (the
/// default 64 x 4096 gives the same figures, four times slower).
const MECHANISM_BATCHING: &str = "batches=8 batch_size=512";

/// The rows of the mechanisms table: (benchmark name, what the row says).
const MECHANISM_ROWS: &[(&str, &str)] = &[
    ("int80.floor", "int 0x80 floor"),
    ("int80.null", "int 0x80 null"),
    ("int80.geteuid", "int 0x80 geteuid"),
    ("sysenter.floor", "sysenter floor"),
    ("sysenter.null", "sysenter null"),
    ("sysenter.geteuid", "sysenter geteuid"),
    ("callgate.floor", "call gate floor"),
    ("callgate.null", "call gate null"),
    ("callgate.geteuid", "call gate geteuid"),
];

/// The results JSON of `cargo xtask <args>` (this binary, `--json`).
fn results_of(args: &[&str]) -> Result<Value> {
    let exe = std::env::current_exe()?;
    let o = Command::new(exe)
        .args(args)
        .current_dir(kbuild::root())
        .output()
        .with_context(|| format!("cannot run xtask {}", args.join(" ")))?;
    if !o.status.success() {
        bail!(
            "`cargo xtask {}` failed ({}):\n{}",
            args.join(" "),
            o.status,
            String::from_utf8_lossy(&o.stderr)
        );
    }
    serde_json::from_slice(&o.stdout)
        .with_context(|| format!("`cargo xtask {}`: stdout is not JSON", args.join(" ")))
}

/// One benchmark of a results JSON: (instructions per call, modelled cycles
/// per call). The instructions are the guest's own count (its clock is
/// icount under the model) and must equal the model's.
fn mechanism_figures(results: &Value, name: &str, profile: &str) -> Result<(f64, f64)> {
    if results["unit"] != "instructions" {
        bail!(
            "profile {profile}: the guest's unit is {}, not instructions",
            results["unit"]
        );
    }
    let bench = results["benches"]
        .as_array()
        .and_then(|b| b.iter().find(|b| b["name"] == name))
        .with_context(|| format!("profile {profile}: no benchmark {name} in the results"))?;
    let insns = bench["median"]
        .as_f64()
        .with_context(|| format!("profile {profile}: {name} has no median"))?;
    let model = &bench["model"];
    let cycles = model["cycles"]
        .as_f64()
        .with_context(|| format!("profile {profile}: {name} has no modelled cycles"))?;
    if model["insns"].as_f64() != Some(insns) {
        bail!(
            "profile {profile}: {name}: the model counted {} instructions per call, icount {insns}",
            model["insns"]
        );
    }
    Ok((insns, cycles))
}

/// A figure as the table shows it: whole numbers without decimals.
fn cell(x: f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        format!("{x:.1}")
    }
}

/// The mechanisms table: one model boot per profile.
fn mechanisms() -> Result<String> {
    let profiles = crate::model::known_profiles();
    let mut runs = Vec::new();
    for p in &profiles {
        runs.push(results_of(&[
            "run",
            "--no-save",
            "--json",
            "--clock",
            "model",
            "--profile",
            p,
            "--append",
            MECHANISM_BATCHING,
        ])?);
    }
    let mut out = String::from("| round trip | instructions (icount) |");
    for p in &profiles {
        out.push_str(&format!(" {p} (modelled cycles) |"));
    }
    out.push_str("\n| --- | ---: |");
    for _ in &profiles {
        out.push_str(" ---: |");
    }
    out.push('\n');
    for (name, label) in MECHANISM_ROWS {
        let mut insns = None;
        let mut cells = Vec::new();
        for (p, r) in profiles.iter().zip(&runs) {
            let (i, c) = mechanism_figures(r, name, p)?;
            match insns {
                None => insns = Some(i),
                Some(first) if first != i => {
                    bail!("{name}: {first} instructions under one profile, {i} under {p}")
                }
                Some(_) => {}
            }
            cells.push(cell(c));
        }
        let insns = insns.context("no model profiles")?;
        out.push_str(&format!(
            "| {label} | {} | {} |\n",
            cell(insns),
            cells.join(" | ")
        ));
    }
    out.push_str(&format!(
        "\nPer round trip, loop included; QEMU TCG, one boot per profile: \
         `cargo xtask run --clock model --profile P --append \"{MECHANISM_BATCHING}\"` \
         (medians of the batches; instructions from icount in the same boots, equal under every profile)."
    ));
    Ok(out)
}

/// Prints `table` on stdout.
pub fn print(table: Table) -> Result<i32> {
    let text = match table {
        Table::Mechanisms => mechanisms()?,
        Table::Forktest => forktest()?,
    };
    println!("{text}");
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn results(insns: f64, model_insns: f64) -> Value {
        serde_json::json!({
            "unit": "instructions",
            "benches": [{"name": "int80.null", "median": insns,
                         "model": {"cycles": 990.0, "insns": model_insns}}]
        })
    }

    #[test]
    fn figures_come_from_the_results_and_must_agree() {
        assert_eq!(
            mechanism_figures(&results(24.0, 24.0), "int80.null", "p4").unwrap(),
            (24.0, 990.0)
        );
        let e = mechanism_figures(&results(24.0, 25.0), "int80.null", "p4").unwrap_err();
        assert!(e.to_string().contains("the model counted"), "{e}");
        assert!(mechanism_figures(&results(24.0, 24.0), "sysenter.null", "p4").is_err());
        let tsc = serde_json::json!({"unit": "cycles", "benches": []});
        assert!(mechanism_figures(&tsc, "int80.null", "p4").is_err());
        assert_eq!(cell(24.0), "24");
        assert_eq!(cell(14.14), "14.1");
    }
}
