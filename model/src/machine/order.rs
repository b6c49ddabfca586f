//! The order of several CPUs' events. The front takes the plugin's
//! events as QEMU delivers them (`exec`, `mem`); with several CPUs they
//! wait in per-CPU lanes (`submit`) and are applied in modelled-clock
//! order (`drain`, `apply`).
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

use abi::layout::{KERNEL_MAP_END, PAGE_SIZE, USER_BASE};
use abi::model::{device_interrupt_vector, interrupt_vector};

use crate::coherence::MAX_CPUS;
use crate::decode::Class;

use super::{Insn, Machine, INLINE_INSN_SHIFT, NO_PAGE, PAGE_SHIFT};

/// Entries of each CPU's cache of virtual-to-physical page translations
/// (plugin bookkeeping, not a modelled structure).
const XLATE_ENTRIES: usize = 512;
/// A translation cache value: the page is MMIO (not modelled).
const IO_PAGE: u32 = u32::MAX;
/// The local APIC's interrupt command register, low half: a store there
/// sends an IPI. The architectural default base (SDM Vol. 3A §10.4.1),
/// where this kernel maps it (identity, kernel/src/arch/apic.rs), and the
/// register's offset (SDM Vol. 3A Table 10-1).
pub(super) const LAPIC_BASE: u32 = 0xFEE0_0000;
pub(super) const LAPIC_ICR_LOW: u32 = LAPIC_BASE + 0x300;
/// Bytes of the local APIC's register page (SDM Vol. 3A §10.4.1).
const LAPIC_BYTES: u32 = 0x1000;
/// Entries of the tables of last writes per 4-byte word (multi-CPU only).
pub(super) const WORDS: usize = 1 << 20;
// `drain` keeps the lanes whose writes a head waits for as bits of a u32.
const _: () = assert!(MAX_CPUS <= 32);
/// Events that may wait for clock order before the oldest is forced
/// (32 bytes each: about 130 MB of queue; more wait while no lane can be
/// chosen, as behind an IPI's held sender, which the bound does not force).
pub const MAX_BUFFERED: usize = 4 << 20;

