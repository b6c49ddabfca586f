//! LAVA, the board-farm engine KernelCI runs on: the job definitions
//! `cargo xtask lava` writes for its QEMU workers and real PCs, the
//! patterns LAVA matches on the kernel's records, and (in [`log`]) the
//! reading of what a lab hands back. The testbed schedules nothing itself:
//! a lab runs the jobs, `cargo xtask import` reads their logs.
//!
//! A job never asks the kernel for anything: the kernel has no shell, so
//! the test action is LAVA's `monitors`, which watches the serial output
//! for a start pattern, figures (or a test boot's KTAP lines), and an end
//! pattern. The job definition is typed ([`Definition`]) and written by
//! `serde_norway`. LAVA compiles each
//! pattern with Python's `re` under pexpect, with DOTALL: a `.` would also
//! match a line end, so every pattern here uses `[^\n]` and stays on one
//! line, and every variable-length group is followed by a fixed character
//! (a figure cut after its first digit must not match).

pub mod instance;
pub mod log;
pub mod server;

use std::collections::BTreeMap;

use abi::report::{kind, MARKER, SCHEMA};

use indexmap::IndexMap;
use serde::{Deserialize, Serialize};

/// Where a run in a lab ran: a results file's `lab` (the results' own type).
pub use crate::results::Lab;

/// The test suite (LAVA's "definition") of the figures: the monitor's name.
pub const SUITE: &str = "testbed";

/// The `qemu` device type rendered for i386 without KVM, for a local
/// `lava-run` (see the file's header for where it comes from).
pub const QEMU_I386_DEVICE: &str = include_str!("qemu-i386.yaml");

/// The dispatcher's own settings for a local `lava-run`: the dispatcher is
/// this machine.
pub const LOCAL_DISPATCHER: &str = "dispatcher_ip: 127.0.0.1\n";

/// What starts the monitoring: the kernel's boot record.
pub fn start_pattern() -> String {
    format!("{MARKER}{SCHEMA} {} ", kind::BOOT)
}

/// What ends it: the kernel's end record, whatever its status (`import`
/// reads the status from the log).
pub fn end_pattern() -> String {
    format!("{MARKER}{SCHEMA} {} status=", kind::END)
}

/// The pattern that makes a LAVA test case of every per-operation figure:
/// a `bench` record's name, its median, and the unit. The records do not
/// repeat the unit on every line (the clock record says it once), but each
/// `bench` record carries the fields `instructions=` and `cycles=` (the
/// performance counters' figures): the group takes the word of the clock's
/// unit from there, `unit_word` being `instructions` under icount and
/// `cycles` on the TSC. Throughput records (`measure=throughput`, such as
/// ebizzy's) do not match: their figures reach the results through
/// `import` alone.
pub fn figure_pattern(unit_word: &str) -> String {
    format!(
        r"{MARKER}{SCHEMA} {} [^\n]*?name=(?P<test_case_id>[^ \n]+) [^\n]*?measure=per_op [^\n]*?median=(?P<measurement>[0-9.]+) [^\n]*? (?P<units>{unit_word})=",
        kind::BENCH
    )
}

/// The pattern that makes a LAVA test case of every KTAP result line of a
/// test boot (`ok N name`, `not ok N name`, `ok N name # SKIP why`): the
/// name is the case, and `result` is `ok`, `not ok` or `SKIP`, which
/// [`ktap_fixupdict`] makes LAVA's pass, fail and skip. LAVA keeps one
/// group per name, so `result` is read in a lookahead at the line's start:
/// the `SKIP` of the directive when the line has one, else the line's
/// first words. A line must start the match (the `\n` before it is never
/// consumed: each match stops before its line's end), so a record or a
/// message that holds `ok 1 ` mid-line is no case; the name runs to the
/// directive or the line's end (a `#` in a name is written `\#`).
pub fn ktap_pattern() -> String {
    let name = r"(?:\\#|[^#\r\n])+";
    format!(
        r"(?<=\n)(?=(?:ok [0-9]+ {name}# )?(?P<result>SKIP|not ok|ok))(?:not ok|ok) [0-9]+ (?P<test_case_id>{name})(?:# SKIP[^\r\n]*)?(?=\r|\n)"
    )
}

