//! Micro-benchmarks of the limiter's hot path, against a naive
//! `Mutex<HashMap>` baseline.
//!
//! ```text
//! cargo bench --bench limiter                    # everything, about 2 minutes
//! cargo bench --bench limiter -- existing_key    # one group (a criterion filter)
//! ```
//!
//! A decision is what one zone costs one request: `store.hash(key)` and `Store::decide`
//! (for a stored key: a lookup without the shard's lock, then check and charge under the
//! key's node lock). `now` is passed in, as production reads
//! the clock once per request, and advances slowly ([`Clock`]) so that buckets drain about
//! as fast as the benchmark fills them. Keys are IPv4 addresses (4 bytes, as
//! `$binary_remote_addr`) in a store holding [`PRESENT`] keys, so its index has a
//! realistic size; a benchmark hits either [`HOT`] keys in turn or one key.
//!
//! Groups:
//! - `existing_key`: one decision on a stored key, for every algorithm, admitting
//!   (nodelay, huge burst: the common path) and, for `leaky_bucket`, rejecting;
//! - `parts`: a decision's pieces alone (hash, lock and unlock, arithmetic), to see where
//!   its time goes;
//! - `zone_decide`: the same through `decision::decide`, the gateway's whole per-request limit
//!   step (key template, plans, outcome), keyed by address and by an API key header;
//! - `new_key`: keys never seen before, into a store with room, and into a full one that
//!   evicts (by force) or expires (drained keys);
//! - `threads`: one and two threads on distinct keys and on one shared key, for the store
//!   and for the baseline; and, to see what sharing costs, with each thread's keys in its
//!   own half of the shards, and on a store of each thread's own (nothing shared: the most
//!   this machine allows). Time is per decision *per thread*; the throughput line is the
//!   aggregate, so `2 × t(1 thread) / t(2 threads)` is the scaling. `threads/scaling/…`
//!   then prints that scaling measured in back-to-back pairs (the robust figure);
//! - `baseline`: the `Mutex<HashMap>` running the same leaky-bucket arithmetic.
//!
//! Each benchmark counts the decisions that went the unexpected way and panics if any did,
//! so a figure always measures the path it is named after.

use std::collections::HashMap;
use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::thread;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkId, Criterion, Throughput};
use http::{HeaderMap, HeaderValue};
use tollgate::limit::concurrency::{self, Concurrency};
use tollgate::limit::decision::{self, LimitRule};
use tollgate::limit::fixed_window::FixedWindow;
use tollgate::limit::key::Template;
use tollgate::limit::leaky_bucket::{self, LeakyBucket};
use tollgate::limit::sliding_log::SlidingLog;
use tollgate::limit::sliding_window::SlidingWindow;
use tollgate::limit::store::Store;
use tollgate::limit::token_bucket::TokenBucket;
use tollgate::limit::zone::{Spec, Zone};
use tollgate::limit::{Algorithm, Decision, Limiter, Params, Period, Rate, NANOS_PER_MS, NODELAY};
use tollgate::vars::{Request, VarText};

/// The zone's `size` for the existing-key benchmarks: room for every key of every
/// algorithm without eviction.
const ZONE_BYTES: usize = 32 << 20;
/// Keys stored before measuring.
const PRESENT: usize = 100_000;
/// Keys a benchmark rotates over (a power of two).
const HOT: usize = 4096;
/// The most the config accepts (`rate`, `burst`, `max`: 1 to 1,000,000).
const MOST: u64 = 1_000_000;

/// The `n`-th benchmark address, 10.0.0.0 upwards, as `$binary_remote_addr` renders it.
fn ipv4(n: usize) -> [u8; 4] {
    (0x0a00_0000 + n as u32).to_be_bytes()
}

fn rate(count: u64, period: Period) -> Rate {
    Rate::new(count, period).expect("non-zero")
}

