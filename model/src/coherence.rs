//! MESI coherence between the CPUs' private caches: a directory that knows,
//! for every line some CPU holds, which CPUs hold it and whether one of
//! them holds it alone (Exclusive or Modified). The caches keep their own
//! line states; the directory decides what an access must do to the
//! others, in the manner of gem5's Ruby tables:
//!
//! | request          | others hold          | others become | requester | counted                        |
//! |------------------|----------------------|---------------|-----------|--------------------------------|
//! | read miss        | nothing              | -             | E         | -                              |
//! | read miss        | S                    | S             | S         | -                              |
//! | read miss        | E (clean owner)      | S             | S         | coherence miss                 |
//! | read miss        | M (dirty owner)      | S             | S         | coherence miss, transfer       |
//! | write, held S    | S                    | I             | M         | upgrade, invalidations         |
//! | write miss       | nothing              | -             | M         | -                              |
//! | write miss       | S                    | I             | M         | invalidations                  |
//! | write miss       | E or M (owner)       | I             | M         | coherence miss, invalidation, transfer if M |
//! | write, held E    | nothing (silent E→M) | -             | M         | -                              |
//!
//! MESI, not MOESI: the Intel CPUs of the profiles keep no Owned state
//! (a dirty line read by another CPU is written back and both hold it S).

use std::collections::HashMap;

use crate::cache::LineState;

/// CPUs a directory entry can name (abi::layout::MAX_CPUS fits).
pub const MAX_CPUS: usize = 16;

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Entry {
    /// One bit per CPU whose private caches hold the line.
    holders: u16,
    /// The CPU that holds it alone (E or M), if one does.
    owner: Option<u8>,
    /// The owner has written it (M).
    dirty: bool,
}

/// What the other CPUs must do, and what the requester gets.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    /// The requester's new state.
    pub state: Option<LineState>,
    /// The line was E or M in another CPU's cache.
    pub coherence_miss: bool,
    /// The line comes dirty from another CPU's cache.
    pub transfer: bool,
    /// The requester held the line S and now needs it M.
    pub upgrade: bool,
    /// CPUs whose copy is invalidated (bit per CPU).
    pub invalidate: u16,
    /// The CPU whose E/M copy becomes S.
    pub downgrade: Option<usize>,
}

impl Outcome {
    pub fn invalidations(&self) -> u32 {
        self.invalidate.count_ones()
    }
}

#[derive(Clone, Debug, Default)]
pub struct Directory {
    lines: HashMap<u64, Entry>,
}

impl Directory {
    pub fn new() -> Directory {
        Directory::default()
    }

    /// CPU `cpu` reads `line`, which its caches do not hold.
    pub fn read_miss(&mut self, cpu: usize, line: u64) -> Outcome {
        let e = self.lines.entry(line).or_default();
        let me = 1u16 << cpu;
        let mut out = Outcome::default();
        match e.owner {
            Some(o) if o as usize != cpu => {
                out.coherence_miss = true;
                out.transfer = e.dirty;
                out.downgrade = Some(o as usize);
                out.state = Some(LineState::Shared);
            }
            _ if e.holders & !me != 0 => out.state = Some(LineState::Shared),
            _ => out.state = Some(LineState::Exclusive),
        }
        if out.state == Some(LineState::Exclusive) {
            e.owner = Some(cpu as u8);
            e.dirty = false;
        } else {
            e.owner = None;
            e.dirty = false;
        }
        e.holders |= me;
        out
    }

    /// CPU `cpu` writes `line`, holding it in state `held` (Invalid: a miss).
    pub fn write(&mut self, cpu: usize, line: u64, held: LineState) -> Outcome {
        let e = self.lines.entry(line).or_default();
        let me = 1u16 << cpu;
        let others = e.holders & !me;
        let mut out = Outcome {
            state: Some(LineState::Modified),
            invalidate: others,
            ..Outcome::default()
        };
        match held {
            LineState::Shared => out.upgrade = true,
            LineState::Invalid => {
                if let Some(o) = e.owner.filter(|&o| o as usize != cpu) {
                    out.coherence_miss = true;
                    out.transfer = e.dirty;
                    debug_assert_eq!(others, 1 << o);
                }
            }
            LineState::Exclusive | LineState::Modified => {}
        }
        *e = Entry {
            holders: me,
            owner: Some(cpu as u8),
            dirty: true,
        };
        out
    }

