//! Adaptive protection's arithmetic (docs/config.md, "Adaptive rates"): what the load of
//! an upstream group looks like to a controller ([`Signals`]), what an operator asks of it
//! ([`Target`]), and the controllers themselves as pure functions of `(state, signals,
//! now)`. The shell's tick thread (`server::adapt`) measures, calls them and writes their
//! answers into the few atomics the request path reads ([`Factor`]).

pub mod aimd;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use aimd::Aimd;

/// A share in thousandths: 1000 is all of it.
pub type Permille = u32;

/// Fewer responses than this in a window make its percentiles and failure share unknown:
/// unknown is never read as fine.
pub const MIN_SAMPLES: u64 = 10;

/// An upstream group's load over one window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Signals {
    /// Requests on the group's servers when the window was read.
    pub in_flight: u64,
    /// Latency samples in the window (response heads, and timeouts counted at
    /// `read_timeout`).
    pub samples: u64,
    /// Response-head latency percentiles; `None` under [`MIN_SAMPLES`].
    pub p50: Option<Duration>,
    pub p90: Option<Duration>,
    pub p99: Option<Duration>,
    /// Requests that failed (5xx, timeout, refused, broken) per thousand that ended;
    /// `None` under [`MIN_SAMPLES`] ended requests.
    pub failure_share: Option<Permille>,
}

impl Signals {
    /// The latency at percentile `p` (50, 90 or 99; others read the nearest of those).
    pub fn percentile(&self, p: u8) -> Option<Duration> {
        match p {
            0..=70 => self.p50,
            71..=95 => self.p90,
            _ => self.p99,
        }
    }
}

/// What a zone's `adaptive` table asks: the upstream it follows and the targets its
/// factor is steered by. At least one target is set (config checks).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub upstream: String,
    /// Latency target for [`Target::percentile`].
    pub latency: Option<Duration>,
    /// 50–99: the percentile compared with `latency`.
    pub percentile: u8,
    /// Failure share target, in ‰.
    pub failures: Option<Permille>,
    /// In-flight target for the group.
    pub in_flight: Option<u64>,
    /// Floor of the factor, in ‰ (10–1000).
    pub min: Permille,
    /// One controller step, and the window it judges.
    pub interval: Duration,
}

/// A zone's rate factor in ‰ (1..=1000), on cache lines of its own: the tick writes it,
/// every request of the zone reads it with one `Relaxed` load.
#[repr(align(128))]
#[derive(Debug)]
pub struct Factor(AtomicU32);

impl Default for Factor {
    fn default() -> Self {
        Factor(AtomicU32::new(1000))
    }
}

impl Factor {
    /// The factor in ‰.
    pub fn permille(&self) -> Permille {
        self.0.load(Relaxed).clamp(1, 1000)
    }

    /// Sets the factor, clamped to 1..=1000.
    pub fn set(&self, permille: Permille) {
        self.0.store(permille.clamp(1, 1000), Relaxed);
    }
}

/// A zone's `adaptive`: what it follows, and the controlled state, which a reload hands
/// to the zone's successor while it follows the same upstream.
#[derive(Debug)]
pub struct Adaptive {
    pub target: Target,
    pub control: Arc<Control>,
}

impl Adaptive {
    pub fn new(target: Target) -> Adaptive {
        Adaptive {
            target,
            control: Arc::default(),
        }
    }

    /// The zone built from `target` on reload: it keeps this one's factor and
    /// controller when it follows the same upstream.
    pub fn succeed(&self, target: Target) -> Adaptive {
        if target.upstream != self.target.upstream {
            return Adaptive::new(target);
        }
        Adaptive {
            target,
            control: self.control.clone(),
        }
    }
}

/// The factor the request path reads, and what only the tick thread touches.
#[derive(Debug, Default)]
pub struct Control {
    pub factor: Factor,
    stepping: Mutex<Stepping>,
    /// Changes of the factor, down and up (`tollgate_zone_rate_factor_changes_total`).
    pub cuts: AtomicU64,
    pub raises: AtomicU64,
}

/// The controller and when it last stepped (the tick's clock, passed in).
#[derive(Debug, Default)]
pub struct Stepping {
    pub aimd: Aimd,
    pub last_step: Option<Instant>,
}

impl Control {
    /// The controller; the tick thread and `/status` take it, never a request.
    pub fn stepping(&self) -> MutexGuard<'_, Stepping> {
        self.stepping
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Puts `change` in force and counts it.
    pub fn apply(&self, change: &aimd::Change) {
        self.factor.set(change.to);
        let counter = if change.is_cut() {
            &self.cuts
        } else {
            &self.raises
        };
        counter.fetch_add(1, Relaxed);
    }
}
