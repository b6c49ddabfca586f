//! `cargo xtask build`: the kernel and the user programs.

use anyhow::Result;

use crate::kbuild;

pub fn build() -> Result<i32> {
    let a = kbuild::build(false)?;
    println!("kernel: {}", a.kernel.display());
    for (p, _) in &a.programs {
        println!("program: {}", p.display());
    }
    Ok(0)
}
