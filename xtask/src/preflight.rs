//! Set-up on a fresh machine: rust-src for build-std, QEMU and the GRUB
//! tools. Installs what is missing when it can (root with apt-get), and
//! otherwise stops with the exact command to run.

use std::path::Path;
use std::process::Command;

use anyhow::{bail, Context, Result};

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
        "apt-get update && apt-get install -y --no-install-recommends {}",
        APT_PACKAGES.join(" ")
    )
}

fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(tool).is_file()))
        .unwrap_or(false)
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim() == "0")
        .unwrap_or(false)
}

/// The tools among `TOOLS` that are missing.
pub fn missing_tools() -> Vec<&'static str> {
    TOOLS
        .iter()
        .filter(|(t, _)| !on_path(t))
        .map(|(t, _)| *t)
        .collect()
}

/// Makes sure QEMU and the GRUB tools are there.
pub fn ensure_tools() -> Result<()> {
    let missing = missing_tools();
    if missing.is_empty() {
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        bail!(
            "missing tools: {}.\nInstall them with:\n  sudo sh -c '{}'",
            missing.join(", "),
            install_command()
        );
    }
    eprintln!(
        "xtask: missing {}; installing with apt-get: {}",
        missing.join(", "),
        APT_PACKAGES.join(" ")
    );
    let ok = Command::new("sh")
        .args(["-c", &format!("{} >/dev/null", install_command())])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("cannot run apt-get")?
        .success();
    let still = missing_tools();
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

/// Makes sure gdb is there (for `cargo xtask gdb`).
pub fn ensure_gdb() -> Result<()> {
    if on_path("gdb") {
        return Ok(());
    }
    if !(is_root() && on_path("apt-get")) {
        bail!("gdb is missing. Install it with:\n  sudo apt-get install -y gdb");
    }
    eprintln!("xtask: gdb is missing; installing it with apt-get");
    let ok = Command::new("sh")
        .args(["-c", "apt-get install -y --no-install-recommends gdb >/dev/null || (apt-get update >/dev/null && apt-get install -y --no-install-recommends gdb >/dev/null)"])
        .env("DEBIAN_FRONTEND", "noninteractive")
        .status()
        .context("cannot run apt-get")?
        .success();
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