/// Everything admitted: 1,000,000 r/s, burst 1,000,000, nodelay, max 1,000,000 in flight.
fn admit_all() -> Params {
    Params {
        burst: MOST,
        delay: NODELAY,
        max: MOST,
        ..Params::new(rate(MOST, Period::Second))
    }
}

/// [`admit_all`] with a burst no benchmark can use up (above the config's most). Two threads
/// on one key each keep their own clock, and one may run a million decisions behind the
/// other, during which the key drains nothing.
fn admit_all_racing() -> Params {
    Params {
        burst: 1 << 40,
        ..admit_all()
    }
}

/// `1r/s` nodelay, no burst: a key charged once is rejected for the next second.
fn one_per_second() -> Params {
    Params {
        delay: NODELAY,
        ..Params::new(rate(1, Period::Second))
    }
}

/// `now` as the gateway passes it, advancing `step` ns every `every` decisions: at 1 ms per
/// 256 decisions a 1,000,000 r/s bucket drains faster than even two threads on one key fill
/// it, so the admitting benchmarks stay on the admitting path however long they run.
#[derive(Clone, Copy)]
struct Clock {
    now: u64,
    ticks: u32,
    every: u32,
    step: u64,
}

impl Clock {
    const fn new(every: u32, step: u64) -> Clock {
        Clock {
            now: 0,
            ticks: 0,
            every,
            step,
        }
    }

    /// 1 ms per 256 decisions.
    const fn slow() -> Clock {
        Clock::new(256, NANOS_PER_MS)
    }

    /// Never moves.
    const fn stopped() -> Clock {
        Clock::new(u32::MAX, 0)
    }

    #[inline]
    fn tick(&mut self) -> u64 {
        self.ticks += 1;
        if self.ticks == self.every {
            self.ticks = 0;
            self.now += self.step;
        }
        self.now
    }
}

/// One zone's decision for one request, as `Locked::decide` documents it.
#[inline]
fn decide<A: Limiter>(store: &Store<A>, key: &[u8], now: u64, p: &Params) -> Decision {
    let hash = store.hash(key);
    store.decide(hash, key, now, p, p)
}

/// A concurrency request that ends at once: taken, then given back as `zone`'s in-flight
/// guard does (a key whose count falls to 0 is forgotten).
#[inline]
fn enter_and_leave(store: &Store<Concurrency>, key: &[u8], p: &Params) -> Decision {
    let hash = store.hash(key);
    let decision = store.decide(hash, key, 0, p, p);
    if decision.admitted() {
        let mut locked = store.lock(hash);
        let drained = match locked.get(hash, key) {
            Some(mut count) => {
                concurrency::release(&mut count, p.cost);
                *count == 0
            }
            None => false,
        };
        if drained {
            locked.remove(hash, key);
        }
    }
    decision
}

/// A `ZONE_BYTES` store holding the first `PRESENT` addresses, each charged once at 0.
fn filled<A: Limiter>(p: &Params) -> Store<A> {
    let store = Store::new(ZONE_BYTES);
    for n in 0..PRESENT {
        decide(&store, &ipv4(n), 0, p);
    }
    let stats = store.stats();
    assert_eq!(
        stats.keys, PRESENT,
        "the store must hold every key: {stats:?}"
    );
    store
}

fn hot_keys(offset: usize) -> Vec<[u8; 4]> {
    (offset..offset + HOT).map(ipv4).collect()
}

/// Benchmarks decisions on stored keys, HOT of them in turn and one alone.
fn on_stored<A: Limiter>(c: &mut Criterion, name: &str, p: Params, clock: Clock, admit: bool) {
    let store = filled::<A>(&p);
    let keys = hot_keys(0);
    let mut group = c.benchmark_group("existing_key");
    group.throughput(Throughput::Elements(1));
    // One clock for both: a key's time must never go back.
    let mut clock = clock;
    for (label, mask) in [("hot4096", HOT - 1), ("one_key", 0)] {
        let (mut i, mut wrong) = (0usize, 0u64);
        group.bench_function(BenchmarkId::new(name, label), |b| {
            b.iter(|| {
                let key = &keys[i & mask];
                i = i.wrapping_add(1);
                let d = decide(&store, key, clock.tick(), &p);
                wrong += u64::from(d.admitted() != admit);
                black_box(d)
            })
        });
        assert_eq!(wrong, 0, "{name}/{label}: decisions off the measured path");
    }
    group.finish();
}

