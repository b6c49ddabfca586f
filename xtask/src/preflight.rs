//! Set-up on a fresh machine: rust-src for build-std, QEMU and the GRUB
//! tools. Installs what is missing when it can (root with apt-get), and
//! otherwise stops with the exact command to run.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

/// Bochs's Debian packages: the emulator, its BIOS, the VGA BIOS, the SDL2 display.
pub const BOCHS_PACKAGES: &[&str] = &["bochs", "bochsbios", "vgabios", "bochs-sdl"];
/// Files Bochs's packages install that a boot needs, with the package of each.
pub const BOCHS_FILES: &[(&str, &str)] = &[
    ("/usr/share/bochs/BIOS-bochs-latest", "bochsbios"),
    ("/usr/share/vgabios/vgabios.bin", "vgabios"),
    (
        "/usr/lib/x86_64-linux-gnu/bochs/plugins/libbx_sdl2_gui.so",
        "bochs-sdl",
    ),
];

/// Debian packages that provide the tools.
pub const APT_PACKAGES: &[&str] = &[
    "qemu-system-x86",
    "grub-pc-bin",
    "grub-common",
    "xorriso",
    "mtools",
];

/// (tool, what it is for). `mformat` stands for mtools.
const TOOLS: &[(&str, &str)] = &[
    ("qemu-system-i386", "booting the kernel"),
    ("qemu-system-x86_64", "booting AMD CPU models"),
    ("grub-mkrescue", "building the GRUB image"),
    ("xorriso", "building the GRUB image"),
    ("mformat", "building the GRUB image (mtools)"),
];

pub fn install_command() -> String {
    format!(
        "apt-get update && apt-get install -y --no-install-recommends {}{}",
        qemu_utils_downgrade(),
        APT_PACKAGES.join(" ")
    )
}

/// A newer `qemu-utils` (a backport, 8.0 or later) declares that it breaks
/// the distribution's `qemu-system-common` 7.2, and apt then refuses to
/// install QEMU at all ("held broken packages"). When one is installed,
/// the install line takes the release's own `qemu-utils` with it: the
/// project's plugin is built for QEMU 7.2's plugin API.
fn qemu_utils_downgrade() -> &'static str {
    let newer = Command::new("dpkg-query")
        .args(["-W", "-f=${Version}", "qemu-utils"])
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .and_then(|v| {
            let upstream = v.split_once(':').map_or(v.as_str(), |(_, u)| u);
            upstream.split('.').next()?.parse::<u32>().ok()
        })
        .is_some_and(|major| major >= 8);
    if newer {
        "--allow-downgrades qemu-utils/bookworm "
    } else {
        ""
    }
}

fn on_path(tool: &str) -> bool {
    on_search_path(tool, std::env::var_os("PATH").as_deref())
}

/// True when `tool` is a file in one of the directories of `path` (a
/// PATH-style list).
fn on_search_path(tool: &str, path: Option<&std::ffi::OsStr>) -> bool {
    path.map(|p| std::env::split_paths(p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// What a command needs: QEMU only, QEMU and the GRUB image tools, or
/// Bochs and the GRUB image tools.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    Qemu,
    QemuAndGrub,
    Bochs,
}

/// The first two `TOOLS` are QEMU's.
const QEMU_TOOLS: usize = 2;

/// The tools among `TOOLS` that are missing.
pub fn missing_tools() -> Vec<&'static str> {
    missing_on(std::env::var_os("PATH").as_deref())
}

fn missing_for(need: Need) -> Vec<&'static str> {
    let qemu: Vec<&str> = TOOLS[..QEMU_TOOLS].iter().map(|(t, _)| *t).collect();
    missing_tools()
        .into_iter()
        .filter(|t| match need {
            Need::Qemu => qemu.contains(t),
            Need::QemuAndGrub => true,
            Need::Bochs => !qemu.contains(t),
        })
        .collect()
}

/// Runs an install line (`sh -c`, apt-get non-interactive) with everything
/// it prints on stderr, both halves of `apt-get update && apt-get install`:
/// stdout stays the command's own (`run --json`'s JSON starts at its first
/// byte even on the run that installs). Whether it succeeded.
fn run_install(line: &str) -> Result<bool> {
    Ok(Command::new("sh")
        .args(["-c", line])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .stdout(std::io::stderr())
        .status()
        .context("cannot run apt-get")?
        .success())
}

