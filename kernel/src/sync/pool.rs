//! Fixed pools of sync objects, laid out at a stride chosen at boot.
//!
//! FreeBSD keeps its turnstiles and sleepqueues aligned to 128 bytes on
//! i386: NetBurst's adjacent-line prefetch pairs two 64-byte lines, so two
//! objects closer than 128 bytes can falsely share. `pool_align=128|64|packed`
//! lets one binary compare the layouts: the arena is 128-aligned and the
//! objects sit at `stride` = the object size rounded up to the alignment.

use core::marker::PhantomData;
use core::mem::{align_of, size_of};

use abi::syscall::MAX_THREADS;

use spin::Once;

// A CPU's block (`arch::smp::PerCpu`) fills one slot, as a pool object does.
const _: () = assert!(core::mem::size_of::<crate::arch::smp::PerCpu>() == SLOT);

/// The layout `pool_align=` chose at boot: what every task's end restores
/// (a task may change it with the `pool_align` system call).
static BOOT_ALIGN: Once<Align> = Once::new();

/// Records the boot's layout (once, in `kmain`).
pub fn set_boot_align(a: Align) {
    assert!(
        !BOOT_ALIGN.is_completed(),
        "the boot's pool layout set twice"
    );
    BOOT_ALIGN.call_once(|| a);
}

/// The boot's layout (128 before `kmain` has chosen).
pub fn boot_align() -> Align {
    BOOT_ALIGN.get().copied().unwrap_or(Align::A128)
}

/// Pool alignment: 128, 64, or packed (the type's own alignment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Align {
    A128,
    A64,
    Packed,
}

impl Align {
    pub fn from_bytes(b: u32) -> Option<Align> {
        match b {
            128 => Some(Align::A128),
            64 => Some(Align::A64),
            0 => Some(Align::Packed),
            _ => None,
        }
    }
    pub fn key(self) -> &'static str {
        match self {
            Align::A128 => "128",
            Align::A64 => "64",
            Align::Packed => "packed",
        }
    }
    fn bytes<T>(self) -> usize {
        match self {
            Align::A128 => 128,
            Align::A64 => 64,
            Align::Packed => align_of::<T>(),
        }
    }
}

/// Room for `MAX_THREADS` objects at the widest stride.
pub const SLOT: usize = 128;

#[repr(C, align(128))]
pub struct Arena(pub [u8; SLOT * MAX_THREADS]);

// At the 128-byte stride each object starts its own 128-byte block.
const _: () = assert!(align_of::<Arena>() == SLOT && SLOT == 128);

/// A pool of `MAX_THREADS` `T`s in an arena, with a free map.
pub struct Pool<T> {
    arena: *mut Arena,
    stride: usize,
    used: [bool; MAX_THREADS],
    _t: PhantomData<T>,
}

impl<T> Pool<T> {
    /// No two objects share a 128-byte block at the widest stride, and the
    /// widest stride fits the arena.
    const FITS: () = assert!(size_of::<T>() <= SLOT && align_of::<T>() <= SLOT);

    pub const fn new(arena: *mut Arena) -> Pool<T> {
        #[allow(clippy::let_unit_value)]
        let () = Self::FITS;
        Pool {
            arena,
            stride: SLOT,
            used: [false; MAX_THREADS],
            _t: PhantomData,
        }
    }

    /// Lays the pool out again; only while no object is in use.
    pub fn set_align(&mut self, a: Align) -> bool {
        if self.used.iter().any(|u| *u) {
            return false;
        }
        let al = a.bytes::<T>();
        self.stride = size_of::<T>().div_ceil(al) * al;
        true
    }

    pub fn stride(&self) -> usize {
        self.stride
    }

    pub fn addr(&self, i: usize) -> usize {
        self.arena as usize + i * self.stride
    }

    /// The object at index `i` (in use or not).
    #[allow(clippy::mut_from_ref)]
    pub fn get(&self, i: usize) -> &mut T {
        // SAFETY: i < MAX_THREADS and the stride keeps every object inside
        // the arena and aligned for T; one context at a time uses the pool.
        unsafe { &mut *(self.addr(i) as *mut T) }
    }

    pub fn alloc(&mut self, init: T) -> Option<usize> {
        let i = self.used.iter().position(|u| !u)?;
        self.used[i] = true;
        // SAFETY: as in get; the slot was free, so nothing refers to it.
        unsafe { (self.addr(i) as *mut T).write(init) };
        Some(i)
    }

    pub fn free(&mut self, i: usize) {
        self.used[i] = false;
    }

    pub fn reset(&mut self) {
        self.used = [false; MAX_THREADS];
    }

    /// The most objects that touch one block of `block` bytes.
    pub fn max_per_block(&self, block: usize) -> usize {
        let size = size_of::<T>();
        let base = self.arena as usize;
        let mut worst = 0;
        let end = base + MAX_THREADS * self.stride;
        let mut b = base;
        while b < end {
            let n = (0..MAX_THREADS)
                .filter(|&i| {
                    let s = base + i * self.stride;
                    s < b + block && s + size > b
                })
                .count();
            worst = worst.max(n);
            b += block;
        }
        worst
    }
}
