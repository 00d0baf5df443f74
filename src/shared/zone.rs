//! One Redis zone as the admission layer speaks to it: the one way in to Redis for a
//! request's decision. It names the zone's keys in Redis (`redis_key`, `soft_key`,
//! `ban_key_of`), picks the script mode, and counts the zone's instances; the caller
//! deals in the limiter's values only (`limit::remote::Call`, `Decision`).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::backend::Backend;
use super::bans::{ban_key_of, share_ban};
use super::scripts::{BanOr, Mode, Reply};
use super::{redis_key, soft_key};
use crate::limit::bans::Entry;
use crate::limit::remote::{Call, Failure};
use crate::limit::zone::Zone;
use crate::limit::{Arrival, Params};

/// A Redis zone and the backend that serves it.
#[derive(Clone, Copy)]
pub(crate) struct RemoteZone<'a> {
    backend: &'a Arc<Backend>,
    zone: &'a Arc<Zone>,
}

impl<'a> RemoteZone<'a> {
    pub(crate) fn new(backend: &'a Arc<Backend>, zone: &'a Arc<Zone>) -> RemoteZone<'a> {
        RemoteZone { backend, zone }
    }

    /// The call that decides `key` under `params`, taking a lease of `want` units.
    pub(crate) fn call(&self, key: &[u8], params: Params, want: u64) -> Call {
        Call {
            algorithm: self.zone.algorithm,
            key: redis_key(&self.zone.name, key),
            params,
            want,
        }
    }

    /// The call that decides `key`'s soft lane under `params`.
    pub(crate) fn lane_call(&self, key: &[u8], params: Params) -> Call {
        Call {
            algorithm: self.zone.algorithm,
            key: soft_key(&self.zone.name, key),
            params,
            want: 0,
        }
    }

    /// Redis's decision for `call` (charged when admitted), within `timeout`.
    pub(crate) async fn decide(
        &self,
        call: &Call,
        now: Instant,
        worker: usize,
    ) -> Result<Reply, Failure> {
        self.backend.call(call, Mode::Decide, now, worker).await
    }

    /// Redis's decision for `call` to `key`, unless the key is banned there (one call
    /// that reads the ban first).
    pub(crate) async fn decide_banned(
        &self,
        call: &Call,
        key: &[u8],
        now: Instant,
        worker: usize,
    ) -> Result<BanOr, Failure> {
        let ban_key = ban_key_of(&call.key, &self.zone.name, key);
        self.backend.decide_banned(call, &ban_key, now, worker).await
    }

    /// Writes a ban just imposed here to Redis, in the background.
    pub(crate) fn share_ban(&self, key: &[u8], entry: &Entry, arrival: &Arrival) {
        let zone = &self.zone;
        share_ban(self.backend, &zone.name, &zone.bans, key, entry, arrival);
    }

    /// The instances last counted in the zone (`None` before any heartbeat answered).
    pub(crate) fn instances(&self) -> Option<u64> {
        self.backend.fleet().live(&self.zone.name)
    }

    /// How long a call may take (`[redis] timeout`).
    pub(crate) fn timeout(&self) -> Duration {
        self.backend.settings().timeout
    }

    /// The time after a wait on Redis, by the clock the backend's maker handed it.
    pub(crate) fn now(&self) -> Instant {
        self.backend.now()
    }
}

/// Sends `calls` (charges given back or owed by requests already answered) one after the
/// other on a task of their own; a failure is logged at debug level.
pub(crate) fn in_background(
    backend: &Arc<Backend>,
    calls: Vec<(Call, Settle)>,
    now: Instant,
    worker: usize,
) {
    let backend = Arc::clone(backend);
    tokio::spawn(async move {
        for (call, settle) in calls {
            let mode = match settle {
                Settle::Refund => Mode::Refund,
                Settle::Charge => Mode::Charge,
            };
            if let Err(failure) = backend.call(&call, mode, now, worker).await {
                tracing::debug!(failure = failure.label(), "a Redis refund or charge failed");
            }
        }
    });
}

/// What a background call does to a charge.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Settle {
    /// Gives the call's units back.
    Refund,
    /// Charges the call's units, past the limit if need be (what an answer says is owed).
    Charge,
}
