//! The configuration file: TOML text in, a validated, immutable [`Config`] out.
//!
//! `raw` mirrors the file with serde (every value keeps its span), `validate` turns
//! raw values into typed ones and collects every problem, `diag` renders problems as
//! `file:line:col: message`. Past this module no string is parsed again.

mod access;
mod acme;
mod adaptive;
pub(crate) mod auth;
mod admin;
mod api_keys;
mod bans;
mod client_certs;
pub(crate) mod compress;
mod concurrency;
mod context;
mod cookies;
mod diag;
pub(crate) mod dirs;
pub(crate) mod error_pages;
pub(crate) mod files;
mod forward_auth;
mod jwt;
mod headers;
mod limit_action;
mod limits;
mod listeners;
mod nginx_names;
mod log;
mod log_format;
mod quic;
mod trace;
mod location;
mod maps;
pub(crate) mod raw;
mod redirects;
mod redis;
mod rules;
mod server;
mod server_name;
mod site;
mod suggest;
#[cfg(test)]
mod tests;
mod upstream_tls;
mod upstreams;
mod validate;
mod values;
mod var_text;
mod zones;

pub use self::redis::RedisSettings;
pub(crate) use cookies::CookieRewrites;
pub(crate) use redirects::{Redirects, RewriteFrom, RewriteRule};
pub(crate) use crate::access::RealIp;
pub(crate) use crate::access::Rule as AccessRule;
pub(crate) use crate::limit::adaptive::gradient::Settings as AutoSettings;
pub(crate) use crate::limit::adaptive::{Elastic, Target};
pub(crate) use crate::limit::bans::Ban;
pub(crate) use crate::limit::remote::{OnError, ZoneSettings};
pub(crate) use crate::limit::settle::StatusSet;
pub(crate) use crate::limit::soft::Share;
pub(crate) use crate::limit::{Algorithm, Period, Rate};
pub(crate) use crate::routing::sites::SiteName;
pub(crate) use crate::routing::Pattern;
pub(crate) use crate::vars::VarText;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

pub(crate) use acme::{Acme, Challenge, StorageError};
pub(crate) use auth::{Auth, Basic, Check, Satisfy};
pub(crate) use forward_auth::ForwardAuth;
pub(crate) use jwt::{read_jwks, JwksEndpoint, Jwt, Keys as JwtKeys, TokenFrom, JWKS_TIMEOUT};
pub(crate) use client_certs::{ClientCertificates, VerifyClient};
pub(crate) use compress::{Compress, Encoding};
pub(crate) use log::{AccessLog, Log, LogFormat, LogSetting};
pub(crate) use log_format::{Escape, LogTemplate, LogVar, Piece as LogPiece, COMBINED};
pub(crate) use quic::{PerAddress, Quic};
pub(crate) use trace::{Trace, TraceEndpoint};
pub(crate) use files::{ErrorPages, Expires, Files};
pub use diag::ConfigErrors;
pub(crate) use dirs::writable as check_writable;
pub(crate) use headers::{Forwarded, Passed, ResponseValue, When, RESERVED_DOWN};
pub(crate) use limit_action::{LimitAction, Tarpit};
pub(crate) use listeners::{Listener, ProxyProtocol};
pub use listeners::{Address, Transport};
pub(crate) use rules::{RequestBuffering, Timeouts};
pub use upstreams::{Balance, Concurrency, MaxInFlight, Upstream};
#[cfg(test)]
use upstreams::UpstreamServer;
pub use validate::{from_str, load};

