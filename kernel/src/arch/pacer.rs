//! The turn pacer: the grain at which several CPUs interleave under QEMU's
//! instruction counting (`clock=icount`, `turn=N`).
//!
//! What the machine does without it (QEMU 7.2, `-icount`, one host thread
//! for every vCPU: `accel/tcg/tcg-accel-ops-rr.c` and `-icount.c`): each
//! round of its loop starts at CPU 0, and each CPU in turn runs until the
//! next deadline of the virtual clock (a timer of any device), or until it
//! executes `pause` (QEMU's helper: "let another CPU run") or `hlt`. There
//! is no share per CPU: the budget is the whole time to the deadline, so the
//! CPU that runs first uses all of it, and the next CPU starts with none.
//! CPU 1 therefore runs only while CPU 0 waits (a `pause` in a spin, a
//! `hlt`), and a CPU woken by an interrupt while CPU 0 works sits at its
//! handler's first instruction until CPU 0 waits. That is why, before the
//! pacer, forktest's second CPU finished no round while CPU 0 was timed.
//!
//! The pacer gives the CPUs turns of `grain` instructions of virtual time
//! (the icount clock, which the TSC reads: one tick per instruction of any
//! CPU). Turn `k` is the span `[k*grain, (k+1)*grain)` and belongs to CPU
//! `k mod cpus`. Each CPU's local APIC timer, one-shot, fires at the next
//! boundary; its handler ([`pace`]) parks a CPU whose turn it is not: it
//! executes `pause` (which ends its QEMU turn at once) until its turn
//! comes, or until the owner of the turn has nothing to do (halted with no
//! work: its turn goes to whoever can use it). The CPU whose turn it is
//! then runs until the next boundary, because every CPU before it in
//! QEMU's round is parked. A CPU in ring 0 (interrupts off) is not parked
//! until it reaches ring 3 or an idle wait: no CPU parks holding a kernel
//! lock, and a parked CPU still answers TLB shootdowns ([`set_park_poll`]).
//!
//! Everything here runs on virtual time, so an icount boot stays the same
//! to the instruction (on several CPUs nearly always, not always: rarely
//! QEMU's host threads move a boot by a few instructions; docs/threads.md,
//! "When a multi-CPU boot moves").
//! Its cost is the guest's: each boundary, each running
//! CPU takes one interrupt and parked CPUs run a few instructions per QEMU
//! round; the `pacer` record reports them ([`counts`]), and every figure
//! of such a boot includes them. The pacer is for icount (and the model,
//! which runs under icount): on real parallel CPUs (KVM, multi-threaded
//! TCG, a PC) it stays off.

use core::sync::atomic::{AtomicU32, Ordering};

use abi::layout::MAX_CPUS;

use super::apic;

/// The pacer's interrupt (a local APIC timer vector of its own).
pub const VECTOR_PACER: u8 = 0xF4;

/// The grain in TSC ticks (instructions under icount); 0 while off.
/// Written once at boot, before any CPU arms.
static GRAIN: AtomicU32 = AtomicU32::new(0);
/// How many CPUs share the turns; 0 until the boot CPU knows (no parking
/// before then).
static CPUS: AtomicU32 = AtomicU32::new(0);
/// TSC ticks per scheduler tick on an application processor, whose local
/// timer the pacer takes over (its ticks come from here then).
static TICK_TSC: AtomicU32 = AtomicU32::new(0);

/// One CPU's view of the turns, and what the pacer cost it; (c): its own
/// CPU only, in its handler (the counts are read by the boot CPU at the
/// end). In a 128-byte block of its own, so that no CPU's pacer shares a
/// line with another's: in the model, the pacer (the emulation's, not the
/// modelled machine's) must not add coherence misses to the figures.
#[repr(C, align(128))]
struct Turn {
    /// The boundary that ends the turn in progress (a TSC value).
    next: u64,
    /// The TSC of this CPU's next scheduler tick (application processors).
    next_tick: u64,
    /// The index of the turn in progress (owner: `k mod cpus`).
    k: u32,
    /// The pacer's interrupts this CPU took.
    interrupts: AtomicU32,
    /// The `pause`s it executed parked (each one QEMU round that found it
    /// parked).
    parked: AtomicU32,
}

static mut TURNS: [Turn; MAX_CPUS] = [const {
    Turn {
        next: 0,
        next_tick: 0,
        k: 0,
        interrupts: AtomicU32::new(0),
        parked: AtomicU32::new(0),
    }
}; MAX_CPUS];

/// What the pacer cost, per CPU: the interrupts it took, and the `pause`s
/// it executed parked.
pub fn counts() -> ([u32; MAX_CPUS], [u32; MAX_CPUS]) {
    // SAFETY: only the atomics are read; each CPU writes its own slot's
    // plain fields in its handler alone.
    let t = unsafe { &*(&raw const TURNS) };
    (
        core::array::from_fn(|c| t[c].interrupts.load(Ordering::Relaxed)),
        core::array::from_fn(|c| t[c].parked.load(Ordering::Relaxed)),
    )
}

