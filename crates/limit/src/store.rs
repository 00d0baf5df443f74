//! The per-key state of one zone, in memory bounded by the zone's `size` (see docs/config.md).
//!
//! # Layout
//!
//! Keys are spread over up to 64 shards (a power of two, about one per 64 KiB of `size`),
//! on cache lines of their own. A shard is a slab of nodes — a 4-byte lock word, a 4-byte
//! tag, 16 bytes of key, then the state (nodes of 40 bytes for `leaky_bucket`, 32 for
//! `token_bucket`) — and an open-addressing index of slab positions (8 bytes a bucket, at
//! most 3/4 full). The memory for the most nodes and buckets the shard's byte share allows
//! is reserved when the store is made, as nginx maps a zone's shared memory at start, and
//! never moves; it is written as keys come (the index doubles in place within it, so
//! lookups stay in a dense table). Keys up to 16 bytes (IPv4 and IPv6 addresses) are
//! stored as they are; a longer key as a 128-bit keyed digest of it, so every key costs
//! the same and 64 KiB header values cannot crowd out addresses.
//!
//! # Concurrency
//!
//! A request on a stored key ([`Store::decide`]) takes no shard lock: it reads the index
//! (module `index` says what a reader racing a change may see), locks the key's node —
//! a spin lock held for one decision — compares the key, decides, and marks the node
//! used. Two threads on different keys then share no cache line that either writes, so
//! they scale as two separate stores would; an exact LRU list, or a shard mutex taken
//! per request, would move a line between cores on every decision. A new key, and every
//! change to which keys are stored, takes the shard's lock ([`Locked`]); under it, the
//! node last looked up stays locked until the next lookup or the unlock, so a check and
//! the charge after it are atomic against the lock-free path too. Lock order: shards in
//! (zone, [`Store::shard_of`]) order, then within a shard one node at a time; the
//! lock-free path holds one node and waits for nothing else, so no cycle can form.
//! Beside the stress tests, loom checks these protocols (module `loom`, through the
//! primitives of module `sync`).
//!
//! A state that owns heap memory must have drop glue (a `Vec`, a `Box`): the store asks
//! [`Limiter::heap_bytes`] only of such states, and decides on them only under the
//! shard's lock, where their heap is re-accounted.
//!
//! # Accounting
//!
//! The accounted bytes are the memory in use: the index buckets in use, the nodes
//! written, the heap states own ([`Limiter::heap_bytes`]), the shard array and the
//! store itself. They never exceed `capacity_bytes`: each shard gets an equal share and
//! evicts to stay in it; and the reservation itself fits the share, so not even the
//! address space a store holds exceeds `size`. A full 64 MB store holds a key in 54 bytes for
//! `leaky_bucket` (nginx: 128) and 43 for `token_bucket` (the node and 10.7 bytes of index
//! at 3/4 load, more when the share falls between two index sizes). Doubling the index briefly copies its
//! slots aside, under the shard's lock.
//!
//! # Eviction
//!
//! Only inserting a key, or a state's heap growing, makes room, and only in that key's
//! shard. When the shard is full (it holds its most keys, or the new state would not fit
//! in its bytes):
//! 1. those of the next 3 keys at the CLOCK hand that are drained
//!    ([`Limiter::is_drained`] at the inserting request's `now` and params) are dropped:
//!    they carry no information, so this loses nothing (counted as `expired`);
//! 2. while still full, the hand goes round the nodes (CLOCK, or second chance, an
//!    approximation of least-recently-used eviction): a drained key is dropped; a key
//!    used since the hand last passed is passed over, its mark cleared; the first key not
//!    used since is evicted by force, though it is not drained (counted as `evictions`):
//!    its next request starts afresh. A key just stored is unmarked until used again.
//!
//! nginx does the same with an exact LRU queue, and when even force fails it rejects the
//! request (503); here a full zone always evicts (docs/config.md). [`Store::sweep`] drops
//! drained keys among the next nodes of every shard, a bounded tidy for a periodic task.
//!
//! Drained-ness is judged with the params the caller passes. In a zone whose keys have
//! different rates (plans), pass the slowest plan's params to [`Vacant::insert`] and
//! [`Store::sweep`], or a faster rate could drop a slow key that has not drained.
//!
//! # Use
//!
//! ```
//! # use tollgate_limit::{Limiter, Params, Period, Rate, leaky_bucket::LeakyBucket};
//! # use tollgate_limit::store::Store;
//! let store = Store::<LeakyBucket>::new(1 << 20);
//! let p = Params::new(Rate::new(10, Period::Second).unwrap());
//! let (key, now) = (&[192, 0, 2, 1][..], 0);
//! let hash = store.hash(key);
//! let mut locked = store.lock(hash);
//! let entry = locked.entry(hash, key);
//! let decision = entry.check(now, &p); // a new key is checked as fresh, not stored
//! if decision.admitted() {
//!     entry.charge(now, &p); // stores a new key only now
//! }
//! # assert!(decision.admitted());
//! ```
//! [`Locked::decide`] does exactly this for one zone, and [`Store::decide`] too, without
//! the shard's lock when the key is stored. Several zones' shards are locked in one global
//! order (zone, then [`Store::shard_of`]) and each [`Entry`] checked before any is
//! charged. A thread must not lock a shard it holds (the mutex is not reentrant).

