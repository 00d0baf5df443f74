//! An upstream whose latency, failures and capacity the test turns while it runs
//! ([`Knobs`]): what the adaptive tests slow down, break, overload and watch.

use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Semaphore;

use super::{text, Upstream};

/// What the test sets (any time) and reads.
#[derive(Debug)]
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
    /// Workers (0: as many as there are requests). With C workers a request waits for
    /// one, in arrival order, then holds it for the latency: a server of C workers with
    /// service time S, whose latency is `S · max(1, n / C)` with n requests in it.
    capacity: AtomicU64,
    workers: Arc<Semaphore>,
}

impl Knobs {
    pub fn set_latency(&self, ms: u64) {
        self.latency_ms.store(ms, Relaxed);
    }

    pub fn set_failures(&self, permille: u64) {
        self.fail_permille.store(permille, Relaxed);
    }

    /// Sets the workers (at least 1); lowering them waits until enough are free.
    pub async fn set_capacity(&self, workers: u64) {
        let workers = workers.max(1);
        let old = self.capacity.swap(workers, Relaxed);
        if old == 0 {
            self.workers.add_permits(workers as usize);
        } else if workers > old {
            self.workers.add_permits((workers - old) as usize);
        } else if workers < old {
            let fewer = u32::try_from(old - workers).expect("a few workers");
            self.workers
                .acquire_many(fewer)
                .await
                .expect("the semaphore is never closed")
                .forget();
        }
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
    let knobs = Arc::new(Knobs {
        latency_ms: AtomicU64::new(0),
        fail_permille: AtomicU64::new(0),
        served: AtomicU64::new(0),
        in_flight: AtomicU64::new(0),
        peak_in_flight: AtomicU64::new(0),
        capacity: AtomicU64::new(0),
        workers: Arc::new(Semaphore::new(0)),
    });
    let turned = knobs.clone();
    let upstream = Upstream::start(move |_req| {
        let knobs = turned.clone();
        async move {
            let now = knobs.in_flight.fetch_add(1, Relaxed) + 1;
            knobs.peak_in_flight.fetch_max(now, Relaxed);
            let worker = match knobs.capacity.load(Relaxed) {
                0 => None,
                _ => knobs.workers.clone().acquire_owned().await.ok(),
            };
            let latency = knobs.latency_ms.load(Relaxed);
            if latency > 0 {
                tokio::time::sleep(Duration::from_millis(latency)).await;
            }
            drop(worker);
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
