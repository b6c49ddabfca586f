//! The kernel command line: `key=value` words separated by spaces.
//!
//! xtask writes these words (QEMU `-append`, or the GRUB menu entry), the
//! kernel parses them with [`Options::parse`]. Bad input never stops a boot:
//! an unknown key or a malformed value is reported through the `warn`
//! callback and the default is kept.

use crate::syscall::Mechanism;

/// Every key the kernel understands, for the "valid keys" warning.
pub const KEYS: &[&str] = &[
    KEY_MODE,
    KEY_PROG,
    KEY_TEST,
    KEY_CRASH,
    KEY_CLOCK,
    KEY_ACCEL,
    KEY_ENTRY,
    KEY_BATCHES,
    KEY_BATCH_SIZE,
    KEY_TRACE,
    KEY_SEED,
    KEY_FUZZ_CALLS,
    KEY_FUZZ_THREADS,
    KEY_POOL_ALIGN,
    KEY_PMC,
    KEY_FORK,
    KEY_PMAP,
    KEY_FORK_PAGES,
    KEY_BENCH,
    KEY_TURN,
];
pub const KEY_MODE: &str = "mode";
pub const KEY_PROG: &str = "prog";
pub const KEY_TEST: &str = "test";
pub const KEY_CRASH: &str = "crash";
pub const KEY_CLOCK: &str = "clock";
pub const KEY_ACCEL: &str = "accel";
pub const KEY_ENTRY: &str = "entry";
pub const KEY_BATCHES: &str = "batches";
pub const KEY_BATCH_SIZE: &str = "batch_size";
pub const KEY_TRACE: &str = "trace";
pub const KEY_SEED: &str = "seed";
pub const KEY_FUZZ_CALLS: &str = "fuzz_calls";
pub const KEY_FUZZ_THREADS: &str = "fuzz_threads";
pub const KEY_POOL_ALIGN: &str = "pool_align";
pub const KEY_PMC: &str = "pmc";
pub const KEY_FORK: &str = "fork";
pub const KEY_PMAP: &str = "pmap";
pub const KEY_FORK_PAGES: &str = "fork_pages";
pub const KEY_BENCH: &str = "bench";
pub const KEY_TURN: &str = "turn";

/// A key whose values are words: the enum, `ALL` (every value with its
/// word, in the order the docs list them), `key` (a value's word) and
/// `from_key` (a word's value). Each word is written once, here.
macro_rules! keyed {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$vmeta:meta])* $value:ident = $word:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $($(#[$vmeta])* $value,)+
        }

        impl $name {
            pub const ALL: [($name, &'static str); [$($word),+].len()] =
                [$(($name::$value, $word)),+];

            pub fn key(self) -> &'static str {
                match self {
                    $($name::$value => $word,)+
                }
            }

            pub fn from_key(word: &str) -> Option<$name> {
                Self::ALL.iter().find(|(_, k)| *k == word).map(|(v, _)| *v)
            }
        }
    };
}

keyed! {
    /// How `fork` gives the child its memory.
    pub enum Fork {
        /// Copy every user page at fork (xv6's `copyuvm`).
        Copy = "copy",
        /// Share every page read-only; the first write copies it.
        Cow = "cow",
    }
}

keyed! {
    /// How the kernel reaches the page tables and pages of an address space
    /// that is not the current one.
    pub enum Pmap {
        /// An alternate recursive slot in the current directory: a full TLB
        /// flush (and, on SMP, a shootdown) each time it changes.
        Apte = "apte",
        /// Load the other space's directory into CR3, and back.
        Cr3 = "cr3",
        /// A per-CPU one-PTE window: one `invlpg` when its frame changes.
        Window = "window",
        /// All physical memory mapped in the kernel half: no TLB work.
        Direct = "direct",
    }
}

