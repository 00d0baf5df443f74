//! A zone (one `[zones.NAME]`): a key template, an algorithm with its bounded store,
//! and the rate of each plan; and [`decide`], which applies a location's `limit` list
//! to one request with nginx's rules ("How limits decide" in docs/config.md).
//!
//! Every zone of the list is checked before any is charged, so a request rejected by
//! one zone costs no zone anything. The keys' shards are locked for the whole decision,
//! in one global order (zone id, then shard) so that two locations listing the same
//! zones in different orders cannot deadlock; with the locks held, check-then-charge is
//! atomic and no grant is lost or doubled between threads.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::concurrency::{self, Concurrency};
use super::fixed_window::FixedWindow;
use super::key::{RequestView, Template};
use super::leaky_bucket::LeakyBucket;
use super::redis::{Rejections, Shared};
use super::sliding_log::SlidingLog;
use super::sliding_window::SlidingWindow;
use super::store::{Locked, Stats, Store};
use super::token_bucket::TokenBucket;
use super::{Algorithm, Decision, Params, Rate, Verdict, NODELAY};

/// Nanoseconds from the last midnight UTC to `wall` (0 if it is before 1970).
fn into_utc_day(wall: SystemTime) -> u64 {
    const DAY: u128 = 86_400 * 1_000_000_000;
    let since_1970 = wall
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    u64::try_from(since_1970 % DAY).unwrap_or(0)
}

/// Most zones one location may list (the config refuses more): a decision keeps its keys
/// and locks in arrays of this size.
pub const MAX_LIMITS: usize = 8;

/// Gives each zone a distinct id: the lock order.
static NEXT_ID: AtomicU64 = AtomicU64::new(0);

/// Which algorithm a zone runs (`algorithm` in docs/config.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    LeakyBucket,
    TokenBucket,
    FixedWindow,
    SlidingWindow,
    SlidingLog,
    Concurrency,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::LeakyBucket => "leaky_bucket",
            Kind::TokenBucket => "token_bucket",
            Kind::FixedWindow => "fixed_window",
            Kind::SlidingWindow => "sliding_window",
            Kind::SlidingLog => "sliding_log",
            Kind::Concurrency => "concurrency",
        }
    }
}

enum Stores {
    Leaky(Store<LeakyBucket>),
    Token(Store<TokenBucket>),
    Fixed(Store<FixedWindow>),
    Sliding(Store<SlidingWindow>),
    Log(Store<SlidingLog>),
    Concurrency(Store<Concurrency>),
}

/// What a zone is built from.
pub struct Spec {
    pub name: String,
    pub template: Template,
    pub kind: Kind,
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
    pub shared: Option<Shared>,
}

pub struct Zone {
    id: u64,
    pub name: Box<str>,
    pub template: Template,
    pub kind: Kind,
    rate: Rate,
    plan_rates: Box<[Option<Rate>]>,
    max: u64,
    /// Parameters under which a key counts as drained: the slowest rate the zone uses, so
    /// no key is dropped while any plan's bucket would still remember it.
    idle: Params,
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
    pub shared: Option<Shared>,
    /// Keys Redis rejected, remembered until they may pass (Redis zones only).
    pub rejections: Rejections,
}

impl Zone {
    /// A zone whose time zero is `epoch`; `wall` is the wall clock read at the same
    /// moment (the window algorithms align their windows to it).
    pub fn new(spec: Spec, epoch: Instant, wall: SystemTime) -> Zone {
        let stores = match spec.kind {
            Kind::LeakyBucket => Stores::Leaky(Store::new(spec.size)),
            Kind::TokenBucket => Stores::Token(Store::new(spec.size)),
            Kind::FixedWindow => Stores::Fixed(Store::new(spec.size)),
            Kind::SlidingWindow => Stores::Sliding(Store::new(spec.size)),
            Kind::SlidingLog => Stores::Log(Store::new(spec.size)),
            Kind::Concurrency => Stores::Concurrency(Store::new(spec.size)),
        };
        let window_offset = match spec.kind {
            Kind::FixedWindow | Kind::SlidingWindow | Kind::SlidingLog => into_utc_day(wall),
            _ => 0,
        };
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        Zone::with_state(spec, id, epoch, window_offset, Arc::new(stores))
    }

