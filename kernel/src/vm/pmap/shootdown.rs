//! TLB shootdown: make other CPUs flush their TLBs, and wait until they
//! have (Intel SDM Vol. 3A §4.10.5: a CPU that changes a paging entry
//! others may have cached must tell them; nothing does it for it).
//!
//! The initiator holds the address-space lock with interrupts off, so a
//! target spinning for that lock with interrupts off would never take the
//! IPI: the lock's spin loop calls [`poll`], which answers a pending request
//! as the IPI handler would. A target in ring 3 or in an idle HLT takes the
//! IPI itself.

use abi::layout::MAX_CPUS;
use core::sync::atomic::{AtomicU32, Ordering};

use crate::arch::idt::{self, Gate, GateKind};
use crate::arch::{apic, paging, smp};

/// The shootdown's vector (below the reschedule IPI's and the timers').
pub const VECTOR_TLB_SHOOTDOWN: u8 = 0xF0;

/// What each CPU is asked to do and has not done yet: [`FLUSH`] or
/// [`LEAVE`] (0 for nothing).
static PENDING: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];
const FLUSH: u32 = 1;

/// Per CPU, since the task began ([`reset_counts`]): the requests it sent
/// (one per target CPU) and the ones it answered, by IPI or by polling.
pub static SENT: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];
pub static TAKEN: [AtomicU32; MAX_CPUS] = [const { AtomicU32::new(0) }; MAX_CPUS];

/// Zeroes [`SENT`] and [`TAKEN`] (a task begins).
pub fn reset_counts() {
    for c in SENT.iter().chain(TAKEN.iter()) {
        c.store(0, Ordering::Relaxed);
    }
}
/// Load the kernel's directory: a space this CPU keeps loaded while it
/// runs no user thread (lazily) is about to be freed.
const LEAVE: u32 = 2;

crate::arch::regs::frame_asm!(
    r#"
    .pushsection .text.ipi, "ax"
    .global tlb_shootdown_entry
    /* Through an interrupt gate (IF clear), from ring 3 or an idle HLT.
       The marker tells the model a delivery of this vector happened. The
       handler touches only its own CPU's word and the local APIC, through
       SS-relative and kernel-segment-free code: it saves and loads DS/ES
       like every other entry. */
tlb_shootdown_entry:
    nopl {marker}(%eax)
    frame_save
    cld
    call {handler}
    frame_restore
    iret
    .popsection
    "#,
    marker = const abi::model::marker_disp(abi::model::interrupt_marker(VECTOR_TLB_SHOOTDOWN)),
    handler = sym shootdown_irq,
    options(att_syntax)
);

unsafe extern "C" {
    static tlb_shootdown_entry: u8;
}

pub(super) fn init() {
    idt::set(
        VECTOR_TLB_SHOOTDOWN,
        Gate::new(
            &raw const tlb_shootdown_entry as u32,
            GateKind::Interrupt,
            0,
        ),
    );
}

extern "C" fn shootdown_irq() {
    poll();
    apic::eoi();
}

/// Answers this CPU's pending flush, if any (the IPI handler, and the
/// spin loops of the locks an initiator may hold).
pub fn poll() {
    let cpu = crate::arch::gdt::cpu();
    let me = &PENDING[cpu];
    match me.load(Ordering::Acquire) {
        FLUSH => paging::flush_all(),
        LEAVE => super::activate_kernel(),
        _ => return,
    }
    TAKEN[cpu].fetch_add(1, Ordering::Relaxed);
    me.store(0, Ordering::Release);
}

/// Flushes the TLB of every CPU in `cpus` (a bit each; never this one) and
/// returns once each has.
pub fn flush_others(cpus: u32) {
    ask(cpus, FLUSH);
}

/// Has every CPU in `cpus` (never this one) load the kernel's directory,
/// and returns once each has.
pub fn leave_others(cpus: u32) {
    ask(cpus, LEAVE);
}

fn ask(cpus: u32, what: u32) {
    if cpus == 0 {
        return;
    }
    SENT[crate::arch::gdt::cpu()].fetch_add(cpus.count_ones(), Ordering::Relaxed);
    for c in (0..MAX_CPUS).filter(|c| cpus & 1 << c != 0) {
        PENDING[c].store(what, Ordering::Release);
        apic::send_ipi(smp::percpu(c).apic_id as u8, VECTOR_TLB_SHOOTDOWN);
    }
    for c in (0..MAX_CPUS).filter(|c| cpus & 1 << c != 0) {
        while PENDING[c].load(Ordering::Acquire) != 0 {
            core::hint::spin_loop();
        }
    }
}
