//! The file as serde sees it: one struct per table, unknown keys rejected, spans kept on
//! every value a later check points at. No meaning is checked here.
//!
//! `read` parses the text and deserializes it section by section into these structs,
//! reporting every problem it meets (see there for how).
//!
//! Required keys are `Option`s here: whether one is missing is checked in `validate`
//! with [`Diagnostics::required`](super::diag::Diagnostics::required), which says nothing
//! about a key left out for a problem already reported.
//!
//! `either` deserializes the keys that take a value or a table.
//!
//! The model can be written too: every struct is `Serialize` (`ser` has the parts a
//! derive cannot say), so `toml::to_string` of a [`RawConfig`] reads back the same, and
//! [`write()`] lays it out as the docs write a file. A `Spanned` value is written as its
//! value; a model built to be written (`tollgate import`) gives its values any span,
//! e.g. `Spanned::new(0..0, value)`, and `Default` leaves every key of a table unset.

use std::ops::Range;

use serde::de;
use serde::{Deserialize, Serialize};
use serde_spanned::Spanned;

use super::{Algorithm, OnError, RequestBuffering};

mod either;
mod read;
mod ser;
#[cfg_attr(
    not(test),
    expect(
        dead_code,
        reason = "`tollgate import` (the next issue) is its first caller"
    )
)]
mod write;

pub(crate) use read::parse;
#[cfg_attr(
    not(test),
    expect(
        unused_imports,
        reason = "`tollgate import` (the next issue) is its first caller"
    )
)]
pub(crate) use write::write;

pub(crate) type Span = Range<usize>;

/// A duration, size or worker count: kept as any TOML value so that validation can say
/// what was expected whatever was written (`10` for `"10s"` is a common slip).
pub(crate) type Loose = Spanned<toml::Value>;

/// A section as found in the file.
#[derive(Default)]
pub(crate) enum Section<T> {
    #[default]
    Absent,
    /// Present but not deserializable; the problem is already reported.
    Invalid,
    /// Present; the span is the section's header (or its inline table).
    Present(Span, T),
}

/// The whole file. Its fields are in the order [`write()`] writes the sections.
#[derive(Default, Serialize)]
pub(crate) struct RawConfig {
    pub server: Section<RawServer>,
    pub real_ip: Section<RawRealIp>,
    pub access: Section<RawAccess>,
    pub log: Section<RawLog>,
    pub admin: Section<RawAdmin>,
    pub tls: Section<RawTls>,
    pub redis: Section<RawRedis>,
    pub acme: Section<RawAcme>,
    /// In file order.
    #[serde(serialize_with = "ser::named", skip_serializing_if = "Vec::is_empty")]
    pub upstreams: Vec<RawUpstreamEntry>,
    /// In file order.
    #[serde(serialize_with = "ser::named", skip_serializing_if = "Vec::is_empty")]
    pub zones: Vec<Named<RawZone>>,
    pub api_keys: Section<RawApiKeys>,
    /// Top-level `[[location]]`s: one site answering every name. In file order, each
    /// with the span of its table; `None` where the location could not be deserialized.
    #[serde(
        rename = "location",
        serialize_with = "ser::present",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub locations: Vec<Option<Spanned<RawLocation>>>,
    /// `[[site]]`s in file order, with the span of the key of the first one; `None`
    /// where a site's own keys could not be deserialized.
    #[serde(
        rename = "site",
        serialize_with = "ser::sites",
        skip_serializing_if = "Option::is_none"
    )]
    pub sites: Option<(Span, Vec<Option<RawSiteEntry>>)>,
}

/// One `[[site]]`: its own keys, and its `[[site.location]]`s read one at a time.
#[derive(Serialize)]
pub(crate) struct RawSiteEntry {
    /// The site's table.
    #[serde(skip)]
    pub span: Span,
    #[serde(flatten)]
    pub site: RawSite,
    #[serde(
        rename = "location",
        serialize_with = "ser::present",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub locations: Vec<Option<Spanned<RawLocation>>>,
}

