//! The per-key state of one zone, in memory bounded by the zone's `size` (DESIGN §5.4).
//!
//! # Layout
//!
//! Keys are spread over up to 64 shards (a power of two, about one per 64 KiB of `size`),
//! each behind its own mutex on its own cache lines. A shard is a slab of nodes — 8 bytes
//! of LRU links and key tag, 16 bytes of key, then the state (nodes of 40 bytes for
//! `leaky_bucket`, 32 for `token_bucket`) — and a hashbrown index of `u32` slab
//! positions, kept at most 66% full so that removals seldom leave it needing a rebuild.
//! Slab and index double as keys come, each only within the shard's byte share (an index
//! allocated at once for the most keys is sparse, and a lookup in it misses the cache
//! several times more often); neither ever shrinks. Keys up to 16 bytes (IPv4 and IPv6
//! addresses) are stored as they are; a longer key as a 128-bit keyed digest of it, so
//! every key costs the same and 64 KiB header values cannot crowd out addresses.
//!
//! A state that owns heap memory must have drop glue (a `Vec`, a `Box`): the store asks
//! [`Algorithm::heap_bytes`] only of such states.
//!
//! # Accounting
//!
//! The accounted bytes are what the store allocates: the slab's capacity, the index's
//! allocation, the heap states own ([`Algorithm::heap_bytes`]), the shard array and the
//! store itself. They never exceed `capacity_bytes`: each shard gets an equal share and
//! evicts to stay in it. At full load a shard costs about 48 bytes per key for
//! `leaky_bucket` (nginx: 128) and 40 for `token_bucket`, up to 8 more when the share
//! falls badly between two index sizes. Growing the slab or the index briefly holds the
//! old allocation beside the new one, for one copy under the shard's lock.
//!
//! # Eviction
//!
//! Only inserting a key, or a state's heap growing, makes room, and only in that key's
//! shard. When the shard is full (it holds its most keys, or the new state would not fit
//! in its bytes):
//! 1. those of the 3 least recently used keys that are drained ([`Algorithm::is_drained`]
//!    at the inserting request's `now` and params) are dropped: they carry no
//!    information, so this loses nothing (counted as `expired`);
//! 2. while still full, the least recently used key is evicted by force, though it is not
//!    drained (counted as `evictions`): its next request starts afresh.
//!
//! nginx does the same, except that when even force fails it rejects the request (503);
//! here a full zone always evicts (DESIGN §5.3). [`Store::sweep`] drops drained keys from
//! the least recently used ends of every shard, a bounded tidy for a periodic task.
//!
//! Drained-ness is judged with the params the caller passes. In a zone whose keys have
//! different rates (plans), pass the slowest plan's params to [`Vacant::insert`] and
//! [`Store::sweep`], or a faster rate could drop a slow key that has not drained.
//!
//! # Use
//!
//! ```
//! # use tollgate::limit::{Algorithm, Params, Period, Rate, leaky_bucket::LeakyBucket};
//! # use tollgate::limit::store::Store;
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
//! [`Locked::decide`] does exactly this for one zone. Several zones' shards are locked
//! in one global order (zone, then [`Store::shard_of`]) and each [`Entry`] checked
//! before any is charged. A thread must not lock a shard it holds (the mutex is not
//! reentrant): two limits in one zone whose keys share a shard share its guard.

mod shard;

use std::hash::RandomState;
use std::ops::{Deref, DerefMut};
use std::sync::{Mutex, MutexGuard};

use self::shard::{hash_bytes, node_size, Plan, Shard, StoredKey};
use super::{Algorithm, Decision, Params};

/// Smallest capacity a store takes; smaller requests are raised to it.
pub const MIN_CAPACITY: usize = 4096;
/// Most shards a store has.
pub const MAX_SHARDS: usize = 64;
/// Capacity per shard below which a store has fewer shards.
const SHARD_BYTES: usize = 64 * 1024;
/// Least recently used keys each shard looks at per [`Store::sweep`].
const SWEEP_LOOKS: usize = 64;
/// The shard index is taken from the hash bits just below hashbrown's 7-bit tag (the top
/// bits), and above the bits it takes bucket positions from (the low bits), so keys of
/// one shard still spread over its whole index.
const SHARD_SHIFT: u32 = 64 - 7 - MAX_SHARDS.trailing_zeros();

