//! Raw sections to typed [`Config`] values. Every check runs, whatever failed before
//! it, and reports into one [`Diagnostics`]; a `Config` is built only when none failed.

use std::path::Path;
use std::time::Duration;

use http::HeaderName;
use serde_spanned::Spanned;

use super::diag::{ConfigErrors, Diagnostics};
use super::raw::{self, Loose, RawBalance, RawLog, RawLogFormat, RawRealIp, RawServerItem};
use super::raw::{RawUpstream, RawUpstreamEntry, Section, Span};
use super::{access, api_keys, limits, location, server, values, zones};
use super::{Access, AccessLog, Admin, Balance, Config, Log, LogFormat};
use super::{OnError, RealIp, Redis, Tls, Upstream, UpstreamServer};

const MAX_WEIGHT: i64 = 1000;

/// Parses and checks `text`; `origin` names the file in messages and is the base of
/// relative paths.
pub(crate) fn validate(text: &str, origin: &Path) -> Result<Config, ConfigErrors> {
    let mut diag = Diagnostics::new(text);
    let raw = raw::parse(text, &mut diag);
    let base = origin.parent().unwrap_or(Path::new(""));

    // Whether `[tls]` lists a certificate (`None`: the section is invalid, so say nothing).
    let certificates = match &raw.tls {
        Section::Absent => Some(false),
        Section::Invalid => None,
        Section::Present(_, tls) => Some(
            tls.certificates
                .as_ref()
                .is_some_and(|list| !list.get_ref().is_empty()),
        ),
    };
    let server = server::server(raw.server, certificates, &mut diag);
    let tls = match raw.tls {
        Section::Absent => Some(None),
        Section::Invalid => None,
        Section::Present(span, raw) => tls(raw, &span, base, &mut diag).map(Some),
    };
    let redis = match raw.redis {
        Section::Absent => Some(None),
        Section::Invalid => None,
        Section::Present(span, raw) => redis(raw, &span, base, &mut diag).map(Some),
    };
    let real_ip = match raw.real_ip {
        Section::Absent => Some(None),
        Section::Invalid => None,
        Section::Present(span, raw) => real_ip(raw, &span, &mut diag).map(Some),
    };
    let log = match raw.log {
        Section::Absent => Some(Log {
            access: AccessLog::Stdout,
            format: LogFormat::Combined,
        }),
        Section::Invalid => None,
        Section::Present(_, raw) => log(raw, base, &mut diag),
    };
    let access = match raw.access {
        Section::Absent => Some(Access::default()),
        Section::Invalid => None,
        Section::Present(_, raw) => access::access(raw, &mut diag),
    };
    let on_error = match &redis {
        Some(Some(redis)) => redis.on_error,
        _ => OnError::Local,
    };
    let zones = zones::zones(raw.zones, on_error, &mut diag);
    let plans: Vec<String> = zones
        .iter()
        .flatten()
        .flat_map(|zone| zone.plans.iter().map(|(plan, _)| plan.clone()))
        .collect();
    let plan_names: Vec<&str> = plans.iter().map(String::as_str).collect();
    let api_keys = match raw.api_keys {
        Section::Absent => Some(None),
        Section::Invalid => None,
        Section::Present(span, raw) => {
            api_keys::api_keys(raw, &span, base, &plan_names, &mut diag).map(Some)
        }
    };
    if let (Some(zones), Some(None)) = (&zones, &redis) {
        for zone in zones.iter().filter(|zone| zone.redis.is_some()) {
            diag.error_nowhere(format!(
                "zone \"{}\" has `backend = \"redis\"` but no [redis] section says where Redis is",
                zone.name
            ));
        }
    }
    if matches!(api_keys, Some(None)) && !plans.is_empty() {
        diag.error_nowhere(
            "zones define `plans` but no `[api_keys]` says which key is on which plan",
        );
    }
    let zone_limits: Vec<limits::ZoneInfo> =
        zones.iter().flatten().map(limits::ZoneInfo::new).collect();
    let names: Vec<String> = raw
        .upstreams
        .iter()
        .map(|u| u.name.get_ref().clone())
        .collect();
    let upstreams = all(raw
        .upstreams
        .into_iter()
        .map(|entry| upstream(entry, &mut diag)));
    let locations = location::locations(raw.locations, &names, &zone_limits, &mut diag);
    let admin = match raw.admin {
        Section::Absent => Some(None),
        Section::Invalid => None,
        Section::Present(span, raw) => diag
            .required(raw.listen.as_ref(), &span, "listen")
            .and_then(|listen| diag.check(listen.span(), values::listen_addr(listen.get_ref())))
            .map(|listen| Some(Admin { listen })),
    };

    match (
        server, real_ip, access, log, upstreams, zones, api_keys, locations, admin, tls, redis,
    ) {
        (
            Some(server),
            Some(real_ip),
            Some(access),
            Some(log),
            Some(upstreams),
            Some(zones),
            Some(api_keys),
            Some(locations),
            Some(admin),
            Some(tls),
            Some(redis),
        ) if !diag.has_errors() => Ok(Config {
            origin: origin.to_path_buf(),
            sha256: String::new(),
            server,
            real_ip,
            access,
            log,
            upstreams,
            zones,
            api_keys,
            locations,
            admin,
            tls,
            redis,
        }),
        _ => {
            if !diag.has_errors() {
                // A check returned nothing without saying why: a bug here, not in the file.
                diag.error_nowhere(
                    "internal error: the configuration was rejected without a reason",
                );
            }
            Err(diag.finish(origin))
        }
    }
}