/// A `[[site]]`'s own keys (its locations are read apart, see [`RawSiteEntry`]).
#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a site table")]
pub(crate) struct RawSite {
    pub names: Option<Spanned<Vec<Spanned<String>>>>,
    pub listen: Option<Spanned<Vec<Spanned<String>>>>,
    pub default: Option<Spanned<bool>>,
    pub acme: Option<Spanned<bool>>,
    /// What its locations inherit: as in [`RawLocation`].
    pub limit: Option<Spanned<Vec<Spanned<RawLimit>>>>,
    pub access: Option<Spanned<Vec<Spanned<String>>>>,
    pub limit_status: Option<Spanned<i64>>,
    pub request_headers: Option<Spanned<HeaderTable>>,
    pub response_headers: Option<Spanned<HeaderTable>>,
    pub hide_headers: Option<Spanned<Vec<Spanned<String>>>>,
    pub client_max_body_size: Option<Loose>,
    pub request_buffering: Option<RequestBuffering>,
    /// Taken out before the rest is read; named here so that "unknown key" lists it.
    /// Written from [`RawSiteEntry::locations`].
    #[allow(dead_code)]
    #[serde(skip_serializing)]
    pub location: Option<de::IgnoredAny>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawServer {
    pub listen: Option<Spanned<Vec<Spanned<String>>>>,
    pub listen_tls: Option<Spanned<Vec<Spanned<String>>>>,
    pub workers: Option<Loose>,
    pub client_header_timeout: Option<Loose>,
    pub client_body_timeout: Option<Loose>,
    pub client_body_min_rate: Option<Loose>,
    pub client_body_buffer_size: Option<Loose>,
    pub client_max_body_size: Option<Loose>,
    pub request_buffering: Option<RequestBuffering>,
    pub client_body_temp_path: Option<Spanned<String>>,
    pub send_timeout: Option<Loose>,
    pub keepalive_timeout: Option<Loose>,
    pub max_header_bytes: Option<Loose>,
    pub max_uri_bytes: Option<Loose>,
    pub max_headers: Option<Spanned<i64>>,
    pub underscores_in_headers: Option<bool>,
    pub http2_max_concurrent_streams: Option<Spanned<i64>>,
    pub shutdown_timeout: Option<Loose>,
    pub limit_status: Option<Spanned<i64>>,
    pub ratelimit_headers: Option<RawRateLimitHeaders>,
}

#[derive(Deserialize, Serialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawRateLimitHeaders {
    Draft,
    Legacy,
    Both,
    None,
}

/// A list of address or network strings, each with its span.
pub(crate) type Networks = Spanned<Vec<Spanned<String>>>;

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawAccess {
    pub deny: Option<Networks>,
    pub exempt: Option<Networks>,
}

/// A zone's `plans`: plan name to rate, in name order.
pub(crate) type Plans = std::collections::BTreeMap<String, Spanned<String>>;

/// One `[zones.NAME]`.
#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a zone table")]
pub(crate) struct RawZone {
    /// Required.
    pub key: Option<Spanned<String>>,
    /// Required, except for `concurrency`.
    pub rate: Option<Spanned<String>>,
    pub size: Option<Loose>,
    pub algorithm: Option<Spanned<Algorithm>>,
    pub plans: Option<Spanned<Plans>>,
    /// Required for `concurrency`, and only there.
    pub max: Option<Spanned<i64>>,
    pub ipv4_prefix: Option<Spanned<i64>>,
    pub ipv6_prefix: Option<Spanned<i64>>,
    pub backend: Option<Spanned<RawBackend>>,
    /// Only with `backend = "redis"`.
    pub instances: Option<Spanned<i64>>,
    /// Only with `backend = "redis"`.
    pub on_error: Option<Spanned<OnError>>,
    /// Only with `backend = "redis"`.
    pub lease: Option<Spanned<i64>>,
    pub adaptive: Option<Spanned<RawAdaptive>>,
}

/// A zone's `adaptive` table.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table, e.g. { upstream = \"app\", latency = \"200ms\" }"
)]
pub(crate) struct RawAdaptive {
    /// Required.
    pub upstream: Option<Spanned<String>>,
    pub latency: Option<Loose>,
    pub failures: Option<Spanned<String>>,
    pub in_flight: Option<Spanned<i64>>,
    pub min: Option<Loose>,
    pub percentile: Option<Spanned<i64>>,
    pub interval: Option<Loose>,
}