/// What a CPU did, as it waits for its turn in clock order.
#[derive(Clone, Copy, Debug)]
pub(super) enum Event {
    Exec(Insn),
    /// An `Exec` and the run of inline instructions that came after it
    /// while it waited (`Machine::queue_run`): one entry, applied as the
    /// two; the run stays at the head after the instruction.
    ExecRun(Insn, &'static [u32]),
    /// Instructions that only add their count and cost (the plugin's
    /// inline adds, [`super::Step::Inline`]), one cost each, in order: as
    /// many `Exec`s, kept as one entry and applied one at a time in clock
    /// order (`drain`), so other CPUs' events fall between them as they
    /// would between `Exec`s.
    Run(&'static [u32]),
    Access {
        vaddr: u32,
        paddr: u64,
        size: u32,
        write: bool,
        /// The last write to this word by another CPU in QEMU's order (the
        /// access saw its value), if any.
        after: Saw,
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

// Events wait by the million on several CPUs (an IPI's sender runs on for
// the rest of its QEMU turn, every event of it queued): their bytes are
// memory traffic, written once and read once. 32, not the 48 of an
// access that kept `Option<(u8, u64)>`.
const _: () = assert!(std::mem::size_of::<Event>() == 32);

/// The write an access saw: (CPU, that event's serial in its lane), or
/// none, in one word: the CPU plus one in the top byte (0: none), the
/// serial below. A serial counts a lane's events; 2^56 of them would take
/// QEMU years.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Saw(u64);

impl Saw {
    const SHIFT: u32 = 56;
    pub(super) const NONE: Saw = Saw(0);

    fn new(cpu: u8, serial: u64) -> Saw {
        debug_assert!(serial < 1 << Saw::SHIFT);
        Saw((u64::from(cpu) + 1) << Saw::SHIFT | serial)
    }

    #[inline(always)]
    fn get(self) -> Option<(u8, u64)> {
        let by = (self.0 >> Saw::SHIFT) as u8;
        (by != 0).then(|| (by - 1, self.0 & ((1 << Saw::SHIFT) - 1)))
    }
}

/// Whether `lane`'s head waits, so that its CPU neither runs nor holds
/// anybody back: a wake-up or an interrupt whose IPI is not applied yet
/// (`ipis` are), or an access whose write (by lane `a`, its event
/// `serial`) is not.
fn head_waits(lanes: &[Lane], lane: &Lane, ipis: u64) -> bool {
    match lane.queue.front() {
        Some(Event::Wake { ipi }) | Some(Event::Interrupt { ipi, .. }) => *ipi > ipis,
        Some(Event::Access { after, .. }) => match after.get() {
            Some((a, serial)) => lanes[a as usize].applied <= serial,
            None => false,
        },
        _ => false,
    }
}

/// Counts a run's instructions on CPU `c`: the first, then each next one
/// while the clock before it is below `below` and not above `upto` (the
/// lane stays the drain's choice and nobody holds it back). Returns how
/// many it counted.
fn take_run(c: &mut super::Cpu, run: &[u32], below: u64, upto: u64) -> usize {
    let mut done = 0;
    for &cost in run {
        if done > 0 {
            let t = c.clock();
            if t >= below || t > upto {
                break;
            }
        }
        c.c.insns += 1;
        c.c.cycles += u64::from(cost);
        done += 1;
    }
    done
}

/// Counts a whole run's instructions on CPU `c` (they only add their
/// costs).
#[inline(always)]
fn add_run(c: &mut super::Cpu, run: &[u32]) {
    c.c.insns += run.len() as u64;
    c.c.cycles += run.iter().map(|&x| u64::from(x)).sum::<u64>();
}

/// What the other lanes say of one lane `k` going on with its events: it
/// is still the one `drain` chooses while its clock is below `below` (the
/// lowest candidate's clock among the lanes before it: ties go to the
/// lower lane) and not above `above` (among the lanes after it), and
/// nobody holds it back while its clock is not above `blocker` (the
/// lowest clock of a running lane with nothing queued, or held).
/// `release`: the lowest serial among `k`'s writes that another lane's
/// head waits for (`u64::MAX`: none); once `k` has applied it, that lane
/// may go.
#[derive(Clone, Copy, Debug)]
pub(super) struct Bounds {
    below: u64,
    above: u64,
    blocker: u64,
    release: u64,
}

impl Bounds {
    /// Another lane's head waits for one of `k`'s writes.
    fn waits_on_k(&self) -> bool {
        self.release != u64::MAX
    }
}

/// The plugin-side state of a CPU, kept in QEMU's order: what QEMU's own
/// state decides (the argument channel, the page translations).
#[derive(Clone, Debug)]
pub(super) struct Front {
    /// A marker that waits for its argument load (0: none).
    pending_arg: u16,
    /// The last instruction ran in ring 3 (code at or above `USER_BASE`):
    /// what an interrupt handler's marker right after it interrupted.
    in_user: bool,
    /// (virtual page, physical page or IO_PAGE), direct-mapped.
    xlate: Vec<(u32, u32)>,
}

impl Front {
    /// A marker waits for its argument: the next load is no access.
    #[inline(always)]
    pub(super) fn waits_for_arg(&self) -> bool {
        self.pending_arg != 0
    }

    /// The physical address of `vaddr` when it is known without asking
    /// QEMU: in the kernel's identity map, or on a page translated since
    /// the last flush to memory (not MMIO). The front never holds the
    /// local APIC's page (`Machine::mem` takes its accesses first).
    #[inline(always)]
    pub(super) fn known_paddr(&self, vaddr: u32) -> Option<u64> {
        if vaddr < KERNEL_MAP_END {
            // Identity-mapped in every address space (abi::layout).
            return Some(u64::from(vaddr));
        }
        let vpage = vaddr >> PAGE_SHIFT;
        let (tag, ppage) = self.xlate[vpage as usize % XLATE_ENTRIES];
        (tag == vpage && ppage != IO_PAGE)
            .then(|| u64::from(ppage) << PAGE_SHIFT | u64::from(vaddr & (PAGE_SIZE - 1)))
    }

    /// The physical address of `vaddr` (None: MMIO), asking `translate`
    /// (QEMU) for a page the front has not translated since the last
    /// flush.
    #[inline(always)]
    fn paddr(&mut self, vaddr: u32, translate: impl FnOnce() -> Option<u64>) -> Option<u64> {
        if let Some(paddr) = self.known_paddr(vaddr) {
            return Some(paddr);
        }
        let vpage = vaddr >> PAGE_SHIFT;
        let slot = &mut self.xlate[vpage as usize % XLATE_ENTRIES];
        if slot.0 != vpage {
            let ppage = translate().map_or(IO_PAGE, |p| (p >> PAGE_SHIFT) as u32);
            *slot = (vpage, ppage);
        }
        self.known_paddr(vaddr)
    }

    pub(super) fn new() -> Front {
        Front {
            pending_arg: 0,
            in_user: false,
            xlate: vec![(NO_PAGE, 0); XLATE_ENTRIES],
        }
    }
}

/// A lane's queue of events: a ring whose capacity is a power of two (a
/// slot is a masked index), every call of it inline. (The standard
/// `VecDeque`'s `push_back` is a call of its own; on a 2-CPU boot, whose
/// events wait by the hundred million, that call cost 4% of the boot.)
#[derive(Clone, Debug)]
struct Ring {
    /// As many as the capacity; those outside the queue are stale.
    slots: Vec<Event>,
    /// The capacity less one.
    mask: usize,
    head: usize,
    len: usize,
}

impl Default for Ring {
    fn default() -> Ring {
        const CAPACITY: usize = 64;
        Ring {
            slots: vec![Event::Run(&[]); CAPACITY],
            mask: CAPACITY - 1,
            head: 0,
            len: 0,
        }
    }
}

impl Ring {
    #[inline(always)]
    fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & self.mask
    }

    #[inline(always)]
    fn front(&self) -> Option<&Event> {
        (self.len != 0).then(|| &self.slots[self.head])
    }

    #[inline(always)]
    fn front_mut(&mut self) -> Option<&mut Event> {
        (self.len != 0).then(|| &mut self.slots[self.head])
    }

    #[inline(always)]
    fn back_mut(&mut self) -> Option<&mut Event> {
        if self.len == 0 {
            return None;
        }
        let i = self.slot(self.len - 1);
        Some(&mut self.slots[i])
    }

    #[inline(always)]
    fn push_back(&mut self, ev: Event) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let i = self.slot(self.len);
        self.slots[i] = ev;
        self.len += 1;
    }

    #[inline(always)]
    fn pop_front(&mut self) -> Option<Event> {
        if self.len == 0 {
            return None;
        }
        let ev = self.slots[self.head];
        self.head = self.slot(1);
        self.len -= 1;
        Some(ev)
    }

    /// Twice the room, grown in place where the allocator can (a large
    /// block is remapped, not copied, and its pages stay), the queue's
    /// wrapped part (the slots before the head) moved after the old end.
    #[cold]
    #[inline(never)]
    fn grow(&mut self) {
        let old = self.slots.len();
        self.slots.resize(2 * old, Event::Run(&[]));
        self.slots.copy_within(0..self.head, old);
        self.mask = 2 * old - 1;
    }
}

/// A CPU's queue of events and whether it is running.
#[derive(Clone, Debug, Default)]
pub(super) struct Lane {
    queue: Ring,
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
    /// A lane whose CPU has not started yet.
    pub(super) fn new() -> Lane {
        Lane {
            stopped: true,
            ..Lane::default()
        }
    }

    fn held(&self) -> bool {
        self.hold && self.ipi_applied
    }
}
impl Machine {
    /// Whether events are ordered (several CPUs).
    #[inline]
    pub fn ordered(&self) -> bool {
        self.ordered
    }

    // ---- The front: events as QEMU delivers them. ----

    /// The quick case of a call with one CPU ([`Machine::alone`]): `acc`,
    /// the inline instructions before it (packed as [`Machine::credit`]
    /// takes them), then an instruction that only costs, on the CPU's last
    /// instruction page: each only adds its count and cycles, and the
    /// front notes the mode. Returns false, having done nothing, for any
    /// other call.
    #[inline(always)]
    pub fn exec_alone(&mut self, cpu: usize, insn: &Insn, acc: u64) -> bool {
        if !self.alone() || !insn.decoded.class.only_costs() {
            return false;
        }
        let (Some(c), Some(f)) = (self.cpus.get_mut(cpu), self.fronts.get_mut(cpu)) else {
            return false;
        };
        if insn.vaddr >> PAGE_SHIFT != c.last_ipage {
            return false;
        }
        // One CPU: the inline instructions ran on this one.
        c.c.insns += (acc >> INLINE_INSN_SHIFT) + 1;
        c.c.cycles += (acc & ((1 << INLINE_INSN_SHIFT) - 1)) + u64::from(insn.cost);
        f.in_user = insn.vaddr >= USER_BASE;
        true
    }

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
            // An instruction that only adds its cost takes the quick way
            // when it can.
            let lane = cpu.min(MAX_CPUS - 1);
            let cost = u64::from(insn.cost);
            let quick = insn.decoded.class.only_costs()
                && insn.vaddr >> PAGE_SHIFT == self.cpus[lane].last_ipage
                && self.quick_add(lane, 1, cost, cost);
            if !quick {
                if insn.decoded.class != Class::Hlt && self.waits_behind(lane, 1) {
                    self.wait_behind(lane, Event::Exec(*insn));
                } else {
                    self.submit(cpu, Event::Exec(*insn));
                }
            }
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
        let Some(paddr) = f.paddr(vaddr, translate) else {
            return;
        };
        if self.ordered {
            let lane = cpu.min(MAX_CPUS - 1);
            let behind = self.waits_behind(lane, 1);
            // `submit` notes the write it saw itself.
            let after = if behind {
                self.note_access(lane, paddr, write)
            } else {
                Saw::NONE
            };
            let access = Event::Access {
                vaddr,
                paddr,
                size,
                write,
                after,
            };
            if behind {
                self.wait_behind(lane, access);
            } else {
                self.submit(cpu, access);
            }
        } else {
            self.data(cpu, vaddr, paddr, size, write);
        }
    }

    // ---- The order: lanes, applied by clock. ----

    /// An access to `paddr` that arrives in lane `cpu`, in QEMU's order:
    /// the last write to its word by another CPU, which it saw (its CPU
    /// and serial), if any; a write becomes its word's last, with the
    /// serial the access takes in the lane.
    #[inline(always)]
    fn note_access(&mut self, cpu: usize, paddr: u64, write: bool) -> Saw {
        let word = word_of(paddr);
        let slot = &mut self.front_writes[word as usize & (WORDS - 1)];
        let after = if slot.0 == word && slot.1 as usize != cpu {
            Saw::new(slot.1, slot.2)
        } else {
            Saw::NONE
        };
        if write {
            let lane = &self.lanes[cpu];
            *slot = (word, cpu as u8, lane.applied + lane.queue.len() as u64);
        }
        after
    }

    /// An event of `cpu`'s, in QEMU's order: applied at once with one CPU;
    /// with several, placed in its lane (or applied the direct way), and
    /// the lanes drained when what `drain` decides from has changed. A
    /// call of its own: the front's quick ways and the events that only
    /// wait behind others ([`Machine::waits_behind`]) take none.
    #[inline(never)]
    pub(super) fn submit(&mut self, cpu: usize, ev: Event) {
        let cpu = cpu.min(MAX_CPUS - 1);
        if !self.ordered {
            self.apply(cpu, ev);
            return;
        }
        // Another CPU runs: the IPI senders wait no longer (their target, if
        // it was halted, is this CPU or will wake at the send's clock).
        let mut released = false;
        if self.holding > usize::from(self.lanes[cpu].hold) {
            for (j, lane) in self.lanes.iter_mut().enumerate() {
                if j != cpu && lane.hold {
                    released |= lane.held();
                    lane.hold = false;
                    lane.ipi_applied = false;
                    self.holding -= 1;
                }
            }
        }
        let lane = &mut self.lanes[cpu];
        // What `drain` decides from: the heads of the queues, which lanes
        // are empty, stopped or held. An event behind another in a running
        // lane changes none of these.
        let unchanged = !released && !lane.stopped && !lane.queue.is_empty();
        if matches!(ev, Event::Apic { send: true }) {
            self.holding += usize::from(!lane.hold);
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
            } => *after = self.note_access(cpu, *paddr, *write),
            _ => {}
        }
        let lane = &mut self.lanes[cpu];
        let unchanged = unchanged && !lane.stopped;
        let direct = self.settled
            && !self.reference
            && !released
            && !lane.stopped
            && lane.queue.is_empty()
            && !lane.held()
            && matches!(
                ev,
                Event::Exec(_) | Event::Run(_) | Event::Access { .. } | Event::Arg(..)
            );
        if !direct {
            // A lane's state may change: the bounds are to be found again.
            self.bounds_of = None;
        }
        if direct && self.direct(cpu, ev) {
            return;
        }
        let lane = &mut self.lanes[cpu];
        lane.queue.push_back(ev);
        // A run counts as its instructions, as their `Exec`s would.
        self.buffered += match ev {
            Event::Run(run) => run.len(),
            _ => 1,
        };
        // The last drain applied all it could; if nothing it decides from
        // has changed since, it would apply nothing now either: not even
        // past the bound when it found no lane to choose (the bound forces
        // only a chosen lane's events).
        if self.settled
            && !self.reference
            && unchanged
            && (self.buffered <= self.bound || self.unmoved)
        {
            return;
        }
        self.bounds_of = None;
        self.drain(false);
        self.settled = true;
    }