/// `accel=` values the host writes: QEMU's TCG, QEMU's KVM, Bochs.
pub const ACCEL_TCG: &str = "tcg";
pub const ACCEL_KVM: &str = "kvm";
pub const ACCEL_BOCHS: &str = "bochs";

keyed! {
    /// What the boot is for.
    pub enum Mode {
        /// Run the user program named by `prog` (the benchmark driver by default).
        Run = "run",
        /// Run the in-kernel tests, then the user test programs.
        Test = "test",
        /// Start every CPU and run the SMP benchmarks (kernel-side).
        Smp = "smp",
    }
}

keyed! {
    /// A deliberate kernel fault, to show that each exception is reported.
    pub enum Crash {
        /// Unbounded recursion into the guard page: the double-fault task reports it.
        Overflow = "overflow",
        /// `int3`.
        Breakpoint = "bp",
        /// `ud2`.
        InvalidOpcode = "ud",
        /// `div` by zero.
        DivideError = "de",
        /// A write to an unmapped page.
        PageFault = "pf",
        /// A Rust panic.
        Panic = "panic",
        /// An empty IDT, then `int3`: no handler, no double-fault handler, so
        /// the CPU shuts down (QEMU, under `-no-reboot`, exits with status 0).
        TripleFault = "triple",
    }
}

keyed! {
    /// What the kernel does with the architectural performance counters.
    pub enum Pmc {
        /// Use them where CPUID offers them and a check in ring 0 proves they
        /// count (the default).
        Auto = "auto",
        /// Never use them.
        Off = "off",
        /// Tell ring 3 they work without enabling or checking them, so the
        /// first ring-3 RDPMC faults: the test of the path that turns them off
        /// while a benchmark runs.
        Pretend = "pretend",
    }
}

keyed! {
    /// Which clock the timed regions read; the kernel cannot tell icount from
    /// real cycles, so the host says which one QEMU was given.
    pub enum Clock {
        /// RDTSC: cycles on real hardware and real KVM.
        Tsc = "tsc",
        /// QEMU `-icount shift=0,sleep=off`: one tick per guest instruction.
        Icount = "icount",
    }
}

/// The parsed command line. Strings borrow from the command line itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options<'a> {
    pub mode: Mode,
    /// The user program to run (a Multiboot module's name).
    pub prog: &'a str,
    /// Only run tests whose name contains this.
    pub test: Option<&'a str>,
    pub crash: Option<Crash>,
    pub clock: Clock,
    /// The accelerator as the host reported it (`tcg`, `kvm`, `bochs`); `hw` when nobody said.
    pub accel: &'a str,
    /// Bit `m as u32` set for each mechanism to use.
    pub entry: u32,
    pub batches: u32,
    pub batch_size: u32,
    /// `trace=<mechanism>`: run the user test program in trace mode, which
    /// makes one traced system call through this mechanism.
    pub trace: Option<Mechanism>,
    /// `seed=N`: the fuzzer's PRNG seed (the same seed gives the same calls).
    pub seed: u32,
    /// `fuzz_calls=N`: how many calls the fuzzer makes.
    pub fuzz_calls: u32,
    /// `fuzz_threads=N`: how many calls the fuzzer's threads phase makes
    /// (threads of one process on every CPU racing `sbrk`, `fork`, `pipe`,
    /// `close`, `dup2`, `read` and `write`); 0, the default, skips it.
    pub fuzz_threads: u32,
    /// `pool_align=128|64|packed`: the turnstile and sleepqueue pools'
    /// alignment in bytes (0 = packed); `None` when the command line does not
    /// say (the pools are then 128-aligned, [`DEFAULT_POOL_ALIGN`], and the
    /// lock benchmarks measure every layout).
    pub pool_align: Option<u32>,
    /// `pmc=auto|off|pretend`: the performance counters ([`Pmc`]).
    pub pmc: Pmc,
    /// `fork=copy|cow` ([`Fork`]).
    pub fork: Fork,
    /// `pmap=apte|cr3|window|direct` ([`Pmap`]).
    pub pmap: Pmap,
    /// `fork_pages=N`: the forktest parent's touched pages.
    pub fork_pages: u32,
    /// `bench=GROUP[,GROUP]`: the `lmbench` program's row groups
    /// (`crate::lmbench::GROUPS`, one bit each; all by default).
    pub lmbench: u32,
    /// `turn=N`: with several CPUs under QEMU's icount, the interleaving
    /// grain: each CPU in turn runs about N instructions of virtual time
    /// while the others wait (the kernel's turn pacer, `arch::pacer`); 0,
    /// the default, leaves the interleaving to the machine.
    pub turn: u32,
}

