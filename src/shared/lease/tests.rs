//! The lease table's tests: spending, terms, expiry, fetches and their waiters, bounds.

use super::*;
use crate::limit::{Period, Rate, NODELAY};

const WINDOW: u64 = 1_000_000_000;

impl Leases {
    /// Leases held (or being fetched), expired or not.
    fn keys(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }
}

/// The bytes one lease takes in its map, its id included.
const ENTRY_BYTES: usize = std::mem::size_of::<(Id, Lease)>();

fn admitted(remaining: u64, reset: u64) -> Decision {
    Decision {
        verdict: Verdict::Pass,
        remaining,
        reset,
    }
}

/// Terms of 10r/s, `burst`, nodelay; `cost` units a request.
fn terms(burst: u64, cost: u64) -> Params {
    Params {
        rate: Rate::new(10, Period::Second).unwrap(),
        burst,
        delay: NODELAY,
        cost,
        max: 0,
    }
}

/// The terms most tests take: 10r/s, burst 10, nodelay, cost 1.
fn one() -> Params {
    terms(10, 1)
}

static ONE_TERMS: std::sync::LazyLock<Params> = std::sync::LazyLock::new(one);

fn add(leases: &Leases, key: &[u8], granted: u64, now: u64) {
    leases.add((key, &one()), granted, now, WINDOW, &admitted(0, 0));
}

fn spent(leases: &Leases, key: &[u8], now: u64, tries: usize) -> usize {
    (0..tries)
        .filter(|_| leases.spend(key, &one(), now).is_some())
        .count()
}

#[test]
fn leased_units_are_spent_then_redis_decides_again() {
    let leases = Leases::new(5);
    assert_eq!(leases.spend(b"k", &one(), 0), None, "nothing leased yet");
    leases.add((b"k", &one()), 4, 0, WINDOW, &admitted(10, 2_000));
    for left in (0..4).rev() {
        let spent = leases.spend(b"k", &one(), 100).expect("leased");
        assert_eq!(spent.verdict, Verdict::Pass);
        assert_eq!(spent.remaining, 10 + left);
        assert_eq!(spent.reset, 1_900);
    }
    assert_eq!(leases.spend(b"k", &one(), 200), None, "all spent");
    assert_eq!(leases.keys(), 0, "a spent lease is dropped");
}

#[test]
fn a_request_costing_more_than_is_left_goes_to_redis_and_leaves_the_rest() {
    let leases = Leases::new(5);
    add(&leases, b"k", 2, 0);
    assert_eq!(leases.spend(b"k", &Params { cost: 3, ..one() }, 1), None);
    assert!(leases
        .spend(b"k", &Params { cost: 2, ..one() }, 1)
        .is_some());
}

#[test]
fn a_lease_is_spent_only_under_the_terms_it_was_taken_under() {
    let leases = Leases::new(10);
    leases.add((b"k", &terms(50, 1)), 9, 0, WINDOW, &admitted(0, 0));
    let strict = [
        terms(0, 1),
        Params {
            delay: 0,
            ..terms(50, 1)
        },
        Params {
            rate: Rate::new(1, Period::Minute).unwrap(),
            ..terms(50, 1)
        },
    ];
    for other in strict {
        assert_eq!(leases.spend(b"k", &other, 1), None, "{other:?}");
    }
    assert!(
        leases.spend(b"k", &terms(50, 1), 1).is_some(),
        "the cost aside"
    );
    assert!(
        leases.spend(b"k", &terms(50, 2), 1).is_some(),
        "the cost aside"
    );
}