    /// Applies queued events in clock order as far as it is safe (all:
    /// every queued event, as at exit).
    fn drain(&mut self, all: bool) {
        if self.reference {
            return self.drain_plain(all);
        }
        loop {
            let ipis = self.ipi_clocks.len() as u64;
            // One pass: the lowest-clock candidate (ties to the lower lane),
            // the lowest of the others (what the chosen lane's bounds come
            // from), the lowest clock of a lane that holds others back (the
            // candidate is neither empty nor held, so it is no blocker),
            // and the lanes whose writes a head waits for.
            let mut next: Option<(u64, usize)> = None;
            let mut second: Option<(u64, usize)> = None;
            let mut blocker = u64::MAX;
            let mut waited_on = 0u32;
            for (i, lane) in self.lanes.iter().enumerate() {
                if head_waits(&self.lanes, lane, ipis) {
                    if let Some(Event::Access { after, .. }) = lane.queue.front() {
                        if let Some((a, _)) = after.get() {
                            waited_on |= 1 << a;
                        }
                    }
                    continue;
                }
                let held = lane.held();
                let empty = lane.queue.is_empty();
                if !empty && (all || !held) {
                    let t = self.cpus[i].clock();
                    if next.is_none_or(|(nt, _)| t < nt) {
                        second = next;
                        next = Some((t, i));
                    } else if second.is_none_or(|(st, _)| t < st) {
                        second = Some((t, i));
                    }
                } else if !all && !lane.stopped {
                    blocker = blocker.min(self.cpus[i].clock());
                }
            }
            let Some((t, k)) = next else {
                self.unmoved = true;
                return;
            };
            self.unmoved = false;
            // Lanes are visited in order and a tie keeps the first, so
            // `second` is the least (clock, lane) after `k`'s: the one `k`
            // must stay ahead of (what `bounds` finds, in this pass).
            let (below, above) = match second {
                Some((st, j)) if j < k => (st, u64::MAX),
                Some((st, _)) => (u64::MAX, st),
                None => (u64::MAX, u64::MAX),
            };
            let release = if waited_on & 1 << k != 0 {
                self.release(k)
            } else {
                u64::MAX
            };
            let b = Bounds {
                below,
                above,
                blocker,
                release,
            };
            if !self.go(k, b, blocker < t, all) {
                return;
            }
        }
    }

