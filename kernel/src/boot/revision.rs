//! The build's git revision, as the boot banner and the `boot` record say
//! it, kept in a field of fixed size.
//!
//! The revision's text has no fixed length: `git describe` gives 12 hex
//! digits for a clean tree, and `-dirty.` and the diff's hash besides for
//! an edited one (xtask's `kbuild::revision`). As a string literal it
//! would sit among the kernel's other read-only data with its own length,
//! and a longer revision would move every object placed after it (and a
//! length folded into an instruction could change that instruction's
//! size), so a dirty tree's kernel would be laid out unlike the clean
//! one's, and figures that depend on where things lie (cache lines shared
//! between CPUs) would move with the revision's text. Here the text is
//! copied into [`BYTES`] bytes padded with zeros, and its length is found
//! at run time, so the image's layout is the same for every revision.

/// The size of the field: longer than any revision xtask makes
/// (`<12 hex>-dirty.<12 hex>` is 31 bytes; a tag in front leaves room for
/// 17 more). A longer one stops the build.
pub const BYTES: usize = 48;

/// The revision, zero-padded to [`BYTES`].
static REVISION: [u8; BYTES] = padded(env!("TESTBED_REV"));

const fn padded(rev: &str) -> [u8; BYTES] {
    let b = rev.as_bytes();
    if b.len() > BYTES {
        panic!("TESTBED_REV is longer than the kernel's revision field (boot::revision::BYTES)");
    }
    let mut out = [0u8; BYTES];
    let mut i = 0;
    while i < b.len() {
        if b[i] == 0 {
            panic!("TESTBED_REV holds a NUL byte");
        }
        out[i] = b[i];
        i += 1;
    }
    out
}

/// The revision's text: the field up to its first zero byte.
pub fn text() -> &'static str {
    // The compiler could otherwise read the constant field at build time
    // and fold its length into the code, which would again depend on the
    // revision: the reference passes through `black_box`, so the bytes
    // are read at run time.
    let field: &'static [u8; BYTES] = core::hint::black_box(&REVISION);
    let len = field.iter().position(|&b| b == 0).unwrap_or(BYTES);
    core::str::from_utf8(&field[..len]).unwrap_or("(not UTF-8)")
}
