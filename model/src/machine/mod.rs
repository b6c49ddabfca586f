//! The model of a machine: per-CPU L1D, TLBs and counters, the L2 (per CPU
//! or shared) and the optional shared L3, fed one event at a time by the
//! plugin (or by a test): an instruction executes, a data access happens.
//!
//! Modelled cycles = instruction costs (the profile's base plus the extra of
//! the instruction's class) + memory stalls (the latency of the level that
//! hits, less the L1 latency already inside the base cost) + TLB costs (an
//! STLB hit's latency, or a page walk) + coherence costs (a line from
//! another CPU's cache, invalidating other copies before a write).
//!
//! Rules for what the plugin cannot see, each stated where it is applied:
//! - A page is global iff it lies in the kernel's identity map
//!   (`[0, KERNEL_MAP_END)`) and the machine was built with `pge` (CR4.PGE
//!   and PTE.G in use). This kernel sets neither (kernel/src/arch/paging.rs),
//!   so the plugin's default is off: a CR3 write empties the TLBs.
//! - `int n` delivery reads the IDT entry, the GDT descriptor of the kernel
//!   code segment and, from ring 3, the TSS's ESP0/SS0 and the kernel data
//!   descriptor; QEMU shows the plugin none of these reads, so `deliver`
//!   makes them, at the addresses the kernel announced. The pushes onto the
//!   kernel stack are not modelled (their address, ESP0, is not known).
//! - Exceptions and hardware interrupts are delivered by QEMU outside any
//!   instruction the plugin sees: they are not charged.
//! - `invlpg` flushes the page the kernel announced with `INVLPG_PAGE`
//!   just before it; without an announcement no modelled entry is dropped.
//!
//! With one CPU each event is applied as it arrives; with several,
//! `order` queues them per CPU and applies them in modelled-clock order.
//! `memory` is the data side: the TLB lookups and each line's way
//! through L1, L2, L3 and the other CPUs' caches.
//!
//! Coherence is MESI over each CPU's private caches (`coherence`): the L1,
//! and the L2 unless the profile shares it. With one CPU there is no
//! queue and no directory.

mod feed;
mod memory;
mod order;
mod ring;
#[cfg(test)]
mod tests;
mod window;

pub use feed::{Feed, Site};
pub use order::MAX_BUFFERED;
use order::{Front, WORDS};
use window::{Lane, Window};

use abi::layout::{selector, KERNEL_MAP_END, PAGE_SIZE, USER_BASE};
use abi::model::{
    ANNOUNCE_GDT, ANNOUNCE_IDT, ANNOUNCE_TSS, ARG_WINDOW, ARG_WINDOW_SIZE, INVLPG_PAGE,
    MAX_SNAPS_PER_STREAM, SNAP_KERNEL, SNAP_USER,
};

use crate::cache::Cache;
use crate::coherence::{Directory, MAX_CPUS};
use crate::decode::{classify, Class, Decoded};
use crate::profile::{Profile, Virt};
use crate::tlb::Tlb;

const PAGE_SHIFT: u32 = PAGE_SIZE.trailing_zeros();
/// Bytes of one IDT entry or GDT descriptor (SDM Vol. 3A §6.11, §3.4.5).
const DESCRIPTOR_BYTES: u32 = 8;
/// Offset and size of ESP0 and SS0 in the 32-bit TSS (SDM Vol. 3A §7.2.1).
const TSS_ESP0_OFFSET: u32 = 4;
const TSS_ESP0_SS0_BYTES: u32 = 8;
const NO_PAGE: u32 = u32::MAX;
/// No virtual line (an address shifted right by at least 5 bits never is).
const NO_LINE: u32 = u32::MAX;

/// An instruction counted by the plugin's inline add (see [`Step`]) adds
/// `1 << INLINE_INSN_SHIFT | cost` to one 64-bit accumulator: instructions
/// in the high bits, cycles in the low ones, so one add counts both.
pub const INLINE_INSN_SHIFT: u32 = 40;
/// The highest cost an inline instruction may carry, and the most inline
/// instructions in a row: together they keep the cycles field of the
/// accumulator from overflowing into the instruction count before the
/// next call empties it ([`Machine::credit`]).
const INLINE_MAX_COST: u32 = 1 << 20;
const INLINE_MAX_RUN: usize = 1 << 12;
const _: () = assert!(
    (INLINE_MAX_COST as u64) * (INLINE_MAX_RUN as u64) < 1 << INLINE_INSN_SHIFT,
    "a run of inline instructions fits the cycles field"
);

