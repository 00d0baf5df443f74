//! One shard of a [`Store`](super::Store): a [`Slab`] of nodes found through an [`Index`],
//! both read without the shard's lock on the hot path, and under the lock ([`Inner`]) the
//! bookkeeping of which keys are stored: free list, byte budget, CLOCK eviction hand.

use std::hash::{BuildHasher, Hasher, RandomState};

use super::index::{index_bytes, index_room, Index};
use super::slab::{node_size, Head, NodeGuard, Slab, FREE, INLINE_KEY, TAG_DIGEST};
use super::sync::{self, Mutex, MutexGuard};
use crate::{Limiter, Params};

/// No node: the end of the free list.
const NIL: u32 = u32::MAX >> 1;
/// Most nodes one shard may hold (positions fit the index's 32 bits and the free list's
/// 31).
const MAX_NODES: usize = 1 << 27;
/// Nodes at the hand looked at for a drained one before CLOCK evicts one by force (nginx
/// frees up to 2 drained nodes first).
const DRAINED_LOOKS: usize = 3;
/// The index starts with this many buckets and doubles as keys come.
const MIN_BUCKETS: usize = 16;

/// How a shard spends its budget at full load: an index of `buckets`, at most `max_nodes`
/// nodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Plan {
    pub buckets: usize,
    pub max_nodes: usize,
}

impl Plan {
    /// The plan holding the most nodes of `node_size` bytes in `budget` bytes. Buckets come
    /// in powers of two, so sometimes a fuller small index beats an emptier large one.
    pub fn for_budget(budget: usize, node_size: usize) -> Plan {
        let mut best = Plan {
            buckets: MIN_BUCKETS,
            max_nodes: 1,
        };
        let mut buckets = MIN_BUCKETS;
        while index_bytes(buckets) <= budget {
            let by_bytes = (budget - index_bytes(buckets)) / node_size;
            let max_nodes = index_room(buckets).min(by_bytes).min(MAX_NODES);
            if max_nodes > best.max_nodes {
                best = Plan { buckets, max_nodes };
            }
            if by_bytes <= index_room(buckets) || max_nodes == MAX_NODES {
                break;
            }
            buckets *= 2;
        }
        best
    }
}

/// A key as stored: up to [`INLINE_KEY`] bytes zero-padded, or a longer key's digest.
#[derive(Clone, Copy)]
pub(super) struct StoredKey {
    tag: u32,
    bytes: [u8; INLINE_KEY],
}

impl StoredKey {
    pub fn is_in(&self, head: &Head) -> bool {
        head.tag == self.tag && head.key == self.bytes
    }
}

pub(super) fn hash_bytes(hasher: &RandomState, key: &[u8]) -> u64 {
    let mut h = hasher.build_hasher();
    h.write(key);
    h.finish()
}

/// The bookkeeping a shard's lock guards.
pub(super) struct Inner {
    /// Nodes initialised: every position below is a valid node, free or in use.
    high: u32,
    free: u32,
    len: usize,
    /// The CLOCK hand: the next node eviction looks at.
    hand: u32,
    /// The next node [`Shard::expire`] looks at.
    sweep: u32,
    max_nodes: usize,
    /// Accounted bytes: the index buckets in use, the nodes initialised, heap the states
    /// own.
    bytes: usize,
    budget: usize,
    pub evictions: u64,
    pub expired: u64,
}

impl Inner {
    pub fn len(&self) -> usize {
        self.len
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    pub fn budget(&self) -> usize {
        self.budget
    }
}

pub(super) struct Shard<A: Limiter> {
    index: Index,
    slab: Slab<A::State>,
    hasher: RandomState,
    inner: Mutex<Inner>,
}

impl<A: Limiter> Shard<A> {
    pub fn new(plan: Plan, budget: usize, hasher: RandomState) -> Shard<A> {
        let initial = MIN_BUCKETS.min(plan.buckets);
        Shard {
            index: Index::new(plan.buckets, initial),
            slab: Slab::new(plan.max_nodes),
            hasher,
            inner: Mutex::new(Inner {
                high: 0,
                free: NIL,
                len: 0,
                hand: 0,
                sweep: 0,
                max_nodes: plan.max_nodes,
                bytes: index_bytes(initial),
                budget,
                evictions: 0,
                expired: 0,
            }),
        }
    }

