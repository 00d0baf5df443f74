//! What a block's directives set, inherited as nginx inherits it: http → server →
//! location → nested location. A list directive (`proxy_set_header`, `add_header`,
//! `allow`/`deny`, `limit_req`…) set at a level replaces the whole list of the level
//! above, which it inherits only when it sets none; a single value replaces the one
//! above. tollgate's own site rules merge instead (docs/config.md), so the importer
//! writes each location's settings whole and leaves the site's empty.

use super::auth_settings::AuthSettings;
use super::build::LogSetting;
use super::file_settings::FileSettings;
use crate::config::RequestBuffering;

/// One `limit_req` or `limit_conn`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Limit {
    pub zone: String,
    pub burst: Option<i64>,
    pub nodelay: bool,
    pub delay: Option<i64>,
    /// `limit_conn`'s number.
    pub conn: Option<i64>,
}

/// What one level sets, each `None` where it sets nothing.
#[derive(Clone, Debug, Default)]
pub(super) struct Level {
    /// `proxy_set_header`: name and value as nginx has them.
    pub set_headers: Option<Vec<(String, String)>>,
    /// `add_header`: name, value, `always`.
    pub add_headers: Option<Vec<(String, String, bool)>>,
    pub hide_headers: Option<Vec<String>>,
    pub pass_headers: Option<Vec<String>>,
    /// `allow` / `deny` as tollgate writes them: `"allow 10.0.0.0/8"`.
    pub access: Option<Vec<String>>,
    pub limit_req: Option<Vec<Limit>>,
    pub limit_conn: Option<Vec<Limit>>,
    pub limit_req_status: Option<i64>,
    pub limit_conn_status: Option<i64>,
    pub limit_req_dry_run: Option<bool>,
    pub client_max_body_size: Option<String>,
    pub request_buffering: Option<RequestBuffering>,
    pub connect_timeout: Option<String>,
    pub read_timeout: Option<String>,
    /// Set in a `server {}` or `location` (the `http {}` one is `[server]`'s).
    pub client_body_timeout: Option<String>,
    pub send_timeout: Option<String>,
    /// `proxy_redirect`: `Some(empty)` for `off`, else the rules in order.
    pub redirect: Option<Vec<Redirect>>,
    /// `proxy_cookie_path` / `proxy_cookie_domain`: from and to (`Some(empty)`: `off`).
    pub cookie_paths: Option<Vec<(String, String)>>,
    pub cookie_domains: Option<Vec<(String, String)>>,
    /// Files and compression (`import/files.rs`).
    pub files: FileSettings,
    /// Basic auth and `satisfy` (`import/auth.rs`).
    pub auth: AuthSettings,
    /// `access_log` in a `server {}` or `location` (`http {}`'s is `[log]`).
    pub log: Option<LogSetting>,
}

/// One `proxy_redirect` rule.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Redirect {
    /// `proxy_redirect default`: made from the location's proxy_pass.
    Default,
    /// `proxy_redirect FROM TO` (`~regex` / `~*regex` kept as written).
    Rule(String, String),
}

impl Level {
    /// This level's settings over `parent`'s.
    pub(super) fn under(self, parent: &Level) -> Level {
        let p = parent.clone();
        Level {
            set_headers: self.set_headers.or(p.set_headers),
            add_headers: self.add_headers.or(p.add_headers),
            hide_headers: self.hide_headers.or(p.hide_headers),
            pass_headers: self.pass_headers.or(p.pass_headers),
            access: self.access.or(p.access),
            limit_req: self.limit_req.or(p.limit_req),
            limit_conn: self.limit_conn.or(p.limit_conn),
            limit_req_status: self.limit_req_status.or(p.limit_req_status),
            limit_conn_status: self.limit_conn_status.or(p.limit_conn_status),
            limit_req_dry_run: self.limit_req_dry_run.or(p.limit_req_dry_run),
            client_max_body_size: self.client_max_body_size.or(p.client_max_body_size),
            request_buffering: self.request_buffering.or(p.request_buffering),
            connect_timeout: self.connect_timeout.or(p.connect_timeout),
            read_timeout: self.read_timeout.or(p.read_timeout),
            client_body_timeout: self.client_body_timeout.or(p.client_body_timeout),
            send_timeout: self.send_timeout.or(p.send_timeout),
            redirect: self.redirect.or(p.redirect),
            cookie_paths: self.cookie_paths.or(p.cookie_paths),
            cookie_domains: self.cookie_domains.or(p.cookie_domains),
            files: self.files.under(&p.files),
            auth: self.auth.under(&p.auth),
            log: self.log.or(p.log),
        }
    }
}

/// Which block a directive is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Context {
    Http,
    Server,
    Location,
}
