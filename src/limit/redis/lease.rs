//! Leases (`lease = N` on a Redis zone, "Zones in Redis" in docs/config.md): an instance
//! takes up to N units of a key from Redis in one call and spends them on the key's next
//! requests without asking Redis.
//!
//! The units are charged in Redis when they are taken (the script's `want`), and only
//! when the request that takes them is admitted without delay and they fit now without
//! delay, so a lease never lets a key past its limit in Redis. What a lease can add is
//! timing: units taken now are spent a little later. The table never holds more than N
//! units of a key (the surplus of two workers fetching at once is dropped), so at any
//! moment an instance holds at most N units Redis already counted; over any window the
//! instances admit at most the zone's limit plus N × instances. Unspent units expire one
//! window of the zone's rate after they were taken, and are not given back: that can
//! only admit less.
//!
//! One fetch at a time per key: while a request of a key is asking Redis for a lease,
//! the key's other requests wait for that answer (at most the backend's `timeout`, and
//! they would have waited as long for their own call) and then spend from it; if it
//! brought nothing they ask Redis themselves. Without this, every request of a busy key
//! arriving during the round trip would fetch a lease too, each costing a call, and the
//! surplus beyond N would be dropped unspent.
//!
//! Memory: at most [`KEYS`] keys per zone, in [`SHARDS`] maps behind their own locks
//! (so workers spending different keys seldom wait for each other). A full shard drops
//! its expired leases, and if none has expired, all of them: the keys then ask Redis
//! again, which only costs calls.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

use super::super::{Decision, Verdict};

/// Keys a zone holds leases for.
pub const KEYS: usize = 64 * 1024;
/// Maps the keys are spread over, each behind its own lock.
pub const SHARDS: usize = 16;

/// A zone's leases: key → units left.
pub struct Leases {
    /// `lease`: the most units a key may hold.
    most: u64,
    shards: Box<[Mutex<Shard>]>,
    spread: RandomState,
}

/// Some of a zone's keys and their leases.
type Shard = HashMap<Box<[u8]>, Lease>;

#[derive(Clone, Debug)]
struct Lease {
    left: u64,
    /// Zone-clock nanosecond at which unspent units expire.
    until: u64,
    /// What Redis said when the units were taken: the key's remaining units beside the
    /// lease, and when its state would have drained (zone clock), for the rate-limit
    /// headers of the requests that spend them.
    remaining: u64,
    reset_at: u64,
    /// A request of the key is asking Redis for a lease: others wait for it here.
    fetching: Option<Arc<Notify>>,
}

/// What a request of a leased zone does first ([`Leases::first`]).
pub enum First<'a> {
    /// It was decided by leased units.
    Spent(Decision),
    /// It asks Redis for a lease, the only one of its key to do so until this is dropped.
    Fetch(Fetch<'a>),
    /// It asks Redis as any request (another's fetch brought nothing for it).
    Ask,
}

/// The one fetch under way for a key: dropping it (after [`Leases::add`], or when the
/// request gave up) lets the key's waiting requests look at the lease again.
pub struct Fetch<'a> {
    leases: &'a Leases,
    key: Box<[u8]>,
}