/// The longest command line the kernel reads, in bytes without its NUL (the
/// loader's string, the image's path included where the loader puts it
/// first). Longer ones are a malformed boot; xtask refuses them first.
pub const MAX_LEN: usize = 4095;

pub const DEFAULT_PROG: &str = "bench";
pub const DEFAULT_BATCHES: u32 = 64;
pub const DEFAULT_BATCH_SIZE: u32 = 4096;
/// Upper bound on `batches`: the kernel keeps every per-batch sample.
pub const MAX_BATCHES: u32 = 1024;
/// Upper bound on `batch_size`: a boot's benchmark program makes about
/// 20 figures × `batches` × `batch_size` calls, so an unbounded size would
/// never finish (2^20 × 64 batches is already minutes under TCG).
pub const MAX_BATCH_SIZE: u32 = 1 << 20;
pub const DEFAULT_SEED: u32 = 1;
/// The pools' alignment when `pool_align=` is not given.
pub const DEFAULT_POOL_ALIGN: u32 = 128;
/// The fuzzer's default: what CI runs (a benchmark run asks for 10^6).
pub const DEFAULT_FUZZ_CALLS: u32 = 50_000;
/// The forktest parent's touched pages (lmbench's `lat_proc fork` runs in a
/// small process; 64 pages is 256 KiB).
pub const DEFAULT_FORK_PAGES: u32 = 64;
/// Upper bound on `fork_pages` (16 MiB: the parent and a child fit in the
/// memory of the default boot).
pub const MAX_FORK_PAGES: u32 = 4096;
/// Bounds on `turn` (instructions): below the lower one the pacer's own
/// interrupt (some hundred instructions a turn on each CPU) would be a
/// large part of every turn; the upper one is a tenth of the 1 kHz tick.
pub const MIN_TURN: u32 = 1_000;
pub const MAX_TURN: u32 = 100_000;
/// The grain xtask asks for on several CPUs under icount (`--turn`).
pub const DEFAULT_TURN: u32 = 10_000;

impl Default for Options<'_> {
    fn default() -> Self {
        Options {
            mode: Mode::Run,
            prog: DEFAULT_PROG,
            test: None,
            crash: None,
            clock: Clock::Tsc,
            accel: "hw",
            entry: u32::MAX,
            batches: DEFAULT_BATCHES,
            batch_size: DEFAULT_BATCH_SIZE,
            trace: None,
            seed: DEFAULT_SEED,
            fuzz_calls: DEFAULT_FUZZ_CALLS,
            fuzz_threads: 0,
            pool_align: None,
            pmc: Pmc::Auto,
            fork: Fork::Copy,
            pmap: Pmap::Window,
            fork_pages: DEFAULT_FORK_PAGES,
            lmbench: crate::lmbench::ALL,
            turn: 0,
        }
    }
}

/// A problem with one word of the command line. The boot goes on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Warning<'a> {
    /// A key not in [`KEYS`].
    UnknownKey(&'a str),
    /// A known key with a value it cannot take; `expected` says what it takes.
    BadValue {
        key: &'a str,
        value: &'a str,
        expected: &'static str,
    },
}