#[derive(Deserialize, Serialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawBackend {
    Local,
    Redis,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawRedis {
    /// Required (until `urls` for a cluster is supported).
    pub url: Option<Spanned<String>>,
    pub urls: Option<Spanned<Vec<Spanned<String>>>>,
    pub timeout: Option<Loose>,
    pub on_error: Option<Spanned<OnError>>,
    /// PEM CA certificates to trust for `rediss://` instead of the system's.
    pub ca: Option<Spanned<String>>,
    /// How often instances announce themselves in each Redis zone.
    pub heartbeat: Option<Loose>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawAcme {
    /// Required.
    pub directory: Option<Spanned<String>>,
    pub email: Option<Spanned<String>>,
    pub storage: Option<Spanned<String>>,
    /// PEM CA certificates to trust for the ACME server instead of the system's.
    pub ca: Option<Spanned<String>>,
    /// `eab_kid` and `eab_hmac_key`: both or neither.
    pub eab_kid: Option<Spanned<String>>,
    pub eab_hmac_key: Option<Spanned<String>>,
    /// Challenge type names, checked in `validate`.
    pub challenges: Option<Spanned<Vec<Spanned<String>>>>,
    pub retry_min: Option<Loose>,
    pub retry_max: Option<Loose>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawApiKeys {
    pub header: Option<Spanned<String>>,
    /// API key to plan name.
    pub inline: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    pub file: Option<Spanned<String>>,
    /// Plan name to priority.
    pub priority: Option<Spanned<std::collections::BTreeMap<String, Spanned<i64>>>>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawRealIp {
    /// Required.
    pub trusted: Option<Spanned<Vec<Spanned<String>>>>,
    pub header: Option<Spanned<String>>,
    pub recursive: Option<bool>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawAdmin {
    /// Required.
    pub listen: Option<Spanned<String>>,
    /// The bearer token of state-changing calls; or `token_file`, not both.
    pub token: Option<Spanned<String>>,
    pub token_file: Option<Spanned<String>>,
    /// The views need the token too.
    pub protect_reads: Option<Spanned<bool>>,
    pub max_connections: Option<Spanned<i64>>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawTls {
    /// Required when `listen_tls` is set.
    pub certificates: Option<Spanned<Vec<Spanned<RawCertificate>>>>,
    pub handshake_timeout: Option<Loose>,
}

/// One `[[tls.certificates]]`.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { cert = \"example.pem\", key = \"example.key\" }"
)]
pub(crate) struct RawCertificate {
    /// Required.
    pub cert: Option<Spanned<String>>,
    /// Required.
    pub key: Option<Spanned<String>>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawLog {
    pub access: Option<Spanned<String>>,
    pub format: Option<RawLogFormat>,
}

#[derive(Deserialize, Serialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawLogFormat {
    Combined,
    Json,
}

/// One `[upstreams.NAME]`.
pub(crate) type RawUpstreamEntry = Named<RawUpstream>;

/// One table of a named family, such as `[upstreams.NAME]` or `[zones.NAME]`.
pub(crate) struct Named<T> {
    pub name: Spanned<String>,
    /// The table and its span; `None` when it could not be deserialized.
    pub body: Option<Spanned<T>>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "an upstream table")]
pub(crate) struct RawUpstream {
    /// Required.
    pub servers: Option<Spanned<Vec<Spanned<RawServerItem>>>>,
    pub balance: Option<RawBalance>,
    pub connect_timeout: Option<Loose>,
    pub read_timeout: Option<Loose>,
    pub keepalive: Option<usize>,
    pub max_fails: Option<u32>,
    pub fail_timeout: Option<Loose>,
    pub tls: Option<Spanned<RawUpstreamTls>>,
    /// An integer or `"auto"`.
    pub max_in_flight: Option<Spanned<RawMaxInFlight>>,
    pub queue: Option<Spanned<i64>>,
    pub queue_timeout: Option<Loose>,
    /// Only with `max_in_flight = "auto"`.
    pub in_flight_min: Option<Spanned<i64>>,
    pub in_flight_max: Option<Spanned<i64>>,
    pub probe_interval: Option<Loose>,
}

/// `max_in_flight`: a number, or a word (`"auto"` is the one known).
#[derive(Deserialize, Serialize)]
#[serde(untagged, expecting = r#"an integer or "auto""#)]
pub(crate) enum RawMaxInFlight {
    Count(i64),
    Word(String),
}

#[derive(Deserialize, Serialize, Clone, Copy)]
#[serde(rename_all = "snake_case")]
pub(crate) enum RawBalance {
    RoundRobin,
    LeastConn,
    IpHash,
}

/// An item of `servers`: `"HOST:PORT"` or `{ addr = "HOST:PORT", weight = N }`.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum RawServerItem {
    Addr(String),
    Table(RawServerTable),
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawServerTable {
    /// Required.
    pub addr: Option<Spanned<String>>,
    pub weight: Option<Spanned<i64>>,
}

/// An upstream group's `tls`: `true` / `false`, or a table of settings (TLS on).
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum RawUpstreamTls {
    On(bool),
    Table(RawUpstreamTlsTable),
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawUpstreamTlsTable {
    pub server_name: Option<Spanned<String>>,
    pub ca: Option<Spanned<String>>,
    pub cert: Option<Spanned<String>>,
    pub key: Option<Spanned<String>>,
}

/// One `[[location]]`.
#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a location table")]
pub(crate) struct RawLocation {
    /// Required.
    #[serde(rename = "match")]
    pub pattern: Option<Spanned<String>>,
    pub upstream: Option<Spanned<String>>,
    #[serde(rename = "return")]
    pub ret: Option<Spanned<RawReturn>>,
    pub limit: Option<Spanned<Vec<Spanned<RawLimit>>>>,
    /// nginx allow/deny rules, in order: `"allow CIDR"`, `"deny CIDR"`, `"deny all"`.
    pub access: Option<Spanned<Vec<Spanned<String>>>>,
    pub cost: Option<Spanned<i64>>,
    /// The upstream response header that says what the request cost.
    pub cost_from: Option<Spanned<String>>,
    /// Whether the client sees `cost_from`'s header too.
    pub keep_cost_header: Option<Spanned<bool>>,
    pub limit_status: Option<Spanned<i64>>,
    /// Header name to value (`""` removes) on the request to the upstream.
    pub request_headers: Option<Spanned<HeaderTable>>,
    /// Header name to value on the responses the location serves.
    pub response_headers: Option<Spanned<HeaderTable>>,
    /// Upstream response headers the client never sees.
    pub hide_headers: Option<Spanned<Vec<Spanned<String>>>>,
    /// The path the upstream gets instead of the client's.
    pub upstream_path: Option<Spanned<String>>,
    pub client_max_body_size: Option<Loose>,
    pub request_buffering: Option<RequestBuffering>,
}

/// The keys a site and a location both take, as written.
pub(crate) struct RawRules<'a> {
    pub limit: Option<&'a Spanned<Vec<Spanned<RawLimit>>>>,
    pub access: Option<&'a Spanned<Vec<Spanned<String>>>>,
    pub limit_status: Option<&'a Spanned<i64>>,
    pub request_headers: Option<&'a Spanned<HeaderTable>>,
    pub response_headers: Option<&'a Spanned<HeaderTable>>,
    pub hide_headers: Option<&'a Spanned<Vec<Spanned<String>>>>,
    pub client_max_body_size: Option<&'a Loose>,
    pub request_buffering: Option<RequestBuffering>,
}

impl RawLocation {
    pub(crate) fn rules(&self) -> RawRules<'_> {
        RawRules {
            limit: self.limit.as_ref(),
            access: self.access.as_ref(),
            limit_status: self.limit_status.as_ref(),
            request_headers: self.request_headers.as_ref(),
            response_headers: self.response_headers.as_ref(),
            hide_headers: self.hide_headers.as_ref(),
            client_max_body_size: self.client_max_body_size.as_ref(),
            request_buffering: self.request_buffering,
        }
    }
}

impl RawSite {
    pub(crate) fn rules(&self) -> RawRules<'_> {
        RawRules {
            limit: self.limit.as_ref(),
            access: self.access.as_ref(),
            limit_status: self.limit_status.as_ref(),
            request_headers: self.request_headers.as_ref(),
            response_headers: self.response_headers.as_ref(),
            hide_headers: self.hide_headers.as_ref(),
            client_max_body_size: self.client_max_body_size.as_ref(),
            request_buffering: self.request_buffering,
        }
    }
}

