//! The window between QEMU's order and clock order (several CPUs): what
//! each lane has applied, what waits in the lanes, the highest clock
//! applied, and whether the last drain left anything free to go. `order`
//! changes what is applied, what waits and the frontier only through
//! [`Window`]'s methods (`push`, `pop`, `applied`, `reached`, `take_exec`,
//! `took_of_run`, `join_run`), and every way of applying an event asks the
//! other lanes' [`Bounds`] one question, [`Bounds::may_go`] (each bound an
//! excluded end: `t < end`), and after it whether the CPU stays ahead
//! ([`Bounds::ahead`]: no drain need look again); only the drain may also
//! force a blocked lane's event, past the bound.
//!
//! At rest, between two of the machine's entry points, it holds
//! ([`Machine::window_invariant`], checked by a `debug_assert!` at the end
//! of every entry point of `order`):
//!
//! 1. `buffered` is the weight of every lane's queue: an instruction or
//!    other event weighs 1, a run of inline instructions as many as it
//!    holds, an instruction with its run 1 more;
//! 2. `frontier` is the highest clock of any CPU: a CPU's clock moves only
//!    by its events, as they are applied, and the frontier follows;
//! 3. `holding` is the number of lanes whose `hold` is set;
//! 4. the bounds kept for one lane (`bounds_of`) are the bounds the other
//!    lanes set it now;
//! 5. once `settled`, nothing is free to go: no lane is the drain's choice
//!    unblocked, and none is to be forced (the queues are within the
//!    bound, or no lane can be chosen).

use super::order::{Event, MAX_BUFFERED};
use super::ring::Ring;
use super::Machine;

/// A CPU's queue of events and whether it is running.
#[derive(Clone, Debug, Default)]
pub(super) struct Lane {
    pub(super) queue: Ring,
    /// Not yet started, or its last event was a `hlt`.
    pub(super) stopped: bool,
    /// It sent an IPI, and no other CPU has produced an event since: once
    /// the IPI is applied (`ipi_applied`), it waits at the send's clock.
    pub(super) hold: bool,
    pub(super) ipi_applied: bool,
    /// IPIs sent (in QEMU's order) when this CPU last halted.
    pub(super) ipis_at_stop: u64,
    /// Events applied so far: the serial number of the queue's head (an
    /// event's serial is its position in everything the lane was given).
    pub(super) applied: u64,
}

impl Lane {
    /// A lane whose CPU has not started yet.
    pub(super) fn new() -> Lane {
        Lane {
            stopped: true,
            ..Lane::default()
        }
    }

    pub(super) fn held(&self) -> bool {
        self.hold && self.ipi_applied
    }

    /// The lane's head waits, so that its CPU neither runs nor holds
    /// anybody back: a wake-up or an interrupt whose IPI is not applied yet
    /// (`ipis` are), or an access whose write (by lane `a`, its event
    /// `serial`) is not.
    #[inline(always)]
    pub(super) fn head_waits(&self, lanes: &[Lane], ipis: u64) -> bool {
        match self.queue.front() {
            Some(Event::Wake { ipi }) | Some(Event::Interrupt { ipi, .. }) => *ipi > ipis,
            Some(Event::Access { after, .. }) => match after.get() {
                Some((a, serial)) => lanes[a as usize].applied <= serial,
                None => false,
            },
            _ => false,
        }
    }
}

/// What the other lanes say of one lane `k` going on with its events, as
/// clocks: each an end, excluded. One convention for every test: lane
/// `k`'s clock `t` is inside a bound while `t < end`. A bound nobody sets
/// is `u64::MAX` (no modelled clock reaches it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Bounds {
    /// `k` stays the drain's choice while its clock is below this: the
    /// lowest candidate's clock among the lanes before it (ties go to the
    /// lower lane), and one past the lowest among the lanes after it.
    choice: u64,
    /// Nobody holds `k` back while its clock is below this: one past the
    /// lowest clock of a running lane with nothing queued, or held.
    free: u64,
    /// With `k`'s lane empty (its events arrive one by one, each applied at
    /// once), no other lane may go while `k`'s clock is below this: the
    /// lowest candidate's clock, before or after `k` (an empty lane holds
    /// back only a higher clock).
    ahead: u64,
    /// The lowest serial among `k`'s writes that another lane's head waits
    /// for (`u64::MAX`: none); once `k` has applied it, that lane may go.
    pub(super) release: u64,
}

