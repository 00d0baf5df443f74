//! `limit_req_zone` / `limit_req` and `limit_conn_zone` / `limit_conn`: tollgate's zones
//! (leaky bucket, nginx's own algorithm; `concurrency` for `limit_conn`) and each
//! location's `limit` list, with nginx's status (503; 444, no answer, is
//! `limit_action = "close"`) and no rate-limit headers.

use tollgate_nginx::Directive;

use super::build::{sp, Zone};
use super::level::{Level, Limit};
use super::report::Status;
use super::values;
use super::state::Walk;
use crate::config::raw::{RawLimit, RawLocation};
use crate::config::LimitAction;

/// tollgate's smallest zone.
const MIN_SIZE: u64 = 32 * 1024;
/// `limit_req_status 444`: no answer, the connection closed (`NGX_HTTP_CLOSE`).
const CLOSE: i64 = 444;

/// `limit_req_zone KEY zone=NAME:SIZE rate=R` or `limit_conn_zone KEY zone=NAME:SIZE`.
pub(super) fn zone(w: &mut Walk<'_>, d: &Directive) -> Status {
    let concurrency = d.name == "limit_conn_zone";
    let Some((key, params)) = d.args.split_first() else {
        return Status::Unsupported("a zone needs a key".to_owned());
    };
    if let Err(why) = values::vars(key) {
        return Status::Unsupported(why);
    }
    if key.contains("$request_id") {
        return Status::Unsupported("`$request_id` differs for every request: no two requests would share a key".to_owned());
    }
    let mut zone = Zone {
        key: key.clone(),
        concurrency,
        note: vec![w.source(d.place)],
        ..Zone::default()
    };
    let mut differences = Vec::new();
    for param in params {
        let (name, value) = param.split_once('=').unwrap_or((param, ""));
        match name {
            "zone" => {
                let (zone_name, size) = value.split_once(':').unwrap_or((value, ""));
                zone.name = values::name(zone_name);
                match values::size_bytes(size) {
                    Some(bytes) if bytes >= MIN_SIZE => zone.size = values::size(size),
                    Some(_) => {
                        zone.size = Some("32k".to_owned());
                        differences.push(format!("size {size} raised to 32k, tollgate's smallest"));
                    }
                    None => differences.push(format!("size `{size}` left out: tollgate's default, 10m")),
                }
            }
            "rate" if !concurrency => zone.rate = Some(value.to_owned()),
            "sync" => differences.push("`sync` left out: `backend = \"redis\"` shares a zone between instances".to_owned()),
            _ => differences.push(format!("`{param}` left out")),
        }
    }
    if zone.name.is_empty() {
        return Status::Unsupported("no `zone=NAME:SIZE`".to_owned());
    }
    let valid_rate = zone.rate.as_deref().is_some_and(|r| {
        let (n, unit) = r.split_at(r.bytes().take_while(u8::is_ascii_digit).count());
        n.parse::<u32>().is_ok_and(|n| (1..=1_000_000).contains(&n)) && matches!(unit, "r/s" | "r/m")
    });
    if !concurrency && !valid_rate {
        return Status::Unsupported(format!("rate `{}`: tollgate takes 1 to 1000000 r/s or r/m", zone.rate.unwrap_or_default()));
    }
    if w.build.zone(&zone.name).is_some() {
        return Status::Unsupported(format!("a second zone named `{}`", zone.name));
    }
    w.build.zones.push(zone);
    match differences.is_empty() {
        true if concurrency => Status::Exact(Some("a `concurrency` zone, its `max` from the first limit_conn (not written if none uses it)".to_owned())),
        true => Status::Exact(None),
        false => Status::Approx(differences.join("; ")),
    }
}