/// `[redis]`: one server by `url`, or a Redis Cluster by the `urls` of some of its nodes.
fn redis(
    raw: raw::RawRedis,
    span: &Span,
    base: &Path,
    diag: &mut Diagnostics<'_>,
) -> Option<Redis> {
    let timeout = match &raw.timeout {
        Some(value) => diag.check(value.span(), values::duration(value.get_ref())),
        None => Some(Duration::from_millis(50)),
    };
    let cluster = raw.urls.is_some();
    let urls = match (raw.url, raw.urls) {
        (Some(url), None) => redis_url(&url, diag).map(|url| vec![url]),
        (None, Some(urls)) if urls.get_ref().is_empty() => {
            diag.error(
                urls.span(),
                "`urls` is empty: list some nodes of the cluster",
            );
            None
        }
        (None, Some(urls)) => {
            let parsed: Vec<_> = urls
                .into_inner()
                .iter()
                .map(|url| redis_url(url, diag))
                .collect();
            parsed.into_iter().collect()
        }
        (Some(url), Some(_)) => {
            let message = "give either `url` (one server) or `urls` (a Redis Cluster), not both";
            diag.error(url.span(), message);
            None
        }
        (None, None) => {
            if !diag.was_left_out(span, "url") && !diag.was_left_out(span, "urls") {
                diag.error(
                    span.clone(),
                    "missing key `url` (or `urls` for a Redis Cluster)",
                );
            }
            None
        }
    };
    let on_error = raw.on_error.map_or(OnError::Local, |o| *o.get_ref());
    let ca = match &raw.ca {
        None => Some(None),
        Some(path) => {
            let file = base.join(path.get_ref());
            match std::fs::read(&file) {
                Ok(pem) if pem.windows(17).any(|w| w == b"BEGIN CERTIFICATE") => Some(Some(pem)),
                Ok(_) => {
                    let message = format!(
                        "{}: no certificate found: expected a PEM \"BEGIN CERTIFICATE\" block",
                        file.display()
                    );
                    diag.error(path.span(), message);
                    None
                }
                Err(err) => {
                    diag.error(
                        path.span(),
                        format!("cannot read {}: {err}", file.display()),
                    );
                    None
                }
            }
        }
    };
    Some(Redis {
        urls: urls?,
        cluster,
        ca: ca?,
        timeout: timeout?,
        on_error,
    })
}

