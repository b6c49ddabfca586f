//! A mirror of the console on the VGA text screen (80×25 at 0xB8000), for a
//! real machine without a serial cable.
//!
//! The cursor stays a `BootCell` under the console lock rather than behind
//! a `spin::Mutex` like the serial port: with the mutex, the compiler laid
//! out unrelated functions differently (`proc::post_caught` lost a bounds
//! check, `sys_sigreturn` gained six instructions), and lmbench's
//! `lat_sig.catch` went from 781.5 to 776.5 instructions per signal under
//! icount, a figure that did not measure the console at all.

use crate::sync::cell::BootCell;

const BUFFER: usize = 0xb8000;
const WIDTH: usize = 80;
const HEIGHT: usize = 25;
/// Light grey on black.
const ATTR: u16 = 0x07 << 8;

struct Cursor {
    col: usize,
}

static CURSOR: BootCell<Cursor> = BootCell::new(Cursor { col: 0 });

fn cell(row: usize, col: usize) -> *mut u16 {
    (BUFFER as *mut u16).wrapping_add(row * WIDTH + col)
}

pub fn init() {
    for row in 0..HEIGHT {
        clear_row(row);
    }
}

fn clear_row(row: usize) {
    for col in 0..WIDTH {
        // SAFETY: the VGA text buffer is identity-mapped device memory.
        unsafe { cell(row, col).write_volatile(ATTR | b' ' as u16) };
    }
}

fn newline() {
    for row in 1..HEIGHT {
        for col in 0..WIDTH {
            // SAFETY: both cells are inside the 80×25 buffer.
            unsafe { cell(row - 1, col).write_volatile(cell(row, col).read_volatile()) };
        }
    }
    clear_row(HEIGHT - 1);
}

pub fn write_str(s: &str) {
    // SAFETY: one console user at a time (see console::_print).
    let cur = unsafe { CURSOR.get_mut() };
    for b in s.bytes() {
        match b {
            b'\n' => {
                newline();
                cur.col = 0;
            }
            b'\r' => cur.col = 0,
            _ => {
                if cur.col == WIDTH {
                    newline();
                    cur.col = 0;
                }
                let ch = if (0x20..0x7f).contains(&b) { b } else { b'?' };
                // SAFETY: the bottom row, col < WIDTH.
                unsafe { cell(HEIGHT - 1, cur.col).write_volatile(ATTR | ch as u16) };
                cur.col += 1;
            }
        }
    }
}