    /// Whether a zone built from `spec` may keep this zone's keys and their state: the
    /// same name, key, algorithm and size, so that each key means the same client and each
    /// state the same thing (rates, plans, `max` and bursts may change: they apply to the
    /// state as it is).
    pub fn can_pass_state_to(&self, spec: &Spec) -> bool {
        *self.name == spec.name
            && self.kind == spec.kind
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
        Zone::with_state(spec, self.id, self.epoch, self.window_offset, stores)
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
    ) -> Zone {
        let slowest = spec
            .plan_rates
            .iter()
            .flatten()
            .copied()
            .chain([spec.rate])
            .min_by(|a, b| a.per_second().total_cmp(&b.per_second()))
            .unwrap_or(spec.rate);
        Zone {
            id,
            name: spec.name.into(),
            template: spec.template,
            kind: spec.kind,
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
            shared: spec.shared,
            rejections: Rejections::default(),
        }
    }

    /// The rate a request on `plan` gets here.
    pub fn rate_for(&self, plan: Option<usize>) -> Rate {
        plan.and_then(|p| self.plan_rates.get(p).copied().flatten())
            .unwrap_or(self.rate)
    }

    /// In-flight requests per key (`concurrency` zones).
    pub fn max(&self) -> u64 {
        self.max
    }