#[test]
fn unspent_units_expire_at_most_a_window_or_the_lifetime_after_they_were_taken() {
    let leases = Leases::new(5);
    add(&leases, b"k", 4, 0);
    assert_eq!(spent(&leases, b"k", WINDOW - 1, 1), 1);
    assert_eq!(spent(&leases, b"k", WINDOW, 1), 0);
    assert_eq!(leases.keys(), 0, "expired and dropped");
    // Expired units are not added to: a new lease starts from what it brings.
    add(&leases, b"j", 4, 0);
    add(&leases, b"j", 1, 2 * WINDOW);
    assert_eq!(spent(&leases, b"j", 2 * WINDOW, 5), 1);
    // A refill of a lease that still holds units keeps their expiry.
    add(&leases, b"r", 2, 0);
    add(&leases, b"r", 2, WINDOW / 2);
    assert_eq!(spent(&leases, b"r", WINDOW, 5), 0, "taken first at 0");
    // A minute's window: units live LIFETIME at most.
    leases.add((b"m", &one()), 4, 0, 60 * WINDOW, &admitted(0, 0));
    assert_eq!(spent(&leases, b"m", LIFETIME - 1, 1), 1);
    assert_eq!(spent(&leases, b"m", LIFETIME, 1), 0);
}

#[test]
fn racing_fetches_never_leave_a_key_more_than_the_lease() {
    let leases = Leases::new(5);
    add(&leases, b"k", 4, 0);
    add(&leases, b"k", 4, 0);
    assert_eq!(spent(&leases, b"k", 1, 10), 5);
}

#[test]
fn workers_fetching_at_once_leave_a_key_at_most_the_lease() {
    let leases = std::sync::Arc::new(Leases::new(100));
    for round in 0..50 {
        let start = std::sync::Arc::new(std::sync::Barrier::new(4));
        let threads: Vec<_> = (0..4)
            .map(|_| {
                let (leases, start) = (leases.clone(), start.clone());
                std::thread::spawn(move || {
                    start.wait();
                    add(&leases, b"k", 99, round);
                })
            })
            .collect();
        for thread in threads {
            thread.join().unwrap();
        }
        let spent = spent(&leases, b"k", round, 500);
        assert_eq!(spent, 100, "round {round}: four grants of 99, kept to 100");
    }
}

#[tokio::test]
async fn one_request_of_a_key_fetches_and_the_others_wait_for_its_lease() {
    let leases = Leases::new(10);
    let wait = Duration::from_secs(5);
    let First::Fetch(fetch) = leases.first(b"k", &one(), 0, wait).await else {
        panic!("the first request fetches");
    };
    assert_eq!(fetch.want(), 10, "nothing held: the whole lease");
    let waiting = async {
        let mut decided = Vec::new();
        for _ in 0..3 {
            decided.push(leases.first(b"k", &ONE_TERMS, 0, wait));
        }
        futures_join(decided).await
    };
    let fetched = async {
        tokio::task::yield_now().await;
        add(&leases, b"k", 9, 0);
        drop(fetch);
    };
    let (decided, ()) = tokio::join!(waiting, fetched);
    assert!(decided.iter().all(|first| matches!(first, First::Spent(_))));
    assert_eq!(
        spent(&leases, b"k", 0, 10),
        6,
        "9 leased, 3 spent by the waiters"
    );
}

#[tokio::test]
async fn a_fetch_asks_only_for_what_the_table_can_take() {
    let leases = Leases::new(10);
    add(&leases, b"k", 3, 0);
    let First::Fetch(fetch) = leases
        .first(b"k", &Params { cost: 4, ..one() }, 0, WAIT)
        .await
    else {
        panic!("3 held, 4 needed: a fetch");
    };
    assert_eq!(fetch.want(), 7);
}

const WAIT: Duration = Duration::from_secs(5);

