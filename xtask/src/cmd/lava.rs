//! `cargo xtask lava`: LAVA job definitions for the experiment the flags
//! name (the program, the kernel command line, variants, boots per
//! variant), one job per boot of each variant, for a lab's QEMU workers or
//! its real PCs; with `--local`, each job run here by `lava-run` and its
//! log imported, as a lab would run it.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use clap::{Args, ValueEnum};

use super::bench::plan::split_spec;
use super::run::ModeArg;
use crate::kbuild::{self, Artifacts};
use crate::lava::{self, Job, JobKind, Lab, PcBoot, QemuContext, Watch};
use crate::machine::{self, qemu, AccelChoice, Clock, CmdlineCheck, Loader, Machine};
use crate::{iso, preflight, results};

/// Which machines of the lab the jobs are for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// QEMU workers (LAVA's device type `qemu`), under TCG with the icount
    /// clock: the same QEMU arguments as `cargo xtask run`.
    Qemu,
    /// Real x86 PCs, on their TSC.
    Pc,
}

#[derive(Args, Debug)]
pub struct LavaArgs {
    /// The machines: QEMU workers or real PCs.
    #[arg(long, value_enum, default_value = "qemu")]
    pub target: Target,
    /// PCs: how the kernel reaches the PC (iPXE over the network, or the
    /// GRUB image on its own disk).
    #[arg(long, value_enum, default_value = "ipxe")]
    pub pc_boot: PcBoot,
    /// PCs: the lab's device type for them.
    #[arg(long, default_value = "x86")]
    pub device_type: String,
    /// QEMU workers: boot the GRUB image (menu without a countdown) instead
    /// of QEMU's -kernel.
    #[arg(long)]
    pub grub: bool,
    /// QEMU workers: the CPU model (default qemu32).
    #[arg(long)]
    pub cpu: Option<String>,
    /// QEMU workers: the number of CPUs (single-threaded TCG, so icount
    /// still holds).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=16))]
    pub smp: u32,
    /// QEMU workers: the clock, icount (instruction counts) or model
    /// (icount with the model plugin, whose modelled cycles it writes to
    /// QEMU's stderr: the job's log carries them back). PCs run their TSC.
    #[arg(long, value_enum, default_value = "icount")]
    pub clock: Clock,
    /// With --clock model: the CPU profile (model/profiles.toml; default:
    /// the one matching --cpu, as `run` picks it).
    #[arg(long, value_name = "NAME")]
    pub profile: Option<String>,
    /// With --clock model: where the worker has the model plugin
    /// (libmodel.so, built for the worker's QEMU); default: the job deploys
    /// this build's plugin with the kernel (<out>/files/libmodel.so).
    #[arg(long, value_name = "PATH")]
    pub plugin_path: Option<String>,
    /// What the kernel does.
    #[arg(long, value_enum, default_value = "run")]
    pub mode: ModeArg,
    /// The user program to run (its module is deployed with the kernel).
    #[arg(long, default_value = abi::cmdline::DEFAULT_PROG)]
    pub prog: String,
    /// Extra kernel command-line words for every job.
    #[arg(long, default_value = "")]
    pub append: String,
    /// A variant by kernel command line: NAME=WORDS (e.g. a="entry=int80").
    #[arg(long = "variant", value_name = "NAME=CMDLINE")]
    pub variants: Vec<String>,
    /// Jobs (boots) per variant.
    #[arg(short = 'n', long = "boots", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub boots: u32,
    /// Seconds the kernel may run before LAVA ends the job as hung.
    #[arg(long, default_value_t = 120, value_parser = clap::value_parser!(u64).range(1..=86400))]
    pub timeout: u64,
    /// Where the lab fetches the kernel and the program (an http(s) URL of
    /// a copy of <out>/files); default: file:// of <out>/files.
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Where the jobs (<out>/jobs) and the files (<out>/files) go.
    #[arg(long, default_value = "target/lava")]
    pub out: PathBuf,
    /// Print the jobs on stdout instead of writing them (nothing is built).
    #[arg(long, conflicts_with = "local")]
    pub print: bool,
    /// Run every job here with `lava-run` (root; no server) and import its
    /// log into results/.
    #[arg(long)]
    pub local: bool,
    /// With --local: do not write results files.
    #[arg(long)]
    pub no_save: bool,
    /// With --local: one line per job, on stderr, instead of its table.
    #[arg(long)]
    pub quiet: bool,
}

