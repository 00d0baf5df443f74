//! The gateway's overall traffic, added up from `Metrics` at one moment: responses by
//! status class, the zones' delays and rejections, upstream failures by kind and open
//! client connections. `/status` shows these counts (`traffic`, `admin/status.rs`); the
//! history sampler (`admin/history.rs`) turns two of them into rates.

use std::collections::BTreeMap;

use crate::metrics::load::{Failure, Totals};
use crate::metrics::{Answer, Metrics};

/// The status classes counted: `1xx` to `5xx`.
pub(super) const CLASSES: [&str; 5] = ["1xx", "2xx", "3xx", "4xx", "5xx"];

/// Cumulative counts since start (but `connections`, a gauge), over every location, zone
/// and upstream group the generations in force still use. A location, zone or group a
/// reload removed leaves the sums with its counts, so a sum may go down: a rate made of
/// two of them is taken as at least 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// Responses by status class (`CLASSES`); a status outside 100–599 is in none.
    pub requests: [u64; CLASSES.len()],
    /// The zones' decisions: delayed, and rejected (bans included). A request that two
    /// zones rejected counts twice.
    pub delayed: u64,
    pub rejected: u64,
    /// Upstream requests that failed, by `load::Failure` (5xx responses among them).
    pub upstream_failures: [u64; Failure::ALL.len()],
    /// Client connections open now.
    pub connections: u64,
}

impl Counts {
    /// The counts in `metrics` now, through its read methods (the ones a scrape uses).
    pub(crate) fn of(metrics: &Metrics) -> Counts {
        let mut counts = Counts::default();
        let mut by_status = BTreeMap::new();
        for (_, cells) in metrics.locations_in_use() {
            for cell in cells.iter() {
                cell.statuses.collect(&mut by_status);
            }
        }
        for (status, count) in by_status {
            if let Some(class) = class_of(status) {
                counts.requests[class] += count;
            }
        }
        for (_, zone) in metrics.zones_in_use() {
            counts.delayed += zone.decided(Answer::Delayed);
            counts.rejected += zone.decided(Answer::Rejected) + zone.decided(Answer::Banned);
        }
        for (_, upstream) in metrics.upstreams_in_use() {
            let totals = Totals::of(&upstream.load);
            for (into, from) in counts.upstream_failures.iter_mut().zip(totals.failures) {
                *into += from;
            }
        }
        let open: i64 = metrics
            .connections_in_use()
            .iter()
            .flat_map(|(_, cells)| cells.iter().map(|cell| cell.get()))
            .sum();
        counts.connections = u64::try_from(open).unwrap_or(0);
        counts
    }
}

/// The index in `CLASSES` of `status`'s class.
pub(super) fn class_of(status: u16) -> Option<usize> {
    matches!(status, 100..=599).then(|| usize::from(status / 100 - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn statuses_fall_in_their_class_and_odd_ones_in_none() {
        assert_eq!(class_of(101), Some(0));
        assert_eq!(class_of(200), Some(1));
        assert_eq!(class_of(399), Some(2));
        assert_eq!(class_of(444), Some(3));
        assert_eq!(class_of(599), Some(4));
        assert_eq!(class_of(99), None);
        assert_eq!(class_of(600), None);
    }

    #[test]
    fn counts_add_up_locations_and_workers() {
        let metrics = Metrics::new(2);
        let (a, b) = (metrics.location("/a"), metrics.location("/b"));
        let ms = Duration::from_millis(1);
        a.finish(0, 200, ms, 0);
        a.finish(1, 204, ms, 0);
        b.finish(1, 429, ms, 0);
        b.finish(0, 502, ms, 0);
        let zone = metrics.zone("per_ip");
        zone.decisions.get(0).add(Answer::Rejected);
        zone.decisions.get(1).add(Answer::Banned);
        zone.decisions.get(1).add(Answer::Delayed);
        let upstream = metrics.upstream("app");
        upstream.load.get(0).record(ms, 503);
        upstream.load.get(1).fail(Failure::Timeout, None);
        let counts = Counts::of(&metrics);
        assert_eq!(counts.requests, [0, 2, 0, 1, 1]);
        assert_eq!((counts.delayed, counts.rejected), (1, 2));
        assert_eq!(counts.upstream_failures, [1, 1, 0, 0]);
        drop((a, b, zone, upstream));
    }
}
