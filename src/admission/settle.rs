//! Charges settled by the answer ("Charging by the answer" in docs/config.md), and the
//! Redis calls the answer does not wait for. The limiter settles its own stores
//! (`limit::settle::settle`) and hands back what is due in Redis; it is sent here, on a
//! task of its own.

use std::sync::Arc;
use std::time::Instant;

use crate::limit::decision::LimitRule;
use crate::limit::remote::Call;
use crate::limit::settle::{self, Answer, Change, Pending};
use crate::shared::{in_background, Backend, Settle};

/// Settles `pending` (charges of a list of `rules`) by `answer` at `now`: local zones at
/// once, Redis ones in the background through `backend` on `worker`'s connection.
pub(crate) fn settle(
    rules: &[LimitRule],
    pending: Vec<Pending>,
    answer: Answer,
    now: Instant,
    backend: Option<(&Arc<Backend>, usize)>,
) {
    let remote = settle::settle(rules, pending, answer, now);
    if let (false, Some((backend, worker))) = (remote.is_empty(), backend) {
        let calls = remote.into_iter().map(|(call, change)| {
            let settle = match change {
                Change::Refund(_) => Settle::Refund,
                Change::Charge(_) => Settle::Charge,
            };
            (call, settle)
        });
        in_background(backend, calls.collect(), now, worker);
    }
}

/// Gives back the Redis charges of a request a later zone rejected, in the background:
/// the answer does not wait for it.
pub(crate) fn refund(backend: &Arc<Backend>, charged: Vec<Call>, now: Instant, worker: usize) {
    let calls = charged.into_iter().map(|call| (call, Settle::Refund));
    in_background(backend, calls.collect(), now, worker);
}
