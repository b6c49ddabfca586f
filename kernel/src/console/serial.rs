//! COM1 through the `uart_16550` crate: 115200 8N1, the speed a serial cable
//! to real hardware is set to (README: "Booting real hardware").

use uart_16550::backend::PioBackend;
use uart_16550::{Config, Uart16550};

use crate::sync::cell::BootCell;

/// The first serial port's I/O base (the PC's COM1).
const COM1: u16 = 0x3f8;

static PORT: BootCell<Option<Uart16550<PioBackend>>> = BootCell::new(None);

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
        // SAFETY: single CPU, boot time: nothing else holds the cell.
        unsafe { *PORT.get_mut() = Some(uart) };
    }
}

pub fn write_str(s: &str) {
    // SAFETY: the console is used by one context at a time (see console::_print).
    let Some(uart) = (unsafe { PORT.get_mut() }) else {
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
