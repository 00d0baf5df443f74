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
//! `location` has the tables that say how requests are answered (`[[site]]`,
//! `[[location]]`). `either` deserializes the keys that take a value or a table. `maps`
//! has `[maps.NAME]`, whose `values` keep their written order.
//!
//! The model can be written too: every struct is `Serialize` (`ser` has the parts a
//! derive cannot say), so `toml::to_string` of a [`RawConfig`] reads back the same, and
//! [`write()`] lays it out as the docs write a file. A `Spanned` value is written as its
//! value; a model built to be written (`tollgate import`) gives its values any span,
//! e.g. `Spanned::new(0..0, value)`, and `Default` leaves every key of a table unset.

use std::ops::Range;

use serde::{Deserialize, Serialize};
use serde_spanned::Spanned;

use super::{Algorithm, LimitAction, OnError, RequestBuffering};

mod either;
mod location;
mod maps;
mod read;
mod rewrites;
mod ser;
mod write;

pub(crate) use location::{
    ErrorPagesTable, HeaderTable, RawAuth, RawAuthTable, RawBan, RawBasic, RawClientCertificates, RawForwardAuth, RawJwt, RawCompress, RawLimit, RawLocation, RawResponseHeader, RawResponseHeaderTable,
    RawReturn, RawRules, RawSite, RawSiteEntry, RawStatus, ResponseHeaderTable,
};
pub(crate) use maps::{MapValues, RawMap};
pub(crate) use read::parse;
pub(crate) use rewrites::{RawCookieRewrites, RawRedirectRewrite, RawRewriteRule};
#[cfg(test)]
pub(crate) use write::write;
pub(crate) use write::{write_noted, Notes, SiteNotes};

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
    pub quic: Section<RawQuic>,
    pub trace: Section<RawTrace>,
    /// In file order.
    #[serde(serialize_with = "ser::named", skip_serializing_if = "Vec::is_empty")]
    pub upstreams: Vec<RawUpstreamEntry>,
    /// In file order.
    #[serde(serialize_with = "ser::named", skip_serializing_if = "Vec::is_empty")]
    pub maps: Vec<Named<RawMap>>,
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

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawServer {
    pub listen: Option<Spanned<Vec<Spanned<RawListenItem>>>>,
    pub listen_tls: Option<Spanned<Vec<Spanned<RawListenItem>>>>,
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
    pub limit_action: Option<LimitAction>,
    pub tarpit_hold: Option<Loose>,
    pub tarpit_max: Option<Spanned<i64>>,
    pub ratelimit_headers: Option<RawRateLimitHeaders>,
    /// `""`: no `Server` header.
    pub server_header: Option<Spanned<String>>,
    pub forwarded_headers: Option<Spanned<Vec<Spanned<String>>>>,
    pub pid_file: Option<Spanned<String>>,
    /// What a location without its own (and whose site has none) compresses.
    pub compress: Option<Spanned<RawCompress>>,
    /// nginx `sendfile`: file bodies go from the file to the socket by the kernel.
    pub sendfile: Option<Spanned<bool>>,
    /// The senders a `proxy_protocol` listener believes (nginx `set_real_ip_from` with
    /// `real_ip_header proxy_protocol`).
    pub proxy_protocol_from: Option<Networks>,
}

#[derive(Deserialize, Serialize, Clone, Copy)]
#[serde(rename_all = "lowercase")]
pub(crate) enum RawRateLimitHeaders {
    Draft,
    Legacy,
    Both,
    None,
}

/// An item of `listen` / `listen_tls`: `"IP:PORT"` or `{ addr = "IP:PORT", http2 = false }`.
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum RawListenItem {
    Addr(String),
    Table(RawListenTable),
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawListenTable {
    /// Required.
    pub addr: Option<Spanned<String>>,
    pub http2: Option<bool>,
    pub proxy_protocol: Option<Spanned<bool>>,
    /// HTTP/3 beside this `listen_tls` address (`config/quic.rs`).
    pub quic: Option<Spanned<bool>>,
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
    /// The plan read from the request (`"$jwt_claim_plan"`), one of `plans`.
    pub plan: Option<Spanned<String>>,
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
    /// The bearer token of state-changing calls; or `token_file`, or `token_env`: one.
    pub token: Option<Spanned<String>>,
    pub token_file: Option<Spanned<String>>,
    /// The name of the environment variable holding the token.
    pub token_env: Option<Spanned<String>>,
    /// The views need the token too.
    pub protect_reads: Option<Spanned<bool>>,
    pub max_connections: Option<Spanned<i64>>,
    /// `Tollgate-Decision` for requests carrying the token in `X-Tollgate-Explain`.
    pub explain: Option<Spanned<bool>>,
}

/// `[trace]` (`config/trace.rs`).
#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawTrace {
    /// Required.
    pub otlp: Option<Spanned<String>>,
    pub sample: Option<Spanned<f64>>,
    pub trace_keys: Option<bool>,
    pub service_name: Option<Spanned<String>>,
    pub queue: Option<Spanned<i64>>,
    /// The clients whose `traceparent` is believed (addresses or networks).
    pub parents_from: Option<Spanned<Vec<Spanned<String>>>>,
}

/// `[quic]` (`config/quic.rs`).
#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields, expecting = "a table")]
pub(crate) struct RawQuic {
    pub advertise: Option<bool>,
    pub advertised_port: Option<Spanned<i64>>,
    pub max_idle_timeout: Option<Loose>,
    pub segmentation_offload: Option<bool>,
    pub early_data: Option<bool>,
    pub host_key_file: Option<Spanned<String>>,
    pub retry_above: Option<Spanned<String>>,
    pub refuse_above: Option<Spanned<String>>,
    pub per_address: Option<Spanned<String>>,
    pub per_address_burst: Option<Spanned<i64>>,
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
    /// `"combined"`, `"json"`, or an nginx `log_format` template.
    pub format: Option<Spanned<String>>,
    /// `"default"`, `"json"` or `"none"`: nginx's `escape=`, for a template.
    pub escape: Option<Spanned<String>>,
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
