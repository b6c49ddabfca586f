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
//! # Several CPUs
//!
//! QEMU runs the vCPUs round-robin, each for a long slice, so the order in
//! which their events reach the plugin is not the order parallel hardware
//! would run them. With more than one CPU the machine therefore keeps a
//! queue of events per CPU ("lane") and applies them in modelled-clock
//! order: it always applies the next event of the CPU whose clock is
//! lowest, and only while no other running CPU with an empty queue is
//! behind that clock (that CPU's next events, not yet seen, could come
//! first). The rule assumes that a CPU's modelled clock advances with the
//! events it has been given, and it treats a CPU as not running, so as
//! constraining nobody, until its first event and after a `hlt` with
//! nothing queued; when such a CPU's events arrive, its clock is moved up
//! to the clock of the IPI that woke it (below), or else to the latest
//! clock applied so far (it woke "now"); the idle time counts in its clock
//! but not in its cycles. QEMU lets an IPI's sender run on for the rest of
//! its slice before the target runs, so a CPU that sends an IPI (a store to
//! the local APIC's ICR) waits at the send's clock until another CPU
//! produces an event; a halted CPU woken then resumes at that clock.
//! Communication through memory orders events too: an access to a 4-byte
//! word whose last write, in QEMU's order, was another CPU's saw that
//! write's value, so it is applied after it and its CPU's clock moves up to
//! the writer's clock at the write (a lock hand-off, a barrier, ping-pong).
//! Different words of one line (false sharing) impose no order. The tables
//! of last writes are direct-mapped: a collision loses one constraint. When more than
//! [`MAX_BUFFERED`] events wait, the lowest-clock event is applied anyway
//! (counted, and reported when QEMU exits).
//!
//! Coherence is MESI over each CPU's private caches (`coherence`): the L1,
//! and the L2 unless the profile shares it. With one CPU there is no
//! queue and no directory.

use std::collections::VecDeque;

use abi::layout::{selector, KERNEL_MAP_END, PAGE_SIZE, USER_BASE};
use abi::model::{
    device_interrupt_vector, interrupt_vector, ANNOUNCE_GDT, ANNOUNCE_IDT, ANNOUNCE_TSS,
    ARG_WINDOW, ARG_WINDOW_SIZE, INVLPG_PAGE, SNAP_KERNEL, SNAP_USER,
};

use crate::cache::{Cache, LineState};
use crate::coherence::{Directory, Outcome, MAX_CPUS};
use crate::decode::{classify, Class, Decoded};
use crate::profile::{Profile, PAIR_BYTES};
use crate::tlb::Tlb;

const PAGE_SHIFT: u32 = PAGE_SIZE.trailing_zeros();
/// Bytes of one IDT entry or GDT descriptor (SDM Vol. 3A §6.11, §3.4.5).
const DESCRIPTOR_BYTES: u32 = 8;
/// Offset and size of ESP0 and SS0 in the 32-bit TSS (SDM Vol. 3A §7.2.1).
const TSS_ESP0_OFFSET: u32 = 4;
const TSS_ESP0_SS0_BYTES: u32 = 8;
/// Entries of each CPU's cache of virtual-to-physical page translations
/// (plugin bookkeeping, not a modelled structure).
const XLATE_ENTRIES: usize = 512;
const NO_PAGE: u32 = u32::MAX;
/// A translation cache value: the page is MMIO (not modelled).
const IO_PAGE: u32 = u32::MAX;
/// The local APIC's interrupt command register, low half: a store there
/// sends an IPI. The architectural default base (SDM Vol. 3A §10.4.1),
/// where this kernel maps it (identity, kernel/src/arch/apic.rs), and the
/// register's offset (SDM Vol. 3A Table 10-1).
const LAPIC_BASE: u32 = 0xFEE0_0000;
const LAPIC_ICR_LOW: u32 = LAPIC_BASE + 0x300;
/// Bytes of the local APIC's register page (SDM Vol. 3A §10.4.1).
const LAPIC_BYTES: u32 = 0x1000;
/// Entries of the tables of last writes per 4-byte word (multi-CPU only).
const WORDS: usize = 1 << 20;
/// Events that may wait for clock order before the oldest is forced
/// (48 bytes each: at most about 200 MB of queue).
pub const MAX_BUFFERED: usize = 4 << 20;

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
}

impl Counters {
    /// The coherence counters of `self` plus `other`'s (the rest stays).
    fn add_coherence(&mut self, o: &Counters) {
        self.coherence_misses += o.coherence_misses;
        self.invalidations += o.invalidations;
        self.transfers += o.transfers;
        self.invalidations_received += o.invalidations_received;
        self.upgrades += o.upgrades;
    }
}

/// Plugin options beside the profile.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Options {
    /// `virt=on`: CR3 writes and invlpg pay a VM exit.
    pub virt: bool,
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
    /// Every CPU's coherence counters, summed, at the snapshot (in clock
    /// order); its other fields are 0.
    pub machine: Counters,
    /// The CPU's modelled time: its cycles plus the time it waited.
    pub clock: u64,
}

/// What a CPU did, as it waits for its turn in clock order.
#[derive(Clone, Copy, Debug)]
enum Event {
    Exec(Insn),
    Access {
        vaddr: u32,
        paddr: u64,
        size: u32,
        write: bool,
        /// The last write to this word by another CPU in QEMU's order (the
        /// access saw its value): (CPU, that event's serial in its lane).
        after: Option<(u8, u64)>,
    },
    /// A marker's argument (the address of the load after it).
    Arg(u16, u32),
    /// The CPU starts or wakes from `hlt`: its clock moves up to the clock
    /// of IPI number `ipi` (counted from 1, in QEMU's order), the last one
    /// sent since it halted, or, with none (0), to the latest clock applied.
    /// It waits until that IPI is applied.
    Wake {
        ipi: u64,
    },
    /// An access to the local APIC's registers; `send`: the store to the
    /// ICR that sends an IPI.
    Apic {
        send: bool,
    },
    /// The CPU entered the handler of interrupt `vector` (its marker): the
    /// delivery of the IPI number `ipi` (counted from 1 in QEMU's order;
    /// the last one sent before; 0: none, a device's interrupt), which it
    /// waits for; `from_user`: it interrupted ring 3.
    Interrupt {
        vector: u8,
        ipi: u64,
        from_user: bool,
    },
}

/// The plugin-side state of a CPU, kept in QEMU's order: what QEMU's own
/// state decides (the argument channel, the page translations).
#[derive(Clone, Debug)]
struct Front {
    /// A marker that waits for its argument load (0: none).
    pending_arg: u16,
    /// The last instruction ran in ring 3 (code at or above `USER_BASE`):
    /// what an interrupt handler's marker right after it interrupted.
    in_user: bool,
    /// (virtual page, physical page or IO_PAGE), direct-mapped.
    xlate: Vec<(u32, u32)>,
}

impl Front {
    fn new() -> Front {
        Front {
            pending_arg: 0,
            in_user: false,
            xlate: vec![(NO_PAGE, 0); XLATE_ENTRIES],
        }
    }
}

/// A CPU's queue of events and whether it is running.
#[derive(Clone, Debug, Default)]
struct Lane {
    queue: VecDeque<Event>,
    /// Not yet started, or its last event was a `hlt`.
    stopped: bool,
    /// It sent an IPI, and no other CPU has produced an event since: once
    /// the IPI is applied (`ipi_applied`), it waits at the send's clock.
    hold: bool,
    ipi_applied: bool,
    /// IPIs sent (in QEMU's order) when this CPU last halted.
    ipis_at_stop: u64,
    /// Events applied so far: the serial number of the queue's head (an
    /// event's serial is its position in everything the lane was given).
    applied: u64,
}

impl Lane {
    fn held(&self) -> bool {
        self.hold && self.ipi_applied
    }
}

/// The modelled state of one CPU.
#[derive(Clone, Debug)]
struct Cpu {
    c: Counters,
    /// Idle time added to the clock when the CPU woke (not in `c.cycles`).
    idle: u64,
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
            l1: Cache::new(p.l1d()),
            dtlb: Tlb::new(p.dtlb()),
            itlb: Tlb::new(p.itlb()),
            stlb: p.stlb().map(Tlb::new),
            last_ipage: NO_PAGE,
            last_dpage: NO_PAGE,
            last_line: u64::MAX,
            last_line_dirty: false,
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

