//! A location's `limit` list, ready to decide: [`Policy::decide`] is the one call the
//! pipeline makes, whether the zones live here or in Redis.
//!
//! Local zones decide together in their own stores ([`decision::decide`]). A list that
//! also names Redis zones ("Zones in Redis" in docs/config.md) asks those first, in list
//! order, each decided and charged by one script call; a rejection ends it. The local
//! zones follow, together. A request that a later zone rejects gives back what the Redis
//! zones before it charged. A key Redis rejected is rejected here, without asking Redis,
//! until it may pass. When Redis cannot answer, the zone follows its `on_error`.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use crate::limit::decision::{self, LimitRule};
use crate::limit::outcome::{Applied, Outcome};
use crate::limit::remote::{Call, Failure, ZoneSettings};
use crate::limit::settle::{Answer, Held, Pending};

use super::{on_error, settle};
use crate::limit::{Arrival, Decision, Params, Verdict};
use crate::shared::{Backend, Fetch, First, Leases, RemoteZone, Reply};

mod ban;

/// How long a Redis zone's ban is answered from this instance's copy before Redis is
/// asked again: the bound on how late a `DELETE` on another instance takes effect here
/// (see `super::penalty`).
pub const RECHECK: std::time::Duration = std::time::Duration::from_secs(1);
mod soft;

/// A location's zones, in list order, and what each request costs in them.
pub struct Policy {
    rules: Vec<LimitRule>,
    cost: u64,
    /// When some zones of the list are kept in Redis.
    redis: Option<RedisFirst>,
    /// Whether an item of the list carries a `ban` (then the pipeline asks through
    /// [`super::penalty::decide`]): known when the list is built, not looked for per request.
    bans: bool,
    /// Whether a zone's key reads `$host` (else the request's host is not looked up).
    reads_host: bool,
}

/// What a list with Redis zones needs besides its rules.
struct RedisFirst {
    backend: Arc<Backend>,
    /// The list's local zones, decided together after the Redis ones.
    local: Vec<LimitRule>,
    /// `local[i]` is item `local_index[i]` of the list.
    local_index: Vec<usize>,
    /// Indexed like the list: the leases of the item's zone (a Redis zone with `lease`).
    leases: Vec<Option<Arc<Leases>>>,
}

/// The leases of each Redis zone with `lease`, by zone name: one table per zone and
/// generation, which every location listing the zone shares.
pub type ZoneLeases = HashMap<Box<str>, Arc<Leases>>;

impl Policy {
    /// The policy of a `limit` list whose requests take `cost` units. `backend` serves
    /// the list's Redis zones, with their `leases`; without it, they decide in their
    /// local stores.
    pub fn new(
        rules: Vec<LimitRule>,
        cost: u64,
        backend: Option<&Arc<Backend>>,
        leases: &ZoneLeases,
    ) -> Policy {
        let redis = match backend {
            Some(backend) if rules.iter().any(|rule| rule.zone.redis.is_some()) => {
                let (local, local_index) = rules
                    .iter()
                    .enumerate()
                    .filter(|(_, rule)| rule.zone.redis.is_none())
                    .map(|(index, rule)| (rule.clone(), index))
                    .unzip();
                let leases = rules
                    .iter()
                    .map(|rule| leases.get(&*rule.zone.name).cloned())
                    .collect();
                Some(RedisFirst {
                    backend: Arc::clone(backend),
                    local,
                    local_index,
                    leases,
                })
            }
            _ => None,
        };
        let bans = rules.iter().any(|rule| rule.ban.is_some());
        let reads_host = rules.iter().any(|rule| rule.zone.template.reads_host());
        Policy {
            rules,
            cost,
            redis,
            bans,
            reads_host,
        }
    }

    /// The list, in order: an [`Applied::rule`] indexes it.
    /// The units each request takes in the list's zones (`cost`).
    pub(crate) fn cost(&self) -> u64 {
        self.cost
    }

    pub(crate) fn rules(&self) -> &[LimitRule] {
        &self.rules
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }

    /// Whether an item of the list carries a `ban`.
    pub(crate) fn has_bans(&self) -> bool {
        self.bans
    }

    /// Whether a zone's key reads the request's host (`$host`).
    pub(crate) fn reads_host(&self) -> bool {
        self.reads_host
    }

