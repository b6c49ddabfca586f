//! COM1 through the `uart_16550` crate: 115200 8N1, the speed a serial cable
//! to real hardware is set to (README: "Booting real hardware").
//!
//! The port sits behind a `spin::Mutex`, as `uart_16550`'s users keep it:
//! the console's own lock (`console::lock`) already orders the CPUs' lines,
//! so this one is never found held, but it makes the port's exclusive use a
//! type's guarantee rather than a promise in a `SAFETY` line.

use uart_16550::backend::PioBackend;
use uart_16550::{Config, Uart16550};

use spin::Mutex;

/// The first serial port's I/O base (the PC's COM1).
const COM1: u16 = 0x3f8;

static PORT: Mutex<Option<Uart16550<PioBackend>>> = Mutex::new(None);

pub fn init() {
    // SAFETY: COM1's eight registers at 0x3f8 belong to this driver alone.
    let Ok(mut uart) = (unsafe { Uart16550::new_port(COM1) }) else {
        return;
    };
    let config = Config {
        baud_rate: uart_16550::BaudRate::Baud115200,
        ..Config::DEFAULT
    };
    // A machine without COM1 keeps only the VGA console.
    if uart.init(config).is_ok() {
        *PORT.lock() = Some(uart);
    }
}

pub fn write_str(s: &str) {
    let mut port = PORT.lock();
    let Some(uart) = port.as_mut() else {
        return;
    };
    for line in s.split_inclusive('\n') {
        match line.strip_suffix('\n') {
            // A terminal on a real serial line wants CR LF.
            Some(text) => {
                uart.send_bytes_exact(text.as_bytes());
                uart.send_bytes_exact(b"\r\n");
            }
            None => uart.send_bytes_exact(line.as_bytes()),
        }
    }
}

/// Frees the port whoever holds it, for a panic (`console::take_over_devices`):
/// the holder is this CPU, stopped inside a write, or another CPU that
/// will never finish its write.
pub fn take_over() {
    if PORT.is_locked() {
        // SAFETY: the panicking CPU is the port's only user from here on
        // (the boot ends after its message); a write it interrupted on
        // this CPU is never resumed.
        unsafe { PORT.force_unlock() };
    }
}