/// A variant: its name and its command-line words.
struct Variant {
    name: String,
    words: String,
}

fn variants(a: &LavaArgs) -> Result<Vec<Variant>> {
    let mut v = Vec::new();
    for s in &a.variants {
        let (n, w) = split_spec("--variant", s)?;
        if v.iter().any(|x: &Variant| x.name == n) {
            bail!("two variants are named {n:?}");
        }
        v.push(Variant {
            name: n.into(),
            words: w.into(),
        });
    }
    if v.is_empty() {
        v.push(Variant {
            name: "default".into(),
            words: String::new(),
        });
    }
    Ok(v)
}

/// What the kernel's path is on a QEMU worker (LAVA's tmpfs deploy), as
/// long as it gets: the loader passes it with the command line.
const WORKER_KERNEL_PATH: &str =
    "/var/lib/lava/dispatcher/tmp/0000000000/deployimages-xxxxxxxx/kernel/kernel";

/// The job for one boot of one variant; `url(file)`: where the lab gets
/// a file of <out>/files.
fn job(a: &LavaArgs, v: &Variant, title: &str, url: &dyn Fn(&str) -> String) -> Result<Job> {
    let extra = format!("{} {}", v.words, a.append).trim().to_string();
    let words = format!("{} prog={}", a.mode.word(), a.prog);
    let check = CmdlineCheck::of(&format!("{words} {extra}"));
    if !check.invalid.is_empty() {
        bail!(
            "variant {}: its kernel command line is invalid: {}",
            v.name,
            check.invalid.join("; ")
        );
    }
    match a.target {
        Target::Qemu => {
            // The machine `run` would boot, with LAVA's placeholders for the
            // files: `{kernel}` becomes the path on the worker.
            let spec = machine::Spec {
                cpu: a.cpu.clone(),
                cpus: a.smp,
                clock: Some(Clock::Icount),
                append: extra,
                ..machine::Spec::new(
                    machine::BackendSpec::Qemu(qemu::Spec::new(AccelChoice::Tcg)),
                    Duration::from_secs(a.timeout),
                )
            };
            let art = Artifacts {
                kernel: "{kernel}".into(),
                programs: programs(a)
                    .into_iter()
                    .map(|p| (format!("{{{p}}}").into(), p))
                    .collect(),
            };
            let mut m = Machine::build(&spec, &art, &words, Path::new("/nonexistent"))?;
            machine::check_length(&m.cmdline, Path::new(WORKER_KERNEL_PATH))?;
            let machine::Backend::Qemu(o) = m.backend.clone() else {
                unreachable!("a QEMU spec")
            };
            if a.grub {
                m.loader = Loader::Grub("{iso}".into());
            }
            let args = qemu::args(&m, &o)?;
            // The device type gives the console (-nographic: COM1 on
            // stdio) and -monitor none; the rest is `run`'s.
            let (mut main, mut initrd) = (Vec::new(), Vec::new());
            let mut it = args.into_iter();
            while let Some(x) = it.next() {
                match x.as_str() {
                    "-serial" | "-display" | "-monitor" => {
                        it.next();
                    }
                    "-initrd" => {
                        initrd.push(x);
                        initrd.extend(it.next());
                    }
                    _ => main.push(x),
                }
            }
            if let Some(opts) = model_opts(a, &m.cpu_model())? {
                // The plugin writes its file to QEMU's stderr, which a QEMU
                // worker's console carries into the job's log after the
                // kernel's last line.
                let lib = a.plugin_path.as_deref().unwrap_or(PLUGIN_KEY_ARG);
                main.extend(crate::model::qemu_args(
                    Path::new(lib),
                    &opts,
                    Path::new(PLUGIN_OUT),
                )?);
            }
            let mut images = if a.grub {
                vec![(
                    "iso".to_string(),
                    url(&iso_name(&v.name)),
                    lava::join_args(&main)?,
                )]
            } else {
                // QEMU takes every module in one -initrd: the first
                // program's image carries it, the others are only
                // downloaded (LAVA puts each one's path for its `{key}`).
                let mut v = vec![("kernel".to_string(), url("kernel"), lava::join_args(&main)?)];
                for (k, p) in programs(a).into_iter().enumerate() {
                    let arg = if k == 0 {
                        lava::join_args(&initrd)?
                    } else {
                        String::new()
                    };
                    v.push((p.clone(), url(&p), arg));
                }
                v
            };
            if a.clock == Clock::Model && a.plugin_path.is_none() {
                images.push((PLUGIN_KEY.into(), url(PLUGIN_FILE), String::new()));
            }
            let arch = if qemu::binary(&m) == "qemu-system-x86_64" {
                "x86_64"
            } else {
                "i386"
            };
            let modelled = model_opts(a, &m.cpu_model())?
                .map(|o| format!(" ({})", MODEL_IN_NAME.to_owned() + &o.profile))
                .unwrap_or_default();
            Ok(Job {
                name: format!("i386 testbed {title}: {}{modelled}", m.cmdline),
                cmdline: m.cmdline.clone(),
                timeout: a.timeout,
                monitor: watch(a, "instructions"),
                model: a.clock == Clock::Model,
                kind: JobKind::Qemu {
                    context: QemuContext {
                        arch: arch.into(),
                        cpu: m.cpu_model(),
                        machine: "pc".into(),
                        memory: m.memory_mib,
                        no_kvm: true,
                    },
                    images,
                },
            })
        }
        Target::Pc => {
            if a.mode == ModeArg::Test && a.pc_boot == PcBoot::Ipxe {
                bail!("a test boot needs every user program as a module and an iPXE job loads one: use --pc-boot minimal (the GRUB image holds them all) or --target qemu");
            }
            let cmdline = pc_cmdline(&words, &extra);
            machine::check_length(&cmdline, Path::new(WORKER_KERNEL_PATH))?;
            let kind = match a.pc_boot {
                PcBoot::Ipxe => JobKind::Ipxe {
                    device_type: a.device_type.clone(),
                    kernel_url: url("kernel"),
                    module_url: url(&a.prog),
                    module_name: a.prog.clone(),
                },
                PcBoot::Minimal => JobKind::Minimal {
                    device_type: a.device_type.clone(),
                    image: iso_name(&v.name),
                },
            };
            Ok(Job {
                name: format!("i386 testbed {title}: {cmdline}"),
                cmdline,
                timeout: a.timeout,
                monitor: watch(a, "cycles"),
                model: false,
                kind,
            })
        }
    }
}