    /// Settles the charges a request took here by its `answer`, at `now` (see
    /// [`settle`]); `worker` is the worker serving it (Redis calls use its connection).
    pub fn settle(&self, pending: Vec<Pending>, answer: Answer, now: Instant, worker: usize) {
        if pending.is_empty() {
            return;
        }
        let backend = self.redis.as_ref().map(|redis| (&redis.backend, worker));
        settle::settle(&self.rules, pending, answer, now, backend);
    }

    /// The backend of the list's Redis zones (a ban imposed in one is written there).
    pub(crate) fn backend(&self) -> Option<&Arc<Backend>> {
        self.redis.as_ref().map(|redis| &redis.backend)
    }

    /// Whether the list is decided here with nothing to wait for: every zone local, none
    /// in Redis, and no `ban` (whose penalty box may ask Redis). Then
    /// [`Policy::decide_at_once`] decides it.
    pub(crate) fn at_once(&self) -> bool {
        self.redis.is_none() && !self.bans
    }

    /// Applies every zone of a list decided at once ([`Policy::at_once`]).
    pub(crate) fn decide_at_once(&self, arrival: &Arrival) -> Outcome {
        decision::decide_keyed(
            &self.rules,
            &arrival.keys,
            arrival.plan,
            self.cost,
            arrival.now,
        )
    }

    /// Applies every zone of the list to one request.
    pub(crate) async fn decide(&self, arrival: &Arrival) -> Outcome {
        match &self.redis {
            None => self.decide_at_once(arrival),
            // Boxed: the request future stays as small as without Redis zones.
            Some(redis) => Box::pin(self.decide_redis_first(redis, arrival)).await,
        }
    }

    /// The list's local zones, decided together after its Redis ones.
    fn decide_local(&self, redis: &RedisFirst, arrival: &Arrival) -> Outcome {
        let keys = arrival.keys.select(&redis.local_index);
        decision::decide_keyed(&redis.local, &keys, arrival.plan, self.cost, arrival.now)
    }

    async fn decide_redis_first(&self, redis: &RedisFirst, arrival: &Arrival) -> Outcome {
        let mut outcome = Outcome::default();
        let mut charged = Vec::new();
        let mut rejected = false;
        for (index, rule) in self.rules.iter().enumerate() {
            let Some(settings) = rule.zone.redis else {
                continue;
            };
            let Some(key) = arrival.keys.get(index) else {
                continue;
            };
            let params = rule.params(arrival.keys.plan(index).or(arrival.plan), self.cost);
            let zone = ZoneCall {
                index,
                rule,
                settings,
                key,
                params,
                leases: redis.leases.get(index).and_then(Option::as_deref),
                remote: RemoteZone::new(&redis.backend, &rule.zone),
            };
            let decision = zone.decide(arrival, &mut outcome, &mut charged).await;
            // After `decide`: a lease fetch it made is over, and its waiters go on.
            let (decision, soft) = match rule.soft {
                Some(share) if zone.lane_may_cover(&decision, &outcome) => {
                    let lane = zone.soft(share, arrival, decision);
                    lane.await.into_outcome(&mut outcome, &mut charged, index)
                }
                _ => (decision, false),
            };
            outcome.add(Applied {
                rule: index,
                rate: params.rate,
                decision,
                dry_run: rule.dry_run,
                soft,
            });
            if outcome.rejected_by.is_some() || outcome.unavailable {
                rejected = true;
                break;
            }
        }
        if !rejected && !redis.local.is_empty() {
            let local = self.decide_local(redis, arrival);
            rejected = local.rejected();
            let to_list = |rule: usize| redis.local_index.get(rule).copied().unwrap_or(0);
            for applied in local.applied.iter() {
                let rule = to_list(applied.rule);
                outcome.add(Applied { rule, ..*applied });
            }
            outcome.in_flight = local.in_flight;
            for pending in local.settle {
                let rule = to_list(pending.rule);
                outcome.settle.push(Pending { rule, ..pending });
            }
        }
        if rejected {
            // A rejected request is never answered by its upstream: nothing to settle.
            outcome.settle.clear();
            if !charged.is_empty() {
                let calls = charged.into_iter().map(|(_, call)| call).collect();
                settle::refund(&redis.backend, calls, arrival.now, arrival.worker);
            }
        } else {
            for (index, call) in charged {
                if self.rules.get(index).is_some_and(|rule| rule.settles) {
                    outcome.settle.push(Pending {
                        rule: index,
                        params: call.params,
                        held: Held::Remote(call),
                    });
                }
            }
        }
        outcome
    }
}

