//! `cargo xtask`: the testbed's host tool. One place for the build-std
//! flags, the QEMU command lines and the reading of the kernel's reports.

mod compare;
mod iso;
mod kbuild;
mod ministat;
mod model;
mod modeltest;
mod preflight;
mod qemu;
mod report;
mod results;
mod selftest;
mod teach;

use std::path::PathBuf;
use std::time::Duration;

use anyhow::{bail, Context, Result};
use clap::{Args, Parser, Subcommand, ValueEnum};

use qemu::{Accel, AccelChoice, Boot};

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
    Run(RunArgs),
    /// Host unit tests, then the kernel's own tests booted in QEMU.
    Test(selftest::TestArgs),
    /// Build a GRUB hybrid image (CD or USB stick) for real hardware.
    Iso(IsoArgs),
    /// Install what the testbed needs (rust-src, QEMU, GRUB tools).
    Setup,
    /// Turn a serial log (e.g. captured from real hardware) into results JSON.
    Import(ImportArgs),
    /// Many boots per variant, interleaved, compared with ministat's statistics.
    Bench(compare::BenchArgs),
    /// The speed-up table across results files (time without / time with).
    Table(compare::TableArgs),
    /// One system call through a mechanism, explained step by step.
    Trace(teach::TraceArgs),
    /// QEMU paused with a gdb stub; gdb with symbols and a breakpoint on each entry stub.
    Gdb(teach::GdbArgs),
    /// Regenerate the command outputs shown in docs/*.md (--check: fail if stale).
    Docs(teach::DocsArgs),
    /// FreeBSD ministat on files of numbers.
    Ministat(ministat::Args),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ClockArg {
    /// QEMU -icount: one tick per guest instruction (TCG only; exact, deterministic).
    Icount,
    /// RDTSC: real cycles under KVM and on real hardware.
    Tsc,
    /// icount plus the model plugin: modelled cycles of a CPU profile (TCG only).
    Model,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ModeArg {
    Run,
    Test,
    /// Start every CPU and run the SMP benchmarks (use with --smp N).
    Smp,
}

/// How to boot: shared by `run` and the tests.
#[derive(Args, Clone, Debug)]
pub struct BootArgs {
    /// Accelerator: auto picks KVM only when /dev/kvm opens and the host CPU has vmx or svm.
    #[arg(long, value_enum, default_value = "auto")]
    pub accel: AccelChoice,
    /// QEMU CPU model (default: qemu32 under TCG, host under KVM). AMD models
    /// (athlon, phenom, ...) boot with qemu-system-x86_64 so SYSCALL is visible.
    #[arg(long)]
    pub cpu: Option<String>,
    /// Number of CPUs.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    smp: u32,
    /// Extra kernel command-line words (key=value), appended last.
    #[arg(long, default_value = "")]
    pub append: String,
    /// Boot through GRUB (a Multiboot 2 image) instead of QEMU's -kernel.
    #[arg(long)]
    pub grub: bool,
    /// Seconds before a hung guest is killed.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
    /// Clock for timed regions (default: icount under TCG, tsc under KVM).
    #[arg(long, value_enum)]
    clock: Option<ClockArg>,
    /// The model's CPU profile (with --clock model; see model/profiles.toml).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// With --clock model: add a VM exit's cost to CR3 writes and invlpg.
    #[arg(long)]
    pub virt: bool,
}

#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    boot: BootArgs,
    /// What the kernel does: run a user program, or its tests.
    #[arg(long, value_enum, default_value = "run")]
    mode: ModeArg,
    /// The user program to run.
    #[arg(long, default_value = abi::cmdline::DEFAULT_PROG)]
    prog: String,
    /// Show the machine records too, not only the human text.
    #[arg(long)]
    records: bool,
    /// Print the results JSON on stdout (the kernel's text goes to stderr).
    #[arg(long)]
    json: bool,
    /// Label in the results file name: results/<timestamp>-<label>.json.
    #[arg(long, default_value = "default")]
    label: String,
    /// Do not write a results file.
    #[arg(long)]
    no_save: bool,
    /// Compare mechanisms over this boot's batches, e.g. int80,sysenter.
    #[arg(long, value_name = "MECHS")]
    compare: Option<String>,
    /// The call --compare looks at: floor, null, getpid, geteuid, write1.
    #[arg(long, default_value = "null")]
    call: String,
    /// Confidence level for --compare, in percent.
    #[arg(long, default_value_t = 95.0)]
    confidence: f64,
}

#[derive(Args)]
struct ImportArgs {
    /// The serial log (what the kernel printed on COM1).
    log: PathBuf,
    /// Label in the results file name.
    #[arg(long, default_value = "import")]
    label: String,
    /// Print the JSON on stdout instead of the table.
    #[arg(long)]
    json: bool,
    /// Do not write a results file.
    #[arg(long)]
    no_save: bool,
}