/// The model plugin's image in a job's deploy, its file in <out>/files,
/// and its path in QEMU's arguments (LAVA puts the worker's path there).
const PLUGIN_KEY: &str = "model";
const PLUGIN_FILE: &str = "libmodel.so";
const PLUGIN_KEY_ARG: &str = "{model}";

/// What a model job's name says after its command line: `(model P)`.
pub const MODEL_IN_NAME: &str = "model ";

/// Where the plugin writes its file on a worker: QEMU's stderr, which is
/// the worker's console as its stdout is.
pub const PLUGIN_OUT: &str = "/dev/stderr";

/// The model's options for a --clock model job on CPU model `cpu`, the
/// profile checked (nothing built); `None` for an icount job.
fn model_opts(a: &LavaArgs, cpu: &str) -> Result<Option<crate::model::ModelOpts>> {
    if a.clock != Clock::Model {
        return Ok(None);
    }
    let asked = a.profile.as_ref().map(|p| crate::model::ModelOpts {
        profile: p.clone(),
        virt: crate::model::Virt::Off,
        pge: false,
        from_cpu: false,
        reference: false,
        shadow: false,
    });
    crate::model::options_for(Clock::Model, asked.as_ref(), cpu)
}

/// What the job's monitor watches: a test boot's KTAP lines, else the
/// figures in the clock's unit.
fn watch(a: &LavaArgs, unit_word: &'static str) -> Watch {
    if a.mode == ModeArg::Test {
        Watch::Ktap
    } else {
        Watch::Figures { unit_word }
    }
}

/// A PC's command line: the words, the TSC clock (no `accel=`: the
/// kernel then reports real hardware).
fn pc_cmdline(words: &str, extra: &str) -> String {
    format!("{words} clock={} {extra}", Clock::Tsc.guest().key())
        .trim()
        .to_string()
}

fn iso_name(variant: &str) -> String {
    format!("testbed-{}.iso", results::sanitize(variant))
}