fn existing_key(c: &mut Criterion) {
    let pass = admit_all();
    on_stored::<LeakyBucket>(c, "leaky_bucket", pass, Clock::slow(), true);
    on_stored::<TokenBucket>(c, "token_bucket", pass, Clock::slow(), true);
    on_stored::<FixedWindow>(c, "fixed_window", pass, Clock::slow(), true);
    on_stored::<SlidingWindow>(c, "sliding_window", pass, Clock::slow(), true);
    // A log holds an entry per distinct `now` in the last second: at 100 ms a step a key
    // holds at most 10, the cost of a key at a modest rate.
    let tenth = Clock::new(256, 100 * NANOS_PER_MS);
    on_stored::<SlidingLog>(c, "sliding_log", pass, tenth, true);
    on_stored::<LeakyBucket>(
        c,
        "leaky_bucket_reject",
        one_per_second(),
        Clock::stopped(),
        false,
    );
    on_concurrency(c, pass);
}

/// `concurrency`: take and give back one unit, on keys that already have one request in
/// flight (their count goes 1 → 2 → 1) and on idle keys (stored, then forgotten, each time).
fn on_concurrency(c: &mut Criterion, p: Params) {
    let busy = filled::<Concurrency>(&p);
    let idle = Store::<Concurrency>::new(ZONE_BYTES);
    for n in 0..PRESENT {
        decide(&idle, &ipv4(n), 0, &p);
    }
    let keys = hot_keys(0);
    let idle_keys = hot_keys(PRESENT);
    let mut group = c.benchmark_group("existing_key");
    group.throughput(Throughput::Elements(1));
    for (label, store, keys) in [
        ("concurrency/hot4096", &busy, &keys),
        ("concurrency_idle_key/hot4096", &idle, &idle_keys),
    ] {
        let (mut i, mut wrong) = (0usize, 0u64);
        group.bench_function(label, |b| {
            b.iter(|| {
                let d = enter_and_leave(store, &keys[i & (HOT - 1)], &p);
                i = i.wrapping_add(1);
                wrong += u64::from(!d.admitted());
                black_box(d)
            })
        });
        assert_eq!(wrong, 0, "{label}: rejected");
    }
    assert_eq!(busy.stats().keys, PRESENT, "busy keys must stay stored");
    assert_eq!(idle.stats().keys, PRESENT, "idle keys must come and go");
    group.finish();
}

/// The key material of one benchmark request.
fn view((client, headers): &(IpAddr, HeaderMap)) -> Request<'_> {
    Request {
        host: Some("example.com"),
        ..Request::new(*client, headers)
    }
}

/// The pieces of a decision, each alone: the key's hash, locking and unlocking its shard,
/// and the arithmetic (`check`, then `charge` if admitted, on a state outside any store).
fn parts(c: &mut Criterion) {
    let p = admit_all();
    let store = filled::<LeakyBucket>(&p);
    let keys = hot_keys(0);
    let mut group = c.benchmark_group("parts");
    group.throughput(Throughput::Elements(1));
    let mut i = 0usize;
    group.bench_function("hash_ipv4", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            store.hash(black_box(&keys[i & (HOT - 1)]))
        })
    });
    let hashes: Vec<u64> = keys.iter().map(|k| store.hash(k)).collect();
    group.bench_function("lock_unlock", |b| {
        b.iter(|| {
            i = i.wrapping_add(1);
            drop(black_box(store.lock(hashes[i & (HOT - 1)])))
        })
    });
    arithmetic::<LeakyBucket>(&mut group, "leaky_bucket", &p);
    arithmetic::<TokenBucket>(&mut group, "token_bucket", &p);
    group.finish();
}

