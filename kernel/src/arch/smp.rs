//! Bringing up the other CPUs (Intel SDM Vol. 3A §8.4, MP initialisation).
//!
//! The CPUs are found in ACPI's MADT (the `acpi` crate), or in the Intel MP
//! table when there is no ACPI. Each application processor (AP) is started
//! with INIT, then STARTUP twice, at a real-mode trampoline copied below
//! 1 MiB; the trampoline loads the kernel's GDT, enters protected mode,
//! turns paging on with the kernel's page directory and jumps to `ap_main`
//! on the AP's own stack. There the kernel's `ap_main` (beside `kmain`)
//! calls [`ap_init`], which loads the AP's own TSS and its per-CPU segment
//! (GS: its `PerCpu`) and enables its local APIC; then `ap_main` waits for
//! work from the bootstrap processor in its mailbox.
//!
//! Every AP then runs threads: kernel work (the SMP benchmarks) and user
//! threads (`thread_create` names a CPU), each with its own TSS, entry
//! MSRs and SYSCALL slots.

use core::arch::{asm, global_asm};
use core::ptr::NonNull;
use core::sync::atomic::{AtomicU32, Ordering};

use abi::layout::{AP_TRAMPOLINE, MAX_CPUS, VECTOR_RESCHEDULE};

use super::apic;
use super::paging;
use crate::sync::cell::{BootCell, SetOnce};

/// What an AP is asked to do; written by the BSP, cleared by the AP.
///
/// Each CPU's block fills its own aligned 128-byte pair of 64-byte lines
/// (the widest unit a cache here moves: NetBurst's sector, later CPUs'
/// adjacent-line prefetch). Packed, CPU 1's mailbox shared a line with
/// CPU 0's block and CPU 2's and 3's a pair, so the hand-shake of one
/// benchmark run moved lines between the APs as well, as many times as
/// their order happened to make it (the model's `mode=smp` figures then
/// counted a varying number of coherence misses per run).
#[repr(C, align(128))]
pub struct PerCpu {
    /// `%gs:0` points here: the per-CPU segment's base.
    pub this: u32,
    pub index: u32,
    pub apic_id: u32,
    /// A command for `ap_main`'s loop (`Command as u32`), 0 when idle.
    pub command: AtomicU32,
    pub arg: AtomicU32,
    /// Set by the AP when the command is done.
    pub done: AtomicU32,
    /// IPIs this CPU has taken (the TLB shootdown counts them).
    pub ipis: AtomicU32,
    /// Where this CPU is in its start-up ([`start`]'s states), moved by
    /// compare-and-swap so that the AP and the BSP agree on whether a late
    /// AP was given up on.
    pub started: AtomicU32,
}

/// The states of [`PerCpu::started`]: the handshake between the BSP and
/// an AP it starts.
///
/// An AP reads its stack, its CPU index and its entry from the one
/// trampoline mailbox, on its way into [`ApMain`]. If the BSP stopped
/// waiting for a slow AP and went on to the next, it would write the next
/// AP's values into that mailbox, and give the next AP the same index,
/// stack, GDT and TSS slot, while the slow AP might still arrive and use
/// them: two CPUs on one stack, and a triple fault. Multi-threaded TCG on a
/// loaded host made an AP that late (about one boot in five) when the BSP
/// waited 100 ms for the AP's whole start-up. So the AP first claims its
/// arrival, and the BSP, when it gives up, claims the slot as abandoned:
/// one compare-and-swap each, so exactly one of them wins. An AP that finds
/// its slot abandoned parks and touches nothing; a BSP that abandons one
/// starts no further AP, so nothing of the parked one is ever handed out
/// again.
pub mod start {
    /// The BSP sent INIT and STARTUP; the AP has not said anything yet.
    pub const WAITING: u32 = 0;
    /// Its start-up is done: it runs the scheduler and takes commands.
    pub const RUNNING: u32 = 1;
    /// It reached `ap_main`: it has read the mailbox and is on its own stack.
    pub const ARRIVED: u32 = 2;
    /// The BSP gave up waiting for it to arrive.
    pub const ABANDONED: u32 = 3;
}