/// LAVA's results for [`ktap_pattern`]'s `result` group.
pub fn ktap_fixupdict() -> BTreeMap<String, String> {
    [("ok", "pass"), ("not ok", "fail"), ("SKIP", "skip")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// How a real PC gets the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum PcBoot {
    /// The PC boots iPXE from the network; iPXE loads the kernel and the
    /// program as a Multiboot image and module over TFTP.
    Ipxe,
    /// The PC boots the GRUB image from its own disk or USB stick
    /// (written once with `dd`); the job powers it on and watches.
    Minimal,
}

/// One job as `cargo xtask lava` writes it.
pub struct Job {
    /// `job_name`: what the lab's web pages show.
    pub name: String,
    /// The kernel's whole command line.
    pub cmdline: String,
    /// Seconds the kernel may run before LAVA calls the job hung.
    pub timeout: u64,
    /// What the test action watches for.
    pub monitor: Watch,
    /// QEMU runs the model plugin, whose file arrives after the kernel's
    /// last line.
    pub model: bool,
    pub kind: JobKind,
}

/// What a job's monitor makes test cases of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Watch {
    /// The per-operation figures of a `mode=run` boot, in the clock's unit
    /// (see [`figure_pattern`]).
    Figures { unit_word: &'static str },
    /// The KTAP result lines of a `mode=test` boot (see [`ktap_pattern`]).
    Ktap,
}

/// What the job deploys and how it boots.
pub enum JobKind {
    /// A QEMU worker (device type `qemu`): every file deployed to tmpfs
    /// with its piece of QEMU's command line (`image_arg`, where `{key}`
    /// becomes the file's path on the worker).
    Qemu {
        /// How a server renders the device type for this job.
        context: QemuContext,
        /// (key, url, image_arg), in order.
        images: Vec<(String, String, String)>,
    },
    /// A real PC booted by iPXE: the kernel and one module over TFTP.
    Ipxe {
        device_type: String,
        kernel_url: String,
        module_url: String,
        module_name: String,
    },
    /// A real PC that boots the GRUB image from its own disk.
    Minimal { device_type: String, image: String },
}

/// A LAVA job definition: the part of LAVA's job schema these jobs use.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Definition {
    pub job_name: String,
    pub device_type: String,
    pub visibility: String,
    pub priority: String,
    pub timeouts: Timeouts,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<QemuContext>,
    pub actions: Vec<Action>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Timeouts {
    pub job: Seconds,
    pub action: Seconds,
    /// Per connection step: `read-feedback` is how long LAVA reads what a
    /// device prints after the test action (until the end of output).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connections: Option<BTreeMap<String, Seconds>>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Seconds {
    pub seconds: u64,
}

/// `context:` of a QEMU job: what the server's `qemu` device type is
/// rendered with.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct QemuContext {
    pub arch: String,
    pub cpu: String,
    pub machine: String,
    /// MiB.
    pub memory: u32,
    pub no_kvm: bool,
}