fn arithmetic<A: Limiter>(
    group: &mut criterion::BenchmarkGroup<'_, criterion::measurement::WallTime>,
    name: &str,
    p: &Params,
) {
    let (mut state, mut clock) = (A::fresh(0), Clock::slow());
    group.bench_function(BenchmarkId::new("check_charge", name), |b| {
        b.iter(|| {
            let now = clock.tick();
            let d = A::check(black_box(&state), now, p);
            if d.admitted() {
                A::charge(&mut state, now, p);
            }
            black_box(d)
        })
    });
}

/// A request as the pipeline sees it: a client address and a few ordinary headers.
fn headers(api_key: Option<&str>) -> HeaderMap {
    let mut h = HeaderMap::new();
    h.insert(http::header::HOST, HeaderValue::from_static("example.com"));
    h.insert(http::header::USER_AGENT, HeaderValue::from_static("wrk"));
    h.insert(http::header::ACCEPT, HeaderValue::from_static("*/*"));
    if let Some(key) = api_key {
        h.insert("x-api-key", HeaderValue::from_str(key).expect("ascii"));
    }
    h
}

fn zone_decide(c: &mut Criterion) {
    let epoch = Instant::now();
    let mut group = c.benchmark_group("zone_decide");
    group.throughput(Throughput::Elements(1));
    for (label, key) in [
        ("binary_remote_addr", "$binary_remote_addr"),
        ("http_x_api_key", "$http_x_api_key"),
    ] {
        let by_header = key.starts_with("$http_");
        let zone = Zone::new(
            Spec {
                name: "k".into(),
                template: Template::new(VarText::parse(key).expect("a key"), 32, 128),
                algorithm: Algorithm::LeakyBucket,
                rate: rate(MOST, Period::Second),
                plan_rates: Vec::new(),
                max: 0,
                size: ZONE_BYTES,
                redis: None,
                adaptive: None,
                soft: None,
                plan_from: None,
            },
            epoch,
            std::time::SystemTime::now(),
        );
        let rules = [LimitRule {
            zone: Arc::new(zone),
            burst: MOST,
            delay: NODELAY,
            dry_run: false,
            count: None,
            settles: false,
            ban: None,
            elastic: None,
            soft: None,
        }];
        // 32-byte API keys (stored as digests) or addresses; one request each.
        let requests: Vec<(IpAddr, HeaderMap)> = (0..PRESENT)
            .map(|n| {
                let api_key = format!("key-{n:028}");
                let client = IpAddr::V4(Ipv4Addr::from(ipv4(n)));
                (client, headers(by_header.then_some(api_key.as_str())))
            })
            .collect();
        for request in &requests {
            decision::decide(&rules, &view(request), None, 1, epoch);
        }
        assert_eq!(rules[0].zone.stats().keys, PRESENT);
        let (mut clock, mut i, mut wrong) = (Clock::slow(), 0usize, 0u64);
        group.bench_function(BenchmarkId::new("leaky_bucket", label), |b| {
            b.iter(|| {
                let now = epoch + Duration::from_nanos(clock.tick());
                let outcome =
                    decision::decide(&rules, &view(&requests[i & (HOT - 1)]), None, 1, now);
                i = i.wrapping_add(1);
                wrong +=
                    u64::from(outcome.status != Some(tollgate::limit::outcome::Status::Passed));
                black_box(outcome)
            })
        });
        assert_eq!(wrong, 0, "zone_decide/{label}: not passed");
    }
    group.finish();
}