/// What Bochs needs that is missing: its binary, and the files of its packages.
fn missing_bochs() -> Vec<&'static str> {
    let mut m: Vec<&str> = Vec::new();
    if !on_path("bochs") {
        m.push("bochs");
    }
    for (file, package) in BOCHS_FILES {
        if !Path::new(file).is_file() {
            m.push(package);
        }
    }
    m
}

fn bochs_install_command() -> String {
    format!(
        "apt-get update && apt-get install -y --no-install-recommends {}",
        BOCHS_PACKAGES.join(" ")
    )
}

/// Makes sure Bochs, its BIOS images and its SDL2 display are there.
fn ensure_bochs() -> Result<()> {
    let missing = missing_bochs();
    if missing.is_empty() {
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        bail!(
            "missing for Bochs: {}.\nInstall it with:\n  sudo sh -c '{}'",
            missing.join(", "),
            bochs_install_command()
        );
    }
    eprintln!(
        "xtask: missing {}; installing with apt-get: {}",
        missing.join(", "),
        BOCHS_PACKAGES.join(" ")
    );
    let ok = run_install(&bochs_install_command())?;
    let still = missing_bochs();
    if !ok || !still.is_empty() {
        bail!(
            "apt-get could not install {} (missing still: {}).\nTry by hand:\n  {}",
            BOCHS_PACKAGES.join(" "),
            still.join(", "),
            bochs_install_command()
        );
    }
    eprintln!("xtask: installed {}", BOCHS_PACKAGES.join(" "));
    Ok(())
}

/// The tools among `TOOLS` that no directory of `path` holds.
fn missing_on(path: Option<&std::ffi::OsStr>) -> Vec<&'static str> {
    TOOLS
        .iter()
        .filter(|(t, _)| !on_search_path(t, path))
        .map(|(t, _)| *t)
        .collect()
}

/// What to tell a user who lacks `missing` and cannot install here.
fn missing_message(missing: &[&str]) -> String {
    let why: Vec<String> = TOOLS
        .iter()
        .filter(|(t, _)| missing.contains(t))
        .map(|(t, what)| format!("{t} ({what})"))
        .collect();
    format!(
        "missing tools: {}.\nInstall them with:\n  sudo sh -c '{}'",
        why.join(", "),
        install_command()
    )
}

/// Makes sure QEMU and the GRUB tools are there.
pub fn ensure_tools() -> Result<()> {
    ensure(Need::QemuAndGrub)
}

/// Makes sure what `need` names is there (installing every package when
/// it can: they come together).
pub fn ensure(need: Need) -> Result<()> {
    if need == Need::Bochs {
        ensure_bochs()?;
    }
    let missing = missing_for(need);
    if missing.is_empty() {
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        bail!("{}", missing_message(&missing));
    }
    eprintln!(
        "xtask: missing {}; installing with apt-get: {}",
        missing.join(", "),
        APT_PACKAGES.join(" ")
    );
    let ok = run_install(&install_command())?;
    let still = missing_for(need);
    if !ok || !still.is_empty() {
        bail!(
            "apt-get could not install {} (missing still: {}).\nTry by hand:\n  {}",
            APT_PACKAGES.join(" "),
            still.join(", "),
            install_command()
        );
    }
    eprintln!("xtask: installed {}", APT_PACKAGES.join(" "));
    Ok(())
}

/// Debian's package with `lava-run`, LAVA's dispatcher (no server needed).
pub const LAVA_PACKAGE: &str = "lava-dispatcher";

/// The command that installs LAVA's dispatcher.
pub fn lava_install_command() -> String {
    format!("apt-get update && apt-get install -y --no-install-recommends {LAVA_PACKAGE}")
}

/// What to do about a missing `lava-run`, in one line.
pub fn lava_install_hint() -> String {
    format!(
        "install LAVA's dispatcher: sudo sh -c '{}'",
        lava_install_command()
    )
}