impl<'a> Options<'a> {
    /// Parses `cmdline`. Words without `=` are treated as keys with an empty value.
    pub fn parse(cmdline: &'a str, warn: &mut dyn FnMut(Warning<'a>)) -> Options<'a> {
        let mut o = Options::default();
        for word in cmdline.split_ascii_whitespace() {
            let (key, value) = word.split_once('=').unwrap_or((word, ""));
            let mut bad = |expected| {
                warn(Warning::BadValue {
                    key,
                    value,
                    expected,
                })
            };
            match key {
                KEY_MODE => match Mode::from_key(value) {
                    Some(m) => o.mode = m,
                    None => bad("run, test or smp"),
                },
                KEY_PROG if is_name(value) => o.prog = value,
                KEY_PROG => bad("a program name (letters, digits, _ and -)"),
                KEY_TEST if !value.is_empty() => o.test = Some(value),
                KEY_TEST => bad("a test name or part of one"),
                KEY_CRASH => match Crash::from_key(value) {
                    Some(c) => o.crash = Some(c),
                    None => bad("overflow, bp, ud, de, pf, panic or triple"),
                },
                KEY_CLOCK => match Clock::from_key(value) {
                    Some(c) => o.clock = c,
                    None => bad("tsc or icount"),
                },
                KEY_ACCEL if is_name(value) => o.accel = value,
                KEY_ACCEL => bad("tcg, kvm, bochs or hw"),
                KEY_ENTRY => match parse_mechanisms(value) {
                    Some(bits) => o.entry = bits,
                    None => bad("a comma list of int80, sysenter, callgate, syscall"),
                },
                KEY_BATCHES => match value.parse::<u32>() {
                    Ok(n) if (1..=MAX_BATCHES).contains(&n) => o.batches = n,
                    _ => bad("a whole number from 1 to 1024"),
                },
                KEY_BATCH_SIZE => match value.parse::<u32>() {
                    Ok(n) if (1..=MAX_BATCH_SIZE).contains(&n) => o.batch_size = n,
                    _ => bad("a whole number from 1 to 1048576 (2^20)"),
                },
                KEY_TRACE => match Mechanism::from_key(value) {
                    Some(m) => o.trace = Some(m),
                    None => bad("int80, sysenter, callgate or syscall"),
                },
                KEY_SEED => match parse_u32(value) {
                    Some(n) => o.seed = n,
                    None => bad("a whole number below 2^32 (decimal or 0x hex)"),
                },
                KEY_FUZZ_CALLS => match parse_u32(value) {
                    Some(n) => o.fuzz_calls = n,
                    None => bad("a whole number below 2^32 (decimal or 0x hex)"),
                },
                KEY_FUZZ_THREADS => match parse_u32(value) {
                    Some(n) => o.fuzz_threads = n,
                    None => bad("a whole number below 2^32 (decimal or 0x hex)"),
                },
                KEY_POOL_ALIGN => match value {
                    "128" => o.pool_align = Some(128),
                    "64" => o.pool_align = Some(64),
                    "packed" => o.pool_align = Some(0),
                    _ => bad("128, 64 or packed"),
                },
                KEY_PMC => match Pmc::from_key(value) {
                    Some(p) => o.pmc = p,
                    None => bad("auto, off or pretend"),
                },
                KEY_FORK => match Fork::from_key(value) {
                    Some(f) => o.fork = f,
                    None => bad("copy or cow"),
                },
                KEY_PMAP => match Pmap::from_key(value) {
                    Some(p) => o.pmap = p,
                    None => bad("apte, cr3, window or direct"),
                },
                KEY_FORK_PAGES => match value.parse::<u32>() {
                    Ok(n) if (1..=MAX_FORK_PAGES).contains(&n) => o.fork_pages = n,
                    _ => bad("a whole number from 1 to 4096"),
                },
                KEY_BENCH => match crate::lmbench::parse_groups(value) {
                    Some(bits) => o.lmbench = bits,
                    None => bad(
                        "all, or a comma list of syscall, sig, proc, ctx, pipe, pagefault, bw_pipe, smack",
                    ),
                },
                KEY_TURN => match value.parse::<u32>() {
                    Ok(n) if n == 0 || (MIN_TURN..=MAX_TURN).contains(&n) => o.turn = n,
                    _ => bad("0 (off) or a whole number from 1000 to 100000"),
                },
                _ => warn(Warning::UnknownKey(key)),
            }
        }
        o
    }

    pub fn uses(&self, m: Mechanism) -> bool {
        self.entry & (1 << m as u32) != 0
    }
}