mod index;
mod reserved;
mod shard;
mod slab;
mod sync;

use std::hash::RandomState;
use std::mem::needs_drop;
use std::ops::{Deref, DerefMut};

use self::shard::{hash_bytes, Inner, Plan, Shard, StoredKey};
use self::slab::node_size;
use self::sync::MutexGuard;
use super::{Decision, Limiter, Params};

/// Smallest capacity a store takes; smaller requests are raised to it.
pub const MIN_CAPACITY: usize = 4096;
/// Most shards a store has.
pub const MAX_SHARDS: usize = 64;
/// Capacity per shard below which a store has fewer shards.
const SHARD_BYTES: usize = 64 * 1024;
/// Nodes each shard looks at per [`Store::sweep`].
const SWEEP_LOOKS: usize = 64;
/// The shard index is taken from the top bits of the hash; the index uses the low 32.
const SHARD_SHIFT: u32 = 64 - MAX_SHARDS.trailing_zeros();

/// Two shards on different cache lines (128: adjacent-line prefetch pairs 64-byte lines).
#[repr(align(128))]
struct Padded<T>(T);

/// The keyed state of one zone: see the [module docs](self).
pub struct Store<A: Limiter> {
    shards: Box<[Padded<Shard<A>>]>,
    hasher: RandomState,
    shard_mask: u64,
    capacity: usize,
    /// Bytes outside the shards' budgets: the store and the shard array.
    fixed: usize,
    plan: Plan,
}

/// A store's figures, summed over its shards.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub keys: usize,
    /// Accounted bytes; never above `capacity_bytes`.
    pub bytes: usize,
    pub capacity_bytes: usize,
    /// Keys that were not drained, evicted to make room.
    pub evictions: u64,
    /// Drained keys dropped to make room or by [`Store::sweep`].
    pub expired: u64,
}

impl<A: Limiter> Store<A> {
    /// A store whose accounted bytes never exceed `capacity_bytes` (the zone's `size`),
    /// raised to [`MIN_CAPACITY`] if below.
    pub fn new(capacity_bytes: usize) -> Store<A> {
        let capacity = capacity_bytes.max(MIN_CAPACITY);
        let count = shard_count(capacity);
        let fixed = size_of::<Store<A>>() + count * size_of::<Padded<Shard<A>>>();
        let budget = (capacity - fixed) / count;
        let plan = Plan::for_budget(budget, node_size::<A::State>());
        let hasher = RandomState::new();
        let shards = (0..count)
            .map(|_| Padded(Shard::new(plan, budget, hasher.clone())))
            .collect();
        Store {
            shards,
            hasher,
            shard_mask: count as u64 - 1,
            capacity,
            fixed,
            plan,
        }
    }

    /// The key's hash: SipHash-1-3, randomly keyed per store, since keys are chosen by
    /// clients and a known hash function would let them pile keys into one bucket.
    #[inline]
    pub fn hash(&self, key: &[u8]) -> u64 {
        hash_bytes(&self.hasher, key)
    }

