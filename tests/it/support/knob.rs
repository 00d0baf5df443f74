//! An upstream whose latency and failures the test turns while it runs ([`Knobs`]):
//! what the adaptive tests slow down, break and watch.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use super::{text, Upstream};

/// What the test sets (any time) and reads.
#[derive(Debug, Default)]
pub struct Knobs {
    /// Each response waits this long before its head.
    pub latency_ms: AtomicU64,
    /// Failures per thousand, spread evenly and without chance: request n (from 1)
    /// gets a 500 when `n·‰/1000` passes a whole number.
    pub fail_permille: AtomicU64,
    /// Requests answered so far.
    pub served: AtomicU64,
    /// Requests in the upstream now, and the most there were at once.
    pub in_flight: AtomicU64,
    pub peak_in_flight: AtomicU64,
}

impl Knobs {
    pub fn set_latency(&self, ms: u64) {
        self.latency_ms.store(ms, Relaxed);
    }

    pub fn set_failures(&self, permille: u64) {
        self.fail_permille.store(permille, Relaxed);
    }

    /// Whether request number `n` (from 1) fails.
    fn fails(&self, n: u64) -> bool {
        let permille = self.fail_permille.load(Relaxed);
        n * permille / 1000 != (n - 1) * permille / 1000
    }
}

/// Starts an upstream turned by the returned knobs. It answers `200 ok` (or `500
/// failed`) after the knobs' latency.
pub async fn start() -> (Upstream, Arc<Knobs>) {
    let knobs = Arc::new(Knobs::default());
    let turned = knobs.clone();
    let upstream = Upstream::start(move |_req| {
        let knobs = turned.clone();
        async move {
            let now = knobs.in_flight.fetch_add(1, Relaxed) + 1;
            knobs.peak_in_flight.fetch_max(now, Relaxed);
            let latency = knobs.latency_ms.load(Relaxed);
            if latency > 0 {
                tokio::time::sleep(Duration::from_millis(latency)).await;
            }
            let n = knobs.served.fetch_add(1, Relaxed) + 1;
            knobs.in_flight.fetch_sub(1, Relaxed);
            if knobs.fails(n) {
                text(500, "failed")
            } else {
                text(200, "ok")
            }
        }
    })
    .await;
    (upstream, knobs)
}