impl Drop for Fetch<'_> {
    fn drop(&mut self) {
        let mut shard = lock(self.leases.shard(&self.key));
        let lease = shard.get_mut(&self.key);
        if let Some(notify) = lease.and_then(|lease| lease.fetching.take()) {
            notify.notify_waiters();
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Leases {
    /// Leases of at most `most` units per key.
    pub fn new(most: u64) -> Leases {
        Leases {
            most,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            spread: RandomState::new(),
        }
    }

    /// `lease`: what a decision asks Redis for, the request's own units included.
    pub fn most(&self) -> u64 {
        self.most
    }

    fn shard(&self, key: &[u8]) -> &Mutex<Shard> {
        let at = self.spread.hash_one(key) as usize % SHARDS;
        &self.shards[at]
    }

    /// What a request of `key` costing `cost` does at `now` (zone clock): spend leased
    /// units, or fetch a lease, or, while another request of the key fetches one, wait
    /// for it (at most `wait`) and then spend or ask Redis.
    pub async fn first(&self, key: &[u8], cost: u64, now: u64, wait: Duration) -> First<'_> {
        let waiter = match self.take(key, cost, now) {
            Taken::Spent(decision) => return First::Spent(decision),
            Taken::Fetch => {
                return First::Fetch(Fetch {
                    leases: self,
                    key: key.into(),
                })
            }
            Taken::Wait(waiter) => waiter,
        };
        // Bounded: the fetch itself is bounded by the backend's timeout.
        let _ = tokio::time::timeout(wait, waiter).await;
        match self.spend(key, cost, now) {
            Some(decision) => First::Spent(decision),
            None => First::Ask,
        }
    }

    /// Spends, or claims the key's fetch, or hands out a wait for the fetch under way,
    /// in one look under the shard's lock (so no wake-up is missed).
    fn take(&self, key: &[u8], cost: u64, now: u64) -> Taken {
        let mut shard = lock(self.shard(key));
        if let Some(decision) = spend_in(&mut shard, key, cost, now) {
            return Taken::Spent(decision);
        }
        if let Some(notify) = shard.get(key).and_then(|lease| lease.fetching.clone()) {
            let mut waiter = Box::pin(notify.notified_owned());
            waiter.as_mut().enable();
            return Taken::Wait(waiter);
        }
        make_room(&mut shard, key, now);
        let lease = shard.entry(key.into()).or_insert_with(|| Lease::empty(now));
        lease.fetching = Some(Arc::new(Notify::new()));
        Taken::Fetch
    }

    /// Spends `cost` units of `key`'s lease at `now` (zone clock): the request's
    /// decision, or `None` when the key holds fewer (or they expired) and Redis must
    /// decide.
    pub fn spend(&self, key: &[u8], cost: u64, now: u64) -> Option<Decision> {
        spend_in(&mut lock(self.shard(key)), key, cost, now)
    }

    /// Adds `granted` units Redis charged for `key` at `now` beside the request it
    /// `admitted` (its remaining units and reset exclude them), to expire `window`
    /// nanoseconds later. The key holds at most [`Leases::most`] units: what a fetch
    /// racing another brings beyond that is dropped.
    pub fn add(&self, key: &[u8], granted: u64, now: u64, window: u64, admitted: &Decision) {
        if granted == 0 {
            return;
        }
        let mut shard = lock(self.shard(key));
        make_room(&mut shard, key, now);
        let lease = shard.entry(key.into()).or_insert_with(|| Lease::empty(now));
        if lease.until <= now {
            lease.left = 0;
        }
        lease.left = lease.left.saturating_add(granted).min(self.most);
        // The newest news from Redis, and the later expiry: leased units are not told
        // apart, so they expire together, a window after the newest were taken.
        lease.until = now.saturating_add(window);
        lease.remaining = admitted.remaining;
        lease.reset_at = now.saturating_add(admitted.reset);
    }

    /// Keys holding a lease (or being fetched), expired or not.
    pub fn keys(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }
}

enum Taken {
    Spent(Decision),
    Fetch,
    Wait(Pin<Box<OwnedNotified>>),
}

impl Lease {
    /// A key with nothing leased (yet): expired from the start.
    fn empty(now: u64) -> Lease {
        Lease {
            left: 0,
            until: now,
            remaining: 0,
            reset_at: now,
            fetching: None,
        }
    }
}

/// Before a new key goes into a full shard: the expired leases go (but not a key being
/// fetched), and if that is not enough, all of them (their fetches find none and add
/// afresh).
fn make_room(shard: &mut Shard, key: &[u8], now: u64) {
    if shard.contains_key(key) || shard.len() < KEYS / SHARDS {
        return;
    }
    shard.retain(|_, lease| lease.until > now || lease.fetching.is_some());
    if shard.len() >= KEYS / SHARDS {
        for lease in shard.values_mut() {
            if let Some(notify) = lease.fetching.take() {
                notify.notify_waiters();
            }
        }
        shard.clear();
    }
}

/// [`Leases::spend`] in a locked shard. An expired or spent lease is dropped unless its
/// key is being fetched.
fn spend_in(shard: &mut Shard, key: &[u8], cost: u64, now: u64) -> Option<Decision> {
    let lease = shard.get_mut(key)?;
    if lease.until <= now || lease.left < cost {
        if lease.until <= now && lease.fetching.is_none() {
            shard.remove(key);
        }
        return None;
    }
    lease.left -= cost;
    let decision = Decision {
        verdict: Verdict::Pass,
        remaining: lease.remaining.saturating_add(lease.left),
        reset: lease.reset_at.saturating_sub(now),
    };
    if lease.left == 0 && lease.fetching.is_none() {
        shard.remove(key);
    }
    Some(decision)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WINDOW: u64 = 1_000_000_000;

    fn admitted(remaining: u64, reset: u64) -> Decision {
        Decision {
            verdict: Verdict::Pass,
            remaining,
            reset,
        }
    }

    #[test]
    fn leased_units_are_spent_then_redis_decides_again() {
        let leases = Leases::new(5);
        assert_eq!(leases.spend(b"k", 1, 0), None, "nothing leased yet");
        leases.add(b"k", 4, 0, WINDOW, &admitted(10, 2_000));
        for left in (0..4).rev() {
            let spent = leases.spend(b"k", 1, 100).expect("leased");
            assert_eq!(spent.verdict, Verdict::Pass);
            assert_eq!(spent.remaining, 10 + left);
            assert_eq!(spent.reset, 1_900);
        }
        assert_eq!(leases.spend(b"k", 1, 200), None, "all spent");
        assert_eq!(leases.keys(), 0, "a spent lease is dropped");
    }

    #[test]
    fn a_request_costing_more_than_is_left_goes_to_redis_and_leaves_the_rest() {
        let leases = Leases::new(5);
        leases.add(b"k", 2, 0, WINDOW, &admitted(0, 0));
        assert_eq!(leases.spend(b"k", 3, 1), None);
        assert!(leases.spend(b"k", 2, 1).is_some());
    }

    #[test]
    fn unspent_units_expire_a_window_after_they_were_taken() {
        let leases = Leases::new(5);
        leases.add(b"k", 4, 0, WINDOW, &admitted(0, 0));
        assert!(leases.spend(b"k", 1, WINDOW - 1).is_some());
        assert_eq!(leases.spend(b"k", 1, WINDOW), None);
        assert_eq!(leases.keys(), 0, "expired and dropped");
        // Expired units are not added to: a new lease starts from what it brings.
        leases.add(b"j", 4, 0, WINDOW, &admitted(0, 0));
        leases.add(b"j", 1, 2 * WINDOW, WINDOW, &admitted(0, 0));
        assert!(leases.spend(b"j", 1, 2 * WINDOW).is_some());
        assert_eq!(leases.spend(b"j", 1, 2 * WINDOW), None);
    }

    #[test]
    fn racing_fetches_never_leave_a_key_more_than_the_lease() {
        let leases = Leases::new(5);
        leases.add(b"k", 4, 0, WINDOW, &admitted(0, 0));
        leases.add(b"k", 4, 0, WINDOW, &admitted(0, 0));
        let spent = (0..10)
            .filter(|_| leases.spend(b"k", 1, 1).is_some())
            .count();
        assert_eq!(spent, 5);
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
                        leases.add(b"k", 99, round, WINDOW, &admitted(0, 0));
                    })
                })
                .collect();
            for thread in threads {
                thread.join().unwrap();
            }
            let spent = (0..500)
                .filter(|_| leases.spend(b"k", 1, round).is_some())
                .count();
            assert_eq!(spent, 100, "round {round}: four grants of 99, kept to 100");
        }
    }

    #[tokio::test]
    async fn one_request_of_a_key_fetches_and_the_others_wait_for_its_lease() {
        let leases = Leases::new(10);
        let wait = Duration::from_secs(5);
        let First::Fetch(fetch) = leases.first(b"k", 1, 0, wait).await else {
            panic!("the first request fetches");
        };
        let waiting = async {
            let mut decided = Vec::new();
            for _ in 0..3 {
                decided.push(leases.first(b"k", 1, 0, wait));
            }
            futures_join(decided).await
        };
        let fetched = async {
            tokio::task::yield_now().await;
            leases.add(b"k", 9, 0, WINDOW, &admitted(0, 0));
            drop(fetch);
        };
        let (decided, ()) = tokio::join!(waiting, fetched);
        assert!(decided.iter().all(|first| matches!(first, First::Spent(_))));
        assert_eq!(
            (0..10)
                .filter(|_| leases.spend(b"k", 1, 0).is_some())
                .count(),
            6,
            "9 leased, 3 spent by the waiters"
        );
    }

    #[tokio::test]
    async fn a_fetch_that_brings_nothing_or_takes_too_long_sends_the_waiters_to_redis() {
        let leases = Leases::new(10);
        let First::Fetch(fetch) = leases.first(b"k", 1, 0, Duration::ZERO).await else {
            panic!("the first request fetches");
        };
        let short = Duration::from_millis(20);
        assert!(matches!(leases.first(b"k", 1, 0, short).await, First::Ask));
        let waiter = leases.first(b"k", 1, 0, Duration::from_secs(5));
        let (first, ()) = tokio::join!(waiter, async { drop(fetch) });
        assert!(matches!(first, First::Ask), "rejected or delayed: no lease");
        // The next request fetches again.
        assert!(matches!(
            leases.first(b"k", 1, 0, short).await,
            First::Fetch(_)
        ));
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
    fn the_table_is_bounded_whatever_the_keys() {
        let leases = Leases::new(3);
        for i in 0..(3 * KEYS) as u64 {
            leases.add(&i.to_be_bytes(), 2, 0, WINDOW, &admitted(0, 0));
        }
        assert!(leases.keys() <= KEYS, "{} keys", leases.keys());
        for shard in leases.shards.iter() {
            assert!(lock(shard).len() <= KEYS / SHARDS);
        }
        // Expired leases make room first: a new key then finds its lease.
        leases.add(b"late", 2, 2 * WINDOW, WINDOW, &admitted(0, 0));
        assert!(leases.spend(b"late", 1, 2 * WINDOW).is_some());
    }
}