/// Makes sure `lava-run` is there (for `cargo xtask lava --local` and the
/// `lava` tests), installing Debian's lava-dispatcher as root with apt-get.
/// `lava-run` runs QEMU as root: a job needs root whatever is installed.
pub fn ensure_lava() -> Result<()> {
    if on_path("lava-run") {
        if !is_root() {
            bail!(
                "lava-run runs its jobs as root (it writes under /var/lib/lava): run this as root"
            );
        }
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        bail!(
            "lava-run (LAVA's dispatcher) is missing.\nInstall it with:\n  sudo sh -c '{}'",
            lava_install_command()
        );
    }
    eprintln!(
        "xtask: lava-run is missing; installing {LAVA_PACKAGE} with apt-get (about a minute)"
    );
    let ok = run_install(&lava_install_command())?;
    if !ok || !on_path("lava-run") {
        bail!(
            "apt-get could not install {LAVA_PACKAGE}.\nTry by hand:\n  {}",
            lava_install_command()
        );
    }
    eprintln!("xtask: installed {LAVA_PACKAGE}");
    Ok(())
}

/// Makes sure gdb is there (for `cargo xtask gdb`).
pub fn ensure_gdb() -> Result<()> {
    if on_path("gdb") {
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        bail!("gdb is missing. Install it with:\n  sudo apt-get install -y gdb");
    }
    eprintln!("xtask: gdb is missing; installing it with apt-get");
    let ok = run_install(
        "apt-get install -y --no-install-recommends gdb || (apt-get update && apt-get install -y --no-install-recommends gdb)",
    )?;
    if !ok || !on_path("gdb") {
        bail!("apt-get could not install gdb; try: apt-get install -y gdb");
    }
    Ok(())
}

/// Makes sure the toolchain has rust-src (build-std needs it). rustup does
/// not add a component named in rust-toolchain.toml to a toolchain that is
/// already installed, so a fresh machine lacks it.
pub fn ensure_rust_src(root: &Path) -> Result<()> {
    let sysroot = Command::new("rustc")
        .args(["--print", "sysroot"])
        .current_dir(root)
        .output()
        .context("cannot run rustc")?;
    let sysroot = String::from_utf8_lossy(&sysroot.stdout).trim().to_string();
    let lib = Path::new(&sysroot).join("lib/rustlib/src/rust/library");
    if lib.is_dir() {
        return Ok(());
    }
    eprintln!("xtask: rust-src is missing from {sysroot}; running `rustup component add rust-src`");
    let ok = Command::new("rustup")
        .args(["component", "add", "rust-src"])
        .current_dir(root)
        .stdout(std::io::stderr())
        .status()
        .context(
            "cannot run rustup (install rust-src for the nightly named in rust-toolchain.toml)",
        )?
        .success();
    if !ok || !lib.is_dir() {
        bail!("`rustup component add rust-src` failed; the kernel cannot be built without it");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    /// A fresh directory for a fake PATH.
    fn dir(name: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("testbed-path-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn every_tool_missing_from_an_empty_path() {
        let d = dir("empty");
        let path = OsString::from(&d);
        let missing = missing_on(Some(&path));
        assert_eq!(missing.len(), TOOLS.len());
        let m = missing_message(&missing);
        for (t, _) in TOOLS {
            assert!(m.contains(t), "{m}");
        }
        assert!(m.contains("qemu-system-i386 (booting the kernel)"), "{m}");
        assert!(m.contains(&install_command()), "{m}");
        assert_eq!(missing_on(None).len(), TOOLS.len());
        assert!(lava_install_hint()
            .contains("apt-get install -y --no-install-recommends lava-dispatcher"));
        let _ = std::fs::remove_dir_all(d);
    }

    #[test]
    fn only_the_grub_tools_missing() {
        let d = dir("qemu-only");
        for t in ["qemu-system-i386", "qemu-system-x86_64"] {
            std::fs::write(d.join(t), b"").unwrap();
        }
        // Two directories, one of them empty, as PATH lists them.
        let other = dir("other");
        let path = std::env::join_paths([&other, &d]).unwrap();
        let missing = missing_on(Some(&path));
        assert_eq!(missing, ["grub-mkrescue", "xorriso", "mformat"]);
        let m = missing_message(&missing);
        assert!(
            m.starts_with("missing tools: grub-mkrescue (building the GRUB image)"),
            "{m}"
        );
        assert!(!m.contains("qemu-system-i386 ("), "{m}");
        let _ = std::fs::remove_dir_all(d);
        let _ = std::fs::remove_dir_all(other);
    }
}
