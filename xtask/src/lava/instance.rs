//! A LAVA instance on this machine (`cargo xtask lab up` / `lab down`),
//! made of Debian bookworm's packages (lava-server, lava-dispatcher,
//! postgresql: LAVA 2023.01) with its daemons started directly, as their
//! systemd units would start them, so that it also runs where systemd is
//! not PID 1 (containers, CI). Everything it makes lives under one state
//! directory (a PostgreSQL cluster of its own, the logs, the worker's
//! files, the API token, the daemons' pids), but for the few files LAVA
//! only reads from /etc/lava-server and the jobs' output under
//! /var/lib/lava-server, each recorded at `up` and removed at `down`.
//!
//! Configured for quick turnaround: the scheduler woken by events
//! (`EVENT_NOTIFICATION: true`, lava-publisher) and the worker pinging every
//! second; with LAVA's defaults (a 20 s scheduler tick and a 20 s ping) a
//! job waits about 40 s before it starts.

use std::io::Write;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};

/// Debian's packages of a LAVA instance.
pub const PACKAGES: [&str; 4] = ["lava-server", "lava-dispatcher", "lavacli", "postgresql"];

/// The instance's one worker; its QEMU devices are `qemu-01`, `qemu-02`...
pub const WORKER: &str = "testbed-worker";

/// The name of the instance's device `k` (from 1).
pub fn device(k: u32) -> String {
    format!("qemu-{k:02}")
}
/// The instance's user (a superuser) whose token `lab` uses.
pub const USER: &str = "testbed";

/// PostgreSQL 15's programs (bookworm's).
const PG_BIN: &str = "/usr/lib/postgresql/15/bin";
/// The instance's PostgreSQL port (not 5432: a system cluster may be there).
const PG_PORT: u16 = 5439;
/// What marks the files under /etc that `up` wrote.
const MARK: &str = "# written by `cargo xtask lab up`; `cargo xtask lab down` removes it\n";
/// The line of our settings file that names the instance's state directory.
const STATE_LINE: &str = "# state: ";

const DB_SETTINGS: &str = "/etc/lava-server/settings.d/00-database.yaml";
const OUR_SETTINGS: &str = "/etc/lava-server/settings.d/50-testbed-lab.yaml";
const JOB_OUTPUT: &str = "/var/lib/lava-server/default/media/job-output";

/// The daemons, in the order they start (and stop in reverse).
pub const DAEMONS: [&str; 4] = [
    "gunicorn",
    "lava-publisher",
    "lava-scheduler",
    "lava-worker",
];

/// The instance's state directory.
pub struct Instance {
    pub dir: PathBuf,
    /// The web server's (gunicorn's) port; the publisher's is the next.
    pub port: u16,
    /// How many QEMU devices (jobs that run at once).
    pub devices: u32,
}

impl Instance {
    pub fn new(dir: PathBuf, port: u16, devices: u32) -> Instance {
        Instance { dir, port, devices }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/", self.port)
    }

    /// The file holding the API token of [`USER`] (mode 0600).
    pub fn token_file(&self) -> PathBuf {
        self.dir.join("token")
    }

    /// The file holding the server's URL while the instance is up.
    pub fn server_file(&self) -> PathBuf {
        self.dir.join("server")
    }

    fn pg(&self) -> PathBuf {
        self.dir.join("pg")
    }

    fn logs(&self) -> PathBuf {
        self.dir.join("log")
    }

    fn pid_file(&self, daemon: &str) -> PathBuf {
        self.dir.join("run").join(format!("{daemon}.pid"))
    }

    /// The URL of a running instance in `dir` (from its `server` file).
    pub fn running(dir: &Path) -> Option<String> {
        std::fs::read_to_string(dir.join("server"))
            .ok()
            .map(|s| s.trim().to_string())
    }