/// A whole, valid configuration.
#[derive(Debug, Clone)]
pub struct Config {
    /// SHA-256 of the text, lowercase hex (`/status` tells which file is in force).
    pub(crate) sha256: String,
    /// What `tollgate -t` and the start print as warnings: `FILE:LINE:COL: message`.
    pub(crate) warnings: Vec<String>,
    /// Where each address to listen on is written, `FILE:LINE:COL`.
    pub(crate) places: Vec<(SocketAddr, String)>,
    /// Each `root` and `alias` directory, with where it is written (`FILE:LINE:COL`):
    /// `tollgate -t` warns of one it cannot read.
    pub(crate) directories: Vec<(PathBuf, String)>,
    pub(crate) server: Server,
    pub(crate) real_ip: Option<RealIp>,
    pub(crate) access: Access,
    pub(crate) log: Log,
    /// Upstream groups in file order; names are unique. (Public to the tests:
    /// tests/it/upstream_tls.rs makes a group's TLS from one.)
    #[cfg(feature = "testing")]
    pub upstreams: Vec<Upstream>,
    #[cfg(not(feature = "testing"))]
    pub(crate) upstreams: Vec<Upstream>,
    /// Rate-limit zones in file order; names are unique.
    pub(crate) zones: Vec<Zone>,
    /// Which plan each API key is on; `None` without `[api_keys]`.
    pub(crate) api_keys: Option<ApiKeys>,
    /// `[[site]]`s in file order; a file of top-level `[[location]]`s is one site that
    /// answers every name on every address. Never empty.
    pub(crate) sites: Vec<Site>,
    /// `[admin]`: `/metrics`, `/healthz` and `/status`; `None` when the section is absent.
    pub(crate) admin: Option<Admin>,
    /// `[tls]`: the certificates `listen_tls` serves, loaded and checked. Also present,
    /// with no certificates and the default handshake timeout, for a file without `[tls]`
    /// whose `listen_tls` serves only certificates ordered for `acme = true` sites.
    pub(crate) tls: Option<Tls>,
    /// `[redis]`: where zones with `backend = "redis"` keep their state.
    pub(crate) redis: Option<Redis>,
    /// `[acme]`: certificates obtained and renewed for the names of `acme = true` sites.
    pub(crate) acme: Option<Acme>,
    /// `[quic]`, with its defaults when absent: how `quic = true` listeners serve HTTP/3.
    pub(crate) quic: Quic,
    /// `[trace]`: spans of requests over OTLP.
    pub(crate) trace: Option<Trace>,
}

impl Config {
    /// What is worth telling but not wrong, each `FILE:LINE:COL: message`: `tollgate -t`
    /// and the start print them as `warning: …`.
    pub fn warnings(&self) -> &[String] {
        &self.warnings
    }

    /// Where `addr` is written to be listened on, `FILE:LINE:COL`, for a failure to
    /// listen on it.
    pub(crate) fn place_of(&self, addr: SocketAddr) -> Option<&str> {
        let written = self.places.iter().find(|(listed, _)| *listed == addr);
        written.map(|(_, place)| place.as_str())
    }
}

/// `[redis]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redis {
    /// Where Redis is (`url`, or the cluster nodes of `urls`; `ca`, read with the file)
    /// and how long a decision may take before it follows `on_error`.
    pub settings: RedisSettings,
    /// What a Redis zone does when Redis fails, unless the zone says otherwise.
    pub on_error: OnError,
}

/// `[tls]`.
#[derive(Debug, Clone)]
pub(crate) struct Tls {
    /// In file order; the first is served when SNI matches none. Empty only when some
    /// site has `acme = true`: then every certificate `listen_tls` serves is ordered.
    pub certificates: Vec<crate::certs::Certificate>,
    /// A TLS handshake not done in time closes the connection.
    pub handshake_timeout: Duration,
}

/// `[admin]`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Admin {
    /// Where the admin API listens; meant for loopback (it tells about every client).
    pub listen: SocketAddr,
    /// `token` or `token_file`: what `Authorization: Bearer` must carry on a call that
    /// changes state (and on every view but `/healthz` with `protect_reads`). `None`:
    /// such calls are refused.
    pub token: Option<AdminToken>,
    /// `protect_reads`: the views need the token too.
    pub protect_reads: bool,
    /// `max_connections`: the most admin connections open at once.
    pub max_connections: usize,
    /// `explain`: a data-plane request carrying the token in `X-Tollgate-Explain` gets a
    /// `Tollgate-Decision` header (`proxy/explain.rs`).
    pub explain: bool,
}

