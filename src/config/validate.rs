//! Text in, [`Config`] out ([`from_str`], [`load`]): raw sections to typed values. Every
//! check runs, whatever failed before it, and reports into one [`Diagnostics`]; a
//! `Config` is built only when none failed.
//!
//! The sections with a file of their own (`server`, `zones`, `site`, `location`, ...) are
//! checked there; this file runs them in order, checks what spans sections, and holds
//! the small sections (`[tls]`, `[real_ip]`, `[log]`, `[admin]`).

use std::path::Path;
use std::time::Duration;

use http::HeaderName;
use serde_spanned::Spanned;

use super::diag::{ConfigErrors, Diagnostics};
use super::raw::{self, RawConfig, RawRealIp, Section, Span};
use super::{access, acme, api_keys, limits, maps, redis, server, site, upstreams, values, zones};
use super::{Access, Acme, Admin, ApiKeys, Config, Log, Server, Zone};
use super::{OnError, RealIp, Redis, Tls, Upstream};

/// `[tls] handshake_timeout` when absent, in seconds.
const HANDSHAKE_TIMEOUT: u64 = 10;

/// Parses and validates configuration text. `origin` names the file in messages and is
/// the base for relative paths; nothing is read from disk.
pub fn from_str(text: &str, origin: &Path) -> Result<Config, ConfigErrors> {
    let mut config = validate(text, origin)?;
    config.sha256 = sha256_hex(text.as_bytes());
    Ok(config)
}

fn sha256_hex(bytes: &[u8]) -> String {
    use sha2::{Digest, Sha256};
    use std::fmt::Write;
    Sha256::digest(bytes)
        .iter()
        .fold(String::with_capacity(64), |mut hex, b| {
            let _ = write!(hex, "{b:02x}");
            hex
        })
}

/// Reads and validates the file at `path`.
pub fn load(path: &Path) -> Result<Config, ConfigErrors> {
    let text = std::fs::read_to_string(path).map_err(|err| ConfigErrors::io(path, &err))?;
    from_str(&text, path)
}

