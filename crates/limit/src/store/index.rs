//! A shard's index: an open-addressing table (linear probing) of slab positions that the
//! hot path reads without the shard's lock.
//!
//! Memory for the most buckets the shard's plan allows is reserved at once and never
//! moves, but only a prefix is in use: it starts small and doubles in place as keys come,
//! so a lookup stays within a dense table (and untouched pages stay unmapped). Every
//! change is made under the shard's lock. A reader racing a change may miss a key that is
//! present, and then looks again under the lock; or it may find a slot whose node has since
//! been given another key, and its caller compares the key under the node's own lock.
//! Nothing worse can happen: every slot it can reach is initialised, and every position a
//! slot has ever held is a node that was initialised before the slot was written.
//!
//! A slot holds the low 32 bits of the key's hash (which also choose its home bucket, so a
//! slot can be moved without rehashing the key) above the slab position plus one; 0 is
//! empty. Removal shifts later slots back, leaving no tombstones.

use super::reserved::Reserved;
use super::sync::{AtomicU64, AtomicUsize, Ordering};

const EMPTY: u64 = 0;

/// Bytes an index of `buckets` buckets uses.
pub(super) const fn index_bytes(buckets: usize) -> usize {
    buckets * size_of::<AtomicU64>()
}

/// Keys an index of `buckets` buckets takes before it doubles: 3/4 of them, where a lookup
/// of a present key probes 2.5 slots on average, nearly always within one cache line.
pub(super) const fn index_room(buckets: usize) -> usize {
    buckets / 4 * 3
}

pub(super) struct Index {
    /// Buckets reserved: a power of two.
    slots: Reserved<AtomicU64>,
    /// Buckets in use, less one (a power of two less one). Only grows; every slot below it
    /// is initialised before it is published.
    mask: AtomicUsize,
}

fn slot_of(hash: u64, pos: u32) -> u64 {
    u64::from(hash as u32) << 32 | (u64::from(pos) + 1)
}

fn pos_of(slot: u64) -> u32 {
    (slot as u32).wrapping_sub(1)
}

fn home(slot_or_hash_bits: u64, mask: usize) -> usize {
    slot_or_hash_bits as usize & mask
}

impl Index {
    /// An index reserving `reserved` buckets (a power of two, at least `initial`), with
    /// `initial` (a power of two) in use.
    pub fn new(reserved: usize, initial: usize) -> Index {
        assert!(reserved.is_power_of_two() && initial.is_power_of_two() && initial <= reserved);
        let index = Index {
            slots: Reserved::new(reserved),
            mask: AtomicUsize::new(0),
        };
        index.init(0, initial);
        index.mask.store(initial - 1, Ordering::Release);
        index
    }

    /// Buckets in use.
    pub fn buckets(&self) -> usize {
        self.mask.load(Ordering::Relaxed) + 1
    }

    pub fn reserved(&self) -> usize {
        self.slots.len()
    }

    /// Writes empty slots into `from..to`, memory not yet in use.
    fn init(&self, from: usize, to: usize) {
        for i in from..to {
            // SAFETY: written once, as the mask grows past it; no reader reaches a slot
            // above the published mask.
            unsafe { self.slots.write(i, AtomicU64::new(EMPTY)) }
        }
    }

    fn slot(&self, i: usize) -> &AtomicU64 {
        debug_assert!(i <= self.mask.load(Ordering::Relaxed));
        // SAFETY: callers pass `i` masked by a published mask: initialised and in bounds.
        unsafe { self.slots.get(i) }
    }

    /// Calls `found` with each position stored under `hash`'s bits, in probe order, until
    /// it returns something or an empty slot ends the run. Safe without the lock (see the
    /// module docs for what a racing reader may see).
    #[inline]
    pub fn probe<T>(&self, hash: u64, mut found: impl FnMut(u32) -> Option<T>) -> Option<T> {
        let mask = self.mask.load(Ordering::Acquire);
        let bits = u64::from(hash as u32);
        let mut i = home(bits, mask);
        for _ in 0..=mask {
            let slot = self.slot(i).load(Ordering::Acquire);
            if slot == EMPTY {
                return None;
            }
            if slot >> 32 == bits {
                if let Some(hit) = found(pos_of(slot)) {
                    return Some(hit);
                }
            }
            i = (i + 1) & mask;
        }
        None
    }

    /// Adds `pos` under `hash`. Under the lock, with room (fewer keys than buckets).
    pub fn insert(&self, hash: u64, pos: u32) {
        let mask = self.mask.load(Ordering::Relaxed);
        let slot = slot_of(hash, pos);
        let mut i = home(slot >> 32, mask);
        while self.slot(i).load(Ordering::Relaxed) != EMPTY {
            i = (i + 1) & mask;
        }
        self.slot(i).store(slot, Ordering::Release);
    }

