//! The gradient against a plant of C workers with service time S (latency
//! `S · max(1, L / C)` while clients keep L in flight), and its probes, at fake times.

use std::time::Duration;

use proptest::prelude::*;

use super::*;

mod plant;

const TICK: u64 = 100_000_000;
const MS: Duration = Duration::from_millis(1);

fn settings(min: u32, max: u32) -> Settings {
    Settings {
        min,
        max,
        probe_interval: Duration::from_secs(3600),
    }
}

/// A controller at `limit` that knows the unloaded latency `min_rtt`.
fn at(settings: Settings, limit: f64, min_rtt: Duration) -> Gradient {
    let mut gradient = Gradient::new(settings, 0, 7);
    gradient.limit = limit;
    gradient.min_rtt = Some(min_rtt);
    gradient
}

fn window(p90: Duration, peak: u32) -> GradientInput {
    GradientInput {
        p90: Some(p90),
        samples: 100,
        peak_in_flight: peak,
        in_flight_before_probe: 0,
    }
}

/// The plant's p90 with `limit` in flight.
fn plant(limit: f64, capacity: f64, service: Duration) -> Duration {
    service.mul_f64((limit / capacity).max(1.0))
}

/// `L* = 1.2C + √L*`, by its closed form.
fn fixed_point(capacity: f64) -> f64 {
    let root = (1.0 + (1.0 + 4.0 * (1.0 + HEADROOM) * capacity).sqrt()) / 2.0;
    root * root
}

/// Updates the bounds in the module docs allow to come within 10 % of L*.
fn updates_allowed(start: f64, capacity: f64, target: f64) -> usize {
    let steps = if start > target {
        (start / (2.4 * capacity)).max(1.0).ln() / (4.0f64 / 3.0).ln() + 12.0
    } else {
        (target / start).ln() / 1.2f64.ln() + 4.0
    };
    steps.ceil() as usize
}

proptest! {
    #[test]
    fn overload_converges_monotonically_to_fixed_point(
        capacity in 2u32..500,
        service_ms in 1u64..1000,
        start in 1.0f64..10_000.0,
    ) {
        let (c, service) = (f64::from(capacity), MS * service_ms as u32);
        let target = fixed_point(c);
        prop_assert!(target >= 1.2 * c && target <= 1.2 * c + (1.2 * c).sqrt() + 1.0);
        let mut gradient = at(settings(1, 100_000), start, service);
        // Latencies are whole nanoseconds: a relative error of 1e-6 at S = 1 ms.
        let tolerance = 1e-5 * target;
        let above = start > target;
        let allowed = updates_allowed(start, c, target);
        let mut now = 0;
        for k in 1..=allowed.max(40) {
            let before = gradient.limit;
            // The next window: after the dead time, if the last update changed the limit.
            now = now.max(gradient.window_start()) + TICK;
            let step = gradient.step(&window(plant(before, c, service), before as u32 + 1), now);
            prop_assert!(matches!(step, Step::Limit { .. }), "{step:?}");
            let after = gradient.limit;
            // Monotone, and never across L*.
            if above {
                prop_assert!(after <= before + tolerance && after >= target - tolerance,
                    "k={k}: {before} -> {after}, L*={target}");
            } else {
                prop_assert!(after >= before - tolerance && after <= target + tolerance,
                    "k={k}: {before} -> {after}, L*={target}");
            }
            // Where the gradient is not clamped and the upstream is saturated, the
            // error at least halves.
            if before >= c && before <= 2.4 * c {
                prop_assert!((after - target).abs() <= (before - target).abs() / 2.0 + tolerance);
            }
            if k >= allowed {
                prop_assert!((after - target).abs() <= 0.1 * target,
                    "after {k} updates L={after}, L*={target} (from {start}, C={capacity})");
            }
        }
    }

    #[test]
    fn limit_stays_within_its_bounds(
        min in 1u32..50,
        span in 0u32..2000,
        p90s in proptest::collection::vec(1u64..2000, 1..60),
        peaks in proptest::collection::vec(0u32..5000, 1..60),
    ) {
        let max = min + span;
        let mut gradient = Gradient::new(settings(min, max), 0, 3);
        let mut now = 0;
        for (p90, peak) in p90s.iter().zip(peaks.iter().cycle()) {
            now = now.max(gradient.window_start()) + TICK;
            gradient.step(&window(MS * *p90 as u32, *peak), now);
            prop_assert!((min..=max).contains(&gradient.limit()));
        }
    }
}