    /// Lane `k`'s events, which `drain` chose with the other lanes' bounds
    /// `b` (`blocked`: something behind it holds it back), applied one
    /// after another as one `take_next` per `drain` pass would apply them:
    /// the same events in the same order,
    /// counted the same, without finding the choice again while nothing
    /// it depends on changes. Nothing but lane `k` moves, so the other
    /// lanes' bounds stand: `k` stays the choice while its clock is below
    /// every candidate's before it and not above any after it; unblocked,
    /// it stays so while its clock is not above the blocker's; blocked, it
    /// stays blocked (its clock only grows) and goes on only while more
    /// than the bound of events wait (each one forced and counted; false
    /// when back within the bound, as `take_next` says). It stops when
    /// `k`'s head waits or its queue is empty, when `k` is no longer the
    /// choice, after an IPI's send (another lane's wake-up may go now, and
    /// `k` is held), and once `k` has applied a write another lane's head
    /// waits for (that lane may go now): the drain then looks again.
    fn go(&mut self, k: usize, b: Bounds, blocked: bool, all: bool) -> bool {
        if !blocked && b.below == u64::MAX && b.above.min(b.blocker) == u64::MAX {
            return self.go_alone(k, b.release);
        }
        // Unblocked, a run's instructions go while this holds (as `run`).
        let upto = b.above.min(b.blocker);
        loop {
            // A lane whose head waited for `k`'s write may go now, even
            // unforced while `k` is blocked: look again before the bound
            // stops a blocked `k` (as `take_next` would stop it).
            if self.lanes[k].applied > b.release {
                return true;
            }
            if blocked && self.buffered <= self.bound {
                return false;
            }
            let t = self.cpus[k].clock();
            let still_blocked = t > b.blocker;
            if t >= b.below || t > b.above || (!all && still_blocked != blocked) {
                return true;
            }
            let lane = &mut self.lanes[k];
            let Some(head) = lane.queue.front_mut() else {
                return true;
            };
            match *head {
                Event::Run(run) => {
                    // Forced, one instruction at a time, each counted (the
                    // clock is already above the blocker's); else as long
                    // as `k` stays the unblocked choice.
                    self.forced += u64::from(blocked);
                    self.run_head(k, run, b.below, upto);
                }
                // An instruction, and one with a run after it (the run is
                // the head then), as `take_next` applies them.
                Event::ExecRun(insn, run) => {
                    *head = Event::Run(run);
                    self.forced += u64::from(blocked);
                    self.buffered -= 1;
                    self.execute_quick(k, &insn);
                    self.frontier = self.frontier.max(self.cpus[k].clock());
                }
                Event::Exec(insn) => {
                    lane.queue.pop_front();
                    self.forced += u64::from(blocked);
                    self.buffered -= 1;
                    self.execute_quick(k, &insn);
                    self.lanes[k].applied += 1;
                    self.frontier = self.frontier.max(self.cpus[k].clock());
                }
                // Any other head, unless it waits, as `take_next` applies
                // it (it counts a forced one).
                head => {
                    if self.head_waits(k) {
                        return true;
                    }
                    self.take_next(k, blocked, all);
                    if matches!(head, Event::Apic { send: true }) {
                        return true;
                    }
                }
            }
        }
    }

