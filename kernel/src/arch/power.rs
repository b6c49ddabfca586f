//! Leaving the machine: QEMU's isa-debug-exit, or a halt on real hardware.

use super::port::outl;

/// Tells QEMU to exit with status `value * 2 + 1` (values in `abi::exit`).
/// Without the device (real hardware) the write goes nowhere, so the CPU
/// halts and the console says so.
pub fn exit(value: u32) -> ! {
    // SAFETY: port 0xf4 is the debug-exit device under QEMU and unused on a PC.
    unsafe { outl(abi::exit::PORT, value) };
    crate::kprintln!(
        "{}{:#x}); halting. Power off or reset the machine.",
        abi::exit::FINISHED,
        value
    );
    halt_forever()
}

pub fn halt_forever() -> ! {
    loop {
        // SAFETY: cli/hlt only stop this CPU.
        unsafe { core::arch::asm!("cli", "hlt", options(nomem, nostack)) };
    }
}
