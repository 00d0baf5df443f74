//! A zone's soft lane (`soft` on a limit item; the arithmetic is [`crate::soft`]):
//! for a local zone, a second store holding each key's lane state; for a Redis zone, the
//! lane rejections Redis told of (the lane's state is in Redis).
//!
//! A zone has a lane only when some location gives it a `soft` share. The lane's store
//! has a quarter of the zone's `size` (so a zone with a lane holds up to 1.25 × `size`,
//! which `/status` shows) and evicts as the zone's own does (least recently used first).
//! A key enters it only when its base limit rejected it and the lane admitted it, so a
//! spray of new keys, each within its limit, never reaches it; an evicted key's next
//! request over its limit finds a fresh lane, which lets it through at most one more
//! share (docs/config.md says so).

use std::sync::Arc;

use super::super::remote::Rejections;
use super::super::soft::{self, Share};
use super::super::store::Stats;
use super::super::{Decision, Params, Rate};
use super::{adjust, forget_in, Change, Guard, Spec, Stores, Zone};

/// See the [module docs](self).
pub struct Lane {
    /// The lane's keys in a local zone; `None` in a Redis zone.
    stores: Option<Arc<Stores>>,
    /// Under which a lane key counts as drained: the zone's slowest rate at the
    /// smallest share any location gives it, so no key is dropped while a slower lane
    /// would still remember it.
    idle: Params,
    /// Lane rejections Redis told of, remembered until they may pass (Redis zones): a key
    /// over both its limit and its lane then costs Redis nothing.
    pub rejections: Rejections,
}

impl Lane {
    /// The lane of a zone built from `spec`, its smallest share `share` and its slowest
    /// rate `slowest`, keeping `kept` (the lane of the zone it succeeds) if any.
    pub(super) fn new(spec: &Spec, share: Share, slowest: Rate, kept: Option<Arc<Stores>>) -> Lane {
        let stores = match (&spec.redis, kept) {
            (Some(_), _) => None,
            (None, Some(kept)) => Some(kept),
            (None, None) => Some(Arc::new(Stores::new(spec.algorithm, spec.size / 4))),
        };
        let idle = Params {
            max: spec.max,
            ..soft::lane_params(&Params::new(slowest), share, spec.algorithm)
        };
        Lane {
            stores,
            idle,
            rejections: Rejections::default(),
        }
    }

    /// The store, for the zone that succeeds this one on reload.
    pub(super) fn stores(&self) -> Option<Arc<Stores>> {
        self.stores.clone()
    }

    pub(super) fn stats(&self) -> Option<Stats> {
        let stores = self.stores.as_deref()?;
        Some(dispatch!(Stores, stores, s => s.stats()))
    }

    /// Forgets `key`'s lane state; whether it was stored.
    pub(super) fn forget(&self, key: &[u8]) -> bool {
        self.rejections.forget(key);
        let Some(stores) = self.stores.as_deref() else {
            return false;
        };
        dispatch!(Stores, stores, s => forget_in(s, key))
    }
}

/// A key's place in a zone's lane: its hash and shard there (the lane's store hashes
/// with its own seed).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LaneKey {
    pub hash: u64,
    pub shard: usize,
}

impl Zone {
    /// The lane's rejections (a Redis zone with a lane).
    pub fn lane_rejections(&self) -> Option<&Rejections> {
        self.lane.as_ref().map(|lane| &lane.rejections)
    }

    /// Where `key` is in the zone's local lane; `None` without one.
    pub(crate) fn lane_key(&self, key: &[u8]) -> Option<LaneKey> {
        let stores = self.lane.as_ref()?.stores.as_deref()?;
        let hash = dispatch!(Stores, stores, s => s.hash(key));
        let shard = dispatch!(Stores, stores, s => s.shard_of(hash));
        Some(LaneKey { hash, shard })
    }

    /// One request's whole decision in the lane alone (check, and charge if admitted);
    /// `None` without a local lane.
    pub(crate) fn decide_lane(
        &self,
        at: LaneKey,
        key: &[u8],
        now: u64,
        p: &Params,
    ) -> Option<Decision> {
        let lane = self.lane.as_ref()?;
        let stores = lane.stores.as_deref()?;
        let idle = &lane.idle;
        Some(dispatch!(Stores, stores, s => s.decide(at.hash, key, now, p, idle)))
    }

    /// Locks the lane's shard of `at`; `None` without a local lane.
    pub(crate) fn lock_lane(&self, at: LaneKey) -> Option<Guard<'_>> {
        let stores = self.lane.as_ref()?.stores.as_deref()?;
        Some(dispatch!(Stores => Guard, stores, s => s.lock(at.hash)))
    }

    /// Under which a lane key counts as drained (see [`Lane`]); the zone's own without
    /// a lane.
    pub(crate) fn lane_idle(&self) -> &Params {
        self.lane.as_ref().map_or(&self.idle, |lane| &lane.idle)
    }

    /// [`Zone::adjust`] in the lane: settles a charge a soft admission made there.
    pub(crate) fn adjust_lane(&self, hash: u64, key: &[u8], now: u64, p: &Params, change: Change) {
        if let Some(lane) = &self.lane {
            if let Some(stores) = lane.stores.as_deref() {
                adjust(stores, hash, key, now, p, &lane.idle, change);
            }
        }
    }
}