/// The admin API's bearer token: at least 16 visible ASCII characters. Never printed.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct AdminToken(String);

impl AdminToken {
    pub(crate) fn as_bytes(&self) -> &[u8] {
        self.0.as_bytes()
    }

    #[cfg(test)]
    pub(crate) fn for_tests(token: &str) -> AdminToken {
        AdminToken(token.to_owned())
    }
}

impl std::fmt::Debug for AdminToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AdminToken(…)")
    }
}

/// `[server]`.
#[derive(Debug, Clone)]
pub(crate) struct Server {
    /// Plain-text listeners (HTTP/1.1, and h2c prior knowledge unless `http2 = false`).
    pub listen: Vec<Listener>,
    /// TLS listeners (ALPN `h2`, unless `http2 = false`, and `http/1.1`). This or
    /// `listen` is never empty.
    pub listen_tls: Vec<Listener>,
    /// Worker threads, each with its own runtime and `SO_REUSEPORT` listeners (ours,
    /// like nginx's `worker_processes`). `"auto"` = one per CPU.
    pub workers: usize,
    /// Time to receive a whole request header; a partial header then gets 408 and close.
    pub client_header_timeout: Duration,
    /// Longest pause between two reads of a request body (408 and close).
    pub client_body_timeout: Duration,
    /// Slowest a request body may arrive (ours), in bytes per second on average: byte N
    /// is due at most `client_body_timeout + N / rate` after the head. 0: no floor.
    pub client_body_min_rate: u64,
    /// Bodies up to this size are held in memory (nginx `client_body_buffer_size`);
    /// larger ones go on to a file, or stream with `request_buffering` off.
    pub client_body_buffer_size: usize,
    /// Largest request body; a location may set its own (nginx `client_max_body_size`).
    pub client_max_body_size: MaxBodySize,
    /// Whether bodies are read whole before an upstream is chosen; a site or location
    /// may set its own (nginx `proxy_request_buffering`).
    pub request_buffering: RequestBuffering,
    /// Where files with no name hold bodies past `client_body_buffer_size`.
    pub client_body_temp_path: PathBuf,
    /// Longest wait for the client to take more of the response (nginx `send_timeout`);
    /// then the connection (HTTP/2: the stream) is closed and its upstream dropped.
    pub send_timeout: Duration,
    /// How long an idle keep-alive connection is kept open.
    pub keepalive_timeout: Duration,
    /// Largest request header block; beyond it the client gets 431.
    pub max_header_bytes: usize,
    /// Longest HTTP/1.1 request line; beyond it the client gets 414 (nginx's
    /// `large_client_header_buffers` size).
    pub max_uri_bytes: usize,
    /// Most header fields in an HTTP/1.1 request; beyond it 431 (ours: nginx bounds
    /// only their size).
    pub max_headers: usize,
    /// Header names with `_` are passed on (nginx `underscores_in_headers`); by default
    /// they are dropped, as are names with characters nginx does not accept.
    pub underscores_in_headers: bool,
    /// Streams one HTTP/2 connection may have open, and so upstream requests it can
    /// hold at once (nginx `http2_max_concurrent_streams`).
    pub http2_max_concurrent_streams: u32,
    /// How long in-flight requests may take to finish after SIGTERM.
    pub shutdown_timeout: Duration,
    /// Status of a rate-limit rejection (ours: 429; nginx's default is 503).
    pub limit_status: http::StatusCode,
    pub limit_action: LimitAction,
    pub tarpit: Tarpit,
    pub ratelimit_headers: RateLimitHeaders,
    /// tollgate's own `Server` header on every answer (nginx `server_tokens`); `None`
    /// (`server_header = ""`): none.
    pub server_header: Option<http::HeaderValue>,
    /// The forwarding headers written upstream, unless a site or location says otherwise.
    pub forwarded_headers: Forwarded,
    /// `pid_file`, resolved against the config file's directory: where the gateway writes
    /// its process id at start (nginx `pid`), and where `tollgate reload` and `tollgate
    /// stop` find it. `None` (the default): no file.
    pub pid_file: Option<PathBuf>,
    /// `compress`: what a location compresses when neither it nor its site says.
    pub compress: Option<Compress>,
    /// nginx `sendfile` (on by default): file bodies go from the file to the socket
    /// in the kernel.
    pub sendfile: bool,
    /// The senders whose PROXY protocol headers `proxy_protocol` listeners believe.
    pub proxy_protocol_from: Vec<ipnet::IpNet>,
}

