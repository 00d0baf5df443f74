//! Leases (`lease = N` on a Redis zone, "Zones in Redis" in docs/config.md): an instance
//! takes up to N units of a key from Redis in one call and spends them on the key's next
//! requests without asking Redis.
//!
//! The units are charged in Redis when they are taken (the script's `want`), and only
//! when the request that takes them is admitted without delay and they fit now without
//! delay, so a lease never lets a key past its limit in Redis. What a lease can add is
//! timing: units taken now are spent a little later. Only the key's one fetch asks for a
//! lease, and for no more than the table can take (N less the units held), so units are
//! not charged to be dropped; the table never holds more than N units of a key, so at any
//! moment an instance holds at most N units Redis already counted; over any window the
//! instances admit at most the zone's limit plus N × instances. Unspent units expire
//! [`LIFETIME`] (or one window of the zone's rate, if shorter) after the lease's first
//! units were taken — a refill of a lease that still holds some keeps their expiry — and
//! are not given back: that can only admit less.
//!
//! A lease is spent only by requests under the terms it was taken under (the zone key and
//! the item's rate, `burst` and `delay`, a plan's included): units a `burst = 50` location
//! took are not spent by a `burst = 0` one.
//!
//! One fetch at a time per key: while a request of a key is asking Redis for a lease,
//! the key's other requests wait for that answer and then spend from it; if it brought
//! too little they ask Redis for their own units only. If the fetch failed, or was not
//! answered within the backend's `timeout` of the waiter's arrival, the waiter does not
//! call Redis again: it takes the fetch's failure (its zone's `on_error` decides), so no
//! request waits more than one `timeout`.
//!
//! Memory: at most [`KEYS`] leases per zone, in [`SHARDS`] maps behind their own locks
//! (so workers spending different keys seldom wait for each other), each entry a 128-bit
//! hash of the key and terms (never the key's bytes, so a long key costs no more): 64
//! bytes a lease, a few MiB a zone at most. A full shard drops its expired leases, then,
//! if none has expired, the [`EVICT`] holding the fewest units (never one being fetched):
//! those keys ask Redis again, and their unspent units, charged in Redis, are lost until
//! they would have expired (the table keeps no Redis key to give them back by).

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::pin::Pin;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use tokio::sync::futures::OwnedNotified;
use tokio::sync::Notify;

use crate::limit::remote::Failure;
use crate::limit::{Decision, Params, Verdict};

/// Leases a zone holds (one per key and terms).
pub(super) const KEYS: usize = 64 * 1024;
/// Maps the leases are spread over, each behind its own lock.
pub(super) const SHARDS: usize = 16;
/// Leases a full shard drops at once when none has expired.
pub(super) const EVICT: usize = KEYS / SHARDS / 16;
/// The longest unspent units live, in nanoseconds: an `r/m` or `r/d` zone does not hold
/// units Redis counted for a whole window.
pub(super) const LIFETIME: u64 = 5_000_000_000;

/// A zone's leases: (key, terms) → units left.
pub struct Leases {
    /// `lease`: the most units a key may hold.
    most: u64,
    shards: Box<[Mutex<Shard>]>,
    /// Two independent hashers: a lease's [`Id`] is both hashes of its key and terms.
    spread: [RandomState; 2],
}

/// A lease's key and terms, hashed to 128 bits (a collision is as likely as guessing a
/// random 128-bit number).
type Id = u128;

/// Some of a zone's leases.
type Shard = HashMap<Id, Lease>;

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
    fetching: Option<Signal>,
}

/// How a fetch tells its waiters it is over, and whether it failed (then they take its
/// failure rather than call again).
#[derive(Clone, Debug, Default)]
struct Signal {
    done: Arc<Notify>,
    failed: Arc<OnceLock<Failure>>,
}

