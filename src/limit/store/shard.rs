//! One shard of a [`Store`](super::Store): a slab of nodes kept in exact LRU order by
//! intrusive `u32` links, indexed by a hash table of slab positions, within a byte budget.

use std::hash::{BuildHasher, Hasher, RandomState};

use hashbrown::HashTable;

use crate::limit::{Algorithm, Params};

/// Bits of a node's `prev_tag` that hold a slab position; the five above hold its key tag.
const POS_BITS: u32 = 27;
const POS_MASK: u32 = (1 << POS_BITS) - 1;
/// No node: the end of the LRU list or of the free list.
const NIL: u32 = POS_MASK;
/// Most nodes one shard may hold (positions `0..NIL`).
const MAX_NODES: usize = NIL as usize;
/// Keys up to this long are stored as they are; longer ones as a 128-bit digest.
pub(super) const INLINE_KEY: usize = 16;
/// Tags 0..=16 are an inline key's length.
const TAG_DIGEST: u32 = 17;
const TAG_FREE: u32 = 31;
/// hashbrown's trailing group of control bytes: 16 with SSE2, 8 elsewhere.
const GROUP_WIDTH: usize = 16;
/// Least-recently-used nodes looked at for a drained one before one is evicted by force
/// (nginx frees up to 2 drained nodes first).
const DRAINED_LOOKS: usize = 3;
/// The slab grows by doubling from this many nodes.
const MIN_GROWTH: usize = 16;
/// The index starts at this many buckets and doubles as keys come.
const MIN_BUCKETS: usize = 16;

/// Bytes hashbrown allocates for an index of `buckets` `u32` buckets: the buckets, one
/// control byte each, and a trailing group of control bytes.
pub(super) const fn index_bytes(buckets: usize) -> usize {
    buckets * (size_of::<u32>() + 1) + GROUP_WIDTH
}

/// Index entries that keep `buckets` below the load that makes removals costly: hashbrown
/// fills at most 7/8 of its buckets, and a removal in a crowded stretch leaves a tombstone
/// that only a rebuild clears. At 3/4 of that (66% of buckets) tombstones are rare.
const fn index_room(buckets: usize) -> usize {
    buckets / 8 * 7 * 3 / 4
}

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
            buckets: 16,
            max_nodes: 1,
        };
        let mut buckets = 16;
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

/// One slot of the slab: 8 bytes of links and tag, 16 of key, then the state.
struct Node<S> {
    /// The more recently used neighbour (low bits) and the key's tag (high bits).
    prev_tag: u32,
    /// The less recently used neighbour, or the next free slot.
    next: u32,
    key: [u8; INLINE_KEY],
    state: S,
}

impl<S> Node<S> {
    fn prev(&self) -> u32 {
        self.prev_tag & POS_MASK
    }

    fn tag(&self) -> u32 {
        self.prev_tag >> POS_BITS
    }

    fn set_prev(&mut self, prev: u32) {
        self.prev_tag = (self.prev_tag & !POS_MASK) | prev;
    }
}

pub(super) const fn node_size<A: Algorithm>() -> usize {
    size_of::<Node<A::State>>()
}

pub(super) fn hash_bytes(hasher: &RandomState, key: &[u8]) -> u64 {
    let mut h = hasher.build_hasher();
    h.write(key);
    h.finish()
}

/// The hash a node was indexed under, recomputed from its key (a digest starts with it).
fn node_hash<S>(nodes: &[Node<S>], hasher: &RandomState, pos: u32) -> u64 {
    let node = &nodes[pos as usize];
    match node.tag() {
        TAG_DIGEST => {
            let mut first = [0; 8];
            first.copy_from_slice(&node.key[..8]);
            u64::from_le_bytes(first)
        }
        len => hash_bytes(hasher, &node.key[..len as usize]),
    }
}

pub(super) struct Shard<A: Algorithm> {
    nodes: Vec<Node<A::State>>,
    index: HashTable<u32>,
    hasher: RandomState,
    /// Most recently used node.
    head: u32,
    /// Least recently used node: the next to go.
    tail: u32,
    free: u32,
    len: usize,
    max_nodes: usize,
    /// The index's size at full load.
    max_buckets: usize,
    /// Accounted bytes: slab capacity, index allocation, heap the states own.
    bytes: usize,
    budget: usize,
    pub evictions: u64,
    pub expired: u64,
    pub rebuilds: u64,
}

