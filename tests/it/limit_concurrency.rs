//! The store under many threads: a stored key is decided under its node's lock, with or
//! without its shard's lock, and a locked check keeps the node until the charge, so no
//! admission is lost or doubled however many requests race for the key, whichever path
//! each takes, while other keys come and go around it.

use crate::support;

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
    let _shared = support::shared();
    const BURST: u64 = 50;
    let store = Store::<LeakyBucket>::new(1 << 20);
    let p = burst_nodelay(BURST);
    let admitted = AtomicU64::new(0);
    race(|t| {
        for i in 0..1_000 {
            let key = b"one key for everyone";
            let hash = store.hash(key);
            // Half the requests through the shard's lock, half without it.
            let decision = if (t + i) % 2 == 0 {
                store.lock(hash).decide(hash, key, NOW, &p)
            } else {
                store.decide(hash, key, NOW, &p, &p)
            };
            if decision.admitted() {
                admitted.fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    assert_eq!(admitted.into_inner(), BURST + 1);
    assert_eq!(store.stats().keys, 1);
}

#[test]
fn racing_requests_for_many_keys_admit_each_its_own_quota() {
    let _shared = support::shared();
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

#[test]
fn hot_keys_keep_exact_counts_while_other_keys_churn_through_their_shards() {
    let _shared = support::shared();
    const BURST: u64 = 20;
    const HOT: usize = 64;
    // Few shards, and churn keys come and go in them: index slots shift back on every
    // removal, the index doubles, free nodes are reused, all under the lock-free readers.
    let store = Store::<LeakyBucket>::new(64 << 10);
    let p = burst_nodelay(BURST);
    let admitted: Vec<AtomicU64> = (0..HOT).map(|_| AtomicU64::new(0)).collect();
    race(|t| {
        if t % 2 == 1 {
            let mut live = std::collections::VecDeque::new();
            for i in 0..20_000u32 {
                let key = (u32::MAX - (t as u32) * 1_000_000 - i).to_be_bytes();
                let hash = store.hash(&key);
                store.lock(hash).decide(hash, &key, NOW, &p);
                live.push_back(key);
                if live.len() > 150 {
                    let gone = live.pop_front().expect("non-empty");
                    let hash = store.hash(&gone);
                    assert!(store.lock(hash).remove(hash, &gone));
                }
            }
            return;
        }
        // Long past every key's quota, so that the churn runs throughout.
        for round in 0..(BURST as usize + 1) * HOT * 40 {
            let k = (round + t * 7) % HOT;
            let key = (k as u32).to_be_bytes();
            let hash = store.hash(&key);
            let admit = if round % 3 == 0 {
                let mut locked = store.lock(hash);
                let entry = locked.entry(hash, &key);
                let admit = entry.check(NOW, &p).admitted();
                if admit {
                    entry.charge(NOW, &p);
                }
                admit
            } else {
                store.decide(hash, &key, NOW, &p, &p).admitted()
            };
            if admit {
                admitted[k].fetch_add(1, Ordering::Relaxed);
            }
        }
    });
    for (k, count) in admitted.iter().enumerate() {
        assert_eq!(count.load(Ordering::Relaxed), BURST + 1, "key {k}");
    }
    assert_eq!(store.stats().evictions, 0, "the test needs no evictions");
}

mod through_zones {
    //! The same through `decision::decide`, as the gateway calls it: tasks on a multi-threaded
    //! runtime, several zones per request.

    use crate::support;

    use std::net::IpAddr;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use http::HeaderMap;
    use tollgate::limit::decision::{self, LimitRule};
    use tollgate::limit::key::Template;
    use tollgate::limit::zone::{Spec, Zone};
    use tollgate::limit::{Algorithm, Period, Rate, NODELAY};
    use tollgate::vars::{Request, VarText};

    fn zone(name: &str, key: &str, algorithm: Algorithm, max: u64, epoch: Instant) -> Arc<Zone> {
        let spec = Spec {
            name: name.to_owned(),
            template: Template::new(VarText::parse(key).expect("a key"), 32, 128),
            algorithm,
            rate: Rate::new(1, Period::Minute).expect("non-zero"),
            plan_rates: Vec::new(),
            max,
            size: 1 << 20,
            redis: None,
            adaptive: None,
            soft: None,
            plan_from: None,
        };
        Arc::new(Zone::new(spec, epoch, std::time::SystemTime::now()))
    }

    fn rule(zone: &Arc<Zone>, burst: u64) -> LimitRule {
        LimitRule {
            zone: Arc::clone(zone),
            burst,
            delay: NODELAY,
            dry_run: false,
            count: None,
            settles: false,
            ban: None,
            elastic: None,
            soft: None,
        }
    }

    /// `per_ip` (20 burst) and `global` (a literal key), two zones of one epoch.
    fn per_ip_and_global() -> (Arc<Zone>, Arc<Zone>, Instant) {
        let epoch = Instant::now();
        let per_ip = zone(
            "per_ip",
            "$binary_remote_addr",
            Algorithm::LeakyBucket,
            0,
            epoch,
        );
        let global = zone("global", "everyone", Algorithm::LeakyBucket, 0, epoch);
        (per_ip, global, epoch)
    }

    /// 16 tasks each send `each` requests from 4 clients in turn at `now`, request `i` of
    /// task `t` through `rules(t, i)`; how many each client had admitted.
    async fn race_clients(
        each: usize,
        now: Instant,
        rules: impl Fn(usize, usize) -> Arc<Vec<LimitRule>> + Send + Sync + 'static,
    ) -> Vec<u64> {
        let per_client: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
        let rules = Arc::new(rules);
        let tasks: Vec<_> = (0..16)
            .map(|t| {
                let (rules, per_client) = (Arc::clone(&rules), Arc::clone(&per_client));
                tokio::spawn(async move {
                    let headers = HeaderMap::new();
                    for i in 0..each {
                        let client = (t + i) % 4;
                        let client_addr = IpAddr::from([10, 0, 0, client as u8]);
                        let view = Request::new(client_addr, &headers);
                        let outcome = decision::decide(&rules(t, i), &view, None, 1, now);
                        if !outcome.rejected() {
                            per_client[client].fetch_add(1, Ordering::Relaxed);
                        }
                        if i % 4 == 0 {
                            tokio::task::yield_now().await;
                        }
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        per_client
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect()
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn racing_tasks_over_two_zones_admit_exactly_the_tighter_bound() {
        let _shared = support::shared();
        let (per_ip, global, epoch) = per_ip_and_global();
        // Each client may have 21, all together 51: the global zone binds.
        let rules = Arc::new(vec![rule(&per_ip, 20), rule(&global, 50)]);
        let now = epoch + Duration::from_secs(1);
        let counts = race_clients(50, now, move |_, _| Arc::clone(&rules)).await;
        assert_eq!(counts.iter().sum::<u64>(), 51, "{counts:?}");
        assert!(counts.iter().all(|&c| c <= 21), "{counts:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn a_zone_alone_in_one_location_and_shared_in_another_admits_exactly_its_bound() {
        let _shared = support::shared();
        // Location A lists per_ip alone (decided without the shard's lock), B lists it after
        // a roomy global zone (checked, then charged, under the locks): the same keys race
        // through both.
        let (per_ip, global, epoch) = per_ip_and_global();
        let alone = Arc::new(vec![rule(&per_ip, 20)]);
        let shared = Arc::new(vec![rule(&global, 1_000_000), rule(&per_ip, 20)]);
        let now = epoch + Duration::from_secs(1);
        let pick = move |t: usize, i: usize| {
            let rules = if (t + i / 4).is_multiple_of(2) {
                &alone
            } else {
                &shared
            };
            Arc::clone(rules)
        };
        assert_eq!(race_clients(200, now, pick).await, [21; 4]);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn in_flight_counts_never_exceed_max_and_are_given_back() {
        let _shared = support::shared();
        let epoch = Instant::now();
        let conns = zone(
            "conns",
            "$binary_remote_addr",
            Algorithm::Concurrency,
            5,
            epoch,
        );
        let rules = Arc::new(vec![LimitRule {
            zone: Arc::clone(&conns),
            burst: 0,
            delay: NODELAY,
            dry_run: false,
            count: None,
            settles: false,
            ban: None,
            elastic: None,
            soft: None,
        }]);
        let holding = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (rules, holding, most) =
                    (Arc::clone(&rules), Arc::clone(&holding), Arc::clone(&most));
                tokio::spawn(async move {
                    let headers = HeaderMap::new();
                    let view = Request::new(IpAddr::from([10, 0, 0, 1]), &headers);
                    for _ in 0..20 {
                        let outcome = decision::decide(&rules, &view, None, 1, Instant::now());
                        if outcome.rejected() {
                            tokio::task::yield_now().await;
                            continue;
                        }
                        let now_holding = holding.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now_holding, Ordering::SeqCst);
                        tokio::task::yield_now().await;
                        holding.fetch_sub(1, Ordering::SeqCst);
                        drop(outcome);
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        let most = most.load(Ordering::SeqCst);
        assert!((1..=5).contains(&most), "{most}");
        assert_eq!(conns.stats().keys, 0, "every count was given back");
    }
}