    /// Locks the shard's bookkeeping. A lock poisoned by a panic under it is taken over
    /// and the shard emptied: a half-made change must not outlive the panic.
    pub fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|poisoned| {
            let mut inner = poisoned.into_inner();
            self.reset(&mut inner);
            sync::clear_poison(&self.inner);
            inner
        })
    }

    /// `key` as stored: itself if short, else its hash and a second, independent hash of it
    /// (SipHash is a keyed PRF, so two keys share 128 bits only by chance: ~2⁻¹²⁸).
    #[inline]
    pub fn stored_key(&self, hash: u64, key: &[u8]) -> StoredKey {
        debug_assert_eq!(hash, hash_bytes(&self.hasher, key), "not this store's hash");
        let mut bytes = [0; INLINE_KEY];
        if key.len() <= INLINE_KEY {
            bytes[..key.len()].copy_from_slice(key);
            return StoredKey {
                tag: key.len() as u32,
                bytes,
            };
        }
        let mut second = self.hasher.build_hasher();
        second.write_u8(0xff);
        second.write(key);
        bytes[..8].copy_from_slice(&hash.to_le_bytes());
        bytes[8..].copy_from_slice(&second.finish().to_le_bytes());
        StoredKey {
            tag: TAG_DIGEST,
            bytes,
        }
    }

    /// The key's node, locked; None when absent. Needs no shard lock, but without it may
    /// miss a key being moved in the index (look again under the lock before inserting).
    #[inline]
    pub fn find(&self, hash: u64, key: &StoredKey) -> Option<(u32, NodeGuard<'_, A::State>)> {
        self.index.probe(hash, |pos| {
            // SAFETY: every position the index holds is an initialised node.
            let node = unsafe { self.slab.node(pos) }.lock();
            key.is_in(node.head()).then_some((pos, node))
        })
    }

    /// The node at `pos`.
    ///
    /// # Safety
    /// `pos` is a position the index gave, or below `Inner::high`.
    pub unsafe fn node(&self, pos: u32) -> &super::slab::Node<A::State> {
        // SAFETY: the caller's promise.
        unsafe { self.slab.node(pos) }
    }

    /// Stores an absent key, making room first (see the store's eviction policy); its
    /// node, locked. The caller holds no other node of the shard.
    pub fn insert(
        &self,
        inner: &mut Inner,
        hash: u64,
        key: StoredKey,
        state: A::State,
        now: u64,
        p: &Params,
    ) -> (u32, NodeGuard<'_, A::State>) {
        let heap = A::heap_bytes(&state);
        self.make_room(inner, heap, now, p);
        let head = Head {
            tag: key.tag,
            key: key.bytes,
        };
        let (pos, node) = if inner.free != NIL {
            let pos = inner.free;
            // SAFETY: the free list holds initialised nodes.
            let mut node = unsafe { self.slab.node(pos) }.lock();
            inner.free = node.head().tag & !FREE;
            *node.head_mut() = head;
            *node.state_mut() = state;
            (pos, node)
        } else {
            // Only when a state alone outweighs the budget is there no room here: the
            // node is then evicted when its state is re-accounted.
            let pos = inner.high;
            // SAFETY: `pos` is the count initialised; `init` checks the reservation.
            unsafe { self.slab.init(pos, head, state) };
            inner.high += 1;
            inner.bytes += node_size::<A::State>();
            // SAFETY: just initialised.
            (pos, unsafe { self.slab.node(pos) }.lock())
        };
        inner.bytes += heap;
        inner.len += 1;
        self.index.insert(hash, pos);
        (pos, node)
    }

    /// Drops the key of the locked node at `pos`; the node goes to the free list.
    pub fn remove(&self, inner: &mut Inner, pos: u32, node: &mut NodeGuard<'_, A::State>) {
        let hash = self.node_hash(node.head());
        let removed = self.index.remove(hash, pos);
        debug_assert!(removed, "a stored node is indexed");
        let heap = A::heap_bytes(node.state());
        if heap != 0 {
            *node.state_mut() = A::fresh(0);
            inner.bytes = inner.bytes - heap + A::heap_bytes(node.state());
        }
        node.head_mut().tag = FREE | inner.free;
        inner.free = pos;
        inner.len -= 1;
        node.set_referenced(false);
    }

    /// Re-accounts a state whose heap changed from `before` to `after` bytes, then evicts
    /// while over budget, passing over `held`.
    pub fn reaccount(&self, inner: &mut Inner, before: usize, after: usize, held: Option<u32>) {
        inner.bytes = inner.bytes - before + after;
        let (budget, mut turns) = (inner.budget, 0);
        while inner.bytes > budget && inner.len > usize::from(held.is_some()) {
            turns += 1;
            let Some((pos, mut node)) = self.next_in_use(inner.high, &mut inner.hand, held) else {
                break;
            };
            if node.referenced() && turns <= 2 * inner.high as usize {
                node.set_referenced(false);
                continue;
            }
            self.remove(inner, pos, &mut node);
            inner.evictions += 1;
        }
    }

    /// Drops the drained among the next `looks` nodes from the sweep cursor; how many.
    pub fn expire(&self, inner: &mut Inner, looks: usize, now: u64, p: &Params) -> usize {
        let mut dropped = 0;
        for _ in 0..looks.min(inner.high as usize) {
            let pos = inner.sweep;
            inner.sweep = if pos + 1 >= inner.high { 0 } else { pos + 1 };
            // SAFETY: below `high`.
            let mut node = unsafe { self.slab.node(pos) }.lock();
            if !node.head().is_free() && A::is_drained(node.state(), now, p) {
                self.remove(inner, pos, &mut node);
                dropped += 1;
            }
        }
        inner.expired += dropped as u64;
        dropped
    }

    /// Forgets every key, keeping the memory (after a panic under the lock, the
    /// bookkeeping may be half-updated; an empty shard is consistent).
    fn reset(&self, inner: &mut Inner) {
        self.index.clear();
        inner.free = NIL;
        for pos in (0..inner.high).rev() {
            // SAFETY: below `high`.
            let mut node = unsafe { self.slab.node(pos) }.lock();
            *node.state_mut() = A::fresh(0);
            node.head_mut().tag = FREE | inner.free;
            inner.free = pos;
            node.set_referenced(false);
        }
        inner.len = 0;
        inner.bytes = self.recount_nodes(inner);
    }

    /// Makes room for a node whose state owns `heap` bytes. The CLOCK hand goes round the
    /// nodes: a drained one is dropped (`expired`); a used one since the hand last passed
    /// loses its reference bit and is passed over; the first one not used since is evicted
    /// (`evictions`). After two turns round, the hand evicts whatever it meets.
    fn make_room(&self, inner: &mut Inner, heap: usize, now: u64, p: &Params) {
        if self.room_for(inner, heap) {
            return;
        }
        // First, any drained among the next few at the hand (the hand stays).
        let mut cursor = inner.hand;
        for _ in 0..DRAINED_LOOKS {
            let Some((pos, mut node)) = self.next_in_use(inner.high, &mut cursor, None) else {
                break;
            };
            if A::is_drained(node.state(), now, p) {
                self.remove(inner, pos, &mut node);
                inner.expired += 1;
            }
        }
        let mut turns = 0;
        while !self.room_for(inner, heap) && inner.len > 0 {
            turns += 1;
            let Some((pos, mut node)) = self.next_in_use(inner.high, &mut inner.hand, None) else {
                break;
            };
            if A::is_drained(node.state(), now, p) {
                self.remove(inner, pos, &mut node);
                inner.expired += 1;
            } else if node.referenced() && turns <= 2 * inner.high as usize {
                node.set_referenced(false);
            } else {
                self.remove(inner, pos, &mut node);
                inner.evictions += 1;
            }
        }
    }

    /// The next node in use from `hand` among the first `high`, locked (passing over
    /// `held`), `hand` moved past it. None only if no node but `held` is in use.
    fn next_in_use(
        &self,
        high: u32,
        hand: &mut u32,
        held: Option<u32>,
    ) -> Option<(u32, NodeGuard<'_, A::State>)> {
        for _ in 0..high {
            let pos = *hand;
            *hand = if pos + 1 >= high { 0 } else { pos + 1 };
            if Some(pos) == held {
                continue;
            }
            // SAFETY: below `high`.
            let node = unsafe { self.slab.node(pos) }.lock();
            if !node.head().is_free() {
                return Some((pos, node));
            }
        }
        None
    }

    /// Whether a node with `heap` bytes of state fits now, growing the index if it may.
    fn room_for(&self, inner: &mut Inner, heap: usize) -> bool {
        if inner.bytes + heap > inner.budget {
            return false;
        }
        if inner.len >= index_room(self.index.buckets()) && !self.grow_index(inner, heap) {
            return false;
        }
        inner.free != NIL
            || ((inner.high as usize) < inner.max_nodes
                && inner.bytes + heap + node_size::<A::State>() <= inner.budget)
    }

    /// Doubles the index's buckets in use, within the plan and the budget.
    fn grow_index(&self, inner: &mut Inner, reserve: usize) -> bool {
        let (before, after) = (self.index.buckets(), self.index.buckets() * 2);
        let more = index_bytes(after) - index_bytes(before);
        if after > self.index.reserved() || inner.bytes + reserve + more > inner.budget {
            return false;
        }
        self.index.grow();
        inner.bytes += more;
        true
    }

    /// The hash a node was indexed under, recomputed from its key (a digest starts with it).
    fn node_hash(&self, head: &Head) -> u64 {
        if head.tag == TAG_DIGEST {
            let mut first = [0; 8];
            first.copy_from_slice(&head.key[..8]);
            u64::from_le_bytes(first)
        } else {
            hash_bytes(&self.hasher, &head.key[..head.tag as usize])
        }
    }

    /// Bytes counted from scratch: buckets in use, nodes initialised, heap of the states.
    fn recount_nodes(&self, inner: &Inner) -> usize {
        let heap: usize = (0..inner.high)
            // SAFETY: below `high`.
            .map(|pos| A::heap_bytes(unsafe { self.slab.node(pos) }.lock().state()))
            .sum();
        index_bytes(self.index.buckets()) + inner.high as usize * node_size::<A::State>() + heap
    }

    /// Bytes recounted from scratch (tests check the running count against it).
    #[cfg(test)]
    pub fn recount(&self, inner: &Inner) -> usize {
        self.recount_nodes(inner)
    }

    /// Whether the index holds exactly the nodes in use (tests).
    #[cfg(test)]
    pub fn index_agrees(&self, inner: &Inner) -> bool {
        let mut in_use = 0;
        for pos in 0..inner.high {
            // SAFETY: below `high`.
            let node = unsafe { self.slab.node(pos) }.lock();
            if node.head().is_free() {
                continue;
            }
            in_use += 1;
            let key = StoredKey {
                tag: node.head().tag,
                bytes: node.head().key,
            };
            let hash = self.node_hash(node.head());
            drop(node);
            if self.find(hash, &key).map(|(at, _)| at) != Some(pos) {
                return false;
            }
        }
        in_use == inner.len && self.index.len() == inner.len
    }

    #[cfg(test)]
    pub fn index_buckets(&self) -> usize {
        self.index.buckets()
    }
}

impl<A: Limiter> Drop for Shard<A> {
    fn drop(&mut self) {
        let high = match self.inner.get_mut() {
            Ok(inner) => inner.high,
            Err(poisoned) => poisoned.into_inner().high,
        };
        // SAFETY: `high` nodes were initialised; the shard is not used after.
        unsafe { self.slab.drop_nodes(high as usize) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_plan_fits_its_budget_and_leaves_the_index_room() {
        for budget in [600, 4_000, 32_000, 100_000, 163_000, 1_000_000, 10_000_000] {
            for node in [32, 40, 48] {
                let plan = Plan::for_budget(budget, node);
                assert!(index_bytes(plan.buckets) + plan.max_nodes * node <= budget);
                assert!(plan.max_nodes <= index_room(plan.buckets));
                // Between two index sizes, the better one costs at most about 22 bytes a
                // node beyond the node itself (tiny budgets aside).
                let per_node = budget as f64 / plan.max_nodes as f64;
                assert!(
                    budget < 4_000 || per_node < (node + 22) as f64,
                    "{budget} {node}: {per_node}"
                );
            }
        }
    }
}