/// What a request of a leased zone does first ([`Leases::first`]).
pub(crate) enum First<'a> {
    /// It was decided by leased units.
    Spent(Decision),
    /// It asks Redis for a lease, the only one of its key to do so until this is dropped.
    Fetch(Fetch<'a>),
    /// It asks Redis for its own units (another's fetch brought too little for it).
    Ask,
    /// The fetch it waited for failed so, or was not answered in time: the request
    /// follows `on_error` without calling Redis.
    Failed(Failure),
}

/// The one fetch under way for a key: dropping it (after [`Leases::add`], or when the
/// request gave up) lets the key's waiting requests look at the lease again.
pub(crate) struct Fetch<'a> {
    leases: &'a Leases,
    id: Id,
    /// This fetch's own signal: a newer fetch of the key (after this one's lease was
    /// evicted) has another, which this one must not clear.
    signal: Signal,
    /// Units to ask Redis for, the request's own included.
    want: u64,
}

impl Fetch<'_> {
    /// The `want` of the fetch's script call: at most what the table can take.
    pub(crate) fn want(&self) -> u64 {
        self.want
    }

    /// The fetch's call failed so: the waiters take it too.
    pub(crate) fn failed(&mut self, failure: Failure) {
        let _ = self.signal.failed.set(failure);
    }
}

impl Drop for Fetch<'_> {
    fn drop(&mut self) {
        let mut shard = lock(self.leases.shard(self.id));
        if let Some(lease) = shard.get_mut(&self.id) {
            let own = lease.fetching.as_ref();
            if own.is_some_and(|signal| Arc::ptr_eq(&signal.done, &self.signal.done)) {
                lease.fetching = None;
            }
        }
        // Its own waiters only (a newer fetch has its own).
        self.signal.done.notify_waiters();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Leases {
    /// Leases of at most `most` units per key.
    pub(crate) fn new(most: u64) -> Leases {
        Leases {
            most,
            shards: (0..SHARDS).map(|_| Mutex::default()).collect(),
            spread: [RandomState::new(), RandomState::new()],
        }
    }

    /// The lease of `key` under the terms of `params` (its cost aside).
    fn id(&self, key: &[u8], params: &Params) -> Id {
        let terms = (key, params.rate, params.burst, params.delay);
        let [high, low] = &self.spread;
        (u128::from(high.hash_one(terms)) << 64) | u128::from(low.hash_one(terms))
    }

    fn shard(&self, id: Id) -> &Mutex<Shard> {
        &self.shards[(id as usize) % SHARDS]
    }

    /// What a request of `key` under `params` does at `now` (zone clock): spend leased
    /// units, or fetch a lease, or, while another request of the key fetches one, wait
    /// for it (at most `wait`) and then spend or ask Redis for its own units, or take
    /// the fetch's failure.
    pub(crate) async fn first(&self, key: &[u8], params: &Params, now: u64, wait: Duration) -> First<'_> {
        let id = self.id(key, params);
        let (waiter, failed) = match self.take(id, params.cost, now) {
            Taken::Spent(decision) => return First::Spent(decision),
            Taken::Fetch(signal, held) => {
                return First::Fetch(Fetch {
                    leases: self,
                    id,
                    signal,
                    want: self.most.saturating_sub(held),
                })
            }
            Taken::Wait(waiter, failed) => (waiter, failed),
        };
        // Bounded: the fetch itself is bounded by the backend's timeout.
        if tokio::time::timeout(wait, waiter).await.is_err() {
            return First::Failed(Failure::Timeout);
        }
        if let Some(decision) = self.spend(key, params, now) {
            return First::Spent(decision);
        }
        match failed.get() {
            Some(&failure) => First::Failed(failure),
            None => First::Ask,
        }
    }

    /// Spends, or claims the key's fetch (with the units it holds), or hands out a wait
    /// for the fetch under way, in one look under the shard's lock (so no wake-up is
    /// missed).
    fn take(&self, id: Id, cost: u64, now: u64) -> Taken {
        let mut shard = lock(self.shard(id));
        if let Some(decision) = spend_in(&mut shard, id, cost, now) {
            return Taken::Spent(decision);
        }
        if let Some(signal) = shard.get(&id).and_then(|lease| lease.fetching.clone()) {
            let mut waiter = Box::pin(signal.done.notified_owned());
            waiter.as_mut().enable();
            return Taken::Wait(waiter, signal.failed);
        }
        make_room(&mut shard, id, now);
        let lease = shard.entry(id).or_insert_with(|| Lease::empty(now));
        let signal = Signal::default();
        lease.fetching = Some(signal.clone());
        let held = if lease.until > now { lease.left } else { 0 };
        Taken::Fetch(signal, held)
    }

    /// Spends `params.cost` units of `key`'s lease under `params` at `now` (zone
    /// clock): the request's decision, or `None` when it holds fewer (or they expired)
    /// and Redis must decide.
    pub(crate) fn spend(&self, key: &[u8], params: &Params, now: u64) -> Option<Decision> {
        let id = self.id(key, params);
        spend_in(&mut lock(self.shard(id)), id, params.cost, now)
    }

    /// Adds `granted` units Redis charged for `key` under `params` at `now` beside the
    /// request it `admitted` (its remaining units and reset exclude them), to expire
    /// `lifetime` nanoseconds later (at most [`LIFETIME`]), or with the units the lease
    /// still holds. The key holds at most `lease` units.
    pub(crate) fn add(
        &self,
        (key, params): (&[u8], &Params),
        granted: u64,
        now: u64,
        lifetime: u64,
        admitted: &Decision,
    ) {
        if granted == 0 {
            return;
        }
        let id = self.id(key, params);
        let mut shard = lock(self.shard(id));
        make_room(&mut shard, id, now);
        let lease = shard.entry(id).or_insert_with(|| Lease::empty(now));
        if lease.until <= now || lease.left == 0 {
            lease.left = 0;
            lease.until = now.saturating_add(lifetime.min(LIFETIME));
        }
        lease.left = lease.left.saturating_add(granted).min(self.most);
        lease.remaining = admitted.remaining;
        lease.reset_at = now.saturating_add(admitted.reset);
    }
}