/// One item of `actions:`, a mapping of one key (the action's kind).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Action {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deploy: Option<Deploy>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub boot: Option<Boot>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub test: Option<TestAction>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deploy {
    pub to: String,
    /// A QEMU worker's files, in QEMU's argument order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<IndexMap<String, Image>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<Url>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ramdisk: Option<Url>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Image {
    pub url: String,
    pub image_arg: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Url {
    pub url: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Boot {
    pub method: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub media: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commands: Option<Vec<String>>,
    pub timeout: Seconds,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TestAction {
    pub timeout: Seconds,
    pub monitors: Vec<Monitor>,
}

/// LAVA's `monitors` test: it waits for `start`, then makes a test case of
/// every match of `pattern` (its groups `test_case_id`, `result`,
/// `measurement`, `units`; `result` translated by `fixupdict`) until `end`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Monitor {
    pub name: String,
    pub start: String,
    pub end: String,
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fixupdict: Option<BTreeMap<String, String>>,
}

impl Job {
    /// The job definition.
    pub fn definition(&self) -> Definition {
        let device_type = match &self.kind {
            JobKind::Qemu { .. } => "qemu",
            JobKind::Ipxe { device_type, .. } | JobKind::Minimal { device_type, .. } => device_type,
        };
        // The kernel's own timeout, and room for the deploy and the boot.
        let boot_timeout = Seconds { seconds: 120 };
        let mut actions = Vec::new();
        match &self.kind {
            JobKind::Qemu { images, .. } => {
                actions.push(Action {
                    deploy: Some(Deploy {
                        to: "tmpfs".into(),
                        images: Some(
                            images
                                .iter()
                                .map(|(key, url, arg)| {
                                    let image = Image {
                                        url: url.clone(),
                                        image_arg: arg.clone(),
                                    };
                                    (key.clone(), image)
                                })
                                .collect(),
                        ),
                        kernel: None,
                        ramdisk: None,
                    }),
                    ..Action::default()
                });
                actions.push(Action {
                    boot: Some(Boot {
                        method: "qemu".into(),
                        media: Some("tmpfs".into()),
                        commands: None,
                        timeout: boot_timeout,
                    }),
                    ..Action::default()
                });
            }
            JobKind::Ipxe {
                kernel_url,
                module_url,
                module_name,
                ..
            } => {
                actions.push(Action {
                    deploy: Some(Deploy {
                        to: "tftp".into(),
                        images: None,
                        kernel: Some(Url {
                            url: kernel_url.clone(),
                        }),
                        ramdisk: Some(Url {
                            url: module_url.clone(),
                        }),
                    }),
                    ..Action::default()
                });
                // iPXE loads a Multiboot kernel with `kernel` and its
                // modules with `module`, each with its own command line.
                let commands = vec![
                    "dhcp net0".to_string(),
                    format!("kernel tftp://{{SERVER_IP}}/{{KERNEL}} {}", self.cmdline),
                    format!("module tftp://{{SERVER_IP}}/{{RAMDISK}} {module_name}"),
                    "boot".to_string(),
                ];
                actions.push(Action {
                    boot: Some(Boot {
                        method: "ipxe".into(),
                        media: None,
                        commands: Some(commands),
                        timeout: boot_timeout,
                    }),
                    ..Action::default()
                });
            }
            JobKind::Minimal { .. } => actions.push(Action {
                boot: Some(Boot {
                    method: "minimal".into(),
                    media: None,
                    commands: None,
                    timeout: boot_timeout,
                }),
                ..Action::default()
            }),
        }
        let (pattern, fixupdict) = match self.monitor {
            Watch::Figures { unit_word } => (figure_pattern(unit_word), None),
            Watch::Ktap => (ktap_pattern(), Some(ktap_fixupdict())),
        };
        actions.push(Action {
            test: Some(TestAction {
                timeout: Seconds {
                    seconds: self.timeout,
                },
                monitors: vec![Monitor {
                    name: SUITE.into(),
                    start: start_pattern(),
                    end: end_pattern(),
                    pattern,
                    fixupdict,
                }],
            }),
            ..Action::default()
        });
        Definition {
            job_name: self.name.clone(),
            device_type: device_type.to_string(),
            visibility: "public".into(),
            priority: "medium".into(),
            timeouts: Timeouts {
                job: Seconds {
                    seconds: DEPLOY_SECONDS + boot_timeout.seconds + self.timeout,
                },
                action: Seconds {
                    seconds: DEPLOY_SECONDS,
                },
                // The model plugin writes its file when QEMU exits, after
                // the kernel's end record: LAVA reads on until QEMU's end
                // of output (its default: 1 s, whatever is still coming).
                connections: self.model.then(|| {
                    BTreeMap::from([(
                        "read-feedback".to_string(),
                        Seconds {
                            seconds: FEEDBACK_SECONDS,
                        },
                    )])
                }),
            },
            context: match &self.kind {
                JobKind::Qemu { context, .. } => Some(context.clone()),
                _ => None,
            },
            actions,
        }
    }

    /// The job definition as YAML, ready for `lavacli jobs submit`.
    pub fn yaml(&self) -> String {
        let body = serde_norway::to_string(&self.definition())
            .expect("a job definition of strings, numbers and booleans serializes");
        match &self.kind {
            JobKind::Minimal { image, .. } => format!(
                "# The PC boots {image} from its own disk (written with dd; see docs/lab.md).\n{body}"
            ),
            _ => body,
        }
    }
}

/// Seconds LAVA may read a device's output after the test action.
const FEEDBACK_SECONDS: u64 = 120;

/// Seconds for a deploy (downloads) and for any other action.
const DEPLOY_SECONDS: u64 = 300;

/// QEMU's arguments as one `image_arg` string: words with a space in
/// double quotes (the worker splits the command line as a shell does).
pub fn join_args(args: &[String]) -> anyhow::Result<String> {
    args.iter()
        .map(|a| {
            if a.contains('"') || a.contains('\'') {
                anyhow::bail!("a QEMU argument for a LAVA job cannot hold a quote: {a}");
            }
            Ok(if a.contains(' ') || a.is_empty() {
                format!("\"{a}\"")
            } else {
                a.clone()
            })
        })
        .collect::<anyhow::Result<Vec<_>>>()
        .map(|v| v.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns_stay_on_one_line_and_end_on_a_fixed_character() {
        let p = figure_pattern("instructions");
        // No `.`: under DOTALL it would cross lines.
        assert!(!p.replace("[0-9.]", "").contains('.'), "{p}");
        assert!(p.ends_with("(?P<units>instructions)="));
        assert!(p.contains("median=(?P<measurement>[0-9.]+) "));
        assert!(p.contains("name=(?P<test_case_id>[^ \\n]+) "));
        assert_eq!(start_pattern(), "@@tb1 boot ");
        assert_eq!(end_pattern(), "@@tb1 end status=");
    }

    #[test]
    fn join_args_quotes_words_with_spaces() {
        let a = join_args(&["-append".into(), "mode=run prog=bench".into()]).unwrap();
        assert_eq!(a, "-append \"mode=run prog=bench\"");
        assert!(join_args(&["x\"y".into()]).is_err());
    }

    fn qemu_job(monitor: Watch) -> Job {
        Job {
            name: "n: 'quoted' \\ and: a colon".into(),
            cmdline: "mode=run".into(),
            timeout: 60,
            monitor,
            model: false,
            kind: JobKind::Qemu {
                context: QemuContext {
                    arch: "i386".into(),
                    cpu: "qemu32".into(),
                    machine: "pc".into(),
                    memory: 128,
                    no_kvm: true,
                },
                images: vec![
                    (
                        "kernel".into(),
                        "file:///k".into(),
                        "-kernel {kernel} -append \"a b\"".into(),
                    ),
                    ("bench".into(), "file:///b".into(), "-initrd {bench}".into()),
                ],
            },
        }
    }

    /// The YAML read back is the definition written: names, patterns with
    /// backslashes and quotes survive, the images keep their order, and
    /// the context's memory and no_kvm are a number and a boolean.
    #[test]
    fn a_qemu_job_reads_back_as_written() {
        let j = qemu_job(Watch::Figures {
            unit_word: "instructions",
        });
        let y = j.yaml();
        let d: Definition = serde_norway::from_str(&y).unwrap();
        assert_eq!(d, j.definition());
        assert_eq!(d.job_name, "n: 'quoted' \\ and: a colon");
        assert_eq!(d.device_type, "qemu");
        assert_eq!(d.timeouts.job.seconds, 300 + 120 + 60);
        let images = d.actions[0]
            .deploy
            .as_ref()
            .unwrap()
            .images
            .as_ref()
            .unwrap();
        assert_eq!(images.keys().collect::<Vec<_>>(), ["kernel", "bench"]);
        assert_eq!(
            images["kernel"].image_arg,
            "-kernel {kernel} -append \"a b\""
        );
        let boot = d.actions[1].boot.as_ref().unwrap();
        assert_eq!(
            (boot.method.as_str(), boot.media.as_deref()),
            ("qemu", Some("tmpfs"))
        );
        let m = &d.actions[2].test.as_ref().unwrap().monitors[0];
        assert_eq!(m.pattern, figure_pattern("instructions"));
        assert_eq!(m.fixupdict, None);
        // What LAVA's schema reads as numbers and booleans.
        let v: serde_norway::Value = serde_norway::from_str(&y).unwrap();
        assert_eq!(v["context"]["memory"].as_u64(), Some(128));
        assert_eq!(v["context"]["no_kvm"].as_bool(), Some(true));
        assert_eq!(
            v["actions"][2]["test"]["timeout"]["seconds"].as_u64(),
            Some(60)
        );
        assert!(!y.contains('!'), "no YAML tags: {y}");
    }

    /// A test boot's job watches the KTAP lines, LAVA's words for them in
    /// its fixupdict.
    #[test]
    fn a_test_job_watches_ktap() {
        let d: Definition = serde_norway::from_str(&qemu_job(Watch::Ktap).yaml()).unwrap();
        let m = &d.actions[2].test.as_ref().unwrap().monitors[0];
        assert_eq!(m.pattern, ktap_pattern());
        let f = m.fixupdict.as_ref().unwrap();
        assert_eq!(
            (f["ok"].as_str(), f["not ok"].as_str(), f["SKIP"].as_str()),
            ("pass", "fail", "skip")
        );
    }

    #[test]
    fn the_ktap_pattern_stays_on_one_line() {
        let p = ktap_pattern();
        assert!(!p.contains('.'), "{p}");
        assert!(p.starts_with(r"(?<=\n)"), "{p}");
        assert!(p.ends_with(r"(?=\r|\n)"), "{p}");
    }
}
