//! `cargo xtask iso`: a GRUB hybrid image (CD or USB stick) for real hardware.

use std::path::PathBuf;

use anyhow::Result;
use clap::Args;

use crate::{iso, kbuild, preflight};

#[derive(Args)]
pub struct IsoArgs {
    /// Where to write the image.
    #[arg(long, short, default_value = "target/testbed.iso")]
    output: PathBuf,
    /// Seconds the GRUB menu waits.
    #[arg(long, default_value_t = 5)]
    menu_timeout: u32,
}

pub fn make_iso(a: IsoArgs) -> Result<i32> {
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