enum Taken {
    Spent(Decision),
    /// The request fetches; the lease holds this many units (fewer than its cost).
    Fetch(Signal, u64),
    /// The fetch under way, and the failure it will have if it fails.
    Wait(Pin<Box<OwnedNotified>>, Arc<OnceLock<Failure>>),
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

/// Before a new lease goes into a full shard: the expired ones go, and if that is not
/// enough, the [`EVICT`] holding the fewest units; never one being fetched (its fetch
/// would find none and its waiters be left to time out).
fn make_room(shard: &mut Shard, id: Id, now: u64) {
    let cap = KEYS / SHARDS;
    if shard.contains_key(&id) || shard.len() < cap {
        return;
    }
    shard.retain(|_, lease| lease.until > now || lease.fetching.is_some());
    if shard.len() < cap {
        return;
    }
    let mut idle: Vec<(u64, Id)> = (shard.iter())
        .filter(|(_, lease)| lease.fetching.is_none())
        .map(|(id, lease)| (lease.left, *id))
        .collect();
    let evict = EVICT.min(idle.len());
    if evict > 0 && evict < idle.len() {
        idle.select_nth_unstable(evict - 1);
    }
    for (_, id) in idle.into_iter().take(evict) {
        shard.remove(&id);
    }
}

/// [`Leases::spend`] in a locked shard. An expired or spent lease is dropped unless its
/// key is being fetched.
fn spend_in(shard: &mut Shard, id: Id, cost: u64, now: u64) -> Option<Decision> {
    let lease = shard.get_mut(&id)?;
    if lease.until <= now || lease.left < cost {
        if lease.until <= now && lease.fetching.is_none() {
            shard.remove(&id);
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
        shard.remove(&id);
    }
    Some(decision)
}

#[cfg(test)]
mod tests;
