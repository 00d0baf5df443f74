//! A location's `limit` list, `cost` and `limit_status`, checked against the zones.

use http::StatusCode;
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::suggest::unknown_name;
use super::raw::{Loose, RawLimit, Span};
use super::values::MAX_BURST;
use super::zones::parse_rate;
use super::{Algorithm, Elastic, Limit, Rate, Share, StatusSet, VarText, Zone};
use crate::limit::decision::MAX_LIMITS;
use crate::limit::remote::MAX_EXACT;
use crate::limit::store::MAX_SHARDS;

const MAX_COST: i64 = 1_000_000;

/// What a location's `limit` list needs to know of a valid zone.
#[derive(Clone)]
pub(super) struct ZoneInfo {
    pub name: String,
    pub algorithm: Algorithm,
    /// The most units a fresh key admits at once, before `burst`.
    pub at_once: u64,
    /// The zone's `rate` and every plan's.
    pub rates: Vec<Rate>,
    pub size: u64,
    /// `backend = "redis"`.
    pub redis: bool,
    /// `adaptive`, if any: whether it sets `in_flight` (elastic needs it).
    pub adaptive: Option<bool>,
    /// Its `key` or `plan` reads a verified token's claim (`$jwt_claim_NAME`).
    pub reads_claims: bool,
}

impl ZoneInfo {
    /// The zone as its `elastic` ceiling makes it: every rate raised.
    fn raised(&self, elastic: Elastic) -> ZoneInfo {
        ZoneInfo {
            rates: self
                .rates
                .iter()
                .map(|rate| elastic.ceiling(*rate))
                .collect(),
            ..self.clone()
        }
    }

    pub(super) fn new(zone: &Zone) -> ZoneInfo {
        let rates: Vec<Rate> = zone
            .rate
            .iter()
            .copied()
            .chain(zone.plans.iter().map(|(_, rate)| *rate))
            .collect();
        let at_once = match zone.algorithm {
            Algorithm::LeakyBucket | Algorithm::TokenBucket => 1,
            Algorithm::Concurrency => zone.max,
            Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog => {
                rates.iter().map(|rate| rate.count.get()).min().unwrap_or(1)
            }
        };
        let claims = |text: &VarText| text.uses(|var| matches!(var, crate::vars::Var::JwtClaim(_)));
        ZoneInfo {
            reads_claims: claims(&zone.key) || zone.plan_from.as_ref().is_some_and(claims),
            name: zone.name.clone(),
            algorithm: zone.algorithm,
            at_once,
            rates,
            size: zone.size,
            redis: zone.redis.is_some(),
            adaptive: zone.adaptive.as_ref().map(|t| t.in_flight.is_some()),
        }
    }
}

/// The longest a bucket may take to drain (`(burst + cost) / rate`): beyond a year a limit
/// is surely a typo, and the arithmetic stays far from overflow.
const MAX_HORIZON_MS: u128 = 366 * 86_400_000;
/// Bytes a `sliding_log` entry takes, and the fewest shards' worth of `size` one key may
/// have to itself (the store splits a zone in up to 64 shards).
const LOG_ENTRY_BYTES: u64 = 16;