    /// CPU `cpu`'s caches no longer hold `line`.
    pub fn evict(&mut self, cpu: usize, line: u64) {
        if let Some(e) = self.lines.get_mut(&line) {
            e.holders &= !(1u16 << cpu);
            if e.owner == Some(cpu as u8) {
                e.owner = None;
                e.dirty = false;
            }
            if e.holders == 0 {
                self.lines.remove(&line);
            }
        }
    }

    /// Who holds `line` alone, and whether dirty (for a prefetch that would
    /// take a line another CPU has Modified).
    pub fn owner(&self, line: u64) -> Option<(usize, bool)> {
        self.lines
            .get(&line)
            .and_then(|e| e.owner.map(|o| (o as usize, e.dirty)))
    }

    /// The state the directory gives `cpu` for `line`.
    pub fn state(&self, cpu: usize, line: u64) -> LineState {
        match self.lines.get(&line) {
            Some(e) if e.holders & (1 << cpu) != 0 => match e.owner {
                Some(o) if o as usize == cpu && e.dirty => LineState::Modified,
                Some(o) if o as usize == cpu => LineState::Exclusive,
                _ => LineState::Shared,
            },
            _ => LineState::Invalid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use LineState::*;

    #[test]
    fn first_reader_is_exclusive_second_shares() {
        let mut d = Directory::new();
        assert_eq!(d.read_miss(0, 7).state, Some(Exclusive));
        let o = d.read_miss(1, 7);
        // CPU 0 held it E: a coherence miss, no dirty transfer.
        assert_eq!(
            (o.state, o.coherence_miss, o.transfer, o.downgrade),
            (Some(Shared), true, false, Some(0))
        );
        assert_eq!((d.state(0, 7), d.state(1, 7)), (Shared, Shared));
        // A third reader finds sharers only: a plain miss.
        let o = d.read_miss(2, 7);
        assert_eq!((o.state, o.coherence_miss), (Some(Shared), false));
    }

    #[test]
    fn two_cpus_writing_one_line_bounce_it() {
        let mut d = Directory::new();
        assert_eq!(d.write(0, 1, Invalid).invalidate, 0);
        for round in 0..3 {
            let o = d.write(1, 1, Invalid);
            assert!(o.coherence_miss && o.transfer, "round {round}");
            assert_eq!(o.invalidate, 1 << 0);
            let o = d.write(0, 1, Invalid);
            assert!(o.coherence_miss && o.transfer);
            assert_eq!(o.invalidate, 1 << 1);
        }
        assert_eq!((d.state(0, 1), d.state(1, 1)), (Modified, Invalid));
    }

    #[test]
    fn two_lines_of_one_pair_do_not_interact_here() {
        // Lines 2 and 3 (one 128-byte pair of 64-byte lines): the directory
        // works per line; the pair's false sharing comes from the prefetch
        // (machine), not from here.
        let mut d = Directory::new();
        d.write(0, 2, Invalid);
        let o = d.write(1, 3, Invalid);
        assert!(!o.coherence_miss && o.invalidate == 0);
        assert_eq!(
            d.write(0, 2, Modified),
            Outcome {
                state: Some(Modified),
                ..Outcome::default()
            }
        );
    }

    #[test]
    fn read_after_remote_write_transfers_dirty_data() {
        let mut d = Directory::new();
        d.write(0, 9, Invalid);
        let o = d.read_miss(1, 9);
        assert_eq!(
            (o.coherence_miss, o.transfer, o.downgrade),
            (true, true, Some(0))
        );
        assert_eq!((d.state(0, 9), d.state(1, 9)), (Shared, Shared));
        // Reading it again after the write-back: no transfer.
        d.evict(1, 9);
        let o = d.read_miss(1, 9);
        assert!(!o.coherence_miss && !o.transfer);
    }

    #[test]
    fn upgrade_from_shared_invalidates_the_sharers() {
        let mut d = Directory::new();
        d.read_miss(0, 4);
        d.read_miss(1, 4);
        d.read_miss(2, 4);
        let o = d.write(1, 4, Shared);
        assert!(o.upgrade && !o.coherence_miss && !o.transfer);
        assert_eq!(o.invalidate, 0b101);
        assert_eq!(o.invalidations(), 2);
        assert_eq!(d.state(1, 4), Modified);
        assert_eq!(d.state(0, 4), Invalid);
    }

    #[test]
    fn eviction_forgets_the_owner() {
        let mut d = Directory::new();
        d.write(0, 5, Invalid);
        assert_eq!(d.owner(5), Some((0, true)));
        d.evict(0, 5);
        assert_eq!(d.owner(5), None);
        assert_eq!(d.read_miss(1, 5).state, Some(Exclusive));
    }
}
