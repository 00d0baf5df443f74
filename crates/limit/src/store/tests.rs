use super::*;
use crate::leaky_bucket::LeakyBucket;
use crate::{Period, Rate, Verdict, NANOS_PER_MS, NODELAY};

/// One shard (below 64 KiB), so every key competes with every other.
const ONE_SHARD: usize = 32 * 1024;

fn ten_per_second() -> Params {
    Params {
        delay: NODELAY,
        ..Params::new(Rate::new(10, Period::Second).expect("non-zero"))
    }
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// Stores `key` charged once at 0 ms: not drained until 100 ms at 10r/s.
fn charge<A: Limiter>(store: &Store<A>, key: &[u8]) {
    let (hash, p) = (store.hash(key), ten_per_second());
    let mut locked = store.lock(hash);
    assert!(locked.decide(hash, key, 0, &p).admitted());
}

/// Stores `key` drained (as fresh).
fn store_fresh(store: &Store<LeakyBucket>, key: &[u8]) {
    let hash = store.hash(key);
    store
        .lock(hash)
        .insert(hash, key, LeakyBucket::fresh(0), 0, &ten_per_second());
}

fn present<A: Limiter>(store: &Store<A>, key: &[u8]) -> bool {
    let hash = store.hash(key);
    store.lock(hash).get(hash, key).is_some()
}

/// Every shard's running byte count equals a recount, its index holds exactly its keys,
/// and the total fits.
fn assert_accounting_adds_up<A: Limiter>(store: &Store<A>) {
    for shard in store.shards.iter() {
        assert!(shard.0.index_agrees(&shard.0.lock()), "index out of step");
    }
    let recounted: usize = store.shards.iter().map(|s| s.0.recount(&s.0.lock())).sum();
    let stats = store.stats();
    assert_eq!(stats.bytes, store.fixed + recounted);
    assert!(stats.bytes <= stats.capacity_bytes, "{stats:?}");
}

#[test]
fn a_full_shard_evicts_a_key_not_used_since_it_was_stored() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    let n = store.max_keys() as u32;
    for i in 0..n {
        charge(&store, &key(i));
    }
    assert_eq!(store.stats().keys, n as usize);
    assert!(present(&store, &key(0))); // now the most recently used
    charge(&store, &key(n));
    assert!(!present(&store, &key(1)));
    assert!(present(&store, &key(0)) && present(&store, &key(2)) && present(&store, &key(n)));
    let stats = store.stats();
    assert_eq!((stats.keys, stats.evictions), (n as usize, 1));
}

#[test]
fn the_clock_hand_passes_over_keys_used_since_it_last_came_by() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    let n = store.max_keys() as u32;
    for i in 0..n {
        charge(&store, &key(i));
    }
    // Used through the lock-free path and through a lock.
    let p = ten_per_second();
    let hash = store.hash(&key(0));
    store.decide(hash, &key(0), 200 * NANOS_PER_MS, &p, &p);
    assert!(present(&store, &key(2)));
    charge(&store, &key(n)); // the hand: 0 (used) passed over, 1 evicted
    charge(&store, &key(n + 1)); // 2 (used) passed over, 3 evicted
    for (k, kept) in [(0, true), (1, false), (2, true), (3, false), (4, true)] {
        assert_eq!(present(&store, &key(k)), kept, "key {k}");
    }
    assert_eq!(store.stats().evictions, 2);
    assert_accounting_adds_up(&store);
}

#[test]
fn drained_keys_are_dropped_before_a_live_one_is_evicted() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    let n = store.max_keys() as u32;
    charge(&store, &key(0)); // the least recently used, not drained
    store_fresh(&store, &key(1)); // drained
    for i in 2..n {
        charge(&store, &key(i));
    }
    charge(&store, &key(n));
    assert!(present(&store, &key(0)));
    assert!(!present(&store, &key(1)));
    let stats = store.stats();
    assert_eq!((stats.evictions, stats.expired), (0, 1));
}

#[test]
fn only_the_three_keys_at_the_hand_are_looked_at_for_drained_ones() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    let n = store.max_keys() as u32;
    for i in 0..3 {
        charge(&store, &key(i));
    }
    store_fresh(&store, &key(3)); // drained, but fourth from the end
    for i in 4..n {
        charge(&store, &key(i));
    }
    charge(&store, &key(n));
    assert!(!present(&store, &key(0)));
    assert!(present(&store, &key(3)));
    assert_eq!(store.stats().evictions, 1);
}

