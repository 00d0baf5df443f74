//! The tables that say how requests are answered: `[[site]]`, `[[location]]`, and the
//! keys both take (limits, access rules, header rules, `return`).

use serde::de;
use serde::{Deserialize, Serialize};
use serde_spanned::Spanned;

use super::super::{LimitAction, RequestBuffering, Satisfy};
use super::{ser, Loose, RawCookieRewrites, RawLog, RawRedirectRewrite, Span};

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
    /// `client_certificates = { ca, verify }` (`config/client_certs.rs`).
    pub client_certificates: Option<Spanned<RawClientCertificates>>,
    /// What its locations inherit: as in [`RawLocation`].
    pub limit: Option<Spanned<Vec<Spanned<RawLimit>>>>,
    pub access: Option<Spanned<Vec<Spanned<String>>>>,
    pub limit_status: Option<Spanned<i64>>,
    pub limit_action: Option<LimitAction>,
    pub request_headers: Option<Spanned<HeaderTable>>,
    pub response_headers: Option<Spanned<ResponseHeaderTable>>,
    pub hide_headers: Option<Spanned<Vec<Spanned<String>>>>,
    pub client_max_body_size: Option<Loose>,
    pub request_buffering: Option<RequestBuffering>,
    /// nginx `proxy_redirect`, `proxy_cookie_path`, `proxy_cookie_domain`
    /// (`config/redirects.rs`, `config/cookies.rs`).
    pub redirect_rewrite: Option<Spanned<RawRedirectRewrite>>,
    pub cookie_path: Option<Spanned<RawCookieRewrites>>,
    pub cookie_domain: Option<Spanned<RawCookieRewrites>>,
    pub pass_headers: Option<Spanned<Vec<Spanned<String>>>>,
    pub forwarded_headers: Option<Spanned<Vec<Spanned<String>>>>,
    pub client_body_timeout: Option<Loose>,
    pub send_timeout: Option<Loose>,
    pub read_timeout: Option<Loose>,
    pub connect_timeout: Option<Loose>,
    /// What its locations inherit (a location's own `error_pages` replace these whole).
    pub error_pages: Option<Spanned<ErrorPagesTable>>,
    pub intercept_errors: Option<Spanned<bool>>,
    pub compress: Option<Spanned<RawCompress>>,
    pub auth: Option<Spanned<RawAuth>>,
    pub satisfy: Option<Satisfy>,
    /// `{ access, format, escape }` over `[log]`'s (`config/log.rs`).
    pub log: Option<Spanned<RawLog>>,
    /// Taken out before the rest is read; named here so that "unknown key" lists it.
    /// Written from [`RawSiteEntry::locations`].
    #[allow(dead_code)]
    #[serde(skip_serializing)]
    pub location: Option<de::IgnoredAny>,
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
    /// What a refused request gets (`config/limit_action.rs`).
    pub limit_action: Option<LimitAction>,
    /// Header name to value (`""` removes) on the request to the upstream.
    pub request_headers: Option<Spanned<HeaderTable>>,
    /// Header name to value (or `{ value, when }`) on the responses the location serves.
    pub response_headers: Option<Spanned<ResponseHeaderTable>>,
    /// Upstream response headers the client never sees.
    pub hide_headers: Option<Spanned<Vec<Spanned<String>>>>,
    /// The path the upstream gets instead of the client's.
    pub upstream_path: Option<Spanned<String>>,
    pub client_max_body_size: Option<Loose>,
    pub request_buffering: Option<RequestBuffering>,
    /// nginx `proxy_redirect`, `proxy_cookie_path`, `proxy_cookie_domain`
    /// (`config/redirects.rs`, `config/cookies.rs`).
    pub redirect_rewrite: Option<Spanned<RawRedirectRewrite>>,
    pub cookie_path: Option<Spanned<RawCookieRewrites>>,
    pub cookie_domain: Option<Spanned<RawCookieRewrites>>,
    /// Upstream response headers dropped by default that the client sees (`Server`…).
    pub pass_headers: Option<Spanned<Vec<Spanned<String>>>>,
    /// Which forwarding headers tollgate writes upstream.
    pub forwarded_headers: Option<Spanned<Vec<Spanned<String>>>>,
    /// Override `[server]`'s.
    pub client_body_timeout: Option<Loose>,
    pub send_timeout: Option<Loose>,
    /// Override the upstream group's.
    pub read_timeout: Option<Loose>,
    pub connect_timeout: Option<Loose>,
    /// Files (`config/files.rs`): `root` or `alias`, and how they are served.
    pub root: Option<Spanned<String>>,
    pub alias: Option<Spanned<String>>,
    pub index: Option<Spanned<Vec<Spanned<String>>>>,
    pub try_files: Option<Spanned<Vec<Spanned<String>>>>,
    /// Status list (`"500 502"`) to page (`"/50x.html"`, `"=200 /x"`, a URL).
    pub error_pages: Option<Spanned<ErrorPagesTable>>,
    pub intercept_errors: Option<Spanned<bool>>,
    /// `"30d"`, `"-1"`, `"epoch"`, `"max"` or `"off"`.
    pub expires: Option<Loose>,
    pub precompressed: Option<Spanned<Vec<Spanned<String>>>>,
    pub compress: Option<Spanned<RawCompress>>,
    /// Who may pass beyond `access` (`config/auth.rs`): `{ basic = { realm, users } }` or `"off"`.
    pub auth: Option<Spanned<RawAuth>>,
    /// How `access` and `auth` combine: `"all"` (the default) or `"any"`.
    pub satisfy: Option<Satisfy>,
    pub follow_symlinks: Option<Spanned<bool>>,
    pub dotfiles: Option<Spanned<bool>>,
    /// `{ access, format, escape }` over its site's (`config/log.rs`).
    pub log: Option<Spanned<RawLog>>,
}

