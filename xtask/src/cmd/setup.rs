//! `cargo xtask setup`: install what the testbed needs.

use anyhow::Result;

use crate::{kbuild, preflight};

pub fn setup() -> Result<i32> {
    preflight::ensure_rust_src(&kbuild::root())?;
    preflight::ensure_tools()?;
    preflight::ensure(preflight::Need::Bochs)?;
    println!("setup: rust-src, QEMU, Bochs and the GRUB tools are present");
    Ok(0)
}
