//! The unit tests' allocator: the system's, counting each thread's live
//! heap bytes and their peak, so that a test can hold a reader's memory to
//! a bound ([`peak_during`]). Counted per thread, so tests running beside
//! each other do not disturb the figure.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

struct Counting;

#[global_allocator]
static COUNTING: Counting = Counting;

thread_local! {
    // Constant-initialised cells without destructors: reaching them never
    // allocates, so the allocator may.
    static LIVE: Cell<usize> = const { Cell::new(0) };
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

fn grew(bytes: usize) {
    let _ = LIVE.try_with(|live| {
        let now = live.get().saturating_add(bytes);
        live.set(now);
        let _ = PEAK.try_with(|peak| peak.set(peak.get().max(now)));
    });
}

/// Memory freed on another thread than its own makes this one's count
/// low, never wrap.
fn shrank(bytes: usize) {
    let _ = LIVE.try_with(|live| live.set(live.get().saturating_sub(bytes)));
}

// SAFETY: every call goes to `System` with the caller's arguments, so the
// contract `GlobalAlloc` asks of an allocator is the system allocator's;
// the counting beside it touches only this thread's cells and never
// allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: the caller keeps `alloc`'s contract (a non-zero size).
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: as for `alloc`.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            grew(layout.size());
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: `ptr` came from this allocator, so from `System`, with
        // `layout`, as the caller guarantees.
        unsafe { System.dealloc(ptr, layout) };
        shrank(layout.size());
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: `ptr` came from `System` with `layout`, and `new_size`
        // is valid for it, as the caller guarantees.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            shrank(layout.size());
            grew(new_size);
        }
        p
    }
}

/// Runs `f` and returns what it returned and the most heap memory, in
/// bytes, this thread held during it beyond what it held before.
pub fn peak_during<T>(f: impl FnOnce() -> T) -> (T, usize) {
    let start = LIVE.with(Cell::get);
    PEAK.with(|p| p.set(start));
    let out = f();
    let peak = PEAK.with(Cell::get);
    (out, peak.saturating_sub(start))
}

#[test]
fn a_vector_s_bytes_are_counted() {
    let (v, peak) = peak_during(|| vec![0u8; 1 << 20]);
    assert!(peak >= 1 << 20, "{peak}");
    drop(v);
    let ((), peak) = peak_during(|| {
        let _v = vec![0u64; 1000];
    });
    assert!((8000..9000).contains(&peak), "{peak}");
}