/// `client_max_body_size`: how many bytes of body a request may carry (nginx's).
/// A request declaring more (`Content-Length`) is answered 413 unread; one whose body
/// grows past it (chunked, HTTP/2 without a length) is cut off at the limit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxBodySize {
    /// `"0"`: any size, as nginx.
    Unlimited,
    /// At least 1.
    Bytes(u64),
}

impl MaxBodySize {
    /// Whether a body of `len` bytes is too large.
    pub(crate) fn exceeded_by(self, len: u64) -> bool {
        match self {
            MaxBodySize::Unlimited => false,
            MaxBodySize::Bytes(max) => len > max,
        }
    }
}

/// Which rate-limit headers limited responses carry (`ratelimit_headers`, docs/config.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RateLimitHeaders {
    /// IETF draft-10 `RateLimit-Policy` and `RateLimit`.
    Draft,
    /// `X-RateLimit-Limit`, `-Remaining`, `-Reset`.
    Legacy,
    Both,
    None,
}

impl RateLimitHeaders {
    /// Whether the draft's `RateLimit-Policy` and `RateLimit` are sent.
    pub(crate) fn draft(self) -> bool {
        matches!(self, RateLimitHeaders::Draft | RateLimitHeaders::Both)
    }

    /// Whether `X-RateLimit-*` are sent.
    pub(crate) fn legacy(self) -> bool {
        matches!(self, RateLimitHeaders::Legacy | RateLimitHeaders::Both)
    }

    /// How many headers a limited response gets.
    pub(crate) fn count(self) -> usize {
        2 * usize::from(self.draft()) + 3 * usize::from(self.legacy())
    }
}

/// `[access]`: checked for every request, before routing.
#[derive(Debug, Clone, Default)]
pub(crate) struct Access {
    /// Answered 403.
    pub deny: Vec<ipnet::IpNet>,
    /// Never rate limited (ours).
    pub exempt: Vec<ipnet::IpNet>,
}

/// `[zones.NAME]`.
#[derive(Debug, Clone)]
pub(crate) struct Zone {
    pub name: String,
    /// A zone's `key`: literal text and variables, in the one variable language.
    pub key: VarText,
    /// The rate of keys without a plan. Absent only for `concurrency`.
    pub rate: Option<Rate>,
    /// The `size` memory bound, in bytes.
    pub size: u64,
    pub algorithm: Algorithm,
    /// Plan name to rate, by name.
    pub plans: Vec<(String, Rate)>,
    /// `plan`: the plan read from the request, over its `[api_keys]` plan.
    pub plan_from: Option<VarText>,
    /// In-flight requests per key (`concurrency` only; 0 otherwise).
    pub max: u64,
    /// `$binary_remote_addr` keeps this many leading bits of an IPv4 client (default 32).
    pub ipv4_prefix: u8,
    /// ... and of an IPv6 client (default 128).
    pub ipv6_prefix: u8,
    /// `backend = "redis"`: state shared through `[redis]`; `None` for a local zone.
    /// Its `on_error` is the zone's own, or else `[redis]`'s.
    pub redis: Option<ZoneSettings>,
    /// `adaptive`: the zone's rates follow an upstream group's load.
    pub adaptive: Option<Target>,
}