/// Run while parked, between two `pause`s (the kernel's TLB shootdown
/// poll: a parked CPU answers shootdowns as one that spins on a lock does).
static PARK_POLL: AtomicU32 = AtomicU32::new(0);

/// Sets the grain (0: off) and the application processors' tick rate,
/// before the other CPUs start.
pub fn configure(grain: u32, tsc_hz: u64, tick_hz: u64) {
    GRAIN.store(grain, Ordering::Relaxed);
    TICK_TSC.store(
        (tsc_hz / tick_hz.max(1)).min(u32::MAX as u64) as u32,
        Ordering::Relaxed,
    );
}

/// The grain, 0 when the pacer is off.
pub fn grain() -> u32 {
    GRAIN.load(Ordering::Relaxed)
}

/// Sets what a parked CPU polls (once, at boot).
pub fn set_park_poll(f: fn()) {
    PARK_POLL.store(f as usize as u32, Ordering::Relaxed);
}

/// Starts the turns among `cpus` CPUs (the boot CPU, once every CPU that
/// will run has started).
pub fn share(cpus: usize) {
    CPUS.store(cpus as u32, Ordering::Release);
}

/// Arms this CPU's pacer (the boot CPU, and each application processor
/// instead of its periodic scheduler timer).
pub fn arm_this_cpu() {
    let g = grain() as u64;
    if g == 0 {
        return;
    }
    let me = super::gdt::cpu();
    let now = super::cpu::rdtsc();
    let k = now / g;
    // SAFETY: (c) this CPU's slot, with interrupts off (boot, or ap_main
    // before it enables them).
    let t = unsafe { &mut (*(&raw mut TURNS))[me] };
    t.k = k as u32;
    t.next = (k + 1) * g;
    t.next_tick = now + TICK_TSC.load(Ordering::Relaxed) as u64;
    apic::set_timer_vector(VECTOR_PACER);
    apic::one_shot(timer_count(t.next, now));
}

/// The count that makes a one-shot timer started at about `now` fire at
/// `at` (the APIC counts virtual nanoseconds under icount, one per
/// instruction: QEMU's APIC fires `count + 1` after the write).
fn timer_count(at: u64, now: u64) -> u32 {
    (at.saturating_sub(now).max(2) - 1).min(u32::MAX as u64) as u32
}

/// The pacer's interrupt on this CPU (from `pacer_entry`, interrupts off).
/// Re-arms the timer for the next boundary, then parks this CPU until its
/// turn. Returns 1 when an application processor's scheduler tick is due
/// (the stub then runs the tick's handler), else 0.
#[unsafe(no_mangle)]
extern "fastcall" fn arch_pace() -> u32 {
    apic::eoi();
    let me = super::gdt::cpu();
    let g = grain() as u64;
    // SAFETY: (c) this CPU's slot; its handler does not nest (an interrupt
    // gate, and nothing in it enables interrupts).
    let t = unsafe { &mut (*(&raw mut TURNS))[me] };
    t.interrupts.fetch_add(1, Ordering::Relaxed);
    let mut now = super::cpu::rdtsc();
    advance(t, now, g);
    apic::one_shot(timer_count(t.next, now));
    let poll = PARK_POLL.load(Ordering::Relaxed);
    while !mine(t.k, me) {
        t.parked.fetch_add(1, Ordering::Relaxed);
        if poll != 0 {
            // SAFETY: set from a `fn()` by `set_park_poll`.
            let f: fn() = unsafe { core::mem::transmute(poll as usize) };
            f();
        }
        // PAUSE ends this CPU's turn in QEMU's round at once.
        core::hint::spin_loop();
        now = super::cpu::rdtsc();
        advance(t, now, g);
    }
    if me != 0 && now >= t.next_tick {
        let tick = (TICK_TSC.load(Ordering::Relaxed) as u64).max(1);
        while t.next_tick <= now {
            t.next_tick += tick;
        }
        return 1;
    }
    0
}

/// Moves `t` to the turn that holds `now`.
fn advance(t: &mut Turn, now: u64, g: u64) {
    while now >= t.next {
        t.next += g;
        t.k = t.k.wrapping_add(1);
    }
}

/// Whether CPU `me` may run in turn `k`: its own turn, or one whose owner
/// has nothing to do; always before the turns are shared.
fn mine(k: u32, me: usize) -> bool {
    let n = CPUS.load(Ordering::Acquire);
    if n <= 1 {
        return true;
    }
    let owner = (k % n) as usize;
    owner == me || super::smp::idles(owner)
}
