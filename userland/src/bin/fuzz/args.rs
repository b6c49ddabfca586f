// The arguments of a call: the seeded PRNG, the memory ranges a pointer
// argument may name (this program's scratch buffer and read-only data,
// kernel memory, unmapped pages, wrapping and straddling ranges) and the
// edge-case words. Included into main.rs (see there why).

/// xorshift32 (Marsaglia 2003): period 2^32 - 1, never 0.
struct Rng(u32);

impl Rng {
    fn new(seed: u32) -> Rng {
        // Spread the seed's bits (small seeds give poor first outputs
        // otherwise); murmur3's finaliser, then make sure it is not 0.
        let mut x = seed ^ 0x9e37_79b9;
        x ^= x >> 16;
        x = x.wrapping_mul(0x85eb_ca6b);
        x ^= x >> 13;
        x = x.wrapping_mul(0xc2b2_ae35);
        x ^= x >> 16;
        Rng(if x == 0 { 0x6d2b_79f5 } else { x })
    }
    fn next(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        self.0 = x;
        x
    }
    /// Uniform in `0..n` (n > 0), by multiply-shift.
    fn below(&mut self, n: u32) -> u32 {
        ((self.next() as u64 * n as u64) >> 32) as u32
    }
    fn pick<T: Copy>(&mut self, from: &[T]) -> T {
        from[self.below(from.len() as u32) as usize]
    }
}

/// Writable memory the calls may use; only its first half is ever the start
/// of a valid range, so any valid range (at most [`MAX_SMALL`] bytes, or a
/// cpuinfo) ends inside it.
const SCRATCH_SIZE: usize = 8192;
const MAX_SMALL: u32 = 4096;
#[repr(C, align(4096))]
struct Scratch([u8; SCRATCH_SIZE]);
static mut SCRATCH: Scratch = Scratch([0; SCRATCH_SIZE]);
/// Read-only memory the calls may read.
static READ_ONLY: [u8; 256] = {
    let mut b = [0u8; 256];
    let mut i = 0;
    while i < 256 {
        b[i] = (i as u8).wrapping_mul(37).wrapping_add(11);
        i += 1;
    }
    b
};
/// Everything this program maps lies below this (checked at start), so a
/// range starting between here and the stack's guard page is unmapped.
const IMAGE_LIMIT: u32 = USER_BASE + (16 << 20);
const STACK_BOTTOM: u32 = USER_STACK_TOP - USER_STACK_SIZE;

fn scratch() -> u32 {
    (&raw mut SCRATCH) as u32
}

/// What a (pointer, length) pair is, as the kernel's checks must see it.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Range {
    /// Inside the scratch buffer: readable and writable.
    Writable,
    /// Inside the read-only data: readable only.
    ReadOnly,
    /// Touches memory the user may not use (some byte unmapped, in the
    /// kernel, above user space, or the range wraps): EFAULT.
    Bad,
    /// Length 0: never checked, never touched.
    Empty,
}

impl Range {
    fn readable(self) -> bool {
        self != Range::Bad
    }
    fn writable(self) -> bool {
        matches!(self, Range::Writable | Range::Empty)
    }
}

/// A length for a range that is bad anyway: small, a page or more, or huge.
fn any_len(r: &mut Rng) -> u32 {
    match r.below(6) {
        0 => 1 + r.below(16),
        1 => 1 + r.below(MAX_SMALL),
        2 => PAGE_SIZE + r.below(1 << 20),
        3 => u32::MAX - r.below(16),
        4 => 0x8000_0000 + r.below(0x1000),
        _ => r.next() | 1,
    }
}