#[test]
fn forced_evictions_are_counted() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    let n = store.max_keys() as u32;
    for i in 0..n + 10 {
        charge(&store, &key(i));
    }
    let stats = store.stats();
    assert_eq!(
        (stats.keys, stats.evictions, stats.expired),
        (n as usize, 10, 0)
    );
    assert_accounting_adds_up(&store);
}

#[test]
fn accounting_adds_up_and_stays_within_capacity() {
    for capacity in [0, 5_000, ONE_SHARD, 100_000, 1 << 20, 3_333_333] {
        let store = Store::<LeakyBucket>::new(capacity);
        assert!(
            store.max_keys() * 64 >= store.stats().capacity_bytes,
            "{capacity}"
        );
        for i in 0..(store.max_keys() as u32 * 2) {
            charge(&store, &key(i));
            if i % 3 == 0 {
                let k = key(i / 2);
                let hash = store.hash(&k);
                store.lock(hash).remove(hash, &k);
            }
            if i % 997 == 0 {
                assert_accounting_adds_up(&store);
            }
        }
        assert_accounting_adds_up(&store);
        // The index grew to the planned size at most.
        for shard in store.shards.iter() {
            assert!(shard.0.index_buckets() <= store.plan.buckets);
        }
    }
}

#[test]
fn a_removed_key_is_gone_and_its_slot_reused() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    charge(&store, b"a");
    charge(&store, b"b");
    let hash = store.hash(b"a");
    assert!(store.lock(hash).remove(hash, b"a"));
    assert!(!store.lock(hash).remove(hash, b"a"));
    assert!(!present(&store, b"a") && present(&store, b"b"));
    let bytes = store.stats().bytes;
    charge(&store, b"c");
    assert_eq!(
        store.stats(),
        Stats {
            keys: 2,
            bytes,
            ..store.stats()
        }
    );
}

#[test]
fn long_keys_are_told_apart_and_cost_one_node() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    let long = |n: usize, last: u8| {
        let mut k = vec![b'k'; n];
        k[n - 1] = last;
        k
    };
    let keys = [
        long(16, b'x'),
        long(17, b'x'),
        long(17, b'y'),
        long(1000, b'x'),
        long(65_535, b'x'),
        long(65_535, b'y'),
    ];
    let before = store.stats().bytes;
    for k in &keys {
        charge(&store, k);
    }
    assert_eq!(store.stats().keys, keys.len());
    // Each key is found again, and holds its own state: a second request is rejected.
    let p = ten_per_second();
    for k in &keys {
        let hash = store.hash(k);
        let mut locked = store.lock(hash);
        assert!(!locked.decide(hash, k, 0, &p).admitted());
    }
    assert!(!present(&store, &long(18, b'x')));
    assert!(!present(&store, &long(65_534, b'x')));
    // One node each, whatever the key's length.
    assert_eq!(
        store.stats().bytes,
        before + keys.len() * node_size::<<LeakyBucket as Limiter>::State>()
    );
}

#[test]
fn insert_replaces_a_present_keys_state() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    charge(&store, b"a");
    store_fresh(&store, b"a");
    let hash = store.hash(b"a");
    let p = ten_per_second();
    assert!(store.lock(hash).decide(hash, b"a", 0, &p).admitted());
    assert_eq!(store.stats().keys, 1);
}

#[test]
fn a_rejected_new_key_is_not_stored() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    let p = Params {
        cost: 2,
        ..ten_per_second()
    };
    let hash = store.hash(b"a");
    let decision = store.lock(hash).decide(hash, b"a", 0, &p);
    assert_eq!(decision.verdict, Verdict::Reject { retry_after: 0 });
    assert_eq!(store.stats().keys, 0);
}

#[test]
fn sweep_drops_drained_keys_only() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    for i in 0..10 {
        charge(&store, &key(i));
    }
    let p = ten_per_second();
    assert_eq!(store.sweep(99 * NANOS_PER_MS, &p), 0);
    assert_eq!(store.sweep(100 * NANOS_PER_MS, &p), 10);
    let stats = store.stats();
    assert_eq!((stats.keys, stats.expired, stats.evictions), (0, 10, 0));
}

