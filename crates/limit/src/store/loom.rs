//! Model checks of the store's concurrency protocols: loom runs each test's threads in
//! every interleaving (up to [`PREEMPTIONS`] forced switches a run), and fails a run in
//! which a node's head or state is written and read without a lock or an atomic ordering
//! the two, or a thread reaches a node or index slot not ordered after its making.
//!
//! Run them with the last command of .ci/run (`--cfg tollgate_loom`, its own target dir).
//! The stores are one shard of a few nodes, so that loom's search stays small.

use std::hash::RandomState;

use ::loom::model::Builder;
use ::loom::sync::Arc;
use ::loom::thread;

use super::index::index_bytes;
use super::shard::{hash_bytes, Plan, Shard};
use super::slab::node_size;
use super::{Padded, Store};
use crate::leaky_bucket::LeakyBucket;
use crate::{Limiter, Params, Period, Rate, NANOS_PER_MS, NODELAY};

type State = <LeakyBucket as Limiter>::State;

/// Forced thread switches loom tries in one run. Each mutation these tests were checked
/// against (a weakened ordering, a lock dropped) fails within two; three keeps the set
/// to seconds with loom optimised. `LOOM_MAX_PREEMPTIONS` overrides it.
const PREEMPTIONS: usize = 3;
/// A fixed moment (5 s after the zone's epoch).
const NOW: u64 = 5_000_000_000;
/// A key charged once at `NOW` has room for one more request here, and is not drained yet
/// (see [`params`]), so no key drains while the threads race.
const LATER: u64 = NOW + 50 * NANOS_PER_MS;

/// Checks `f` in every interleaving loom tries.
fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = Builder::new();
    builder.preemption_bound.get_or_insert(PREEMPTIONS);
    // Filling a store before the threads start takes a few hundred of loom's steps.
    builder.max_branches = 10_000;
    builder.check(f);
}

/// 10r/s, burst 1, nodelay: a key takes two requests at once, then one per 100 ms.
fn params() -> Params {
    Params {
        burst: 1,
        delay: NODELAY,
        ..Params::new(Rate::new(10, Period::Second).expect("non-zero"))
    }
}

/// A one-shard store of at most `max_nodes` keys, its index growing up to `buckets`. The
/// hasher is made once outside the model: loom replays a test many times, and each replay
/// must hash keys to the same buckets.
fn store(hasher: &RandomState, max_nodes: usize, buckets: usize) -> Arc<Store<LeakyBucket>> {
    let plan = Plan { buckets, max_nodes };
    let budget = index_bytes(buckets) + max_nodes * node_size::<State>();
    Arc::new(Store {
        shards: Box::new([Padded(Shard::new(plan, budget, hasher.clone()))]),
        hasher: hasher.clone(),
        shard_mask: 0,
        capacity: budget,
        fixed: 0,
        plan,
    })
}

/// `count` keys whose home bucket is 15 in an index of 16 or 32 buckets, so that each
/// stored after the first sits further along one probe run: in 16 buckets the run wraps
/// round to bucket 0, and in 32 it spills into the half that doubling adds.
fn colliding_keys(hasher: &RandomState, count: usize) -> Vec<[u8; 4]> {
    (0u32..)
        .map(u32::to_be_bytes)
        .filter(|key| hash_bytes(hasher, key) & 31 == 15)
        .take(count)
        .collect()
}

/// One request on the lock-free path (a stored key) or the shard's lock (a new one).
fn decide(store: &Store<LeakyBucket>, key: &[u8], now: u64) -> bool {
    let (hash, p) = (store.hash(key), params());
    store.decide(hash, key, now, &p, &p).admitted()
}

/// The key's state, if stored.
fn state(store: &Store<LeakyBucket>, key: &[u8]) -> Option<State> {
    let hash = store.hash(key);
    store.lock(hash).get(hash, key).map(|slot| *slot)
}

/// A key's state after admitted requests at `nows`, the first on a new key.
fn charged(nows: &[u64]) -> State {
    let mut state = LeakyBucket::fresh(nows[0]);
    for &now in nows {
        LeakyBucket::charge(&mut state, now, &params());
    }
    state
}

/// Every key is indexed once, the byte count adds up, and `keys` are all it holds.
fn assert_consistent(store: &Store<LeakyBucket>, keys: usize) {
    let shard = &store.shards[0].0;
    let inner = shard.lock();
    assert!(
        shard.index_agrees(&inner),
        "index out of step with the nodes"
    );
    assert_eq!(shard.recount(&inner), inner.bytes(), "bytes miscounted");
    assert_eq!(inner.len(), keys, "keys stored");
}