    fn forget_pages(&mut self) {
        self.last_ipage = NO_PAGE;
        self.last_dpage = NO_PAGE;
    }
}

/// The whole model.
#[derive(Clone, Debug)]
pub struct Machine {
    profile: Profile,
    opts: Options,
    fronts: Vec<Front>,
    cpus: Vec<Cpu>,
    lanes: Vec<Lane>,
    l2: Vec<Cache>,
    l3: Option<Cache>,
    /// Several CPUs: events wait in lanes, coherence is modelled.
    ordered: bool,
    dir: Directory,
    /// The highest clock of an applied event.
    frontier: u64,
    /// The last write to each word, in QEMU's order: (word, CPU, serial);
    /// and in applied order, with the writer's clock after it. Direct-
    /// mapped; a collision only loses an ordering constraint.
    front_writes: Vec<(u32, u8, u64)>,
    applied_writes: Vec<(u32, u8, u64, u64)>,
    /// IPIs sent, in QEMU's order, and the clock of each one applied.
    ipis_sent: u64,
    ipi_clocks: Vec<u64>,
    buffered: usize,
    /// Events applied out of clock order because the queues were full.
    pub forced: u64,
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
            lanes: Vec::new(),
            ordered: ncpus > 1,
            dir: Directory::new(),
            frontier: 0,
            front_writes: Vec::new(),
            applied_writes: Vec::new(),
            ipis_sent: 0,
            ipi_clocks: Vec::new(),
            buffered: 0,
            forced: 0,
            idt: None,
            snaps: Vec::new(),
            profile,
            opts,
        };
        m.grow(ncpus.max(1) - 1);
        Ok(m)
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
            self.lanes.push(Lane {
                stopped: true,
                ..Lane::default()
            });
            if self.l2.is_empty() || self.profile.l2_shared == 0 {
                self.l2.push(Cache::new(self.profile.l2()));
            }
        }
        self.ordered |= self.cpus.len() > 1;
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

    /// How each instruction of a translated block is to be counted. With
    /// one CPU, an instruction whose execution only adds its cost and its
    /// count, because it is no marker, flushes no TLB, delivers no
    /// interrupt, does not halt and lies on the page of the instruction
    /// before it in the block (so its ITLB lookup is the hit the model
    /// skips), is [`Step::Inline`]; every other is a [`Step::Call`], the
    /// first of each block among them. The counters come out the same
    /// either way, as long as every call of [`Machine::exec`] is preceded
    /// by a [`Machine::credit`] of what the inline adds summed since the
    /// last. (QEMU enters a block only at its start, and runs the hooks of
    /// an instruction it re-executes, after a fault or an I/O recompile,
    /// again either way.) With several CPUs every instruction is a call
    /// (their events are ordered one by one).
    pub fn plan(&self, block: &[Insn]) -> Vec<Step> {
        // The page the CPU's last instruction page is known to hold when
        // the next instruction of the block starts.
        let mut known: Option<u32> = None;
        let mut run = 0;
        block
            .iter()
            .map(|insn| {
                let page = insn.vaddr >> PAGE_SHIFT;
                let plain = !matches!(
                    insn.decoded.class,
                    Class::Marker
                        | Class::MovCr3
                        | Class::MovCrPaging
                        | Class::Invlpg
                        | Class::IntN
                        | Class::Hlt
                );
                let step = if !self.ordered
                    && plain
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

    /// Counts on CPU 0 what the inline adds of [`Step::Inline`]
    /// instructions summed (`acc`, packed as [`INLINE_INSN_SHIFT`] says).
    #[inline(always)]
    pub fn credit(&mut self, acc: u64) {
        if acc != 0 {
            self.ensure(0);
            let c = &mut self.cpus[0].c;
            c.insns += acc >> INLINE_INSN_SHIFT;
            c.cycles += acc & ((1 << INLINE_INSN_SHIFT) - 1);
        }
    }

    // ---- The front: events as QEMU delivers them. ----

    /// An instruction executes on `cpu` (before its data accesses).
    #[inline]
    pub fn exec(&mut self, cpu: usize, insn: &Insn) {
        self.ensure(cpu);
        let f = &mut self.fronts[cpu];
        match insn.decoded.class {
            // The page tables seen through QEMU may change: ask again.
            Class::MovCr3 | Class::MovCrPaging | Class::Invlpg => f.xlate.fill((NO_PAGE, 0)),
            Class::Marker if abi::model::takes_arg(insn.decoded.marker) => {
                f.pending_arg = insn.decoded.marker
            }
            _ => {}
        }
        let from_user = std::mem::replace(&mut f.in_user, insn.vaddr >= USER_BASE);
        if self.ordered {
            self.submit(cpu, Event::Exec(*insn));
        } else {
            self.execute(cpu, insn);
        }
        if insn.decoded.class == Class::Marker {
            let m = insn.decoded.marker;
            let delivered = match (interrupt_vector(m), device_interrupt_vector(m)) {
                (Some(vector), _) => Some((vector, self.ipis_sent)),
                (_, Some(vector)) => Some((vector, 0)),
                _ => None,
            };
            if let Some((vector, ipi)) = delivered {
                self.submit(
                    cpu,
                    Event::Interrupt {
                        vector,
                        ipi,
                        from_user,
                    },
                );
            }
        }
    }

    /// A data access as the plugin sees it. The load after a marker that
    /// takes an argument is the argument, not an access. `translate` gives
    /// the physical address of `vaddr` (None: MMIO, not modelled); it is
    /// asked only for pages outside the kernel's identity map that this
    /// CPU has not translated since its last flush.
    #[inline]
    pub fn mem(
        &mut self,
        cpu: usize,
        vaddr: u32,
        size: u32,
        write: bool,
        translate: impl FnOnce() -> Option<u64>,
    ) {
        self.ensure(cpu);
        let f = &mut self.fronts[cpu];
        if f.pending_arg != 0 && !write {
            let id = std::mem::take(&mut f.pending_arg);
            self.submit(cpu, Event::Arg(id, vaddr));
            return;
        }
        if (LAPIC_BASE..LAPIC_BASE + LAPIC_BYTES).contains(&vaddr) {
            let send = write && vaddr == LAPIC_ICR_LOW;
            self.submit(cpu, Event::Apic { send });
            return;
        }
        let paddr = if vaddr < KERNEL_MAP_END {
            // Identity-mapped in every address space (abi::layout).
            u64::from(vaddr)
        } else {
            let vpage = vaddr >> PAGE_SHIFT;
            let slot = vpage as usize % XLATE_ENTRIES;
            let (tag, ppage) = f.xlate[slot];
            let ppage = if tag == vpage {
                ppage
            } else {
                let ppage = translate().map_or(IO_PAGE, |p| (p >> PAGE_SHIFT) as u32);
                f.xlate[slot] = (vpage, ppage);
                ppage
            };
            if ppage == IO_PAGE {
                return;
            }
            u64::from(ppage) << PAGE_SHIFT | u64::from(vaddr & (PAGE_SIZE - 1))
        };
        if self.ordered {
            let access = Event::Access {
                vaddr,
                paddr,
                size,
                write,
                after: None,
            };
            self.submit(cpu, access);
        } else {
            self.data(cpu, vaddr, paddr, size, write);
        }
    }

    // ---- The order: lanes, applied by clock. ----

    fn submit(&mut self, cpu: usize, ev: Event) {
        let cpu = cpu.min(MAX_CPUS - 1);
        if !self.ordered {
            self.apply(cpu, ev);
            return;
        }
        // Another CPU runs: the IPI senders wait no longer (their target, if
        // it was halted, is this CPU or will wake at the send's clock).
        for (j, lane) in self.lanes.iter_mut().enumerate() {
            if j != cpu && lane.hold {
                lane.hold = false;
                lane.ipi_applied = false;
            }
        }
        let lane = &mut self.lanes[cpu];
        if matches!(ev, Event::Apic { send: true }) {
            lane.hold = true;
            self.ipis_sent += 1;
        }
        if lane.stopped {
            // It starts, or wakes, now: by the last IPI sent since it
            // halted, if there was one.
            lane.stopped = false;
            let ipi = if self.ipis_sent > lane.ipis_at_stop {
                self.ipis_sent
            } else {
                0
            };
            lane.queue.push_back(Event::Wake { ipi });
            self.buffered += 1;
        }
        let mut ev = ev;
        match &mut ev {
            Event::Exec(i) if i.decoded.class == Class::Hlt => {
                lane.stopped = true;
                lane.ipis_at_stop = self.ipis_sent;
            }
            Event::Access {
                paddr,
                write,
                after,
                ..
            } => {
                let word = word_of(*paddr);
                let slot = &mut self.front_writes[word as usize & (WORDS - 1)];
                if slot.0 == word && slot.1 as usize != cpu {
                    *after = Some((slot.1, slot.2));
                }
                if *write {
                    *slot = (word, cpu as u8, lane.applied + lane.queue.len() as u64);
                }
            }
            _ => {}
        }
        lane.queue.push_back(ev);
        self.buffered += 1;
        self.drain(false);
    }

    /// Applies queued events in clock order as far as it is safe (all:
    /// every queued event, as at exit).
    fn drain(&mut self, all: bool) {
        loop {
            let mut next: Option<(u64, usize)> = None;
            let ipis = self.ipi_clocks.len() as u64;
            let lanes = &self.lanes;
            // A CPU whose wake-up waits for its IPI is still halted, and one
            // whose access waits for the write it saw cannot move before
            // that write: neither runs nor holds anybody back.
            let waiting = |lane: &Lane| match lane.queue.front() {
                Some(Event::Wake { ipi }) | Some(Event::Interrupt { ipi, .. }) => *ipi > ipis,
                Some(Event::Access {
                    after: Some((a, serial)),
                    ..
                }) => lanes[*a as usize].applied <= *serial,
                _ => false,
            };
            for (i, lane) in self.lanes.iter().enumerate() {
                if !lane.queue.is_empty() && !waiting(lane) && (all || !lane.held()) {
                    let t = self.cpus[i].clock();
                    if next.is_none_or(|(nt, _)| t < nt) {
                        next = Some((t, i));
                    }
                }
            }
            let Some((t, k)) = next else { return };
            let blocked = !all
                && self.lanes.iter().enumerate().any(|(j, lane)| {
                    j != k
                        && !lane.stopped
                        && !waiting(lane)
                        && (lane.queue.is_empty() || lane.held())
                        && self.cpus[j].clock() < t
                });
            if blocked {
                if self.buffered <= MAX_BUFFERED {
                    return;
                }
                self.forced += 1;
            }
            let ev = self.lanes[k].queue.pop_front().expect("non-empty lane");
            self.buffered -= 1;
            self.apply(k, ev);
            self.lanes[k].applied += 1;
            self.frontier = self.frontier.max(self.cpus[k].clock());
        }
    }

    /// Applies every queued event (QEMU is exiting).
    pub fn finish(&mut self) {
        self.drain(true);
    }

    // ---- The model proper, in clock order. ----

    fn apply(&mut self, cpu: usize, ev: Event) {
        match ev {
            Event::Exec(insn) => self.execute(cpu, &insn),
            Event::Access {
                vaddr,
                paddr,
                size,
                write,
                after,
            } => {
                let word = word_of(paddr);
                let slot = word as usize & (WORDS - 1);
                if let Some((a, serial)) = after {
                    // Not before the write it saw: the clock moves up to it.
                    let (tag, by, at_serial, at) = self.applied_writes[slot];
                    if tag == word && by == a && at_serial >= serial {
                        let c = &mut self.cpus[cpu];
                        c.idle += at.saturating_sub(c.clock());
                    }
                }
                self.data(cpu, vaddr, paddr, size, write);
                if write {
                    let serial = self.lanes[cpu].applied;
                    self.applied_writes[slot] = (word, cpu as u8, serial, self.cpus[cpu].clock());
                }
            }
            Event::Arg(id, value) => self.argument(cpu, id, value),
            Event::Wake { ipi } => {
                let at = match ipi {
                    0 => self.frontier,
                    n => self
                        .ipi_clocks
                        .get(n as usize - 1)
                        .copied()
                        .unwrap_or(self.frontier),
                };
                let c = &mut self.cpus[cpu];
                c.idle += at.saturating_sub(c.clock());
            }
            Event::Apic { send } => {
                self.cpus[cpu].c.cycles += u64::from(self.profile.apic_access);
                if send && self.ordered {
                    self.ipi_clocks.push(self.cpus[cpu].clock());
                    self.lanes[cpu].ipi_applied = true;
                }
            }
            Event::Interrupt {
                vector,
                ipi,
                from_user,
            } => {
                // The message arrives ipi_latency after its send; the
                // handler cannot start earlier.
                if let Some(&sent) = ipi
                    .checked_sub(1)
                    .and_then(|i| self.ipi_clocks.get(i as usize))
                {
                    let at = sent + u64::from(self.profile.ipi_latency);
                    let c = &mut self.cpus[cpu];
                    c.idle += at.saturating_sub(c.clock());
                }
                // Delivery through the gate: int n's microcode and reads
                // (from ring 3 also the TSS's ring-0 stack).
                self.cpus[cpu].c.cycles += u64::from(self.profile.int_n);
                self.deliver(cpu, vector, from_user);
            }
        }
    }

    fn is_global(&self, page: u32) -> bool {
        self.opts.pge && page < KERNEL_MAP_END >> PAGE_SHIFT
    }

    /// A TLB lookup of `page`; returns its cost (0 on a first-level hit).
    #[inline]
    fn tlb(&mut self, cpu: usize, page: u32, instruction: bool) -> u64 {
        let global = self.is_global(page);
        let (stlb_latency, walk) = (self.profile.stlb_latency, self.profile.walk);
        let c = &mut self.cpus[cpu];
        let first = if instruction {
            &mut c.itlb
        } else {
            &mut c.dtlb
        };
        if first.lookup(page) {
            return 0;
        }
        first.fill(page, global);
        if let Some(s) = &mut c.stlb {
            if s.lookup(page) {
                return stlb_latency.into();
            }
            s.fill(page, global);
        }
        c.c.tlb_misses += 1;
        walk.into()
    }

    /// Whether `cpu`'s private caches hold `line` (L1, and L2 if private).
    fn holds(&self, cpu: usize, line: u64) -> bool {
        self.cpus[cpu].l1.probe(line) != LineState::Invalid
            || (self.profile.l2_shared == 0 && self.l2[cpu].probe(line) != LineState::Invalid)
    }

    /// Carries out a directory outcome on the other CPUs' caches, counts it
    /// for `cpu` and returns the stall beyond the requester's own lookup:
    /// `Some(latency)` when another cache supplies the line.
    fn coherence(&mut self, cpu: usize, line: u64, out: &Outcome) -> (Option<u32>, u64) {
        let private_l2 = self.profile.l2_shared == 0;
        for j in 0..self.cpus.len() {
            let invalidate = out.invalidate & (1 << j) != 0;
            let downgrade = out.downgrade == Some(j);
            if !invalidate && !downgrade {
                continue;
            }
            let state = if invalidate {
                LineState::Invalid
            } else {
                LineState::Shared
            };
            let o = &mut self.cpus[j];
            o.l1.set_state(line, state);
            if o.last_line == line {
                o.last_line = u64::MAX;
            }
            if invalidate {
                o.c.invalidations_received += 1;
            }
            if private_l2 {
                self.l2[j].set_state(line, state);
            }
        }
        let c = &mut self.cpus[cpu].c;
        c.invalidations += u64::from(out.invalidations());
        c.upgrades += u64::from(out.upgrade);
        c.coherence_misses += u64::from(out.coherence_miss);
        c.transfers += u64::from(out.transfer);
        let p = &self.profile;
        if out.coherence_miss {
            (Some(p.c2c_latency), 0)
        } else if out.invalidate != 0 {
            (None, u64::from(p.upgrade_latency))
        } else {
            (None, 0)
        }
    }

    /// A line left `cpu`'s L1 or private L2: the directory forgets it
    /// unless the other private level still has it.
    fn evicted(&mut self, cpu: usize, line: u64) {
        if self.ordered && !self.holds(cpu, line) {
            self.dir.evict(cpu, line);
        }
    }

    /// One cache line of a data access; returns its stall.
    fn line(&mut self, cpu: usize, line: u64, write: bool) -> u64 {
        let c = &mut self.cpus[cpu];
        if line == c.last_line && (c.last_line_dirty || !write) {
            return 0;
        }
        c.last_line = line;
        c.last_line_dirty = write;
        let before = c.l1.lookup(line, write);
        if before != LineState::Invalid {
            if self.ordered && write && before != LineState::Modified {
                // S: an upgrade that invalidates the sharers; E: silent.
                let out = self.dir.write(cpu, line, before);
                return self.coherence(cpu, line, &out).1;
            }
            return 0;
        }
        self.cpus[cpu].c.l1_misses += 1;
        // Coherence first: another CPU may have to give the line up.
        let mut supplied = None;
        let mut extra = 0;
        let mut fill_state = if write {
            LineState::Modified
        } else {
            LineState::Exclusive
        };
        if self.ordered {
            let held = self.dir.state(cpu, line);
            let out = match (write, held) {
                (false, LineState::Invalid) => Some(self.dir.read_miss(cpu, line)),
                (false, _) => None,
                (true, LineState::Modified) => None,
                (true, held) => Some(self.dir.write(cpu, line, held)),
            };
            if let Some(out) = out {
                (supplied, extra) = self.coherence(cpu, line, &out);
                fill_state = out.state.unwrap_or(fill_state);
            } else {
                fill_state = held;
            }
        }
        let l2i = self.l2_of(cpu);
        let p = &self.profile;
        let l2_hit = self.l2[l2i].lookup(line, false) != LineState::Invalid;
        let latency = if l2_hit {
            supplied.unwrap_or(p.l2_latency)
        } else {
            // The request leaves L2: another CPU's cache, L3 or memory
            // answers it, and the pair prefetch goes out with it.
            self.cpus[cpu].c.l2_misses += 1;
            let from = match (&mut self.l3, supplied) {
                (_, Some(c2c)) => c2c,
                (Some(l3), None) => {
                    if l3.lookup(line, false) != LineState::Invalid {
                        p.l3_latency
                    } else {
                        l3.fill(line, LineState::Exclusive);
                        p.mem_latency
                    }
                }
                (None, None) => p.mem_latency,
            };
            if p.pair_prefetch == 1 {
                extra += self.pair(cpu, l2i, line);
            }
            if let Some(ev) = self.l2[l2i].fill(line, LineState::Exclusive) {
                if self.profile.l2_shared == 0 {
                    self.evicted(cpu, ev.line);
                }
            }
            from
        };
        let p = &self.profile;
        let stall = u64::from(latency.saturating_sub(p.l1d_latency)) + extra;
        if let Some(ev) = self.cpus[cpu].l1.fill(line, fill_state) {
            // A dirty line leaves L1 into L2 (write-back; the write-back
            // buffer hides its cost).
            let l2 = &mut self.l2[l2i];
            if ev.state == LineState::Modified
                && l2.set_state(ev.line, LineState::Modified) == LineState::Invalid
            {
                l2.fill(ev.line, LineState::Modified);
            }
            self.evicted(cpu, ev.line);
        }
        stall
    }

    /// The adjacent-line prefetch after an L2 miss on `line`: the other
    /// line(s) of its aligned 128-byte pair come into L2 without a stall
    /// (NetBurst's sector, later CPUs' spatial prefetcher), before the
    /// demand line, which is filled last and so most recently used. A
    /// buddy another CPU holds Modified must be fetched from that cache (a
    /// transfer: NetBurst's 128-byte false sharing); its cost is returned.
    fn pair(&mut self, cpu: usize, l2i: usize, line: u64) -> u64 {
        let per_pair = u64::from(PAIR_BYTES >> self.line_shift);
        let first = line & !(per_pair - 1);
        let mut stall = 0;
        for buddy in (first..first + per_pair).filter(|&b| b != line) {
            if self.l2[l2i].probe(buddy) != LineState::Invalid {
                continue;
            }
            let mut state = LineState::Exclusive;
            if self.ordered && self.profile.l2_shared == 0 {
                let dirty_elsewhere = matches!(self.dir.owner(buddy), Some((o, true)) if o != cpu);
                let out = self.dir.read_miss(cpu, buddy);
                state = out.state.unwrap_or(state);
                let (supplied, _) = self.coherence(cpu, buddy, &out);
                if dirty_elsewhere {
                    if let Some(c2c) = supplied {
                        stall += u64::from(c2c.saturating_sub(self.profile.l1d_latency));
                    }
                }
            }
            if let Some(ev) = self.l2[l2i].fill(buddy, state) {
                if self.profile.l2_shared == 0 {
                    self.evicted(cpu, ev.line);
                }
            }
        }
        stall
    }

    /// A data access of `size` bytes at virtual `vaddr`, physical `paddr`,
    /// applied now: the pages it touches go through the DTLB, the lines
    /// through the caches. (A page-crossing access is taken as physically
    /// contiguous.)
    #[inline]
    pub fn data(&mut self, cpu: usize, vaddr: u32, paddr: u64, size: u32, write: bool) {
        // The common case first: one line, the CPU's last data line, on its
        // last data page, and no write to a line not yet Modified. Nothing
        // changes then, as below: the TLB lookup and the line are skipped.
        let shift = self.line_shift;
        if let Some(c) = self.cpus.get(cpu) {
            let end = vaddr.wrapping_add(size.max(1) - 1);
            let line = paddr >> shift;
            if vaddr >> PAGE_SHIFT == c.last_dpage
                && end >> PAGE_SHIFT == c.last_dpage
                && (paddr + u64::from(size.max(1)) - 1) >> shift == line
                && line == c.last_line
                && (c.last_line_dirty || !write)
            {
                return;
            }
        }
        self.data_lines(cpu, vaddr, paddr, size, write);
    }

    /// [`Machine::data`] beyond its common case.
    fn data_lines(&mut self, cpu: usize, vaddr: u32, paddr: u64, size: u32, write: bool) {
        self.ensure(cpu);
        let size = size.max(1);
        let end = vaddr.wrapping_add(size - 1);
        let page = vaddr >> PAGE_SHIFT;
        let mut stall = 0;
        if page != self.cpus[cpu].last_dpage {
            stall += self.tlb(cpu, page, false);
        }
        let last_page = end >> PAGE_SHIFT;
        if last_page != page {
            stall += self.tlb(cpu, last_page, false);
        }
        self.cpus[cpu].last_dpage = last_page;
        let first = paddr >> self.line_shift;
        let last = (paddr + u64::from(size) - 1) >> self.line_shift;
        for line in first..=last {
            stall += self.line(cpu, line, write);
        }
        self.cpus[cpu].c.cycles += stall;
    }

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
        let (counters, clock) = (c.c, c.clock());
        let mut machine = Counters::default();
        for o in &self.cpus {
            machine.add_coherence(&o.c);
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
            u8::from(self.opts.virt),
            ncpus.max(self.cpus.len())
        );
        for (k, v) in p.params() {
            out.push_str(&format!(" {k}={v}"));
        }
        out.push_str(&format!(" pge={}\n", u8::from(self.opts.pge)));
        for s in &self.snaps {
            let (c, m) = (&s.counters, &s.machine);
            out.push_str(&format!(
                "snap cpu={} stream={} seq={} insns={} cycles={} l1_misses={} l2_misses={} tlb_misses={} tlb_flushes={} coherence_misses={} invalidations={} transfers={} invalidations_received={} upgrades={} clock={}\n",
                s.cpu, s.stream, s.seq, c.insns, c.cycles, c.l1_misses, c.l2_misses,
                c.tlb_misses, c.tlb_flushes, m.coherence_misses, m.invalidations, m.transfers,
                m.invalidations_received, m.upgrades, s.clock
            ));
        }
        out.push_str("end\n");
        out
    }
}

/// The 4-byte word of a physical address (the granule of data dependence:
/// CPUs writing different words of one line are false sharing, not
/// communication).
fn word_of(paddr: u64) -> u32 {
    (paddr >> 2) as u32
}

/// Byte offset of a selector's descriptor in its table.
fn descriptor_offset(sel: u16) -> u32 {
    u32::from(sel & !7)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::profile::parse;
    use abi::model::marker_disp;

    /// A small machine with round numbers: 64-byte lines; L1D 256 B, 2-way
    /// (2 sets); L2 1 KiB, 4-way (4 sets); latencies 2 / 12 / 102, so an
    /// L2 hit stalls 10 and a memory access 100; TLBs of 4 entries; a walk
    /// costs 30; every extra is its own number.
    const TEST_PROFILE: &str = "
[t]
description = \"test\"
line = 64
l1d_size = 256
l1d_ways = 2
l1d_latency = 2
l2_size = 1024
l2_ways = 4
l2_latency = 12
l2_shared = 0
l3_size = 0
l3_ways = 1
l3_latency = 0
mem_latency = 102
pair_prefetch = 0
dtlb_entries = 4
dtlb_ways = 4
itlb_entries = 4
itlb_ways = 4
stlb_entries = 0
stlb_ways = 1
stlb_latency = 0
walk = 30
base = 1
int_n = 100
iret = 2
sysenter = 3
sysexit = 4
syscall = 5
sysret = 6
lcall_gate = 7
lret_far = 8
mov_cr3 = 50
invlpg = 40
wrmsr = 9
rdmsr = 10
cpuid = 11
rdtsc = 12
lfence = 13
popf = 14
sreg_load = 15
locked = 16
vmexit = 1000
c2c_latency = 42
upgrade_latency = 20
apic_access = 70
ipi_latency = 300
";

    fn profile(edit: &[(&str, &str)]) -> Profile {
        let mut text = TEST_PROFILE.to_string();
        for (key, value) in edit {
            let from = text
                .lines()
                .find(|l| l.starts_with(&format!("{key} =")))
                .unwrap()
                .to_string();
            text = text.replace(&from, &format!("{key} = {value}"));
        }
        parse(&text).unwrap().remove(0)
    }

    fn machine(edit: &[(&str, &str)], opts: Options) -> Machine {
        Machine::new(profile(edit), opts, 1).unwrap()
    }

    /// A load at kernel (identity-mapped) address `a`.
    fn load(m: &mut Machine, a: u32, size: u32) {
        m.mem(0, a, size, false, || unreachable!("identity-mapped"));
    }

    fn exec(m: &mut Machine, bytes: &[u8], vaddr: u32) {
        let i = m.decode(bytes, vaddr);
        m.exec(0, &i);
    }

    fn marker(id: u16) -> [u8; 7] {
        let d = marker_disp(id).to_le_bytes();
        [0x0f, 0x1f, 0x80, d[0], d[1], d[2], d[3]]
    }

    const NOP: [u8; 1] = [0x90];
    const KERNEL_PAGE: u32 = 0x0010_0000;

    #[test]
    fn working_set_within_l1_misses_only_cold() {
        let mut m = machine(&[], Options::default());
        // 4 lines = 256 B = L1D; all in one page, so one DTLB walk.
        for round in 0..3 {
            for l in 0..4 {
                load(&mut m, KERNEL_PAGE + 64 * l, 4);
            }
            let c = m.counters(0);
            assert_eq!((c.l1_misses, c.l2_misses), (4, 4), "round {round}");
        }
        assert_eq!(m.counters(0).tlb_misses, 1);
        assert_eq!(m.counters(0).cycles, 4 * 100 + 30);
    }

    #[test]
    fn working_set_between_l1_and_l2_misses_l1_every_time() {
        let mut m = machine(&[], Options::default());
        // 8 lines = 512 B: twice L1D, half L2. Cycling through them, LRU
        // evicts each line of L1 before its next use; L2 keeps them all.
        for _ in 0..5 {
            for l in 0..8 {
                load(&mut m, KERNEL_PAGE + 64 * l, 4);
            }
        }
        let c = m.counters(0);
        assert_eq!(c.l1_misses, 40);
        assert_eq!(c.l2_misses, 8);
        assert_eq!(c.cycles, 8 * 100 + 32 * 10 + 30);
    }

    #[test]
    fn working_set_beyond_l2_misses_both() {
        let mut m = machine(&[], Options::default());
        // 32 lines = 2 KiB, twice L2: every access misses both levels.
        for _ in 0..3 {
            for l in 0..32 {
                load(&mut m, KERNEL_PAGE + 64 * l, 4);
            }
        }
        let c = m.counters(0);
        assert_eq!((c.l1_misses, c.l2_misses), (96, 96));
    }

    #[test]
    fn line_crossing_access_touches_both_lines() {
        let mut m = machine(&[], Options::default());
        load(&mut m, KERNEL_PAGE + 62, 4);
        assert_eq!(m.counters(0).l1_misses, 2);
        load(&mut m, KERNEL_PAGE + 64, 4);
        load(&mut m, KERNEL_PAGE + 60, 4);
        assert_eq!(m.counters(0).l1_misses, 2);
    }

    #[test]
    fn pair_prefetch_brings_the_buddy_into_l2() {
        let mut off = machine(&[], Options::default());
        let mut on = machine(&[("pair_prefetch", "1")], Options::default());
        for m in [&mut off, &mut on] {
            load(m, KERNEL_PAGE + 64, 4); // line 1 of pair 0
            load(m, KERNEL_PAGE, 4); // line 0: its buddy
            load(m, KERNEL_PAGE + 128, 4); // pair 1
        }
        assert_eq!(off.counters(0).l2_misses, 3);
        // The buddy hits in L2 (an L1 miss still: the pair fills L2 only).
        assert_eq!(on.counters(0).l2_misses, 2);
        assert_eq!(on.counters(0).l1_misses, 3);
        assert_eq!(off.counters(0).cycles - on.counters(0).cycles, 100 - 10);
    }

    #[test]
    fn cr3_write_flushes_the_tlb_and_pge_keeps_kernel_pages() {
        let mov_cr3 = [0x0f, 0x22, 0xd8];
        for pge in [false, true] {
            let mut m = machine(&[], Options { virt: false, pge });
            load(&mut m, KERNEL_PAGE, 4);
            exec(&mut m, &mov_cr3, KERNEL_PAGE);
            load(&mut m, KERNEL_PAGE, 4);
            let c = m.counters(0);
            assert_eq!(c.tlb_flushes, 1);
            // Data walks: the first load, and after the flush unless global;
            // instruction walks: the mov's page, before the flush.
            let expect = if pge { 2 } else { 3 };
            assert_eq!(c.tlb_misses, expect, "pge={pge}");
        }
    }

    #[test]
    fn invlpg_drops_the_announced_page_only() {
        let mut m = machine(&[], Options::default());
        let (a, b) = (KERNEL_PAGE, KERNEL_PAGE + 0x1000);
        load(&mut m, a, 4);
        load(&mut m, b, 4);
        let code = KERNEL_PAGE + 0x8000;
        exec(&mut m, &marker(INVLPG_PAGE), code);
        // The argument load: not an access, not charged.
        let before = m.counters(0);
        load(&mut m, ARG_WINDOW + (b >> PAGE_SHIFT), 4);
        assert_eq!(m.counters(0).cycles, before.cycles);
        assert_eq!(m.counters(0).l1_misses, before.l1_misses);
        exec(&mut m, &[0x0f, 0x01, 0x38], code);
        let c0 = m.counters(0);
        load(&mut m, a, 4);
        assert_eq!(m.counters(0).tlb_misses, c0.tlb_misses);
        load(&mut m, b, 4);
        assert_eq!(m.counters(0).tlb_misses, c0.tlb_misses + 1);
        assert_eq!(c0.tlb_flushes, 1);
    }

    #[test]
    fn itlb_walks_once_per_page() {
        let mut m = machine(&[], Options::default());
        for i in 0..10 {
            exec(&mut m, &NOP, KERNEL_PAGE + i);
        }
        exec(&mut m, &NOP, KERNEL_PAGE + 0x1000);
        exec(&mut m, &NOP, KERNEL_PAGE);
        let c = m.counters(0);
        assert_eq!((c.insns, c.tlb_misses), (12, 2));
        assert_eq!(c.cycles, 12 + 2 * 30);
    }

    #[test]
    fn int_n_reads_idt_gdt_and_tss_from_user_mode() {
        let mut m = machine(&[], Options::default());
        let code = KERNEL_PAGE + 0x8000;
        let (idt, gdt, tss) = (0x0020_0000, 0x0020_1000, 0x0020_2000);
        for (id, addr) in [
            (ANNOUNCE_IDT, idt),
            (ANNOUNCE_GDT, gdt),
            (ANNOUNCE_TSS, tss),
        ] {
            exec(&mut m, &marker(id), code);
            load(&mut m, addr, 4);
        }
        assert_eq!(m.counters(0).l1_misses, 0);
        let warm = m.counters(0);
        exec(&mut m, &[0xcd, 0x80], USER_BASE);
        let c = m.counters(0);
        // IDT entry 0x80, the two kernel descriptors (one line: 0x08, 0x10),
        // the TSS: three cold lines in three pages.
        assert_eq!(c.l1_misses - warm.l1_misses, 3);
        assert_eq!(c.tlb_misses - warm.tlb_misses, 1 + 3); // the user code page too
        assert_eq!(c.cycles - warm.cycles, 1 + 100 + 3 * 100 + 4 * 30);
        // From ring 0 the TSS and the data descriptor are not read.
        let mut k = machine(&[], Options::default());
        exec(&mut k, &marker(ANNOUNCE_IDT), code);
        load(&mut k, idt, 4);
        exec(&mut k, &[0xcd, 0x80], code);
        assert_eq!(k.counters(0).l1_misses, 1);
    }

    #[test]
    fn virt_adds_the_vm_exit_to_cr3_writes() {
        let mut m = machine(
            &[],
            Options {
                virt: true,
                pge: false,
            },
        );
        exec(&mut m, &[0x0f, 0x22, 0xd8], KERNEL_PAGE);
        assert_eq!(m.counters(0).cycles, 1 + 50 + 1000 + 30);
        exec(&mut m, &[0x0f, 0x34], KERNEL_PAGE); // sysenter: no VM exit
        assert_eq!(m.counters(0).cycles, 1 + 50 + 1000 + 30 + 1 + 3 + 30);
    }

    #[test]
    fn snapshots_count_per_stream_and_markers_cost_nothing() {
        let mut m = machine(&[], Options::default());
        let code = KERNEL_PAGE;
        exec(&mut m, &marker(SNAP_USER), code);
        exec(&mut m, &NOP, code);
        exec(&mut m, &marker(SNAP_KERNEL), code);
        exec(&mut m, &marker(SNAP_USER), code);
        let s = m.snaps();
        assert_eq!(s.len(), 3);
        assert_eq!(
            (s[0].stream, s[0].seq, s[0].counters.insns),
            (SNAP_USER, 0, 1)
        );
        assert_eq!((s[1].stream, s[1].seq), (SNAP_KERNEL, 0));
        assert_eq!(
            (s[2].stream, s[2].seq, s[2].counters.insns),
            (SNAP_USER, 1, 4)
        );
        // Only the NOP is charged (plus its ITLB walk).
        assert_eq!(s[2].counters.cycles, 1 + 30);
        let r = m.report(1);
        let lines: Vec<&str> = r.lines().collect();
        assert_eq!(lines[0], "model1 profile=t virt=0 ncpus=1");
        assert!(lines[1].starts_with("param line=64 l1d_size=256 "));
        assert!(lines[1].ends_with(
            " vmexit=1000 c2c_latency=42 upgrade_latency=20 apic_access=70 ipi_latency=300 pge=0"
        ));
        assert_eq!(
            lines[4],
            "snap cpu=0 stream=1 seq=1 insns=4 cycles=31 l1_misses=0 l2_misses=0 tlb_misses=1 tlb_flushes=0 coherence_misses=0 invalidations=0 transfers=0 invalidations_received=0 upgrades=0 clock=31"
        );
        assert_eq!(lines[5], "end");
    }

    #[test]
    fn user_pages_are_translated_once_until_a_flush() {
        let mut m = machine(&[], Options::default());
        let mut asked = 0;
        for _ in 0..3 {
            m.mem(0, USER_BASE + 8, 4, false, || {
                asked += 1;
                Some(0x0030_0008)
            });
        }
        assert_eq!(asked, 1);
        exec(&mut m, &[0x0f, 0x22, 0xd8], KERNEL_PAGE);
        m.mem(0, USER_BASE + 8, 4, true, || {
            asked += 1;
            Some(0x0030_0008)
        });
        assert_eq!(asked, 2);
        // MMIO is neither cached nor charged (the I/O APIC's page here),
        // except the local APIC's registers, which cost an access.
        let before = m.counters(0);
        m.mem(0, 0xfec0_0000, 4, false, || None);
        assert_eq!(m.counters(0), before);
        m.mem(0, LAPIC_BASE + 0x30, 4, false, || None);
        assert_eq!(m.counters(0).cycles, before.cycles + 70);
    }

    fn write(m: &mut Machine, cpu: usize, a: u32) {
        m.data(cpu, a, u64::from(a), 4, true);
    }

    #[test]
    fn two_cpus_writing_one_line_bounce_it_and_lines_apart_do_not() {
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        for _ in 0..10 {
            write(&mut m, 0, KERNEL_PAGE);
            write(&mut m, 1, KERNEL_PAGE + 8);
        }
        let (a, b) = (m.counters(0), m.counters(1));
        // Every write after the first takes the line from the other CPU.
        assert_eq!((a.coherence_misses, b.coherence_misses), (9, 10));
        assert_eq!((a.transfers, b.transfers), (9, 10));
        assert_eq!((a.invalidations, b.invalidations), (9, 10));
        assert_eq!(b.invalidations_received, 9);
        // Lines 4 KiB apart: after the cold misses, nothing.
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        for _ in 0..10 {
            write(&mut m, 0, KERNEL_PAGE);
            write(&mut m, 1, KERNEL_PAGE + 0x1000);
        }
        assert_eq!(
            m.counters(0).coherence_misses + m.counters(1).coherence_misses,
            0
        );
        assert_eq!((m.counters(0).l1_misses, m.counters(1).l1_misses), (1, 1));
    }

    #[test]
    fn a_line_from_another_cache_costs_the_transfer_latency() {
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        write(&mut m, 0, KERNEL_PAGE);
        let before = m.counters(1).cycles;
        m.data(1, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        // c2c_latency 42 less the L1 latency 2, plus the DTLB walk; the
        // request left CPU 1's L2, so it counts as an L2 miss.
        assert_eq!(m.counters(1).cycles - before, 40 + 30);
        assert_eq!(m.counters(1).l2_misses, 1);
        // Now shared: CPU 0's next write is an upgrade (20 cycles).
        let before = m.counters(0);
        write(&mut m, 0, KERNEL_PAGE);
        let after = m.counters(0);
        assert_eq!(
            (
                after.upgrades - before.upgrades,
                after.cycles - before.cycles
            ),
            (1, 20)
        );
    }

    #[test]
    fn adjacent_lines_under_the_pair_prefetch_settle_after_the_first_touches() {
        // Intel: coherence on 64-byte lines, bus reads fetch the 128-byte
        // sector. Two CPUs writing the two lines of one pair: the first
        // touches move lines (the pair fetch included), then each CPU
        // holds its own line Modified and no L2 miss fetches the buddy.
        let mut m =
            Machine::new(profile(&[("pair_prefetch", "1")]), Options::default(), 2).unwrap();
        for _ in 0..3 {
            write(&mut m, 0, KERNEL_PAGE);
            write(&mut m, 1, KERNEL_PAGE + 64);
        }
        let total = |m: &Machine| {
            let (a, b) = (m.counters(0), m.counters(1));
            (
                a.coherence_misses + b.coherence_misses,
                a.invalidations + b.invalidations,
            )
        };
        let warm = total(&m);
        assert!(warm.0 >= 2, "the first touches move lines: {warm:?}");
        for _ in 0..100 {
            write(&mut m, 0, KERNEL_PAGE);
            write(&mut m, 1, KERNEL_PAGE + 64);
        }
        assert_eq!(total(&m), warm, "steady state: nothing moves");
    }

    #[test]
    fn pair_prefetch_takes_the_buddy_another_cpu_modified() {
        for pair in ["0", "1"] {
            let mut m =
                Machine::new(profile(&[("pair_prefetch", pair)]), Options::default(), 2).unwrap();
            write(&mut m, 0, KERNEL_PAGE); // line 0, Modified in CPU 0
            write(&mut m, 1, KERNEL_PAGE + 64); // line 1: its buddy is line 0
            let b = m.counters(1);
            if pair == "1" {
                // CPU 0's own miss on line 0 prefetched line 1 (clean, E):
                // CPU 1 takes line 1 from it (a coherence miss), and its
                // prefetch takes line 0, Modified in CPU 0 (a transfer).
                assert_eq!((b.coherence_misses, b.transfers), (2, 1));
                // CPU 0 keeps line 0 Shared: its next write is an upgrade
                // that invalidates CPU 1's prefetched copy.
                write(&mut m, 0, KERNEL_PAGE);
                assert_eq!(m.counters(0).invalidations, 1);
            } else {
                assert_eq!((b.coherence_misses, b.transfers), (0, 0));
            }
        }
    }

    fn nop_and_write(m: &mut Machine, cpu: usize, a: u32) {
        let i = m.decode(&NOP, KERNEL_PAGE);
        m.exec(cpu, &i);
        m.mem(cpu, a, 4, true, || unreachable!());
    }

    #[test]
    fn streams_are_applied_in_clock_order_not_arrival_order() {
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        // Both CPUs running; then QEMU runs CPU 0 for a whole slice of 50
        // writes to one line before CPU 1 gets its slice of 50.
        let nop = m.decode(&NOP, KERNEL_PAGE);
        m.exec(0, &nop);
        m.exec(1, &nop);
        for _ in 0..50 {
            nop_and_write(&mut m, 0, KERNEL_PAGE);
        }
        assert!(m.buffered > 90, "CPU 0 must wait for CPU 1: {}", m.buffered);
        for _ in 0..50 {
            nop_and_write(&mut m, 1, KERNEL_PAGE + 4);
        }
        m.finish();
        let misses = m.counters(0).coherence_misses + m.counters(1).coherence_misses;
        // Interleaved by clock, the line moves whenever the CPUs' clocks
        // cross (42 times here: CPU 0's cold miss gives CPU 1 a run of hits
        // first); in arrival order it would move once.
        assert!(misses > 30, "{misses}");
        assert_eq!(m.counters(0).insns, 51);
        assert_eq!(m.forced, 0);
    }

    #[test]
    fn a_halted_or_unstarted_cpu_holds_nobody_back() {
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        for _ in 0..10 {
            nop_and_write(&mut m, 0, KERNEL_PAGE);
        }
        // CPU 1 never ran: CPU 0's events are applied as they come.
        assert_eq!(m.buffered, 0);
        let hlt = m.decode(&[0xf4], KERNEL_PAGE);
        m.exec(1, &hlt);
        for _ in 0..10 {
            nop_and_write(&mut m, 0, KERNEL_PAGE);
        }
        assert_eq!(m.buffered, 0);
        // CPU 1 wakes at the latest applied clock; its cycles stay its own.
        let woke = m.frontier;
        nop_and_write(&mut m, 1, KERNEL_PAGE + 0x1000);
        m.finish();
        let c1 = &m.cpus[1];
        assert!(c1.clock() > woke && c1.idle > 0, "{} vs {woke}", c1.clock());
        // hlt and the NOP (one ITLB walk), the write (a DTLB walk, memory).
        assert_eq!(c1.c.cycles, 1 + 30 + 1 + 30 + 100);
    }

    #[test]
    fn an_ipi_wakes_its_target_at_the_send_and_holds_the_sender() {
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        let (nop, hlt) = (m.decode(&NOP, KERNEL_PAGE), m.decode(&[0xf4], KERNEL_PAGE));
        m.exec(1, &hlt);
        m.exec(0, &nop);
        m.mem(0, LAPIC_ICR_LOW, 4, true, || None);
        let sent = m.cpus[0].clock();
        // QEMU runs the sender on; its events wait for the target.
        for _ in 0..300 {
            nop_and_write(&mut m, 0, KERNEL_PAGE);
        }
        assert!(m.buffered >= 600, "{}", m.buffered);
        assert_eq!(m.cpus[0].clock(), sent);
        for _ in 0..300 {
            nop_and_write(&mut m, 1, KERNEL_PAGE + 4);
        }
        m.finish();
        let c1 = &m.cpus[1];
        assert_eq!(c1.idle + 1 + 30, sent, "CPU 1 woke at the send");
        let misses = m.counters(0).coherence_misses + m.counters(1).coherence_misses;
        // CPU 0's cold miss puts it ahead; once CPU 1 catches up, every
        // write takes the line from the other CPU.
        assert!(misses > 300, "{misses}");
    }

    #[test]
    fn a_hand_off_through_one_word_moves_it_every_round_trip() {
        // Ping-pong as QEMU runs it: CPU 0 stores the word and spins, CPU 1
        // sees the store, answers, spins; CPU 0 sees the answer. Every read
        // of the other CPU's store follows that store in modelled time.
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        let word = KERNEL_PAGE + 0x100;
        let access = |m: &mut Machine, cpu: usize, write: bool| {
            let i = m.decode(&NOP, KERNEL_PAGE);
            m.exec(cpu, &i);
            m.mem(cpu, word, 4, write, || None);
        };
        for _ in 0..100 {
            access(&mut m, 0, true);
            access(&mut m, 0, false);
            access(&mut m, 1, false);
            access(&mut m, 1, true);
            access(&mut m, 1, false);
            access(&mut m, 0, false);
        }
        m.finish();
        let (a, b) = (m.counters(0), m.counters(1));
        // A coherence miss (42) and an upgrade (20) per CPU per round trip.
        assert!(
            a.coherence_misses >= 99 && b.coherence_misses >= 99,
            "{a:?} {b:?}"
        );
        assert!(a.upgrades >= 99 && b.upgrades >= 99);
        // The two clocks stay together: each waits for the other's store.
        let (ca, cb) = (m.cpus[0].clock(), m.cpus[1].clock());
        assert!(ca.abs_diff(cb) < 200, "{ca} {cb}");
        assert!(ca > 100 * 2 * (40 + 20));
    }

    #[test]
    fn an_ipi_costs_the_apic_write_the_flight_and_the_delivery() {
        use abi::model::interrupt_marker;
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        m.idt = Some(KERNEL_PAGE + 0x800);
        let (nop, hlt) = (m.decode(&NOP, KERNEL_PAGE), m.decode(&[0xf4], KERNEL_PAGE));
        let entry = m.decode(&marker(interrupt_marker(0xf1)), KERNEL_PAGE);
        m.exec(1, &hlt);
        m.exec(0, &nop);
        let before = m.cpus[0].c.cycles;
        m.mem(0, LAPIC_ICR_LOW, 4, true, || None);
        // The ICR write is an APIC access.
        assert_eq!(m.cpus[0].c.cycles - before, 70);
        let sent = m.cpus[0].clock();
        // The target wakes and enters the handler: not before the message
        // arrives (300 after the send); the delivery costs int_n (100) and
        // the IDT entry's line (a cold miss: 100, and CPU 1's first data
        // page: a DTLB walk, 30); then the handler's first instruction.
        m.exec(1, &entry);
        m.exec(1, &nop);
        m.finish();
        let c1 = &m.cpus[1];
        assert_eq!(c1.clock(), sent + 300 + 100 + 100 + 30 + 1);
        assert_eq!(c1.c.l1_misses, 1, "the IDT entry");
        // An EOI (any other APIC register) costs an access too.
        let before = m.cpus[1].c.cycles;
        m.mem(1, LAPIC_BASE + 0xb0, 4, true, || None);
        m.finish();
        assert_eq!(m.cpus[1].c.cycles - before, 70);
        assert_eq!(m.ipis_sent, 1);
    }

    /// An instruction of a test block: its bytes, its address, the
    /// addresses it loads from.
    type Planned = (Vec<u8>, u32, Vec<u32>);

    /// Runs `blocks` (each instruction with the data accesses it makes)
    /// as QEMU would with the plugin's plan: inline adds summed in an
    /// accumulator that every call empties first. `all_calls`: as before
    /// the plan, every instruction a call.
    fn run_planned(blocks: &[Vec<Planned>], all_calls: bool) -> String {
        let mut m = machine(&[], Options::default());
        let mut acc = 0;
        for block in blocks {
            let insns: Vec<Insn> = block.iter().map(|(b, va, _)| m.decode(b, *va)).collect();
            let plan = m.plan(&insns);
            assert_eq!(plan[0], Step::Call, "every block starts with a call");
            for ((insn, (_, _, loads)), step) in insns.iter().zip(block).zip(plan) {
                match step {
                    Step::Inline(add) if !all_calls => acc += add,
                    _ => {
                        m.credit(std::mem::take(&mut acc));
                        m.exec(0, insn);
                    }
                }
                for &a in loads {
                    load(&mut m, a, 4);
                }
            }
        }
        m.credit(acc);
        m.report(1)
    }

    #[test]
    fn the_plan_counts_what_calls_count() {
        let code = KERNEL_PAGE + 0x1000 - 3;
        let mov_cr3 = vec![0x0f, 0x22, 0xd8];
        let snap = marker(SNAP_KERNEL).to_vec();
        let nop = || vec![0x90];
        let data = KERNEL_PAGE + 0x4000;
        // A block that crosses a page, one with a flush and a snapshot in
        // the middle, one with an int n, each run several times.
        let crossing = vec![
            (nop(), code, vec![data]),
            (nop(), code + 1, vec![]),
            (nop(), code + 2, vec![data + 64]),
            (nop(), code + 3, vec![data + 128]),
            (nop(), code + 4, vec![]),
        ];
        let flushing = vec![
            (nop(), KERNEL_PAGE, vec![data]),
            (mov_cr3, KERNEL_PAGE + 1, vec![]),
            (nop(), KERNEL_PAGE + 4, vec![data]),
            (snap.clone(), KERNEL_PAGE + 5, vec![]),
            (nop(), KERNEL_PAGE + 12, vec![]),
            (snap, KERNEL_PAGE + 13, vec![]),
        ];
        let interrupting = vec![
            (nop(), KERNEL_PAGE + 0x2000, vec![]),
            (vec![0xcd, 0x80], KERNEL_PAGE + 0x2001, vec![]),
            (nop(), KERNEL_PAGE + 0x2003, vec![data + 4096]),
        ];
        let blocks: Vec<_> = (0..5)
            .flat_map(|_| [crossing.clone(), flushing.clone(), interrupting.clone()])
            .collect();
        let planned = run_planned(&blocks, false);
        assert_eq!(planned, run_planned(&blocks, true));
        assert!(planned.lines().filter(|l| l.starts_with("snap")).count() == 10);
        // The plan did leave instructions to inline adds.
        let m = machine(&[], Options::default());
        let insns: Vec<Insn> = crossing.iter().map(|(b, va, _)| m.decode(b, *va)).collect();
        assert_eq!(
            m.plan(&insns),
            [
                Step::Call,
                Step::Inline(1 << INLINE_INSN_SHIFT | 1),
                Step::Inline(1 << INLINE_INSN_SHIFT | 1),
                Step::Call,
                Step::Inline(1 << INLINE_INSN_SHIFT | 1),
            ]
        );
        // With several CPUs every instruction is a call.
        let two = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        assert!(two.plan(&insns).iter().all(|s| *s == Step::Call));
    }

    #[test]
    fn on_one_cpu_the_delivery_is_charged_without_waiting() {
        use abi::model::interrupt_marker;
        let mut m = machine(&[], Options::default());
        exec(&mut m, &marker(interrupt_marker(0x20)), KERNEL_PAGE);
        // int_n only: no IDT announced, and a marker costs nothing.
        assert_eq!(m.counters(0).cycles, 100);
    }

    #[test]
    fn a_device_interrupt_waits_for_no_ipi_and_from_ring_3_reads_the_tss() {
        use abi::model::device_interrupt_marker;
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        m.idt = Some(KERNEL_PAGE + 0x800);
        let nop = m.decode(&NOP, KERNEL_PAGE);
        let user = m.decode(&NOP, USER_BASE);
        let entry = m.decode(&marker(device_interrupt_marker(0xf3)), KERNEL_PAGE);
        // CPU 0 sends an IPI (to nobody that runs here); CPU 1's timer
        // interrupts its ring 3 meanwhile.
        m.exec(0, &nop);
        m.mem(0, LAPIC_ICR_LOW, 4, true, || None);
        m.exec(1, &user);
        let before = m.cpus[1].clock();
        m.exec(1, &entry);
        m.exec(1, &nop);
        m.exec(0, &nop);
        m.finish();
        let c1 = &m.cpus[1];
        // No wait for the IPI's flight (300): int_n (100), the IDT entry's
        // cold miss (100) and a DTLB walk (30), the kernel page's ITLB
        // walk (30), the marker (0), a nop (1).
        assert_eq!(c1.clock() - before, 100 + 100 + 30 + 30 + 1);
        let mut k = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        k.cpus[1].tss = Some(KERNEL_PAGE + 0x400);
        let (user, entry) = (
            k.decode(&NOP, USER_BASE),
            k.decode(&marker(device_interrupt_marker(0xf3)), KERNEL_PAGE),
        );
        k.exec(1, &user);
        k.exec(1, &entry);
        k.finish();
        assert_eq!(
            k.cpus[1].c.l1_misses, 1,
            "the TSS's ring-0 stack, read from ring 3"
        );
    }

    #[test]
    fn snapshots_sum_every_cpus_coherence_counters() {
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        let snap = m.decode(&marker(SNAP_KERNEL), KERNEL_PAGE);
        m.exec(0, &snap);
        for _ in 0..50 {
            nop_and_write(&mut m, 0, KERNEL_PAGE);
            nop_and_write(&mut m, 1, KERNEL_PAGE + 4);
        }
        m.exec(1, &snap);
        // CPU 0's closing snapshot comes last in clock order.
        let nop = m.decode(&NOP, KERNEL_PAGE);
        for _ in 0..1000 {
            m.exec(0, &nop);
        }
        m.exec(0, &snap);
        m.finish();
        let s: Vec<_> = m.snaps().iter().filter(|s| s.cpu == 0).collect();
        let (c0, c1) = (m.counters(0), m.counters(1));
        assert!(c0.coherence_misses > 0 && c1.coherence_misses > 0);
        assert_eq!(
            s[1].machine.coherence_misses - s[0].machine.coherence_misses,
            c0.coherence_misses + c1.coherence_misses
        );
        assert_eq!(
            s[1].machine.invalidations_received,
            c0.invalidations_received + c1.invalidations_received
        );
        assert_eq!(s[1].counters.coherence_misses, c0.coherence_misses);
        assert!(s[1].clock >= s[1].counters.cycles);
    }

    #[test]
    fn snapshots_of_two_cpus_follow_clock_order() {
        let mut m = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        let snap = m.decode(&marker(SNAP_KERNEL), KERNEL_PAGE);
        let nop = m.decode(&NOP, KERNEL_PAGE);
        m.exec(0, &nop);
        m.exec(1, &nop);
        // CPU 0 works through 20 cold lines before its snapshot; CPU 1's
        // snapshot arrives later but at a lower clock.
        for l in 0..20 {
            nop_and_write(&mut m, 0, KERNEL_PAGE + 64 * l);
        }
        m.exec(0, &snap);
        m.exec(1, &snap);
        m.finish();
        let s = m.snaps();
        assert_eq!((s[0].cpu, s[1].cpu), (1, 0));
    }

    #[test]
    fn shared_l2_is_one_cache_for_all_cpus() {
        let mut m = Machine::new(profile(&[("l2_shared", "1")]), Options::default(), 2).unwrap();
        m.data(0, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        m.data(1, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        assert_eq!(m.counters(0).l2_misses, 1);
        assert_eq!((m.counters(1).l1_misses, m.counters(1).l2_misses), (1, 0));
        let mut p = Machine::new(profile(&[]), Options::default(), 2).unwrap();
        p.data(0, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        p.data(1, KERNEL_PAGE, u64::from(KERNEL_PAGE), 4, false);
        assert_eq!(p.counters(1).l2_misses, 1);
    }
}