impl Bounds {
    /// From the lowest candidates' clocks before `k` and after it, the
    /// lowest blocking lane's clock (each `u64::MAX` when there is none)
    /// and the serial `k` releases another lane at.
    pub(super) fn new(below: u64, above: u64, blocker: u64, release: u64) -> Bounds {
        Bounds {
            choice: below.min(above.saturating_add(1)),
            free: blocker.saturating_add(1),
            ahead: below.min(above),
            release,
        }
    }

    /// The question every way of applying an event asks: whether `k`'s next
    /// event, at clock `t`, is the one the drain would apply now, unforced
    /// (`k` is the lowest-clock lane and nobody behind it holds it back).
    #[inline(always)]
    pub(super) fn may_go(&self, t: u64) -> bool {
        t < self.end()
    }

    /// The end of [`Bounds::may_go`].
    #[inline(always)]
    pub(super) fn end(&self) -> u64 {
        self.choice.min(self.free)
    }

    /// Whether `k` may stop at clock `t` with its lane empty and leave the
    /// others waiting, so that no drain need look again: every other
    /// candidate's clock is above `t`.
    #[inline(always)]
    pub(super) fn ahead(&self, t: u64) -> bool {
        t < self.ahead
    }

    /// The end of "it may go, and it stays ahead after", for the events of
    /// a lane that stays empty: each next one goes while its clock (the
    /// clock after the one before) is below it.
    #[inline(always)]
    pub(super) fn end_ahead(&self) -> u64 {
        self.ahead.min(self.free)
    }

    /// Whether `t` is past what the blocking lanes allow (the lane is
    /// forced, if it goes).
    #[inline(always)]
    pub(super) fn blocked(&self, t: u64) -> bool {
        t >= self.free
    }

    /// Whether `k` is still the drain's choice at clock `t`.
    #[inline(always)]
    pub(super) fn chosen(&self, t: u64) -> bool {
        t < self.choice
    }

    /// No other lane bounds `k`: no candidate, no blocker.
    #[inline(always)]
    pub(super) fn unbounded(&self) -> bool {
        self.choice == u64::MAX && self.free == u64::MAX
    }

    /// Another lane's head waits for one of `k`'s writes.
    #[inline(always)]
    pub(super) fn waits_on_k(&self) -> bool {
        self.release != u64::MAX
    }
}

/// What a queued event weighs in `buffered`: a run counts as its
/// instructions, as their `Exec`s would.
#[inline(always)]
pub(super) fn weight(ev: &Event) -> usize {
    match ev {
        Event::Run(run) => run.len(),
        Event::ExecRun(_, run) => 1 + run.len(),
        _ => 1,
    }
}

/// The window: see the module's doc, which states its invariant.
#[derive(Clone, Debug)]
pub(super) struct Window {
    pub(super) lanes: Vec<Lane>,
    /// The weight of every lane's queue.
    pub(super) buffered: usize,
    /// The highest clock of an applied event.
    pub(super) frontier: u64,
    /// Lanes whose `hold` is set.
    pub(super) holding: usize,
    /// Events that may wait before the lowest-clock one is forced:
    /// [`MAX_BUFFERED`] (a test sets fewer).
    pub(super) bound: usize,
    /// Events applied out of clock order because the queues were full.
    pub(super) forced: u64,
    /// The last drain applied everything it could, and nothing it decides
    /// from has changed since so as to free an event.
    pub(super) settled: bool,
    /// The last drain found no lane to choose (each queued lane is held or
    /// its head waits).
    pub(super) unmoved: bool,
    /// Reference mode: every event waits in its lane and every arrival
    /// drains (no direct way, no skipped drain), as before those were
    /// added; the tests hold the fast ways to it.
    pub(super) reference: bool,
    /// The other lanes' bounds on one lane, kept while only it moves (the
    /// direct way); None: to be found again.
    pub(super) bounds_of: Option<(usize, Bounds)>,
}

impl Window {
    pub(super) fn new() -> Window {
        Window {
            lanes: Vec::new(),
            buffered: 0,
            frontier: 0,
            holding: 0,
            bound: MAX_BUFFERED,
            forced: 0,
            settled: false,
            unmoved: false,
            reference: false,
            bounds_of: None,
        }
    }

    // ---- Changes: each keeps `buffered`, `applied` and `frontier`. ----