    /// Whether lane `k`'s head waits ([`head_waits`]).
    #[inline(always)]
    fn head_waits(&self, k: usize) -> bool {
        head_waits(&self.lanes, &self.lanes[k], self.ipi_clocks.len() as u64)
    }

    /// [`Machine::go`] when no other lane bounds lane `k` (no candidate,
    /// no blocker: the others are stopped, or waiting): its events go one
    /// after another, each whole (a run at once), with nothing to compare
    /// but whether its head waits, until an IPI's send or until it has
    /// applied the write `release` another lane waits for, as `go` would.
    /// Only `k`'s clock moves, and it only grows: the frontier takes it
    /// before each event that may read the frontier, and at the end.
    fn go_alone(&mut self, k: usize, release: u64) -> bool {
        loop {
            let lane = &mut self.lanes[k];
            if lane.applied > release {
                break;
            }
            let Some(&head) = lane.queue.front() else {
                break;
            };
            match head {
                Event::Exec(insn) => {
                    lane.queue.pop_front();
                    lane.applied += 1;
                    self.buffered -= 1;
                    self.execute_quick(k, &insn);
                }
                Event::ExecRun(insn, run) => {
                    lane.queue.pop_front();
                    lane.applied += 1;
                    self.buffered -= 1 + run.len();
                    self.execute_quick(k, &insn);
                    add_run(&mut self.cpus[k], run);
                }
                Event::Run(run) => {
                    lane.queue.pop_front();
                    lane.applied += 1;
                    self.buffered -= run.len();
                    add_run(&mut self.cpus[k], run);
                }
                head => {
                    if self.head_waits(k) {
                        break;
                    }
                    self.frontier = self.frontier.max(self.cpus[k].clock());
                    self.lanes[k].queue.pop_front();
                    self.buffered -= 1;
                    self.apply(k, head);
                    self.lanes[k].applied += 1;
                    if matches!(head, Event::Apic { send: true }) {
                        break;
                    }
                }
            }
        }
        self.frontier = self.frontier.max(self.cpus[k].clock());
        true
    }

    /// [`Machine::drain`] as it was first written (the reference mode's).
    fn drain_plain(&mut self, all: bool) {
        loop {
            let mut next: Option<(u64, usize)> = None;
            let ipis = self.ipi_clocks.len() as u64;
            let lanes = &self.lanes;
            // A CPU whose wake-up waits for its IPI is still halted, and one
            // whose access waits for the write it saw cannot move before
            // that write: neither runs nor holds anybody back.
            let waiting = |lane: &Lane| head_waits(lanes, lane, ipis);
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
            if !self.take_next(k, blocked, all) {
                return;
            }
        }
    }

    /// One step of a drain that chose lane `k`: false when `k`'s head must
    /// wait (a CPU behind it is `blocked`-ing it and the queues have room);
    /// else its head applied (a run through [`Machine::head_run`]), forced
    /// out of clock order and counted if it was blocked.
    fn take_next(&mut self, k: usize, blocked: bool, all: bool) -> bool {
        if blocked {
            if self.buffered <= self.bound {
                return false;
            }
            self.forced += 1;
        }
        if self.head_run(k, all) {
            return true;
        }
        let ev = self.lanes[k].queue.pop_front().expect("non-empty lane");
        self.buffered -= 1;
        self.apply(k, ev);
        self.lanes[k].applied += 1;
        self.frontier = self.frontier.max(self.cpus[k].clock());
        true
    }

