//! The gateway.toml being built from the directives, and how it becomes the config's
//! raw model with its notes ([`Build::finish`]).

use std::collections::BTreeMap;

use serde_spanned::Spanned;

use crate::config::raw::{RawClientCertificates, 
    Named, RawBalance, RawCertificate, RawConfig, RawLocation, RawLog, RawRateLimitHeaders, RawRealIp,
    RawServer, RawServerItem, RawServerTable, RawSite, RawSiteEntry, RawTls, RawUpstream,
    RawZone, Section,
};
use crate::config::raw::{Notes, RawListenItem, RawListenTable, RawMap, RawStatus, SiteNotes};
use crate::config::Algorithm;

/// A value with no place in a file (the model is written, not read).
pub(super) fn sp<T>(value: T) -> Spanned<T> {
    Spanned::new(0..0, value)
}

/// A duration or size, as the raw model keeps them.
pub(super) fn loose(text: &str) -> Spanned<toml::Value> {
    sp(toml::Value::String(text.to_owned()))
}

/// One upstream group.
#[derive(Default)]
pub(super) struct Group {
    pub name: String,
    /// `HOST:PORT` (or `https://HOST:PORT`) and weight.
    pub servers: Vec<(String, i64)>,
    pub balance: Option<RawBalance>,
    pub keepalive: Option<usize>,
    pub max_fails: Option<u32>,
    pub fail_timeout: Option<String>,
    pub note: Vec<String>,
}

/// One zone.
#[derive(Default)]
pub(super) struct Zone {
    pub name: String,
    pub key: String,
    pub rate: Option<String>,
    pub size: Option<String>,
    /// `limit_conn_zone`: tollgate's `concurrency`, its `max` from the first
    /// `limit_conn`.
    pub concurrency: bool,
    pub max: Option<i64>,
    pub note: Vec<String>,
}

/// One site (nginx `server {}`).
#[derive(Default)]
pub(super) struct Site {
    pub names: Vec<String>,
    pub listen: Vec<String>,
    pub default: bool,
    /// The report line of the `listen … default_server` that made it the default.
    pub default_line: Option<usize>,
    pub note: Vec<String>,
    pub locations: Vec<(RawLocation, Vec<String>)>,
    /// `ssl_verify_client` with `ssl_client_certificate`.
    pub client_certificates: Option<RawClientCertificates>,
    /// The server's `access_log` (its 404 for a path no location matches is logged there).
    pub log: Option<LogSetting>,
}

/// A `log_format` met: its name, `escape=` and text.
pub(super) struct LogFormat {
    pub name: String,
    pub escape: Option<String>,
    pub text: String,
}

/// What an `access_log` makes: where, and the format's text and escape (`None` for
/// `off`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct LogSetting {
    pub access: String,
    pub format: Option<(String, Option<String>)>,
}

impl LogSetting {
    /// As `[log]`, or a site's or location's `log`, writes it.
    pub(super) fn raw(&self) -> RawLog {
        let (format, escape) = match &self.format {
            Some((text, escape)) => (Some(sp(text.clone())), escape.clone().map(sp)),
            None => (None, None),
        };
        RawLog {
            access: Some(sp(self.access.clone())),
            format,
            escape,
        }
    }

    /// Whether `raw` says what this says.
    fn is(&self, raw: &RawLog) -> bool {
        let text = |value: &Option<serde_spanned::Spanned<String>>| value.as_ref().map(|v| v.get_ref().clone());
        let written = self.raw();
        (text(&raw.access), text(&raw.format), text(&raw.escape))
            == (text(&written.access), text(&written.format), text(&written.escape))
    }
}

/// What the gateway-wide sections get.
#[derive(Default)]
pub(super) struct Build {
    pub listen: Vec<String>,
    pub listen_tls: Vec<String>,
    /// The addresses nginx serves HTTP/2 on (`listen … http2`, `http2 on`): the others
    /// are written `{ addr, http2 = false }`.
    pub http2: Vec<String>,
    /// `http2 on|off` in `http {}`, and in the `server {}` being walked.
    pub http2_http: Option<bool>,
    pub http2_server: Option<bool>,
    /// The addresses whose `listen` says `proxy_protocol`.
    pub proxy_protocol: Vec<String>,
    /// The addresses whose `listen` says `quic`: HTTP/3 beside their TLS.
    pub quic: Vec<String>,
    /// `[server]` durations set from nginx's (`keepalive_timeout` …), by key.
    pub server_durations: BTreeMap<&'static str, String>,
    pub underscores_in_headers: Option<bool>,
    /// nginx `sendfile`, the first met.
    pub sendfile: Option<bool>,
    pub real_ip_trusted: Vec<String>,
    pub real_ip_header: Option<String>,
    pub real_ip_recursive: Option<bool>,
    pub certificates: Vec<(String, String)>,
    pub groups: Vec<Group>,
    pub zones: Vec<Zone>,
    pub sites: Vec<Site>,
    pub notes: Notes,
    /// Some location limits: nginx's status (503) and no rate-limit headers.
    pub limits_used: bool,
    /// `[maps.NAME]`: name, table, note (nginx's `map`s and those an `if` became).
    pub maps: Vec<(String, RawMap, Vec<String>)>,
    /// The `log_format`s met, and `[log]` as the first `access_log` made it.
    pub log_formats: Vec<LogFormat>,
    pub log: Option<LogSetting>,
}

