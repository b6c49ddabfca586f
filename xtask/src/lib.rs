//! `cargo xtask`: the testbed's host tool. One place for the build-std
//! flags (`kbuild`), the machines and their command lines (`machine`) and
//! the reading of the kernel's reports (`report`, `results`). Each command
//! lives in its own file under `cmd/`; this file only dispatches
//! (`main.rs` calls [`main`]).
//!
//! The modules stand in layers, each importing only its own and those
//! below: `report`, `ministat` and `parallel` at the bottom; `results` (a run's
//! results as serde types, parsed once, read by every command in process);
//! `model` (the model plugin's host side) beside `lava`; `compare`;
//! `export`; the machines (`machine`, `kbuild`, `preflight`, `iso`); the
//! commands (`cmd`) on top. `cargo xtask layers --src xtask/src` checks
//! the order (`cmd/layers.rs` lists it) and a unit test holds the tree to it.
//!
//! A library so the fuzz targets (`fuzz/`) reach the readers of untrusted
//! text through [`fuzzing`]; every other module stays private, so the
//! compiler still finds what nothing uses.

mod cmd;
mod compare;
mod export;
pub mod fuzzing;
mod iso;
mod kbuild;
mod ktap;
mod lava;
mod machine;
mod ministat;
mod model;
mod parallel;
mod preflight;
mod report;
mod results;
#[cfg(test)]
mod testalloc;

use clap::{CommandFactory, FromArgMatches, Parser, Subcommand};

#[derive(Parser)]
#[command(
    name = "cargo xtask",
    about = "Build, boot and measure the i386 testbed",
    after_help = "Start with `cargo xtask run`; `cargo xtask test` runs every test."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Build the kernel and the user programs.
    Build,
    /// Build, boot in QEMU, and show what the kernel reports.
    Run(cmd::run::RunArgs),
    /// Host unit tests, then the kernel's own tests booted in QEMU.
    Test(cmd::test::TestArgs),
    /// The kernel and user tests booted again and again under multi-threaded TCG (the CPUs in parallel): races show.
    Soak(cmd::test::soak::SoakArgs),
    /// Build a GRUB hybrid image (CD or USB stick) for real hardware.
    Iso(cmd::iso::IsoArgs),
    /// Install what the testbed needs (rust-src, QEMU, GRUB tools).
    Setup,
    /// LAVA job definitions for a lab's QEMU workers and PCs (--local: run them here).
    Lava(cmd::lava::LavaArgs),
    /// Submit those jobs to a LAVA server, wait, fetch and import them (up/down: a LAVA instance here; fetch: resume).
    Lab(cmd::lab::LabArgs),
    /// Turn a serial log (real hardware's, or a LAVA job's log) into results JSON.
    Import(cmd::import::ImportArgs),
    /// Many boots per variant, interleaved, compared with ministat's statistics.
    Bench(cmd::bench::BenchArgs),
    /// The post of a bench's results directory: the text to paste under a patch (plain text, or --md).
    Post(cmd::post::PostArgs),
    /// The speed-up table across results files (time without / time with).
    Table(cmd::table::TableArgs),
    /// The pmap mail's forktest table: old (pmap=apte) against new (pmap=direct) per machine, SP and MP, bare and virt, under the model.
    Forktest(cmd::forktest::ForktestArgs),
    /// lmbench's process-level rows (the `lmbench` program) as lmbench's summary table.
    Lmbench(cmd::lmbench::LmbenchArgs),
    /// What the model clock costs: model / icount wall time of the same boots on 1, 2 and 4 CPUs.
    ModelSpeed(cmd::modelspeed::ModelSpeedArgs),
    /// One system call through a mechanism, explained step by step.
    Trace(cmd::trace::TraceArgs),
    /// QEMU paused with a gdb stub; gdb with symbols and a breakpoint on each entry stub.
    Gdb(cmd::gdb::GdbArgs),
    /// Regenerate the command outputs shown in README.md and docs/ (--check: fail if stale or a link is broken).
    Docs(cmd::docs::DocsArgs),
    /// The kernel's largest import circle (fails above the limit).
    Layers(cmd::layers::LayersArgs),
    /// FreeBSD ministat on files of numbers.
    Ministat(ministat::Args),
    /// Coverage-guided fuzzing (cargo-fuzz, libFuzzer) of the readers of logs, model files, results and ministat input.
    Fuzz(cmd::fuzz::FuzzArgs),
}

/// The command line's command, run; exits the process with its status.
pub fn main() -> ! {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    let result = match cli.cmd {
        Cmd::Build => cmd::build::build(),
        Cmd::Run(a) => cmd::run::run(a),
        Cmd::Test(a) => cmd::test::run(a),
        Cmd::Soak(a) => cmd::test::soak::soak(a),
        Cmd::Iso(a) => cmd::iso::make_iso(a),
        Cmd::Setup => cmd::setup::setup(),
        Cmd::Lava(a) => cmd::lava::lava(a),
        Cmd::Lab(a) => cmd::lab::lab(a),
        Cmd::Import(a) => cmd::import::import(a),
        // The variants in the order the command line named them.
        Cmd::Bench(a) => match matches.subcommand_matches("bench") {
            Some(m) => {
                let mut a = a.in_order(m);
                a.argv = std::env::args().skip(1).collect();
                cmd::bench::bench(a)
            }
            None => cmd::bench::bench(a),
        },
        Cmd::Post(a) => cmd::post::post(a),
        Cmd::Table(a) => cmd::table::table(a),
        Cmd::Forktest(a) => cmd::forktest::forktest(a),
        Cmd::Lmbench(a) => cmd::lmbench::lmbench(a),
        Cmd::ModelSpeed(a) => cmd::modelspeed::model_speed(a),
        Cmd::Trace(a) => cmd::trace::trace(a),
        Cmd::Gdb(a) => cmd::gdb::gdb(a),
        Cmd::Docs(a) => cmd::docs::docs(a),
        Cmd::Layers(a) => cmd::layers::layers(a),
        Cmd::Ministat(a) => Ok(ministat::main(a)),
        Cmd::Fuzz(a) => cmd::fuzz::fuzz(a),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}