    /// Index of the shard holding `hash`, in `0..shard_count()`.
    #[inline]
    pub fn shard_of(&self, hash: u64) -> usize {
        ((hash >> SHARD_SHIFT) & self.shard_mask) as usize
    }

    pub fn shard_count(&self) -> usize {
        self.shards.len()
    }

    /// The most keys the store holds when they spread evenly over its shards.
    pub fn max_keys(&self) -> usize {
        self.plan.max_nodes * self.shards.len()
    }

    /// One zone's whole decision: check, and charge if admitted. A stored key is decided
    /// under its node's lock alone; a new key is stored only when admitted (so a rejected
    /// one costs no memory), under the shard's lock, and judged for eviction with `idle`
    /// (see [`Vacant::insert`]).
    #[inline]
    pub fn decide(&self, hash: u64, key: &[u8], now: u64, p: &Params, idle: &Params) -> Decision {
        let shard = &self.shards[self.shard_of(hash)].0;
        // A state owning heap is re-accounted after each change, under the shard's lock.
        if !needs_drop::<A::State>() {
            if let Some((_, mut node)) = shard.find(hash, &shard.stored_key(hash, key)) {
                node.set_referenced(true);
                let state = node.state_mut();
                let decision = A::check(state, now, p);
                if decision.admitted() {
                    A::charge(state, now, p);
                }
                return decision;
            }
        }
        self.lock(hash).decide_with(hash, key, now, p, idle)
    }

    /// Locks the shard holding `hash`. A lock poisoned by a panic under it is taken over
    /// and its shard emptied.
    pub fn lock(&self, hash: u64) -> Locked<'_, A> {
        let shard = &self.shards[self.shard_of(hash)].0;
        Locked {
            shard,
            inner: shard.lock(),
            held: Held::default(),
        }
    }

    pub fn stats(&self) -> Stats {
        let mut stats = Stats {
            bytes: self.fixed,
            capacity_bytes: self.capacity,
            ..Stats::default()
        };
        for shard in self.shards.iter() {
            let inner = shard.0.lock();
            stats.keys += inner.len();
            stats.bytes += inner.bytes();
            stats.evictions += inner.evictions;
            stats.expired += inner.expired;
        }
        stats
    }

    /// Drops drained keys among the next 64 nodes of every shard, one shard locked at a
    /// time; how many. `p` as for [`Vacant::insert`].
    pub fn sweep(&self, now: u64, p: &Params) -> usize {
        self.shards
            .iter()
            .map(|shard| shard.0.expire(&mut shard.0.lock(), SWEEP_LOOKS, now, p))
            .sum()
    }
}

/// A power of two up to [`MAX_SHARDS`], about one per [`SHARD_BYTES`].
fn shard_count(capacity: usize) -> usize {
    let wanted = (capacity / SHARD_BYTES).clamp(1, MAX_SHARDS);
    1 << wanted.ilog2()
}

/// One locked shard. Hold it briefly: every new key of the shard waits.
///
/// The node last looked up stays locked until another key is looked up or the shard is
/// unlocked, so that between a check and a charge of the same key nothing changes it, not
/// even [`Store::decide`], which takes no shard lock.
pub struct Locked<'a, A: Limiter> {
    shard: &'a Shard<A>,
    inner: MutexGuard<'a, Inner>,
    held: Held,
}

/// The node a [`Locked`] keeps locked, and whether it is marked used when let go (a key
/// just stored is not: CLOCK gives it no second chance until it is used again).
#[derive(Default)]
struct Held {
    pos: Option<u32>,
    used: bool,
}

