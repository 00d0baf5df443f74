//! Who may pass: `[zones.NAME]` (key templates, rates, plans), `[access]`,
//! `[api_keys]`, and each location's `limit`, `access`, `cost` and `limit_status`.

use std::collections::HashMap;
use std::path::Path;

use http::{HeaderName, StatusCode};
use serde_spanned::Spanned;

use super::diag::Diagnostics;
use super::raw::{Named, Networks, RawAccess, RawAlgorithm, RawApiKeys, RawLimit, RawZone, Span};
use super::raw::{RawBackend, RawOnError};
use super::{values, Access, AccessRule, Algorithm, ApiKeys, KeyTemplate, Limit, Part};
use super::{OnError, Period, Rate, Zone, ZoneRedis};
use crate::limit::redis::MAX_EXACT;
use crate::limit::store::MAX_SHARDS;
use crate::limit::zone::MAX_LIMITS;

/// nginx's smallest zone: 8 pages.
const MIN_ZONE_SIZE: u64 = 32 << 10;
const DEFAULT_ZONE_SIZE: u64 = 10 << 20;
const MAX_RATE_COUNT: u64 = 1_000_000;
const MAX_BURST: i64 = 1_000_000;
const MAX_COST: i64 = 1_000_000;
const VARIABLES: &str = "$binary_remote_addr, $remote_addr, $http_NAME, $arg_NAME, \
                         $cookie_NAME, $uri, $request_method, $host";

pub(super) fn access(raw: RawAccess, diag: &mut Diagnostics<'_>) -> Option<Access> {
    let deny = networks(raw.deny.as_ref(), diag);
    let exempt = networks(raw.exempt.as_ref(), diag);
    Some(Access {
        deny: deny?,
        exempt: exempt?,
    })
}

fn networks(list: Option<&Networks>, diag: &mut Diagnostics<'_>) -> Option<Vec<ipnet::IpNet>> {
    let Some(list) = list else {
        return Some(Vec::new());
    };
    let nets: Vec<_> = list
        .get_ref()
        .iter()
        .map(|item| diag.check(item.span(), values::network(item.get_ref())))
        .collect();
    nets.into_iter().collect()
}

/// Every zone, or `None` when any had a problem.
pub(super) fn zones(raw: Vec<Named<RawZone>>, diag: &mut Diagnostics<'_>) -> Option<Vec<Zone>> {
    let zones: Vec<_> = raw.into_iter().map(|entry| zone(entry, diag)).collect();
    zones.into_iter().collect()
}