impl Build {
    pub(super) fn group(&mut self, name: &str) -> Option<&mut Group> {
        self.groups.iter_mut().find(|g| g.name == name)
    }

    pub(super) fn zone(&mut self, name: &str) -> Option<&mut Zone> {
        self.zones.iter_mut().find(|z| z.name == name)
    }

    /// `[log]`, when an `access_log` in `http {}` made one.
    fn log(&self) -> Option<RawLog> {
        self.log.as_ref().map(LogSetting::raw)
    }

    /// The model and its notes.
    pub(super) fn finish(mut self) -> (RawConfig, Notes) {
        let mut raw = RawConfig::default();
        if self.listen.is_empty() && self.listen_tls.is_empty() {
            // nginx with no `server {}` listens nowhere; tollgate needs an address.
            self.listen.push("0.0.0.0:80".to_owned());
        }
        raw.server = Section::Present(0..0, self.server());
        if let Some(log) = self.log() {
            raw.log = Section::Present(0..0, log);
        }
        // With `real_ip_header proxy_protocol`, `set_real_ip_from` names the PROXY
        // protocol's senders (`proxy_protocol_from`), not a `[real_ip]`.
        if !self.real_ip_trusted.is_empty() && !self.real_ip_from_proxy_protocol() {
            raw.real_ip = Section::Present(
                0..0,
                RawRealIp {
                    trusted: Some(sp(self.real_ip_trusted.iter().cloned().map(sp).collect())),
                    // nginx's default header is X-Real-IP; tollgate's X-Forwarded-For.
                    header: Some(sp(self
                        .real_ip_header
                        .clone()
                        .unwrap_or_else(|| "X-Real-IP".to_owned()))),
                    recursive: self.real_ip_recursive,
                },
            );
        }
        if !self.certificates.is_empty() {
            let certificates = self.certificates.iter().map(|(cert, key)| {
                sp(RawCertificate {
                    cert: Some(sp(cert.clone())),
                    key: Some(sp(key.clone())),
                })
            });
            let tls = RawTls {
                certificates: Some(sp(certificates.collect())),
                handshake_timeout: None,
            };
            raw.tls = Section::Present(0..0, tls);
        }
        for group in std::mem::take(&mut self.groups) {
            self.notes.upstreams.insert(group.name.clone(), group.note.clone());
            raw.upstreams.push(Named {
                name: sp(group.name.clone()),
                body: Some(sp(upstream(group))),
            });
        }
        for (name, map, note) in std::mem::take(&mut self.maps) {
            self.notes.maps.insert(name.clone(), note);
            raw.maps.push(Named {
                name: sp(name),
                body: Some(sp(map)),
            });
        }
        // A `limit_conn_zone` no `limit_conn` uses has no `max`: nothing limits by it.
        let zones = std::mem::take(&mut self.zones);
        for zone in zones.into_iter().filter(|z| !z.concurrency || z.max.is_some()) {
            self.notes.zones.insert(zone.name.clone(), zone.note.clone());
            raw.zones.push(Named {
                name: sp(zone.name.clone()),
                body: Some(sp(zone_table(zone))),
            });
        }
        raw.sites = Some((0..0, self.sites()));
        (raw, self.notes)
    }