    /// Removes `pos`, stored under `hash`; whether it was there. Under the lock.
    pub fn remove(&self, hash: u64, pos: u32) -> bool {
        let mask = self.mask.load(Ordering::Relaxed);
        let wanted = slot_of(hash, pos);
        let mut hole = home(wanted >> 32, mask);
        loop {
            match self.slot(hole).load(Ordering::Relaxed) {
                EMPTY => return false,
                slot if slot == wanted => break,
                _ => hole = (hole + 1) & mask,
            }
        }
        // Shift back each later slot of the run that may sit at the hole (its home is not
        // cyclically after the hole), until an empty slot ends the run.
        let mut next = hole;
        loop {
            next = (next + 1) & mask;
            let slot = self.slot(next).load(Ordering::Relaxed);
            if slot == EMPTY {
                self.slot(hole).store(EMPTY, Ordering::Release);
                return true;
            }
            let from_home = next.wrapping_sub(home(slot >> 32, mask)) & mask;
            if from_home >= next.wrapping_sub(hole) & mask {
                self.slot(hole).store(slot, Ordering::Release);
                hole = next;
            }
        }
    }

    /// Doubles the buckets in use, within the reservation; whether it did. Under the lock.
    /// Every slot is placed anew: readers meanwhile may miss keys (and look again locked).
    pub fn grow(&self) -> bool {
        let buckets = self.buckets();
        if buckets * 2 > self.reserved() {
            return false;
        }
        let slots: Vec<u64> = (0..buckets)
            .map(|i| self.slot(i).swap(EMPTY, Ordering::Relaxed))
            .filter(|&slot| slot != EMPTY)
            .collect();
        self.init(buckets, buckets * 2);
        self.mask.store(buckets * 2 - 1, Ordering::Release);
        for slot in slots {
            self.insert(u64::from((slot >> 32) as u32), pos_of(slot));
        }
        true
    }

    /// Empties every bucket in use. Under the lock.
    pub fn clear(&self) {
        for i in 0..self.buckets() {
            self.slot(i).store(EMPTY, Ordering::Release);
        }
    }

    /// Keys stored (a count of the slots in use, for tests).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        (0..self.buckets())
            .filter(|&i| self.slot(i).load(Ordering::Relaxed) != EMPTY)
            .count()
    }
}

// Loom's atomics live only inside a model: `loom.rs` covers the index there.
#[cfg(all(test, not(tollgate_loom)))]
mod tests {
    use super::*;

    fn positions(index: &Index, hash: u64) -> Vec<u32> {
        let mut seen = Vec::new();
        index.probe(hash, |pos| {
            seen.push(pos);
            None::<()>
        });
        seen
    }

    #[test]
    fn finds_what_it_holds_through_collisions_growth_and_removal() {
        let index = Index::new(64, 8);
        // Hashes 0, 8, 16… share home bucket 0 in 8 buckets; 3 has its own.
        for (pos, hash) in [(1, 0), (2, 8), (3, 16), (4, 3)] {
            index.insert(hash, pos);
        }
        assert_eq!(positions(&index, 8), [2]);
        assert_eq!(positions(&index, 3), [4]);
        assert!(index.remove(0, 1));
        assert!(!index.remove(0, 1));
        assert_eq!(positions(&index, 16), [3]);
        assert_eq!(positions(&index, 8), [2]);
        assert!(index.grow());
        assert_eq!(index.buckets(), 16);
        assert_eq!(positions(&index, 8), [2]);
        assert_eq!(positions(&index, 16), [3]);
        assert_eq!(positions(&index, 3), [4]);
        assert_eq!(index.len(), 3);
    }

    #[test]
    fn removal_keeps_every_other_key_reachable_across_the_wrap() {
        // Home buckets near the end, runs wrapping to the start, removals anywhere.
        for removed in 0..6u32 {
            let index = Index::new(8, 8);
            let hashes = [6u64, 7, 6, 14, 0, 7];
            for (pos, &hash) in hashes.iter().enumerate() {
                index.insert(hash, pos as u32);
            }
            assert!(index.remove(hashes[removed as usize], removed));
            for (pos, &hash) in hashes.iter().enumerate() {
                let found = positions(&index, hash).contains(&(pos as u32));
                assert_eq!(found, pos as u32 != removed, "removed {removed}, pos {pos}");
            }
        }
    }

    #[test]
    fn growth_stops_at_the_reservation() {
        let index = Index::new(16, 8);
        assert!(index.grow());
        assert!(!index.grow());
        assert_eq!(index.buckets(), 16);
    }
}