/// The GRUB image of one variant: one menu entry, its command line, and no
/// countdown (under icount GRUB's countdown runs on virtual time and never
/// ends; on a PC it only costs time).
fn grub_image(art: &Artifacts, cmdline: &str, out: &Path) -> Result<PathBuf> {
    let entry = iso::Entry {
        title: "i386 testbed".into(),
        cmdline: cmdline.into(),
        multiboot2: true,
    };
    iso::build(art, &[entry], 0, out)
}

/// The jobs `a` names, written: each job's file, its variant's name and
/// its definition.
pub struct Written {
    pub path: PathBuf,
    pub variant: String,
    pub definition: String,
}

/// One planned job: its file name, its variant's name, the job.
type Planned = (String, String, Job);

/// The jobs `a` names: the directory they go to, and each job's file name,
/// variant and definition (nothing built yet: a bad flag fails first).
fn plan(a: &LavaArgs) -> Result<(PathBuf, Vec<Planned>)> {
    let vs = variants(a)?;
    if a.target == Target::Pc && (a.grub || a.cpu.is_some() || a.smp != 1) {
        bail!("--grub, --cpu and --smp describe a QEMU worker; a PC has its own CPUs (for the GRUB image on a PC: --pc-boot minimal)");
    }
    match (a.target, a.clock) {
        (Target::Qemu, Clock::Icount | Clock::Model) | (Target::Pc, Clock::Icount) => {}
        (Target::Qemu, Clock::Tsc) => bail!(
            "--clock tsc: a QEMU worker runs TCG, whose clock is icount (or the model on icount)"
        ),
        (Target::Pc, _) => bail!(
            "--clock {}: a PC runs on its TSC (the model is a QEMU plugin)",
            a.clock.key()
        ),
    }
    if a.clock != Clock::Model && (a.profile.is_some() || a.plugin_path.is_some()) {
        bail!("--profile and --plugin-path are the model's: use them with --clock model");
    }
    if a.clock == Clock::Model && a.mode == ModeArg::Test {
        bail!("--clock model models a run's figures; a test boot has none: drop --clock model or --mode test");
    }
    if a.local {
        if a.target != Target::Qemu {
            bail!("--local runs the jobs on this machine's QEMU: use it with --target qemu");
        }
        if a.base_url.is_some() {
            bail!("--local fetches the files from --out: drop --base-url");
        }
    }
    let out = if a.out.is_absolute() {
        a.out.clone()
    } else {
        kbuild::root().join(&a.out)
    };
    let files = out.join("files");
    let base = match &a.base_url {
        Some(u) => u.trim_end_matches('/').to_string(),
        None => format!("file://{}", files.display()),
    };
    let url = |f: &str| format!("{base}/{f}");
    let mut jobs = Vec::new();
    for v in &vs {
        for i in 1..=a.boots {
            let title = format!("{}, boot {i} of {}", v.name, a.boots);
            let file = format!("{}-{i}.yaml", results::sanitize(&v.name));
            jobs.push((file, v.name.clone(), job(a, v, &title, &url)?));
        }
    }
    Ok((out, jobs))
}

/// Builds the kernel and the program, copies them to `<out>/files` (with
/// the GRUB images the jobs need), and writes every job to `<out>/jobs`.
pub fn write(a: &LavaArgs) -> Result<Vec<Written>> {
    let (out, jobs) = plan(a)?;
    let files = out.join("files");
    let grub = a.grub || (a.target == Target::Pc && a.pc_boot == PcBoot::Minimal);
    preflight::ensure(if grub {
        preflight::Need::QemuAndGrub
    } else {
        preflight::Need::Qemu
    })?;
    if a.local {
        preflight::ensure_lava()?;
    }
    let art = kbuild::build(true)?;
    std::fs::create_dir_all(out.join("jobs"))
        .with_context(|| format!("cannot create {}", out.join("jobs").display()))?;
    let art = copy_files(&art, &programs(a), &files)?;
    if a.clock == Clock::Model && a.plugin_path.is_none() {
        let lib = crate::model::build_plugin(&kbuild::root())?;
        std::fs::copy(&lib, files.join(PLUGIN_FILE))
            .with_context(|| format!("cannot copy {}", lib.display()))?;
    }
    if grub {
        for v in variants(a)? {
            let cmdline = &jobs
                .iter()
                .find(|(_, x, _)| *x == v.name)
                .expect("a job")
                .2
                .cmdline;
            grub_image(&art, cmdline, &files.join(iso_name(&v.name)))?;
        }
    }
    let mut written = Vec::new();
    for (file, variant, j) in jobs {
        let p = out.join("jobs").join(file);
        let definition = j.yaml();
        std::fs::write(&p, &definition).with_context(|| format!("cannot write {}", p.display()))?;
        written.push(Written {
            path: p,
            variant,
            definition,
        });
    }
    eprintln!(
        "lava: {} jobs in {}/jobs, their files in {}",
        written.len(),
        out.display(),
        files.display()
    );
    Ok(written)
}