/// One CPU's idle state, in a 128-byte block of its own (two 64-byte
/// lines: the adjacent-line prefetch pair). The turn pacer reads another
/// CPU's at every boundary; sharing a line with what that CPU writes
/// otherwise would put coherence misses of the emulation's pacer into the
/// model's figures of the machine.
#[repr(C, align(128))]
pub struct IdleState {
    /// 1 while this CPU waits in [`halt_idle`] (set by itself).
    pub idle: AtomicU32,
    /// 1 once a thread of this CPU was made ready and its idle loop has
    /// not looked yet (set by any CPU, before the reschedule IPI).
    pub wake: AtomicU32,
}

static IDLE: [IdleState; MAX_CPUS] = [const {
    IdleState {
        idle: AtomicU32::new(0),
        // Each AP's idle loop looks once at the start.
        wake: AtomicU32::new(1),
    }
}; MAX_CPUS];

/// CPU `cpu`'s idle state.
pub fn idle_state(cpu: usize) -> &'static IdleState {
    &IDLE[cpu]
}

/// Whether CPU `cpu` idles with nothing to do: the turn pacer gives its
/// turns away (`pacer`).
pub fn idles(cpu: usize) -> bool {
    let s = &IDLE[cpu];
    s.idle.load(Ordering::Acquire) == 1 && s.wake.load(Ordering::Acquire) == 0
}

/// Notes that CPU `cpu` has a thread to run (before its reschedule IPI).
pub fn note_work(cpu: usize) {
    IDLE[cpu].wake.store(1, Ordering::Release);
}

/// Takes this CPU's work note: whether a thread was made ready for it since
/// it last looked.
pub fn take_work() -> bool {
    IDLE[super::gdt::cpu()].wake.swap(0, Ordering::AcqRel) != 0
}

/// Waits for an interrupt with nothing to do: interrupts on for exactly the
/// HLT (STI's one-instruction shadow keeps an interrupt that is already
/// pending from slipping in before it), and the idle mark set meanwhile.
/// Returns with interrupts off.
pub fn halt_idle() {
    // Not `this_cpu`: on the boot CPU this runs after a system call's entry,
    // which leaves the user's GS.
    let me = &IDLE[super::gdt::cpu()];
    me.idle.store(1, Ordering::Release);
    // SAFETY: only waits for an interrupt; the caller holds no lock.
    unsafe { asm!("sti", "hlt", "cli", options(nomem, nostack)) };
    me.idle.store(0, Ordering::Release);
}

const PERCPU_INIT: PerCpu = PerCpu {
    this: 0,
    index: 0,
    apic_id: 0,
    command: AtomicU32::new(0),
    arg: AtomicU32::new(0),
    done: AtomicU32::new(0),
    ipis: AtomicU32::new(0),
    started: AtomicU32::new(0),
};

static PERCPU: BootCell<[PerCpu; MAX_CPUS]> = BootCell::new([PERCPU_INIT; MAX_CPUS]);

/// (base, length) of each CPU's per-CPU segment, for the GDT.
pub fn percpu_segments() -> [(u32, u32); MAX_CPUS] {
    let base = PERCPU.as_ptr() as u32;
    core::array::from_fn(|i| {
        (
            base + (i * core::mem::size_of::<PerCpu>()) as u32,
            core::mem::size_of::<PerCpu>() as u32,
        )
    })
}

pub fn percpu(i: usize) -> &'static PerCpu {
    // SAFETY: fields other than the atomics are written before the CPU starts.
    unsafe { &PERCPU.get_mut()[i] }
}

