//! A set-associative TLB of 4 KiB virtual pages with LRU replacement.
//!
//! The TLB is virtually tagged: it holds page numbers of the current
//! address space. A CR3 write drops every entry that is not global
//! (Intel SDM Vol. 3A §4.10.4.1); `invlpg` drops one page, global or not
//! (§4.10.4.1 too). Whether a page is global is the caller's rule (see
//! `machine::memory::is_global`).

use crate::cache::to_front;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Entry {
    page: u32,
    valid: bool,
    global: bool,
}

const EMPTY: Entry = Entry {
    page: 0,
    valid: false,
    global: false,
};

/// Entry count and associativity (ways == entries: fully associative).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TlbGeometry {
    pub entries: u32,
    pub ways: u32,
}

impl TlbGeometry {
    pub fn check(&self, what: &str) -> Result<(), String> {
        if self.ways == 0 || !self.entries.is_multiple_of(self.ways) {
            return Err(format!(
                "{what}: {} entries is not a multiple of {} ways",
                self.entries, self.ways
            ));
        }
        if !(self.entries / self.ways).is_power_of_two() {
            return Err(format!(
                "{what}: {} sets is not a power of two",
                self.entries / self.ways
            ));
        }
        Ok(())
    }
}

#[derive(Clone, Debug)]
pub struct Tlb {
    ways: usize,
    set_mask: u32,
    array: Vec<Entry>,
}

impl Tlb {
    /// `g` must have passed [`TlbGeometry::check`].
    pub fn new(g: TlbGeometry) -> Tlb {
        Tlb {
            ways: g.ways as usize,
            set_mask: g.entries / g.ways - 1,
            array: vec![EMPTY; g.entries as usize],
        }
    }

    #[inline]
    fn set(&mut self, page: u32) -> &mut [Entry] {
        let s = (page & self.set_mask) as usize * self.ways;
        &mut self.array[s..s + self.ways]
    }

    /// Whether `page` hits, making it most recently used. A miss does not
    /// fill: the caller walks (or asks the next level) and then calls
    /// [`Tlb::fill`].
    #[inline(always)]
    pub fn lookup(&mut self, page: u32) -> bool {
        // Most hits are on the most recently used entry of the set: nothing
        // moves, and this stays small enough to inline.
        self.hits_first(page) || self.lookup_deeper(page)
    }

    /// Whether `page` is the most recently used entry of its set: a hit
    /// that changes nothing.
    #[inline(always)]
    pub fn hits_first(&self, page: u32) -> bool {
        let e = &self.array[(page & self.set_mask) as usize * self.ways];
        e.valid && e.page == page
    }

    /// [`Tlb::lookup`] past the most recently used entry.
    #[inline(never)]
    fn lookup_deeper(&mut self, page: u32) -> bool {
        let set = self.set(page);
        let hit = |e: &Entry| e.valid && e.page == page;
        match set.iter().skip(1).position(hit) {
            Some(i) => {
                to_front(set, i + 1);
                true
            }
            None => false,
        }
    }

    /// Puts `page` in as most recently used (evicting the LRU entry).
    pub fn fill(&mut self, page: u32, global: bool) {
        let set = self.set(page);
        let i = set
            .iter()
            .position(|e| e.valid && e.page == page)
            .or_else(|| set.iter().position(|e| !e.valid))
            .unwrap_or(set.len() - 1);
        to_front(set, i);
        set[0] = Entry {
            page,
            valid: true,
            global,
        };
    }

    /// A CR3 write: every non-global entry goes.
    pub fn flush_non_global(&mut self) {
        for e in &mut self.array {
            e.valid &= e.global;
        }
    }

    /// Every entry goes (a CR4.PGE change).
    pub fn flush_all(&mut self) {
        self.array.fill(EMPTY);
    }

    /// `invlpg`: the entry for `page` goes, global or not.
    pub fn flush_page(&mut self, page: u32) {
        for e in self.set(page) {
            if e.page == page {
                e.valid = false;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn access(t: &mut Tlb, page: u32, global: bool) -> bool {
        let hit = t.lookup(page);
        if !hit {
            t.fill(page, global);
        }
        hit
    }

    #[test]
    fn fully_associative_lru() {
        let mut t = Tlb::new(TlbGeometry {
            entries: 2,
            ways: 2,
        });
        assert!(!access(&mut t, 10, false));
        assert!(!access(&mut t, 11, false));
        assert!(access(&mut t, 10, false));
        // 12 evicts 11 (least recently used).
        assert!(!access(&mut t, 12, false));
        assert!(access(&mut t, 10, false));
        assert!(!access(&mut t, 11, false));
    }

    #[test]
    fn cr3_keeps_globals_and_invlpg_takes_one_page() {
        let mut t = Tlb::new(TlbGeometry {
            entries: 8,
            ways: 2,
        });
        access(&mut t, 1, true);
        access(&mut t, 2, false);
        access(&mut t, 3, false);
        t.flush_non_global();
        assert!(t.lookup(1));
        assert!(!t.lookup(2));
        assert!(!t.lookup(3));
        t.fill(3, false);
        t.flush_page(1);
        assert!(!t.lookup(1));
        assert!(t.lookup(3));
        t.flush_all();
        assert!(!t.lookup(3));
    }

    #[test]
    fn geometry_is_checked() {
        assert!(TlbGeometry {
            entries: 64,
            ways: 4
        }
        .check("d")
        .is_ok());
        assert!(TlbGeometry {
            entries: 48,
            ways: 4
        }
        .check("d")
        .is_err());
    }
}
