//! A zone (one `[zones.NAME]`): a key template, an algorithm with its bounded store,
//! and the rate of each plan. [`super::decision`] applies a location's zones to one
//! request.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::adaptive::{Adaptive, Elastic, Target};
use super::bans::Bans;
use super::concurrency::{self, Concurrency};
use super::fixed_window::FixedWindow;
use super::key::{PlanFrom, Template};
use super::leaky_bucket::LeakyBucket;
use super::remote::{Rejections, ZoneSettings};
use super::sliding_log::SlidingLog;
use super::sliding_window::SlidingWindow;
use super::soft::Share;
use super::store::{Locked, Stats, Store};
use super::token_bucket::TokenBucket;
use super::{Algorithm, Decision, Limiter, Params, Period, Rate};

/// Nanoseconds from the last midnight UTC to `wall` (0 if it is before 1970).
fn into_utc_day(wall: SystemTime) -> u64 {
    const DAY: u128 = Period::Day.nanos() as u128;
    let since_1970 = wall
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    u64::try_from(since_1970 % DAY).unwrap_or(0)
}

/// How a settled charge changes: units given back or charged on top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Change {
    Refund(u64),
    Charge(u64),
}

/// Gives each zone a distinct id: the lock order.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Runs `$body` with `$each` bound to what `$value` (a [`Stores`] or a [`Guard`]) holds,
/// whatever the algorithm: the one place that lists the six.
macro_rules! dispatch {
    ($kind:ident, $value:expr, $each:ident => $body:expr) => {
        match $value {
            $kind::Leaky($each) => $body,
            $kind::Token($each) => $body,
            $kind::Fixed($each) => $body,
            $kind::Sliding($each) => $body,
            $kind::Log($each) => $body,
            $kind::Concurrency($each) => $body,
        }
    };
    // The same, with the result put in the same variant of `$into`.
    ($kind:ident => $into:ident, $value:expr, $each:ident => $body:expr) => {
        match $value {
            $kind::Leaky($each) => $into::Leaky($body),
            $kind::Token($each) => $into::Token($body),
            $kind::Fixed($each) => $into::Fixed($body),
            $kind::Sliding($each) => $into::Sliding($body),
            $kind::Log($each) => $into::Log($body),
            $kind::Concurrency($each) => $into::Concurrency($body),
        }
    };
}

// The soft lane: it uses `dispatch!`, so it is declared after it.
mod lane;
pub(super) use lane::{Lane, LaneKey};

/// A zone's keys, in the store of its algorithm.
enum Stores {
    Leaky(Store<LeakyBucket>),
    Token(Store<TokenBucket>),
    Fixed(Store<FixedWindow>),
    Sliding(Store<SlidingWindow>),
    Log(Store<SlidingLog>),
    Concurrency(Store<Concurrency>),
}

impl Stores {
    /// An empty store of `size` bytes for `algorithm`.
    fn new(algorithm: Algorithm, size: usize) -> Stores {
        match algorithm {
            Algorithm::LeakyBucket => Stores::Leaky(Store::new(size)),
            Algorithm::TokenBucket => Stores::Token(Store::new(size)),
            Algorithm::FixedWindow => Stores::Fixed(Store::new(size)),
            Algorithm::SlidingWindow => Stores::Sliding(Store::new(size)),
            Algorithm::SlidingLog => Stores::Log(Store::new(size)),
            Algorithm::Concurrency => Stores::Concurrency(Store::new(size)),
        }
    }
}

/// What a zone is built from.
pub struct Spec {
    pub name: String,
    pub template: Template,
    pub algorithm: Algorithm,
    /// The rate of keys without a plan (ignored by `concurrency`).
    pub rate: Rate,
    /// Indexed by plan id: that plan's rate in this zone, if it names one.
    pub plan_rates: Vec<Option<Rate>>,
    /// In-flight requests per key (`concurrency`).
    pub max: u64,
    /// The `size` bound in bytes.
    pub size: usize,
    /// `backend = "redis"`: the state lives in Redis, and the local store serves only
    /// `on_error = "local"`.
    pub redis: Option<ZoneSettings>,
    /// `adaptive`: the rates follow an upstream group's load.
    pub adaptive: Option<Target>,
    /// The smallest `soft` share a location gives this zone; `None` when none does (the
    /// zone then has no soft lane).
    pub soft: Option<Share>,
    /// `plan`: the plan read from the request, over the request's `[api_keys]` plan.
    pub plan_from: Option<PlanFrom>,
}