/// One CPU's running totals, as the snapshot lines give them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counters {
    /// Instructions executed, markers included (so this matches icount).
    pub insns: u64,
    pub cycles: u64,
    /// Data lines that missed L1D.
    pub l1_misses: u64,
    /// Data lines that missed L2.
    pub l2_misses: u64,
    /// Page walks: accesses that missed every TLB level.
    pub tlb_misses: u64,
    /// CR3 writes, CR0/CR4 writes and invlpg.
    pub tlb_flushes: u64,
    /// Misses served by another CPU's cache (it held the line E or M),
    /// pair prefetches of a line another CPU held M included.
    pub coherence_misses: u64,
    /// Copies in other CPUs' caches this CPU's writes invalidated.
    pub invalidations: u64,
    /// Dirty lines that came from another CPU's cache.
    pub transfers: u64,
    /// Copies of this CPU's that other CPUs' writes invalidated.
    pub invalidations_received: u64,
    /// This CPU's writes to lines it held Shared (S to M).
    pub upgrades: u64,
    /// IPIs this CPU sent: its stores to the local APIC's ICR, each of
    /// which pays a VM exit under `virt` (no posted interrupts). Counted
    /// at the send, not at the handler's entry: the send is the event the
    /// model charges, and a target that takes two sends of one vector
    /// while its interrupts are off enters the handler once.
    pub ipis: u64,
    /// VM exits this CPU took under `virt`: CR3 writes and `invlpg` under
    /// shadow paging, `hlt`, each IPI it sent (the ICR write) and each IPI
    /// that kicked it out while it ran (one that woke it from `hlt` came
    /// in with the wake-up). Each is charged the profile's `vmexit` inside
    /// `cycles`; this counts them, so a figure says how many it paid.
    pub vm_exits: u64,
}

impl Counters {
    /// The whole machine's counters of `self` plus `other`'s (the rest
    /// stays): the coherence counters and the IPIs.
    fn add_machine_wide(&mut self, o: &Counters) {
        self.coherence_misses += o.coherence_misses;
        self.invalidations += o.invalidations;
        self.transfers += o.transfers;
        self.invalidations_received += o.invalidations_received;
        self.upgrades += o.upgrades;
        self.ipis += o.ipis;
    }
}

/// Plugin options beside the profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `virt=on` (shadow paging): CR3 writes, invlpg and IPI sends pay a
    /// VM exit; `virt=ept`: IPI sends do, and TLB misses walk two
    /// dimensions (`profile::Virt`).
    pub virt: Virt,
    /// `pge=on`: kernel identity-map pages are global (see the module doc).
    pub pge: bool,
}

/// An instruction as translated: where it is, its class, its whole cost.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    pub vaddr: u32,
    pub decoded: Decoded,
    pub cost: u32,
}

/// How the plugin has one instruction of a translated block counted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// A call of [`Machine::exec`] when it executes.
    Call,
    /// An inline add of this value to the accumulator that the next
    /// [`Machine::credit`] empties: QEMU's generated code does it, no call.
    Inline(u64),
}

/// One snapshot: CPU `cpu`'s totals at its `seq`-th marker of `stream`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Snap {
    pub cpu: usize,
    pub stream: u16,
    pub seq: u64,
    pub counters: Counters,
    /// Every CPU's coherence counters and IPIs, summed, at the snapshot
    /// (in clock order); its other fields are 0.
    pub machine: Counters,
    /// The CPU's modelled time: its cycles plus the time it waited.
    pub clock: u64,
}

/// The modelled state of one CPU.
#[derive(Clone, Debug)]
struct Cpu {
    c: Counters,
    /// Idle time added to the clock when the CPU woke (not in `c.cycles`).
    idle: u64,
    /// The IPI (its number, from 1) that last woke this CPU from HLT, 0
    /// when none did: under `virt` that IPI's delivery came in with the
    /// wake-up's VM entry, not with an exit of its own.
    woken_by: u64,
    l1: Cache,
    dtlb: Tlb,
    itlb: Tlb,
    stlb: Option<Tlb>,
    /// The page of the last instruction: it is the most recently used entry
    /// of the ITLB, so the next instruction on that page hits without a
    /// lookup. Likewise the last data page (DTLB) and the last data line
    /// (L1D, with whether it is already Modified). Cleared by every flush
    /// and by coherence actions on the line.
    last_ipage: u32,
    last_dpage: u32,
    last_line: u64,
    last_line_dirty: bool,
    /// The virtual line (address >> line shift) of the last data access
    /// when it lay in one line, or NO_LINE: the same virtual line is the
    /// same physical one while the page's translation stands, which every
    /// flush ends (`forget_pages`). One CPU's `Machine::repeat` reads it.
    last_vline: u32,
    invlpg_page: Option<u32>,
    gdt: Option<u32>,
    tss: Option<u32>,
    idt: Option<u32>,
    /// Next sequence number of the user and kernel snapshot streams.
    seq: [u64; 2],
}