/// Parses and checks `text`; `origin` names the file in messages and is the base of
/// relative paths.
pub(crate) fn validate(text: &str, origin: &Path) -> Result<Config, ConfigErrors> {
    let mut diag = Diagnostics::new(text);
    let raw = raw::parse(text, &mut diag);
    let base = origin.parent().unwrap_or(Path::new(""));
    let checked = check(raw, base, &mut diag);
    match checked.into_config() {
        Some(mut config) if !diag.has_errors() => {
            config.warnings = diag.warnings(origin);
            config.places = diag.places(origin);
            config.directories = diag.directories(origin);
            Ok(config)
        }
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

/// Every section, checked; `None` where a section had a problem (reported). The outer
/// `Option` of an optional section is that; the inner one is whether the file has it.
struct Checked {
    server: Option<Server>,
    real_ip: Option<Option<RealIp>>,
    access: Option<Access>,
    log: Option<Log>,
    upstreams: Option<Vec<Upstream>>,
    zones: Option<Vec<Zone>>,
    api_keys: Option<Option<ApiKeys>>,
    sites: Option<Vec<super::Site>>,
    admin: Option<Option<Admin>>,
    tls: Option<Option<Tls>>,
    redis: Option<Option<Redis>>,
    acme: Option<Option<Acme>>,
    quic: Option<super::Quic>,
    trace: Option<Option<super::Trace>>,
    /// Whether the maps are valid (the texts that use a map hold it).
    maps: bool,
}

impl Checked {
    /// The whole configuration, when every section is valid. Its `sha256` is left empty
    /// for the caller, which has the text.
    fn into_config(self) -> Option<Config> {
        if !self.maps {
            return None;
        }
        Some(Config {
            sha256: String::new(),
            warnings: Vec::new(),
            places: Vec::new(),
            directories: Vec::new(),
            server: self.server?,
            real_ip: self.real_ip?,
            access: self.access?,
            log: self.log?,
            upstreams: self.upstreams?,
            zones: self.zones?,
            api_keys: self.api_keys?,
            sites: self.sites?,
            admin: self.admin?,
            tls: self.tls?,
            redis: self.redis?,
            acme: self.acme?,
            quic: self.quic?,
            trace: self.trace?,
        })
    }
}

/// Checks every section, in an order where each finds what it refers to already
/// checked: `[redis]` before the zones (their default `on_error`), the zones before
/// `[api_keys]` (plans) and the sites (limits), the upstreams and `[server]` before the
/// sites, the sites and `[tls]` before the names `[acme]` orders.
fn check(raw: RawConfig, base: &Path, diag: &mut Diagnostics<'_>) -> Checked {
    // Certificates ordered for `acme = true` sites stand in for static ones.
    let acme_sites = acme_sites(&raw);
    let certificates = certificates_listed(&raw.tls).map(|listed| listed || acme_sites);
    let server = server::server(raw.server, certificates, base, diag);
    let tls = tls_settings(raw.tls, server.as_ref(), base, acme_sites, diag);
    let acme_section = !matches!(raw.acme, Section::Absent);
    let acme = optional(raw.acme, |raw, span| {
        acme::acme(raw, span, base, server.as_ref(), diag)
    });
    let redis = optional(raw.redis, |raw, span| redis::redis(raw, span, base, diag));
    let quic = optional(raw.quic, |raw, _| super::quic::quic(raw, base, diag)).map(Option::unwrap_or_default);
    let trace = optional(raw.trace, |raw, span| super::trace::trace(raw, span, diag));
    let real_ip = optional(raw.real_ip, |raw, span| real_ip(raw, span, diag));
    let log = match raw.log {
        Section::Absent => Some(Log::default()),
        Section::Invalid => None,
        Section::Present(_, raw) => super::log::top(&raw, base, diag),
    };
    let access = match raw.access {
        Section::Absent => Some(Access::default()),
        Section::Invalid => None,
        Section::Present(_, raw) => access::access(raw, diag),
    };
    let on_error = match &redis {
        Some(Some(redis)) => redis.on_error,
        _ => OnError::Local,
    };
    let names: Vec<String> = raw
        .upstreams
        .iter()
        .map(|u| u.name.get_ref().clone())
        .collect();
    // Every text below may use the maps; a map whose own texts fail is left out
    // (reported), and so are the problems of texts that would use it.
    let (known_maps, maps_valid) = maps::maps(raw.maps, diag);
    let (zones, zones_valid) = zones::zones(raw.zones, on_error, &names, &known_maps, diag);
    let plans: Vec<&str> = zones
        .iter()
        .flat_map(|zone| zone.plans.iter().map(|(plan, _)| plan.as_str()))
        .collect();
    let api_keys = optional(raw.api_keys, |raw, span| {
        api_keys::api_keys(raw, span, base, &plans, diag)
    });
    zones_need_their_sections(&zones, &redis, &api_keys, !plans.is_empty(), diag);
    let zone_limits: Vec<limits::ZoneInfo> = zones.iter().map(limits::ZoneInfo::new).collect();
    let zones = zones_valid.then_some(zones);
    let upstreams = all(raw
        .upstreams
        .into_iter()
        .map(|entry| upstreams::upstream(entry, base, diag)));
    let sites = site::sites(
        raw.sites,
        raw.locations,
        server.as_ref(),
        &names,
        &zone_limits,
        &known_maps,
        acme_section,
        base,
        diag,
    );
    let acme = with_names(acme, sites.as_deref(), &tls);
    let admin = optional(raw.admin, |raw, span| {
        super::admin::admin(raw, span, base, diag)
    });
    Checked {
        server,
        real_ip,
        access,
        log,
        upstreams,
        zones,
        api_keys,
        sites,
        admin,
        tls,
        redis,
        acme,
        quic,
        trace,
        maps: maps_valid,
    }
}

/// A section the file may leave out: `Some(None)` when it is absent, `None` when it is
/// invalid (already reported) or `check` finds a problem.
fn optional<R, T>(
    section: Section<R>,
    check: impl FnOnce(R, &Span) -> Option<T>,
) -> Option<Option<T>> {
    match section {
        Section::Absent => Some(None),
        Section::Invalid => None,
        Section::Present(span, raw) => check(raw, &span).map(Some),
    }
}

/// Whether a `[[site]]` says `acme = true`: then `listen_tls` and `[tls]` need no
/// static certificate. Said of the file as written; the sites' own checks say whether
/// their names can get certificates.
fn acme_sites(raw: &RawConfig) -> bool {
    let Some((_, sites)) = &raw.sites else {
        return false;
    };
    sites
        .iter()
        .flatten()
        .any(|entry| entry.site.acme.as_ref().is_some_and(|flag| *flag.get_ref()))
}

/// `[acme]` with the names it orders, now that the sites and the static certificates
/// are known (`None` where they had problems: the file is invalid then anyway).
fn with_names(
    acme: Option<Option<Acme>>,
    sites: Option<&[super::Site]>,
    tls: &Option<Option<Tls>>,
) -> Option<Option<Acme>> {
    let static_certificates = match tls {
        Some(Some(tls)) => &tls.certificates[..],
        _ => &[],
    };
    acme.map(|acme| {
        acme.map(|mut acme| {
            acme::manage(&mut acme, sites.unwrap_or_default(), static_certificates);
            acme
        })
    })
}

/// Whether `[tls]` lists a certificate (`listen_tls` needs one); `None` when the
/// section is invalid, so that nothing more is said about it.
fn certificates_listed(tls: &Section<raw::RawTls>) -> Option<bool> {
    match tls {
        Section::Absent => Some(false),
        Section::Invalid => None,
        Section::Present(_, tls) => Some(
            tls.certificates
                .as_ref()
                .is_some_and(|list| !list.get_ref().is_empty()),
        ),
    }
}

/// Redis zones need `[redis]`, and plans need `[api_keys]` or a zone's `plan`: said once the sections are
/// checked (and not when a section is invalid, which is already reported).
fn zones_need_their_sections(
    zones: &[Zone],
    redis: &Option<Option<Redis>>,
    api_keys: &Option<Option<ApiKeys>>,
    plans: bool,
    diag: &mut Diagnostics<'_>,
) {
    if let Some(None) = redis {
        for zone in zones.iter().filter(|zone| zone.redis.is_some()) {
            diag.error_nowhere(format!(
                "zone \"{}\" has `backend = \"redis\"` but no [redis] section says where Redis is",
                zone.name
            ));
        }
    }
    let read_from_requests = zones.iter().any(|zone| zone.plan_from.is_some());
    if matches!(api_keys, Some(None)) && plans && !read_from_requests {
        diag.error_nowhere(
            "zones define `plans` but neither `[api_keys]` nor a zone's `plan` says which request is on which plan",
        );
    }
}

/// `[admin]`: where `/metrics`, `/healthz` and `/status` listen.
/// `[tls]`; for a file without it whose `listen_tls` serves only certificates ordered
/// for `acme = true` sites, its defaults with no static certificate.
fn tls_settings(
    section: Section<raw::RawTls>,
    server: Option<&Server>,
    base: &Path,
    acme_sites: bool,
    diag: &mut Diagnostics<'_>,
) -> Option<Option<Tls>> {
    let listen_tls = server.is_some_and(|server| !server.listen_tls.is_empty());
    match optional(section, |raw, span| tls(raw, span, base, acme_sites, diag)) {
        Some(None) if acme_sites && listen_tls => Some(Some(Tls {
            certificates: Vec::new(),
            handshake_timeout: Duration::from_secs(HANDSHAKE_TIMEOUT),
        })),
        tls => tls,
    }
}

/// `[tls]`: every certificate is read and checked now, so that `tollgate -t` and a
/// reload catch a missing file or a key that does not match. With `acme_sites`, the
/// list may be absent or empty.
fn tls(
    raw: raw::RawTls,
    span: &Span,
    base: &Path,
    acme_sites: bool,
    diag: &mut Diagnostics<'_>,
) -> Option<Tls> {
    let handshake_timeout = values::duration_or(&raw.handshake_timeout, HANDSHAKE_TIMEOUT, diag);
    let list = match raw.certificates {
        None if acme_sites => Spanned::new(span.clone(), Vec::new()),
        list => diag.required(list, span, "certificates")?,
    };
    if list.get_ref().is_empty() && !acme_sites {
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

/// Every item, or `None` if any is missing. Unlike `collect::<Option<_>>()` this runs
/// the whole iterator, so each item's problems are reported.
pub(super) fn all<T>(items: impl Iterator<Item = Option<T>>) -> Option<Vec<T>> {
    let items: Vec<Option<T>> = items.collect();
    items.into_iter().collect()
}