/// This CPU's `PerCpu`, through the GS segment base. Only in code that no
/// ring-3 entry precedes (the entry stubs do not reload GS).
pub fn this_cpu() -> &'static PerCpu {
    let p: u32;
    // SAFETY: GS is this CPU's per-CPU segment, whose first word is its address.
    unsafe { asm!("movl %gs:0, {}", out(reg) p, options(att_syntax, readonly, nostack)) };
    // SAFETY: the pointer names a static PerCpu.
    unsafe { &*(p as *const PerCpu) }
}

/// How the CPUs were found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    Acpi,
    MpTable,
    /// Nothing found: only the bootstrap processor.
    None,
}

impl Source {
    pub fn key(self) -> &'static str {
        match self {
            Source::Acpi => "acpi-madt",
            Source::MpTable => "mp-table",
            Source::None => "none",
        }
    }
}

pub struct Cpus {
    pub source: Source,
    pub apic_ids: [u8; MAX_CPUS],
    pub count: usize,
    pub started: usize,
}

static CPUS: BootCell<Cpus> = BootCell::new(Cpus {
    source: Source::None,
    apic_ids: [0; MAX_CPUS],
    count: 1,
    started: 1,
});

pub fn cpus() -> &'static Cpus {
    // SAFETY: written once by `init`.
    unsafe { CPUS.get_mut() }
}

/// Identity mappings for the `acpi` crate: tables may lie above the kernel
/// map, so each region is mapped (and left mapped) on request.
#[derive(Clone, Copy)]
struct Identity;

impl acpi::AcpiHandler for Identity {
    unsafe fn map_physical_region<T>(
        &self,
        phys: usize,
        size: usize,
    ) -> acpi::PhysicalMapping<Self, T> {
        let _ = paging::map_identity(phys as u32, size as u32, paging::Flags::empty());
        // SAFETY: identity-mapped just above; the crate reads `size` bytes.
        unsafe {
            acpi::PhysicalMapping::new(
                phys,
                NonNull::new(phys as *mut T).expect("non-null"),
                size,
                size,
                *self,
            )
        }
    }

    fn unmap_physical_region<T>(_region: &acpi::PhysicalMapping<Self, T>) {}
}

fn from_acpi(ids: &mut [u8; MAX_CPUS]) -> Option<usize> {
    // SAFETY: the BIOS areas the search reads are identity-mapped.
    let tables = unsafe { acpi::AcpiTables::search_for_rsdp_bios(Identity) }.ok()?;
    let madt = tables.find_table::<acpi::madt::Madt>().ok()?;
    let mut n = 0;
    for e in madt.get().entries() {
        if let acpi::madt::MadtEntry::LocalApic(l) = e {
            let flags = l.flags;
            // Bit 0: enabled; bit 1: online capable.
            if flags & 3 != 0 && n < MAX_CPUS {
                ids[n] = l.apic_id;
                n += 1;
            }
        }
    }
    (n > 0).then_some(n)
}