/// `[api_keys]`: which plan each API key is on.
#[derive(Debug, Clone)]
pub(crate) struct ApiKeys {
    /// Where the key is read from.
    pub header: http::HeaderName,
    /// API key to plan name, `inline` and `file` merged (the file wins on a repeat).
    pub keys: std::collections::HashMap<String, String>,
    /// `priority`: plan name to priority (0–100, higher is shed last).
    pub priority: std::collections::BTreeMap<String, u8>,
}

/// One site (nginx `server {}`): the names it answers to, where, and its locations.
#[derive(Debug, Clone)]
pub(crate) struct Site {
    /// In file order; empty for a site that answers only as an address's default.
    pub names: Vec<SiteName>,
    /// `$server_name`: the first name, lower case without a trailing dot as nginx has it
    /// (a regex as written); `""` without names.
    pub server_name: String,
    /// What the `location` label of its locations' counters starts with: the first
    /// name, `_` without names; `None` for a file of top-level `[[location]]`s.
    pub label: Option<String>,
    /// The addresses it answers on, each one of `[server]`'s; `None`: every one.
    pub listen: Option<Vec<Address>>,
    /// `default = true`: the default site of every address it answers on.
    pub default: bool,
    /// `acme = true`: certificates for its names are obtained and renewed.
    pub acme: bool,
    /// `client_certificates`: the CAs its clients' certificates must chain to.
    pub client_certificates: Option<ClientCertificates>,
    /// In file order (regex locations are tried in this order), with what they inherit
    /// from the site already in them.
    pub locations: Vec<Location>,
    /// The site's own header rules: its `response_headers` with `when = "always"` go on
    /// its answers that no location makes (a 404).
    pub headers: HeaderRules,
    /// The site's `error_pages`: its locations inherit them, and they answer its 404 for a
    /// path no location matches.
    pub error_pages: ErrorPages,
    /// The site's `log`: where its 404 for a path no location matches is logged.
    pub log: Option<LogSetting>,
}

impl Site {
    /// Whether the site answers on `address`.
    pub(crate) fn listens_on(&self, address: Address) -> bool {
        self.listen
            .as_ref()
            .is_none_or(|listen| listen.contains(&address))
    }
}

/// One `[[location]]`.
#[derive(Debug, Clone)]
pub(crate) struct Location {
    pub pattern: Pattern,
    pub action: Action,
    /// The `limit` list, in order.
    pub limits: Vec<Limit>,
    /// nginx allow/deny rules, in order; the first match decides, none matching allows.
    pub access: Vec<AccessRule>,
    /// Units taken from every zone per request (at least 1).
    pub cost: u64,
    /// `cost_from`: the upstream's answer says what the request cost.
    pub cost_from: Option<CostFrom>,
    /// Override `[server]`'s.
    pub limit_status: Option<http::StatusCode>,
    pub limit_action: Option<LimitAction>,
    pub headers: HeaderRules,
    /// `upstream_path`: what replaces the matched prefix (or the whole path of an exact or
    /// regex location, or when it has variables) on the way upstream.
    pub upstream_path: Option<VarText>,
    /// Overrides `[server] client_max_body_size`.
    pub client_max_body_size: Option<MaxBodySize>,
    /// Overrides `[server] request_buffering`.
    pub request_buffering: Option<RequestBuffering>,
    /// `redirect_rewrite`: how the upstream's `Location` and `Refresh` are rewritten.
    pub redirects: Redirects,
    /// `cookie_path` and `cookie_domain`: how its `Set-Cookie`s are rewritten.
    pub cookies: CookieRewrites,
    /// `forwarded_headers`: the location's, else its site's, else `[server]`'s.
    pub forwarded: Forwarded,
    /// Its own timeouts, else its site's.
    pub timeouts: Timeouts,
    /// `error_pages`: the location's, else its site's.
    pub error_pages: ErrorPages,
    /// `intercept_errors`: `error_pages` replace the upstream's answers too.
    pub intercept_errors: bool,
    /// `expires`: on the answers with a status nginx calls safe (200, 206, 301, …).
    pub expires: Option<Expires>,
    /// `compress`: the location's, else its site's, else `[server]`'s.
    pub compress: Option<Compress>,
    /// `auth`: the location's, else its site's; `None` when neither has one or it is `"off"`.
    pub auth: Option<Check>,
    /// `log`: the location's over its site's, key by key; `None` when neither has one.
    pub log: Option<LogSetting>,
    /// `satisfy`: the location's, else its site's, else `"all"`.
    pub satisfy: Satisfy,
}