fn is_name(s: &str) -> bool {
    !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Decimal, or hexadecimal after `0x`.
fn parse_u32(s: &str) -> Option<u32> {
    match s.strip_prefix("0x") {
        Some(hex) => u32::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

fn parse_mechanisms(s: &str) -> Option<u32> {
    let mut bits = 0;
    for part in s.split(',') {
        bits |= 1 << Mechanism::from_key(part)? as u32;
    }
    Some(bits)
}

#[cfg(test)]
mod tests {
    extern crate std;
    use super::*;
    use std::vec::Vec;

    fn parse(s: &str) -> (Options<'_>, Vec<Warning<'_>>) {
        let mut w = Vec::new();
        let o = Options::parse(s, &mut |x| w.push(x));
        (o, w)
    }

    #[test]
    fn empty_gives_defaults() {
        let (o, w) = parse("");
        assert_eq!(o, Options::default());
        assert!(w.is_empty());
    }

    #[test]
    fn every_key() {
        let (o, w) = parse(
            "mode=test prog=utest test=sysenter crash=overflow clock=icount accel=tcg \
             entry=int80,callgate batches=8 batch_size=16",
        );
        assert!(w.is_empty(), "{w:?}");
        assert_eq!(o.mode, Mode::Test);
        assert_eq!(o.prog, "utest");
        assert_eq!(o.test, Some("sysenter"));
        assert_eq!(o.crash, Some(Crash::Overflow));
        assert_eq!(o.clock, Clock::Icount);
        assert_eq!(o.accel, "tcg");
        assert!(o.uses(Mechanism::Int80) && o.uses(Mechanism::CallGate));
        assert!(!o.uses(Mechanism::Sysenter) && !o.uses(Mechanism::Syscall));
        assert_eq!((o.batches, o.batch_size), (8, 16));
        let (o, w) = parse("pool_align=packed");
        assert!(w.is_empty());
        assert_eq!(o.pool_align, Some(0));
        let (o, w) = parse("pool_align=32");
        assert_eq!((o.pool_align, w.len()), (None, 1));
        let (o, w) = parse("pmc=on");
        assert_eq!((o.pmc, w.len()), (Pmc::Auto, 1));
    }

    /// Every word of a keyed value, given as `key=word`, parses to its
    /// value without a warning, and the value's word is that word.
    fn every_word<T: Copy + PartialEq + core::fmt::Debug>(
        key: &str,
        all: &[(T, &'static str)],
        word_of: fn(T) -> &'static str,
        got: fn(&Options) -> T,
    ) {
        for &(v, k) in all {
            let word = std::format!("{key}={k}");
            let (o, w) = parse(&word);
            assert!(w.is_empty(), "{key}={k}: {w:?}");
            assert_eq!((got(&o), word_of(v)), (v, k), "{key}={k}");
        }
    }

    #[test]
    fn keyed_words() {
        every_word(KEY_MODE, &Mode::ALL, Mode::key, |o| o.mode);
        every_word(KEY_CRASH, &Crash::ALL, Crash::key, |o| o.crash.unwrap());
        every_word(KEY_CLOCK, &Clock::ALL, Clock::key, |o| o.clock);
        every_word(KEY_PMC, &Pmc::ALL, Pmc::key, |o| o.pmc);
        every_word(KEY_FORK, &Fork::ALL, Fork::key, |o| o.fork);
        every_word(KEY_PMAP, &Pmap::ALL, Pmap::key, |o| o.pmap);
        assert_eq!(Clock::from_key("sundial"), None);
    }

    #[test]
    fn process_keys() {
        let (o, w) = parse("bench=ctx,smack");
        assert!(w.is_empty());
        assert_eq!(
            o.lmbench,
            crate::lmbench::group::CTX | crate::lmbench::group::SMACK
        );
        let (o, w) = parse("bench=ctx,lat_nope");
        assert_eq!(o.lmbench, crate::lmbench::ALL);
        assert_eq!(w.len(), 1);
        let (o, w) = parse("fork=cow fork_pages=512");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!((o.fork, o.fork_pages), (Fork::Cow, 512));
        let (o, w) = parse("fork=lazy pmap=tlb fork_pages=0 fork_pages=4097");
        assert_eq!(w.len(), 4, "{w:?}");
        assert_eq!(
            (o.fork, o.pmap, o.fork_pages),
            (Fork::Copy, Pmap::Window, DEFAULT_FORK_PAGES)
        );
    }

    #[test]
    fn fuzzer_keys() {
        let (o, w) = parse("seed=42 fuzz_calls=1000000 fuzz_threads=7");
        assert_eq!(o.fuzz_threads, 7);
        assert!(w.is_empty(), "{w:?}");
        assert_eq!((o.seed, o.fuzz_calls), (42, 1_000_000));
        let (o, w) = parse("seed=0xdeadbeef fuzz_calls=0");
        assert!(w.is_empty(), "{w:?}");
        assert_eq!((o.seed, o.fuzz_calls), (0xdead_beef, 0));
        let (o, w) = parse("seed=-1 fuzz_calls=4294967296");
        assert_eq!(w.len(), 2, "{w:?}");
        assert_eq!((o.seed, o.fuzz_calls), (DEFAULT_SEED, DEFAULT_FUZZ_CALLS));
    }

    #[test]
    fn unknown_key_warns_and_goes_on() {
        let (o, w) = parse("colour=blue batches=2");
        assert_eq!(w, [Warning::UnknownKey("colour")]);
        assert_eq!(o.batches, 2);
    }

    #[test]
    fn bad_values_keep_defaults() {
        let (o, w) = parse("batches=0 batch_size=x clock=sundial entry=int80,nope mode= prog=a/b");
        assert_eq!(w.len(), 6, "{w:?}");
        assert!(matches!(
            w[0],
            Warning::BadValue {
                key: "batches",
                value: "0",
                ..
            }
        ));
        assert_eq!(o, Options::default());
        let (_, w) = parse("batches=1025");
        assert_eq!(w.len(), 1);
        // batch_size is bounded too (issue 17: 2^32 - 1 hung the guest).
        let (o, w) = parse("batch_size=4294967295");
        assert_eq!((w.len(), o.batch_size), (1, DEFAULT_BATCH_SIZE));
        let (o, w) = parse("batch_size=1048577");
        assert_eq!((w.len(), o.batch_size), (1, DEFAULT_BATCH_SIZE));
        let (o, w) = parse("batch_size=1048576");
        assert_eq!((w.len(), o.batch_size), (0, MAX_BATCH_SIZE));
    }

    #[test]
    fn word_without_equals_is_a_key() {
        let (_, w) = parse("quiet");
        assert_eq!(w, [Warning::UnknownKey("quiet")]);
        let (_, w) = parse("mode");
        assert!(matches!(
            w[0],
            Warning::BadValue {
                key: "mode",
                value: "",
                ..
            }
        ));
    }

    #[test]
    fn grub_style_extra_spaces() {
        let (o, w) = parse("  mode=test   prog=x  ");
        assert!(w.is_empty());
        assert_eq!((o.mode, o.prog), (Mode::Test, "x"));
    }
}
