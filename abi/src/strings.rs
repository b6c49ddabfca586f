//! The string-instruction counts (`prog=strings`): one REP-prefixed string
//! instruction per call, with ECX set to each of [`COUNTS`] just before it,
//! and the same call without the instruction ([`NONE`]). A call's figure
//! less the bare call's is what the clock counts for one REP string
//! instruction, so each clock's counting rule can be read off and checked
//! (docs/machines.md). Benchmarks `string.<op>.<ecx>` and `string.none`.

/// The instructions timed, each behind a REP prefix: the `<op>` of a name.
/// `movsb` is the kernel's user copy (`kernel/src/syscall/usercopy.rs`);
/// `movsl` moves 4 bytes per iteration, so it tells iterations from bytes.
pub const OPS: [&str; 2] = ["movsb", "movsl"];
/// The ECX values: none, one and two iterations, and a 64-iteration copy
/// (the macro mix's 64-byte request is one such `rep movsb`).
pub const COUNTS: [u32; 4] = [0, 1, 2, 64];
/// The bare call (`string.none`): the same set-up, no string instruction.
pub const NONE: &str = "none";
/// Bytes in each of the two buffers: the largest count of 4-byte moves.
pub const BUFFER: usize = 64 * 4;