/// One Redis zone of the list, asked about one request.
struct ZoneCall<'a> {
    /// Its index in the list.
    index: usize,
    rule: &'a LimitRule,
    settings: ZoneSettings,
    /// The request's key in the zone.
    key: &'a [u8],
    params: Params,
    /// The zone's leases (`lease`), if it takes any.
    leases: Option<&'a Leases>,
    /// The zone in Redis.
    remote: RemoteZone<'a>,
}

impl ZoneCall<'_> {
    /// The zone's decision: a remembered rejection, else Redis's, else `on_error`'s. An
    /// admitted request's call joins `charged`, a failure `outcome.redis_failures`.
    async fn decide(
        &self,
        arrival: &Arrival,
        outcome: &mut Outcome,
        charged: &mut Vec<(usize, Call)>,
    ) -> Decision {
        let zone = &self.rule.zone;
        let zone_now = zone.nanos(arrival.now);
        // An item with `ban` leases nothing: each of its calls reads the key's ban too.
        let leases = self.leases.filter(|_| self.rule.ban.is_none());
        // Held until the lease it fetches is in the table: the key's other requests wait.
        let mut fetch = None;
        if let Some(leases) = leases {
            match self.leased(leases, zone_now, charged).await {
                First::Spent(decision) => return decision,
                First::Fetch(own) => fetch = Some(own),
                First::Ask => {}
                First::Failed(failure) => return self.failed(failure, arrival, outcome),
            }
        }
        if let Some(left) = self.remembered(zone_now) {
            return Decision {
                verdict: Verdict::Reject { retry_after: left },
                remaining: 0,
                reset: left,
            };
        }
        // Only the key's one fetch asks for a lease: units others took beyond what the
        // table can hold would be charged and dropped.
        let want = fetch.as_ref().map_or(0, Fetch::want);
        let call = self.remote.call(self.key, self.params, want);
        let answer = match &self.rule.ban {
            // The penalty box's path (`policy/ban.rs`): the script reads the ban key too.
            Some(ban) => {
                let banned = self.decide_banned(&call, ban, arrival, outcome);
                banned.await.map(|decision| Reply {
                    decision,
                    granted: 0,
                })
            }
            None => self.remote.decide(&call, arrival.now, arrival.worker).await,
        };
        match answer {
            Ok(Reply {
                mut decision,
                granted,
            }) => {
                match decision.verdict {
                    Verdict::Reject { retry_after } if retry_after > 0 => {
                        let until = zone_now.saturating_add(retry_after);
                        zone.rejections.remember(self.key, until, zone_now);
                    }
                    Verdict::Reject { .. } => {}
                    Verdict::Pass | Verdict::Delay(_) => charged.push((self.index, call)),
                }
                if let (Some(leases), 1..) = (leases, granted) {
                    let window = self.params.rate.period.nanos();
                    let leased = (self.key, &self.params);
                    leases.add(leased, granted, zone_now, window, &decision);
                    decision.remaining = decision.remaining.saturating_add(granted);
                }
                decision
            }
            Err(failure) => {
                if let Some(fetch) = fetch.as_mut() {
                    fetch.failed(failure);
                }
                self.failed(failure, arrival, outcome)
            }
        }
    }

    /// Redis could not answer (this request's call, or the fetch it waited for).
    fn failed(&self, failure: Failure, arrival: &Arrival, outcome: &mut Outcome) -> Decision {
        outcome.redis_failures.push((self.index, failure));
        self.on_error(arrival, outcome)
    }

    /// A leased zone's first step: spend leased units, or fetch a lease (the key's one
    /// fetch), or ask Redis for this request's units, or take the failure of the fetch it
    /// waited for (one `timeout` in all). Spent units Redis counted already; they are
    /// given back through Redis like a charge if a later zone rejects the request (or its
    /// answer settles it).
    async fn leased<'z>(
        &self,
        leases: &'z Leases,
        zone_now: u64,
        charged: &mut Vec<(usize, Call)>,
    ) -> First<'z> {
        let wait = self.remote.timeout();
        let first = leases.first(self.key, &self.params, zone_now, wait).await;
        if let First::Spent(_) = first {
            charged.push((self.index, self.remote.call(self.key, self.params, 0)));
        }
        first
    }

    /// The decision when Redis could not answer, as the zone's `on_error` says.
    fn on_error(&self, arrival: &Arrival, outcome: &mut Outcome) -> Decision {
        let zone = on_error::Zone {
            index: self.index,
            rule: self.rule,
            key: self.key,
            params: self.params,
        };
        let live = self.remote.instances();
        on_error::decide(&zone, self.settings, live, arrival.now, outcome)
    }
}