/// A location's header rules ("Header rules" in docs/config.md).
#[derive(Debug, Clone, Default)]
pub(crate) struct HeaderRules {
    /// Set on the request to the upstream; `None` removes.
    pub request: Vec<(http::HeaderName, Option<VarText>)>,
    /// Set on the responses the location serves, each when its `when` says.
    pub response: Vec<(http::HeaderName, ResponseValue)>,
    /// Removed from the upstream's responses.
    pub hide: Vec<http::HeaderName>,
    /// `pass_headers`: which of the upstream's headers dropped by default reach the client.
    pub pass: Passed,
}

/// `cost_from` and `keep_cost_header`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CostFrom {
    pub header: http::HeaderName,
    /// The client sees the header too.
    pub keep: bool,
}

/// One item of a location's `limit` list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Limit {
    /// Index into [`Config::zones`].
    pub zone: usize,
    pub burst: u64,
    /// Excess requests let through at once; `None` = `nodelay` (none delayed).
    pub delay: Option<u64>,
    /// Decide and count, never reject or delay.
    pub dry_run: bool,
    /// `count_status`: only answers with these statuses are charged.
    pub count: Option<StatusSet>,
    /// The penalty box: this item's rejections are strikes.
    pub ban: Option<Ban>,
    /// `elastic`: the rate while the zone's upstream has spare capacity.
    pub elastic: Option<Elastic>,
    /// `soft`: the share over the limit let through, marked.
    pub soft: Option<Share>,
}

#[derive(Debug, Clone)]
pub(crate) enum Action {
    /// Forward to the upstream group at this index of [`Config::upstreams`].
    Proxy { upstream: usize },
    /// Answer directly, as nginx's `return`.
    Return(Return),
    /// Serve files (`root` or `alias`); `upstream` is the group a `try_files` ending
    /// `"@upstream"` forwards to.
    Files { files: Files, upstream: Option<usize> },
}

#[derive(Debug, Clone)]
pub(crate) struct Return {
    pub status: ReturnStatus,
    /// May hold variables ("Variables" in docs/config.md).
    pub body: VarText,
    /// `Location` header, for redirects (`return = { status = 301, location = "..." }`);
    /// may hold variables.
    pub location: Option<VarText>,
}

/// A `return`'s status: written, or chosen by a map (`status = "$redirect_status"`).
#[derive(Debug, Clone)]
pub(crate) enum ReturnStatus {
    Fixed(http::StatusCode),
    /// Its `location` is sent only with a redirect ([`ReturnStatus::redirects`]), as
    /// nginx's `return CODE URL` takes the URL as `Location` only then.
    Map(maps::StatusMap),
}

impl ReturnStatus {
    /// The statuses nginx's `return` sends a `Location` with.
    pub(crate) fn redirects(status: http::StatusCode) -> bool {
        matches!(status.as_u16(), 301 | 302 | 303 | 307 | 308)
    }
}