    /// Brings the instance up: what is missing installed (root, apt-get),
    /// the database made and migrated, the daemons started, a user with a
    /// token, the `qemu` device type, one worker and one device.
    pub fn up(&self) -> Result<()> {
        ensure_root("lab up")?;
        if let Some(why) = closed_to_others(&self.dir) {
            bail!("lab up: {why}");
        }
        ensure_packages()?;
        if Instance::running(&self.dir).is_some() || self.pg().exists() {
            bail!(
                "a LAVA instance is already up in {} (`cargo xtask lab down` first)",
                self.dir.display()
            );
        }
        for f in [DB_SETTINGS, OUR_SETTINGS] {
            if let Ok(text) = std::fs::read_to_string(f) {
                if !text.starts_with(MARK) {
                    bail!("{f} configures a LAVA server on this machine already: `lab up` makes its own and would replace it");
                }
            }
        }
        if let Some(other) = self.other_instance() {
            bail!(
                "a LAVA instance of `lab up` is up here with its state in {other} (one at a time: `cargo xtask lab down --state {other}` first)"
            );
        }
        self.make().inspect_err(|_| {
            // Half an instance is no use: whatever was made goes.
            let _ = self.down();
        })
    }

    fn make(&self) -> Result<()> {
        let t = Instant::now();
        for d in ["run", "log", "worker"] {
            std::fs::create_dir_all(self.dir.join(d))
                .with_context(|| format!("cannot create {}", self.dir.join(d).display()))?;
        }
        // gunicorn runs as lavaserver and writes its log there.
        std::fs::set_permissions(self.logs(), std::fs::Permissions::from_mode(0o1777))?;
        let before: Vec<String> = list(Path::new(JOB_OUTPUT));
        std::fs::write(self.dir.join("job-output-before"), before.join("\n"))?;
        self.database()?;
        eprintln!(
            "lab up: database ready ({:.0} s)",
            t.elapsed().as_secs_f64()
        );
        // The worker last: it registers with the server under its token.
        for d in &DAEMONS[..3] {
            self.start(d)?;
        }
        self.wait_for_web(Duration::from_secs(60))?;
        self.populate()?;
        self.start("lava-worker")?;
        std::fs::write(self.server_file(), self.url())?;
        eprintln!(
            "lab up: LAVA at {} ({:.0} s); its state in {}; the token in {}",
            self.url(),
            t.elapsed().as_secs_f64(),
            self.dir.display(),
            self.token_file().display()
        );
        Ok(())
    }

    /// A PostgreSQL cluster of the instance's own in `<dir>/pg`, LAVA's
    /// settings pointing at it, and LAVA's own set-up (postinst.py: the
    /// roles, the database, the migrations).
    fn database(&self) -> Result<()> {
        let pg = self.pg();
        std::fs::create_dir_all(&pg)?;
        run(Command::new("chown").args(["postgres:postgres"]).arg(&pg))?;
        std::fs::set_permissions(&pg, std::fs::Permissions::from_mode(0o700))?;
        run(Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(format!("{PG_BIN}/initdb"))
            .arg("-D")
            .arg(&pg)
            .args([
                "--auth-local=peer",
                "--auth-host=scram-sha-256",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ])
            .stdout(self.log_file("initdb.log")?))?;
        run(Command::new("runuser")
            .args(["-u", "postgres", "--"])
            .arg(format!("{PG_BIN}/pg_ctl"))
            .arg("-D")
            .arg(&pg)
            .arg("-l")
            .arg(self.logs().join("postgresql.log"))
            .arg("-o")
            .arg(format!(
                "-p {PG_PORT} -k {} -c listen_addresses=127.0.0.1",
                pg.display()
            ))
            .args(["-w", "start"])
            .stdout(Stdio::null()))?;
        let password = random_word()?;
        write_config(
            DB_SETTINGS,
            &format!(
                "DATABASES:\n  default:\n    ENGINE: \"django.db.backends.postgresql\"\n    NAME: \"lavaserver\"\n    USER: \"lavaserver\"\n    PASSWORD: \"{password}\"\n    HOST: \"127.0.0.1\"\n    PORT: {PG_PORT}\n"
            ),
        )?;
        write_config(
            OUR_SETTINGS,
            &format!("{STATE_LINE}{}\n# Quick turnaround: the scheduler woken by events, not its 20 s tick.\nEVENT_NOTIFICATION: true\nALLOWED_HOSTS: [\"*\"]\n", self.dir.display()),
        )?;
        // Debian's python3 (a python3 first on PATH may lack Django);
        // psql and pg_isready find the cluster by PGHOST and PGPORT.
        run(Command::new("/usr/bin/python3")
            .arg("/usr/share/lava-server/postinst.py")
            .env("PGHOST", &pg)
            .env("PGPORT", PG_PORT.to_string())
            .stdout(self.log_file("postinst.log")?)
            .stderr(self.log_file("postinst.err")?))
        .context("LAVA's set-up (postinst.py) failed: see its log in the state directory")
    }