    /// Applies the head of lane `k`, which `drain` has chosen, if it is a
    /// run or an instruction with a run after it (that run then becomes the
    /// head); false if it is another event.
    fn head_run(&mut self, k: usize, all: bool) -> bool {
        let Some(head) = self.lanes[k].queue.front_mut() else {
            return false;
        };
        match *head {
            Event::Run(run) => self.run(k, run, all),
            Event::ExecRun(insn, run) => {
                *head = Event::Run(run);
                self.buffered -= 1;
                self.execute(k, &insn);
                self.frontier = self.frontier.max(self.cpus[k].clock());
            }
            _ => return false,
        }
        true
    }

    /// A run of inline instructions on `cpu` (`Machine::credit`), `cycles`
    /// their costs' sum: the quick way when it only adds to the counters
    /// at once ([`Machine::quick_add`]). Else, when the lane already waits
    /// and is running, no other lane's hold is to be released and the last
    /// drain applied all it could (and the queues have room, or it found
    /// no lane to choose), nothing `drain` decides from changes (as in
    /// `submit`): the run waits behind the others, joined to a waiting
    /// `Exec`. Else the ordinary way.
    #[inline(always)]
    pub(super) fn queue_run(&mut self, cpu: usize, run: &'static [u32], cycles: u64) {
        let cpu = cpu.min(MAX_CPUS - 1);
        if let Some(&last) = run.last() {
            if self.quick_add(cpu, run.len() as u64, cycles, u64::from(last)) {
                return;
            }
        }
        if self.waits_behind(cpu, run.len()) {
            let lane = &mut self.lanes[cpu];
            if let Some(back) = lane.queue.back_mut() {
                match *back {
                    Event::Exec(insn) => *back = Event::ExecRun(insn, run),
                    _ => lane.queue.push_back(Event::Run(run)),
                }
                self.buffered += run.len();
                self.bounds_of = None;
                return;
            }
        }
        self.submit(cpu, Event::Run(run));
    }

    /// Queues an event of one instruction or access in lane `cpu`, for
    /// which [`Machine::waits_behind`] holds: all `submit` would do.
    #[inline(always)]
    fn wait_behind(&mut self, cpu: usize, ev: Event) {
        self.lanes[cpu].queue.push_back(ev);
        self.buffered += 1;
        self.bounds_of = None;
    }

    /// Whether an event of `n` instructions (1 for any other) that arrives
    /// in lane `cpu` only waits behind the others (as `submit` finds): the
    /// lane is running and not empty, no other lane's hold is to be
    /// released, the last drain applied all it could and the queues have
    /// room (or it found no lane to choose). Nothing `drain` decides from
    /// changes then (unless the event is a `hlt` or an IPI's send), so no
    /// drain follows.
    #[inline(always)]
    fn waits_behind(&self, cpu: usize, n: usize) -> bool {
        let lane = &self.lanes[cpu];
        self.settled
            && !self.reference
            && !lane.stopped
            && !lane.queue.is_empty()
            && self.holding <= usize::from(lane.hold)
            && (self.buffered + n <= self.bound || self.unmoved)
    }

    /// The lowest serial among lane `k`'s writes that another lane's head
    /// waits for, or `u64::MAX` (see [`Bounds`]).
    fn release(&self, k: usize) -> u64 {
        let applied = self.lanes[k].applied;
        let mut release = u64::MAX;
        for lane in &self.lanes {
            if let Some(Event::Access { after, .. }) = lane.queue.front() {
                if let Some((a, serial)) = after.get() {
                    if a as usize == k && applied <= serial {
                        release = release.min(serial);
                    }
                }
            }
        }
        release
    }

    /// What the other lanes say of lane `k` going on (see [`Bounds`]).
    fn bounds(&self, k: usize, all: bool) -> Bounds {
        let ipis = self.ipi_clocks.len() as u64;
        let lanes = &self.lanes;
        let mut b = Bounds {
            below: u64::MAX,
            above: u64::MAX,
            blocker: u64::MAX,
            release: self.release(k),
        };
        for (j, lane) in lanes.iter().enumerate() {
            if j == k || head_waits(lanes, lane, ipis) {
                continue;
            }
            let t = self.cpus[j].clock();
            if !lane.queue.is_empty() && (all || !lane.held()) {
                if j < k {
                    b.below = b.below.min(t);
                } else {
                    b.above = b.above.min(t);
                }
            }
            if !all && !lane.stopped && (lane.queue.is_empty() || lane.held()) {
                b.blocker = b.blocker.min(t);
            }
        }
        b
    }

