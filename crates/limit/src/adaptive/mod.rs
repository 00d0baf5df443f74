//! Adaptive protection's arithmetic (docs/config.md, "Adaptive rates"): what the load of
//! an upstream group looks like to a controller ([`Signals`]), what an operator asks of it
//! ([`Target`]), and the controllers themselves as pure functions of `(state, signals,
//! now)`. The shell's tick thread (`server::adapt`) measures, calls them and writes their
//! answers into the few atomics the request path reads ([`Factor`]).

pub mod aimd;
pub mod gradient;

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use super::Rate;
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

/// Bit 31 of a [`Factor`] word: the group has spare capacity (elastic limits apply).
const SPARE: u32 = 1 << 31;

/// A zone's rate factor in ‰ (1..=1000), and in bit 31 whether its upstream has spare
/// capacity, on cache lines of their own: the tick writes the word, every request of the
/// zone reads it with one `Relaxed` load ([`Factor::read`]).
#[repr(align(128))]
#[derive(Debug)]
pub struct Factor(AtomicU32);

impl Default for Factor {
    fn default() -> Self {
        Factor(AtomicU32::new(1000))
    }
}

/// One read of a [`Factor`] word.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FactorWord(u32);

impl FactorWord {
    pub fn permille(self) -> Permille {
        (self.0 & !SPARE).clamp(1, 1000)
    }

    pub fn spare(self) -> bool {
        self.0 & SPARE != 0
    }
}

impl Factor {
    pub fn read(&self) -> FactorWord {
        FactorWord(self.0.load(Relaxed))
    }

    /// The factor in ‰.
    pub fn permille(&self) -> Permille {
        self.read().permille()
    }

    /// Sets the factor (clamped to 1..=1000), keeping the spare flag.
    pub fn set(&self, permille: Permille) {
        let value = permille.clamp(1, 1000);
        let _ = self
            .0
            .fetch_update(Relaxed, Relaxed, |word| Some((word & SPARE) | value));
    }

    /// Sets the spare flag; whether it changed.
    pub fn set_spare(&self, spare: bool) -> bool {
        let before = if spare {
            self.0.fetch_or(SPARE, Relaxed)
        } else {
            self.0.fetch_and(!SPARE, Relaxed)
        };
        (before & SPARE != 0) != spare
    }
}

/// A limit item's `elastic`: the rate a key may reach while its zone's upstream has
/// spare capacity. A ceiling: a key whose own rate is higher keeps it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Elastic {
    /// `"3x"`: the key's rate times this many ‰ (1100..=100000).
    Times(u32),
    /// `"300r/s"`.
    Rate(Rate),
}

impl Elastic {
    /// The rate in force for a key whose own rate is `base` while there is spare capacity.
    pub fn ceiling(self, base: Rate) -> Rate {
        let raised = match self {
            Elastic::Times(permille) => {
                let count = base.count.get().saturating_mul(u64::from(permille));
                Rate::new(count.div_ceil(1000), base.period).unwrap_or(base)
            }
            Elastic::Rate(rate) => rate,
        };
        if raised.per_second() > base.per_second() {
            raised
        } else {
            base
        }
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
    /// controller when it follows the same upstream (a factor below a raised `min` is
    /// lifted to it).
    pub fn succeed(&self, target: Target) -> Adaptive {
        if target.upstream != self.target.upstream {
            return Adaptive::new(target);
        }
        if self.control.stepping().aimd.lift_to(target.min) {
            self.control.factor.set(target.min);
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Period;

    fn rate(count: u64, period: Period) -> Rate {
        Rate::new(count, period).expect("non-zero")
    }

    #[test]
    fn elastic_is_a_ceiling_over_the_keys_own_rate() {
        let ten = rate(10, Period::Hour);
        assert_eq!(Elastic::Times(3000).ceiling(ten), rate(30, Period::Hour));
        assert_eq!(
            Elastic::Times(1500).ceiling(rate(3, Period::Second)),
            rate(5, Period::Second)
        );
        let elastic = Elastic::Rate(rate(300, Period::Second));
        assert_eq!(
            elastic.ceiling(rate(100, Period::Second)),
            rate(300, Period::Second)
        );
        // A plan above the elastic rate keeps its own.
        assert_eq!(
            elastic.ceiling(rate(500, Period::Second)),
            rate(500, Period::Second)
        );
    }

    #[test]
    fn the_factor_word_keeps_the_spare_flag_apart() {
        let factor = Factor::default();
        assert!(factor.set_spare(true));
        assert!(!factor.set_spare(true), "no change");
        factor.set(250);
        let word = factor.read();
        assert_eq!((word.permille(), word.spare()), (250, true));
        assert!(factor.set_spare(false));
        assert_eq!((factor.permille(), factor.read().spare()), (250, false));
    }
}
