//! The concurrency limit of an upstream group (`max_in_flight = "auto"`): Envoy's gradient
//! controller on the p90 of the response-head latency, with the guard of Netflix's
//! Gradient2 against growing while the group does not use its limit, and a periodic
//! probe that measures the latency at the floor again (the minimum round-trip time).
//!
//! The law, once a window closes (see **Windows**):
//!
//! ```text
//! g  = clamp((1 + b) · minRTT / p90, 0.5, 2)        b = HEADROOM = 0.2
//! L' = clamp(g · L + √L, in_flight_min, in_flight_max)
//! ```
//!
//! The same percentile serves for minRTT and for the sample, so their spread does not
//! shrink the limit by itself. Against an upstream of C workers with service time S (so
//! its latency is `S · max(1, n / C)` with n in flight), the map has one fixed point
//! `L* = 1.2C + √L*`, which lies in `[1.2C, 1.2C + √(1.2C) + 1]`, and L moves to it
//! monotonically without crossing it:
//! - below C the latency is S, g = 1.2 and L grows by at least ×1.2 an update, and
//!   `1.2L + √L ≤ 1.2C + √C < L*`;
//! - between C and 2.4C, `L' = 1.2C + √L`, whose error shrinks at least by half an update
//!   (its slope is `1 / (2√L) ≤ 1/2`);
//! - above 2.4C the clamp gives `L' = L/2 + √L`, at most ¾L while L ≥ 16, and still above
//!   L* (`L/2 > 1.2C` and `√L > √L*`).
//!
//! The property tests below check exactly these bounds on that plant.
//!
//! **Windows.** A window closes once it holds [`UPDATE_SAMPLES`] responses, or once it
//! is [`WINDOW_SPAN`] old if the group used at least half its limit meanwhile, with what
//! it holds (at least [`TIMED_SAMPLES`], or the limit if lower). The count alone would
//! not do: at the floor of 4, an upstream slower than 200 ms answers fewer than 20 a
//! second, so no window would ever close, minRTT never be measured and the limit stay
//! at the floor for good. A window of a group that uses its limit holds about
//! `limit · span / latency` responses, 4 even at 1 s and a limit of 4; one of a quiet
//! group still needs the full count (it could only lower the limit, on a few noisy
//! samples). A window that has not closed after [`WINDOW_MAX`] is skipped.
//! `tests/plant.rs` drives the controller tick by tick in front of a simulated upstream
//! of 10 ms, 300 ms and 1 s and checks where and how soon it settles.
//!
//! **Dead time.** When an update changes the limit, the requests admitted under the old
//! one still answer for about a p90 more, and a window that opened at once would judge
//! the new limit by them: the law would then act on a measurement one update old, which
//! turns it into a slowly damped oscillation (against the plant above, about ±40 % around
//! L* with a period of six updates, seen through the gateway). So the next window opens
//! only once that p90 has passed ([`Gradient::window_start`] lies ahead until then).
//!
//! Time is `now`, nanoseconds since an epoch the caller chose; latencies are
//! [`Duration`]s.

use std::time::Duration;

/// b: the headroom over the unloaded latency the limit is allowed.
pub const HEADROOM: f64 = 0.2;
/// The gradient's clamp (Envoy's).
pub const MIN_GRADIENT: f64 = 0.5;
pub const MAX_GRADIENT: f64 = 2.0;
/// Responses after which a window closes, however young.
pub const UPDATE_SAMPLES: u64 = 20;
/// How long a window of a group that uses its limit waits for [`UPDATE_SAMPLES`]; then
/// it closes with what it holds.
pub const WINDOW_SPAN: u64 = 1_000_000_000;
/// Responses a window closed on time needs at least (or the limit, if lower): a p90
/// of fewer is one response's latency.
pub const TIMED_SAMPLES: u64 = 4;
/// How long a window stays open at most; then it is skipped. Also the longest dead
/// time.
pub const WINDOW_MAX: u64 = 2_000_000_000;
/// Responses a probe measures at the floor, unless [`PROBE_MAX`] passes first.
pub const PROBE_SAMPLES: u64 = 25;
/// The longest a probe drains, and then the longest it measures.
pub const PROBE_MAX: u64 = 2_000_000_000;
/// Updates in a row at `in_flight_min`, with the group using all of it, after which the
/// baseline is measured again.
pub const FLOOR_UPDATES: u32 = 5;