/// The Intel MP table (MP spec 1.4 §4): the floating pointer "_MP_" in the
/// last KiB of base memory, the EBDA, or the BIOS ROM; processor entries
/// (type 0, 20 bytes) in its configuration table.
fn from_mp_table(ids: &mut [u8; MAX_CPUS]) -> Option<usize> {
    let find = |start: u32, len: u32| -> Option<u32> {
        (start..start + len).step_by(16).find(|&a| {
            // SAFETY: low memory, identity-mapped (page 0 excepted below).
            a >= 0x1000 && unsafe { core::slice::from_raw_parts(a as *const u8, 4) } == b"_MP_"
        })
    };
    // SAFETY: the BDA word at 0x40E holds the EBDA segment.
    let ebda = (unsafe { ((0x40e) as *const u16).read_unaligned() } as u32) << 4;
    let fp = find(ebda, 1024)
        .or_else(|| find(0x9fc00, 1024))
        .or_else(|| find(0xf0000, 0x10000))?;
    // SAFETY: the floating pointer structure is 16 bytes; +4 is the table address.
    let table = unsafe { ((fp + 4) as *const u32).read_unaligned() };
    if table == 0 || table >= abi::layout::KERNEL_MAP_END {
        return None;
    }
    // SAFETY: the configuration table: "PCMP", base length at +4, count at +34.
    let (sig, count) = unsafe {
        (
            core::slice::from_raw_parts(table as *const u8, 4),
            ((table + 34) as *const u16).read_unaligned(),
        )
    };
    if sig != b"PCMP" {
        return None;
    }
    let mut at = table + 44;
    let mut n = 0;
    for _ in 0..count {
        // SAFETY: entries follow the 44-byte header; each starts with its type.
        let ty = unsafe { (at as *const u8).read() };
        if ty == 0 {
            // SAFETY: a processor entry: APIC ID at +1, flags at +3 (bit 0 enabled).
            let (id, flags) = unsafe {
                (
                    ((at + 1) as *const u8).read(),
                    ((at + 3) as *const u8).read(),
                )
            };
            if flags & 1 != 0 && n < MAX_CPUS {
                ids[n] = id;
                n += 1;
            }
            at += 20;
        } else {
            at += 8;
        }
    }
    (n > 0).then_some(n)
}

// The trampoline: assembled here, copied to AP_TRAMPOLINE, run there. Every
// address in it is AP_TRAMPOLINE + (label - trampoline_start); the mailbox
// at its end carries the GDTR, CR3, the stack and the entry.
global_asm!(
    r#"
    .pushsection .rodata.trampoline, "a"
    .global trampoline_start, trampoline_end, trampoline_mailbox
    .code16
trampoline_start:
    cli
    cld
    xorw %ax, %ax
    movw %ax, %ds
    lgdtl {base} + (tramp_gdtr - trampoline_start)
    movl %cr0, %eax
    orl $1, %eax
    movl %eax, %cr0
    ljmpl ${kcode}, ${base} + (tramp_pm - trampoline_start)
    .code32
tramp_pm:
    movl ${kdata}, %eax
    movl %eax, %ds
    movl %eax, %es
    movl %eax, %ss
    movl {base} + (tramp_cr3 - trampoline_start), %eax
    movl %eax, %cr3
    movl %cr0, %eax
    orl $0x80010000, %eax
    movl %eax, %cr0
    movl {base} + (tramp_stack - trampoline_start), %esp
    pushl {base} + (tramp_cpu - trampoline_start)
    call *{base} + (tramp_entry - trampoline_start)
1:  cli
    hlt
    jmp 1b
    .align 8
trampoline_mailbox:
tramp_gdtr:
    .short 0
    .long 0
    .short 0
tramp_cr3:
    .long 0
tramp_stack:
    .long 0
tramp_entry:
    .long 0
tramp_cpu:
    .long 0
trampoline_end:
    .popsection
    "#,
    base = const AP_TRAMPOLINE,
    kcode = const abi::layout::selector::KERNEL_CODE,
    kdata = const abi::layout::selector::KERNEL_DATA,
    options(att_syntax)
);

unsafe extern "C" {
    static trampoline_start: u8;
    static trampoline_end: u8;
    static trampoline_mailbox: u8;
}

/// The trampoline's data, laid out as the assembly above expects (packed:
/// the GDTR is a 16-bit limit then a 32-bit base).
#[repr(C, packed)]
struct Mailbox {
    gdtr_limit: u16,
    gdtr_base: u32,
    _pad: u16,
    cr3: u32,
    stack: u32,
    entry: u32,
    cpu: u32,
}

const AP_STACK: usize = 16 * 1024;
#[repr(C, align(4096))]
struct ApStacks([[u8; AP_STACK]; MAX_CPUS]);
static AP_STACKS: BootCell<ApStacks> = BootCell::new(ApStacks([[0; AP_STACK]; MAX_CPUS]));

