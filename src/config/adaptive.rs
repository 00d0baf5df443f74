//! A zone's `adaptive = { upstream, latency, min, ... }` (docs/config.md, "Adaptive
//! rates"): parsed straight into the core's [`Target`].

use std::time::Duration;

use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::suggest::unknown_name;
use super::raw::{Loose, RawAdaptive};
use super::values;
use super::Algorithm;
use crate::limit::adaptive::Target;

const DEFAULT_MIN: u32 = 250;
const DEFAULT_PERCENTILE: u8 = 90;
const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
const MAX_IN_FLIGHT: i64 = 1_000_000;

/// The zone's `adaptive`, if written: `Some(None)` when absent, `None` after a problem.
/// `upstreams` are the configured groups' names.
pub(super) fn adaptive(
    raw: Option<&Spanned<RawAdaptive>>,
    algorithm: Algorithm,
    redis: bool,
    upstreams: &[String],
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Target>> {
    let Some(raw) = raw else {
        return Some(None);
    };
    let span = raw.span();
    if algorithm == Algorithm::Concurrency {
        let message = "`adaptive` scales a zone's rates, and a `concurrency` zone has none; \
                       to bound a group's requests in flight, see `max_in_flight = \"auto\"` \
                       on the upstream";
        diag.error(span, message);
        return None;
    }
    if redis {
        let message = "`adaptive` is for local zones: each instance would scale the one \
                       shared Redis budget by its own view of the upstream";
        diag.error(span, message);
        return None;
    }
    let raw = raw.get_ref();
    let upstream = diag
        .required(raw.upstream.as_ref(), &span, "upstream")
        .and_then(|name| {
            let known = upstreams.iter().any(|u| u == name.get_ref());
            if !known {
                let known: Vec<&str> = upstreams.iter().map(String::as_str).collect();
                let none = "no `[upstreams.NAME]` is defined";
                let message = unknown_name("upstream", name.get_ref(), &known, none);
                diag.error(name.span(), message);
            }
            known.then(|| name.get_ref().clone())
        });
    let latency = optional(
        raw.latency.as_ref(),
        |v| {
            bounded(
                v,
                Duration::from_millis(1),
                Duration::from_secs(60),
                "latency",
            )
        },
        diag,
    );
    let failures = optional(raw.failures.as_ref(), |v| share(v.get_ref()), diag);
    let in_flight = optional(raw.in_flight.as_ref(), |v| in_flight(*v.get_ref()), diag);
    let min = optional(raw.min.as_ref(), |v| min(v.get_ref()), diag);
    let percentile = optional(raw.percentile.as_ref(), |v| percentile(*v.get_ref()), diag);
    let interval = optional(raw.interval.as_ref(), interval, diag);
    let (latency, failures, in_flight) = (latency?, failures?, in_flight?);
    if latency.is_none() && failures.is_none() && in_flight.is_none() {
        let message = "`adaptive` needs a target to follow: `latency`, `failures` or `in_flight`";
        diag.error(span, message);
        return None;
    }
    Some(Some(Target {
        upstream: upstream?,
        latency,
        percentile: percentile?.unwrap_or(DEFAULT_PERCENTILE),
        failures,
        in_flight,
        min: min?.unwrap_or(DEFAULT_MIN),
        interval: interval?.unwrap_or(DEFAULT_INTERVAL),
    }))
}

/// `Some(None)` when absent, `Some(Some(v))` when valid, `None` after reporting.
fn optional<R, T>(
    written: Option<&Spanned<R>>,
    parse: impl FnOnce(&Spanned<R>) -> Result<T, String>,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<T>> {
    match written {
        None => Some(None),
        Some(value) => diag.check(value.span(), parse(value)).map(Some),
    }
}

fn bounded(value: &Loose, low: Duration, high: Duration, key: &str) -> Result<Duration, String> {
    let d = values::duration(value.get_ref())?;
    if d < low || d > high {
        return Err(format!(
            "invalid {key} {}: expected {low:?} to {high:?}",
            value.get_ref()
        ));
    }
    Ok(d)
}

fn interval(value: &Loose) -> Result<Duration, String> {
    let d = bounded(
        value,
        Duration::from_millis(100),
        Duration::from_secs(60),
        "interval",
    )?;
    if d.as_millis() % 100 != 0 {
        return Err(format!(
            "invalid interval {}: a multiple of 100ms (the tick)",
            value.get_ref()
        ));
    }
    Ok(d)
}

/// `"N%"`, N from 0.1 to 100, in ‰.
fn share(text: &str) -> Result<u32, String> {
    let invalid = || format!("invalid failures \"{text}\": expected \"N%\", N from 0.1 to 100");
    let number: f64 = text
        .strip_suffix('%')
        .and_then(|n| n.trim().parse().ok())
        .ok_or_else(invalid)?;
    if !(0.1..=100.0).contains(&number) {
        return Err(invalid());
    }
    Ok((number * 10.0).round() as u32)
}

fn in_flight(value: i64) -> Result<u64, String> {
    if !(1..=MAX_IN_FLIGHT).contains(&value) {
        return Err(format!(
            "invalid in_flight {value}: expected 1 to {MAX_IN_FLIGHT}"
        ));
    }
    Ok(value.unsigned_abs())
}

/// The factor's floor, 0.01 to 1, in ‰.
fn min(value: &toml::Value) -> Result<u32, String> {
    let number = match value {
        toml::Value::Float(f) => *f,
        toml::Value::Integer(1) => 1.0,
        _ => f64::NAN,
    };
    if !(0.01..=1.0).contains(&number) {
        return Err(format!(
            "invalid min {value}: expected a number from 0.01 to 1, e.g. 0.25"
        ));
    }
    Ok((number * 1000.0).round() as u32)
}

/// The percentiles the signals keep.
fn percentile(value: i64) -> Result<u8, String> {
    match value {
        50 | 90 | 99 => Ok(value as u8),
        _ => Err(format!("invalid percentile {value}: expected 50, 90 or 99")),
    }
}