impl Cpu {
    fn new(p: &Profile) -> Cpu {
        Cpu {
            c: Counters::default(),
            idle: 0,
            woken_by: 0,
            l1: Cache::new(p.l1d()),
            dtlb: Tlb::new(p.dtlb()),
            itlb: Tlb::new(p.itlb()),
            stlb: p.stlb().map(Tlb::new),
            last_ipage: NO_PAGE,
            last_dpage: NO_PAGE,
            last_line: u64::MAX,
            last_line_dirty: false,
            last_vline: NO_LINE,
            invlpg_page: None,
            gdt: None,
            tss: None,
            idt: None,
            seq: [0; 2],
        }
    }

    fn clock(&self) -> u64 {
        self.c.cycles + self.idle
    }

    /// The first-level TLB of instruction or of data pages.
    #[inline(always)]
    fn first_tlb(&mut self, instruction: bool) -> &mut Tlb {
        if instruction {
            &mut self.itlb
        } else {
            &mut self.dtlb
        }
    }

    fn forget_pages(&mut self) {
        self.last_ipage = NO_PAGE;
        self.last_dpage = NO_PAGE;
        self.last_vline = NO_LINE;
    }
}

/// The whole model.
#[derive(Clone, Debug)]
pub struct Machine {
    profile: Profile,
    opts: Options,
    fronts: Vec<Front>,
    cpus: Vec<Cpu>,
    l2: Vec<Cache>,
    l3: Option<Cache>,
    /// Several CPUs: events wait in lanes, coherence is modelled.
    ordered: bool,
    dir: Directory,
    /// The lanes of events between QEMU's order and clock order, and what
    /// of them is applied (`window`).
    w: Window,
    /// The last write to each word, in QEMU's order: (word, CPU, serial);
    /// and in applied order, with the writer's clock after it. Direct-
    /// mapped; a collision only loses an ordering constraint.
    front_writes: Vec<(u32, u8, u64)>,
    applied_writes: Vec<(u32, u8, u64, u64)>,
    /// IPIs sent, in QEMU's order, and the clock of each one applied.
    ipis_sent: u64,
    ipi_clocks: Vec<u64>,
    /// The IDT last announced by any CPU (a CPU that announced none uses it).
    idt: Option<u32>,
    snaps: Vec<Snap>,
    line_shift: u32,
}

impl Machine {
    /// A machine of `ncpus` CPUs (more are added when they show up, up to
    /// [`MAX_CPUS`]). With more than one, events are ordered and coherence
    /// is modelled.
    pub fn new(profile: Profile, opts: Options, ncpus: usize) -> Result<Machine, String> {
        profile.check()?;
        if ncpus > MAX_CPUS {
            return Err(format!(
                "the model handles at most {MAX_CPUS} CPUs, not {ncpus}"
            ));
        }
        let mut m = Machine {
            line_shift: profile.line.trailing_zeros(),
            l3: profile.l3().map(Cache::new),
            l2: Vec::new(),
            fronts: Vec::new(),
            cpus: Vec::new(),
            ordered: ncpus > 1,
            dir: Directory::new(),
            w: Window::new(),
            front_writes: Vec::new(),
            applied_writes: Vec::new(),
            ipis_sent: 0,
            ipi_clocks: Vec::new(),
            idt: None,
            snaps: Vec::new(),
            profile,
            opts,
        };
        m.grow(ncpus.max(1) - 1);
        Ok(m)
    }

    /// Reference mode (see the field): the plain way, for comparisons.
    pub fn set_reference(&mut self, on: bool) {
        self.w.reference = on;
    }

    /// Whether it is in reference mode ([`Machine::set_reference`]).
    pub fn reference(&self) -> bool {
        self.w.reference
    }

    /// Events applied out of clock order because the queues were full.
    pub fn forced(&self) -> u64 {
        self.w.forced
    }

    /// Sets the count of forced events (the report's tests).
    #[cfg(test)]
    pub(crate) fn set_forced(&mut self, n: u64) {
        self.w.forced = n;
    }

