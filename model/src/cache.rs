//! One level of a set-associative, physically indexed cache with LRU
//! replacement, in the manner of Cachegrind and Dinero IV: an access stream
//! of line numbers goes in, hits and misses come out.
//!
//! A line's state is named as in MESI so that the coherence directory (the
//! multi-CPU model) can drive the same arrays. With one CPU only `Invalid`,
//! `Exclusive` (clean) and `Modified` (dirty) occur.

/// MESI state of one cached line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineState {
    /// Not present.
    Invalid,
    /// Clean, and other caches may hold it too.
    Shared,
    /// Clean, and no other cache holds it.
    Exclusive,
    /// Dirty: this cache holds the only valid copy.
    Modified,
}

/// Size, associativity and line size of one cache level.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Geometry {
    pub size: u32,
    pub ways: u32,
    pub line: u32,
}

impl Geometry {
    pub fn sets(&self) -> u32 {
        self.size / (self.ways * self.line)
    }

    /// A geometry the arrays can index: line and set count powers of two.
    pub fn check(&self, what: &str) -> Result<(), String> {
        if self.line == 0 || !self.line.is_power_of_two() {
            return Err(format!(
                "{what}: line size {} is not a power of two",
                self.line
            ));
        }
        if self.ways == 0 || !self.size.is_multiple_of(self.ways * self.line) {
            return Err(format!(
                "{what}: size {} is not a multiple of ways {} x line {}",
                self.size, self.ways, self.line
            ));
        }
        if !self.sets().is_power_of_two() {
            return Err(format!(
                "{what}: {} sets is not a power of two",
                self.sets()
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Way {
    line: u64,
    state: LineState,
}

const EMPTY: Way = Way {
    line: u64::MAX,
    state: LineState::Invalid,
};

/// Moves way `i` of a set to the front (most recently used), the ways
/// before it one place back: `set[..=i].rotate_right(1)`, without the
/// general rotation's call for the few ways a set has.
#[inline]
pub(crate) fn to_front<T: Copy>(set: &mut [T], i: usize) {
    let moved = set[i];
    for j in (1..=i).rev() {
        set[j] = set[j - 1];
    }
    set[0] = moved;
}

/// A line that left the cache to make room.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    pub line: u64,
    pub state: LineState,
}

/// The cache arrays: `sets` groups of `ways` entries, each group ordered
/// most recently used first.
#[derive(Clone, Debug)]
pub struct Cache {
    geometry: Geometry,
    line_shift: u32,
    set_mask: u64,
    ways: usize,
    array: Vec<Way>,
}

impl Cache {
    /// `geometry` must have passed [`Geometry::check`].
    pub fn new(geometry: Geometry) -> Cache {
        let sets = geometry.sets() as usize;
        Cache {
            geometry,
            line_shift: geometry.line.trailing_zeros(),
            set_mask: sets as u64 - 1,
            ways: geometry.ways as usize,
            array: vec![EMPTY; sets * geometry.ways as usize],
        }
    }

    pub fn geometry(&self) -> Geometry {
        self.geometry
    }

    /// The line number of a physical address.
    pub fn line_of(&self, paddr: u64) -> u64 {
        paddr >> self.line_shift
    }

    #[inline]
    fn set(&mut self, line: u64) -> &mut [Way] {
        let s = (line & self.set_mask) as usize * self.ways;
        &mut self.array[s..s + self.ways]
    }

    /// The state of `line` here, without touching the LRU order.
    pub fn probe(&self, line: u64) -> LineState {
        let s = (line & self.set_mask) as usize * self.ways;
        self.array[s..s + self.ways]
            .iter()
            .find(|w| w.line == line && w.state != LineState::Invalid)
            .map_or(LineState::Invalid, |w| w.state)
    }

    /// Looks `line` up. A hit makes it most recently used and returns its
    /// state (a write makes it `Modified`); a miss returns `Invalid` and
    /// leaves the cache as it was (the caller fills it with [`Cache::fill`]).
    #[inline(always)]
    pub fn lookup(&mut self, line: u64, write: bool) -> LineState {
        // Most hits are on the most recently used way of the set: nothing
        // moves, and this stays small enough to inline.
        match self.lookup_first(line, write) {
            Some(before) => before,
            None => self.lookup_deeper(line, write),
        }
    }

    /// [`Cache::lookup`] when `line` is the most recently used way of its
    /// set (its state before, the way made `Modified` by a write); None,
    /// changing nothing, when it is not.
    #[inline(always)]
    pub fn lookup_first(&mut self, line: u64, write: bool) -> Option<LineState> {
        let s = (line & self.set_mask) as usize * self.ways;
        let w = &mut self.array[s];
        if w.line != line || w.state == LineState::Invalid {
            return None;
        }
        let before = w.state;
        if write {
            w.state = LineState::Modified;
        }
        Some(before)
    }

    /// [`Cache::lookup`] past the most recently used way.
    #[inline(never)]
    fn lookup_deeper(&mut self, line: u64, write: bool) -> LineState {
        let set = self.set(line);
        let hit = |w: &Way| w.line == line && w.state != LineState::Invalid;
        match set.iter().skip(1).position(hit) {
            Some(i) => to_front(set, i + 1),
            None => return LineState::Invalid,
        }
        let before = set[0].state;
        if write {
            set[0].state = LineState::Modified;
        }
        before
    }

    /// Puts `line` in as most recently used with `state`, evicting the least
    /// recently used way of its set if the set is full. Filling a line that
    /// is present only updates its state and LRU position.
    pub fn fill(&mut self, line: u64, state: LineState) -> Option<Evicted> {
        let set = self.set(line);
        let i = set
            .iter()
            .position(|w| w.line == line && w.state != LineState::Invalid)
            .or_else(|| set.iter().position(|w| w.state == LineState::Invalid))
            .unwrap_or(set.len() - 1);
        let old = set[i];
        to_front(set, i);
        set[0] = Way { line, state };
        (old.state != LineState::Invalid && old.line != line).then_some(Evicted {
            line: old.line,
            state: old.state,
        })
    }

    /// Puts `line` in as least recently used, if it is absent: a prefetched
    /// line that nobody has asked for yet is the first to go.
    pub fn fill_cold(&mut self, line: u64, state: LineState) -> Option<Evicted> {
        if self.probe(line) != LineState::Invalid {
            return None;
        }
        let set = self.set(line);
        let last = set.len() - 1;
        // An empty way if there is one, else the least recently used; it
        // moves to the end of the order and takes the line.
        let i = set
            .iter()
            .position(|w| w.state == LineState::Invalid)
            .unwrap_or(last);
        let old = set[i];
        set[i..].rotate_left(1);
        set[last] = Way { line, state };
        (old.state != LineState::Invalid).then_some(Evicted {
            line: old.line,
            state: old.state,
        })
    }

    /// Changes the state of a present line (coherence: M/E to S, or I).
    pub fn set_state(&mut self, line: u64, state: LineState) -> LineState {
        let set = self.set(line);
        match set
            .iter_mut()
            .find(|w| w.line == line && w.state != LineState::Invalid)
        {
            Some(w) => std::mem::replace(&mut w.state, state),
            None => LineState::Invalid,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tiny() -> Cache {
        // 2 sets x 2 ways x 32-byte lines.
        let g = Geometry {
            size: 128,
            ways: 2,
            line: 32,
        };
        g.check("tiny").unwrap();
        Cache::new(g)
    }

    /// Read accesses filling on miss; the hit/miss string of a stream.
    fn run(c: &mut Cache, lines: &[u64]) -> String {
        lines
            .iter()
            .map(|&l| {
                if c.lookup(l, false) != LineState::Invalid {
                    'h'
                } else {
                    c.fill(l, LineState::Exclusive);
                    'm'
                }
            })
            .collect()
    }

    #[test]
    fn geometry_is_checked() {
        let bad = Geometry {
            size: 96,
            ways: 1,
            line: 32,
        };
        assert!(bad.check("x").unwrap_err().contains("3 sets"));
        assert!(Geometry {
            size: 64,
            ways: 1,
            line: 24
        }
        .check("x")
        .is_err());
    }

    #[test]
    fn lru_in_one_set() {
        let mut c = tiny();
        // Lines 0, 2, 4 all map to set 0 (two ways). After 0, 2, 0 the least
        // recently used is 2: 4 evicts it, 0 still hits, 2 misses again.
        assert_eq!(run(&mut c, &[0, 2, 0, 4, 0, 2]), "mmhmhm");
    }

    #[test]
    fn sets_are_independent() {
        let mut c = tiny();
        // Odd lines use set 1: four distinct lines fit in 2 sets x 2 ways.
        assert_eq!(run(&mut c, &[0, 1, 2, 3, 0, 1, 2, 3]), "mmmmhhhh");
    }

    #[test]
    fn writes_make_lines_modified_and_evictions_report_them() {
        let mut c = tiny();
        c.fill(0, LineState::Exclusive);
        assert_eq!(c.lookup(0, true), LineState::Exclusive);
        assert_eq!(c.probe(0), LineState::Modified);
        c.fill(2, LineState::Exclusive);
        let ev = c.fill(4, LineState::Exclusive);
        assert_eq!(
            ev,
            Some(Evicted {
                line: 0,
                state: LineState::Modified
            })
        );
    }

    #[test]
    fn cold_fill_is_first_to_go() {
        let mut c = tiny();
        c.fill(0, LineState::Exclusive);
        c.fill_cold(2, LineState::Exclusive);
        assert_eq!(c.probe(2), LineState::Exclusive);
        // A new line in set 0 evicts the cold 2, not 0.
        assert_eq!(c.fill(4, LineState::Exclusive).unwrap().line, 2);
        assert_eq!(c.probe(0), LineState::Exclusive);
        // A cold fill of a present line changes nothing.
        assert_eq!(c.fill_cold(0, LineState::Modified), None);
        assert_eq!(c.probe(0), LineState::Exclusive);
    }

    #[test]
    fn set_state_downgrades() {
        let mut c = tiny();
        c.fill(3, LineState::Modified);
        assert_eq!(c.set_state(3, LineState::Shared), LineState::Modified);
        assert_eq!(c.probe(3), LineState::Shared);
        assert_eq!(c.set_state(5, LineState::Shared), LineState::Invalid);
    }
}
