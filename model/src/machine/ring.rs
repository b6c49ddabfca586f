//! A lane's queue of events (`order`): a ring buffer, every call of it
//! inline.

use super::order::Event;

/// A lane's queue of events: a ring whose capacity is a power of two (a
/// slot is a masked index), every call of it inline. (The standard
/// `VecDeque`'s `push_back` is a call of its own; on a 2-CPU boot, whose
/// events wait by the hundred million, that call cost 4% of the boot.)
#[derive(Clone, Debug)]
pub(super) struct Ring {
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
    pub(super) fn is_empty(&self) -> bool {
        self.len == 0
    }

    #[inline(always)]
    pub(super) fn len(&self) -> usize {
        self.len
    }

    #[inline(always)]
    fn slot(&self, i: usize) -> usize {
        (self.head + i) & self.mask
    }

    /// The `i`-th queued event (`i` below the length).
    pub(super) fn get(&self, i: usize) -> &Event {
        &self.slots[self.slot(i)]
    }

    #[inline(always)]
    pub(super) fn front(&self) -> Option<&Event> {
        (self.len != 0).then(|| &self.slots[self.head])
    }

    #[inline(always)]
    pub(super) fn front_mut(&mut self) -> Option<&mut Event> {
        (self.len != 0).then(|| &mut self.slots[self.head])
    }

    #[inline(always)]
    pub(super) fn back_mut(&mut self) -> Option<&mut Event> {
        if self.len == 0 {
            return None;
        }
        let i = self.slot(self.len - 1);
        Some(&mut self.slots[i])
    }

    #[inline(always)]
    pub(super) fn push_back(&mut self, ev: Event) {
        if self.len == self.slots.len() {
            self.grow();
        }
        let i = self.slot(self.len);
        self.slots[i] = ev;
        self.len += 1;
    }

    #[inline(always)]
    pub(super) fn pop_front(&mut self) -> Option<Event> {
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

#[cfg(test)]
mod ring_tests {
    use std::collections::VecDeque;

    use super::super::order::Event;
    use super::Ring;

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
