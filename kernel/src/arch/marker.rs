//! Markers for the model clock (`abi::model`): what the kernel tells the
//! model plugin that QEMU does not show it.
//!
//! A marker is `nopl disp32(%eax)` with the marker's id in the displacement:
//! a NOP on every CPU and under every other clock. After an announcing
//! marker the next data load carries the argument as its address, so each
//! announcement is the marker and one byte load in a single `asm!` block.
//! Ring 0 runs with interrupts masked where the kernel announces (boot, the
//! page-table code, interrupt gates), so no handler's load comes between.
//!
//! - At boot, on each CPU: the IDT, the GDT and this CPU's TSS
//!   ([`announce_tables`]). The model charges exception and interrupt
//!   delivery with the lines of these tables, which QEMU reads outside the
//!   translated code, where the plugin does not see the accesses.
//! - Before every `invlpg`: its page ([`announce_invlpg`]), since the plugin
//!   decodes `invlpg` but cannot read its operand.
//! - Kernel-side benchmarks: snapshots of the kernel stream ([`snap`]; on
//!   an AP working for a timed figure, [`reserve`] and [`snap_reserved`]).
//! - Interrupt handlers the model should charge a delivery for: marker
//!   `abi::model::interrupt_marker(vector)` as the handler's first
//!   instruction (the shootdown IPI's, kernel/src/bench/smp.rs), since QEMU
//!   delivers interrupts where the plugin sees nothing.
//!
//! None of this lies on a system-call entry or exit path.

use core::arch::asm;
use core::sync::atomic::{AtomicU32, Ordering};

use abi::layout::MAX_CPUS;
use abi::model::{
    marker_disp, ANNOUNCE_GDT, ANNOUNCE_IDT, ANNOUNCE_TSS, ARG_WINDOW, ARG_WINDOW_SIZE,
    INVLPG_PAGE, SNAP_KERNEL,
};

/// Marker `ID` followed by a byte load from `addr`: the argument channel.
#[inline(always)]
fn announce<const ID: u16>(addr: u32) {
    // SAFETY: a NOP and a byte load from `addr`, which the callers pass
    // mapped and readable in ring 0 (a descriptor table, or the argument
    // window inside the kernel's identity map).
    unsafe {
        asm!(
            "nopl {disp}(%eax)",
            "movzbl ({a}), {t}",
            disp = const marker_disp(ID),
            a = in(reg) addr,
            t = lateout(reg) _,
            options(att_syntax, nostack, preserves_flags, readonly)
        )
    };
}

/// Tells the model where this CPU's IDT, GDT and TSS are (after `lidt`,
/// `lgdt` and `ltr` on this CPU).
pub fn announce_tables(idt: u32, gdt: u32, tss: u32) {
    announce::<ANNOUNCE_IDT>(idt);
    announce::<ANNOUNCE_GDT>(gdt);
    announce::<ANNOUNCE_TSS>(tss);
}

/// Tells the model which page the `invlpg` that follows drops.
#[inline(always)]
pub fn announce_invlpg(va: u32) {
    const _: () = assert!(ARG_WINDOW_SIZE >= 1 << 20, "every 20-bit page number fits");
    announce::<INVLPG_PAGE>(ARG_WINDOW + (va >> 12));
}

/// Checks, once paging is on, that every page of the argument window is
/// mapped, so an announcement's load never faults; `kernel_end`: the end of
/// the kernel image, which must lie below it.
pub fn check_window(kernel_end: u32) {
    assert!(
        kernel_end <= ARG_WINDOW,
        "the kernel image ends at {kernel_end:#x}, inside the model's argument window at {ARG_WINDOW:#x}"
    );
    let mut page = ARG_WINDOW;
    while page < ARG_WINDOW + ARG_WINDOW_SIZE {
        assert!(
            super::paging::flags(page).is_some(),
            "the model's argument window has an unmapped page at {page:#x}"
        );
        page += abi::layout::PAGE_SIZE;
    }
}

/// One CPU's count of kernel-stream snapshots, in a 128-byte block of its
/// own: an AP counts its snapshots while CPU 0 is timed, and a count that
/// shared a line (or a NetBurst pair) with CPU 0's would move between the
/// caches inside CPU 0's modelled figures.
#[repr(C, align(128))]
struct Count(AtomicU32);

/// Kernel-stream snapshots taken (or reserved) so far, per CPU.
static SNAPS: [Count; MAX_CPUS] = [const { Count(AtomicU32::new(0)) }; MAX_CPUS];

/// The sequence number this CPU's next kernel-stream [`snap`] will have.
pub fn snap_seq() -> u32 {
    snap_seq_of(super::gdt::cpu())
}

/// The sequence number CPU `cpu`'s next kernel-stream snapshot will have:
/// exact only while that CPU takes none (an AP between commands).
pub fn snap_seq_of(cpu: usize) -> u32 {
    SNAPS[cpu].0.load(Ordering::Relaxed)
}

/// Counts `k` kernel-stream snapshots of this CPU, `cpu` (the caller's
/// own index: a command handler has it at hand), ahead of time, for `k`
/// [`snap_reserved`] markers to follow; returns the first one's sequence
/// number. An AP reserves before CPU 0's timed region, so inside it each
/// of its snapshots is one instruction, the marker.
pub fn reserve(cpu: usize, k: u32) -> u32 {
    SNAPS[cpu].0.fetch_add(k, Ordering::Relaxed)
}

/// One snapshot of this CPU's kernel stream whose number [`reserve`] has
/// counted already: the marker alone.
#[inline(always)]
pub fn snap_reserved() {
    // SAFETY: a NOP. Not `nomem`: the compiler keeps the memory accesses
    // of the work it brackets on their side of it.
    unsafe {
        asm!(
            "nopl {disp}(%eax)",
            disp = const marker_disp(SNAP_KERNEL),
            options(att_syntax, nostack, preserves_flags)
        )
    };
}

/// One snapshot of this CPU's kernel stream. The marker and the count are
/// one `asm!` block, so they stay together and in order against the
/// timer's.
#[inline(always)]
pub fn snap() {
    let count = &SNAPS[super::gdt::cpu()].0;
    // SAFETY: a NOP, then an increment of this CPU's own counter.
    unsafe {
        asm!(
            "nopl {disp}(%eax)",
            "incl ({c})",
            disp = const marker_disp(SNAP_KERNEL),
            c = in(reg) count.as_ptr(),
            options(att_syntax, nostack)
        )
    };
}