#[test]
fn first_window_measures_min_rtt_at_the_floor() {
    let mut gradient = Gradient::new(settings(4, 1000), 0, 1);
    assert_eq!(gradient.limit(), 4);
    assert_eq!(gradient.min_rtt(), None);
    let step = gradient.step(&window(MS * 10, 4), TICK);
    assert_eq!(gradient.min_rtt(), Some(MS * 10));
    // g = 1.2: 1.2 · 4 + 2 = 6.8.
    assert_eq!(step, Step::Limit { from: 4, to: 7 });
}

#[test]
fn app_limited_group_does_not_grow() {
    let mut gradient = at(settings(4, 1000), 100.0, MS * 10);
    for k in 1..=20 {
        // Fast answers, but never more than 40 in flight.
        let step = gradient.step(&window(MS * 10, 40), k * TICK);
        assert_eq!(step, Step::Limit { from: 100, to: 100 });
    }
    // Slow answers still cut it.
    gradient.step(&window(MS * 40, 40), 21 * TICK);
    assert!(gradient.limit() < 100);
}

#[test]
fn a_quiet_window_waits_for_its_count_then_is_skipped() {
    let mut gradient = at(settings(4, 1000), 50.0, MS * 10);
    // 24 in flight at most, under half of 50: only a full count closes the window.
    let few = GradientInput {
        samples: UPDATE_SAMPLES - 1,
        ..window(MS * 30, 24)
    };
    assert_eq!(gradient.step(&few, TICK), Step::Wait);
    assert_eq!(gradient.step(&few, WINDOW_SPAN), Step::Wait);
    assert_eq!(gradient.window_start(), 0);
    assert_eq!(gradient.step(&few, WINDOW_MAX), Step::Skip);
    assert_eq!(gradient.window_start(), WINDOW_MAX);
    assert_eq!(gradient.limit(), 50);
}

#[test]
fn a_busy_window_of_a_slow_upstream_closes_after_its_span() {
    // A 300 ms upstream at the floor of 4 answers about 13 times a second: the first
    // window closes after 1 s with those, measures minRTT, and the limit grows.
    let mut gradient = Gradient::new(settings(4, 1000), 0, 1);
    let slow = GradientInput {
        samples: 13,
        ..window(MS * 300, 4)
    };
    assert_eq!(gradient.step(&slow, WINDOW_SPAN - TICK), Step::Wait);
    assert_eq!(
        gradient.step(&slow, WINDOW_SPAN),
        Step::Limit { from: 4, to: 7 }
    );
    assert_eq!(gradient.min_rtt(), Some(MS * 300));
    // A 1 s upstream: 4 answers a second, as many as the limit.
    let mut gradient = Gradient::new(settings(4, 1000), 0, 1);
    let slower = GradientInput {
        samples: 4,
        ..window(MS * 1000, 4)
    };
    assert_eq!(
        gradient.step(&slower, WINDOW_SPAN),
        Step::Limit { from: 4, to: 7 }
    );
    assert_eq!(gradient.min_rtt(), Some(MS * 1000));
}

#[test]
fn a_busy_window_needs_a_few_answers_or_as_many_as_the_limit() {
    let mut gradient = at(settings(4, 1000), 50.0, MS * 10);
    let three = GradientInput {
        samples: TIMED_SAMPLES - 1,
        ..window(MS * 10, 50)
    };
    assert_eq!(gradient.step(&three, WINDOW_SPAN), Step::Wait);
    assert_eq!(gradient.step(&three, WINDOW_MAX), Step::Skip);
    assert_eq!(gradient.limit(), 50);
    // At a limit of 2, two answers are a window's worth.
    let mut gradient = at(settings(1, 1000), 2.0, MS * 10);
    let two = GradientInput {
        samples: 2,
        ..window(MS * 10, 2)
    };
    assert!(matches!(
        gradient.step(&two, WINDOW_SPAN),
        Step::Limit { from: 2, .. }
    ));
}

#[test]
fn min_rtt_only_falls_between_probes() {
    let mut gradient = at(settings(4, 1000), 50.0, MS * 10);
    gradient.step(&window(MS * 30, 50), TICK);
    assert_eq!(gradient.min_rtt(), Some(MS * 10));
    gradient.step(&window(MS * 8, 50), 2 * TICK);
    assert_eq!(gradient.min_rtt(), Some(MS * 8));
}

