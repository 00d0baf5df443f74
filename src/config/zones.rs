//! `[zones.NAME]`: algorithm, key template, rate and plans, size, and the Redis backend.

use serde_spanned::Spanned;

use super::adaptive;
use super::diag::Diagnostics;
use super::maps::Maps;
use super::raw::{Loose, Named, Plans, RawBackend, RawZone, Span};
use super::values::MAX_BURST;
use super::{values, Algorithm, OnError, Period, Rate, VarText, Zone, ZoneSettings};
use crate::vars::{UnknownVar, Var};

/// nginx's smallest zone: 8 pages.
const MIN_ZONE_SIZE: u64 = 32 << 10;
const DEFAULT_ZONE_SIZE: u64 = 10 << 20;
const MAX_RATE_COUNT: u64 = 1_000_000;

/// The zones without a problem, and whether every zone was one. A zone with a problem
/// is reported, and its name recorded in `diag`, so that the limits that name it are not
/// reported again as naming an unknown zone. `on_error` is `[redis]`'s, for Redis zones
/// that name none.
pub(super) fn zones(
    raw: Vec<Named<RawZone>>,
    on_error: OnError,
    upstreams: &[String],
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> (Vec<Zone>, bool) {
    let mut zones = Vec::with_capacity(raw.len());
    let mut all_valid = true;
    for entry in raw {
        let name = entry.name.get_ref().clone();
        match zone(entry, on_error, upstreams, maps, diag) {
            Some(zone) => zones.push(zone),
            None => {
                diag.zone_invalid(&name);
                all_valid = false;
            }
        }
    }
    (zones, all_valid)
}

fn zone(
    entry: Named<RawZone>,
    on_error: OnError,
    upstreams: &[String],
    maps: &Maps,
    diag: &mut Diagnostics<'_>,
) -> Option<Zone> {
    let name = entry.name.get_ref().clone();
    let valid_name = diag
        .check(entry.name.span(), values::table_name("zone", &name))
        .is_some();
    let body = entry.body?;
    let table = body.span();
    let raw = body.into_inner();
    let key = diag
        .required(raw.key.as_ref(), &table, "key")
        .and_then(|key| zone_key(key, maps, diag));
    let algorithm = raw
        .algorithm
        .as_ref()
        .map_or(Algorithm::LeakyBucket, |a| *a.get_ref());
    let concurrency = algorithm == Algorithm::Concurrency;
    let rate = rate(raw.rate.as_ref(), concurrency, &table, diag);
    let max = max(raw.max.as_ref(), concurrency, &table, diag);
    let plans = plans(raw.plans.as_ref(), concurrency, diag);
    if let (Some(Some(rate)), Some(plans), Some(written)) = (rate, &plans, &raw.plans) {
        check_plan_units(algorithm, rate, plans, written, diag);
    }
    let plan_from = plan_from(&raw, maps, &plans, diag);
    let size = size(raw.size.as_ref(), diag);
    let ipv4_prefix = prefix(raw.ipv4_prefix.as_ref(), 32, diag);
    let ipv6_prefix = prefix(raw.ipv6_prefix.as_ref(), 128, diag);
    let redis = zone_redis(&raw, algorithm, on_error, diag);
    let is_redis = matches!(redis, Some(Some(_)))
        || raw
            .backend
            .as_ref()
            .is_some_and(|b| *b.get_ref() == RawBackend::Redis);
    let adaptive = adaptive::adaptive(raw.adaptive.as_ref(), algorithm, is_redis, upstreams, diag);
    valid_name.then_some(())?;
    Some(Zone {
        name,
        key: key?,
        rate: rate?,
        size: size?,
        algorithm,
        plans: plans?,
        plan_from: plan_from?,
        max: max?,
        ipv4_prefix: ipv4_prefix?,
        ipv6_prefix: ipv6_prefix?,
        redis: redis?,
        adaptive: adaptive?,
    })
}

/// `rate`: required, except that a `concurrency` zone takes none (`Some(None)`).
/// `table` is the zone's span.
fn rate(
    written: Option<&Spanned<String>>,
    concurrency: bool,
    table: &Span,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Rate>> {
    match (written, concurrency) {
        (Some(rate), true) => {
            let message =
                "a `concurrency` zone counts requests in flight; it takes `max`, not `rate`";
            diag.error(rate.span(), message);
            None
        }
        (None, true) => Some(None),
        (rate, false) => diag
            .required(rate, table, "rate")
            .and_then(|rate| diag.check(rate.span(), parse_rate(rate.get_ref())))
            .map(Some),
    }
}

/// `max`: required for a `concurrency` zone and only there (0 elsewhere).
fn max(
    written: Option<&Spanned<i64>>,
    concurrency: bool,
    table: &Span,
    diag: &mut Diagnostics<'_>,
) -> Option<u64> {
    match (written, concurrency) {
        (Some(max), true) => {
            let value = *max.get_ref();
            if !(1..=MAX_BURST).contains(&value) {
                let message = format!("invalid max {value}: expected 1 to {MAX_BURST}");
                diag.error(max.span(), message);
            }
            u64::try_from(value).ok().filter(|v| *v >= 1)
        }
        (None, true) => {
            if !diag.was_left_out(table, "max") {
                diag.error(table.clone(), "a `concurrency` zone needs `max`");
            }
            None
        }
        (Some(max), false) => {
            let message = "`max` is for `algorithm = \"concurrency\"`; rate zones take `rate`";
            diag.error(max.span(), message);
            None
        }
        (None, false) => Some(0),
    }
}

/// `plans`, by name; a `concurrency` zone takes none.
fn plans(
    written: Option<&Spanned<Plans>>,
    concurrency: bool,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<(String, Rate)>> {
    match (written, concurrency) {
        (None, _) => Some(Vec::new()),
        (Some(plans), true) => {
            diag.error(plans.span(), "a `concurrency` zone takes no `plans`");
            None
        }
        (Some(plans), false) => {
            let parsed: Vec<_> = plans
                .get_ref()
                .iter()
                .map(|(plan, rate)| {
                    diag.check(rate.span(), parse_rate(rate.get_ref()))
                        .map(|rate| (plan.clone(), rate))
                })
                .collect();
            parsed.into_iter().collect()
        }
    }
}

/// A window zone's plans must count in the unit of its `rate`, as a key's window is one
/// unit long; each plan that does not is reported at its entry of `written`.
fn check_plan_units(
    algorithm: Algorithm,
    rate: Rate,
    plans: &[(String, Rate)],
    written: &Spanned<Plans>,
    diag: &mut Diagnostics<'_>,
) {
    let windowed = matches!(
        algorithm,
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog
    );
    if !windowed {
        return;
    }
    for (plan, plan_rate) in plans {
        if plan_rate.period != rate.period {
            let span = written
                .get_ref()
                .get(plan)
                .map_or(written.span(), Spanned::span);
            let message = format!(
                r#"plan "{plan}": a window zone's plans must count in the unit of its `rate` ({}), as a key's window is one unit long"#,
                rate
            );
            diag.error(span, message);
        }
    }
}

/// `size`: at least nginx's smallest zone.
fn size(written: Option<&Loose>, diag: &mut Diagnostics<'_>) -> Option<u64> {
    let Some(size) = written else {
        return Some(DEFAULT_ZONE_SIZE);
    };
    let bytes = diag.check(size.span(), values::size(size.get_ref()))?;
    if bytes < MIN_ZONE_SIZE {
        let message = format!(
            r#"invalid size {}: a zone needs at least "32k""#,
            size.get_ref()
        );
        diag.error(size.span(), message);
        return None;
    }
    Some(bytes)
}

/// Most instances `instances` may name.
const MAX_INSTANCES: i64 = 1000;

/// `backend`, `instances` and `on_error` of a zone (`on_error` is `[redis]`'s when it names
/// none): `Some(None)` for a local zone.
fn zone_redis(
    raw: &RawZone,
    algorithm: Algorithm,
    on_error: OnError,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<ZoneSettings>> {
    let redis = raw
        .backend
        .as_ref()
        .is_some_and(|b| *b.get_ref() == RawBackend::Redis);
    if !redis {
        let stray = [
            raw.instances.as_ref().map(|i| i.span()),
            raw.on_error.as_ref().map(|o| o.span()),
        ];
        let mut valid = true;
        for span in stray.into_iter().flatten() {
            diag.error(
                span,
                "only a zone with `backend = \"redis\"` takes this key",
            );
            valid = false;
        }
        if let Some(lease) = &raw.lease {
            diag.error(
                lease.span(),
                "`lease` takes units from Redis ahead of need, and a local zone keeps its state here: use `backend = \"redis\"`, or drop `lease`",
            );
            valid = false;
        }
        return valid.then_some(None);
    }
    let backend = raw.backend.as_ref().map(|b| b.span()).unwrap_or_default();
    if !algorithm.can_use_redis() {
        diag.error(
            backend,
            "a `concurrency` zone cannot be kept in Redis: its counts are released by the instance that took them; use `backend = \"local\"`",
        );
        return None;
    }
    // Left out: counted by the heartbeat.
    let instances = match &raw.instances {
        None => Some(None),
        Some(value) => {
            let n = *value.get_ref();
            if (1..=MAX_INSTANCES).contains(&n) {
                u64::try_from(n).ok().map(Some)
            } else {
                let message = format!("invalid instances {n}: expected 1 to {MAX_INSTANCES}");
                diag.error(value.span(), message);
                None
            }
        }
    };
    let lease = lease(raw.lease.as_ref(), diag);
    Some(Some(ZoneSettings {
        on_error: raw.on_error.as_ref().map_or(on_error, |o| *o.get_ref()),
        instances: instances?,
        lease: lease?,
    }))
}

/// The longest `lease`: a key's lease is a bound on how far past its limit an instance
/// may go, so it stays small beside any sensible rate.
const MAX_LEASE: i64 = 10_000;

/// `lease`: 1 to [`MAX_LEASE`] units; `Some(None)` when left out. Every algorithm a
/// Redis zone may have can lease (each script takes `want`).
fn lease(written: Option<&Spanned<i64>>, diag: &mut Diagnostics<'_>) -> Option<Option<u64>> {
    let Some(value) = written else {
        return Some(None);
    };
    let n = *value.get_ref();
    if !(1..=MAX_LEASE).contains(&n) {
        let message = format!("invalid lease {n}: expected 1 to {MAX_LEASE} units");
        diag.error(value.span(), message);
        return None;
    }
    u64::try_from(n).ok().map(Some)
}

fn prefix(value: Option<&Spanned<i64>>, bits: u8, diag: &mut Diagnostics<'_>) -> Option<u8> {
    let Some(value) = value else {
        return Some(bits);
    };
    let prefix = u8::try_from(*value.get_ref())
        .ok()
        .filter(|p| (1..=bits).contains(p));
    if prefix.is_none() {
        let message = format!("invalid prefix {}: expected 1 to {bits}", value.get_ref());
        diag.error(value.span(), message);
    }
    prefix
}

/// nginx's rate syntax: `"10r/s"`, `"5r/m"`, `"100r/h"`, `"1000r/d"`; whole requests only.
pub(super) fn parse_rate(text: &str) -> Result<Rate, String> {
    let hint = || {
        format!(r#"invalid rate "{text}": expected e.g. "10r/s", "5r/m", "100r/h" or "1000r/d""#)
    };
    let (count, unit) = text.trim().split_once("r/").ok_or_else(hint)?;
    let period = match unit {
        "s" => Period::Second,
        "m" => Period::Minute,
        "h" => Period::Hour,
        "d" => Period::Day,
        _ => return Err(hint()),
    };
    if count.contains('.') {
        return Err(format!(
            r#"invalid rate "{text}": whole requests only; write "30r/m" rather than "0.5r/s""#
        ));
    }
    let count: u64 = count.parse().map_err(|_| hint())?;
    if !(1..=MAX_RATE_COUNT).contains(&count) {
        return Err(format!(
            r#"invalid rate "{text}": the count must be 1 to {MAX_RATE_COUNT}"#
        ));
    }
    Rate::new(count, period).ok_or_else(hint)
}

/// A zone's `key`, a problem reported at its `$` (`file:line:col`).
/// `plan`: a text read from each request, naming one of the zone's `plans`. It takes the
/// variables a key takes (`$request_id` and captures refused).
fn plan_from(raw: &RawZone, maps: &Maps, plans: &Option<Vec<(String, Rate)>>, diag: &mut Diagnostics<'_>) -> Option<Option<VarText>> {
    let Some(written) = &raw.plan else {
        return Some(None);
    };
    if plans.as_ref().is_some_and(Vec::is_empty) {
        diag.error(written.span(), "`plan` names one of the zone's `plans`, and it has none: add `plans = { pro = \"100r/s\" }`");
        return None;
    }
    zone_key(written, maps, diag).map(Some)
}

fn zone_key(value: &Spanned<String>, maps: &Maps, diag: &mut Diagnostics<'_>) -> Option<VarText> {
    match parse_key(value.get_ref(), maps) {
        Ok(key) => Some(key),
        Err(err) => {
            diag.error_in_string(value.span(), value.get_ref(), err.at, err.message);
            None
        }
    }
}

/// A key template: literal text and variables, in the language of every other place
/// (docs/config.md's "Variables"), but for the two that make no key ([`refused_in_key`]).
pub(super) fn parse_key(text: &str, maps: &Maps) -> Result<VarText, UnknownVar> {
    if text.is_empty() {
        let message =
            r#"invalid key "": expected a variable such as "$binary_remote_addr" or literal text"#;
        return Err(UnknownVar {
            at: 0,
            message: message.to_owned(),
        });
    }
    maps.parse(text, refused_in_key)
}

/// Why a variable has no place in a zone key: `$request_id` is new for every request, so
/// no two requests would share a key (the zone would limit nothing and fill up); a
/// capture belongs to one location's regex, while a zone serves every location that
/// lists it.
fn refused_in_key(var: &Var) -> Option<String> {
    match var {
        Var::RequestId => Some(
            "`$request_id` cannot be part of a key: it is new for every request, so no two \
             requests would share a key"
                .to_owned(),
        ),
        Var::Capture(_) => Some(
            "captures ($1 to $9) cannot be part of a key: they belong to one location's regex, \
             and a zone serves every location that lists it"
                .to_owned(),
        ),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use http::HeaderName;

    use super::*;
    use crate::vars::Piece;

    #[test]
    fn rates_take_nginx_units_and_stay_exact() {
        assert_eq!(
            parse_rate("10r/s"),
            Ok(Rate::new(10, Period::Second).unwrap())
        );
        assert_eq!(parse_rate("1r/m").map(|r| r.period), Ok(Period::Minute));
        assert_eq!(parse_rate("100r/h").map(|r| r.count.get()), Ok(100));
        assert_eq!(parse_rate("1000r/d").map(|r| r.period), Ok(Period::Day));
        assert!(parse_rate("0.5r/s").unwrap_err().contains("30r/m"));
        assert!(parse_rate("0r/s").unwrap_err().contains("1 to"));
        assert!(parse_rate("10/s").unwrap_err().contains("expected e.g."));
        assert!(parse_rate("10r/w").is_err());
    }

    #[test]
    fn key_templates_split_into_literals_and_variables() {
        let key = parse_key("$http_x_api_key:$uri", &Maps::default()).expect("valid");
        assert_eq!(
            key.pieces(),
            [
                Piece::Var(Var::Header(HeaderName::from_static("x-api-key"))),
                Piece::Text(":".into()),
                Piece::Var(Var::Uri)
            ]
        );
        let key = parse_key("ip-${binary_remote_addr}x", &Maps::default()).expect("valid");
        assert_eq!(
            key.pieces(),
            [
                Piece::Text("ip-".into()),
                Piece::Var(Var::BinaryRemoteAddr),
                Piece::Text("x".into())
            ]
        );
        assert_eq!(
            parse_key("global", &Maps::default()).expect("valid").pieces(),
            [Piece::Text("global".into())]
        );
        assert!(parse_key("$remote_adr", &Maps::default())
            .unwrap_err()
            .message
            .contains("unknown variable"));
        assert!(parse_key("$", &Maps::default()).is_err());
        assert!(parse_key("${uri", &Maps::default()).is_err());
        assert!(parse_key("", &Maps::default()).is_err());
    }

    #[test]
    fn a_key_takes_every_variable_but_the_request_id_and_captures() {
        let every = "$scheme $host $server_name $server_port $request_method $request_uri \
                     $uri $args $arg_k $remote_addr $binary_remote_addr $remote_port \
                     $http_x_a $cookie_s";
        assert!(parse_key(every, &Maps::default()).is_ok());
        let id = parse_key("k:$request_id", &Maps::default()).unwrap_err();
        assert_eq!(id.at, 2);
        assert!(id
            .message
            .starts_with("`$request_id` cannot be part of a key"));
        let capture = parse_key("${uri}$1", &Maps::default()).unwrap_err();
        assert_eq!(capture.at, 6);
        assert!(capture.message.starts_with("captures ($1 to $9) cannot"));
    }
}