pub fn lava(a: LavaArgs) -> Result<i32> {
    if a.print {
        for (file, _, j) in plan(&a)?.1 {
            println!("# {file}");
            print!("{}", j.yaml());
        }
        return Ok(0);
    }
    let written = write(&a)?;
    let out = written[0]
        .path
        .parent()
        .and_then(Path::parent)
        .expect("<out>/jobs/<file>")
        .to_path_buf();
    let paths: Vec<PathBuf> = written.iter().map(|w| w.path.clone()).collect();
    if !a.local {
        for p in &paths {
            println!("{}", p.display());
        }
        eprintln!("submit each with `lavacli jobs submit FILE`; then `cargo xtask import` its log (docs/lab.md)");
        return Ok(0);
    }
    let mut failed = 0;
    for (k, (w, p)) in written.iter().zip(&paths).enumerate() {
        let id = format!("{}{:03}", std::process::id(), k + 1);
        let log = out.join("logs").join(format!(
            "{}.log",
            p.file_stem().and_then(|s| s.to_str()).unwrap_or("job")
        ));
        let t = Instant::now();
        run_local(&out, p, &id, &log)?;
        let wall = t.elapsed();
        let text = std::fs::read_to_string(&log)?;
        let lab = Lab {
            device: LOCAL_DEVICE.into(),
            device_type: "qemu".into(),
            job: id.clone(),
            lab: String::new(),
        };
        if a.mode == ModeArg::Test {
            match super::import::tests_from_lava(&text, None, &lab) {
                // Quiet (inside `cargo xtask test`, whose stdout is its
                // PASS lines): on stderr, as the imports' lines.
                Ok(t) if t.count("fail") == 0 && a.quiet => {
                    eprintln!("lava: job {id}: {}", t.summary())
                }
                Ok(t) if t.count("fail") == 0 => println!("lava: job {id}: {}", t.summary()),
                Ok(t) => {
                    failed += 1;
                    eprintln!("lava: job {id} ({}): {}", p.display(), t.summary());
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("lava: job {id} ({}): {e:#}", p.display());
                }
            }
        } else {
            match super::import::from_lava(&text, None, lab, &w.variant) {
                Ok(r) => {
                    if !a.quiet {
                        print!("{}", r.table());
                    }
                    if !a.no_save {
                        let path = r.save(&kbuild::root().join("results"))?;
                        eprintln!("results: {}", path.display());
                    }
                }
                Err(e) => {
                    failed += 1;
                    eprintln!("lava: job {id} ({}): {e:#}", p.display());
                }
            }
        }
        eprintln!(
            "lava: job {id} ({}): lava-run {:.1} s, log {}",
            w.variant,
            wall.as_secs_f64(),
            log.display()
        );
    }
    Ok(if failed == 0 { 0 } else { 1 })
}

/// The device name a local `lava-run` job reports.
pub const LOCAL_DEVICE: &str = "local-qemu";

/// The user programs a job deploys: the one `--prog` names, or for a test
/// boot every one (its tests run them all).
fn programs(a: &LavaArgs) -> Vec<String> {
    if a.mode == ModeArg::Test {
        let mut v = vec![a.prog.clone()];
        v.extend(
            kbuild::USER_PROGRAMS
                .iter()
                .filter(|p| **p != a.prog)
                .map(|p| p.to_string()),
        );
        v
    } else {
        vec![a.prog.clone()]
    }
}