/// Two shards on different cache lines (128: adjacent-line prefetch pairs 64-byte lines).
#[repr(align(128))]
struct Padded<T>(T);

/// The keyed state of one zone: see the [module docs](self).
pub struct Store<A: Algorithm> {
    shards: Box<[Padded<Mutex<Shard<A>>>]>,
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
    /// Times a shard re-indexed its keys to clear removal tombstones (each costs a hash
    /// per key of that shard).
    pub index_rebuilds: u64,
}

impl<A: Algorithm> Store<A> {
    /// A store whose accounted bytes never exceed `capacity_bytes` (the zone's `size`),
    /// raised to [`MIN_CAPACITY`] if below.
    pub fn new(capacity_bytes: usize) -> Store<A> {
        let capacity = capacity_bytes.max(MIN_CAPACITY);
        let count = shard_count(capacity);
        let fixed = size_of::<Store<A>>() + count * size_of::<Padded<Mutex<Shard<A>>>>();
        let budget = (capacity - fixed) / count;
        let plan = Plan::for_budget(budget, node_size::<A>());
        let hasher = RandomState::new();
        let shards = (0..count)
            .map(|_| Padded(Mutex::new(Shard::new(plan, budget, hasher.clone()))))
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

    /// Locks the shard holding `hash`. A lock poisoned by a panic under it is taken over
    /// and its shard emptied: half-updated links must not outlive the panic.
    pub fn lock(&self, hash: u64) -> Locked<'_, A> {
        Locked {
            shard: lock(&self.shards[self.shard_of(hash)].0),
        }
    }

    pub fn stats(&self) -> Stats {
        let mut stats = Stats {
            bytes: self.fixed,
            capacity_bytes: self.capacity,
            ..Stats::default()
        };
        for shard in self.shards.iter() {
            let shard = lock(&shard.0);
            stats.keys += shard.len();
            stats.bytes += shard.bytes();
            stats.evictions += shard.evictions;
            stats.expired += shard.expired;
            stats.index_rebuilds += shard.rebuilds;
        }
        stats
    }

    /// Drops drained keys among the 64 least recently used of every shard, one shard
    /// locked at a time; how many. `p` as for [`Vacant::insert`].
    pub fn sweep(&self, now: u64, p: &Params) -> usize {
        self.shards
            .iter()
            .map(|shard| lock(&shard.0).expire(SWEEP_LOOKS, now, p))
            .sum()
    }
}

/// A power of two up to [`MAX_SHARDS`], about one per [`SHARD_BYTES`].
fn shard_count(capacity: usize) -> usize {
    let wanted = (capacity / SHARD_BYTES).clamp(1, MAX_SHARDS);
    1 << wanted.ilog2()
}

fn lock<T>(mutex: &Mutex<Shard<T>>) -> MutexGuard<'_, Shard<T>>
where
    T: Algorithm,
{
    mutex.lock().unwrap_or_else(|poisoned| {
        let mut shard = poisoned.into_inner();
        shard.reset();
        mutex.clear_poison();
        shard
    })
}

/// One locked shard. Hold it briefly: every key of the shard waits.
pub struct Locked<'a, A: Algorithm> {
    shard: MutexGuard<'a, Shard<A>>,
}