fn delay_us(us: u64, tsc_hz: u64) {
    let start = super::cpu::rdtsc();
    let ticks = (tsc_hz / 1_000_000).max(1) * us;
    while super::cpu::rdtsc().wrapping_sub(start) < ticks {
        core::hint::spin_loop();
    }
}

/// What an AP runs once the trampoline has it in protected mode with
/// paging on and its own stack: the kernel's `ap_main(cpu)`, which starts
/// with [`ap_init`].
pub type ApMain = extern "C" fn(cpu: u32) -> !;

/// Finds the CPUs and starts every AP at `ap_main`; returns how many CPUs run.
pub fn init(tsc_hz: u64, has_apic: bool, ap_main: ApMain) -> usize {
    // SAFETY: boot, BSP only.
    let c = unsafe { CPUS.get_mut() };
    // SAFETY: as above.
    let pc = unsafe { PERCPU.get_mut() };
    for (i, p) in pc.iter_mut().enumerate() {
        p.this = p as *const PerCpu as u32;
        p.index = i as u32;
    }
    if !has_apic || tsc_hz == 0 {
        return 1;
    }
    if paging::map_identity(apic::LAPIC_BASE, 4096, paging::UNCACHED).is_err() {
        return 1;
    }
    apic::enable();
    // An AP's local timer ends an idle HLT and preempts its ring 3.
    super::idt::set(
        apic::VECTOR_TIMER,
        super::idt::Gate::new(
            &raw const apic_timer_entry as u32,
            super::idt::GateKind::Interrupt,
            0,
        ),
    );
    super::idt::set(
        super::pacer::VECTOR_PACER,
        super::idt::Gate::new(
            &raw const pacer_entry as u32,
            super::idt::GateKind::Interrupt,
            0,
        ),
    );
    super::idt::set(
        VECTOR_RESCHEDULE,
        super::idt::Gate::new(
            &raw const ipi_reschedule_entry as u32,
            super::idt::GateKind::Interrupt,
            0,
        ),
    );
    let bsp = apic::id();
    let mut ids = [0u8; MAX_CPUS];
    let (source, n) = match from_acpi(&mut ids) {
        Some(n) => (Source::Acpi, n),
        None => match from_mp_table(&mut ids) {
            Some(n) => (Source::MpTable, n),
            None => (Source::None, 0),
        },
    };
    // The search mapped page 0 (the BIOS data area's EBDA pointer): make it
    // the null guard again.
    paging::unmap_kernel_page(0);
    c.source = source;
    if n == 0 {
        ids[0] = bsp;
    }
    c.count = n.max(1);
    c.apic_ids = ids;
    pc[0].apic_id = bsp as u32;
    pc[0].started.store(start::RUNNING, Ordering::Release);
    // The trampoline page.
    let len = &raw const trampoline_end as usize - &raw const trampoline_start as usize;
    // SAFETY: AP_TRAMPOLINE is free low memory, identity-mapped, and the
    // code is position-fixed for it.
    unsafe {
        core::ptr::copy_nonoverlapping(&raw const trampoline_start, AP_TRAMPOLINE as *mut u8, len)
    };
    let mb_off = &raw const trampoline_mailbox as usize - &raw const trampoline_start as usize;
    let mb = (AP_TRAMPOLINE as usize + mb_off) as *mut Mailbox;
    let (limit, base) = super::gdt::gdtr();
    let mut started = 1;
    for &id in ids[..c.count].iter() {
        if id == bsp || started >= MAX_CPUS {
            continue;
        }
        let cpu = started;
        pc[cpu].apic_id = id as u32;
        let top = ap_stack_top(cpu);
        super::gdt::set_ap_esp0(cpu, top);
        // SAFETY: the mailbox lies in the trampoline page; no AP runs yet.
        unsafe {
            mb.write_volatile(Mailbox {
                gdtr_limit: limit,
                gdtr_base: base,
                _pad: 0,
                cr3: paging::directory_address(),
                stack: top,
                entry: ap_main as *const () as u32,
                cpu: cpu as u32,
            })
        };
        let state = &pc[cpu].started;
        apic::send_init(id);
        delay_us(10_000, tsc_hz);
        for _ in 0..2 {
            apic::send_startup(id, (AP_TRAMPOLINE >> 12) as u8);
            delay_us(200, tsc_hz);
            if state.load(Ordering::Acquire) != start::WAITING {
                break;
            }
        }
        // Up to 5 s for it to arrive (a real AP takes microseconds; an
        // emulated one on a loaded host waits for a host thread, and under
        // multi-threaded TCG the TSC follows the host's clock).
        let t0 = super::cpu::rdtsc();
        while state.load(Ordering::Acquire) == start::WAITING
            && super::cpu::rdtsc().wrapping_sub(t0) < 5 * tsc_hz
        {
            core::hint::spin_loop();
        }
        if state
            .compare_exchange(
                start::WAITING,
                start::ABANDONED,
                Ordering::AcqRel,
                Ordering::Acquire,
            )
            .is_ok()
        {
            // It may still arrive: it then parks. Its index, stack and the
            // mailbox stay its own, so no other AP is started.
            crate::kprintln!(
                "smp: the AP with APIC id {id} did not arrive within 5 s; starting no more CPUs"
            );
            break;
        }
        // It arrived, so the mailbox is free; its start-up is short and
        // takes no lock another CPU holds. Up to 10 s more for it.
        let t0 = super::cpu::rdtsc();
        while state.load(Ordering::Acquire) != start::RUNNING
            && super::cpu::rdtsc().wrapping_sub(t0) < 10 * tsc_hz
        {
            core::hint::spin_loop();
        }
        assert!(
            state.load(Ordering::Acquire) == start::RUNNING,
            "smp: the AP with APIC id {id} arrived but did not finish its start-up within 10 s"
        );
        started += 1;
    }
    c.started = started;
    started
}