/// One `redis://` URL, checked.
fn redis_url(url: &Spanned<String>, diag: &mut Diagnostics<'_>) -> Option<String> {
    let text = url.get_ref();
    match redis::parse_redis_url(text) {
        Some(parsed) if matches!(parsed.scheme(), "redis" | "rediss") => Some(text.clone()),
        Some(_) => {
            let message = format!("unsupported Redis URL {text:?}: expected redis:// or rediss://");
            diag.error(url.span(), message);
            None
        }
        None => {
            let message = format!(
                "invalid Redis URL {text:?}: expected redis://HOST:PORT[/DB] or rediss://HOST:PORT[/DB]"
            );
            diag.error(url.span(), message);
            None
        }
    }
}

/// `[tls]`: every certificate is read and checked now, so that `tollgate -t` and a
/// reload catch a missing file or a key that does not match.
fn tls(raw: raw::RawTls, span: &Span, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Tls> {
    let handshake_timeout = duration(&raw.handshake_timeout, 10, diag);
    let list = diag.required(raw.certificates, span, "certificates")?;
    if list.get_ref().is_empty() {
        diag.error(
            list.span(),
            "`certificates` is empty: list at least one { cert, key }",
        );
        return None;
    }
    let mut certificates = Vec::new();
    let mut valid = true;
    for entry in list.into_inner() {
        let at = entry.span();
        let entry = entry.into_inner();
        let (Some(cert), Some(key)) = (
            diag.required(entry.cert, &at, "cert"),
            diag.required(entry.key, &at, "key"),
        ) else {
            valid = false;
            continue;
        };
        let (cert_path, key_path) = (base.join(cert.get_ref()), base.join(key.get_ref()));
        match crate::certs::load(&cert_path, &key_path) {
            Ok(loaded) => certificates.push(loaded),
            Err(err) => {
                let at = if err.path() == key_path {
                    key.span()
                } else {
                    cert.span()
                };
                diag.error(at, err.to_string());
                valid = false;
            }
        }
    }
    Some(Tls {
        certificates: valid.then_some(certificates)?,
        handshake_timeout: handshake_timeout?,
    })
}

/// The duration at `value`, or `default_secs` when the key is absent.
pub(super) fn duration(
    value: &Option<Loose>,
    default_secs: u64,
    diag: &mut Diagnostics<'_>,
) -> Option<Duration> {
    match value {
        Some(value) => diag.check(value.span(), values::duration(value.get_ref())),
        None => Some(Duration::from_secs(default_secs)),
    }
}

fn real_ip(raw: RawRealIp, span: &Span, diag: &mut Diagnostics<'_>) -> Option<RealIp> {
    let trusted = diag
        .required(raw.trusted.as_ref(), span, "trusted")
        .and_then(|trusted| {
            if trusted.get_ref().is_empty() {
                let message = "`trusted` must list at least one address or network; remove `[real_ip]` to trust no one";
                diag.error(trusted.span(), message);
            }
            all(trusted
                .get_ref()
                .iter()
                .map(|item| diag.check(item.span(), values::network(item.get_ref()))))
        });
    let header = match &raw.header {
        None => Some(HeaderName::from_static("x-forwarded-for")),
        Some(header) => {
            let name = HeaderName::from_bytes(header.get_ref().as_bytes()).map_err(|_| {
                format!(
                    r#"invalid header name "{}": expected e.g. "X-Forwarded-For""#,
                    header.get_ref()
                )
            });
            diag.check(header.span(), name)
        }
    };
    Some(RealIp {
        trusted: trusted.filter(|list| !list.is_empty())?,
        header: header?,
        recursive: raw.recursive.unwrap_or(false),
    })
}

fn log(raw: RawLog, base: &Path, diag: &mut Diagnostics<'_>) -> Option<Log> {
    let access = match &raw.access {
        None => Some(AccessLog::Stdout),
        Some(access) => match access.get_ref().as_str() {
            "off" => Some(AccessLog::Off),
            "stdout" => Some(AccessLog::Stdout),
            "" => {
                let message = r#"invalid access log "": expected "off", "stdout" or a file path"#;
                diag.error(access.span(), message);
                None
            }
            path => Some(AccessLog::File(base.join(path))),
        },
    };
    let format = match raw.format.unwrap_or(RawLogFormat::Combined) {
        RawLogFormat::Combined => LogFormat::Combined,
        RawLogFormat::Json => LogFormat::Json,
    };
    Some(Log {
        access: access?,
        format,
    })
}

fn upstream(entry: RawUpstreamEntry, diag: &mut Diagnostics<'_>) -> Option<Upstream> {
    let name = entry.name.get_ref();
    let valid_name = !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    if !valid_name {
        let message =
            format!(r#"invalid upstream name "{name}": use letters, digits, "_" and "-""#);
        diag.error(entry.name.span(), message);
    }
    let body = entry.body?;
    let servers = diag
        .required(body.get_ref().servers.as_ref(), &body.span(), "servers")
        .and_then(|list| servers(list, diag));
    let raw: RawUpstream = body.into_inner();
    let connect_timeout = duration(&raw.connect_timeout, 2, diag);
    let read_timeout = duration(&raw.read_timeout, 60, diag);
    let fail_timeout = duration(&raw.fail_timeout, 10, diag);
    let balance = match raw.balance.unwrap_or(RawBalance::RoundRobin) {
        RawBalance::RoundRobin => Balance::RoundRobin,
        RawBalance::LeastConn => Balance::LeastConn,
        RawBalance::IpHash => Balance::IpHash,
    };
    valid_name.then_some(())?;
    Some(Upstream {
        name: name.clone(),
        servers: servers?,
        balance,
        connect_timeout: connect_timeout?,
        read_timeout: read_timeout?,
        keepalive: raw.keepalive.unwrap_or(64),
        max_fails: raw.max_fails.unwrap_or(1),
        fail_timeout: fail_timeout?,
    })
}

/// Every item of `servers`, host names resolved; each address of a name gets the
/// item's weight.
fn servers(
    list: &Spanned<Vec<Spanned<RawServerItem>>>,
    diag: &mut Diagnostics<'_>,
) -> Option<Vec<UpstreamServer>> {
    if list.get_ref().is_empty() {
        diag.error(list.span(), "`servers` must list at least one server");
        return None;
    }
    let mut servers = Vec::new();
    let mut valid = true;
    for item in list.get_ref() {
        let (addr, weight) = match item.get_ref() {
            RawServerItem::Addr(addr) => (Some((addr, item.span())), Some(1)),
            RawServerItem::Table(table) => {
                let weight = table.weight.as_ref().map_or(Some(1), |w| weight(w, diag));
                let addr = diag.required(table.addr.as_ref(), &item.span(), "addr");
                (addr.map(|addr| (addr.get_ref(), addr.span())), weight)
            }
        };
        let addrs = addr.and_then(|(addr, span)| diag.check(span, values::upstream_addrs(addr)));
        match (addrs, weight) {
            (Some(addrs), Some(weight)) => {
                servers.extend(
                    addrs
                        .into_iter()
                        .map(|addr| UpstreamServer { addr, weight }),
                );
            }
            _ => valid = false,
        }
    }
    valid.then_some(servers)
}

fn weight(weight: &Spanned<i64>, diag: &mut Diagnostics<'_>) -> Option<u32> {
    let value = *weight.get_ref();
    if (1..=MAX_WEIGHT).contains(&value) {
        return u32::try_from(value).ok();
    }
    diag.error(
        weight.span(),
        format!("invalid weight {value}: expected 1 to {MAX_WEIGHT}"),
    );
    None
}

/// Every item, or `None` if any is missing. Unlike `collect::<Option<_>>()` this runs
/// the whole iterator, so each item's problems are reported.
fn all<T>(items: impl Iterator<Item = Option<T>>) -> Option<Vec<T>> {
    let items: Vec<Option<T>> = items.collect();
    items.into_iter().collect()
}