    /// Queues `ev` in lane `k`.
    #[inline(always)]
    pub(super) fn push(&mut self, k: usize, ev: Event) {
        self.buffered += weight(&ev);
        self.lanes[k].queue.push_back(ev);
    }

    /// Takes lane `k`'s head, to be applied; [`Window::applied`] counts
    /// it once it is (an access's serial is the count before it).
    #[inline(always)]
    pub(super) fn pop(&mut self, k: usize) -> Option<Event> {
        let ev = self.lanes[k].queue.pop_front()?;
        self.buffered -= weight(&ev);
        Some(ev)
    }

    /// Lane `k` sent an IPI: it holds at the send's clock until another
    /// lane runs ([`Window::release_others`]).
    #[inline(always)]
    pub(super) fn hold(&mut self, k: usize) {
        let lane = &mut self.lanes[k];
        self.holding += usize::from(!lane.hold);
        lane.hold = true;
    }

    /// Lane `k` runs: every other lane's hold ends (their IPIs' targets
    /// run, or will wake at the send's clock). Whether one of them was
    /// held at its send's clock, which frees what waited on it.
    #[inline(always)]
    pub(super) fn release_others(&mut self, k: usize) -> bool {
        let mut released = false;
        if self.holding > usize::from(self.lanes[k].hold) {
            for (j, lane) in self.lanes.iter_mut().enumerate() {
                if j != k && lane.hold {
                    released |= lane.held();
                    lane.hold = false;
                    lane.ipi_applied = false;
                    self.holding -= 1;
                }
            }
        }
        released
    }

    /// A drain applied all it could, and nothing it decides from has
    /// changed since (part 5 of the invariant holds from now).
    #[inline(always)]
    pub(super) fn settled_now(&mut self) {
        self.settled = true;
    }

    /// A drain's last look: it found no lane to choose (`!moved`), or
    /// chose one.
    #[inline(always)]
    pub(super) fn drained(&mut self, moved: bool) {
        self.unmoved = !moved;
    }

    /// Nothing is settled any more (QEMU is exiting: every event went).
    #[inline(always)]
    pub(super) fn unsettle(&mut self) {
        self.settled = false;
        self.bounds_of = None;
    }

    /// Lane `k` applied an event (taken from its queue, or at once without
    /// queueing it): its CPU's clock is `clock` after it.
    #[inline(always)]
    pub(super) fn applied(&mut self, k: usize, clock: u64) {
        self.lanes[k].applied += 1;
        self.reached(clock);
    }

    /// A CPU's clock is `clock` after an applied event.
    #[inline(always)]
    pub(super) fn reached(&mut self, clock: u64) {
        self.frontier = self.frontier.max(clock);
    }

    /// Lane `k`'s head is an instruction with a run after it: the
    /// instruction is taken (to be applied), the run stays the head.
    #[inline(always)]
    pub(super) fn take_exec(&mut self, k: usize) -> Option<(super::Insn, &'static [u32])> {
        let head = self.lanes[k].queue.front_mut()?;
        let Event::ExecRun(insn, run) = *head else {
            return None;
        };
        *head = Event::Run(run);
        self.buffered -= 1;
        Some((insn, run))
    }

    /// `done` instructions of the run at lane `k`'s head (`run`) were
    /// applied, its CPU's clock `clock` after them: the rest stays the
    /// head, or the run is gone (applied).
    #[inline(always)]
    pub(super) fn took_of_run(&mut self, k: usize, run: &'static [u32], done: usize, clock: u64) {
        if done == run.len() {
            self.pop(k);
            self.applied(k, clock);
        } else if let Some(head) = self.lanes[k].queue.front_mut() {
            *head = Event::Run(&run[done..]);
            self.buffered -= done;
            self.reached(clock);
        }
    }

    /// A run that arrives in lane `k` behind its queue: joined to a waiting
    /// instruction at the back (one entry), else queued. False, having
    /// done nothing, when the lane is empty.
    #[inline(always)]
    pub(super) fn join_run(&mut self, k: usize, run: &'static [u32]) -> bool {
        let lane = &mut self.lanes[k];
        let Some(back) = lane.queue.back_mut() else {
            return false;
        };
        match *back {
            Event::Exec(insn) => *back = Event::ExecRun(insn, run),
            _ => lane.queue.push_back(Event::Run(run)),
        }
        self.buffered += run.len();
        true
    }

    // ---- Questions. ----