/// A (pointer, length) pair and its kind; `fixed` forces the length (cpuinfo
/// copies one `CpuInfo` whatever its length argument says).
fn range(r: &mut Rng, fixed: Option<u32>) -> (u32, u32, Range) {
    let small = |r: &mut Rng| match r.below(4) {
        0 => r.below(MAX_SMALL + 1),
        _ => r.below(65),
    };
    let len_of = |r: &mut Rng, dflt: &dyn Fn(&mut Rng) -> u32| fixed.unwrap_or_else(|| dflt(r));
    let (ptr, len, kind) = match r.below(16) {
        0..=4 => {
            let len = len_of(r, &small);
            (scratch() + r.below(MAX_SMALL), len, Range::Writable)
        }
        5 | 6 => {
            let off = r.below(128);
            let len = len_of(r, &|r: &mut Rng| r.below(129));
            let len = len.min(256 - off);
            (READ_ONLY.as_ptr() as u32 + off, len, Range::ReadOnly)
        }
        7 => {
            let p = r.pick(&[0, 4, 0xfff, 0x1000, 0x10_0000, KERNEL_MAP_END - 4]);
            let p = if r.below(2) == 0 {
                p
            } else {
                r.below(USER_BASE)
            };
            (p, len_of(r, &any_len), Range::Bad)
        }
        8 => {
            let p = IMAGE_LIMIT + r.below(STACK_BOTTOM - PAGE_SIZE - IMAGE_LIMIT);
            (p, len_of(r, &any_len), Range::Bad)
        }
        9 => {
            let p = USER_TOP + r.below(u32::MAX - USER_TOP);
            (p, len_of(r, &any_len), Range::Bad)
        }
        10 => {
            // The end wraps past 4 GiB.
            let len = len_of(r, &|r: &mut Rng| 0x100 + r.below(0x1000));
            let p = 0u32.wrapping_sub(1 + r.below(len.max(2) - 1));
            (p, len, Range::Bad)
        }
        11 | 12 => {
            // Straddles a mapped/unmapped boundary: the stack's top (above
            // it nothing is mapped), or its bottom (below it the guard page).
            let edge = if r.below(2) == 0 {
                USER_STACK_TOP
            } else {
                STACK_BOTTOM
            };
            let len = len_of(r, &|r: &mut Rng| 2 + r.below(64)).max(2);
            let before = 1 + r.below(len - 1);
            (edge - before, len, Range::Bad)
        }
        13 => {
            // From the scratch buffer, too long: runs into unmapped pages
            // past the program or beyond user space, or overflows.
            let len = fixed.unwrap_or_else(|| match r.below(3) {
                0 => u32::MAX,
                1 => (16 << 20) + r.below(0x1000_0000),
                _ => 0x8000_0000 + r.below(0x4000_0000),
            });
            let kind = if fixed.is_some() {
                Range::Writable
            } else {
                Range::Bad
            };
            (scratch() + r.below(MAX_SMALL), len, kind)
        }
        14 => {
            // Zero length: any pointer at all.
            let p = r.next();
            return match fixed {
                Some(l) => (p & 0x3fff_ffff, l, Range::Bad),
                None => (p, 0, Range::Empty),
            };
        }
        _ => {
            // A random word, kept away from what this program maps.
            let mut p = r.next();
            if (USER_BASE..IMAGE_LIMIT).contains(&p) || (STACK_BOTTOM..USER_STACK_TOP).contains(&p)
            {
                p &= 0x3fff_ffff;
            }
            (p, len_of(r, &any_len), Range::Bad)
        }
    };
    if len == 0 {
        (ptr, 0, Range::Empty)
    } else {
        (ptr, len, kind)
    }
}

/// Argument values for registers a call does not read, or reads as numbers.
fn word(r: &mut Rng) -> u32 {
    match r.below(4) {
        0 => r.pick(&[
            0,
            1,
            2,
            3,
            4,
            u32::MAX,
            0x7fff_ffff,
            0x8000_0000,
            USER_BASE,
            USER_TOP,
            USER_STACK_TOP,
            0x0010_0000,
        ]),
        1 => r.below(256),
        _ => r.next(),
    }
}

/// A file descriptor: the five that exist, or not.
fn any_fd(r: &mut Rng) -> u32 {
    match r.below(8) {
        0..=5 => r.below(6),
        6 => r.pick(&[99, 0x8000_0000, u32::MAX]),
        _ => r.next(),
    }
}