pub struct Zone {
    pub(super) id: u64,
    pub name: Arc<str>,
    pub template: Template,
    /// `plan`: read from the request when its key is ([`crate::keys::Keys::render`]).
    pub plan_from: Option<PlanFrom>,
    pub algorithm: Algorithm,
    rate: Rate,
    plan_rates: Box<[Option<Rate>]>,
    pub(super) max: u64,
    /// Parameters under which a key counts as drained: the slowest rate the zone uses, so
    /// no key is dropped while any plan's bucket would still remember it.
    pub(super) idle: Params,
    /// Time zero of this zone's `now`.
    epoch: Instant,
    /// For the window algorithms: how far into a UTC day `epoch` was, added to `now` so
    /// that windows start on the second, minute, hour and day of the wall clock (an r/d
    /// quota resets at midnight UTC). 0 for the others.
    window_offset: u64,
    /// The `size` bound in bytes.
    size: usize,
    /// Shared with the zone's successors on reload while they keep its state.
    stores: Arc<Stores>,
    /// `backend = "redis"` settings; `None` for a local zone.
    pub redis: Option<ZoneSettings>,
    /// Keys Redis rejected, remembered until they may pass (Redis zones only).
    pub rejections: Rejections,
    /// The zone's bans and strikes (the penalty box); handed to the next generation
    /// while the zone keeps its name and key (`snapshot::zones`).
    pub bans: Arc<Bans>,
    /// `adaptive`: the factor every rate is scaled by, and its controller.
    pub adaptive: Option<Adaptive>,
    /// The soft lane, when a location gives the zone a `soft` share.
    pub(super) lane: Option<Lane>,
}

impl Zone {
    /// A zone whose time zero is `epoch`; `wall` is the wall clock read at the same
    /// moment (the window algorithms align their windows to it).
    pub fn new(spec: Spec, epoch: Instant, wall: SystemTime) -> Zone {
        let stores = Stores::new(spec.algorithm, spec.size);
        let window_offset = if spec.algorithm.is_window() {
            into_utc_day(wall)
        } else {
            0
        };
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let adaptive = spec.adaptive.clone().map(Adaptive::new);
        Zone::with_state(
            spec,
            id,
            epoch,
            window_offset,
            Arc::new(stores),
            adaptive,
            None,
        )
    }

    /// Whether a zone built from `spec` may keep this zone's keys and their state: the
    /// same name, key, algorithm and size, so that each key means the same client and each
    /// state the same thing (rates, plans, `max` and bursts may change: they apply to the
    /// state as it is).
    pub fn can_pass_state_to(&self, spec: &Spec) -> bool {
        *self.name == spec.name
            && self.algorithm == spec.algorithm
            && self.template == spec.template
            && self.size == spec.size
    }

    /// The zone `spec` describes, holding this zone's keys and their state (see
    /// [`Zone::can_pass_state_to`]), as a reload builds it: a client gets no fresh burst.
    /// It keeps this zone's id, so requests of the old and the new configuration lock
    /// the shared shards in one order.
    pub fn succeed(&self, spec: Spec) -> Zone {
        debug_assert!(self.can_pass_state_to(&spec));
        let stores = Arc::clone(&self.stores);
        let lane = self.lane.as_ref().and_then(Lane::stores);
        // A cut factor outlives the reload while the zone follows the same upstream.
        let adaptive = match (&self.adaptive, spec.adaptive.clone()) {
            (Some(old), Some(target)) => Some(old.succeed(target)),
            (None, target) => target.map(Adaptive::new),
            (Some(_), None) => None,
        };
        Zone::with_state(
            spec,
            self.id,
            self.epoch,
            self.window_offset,
            stores,
            adaptive,
            lane,
        )
    }

    /// Whether the two hold the same keys (one succeeded the other on reload).
    pub fn shares_state_with(&self, other: &Zone) -> bool {
        Arc::ptr_eq(&self.stores, &other.stores)
    }

    fn with_state(
        spec: Spec,
        id: u64,
        epoch: Instant,
        window_offset: u64,
        stores: Arc<Stores>,
        adaptive: Option<Adaptive>,
        lane: Option<Arc<Stores>>,
    ) -> Zone {
        let slowest = spec
            .plan_rates
            .iter()
            .flatten()
            .copied()
            .chain([spec.rate])
            .min_by(|a, b| a.per_second().total_cmp(&b.per_second()))
            .unwrap_or(spec.rate);
        let lane = spec
            .soft
            .map(|share| Lane::new(&spec, share, slowest, lane));
        Zone {
            id,
            name: spec.name.into(),
            template: spec.template,
            plan_from: spec.plan_from,
            algorithm: spec.algorithm,
            rate: spec.rate,
            plan_rates: spec.plan_rates.into(),
            max: spec.max,
            idle: Params {
                max: spec.max,
                ..Params::new(slowest)
            },
            epoch,
            window_offset,
            size: spec.size,
            stores,
            redis: spec.redis,
            rejections: Rejections::default(),
            bans: Arc::default(),
            adaptive,
            lane,
        }
    }