/// Inserts keys never seen before, `iters` of them, timed in chunks; `between` runs
/// untimed before each chunk (to replace a store about to fill, say).
fn insert_new<A: Limiter>(
    store: &mut Store<A>,
    next: &mut usize,
    clock: &mut Clock,
    p: &Params,
    iters: u64,
    mut between: impl FnMut(&mut Store<A>, &mut usize),
) -> Duration {
    const CHUNK: u64 = 50_000;
    let (mut left, mut took, mut wrong) = (iters, Duration::ZERO, 0u64);
    while left > 0 {
        between(store, next);
        let n = left.min(CHUNK);
        let start = Instant::now();
        for _ in 0..n {
            let key = (*next as u32).to_be_bytes();
            *next += 1;
            wrong += u64::from(!decide(store, &key, clock.tick(), p).admitted());
        }
        took += start.elapsed();
        left -= n;
    }
    assert_eq!(wrong, 0, "new keys rejected");
    took
}

fn new_key(c: &mut Criterion) {
    let pass = admit_all();
    let mut group = c.benchmark_group("new_key");
    group.throughput(Throughput::Elements(1));

    // Room: a 64 MiB store (about 1.3 million keys) holding PRESENT keys; replaced, untimed,
    // before it is 3/4 full, so no insert evicts.
    const ROOMY: usize = 64 << 20;
    let fresh = || {
        let store = Store::<LeakyBucket>::new(ROOMY);
        for n in 0..PRESENT {
            decide(&store, &ipv4(n), 0, &pass);
        }
        store
    };
    let (mut store, mut next, mut clock) = (fresh(), PRESENT, Clock::slow());
    let room = store.max_keys() * 3 / 4;
    group.bench_function("leaky_bucket/room", |b| {
        b.iter_custom(|iters| {
            insert_new(
                &mut store,
                &mut next,
                &mut clock,
                &pass,
                iters,
                |s, next| {
                    if s.stats().keys + 50_000 > room {
                        *s = fresh();
                        *next = PRESENT;
                    }
                },
            )
        })
    });
    drop(store);

    // Full: a 10 MiB store ("10m", nginx's usual size) filled to its last key. At 1r/m and
    // a stopped clock no key drains, so every insert evicts by force; at 1,000,000 r/s and
    // 1 ms per insert every older key has drained, so every insert drops an expired one.
    let slow_keys = Params {
        burst: MOST,
        delay: NODELAY,
        ..Params::new(rate(1, Period::Minute))
    };
    for (label, p, clock) in [
        ("leaky_bucket/evict", slow_keys, Clock::stopped()),
        (
            "leaky_bucket/expire_drained",
            pass,
            Clock::new(1, NANOS_PER_MS),
        ),
    ] {
        let mut store = Store::<LeakyBucket>::new(10 << 20);
        let (mut next, mut clock) = (0, clock);
        let twice_full = store.max_keys() as u64 * 2;
        insert_new(&mut store, &mut next, &mut clock, &p, twice_full, |_, _| {});
        let (before, first) = (store.stats(), next);
        group.bench_function(label, |b| {
            b.iter_custom(|iters| {
                insert_new(&mut store, &mut next, &mut clock, &p, iters, |_, _| {})
            })
        });
        let after = store.stats();
        let inserted = (next - first) as u64;
        let evicted = after.evictions - before.evictions;
        let expired = after.expired - before.expired;
        eprintln!("{label}: {inserted} inserted, {evicted} evicted, {expired} expired");
        let (named, other) = if label.ends_with("evict") {
            (evicted, expired)
        } else {
            (expired, evicted)
        };
        // Nearly every insert takes the named path (a shard may still have had room).
        let on_path = inserted < 1000 || named * 100 >= inserted * 99;
        assert!(on_path && other == 0, "{label}: not the path named");
    }
    group.finish();
}

/// `iters` decisions on thread `t`: `work(t, iters)`.
type Work<'a> = dyn Fn(usize, u64) + Sync + 'a;