#[test]
fn probe_pins_then_restores() {
    let interval = Duration::from_secs(30);
    let mut gradient = Gradient::new(
        Settings {
            min: 4,
            max: 1000,
            probe_interval: interval,
        },
        0,
        11,
    );
    gradient.limit = 80.0;
    gradient.min_rtt = Some(MS * 10);
    // Due within probe_interval ± 10 %.
    let due = gradient.next_probe;
    assert!((27_000_000_000..=33_000_000_000).contains(&due), "{due}");
    assert_eq!(
        gradient.step(&window(MS * 10, 30), due - 1),
        Step::Limit { from: 80, to: 80 }
    );
    assert_eq!(
        gradient.step(&window(MS * 10, 80), due),
        Step::ProbeStarted { restore: 80 }
    );
    assert!(gradient.probing());
    assert_eq!(gradient.limit(), 4);
    // Draining: the requests admitted under 80 still answer, 3 of them are still in
    // flight (however few are in flight in all); nothing is measured yet.
    let draining = GradientInput {
        in_flight_before_probe: 3,
        ..window(MS * 90, 4)
    };
    assert_eq!(gradient.step(&draining, due + TICK), Step::Wait);
    assert_eq!(gradient.window_start(), due);
    let drained = window(MS * 90, 4);
    assert_eq!(gradient.step(&drained, due + 2 * TICK), Step::Wait);
    assert_eq!(gradient.window_start(), due + 2 * TICK);
    // Measuring at the floor: 25 samples; the baseline rose, and minRTT follows it up.
    let measured = GradientInput {
        samples: PROBE_SAMPLES,
        ..window(MS * 15, 4)
    };
    assert_eq!(
        gradient.step(&measured, due + 3 * TICK),
        Step::ProbeEnded {
            min_rtt: Some(MS * 15),
            limit: 80
        }
    );
    assert!(!gradient.probing());
    assert_eq!(gradient.limit(), 80);
}

#[test]
fn a_probe_that_hears_nothing_keeps_the_old_baseline() {
    let mut gradient = at(settings(4, 1000), 30.0, MS * 10);
    let due = gradient.next_probe;
    gradient.step(&GradientInput::default(), due);
    gradient.step(&GradientInput::default(), due + TICK);
    let step = gradient.step(&GradientInput::default(), due + TICK + PROBE_MAX);
    assert_eq!(
        step,
        Step::ProbeEnded {
            min_rtt: Some(MS * 10),
            limit: 30
        }
    );
}

#[test]
fn floor_for_five_updates_triggers_probe() {
    let mut gradient = at(settings(4, 1000), 4.0, MS * 10);
    for k in 1..FLOOR_UPDATES {
        // Far slower than the baseline: the limit stays at the floor.
        let step = gradient.step(&window(MS * 100, 4), u64::from(k) * TICK);
        assert_eq!(step, Step::Limit { from: 4, to: 4 });
    }
    let step = gradient.step(&window(MS * 100, 4), u64::from(FLOOR_UPDATES) * TICK);
    assert_eq!(step, Step::ProbeStarted { restore: 4 });
}

#[test]
fn a_changed_limit_waits_out_its_dead_time() {
    let mut gradient = at(settings(4, 1000), 50.0, MS * 10);
    // Twice the baseline: g = 0.6, the limit falls, and the next window opens once the
    // requests admitted under 50 have answered (a p90 later).
    let step = gradient.step(&window(MS * 20, 50), TICK);
    assert!(
        matches!(step, Step::Limit { from: 50, to } if to < 50),
        "{step:?}"
    );
    assert_eq!(gradient.window_start(), TICK + 20_000_000);
    assert_eq!(gradient.step(&window(MS * 20, 50), TICK + 1), Step::Wait);
    assert!(matches!(
        gradient.step(&window(MS * 10, 50), 2 * TICK),
        Step::Limit { .. }
    ));
    // An unchanged limit opens the next window at once.
    let mut steady = at(settings(4, 1000), 100.0, MS * 10);
    assert_eq!(
        steady.step(&window(MS * 10, 40), TICK),
        Step::Limit { from: 100, to: 100 }
    );
    assert_eq!(steady.window_start(), TICK);
}

#[test]
fn a_quiet_group_at_the_floor_does_not_probe() {
    let mut gradient = at(settings(4, 1000), 4.0, MS * 10);
    for k in 1..=3 * u64::from(FLOOR_UPDATES) {
        // Slow, but one request at a time: the floor is not what holds it back.
        let step = gradient.step(&window(MS * 100, 1), k * TICK);
        assert_eq!(step, Step::Limit { from: 4, to: 4 }, "update {k}");
    }
}