/// The keys a site and a location both take, as written.
pub(crate) struct RawRules<'a> {
    pub limit: Option<&'a Spanned<Vec<Spanned<RawLimit>>>>,
    pub access: Option<&'a Spanned<Vec<Spanned<String>>>>,
    pub limit_status: Option<&'a Spanned<i64>>,
    pub limit_action: Option<LimitAction>,
    pub request_headers: Option<&'a Spanned<HeaderTable>>,
    pub response_headers: Option<&'a Spanned<ResponseHeaderTable>>,
    pub hide_headers: Option<&'a Spanned<Vec<Spanned<String>>>>,
    pub client_max_body_size: Option<&'a Loose>,
    pub request_buffering: Option<RequestBuffering>,
    pub redirect_rewrite: Option<&'a Spanned<RawRedirectRewrite>>,
    pub cookie_path: Option<&'a Spanned<RawCookieRewrites>>,
    pub cookie_domain: Option<&'a Spanned<RawCookieRewrites>>,
    pub pass_headers: Option<&'a Spanned<Vec<Spanned<String>>>>,
    pub forwarded_headers: Option<&'a Spanned<Vec<Spanned<String>>>>,
    pub client_body_timeout: Option<&'a Loose>,
    pub send_timeout: Option<&'a Loose>,
    pub read_timeout: Option<&'a Loose>,
    pub connect_timeout: Option<&'a Loose>,
    pub error_pages: Option<&'a Spanned<ErrorPagesTable>>,
    pub intercept_errors: Option<&'a Spanned<bool>>,
    pub compress: Option<&'a Spanned<RawCompress>>,
    pub auth: Option<&'a Spanned<RawAuth>>,
    pub satisfy: Option<Satisfy>,
    pub log: Option<&'a Spanned<RawLog>>,
}

/// `rules()` for a table that has every key of [`RawRules`] (a site and a location): one
/// list of the shared keys, so that a key added to both is borrowed by both.
macro_rules! rules_of {
    ($table:ty) => {
        impl $table {
            pub(crate) fn rules(&self) -> RawRules<'_> {
                RawRules {
                    limit: self.limit.as_ref(),
                    access: self.access.as_ref(),
                    limit_status: self.limit_status.as_ref(),
                    limit_action: self.limit_action,
                    request_headers: self.request_headers.as_ref(),
                    response_headers: self.response_headers.as_ref(),
                    hide_headers: self.hide_headers.as_ref(),
                    client_max_body_size: self.client_max_body_size.as_ref(),
                    request_buffering: self.request_buffering,
                    redirect_rewrite: self.redirect_rewrite.as_ref(),
                    cookie_path: self.cookie_path.as_ref(),
                    cookie_domain: self.cookie_domain.as_ref(),
                    pass_headers: self.pass_headers.as_ref(),
                    forwarded_headers: self.forwarded_headers.as_ref(),
                    client_body_timeout: self.client_body_timeout.as_ref(),
                    send_timeout: self.send_timeout.as_ref(),
                    read_timeout: self.read_timeout.as_ref(),
                    connect_timeout: self.connect_timeout.as_ref(),
                    error_pages: self.error_pages.as_ref(),
                    intercept_errors: self.intercept_errors.as_ref(),
                    compress: self.compress.as_ref(),
                    auth: self.auth.as_ref(),
                    satisfy: self.satisfy,
                    log: self.log.as_ref(),
                }
            }
        }
    };
}

rules_of!(RawLocation);
rules_of!(RawSite);