impl<'a, A: Limiter> Locked<'a, A> {
    /// The key's entry; a present key is marked used.
    pub fn entry(&mut self, hash: u64, key: &[u8]) -> Entry<'_, A> {
        match self.hold(hash, key) {
            Ok(pos) => Entry::Occupied(self.slot(pos)),
            Err(key) => Entry::Vacant(Vacant {
                locked: self.parts(),
                hash,
                key,
            }),
        }
    }

    /// The key's state, marked used. None when absent.
    pub fn get(&mut self, hash: u64, key: &[u8]) -> Option<Slot<'_, A>> {
        match self.entry(hash, key) {
            Entry::Occupied(slot) => Some(slot),
            Entry::Vacant(_) => None,
        }
    }

    /// Stores `state` for the key, making room first if it is absent (see the module
    /// docs), and returns its slot. A present key's state is replaced.
    pub fn insert(
        &mut self,
        hash: u64,
        key: &[u8],
        state: A::State,
        now: u64,
        p: &Params,
    ) -> Slot<'_, A> {
        match self.entry(hash, key) {
            Entry::Occupied(mut slot) => {
                *slot = state;
                slot
            }
            Entry::Vacant(vacant) => vacant.insert(state, now, p),
        }
    }

    /// Forgets the key; whether it was present.
    pub fn remove(&mut self, hash: u64, key: &[u8]) -> bool {
        let Ok(pos) = self.hold(hash, key) else {
            return false;
        };
        self.held.pos = None;
        // SAFETY: the node was held locked; the guard takes the lock over.
        let mut node = unsafe { self.shard.node(pos).resume() };
        self.shard.remove(&mut self.inner, pos, &mut node);
        true
    }

    /// One zone's whole decision: check, and charge if admitted. A new key is stored only
    /// when admitted, so a rejected one costs no memory.
    pub fn decide(&mut self, hash: u64, key: &[u8], now: u64, p: &Params) -> Decision {
        self.decide_with(hash, key, now, p, p)
    }

    /// [`Locked::decide`], a new key judged for eviction with `idle`.
    fn decide_with(
        &mut self,
        hash: u64,
        key: &[u8],
        now: u64,
        p: &Params,
        idle: &Params,
    ) -> Decision {
        let entry = self.entry(hash, key);
        let decision = entry.check(now, p);
        if decision.admitted() {
            entry.charge_with(now, p, idle);
        }
        decision
    }

    /// The key's node, held locked: its position; or, absent, the key as stored. A node
    /// held for another key is let go.
    fn hold(&mut self, hash: u64, key: &[u8]) -> Result<u32, StoredKey> {
        let stored = self.shard.stored_key(hash, key);
        if let Some(pos) = self.held.pos {
            // SAFETY: held locked by this guard; the borrow ends here.
            if stored.is_in(unsafe { self.shard.node(pos).head_kept() }) {
                return Ok(pos);
            }
            self.release();
        }
        match self.shard.find(hash, &stored) {
            Some((pos, node)) => {
                node.keep();
                self.held = Held {
                    pos: Some(pos),
                    used: true,
                };
                Ok(pos)
            }
            None => Err(stored),
        }
    }

    fn slot(&mut self, pos: u32) -> Slot<'_, A> {
        Slot::new(self.parts(), pos)
    }

    fn parts(&mut self) -> Parts<'_, A> {
        Parts {
            shard: self.shard,
            inner: &mut self.inner,
            held: &mut self.held,
        }
    }

    fn release(&mut self) {
        if let Some(pos) = self.held.pos.take() {
            // SAFETY: held locked by this guard, and no borrow of it remains.
            unsafe { self.shard.node(pos).unlock(self.held.used) }
        }
    }
}

impl<A: Limiter> Drop for Locked<'_, A> {
    fn drop(&mut self) {
        self.release();
    }
}

/// A key's place in a locked shard: stored, or not yet.
pub enum Entry<'a, A: Limiter> {
    Occupied(Slot<'a, A>),
    Vacant(Vacant<'a, A>),
}

impl<'a, A: Limiter> Entry<'a, A> {
    /// The decision at `now`, changing nothing; an absent key decides as
    /// [`fresh`](Limiter::fresh).
    pub fn check(&self, now: u64, p: &Params) -> Decision {
        match self {
            Entry::Occupied(slot) => A::check(slot, now, p),
            Entry::Vacant(_) => A::check(&A::fresh(now), now, p),
        }
    }

    /// Charges an admitted request, storing an absent key first.
    pub fn charge(self, now: u64, p: &Params) -> Slot<'a, A> {
        self.charge_with(now, p, p)
    }

    /// [`Entry::charge`], an absent key stored judging drained keys with `idle` (see
    /// [`Vacant::insert`]: in a zone with plans, its slowest rate).
    pub fn charge_with(self, now: u64, p: &Params, idle: &Params) -> Slot<'a, A> {
        match self {
            Entry::Occupied(mut slot) => {
                A::charge(&mut slot, now, p);
                slot
            }
            Entry::Vacant(vacant) => {
                let mut state = A::fresh(now);
                A::charge(&mut state, now, p);
                vacant.insert(state, now, idle)
            }
        }
    }
}

