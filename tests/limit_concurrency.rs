//! The store under many threads: a key's shard lock makes check-then-charge atomic, so
//! no admission is lost or doubled however many requests race for the key.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Barrier;
use std::thread;

use tollgate::limit::leaky_bucket::LeakyBucket;
use tollgate::limit::store::{Entry, Store};
use tollgate::limit::{Params, Period, Rate, NODELAY};

const THREADS: usize = 8;
/// A fixed moment (5 s after the zone's epoch): nothing drains while the threads race.
const NOW: u64 = 5_000_000_000;

fn burst_nodelay(burst: u64) -> Params {
    Params {
        burst,
        delay: NODELAY,
        ..Params::new(Rate::new(10, Period::Second).expect("non-zero"))
    }
}

/// Runs `work(thread)` on [`THREADS`] threads released together.
fn race(work: impl Fn(usize) + Sync) {
    let start = Barrier::new(THREADS);
    thread::scope(|s| {
        for t in 0..THREADS {
            let (start, work) = (&start, &work);
            s.spawn(move || {
                start.wait();
                work(t);
            });
        }
    });
}

#[test]
fn racing_requests_for_one_key_admit_exactly_burst_plus_one() {
    const BURST: u64 = 50;
    let store = Store::<LeakyBucket>::new(1 << 20);
    let p = burst_nodelay(BURST);
    let admitted = AtomicU64::new(0);
    race(|_| {
        for _ in 0..1_000 {
            let key = b"one key for everyone";
            let hash = store.hash(key);
            if store.lock(hash).decide(hash, key, NOW, &p).admitted() {
                admitted.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    assert_eq!(admitted.into_inner(), BURST + 1);
    assert_eq!(store.stats().keys, 1);
}

#[test]
fn racing_requests_for_many_keys_admit_each_its_own_quota() {
    const BURST: u64 = 3;
    const KEYS: usize = 2_000;
    // Small enough that the keys share few shards, large enough that none is evicted.
    let store = Store::<LeakyBucket>::new(256 << 10);
    assert!(store.max_keys() > 2 * KEYS);
    let p = burst_nodelay(BURST);
    let admitted: Vec<AtomicU64> = (0..KEYS).map(|_| AtomicU64::new(0)).collect();
    race(|t| {
        // Every thread asks for every key BURST + 1 times, each from its own start.
        for round in 0..(BURST + 1) as usize * KEYS {
            let k = (round + t * KEYS / THREADS) % KEYS;
            let key = (k as u32).to_be_bytes();
            let hash = store.hash(&key);
            let mut locked = store.lock(hash);
            // check, then charge: the pattern of a location with several zones.
            let entry = locked.entry(hash, &key);
            if entry.check(NOW, &p).admitted() {
                entry.charge(NOW, &p);
                admitted[k].fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    for (k, count) in admitted.iter().enumerate() {
        assert_eq!(count.load(Ordering::Relaxed), BURST + 1, "key {k}");
    }
    let stats = store.stats();
    assert_eq!((stats.keys, stats.evictions), (KEYS, 0));
    // Every key is now full: the next request of each is rejected.
    for k in 0..KEYS as u32 {
        let key = k.to_be_bytes();
        let hash = store.hash(&key);
        let mut locked = store.lock(hash);
        let entry = locked.entry(hash, &key);
        assert!(matches!(entry, Entry::Occupied(_)));
        assert!(!entry.check(NOW, &p).admitted());
    }
}