    fn log_file(&self, name: &str) -> Result<std::fs::File> {
        let p = self.logs().join(name);
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&p)
            .with_context(|| format!("cannot open {}", p.display()))
    }

    /// Starts one daemon as its systemd unit's ExecStart does, in a
    /// session of its own (so that `stop` ends it and its children).
    pub fn start(&self, daemon: &str) -> Result<()> {
        let log = self.logs().join(format!("{daemon}.log"));
        let mut c = match daemon {
            "gunicorn" => {
                let mut c = Command::new("/usr/bin/gunicorn3");
                c.args(["lava_server.wsgi", "--log-level", "INFO", "--log-file"])
                    .arg(&log)
                    .args(["-u", "lavaserver", "-g", "lavaserver"])
                    .args(["--worker-class", "eventlet", "--workers", "2"])
                    .arg("--bind")
                    .arg(format!("127.0.0.1:{}", self.port));
                c
            }
            "lava-publisher" => {
                let mut c = Command::new("/usr/bin/lava-server");
                c.args(["manage", "lava-publisher", "--level", "INFO", "--log-file"])
                    .arg(&log)
                    .args(["--host", "127.0.0.1", "--port"])
                    .arg((self.port + 1).to_string());
                c
            }
            "lava-scheduler" => {
                let mut c = Command::new("/usr/bin/lava-server");
                // Its events from the publisher's default socket
                // (tcp://localhost:5500).
                c.args(["manage", "lava-scheduler", "--level", "INFO", "--log-file"])
                    .arg(&log);
                c
            }
            "lava-worker" => {
                let mut c = Command::new("/usr/bin/lava-worker");
                c.args(["--level", "INFO", "--log-file"])
                    .arg(&log)
                    .args(["--name", WORKER, "--url"])
                    .arg(self.url())
                    .arg("--ws-url")
                    .arg(format!("http://127.0.0.1:{}/ws/", self.port + 1))
                    .arg("--worker-dir")
                    .arg(self.dir.join("worker"))
                    .args(["--ping-interval", "1"]);
                let token = self.dir.join("worker-token");
                if token.exists() {
                    c.arg("--token-file").arg(token);
                }
                c
            }
            other => bail!("no daemon {other}"),
        };
        let out = self.log_file(&format!("{daemon}.out"))?;
        c.current_dir("/")
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .process_group(0);
        let child = c
            .spawn()
            .with_context(|| format!("cannot start {daemon}"))?;
        std::fs::write(self.pid_file(daemon), child.id().to_string())?;
        Ok(())
    }

    /// Ends one daemon (its whole process group) if it runs; waits for it.
    pub fn stop(&self, daemon: &str) -> Result<()> {
        let p = self.pid_file(daemon);
        let Ok(text) = std::fs::read_to_string(&p) else {
            return Ok(());
        };
        let pid: i32 = text.trim().parse().context("a pid file")?;
        if pid > 1 {
            // SAFETY: kill(2) with a negative pid signals the process group
            // the daemon leads (it was started with process_group(0)); it
            // touches no memory of ours.
            unsafe { libc::kill(-pid, libc::SIGTERM) };
            let t = Instant::now();
            // SAFETY: as above; signal 0 only asks whether the group exists.
            while unsafe { libc::kill(-pid, 0) } == 0 {
                if t.elapsed() > Duration::from_secs(5) {
                    // SAFETY: as above.
                    unsafe { libc::kill(-pid, libc::SIGKILL) };
                }
                reap();
                std::thread::sleep(Duration::from_millis(100));
            }
        }
        let _ = std::fs::remove_file(p);
        Ok(())
    }

    fn wait_for_web(&self, limit: Duration) -> Result<()> {
        let t = Instant::now();
        let url = format!("{}api/v0.2/system/version/", self.url());
        loop {
            if super::server::http::call(&url, None, None).is_ok() {
                return Ok(());
            }
            if t.elapsed() > limit {
                bail!(
                    "LAVA's web server did not answer at {} within {} s (its log: {})",
                    self.url(),
                    limit.as_secs(),
                    self.logs().join("gunicorn.log").display()
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// The user and its token, the device type, the worker (and its
    /// token) and the devices.
    fn populate(&self) -> Result<()> {
        let pw = random_word()?;
        manage(&[
            "users",
            "add",
            USER,
            "--superuser",
            "--staff",
            "--passwd",
            &pw,
        ])?;
        let out = manage(&["tokens", "add", "--user", USER])?;
        let token = out.lines().last().unwrap_or("").trim().to_string();
        if token.is_empty() {
            bail!("`lava-server manage tokens add` printed no token");
        }
        write_secret(&self.token_file(), &token)?;
        manage(&["device-types", "add", "qemu"])?;
        manage(&["workers", "add", WORKER])?;
        let details = manage(&["workers", "details", WORKER])?;
        let wtoken = details
            .lines()
            .find_map(|l| l.strip_prefix("token"))
            .and_then(|l| l.split(':').nth(1))
            .map(|t| t.trim().to_string())
            .context("`workers details` shows no token")?;
        write_secret(&self.dir.join("worker-token"), &wtoken)?;
        // The worker's dispatcher settings: no default route here, so the
        // dispatcher's address must be given.
        write_config(
            &format!("/etc/lava-server/dispatcher.d/{WORKER}.yaml"),
            "dispatcher_ip: 127.0.0.1\n",
        )?;
        // The devices: the `qemu` device type for i386 without KVM (the
        // jobs' context says the same).
        for k in 1..=self.devices {
            let name = device(k);
            write_config(
                &format!("/etc/lava-server/dispatcher-config/devices/{name}.jinja2"),
                "{% extends 'qemu.jinja2' %}\n{% set arch = 'i386' %}\n{% set no_kvm = True %}\n",
            )?;
            manage(&[
                "devices",
                "add",
                "--device-type",
                "qemu",
                "--worker",
                WORKER,
                &name,
            ])?;
        }
        Ok(())
    }

    /// The state directory of another instance whose settings are in
    /// /etc/lava-server (only one can be up at a time).
    fn other_instance(&self) -> Option<String> {
        let text = std::fs::read_to_string(OUR_SETTINGS).ok()?;
        let dir = text.lines().find_map(|l| l.strip_prefix(STATE_LINE))?;
        (Path::new(dir) != self.dir).then(|| dir.to_string())
    }

    /// Takes the instance down: the daemons ended, the database cluster
    /// stopped and removed, the files `up` wrote removed, the state
    /// directory removed.
    pub fn down(&self) -> Result<()> {
        ensure_root("lab down")?;
        if let Some(other) = self.other_instance() {
            bail!(
                "the LAVA instance up here has its state in {other}, not in {}: `cargo xtask lab down --state {other}`",
                self.dir.display()
            );
        }
        for d in DAEMONS.iter().rev() {
            self.stop(d)?;
        }
        if self.pg().join("postmaster.pid").exists() {
            run(Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(format!("{PG_BIN}/pg_ctl"))
                .arg("-D")
                .arg(self.pg())
                .args(["-m", "fast", "-w", "stop"])
                .stdout(Stdio::null()))?;
        }
        let devices = list(Path::new("/etc/lava-server/dispatcher-config/devices"))
            .into_iter()
            .map(|d| format!("/etc/lava-server/dispatcher-config/devices/{d}"));
        for f in [
            DB_SETTINGS.to_string(),
            OUR_SETTINGS.to_string(),
            format!("/etc/lava-server/dispatcher.d/{WORKER}.yaml"),
        ]
        .into_iter()
        .chain(devices)
        {
            if std::fs::read_to_string(&f).is_ok_and(|t| t.starts_with(MARK)) {
                std::fs::remove_file(&f).with_context(|| format!("cannot remove {f}"))?;
            }
        }
        if let Ok(before) = std::fs::read_to_string(self.dir.join("job-output-before")) {
            let before: Vec<&str> = before.lines().collect();
            for e in list(Path::new(JOB_OUTPUT)) {
                if !before.contains(&e.as_str()) {
                    let _ = std::fs::remove_dir_all(Path::new(JOB_OUTPUT).join(&e));
                }
            }
        }
        if self.dir.exists() {
            std::fs::remove_dir_all(&self.dir)
                .with_context(|| format!("cannot remove {}", self.dir.display()))?;
        }
        Ok(())
    }
}

/// The names in a directory (none if it is missing).
fn list(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Reaps any child of ours that has ended (the daemons are our children
/// while `lab up` runs in the same process as the tests).
fn reap() {
    // SAFETY: waitpid with WNOHANG on any child: it only collects the
    // status of a child that has ended, touching no memory but `status`.
    unsafe {
        let mut status = 0;
        while libc::waitpid(-1, &mut status, libc::WNOHANG) > 0 {}
    }
}

/// Why the instance's other users cannot reach its state directory `dir`,
/// if they cannot: PostgreSQL (user postgres) keeps its cluster there and
/// LAVA's web server (user lavaserver) its log, so every directory on the
/// way must let others pass (search permission, `o+x`). A directory not
/// made yet is made open (umask 022).
pub fn closed_to_others(dir: &Path) -> Option<String> {
    let mut ancestors: Vec<&Path> = dir.ancestors().collect();
    ancestors.reverse();
    ancestors.into_iter().find_map(|d| {
        let mode = std::fs::metadata(d).ok()?.permissions().mode();
        (mode & 0o001 == 0).then(|| {
            format!(
                "{} (mode {:o}) is closed to other users, and the state directory {} lies below it: PostgreSQL (user postgres) and LAVA's web server (user lavaserver) keep their files there. Open it (`chmod o+x {}`) or give another state directory (`--state DIR`)",
                d.display(),
                mode & 0o7777,
                dir.display(),
                d.display()
            )
        })
    })
}

fn ensure_root(what: &str) -> Result<()> {
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        bail!("`{what}` runs LAVA's daemons and a PostgreSQL cluster: run it as root");
    }
    Ok(())
}

/// Whether a program is installed at `path`.
fn installed(path: &str) -> bool {
    Path::new(path).exists()
}

/// The apt-get line that installs the instance's packages.
pub fn install_command() -> String {
    format!(
        "apt-get update && apt-get install -y --no-install-recommends {}",
        PACKAGES.join(" ")
    )
}

/// Whether everything an instance needs is installed.
pub fn packages_present() -> bool {
    [
        "/usr/bin/lava-server",
        "/usr/bin/lava-worker",
        "/usr/bin/gunicorn3",
    ]
    .iter()
    .all(|p| installed(p))
        && installed(&format!("{PG_BIN}/initdb"))
}

/// Installs the packages when something is missing (root, apt-get).
pub fn ensure_packages() -> Result<()> {
    if packages_present() {
        return Ok(());
    }
    if !installed("/usr/bin/apt-get") {
        bail!(
            "LAVA's server is not installed and there is no apt-get: install {} (Debian bookworm's, LAVA 2023.01)",
            PACKAGES.join(", ")
        );
    }
    eprintln!(
        "xtask: installing {} with apt-get (about a minute and a half)",
        PACKAGES.join(" ")
    );
    let ok = Command::new("sh")
        .args(["-c", &format!("{} >/dev/null", install_command())])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("cannot run apt-get")?
        .success();
    if !ok || !packages_present() {
        bail!(
            "apt-get could not install LAVA's server.\nTry by hand:\n  {}",
            install_command()
        );
    }
    Ok(())
}

/// Runs a command, failing with its name and status.
fn run(c: &mut Command) -> Result<()> {
    let what = format!("{:?}", c.get_program());
    let s = c.status().with_context(|| format!("cannot run {what}"))?;
    if !s.success() {
        bail!("{what} failed ({s})");
    }
    Ok(())
}

/// `lava-server manage ARGS`: its standard output.
fn manage(args: &[&str]) -> Result<String> {
    let o = Command::new("/usr/bin/lava-server")
        .arg("manage")
        .args(args)
        .current_dir("/")
        .output()
        .context("cannot run lava-server manage")?;
    if !o.status.success() {
        bail!(
            "`lava-server manage {}` failed: {}",
            args.first().copied().unwrap_or(""),
            String::from_utf8_lossy(&o.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&o.stdout).into_owned())
}

/// A configuration file under /etc, marked as ours, readable by LAVA's
/// user alone.
fn write_config(path: &str, body: &str) -> Result<()> {
    let p = Path::new(path);
    if let Some(d) = p.parent() {
        std::fs::create_dir_all(d)?;
    }
    std::fs::write(p, format!("{MARK}{body}")).with_context(|| format!("cannot write {path}"))?;
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o640))?;
    run(Command::new("chown").args(["lavaserver:lavaserver", path]))?;
    Ok(())
}

/// A secret in a file only root reads.
fn write_secret(path: &Path, secret: &str) -> Result<()> {
    let mut f = std::fs::OpenOptions::new()
        .create(true)
        .write(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    writeln!(f, "{secret}")?;
    Ok(())
}

/// 32 random letters and digits (from /dev/urandom).
fn random_word() -> Result<String> {
    let mut b = [0u8; 32];
    std::io::Read::read_exact(&mut std::fs::File::open("/dev/urandom")?, &mut b)?;
    const A: &[u8] = b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";
    Ok(b.iter().map(|x| A[*x as usize % A.len()] as char).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A directory closed to others on the way to the state directory is
    /// named, with the fix; an open way, parts of it not made yet, is fine.
    #[test]
    fn a_state_directory_behind_a_closed_one_is_refused_by_name() {
        let top = std::env::temp_dir().join(format!("lab-reach-{}", std::process::id()));
        let closed = top.join("closed");
        std::fs::create_dir_all(&closed).unwrap();
        std::fs::set_permissions(&top, std::fs::Permissions::from_mode(0o755)).unwrap();
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o700)).unwrap();
        let why = closed_to_others(&closed.join("target/state")).unwrap();
        assert!(
            why.starts_with(&format!("{} (mode 700) is closed", closed.display())),
            "{why}"
        );
        assert!(
            why.contains(&format!("chmod o+x {}", closed.display())),
            "{why}"
        );
        std::fs::set_permissions(&closed, std::fs::Permissions::from_mode(0o711)).unwrap();
        assert_eq!(closed_to_others(&closed.join("target/state")), None);
        let _ = std::fs::remove_dir_all(&top);
    }
}
