//! Charges settled by the answer ("Charging by the answer" in docs/config.md), and the
//! Redis calls the answer does not wait for. The limiter settles its own stores
//! (`limit::settle::settle`) and hands back what is due in Redis; it is sent here, on a
//! task of its own.

use std::sync::Arc;
use std::time::Instant;

use crate::limit::decision::LimitRule;
use crate::limit::remote::Call;
use crate::limit::settle::{self, Answer, Change, Pending};
use crate::shared::{Backend, Mode};

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
            let mode = match change {
                Change::Refund(_) => Mode::Refund,
                Change::Charge(_) => Mode::Charge,
            };
            (call, mode)
        });
        in_background(
            backend,
            calls.collect(),
            now,
            worker,
            "Redis settlement failed",
        );
    }
}

/// Gives back the Redis charges of a request a later zone rejected, in the background:
/// the answer does not wait for it.
pub(crate) fn refund(backend: &Arc<Backend>, charged: Vec<Call>, now: Instant, worker: usize) {
    let calls = charged
        .into_iter()
        .map(|call| (call, Mode::Refund))
        .collect();
    in_background(backend, calls, now, worker, "Redis refund failed");
}

/// Makes `calls` one after the other on a task of their own; a failure is logged at
/// debug level (the request they belong to is answered already).
fn in_background(
    backend: &Arc<Backend>,
    calls: Vec<(Call, Mode)>,
    now: Instant,
    worker: usize,
    failed: &'static str,
) {
    let backend = Arc::clone(backend);
    tokio::spawn(async move {
        for (call, mode) in calls {
            if let Err(failure) = backend.call(&call, mode, now, worker).await {
                tracing::debug!(failure = failure.label(), "{failed}");
            }
        }
    });
}