    /// The `[[site]]`s, their notes kept; one answering 404 when nginx had no `server {}`.
    fn sites(&mut self) -> Vec<Option<RawSiteEntry>> {
        let mut sites = Vec::new();
        for (i, site) in std::mem::take(&mut self.sites).into_iter().enumerate() {
            let mut notes = SiteNotes {
                site: site.note,
                ..SiteNotes::default()
            };
            let mut locations = Vec::new();
            for (j, (mut location, note)) in site.locations.into_iter().enumerate() {
                notes.locations.insert(j, note);
                // What it would inherit from its site is left for it to inherit.
                if let (Some(own), Some(site)) = (&location.log, &site.log) {
                    if site.is(own.get_ref()) {
                        location.log = None;
                    }
                }
                locations.push(Some(sp(location)));
            }
            self.notes.sites.insert(i, notes);
            let raw_site = RawSite {
                names: (!site.names.is_empty()).then(|| sp(site.names.into_iter().map(sp).collect())),
                listen: Some(sp(site.listen.into_iter().map(sp).collect())),
                default: site.default.then(|| sp(true)),
                client_certificates: site.client_certificates.map(sp),
                log: site.log.as_ref().map(|log| sp(log.raw())),
                ..RawSite::default()
            };
            sites.push(Some(RawSiteEntry {
                span: 0..0,
                site: raw_site,
                locations,
            }));
        }
        if sites.is_empty() {
            // Every address needs a site: one answering 404, as nginx with no server.
            let location = RawLocation {
                pattern: Some(sp("/".to_owned())),
                ret: Some(sp(crate::config::raw::RawReturn {
                    status: Some(sp(RawStatus::Code(404))),
                    ..Default::default()
                })),
                ..RawLocation::default()
            };
            sites.push(Some(RawSiteEntry {
                span: 0..0,
                site: RawSite::default(),
                locations: vec![Some(sp(location))],
            }));
        }
        sites
    }

    /// Whether `real_ip_header proxy_protocol` was written.
    fn real_ip_from_proxy_protocol(&self) -> bool {
        self.real_ip_header.as_deref() == Some("proxy_protocol")
    }

    /// `proxy_protocol_from` when a listener reads PROXY headers: `set_real_ip_from`'s
    /// networks, else every address (nginx reads the header from anyone; the `listen`
    /// line's report says to narrow it).
    fn proxy_protocol_from(&self) -> Option<crate::config::raw::Networks> {
        if self.proxy_protocol.is_empty() {
            return None;
        }
        let nets = match self.real_ip_trusted.is_empty() {
            true => vec!["0.0.0.0/0".to_owned(), "::/0".to_owned()],
            false => self.real_ip_trusted.clone(),
        };
        Some(sp(nets.into_iter().map(sp).collect()))
    }

    fn server(&self) -> RawServer {
        let item = |addr: &String| {
            let quic = self.quic.contains(addr) && self.listen_tls.contains(addr);
            match (self.http2.contains(addr), self.proxy_protocol.contains(addr), quic) {
                (true, false, false) => RawListenItem::Addr(addr.clone()),
                // nginx serves no HTTP/2 on an address without `http2`.
                (http2, proxy_protocol, quic) => RawListenItem::Table(RawListenTable {
                    addr: Some(sp(addr.clone())),
                    http2: (!http2).then_some(false),
                    proxy_protocol: proxy_protocol.then(|| sp(true)),
                    quic: quic.then(|| sp(true)),
                }),
            }
        };
        let list = |addrs: &[String]| {
            (!addrs.is_empty()).then(|| sp(addrs.iter().map(|a| sp(item(a))).collect()))
        };
        let duration = |key: &str| self.server_durations.get(key).map(|d| loose(d));
        RawServer {
            listen: list(&self.listen),
            listen_tls: list(&self.listen_tls),
            client_header_timeout: duration("client_header_timeout"),
            client_body_timeout: duration("client_body_timeout"),
            send_timeout: duration("send_timeout"),
            keepalive_timeout: duration("keepalive_timeout"),
            underscores_in_headers: self.underscores_in_headers,
            sendfile: self.sendfile.map(sp),
            proxy_protocol_from: self.proxy_protocol_from(),
            limit_status: self.limits_used.then(|| sp(503)),
            ratelimit_headers: self.limits_used.then_some(RawRateLimitHeaders::None),
            ..RawServer::default()
        }
    }
}

fn upstream(group: Group) -> RawUpstream {
    let servers = group.servers.into_iter().map(|(addr, weight)| {
        sp(match weight {
            1 => RawServerItem::Addr(addr),
            weight => RawServerItem::Table(RawServerTable {
                addr: Some(sp(addr)),
                weight: Some(sp(weight)),
            }),
        })
    });
    RawUpstream {
        servers: Some(sp(servers.collect())),
        balance: group.balance,
        // nginx's proxy_connect_timeout is 60s; tollgate's connect_timeout 2s. A
        // location's own `proxy_connect_timeout` is written on the location.
        connect_timeout: Some(loose("60s")),
        keepalive: group.keepalive,
        max_fails: group.max_fails,
        fail_timeout: group.fail_timeout.as_deref().map(loose),
        ..RawUpstream::default()
    }
}

fn zone_table(zone: Zone) -> RawZone {
    RawZone {
        key: Some(sp(zone.key)),
        rate: zone.rate.map(sp),
        size: zone.size.as_deref().map(loose),
        algorithm: zone.concurrency.then(|| sp(Algorithm::Concurrency)),
        max: zone.max.map(sp),
        ..RawZone::default()
    }
}