    /// The fast way for an event that arrives in lane `cpu` while it is
    /// empty, running and not held, after a drain that left nothing to
    /// apply: when `drain` would apply it at once (its clock is the
    /// lowest and nobody holds it back), it is applied here without
    /// waiting in the lane; if the CPU's clock then stays below every
    /// other candidate's, nothing else could go and no drain is needed.
    /// The other lanes' bounds are kept between such events, as only this
    /// CPU moves. Returns false, having done nothing, when the event must
    /// take the ordinary way.
    fn direct(&mut self, cpu: usize, ev: Event) -> bool {
        let mut b = match self.bounds_of {
            Some((k, b)) if k == cpu => b,
            _ => {
                let b = self.bounds(cpu, false);
                self.bounds_of = Some((cpu, b));
                b
            }
        };
        // An access that waits for another CPU's write, or another lane
        // that waits for one of this CPU's: the ordinary way.
        if b.waits_on_k() || matches!(ev, Event::Access { after, .. } if after != Saw::NONE) {
            return false;
        }
        let t = self.cpus[cpu].clock();
        if t >= b.below || t > b.above.min(b.blocker) {
            return false;
        }
        match ev {
            // Called one by one (the reference), each instruction of the
            // run after the first arrives once the drain its predecessor
            // set off is done, into an empty lane: another lane's event at
            // the same clock has gone before it then, whichever lane is the
            // lower. So each after the first goes only while its clock is
            // below every candidate's (and not above a blocker's); where one
            // does not, the other lanes go first (a drain, this lane
            // empty), and the rest arrives anew: directly again if it may,
            // else it waits its turn in the lane.
            Event::Run(mut run) => loop {
                let upto = b.above.saturating_sub(1).min(b.blocker);
                let done = take_run(&mut self.cpus[cpu], run, b.below, upto);
                if done == run.len() {
                    break;
                }
                self.lanes[cpu].applied += 1;
                self.frontier = self.frontier.max(self.cpus[cpu].clock());
                self.bounds_of = None;
                self.drain(false);
                self.settled = true;
                run = &run[done..];
                b = self.bounds(cpu, false);
                self.bounds_of = Some((cpu, b));
                let t = self.cpus[cpu].clock();
                if t >= b.below || t > b.above.min(b.blocker) {
                    self.lanes[cpu].queue.push_back(Event::Run(run));
                    self.buffered += run.len();
                    self.bounds_of = None;
                    self.drain(false);
                    self.settled = true;
                    return true;
                }
            },
            ev => self.apply(cpu, ev),
        }
        self.lanes[cpu].applied += 1;
        let t = self.cpus[cpu].clock();
        self.frontier = self.frontier.max(t);
        if t >= b.below.min(b.above) || self.buffered > self.bound {
            // Another lane's head may go now.
            self.bounds_of = None;
            self.drain(false);
            self.settled = true;
        }
        true
    }

    /// Whether the bounds `direct` found are lane `cpu`'s: the first test
    /// of [`Machine::quick`], made before a call of
    /// [`Machine::repeat_ordered`].
    #[inline(always)]
    pub(super) fn quick_for(&self, cpu: usize) -> bool {
        matches!(self.bounds_of, Some((k, _)) if k == cpu)
    }

    /// The other lanes' bounds on lane `cpu` when events may take the
    /// direct way with no drain before them: the lane is empty, running and
    /// not held, no other lane's hold is to be released, the last drain
    /// left nothing to apply and the bounds `direct` found for this CPU
    /// stand (nothing but this CPU has moved since). None: the ordinary way.
    #[inline(always)]
    fn quick(&self, cpu: usize) -> Option<Bounds> {
        let (k, b) = self.bounds_of?;
        let lane = &self.lanes[cpu];
        let ready = k == cpu
            && !b.waits_on_k()
            && self.settled
            && self.buffered <= self.bound
            && !lane.stopped
            && lane.queue.is_empty()
            && !lane.held()
            && self.holding <= usize::from(lane.hold);
        ready.then_some(b)
    }

    /// `n` instructions on `cpu` that only add their costs (`cycles` in
    /// all, the last one's `last`), taken the direct way when `direct`
    /// would apply them at once, one after another, with no drain after
    /// them: each goes while the clock before it is below the bounds (the
    /// last one's is `end - last`), and no drain follows while the clock
    /// after stays below every candidate's. They only add to its counters
    /// and count as one event, as an `Exec` or a `Run` would. False,
    /// having done nothing, for the ordinary way.
    #[inline(always)]
    fn quick_add(&mut self, cpu: usize, n: u64, cycles: u64, last: u64) -> bool {
        let Some(b) = self.quick(cpu) else {
            return false;
        };
        let end = self.cpus[cpu].clock() + cycles;
        if end - last > b.blocker || end >= b.below || end >= b.above {
            return false;
        }
        let c = &mut self.cpus[cpu].c;
        c.insns += n;
        c.cycles += cycles;
        self.lanes[cpu].applied += 1;
        self.frontier = self.frontier.max(end);
        true
    }

    /// [`Machine::repeat`]'s access with several CPUs, which changes
    /// nothing in the caches: when it is an `Access` that `direct` would
    /// apply at once without a drain after it (the lane is empty, running
    /// and not held, no other lane's hold is to be released, the bounds
    /// found for this CPU stand and its clock stays inside them), and it
    /// saw no other CPU's write, it is taken here: its serial, and for a
    /// write the tables of last writes, as `submit` and `apply` would set
    /// them. False, having done nothing, for the ordinary way.
    #[inline(never)]
    pub(super) fn repeat_ordered(&mut self, cpu: usize, vaddr: u32, write: bool) -> bool {
        let Some(b) = self.quick(cpu) else {
            return false;
        };
        let t = self.cpus[cpu].clock();
        if t >= b.below || t >= b.above || t > b.blocker {
            return false;
        }
        // The physical address, as `mem` finds it (without asking QEMU).
        let Some(paddr) = self.fronts[cpu].known_paddr(vaddr) else {
            return false;
        };
        // The line `data` would find (the same unless the page was mapped
        // anew without a flush).
        if paddr >> self.line_shift != self.cpus[cpu].last_line {
            return false;
        }
        let word = word_of(paddr);
        let slot = word as usize & (WORDS - 1);
        let (tag, by, _) = self.front_writes[slot];
        if tag == word && by as usize != cpu {
            return false;
        }
        let serial = self.lanes[cpu].applied;
        if write {
            self.front_writes[slot] = (word, cpu as u8, serial);
            self.applied_writes[slot] = (word, cpu as u8, serial, t);
        }
        self.lanes[cpu].applied += 1;
        self.frontier = self.frontier.max(t);
        true
    }

