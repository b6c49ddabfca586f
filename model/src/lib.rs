//! The model clock (`--clock model`): a deterministic cycle model of a named
//! CPU family, and the QEMU TCG plugin that feeds it every guest instruction
//! and data access.
//!
//! - [`cache`], [`tlb`]: small pure structures over access streams.
//! - [`coherence`]: the MESI directory over the CPUs' private caches.
//! - [`decode`]: instruction classes, from bytes, at translation time.
//! - [`profile`]: the CPU descriptions of `profiles.toml`.
//! - [`report`]: reading the snapshot file back.
//! - [`machine`]: the whole model, one event at a time (with several CPUs,
//!   applied in modelled-clock order).
//! - `plugin`: the QEMU plugin API (version 1) around [`machine`]; the
//!   cdylib of this crate, `target/release/libmodel.so`, is the plugin.
//!
//! Build the plugin with `cargo build -p model --release`; load it with
//! `qemu-system-i386 -icount shift=0,sleep=off -plugin
//! target/release/libmodel.so,profile=NAME,virt=off,out=FILE ...`.

pub mod cache;
pub mod coherence;
pub mod decode;
pub mod machine;
pub mod plugin;
pub mod profile;
pub mod report;
pub mod tlb;

use std::path::{Path, PathBuf};

pub use profile::Virt;

/// The file name of the plugin library cargo builds.
pub const PLUGIN_FILE: &str = "libmodel.so";

/// Where `cargo build -p model --release` puts the plugin, for a workspace
/// whose target directory is `target_dir`.
pub fn plugin_path(target_dir: &Path) -> PathBuf {
    target_dir.join("release").join(PLUGIN_FILE)
}

/// The `-plugin` argument that loads the plugin at `lib` with a profile,
/// the virt option and an output file. QEMU splits the argument at commas,
/// so none of the parts may hold one.
pub fn plugin_arg(lib: &Path, profile: &str, virt: Virt, out: &Path) -> Result<String, String> {
    let lib = lib.to_str().ok_or("plugin path is not UTF-8")?;
    let out = out.to_str().ok_or("output path is not UTF-8")?;
    for part in [lib, profile, out] {
        if part.contains(',') {
            return Err(format!(
                "QEMU cannot take a comma in a plugin argument: {part}"
            ));
        }
    }
    let virt = virt.arg();
    Ok(format!("{lib},profile={profile},virt={virt},out={out}"))
}

/// [`plugin_arg`] with `reference=on`: every instruction a call, nothing
/// inlined (the plain way the tests hold the fast one to).
pub fn reference_arg(lib: &Path, profile: &str, virt: Virt, out: &Path) -> Result<String, String> {
    Ok(format!(
        "{},reference=on",
        plugin_arg(lib, profile, virt, out)?
    ))
}

/// [`plugin_arg`] with `reference=shadow`: the reference machine beside
/// the fast one, on the same events; its file goes to [`shadow_path`].
pub fn shadow_arg(lib: &Path, profile: &str, virt: Virt, out: &Path) -> Result<String, String> {
    Ok(format!(
        "{},reference=shadow",
        plugin_arg(lib, profile, virt, out)?
    ))
}

/// Where `reference=shadow` writes the reference machine's file, beside
/// `out`.
pub fn shadow_path(out: &Path) -> PathBuf {
    let mut name = out.as_os_str().to_owned();
    name.push(".reference");
    PathBuf::from(name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn plugin_path_and_argument() {
        let lib = plugin_path(Path::new("/w/target"));
        assert_eq!(lib, PathBuf::from("/w/target/release/libmodel.so"));
        assert_eq!(
            plugin_arg(&lib, "p4", Virt::Shadow, Path::new("/tmp/m.txt")).unwrap(),
            "/w/target/release/libmodel.so,profile=p4,virt=on,out=/tmp/m.txt"
        );
        assert_eq!(
            plugin_arg(&lib, "p4", Virt::Ept, Path::new("/tmp/m.txt")).unwrap(),
            "/w/target/release/libmodel.so,profile=p4,virt=ept,out=/tmp/m.txt"
        );
        assert!(plugin_arg(&lib, "p4", Virt::Off, Path::new("/tmp/a,b"))
            .unwrap_err()
            .contains("comma"));
    }
}