/// For requests at `nows` on one key of state `start`, decided one after another in either
/// order: which were admitted, and the state after.
fn serial_outcomes(start: State, nows: [u64; 2]) -> [([bool; 2], State); 2] {
    let p = params();
    let run = |order: [usize; 2]| {
        let (mut state, mut admitted) = (start, [false; 2]);
        for i in order {
            admitted[i] = LeakyBucket::check(&state, nows[i], &p).admitted();
            if admitted[i] {
                LeakyBucket::charge(&mut state, nows[i], &p);
            }
        }
        (admitted, state)
    };
    [run([0, 1]), run([1, 0])]
}

/// (a) Check-then-charge on the lock-free path: two requests on a stored key with room for
/// one, at different moments so that the order shows in the state. One is admitted, and
/// the state is what one of the two serial orders leaves.
#[test]
fn two_lock_free_decisions_on_one_key_end_as_one_serial_order_would() {
    let hasher = RandomState::new();
    model(move || {
        let store = store(&hasher, 2, 16);
        assert!(decide(&store, b"k", NOW));
        let nows = [LATER, LATER + 10 * NANOS_PER_MS];
        let racers = nows.map(|now| {
            let store = store.clone();
            thread::spawn(move || decide(&store, b"k", now))
        });
        let admitted = racers.map(|racer| racer.join().expect("racer"));
        let outcome = (admitted, state(&store, b"k").expect("stored"));
        assert!(
            serial_outcomes(charged(&[NOW]), nows).contains(&outcome),
            "{outcome:?}"
        );
        assert_consistent(&store, 1);
    });
}

/// (a) A check under the shard's lock and the charge after it, each looking the key up
/// (as a location with several zones does), racing the lock-free path: the node stays
/// locked from check to charge, so the two requests still act in one order or the other.
#[test]
fn a_locked_check_and_its_charge_are_atomic_against_the_lock_free_path() {
    let hasher = RandomState::new();
    model(move || {
        let store = store(&hasher, 2, 16);
        assert!(decide(&store, b"k", NOW));
        let nows = [LATER, LATER + 10 * NANOS_PER_MS];
        let locked = {
            let store = store.clone();
            thread::spawn(move || {
                let (hash, p) = (store.hash(b"k"), params());
                let mut locked = store.lock(hash);
                let admitted = locked.entry(hash, b"k").check(nows[0], &p).admitted();
                if admitted {
                    locked.entry(hash, b"k").charge(nows[0], &p);
                }
                admitted
            })
        };
        let lock_free = {
            let store = store.clone();
            thread::spawn(move || decide(&store, b"k", nows[1]))
        };
        let admitted = [locked, lock_free].map(|racer| racer.join().expect("racer"));
        let outcome = (admitted, state(&store, b"k").expect("stored"));
        assert!(
            serial_outcomes(charged(&[NOW]), nows).contains(&outcome),
            "{outcome:?}"
        );
        assert_consistent(&store, 1);
    });
}

/// (b) The first two requests of a new key, both missing it on the lock-free path: the
/// second looks again under the shard's lock and finds the first's node, so the key gets
/// one node, charged twice (its burst takes both).
#[test]
fn two_first_requests_of_a_new_key_store_one_node() {
    let hasher = RandomState::new();
    model(move || {
        let store = store(&hasher, 2, 16);
        let racers = [0, 1].map(|_| {
            let store = store.clone();
            thread::spawn(move || decide(&store, b"new", NOW))
        });
        let admitted = racers.map(|racer| racer.join().expect("racer"));
        assert_eq!(admitted, [true, true]);
        assert_eq!(state(&store, b"new"), Some(charged(&[NOW, NOW])));
        assert_consistent(&store, 1);
    });
}

