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

mod through_zones {
    //! The same through `zone::decide`, as the gateway calls it: tasks on a multi-threaded
    //! runtime, several zones per request.

    use std::net::IpAddr;
    use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use http::{HeaderMap, Method};
    use tollgate::limit::key::{Part, RequestView, Template};
    use tollgate::limit::zone::{self, Kind, Rule, Spec, Zone};
    use tollgate::limit::{Period, Rate, NODELAY};

    fn zone(name: &str, parts: Vec<Part>, kind: Kind, max: u64, epoch: Instant) -> Arc<Zone> {
        let spec = Spec {
            name: name.to_owned(),
            template: Template::new(parts, 32, 128),
            kind,
            rate: Rate::new(1, Period::Minute).expect("non-zero"),
            plan_rates: Vec::new(),
            max,
            size: 1 << 20,
        };
        Arc::new(Zone::new(spec, epoch))
    }

    fn rule(zone: &Arc<Zone>, burst: u64) -> Rule {
        Rule {
            zone: Arc::clone(zone),
            burst,
            delay: NODELAY,
            dry_run: false,
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn racing_tasks_over_two_zones_admit_exactly_the_tighter_bound() {
        let epoch = Instant::now();
        let per_ip = zone(
            "per_ip",
            vec![Part::BinaryRemoteAddr],
            Kind::LeakyBucket,
            0,
            epoch,
        );
        let literal = Part::Literal(Box::from(&b"everyone"[..]));
        let global = zone("global", vec![literal], Kind::LeakyBucket, 0, epoch);
        // Each client may have 21, all together 51: the global zone binds.
        let rules = Arc::new(vec![rule(&per_ip, 20), rule(&global, 50)]);
        let now = epoch + Duration::from_secs(1);
        let per_client: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
        let tasks: Vec<_> = (0..16)
            .map(|t| {
                let (rules, per_client) = (Arc::clone(&rules), Arc::clone(&per_client));
                tokio::spawn(async move {
                    let headers = HeaderMap::new();
                    for i in 0..50 {
                        let client = (t + i) % 4;
                        let view = RequestView {
                            client: IpAddr::from([10, 0, 0, client as u8]),
                            method: &Method::GET,
                            path: "/",
                            query: None,
                            headers: &headers,
                            host: None,
                        };
                        let outcome = zone::decide(&rules, &view, None, 1, now);
                        if !outcome.rejected() {
                            per_client[client].fetch_add(1, Ordering::Relaxed);
                        }
                        tokio::task::yield_now().await;
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
        let counts: Vec<u64> = per_client
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .collect();
        assert_eq!(counts.iter().sum::<u64>(), 51, "{counts:?}");
        assert!(counts.iter().all(|&c| c <= 21), "{counts:?}");
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
    async fn in_flight_counts_never_exceed_max_and_are_given_back() {
        let epoch = Instant::now();
        let conns = zone(
            "conns",
            vec![Part::BinaryRemoteAddr],
            Kind::Concurrency,
            5,
            epoch,
        );
        let rules = Arc::new(vec![Rule {
            zone: Arc::clone(&conns),
            burst: 0,
            delay: NODELAY,
            dry_run: false,
        }]);
        let holding = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let tasks: Vec<_> = (0..32)
            .map(|_| {
                let (rules, holding, most) =
                    (Arc::clone(&rules), Arc::clone(&holding), Arc::clone(&most));
                tokio::spawn(async move {
                    let headers = HeaderMap::new();
                    let view = RequestView {
                        client: IpAddr::from([10, 0, 0, 1]),
                        method: &Method::GET,
                        path: "/",
                        query: None,
                        headers: &headers,
                        host: None,
                    };
                    for _ in 0..20 {
                        let outcome = zone::decide(&rules, &view, None, 1, Instant::now());
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