/// `in_flight_min`, `in_flight_max` and `probe_interval` of an `"auto"` group.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settings {
    pub min: u32,
    pub max: u32,
    pub probe_interval: Duration,
}

/// What the tick measured since [`Gradient::window_start`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct GradientInput {
    /// The p90 of the response-head latency; `None` when nothing answered.
    pub p90: Option<Duration>,
    /// Responses the p90 is over.
    pub samples: u64,
    /// The most requests in flight at once over the window.
    pub peak_in_flight: u32,
    /// Requests in flight now that were let through before the last
    /// [`Step::ProbeStarted`] (the caller marks them then).
    pub in_flight_before_probe: u32,
}

/// What one [`Gradient::step`] did; [`Gradient::limit`] is the limit to enforce after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Too few samples yet: the window stays open.
    Wait,
    /// The window closed with too few samples: nothing learnt.
    Skip,
    /// The limit was computed again (it may be unchanged).
    Limit { from: u32, to: u32 },
    /// A probe began: the limit is pinned to `in_flight_min`; `restore` comes back after.
    ProbeStarted { restore: u32 },
    /// A probe ended: minRTT as measured (`None`: nothing answered, the old one kept).
    ProbeEnded {
        min_rtt: Option<Duration>,
        limit: u32,
    },
}

/// A probe under way: first the requests admitted under the old limit end, then the
/// latency at the floor is measured. Only then: at a slow upstream, what answers in the
/// first seconds of a probe is mostly theirs, queued under the old limit, and a
/// measurement that took them in read minRTT too high, which raised the limit, which
/// made the next probe's stragglers slower still.
#[derive(Clone, Copy, Debug)]
struct Probe {
    restore: f64,
    started: u64,
    measuring_since: Option<u64>,
}

/// One group's controller state. Only the tick steps it.
#[derive(Clone, Debug)]
pub struct Gradient {
    settings: Settings,
    limit: f64,
    min_rtt: Option<Duration>,
    window_start: u64,
    floor_updates: u32,
    next_probe: u64,
    probe: Option<Probe>,
    /// xorshift state for the probe's ±10 % jitter.
    seed: u64,
}

impl Gradient {
    /// Starts at `in_flight_min`: the first window then measures minRTT unloaded. `seed`
    /// spreads the probes of groups started together (any value; 0 is replaced).
    pub fn new(settings: Settings, now: u64, seed: u64) -> Gradient {
        let mut gradient = Gradient {
            settings,
            limit: f64::from(settings.min),
            min_rtt: None,
            window_start: now,
            floor_updates: 0,
            next_probe: now,
            probe: None,
            seed: seed.max(1),
        };
        gradient.next_probe = now.saturating_add(gradient.jittered_interval());
        gradient
    }

    /// The limit to enforce now.
    pub fn limit(&self) -> u32 {
        self.rounded(self.limit)
    }

    pub fn min_rtt(&self) -> Option<Duration> {
        self.min_rtt
    }

    pub fn probing(&self) -> bool {
        self.probe.is_some()
    }

    pub fn settings(&self) -> Settings {
        self.settings
    }

    /// Where the tick's window starts: the next [`GradientInput`] is measured from here.
    /// After a change of the limit it lies ahead, by the dead time (module docs).
    pub fn window_start(&self) -> u64 {
        self.window_start
    }

    /// One tick.
    pub fn step(&mut self, input: &GradientInput, now: u64) -> Step {
        if let Some(probe) = self.probe {
            return self.probe_step(probe, input, now);
        }
        if now >= self.next_probe {
            return self.start_probe(now);
        }
        if now < self.window_start {
            return Step::Wait;
        }
        let Some(p90) = self.closing(input, now) else {
            if now.saturating_sub(self.window_start) < WINDOW_MAX {
                return Step::Wait;
            }
            self.window_start = now;
            self.floor_updates = 0;
            return Step::Skip;
        };
        let from = self.limit();
        self.update(p90, input.peak_in_flight);
        self.window_start = if self.limit() == from {
            now
        } else {
            now.saturating_add(dead_time(p90))
        };
        // Held at the floor while using it: minRTT may be stale. A quiet group that
        // sits there says nothing about its baseline; the periodic probe serves it.
        if self.limit() <= self.settings.min && input.peak_in_flight >= self.settings.min {
            self.floor_updates += 1;
            if self.floor_updates >= FLOOR_UPDATES {
                return self.start_probe(now);
            }
        } else {
            self.floor_updates = 0;
        }
        Step::Limit {
            from,
            to: self.limit(),
        }
    }