    /// One CPU, not in reference mode: the quick cases
    /// ([`Machine::exec_alone`], [`Machine::repeat_alone`],
    /// [`Machine::access_alone`]) apply.
    #[inline(always)]
    pub fn alone(&self) -> bool {
        !self.ordered && !self.w.reference
    }

    pub fn profile(&self) -> &Profile {
        &self.profile
    }

    pub fn options(&self) -> Options {
        self.opts
    }

    pub fn ncpus(&self) -> usize {
        self.cpus.len()
    }

    pub fn counters(&self, cpu: usize) -> Counters {
        self.cpus.get(cpu).map(|c| c.c).unwrap_or_default()
    }

    pub fn snaps(&self) -> &[Snap] {
        &self.snaps
    }

    #[inline(always)]
    fn ensure(&mut self, cpu: usize) {
        if cpu >= self.cpus.len() {
            self.grow(cpu);
        }
    }

    #[cold]
    fn grow(&mut self, cpu: usize) {
        let cpu = cpu.min(MAX_CPUS - 1);
        while self.cpus.len() <= cpu {
            self.cpus.push(Cpu::new(&self.profile));
            self.fronts.push(Front::new());
            self.w.lanes.push(Lane::new());
            if self.l2.is_empty() || self.profile.l2_shared == 0 {
                self.l2.push(Cache::new(self.profile.l2()));
            }
        }
        if !self.ordered && self.cpus.len() > 1 {
            // The machine starts to order events: the frontier is the
            // highest clock so far (the window's invariant).
            self.ordered = true;
            self.w.frontier = self.cpus.iter().map(Cpu::clock).max().unwrap_or(0);
        }
        if self.ordered && self.front_writes.is_empty() {
            self.front_writes = vec![(u32::MAX, 0, 0); WORDS];
            self.applied_writes = vec![(u32::MAX, 0, 0, 0); WORDS];
        }
    }

    fn l2_of(&self, cpu: usize) -> usize {
        if self.profile.l2_shared == 1 {
            0
        } else {
            cpu
        }
    }

    /// Decodes the instruction at `vaddr` once, at translation time.
    pub fn decode(&self, bytes: &[u8], vaddr: u32) -> Insn {
        let decoded = classify(bytes);
        Insn {
            vaddr,
            decoded,
            cost: self.profile.insn_cost(decoded.class, self.opts.virt),
        }
    }

    /// How each instruction of a translated block is to be counted. An
    /// instruction whose execution only adds its cost and its
    /// count, because it is no marker, flushes no TLB, delivers no
    /// interrupt, does not halt and lies on the page of the instruction
    /// before it in the block (so its ITLB lookup is the hit the model
    /// skips), is [`Step::Inline`]; every other is a [`Step::Call`], the
    /// first of each block among them. The counters come out the same
    /// either way, as long as every call of [`Machine::exec`] is preceded
    /// by a [`Machine::credit`] of what the inline adds summed since the
    /// last. (QEMU enters a block only at its start, and runs the hooks of
    /// an instruction it re-executes, after a fault or an I/O recompile,
    /// again either way.) With several CPUs the credit names the CPU and
    /// carries each instruction's cost, so the run still takes its place
    /// in clock order instruction by instruction (`order`).
    pub fn plan(&self, block: &[Insn]) -> Vec<Step> {
        // The page the CPU's last instruction page is known to hold when
        // the next instruction of the block starts.
        let mut known: Option<u32> = None;
        let mut run = 0;
        block
            .iter()
            .map(|insn| {
                let page = insn.vaddr >> PAGE_SHIFT;
                let step = if insn.decoded.class.only_costs()
                    && known == Some(page)
                    && insn.cost < INLINE_MAX_COST
                    && run < INLINE_MAX_RUN
                {
                    run += 1;
                    Step::Inline(1 << INLINE_INSN_SHIFT | u64::from(insn.cost))
                } else {
                    run = 0;
                    Step::Call
                };
                match insn.decoded.class {
                    // A marker leaves the last instruction page as it was.
                    Class::Marker => {}
                    // A flush forgets it.
                    Class::MovCr3 | Class::MovCrPaging | Class::Invlpg => known = None,
                    _ => known = Some(page),
                }
                step
            })
            .collect()
    }