#[derive(Args)]
struct IsoArgs {
    /// Where to write the image.
    #[arg(long, short, default_value = "target/testbed.iso")]
    output: PathBuf,
    /// Seconds the GRUB menu waits.
    #[arg(long, default_value_t = 5)]
    menu_timeout: u32,
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Build => kbuild::build(false).map(|a| {
            println!("kernel: {}", a.kernel.display());
            for (p, _) in &a.programs {
                println!("program: {}", p.display());
            }
            0
        }),
        Cmd::Run(a) => run(a),
        Cmd::Test(a) => selftest::run(a),
        Cmd::Iso(a) => make_iso(a),
        Cmd::Setup => setup(),
        Cmd::Import(a) => import(a),
        Cmd::Bench(a) => compare::bench(a),
        Cmd::Table(a) => compare::table(a),
        Cmd::Trace(a) => teach::trace(a),
        Cmd::Gdb(a) => teach::gdb(a),
        Cmd::Docs(a) => teach::docs(a),
        Cmd::Ministat(a) => Ok(ministat::main(a)),
    };
    match result {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(1);
        }
    }
}

fn setup() -> Result<i32> {
    preflight::ensure_rust_src(&kbuild::root())?;
    preflight::ensure_tools()?;
    println!("setup: rust-src, QEMU and the GRUB tools are present");
    Ok(0)
}

/// A boot assembled from the flags: the accelerator decided, the clock
/// chosen, the command line written.
pub struct Prepared {
    pub boot: Boot,
    pub clock: ClockArg,
    /// `--clock model`: the options and the file the plugin writes.
    pub model: Option<(model::ModelOpts, PathBuf)>,
}

pub fn prepare(
    a: &BootArgs,
    art: &kbuild::Artifacts,
    words: &str,
    iso_dir: &std::path::Path,
) -> Result<Prepared> {
    let (accel, notice) = qemu::detect_accel(a.accel);
    if let Some(n) = notice {
        eprintln!("{n}");
    }
    let clock = a.clock.unwrap_or(match accel {
        Accel::Tcg => ClockArg::Icount,
        Accel::Kvm => ClockArg::Tsc,
    });
    if clock == ClockArg::Icount && accel == Accel::Kvm {
        bail!("--clock icount needs TCG (QEMU's -icount); use --clock tsc or --accel tcg");
    }
    if clock == ClockArg::Model && accel == Accel::Kvm {
        bail!("--clock model needs TCG (a TCG plugin under -icount); use --accel tcg");
    }
    let model = match clock {
        ClockArg::Model => {
            let opts = model_opts(a)?;
            let lib = model::build_plugin(&kbuild::root())?;
            std::fs::create_dir_all(iso_dir)?;
            let out = iso_dir.join(format!("model-{}.txt", std::process::id()));
            let _ = std::fs::remove_file(&out);
            Some((opts, lib, out))
        }
        _ => {
            if a.profile.is_some() || a.virt {
                bail!("--profile and --virt choose the model: use them with --clock model");
            }
            None
        }
    };
    // The guest's clock: the model runs under icount.
    let clock_key = match clock {
        ClockArg::Icount | ClockArg::Model => "icount",
        ClockArg::Tsc => "tsc",
    };
    let cmdline = format!(
        "{words} clock={clock_key} accel={} {}",
        accel.key(),
        a.append
    )
    .trim()
    .to_string();
    let mut boot = Boot {
        kernel: art.kernel.clone(),
        modules: art.programs.clone(),
        cmdline: cmdline.clone(),
        cdrom: None,
        cpu: a.cpu.clone(),
        smp: a.smp,
        accel,
        icount: clock != ClockArg::Tsc,
        memory_mib: 128,
        timeout: Duration::from_secs(a.timeout),
        extra: vec![],
    };
    if a.grub {
        std::fs::create_dir_all(iso_dir)?;
        let entry = iso::Entry {
            title: "i386 testbed".into(),
            cmdline,
            multiboot2: true,
        };
        let out = iso_dir.join("run.iso");
        boot.cdrom = Some(iso::build(art, &[entry], 0, &out)?);
    }
    let model = match model {
        Some((opts, lib, out)) => {
            boot.extra.extend(model::qemu_args(&lib, &opts, &out)?);
            Some((opts, out))
        }
        None => None,
    };
    Ok(Prepared { boot, clock, model })
}

/// The model options of `--profile`/`--virt`, the profile checked against
/// the model's list before anything boots.
pub fn model_opts(a: &BootArgs) -> Result<model::ModelOpts> {
    let profile = a
        .profile
        .clone()
        .unwrap_or_else(|| model::DEFAULT_PROFILE.to_string());
    model::check_profile(&profile, &model::known_profiles(&kbuild::root())?)?;
    Ok(model::ModelOpts {
        profile,
        virt: a.virt,
    })
}

impl BootArgs {
    pub fn timeout_secs(&self) -> u64 {
        self.timeout
    }
}

/// Boot flags as the tests use them: TCG, the icount clock, `cpu` if given.
pub fn test_boot_args(cpu: Option<&str>) -> BootArgs {
    BootArgs {
        accel: AccelChoice::Tcg,
        cpu: cpu.map(str::to_string),
        smp: 1,
        append: String::new(),
        grub: false,
        timeout: 60,
        clock: Some(ClockArg::Icount),
        profile: None,
        virt: false,
    }
}