impl<A: Algorithm> Locked<'_, A> {
    /// The key's entry; a present key is marked most recently used.
    pub fn entry(&mut self, hash: u64, key: &[u8]) -> Entry<'_, A> {
        let shard = &mut *self.shard;
        let key = shard.stored_key(hash, key);
        match shard.find(hash, &key) {
            Some(pos) => {
                shard.touch(pos);
                Entry::Occupied(Slot::new(shard, pos))
            }
            None => Entry::Vacant(Vacant { shard, hash, key }),
        }
    }

    /// The key's state, marked most recently used. None when absent.
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
        let key = self.shard.stored_key(hash, key);
        match self.shard.find(hash, &key) {
            Some(pos) => {
                self.shard.remove(pos);
                true
            }
            None => false,
        }
    }

    /// One zone's whole decision: check, and charge if admitted. A new key is stored only
    /// when admitted, so a rejected one costs no memory.
    pub fn decide(&mut self, hash: u64, key: &[u8], now: u64, p: &Params) -> Decision {
        let entry = self.entry(hash, key);
        let decision = entry.check(now, p);
        if decision.admitted() {
            entry.charge(now, p);
        }
        decision
    }
}

/// A key's place in a locked shard: stored, or not yet.
pub enum Entry<'a, A: Algorithm> {
    Occupied(Slot<'a, A>),
    Vacant(Vacant<'a, A>),
}

impl<'a, A: Algorithm> Entry<'a, A> {
    /// The decision at `now`, changing nothing; an absent key decides as
    /// [`fresh`](Algorithm::fresh).
    pub fn check(&self, now: u64, p: &Params) -> Decision {
        match self {
            Entry::Occupied(slot) => A::check(slot, now, p),
            Entry::Vacant(_) => A::check(&A::fresh(now), now, p),
        }
    }

    /// Charges an admitted request, storing an absent key first.
    pub fn charge(self, now: u64, p: &Params) -> Slot<'a, A> {
        match self {
            Entry::Occupied(mut slot) => {
                A::charge(&mut slot, now, p);
                slot
            }
            Entry::Vacant(vacant) => {
                let mut state = A::fresh(now);
                A::charge(&mut state, now, p);
                vacant.insert(state, now, p)
            }
        }
    }
}

/// An absent key in a locked shard.
pub struct Vacant<'a, A: Algorithm> {
    shard: &'a mut Shard<A>,
    hash: u64,
    key: StoredKey,
}

impl<'a, A: Algorithm> Vacant<'a, A> {
    /// Stores the key with `state`, making room first (see the module docs): drained keys
    /// are judged at `now` with `p`.
    pub fn insert(self, state: A::State, now: u64, p: &Params) -> Slot<'a, A> {
        let pos = self.shard.insert(self.hash, self.key, state, now, p);
        Slot::new(self.shard, pos)
    }
}

/// A stored key's state, borrowed from its locked shard. If the state's heap changed when
/// the slot is dropped, it is re-accounted, and the shard evicts if now over budget.
pub struct Slot<'a, A: Algorithm> {
    shard: &'a mut Shard<A>,
    pos: u32,
    heap: usize,
}

impl<'a, A: Algorithm> Slot<'a, A> {
    fn new(shard: &'a mut Shard<A>, pos: u32) -> Slot<'a, A> {
        let heap = heap_at(shard, pos);
        Slot { shard, pos, heap }
    }
}

/// The heap the state at `pos` owns. A state without drop glue owns none, and is not
/// looked at: that spares the hot path two bounds-checked lookups.
#[inline]
fn heap_at<A: Algorithm>(shard: &Shard<A>, pos: u32) -> usize {
    if std::mem::needs_drop::<A::State>() {
        A::heap_bytes(shard.state(pos))
    } else {
        0
    }
}

impl<A: Algorithm> Deref for Slot<'_, A> {
    type Target = A::State;

    #[inline]
    fn deref(&self) -> &A::State {
        self.shard.state(self.pos)
    }
}

impl<A: Algorithm> DerefMut for Slot<'_, A> {
    #[inline]
    fn deref_mut(&mut self) -> &mut A::State {
        self.shard.state_mut(self.pos)
    }
}

impl<A: Algorithm> Drop for Slot<'_, A> {
    fn drop(&mut self) {
        let heap = heap_at(self.shard, self.pos);
        if heap != self.heap {
            self.shard.reaccount(self.heap, heap);
        }
    }
}

#[cfg(test)]
mod tests;