    /// Counts on `cpu` what the inline adds of [`Step::Inline`]
    /// instructions summed (`acc`, packed as [`INLINE_INSN_SHIFT`] says):
    /// the instructions whose costs are `run`, in order, executed since
    /// the CPU's last event. With one CPU they are added at once; with
    /// several they wait in the CPU's lane as one run (joined to the
    /// instruction before it if that still waits), applied in clock
    /// order instruction by instruction (as many calls of
    /// [`Machine::exec`] would have been).
    #[inline(always)]
    pub fn credit(&mut self, cpu: usize, acc: u64, run: &'static [u32]) {
        if acc == 0 {
            return;
        }
        self.ensure(cpu);
        if self.ordered && !run.is_empty() {
            debug_assert_eq!(run.len() as u64, acc >> INLINE_INSN_SHIFT);
            self.queue_run(cpu, run, acc & ((1 << INLINE_INSN_SHIFT) - 1));
        } else {
            let c = &mut self.cpus[cpu.min(MAX_CPUS - 1)].c;
            c.insns += acc >> INLINE_INSN_SHIFT;
            c.cycles += acc & ((1 << INLINE_INSN_SHIFT) - 1);
        }
    }
}

impl Machine {
    // ---- The model proper, in clock order. ----

    fn argument(&mut self, cpu: usize, id: u16, value: u32) {
        let c = &mut self.cpus[cpu];
        match id {
            ANNOUNCE_IDT => {
                c.idt = Some(value);
                self.idt = Some(value);
            }
            ANNOUNCE_GDT => c.gdt = Some(value),
            ANNOUNCE_TSS => c.tss = Some(value),
            INVLPG_PAGE if (ARG_WINDOW..ARG_WINDOW + ARG_WINDOW_SIZE).contains(&value) => {
                c.invlpg_page = Some(value - ARG_WINDOW)
            }
            _ => {}
        }
    }

    /// An instruction, applied now: [`Machine::execute`], with the common
    /// case inline (an instruction that only costs, on the CPU's last
    /// instruction page, which only adds its count and cost).
    #[inline(always)]
    fn execute_quick(&mut self, cpu: usize, insn: &Insn) {
        let c = &mut self.cpus[cpu];
        if insn.decoded.class.only_costs() && insn.vaddr >> PAGE_SHIFT == c.last_ipage {
            c.c.insns += 1;
            c.c.cycles += u64::from(insn.cost);
        } else {
            self.execute(cpu, insn);
        }
    }

    /// An instruction, applied now.
    #[inline]
    fn execute(&mut self, cpu: usize, insn: &Insn) {
        let c = &mut self.cpus[cpu];
        c.c.insns += 1;
        if insn.decoded.class == Class::Marker {
            self.marker(cpu, insn.decoded.marker);
            return;
        }
        c.c.cycles += u64::from(insn.cost);
        let page = insn.vaddr >> PAGE_SHIFT;
        if page != c.last_ipage {
            let cost = self.tlb(cpu, page, true);
            let c = &mut self.cpus[cpu];
            c.c.cycles += cost;
            c.last_ipage = page;
        }
        let c = &mut self.cpus[cpu];
        if self.opts.virt.exits_on(insn.decoded.class) {
            c.c.vm_exits += 1;
        }
        match insn.decoded.class {
            Class::MovCr3 => {
                c.c.tlb_flushes += 1;
                c.dtlb.flush_non_global();
                c.itlb.flush_non_global();
                if let Some(s) = &mut c.stlb {
                    s.flush_non_global();
                }
                c.forget_pages();
            }
            Class::MovCrPaging => {
                // CR0.PG or CR4.PGE may have changed (the value is unseen):
                // everything goes (SDM Vol. 3A §4.10.4.1).
                c.c.tlb_flushes += 1;
                c.dtlb.flush_all();
                c.itlb.flush_all();
                if let Some(s) = &mut c.stlb {
                    s.flush_all();
                }
                c.forget_pages();
            }
            Class::Invlpg => {
                c.c.tlb_flushes += 1;
                if let Some(page) = c.invlpg_page.take() {
                    c.dtlb.flush_page(page);
                    c.itlb.flush_page(page);
                    if let Some(s) = &mut c.stlb {
                        s.flush_page(page);
                    }
                }
                c.forget_pages();
            }
            Class::IntN => {
                let from_user = insn.vaddr >= USER_BASE;
                self.deliver(cpu, insn.decoded.vector, from_user);
            }
            _ => {}
        }
    }

