// Link with the kernel's own script, and record the build's git revision for
// the report's `boot` record. xtask computes the revision (with the dirty
// flag and the hash of the uncommitted diff) and passes it as TESTBED_REV,
// so an edit that is not committed is never reported as the clean revision;
// a plain `cargo build` falls back to `git describe`.
fn main() {
    let dir = std::env::var("CARGO_MANIFEST_DIR").unwrap();
    println!("cargo:rustc-link-arg-bins=-T{dir}/../linker.ld");
    println!("cargo:rerun-if-changed={dir}/../linker.ld");
    println!("cargo:rerun-if-env-changed=TESTBED_REV");
    if let Ok(rev) = std::env::var("TESTBED_REV") {
        println!("cargo:rustc-env=TESTBED_REV={rev}");
        return;
    }
    let rev = std::process::Command::new("git")
        .args(["describe", "--always", "--dirty", "--abbrev=12"])
        .current_dir(&dir)
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=TESTBED_REV={rev}");
    println!("cargo:rerun-if-changed={dir}/../.git/HEAD");
    println!("cargo:rerun-if-changed={dir}/../.git/index");
}