super::regs::frame_asm!(
    r#"
    .pushsection .text.ipi, "ax"
    .global ipi_reschedule_entry, apic_timer_entry, pacer_entry
    /* Through interrupt gates (IF now clear). From ring 3 the CPU switched
       to this CPU's TSS.ESP0; from an idle HLT we are on a kernel stack.
       The same frame as a system-call entry, so the handler may switch
       threads; it gets the interrupted CS in ECX. Each begins with the
       model's marker of its delivery (an IPI's, a device's), and calls up
       to the trap module (arch/mod.rs lists the upcalls). */
    .macro smp_irq_save
    frame_save
    cld
    .endm
    .macro smp_irq_enter marker, handler
    nopl \marker(%eax)
    smp_irq_save
    movl {cs}(%esp), %ecx
    call \handler
    .endm
ipi_reschedule_entry:
    smp_irq_enter {resched_marker}, trap_reschedule
    jmp 1f
apic_timer_entry:
    smp_irq_enter {timer_marker}, trap_apic_timer
    jmp 1f
    /* The turn pacer's timer (arch/pacer.rs): no marker, since it is the
       emulation's, not the modelled machine's. The same frame, because on
       an application processor it carries the scheduler's tick, which may
       switch threads. */
pacer_entry:
    smp_irq_save
    call arch_pace
    testl %eax, %eax
    jz 1f
    movl {cs}(%esp), %ecx
    call trap_pacer_tick
1:  frame_restore
    iret
    .popsection
    "#,
    cs = const super::regs::frame::CS,
    resched_marker = const abi::model::marker_disp(abi::model::interrupt_marker(VECTOR_RESCHEDULE)),
    timer_marker = const abi::model::marker_disp(abi::model::device_interrupt_marker(apic::VECTOR_TIMER)),
    options(att_syntax)
);

unsafe extern "C" {
    static ipi_reschedule_entry: u8;
    static apic_timer_entry: u8;
    static pacer_entry: u8;
}