    pub fn stats(&self) -> Stats {
        match &*self.stores {
            Stores::Leaky(s) => s.stats(),
            Stores::Token(s) => s.stats(),
            Stores::Fixed(s) => s.stats(),
            Stores::Sliding(s) => s.stats(),
            Stores::Log(s) => s.stats(),
            Stores::Concurrency(s) => s.stats(),
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

    fn hash(&self, key: &[u8]) -> u64 {
        match &*self.stores {
            Stores::Leaky(s) => s.hash(key),
            Stores::Token(s) => s.hash(key),
            Stores::Fixed(s) => s.hash(key),
            Stores::Sliding(s) => s.hash(key),
            Stores::Log(s) => s.hash(key),
            Stores::Concurrency(s) => s.hash(key),
        }
    }

    fn shard_of(&self, hash: u64) -> usize {
        match &*self.stores {
            Stores::Leaky(s) => s.shard_of(hash),
            Stores::Token(s) => s.shard_of(hash),
            Stores::Fixed(s) => s.shard_of(hash),
            Stores::Sliding(s) => s.shard_of(hash),
            Stores::Log(s) => s.shard_of(hash),
            Stores::Concurrency(s) => s.shard_of(hash),
        }
    }

    /// A request decided and charged in this zone's own store at `now`, as a location
    /// with this zone alone would (`on_error = "local"` of a Redis zone). Not for
    /// `concurrency` zones (their in-flight count is not handed back).
    pub fn decide_alone(&self, key: &[u8], now: Instant, p: &Params) -> Decision {
        self.decide(self.hash(key), key, self.nanos(now), p)
    }

    /// One request's whole decision in this zone alone (see [`Store::decide`]).
    fn decide(&self, hash: u64, key: &[u8], now: u64, p: &Params) -> Decision {
        let idle = &self.idle;
        match &*self.stores {
            Stores::Leaky(s) => s.decide(hash, key, now, p, idle),
            Stores::Token(s) => s.decide(hash, key, now, p, idle),
            Stores::Fixed(s) => s.decide(hash, key, now, p, idle),
            Stores::Sliding(s) => s.decide(hash, key, now, p, idle),
            Stores::Log(s) => s.decide(hash, key, now, p, idle),
            Stores::Concurrency(s) => s.decide(hash, key, now, p, idle),
        }
    }

    fn lock(&self, hash: u64) -> Guard<'_> {
        match &*self.stores {
            Stores::Leaky(s) => Guard::Leaky(s.lock(hash)),
            Stores::Token(s) => Guard::Token(s.lock(hash)),
            Stores::Fixed(s) => Guard::Fixed(s.lock(hash)),
            Stores::Sliding(s) => Guard::Sliding(s.lock(hash)),
            Stores::Log(s) => Guard::Log(s.lock(hash)),
            Stores::Concurrency(s) => Guard::Concurrency(s.lock(hash)),
        }
    }

    /// The stored state of `key` (as [`Template::key_of`] gives it), in the algorithm's
    /// own units; None when the key is not stored (it is then as fresh).
    pub fn state_of(&self, key: &[u8]) -> Option<String> {
        match &*self.stores {
            Stores::Leaky(s) => state_in(s, key),
            Stores::Token(s) => state_in(s, key),
            Stores::Fixed(s) => state_in(s, key),
            Stores::Sliding(s) => state_in(s, key),
            Stores::Log(s) => state_in(s, key),
            Stores::Concurrency(s) => state_in(s, key),
        }
    }

    /// Forgets `key`: its next request starts afresh (an operator freeing a client by
    /// hand). Whether it was stored.
    pub fn forget(&self, key: &[u8]) -> bool {
        match &*self.stores {
            Stores::Leaky(s) => forget_in(s, key),
            Stores::Token(s) => forget_in(s, key),
            Stores::Fixed(s) => forget_in(s, key),
            Stores::Sliding(s) => forget_in(s, key),
            Stores::Log(s) => forget_in(s, key),
            Stores::Concurrency(s) => forget_in(s, key),
        }
    }

    /// Gives back the units an in-flight request took (`concurrency`).
    fn release(&self, hash: u64, key: &[u8], cost: u64) {
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
enum Guard<'a> {
    Leaky(Locked<'a, LeakyBucket>),
    Token(Locked<'a, TokenBucket>),
    Fixed(Locked<'a, FixedWindow>),
    Sliding(Locked<'a, SlidingWindow>),
    Log(Locked<'a, SlidingLog>),
    Concurrency(Locked<'a, Concurrency>),
}

impl Guard<'_> {
    fn check(&mut self, hash: u64, key: &[u8], now: u64, p: &Params) -> Decision {
        match self {
            Guard::Leaky(g) => check_in(g, hash, key, now, p),
            Guard::Token(g) => check_in(g, hash, key, now, p),
            Guard::Fixed(g) => check_in(g, hash, key, now, p),
            Guard::Sliding(g) => check_in(g, hash, key, now, p),
            Guard::Log(g) => check_in(g, hash, key, now, p),
            Guard::Concurrency(g) => check_in(g, hash, key, now, p),
        }
    }

    fn charge(&mut self, hash: u64, key: &[u8], now: u64, p: &Params, idle: &Params) {
        match self {
            Guard::Leaky(g) => charge_in(g, hash, key, now, p, idle),
            Guard::Token(g) => charge_in(g, hash, key, now, p, idle),
            Guard::Fixed(g) => charge_in(g, hash, key, now, p, idle),
            Guard::Sliding(g) => charge_in(g, hash, key, now, p, idle),
            Guard::Log(g) => charge_in(g, hash, key, now, p, idle),
            Guard::Concurrency(g) => charge_in(g, hash, key, now, p, idle),
        }
    }
}

fn state_in<A: Algorithm>(store: &Store<A>, key: &[u8]) -> Option<String> {
    let hash = store.hash(key);
    let mut locked = store.lock(hash);
    let state = locked.get(hash, key).map(|slot| format!("{:?}", *slot));
    state
}

fn forget_in<A: Algorithm>(store: &Store<A>, key: &[u8]) -> bool {
    let hash = store.hash(key);
    store.lock(hash).remove(hash, key)
}

fn check_in<A: Algorithm>(
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
fn charge_in<A: Algorithm>(
    g: &mut Locked<'_, A>,
    hash: u64,
    key: &[u8],
    now: u64,
    p: &Params,
    idle: &Params,
) {
    g.entry(hash, key).charge_with(now, p, idle);
}

/// One item of a location's `limit` list, ready to use.
#[derive(Clone)]
pub struct Rule {
    pub zone: Arc<Zone>,
    pub burst: u64,
    /// Excess requests let through at once; [`NODELAY`] for `nodelay`.
    pub delay: u64,
    pub dry_run: bool,
}

/// nginx's `$limit_req_status`, for the access log: the most telling outcome of the
/// request over its zones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Passed,
    DelayedDryRun,
    RejectedDryRun,
    Delayed,
    Rejected,
}

impl Status {
    /// One zone's outcome for the log.
    pub fn of(verdict: Verdict, dry_run: bool) -> Status {
        match (verdict, dry_run) {
            (Verdict::Pass, _) => Status::Passed,
            (Verdict::Delay(_), false) => Status::Delayed,
            (Verdict::Delay(_), true) => Status::DelayedDryRun,
            (Verdict::Reject { .. }, false) => Status::Rejected,
            (Verdict::Reject { .. }, true) => Status::RejectedDryRun,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "PASSED",
            Status::Delayed => "DELAYED",
            Status::Rejected => "REJECTED",
            Status::DelayedDryRun => "DELAYED_DRY_RUN",
            Status::RejectedDryRun => "REJECTED_DRY_RUN",
        }
    }
}

/// What one zone said about a request: what the rate-limit headers report.
#[derive(Clone, Copy, Debug)]
pub struct Applied {
    /// Index of the rule in the location's list.
    pub rule: usize,
    /// The rate this request was held to (its plan's, or the zone's).
    pub rate: Rate,
    pub decision: Decision,
    pub dry_run: bool,
}

/// The zones' answers, in list order. The first is kept inline: most locations list one
/// zone, and then deciding allocates nothing.
#[derive(Clone, Default)]
pub struct AppliedList {
    first: Option<Applied>,
    rest: Vec<Applied>,
}

impl AppliedList {
    pub fn push(&mut self, applied: Applied) {
        match self.first {
            None => self.first = Some(applied),
            Some(_) => self.rest.push(applied),
        }
    }

    pub fn iter(&self) -> impl Iterator<Item = &Applied> + Clone {
        self.first.iter().chain(self.rest.iter())
    }

    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Applied> {
        self.first.iter_mut().chain(self.rest.iter_mut())
    }

    pub fn len(&self) -> usize {
        usize::from(self.first.is_some()) + self.rest.len()
    }

    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }
}

/// The decision over every zone of a location.
#[derive(Default)]
pub struct Outcome {
    /// `None` when no zone applied (every key empty).
    pub status: Option<Status>,
    /// Nanoseconds to wait before going on (the largest delay of the zones).
    pub delay: u64,
    /// When rejected: nanoseconds until every rejecting zone would admit it (0: unknown).
    pub retry_after: u64,
    /// The rule that rejected it (the first in the list).
    pub rejected_by: Option<usize>,
    /// Every zone whose key was not empty, in list order.
    pub applied: AppliedList,
    /// In-flight counts taken in `concurrency` zones; dropping them gives them back.
    pub in_flight: Vec<InFlight>,
    /// A Redis zone with `on_error = "deny"` could not decide: answer 503.
    pub unavailable: bool,
}

impl Outcome {
    pub fn rejected(&self) -> bool {
        self.status == Some(Status::Rejected)
    }
}

/// A request in flight in a `concurrency` zone: released when dropped, which is when the
/// response body has ended or the client has gone away.
pub struct InFlight {
    zone: Arc<Zone>,
    hash: u64,
    key: Box<[u8]>,
    cost: u64,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.zone.release(self.hash, &self.key, self.cost);
    }
}

thread_local! {
    /// Rendered keys of the request being decided on this thread, end to end; reused so
    /// that keys cost no allocation once warm.
    static KEYS: std::cell::RefCell<Vec<u8>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// One rule's key for this request.
struct Keyed {
    rule: usize,
    hash: u64,
    shard: usize,
    /// The key's bytes in the shared buffer.
    span: std::ops::Range<usize>,
    params: Params,
    now: u64,
}

/// Applies `rules` to a request at `now`. `plan` is the request's plan id (from its API
/// key), `cost` the location's. Zones whose key is empty are skipped.
pub fn decide(
    rules: &[Rule],
    req: &RequestView<'_>,
    plan: Option<usize>,
    cost: u64,
    now: Instant,
) -> Outcome {
    KEYS.with(|keys| match keys.try_borrow_mut() {
        Ok(mut keys) => decide_with(rules, req, plan, cost, now, &mut keys),
        // Only re-entry could hold it; decide with a buffer of its own.
        Err(_) => decide_with(rules, req, plan, cost, now, &mut Vec::new()),
    })
}

fn decide_with(
    rules: &[Rule],
    req: &RequestView<'_>,
    plan: Option<usize>,
    cost: u64,
    now: Instant,
    keys: &mut Vec<u8>,
) -> Outcome {
    keys.clear();
    if let [rule] = rules {
        return decide_one(rule, req, plan, cost, now, keys);
    }
    // Fixed arrays, not vectors: a location lists at most MAX_LIMITS zones (config), and
    // deciding then allocates nothing but the outcome's list.
    let mut slots: [Option<Keyed>; MAX_LIMITS] = Default::default();
    let mut n = 0;
    for (index, rule) in rules.iter().enumerate().take(MAX_LIMITS) {
        let start = keys.len();
        if !rule.zone.template.render_append(req, keys) {
            keys.truncate(start);
            continue;
        }
        let zone = &rule.zone;
        let hash = zone.hash(&keys[start..]);
        slots[n] = Some(Keyed {
            rule: index,
            hash,
            shard: zone.shard_of(hash),
            span: start..keys.len(),
            params: Params {
                rate: zone.rate_for(plan),
                burst: rule.burst,
                delay: rule.delay,
                cost,
                max: zone.max,
            },
            now: zone.nanos(now),
        });
        n += 1;
    }
    let keyed = &slots[..n];
    if keyed.is_empty() {
        return Outcome::default();
    }

    // One lock per shard: a location lists a zone at most once (config), so no shard is
    // locked twice, which would deadlock.
    debug_assert!(order_is_strict(rules, keyed));
    // Lock every shard involved in the global order (zone, then shard); `guards[i]` is
    // the lock of `keyed[i]`.
    let mut order = [0usize; MAX_LIMITS];
    for (i, slot) in order.iter_mut().enumerate().take(n) {
        *slot = i;
    }
    let sort_key = |i: &usize| keyed[*i].as_ref().map(|k| (rules[k.rule].zone.id, k.shard));
    order[..n].sort_unstable_by_key(sort_key);
    let mut guards: [Option<Guard<'_>>; MAX_LIMITS] = Default::default();
    for &i in &order[..n] {
        if let Some(k) = &keyed[i] {
            guards[i] = Some(rules[k.rule].zone.lock(k.hash));
        }
    }

    let mut outcome = Outcome {
        ..Outcome::default()
    };
    let mut enforced_reject = false;
    for (k, guard) in keyed.iter().zip(guards.iter_mut()) {
        let (Some(k), Some(guard)) = (k, guard) else {
            continue;
        };
        let rule = &rules[k.rule];
        let decision = guard.check(k.hash, &keys[k.span.clone()], k.now, &k.params);
        if let Verdict::Reject { retry_after } = decision.verdict {
            if !rule.dry_run {
                enforced_reject = true;
                outcome.retry_after = outcome.retry_after.max(retry_after);
                outcome.rejected_by.get_or_insert(k.rule);
            }
        }
        outcome.applied.push(Applied {
            rule: k.rule,
            rate: k.params.rate,
            decision,
            dry_run: rule.dry_run,
        });
    }

    let mut status = Status::Passed;
    for ((k, guard), applied) in keyed
        .iter()
        .zip(guards.iter_mut())
        .zip(outcome.applied.iter_mut())
    {
        let (Some(k), Some(guard)) = (k, guard) else {
            continue;
        };
        let rule = &rules[k.rule];
        status = status.max(Status::of(applied.decision.verdict, rule.dry_run));
        if !applied.decision.admitted() {
            continue;
        }
        if enforced_reject {
            // Nothing is charged: this zone still has the room it reported.
            let d = &mut applied.decision;
            d.remaining = d.remaining.saturating_add(cost);
            continue;
        }
        let key = &keys[k.span.clone()];
        guard.charge(k.hash, key, k.now, &k.params, &rule.zone.idle);
        if let (Verdict::Delay(ns), false) = (applied.decision.verdict, rule.dry_run) {
            outcome.delay = outcome.delay.max(ns);
        }
        if rule.zone.kind == Kind::Concurrency {
            outcome.in_flight.push(InFlight {
                zone: Arc::clone(&rule.zone),
                hash: k.hash,
                key: key.into(),
                cost,
            });
        }
    }
    // Unlock before an in-flight count could be given back (its drop locks the shard).
    drop(guards);
    outcome.status = Some(status);
    outcome
}

/// Whether no two keyed rules share a zone (and so could share a shard).
fn order_is_strict(rules: &[Rule], keyed: &[Option<Keyed>]) -> bool {
    let mut ids: Vec<u64> = keyed
        .iter()
        .flatten()
        .map(|k| rules[k.rule].zone.id)
        .collect();
    ids.sort_unstable();
    ids.windows(2).all(|pair| pair[0] != pair[1])
}

/// [`decide_with`] for a location with one rule, the usual case: one lookup (check and
/// charge on the same entry) and no list of keys or guards. The request is charged exactly
/// when its one zone admits it, dry run or not, as in the general case.
fn decide_one(
    rule: &Rule,
    req: &RequestView<'_>,
    plan: Option<usize>,
    cost: u64,
    now: Instant,
    keys: &mut Vec<u8>,
) -> Outcome {
    let zone = &rule.zone;
    if !zone.template.render_append(req, keys) {
        return Outcome::default();
    }
    let key = &keys[..];
    let hash = zone.hash(key);
    let params = Params {
        rate: zone.rate_for(plan),
        burst: rule.burst,
        delay: rule.delay,
        cost,
        max: zone.max,
    };
    let now = zone.nanos(now);
    let decision = zone.decide(hash, key, now, &params);
    let mut outcome = Outcome::default();
    match (decision.verdict, rule.dry_run) {
        (Verdict::Delay(ns), false) => outcome.delay = ns,
        (Verdict::Reject { retry_after }, false) => {
            outcome.retry_after = retry_after;
            outcome.rejected_by = Some(0);
        }
        _ => {}
    }
    let status = Status::of(decision.verdict, rule.dry_run);
    if decision.admitted() && zone.kind == Kind::Concurrency {
        outcome.in_flight.push(InFlight {
            zone: Arc::clone(zone),
            hash,
            key: key.into(),
            cost,
        });
    }
    outcome.applied.push(Applied {
        rule: 0,
        rate: params.rate,
        decision,
        dry_run: rule.dry_run,
    });
    outcome.status = Some(status);
    outcome
}

/// `delay` of a rule from the config's `Option` (None = `nodelay`).
pub fn delay_of(delay: Option<u64>) -> u64 {
    delay.unwrap_or(NODELAY)
}