#[tokio::test]
async fn a_fetch_that_brings_too_little_sends_the_waiters_to_redis() {
    let leases = Leases::new(10);
    let First::Fetch(fetch) = leases.first(b"k", &one(), 0, WAIT).await else {
        panic!("the first request fetches");
    };
    let waiter = leases.first(b"k", &ONE_TERMS, 0, WAIT);
    let (first, ()) = tokio::join!(waiter, async { drop(fetch) });
    assert!(matches!(first, First::Ask), "rejected or delayed: no lease");
    // The next request fetches again.
    assert!(matches!(
        leases.first(b"k", &one(), 0, WAIT).await,
        First::Fetch(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_fetch_that_fails_or_takes_too_long_fails_its_waiters_too() {
    let leases = Leases::new(10);
    let First::Fetch(mut fetch) = leases.first(b"k", &one(), 0, WAIT).await else {
        panic!("the first request fetches");
    };
    let short = Duration::from_millis(20);
    let late = leases.first(b"k", &one(), 0, short).await;
    assert!(
        matches!(late, First::Failed(Failure::Timeout)),
        "waited its timeout"
    );
    let waiter = leases.first(b"k", &ONE_TERMS, 0, WAIT);
    let failed = async {
        fetch.failed(Failure::Connection);
        drop(fetch);
    };
    let (first, ()) = tokio::join!(waiter, failed);
    assert!(matches!(first, First::Failed(Failure::Connection)));
    // A new request tries again.
    assert!(matches!(
        leases.first(b"k", &one(), 0, WAIT).await,
        First::Fetch(_)
    ));
}

#[tokio::test(start_paused = true)]
async fn a_stale_fetch_does_not_end_a_newer_fetch_of_its_key() {
    let leases = Leases::new(10);
    let First::Fetch(old) = leases.first(b"k", &one(), 0, WAIT).await else {
        panic!("fetches");
    };
    // Its entry goes (as an eviction would drop it), and a newer fetch starts.
    let id = leases.id(b"k", &one());
    lock(leases.shard(id)).remove(&id);
    let First::Fetch(new) = leases.first(b"k", &one(), 0, WAIT).await else {
        panic!("fetches again");
    };
    drop(old);
    let short = Duration::from_millis(20);
    assert!(
        matches!(leases.first(b"k", &one(), 0, short).await, First::Failed(_)),
        "still waits for the newer fetch"
    );
    drop(new);
}

/// Awaits every future, in order.
async fn futures_join<F: std::future::Future>(all: Vec<F>) -> Vec<F::Output> {
    let mut all: Vec<_> = all.into_iter().map(Box::pin).collect();
    let mut out = Vec::new();
    for f in all.iter_mut() {
        out.push(f.await);
    }
    out
}

#[test]
fn the_table_is_bounded_in_keys_and_bytes_whatever_the_keys() {
    let leases = Leases::new(3);
    let mut key = vec![b'x'; 2 * 1024];
    for i in 0..(3 * KEYS) as u64 {
        key[..8].copy_from_slice(&i.to_be_bytes());
        add(&leases, &key, 2, 0);
    }
    assert!(leases.keys() <= KEYS, "{} keys", leases.keys());
    for shard in leases.shards.iter() {
        let shard = lock(shard);
        assert!(shard.len() <= KEYS / SHARDS);
    }
    // The map's own slack included: its capacity, not the keys' length.
    let bytes: usize = (leases.shards.iter())
        .map(|shard| lock(shard).capacity() * ENTRY_BYTES)
        .sum();
    const { assert!(ENTRY_BYTES <= 64) };
    assert!(bytes <= 8 << 20, "{bytes} bytes for keys of 2 KiB");
    // Expired leases make room first: a new key then finds its lease.
    add(&leases, b"late", 2, 2 * WINDOW);
    assert_eq!(spent(&leases, b"late", 2 * WINDOW, 1), 1);
}

#[test]
fn a_full_shard_drops_a_few_leases_with_the_fewest_units_not_all() {
    let leases = Leases::new(100);
    for i in 0..(2 * KEYS) as u64 {
        add(&leases, &i.to_be_bytes(), 50, 0);
    }
    // A key holding many units outlives a spray of new keys holding few.
    add(&leases, b"busy", 90, 0);
    for i in 0..(KEYS / 2) as u64 {
        add(&leases, &(u64::MAX - i).to_be_bytes(), 1, 0);
    }
    assert_eq!(spent(&leases, b"busy", 1, 100), 90);
    assert!(
        leases.keys() > KEYS - SHARDS * EVICT,
        "{} left",
        leases.keys()
    );
}