/// The kernel and the programs `progs`, copied to `files`.
fn copy_files(art: &Artifacts, progs: &[String], files: &Path) -> Result<Artifacts> {
    std::fs::create_dir_all(files).with_context(|| format!("cannot create {}", files.display()))?;
    let copy = |from: &Path, name: &str| -> Result<PathBuf> {
        let to = files.join(name);
        std::fs::copy(from, &to).with_context(|| format!("cannot copy {}", from.display()))?;
        Ok(to)
    };
    let mut programs = Vec::new();
    for prog in progs {
        let Some((p, _)) = art.programs.iter().find(|(_, n)| n == prog) else {
            bail!(
                "no user program {prog:?} (there are: {})",
                kbuild::USER_PROGRAMS.join(", ")
            );
        };
        programs.push((copy(p, prog)?, prog.clone()));
    }
    Ok(Artifacts {
        kernel: copy(&art.kernel, "kernel")?,
        programs,
    })
}

/// Runs the job `job` with `lava-run` as job `id`, the shipped `qemu`
/// device file standing in for a server's; its log (stderr) goes to `log`.
pub fn run_local(out: &Path, job: &Path, id: &str, log: &Path) -> Result<()> {
    let device = out.join("device-qemu-i386.yaml");
    let dispatcher = out.join("dispatcher.yaml");
    std::fs::write(&device, lava::QEMU_I386_DEVICE)?;
    std::fs::write(&dispatcher, lava::LOCAL_DISPATCHER)?;
    if let Some(d) = log.parent() {
        std::fs::create_dir_all(d)?;
    }
    let run_dir = out.join("run").join(id);
    let err =
        std::fs::File::create(log).with_context(|| format!("cannot create {}", log.display()))?;
    let status = Command::new("lava-run")
        .arg("--job-id")
        .arg(id)
        .arg("--output-dir")
        .arg(&run_dir)
        .arg("--device")
        .arg(&device)
        .arg("--dispatcher")
        .arg(&dispatcher)
        .arg(job)
        .stdout(std::process::Stdio::null())
        .stderr(err)
        .status()
        .with_context(|| format!("cannot run lava-run ({})", preflight::lava_install_hint()))?;
    let _ = std::fs::remove_dir_all(&run_dir);
    // lava-run exits non-zero for a job that failed; the log says why, and
    // the import reads it from there.
    let _ = status;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(extra: &[&str]) -> LavaArgs {
        use clap::Parser;
        #[derive(Parser)]
        struct T {
            #[command(flatten)]
            a: LavaArgs,
        }
        let mut v = vec!["x"];
        v.extend_from_slice(extra);
        T::try_parse_from(v).unwrap().a
    }

    fn one(a: &LavaArgs) -> lava::Definition {
        let v = &variants(a).unwrap()[0];
        let y = job(a, v, "t", &|f| format!("https://lab.example/{f}"))
            .unwrap()
            .yaml();
        serde_norway::from_str(&y).unwrap_or_else(|e| panic!("{e}: {y}"))
    }

    fn images(d: &lava::Definition) -> Vec<(String, lava::Image)> {
        d.actions[0]
            .deploy
            .as_ref()
            .and_then(|x| x.images.clone())
            .unwrap()
            .into_iter()
            .collect()
    }

    fn monitor(d: &lava::Definition) -> &lava::Monitor {
        &d.actions.last().unwrap().test.as_ref().unwrap().monitors[0]
    }

    #[test]
    fn a_qemu_job_carries_runs_qemu_arguments() {
        let d = one(&args(&["--append", "batches=2"]));
        let i = images(&d);
        assert_eq!(i[0].0, "kernel");
        assert_eq!(i[0].1.image_arg, "-machine pc,accel=tcg -cpu qemu32 -smp 1 -m 128M -icount shift=0,sleep=off -no-reboot -device isa-debug-exit,iobase=0xf4,iosize=0x04 -kernel {kernel} -append \"mode=run prog=bench clock=icount accel=tcg batches=2\"");
        assert_eq!(i[1].0, "bench");
        assert_eq!(i[1].1.url, "https://lab.example/bench");
        assert_eq!(i[1].1.image_arg, "-initrd \"{bench} bench\"");
        let c = d.context.as_ref().unwrap();
        assert_eq!(
            (c.arch.as_str(), c.cpu.as_str(), c.no_kvm),
            ("i386", "qemu32", true)
        );
        // The device type gives the console and the monitor.
        let all: String = i.iter().map(|(_, x)| x.image_arg.clone()).collect();
        assert!(
            !all.contains("-serial") && !all.contains("-monitor") && !all.contains("-display"),
            "{all}"
        );
        assert_eq!(monitor(&d).pattern, lava::figure_pattern("instructions"));
        let d = one(&args(&["--grub"]));
        let i = images(&d);
        assert_eq!(i[0].0, "iso");
        assert_eq!(i[0].1.url, "https://lab.example/testbed-default.iso");
        assert!(i[0].1.image_arg.starts_with("-machine pc,accel=tcg"));
        assert!(i[0].1.image_arg.ends_with("-cdrom {iso} -boot d"));
        // A test boot's job makes cases of its KTAP lines.
        let d = one(&args(&["--mode", "test"]));
        assert_eq!(monitor(&d).pattern, lava::ktap_pattern());
        assert!(images(&d)[0].1.image_arg.contains("-append \"mode=test "));
    }

    /// A model job loads the plugin (deployed with the kernel, or at the
    /// worker's path), which writes its file to QEMU's stderr; LAVA reads
    /// on after the test until QEMU's output ends.
    #[test]
    fn a_model_job_runs_the_plugin_onto_stderr() {
        let d = one(&args(&["--clock", "model", "--profile", "p4"]));
        let i = images(&d);
        assert!(
            i[0].1
                .image_arg
                .ends_with(" -plugin {model},profile=p4,virt=off,out=/dev/stderr"),
            "{}",
            i[0].1.image_arg
        );
        assert_eq!(i[2].0, "model");
        assert_eq!(i[2].1.url, "https://lab.example/libmodel.so");
        assert!(d.job_name.ends_with(" (model p4)"), "{}", d.job_name);
        let c = d.timeouts.connections.as_ref().unwrap();
        assert_eq!(c["read-feedback"].seconds, 120);
        let d = one(&args(&[
            "--clock",
            "model",
            "--plugin-path",
            "/opt/libmodel.so",
        ]));
        let i = images(&d);
        assert!(i[0]
            .1
            .image_arg
            .contains(" -plugin /opt/libmodel.so,profile=modern,"));
        assert_eq!(i.len(), 2);
        assert!(one(&args(&[])).timeouts.connections.is_none());
        for (flags, says) in [
            (vec!["--profile", "p4"], "use them with --clock model"),
            (vec!["--clock", "tsc"], "a QEMU worker runs TCG"),
            (
                vec!["--clock", "model", "--target", "pc"],
                "a PC runs on its TSC",
            ),
            (
                vec!["--clock", "model", "--mode", "test"],
                "a test boot has none",
            ),
            (
                vec!["--clock", "model", "--profile", "p9"],
                "no such model profile",
            ),
        ] {
            let e = lava(args(&[flags.as_slice(), &["--print"]].concat()))
                .unwrap_err()
                .to_string();
            assert!(e.contains(says), "{flags:?}: {e}");
        }
    }

    #[test]
    fn pc_jobs_boot_by_ipxe_or_from_their_disk() {
        let d = one(&args(&["--target", "pc", "--device-type", "pentium3"]));
        assert_eq!(d.device_type, "pentium3");
        let boot = d.actions[1].boot.as_ref().unwrap();
        assert_eq!(boot.method, "ipxe");
        let c = boot.commands.as_ref().unwrap();
        assert_eq!(
            c[1],
            "kernel tftp://{SERVER_IP}/{KERNEL} mode=run prog=bench clock=tsc"
        );
        assert_eq!(c[2], "module tftp://{SERVER_IP}/{RAMDISK} bench");
        assert!(monitor(&d).pattern.ends_with("(?P<units>cycles)="));
        let d = one(&args(&["--target", "pc", "--pc-boot", "minimal"]));
        assert_eq!(d.actions.len(), 2);
        assert_eq!(d.actions[0].boot.as_ref().unwrap().method, "minimal");
        assert!(d.actions.iter().all(|a| a.deploy.is_none()));
    }

    #[test]
    fn bad_variants_fail_before_anything_is_built() {
        let a = args(&["--variant", "a=entry=sysentr"]);
        let v = &variants(&a).unwrap()[0];
        let e = job(&a, v, "t", &|f| f.into()).err().unwrap().to_string();
        assert!(
            e.contains("variant a: its kernel command line is invalid"),
            "{e}"
        );
        assert!(variants(&args(&["--variant", "a=x", "--variant", "a=y"])).is_err());
        let e = lava(args(&["--target", "pc", "--grub", "--print"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("--pc-boot minimal"), "{e}");
    }
}
