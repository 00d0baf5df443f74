//! Steps the zones with `adaptive` (docs/config.md, "Adaptive rates"): once per zone
//! `interval`, its controller judges the last interval of its upstream's window, and a
//! change of the factor is put in force and logged (every change: at most one line per
//! zone per interval). Every tick, whether the upstream has spare capacity for the
//! zone's `elastic` limits is judged on the same window and the current in-flight.

use std::sync::Arc;
use std::time::Instant;

use super::{Loads, TICK};
use crate::limit::adaptive::aimd::Change;
use crate::limit::adaptive::Target;
use crate::limit::zone::Zone;

/// One tick's worth of zone steps at `now`.
pub(super) fn step(zones: &[Arc<Zone>], loads: &mut Loads, now: Instant) {
    for zone in zones {
        let Some(adaptive) = &zone.adaptive else {
            continue;
        };
        let target = &adaptive.target;
        let slots = slots(target);
        let Some(load) = loads.get_mut(&target.upstream) else {
            continue;
        };
        load.keep(slots);
        let signals = load.last(slots);
        let mut stepping = adaptive.control.stepping();
        let spare = stepping.aimd.spare(&signals, target);
        if adaptive.control.factor.set_spare(spare) {
            tracing::debug!(zone = %zone.name, spare, "zone elastic limits");
        }
        let Some(last) = stepping.last_step else {
            // The window fills for one interval before it is first judged.
            stepping.last_step = Some(now);
            continue;
        };
        // Half a tick early counts: ticks drift a little, steps should not skip one.
        if now.saturating_duration_since(last) + TICK / 2 < target.interval {
            continue;
        }
        stepping.last_step = Some(now);
        if let Some(change) = stepping.aimd.step(&signals, target) {
            adaptive.control.apply(&change);
            log(&zone.name, target, &change);
        }
    }
}

/// Window slots in one `interval`.
fn slots(target: &Target) -> usize {
    let slots = target.interval.as_millis() / TICK.as_millis().max(1);
    usize::try_from(slots).unwrap_or(usize::MAX).max(1)
}

fn log(zone: &str, target: &Target, change: &Change) {
    let (value, target_value) = change.reading.shown();
    tracing::info!(
        zone,
        upstream = %target.upstream,
        from = f64::from(change.from) / 1000.0,
        to = f64::from(change.to) / 1000.0,
        signal = %change.reading.name(target.percentile),
        value = value.unwrap_or(f64::NAN),
        target = target_value,
        "zone rate factor changed"
    );
}