/// (c) A new key in a full shard evicts another and takes its node, while a request on
/// the evicted key may be half way through the lock-free path to that node: it compares
/// the key under the node's lock, sees a stranger, and stores its key anew. Whatever the
/// order, each key's state is charged by its own requests only.
///
/// If the request comes first, its key is used and passed over, and the hand evicts the
/// other; if it comes after, its key starts afresh and the hand evicts the other too.
#[test]
fn an_insert_that_evicts_a_key_races_a_request_on_that_key() {
    let hasher = RandomState::new();
    let keys = colliding_keys(&hasher, 3);
    model(move || {
        let [evicted, kept, new] = [0, 1, 2].map(|i| keys[i]);
        let store = store(&hasher, 2, 16);
        assert!(decide(&store, &evicted, NOW) && decide(&store, &kept, NOW));
        // Neither key is used again, so the CLOCK hand takes the first: `evicted`.
        let inserting = {
            let store = store.clone();
            thread::spawn(move || decide(&store, &new, NOW))
        };
        let reader = {
            let store = store.clone();
            thread::spawn(move || decide(&store, &evicted, LATER))
        };
        assert!(inserting.join().expect("inserting"));
        assert!(reader.join().expect("reader"));
        assert_eq!(state(&store, &new), Some(charged(&[NOW])));
        let again = state(&store, &evicted);
        let orders = [charged(&[NOW, LATER]), charged(&[LATER])].map(Some);
        assert!(orders.contains(&again), "{again:?}");
        assert_eq!(state(&store, &kept), None);
        assert_consistent(&store, 2);
    });
}

/// (c) Removing a key shifts the next key of its probe run back into its bucket, while a
/// request on that next key probes the run without the lock: it finds the key, or misses
/// it and looks again under the lock; either way its one node is charged once.
#[test]
fn a_removal_that_shifts_the_index_races_a_request_on_the_shifted_key() {
    let hasher = RandomState::new();
    let keys = colliding_keys(&hasher, 2);
    model(move || {
        let [removed, shifted] = [0, 1].map(|i| keys[i]);
        let store = store(&hasher, 2, 16);
        assert!(decide(&store, &removed, NOW) && decide(&store, &shifted, NOW));
        let removing = {
            let store = store.clone();
            thread::spawn(move || {
                let hash = store.hash(&removed);
                store.lock(hash).remove(hash, &removed)
            })
        };
        let reader = {
            let store = store.clone();
            thread::spawn(move || decide(&store, &shifted, LATER))
        };
        assert!(removing.join().expect("removing"));
        assert!(reader.join().expect("reader"));
        assert_eq!(state(&store, &shifted), Some(charged(&[NOW, LATER])));
        assert_consistent(&store, 1);
    });
}

/// (d) A new key that doubles the index (every slot taken out and placed anew) races a
/// request on a stored key: the request finds its key, lock-free or under the lock after
/// a miss, and no key is lost or stored twice.
#[test]
fn an_insert_that_grows_the_index_races_a_request_on_a_stored_key() {
    let hasher = RandomState::new();
    let keys = colliding_keys(&hasher, 13);
    model(move || {
        // 16 buckets take 12 keys; the 13th doubles them to 32.
        let store = store(&hasher, 13, 32);
        for key in &keys[..12] {
            assert!(decide(&store, key, NOW));
        }
        let inserting = {
            let (store, key) = (store.clone(), keys[12]);
            thread::spawn(move || decide(&store, &key, NOW))
        };
        let reader = {
            let (store, key) = (store.clone(), keys[5]);
            thread::spawn(move || decide(&store, &key, LATER))
        };
        assert!(inserting.join().expect("inserting"));
        assert!(reader.join().expect("reader"));
        assert_eq!(store.shards[0].0.index_buckets(), 32);
        assert_eq!(state(&store, &keys[5]), Some(charged(&[NOW, LATER])));
        assert_eq!(state(&store, &keys[12]), Some(charged(&[NOW])));
        assert_consistent(&store, 13);
    });
}

/// (e) A key is removed and its node, freed, is given to the next new key, while a request
/// on the removed key may hold the node's position from the index: it reads the node only
/// under the node's lock, so never the new key's head or state half written, and never
/// charges the new key.
#[test]
fn a_freed_node_reused_for_a_new_key_races_a_request_on_the_old_key() {
    let hasher = RandomState::new();
    model(move || {
        let store = store(&hasher, 2, 16);
        assert!(decide(&store, b"old", NOW));
        let reusing = {
            let store = store.clone();
            thread::spawn(move || {
                let hash = store.hash(b"old");
                assert!(store.lock(hash).remove(hash, b"old"));
                decide(&store, b"new", NOW)
            })
        };
        let reader = {
            let store = store.clone();
            thread::spawn(move || decide(&store, b"old", LATER))
        };
        assert!(reusing.join().expect("reusing"));
        assert!(reader.join().expect("reader"));
        assert_eq!(state(&store, b"new"), Some(charged(&[NOW])));
        // Removed after the reader's charge, or stored afresh after the removal.
        let old = state(&store, b"old");
        assert!(old.is_none() || old == Some(charged(&[LATER])), "{old:?}");
        assert_consistent(&store, 1 + usize::from(old.is_some()));
    });
}
