use std::time::Duration;

use proptest::prelude::*;

use super::*;

fn target(min: Permille) -> Target {
    Target {
        upstream: "app".to_owned(),
        latency: Some(Duration::from_millis(100)),
        percentile: 90,
        failures: None,
        in_flight: None,
        min,
        interval: Duration::from_secs(1),
    }
}

/// Signals with the p90 at `ms` (unknown for `None`).
fn p90(ms: Option<u64>) -> Signals {
    let latency = ms.map(Duration::from_millis);
    Signals {
        in_flight: 1,
        samples: if ms.is_some() { 100 } else { 3 },
        p50: latency,
        p90: latency,
        p99: latency,
        failure_share: ms.map(|_| 0),
    }
}

#[test]
fn slow_upstream_cuts_to_min_within_five_steps_and_never_rises() {
    let (t, mut aimd) = (target(250), Aimd::default());
    let mut seen = vec![aimd.factor()];
    for _ in 0..20 {
        aimd.step(&p90(Some(300)), &t);
        seen.push(aimd.factor());
    }
    assert!(seen.windows(2).all(|w| w[1] <= w[0]), "{seen:?}");
    assert_eq!(seen[5], 250, "{seen:?}");
    assert_eq!(&seen[..5], [1000, 750, 562, 421, 315], "{seen:?}");
}

#[test]
fn fast_upstream_recovers_additively_and_never_falls() {
    let (t, mut aimd) = (target(250), Aimd::default());
    for _ in 0..5 {
        aimd.step(&p90(Some(300)), &t);
    }
    let mut seen = vec![aimd.factor()];
    for _ in 0..20 {
        let change = aimd.step(&p90(Some(20)), &t);
        seen.push(aimd.factor());
        if seen.len() > 9 {
            assert_eq!(change, None, "no change at all once at 1.0");
        }
    }
    assert!(seen.windows(2).all(|w| w[1] >= w[0]), "{seen:?}");
    assert_eq!(seen[8], 1000, "{seen:?}");
    assert_eq!(seen[1] - seen[0], INCREASE);
}

#[test]
fn unknown_signal_holds() {
    let (t, mut aimd) = (target(250), Aimd::default());
    aimd.step(&p90(Some(300)), &t);
    assert_eq!(aimd.step(&p90(None), &t), None);
    assert_eq!(aimd.factor(), 750);
    // Between 90 % and 100 % of the target: neither over nor under, a hold too.
    assert_eq!(aimd.step(&p90(Some(95)), &t), None);
    assert_eq!(aimd.factor(), 750);
}

#[test]
fn in_flight_over_cuts_while_latency_is_unknown() {
    let t = Target {
        in_flight: Some(8),
        ..target(250)
    };
    let mut aimd = Aimd::default();
    let stalled = Signals {
        in_flight: 40,
        ..p90(None)
    };
    let change = aimd.step(&stalled, &t).expect("a cut");
    assert_eq!((change.to, change.reading.signal), (750, Signal::InFlight));
}

#[test]
fn improving_after_a_cut_holds_one_step() {
    let (t, mut aimd) = (target(100), Aimd::default());
    assert!(aimd.step(&p90(Some(400)), &t).is_some_and(|c| c.is_cut()));
    // 400 → 300 ms: still over, but 25 % better: the queue drains, hold.
    assert_eq!(aimd.step(&p90(Some(300)), &t), None);
    // Over again with no cut just before: cut.
    assert!(aimd.step(&p90(Some(290)), &t).is_some_and(|c| c.is_cut()));
    // Only 5 % better than at that cut: cut again.
    assert!(aimd.step(&p90(Some(276)), &t).is_some_and(|c| c.is_cut()));
}

#[test]
fn spare_needs_full_factor_in_flight_under_and_no_signal_known_over() {
    let t = Target {
        in_flight: Some(10),
        ..target(250)
    };
    let mut aimd = Aimd::default();
    let idle = Signals {
        in_flight: 2,
        ..p90(Some(20))
    };
    assert!(aimd.spare(&idle, &t));
    let quiet = Signals {
        in_flight: 0,
        ..p90(None)
    };
    assert!(
        aimd.spare(&quiet, &t),
        "an idle group is spare, its latency unknown"
    );
    assert!(
        aimd.spare(&p90(None), &t),
        "unknown latency leaves it to in-flight"
    );
    let stalled = Signals {
        in_flight: 9,
        ..p90(None)
    };
    assert!(!aimd.spare(&stalled, &t), "unknown, and 9 of 10 in flight");
    assert!(!aimd.spare(&p90(Some(95)), &t), "a known latency over 90 %");
    let busy = Signals {
        in_flight: 9,
        ..idle
    };
    assert!(
        !aimd.spare(&busy, &t),
        "9 of 10 in flight is not under 90 %"
    );
    assert!(!aimd.spare(&idle, &target(250)), "no in_flight target");
    aimd.step(&p90(Some(300)), &t);
    assert!(!aimd.spare(&idle, &t), "a cut factor is not spare");
}

proptest! {
    /// B2: against a threshold plant (over while f > f*), after settling the factor stays
    /// in [β·f*, f* + α], a run of cuts is never longer than it takes β to bring f* + α
    /// back to f* (one cut when f* ≥ 3α), and the mean admitted share is at least β·f*.
    #[test]
    fn threshold_plant_stays_in_band(min in 10u32..=1000, star in 10u32..=1000) {
        prop_assume!(star >= min);
        let (t, mut aimd) = (target(min), Aimd::default());
        let (mut admitted, mut steps, mut run) = (0u64, 0u64, 0u32);
        let overshoot = f64::from(star) / f64::from((star + INCREASE).min(1000));
        let longest = (overshoot.ln() / (f64::from(DECREASE) / 1000.0).ln()).ceil().max(1.0);
        for step in 0..200 {
            let over = aimd.factor() > star;
            let change = aimd.step(&p90(Some(if over { 300 } else { 20 })), &t);
            if step < 20 {
                continue;
            }
            let f = aimd.factor();
            prop_assert!(u64::from(f) * 1000 + 1000 >= u64::from(star) * u64::from(DECREASE),
                "f = {f} below β·f* (f* = {star})");
            prop_assert!(f <= (star + INCREASE).min(1000), "f = {f} above f* + α");
            admitted += u64::from(f.min(star));
            steps += 1;
            match change {
                Some(c) if c.is_cut() => run += 1,
                _ => run = 0,
            }
            prop_assert!(f64::from(run) <= longest, "{run} cuts in a row (f* = {star})");
        }
        let mean = admitted / steps;
        prop_assert!(mean * 1000 + 1000 >= u64::from(star) * u64::from(DECREASE));
    }
}

#[test]
fn a_reload_that_raises_min_lifts_a_lower_factor_to_it() {
    let adaptive = super::super::Adaptive::new(target(250));
    {
        let mut stepping = adaptive.control.stepping();
        for _ in 0..10 {
            let change = stepping.aimd.step(&p90(Some(300)), &target(250));
            if let Some(change) = change {
                adaptive.control.apply(&change);
            }
        }
        assert_eq!(stepping.aimd.factor(), 250);
    }
    let raised = adaptive.succeed(target(500));
    assert_eq!(raised.control.stepping().aimd.factor(), 500);
    assert_eq!(raised.control.factor.permille(), 500);
    // A lowered min leaves the factor where it was.
    let lowered = raised.succeed(target(100));
    assert_eq!(lowered.control.factor.permille(), 500);
}
