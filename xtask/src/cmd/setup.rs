//! `cargo xtask setup`: install what the testbed needs.

use anyhow::Result;

use crate::{kbuild, model, preflight};

pub fn setup() -> Result<i32> {
    preflight::ensure_rust_src(&kbuild::root())?;
    preflight::ensure_tools()?;
    preflight::ensure(preflight::Need::Bochs)?;
    // The model plugin is plain Rust for the host (no QEMU headers, no C
    // compiler): building it is all `--clock model` needs.
    let lib = model::build_plugin(&kbuild::root())?;
    println!("setup: rust-src, QEMU, Bochs and the GRUB tools are present");
    println!("setup: the model plugin is built: {}", lib.display());
    Ok(0)
}
