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
//! Memory: at most [`KEYS`] keys per zone, in [`SHARDS`] maps behind their own locks
//! (so workers spending different keys seldom wait for each other). A full shard drops
//! its expired leases, and if none has expired, all of them: the keys then ask Redis
//! again, which only costs calls.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::{Mutex, MutexGuard};

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

#[derive(Clone, Copy, Debug)]
struct Lease {
    left: u64,
    /// Zone-clock nanosecond at which unspent units expire.
    until: u64,
    /// What Redis said when the units were taken: the key's remaining units beside the
    /// lease, and when its state would have drained (zone clock), for the rate-limit
    /// headers of the requests that spend them.
    remaining: u64,
    reset_at: u64,
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

    /// Spends `cost` units of `key`'s lease at `now` (zone clock): the request's
    /// decision, or `None` when the key holds fewer (or they expired) and Redis must
    /// decide.
    pub fn spend(&self, key: &[u8], cost: u64, now: u64) -> Option<Decision> {
        let mut shard = lock(self.shard(key));
        let lease = shard.get_mut(key)?;
        if lease.until <= now || lease.left < cost {
            if lease.until <= now {
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
        if lease.left == 0 {
            shard.remove(key);
        }
        Some(decision)
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
        if !shard.contains_key(key) && shard.len() >= KEYS / SHARDS {
            shard.retain(|_, lease| lease.until > now);
            if shard.len() >= KEYS / SHARDS {
                shard.clear();
            }
        }
        let fresh = Lease {
            left: 0,
            until: now.saturating_add(window),
            remaining: admitted.remaining,
            reset_at: now.saturating_add(admitted.reset),
        };
        let lease = shard.entry(key.into()).or_insert(fresh);
        if lease.until <= now {
            *lease = fresh;
        }
        lease.left = lease.left.saturating_add(granted).min(self.most);
        // The newest news from Redis, and the later expiry (units are spent oldest
        // first only in that none is told apart: they expire together, never later than
        // a window after the newest were taken).
        lease.until = fresh.until;
        lease.remaining = fresh.remaining;
        lease.reset_at = fresh.reset_at;
    }

    /// Keys holding a lease, expired or not (for tests and `/status`).
    pub fn keys(&self) -> usize {
        self.shards.iter().map(|shard| lock(shard).len()).sum()
    }
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
