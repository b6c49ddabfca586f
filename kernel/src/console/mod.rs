//! The console: COM1 (the report channel) mirrored to the VGA text screen.
//!
//! `kprintln!` writes human text; `record!` writes one machine record
//! (`@@tb1 kind key=value ...`, see `abi::report`).

pub mod serial;
pub mod vga;

use core::fmt::{self, Write};
use core::sync::atomic::{AtomicU32, Ordering};

struct Console;

/// A string of at most `N` bytes built at run time (the kernel has no
/// allocator): names, titles and messages made of parts. What does not
/// fit is cut, at a character boundary, so `as_str` stays whole.
pub struct Line<const N: usize> {
    buf: [u8; N],
    len: usize,
}

impl<const N: usize> Line<N> {
    pub const fn new() -> Self {
        Line {
            buf: [0; N],
            len: 0,
        }
    }

    pub fn push(&mut self, s: &str) {
        let _ = self.write_str(s);
    }

    pub fn as_str(&self) -> &str {
        core::str::from_utf8(&self.buf[..self.len]).unwrap_or("?")
    }
}

impl<const N: usize> Default for Line<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> From<&str> for Line<N> {
    fn from(s: &str) -> Self {
        let mut l = Self::new();
        l.push(s);
        l
    }
}

impl<const N: usize> Write for Line<N> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut n = s.len().min(N - self.len);
        while !s.is_char_boundary(n) {
            n -= 1;
        }
        self.buf[self.len..self.len + n].copy_from_slice(&s.as_bytes()[..n]);
        self.len += n;
        Ok(())
    }
}

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        serial::write_str(s);
        vga::write_str(s);
        Ok(())
    }
}

pub fn init() {
    serial::init();
    vga::init();
}

/// The console lock: this CPU's index + 1 while it prints, so that lines
/// from different CPUs do not mix. A CPU that holds it already (a panic
/// while printing) prints on without waiting for itself. The kernel prints
/// with interrupts off, so no interrupt on this CPU meets it held.
///
/// Hand-written, not a `spin::Mutex`: a record holds it across its several
/// writes, each of which takes it again on the same CPU, and a panic takes
/// it from whoever holds it; `spin`'s mutex does neither. Behind it the
/// serial port sits behind a `spin::Mutex`; the VGA cursor stays a
/// `BootCell` (`vga` says why).
static LOCK: AtomicU32 = AtomicU32::new(0);

/// The console lock, held while it lives.
pub struct Held(bool);

impl Drop for Held {
    fn drop(&mut self) {
        if self.0 {
            LOCK.store(0, Ordering::Release);
        }
    }
}

/// Takes the console lock for a scope (a record's several writes).
pub fn lock() -> Held {
    let me = crate::arch::gdt::cpu() as u32 + 1;
    if LOCK.load(Ordering::Relaxed) == me {
        return Held(false);
    }
    while LOCK
        .compare_exchange(0, me, Ordering::Acquire, Ordering::Relaxed)
        .is_err()
    {
        core::hint::spin_loop();
    }
    Held(true)
}

/// Takes the console lock whoever holds it: for a panic, which must print
/// even when the holder is another CPU stuck for good (the boot ends next).
pub fn take_over() {
    LOCK.store(crate::arch::gdt::cpu() as u32 + 1, Ordering::Release);
}

/// For the panic handler, after [`take_over`]: frees the serial port's
/// lock too, so that a panic inside a write (on this CPU, or on one that
/// will never finish it) still prints.
pub fn take_over_devices() {
    serial::take_over();
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments) {
    let _held = lock();
    let _ = Console.write_fmt(args);
}

/// A user program's bytes (already validated by the caller). Each `@`
/// comes out as `abi::report::USER_AT`, so no user write can put a record
/// marker on the console, however it splits or interleaves its writes;
/// invalid UTF-8 comes out as `?`.
pub fn write_bytes(b: &[u8]) {
    let _held = lock();
    for chunk in b.utf8_chunks() {
        for piece in chunk.valid().split_inclusive('@') {
            match piece.strip_suffix('@') {
                Some(text) => {
                    let _ = Console.write_str(text);
                    let _ = Console.write_str(abi::report::USER_AT);
                }
                None => {
                    let _ = Console.write_str(piece);
                }
            }
        }
        if !chunk.invalid().is_empty() {
            let _ = Console.write_str("?");
        }
    }
}

#[macro_export]
macro_rules! kprint {
    ($($arg:tt)*) => { $crate::console::_print(format_args!($($arg)*)) };
}

#[macro_export]
macro_rules! kprintln {
    () => { $crate::kprint!("\n") };
    ($($arg:tt)*) => { $crate::console::_print(format_args!("{}\n", format_args!($($arg)*))) };
}

/// `record!(kind::CPU, "vendor" => v, "family" => f)`: one report line.
/// String values are escaped with `abi::report::Escaped` by [`Val`].
#[macro_export]
macro_rules! record {
    ($kind:expr $(, $k:literal => $v:expr)* $(,)?) => {{
        let _held = $crate::console::lock();
        $crate::kprint!("{}{} {}", abi::report::MARKER, abi::report::SCHEMA, $kind);
        $( $crate::kprint!(" {}={}", $k, $crate::console::Val(&$v)); )*
        $crate::kprint!("\n");
    }};
}

/// A record value: strings are escaped, numbers printed as they are.
pub struct Val<'a, T: ?Sized>(pub &'a T);

impl fmt::Display for Val<'_, &str> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        abi::report::Escaped(self.0).fmt(f)
    }
}

macro_rules! plain_val {
    ($($t:ty),*) => {$(
        impl fmt::Display for Val<'_, $t> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result { self.0.fmt(f) }
        }
    )*};
}
plain_val!(u8, u16, u32, u64, i32, i64, usize, bool);

/// A record value any `Display` type writes, escaped as a string is (a
/// reason with numbers in it).
#[derive(Clone, Copy)]
pub struct Text<T>(pub T);

impl<T: fmt::Display> fmt::Display for Val<'_, Text<T>> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        /// Escapes each piece the value writes.
        struct Escaping<'a, 'b>(&'a mut fmt::Formatter<'b>);
        impl fmt::Write for Escaping<'_, '_> {
            fn write_str(&mut self, s: &str) -> fmt::Result {
                fmt::Display::fmt(&abi::report::Escaped(s), self.0)
            }
        }
        fmt::write(&mut Escaping(f), format_args!("{}", self.0 .0))
    }
}

/// A comma list of what the iterator `make` gives (`512,341,398`), for a
/// record value of one number per CPU: `Text(List(|| ...))`. Never empty
/// with an item: the record escapes an empty value as `%00`.
#[derive(Clone, Copy)]
pub struct List<F>(pub F);

impl<F, I> fmt::Display for List<F>
where
    F: Fn() -> I,
    I: Iterator,
    I::Item: fmt::Display,
{
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, x) in (self.0)().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{x}")?;
        }
        Ok(())
    }
}

/// A value printed as `0x` hex.
#[derive(Clone, Copy)]
pub struct Hex(pub u32);

impl fmt::Display for Val<'_, Hex> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#x}", self.0 .0)
    }
}

/// A value printed with two decimals.
#[derive(Clone, Copy)]
pub struct Dec(pub f64);

impl fmt::Display for Val<'_, Dec> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:.2}", self.0 .0)
    }
}