    /// The rate a request on `plan` gets here.
    pub fn rate_for(&self, plan: Option<usize>) -> Rate {
        plan.and_then(|p| self.plan_rates.get(p).copied().flatten())
            .unwrap_or(self.rate)
    }

    /// The rate a request on `plan` is held to now: [`Zone::rate_for`], and for an
    /// adaptive zone one `Relaxed` load of its factor word: with spare capacity and an
    /// `elastic` item, the elastic ceiling; otherwise the rate scaled by the factor
    /// (promoted to a longer period for the buckets, see [`Rate::scaled`]).
    pub fn effective_rate(&self, plan: Option<usize>, elastic: Option<Elastic>) -> Rate {
        let rate = self.rate_for(plan);
        let Some(adaptive) = &self.adaptive else {
            return rate;
        };
        let word = adaptive.control.factor.read();
        match elastic {
            Some(elastic) if word.spare() => elastic.ceiling(rate),
            _ => rate.scaled(word.permille(), !self.algorithm.is_window()),
        }
    }

    /// In-flight requests per key (`concurrency` zones).
    pub fn max(&self) -> u64 {
        self.max
    }

    /// The zone's keys and memory, its soft lane's included.
    pub fn stats(&self) -> Stats {
        let stats = dispatch!(Stores, &*self.stores, s => s.stats());
        match self.lane.as_ref().and_then(Lane::stats) {
            Some(lane) => Stats {
                keys: stats.keys + lane.keys,
                bytes: stats.bytes + lane.bytes,
                capacity_bytes: stats.capacity_bytes + lane.capacity_bytes,
                evictions: stats.evictions + lane.evictions,
                expired: stats.expired + lane.expired,
            },
            None => stats,
        }
    }

    /// `now` as this zone counts time: nanoseconds since its epoch (plus, for windows,
    /// the epoch's offset into its UTC day).
    pub fn nanos(&self, now: Instant) -> u64 {
        let since = now.saturating_duration_since(self.epoch).as_nanos();
        u64::try_from(since)
            .unwrap_or(u64::MAX)
            .saturating_add(self.window_offset)
    }

    pub fn hash(&self, key: &[u8]) -> u64 {
        dispatch!(Stores, &*self.stores, s => s.hash(key))
    }

    pub(super) fn shard_of(&self, hash: u64) -> usize {
        dispatch!(Stores, &*self.stores, s => s.shard_of(hash))
    }

    /// A request decided and charged in this zone's own store at `now`, as a location
    /// with this zone alone would (`on_error = "local"` of a Redis zone). Not for
    /// `concurrency` zones (their in-flight count is not handed back).
    pub fn decide_alone(&self, key: &[u8], now: Instant, p: &Params) -> Decision {
        self.decide(self.hash(key), key, self.nanos(now), p)
    }

    /// One request's whole decision in this zone alone (see [`Store::decide`]).
    pub(super) fn decide(&self, hash: u64, key: &[u8], now: u64, p: &Params) -> Decision {
        let idle = &self.idle;
        dispatch!(Stores, &*self.stores, s => s.decide(hash, key, now, p, idle))
    }