impl<A: Algorithm> Shard<A> {
    pub fn new(plan: Plan, budget: usize, hasher: RandomState) -> Shard<A> {
        let index = HashTable::with_capacity(MIN_BUCKETS.min(plan.buckets) / 8 * 7);
        Shard {
            nodes: Vec::new(),
            bytes: index.allocation_size(),
            index,
            hasher,
            head: NIL,
            tail: NIL,
            free: NIL,
            len: 0,
            max_nodes: plan.max_nodes,
            max_buckets: plan.buckets,
            budget,
            evictions: 0,
            expired: 0,
            rebuilds: 0,
        }
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// `key` as stored: itself if short, else its hash and a second, independent hash of it
    /// (SipHash is a keyed PRF, so two keys share 128 bits only by chance: ~2⁻¹²⁸).
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

    pub fn find(&self, hash: u64, key: &StoredKey) -> Option<u32> {
        let nodes = &self.nodes;
        self.index
            .find(hash, |&pos| {
                let node = &nodes[pos as usize];
                node.tag() == key.tag && node.key == key.bytes
            })
            .copied()
    }

    pub fn state(&self, pos: u32) -> &A::State {
        &self.nodes[pos as usize].state
    }

    pub fn state_mut(&mut self, pos: u32) -> &mut A::State {
        &mut self.nodes[pos as usize].state
    }

    /// Marks `pos` most recently used.
    pub fn touch(&mut self, pos: u32) {
        if self.head != pos {
            self.unlink(pos);
            self.push_front(pos);
        }
    }

    /// Stores an absent key, making room first (see the store's eviction policy).
    pub fn insert(
        &mut self,
        hash: u64,
        key: StoredKey,
        state: A::State,
        now: u64,
        p: &Params,
    ) -> u32 {
        let heap = A::heap_bytes(&state);
        self.make_room(heap, now, p);
        if self.index.capacity() == self.index.len() {
            self.rebuild();
        }
        let pos = self.alloc(key, state);
        self.bytes += heap;
        self.push_front(pos);
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        self.index
            .insert_unique(hash, pos, |&at| node_hash(nodes, hasher, at));
        self.len += 1;
        pos
    }

    /// Drops the node at `pos`; its slot goes to the free list.
    pub fn remove(&mut self, pos: u32) {
        let hash = node_hash(&self.nodes, &self.hasher, pos);
        if let Ok(found) = self.index.find_entry(hash, |&at| at == pos) {
            found.remove();
        }
        self.unlink(pos);
        let node = &mut self.nodes[pos as usize];
        let heap = A::heap_bytes(&node.state);
        if heap != 0 {
            node.state = A::fresh(0);
            self.bytes = self.bytes - heap + A::heap_bytes(&node.state);
        }
        node.prev_tag = TAG_FREE << POS_BITS | NIL;
        node.next = self.free;
        self.free = pos;
        self.len -= 1;
    }

    /// Re-accounts a state whose heap changed from `before` to `after` bytes, then evicts
    /// least recently used nodes while over budget (the changed one last: it is the newest).
    pub fn reaccount(&mut self, before: usize, after: usize) {
        self.bytes = self.bytes - before + after;
        while self.bytes > self.budget && self.tail != NIL {
            self.remove(self.tail);
            self.evictions += 1;
        }
    }

    /// Drops the drained among the `looks` least recently used nodes; how many.
    pub fn expire(&mut self, looks: usize, now: u64, p: &Params) -> usize {
        let (mut pos, mut dropped) = (self.tail, 0);
        for _ in 0..looks {
            if pos == NIL {
                break;
            }
            let prev = self.nodes[pos as usize].prev();
            if A::is_drained(self.state(pos), now, p) {
                self.remove(pos);
                dropped += 1;
            }
            pos = prev;
        }
        self.expired += dropped as u64;
        dropped
    }

    /// Forgets every key, keeping the allocations (after a panic under the lock, the links
    /// may be half-updated; an empty shard is consistent).
    pub fn reset(&mut self) {
        self.nodes.clear();
        self.index.clear();
        (self.head, self.tail, self.free, self.len) = (NIL, NIL, NIL, 0);
        self.bytes = self.nodes.capacity() * node_size::<A>() + self.index.allocation_size();
    }

    fn make_room(&mut self, heap: usize, now: u64, p: &Params) {
        if self.room_for(heap) {
            return;
        }
        self.expire(DRAINED_LOOKS, now, p);
        while self.tail != NIL && !self.room_for(heap) {
            self.remove(self.tail);
            self.evictions += 1;
        }
    }

    /// Whether a node with `heap` bytes of state fits now, growing the index or the slab
    /// if it may.
    fn room_for(&mut self, heap: usize) -> bool {
        if self.bytes + heap > self.budget {
            return false;
        }
        if self.len >= index_room(self.index.num_buckets()) && !self.grow_index(heap) {
            return false;
        }
        self.free != NIL || self.nodes.len() < self.nodes.capacity() || self.grow_slab(heap)
    }

    /// Doubles the index, within the plan and the budget. The index grows with the keys
    /// rather than being allocated for the most at once: in a dense index a lookup's cache
    /// lines are fewer and nearer (10 000 keys in a 256 MiB zone, hash + lock + lookup:
    /// 355 ns with an index preallocated for the most keys, 40 ns with a grown one).
    fn grow_index(&mut self, reserve: usize) -> bool {
        let buckets = self.index.num_buckets() * 2;
        let before = self.index.allocation_size();
        if buckets > self.max_buckets
            || self.bytes + reserve + index_bytes(buckets) - before > self.budget
        {
            return false;
        }
        let (nodes, hasher) = (&self.nodes, &self.hasher);
        let more = buckets / 8 * 7 - self.index.len();
        self.index.reserve(more, |&at| node_hash(nodes, hasher, at));
        self.bytes = self.bytes + self.index.allocation_size() - before;
        true
    }

    /// Grows a full slab by up to double, within the node limit and the budget.
    fn grow_slab(&mut self, reserve: usize) -> bool {
        let cap = self.nodes.capacity();
        let spare = self.budget.saturating_sub(self.bytes + reserve) / node_size::<A>();
        let target = (cap * 2)
            .max(MIN_GROWTH)
            .min(self.max_nodes)
            .min(cap + spare);
        if target <= cap {
            return false;
        }
        self.nodes.reserve_exact(target - self.nodes.len());
        self.bytes += (self.nodes.capacity() - cap) * node_size::<A>();
        true
    }

    fn alloc(&mut self, key: StoredKey, state: A::State) -> u32 {
        let node = Node {
            prev_tag: key.tag << POS_BITS | NIL,
            next: NIL,
            key: key.bytes,
            state,
        };
        if self.free != NIL {
            let pos = self.free;
            self.free = self.nodes[pos as usize].next;
            self.nodes[pos as usize] = node;
            return pos;
        }
        // Only when a state alone outweighs the budget is the slab still full here; the
        // node is then evicted when its slot is dropped. (The index has room: a shard
        // emptied by evictions has at least its first 16 buckets.)
        let cap = self.nodes.capacity();
        if self.nodes.len() == cap {
            self.nodes.reserve_exact(1);
        }
        self.nodes.push(node);
        self.bytes += (self.nodes.capacity() - cap) * node_size::<A>();
        (self.nodes.len() - 1) as u32
    }

    fn unlink(&mut self, pos: u32) {
        let node = &self.nodes[pos as usize];
        let (prev, next) = (node.prev(), node.next);
        if prev == NIL {
            self.head = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NIL {
            self.tail = prev;
        } else {
            self.nodes[next as usize].set_prev(prev);
        }
    }

    fn push_front(&mut self, pos: u32) {
        let head = self.head;
        let node = &mut self.nodes[pos as usize];
        node.set_prev(NIL);
        node.next = head;
        if head == NIL {
            self.tail = pos;
        } else {
            self.nodes[head as usize].set_prev(pos);
        }
        self.head = pos;
    }

    /// Re-indexes every node, clearing the tombstones removals left in the index, so that
    /// inserting never makes hashbrown reallocate: O(keys in the shard), and rare.
    fn rebuild(&mut self) {
        self.index.clear();
        let mut pos = self.head;
        while pos != NIL {
            let (nodes, hasher) = (&self.nodes, &self.hasher);
            let hash = node_hash(nodes, hasher, pos);
            self.index
                .insert_unique(hash, pos, |&at| node_hash(nodes, hasher, at));
            pos = self.nodes[pos as usize].next;
        }
        self.rebuilds += 1;
    }

    /// Slab positions from most to least recently used.
    #[cfg(test)]
    pub fn lru_order(&self) -> Vec<u32> {
        let mut order = Vec::new();
        let mut pos = self.head;
        while pos != NIL {
            order.push(pos);
            pos = self.nodes[pos as usize].next;
        }
        order
    }

    /// Bytes recounted from scratch (tests check the running count against it).
    #[cfg(test)]
    pub fn recount(&self) -> usize {
        let mut heap = 0;
        let mut pos = self.head;
        while pos != NIL {
            heap += A::heap_bytes(self.state(pos));
            pos = self.nodes[pos as usize].next;
        }
        self.nodes.capacity() * node_size::<A>() + self.index.allocation_size() + heap
    }

    /// The inline key at `pos`.
    #[cfg(test)]
    pub fn key_at(&self, pos: u32) -> &[u8] {
        let node = &self.nodes[pos as usize];
        &node.key[..node.tag().min(INLINE_KEY as u32) as usize]
    }

    #[cfg(test)]
    pub fn index_bytes_now(&self) -> usize {
        self.index.allocation_size()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_index_allocates_what_the_plan_assumes() {
        for buckets in [16, 64, 1024, 1 << 16] {
            let table: HashTable<u32> = HashTable::with_capacity(buckets / 8 * 7);
            assert_eq!(table.num_buckets(), buckets);
            assert!(table.allocation_size() <= index_bytes(buckets));
        }
    }

    #[test]
    fn a_plan_fits_its_budget_and_leaves_the_index_room() {
        for budget in [600, 4_000, 32_000, 100_000, 163_000, 1_000_000, 10_000_000] {
            for node in [32, 40, 48] {
                let plan = Plan::for_budget(budget, node);
                assert!(index_bytes(plan.buckets) + plan.max_nodes * node <= budget);
                assert!(plan.max_nodes <= index_room(plan.buckets));
                // Between two index sizes, the better one costs at most about 16 bytes a
                // node beyond the node itself (tiny budgets aside).
                let per_node = budget as f64 / plan.max_nodes as f64;
                assert!(
                    budget < 4_000 || per_node < (node + 16) as f64,
                    "{budget} {node}: {per_node}"
                );
            }
        }
    }
}