    /// Applies the run at the head of lane `k`, which `drain` has chosen:
    /// its first instruction, then each next one as long as `drain` would
    /// choose it again. Nothing but lane `k`'s clock changes meanwhile, so
    /// the bounds are found once: it stays the lowest-clock lane while its
    /// clock is below every candidate's before it (ties go to the lower
    /// lane) and not above any after it, and nobody holds it back while
    /// its clock is not above any blocking lane's.
    fn run(&mut self, k: usize, run: &'static [u32], all: bool) {
        let b = self.bounds(k, all);
        self.run_head(k, run, b.below, b.above.min(b.blocker));
    }

    /// Applies the run at the head of lane `k` as [`take_run`] does within
    /// `below` and `upto`; what it did not apply stays the head.
    #[inline(always)]
    fn run_head(&mut self, k: usize, run: &'static [u32], below: u64, upto: u64) {
        let done = take_run(&mut self.cpus[k], run, below, upto);
        self.buffered -= done;
        self.frontier = self.frontier.max(self.cpus[k].clock());
        let lane = &mut self.lanes[k];
        if done == run.len() {
            lane.queue.pop_front();
            lane.applied += 1;
        } else if let Some(head) = lane.queue.front_mut() {
            *head = Event::Run(&run[done..]);
        }
    }

    /// Applies every queued event (QEMU is exiting).
    pub fn finish(&mut self) {
        self.drain(true);
        self.settled = false;
    }

    // ---- The model proper, in clock order. ----

    fn apply(&mut self, cpu: usize, ev: Event) {
        match ev {
            Event::Exec(insn) => self.execute(cpu, &insn),
            Event::ExecRun(insn, run) => {
                self.execute(cpu, &insn);
                self.apply(cpu, Event::Run(run));
            }
            Event::Run(run) => add_run(&mut self.cpus[cpu], run),
            Event::Access {
                vaddr,
                paddr,
                size,
                write,
                after,
            } => {
                let word = word_of(paddr);
                let slot = word as usize & (WORDS - 1);
                if let Some((a, serial)) = after.get() {
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
                let mut at = match ipi {
                    0 => self.frontier,
                    n => self
                        .ipi_clocks
                        .get(n as usize - 1)
                        .copied()
                        .unwrap_or(self.frontier),
                };
                if ipi != 0 && self.opts.virt.on() {
                    // The host wakes the blocked vCPU when the message
                    // comes, through its scheduler; the re-entry injects
                    // the interrupt, so its delivery exits no more.
                    at += u64::from(self.profile.ipi_latency) + u64::from(self.profile.vcpu_wake);
                }
                let c = &mut self.cpus[cpu];
                c.idle += at.saturating_sub(c.clock());
                c.woken_by = ipi;
            }
            Event::Apic { send } => {
                self.cpus[cpu].c.cycles += u64::from(self.profile.apic_access);
                self.cpus[cpu].c.ipis += u64::from(send);
                // Under a hypervisor without posted interrupts the guest's
                // ICR write exits: the hypervisor sends the IPI for it.
                if send && self.opts.virt.on() {
                    self.cpus[cpu].c.cycles += u64::from(self.profile.vmexit);
                    self.cpus[cpu].c.vm_exits += 1;
                }
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
                // Under a hypervisor without posted interrupts an IPI to a
                // running vCPU kicks it out (an exit), and the entry after
                // injects the interrupt; one that woke it from HLT came in
                // with that wake-up.
                if ipi != 0 && self.opts.virt.on() && self.cpus[cpu].woken_by != ipi {
                    self.cpus[cpu].c.cycles += u64::from(self.profile.vmexit);
                    self.cpus[cpu].c.vm_exits += 1;
                }
                // Delivery through the gate: int n's microcode and reads
                // (from ring 3 also the TSS's ring-0 stack).
                self.cpus[cpu].c.cycles += u64::from(self.profile.int_n);
                self.deliver(cpu, vector, from_user);
            }
        }
    }
}

/// The 4-byte word of a physical address (the granule of data dependence:
/// CPUs writing different words of one line are false sharing, not
/// communication).
fn word_of(paddr: u64) -> u32 {
    (paddr >> 2) as u32
}

#[cfg(test)]
mod ring_tests {
    use std::collections::VecDeque;

    use super::{Event, Ring};

    /// The ring against the standard deque: pushes and pops in random
    /// order, through wrap-arounds and growths with the head anywhere.
    #[test]
    fn the_ring_keeps_the_order_of_a_deque() {
        let (mut ring, mut deque) = (Ring::default(), VecDeque::new());
        let mut x = 0x2545_f491_4f6c_dd1du64;
        for n in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            // Pushes outnumber pops while n is low, then pops do.
            if x % 100 < if n < 100_000 { 60 } else { 35 } {
                ring.push_back(Event::Wake { ipi: n });
                deque.push_back(n);
            } else {
                let got = ring.pop_front().map(|ev| match ev {
                    Event::Wake { ipi } => ipi,
                    _ => unreachable!(),
                });
                assert_eq!(got, deque.pop_front());
            }
            assert_eq!(ring.len(), deque.len());
            let back = ring.back_mut().map(|ev| match *ev {
                Event::Wake { ipi } => ipi,
                _ => unreachable!(),
            });
            assert_eq!(back, deque.back().copied());
        }
        assert!(ring.slots.len() > 1 << 14, "the ring grew");
    }
}