    pub(super) fn lock(&self, hash: u64) -> Guard<'_> {
        dispatch!(Stores => Guard, &*self.stores, s => s.lock(hash))
    }

    /// The stored state of `key` (as [`Template::key_of`] gives it), in the algorithm's
    /// own units; None when the key is not stored (it is then as fresh).
    pub fn state_of(&self, key: &[u8]) -> Option<String> {
        dispatch!(Stores, &*self.stores, s => state_in(s, key))
    }

    /// What a request of `key` at `now` under `p` would get, changing nothing (the admin
    /// page's "next request"). For a Redis zone, what its local store would say, which
    /// serves only `on_error = "local"`.
    pub fn peek(&self, key: &[u8], now: Instant, p: &Params) -> Decision {
        let now = self.nanos(now);
        dispatch!(Stores, &*self.stores, s => peek_in(s, key, now, p))
    }

    /// Forgets `key`: its next request starts afresh (an operator freeing a client by
    /// hand). Whether it was stored.
    pub fn forget(&self, key: &[u8]) -> bool {
        let in_lane = self.lane.as_ref().is_some_and(|lane| lane.forget(key));
        dispatch!(Stores, &*self.stores, s => forget_in(s, key)) || in_lane
    }

    /// Settles a charge made at admission (see [`super::settle`]): gives back units
    /// (a stored key only) or charges more (storing the key if it went), even past the
    /// limit. `p.cost` is the units.
    pub(super) fn adjust(&self, hash: u64, key: &[u8], now: u64, p: &Params, change: Change) {
        adjust(&self.stores, hash, key, now, p, &self.idle, change);
    }

    /// Gives back the units an in-flight request took (`concurrency`).
    pub(super) fn release(&self, hash: u64, key: &[u8], cost: u64) {
        if let Stores::Concurrency(store) = &*self.stores {
            let mut locked = store.lock(hash);
            let drained = match locked.get(hash, key) {
                Some(mut count) => {
                    concurrency::release(&mut count, cost);
                    *count == 0
                }
                None => false,
            };
            if drained {
                locked.remove(hash, key);
            }
        }
    }
}

/// A locked shard of some zone.
pub(super) enum Guard<'a> {
    Leaky(Locked<'a, LeakyBucket>),
    Token(Locked<'a, TokenBucket>),
    Fixed(Locked<'a, FixedWindow>),
    Sliding(Locked<'a, SlidingWindow>),
    Log(Locked<'a, SlidingLog>),
    Concurrency(Locked<'a, Concurrency>),
}

impl Guard<'_> {
    pub(super) fn check(&mut self, hash: u64, key: &[u8], now: u64, p: &Params) -> Decision {
        dispatch!(Guard, self, g => check_in(g, hash, key, now, p))
    }

    pub(super) fn charge(&mut self, hash: u64, key: &[u8], now: u64, p: &Params, idle: &Params) {
        dispatch!(Guard, self, g => charge_in(g, hash, key, now, p, idle))
    }
}

fn state_in<A: Limiter>(store: &Store<A>, key: &[u8]) -> Option<String> {
    let hash = store.hash(key);
    let mut locked = store.lock(hash);
    let state = locked.get(hash, key).map(|slot| format!("{:?}", *slot));
    state
}

fn peek_in<A: Limiter>(store: &Store<A>, key: &[u8], now: u64, p: &Params) -> Decision {
    let hash = store.hash(key);
    let mut locked = store.lock(hash);
    let decision = match locked.get(hash, key) {
        Some(slot) => A::check(&slot, now, p),
        None => A::check(&A::fresh(now), now, p),
    };
    decision
}

fn forget_in<A: Limiter>(store: &Store<A>, key: &[u8]) -> bool {
    let hash = store.hash(key);
    store.lock(hash).remove(hash, key)
}

/// [`Zone::adjust`] in `stores` (the zone's or its lane's).
fn adjust(
    stores: &Stores,
    hash: u64,
    key: &[u8],
    now: u64,
    p: &Params,
    idle: &Params,
    change: Change,
) {
    dispatch!(Stores, stores, s => adjust_in(s, hash, key, now, p, idle, change));
}

fn adjust_in<A: Limiter>(
    store: &Store<A>,
    hash: u64,
    key: &[u8],
    now: u64,
    p: &Params,
    idle: &Params,
    change: Change,
) {
    let mut locked = store.lock(hash);
    match change {
        Change::Charge(_) => {
            locked.entry(hash, key).charge_with(now, p, idle);
        }
        Change::Refund(_) => {
            let drained = match locked.get(hash, key) {
                Some(mut state) => {
                    A::refund(&mut state, now, p);
                    A::is_drained(&state, now, idle)
                }
                None => false,
            };
            if drained {
                locked.remove(hash, key);
            }
        }
    }
}

fn check_in<A: Limiter>(
    g: &mut Locked<'_, A>,
    hash: u64,
    key: &[u8],
    now: u64,
    p: &Params,
) -> Decision {
    g.entry(hash, key).check(now, p)
}

/// Charges an admitted request; a new key is judged for eviction with `idle` (the
/// zone's slowest rate), not with this request's plan.
fn charge_in<A: Limiter>(
    g: &mut Locked<'_, A>,
    hash: u64,
    key: &[u8],
    now: u64,
    p: &Params,
    idle: &Params,
) {
    g.entry(hash, key).charge_with(now, p, idle);
}