/// A location's `limit` list. `zones` describes the valid zones.
pub(super) fn limits(
    list: &Spanned<Vec<Spanned<RawLimit>>>,
    zones: &[ZoneInfo],
    cost: u64,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<Limit>> {
    let mut limits = Vec::new();
    let mut valid = true;
    if list.get_ref().len() > MAX_LIMITS {
        let message = format!("a location may list at most {MAX_LIMITS} limits");
        diag.error(list.span(), message);
        valid = false;
    }
    for item in list.get_ref() {
        match limit(item, zones, cost, &limits, diag) {
            Some(limit) => limits.push(limit),
            None => valid = false,
        }
    }
    valid.then_some(limits)
}

/// One item of the list; `earlier` are the valid items before it. The first problem
/// found is the only one reported for the item.
fn limit(
    item: &Spanned<RawLimit>,
    zones: &[ZoneInfo],
    cost: u64,
    earlier: &[Limit],
    diag: &mut Diagnostics<'_>,
) -> Option<Limit> {
    let raw = item.get_ref();
    let zone = diag.required(raw.zone.as_ref(), &item.span(), "zone")?;
    let index = zone_index(zone, zones, earlier, diag)?;
    let info = &zones[index];
    if info.algorithm == Algorithm::Concurrency {
        no_queue_keys(raw, diag)?;
    }
    let count = match &raw.count_status {
        Some(written) => Some(count_status(written, info, diag)?),
        None => None,
    };
    let burst = burst(raw.burst.as_ref(), diag)?;
    let nodelay = raw.nodelay.as_ref().is_some_and(|n| *n.get_ref());
    let delay = delay(raw.delay.as_ref(), nodelay, diag)?;
    if let Err((message, at_zone)) = fits(info, burst, cost) {
        let span = if at_zone { zone.span() } else { item.span() };
        diag.error(span, message);
        return None;
    }
    let dry_run = raw.dry_run.unwrap_or(false);
    let ban = super::bans::ban(raw.ban.as_ref(), dry_run, diag)?;
    let elastic = match &raw.elastic {
        Some(written) => Some(elastic(written, info, diag)?),
        None => None,
    };
    // A key's state must fit what the elastic ceiling admits, not only the base rate.
    let raised = elastic.map(|elastic| info.raised(elastic));
    let sized = raised.as_ref().unwrap_or(info);
    if let (Some(written), Some(message)) = (
        &raw.elastic,
        raised.as_ref().and_then(|r| too_big(r, burst, cost)),
    ) {
        diag.error(
            written.span(),
            format!("with elastic = \"{}\": {message}", written.get_ref()),
        );
        return None;
    }
    let soft = match &raw.soft {
        Some(written) => Some(soft(written, sized, (dry_run, burst), diag)?),
        None => None,
    };
    Some(Limit {
        zone: index,
        burst,
        delay,
        dry_run,
        count,
        ban,
        elastic,
        soft,
    })
}

/// A limit item's `elastic`: `"3x"` (1.1 to 100) or a rate above the zone's `rate`, on a
/// zone whose `adaptive` sets `in_flight` (what "spare capacity" is measured against).
pub(super) fn elastic(
    written: &Spanned<String>,
    zone: &ZoneInfo,
    diag: &mut Diagnostics<'_>,
) -> Option<Elastic> {
    let span = written.span();
    let problem = match zone.adaptive {
        _ if zone.algorithm == Algorithm::Concurrency => {
            Some("`elastic` raises a rate, and a `concurrency` zone has none")
        }
        None => Some(
            "elastic needs the zone's adaptive upstream: add `adaptive = { upstream = ..., \
             in_flight = N }` to the zone",
        ),
        Some(false) => {
            Some("elastic needs the zone's adaptive `in_flight`: spare capacity means under it")
        }
        Some(true) => None,
    };
    if let Some(message) = problem {
        diag.error(span, message);
        return None;
    }
    let text = written.get_ref();
    let parsed = match text.strip_suffix('x') {
        Some(times) => times_permille(text, times).map(Elastic::Times),
        None => parse_rate(text).and_then(|rate| {
            let base = zone.rates.first().copied();
            // A window zone keeps each key's window as `now / period`: a rate in another
            // unit would count a key's window in two units at once.
            let other_unit = zone.algorithm.is_window()
                && zone.rates.iter().any(|r| r.period != rate.period);
            match base {
                Some(base) if rate.per_second() <= base.per_second() => Err(format!(
                    "elastic rate \"{text}\" must be above the zone's rate {base}"
                )),
                Some(base) if other_unit => Err(format!(
                    "elastic rate \"{text}\" must be in the unit of the zone's rates ({base}): a {} zone counts its windows in it; write it in that unit, or as a multiple (\"3x\")",
                    zone.algorithm.name()
                )),
                _ => Ok(Elastic::Rate(rate)),
            }
        }),
    };
    diag.check(span, parsed)
}

/// `N` of `"Nx"`, 1.1 to 100, in ‰.
fn times_permille(text: &str, times: &str) -> Result<u32, String> {
    let invalid = || {
        format!("invalid elastic \"{text}\": expected a multiplier from 1.1x to 100x (\"3x\") or a rate (\"300r/s\")")
    };
    let number: f64 = times.trim().parse().map_err(|_| invalid())?;
    if !(1.1..=100.0).contains(&number) {
        return Err(invalid());
    }
    Ok((number * 1000.0).round() as u32)
}

/// `soft`: a share `"N%"`, N from 0.1 to 100 (one decimal at most); not with `dry_run`
/// (nothing is rejected, so nothing would be soft), not on a `concurrency` zone, and for
/// a bucket at least one request a day of each of the zone's rates; a `sliding_log` lane
/// key must fit what the lane's store (a quarter of `size`) leaves one key.
fn soft(
    written: &Loose,
    zone: &ZoneInfo,
    (dry_run, burst): (bool, u64),
    diag: &mut Diagnostics<'_>,
) -> Option<Share> {
    let span = written.span();
    let share = diag.check(span.clone(), share(written.get_ref()))?;
    let problem = if zone.algorithm == Algorithm::Concurrency {
        Some("`soft` does not apply to a `concurrency` zone: it has no rate to go over".to_owned())
    } else if dry_run {
        Some("`soft` and `dry_run = true` exclude each other: a dry run rejects nothing, so nothing would pass softly".to_owned())
    } else if zone.algorithm == Algorithm::SlidingLog {
        lane_log_too_big(zone, share, burst)
    } else if zone.algorithm.is_window() {
        None
    } else {
        let small = zone
            .rates
            .iter()
            .find(|rate| !crate::limit::soft::lane_rate_is_exact(**rate, share));
        small.map(|rate| {
            format!(
                r#"soft = "{share}" of zone "{}"'s rate {rate} is less than one request a day; use a larger share or a faster rate"#,
                zone.name
            )
        })
    };
    match problem {
        Some(message) => {
            diag.error(span, message);
            None
        }
        None => Some(share),
    }
}

/// A `sliding_log` lane whose key could hold more entries than the lane's store leaves
/// one key (the lane's store is a quarter of `size`; see [`too_big`]).
fn lane_log_too_big(zone: &ZoneInfo, share: Share, burst: u64) -> Option<String> {
    let lane = |rate: &Rate| {
        let base = crate::limit::Params {
            burst,
            ..crate::limit::Params::new(*rate)
        };
        crate::limit::soft::lane_params(&base, share, Algorithm::SlidingLog)
            .rate
            .count
            .get()
    };
    let most = zone.rates.iter().map(lane).max()?;
    let bytes = most.next_power_of_two().saturating_mul(LOG_ENTRY_BYTES);
    let room = zone.size / 4 / MAX_SHARDS as u64;
    (bytes > room).then(|| {
        let need = bytes.saturating_mul(4 * MAX_SHARDS as u64).div_ceil(1 << 20);
        format!(
            r#"a sliding_log key of zone "{}"'s soft lane may hold {most} requests ({bytes} bytes), more than a quarter of its `size` leaves one key; give the zone `size = "{need}m"` or more, or a smaller share"#,
            zone.name
        )
    })
}

/// A share as written: `"10%"`, `"0.5%"`.
fn share(value: &toml::Value) -> Result<Share, String> {
    const HINT: &str = r#"expected a share like "10%", from "0.1%" to "100%""#;
    let toml::Value::String(text) = value else {
        return Err(format!("invalid soft {value}: {HINT}"));
    };
    let bad = || format!(r#"invalid soft "{text}": {HINT}"#);
    let number = text.strip_suffix('%').ok_or_else(bad)?;
    let (whole, tenth) = number.split_once('.').unwrap_or((number, "0"));
    let digits = |s: &str, most: usize| {
        (!s.is_empty() && s.len() <= most && s.bytes().all(|b| b.is_ascii_digit()))
            .then(|| s.parse::<u16>().ok())
            .flatten()
    };
    let (Some(whole), Some(tenth)) = (digits(whole, 3), digits(tenth, 1)) else {
        return Err(bad());
    };
    Share::from_permille(whole * 10 + tenth).ok_or_else(bad)
}

/// `count_status`: statuses (`401`) and classes (`"4xx"`), not empty; not for a
/// `concurrency` zone, whose count ends with the answer anyway.
fn count_status(
    written: &Spanned<Vec<Loose>>,
    zone: &ZoneInfo,
    diag: &mut Diagnostics<'_>,
) -> Option<StatusSet> {
    if zone.algorithm == Algorithm::Concurrency {
        let message = "`count_status` does not apply to a `concurrency` zone: its count is given back when the answer ends";
        diag.error(written.span(), message);
        return None;
    }
    if written.get_ref().is_empty() {
        let message =
            r#"`count_status` is empty: list the statuses to count, e.g. [401, 403] or ["4xx"]"#;
        diag.error(written.span(), message);
        return None;
    }
    let mut set = StatusSet::default();
    let mut valid = true;
    for item in written.get_ref() {
        match diag.check(item.span(), statuses(item.get_ref())) {
            Some((first, last)) => set.insert_range(first, last),
            None => valid = false,
        }
    }
    valid.then_some(set)
}

/// One item of `count_status`: a status 100 to 599, or a class `"1xx"` to `"5xx"`.
fn statuses(value: &toml::Value) -> Result<(u16, u16), String> {
    const HINT: &str = r#"expected a status from 100 to 599 (401) or a class ("4xx")"#;
    match value {
        toml::Value::Integer(status) => u16::try_from(*status)
            .ok()
            .filter(|status| (100..=599).contains(status))
            .map(|status| (status, status))
            .ok_or_else(|| format!("invalid status {status}: {HINT}")),
        toml::Value::String(text) => match text.as_bytes() {
            [class @ b'1'..=b'5', b'x' | b'X', b'x' | b'X'] => {
                let first = u16::from(class - b'0') * 100;
                Ok((first, first + 99))
            }
            _ => Err(format!(r#"invalid status class "{text}": {HINT}"#)),
        },
        other => Err(format!("invalid status {other}: {HINT}")),
    }
}

/// The index in `zones` of the zone named at `zone`, which must not be one of `earlier`.
fn zone_index(
    zone: &Spanned<String>,
    zones: &[ZoneInfo],
    earlier: &[Limit],
    diag: &mut Diagnostics<'_>,
) -> Option<usize> {
    let name = zone.get_ref();
    let Some(index) = zones.iter().position(|z| &z.name == name) else {
        if diag.is_invalid_zone(name) {
            // Its own problem is reported where it is defined.
            return None;
        }
        let known: Vec<&str> = zones.iter().map(|z| z.name.as_str()).collect();
        let message = unknown_name("zone", name, &known, "no `[zones.NAME]` is defined");
        diag.error(zone.span(), message);
        return None;
    };
    if earlier.iter().any(|l| l.zone == index) {
        let message = format!(r#"zone "{name}" is listed twice in this location"#);
        diag.error(zone.span(), message);
        return None;
    }
    Some(index)
}

/// A `concurrency` zone has no queue: `burst`, `nodelay` and `delay` are refused.
fn no_queue_keys(raw: &RawLimit, diag: &mut Diagnostics<'_>) -> Option<()> {
    let extra = [
        raw.burst.as_ref().map(Spanned::span),
        raw.nodelay.as_ref().map(Spanned::span),
        raw.delay.as_ref().map(Spanned::span),
    ];
    if let Some(span) = extra.into_iter().flatten().next() {
        let message = "`burst`, `nodelay` and `delay` do not apply to a `concurrency` zone";
        diag.error(span, message);
        return None;
    }
    Some(())
}

/// `burst`: 0 when absent.
fn burst(written: Option<&Spanned<i64>>, diag: &mut Diagnostics<'_>) -> Option<u64> {
    let Some(burst) = written else {
        return Some(0);
    };
    let value = *burst.get_ref();
    if !(0..=MAX_BURST).contains(&value) {
        let message = format!("invalid burst {value}: expected 0 to {MAX_BURST}");
        diag.error(burst.span(), message);
        return None;
    }
    Some(value.unsigned_abs())
}

/// `delay` (nginx `delay=N`), or `None` for `nodelay`; `Some(0)` when neither is given:
/// every excess request is delayed.
fn delay(
    written: Option<&Spanned<i64>>,
    nodelay: bool,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<u64>> {
    match (written, nodelay) {
        (Some(delay), true) => {
            diag.error(
                delay.span(),
                "`delay` and `nodelay = true` exclude each other",
            );
            None
        }
        (Some(delay), false) => {
            let value = *delay.get_ref();
            if !(1..=MAX_BURST).contains(&value) {
                let message = format!("invalid delay {value}: expected 1 to {MAX_BURST}");
                diag.error(delay.span(), message);
                return None;
            }
            Some(Some(value.unsigned_abs()))
        }
        (None, true) => Some(None),
        (None, false) => Some(Some(0)),
    }
}

/// Whether `cost` units fit the limit: a request's units must fit in an empty bucket, or
/// every request is rejected (the error is then about the zone, `true`), and the state
/// must stay sane ([`too_big`]).
fn fits(info: &ZoneInfo, burst: u64, cost: u64) -> Result<(), (String, bool)> {
    let capacity = info.at_once.saturating_add(burst);
    if cost > capacity {
        let message = format!(
            r#"cost {cost} exceeds what zone "{}" can ever admit at once ({capacity}); every request would be rejected"#,
            info.name
        );
        return Err((message, true));
    }
    too_big(info, burst, cost).map_or(Ok(()), |message| Err((message, false)))
}

/// A location's `cost` against the limits it inherits from its site (checked there with
/// a cost of 1); problems are reported at the `cost`.
pub(super) fn inherited(
    limits: &[Limit],
    zones: &[ZoneInfo],
    cost: u64,
    at: Span,
    diag: &mut Diagnostics<'_>,
) -> Option<()> {
    for limit in limits {
        if let Err((message, _)) = fits(&zones[limit.zone], limit.burst, cost) {
            diag.error(at, format!("with the site's `limit`: {message}"));
            return None;
        }
    }
    Some(())
}

/// A limit whose state would be absurd: a bucket remembering a client for over a year, or
/// a `sliding_log` key needing more memory than its zone gives one key.
fn too_big(zone: &ZoneInfo, burst: u64, cost: u64) -> Option<String> {
    let name = &zone.name;
    match zone.algorithm {
        Algorithm::LeakyBucket | Algorithm::TokenBucket => zone.rates.iter().find_map(|rate| {
            let units = u128::from(burst) + u128::from(cost);
            let horizon = units * u128::from(rate.period.millis()) / u128::from(rate.count.get());
            (horizon > MAX_HORIZON_MS).then(|| {
                format!(
                    r#"burst {burst} at zone "{name}"'s rate {} takes over a year to drain; use a smaller burst or a faster rate"#,
                    rate
                )
            })
        }),
        Algorithm::SlidingLog => zone.rates.iter().find_map(|rate| {
            let entries = rate.count.get().saturating_add(burst).next_power_of_two();
            let bytes = entries.saturating_mul(LOG_ENTRY_BYTES);
            let share = zone.size / MAX_SHARDS as u64;
            (bytes > share).then(|| {
                let need = bytes.saturating_mul(MAX_SHARDS as u64).div_ceil(1 << 20);
                format!(
                    r#"a sliding_log key of zone "{name}" may hold {} requests ({bytes} bytes), more than its `size` leaves one key; give the zone `size = "{need}m"` or more, or use "sliding_window""#,
                    rate.count.get() + burst
                )
            })
        }),
        // Redis's Lua holds numbers as doubles: the estimate's products must stay exact.
        Algorithm::SlidingWindow if zone.redis => zone.rates.iter().find_map(|rate| {
            let limit = u128::from(rate.count.get()) + u128::from(burst);
            let window_us = u128::from(rate.period.millis()) * 1_000;
            (limit * window_us >= u128::from(MAX_EXACT)).then(|| {
                let most = u128::from(MAX_EXACT) / window_us - 1;
                format!(
                    r#"rate {} with burst {burst} is too large for a sliding_window zone in Redis ("{name}"): count + burst must stay below {}; use a shorter unit (r/h rather than r/d) or "fixed_window""#,
                    rate,
                    most + 1
                )
            })
        }),
        _ => None,
    }
}

/// A status for `limit_status`: 400 to 599, as nginx's `limit_req_status`, but not 444:
/// nginx's 444 is no answer at all, which `limit_action = "close"` says here (a 444
/// status would be sent as one).
pub(super) fn limit_status(value: &Spanned<i64>, diag: &mut Diagnostics<'_>) -> Option<StatusCode> {
    if *value.get_ref() == i64::from(super::limit_action::UNANSWERED) {
        diag.error(value.span(), super::limit_action::NOT_A_STATUS);
        return None;
    }
    let status = u16::try_from(*value.get_ref())
        .ok()
        .filter(|code| (400..=599).contains(code))
        .and_then(|code| StatusCode::from_u16(code).ok());
    if status.is_none() {
        let message = format!(
            "invalid limit_status {}: expected 400 to 599",
            value.get_ref()
        );
        diag.error(value.span(), message);
    }
    status
}

/// A location's `cost`: 1 when absent.
pub(super) fn cost(value: Option<&Spanned<i64>>, diag: &mut Diagnostics<'_>) -> Option<u64> {
    let Some(value) = value else {
        return Some(1);
    };
    let cost = *value.get_ref();
    if !(1..=MAX_COST).contains(&cost) {
        diag.error(
            value.span(),
            format!("invalid cost {cost}: expected 1 to {MAX_COST}"),
        );
        return None;
    }
    Some(cost.unsigned_abs())
}