    fn marker(&mut self, cpu: usize, id: u16) {
        let c = &mut self.cpus[cpu];
        let stream = match id {
            SNAP_USER => 0,
            SNAP_KERNEL => 1,
            _ => return,
        };
        let seq = c.seq[stream];
        c.seq[stream] += 1;
        if seq >= MAX_SNAPS_PER_STREAM {
            // Counted (the guest's numbering goes on), not kept: see
            // `capped`.
            return;
        }
        let (counters, clock) = (c.c, c.clock());
        let mut machine = Counters::default();
        for o in &self.cpus {
            machine.add_machine_wide(&o.c);
        }
        self.snaps.push(Snap {
            cpu,
            stream: id,
            seq,
            counters,
            machine,
            clock,
        });
    }

    /// The reads of a software interrupt's delivery (SDM Vol. 3A §6.12.1):
    /// the IDT entry, the handler's code descriptor and, on a privilege
    /// change, the TSS's ring-0 stack and its data descriptor. Tables live
    /// in the kernel's identity map.
    fn deliver(&mut self, cpu: usize, vector: u8, from_user: bool) {
        let c = &self.cpus[cpu];
        let (idt, gdt, tss) = (c.idt.or(self.idt), c.gdt, c.tss);
        let mut reads: Vec<(u32, u32)> = Vec::with_capacity(4);
        if let Some(idt) = idt {
            reads.push((idt + DESCRIPTOR_BYTES * u32::from(vector), DESCRIPTOR_BYTES));
        }
        if let Some(gdt) = gdt {
            reads.push((
                gdt + descriptor_offset(selector::KERNEL_CODE),
                DESCRIPTOR_BYTES,
            ));
            if from_user {
                reads.push((
                    gdt + descriptor_offset(selector::KERNEL_DATA),
                    DESCRIPTOR_BYTES,
                ));
            }
        }
        if let (true, Some(tss)) = (from_user, tss) {
            reads.push((tss + TSS_ESP0_OFFSET, TSS_ESP0_SS0_BYTES));
        }
        for (addr, size) in reads {
            if addr < KERNEL_MAP_END {
                self.data(cpu, addr, u64::from(addr), size, false);
            }
        }
    }

    /// The snapshot file (format: `abi::model`). Call [`Machine::finish`]
    /// first, so that no event still waits.
    pub fn report(&self, ncpus: usize) -> String {
        let p = &self.profile;
        let mut out = format!(
            "model1 profile={} virt={} ncpus={}\nparam",
            p.name,
            self.opts.virt.code(),
            ncpus.max(self.cpus.len())
        );
        for (k, v) in p.params() {
            out.push_str(&format!(" {k}={v}"));
        }
        out.push_str(&format!(" pge={}\n", u8::from(self.opts.pge)));
        for s in &self.snaps {
            let (c, m) = (&s.counters, &s.machine);
            out.push_str(&format!(
                "snap cpu={} stream={} seq={} insns={} cycles={} l1_misses={} l2_misses={} tlb_misses={} tlb_flushes={} coherence_misses={} invalidations={} transfers={} invalidations_received={} upgrades={} ipis={} vm_exits={} clock={}\n",
                s.cpu, s.stream, s.seq, c.insns, c.cycles, c.l1_misses, c.l2_misses,
                c.tlb_misses, c.tlb_flushes, m.coherence_misses, m.invalidations, m.transfers,
                m.invalidations_received, m.upgrades, m.ipis, c.vm_exits, s.clock
            ));
        }
        for (cpu, stream, dropped) in self.capped() {
            out.push_str(&format!(
                "capped cpu={cpu} stream={stream} kept={MAX_SNAPS_PER_STREAM} dropped={dropped}\n"
            ));
        }
        if self.w.forced > 0 {
            out.push_str(&format!(
                "forced events={} limit={}\n",
                self.w.forced, self.w.bound
            ));
        }
        out.push_str("end\n");
        out
    }

    /// The streams that reached [`MAX_SNAPS_PER_STREAM`]: (CPU, stream,
    /// snapshots dropped).
    pub fn capped(&self) -> Vec<(usize, u16, u64)> {
        let mut v = Vec::new();
        for (cpu, c) in self.cpus.iter().enumerate() {
            for (i, id) in [SNAP_USER, SNAP_KERNEL].into_iter().enumerate() {
                if c.seq[i] > MAX_SNAPS_PER_STREAM {
                    v.push((cpu, id, c.seq[i] - MAX_SNAPS_PER_STREAM));
                }
            }
        }
        v
    }
}

/// Byte offset of a selector's descriptor in its table.
fn descriptor_offset(sel: u16) -> u32 {
    u32::from(sel & !7)
}
