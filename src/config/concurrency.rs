//! `max_in_flight` on `[upstreams.NAME]` and the keys of its queue: the group's
//! concurrency gate (docs/config.md, "Concurrency per upstream group").
//!
//! `max_in_flight = "auto"` takes its keys (`in_flight_min`, `in_flight_max`,
//! `probe_interval`); a number takes none of them.

use std::time::Duration;

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Loose, RawMaxInFlight, RawUpstream};
use super::{values, AutoSettings, Concurrency, MaxInFlight};

/// The largest `max_in_flight`, `queue`, `in_flight_min` and `in_flight_max`.
pub(super) const MAX_COUNT: i64 = 100_000;
const DEFAULT_QUEUE: u32 = 64;
const DEFAULT_QUEUE_TIMEOUT: Duration = Duration::from_secs(1);
const DEFAULT_IN_FLIGHT_MIN: u32 = 4;
const DEFAULT_IN_FLIGHT_MAX: u32 = 1000;
const DEFAULT_PROBE_INTERVAL: Duration = Duration::from_secs(30);
const PROBE_INTERVAL_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(3600));

/// The group's gate, `None` without `max_in_flight`; the outer `None` when a problem was
/// reported. `read_timeout` bounds `queue_timeout` (`None`: it was invalid itself).
pub(super) fn concurrency(
    raw: &RawUpstream,
    read_timeout: Option<Duration>,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Concurrency>> {
    let auto_keys = [
        (
            "in_flight_min",
            raw.in_flight_min.as_ref().map(Spanned::span),
        ),
        (
            "in_flight_max",
            raw.in_flight_max.as_ref().map(Spanned::span),
        ),
        (
            "probe_interval",
            raw.probe_interval.as_ref().map(Spanned::span),
        ),
    ];
    let Some(max) = &raw.max_in_flight else {
        let queue_keys = [
            ("queue", raw.queue.as_ref().map(Spanned::span)),
            (
                "queue_timeout",
                raw.queue_timeout.as_ref().map(Spanned::span),
            ),
        ];
        let stray = queue_keys.into_iter().chain(auto_keys);
        let mut valid = true;
        for (key, span) in stray.filter_map(|(key, span)| Some((key, span?))) {
            diag.error(span, format!("`{key}` needs `max_in_flight` on the group"));
            valid = false;
        }
        return valid.then_some(None);
    };
    let queue = count(raw.queue.as_ref(), "queue", 0, DEFAULT_QUEUE, diag);
    let queue_timeout = queue_timeout(raw.queue_timeout.as_ref(), read_timeout, diag);
    let limit = match max.get_ref() {
        RawMaxInFlight::Count(n) => {
            let mut valid = true;
            for (key, span) in auto_keys.into_iter().filter_map(|(k, s)| Some((k, s?))) {
                diag.error(
                    span,
                    format!(r#"`{key}` applies only with `max_in_flight = "auto"`"#),
                );
                valid = false;
            }
            let limit = count(
                Some(&Spanned::new(max.span(), *n)),
                "max_in_flight",
                1,
                1,
                diag,
            );
            limit.filter(|_| valid).map(MaxInFlight::Fixed)
        }
        RawMaxInFlight::Word(word) if word == "auto" => auto(raw, diag).map(MaxInFlight::Auto),
        RawMaxInFlight::Word(word) => {
            diag.error(
                max.span(),
                format!(r#"invalid max_in_flight "{word}": expected an integer from 1 to {MAX_COUNT}, or "auto""#),
            );
            None
        }
    };
    Some(Some(Concurrency {
        max_in_flight: limit?,
        queue: queue?,
        queue_timeout: queue_timeout?,
    }))
}

/// The keys of `"auto"`: `in_flight_min` ≤ `in_flight_max`, `probe_interval` from 1 s
/// to 1 h.
fn auto(raw: &RawUpstream, diag: &mut Diagnostics<'_>) -> Option<AutoSettings> {
    let min = count(
        raw.in_flight_min.as_ref(),
        "in_flight_min",
        1,
        DEFAULT_IN_FLIGHT_MIN,
        diag,
    );
    let max = count(
        raw.in_flight_max.as_ref(),
        "in_flight_max",
        1,
        DEFAULT_IN_FLIGHT_MAX,
        diag,
    );
    let probe = match &raw.probe_interval {
        None => Some(DEFAULT_PROBE_INTERVAL),
        Some(value) => diag
            .check(value.span(), values::duration(value.get_ref()))
            .and_then(|interval| {
                let (low, high) = PROBE_INTERVAL_RANGE;
                if (low..=high).contains(&interval) {
                    return Some(interval);
                }
                diag.error(value.span(), "`probe_interval` must be from 1s to 1h");
                None
            }),
    };
    let (min, max) = (min?, max?);
    if min > max {
        let span = raw.in_flight_min.as_ref().or(raw.in_flight_max.as_ref());
        let span = span.map(Spanned::span).unwrap_or_default();
        diag.error(
            span,
            format!("`in_flight_min` ({min}) is above `in_flight_max` ({max})"),
        );
        return None;
    }
    Some(AutoSettings {
        min,
        max,
        probe_interval: probe?,
    })
}

/// An integer key from `low` to [`MAX_COUNT`], `default` when absent.
fn count(
    value: Option<&Spanned<i64>>,
    key: &str,
    low: i64,
    default: u32,
    diag: &mut Diagnostics<'_>,
) -> Option<u32> {
    let Some(value) = value else {
        return Some(default);
    };
    let n = *value.get_ref();
    if (low..=MAX_COUNT).contains(&n) {
        return u32::try_from(n).ok();
    }
    diag.error(
        value.span(),
        format!("invalid {key} {n}: expected {low} to {MAX_COUNT}"),
    );
    None
}

/// `queue_timeout`: default 1 s, and no longer than `read_timeout`.
fn queue_timeout(
    value: Option<&Loose>,
    read_timeout: Option<Duration>,
    diag: &mut Diagnostics<'_>,
) -> Option<Duration> {
    let Some(value) = value else {
        return Some(match read_timeout {
            Some(read) => DEFAULT_QUEUE_TIMEOUT.min(read),
            None => DEFAULT_QUEUE_TIMEOUT,
        });
    };
    let timeout = diag.check(value.span(), values::duration(value.get_ref()))?;
    match read_timeout {
        Some(read) if timeout > read => {
            diag.error(
                value.span(),
                format!(
                    "`queue_timeout` ({}ms) must not be longer than the group's `read_timeout` ({}ms)",
                    timeout.as_millis(),
                    read.as_millis()
                ),
            );
            None
        }
        _ => Some(timeout),
    }
}