/// Runs `work(thread, iters)` on `threads` threads started together; the slowest thread's
/// time (spawning excluded).
fn on_threads(threads: usize, iters: u64, work: &Work<'_>) -> Duration {
    let barrier = Barrier::new(threads);
    thread::scope(|s| {
        let handles: Vec<_> = (0..threads)
            .map(|t| {
                let barrier = &barrier;
                s.spawn(move || {
                    barrier.wait();
                    let start = Instant::now();
                    work(t, iters);
                    start.elapsed()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("bench thread"))
            .max()
            .unwrap_or_default()
    })
}

/// The naive baseline: one mutex over a std `HashMap` (SipHash-1-3, as the store).
type Baseline = Mutex<HashMap<[u8; 4], leaky_bucket::State>>;

fn baseline_decide(map: &Baseline, key: [u8; 4], now: u64, p: &Params) -> Decision {
    let mut map = map.lock().unwrap_or_else(|e| e.into_inner());
    let state = map.entry(key).or_insert_with(|| LeakyBucket::fresh(now));
    let d = LeakyBucket::check(state, now, p);
    if d.admitted() {
        LeakyBucket::charge(state, now, p);
    }
    d
}

fn baseline_filled(p: &Params) -> Baseline {
    let map = Mutex::new(HashMap::new());
    for n in 0..PRESENT {
        baseline_decide(&map, ipv4(n), 0, p);
    }
    map
}

fn baseline(c: &mut Criterion) {
    let p = admit_all();
    let map = baseline_filled(&p);
    let keys = hot_keys(0);
    let mut group = c.benchmark_group("baseline");
    group.throughput(Throughput::Elements(1));
    let mut clock = Clock::slow();
    for (label, mask) in [("hot4096", HOT - 1), ("one_key", 0)] {
        let (mut i, mut wrong) = (0usize, 0u64);
        group.bench_function(BenchmarkId::new("mutex_hashmap", label), |b| {
            b.iter(|| {
                let d = baseline_decide(&map, keys[i & mask], clock.tick(), &p);
                i = i.wrapping_add(1);
                wrong += u64::from(!d.admitted());
                black_box(d)
            })
        });
        assert_eq!(wrong, 0, "baseline/{label}: rejected");
    }
    group.finish();
}

/// Where a thread's decisions go.
#[derive(Clone, Copy)]
enum Target {
    /// The one store every thread shares.
    Store,
    /// A store of the thread's own, as full as the shared one: nothing is shared, so this
    /// is as well as two threads can scale on this machine.
    Private,
    /// The one `Mutex<HashMap>` every thread shares.
    Naive,
}

/// Decisions on `HOT` keys per thread, thread `t`'s own, or on one key for all threads.
/// Each thread keeps its clock across samples, and starts it no earlier than any clock has
/// reached, so that no bucket sees time go back.
fn threads(c: &mut Criterion) {
    let p = admit_all_racing();
    let store = filled::<LeakyBucket>(&p);
    let private: Vec<Store<LeakyBucket>> = (0..2).map(|_| filled(&p)).collect();
    let map = baseline_filled(&p);
    let keys: Vec<Vec<[u8; 4]>> = (0..2).map(|t| hot_keys(t * HOT)).collect();
    let shared_key = vec![ipv4(2 * HOT); HOT];
    // Thread t's keys among those of the shards `s` with `s % 2 == t`: distinct keys that
    // never share a shard (a diagnostic: what sharing shards costs).
    let split: Vec<Vec<[u8; 4]>> = (0..2)
        .map(|t| {
            let own_half = |k: &[u8; 4]| store.shard_of(store.hash(k)) % 2 == t;
            (0..PRESENT).map(ipv4).filter(own_half).take(HOT).collect()
        })
        .collect();
    let clocks: Vec<Mutex<Clock>> = (0..10).map(|_| Mutex::new(Clock::slow())).collect();
    let latest = AtomicU64::new(0);
    let run = |case: usize, t: usize, iters: u64, keys: &[[u8; 4]], target: Target| {
        let slot = &clocks[case * 2 + t];
        let mut clock = *slot.lock().expect("clock");
        clock.now = clock.now.max(latest.load(Ordering::Relaxed));
        for i in 0..iters as usize {
            let key = keys[i & (HOT - 1)];
            let d = match target {
                Target::Store => decide(&store, &key, clock.tick(), &p),
                Target::Private => decide(&private[t], &key, clock.tick(), &p),
                Target::Naive => baseline_decide(&map, key, clock.tick(), &p),
            };
            assert!(black_box(d).admitted(), "rejected: {d:?}");
        }
        latest.fetch_max(clock.now, Ordering::Relaxed);
        *slot.lock().expect("clock") = clock;
    };
    let distinct = |t: usize, iters: u64| run(0, t, iters, &keys[t], Target::Store);
    let shared = |t: usize, iters: u64| run(1, t, iters, &shared_key, Target::Store);
    let own = |t: usize, iters: u64| run(2, t, iters, &keys[t], Target::Private);
    let naive = |t: usize, iters: u64| run(3, t, iters, &keys[t], Target::Naive);
    let halves = |t: usize, iters: u64| run(4, t, iters, &split[t], Target::Store);
    let cases: [(&str, &Work<'_>); 5] = [
        ("store_distinct", &distinct),
        ("store_shared_key", &shared),
        ("store_private", &own),
        ("store_split_shards", &halves),
        ("mutex_hashmap_distinct", &naive),
    ];
    let mut group = c.benchmark_group("threads");
    for (label, work) in cases {
        for n in [1, 2] {
            group.throughput(Throughput::Elements(n as u64));
            group.bench_function(BenchmarkId::new(label, n), |b| {
                b.iter_custom(|iters| on_threads(n, iters, work))
            });
        }
    }
    group.finish();
    for (label, work) in cases {
        if selected(&format!("threads/scaling/{label}")) {
            paired_scaling(label, work);
        }
    }
}

/// Whether the command line's filter (criterion's: a regex; none selects all) selects `id`.
fn selected(id: &str) -> bool {
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|arg| !arg.starts_with('-'))
        .collect();
    filters.is_empty()
        || filters
            .iter()
            .any(|f| regex::Regex::new(f).is_ok_and(|re| re.is_match(id)))
}

/// Paired rounds of [`paired_scaling`].
const SCALING_ROUNDS: usize = 21;
/// Decisions per thread in each half of a round (tens of milliseconds).
const SCALING_ITERS: u64 = 500_000;

/// Scaling measured in pairs, printed: each round times [`SCALING_ITERS`] decisions on
/// one thread, then as many on each of two threads, back to back, so that whatever else
/// the (shared, 2-core) machine does meanwhile weighs on both halves of a pair alike. The
/// criterion figures above time one and two threads seconds apart, and on this machine
/// their ratio drifts by ±30% from run to run; the median of paired ratios does not.
fn paired_scaling(label: &str, work: &Work<'_>) {
    let mut ratios: Vec<f64> = (0..SCALING_ROUNDS)
        .map(|_| {
            let one = on_threads(1, SCALING_ITERS, work);
            let two = on_threads(2, SCALING_ITERS, work);
            2.0 * one.as_secs_f64() / two.as_secs_f64()
        })
        .collect();
    ratios.sort_by(f64::total_cmp);
    eprintln!(
        "threads/scaling/{label}: {:.2}x median of {SCALING_ROUNDS} paired rounds \
         (quartiles {:.2}x..{:.2}x)",
        ratios[SCALING_ROUNDS / 2],
        ratios[SCALING_ROUNDS / 4],
        ratios[SCALING_ROUNDS * 3 / 4],
    );
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3));
    targets = existing_key, parts, zone_decide, new_key, threads, baseline
}
criterion_main!(benches);
