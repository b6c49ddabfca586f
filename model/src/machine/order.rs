//! The order of several CPUs' events. The front takes the plugin's
//! events as QEMU delivers them (`exec`, `mem`); with several CPUs they
//! wait in per-CPU lanes (`submit`) and are applied in modelled-clock
//! order (`drain`, `apply`). What is applied, what waits and what is free
//! to go is the window's (`window`, which states its invariant).
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

use super::window::{weight, Bounds, Lane};
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
    pub(super) fn get(self) -> Option<(u8, u64)> {
        let by = (self.0 >> Saw::SHIFT) as u8;
        (by != 0).then(|| (by - 1, self.0 & ((1 << Saw::SHIFT) - 1)))
    }
}

/// Counts a run's instructions on CPU `c`: the first, then each next one
/// while the clock before it is below `end` (a bound's end: see
/// [`Bounds`]). Returns how many it counted.
fn take_run(c: &mut super::Cpu, run: &[u32], end: u64) -> usize {
    let mut done = 0;
    for &cost in run {
        if done > 0 && c.clock() >= end {
            break;
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

/// The lane `drain` chooses: the lowest-clock lane `k` with an event that
/// can go (ties go to the lower lane), its clock `t`, and what the other
/// lanes say of it going on; it may go unforced if [`Bounds::may_go`]
/// holds at `t`.
pub(super) struct Choice {
    pub(super) k: usize,
    pub(super) t: u64,
    pub(super) bounds: Bounds,
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
                if insn.decoded.class != Class::Hlt && self.queues_only(lane, 1) {
                    self.enqueue(lane, Event::Exec(*insn));
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
        self.check_window();
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
            self.check_window();
            return;
        }
        if (LAPIC_BASE..LAPIC_BASE + LAPIC_BYTES).contains(&vaddr) {
            let send = write && vaddr == LAPIC_ICR_LOW;
            self.submit(cpu, Event::Apic { send });
            self.check_window();
            return;
        }
        let Some(paddr) = f.paddr(vaddr, translate) else {
            return;
        };
        if self.ordered {
            let lane = cpu.min(MAX_CPUS - 1);
            let behind = self.queues_only(lane, 1);
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
                self.enqueue(lane, access);
            } else {
                self.submit(cpu, access);
            }
            self.check_window();
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
            let lane = &self.w.lanes[cpu];
            *slot = (word, cpu as u8, lane.applied + lane.queue.len() as u64);
        }
        after
    }

    /// An event of `cpu`'s, in QEMU's order: applied at once with one CPU;
    /// with several, placed in its lane (or applied the direct way), and
    /// the lanes drained unless the event only waits behind the others
    /// ([`Window::unchanged_by`]). A call of its own: the front's quick ways
    /// and the events that only wait behind others
    /// ([`Machine::queues_only`]) take none.
    #[inline(never)]
    pub(super) fn submit(&mut self, cpu: usize, ev: Event) {
        let cpu = cpu.min(MAX_CPUS - 1);
        if !self.ordered {
            self.apply(cpu, ev);
            return;
        }
        // Another CPU than the IPI senders runs: they wait no longer (their
        // target, if it was halted, is this CPU or will wake at the send's
        // clock).
        let released = self.w.release_others(cpu);
        // Asked before the event changes the lane; a `hlt` stops it below.
        let unchanged = !released && self.w.unchanged_by(cpu, weight(&ev));
        if matches!(ev, Event::Apic { send: true }) {
            self.w.hold(cpu);
            self.ipis_sent += 1;
        }
        let lane = &mut self.w.lanes[cpu];
        if lane.stopped {
            // It starts, or wakes, now: by the last IPI sent since it
            // halted, if there was one.
            lane.stopped = false;
            let ipi = if self.ipis_sent > lane.ipis_at_stop {
                self.ipis_sent
            } else {
                0
            };
            self.w.push(cpu, Event::Wake { ipi });
        }
        let mut ev = ev;
        match &mut ev {
            Event::Exec(i) if i.decoded.class == Class::Hlt => {
                let lane = &mut self.w.lanes[cpu];
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
        let direct = !released
            && self.w.may_go_direct(cpu)
            && matches!(
                ev,
                Event::Exec(_) | Event::Run(_) | Event::Access { .. } | Event::Arg(..)
            );
        if !direct {
            // A lane's state may change: the bounds are to be found again.
            self.w.bounds_of = None;
        }
        if direct && self.direct(cpu, ev) {
            return;
        }
        self.w.push(cpu, ev);
        if unchanged && !self.w.lanes[cpu].stopped {
            return;
        }
        self.settle();
    }

    /// The drain after an arrival that may have changed what it decides
    /// from: the kept bounds go, and the window is settled again.
    fn settle(&mut self) {
        self.w.bounds_of = None;
        self.drain(false);
        self.w.settled_now();
    }

    /// The lane whose head goes next in clock order, with the bounds the
    /// others set it (see [`Choice`]); None when no lane can be chosen
    /// (each queued lane is held, or its head waits). `all`: every queued
    /// event goes (QEMU is exiting), held lanes too, and nobody blocks.
    #[inline(always)]
    pub(super) fn choose(&self, all: bool) -> Option<Choice> {
        let ipis = self.ipi_clocks.len() as u64;
        let lanes = &self.w.lanes;
        // One pass: the lowest-clock candidate (ties to the lower lane),
        // the lowest of the others (what the chosen lane's bounds come
        // from), the lowest clock of a lane that holds others back (the
        // candidate is neither empty nor held, so it is no blocker), and
        // the lanes whose writes a head waits for.
        let mut next: Option<(u64, usize)> = None;
        let mut second: Option<(u64, usize)> = None;
        let mut blocker = u64::MAX;
        let mut waited_on = 0u32;
        for (i, lane) in lanes.iter().enumerate() {
            if lane.head_waits(lanes, ipis) {
                if let Some(Event::Access { after, .. }) = lane.queue.front() {
                    if let Some((a, _)) = after.get() {
                        waited_on |= 1 << a;
                    }
                }
                continue;
            }
            if !lane.queue.is_empty() && (all || !lane.held()) {
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
        let (t, k) = next?;
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
        Some(Choice {
            k,
            t,
            bounds: Bounds::new(below, above, blocker, release),
        })
    }

    /// Applies queued events in clock order as far as it is safe (all:
    /// every queued event, as at exit).
    fn drain(&mut self, all: bool) {
        if self.w.reference {
            return self.drain_plain(all);
        }
        loop {
            let Some(c) = self.choose(all) else {
                self.w.drained(false);
                return;
            };
            self.w.drained(true);
            if !self.go(c.k, c.bounds, c.bounds.blocked(c.t), all) {
                return;
            }
        }
    }

    /// Lane `k`'s events, which `drain` chose with the other lanes' bounds
    /// `b` (`blocked`: something behind it holds it back), applied one
    /// after another as one `take_next` per `drain` pass would apply them:
    /// the same events in the same order, counted the same, without
    /// finding the choice again while nothing it depends on changes.
    /// Nothing but lane `k` moves, so the other lanes' bounds stand: `k`
    /// stays the choice while [`Bounds::chosen`]; unblocked, it stays so
    /// while [`Bounds::may_go`]; blocked, it stays blocked (its clock only
    /// grows) and goes on only while more than the bound of events wait
    /// (each one forced and counted; false when back within the bound, as
    /// `take_next` says). It stops when `k`'s head waits or its queue is
    /// empty, when `k` is no longer the choice, after an IPI's send
    /// (another lane's wake-up may go now, and `k` is held), and once `k`
    /// has applied a write another lane's head waits for (that lane may go
    /// now): the drain then looks again.
    fn go(&mut self, k: usize, b: Bounds, blocked: bool, all: bool) -> bool {
        if !blocked && b.unbounded() {
            return self.go_alone(k, b.release);
        }
        loop {
            // A lane whose head waited for `k`'s write may go now, even
            // unforced while `k` is blocked: look again before the bound
            // stops a blocked `k` (as `take_next` would stop it).
            if self.w.lanes[k].applied > b.release {
                return true;
            }
            if blocked && self.w.within_bound() {
                return false;
            }
            let t = self.cpus[k].clock();
            if !b.chosen(t) || (!all && b.blocked(t) != blocked) {
                return true;
            }
            let Some(&head) = self.w.lanes[k].queue.front() else {
                return true;
            };
            match head {
                // Forced, one instruction at a time, each counted (the
                // clock is already past the blocker's); else as long as
                // `k` may go.
                Event::Run(run) => {
                    self.w.forced += u64::from(blocked);
                    self.run_head(k, run, b.end());
                }
                // An instruction, and one with a run after it (the run is
                // the head then), as `take_next` applies them.
                Event::ExecRun(insn, _) => {
                    self.w.take_exec(k);
                    self.w.forced += u64::from(blocked);
                    self.execute_quick(k, &insn);
                    self.w.reached(self.cpus[k].clock());
                }
                Event::Exec(insn) => {
                    self.w.pop(k);
                    self.w.forced += u64::from(blocked);
                    self.execute_quick(k, &insn);
                    self.w.applied(k, self.cpus[k].clock());
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

    /// Whether lane `k`'s head waits ([`Lane::head_waits`]).
    #[inline(always)]
    fn head_waits(&self, k: usize) -> bool {
        let lanes = &self.w.lanes;
        lanes[k].head_waits(lanes, self.ipi_clocks.len() as u64)
    }

    /// [`Machine::go`] when no other lane bounds lane `k` (no candidate,
    /// no blocker: the others are stopped, or waiting): its events go one
    /// after another, each whole (a run at once), with nothing to compare
    /// but whether its head waits, until an IPI's send or until it has
    /// applied the write `release` another lane waits for, as `go` would.
    fn go_alone(&mut self, k: usize, release: u64) -> bool {
        loop {
            if self.w.lanes[k].applied > release {
                break;
            }
            let Some(&head) = self.w.lanes[k].queue.front() else {
                break;
            };
            let sent = match head {
                Event::Exec(insn) => {
                    self.w.pop(k);
                    self.execute_quick(k, &insn);
                    false
                }
                Event::ExecRun(insn, run) => {
                    self.w.pop(k);
                    self.execute_quick(k, &insn);
                    add_run(&mut self.cpus[k], run);
                    false
                }
                Event::Run(run) => {
                    self.w.pop(k);
                    add_run(&mut self.cpus[k], run);
                    false
                }
                head => {
                    if self.head_waits(k) {
                        break;
                    }
                    self.w.pop(k);
                    self.apply(k, head);
                    matches!(head, Event::Apic { send: true })
                }
            };
            self.w.applied(k, self.cpus[k].clock());
            if sent {
                break;
            }
        }
        true
    }

    /// [`Machine::drain`] as it was first written (the reference mode's).
    fn drain_plain(&mut self, all: bool) {
        loop {
            let mut next: Option<(u64, usize)> = None;
            let ipis = self.ipi_clocks.len() as u64;
            let lanes = &self.w.lanes;
            // A CPU whose wake-up waits for its IPI is still halted, and one
            // whose access waits for the write it saw cannot move before
            // that write: neither runs nor holds anybody back.
            let waiting = |lane: &Lane| lane.head_waits(lanes, ipis);
            for (i, lane) in lanes.iter().enumerate() {
                if !lane.queue.is_empty() && !waiting(lane) && (all || !lane.held()) {
                    let t = self.cpus[i].clock();
                    if next.is_none_or(|(nt, _)| t < nt) {
                        next = Some((t, i));
                    }
                }
            }
            let Some((t, k)) = next else { return };
            let blocked = !all
                && lanes.iter().enumerate().any(|(j, lane)| {
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
            if self.w.within_bound() {
                return false;
            }
            self.w.forced += 1;
        }
        if self.head_run(k, all) {
            return true;
        }
        let ev = self.w.pop(k).expect("non-empty lane");
        self.apply(k, ev);
        self.w.applied(k, self.cpus[k].clock());
        true
    }

    /// Applies the head of lane `k`, which `drain` has chosen, if it is a
    /// run or an instruction with a run after it (that run then becomes the
    /// head); false if it is another event.
    fn head_run(&mut self, k: usize, all: bool) -> bool {
        match self.w.lanes[k].queue.front() {
            Some(&Event::Run(run)) => self.run(k, run, all),
            Some(&Event::ExecRun(insn, _)) => {
                self.w.take_exec(k);
                self.execute(k, &insn);
                self.w.reached(self.cpus[k].clock());
            }
            _ => return false,
        }
        true
    }

    /// A run of inline instructions on `cpu` (`Machine::credit`), `cycles`
    /// their costs' sum: the quick way when it only adds to the counters
    /// at once ([`Machine::quick_add`]); else, when it only waits behind
    /// the others ([`Machine::queues_only`]), queued (joined to a waiting
    /// `Exec`); else the ordinary way.
    #[inline(always)]
    pub(super) fn queue_run(&mut self, cpu: usize, run: &'static [u32], cycles: u64) {
        let cpu = cpu.min(MAX_CPUS - 1);
        if let Some(&last) = run.last() {
            if self.quick_add(cpu, run.len() as u64, cycles, u64::from(last)) {
                return;
            }
        }
        if self.queues_only(cpu, run.len()) && self.w.join_run(cpu, run) {
            self.w.bounds_of = None;
            return;
        }
        self.submit(cpu, Event::Run(run));
    }

    /// Queues an event of one instruction or access in lane `cpu`, for
    /// which [`Machine::queues_only`] holds: all `submit` would do.
    #[inline(always)]
    fn enqueue(&mut self, cpu: usize, ev: Event) {
        self.w.push(cpu, ev);
        self.w.bounds_of = None;
    }

    /// Whether an event of weight `n` that arrives in lane `cpu` only
    /// waits behind the others ([`Window::unchanged_by`]) and no other
    /// lane's hold is to be released: `submit` would only queue it (unless
    /// it is a `hlt` or an IPI's send, which the caller rules out).
    #[inline(always)]
    fn queues_only(&self, cpu: usize, n: usize) -> bool {
        self.w.unchanged_by(cpu, n) && self.w.holding <= usize::from(self.w.lanes[cpu].hold)
    }

    /// The lowest serial among lane `k`'s writes that another lane's head
    /// waits for, or `u64::MAX` (see [`Bounds`]).
    fn release(&self, k: usize) -> u64 {
        let applied = self.w.lanes[k].applied;
        let mut release = u64::MAX;
        for lane in &self.w.lanes {
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
    pub(super) fn bounds(&self, k: usize, all: bool) -> Bounds {
        let ipis = self.ipi_clocks.len() as u64;
        let lanes = &self.w.lanes;
        let (mut below, mut above, mut blocker) = (u64::MAX, u64::MAX, u64::MAX);
        for (j, lane) in lanes.iter().enumerate() {
            if j == k || lane.head_waits(lanes, ipis) {
                continue;
            }
            let t = self.cpus[j].clock();
            if !lane.queue.is_empty() && (all || !lane.held()) {
                if j < k {
                    below = below.min(t);
                } else {
                    above = above.min(t);
                }
            }
            if !all && !lane.stopped && (lane.queue.is_empty() || lane.held()) {
                blocker = blocker.min(t);
            }
        }
        Bounds::new(below, above, blocker, self.release(k))
    }

    /// The bounds kept for lane `cpu`, found now if they are another
    /// lane's or none.
    #[inline(always)]
    fn bounds_for(&mut self, cpu: usize) -> Bounds {
        match self.w.bounds_of {
            Some((k, b)) if k == cpu => b,
            _ => {
                let b = self.bounds(cpu, false);
                self.w.bounds_of = Some((cpu, b));
                b
            }
        }
    }

    /// The fast way for an event that arrives in lane `cpu` while it may go
    /// at once ([`Window::may_go_direct`]): when its bounds say it may go
    /// ([`Bounds::may_go`]), it is applied here without waiting in the
    /// lane; if the CPU's clock then stays ahead of every other candidate
    /// ([`Bounds::ahead`]), nothing else could go and no drain is needed.
    /// The other lanes' bounds are kept between such events, as only this
    /// CPU moves. Returns false, having done nothing, when the event must
    /// take the ordinary way.
    fn direct(&mut self, cpu: usize, ev: Event) -> bool {
        let mut b = self.bounds_for(cpu);
        // An access that waits for another CPU's write, or another lane
        // that waits for one of this CPU's: the ordinary way.
        if b.waits_on_k() || matches!(ev, Event::Access { after, .. } if after != Saw::NONE) {
            return false;
        }
        if !b.may_go(self.cpus[cpu].clock()) {
            return false;
        }
        match ev {
            // Called one by one (the reference), each instruction of the
            // run after the first arrives once the drain its predecessor
            // set off is done, into an empty lane: another lane's event at
            // the same clock has gone before it then, whichever lane is the
            // lower. So each after the first goes only while the one before
            // left the CPU ahead ([`Bounds::end_ahead`]); where one does
            // not, the other lanes go first (a drain, this lane empty), and
            // the rest arrives anew: directly again if it may, else it
            // waits its turn in the lane.
            Event::Run(mut run) => loop {
                let done = take_run(&mut self.cpus[cpu], run, b.end_ahead());
                if done == run.len() {
                    break;
                }
                self.w.applied(cpu, self.cpus[cpu].clock());
                self.settle();
                run = &run[done..];
                b = self.bounds_for(cpu);
                if !b.may_go(self.cpus[cpu].clock()) {
                    self.w.push(cpu, Event::Run(run));
                    self.settle();
                    return true;
                }
            },
            ev => self.apply(cpu, ev),
        }
        let t = self.cpus[cpu].clock();
        self.w.applied(cpu, t);
        if !b.ahead(t) || !self.w.within_bound() {
            // Another lane's head may go now.
            self.settle();
        }
        true
    }

    /// Whether the bounds `direct` found are lane `cpu`'s: the first test
    /// of [`Window::quick`], made before a call of
    /// [`Machine::repeat_ordered`].
    #[inline(always)]
    pub(super) fn quick_for(&self, cpu: usize) -> bool {
        matches!(self.w.bounds_of, Some((k, _)) if k == cpu)
    }

    /// `n` instructions on `cpu` that only add their costs (`cycles` in
    /// all, the last one's `last`), taken the direct way when `direct`
    /// would apply them at once, one after another, with no drain after
    /// them ([`Window::quick`]): the last one may go, and the CPU stays
    /// ahead after it. They only add to its counters and count as one
    /// event, as an `Exec` or a `Run` would. False, having done nothing,
    /// for the ordinary way.
    #[inline(always)]
    fn quick_add(&mut self, cpu: usize, n: u64, cycles: u64, last: u64) -> bool {
        let Some(b) = self.w.quick(cpu) else {
            return false;
        };
        let end = self.cpus[cpu].clock() + cycles;
        if !b.may_go(end - last) || !b.ahead(end) {
            return false;
        }
        let c = &mut self.cpus[cpu].c;
        c.insns += n;
        c.cycles += cycles;
        self.w.applied(cpu, end);
        true
    }

    /// [`Machine::repeat`]'s access with several CPUs, which changes
    /// nothing in the caches: when it is an `Access` that `direct` would
    /// apply at once without a drain after it ([`Window::quick`]; it may
    /// go, and costs nothing, so the CPU stays ahead if it is now), and it
    /// saw no other CPU's write, it is taken here: its serial, and for a
    /// write the tables of last writes, as `submit` and `apply` would set
    /// them. False, having done nothing, for the ordinary way.
    #[inline(never)]
    pub(super) fn repeat_ordered(&mut self, cpu: usize, vaddr: u32, write: bool) -> bool {
        let Some(b) = self.w.quick(cpu) else {
            return false;
        };
        let t = self.cpus[cpu].clock();
        if !b.may_go(t) || !b.ahead(t) {
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
        let serial = self.w.lanes[cpu].applied;
        if write {
            self.front_writes[slot] = (word, cpu as u8, serial);
            self.applied_writes[slot] = (word, cpu as u8, serial, t);
        }
        self.w.applied(cpu, t);
        true
    }

    /// Applies the run at the head of lane `k`, which `drain` has chosen:
    /// its first instruction, then each next one as long as `drain` would
    /// choose it again. Nothing but lane `k`'s clock changes meanwhile, so
    /// the bounds are found once.
    fn run(&mut self, k: usize, run: &'static [u32], all: bool) {
        let b = self.bounds(k, all);
        self.run_head(k, run, b.end());
    }

    /// Applies the run at the head of lane `k` as [`take_run`] does up to
    /// `end`; what it did not apply stays the head.
    #[inline(always)]
    fn run_head(&mut self, k: usize, run: &'static [u32], end: u64) {
        let done = take_run(&mut self.cpus[k], run, end);
        self.w.took_of_run(k, run, done, self.cpus[k].clock());
    }

    /// Applies every queued event (QEMU is exiting).
    pub fn finish(&mut self) {
        self.drain(true);
        self.w.unsettle();
        self.check_window();
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
                    let serial = self.w.lanes[cpu].applied;
                    self.applied_writes[slot] = (word, cpu as u8, serial, self.cpus[cpu].clock());
                }
            }
            Event::Arg(id, value) => self.argument(cpu, id, value),
            Event::Wake { ipi } => {
                let mut at = match ipi {
                    0 => self.w.frontier,
                    n => self
                        .ipi_clocks
                        .get(n as usize - 1)
                        .copied()
                        .unwrap_or(self.w.frontier),
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
                    self.w.lanes[cpu].ipi_applied = true;
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