fn qemu_version(binary: &str) -> String {
    std::process::Command::new(binary)
        .arg("--version")
        .output()
        .ok()
        .and_then(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(3).map(str::to_string))
        })
        .unwrap_or_else(|| "?".into())
}

fn run(a: RunArgs) -> Result<i32> {
    if let Some(m) = &a.compare {
        for k in m.split(',') {
            if abi::Mechanism::from_key(k).is_none() {
                bail!(
                    "--compare {m}: {k:?} is not a mechanism (int80, sysenter, callgate, syscall)"
                );
            }
        }
        if !["floor", "null", "getpid", "geteuid", "write1"].contains(&a.call.as_str()) {
            bail!(
                "--call {}: not one of floor, null, getpid, geteuid, write1",
                a.call
            );
        }
    }
    if a.boot.clock == Some(ClockArg::Model) {
        // An unknown profile is refused before anything is built or booted.
        model_opts(&a.boot)?;
    }
    preflight::ensure(if a.boot.grub {
        preflight::Need::QemuAndGrub
    } else {
        preflight::Need::Qemu
    })?;
    let art = kbuild::build(true)?;
    let mode = match a.mode {
        ModeArg::Run => "mode=run",
        ModeArg::Test => "mode=test",
        ModeArg::Smp => "mode=smp",
    };
    let words = format!("{mode} prog={}", a.prog);
    let p = prepare(&a.boot, &art, &words, &kbuild::root().join("target/xtask"))?;
    println!(
        "i386 testbed  QEMU {} {}  clock={}  cpu={}{}",
        qemu_version(p.boot.binary()),
        p.boot.accel.key().to_uppercase(),
        match p.clock {
            ClockArg::Icount => "icount (1 tick = 1 guest instruction)".to_string(),
            ClockArg::Tsc => "tsc".to_string(),
            ClockArg::Model => format!(
                "model (icount, plus cycles {})",
                p.model.as_ref().map_or(String::new(), |(o, _)| o.label())
            ),
        },
        p.boot.cpu_model(),
        if a.boot.grub {
            "  via GRUB (Multiboot 2)"
        } else {
            ""
        }
    );
    let show_records = a.records;
    let json = a.json;
    let log = qemu::run(&p.boot, &mut |line| {
        if show_records || !line.contains(abi::report::MARKER) {
            if json {
                eprintln!("{line}");
            } else {
                println!("{line}");
            }
        }
    })
    .context("booting QEMU")?;
    if !log.succeeded() {
        eprintln!("run failed: {}", log.explain(20));
        return Ok(1);
    }
    let mut results = results::Results::from_log(&log.serial, &a.label, "qemu")
        .context("reading the kernel's report")?;
    model::finish(&p, &log.serial, &mut results)?;
    if results.model_profile.is_some() {
        println!();
        print!("{}", model::table(&results));
    }
    if !results.benches.is_empty() && !a.no_save {
        let path = results.save(&kbuild::root().join("results"))?;
        eprintln!("results: {}", path.display());
    }
    if json {
        print!("{}", results.to_json()?);
    }
    if let Some(mechs) = &a.compare {
        println!();
        print!(
            "{}",
            compare::within_boot(&results, mechs, &a.call, a.confidence)?
        );
    }
    eprintln!("run: finished in {:.2} s", log.wall.as_secs_f64());
    Ok(0)
}

fn import(a: ImportArgs) -> Result<i32> {
    let bytes =
        std::fs::read(&a.log).with_context(|| format!("cannot read {}", a.log.display()))?;
    let text = String::from_utf8_lossy(&bytes);
    let results = results::Results::from_log(&text, &a.label, "import")
        .with_context(|| format!("{} is not a usable testbed log", a.log.display()))?;
    if results.benches.is_empty() {
        bail!(
            "{} holds no benchmark records (was the kernel run with mode=run prog=bench?)",
            a.log.display()
        );
    }
    if a.json {
        print!("{}", results.to_json()?);
    } else {
        print!("{}", results.table());
    }
    if !a.no_save {
        let path = results.save(&kbuild::root().join("results"))?;
        eprintln!("results: {}", path.display());
    }
    Ok(0)
}

fn make_iso(a: IsoArgs) -> Result<i32> {
    preflight::ensure_tools()?;
    let art = kbuild::build(true)?;
    let out = if a.output.is_absolute() {
        a.output
    } else {
        std::env::current_dir()?.join(a.output)
    };
    if let Some(dir) = out.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let iso = iso::build(&art, &iso::default_entries(), a.menu_timeout, &out)?;
    println!("image: {}", iso.display());
    println!(
        "boot it in QEMU:  qemu-system-i386 -cdrom {} -serial stdio",
        iso.display()
    );
    println!("or write it to a USB stick (all data on it is lost):  dd if={} of=/dev/sdX bs=4M conv=fsync", iso.display());
    Ok(0)
}