/// Commands an AP runs (`PerCpu::command`). The benchmarks' go to their
/// worker (`set_worker`); the kernel's own ones `ap_main` runs itself, and
/// their reply is left in `PerCpu::arg` (see [`ask`]).
pub mod command {
    pub const HAMMER: u32 = 1;
    pub const PONG: u32 = 2;
    pub const LINES: u32 = 3;
    /// Count `arg` kernel-stream snapshots ahead (`arch::marker::reserve`):
    /// the markers a command or an IPI handler takes inside CPU 0's timed
    /// region (the ping-pong's, the shootdown's).
    pub const RESERVE_SNAPS: u32 = 4;
    /// Put this CPU's own machine state back as the boot chose it (a task
    /// ended: `task::reset_cpu_state`).
    pub const RESET: u32 = 16;
    /// Reply with what of this CPU's own state a task left changed
    /// (`task::cpu_state_left`, for the tests).
    pub const STATE: u32 = 17;
}

/// What `ap_main` does with a command, provided by the benchmarks.
pub type Worker = fn(cpu: usize, command: u32, arg: u32);
static WORKER: SetOnce<Worker> = SetOnce::new();

/// Sets the command handler (once, on the BSP, before any command is posted).
pub fn set_worker(w: Worker) {
    WORKER.set(w);
}

/// The command handler, if the benchmarks set one.
pub fn worker() -> Option<Worker> {
    WORKER.get().copied()
}

/// Posts `command` to CPU `cpu` (>= 1).
pub fn post(cpu: usize, command: u32, arg: u32) {
    let p = percpu(cpu);
    p.done.store(0, Ordering::Relaxed);
    p.arg.store(arg, Ordering::Relaxed);
    p.command.store(command, Ordering::Release);
    // Wake it if it waits in HLT.
    apic::send_ipi(p.apic_id as u8, VECTOR_RESCHEDULE);
}

pub fn wait_done(cpu: usize) {
    while percpu(cpu).done.load(Ordering::Acquire) == 0 {
        core::hint::spin_loop();
    }
}

/// Runs one of the kernel's own commands on AP `cpu` and waits for its
/// reply. The AP takes commands in its idle loop, which also takes the
/// scheduler lock: never call this holding it.
pub fn ask(cpu: usize, command: u32) -> u32 {
    post(cpu, command, 0);
    wait_done(cpu);
    percpu(cpu).arg.load(Ordering::Acquire)
}

/// Runs `command` on every started AP at once and waits for them all.
/// Not under the scheduler lock (see [`ask`]).
pub fn on_every_ap(command: u32) {
    let n = cpus().started;
    for cpu in 1..n {
        post(cpu, command, 0);
    }
    for cpu in 1..n {
        wait_done(cpu);
    }
}

/// The top of AP `cpu`'s boot stack (the one the trampoline switched to).
fn ap_stack_top(cpu: usize) -> u32 {
    AP_STACKS.as_ptr() as u32 + ((cpu + 1) * AP_STACK) as u32
}

/// An AP's own CPU state, first thing in `ap_main`: its TSS and per-CPU
/// segment, its own IDT, its local APIC. Returns its stack top (for the
/// per-CPU entry MSRs).
pub fn ap_init(cpu: usize) -> u32 {
    // The first thing an AP does, on the stack the mailbox gave it: say
    // it arrived, unless the BSP has given up on it ([`start`]).
    if percpu(cpu)
        .started
        .compare_exchange(
            start::WAITING,
            start::ARRIVED,
            Ordering::AcqRel,
            Ordering::Acquire,
        )
        .is_err()
    {
        // Abandoned: park, interrupts off, touching nothing shared.
        super::power::halt_forever();
    }
    super::gdt::init_ap(cpu);
    super::idt::load(cpu);
    super::marker::announce_tables(
        super::idt::address(cpu),
        super::gdt::gdtr().1,
        super::gdt::tss_address(cpu),
    );
    apic::enable();
    ap_stack_top(cpu)
}