    /// The p90 to update on, if the window closes now (module docs, **Windows**).
    fn closing(&self, input: &GradientInput, now: u64) -> Option<Duration> {
        let p90 = input.p90?;
        if input.samples >= UPDATE_SAMPLES {
            return Some(p90);
        }
        let used = f64::from(input.peak_in_flight) >= self.limit / 2.0;
        let timed = TIMED_SAMPLES.min(u64::from(self.limit()));
        let old = now.saturating_sub(self.window_start) >= WINDOW_SPAN;
        (used && old && input.samples >= timed).then_some(p90)
    }

    /// The gradient law on one window's p90.
    fn update(&mut self, p90: Duration, peak_in_flight: u32) {
        // Between probes minRTT may only fall; the first window sets it.
        let min_rtt = match self.min_rtt {
            Some(min_rtt) if min_rtt <= p90 => min_rtt,
            _ => p90,
        };
        self.min_rtt = Some(min_rtt);
        let gradient = if p90.is_zero() {
            MAX_GRADIENT
        } else {
            (1.0 + HEADROOM) * min_rtt.as_secs_f64() / p90.as_secs_f64()
        };
        let gradient = gradient.clamp(MIN_GRADIENT, MAX_GRADIENT);
        let mut next = gradient * self.limit + self.limit.sqrt();
        // A group using under half its limit says nothing about a higher one.
        if next > self.limit && f64::from(peak_in_flight) < self.limit / 2.0 {
            next = self.limit;
        }
        self.limit = next.clamp(f64::from(self.settings.min), f64::from(self.settings.max));
    }

    fn start_probe(&mut self, now: u64) -> Step {
        let restore = self.limit;
        self.probe = Some(Probe {
            restore,
            started: now,
            measuring_since: None,
        });
        self.limit = f64::from(self.settings.min);
        self.floor_updates = 0;
        self.window_start = now;
        self.next_probe = now.saturating_add(self.jittered_interval());
        Step::ProbeStarted {
            restore: self.rounded(restore),
        }
    }

    fn probe_step(&mut self, mut probe: Probe, input: &GradientInput, now: u64) -> Step {
        let Some(since) = probe.measuring_since else {
            let drained = input.in_flight_before_probe == 0;
            if drained || now.saturating_sub(probe.started) >= PROBE_MAX {
                probe.measuring_since = Some(now);
                self.probe = Some(probe);
                self.window_start = now;
            }
            return Step::Wait;
        };
        let done = input.samples >= PROBE_SAMPLES || now.saturating_sub(since) >= PROBE_MAX;
        if !done {
            return Step::Wait;
        }
        // Measured afresh: unlike between probes, minRTT may rise here.
        if input.samples > 0 {
            if let Some(p90) = input.p90 {
                self.min_rtt = Some(p90);
            }
        }
        self.limit = probe.restore;
        self.probe = None;
        // Back from the floor: the floor's requests answer before the window opens.
        self.window_start = now.saturating_add(input.p90.map_or(0, dead_time));
        Step::ProbeEnded {
            min_rtt: self.min_rtt,
            limit: self.limit(),
        }
    }

    fn rounded(&self, limit: f64) -> u32 {
        // In range of u32 by the clamp.
        let clamped = limit
            .round()
            .clamp(f64::from(self.settings.min), f64::from(self.settings.max));
        clamped as u32
    }

    /// `probe_interval` ± 10 %.
    fn jittered_interval(&mut self) -> u64 {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let permille = 900 + self.seed % 201;
        let nanos = self
            .settings
            .probe_interval
            .as_nanos()
            .min(u128::from(u64::MAX)) as u64;
        nanos / 1000 * permille
    }
}

/// How long the requests admitted under a changed limit take to answer: the p90 measured
/// under it, at most [`WINDOW_MAX`].
fn dead_time(p90: Duration) -> u64 {
    u64::try_from(p90.as_nanos()).map_or(WINDOW_MAX, |nanos| nanos.min(WINDOW_MAX))
}

#[cfg(test)]
mod tests;