/// `limit_req`, `limit_conn` and their `_status`, `_dry_run`, `_log_level`.
pub(super) fn setting(w: &mut Walk<'_>, d: &Directive, own: &mut Level) -> Option<Status> {
    let args = d.args.as_slice();
    Some(match (d.name.as_str(), args) {
        ("limit_req", [first, params @ ..]) => {
            let list = own.limit_req.get_or_insert_with(Vec::new);
            let Some(zone) = first.strip_prefix("zone=").map(values::name) else {
                return Some(Status::Unsupported("`limit_req` needs `zone=NAME`".to_owned()));
            };
            match w.build.zone(&zone) {
                Some(z) if !z.concurrency => {}
                _ => return Some(Status::Unsupported(format!("no `limit_req_zone` named `{zone}`"))),
            }
            let mut limit = Limit { zone, burst: None, nodelay: false, delay: None, conn: None };
            for param in params {
                let (key, value) = param.split_once('=').unwrap_or((param, ""));
                match (key, value.parse::<i64>()) {
                    ("burst", Ok(n)) => limit.burst = Some(n),
                    ("delay", Ok(n)) if n > 0 => limit.delay = Some(n),
                    ("delay", Ok(_)) => {}
                    ("nodelay", _) => limit.nodelay = true,
                    _ => return Some(Status::Unsupported(format!("`{param}`"))),
                }
            }
            list.push(limit);
            Status::Approx("a refusal carries `Retry-After` (when the next request would pass), which nginx's does not".to_owned())
        }
        ("limit_conn", [zone, n]) => {
            let list = own.limit_conn.get_or_insert_with(Vec::new);
            let zone = values::name(zone);
            let Ok(n) = n.parse::<i64>() else {
                return Some(Status::Unsupported(format!("`{n}` is not a number")));
            };
            let Some(z) = w.build.zone(&zone).filter(|z| z.concurrency) else {
                return Some(Status::Unsupported(format!("no `limit_conn_zone` named `{zone}`")));
            };
            let first = *z.max.get_or_insert(n);
            list.push(Limit { zone, burst: None, nodelay: false, delay: None, conn: Some(n) });
            match first == n {
                true => Status::Exact(Some("requests in flight per key, a `concurrency` zone".to_owned())),
                false => Status::Approx(format!("tollgate's limit is the zone's `max`: {first}, from its first limit_conn")),
            }
        }
        ("limit_req_status" | "limit_conn_status", [code]) => match code.parse::<i64>() {
            Ok(code) if (400..=599).contains(&code) => {
                match d.name.as_str() {
                    "limit_req_status" => own.limit_req_status = Some(code),
                    _ => own.limit_conn_status = Some(code),
                }
                match code == CLOSE {
                    true => Status::Exact(Some("no answer, the connection closed: `limit_action = \"close\"`".to_owned())),
                    false => Status::Exact(None),
                }
            }
            _ => Status::Unsupported(format!("`{code}`: 400 to 599")),
        },
        ("limit_req_dry_run", [flag]) => match values::flag(flag) {
            Some(on) => {
                own.limit_req_dry_run = Some(on);
                Status::Exact(None)
            }
            None => Status::Unsupported(format!("`{flag}`: on or off")),
        },
        ("limit_conn_dry_run", _) => Status::Approx("left out: `dry_run` is written for limit_req only".to_owned()),
        ("limit_req_log_level" | "limit_conn_log_level", _) => Status::Approx("tollgate logs each decision in the access log (`$limit_status`), not at an error-log level".to_owned()),
        ("limit_rate" | "limit_rate_after", _) => Status::Unsupported("bandwidth limits: tollgate limits requests, not bytes per second".to_owned()),
        _ => return None,
    })
}

/// The location's `limit` list and `limit_status` from what it inherits.
pub(super) fn write(w: &mut Walk<'_>, raw: &mut RawLocation, level: &Level) {
    let req = level.limit_req.iter().flatten();
    let conn = level.limit_conn.iter().flatten();
    let mut items: Vec<RawLimit> = Vec::new();
    for limit in req.chain(conn) {
        if items.iter().any(|i| i.zone.as_ref().map(|z| z.get_ref()) == Some(&limit.zone)) || items.len() == 8 {
            continue;
        }
        let dry_run = limit.conn.is_none() && level.limit_req_dry_run == Some(true);
        items.push(RawLimit {
            zone: Some(sp(limit.zone.clone())),
            burst: limit.burst.filter(|b| *b > 0).map(sp),
            nodelay: limit.nodelay.then(|| sp(true)),
            delay: limit.delay.map(sp),
            dry_run: dry_run.then_some(true),
            ..RawLimit::default()
        });
    }
    if level.limit_req.is_none() && level.limit_conn.is_none() {
        return;
    }
    let status = match level.limit_req.as_ref().is_some_and(|l| !l.is_empty()) {
        true => level.limit_req_status,
        false => level.limit_conn_status,
    };
    if !items.is_empty() {
        w.build.limits_used = true;
    }
    // nginx's 444 answers nothing and closes the connection: tollgate's `"close"`.
    if status == Some(CLOSE) {
        raw.limit_action = Some(LimitAction::Close);
    }
    raw.limit_status = status.filter(|s| *s != 503 && *s != CLOSE).map(sp);
    raw.limit = Some(sp(items.into_iter().map(sp).collect()));
}