/// Header rules as written: name to value.
pub(crate) type HeaderTable = std::collections::BTreeMap<Spanned<String>, Spanned<String>>;

/// One item of a location's `limit` list.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { zone = \"per_ip\", burst = 5, nodelay = true }"
)]
pub(crate) struct RawLimit {
    /// Required.
    pub zone: Option<Spanned<String>>,
    pub burst: Option<Spanned<i64>>,
    pub nodelay: Option<Spanned<bool>>,
    pub delay: Option<Spanned<i64>>,
    pub dry_run: Option<bool>,
    /// Statuses (`401`) and classes (`"4xx"`) of the answers that are charged.
    pub count_status: Option<Spanned<Vec<Loose>>>,
    /// The penalty box (`config/bans.rs`).
    pub ban: Option<Spanned<RawBan>>,
    /// `"3x"` or a rate (`config/adaptive.rs`).
    pub elastic: Option<Spanned<String>>,
    /// A share over the limit let through, marked: `"10%"`.
    pub soft: Option<Loose>,
}

/// A limit item's `ban`, as written.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { after = 5, within = \"1m\", for = \"15m\" }"
)]
pub(crate) struct RawBan {
    /// Required.
    pub after: Option<Spanned<i64>>,
    /// Required.
    pub within: Option<Loose>,
    /// Required.
    #[serde(rename = "for")]
    pub duration: Option<Loose>,
    pub status: Option<Spanned<i64>>,
    /// The zone's ban table, in bytes (`config/bans.rs`).
    pub size: Option<Loose>,
}

#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { status = 200, body = \"...\" }"
)]
pub(crate) struct RawReturn {
    /// Required.
    pub status: Option<Spanned<i64>>,
    pub body: Option<Spanned<String>>,
    pub location: Option<Spanned<String>>,
}