/// `error_pages` as written: statuses (`"500 502"`) to a page.
pub(crate) type ErrorPagesTable = std::collections::BTreeMap<Spanned<String>, Spanned<String>>;

/// `compress` as written (`config/compress.rs`); a key left out takes its default.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { encodings = [\"gzip\"], types = [\"text/*\"], min_length = \"1k\" }"
)]
pub(crate) struct RawCompress {
    pub encodings: Option<Spanned<Vec<Spanned<String>>>>,
    pub types: Option<Spanned<Vec<Spanned<String>>>>,
    pub min_length: Option<Loose>,
}

/// A site's `client_certificates` as written (`config/client_certs.rs`).
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { ca = \"clients.pem\", verify = \"on\" }"
)]
pub(crate) struct RawClientCertificates {
    pub ca: Option<Spanned<String>>,
    pub verify: Option<Spanned<String>>,
}

/// `auth` as written: `"off"`, or a table naming the check (deserialized in `either`).
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum RawAuth {
    Off(String),
    Table(Box<RawAuthTable>),
}

#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { basic = { realm = \"Admin\", users = \"admin.htpasswd\" } }, { jwt = { jwks = \"jwks.json\" } } or { request = { url = \"http://127.0.0.1:4180/oauth2/auth\" } }"
)]
pub(crate) struct RawAuthTable {
    pub basic: Option<Spanned<RawBasic>>,
    pub request: Option<Spanned<RawForwardAuth>>,
    pub jwt: Option<Spanned<RawJwt>>,
}

/// `auth.jwt`: a bearer token checked against a JWK set.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { jwks = \"jwks.json\", issuer = \"https://id.example.com\", audience = \"api\" }"
)]
pub(crate) struct RawJwt {
    /// The JWK set as a file (relative to the config file's directory).
    pub jwks: Option<Spanned<String>>,
    /// The JWK set as an IdP serves it (`jwks_uri`).
    pub jwks_url: Option<Spanned<String>>,
    /// One text or a list.
    pub issuer: Option<Loose>,
    /// One text or a list.
    pub audience: Option<Loose>,
    /// `"header"` (`Authorization: Bearer`, the default) or `"cookie:NAME"`.
    pub from: Option<Spanned<String>>,
    pub leeway: Option<Loose>,
    pub require: Option<Spanned<std::collections::BTreeMap<String, Spanned<String>>>>,
    pub realm: Option<Spanned<String>>,
}

/// `auth.request`: nginx's `auth_request`, Traefik's ForwardAuth.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { url = \"http://127.0.0.1:4180/oauth2/auth\", copy_headers = [\"X-Auth-Request-User\"], timeout = \"2s\" }"
)]
pub(crate) struct RawForwardAuth {
    /// Required: the auth service's `http://` or `https://` URL.
    pub url: Option<Spanned<String>>,
    pub copy_headers: Option<Spanned<Vec<Spanned<String>>>>,
    pub timeout: Option<Loose>,
    pub max_in_flight: Option<Spanned<i64>>,
}

/// `auth.basic`: nginx's `auth_basic` realm and `auth_basic_user_file`.
#[derive(Default, Deserialize, Serialize)]
#[serde(
    deny_unknown_fields,
    expecting = "a table like { realm = \"Admin\", users = \"admin.htpasswd\" }"
)]
pub(crate) struct RawBasic {
    pub realm: Option<Spanned<String>>,
    /// Required: the htpasswd file.
    pub users: Option<Spanned<String>>,
}

/// Header rules as written: name to value.
pub(crate) type HeaderTable = std::collections::BTreeMap<Spanned<String>, Spanned<String>>;

/// `response_headers` as written: name to a value or a `{ value, when }` table.
pub(crate) type ResponseHeaderTable =
    std::collections::BTreeMap<Spanned<String>, Spanned<RawResponseHeader>>;

/// A `response_headers` value: `"text"`, or `{ value = "text", when = "always" }`
/// (deserialized in `either`).
#[derive(Serialize)]
#[serde(untagged)]
pub(crate) enum RawResponseHeader {
    Value(String),
    Table(RawResponseHeaderTable),
}

#[derive(Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct RawResponseHeaderTable {
    /// Required.
    pub value: Option<Spanned<String>>,
    pub when: Option<Spanned<super::super::When>>,
}

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
    pub status: Option<Spanned<RawStatus>>,
    pub body: Option<Spanned<String>>,
    pub location: Option<Spanned<String>>,
}

/// A `return`'s `status`: a number, or a map variable (`"$redirect_status"`).
#[derive(Deserialize, Serialize)]
#[serde(untagged, expecting = r#"a status such as 301, or a map variable such as "$redirect_status""#)]
pub(crate) enum RawStatus {
    Code(i64),
    Var(String),
}