    /// No more events wait than the bound allows: none is to be forced.
    #[inline(always)]
    pub(super) fn within_bound(&self) -> bool {
        self.buffered <= self.bound
    }

    /// Whether the window is unchanged by an event of weight `n` that
    /// arrives in lane `k`: it only waits behind the others, nothing the
    /// drain decides from changing (the
    /// heads of the queues, which lanes are empty, stopped or held): the
    /// window is settled, the lane is running and not empty, and the
    /// queues stay within the bound (or the last drain found no lane to
    /// choose, and the bound forces only a chosen lane's events). A `hlt`
    /// or an IPI's send, or another lane's hold to release, changes more:
    /// the caller looks at those.
    #[inline(always)]
    pub(super) fn unchanged_by(&self, k: usize, n: usize) -> bool {
        let lane = &self.lanes[k];
        self.settled
            && !self.reference
            && !lane.stopped
            && !lane.queue.is_empty()
            && (self.buffered + n <= self.bound || self.unmoved)
    }

    /// Whether an event that arrives in lane `k` may be applied at once if
    /// its bounds allow ([`Bounds::may_go`]): the window is settled, and
    /// the lane is running, empty and not held.
    #[inline(always)]
    pub(super) fn may_go_direct(&self, k: usize) -> bool {
        let lane = &self.lanes[k];
        self.settled && !self.reference && !lane.stopped && lane.queue.is_empty() && !lane.held()
    }

    /// The bounds kept for lane `k` when its events may go at once with no
    /// drain after them ([`Window::may_go_direct`], and further: no other
    /// lane's hold is to be released, the queues are within the bound, no
    /// other lane waits for one of `k`'s writes). None: the ordinary way.
    #[inline(always)]
    pub(super) fn quick(&self, k: usize) -> Option<Bounds> {
        let (j, b) = self.bounds_of?;
        let ready = j == k
            && !b.waits_on_k()
            && self.within_bound()
            && self.holding <= usize::from(self.lanes[k].hold)
            && self.may_go_direct(k);
        ready.then_some(b)
    }

    /// Whether the queued events weigh what `buffered` says (part 1 of the
    /// invariant): counted in full while few wait, else as a lower bound
    /// (every queued event weighs at least 1).
    fn weights_agree(&self) -> bool {
        const COUNTED: usize = 1 << 10;
        let queued: usize = self.lanes.iter().map(|l| l.queue.len()).sum();
        if queued > COUNTED {
            return self.buffered >= queued;
        }
        let total: usize = self
            .lanes
            .iter()
            .map(|l| {
                (0..l.queue.len())
                    .map(|i| weight(l.queue.get(i)))
                    .sum::<usize>()
            })
            .sum();
        total == self.buffered
    }
}

impl Machine {
    /// The window's invariant (the module's doc): `Err` names the part
    /// that does not hold. Only for several CPUs (with one, events are
    /// applied as they come and no window is kept).
    pub(super) fn window_invariant(&self) -> Result<(), String> {
        let w = &self.w;
        if !self.ordered {
            return Ok(());
        }
        if !w.weights_agree() {
            return Err(format!("1: {} buffered, not what waits", w.buffered));
        }
        let highest = self.cpus.iter().map(|c| c.clock()).max().unwrap_or(0);
        if w.frontier != highest {
            return Err(format!(
                "2: the frontier {} is not the highest clock {highest}",
                w.frontier
            ));
        }
        let holding = w.lanes.iter().filter(|l| l.hold).count();
        if w.holding != holding {
            return Err(format!("3: holding {} of {holding}", w.holding));
        }
        if let Some((k, b)) = w.bounds_of {
            let now = self.bounds(k, false);
            if b != now {
                return Err(format!("4: lane {k}'s kept bounds {b:?}, now {now:?}"));
            }
        }
        if w.settled {
            if let Some(c) = self.choose(false) {
                if !c.bounds.blocked(c.t) || !w.within_bound() {
                    return Err(format!(
                        "5: settled, but lane {} may go at {} ({} buffered)",
                        c.k, c.t, w.buffered
                    ));
                }
            }
        }
        Ok(())
    }

    /// Checks the window's invariant (debug builds): at the end of every
    /// entry point of `order`.
    #[inline(always)]
    pub(super) fn check_window(&self) {
        debug_assert_eq!(self.window_invariant(), Ok(()), "the ordering window");
    }
}
