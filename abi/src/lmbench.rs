//! lmbench's process-level rows, as the `lmbench` program measures them
//! (`prog=lmbench`): the groups the `bench=` key selects, the rows' names
//! and the order lmbench's summary prints them in. The program, the host's
//! table and the tests read them from here.
//!
//! Every row is a `bench` record with its `samples` (clock ticks per
//! batch; per-operation figures). Where lmbench subtracts an overhead
//! measured in the same run (`lat_ctx`: the pipe hand-off and the working
//! set's summing in one process), the program times that overhead as the
//! figure's calibration runs, so the ticks and the model's figures
//! subtract the same thing.

/// The program's name (its Multiboot module).
pub const PROG: &str = "lmbench";

/// `bench=` groups: one bit each.
pub mod group {
    /// `lat_syscall.null`, `lat_syscall.write`.
    pub const SYSCALL: u32 = 1 << 0;
    /// `lat_sig.install`, `lat_sig.catch`.
    pub const SIG: u32 = 1 << 1;
    /// `lat_proc.fork`.
    pub const PROC: u32 = 1 << 2;
    /// `lat_ctx.<N>p.<K>k`.
    pub const CTX: u32 = 1 << 3;
    /// `lat_pipe`.
    pub const PIPE: u32 = 1 << 4;
    /// `lat_pagefault.zero`, `lat_pagefault.cow`.
    pub const PAGEFAULT: u32 = 1 << 5;
    /// `bw_pipe`.
    pub const BW_PIPE: u32 = 1 << 6;
    /// `smack.<mechanism>`.
    pub const SMACK: u32 = 1 << 7;
}

/// Every group with its `bench=` word, in lmbench's order.
pub const GROUPS: [(u32, &str); 8] = [
    (group::SYSCALL, "syscall"),
    (group::SIG, "sig"),
    (group::PROC, "proc"),
    (group::CTX, "ctx"),
    (group::PIPE, "pipe"),
    (group::PAGEFAULT, "pagefault"),
    (group::BW_PIPE, "bw_pipe"),
    (group::SMACK, "smack"),
];

/// Every group: what the program runs when `bench=` is not given.
pub const ALL: u32 = (1 << GROUPS.len()) - 1;

/// `bench=` takes a comma list of [`GROUPS`]' words, or `all`.
pub fn parse_groups(s: &str) -> Option<u32> {
    if s == "all" {
        return Some(ALL);
    }
    let mut bits = 0;
    for w in s.split(',') {
        bits |= GROUPS.iter().find(|(_, k)| *k == w)?.0;
    }
    Some(bits)
}

pub const LAT_SYSCALL_NULL: &str = "lat_syscall.null";
pub const LAT_SYSCALL_WRITE: &str = "lat_syscall.write";
pub const LAT_SIG_INSTALL: &str = "lat_sig.install";
pub const LAT_SIG_CATCH: &str = "lat_sig.catch";
pub const LAT_PROC_FORK: &str = "lat_proc.fork";
/// `lat_ctx.<N>p.<K>k`: one hand-off (a context switch) in a ring of `N`
/// processes each summing `K` KiB, the one-process overhead subtracted.
pub const LAT_CTX: &str = "lat_ctx";
pub const LAT_PIPE: &str = "lat_pipe";
pub const LAT_PAGEFAULT_ZERO: &str = "lat_pagefault.zero";
pub const LAT_PAGEFAULT_COW: &str = "lat_pagefault.cow";
/// Clock ticks per byte moved through a pipe in [`BW_PIPE_CHUNK`] writes
/// (the host turns it into MB/s, or bytes per tick).
pub const BW_PIPE: &str = "bw_pipe";
/// `smack.<mechanism>`: one select-style query through a pipe to a server
/// process and its answer back, every call through that mechanism.
pub const SMACK: &str = "smack";

/// `lat_ctx`'s ring sizes and working sets (KiB), lmbench's summary's.
pub const CTX_PROCS: [u32; 3] = [2, 4, 8];
pub const CTX_KIB: [u32; 3] = [0, 16, 64];
/// The largest working set, in bytes.
pub const CTX_MAX_BYTES: usize = 64 * 1024;
/// `bw_pipe`'s write size: lmbench's 64 KiB.
pub const BW_PIPE_CHUNK: usize = 64 * 1024;
/// Rows in the server's index.
pub const SMACK_ROWS: u32 = 4096;

/// The rows in lmbench's summary order: a name, or a prefix ending in `.`
/// for a family (`lat_ctx.`, `smack.`), with the group it belongs to.
pub const ORDER: [(&str, u32); 11] = [
    (LAT_SYSCALL_NULL, group::SYSCALL),
    (LAT_SYSCALL_WRITE, group::SYSCALL),
    (LAT_SIG_INSTALL, group::SIG),
    (LAT_SIG_CATCH, group::SIG),
    (LAT_PROC_FORK, group::PROC),
    ("lat_ctx.", group::CTX),
    (LAT_PIPE, group::PIPE),
    (LAT_PAGEFAULT_ZERO, group::PAGEFAULT),
    (LAT_PAGEFAULT_COW, group::PAGEFAULT),
    (BW_PIPE, group::BW_PIPE),
    ("smack.", group::SMACK),
];

/// Where a row's name sorts in [`ORDER`] (`None`: not an lmbench row).
pub fn rank(name: &str) -> Option<usize> {
    ORDER.iter().position(|(k, _)| {
        if k.ends_with('.') {
            name.starts_with(k)
        } else {
            name == *k
        }
    })
}

/// Whether the row `name` measures bytes (ticks per byte), not operations.
pub fn per_byte(name: &str) -> bool {
    name == BW_PIPE
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn groups_parse_as_comma_lists() {
        assert_eq!(parse_groups("all"), Some(ALL));
        assert_eq!(parse_groups("ctx"), Some(group::CTX));
        assert_eq!(
            parse_groups("syscall,smack"),
            Some(group::SYSCALL | group::SMACK)
        );
        assert_eq!(parse_groups("ctx,nope"), None);
        assert_eq!(parse_groups(""), None);
        assert_eq!(ALL, 0xff);
    }

    #[test]
    fn rows_sort_in_lmbench_order() {
        assert_eq!(rank(LAT_SYSCALL_NULL), Some(0));
        assert_eq!(rank("lat_ctx.8p.64k"), Some(5));
        assert_eq!(rank("smack.sysenter"), Some(10));
        assert!(rank(LAT_PIPE) < rank(BW_PIPE));
        assert_eq!(rank("int80.null"), None);
        // Every group has a row.
        for (bit, _) in GROUPS {
            assert!(ORDER.iter().any(|(_, g)| *g == bit));
        }
    }
}
