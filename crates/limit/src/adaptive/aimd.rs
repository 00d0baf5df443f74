//! AIMD on a zone's rate factor (docs/config.md, "Adaptive rates"): while a signal is at
//! or over its target, the factor is cut multiplicatively (×[`DECREASE`]) down to the
//! zone's `min`; while every signal is known and under 90 % of its target, it grows
//! additively (+[`INCREASE`]) back to 1. Anything else holds, an unknown signal included:
//! too few responses never read as fine.
//!
//! The bounds the tests check (one step per `interval`):
//! - **B1.** Latency that does not depend on the load moves the factor one way only: a
//!   slow upstream takes it to `min` within ⌈ln min / ln β⌉ steps (5 for 0.25) and never
//!   raises it; a fast one takes it to 1 within ⌈(1 − min)/α⌉ steps (8) and never cuts
//!   it. One change of the upstream thus causes at most one reversal.
//! - **B2.** Against a threshold (over while `f > f*`), once settled the factor stays in
//!   `[β·f*, f* + α]`: a bounded sawtooth that neither grows nor drifts.
//!
//! One exception to cutting: right after a cut, a signal that has already improved by
//! 10 % or more holds for one step. The upstream's queue is still draining, and a second
//! cut then would overshoot.

use std::time::Duration;

use super::{Permille, Signals, Target};

/// β: the factor kept by a cut, in ‰.
pub const DECREASE: Permille = 750;
/// α: what a raise adds, in ‰.
pub const INCREASE: Permille = 100;
/// A signal counts as under its target below this share of it (10 % hysteresis), in ‰.
const UNDER: u64 = 900;

/// Which signal a reading is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Signal {
    /// The latency at the target's percentile, in ms.
    Latency,
    /// The failure share, in ‰.
    Failures,
    /// Requests in flight.
    InFlight,
}

/// One signal against its target, in the signal's unit (µs for latency).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reading {
    pub signal: Signal,
    /// `None` while unknown (under 10 responses).
    pub value: Option<u64>,
    pub target: u64,
}

impl Reading {
    fn over(&self) -> bool {
        self.value.is_some_and(|v| v >= self.target)
    }

    fn under(&self) -> bool {
        self.value
            .is_some_and(|v| v.saturating_mul(1000) < self.target.saturating_mul(UNDER))
    }

    /// The signal's name as logs and `/status` show it: `latency_p90`, `failure_ratio`,
    /// `in_flight`.
    pub fn name(&self, percentile: u8) -> String {
        match self.signal {
            Signal::Latency => format!("latency_p{percentile}"),
            Signal::Failures => "failure_ratio".to_owned(),
            Signal::InFlight => "in_flight".to_owned(),
        }
    }

    /// Value (when known) and target in the units shown: ms, a ratio, a count.
    pub fn shown(&self) -> (Option<f64>, f64) {
        let unit = match self.signal {
            Signal::Latency | Signal::Failures => 1000.0,
            Signal::InFlight => 1.0,
        };
        let show = |n: u64| n as f64 / unit;
        (self.value.map(show), show(self.target))
    }

    /// value / target in ‰, for picking the worst signal (unknown counts as 0).
    fn load(&self) -> u64 {
        self.value.unwrap_or(0).saturating_mul(1000) / self.target.max(1)
    }
}

/// What one step changed: the factor before and after, and the signal that decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Change {
    pub from: Permille,
    pub to: Permille,
    pub reading: Reading,
}

impl Change {
    pub fn is_cut(&self) -> bool {
        self.to < self.from
    }
}

/// A zone's controller state.
#[derive(Clone, Debug)]
pub struct Aimd {
    factor: Permille,
    /// The reading of the last step when it was a cut.
    last_cut: Option<Reading>,
    /// The deciding reading of the last step, for `/status`.
    last_reading: Option<Reading>,
}

impl Default for Aimd {
    fn default() -> Self {
        Aimd {
            factor: 1000,
            last_cut: None,
            last_reading: None,
        }
    }
}

impl Aimd {
    /// The factor in ‰.
    pub fn factor(&self) -> Permille {
        self.factor
    }

    /// Raises the factor to `floor` if it is below it (a reload raised `min`: the factor
    /// must stay within the new bounds); whether it moved.
    pub fn lift_to(&mut self, floor: Permille) -> bool {
        let below = self.factor < floor;
        if below {
            self.factor = floor;
        }
        below
    }

    /// The deciding reading of the last step.
    pub fn last_reading(&self) -> Option<Reading> {
        self.last_reading
    }

    /// Whether the group has spare capacity for `elastic` limits: the factor is 1, an
    /// `in_flight` target is set, and every configured signal is under 90 % of its
    /// target. Latency and failures unknown for want of responses (an idle group, or one
    /// a burst has just woken) leave it to in-flight, which is always known: a group with
    /// little in flight and too few answers to judge has the most room of all, and one
    /// that stalls fills its in-flight count within a tick. Judged every tick, so that it
    /// clears as soon as in-flight rises.
    pub fn spare(&self, s: &Signals, t: &Target) -> bool {
        let room = |r: &Reading| r.under() || r.value.is_none();
        let readings = readings(s, t);
        let in_flight_under = readings
            .iter()
            .any(|r| r.signal == Signal::InFlight && r.under());
        self.factor == 1000 && in_flight_under && readings.iter().all(room)
    }

    /// One step on the signals of the last interval (the caller keeps the time: one
    /// step per `interval`); the change, if the factor changed.
    pub fn step(&mut self, s: &Signals, t: &Target) -> Option<Change> {
        let readings = readings(s, t);
        let worst = readings.iter().copied().max_by_key(Reading::load)?;
        self.last_reading = Some(worst);
        let min = t.min.clamp(1, 1000);
        let from = self.factor;
        let over = readings.iter().copied().filter(Reading::over);
        let deciding = over.max_by_key(Reading::load);
        let to = match deciding {
            Some(reading) if self.draining(reading) => {
                self.last_cut = None;
                return None;
            }
            Some(reading) => {
                self.last_cut = Some(reading);
                (from * DECREASE / 1000).max(min)
            }
            None if readings.iter().all(Reading::under) => {
                self.last_cut = None;
                (from + INCREASE).min(1000)
            }
            None => {
                self.last_cut = None;
                from
            }
        };
        self.factor = to;
        let reading = deciding.unwrap_or(worst);
        (to != from).then_some(Change { from, to, reading })
    }

    /// Whether `now_over` has improved by 10 % or more since the cut of the last step.
    fn draining(&self, now_over: Reading) -> bool {
        let Some(cut) = self.last_cut.filter(|c| c.signal == now_over.signal) else {
            return false;
        };
        match (cut.value, now_over.value) {
            (Some(then), Some(now)) => now.saturating_mul(10) <= then.saturating_mul(9),
            _ => false,
        }
    }
}

/// The configured signals against their targets.
fn readings(s: &Signals, t: &Target) -> Vec<Reading> {
    let micros = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX);
    let mut readings = Vec::with_capacity(3);
    if let Some(latency) = t.latency {
        readings.push(Reading {
            signal: Signal::Latency,
            value: s.percentile(t.percentile).map(micros),
            target: micros(latency),
        });
    }
    if let Some(failures) = t.failures {
        readings.push(Reading {
            signal: Signal::Failures,
            value: s.failure_share.map(u64::from),
            target: u64::from(failures),
        });
    }
    if let Some(in_flight) = t.in_flight {
        readings.push(Reading {
            signal: Signal::InFlight,
            value: Some(s.in_flight),
            target: in_flight,
        });
    }
    readings
}

#[cfg(test)]
mod tests;
