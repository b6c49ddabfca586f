//! The data side of the model: TLB lookups, and each cache line's way
//! through L1, L2, L3 and, by the MESI directory, the other CPUs' caches.
//! Each access is applied in clock order (see `order`).

use abi::layout::KERNEL_MAP_END;

use crate::cache::LineState;
use crate::coherence::Outcome;
use crate::profile::PAIR_BYTES;

use super::{Machine, NO_LINE, PAGE_SHIFT};

impl Machine {
    fn is_global(&self, page: u32) -> bool {
        self.opts.pge && page < KERNEL_MAP_END >> PAGE_SHIFT
    }

    /// A TLB lookup of `page`; returns its cost (0 on a first-level hit).
    #[inline(always)]
    pub(super) fn tlb(&mut self, cpu: usize, page: u32, instruction: bool) -> u64 {
        if self.cpus[cpu].first_tlb(instruction).lookup(page) {
            return 0;
        }
        self.tlb_miss(cpu, page, instruction)
    }

    /// [`Machine::tlb`] past a first-level miss: the entry is filled, from
    /// the STLB if it hits, else by a page walk.
    #[inline(never)]
    fn tlb_miss(&mut self, cpu: usize, page: u32, instruction: bool) -> u64 {
        let global = self.is_global(page);
        let (stlb_latency, walk) = (
            self.profile.stlb_latency,
            self.profile.walk_cost(self.opts.virt),
        );
        let c = &mut self.cpus[cpu];
        c.first_tlb(instruction).fill(page, global);
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
                o.last_vline = NO_LINE;
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
    #[inline(always)]
    fn line(&mut self, cpu: usize, line: u64, write: bool) -> u64 {
        let c = &mut self.cpus[cpu];
        if line == c.last_line && (c.last_line_dirty || !write) {
            return 0;
        }
        c.last_line = line;
        c.last_line_dirty = write;
        let before = c.l1.lookup(line, write);
        // An L1 hit costs nothing more, unless it is a write to a line
        // other CPUs may share.
        if before != LineState::Invalid && !(self.ordered && write && before != LineState::Modified)
        {
            return 0;
        }
        self.line_beyond_l1(cpu, line, write, before)
    }

    /// [`Machine::line`] past L1 (`before`: the line's state there): a
    /// write to a line held Shared or Exclusive on several CPUs, or a miss.
    #[inline(never)]
    fn line_beyond_l1(&mut self, cpu: usize, line: u64, write: bool, before: LineState) -> u64 {
        if before != LineState::Invalid {
            // S: an upgrade that invalidates the sharers; E: silent.
            let out = self.dir.write(cpu, line, before);
            return self.coherence(cpu, line, &out).1;
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

    /// Whether a data access as the plugin sees it changes nothing the
    /// model keeps, so the plugin may skip the rest: no argument waits for
    /// it, it lies in the virtual line of the CPU's last data access (so on
    /// the same page, whose DTLB entry is most recently used, and the same
    /// physical line, already most recently used in L1), and it is no
    /// write to a line not yet Modified. `Machine::mem` would find exactly
    /// that, after the translation. With several CPUs it must also be an
    /// access `direct` would apply at once ([`Machine::repeat_ordered`]).
    /// Not in reference mode, whose boots the tests hold this to.
    #[inline(always)]
    pub fn repeat(&mut self, cpu: usize, vaddr: u32, size: u32, write: bool) -> bool {
        !self.w.reference
            && self.repeat_alone(cpu, vaddr, size.max(1), write)
            && (!self.ordered || self.quick_for(cpu) && self.repeat_ordered(cpu, vaddr, write))
    }

    /// [`Machine::repeat`] when [`Machine::alone`] holds (one CPU, not in
    /// reference mode), for an access of `size` bytes (at least one): the
    /// line tests, which `repeat` makes too.
    #[inline(always)]
    pub fn repeat_alone(&self, cpu: usize, vaddr: u32, size: u32, write: bool) -> bool {
        let (Some(c), Some(f)) = (self.cpus.get(cpu), self.fronts.get(cpu)) else {
            return false;
        };
        let vline = vaddr >> self.line_shift;
        vline == c.last_vline
            && vaddr.wrapping_add(size - 1) >> self.line_shift == vline
            && (c.last_line_dirty || !write)
            && !f.waits_for_arg()
    }

    /// The quick case of a data access on one CPU, when [`Machine::alone`]
    /// holds (`size`: at least one byte): one line, whose physical address
    /// the front knows without asking QEMU, on the last data page or the
    /// most recently used entry of its DTLB set, in the last data line or
    /// the most recently used way of its L1 set, with no argument waiting.
    /// Such an access costs nothing and only moves the most-recent marks
    /// (and makes a written line Modified), as [`Machine::mem`] would:
    /// applied here, it returns true. False, having changed nothing, for
    /// any other access.
    #[inline(always)]
    pub fn access_alone(&mut self, cpu: usize, vaddr: u32, size: u32, write: bool) -> bool {
        let shift = self.line_shift;
        let (Some(c), Some(f)) = (self.cpus.get_mut(cpu), self.fronts.get(cpu)) else {
            return false;
        };
        let vline = vaddr >> shift;
        if vaddr.wrapping_add(size - 1) >> shift != vline || f.waits_for_arg() {
            return false;
        }
        let Some(paddr) = f.known_paddr(vaddr) else {
            return false;
        };
        let page = vaddr >> PAGE_SHIFT;
        if page != c.last_dpage && !c.dtlb.hits_first(page) {
            return false;
        }
        let line = paddr >> shift;
        if line != c.last_line || (write && !c.last_line_dirty) {
            if c.l1.lookup_first(line, write).is_none() {
                return false;
            }
            c.last_line = line;
            c.last_line_dirty = write;
        }
        c.last_dpage = page;
        c.last_vline = vline;
        true
    }

    /// A data access of `size` bytes at virtual `vaddr`, physical `paddr`,
    /// applied now: the pages it touches go through the DTLB, the lines
    /// through the caches. (A page-crossing access is taken as physically
    /// contiguous.)
    #[inline]
    pub fn data(&mut self, cpu: usize, vaddr: u32, paddr: u64, size: u32, write: bool) {
        // The common case first: one line, so one page (whose TLB lookup
        // is skipped when it is the last data page, the most recently used
        // entry), as below.
        let shift = self.line_shift;
        let size = size.max(1);
        let end = vaddr.wrapping_add(size - 1);
        let (page, line) = (vaddr >> PAGE_SHIFT, paddr >> shift);
        if end >> PAGE_SHIFT == page
            && (paddr + u64::from(size) - 1) >> shift == line
            && cpu < self.cpus.len()
        {
            let mut stall = 0;
            if page != self.cpus[cpu].last_dpage {
                stall += self.tlb(cpu, page, false);
                self.cpus[cpu].last_dpage = page;
            }
            stall += self.line(cpu, line, write);
            let c = &mut self.cpus[cpu];
            c.c.cycles += stall;
            // One physical line on one page: one virtual line.
            c.last_vline = vaddr >> shift;
            return;
        }
        self.data_lines(cpu, vaddr, paddr, size, write);
    }

    /// [`Machine::data`] beyond its common case.
    #[inline(never)]
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
        // (A half-open range: an inclusive one costs a check per step.)
        for line in first..last + 1 {
            stall += self.line(cpu, line, write);
        }
        let c = &mut self.cpus[cpu];
        c.c.cycles += stall;
        let vline = vaddr >> self.line_shift;
        c.last_vline = if first == last && end >> self.line_shift == vline {
            vline
        } else {
            NO_LINE
        };
    }
}