#[test]
fn keys_spread_over_every_shard() {
    let store = Store::<LeakyBucket>::new(10 << 20);
    assert_eq!(store.shard_count(), MAX_SHARDS);
    let mut seen = [0; MAX_SHARDS];
    for i in 0..10_000 {
        seen[store.shard_of(store.hash(&key(i)))] += 1;
    }
    assert!(seen.iter().all(|&n| n > 100), "{seen:?}");
    let other = Store::<LeakyBucket>::new(10 << 20);
    assert_ne!(store.hash(b"k"), other.hash(b"k"));
}

#[test]
fn a_poisoned_shard_is_emptied_and_used_again() {
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    charge(&store, b"a");
    let hash = store.hash(b"a");
    std::thread::scope(|s| {
        let panicked = s.spawn(|| {
            let _locked = store.lock(hash);
            panic!("under the lock");
        });
        assert!(panicked.join().is_err());
    });
    assert!(!present(&store, b"a"));
    charge(&store, b"a");
    assert!(present(&store, b"a"));
    assert_accounting_adds_up(&store);
}

/// An algorithm whose state owns heap: a log of admitted request times.
struct Log;

impl Limiter for Log {
    type State = Vec<u64>;
    fn fresh(_now: u64) -> Vec<u64> {
        Vec::new()
    }
    fn check(state: &Vec<u64>, _now: u64, p: &Params) -> Decision {
        let verdict = if (state.len() as u64) <= p.burst {
            Verdict::Pass
        } else {
            Verdict::Reject { retry_after: 0 }
        };
        Decision {
            verdict,
            remaining: 0,
            reset: 0,
        }
    }
    fn charge(state: &mut Vec<u64>, now: u64, _p: &Params) {
        state.push(now);
    }
    fn refund(state: &mut Vec<u64>, _now: u64, _p: &Params) {
        state.pop();
    }
    fn is_drained(state: &Vec<u64>, _now: u64, _p: &Params) -> bool {
        state.is_empty()
    }
    fn heap_bytes(state: &Vec<u64>) -> usize {
        state.capacity() * size_of::<u64>()
    }
}

#[test]
fn a_growing_state_is_accounted_and_evicts_others_when_over_budget() {
    let store = Store::<Log>::new(ONE_SHARD);
    let p = Params {
        burst: u64::MAX,
        ..ten_per_second()
    };
    for i in 0..100 {
        charge(&store, &key(i));
    }
    assert_accounting_adds_up(&store);
    let hash = store.hash(b"big");
    {
        let mut locked = store.lock(hash);
        let mut slot = locked.insert(hash, b"big", Vec::new(), 0, &p);
        slot.extend(0..2_000); // 16 KB: fits
    }
    assert_accounting_adds_up(&store);
    assert_eq!(store.stats().evictions, 0);
    {
        let mut locked = store.lock(hash);
        let mut slot = locked.get(hash, b"big").expect("stored");
        slot.extend(0..2_000); // 32 KB: no longer fits beside anything
    }
    assert_accounting_adds_up(&store);
    let stats = store.stats();
    assert!(stats.evictions >= 100, "{stats:?}");
}

#[test]
fn a_node_is_40_bytes_for_leaky_bucket_and_32_for_token_bucket() {
    use crate::token_bucket::TokenBucket;
    // 4 bytes of lock word, 4 of tag, 16 of key, then the state: the 64-bytes-a-key
    // budget leaves the index 24 (leaky) or 32 (token) bytes a key; it takes 10.7.
    assert_eq!(node_size::<<LeakyBucket as Limiter>::State>(), 40);
    assert_eq!(node_size::<<TokenBucket as Limiter>::State>(), 32);
}

#[test]
fn the_lock_free_path_waits_while_a_locked_check_holds_the_key() {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::time::Duration;
    let store = Store::<LeakyBucket>::new(ONE_SHARD);
    let p = ten_per_second();
    charge(&store, b"k"); // stored, and full at 0 ms until 100 ms
    let (hash, now) = (store.hash(b"k"), 100 * NANOS_PER_MS);
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        // Check, then look the key up again to charge: the pattern of a location with
        // several zones (`zone::decide`).
        let mut locked = store.lock(hash);
        assert!(locked.entry(hash, b"k").check(now, &p).admitted()); // room for one
        let racer = s.spawn(|| {
            let decision = store.decide(hash, b"k", now, &p, &p);
            done.store(true, Ordering::SeqCst);
            decision
        });
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !done.load(Ordering::SeqCst),
            "decided between check and charge"
        );
        locked.entry(hash, b"k").charge(now, &p);
        drop(locked);
        // The racer sees the charge: the one request of room is gone.
        assert!(!racer.join().expect("racer").admitted());
    });
}
