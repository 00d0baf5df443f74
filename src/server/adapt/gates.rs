//! Steps the gates of groups with `max_in_flight = "auto"` (docs/config.md, "Concurrency
//! per upstream group"): every tick, each one's gradient controller
//! (`limit::adaptive::gradient`) judges what its group's window measured since the
//! controller's window opened, and the limit it gives is put in force at once. The
//! controller lives here, beside the window it reads; the gate shows its latest
//! `min_rtt` and probe in `/status`. A new gate (a reload that changed its keys) starts
//! a new controller.

use std::collections::hash_map::RandomState;
use std::collections::HashMap;
use std::hash::BuildHasher;
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Loads, TICK};
use crate::limit::adaptive::gradient::{self, Gradient, GradientInput, Step};
use crate::upstream::gate::{AutoShown, Gate};
use crate::upstream::Group;

/// Window slots a controller may read back: its longest window, a probe's measurement.
const SLOTS: usize = {
    let longest = if gradient::WINDOW_MAX > gradient::PROBE_MAX {
        gradient::WINDOW_MAX
    } else {
        gradient::PROBE_MAX
    };
    (longest / TICK.as_nanos() as u64) as usize + 1
};

/// The controllers of the `"auto"` gates, by group name.
pub(super) struct Gates {
    controlled: HashMap<String, Controlled>,
    /// The controllers' time is nanoseconds since this.
    epoch: Instant,
    /// The last tick's time, in the controllers' nanoseconds.
    last: u64,
    seeds: RandomState,
}

/// One gate and the controller that sets its limit.
struct Controlled {
    gate: Arc<Gate>,
    gradient: Gradient,
    /// The group window's [`crate::metrics::load::Window::ticks`] when the controller's
    /// window opened: its input is what was pushed after.
    from_tick: u64,
    /// The most requests in flight at once since then.
    peak: u32,
}

impl Default for Gates {
    fn default() -> Gates {
        Gates {
            controlled: HashMap::new(),
            epoch: Instant::now(),
            last: 0,
            seeds: RandomState::new(),
        }
    }
}

impl Gates {
    /// One tick's worth of controller steps at `now`, after `loads` took this tick's slot.
    pub(super) fn step(&mut self, groups: &[Arc<Group>], loads: &mut Loads, now: Instant) {
        let nanos = now.saturating_duration_since(self.epoch).as_nanos();
        let nanos = u64::try_from(nanos).unwrap_or(u64::MAX);
        self.controlled.retain(|name, controlled| {
            groups.iter().any(|g| {
                g.name == *name
                    && g.gate
                        .as_ref()
                        .is_some_and(|gate| Arc::ptr_eq(gate, &controlled.gate))
            })
        });
        for group in groups {
            let Some(gate) = &group.gate else { continue };
            let Some(auto) = gate.auto_limit() else {
                continue;
            };
            let Some(load) = loads.get_mut(&group.name) else {
                continue;
            };
            load.keep(SLOTS);
            let controlled = self
                .controlled
                .entry(group.name.clone())
                .or_insert_with(|| Controlled {
                    gate: Arc::clone(gate),
                    gradient: Gradient::new(auto.settings, nanos, self.seeds.hash_one(nanos)),
                    from_tick: load.window().ticks(),
                    peak: gate.in_flight(),
                });
            controlled.peak = controlled.peak.max(gate.take_peak());
            // A window counts whole slots that began at or after its start: one that
            // opens after the last tick (a dead time) counts from this tick on.
            if controlled.gradient.window_start() > self.last {
                controlled.from_tick = load.window().ticks();
                controlled.peak = gate.in_flight();
            }
            // However few responses there are: the controller weighs their count itself
            // (a slow upstream answers only a few a second at a low limit).
            let window = load.window().since(controlled.from_tick);
            let input = GradientInput {
                p90: window.quantile_of_any(0.9),
                samples: window.samples(),
                peak_in_flight: controlled.peak,
                in_flight_before_probe: gate.in_flight_before_mark(),
            };
            let opened = controlled.gradient.window_start();
            let step = controlled.gradient.step(&input, nanos);
            if controlled.gradient.window_start() != opened {
                controlled.from_tick = load.window().ticks();
                controlled.peak = gate.in_flight();
            }
            let limit = controlled.gradient.limit();
            if gate.limit() != limit {
                gate.set_limit(limit);
            }
            if let Step::ProbeStarted { .. } = step {
                // After the floor is in force: whoever is let in from now on is measured.
                gate.mark();
            }
            auto.show(AutoShown {
                min_rtt: controlled.gradient.min_rtt(),
                probing: controlled.gradient.probing(),
            });
            log(&group.name, &step, &input);
        }
        self.last = nanos;
    }
}

fn log(upstream: &str, step: &Step, input: &GradientInput) {
    let ms = |d: Option<Duration>| d.map_or(f64::NAN, |d| d.as_secs_f64() * 1000.0);
    match *step {
        Step::Limit { from, to } if from != to => tracing::debug!(
            upstream,
            from,
            to,
            p90_ms = ms(input.p90),
            samples = input.samples,
            "upstream concurrency limit changed"
        ),
        Step::ProbeStarted { restore } => tracing::debug!(
            upstream,
            restore,
            "upstream concurrency limit probing its unloaded latency"
        ),
        Step::ProbeEnded { min_rtt, limit } => tracing::info!(
            upstream,
            min_rtt_ms = ms(min_rtt),
            limit,
            samples = input.samples,
            "upstream concurrency limit probed its unloaded latency"
        ),
        _ => {}
    }
}
