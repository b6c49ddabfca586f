//! LAVA, the board-farm engine KernelCI runs on: the job definitions
//! `cargo xtask lava` writes for its QEMU workers and real PCs, the
//! patterns LAVA matches on the kernel's records, and (in [`log`]) the
//! reading of what a lab hands back. The testbed schedules nothing itself:
//! a lab runs the jobs, `cargo xtask import` reads their logs.
//!
//! A job never asks the kernel for anything: the kernel has no shell, so
//! the test action is LAVA's `monitors`, which watches the serial output
//! for a start pattern, figures, and an end pattern. LAVA compiles each
//! pattern with Python's `re` under pexpect, with DOTALL: a `.` would also
//! match a line end, so every pattern here uses `[^\n]` and stays on one
//! line, and every variable-length group is followed by a fixed character
//! (a figure cut after its first digit must not match).

pub mod instance;
pub mod log;
pub mod server;

use abi::report::{kind, MARKER, SCHEMA};

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

/// A YAML scalar in single quotes (the only escape: `'` doubled), so that
/// backslashes in patterns and quotes in QEMU arguments stay as they are.
pub fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "''"))
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
    /// The word of the clock's unit (see [`figure_pattern`]).
    pub unit_word: &'static str,
    pub kind: JobKind,
}

/// What the job deploys and how it boots.
pub enum JobKind {
    /// A QEMU worker (device type `qemu`): every file deployed to tmpfs
    /// with its piece of QEMU's command line (`image_arg`, where `{key}`
    /// becomes the file's path on the worker).
    Qemu {
        /// `context:` (arch, cpu, machine, memory, no_kvm): how a server
        /// renders the device type for this job.
        context: Vec<(&'static str, String)>,
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

impl Job {
    /// The job definition, ready for `lavacli jobs submit`.
    pub fn yaml(&self) -> String {
        let mut s = String::new();
        let device_type = match &self.kind {
            JobKind::Qemu { .. } => "qemu",
            JobKind::Ipxe { device_type, .. } | JobKind::Minimal { device_type, .. } => device_type,
        };
        s += &format!("job_name: {}\n", quote(&self.name));
        s += &format!("device_type: {device_type}\n");
        s += "visibility: public\npriority: medium\n";
        // The kernel's own timeout, and room for the deploy and the boot.
        let boot = 120;
        s += "timeouts:\n";
        s += &format!(
            "  job: {{seconds: {}}}\n",
            DEPLOY_SECONDS + boot + self.timeout
        );
        s += &format!("  action: {{seconds: {DEPLOY_SECONDS}}}\n");
        if let JobKind::Qemu { context, .. } = &self.kind {
            s += "context:\n";
            for (k, v) in context {
                s += &format!("  {k}: {v}\n");
            }
        }
        s += "actions:\n";
        match &self.kind {
            JobKind::Qemu { images, .. } => {
                s += "- deploy:\n    to: tmpfs\n    images:\n";
                for (key, url, arg) in images {
                    s += &format!(
                        "      {key}:\n        url: {}\n        image_arg: {}\n",
                        quote(url),
                        quote(arg)
                    );
                }
                s += "- boot:\n    method: qemu\n    media: tmpfs\n";
            }
            JobKind::Ipxe {
                kernel_url,
                module_url,
                module_name,
                ..
            } => {
                s += "- deploy:\n    to: tftp\n";
                s += &format!("    kernel:\n      url: {}\n", quote(kernel_url));
                s += &format!("    ramdisk:\n      url: {}\n", quote(module_url));
                s += "- boot:\n    method: ipxe\n    commands:\n";
                // iPXE loads a Multiboot kernel with `kernel` and its
                // modules with `module`, each with its own command line.
                for c in [
                    "dhcp net0".to_string(),
                    format!("kernel tftp://{{SERVER_IP}}/{{KERNEL}} {}", self.cmdline),
                    format!("module tftp://{{SERVER_IP}}/{{RAMDISK}} {module_name}"),
                    "boot".to_string(),
                ] {
                    s += &format!("    - {}\n", quote(&c));
                }
            }
            JobKind::Minimal { image, .. } => {
                s += &format!(
                    "# The PC boots {image} from its own disk (written with dd; see docs/lab.md).\n"
                );
                s += "- boot:\n    method: minimal\n";
            }
        }
        s += &format!("    timeout: {{seconds: {boot}}}\n");
        s += "- test:\n";
        s += &format!("    timeout: {{seconds: {}}}\n", self.timeout);
        s += "    monitors:\n";
        s += &format!("    - name: {SUITE}\n");
        s += &format!("      start: {}\n", quote(&start_pattern()));
        s += &format!("      end: {}\n", quote(&end_pattern()));
        s += &format!(
            "      pattern: {}\n",
            quote(&figure_pattern(self.unit_word))
        );
        s
    }
}

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
    fn quoting_keeps_backslashes_and_doubles_quotes() {
        assert_eq!(quote(r"a\n'b"), r"'a\n''b'");
        let a = join_args(&["-append".into(), "mode=run prog=bench".into()]).unwrap();
        assert_eq!(a, "-append \"mode=run prog=bench\"");
        assert!(join_args(&["x\"y".into()]).is_err());
    }

    #[test]
    fn a_qemu_job_has_its_images_boot_and_monitors() {
        let j = Job {
            name: "n".into(),
            cmdline: "mode=run".into(),
            timeout: 60,
            unit_word: "instructions",
            kind: JobKind::Qemu {
                context: vec![("arch", "i386".into())],
                images: vec![(
                    "kernel".into(),
                    "file:///k".into(),
                    "-kernel {kernel}".into(),
                )],
            },
        };
        let y = j.yaml();
        assert!(y.contains("device_type: qemu\n"), "{y}");
        assert!(y.contains("context:\n  arch: i386\n"), "{y}");
        assert!(
            y.contains(
                "      kernel:\n        url: 'file:///k'\n        image_arg: '-kernel {kernel}'\n"
            ),
            "{y}"
        );
        assert!(
            y.contains("- boot:\n    method: qemu\n    media: tmpfs\n"),
            "{y}"
        );
        assert!(
            y.contains("    timeout: {seconds: 60}\n    monitors:\n    - name: testbed\n"),
            "{y}"
        );
    }
}