/// What an [`Entry`] borrows of its [`Locked`]: the shard, its bookkeeping, the held node.
struct Parts<'a, A: Limiter> {
    shard: &'a Shard<A>,
    inner: &'a mut Inner,
    held: &'a mut Held,
}

/// An absent key in a locked shard.
pub struct Vacant<'a, A: Limiter> {
    locked: Parts<'a, A>,
    hash: u64,
    key: StoredKey,
}

impl<'a, A: Limiter> Vacant<'a, A> {
    /// Stores the key with `state`, making room first (see the module docs): drained keys
    /// are judged at `now` with `p`.
    pub fn insert(self, state: A::State, now: u64, p: &Params) -> Slot<'a, A> {
        let locked = self.locked;
        debug_assert!(locked.held.pos.is_none(), "a lookup lets the held node go");
        let (pos, node) = locked
            .shard
            .insert(locked.inner, self.hash, self.key, state, now, p);
        node.keep();
        *locked.held = Held {
            pos: Some(pos),
            used: false,
        };
        Slot::new(locked, pos)
    }
}

/// A stored key's state, its node held locked. If the state's heap changed when the slot
/// is dropped, it is re-accounted, and the shard evicts if now over budget.
pub struct Slot<'a, A: Limiter> {
    locked: Parts<'a, A>,
    pos: u32,
    heap: usize,
}

impl<'a, A: Limiter> Slot<'a, A> {
    fn new(locked: Parts<'a, A>, pos: u32) -> Slot<'a, A> {
        debug_assert_eq!(locked.held.pos, Some(pos));
        let mut slot = Slot {
            locked,
            pos,
            heap: 0,
        };
        slot.heap = slot.heap_now();
        slot
    }

    /// The heap the state owns. A state without drop glue owns none, and is not looked
    /// at.
    #[inline]
    fn heap_now(&self) -> usize {
        if needs_drop::<A::State>() {
            A::heap_bytes(self)
        } else {
            0
        }
    }
}

impl<A: Limiter> Deref for Slot<'_, A> {
    type Target = A::State;

    #[inline]
    fn deref(&self) -> &A::State {
        // SAFETY: the node is held locked (`held`), and this borrow is tied to the slot's.
        unsafe { self.locked.shard.node(self.pos).state_kept() }
    }
}

impl<A: Limiter> DerefMut for Slot<'_, A> {
    #[inline]
    fn deref_mut(&mut self) -> &mut A::State {
        // SAFETY: as in `deref`, and `&mut self` makes this the only borrow.
        unsafe { self.locked.shard.node(self.pos).state_kept() }
    }
}

impl<A: Limiter> Drop for Slot<'_, A> {
    fn drop(&mut self) {
        let heap = self.heap_now();
        if heap == self.heap {
            return;
        }
        let inner = &mut *self.locked.inner;
        self.locked
            .shard
            .reaccount(inner, self.heap, heap, Some(self.pos));
        if inner.bytes() > inner.budget() {
            // The state alone outweighs the budget: it goes too.
            self.locked.held.pos = None;
            // SAFETY: the node was held locked; the guard takes the lock over.
            let mut node = unsafe { self.locked.shard.node(self.pos).resume() };
            self.locked.shard.remove(inner, self.pos, &mut node);
            inner.evictions += 1;
        }
    }
}

// Loom's primitives work only inside a model: a loom build runs the model checks instead.
#[cfg(all(test, tollgate_loom))]
mod loom;
#[cfg(all(test, not(tollgate_loom)))]
mod tests;