fn zone(entry: Named<RawZone>, diag: &mut Diagnostics<'_>) -> Option<Zone> {
    let name = entry.name.get_ref().clone();
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid_name {
        let message = format!(r#"invalid zone name "{name}": use letters, digits, "_" and "-""#);
        diag.error(entry.name.span(), message);
    }
    let body = entry.body?;
    let table = body.span();
    let raw = body.into_inner();
    let key = diag
        .required(raw.key.as_ref(), &table, "key")
        .and_then(|key| diag.check(key.span(), parse_key(key.get_ref())));
    let algorithm = match raw.algorithm.as_ref().map(|a| *a.get_ref()) {
        None | Some(RawAlgorithm::LeakyBucket) => Algorithm::LeakyBucket,
        Some(RawAlgorithm::TokenBucket) => Algorithm::TokenBucket,
        Some(RawAlgorithm::FixedWindow) => Algorithm::FixedWindow,
        Some(RawAlgorithm::SlidingWindow) => Algorithm::SlidingWindow,
        Some(RawAlgorithm::SlidingLog) => Algorithm::SlidingLog,
        Some(RawAlgorithm::Concurrency) => Algorithm::Concurrency,
    };
    let concurrency = algorithm == Algorithm::Concurrency;
    let rate = match (&raw.rate, concurrency) {
        (Some(rate), true) => {
            let message =
                "a `concurrency` zone counts requests in flight; it takes `max`, not `rate`";
            diag.error(rate.span(), message);
            None
        }
        (None, true) => Some(None),
        (rate, false) => diag
            .required(rate.as_ref(), &table, "rate")
            .and_then(|rate| diag.check(rate.span(), parse_rate(rate.get_ref())))
            .map(Some),
    };
    let max = match (&raw.max, concurrency) {
        (Some(max), true) => {
            let value = *max.get_ref();
            if !(1..=MAX_BURST).contains(&value) {
                let message = format!("invalid max {value}: expected 1 to {MAX_BURST}");
                diag.error(max.span(), message);
            }
            u64::try_from(value).ok().filter(|v| *v >= 1)
        }
        (None, true) => {
            if !diag.was_left_out(&table, "max") {
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
    };
    let plans = match (&raw.plans, concurrency) {
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
    };
    let windowed = matches!(
        algorithm,
        Algorithm::FixedWindow | Algorithm::SlidingWindow | Algorithm::SlidingLog
    );
    if let (true, Some(Some(rate)), Some(plans), Some(written)) =
        (windowed, rate, &plans, &raw.plans)
    {
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
    let size = match &raw.size {
        None => Some(DEFAULT_ZONE_SIZE),
        Some(size) => diag
            .check(size.span(), values::size(size.get_ref()))
            .and_then(|bytes| {
                if bytes < MIN_ZONE_SIZE {
                    let message = format!(
                        r#"invalid size {}: a zone needs at least "32k""#,
                        size.get_ref()
                    );
                    diag.error(size.span(), message);
                    return None;
                }
                Some(bytes)
            }),
    };
    let ipv4_prefix = prefix(raw.ipv4_prefix.as_ref(), 32, diag);
    let ipv6_prefix = prefix(raw.ipv6_prefix.as_ref(), 128, diag);
    let redis = zone_redis(&raw, algorithm, diag);
    valid_name.then_some(())?;
    Some(Zone {
        name,
        key: key?,
        rate: rate?,
        size: size?,
        algorithm,
        plans: plans?,
        max: max?,
        ipv4_prefix: ipv4_prefix?,
        ipv6_prefix: ipv6_prefix?,
        redis: redis?,
    })
}

/// Most instances `instances` may name.
const MAX_INSTANCES: i64 = 1000;

/// `backend`, `instances` and `on_error` of a zone: `Some(None)` for a local zone.
fn zone_redis(
    raw: &RawZone,
    algorithm: Algorithm,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<ZoneRedis>> {
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
        return valid.then_some(None);
    }
    let backend = raw.backend.as_ref().map(|b| b.span()).unwrap_or_default();
    if algorithm == Algorithm::Concurrency {
        diag.error(
            backend,
            "a `concurrency` zone cannot be kept in Redis: its counts are released by the instance that took them; use `backend = \"local\"`",
        );
        return None;
    }
    let instances = match &raw.instances {
        None => Some(1),
        Some(value) => {
            let n = *value.get_ref();
            if (1..=MAX_INSTANCES).contains(&n) {
                u64::try_from(n).ok()
            } else {
                let message = format!("invalid instances {n}: expected 1 to {MAX_INSTANCES}");
                diag.error(value.span(), message);
                None
            }
        }
    };
    Some(Some(ZoneRedis {
        on_error: raw.on_error.as_ref().map(|o| on_error(*o.get_ref())),
        instances: instances?,
    }))
}

pub(super) fn on_error(raw: RawOnError) -> OnError {
    match raw {
        RawOnError::Allow => OnError::Allow,
        RawOnError::Deny => OnError::Deny,
        RawOnError::Local => OnError::Local,
    }
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

/// A key template: literal text and `$name` or `${name}` variables.
pub(super) fn parse_key(text: &str) -> Result<KeyTemplate, String> {
    let mut parts = Vec::new();
    let mut literal = String::new();
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        literal.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, next) = if let Some(braced) = after.strip_prefix('{') {
            let end = braced
                .find('}')
                .ok_or_else(|| format!(r#"invalid key "{text}": unclosed "${{""#))?;
            (&braced[..end], &braced[end + 1..])
        } else {
            let end = after
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(after.len());
            (&after[..end], &after[end..])
        };
        if name.is_empty() {
            return Err(format!(
                r#"invalid key "{text}": "$" must start a variable, one of {VARIABLES}"#
            ));
        }
        if !literal.is_empty() {
            parts.push(Part::Literal(
                std::mem::take(&mut literal).into_bytes().into(),
            ));
        }
        parts.push(variable(name).ok_or_else(|| {
            format!(
                r#"invalid key "{text}": unknown variable "${name}", expected one of {VARIABLES}"#
            )
        })?);
        rest = next;
    }
    literal.push_str(rest);
    if !literal.is_empty() {
        parts.push(Part::Literal(literal.into_bytes().into()));
    }
    if parts.is_empty() {
        return Err(
            r#"invalid key "": expected a variable such as "$binary_remote_addr" or literal text"#
                .to_owned(),
        );
    }
    Ok(KeyTemplate { parts })
}

fn variable(name: &str) -> Option<Part> {
    let named = |prefix: &str| {
        name.strip_prefix(prefix)
            .filter(|rest| !rest.is_empty())
            .map(str::to_owned)
    };
    Some(match name {
        "binary_remote_addr" => Part::BinaryRemoteAddr,
        "remote_addr" => Part::RemoteAddr,
        "uri" => Part::Uri,
        "request_method" => Part::RequestMethod,
        "host" => Part::Host,
        _ => {
            if let Some(header) = named("http_") {
                let header = header.replace('_', "-").to_ascii_lowercase();
                Part::Header(HeaderName::from_bytes(header.as_bytes()).ok()?)
            } else if let Some(arg) = named("arg_") {
                Part::Arg(arg.into())
            } else if let Some(cookie) = named("cookie_") {
                Part::Cookie(cookie.into())
            } else {
                return None;
            }
        }
    })
}

/// `[api_keys]`, with its `file` read and merged. Every plan named must be defined by
/// some zone's `plans`.
pub(super) fn api_keys(
    raw: RawApiKeys,
    span: &Span,
    base: &Path,
    plans: &[&str],
    diag: &mut Diagnostics<'_>,
) -> Option<ApiKeys> {
    let header = match &raw.header {
        None => Some(HeaderName::from_static("x-api-key")),
        Some(header) => {
            let name = HeaderName::from_bytes(header.get_ref().as_bytes()).map_err(|_| {
                format!(
                    r#"invalid header name "{}": expected e.g. "X-API-Key""#,
                    header.get_ref()
                )
            });
            diag.check(header.span(), name)
        }
    };
    let mut keys = HashMap::new();
    let mut valid = true;
    if let Some(inline) = &raw.inline {
        for (key, plan) in inline.get_ref() {
            valid &= known_plan(plan.get_ref(), plan.span(), plans, diag);
            keys.insert(key.clone(), plan.get_ref().clone());
        }
    }
    let file = raw.file.as_ref().map(|file| base.join(file.get_ref()));
    if let (Some(written), Some(path)) = (&raw.file, &file) {
        match read_key_file(path) {
            Ok(entries) => {
                for (key, plan) in entries {
                    if !plans.contains(&plan.as_str()) {
                        let message = format!(
                            r#"{}: key "{key}" is on unknown plan "{plan}"; {}"#,
                            path.display(),
                            plan_hint(plans)
                        );
                        diag.error(written.span(), message);
                        valid = false;
                    }
                    keys.insert(key, plan);
                }
            }
            Err(message) => {
                diag.error(written.span(), message);
                valid = false;
            }
        }
    }
    if raw.inline.is_none() && raw.file.is_none() {
        diag.error(span.clone(), "`[api_keys]` needs `inline` or `file`");
        valid = false;
    }
    valid.then_some(())?;
    Some(ApiKeys {
        header: header?,
        keys,
        file,
    })
}

/// A key file: `"key" = "plan"` lines.
pub fn read_key_file(path: &Path) -> Result<Vec<(String, String)>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|err| format!("cannot read the API key file {}: {err}", path.display()))?;
    let table: toml::Table =
        toml::from_str(&text).map_err(|err| format!("{}: {}", path.display(), err.message()))?;
    table
        .into_iter()
        .map(|(key, plan)| match plan {
            toml::Value::String(plan) => Ok((key, plan)),
            other => Err(format!(
                r#"{}: key "{key}": expected a plan name string, found {}"#,
                path.display(),
                other.type_str()
            )),
        })
        .collect()
}

fn known_plan(plan: &str, span: Span, plans: &[&str], diag: &mut Diagnostics<'_>) -> bool {
    if plans.contains(&plan) {
        return true;
    }
    diag.error(
        span,
        format!(r#"unknown plan "{plan}"; {}"#, plan_hint(plans)),
    );
    false
}

fn plan_hint(plans: &[&str]) -> String {
    if plans.is_empty() {
        return "no zone defines `plans`".to_owned();
    }
    let known: Vec<String> = plans.iter().map(|p| format!(r#""{p}""#)).collect();
    format!("zones define {}", known.join(", "))
}

/// What a location's `limit` list needs to know of a valid zone.
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
}

impl ZoneInfo {
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
        ZoneInfo {
            name: zone.name.clone(),
            algorithm: zone.algorithm,
            at_once,
            rates,
            size: zone.size,
            redis: zone.redis.is_some(),
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

fn limit(
    item: &Spanned<RawLimit>,
    zones: &[ZoneInfo],
    cost: u64,
    earlier: &[Limit],
    diag: &mut Diagnostics<'_>,
) -> Option<Limit> {
    let raw = item.get_ref();
    let zone = diag.required(raw.zone.as_ref(), &item.span(), "zone")?;
    let Some(index) = zones.iter().position(|z| &z.name == zone.get_ref()) else {
        let known: Vec<String> = zones.iter().map(|z| format!(r#""{}""#, z.name)).collect();
        let message = if known.is_empty() {
            format!(
                r#"unknown zone "{}": no `[zones.NAME]` is defined"#,
                zone.get_ref()
            )
        } else {
            format!(
                r#"unknown zone "{}", expected one of {}"#,
                zone.get_ref(),
                known.join(", ")
            )
        };
        diag.error(zone.span(), message);
        return None;
    };
    if earlier.iter().any(|l| l.zone == index) {
        diag.error(
            zone.span(),
            format!(
                r#"zone "{}" is listed twice in this location"#,
                zone.get_ref()
            ),
        );
        return None;
    }
    let info = &zones[index];
    let algorithm = &info.algorithm;
    if *algorithm == Algorithm::Concurrency {
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
    }
    let burst = match &raw.burst {
        None => 0,
        Some(burst) => {
            let value = *burst.get_ref();
            if !(0..=MAX_BURST).contains(&value) {
                let message = format!("invalid burst {value}: expected 0 to {MAX_BURST}");
                diag.error(burst.span(), message);
                return None;
            }
            value.unsigned_abs()
        }
    };
    let nodelay = raw.nodelay.as_ref().is_some_and(|n| *n.get_ref());
    let delay = match (&raw.delay, nodelay) {
        (Some(delay), true) => {
            diag.error(
                delay.span(),
                "`delay` and `nodelay = true` exclude each other",
            );
            return None;
        }
        (Some(delay), false) => {
            let value = *delay.get_ref();
            if !(1..=MAX_BURST).contains(&value) {
                let message = format!("invalid delay {value}: expected 1 to {MAX_BURST}");
                diag.error(delay.span(), message);
                return None;
            }
            Some(value.unsigned_abs())
        }
        (None, true) => None,
        (None, false) => Some(0),
    };
    // A request's units must fit in an empty bucket, or every request is rejected.
    let capacity = info.at_once.saturating_add(burst);
    if cost > capacity {
        let message = format!(
            r#"cost {cost} exceeds what zone "{}" can ever admit at once ({capacity}); every request would be rejected"#,
            zone.get_ref()
        );
        diag.error(zone.span(), message);
        return None;
    }
    if let Some(message) = too_big(info, burst, cost) {
        diag.error(item.span(), message);
        return None;
    }
    Some(Limit {
        zone: index,
        burst,
        delay,
        dry_run: raw.dry_run.unwrap_or(false),
    })
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

/// nginx allow/deny rules: `"allow ADDR[/BITS]"`, `"deny ADDR[/BITS]"`, `"allow all"`,
/// `"deny all"`.
pub(super) fn access_rules(
    list: &Spanned<Vec<Spanned<String>>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<AccessRule>> {
    let rules: Vec<_> = list
        .get_ref()
        .iter()
        .map(|item| diag.check(item.span(), access_rule(item.get_ref())))
        .collect();
    rules.into_iter().collect()
}

pub(super) fn access_rule(text: &str) -> Result<AccessRule, String> {
    let hint = || {
        format!(
            r#"invalid access rule "{text}": expected "allow CIDR", "deny CIDR", "allow all" or "deny all""#
        )
    };
    let (verb, target) = text
        .trim()
        .split_once(char::is_whitespace)
        .ok_or_else(hint)?;
    let allow = match verb {
        "allow" => true,
        "deny" => false,
        _ => return Err(hint()),
    };
    let target = target.trim();
    let net = match target {
        "all" => None,
        _ => Some(values::network(target)?),
    };
    Ok(AccessRule { allow, net })
}

/// A status for `limit_status`: 400 to 599, as nginx's `limit_req_status`.
pub(super) fn limit_status(value: &Spanned<i64>, diag: &mut Diagnostics<'_>) -> Option<StatusCode> {
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

#[cfg(test)]
mod tests {
    use super::*;

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
        let key = parse_key("$http_x_api_key:$uri").expect("valid");
        assert_eq!(
            key.parts,
            [
                Part::Header(HeaderName::from_static("x-api-key")),
                Part::Literal(b":".as_slice().into()),
                Part::Uri
            ]
        );
        let key = parse_key("ip-${binary_remote_addr}x").expect("valid");
        assert_eq!(
            key.parts,
            [
                Part::Literal(b"ip-".as_slice().into()),
                Part::BinaryRemoteAddr,
                Part::Literal(b"x".as_slice().into())
            ]
        );
        assert_eq!(
            parse_key("global").expect("valid").parts,
            [Part::Literal(b"global".as_slice().into())]
        );
        assert!(parse_key("$remote_adr")
            .unwrap_err()
            .contains("unknown variable"));
        assert!(parse_key("$").is_err());
        assert!(parse_key("${uri").is_err());
        assert!(parse_key("").is_err());
    }

    #[test]
    fn access_rules_are_allow_or_deny_of_a_network_or_all() {
        let rule = access_rule("deny 10.0.0.13").expect("valid");
        assert!(!rule.allow && rule.net == Some("10.0.0.13/32".parse().expect("net")));
        assert_eq!(
            access_rule("allow all"),
            Ok(AccessRule {
                allow: true,
                net: None
            })
        );
        assert!(access_rule("permit all").is_err());
        assert!(access_rule("deny").is_err());
        assert!(access_rule("deny 10.0.0.0/33").is_err());
    }
}
