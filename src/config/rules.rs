//! The rules a site and its locations both set (`limit`, `access`, `limit_status`, `limit_action`,
//! `client_max_body_size`, `request_buffering`, the timeouts, the header rules,
//! `redirect_rewrite`, `cookie_path` and `cookie_domain`, `log`), and how a location inherits its
//! site's.
//!
//! A location's `limit`, `access`, `limit_status`, `limit_action`, `client_max_body_size`,
//! `request_buffering`, timeout, `redirect_rewrite`, `cookie_path` or `cookie_domain`
//! replaces the site's, as in nginx (`limit = []` turns the site's limits off). Header rules add up
//! instead: the site's rules apply unless the location has a rule for the same header
//! (nginx drops every inherited `add_header` as soon as a location has one of its own, a
//! known trap). `hide_headers` and `pass_headers` are the union of both lists.
//! `forwarded_headers` is replaced: the location's, else the site's, else `[server]`'s.
//! So are `error_pages` (a location's own replace the site's whole, as nginx's
//! `error_page`), `intercept_errors` and `compress` (the site hands down `[server]`'s).
//! A `log` takes what it does not write from its site's, key by key (`config/log.rs`).

use std::time::Duration;

use http::StatusCode;
use serde::{Deserialize, Serialize};

use super::cookies::{self, Attribute};
use super::diag::Diagnostics;
use super::raw::{Loose, RawRules};
use super::redirects::{self, RedirectRewrite};
use super::context::Context;
use super::{access, auth, compress, error_pages, headers, limits, values};
use super::auth::{Auth, Satisfy};
use super::{Compress, ErrorPages, LogSetting};
use super::raw::Span;
use super::{AccessRule, CookieRewrites, Forwarded, HeaderRules, Limit, LimitAction, MaxBodySize};
use super::Pattern;

/// `request_buffering` (nginx `proxy_request_buffering`, on by default as there): whether
/// a request's body is read whole before an upstream server is chosen and connected.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RequestBuffering {
    /// Read whole first: in memory up to `client_body_buffer_size`, the rest in a
    /// file under `client_body_temp_path`; then sent with its `Content-Length`.
    On,
    /// Only up to `client_body_buffer_size` is read first; a longer body streams to
    /// the upstream as it arrives.
    Off,
}

/// The timeouts a site or location may set; `None` where neither sets one: the
/// server's (`client_body_timeout`, `send_timeout`) or the upstream group's
/// (`read_timeout`, `connect_timeout`) apply.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Timeouts {
    pub client_body: Option<Duration>,
    pub send: Option<Duration>,
    pub read: Option<Duration>,
    pub connect: Option<Duration>,
}

impl Timeouts {
    /// A location's (`self`) over its site's.
    pub(crate) fn over(self, site: Timeouts) -> Timeouts {
        Timeouts {
            client_body: self.client_body.or(site.client_body),
            send: self.send.or(site.send),
            read: self.read.or(site.read),
            connect: self.connect.or(site.connect),
        }
    }
}

/// The rules as set; `None` where the key is not written.
#[derive(Clone, Debug)]
pub(super) struct Rules {
    pub limits: Option<Vec<Limit>>,
    pub access: Option<Vec<AccessRule>>,
    pub limit_status: Option<StatusCode>,
    pub limit_action: Option<LimitAction>,
    pub client_max_body_size: Option<MaxBodySize>,
    pub request_buffering: Option<RequestBuffering>,
    pub timeouts: Timeouts,
    pub headers: HeaderRules,
    pub redirect_rewrite: Option<RedirectRewrite>,
    pub cookie_path: Option<Vec<redirects::RewriteRule>>,
    pub cookie_domain: Option<Vec<redirects::RewriteRule>>,
    /// `forwarded_headers` in effect: its own, else what it inherits.
    pub forwarded: Forwarded,
    /// The forwarding headers its `request_headers` set or remove.
    pub sets: Forwarded,
    pub error_pages: Option<ErrorPages>,
    pub intercept_errors: Option<bool>,
    pub compress: Option<Compress>,
    pub auth: Option<Auth>,
    pub satisfy: Option<Satisfy>,
    pub log: Option<LogSetting>,
}

/// What a table's rules are checked against from above: the `forwarded_headers` in
/// effect there, and the forwarding headers the site's `request_headers` set.
#[derive(Clone, Copy, Debug)]
pub(super) struct Inherited {
    pub forwarded: Forwarded,
    pub sets: Forwarded,
}

impl Inherited {
    /// What `[server]` hands its sites: its `forwarded_headers` (all four when it is
    /// itself wrong) and no rules.
    pub(super) fn server(forwarded: Option<Forwarded>) -> Inherited {
        Inherited {
            forwarded: forwarded.unwrap_or(Forwarded::ALL),
            sets: Forwarded::NONE,
        }
    }
}

impl Default for Rules {
    /// No rule written, every forwarding header written.
    fn default() -> Rules {
        Rules {
            limits: None,
            access: None,
            limit_status: None,
            limit_action: None,
            client_max_body_size: None,
            request_buffering: None,
            timeouts: Timeouts::default(),
            headers: HeaderRules::default(),
            redirect_rewrite: None,
            cookie_path: None,
            cookie_domain: None,
            forwarded: Forwarded::ALL,
            sets: Forwarded::NONE,
            error_pages: None,
            intercept_errors: None,
            compress: None,
            auth: None,
            satisfy: None,
            log: None,
        }
    }
}

/// The rules written in `raw`, each problem reported. `cost` is what each request of the
/// location takes (1 for a site); `pattern` the location's (`None` when it is itself
/// wrong), which header values' captures refer to; `inherited` what the table above
/// (`[server]` for a site, the site for a location) has in effect.
pub(super) fn rules(
    raw: &RawRules<'_>,
    cost: u64,
    pattern: Option<&Pattern>,
    context: &Context<'_>,
    inherited: Inherited,
    diag: &mut Diagnostics<'_>,
) -> Option<Rules> {
    let (zones, maps) = (context.zones, context.maps);
    let forwarded = forwarded(raw, inherited, diag);
    // Checked against what is inherited when the table's own list is itself wrong, so
    // that the rules' problems are reported too.
    let checked = forwarded.unwrap_or(inherited.forwarded);
    let headers = headers::header_rules(raw, pattern, checked, maps, diag);
    let limits = own(raw.limit, |list| limits::limits(list, zones, cost, diag));
    let access = own(raw.access, |list| access::access_rules(list, diag));
    let limit_status = own(raw.limit_status, |value| limits::limit_status(value, diag));
    let client_max_body_size = match raw.client_max_body_size {
        None => Some(None),
        Some(value) => diag
            .check(value.span(), values::max_body_size(value.get_ref()))
            .map(Some),
    };
    let redirect_rewrite = match raw.redirect_rewrite {
        None => Some(None),
        Some(written) => redirects::redirect_rewrite(written, pattern, maps, diag).map(Some),
    };
    let mut cookie = |raw, attribute| match raw {
        None => Some(None),
        Some(written) => cookies::cookie_rewrites(written, attribute, pattern, maps, diag).map(Some),
    };
    let cookie_path = cookie(raw.cookie_path, Attribute::Path);
    let cookie_domain = cookie(raw.cookie_domain, Attribute::Domain);
    let timeouts = timeouts(raw, diag);
    let error_pages = own(raw.error_pages, |table| error_pages::error_pages(table, diag));
    let compress = own(raw.compress, |written| compress::compress(written, diag));
    let auth = own(raw.auth, |written| auth::auth(written, context.base, diag));
    let log = own(raw.log, |written| super::log::setting(written.get_ref(), context.base, diag));
    let (headers, sets) = headers?;
    let forwarded = forwarded?;
    Some(Rules {
        timeouts: timeouts?,
        limits: limits?,
        access: access?,
        limit_status: limit_status?,
        limit_action: raw.limit_action,
        client_max_body_size: client_max_body_size?,
        request_buffering: raw.request_buffering,
        headers,
        redirect_rewrite: redirect_rewrite?,
        cookie_path: cookie_path?,
        cookie_domain: cookie_domain?,
        forwarded,
        sets,
        error_pages: error_pages?,
        intercept_errors: raw.intercept_errors.map(|on| *on.get_ref()),
        compress: compress?,
        auth: auth?,
        satisfy: raw.satisfy,
        log: log?,
    })
}

/// A key's value as `read` makes it of what is `written`: `Some(None)` when the key is not
/// written, `None` when it is wrong (reported).
fn own<W, T>(written: Option<W>, read: impl FnOnce(W) -> Option<T>) -> Option<Option<T>> {
    match written {
        None => Some(None),
        Some(written) => read(written).map(Some),
    }
}

/// The table's `forwarded_headers`, else the one it inherits; an own list that has
/// tollgate write a header the site's `request_headers` set is refused.
fn forwarded(
    raw: &RawRules<'_>,
    inherited: Inherited,
    diag: &mut Diagnostics<'_>,
) -> Option<Forwarded> {
    let Some(written) = raw.forwarded_headers else {
        return Some(inherited.forwarded);
    };
    let own = headers::forwarded_headers(written, diag)?;
    let span: Span = written.span();
    (!headers::clash(own, inherited.sets, span, diag)).then_some(own)
}

impl Rules {
    /// A location's rules (`self`) over its site's.
    pub(super) fn inherit(self, site: &Rules) -> Rules {
        Rules {
            limits: self.limits.or_else(|| site.limits.clone()),
            access: self.access.or_else(|| site.access.clone()),
            limit_status: self.limit_status.or(site.limit_status),
            limit_action: self.limit_action.or(site.limit_action),
            client_max_body_size: self.client_max_body_size.or(site.client_max_body_size),
            request_buffering: self.request_buffering.or(site.request_buffering),
            timeouts: self.timeouts.over(site.timeouts),
            headers: merged(&site.headers, self.headers),
            redirect_rewrite: self.redirect_rewrite.or_else(|| site.redirect_rewrite.clone()),
            cookie_path: self.cookie_path.or_else(|| site.cookie_path.clone()),
            cookie_domain: self.cookie_domain.or_else(|| site.cookie_domain.clone()),
            forwarded: self.forwarded,
            sets: self.sets,
            error_pages: self.error_pages.or_else(|| site.error_pages.clone()),
            intercept_errors: self.intercept_errors.or(site.intercept_errors),
            compress: self.compress.or_else(|| site.compress.clone()),
            auth: self.auth.or_else(|| site.auth.clone()),
            satisfy: self.satisfy.or(site.satisfy),
            log: LogSetting::over(self.log, site.log.as_ref()),
        }
    }

    /// The cookie rules in force.
    pub(super) fn cookies(&self) -> CookieRewrites {
        CookieRewrites {
            paths: self.cookie_path.clone().unwrap_or_default(),
            domains: self.cookie_domain.clone().unwrap_or_default(),
        }
    }

    /// What the site's locations are checked against.
    pub(super) fn inherited(&self) -> Inherited {
        Inherited {
            forwarded: self.forwarded,
            sets: self.sets,
        }
    }
}

/// `client_body_timeout`, `send_timeout`, `read_timeout` and `connect_timeout` as
/// written on a site or location.
fn timeouts(raw: &RawRules<'_>, diag: &mut Diagnostics<'_>) -> Option<Timeouts> {
    let mut valid = true;
    let mut one = |written: Option<&Loose>| {
        let value = written?;
        let duration = diag.check(value.span(), values::duration(value.get_ref()));
        valid &= duration.is_some();
        duration
    };
    let timeouts = Timeouts {
        client_body: one(raw.client_body_timeout),
        send: one(raw.send_timeout),
        read: one(raw.read_timeout),
        connect: one(raw.connect_timeout),
    };
    valid.then_some(timeouts)
}

/// The site's header rules with the location's added: a location rule replaces the
/// site's rule for the same header.
fn merged(site: &HeaderRules, own: HeaderRules) -> HeaderRules {
    fn over<V: Clone>(
        site: &[(http::HeaderName, V)],
        own: Vec<(http::HeaderName, V)>,
    ) -> Vec<(http::HeaderName, V)> {
        let mut all: Vec<_> = site
            .iter()
            .filter(|(name, _)| own.iter().all(|(mine, _)| mine != name))
            .cloned()
            .collect();
        all.extend(own);
        all
    }
    let mut hide = site.hide.clone();
    hide.extend(
        own.hide
            .into_iter()
            .filter(|name| !site.hide.contains(name)),
    );
    HeaderRules {
        request: over(&site.request, own.request),
        response: over(&site.response, own.response),
        hide,
        pass: site.pass.with(own.pass),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::VarText;
    use http::HeaderName;

    fn text(value: &str) -> crate::config::ResponseValue {
        crate::config::ResponseValue {
            value: VarText::parse(value).unwrap(),
            when: crate::config::When::Served,
        }
    }

    fn rendered(rules: &[(HeaderName, crate::config::ResponseValue)]) -> Vec<(String, String)> {
        rules
            .iter()
            .map(|(name, rule)| {
                let value = rule.value.as_literal().unwrap_or_default().to_owned();
                (name.as_str().to_owned(), value)
            })
            .collect()
    }

    #[test]
    fn a_location_adds_header_rules_to_its_sites_and_replaces_same_names() {
        let hsts = HeaderName::from_static("strict-transport-security");
        let frame = HeaderName::from_static("x-frame-options");
        let site = Rules {
            headers: HeaderRules {
                request: vec![(HeaderName::from_static("cookie"), None)],
                response: vec![
                    (hsts.clone(), text("max-age=1")),
                    (frame.clone(), text("DENY")),
                ],
                hide: vec![HeaderName::from_static("server")],
                pass: crate::config::Passed::default(),
            },
            ..Rules::default()
        };
        let own = Rules {
            headers: HeaderRules {
                request: Vec::new(),
                response: vec![(frame, text("SAMEORIGIN"))],
                hide: vec![
                    HeaderName::from_static("server"),
                    HeaderName::from_static("x-powered-by"),
                ],
                pass: crate::config::Passed::default(),
            },
            ..Rules::default()
        };
        let got = own.inherit(&site).headers;
        assert_eq!(
            rendered(&got.response),
            [
                ("strict-transport-security".into(), "max-age=1".into()),
                ("x-frame-options".into(), "SAMEORIGIN".into())
            ]
        );
        assert_eq!(got.request.len(), 1);
        assert_eq!(got.hide, ["server", "x-powered-by"]);
    }

    #[test]
    fn a_locations_own_limits_access_and_sizes_replace_the_sites() {
        let site = Rules {
            limits: Some(vec![Limit {
                zone: 0,
                burst: 5,
                delay: None,
                dry_run: false,
                count: None,
                ban: None,
                elastic: None,
                soft: None,
            }]),
            access: Some(Vec::new()),
            limit_status: Some(StatusCode::SERVICE_UNAVAILABLE),
            limit_action: Some(LimitAction::Tarpit),
            client_max_body_size: Some(MaxBodySize::Unlimited),
            request_buffering: Some(RequestBuffering::Off),
            timeouts: Timeouts {
                read: Some(std::time::Duration::from_secs(5)),
                ..Timeouts::default()
            },
            headers: HeaderRules::default(),
            ..Rules::default()
        };
        let inherited = Rules::default().inherit(&site);
        assert_eq!(inherited.limits, site.limits);
        assert_eq!(inherited.limit_status, site.limit_status);
        assert_eq!(inherited.limit_action, Some(LimitAction::Tarpit));
        assert_eq!(inherited.client_max_body_size, site.client_max_body_size);
        assert_eq!(inherited.request_buffering, Some(RequestBuffering::Off));
        assert_eq!(inherited.timeouts, site.timeouts);
        let own = Rules {
            limits: Some(Vec::new()),
            limit_status: Some(StatusCode::TOO_MANY_REQUESTS),
            limit_action: Some(LimitAction::Close),
            request_buffering: Some(RequestBuffering::On),
            ..Rules::default()
        };
        let replaced = own.inherit(&site);
        assert_eq!(replaced.limits, Some(Vec::new()));
        assert_eq!(replaced.limit_status, Some(StatusCode::TOO_MANY_REQUESTS));
        assert_eq!(replaced.limit_action, Some(LimitAction::Close));
        assert_eq!(replaced.request_buffering, Some(RequestBuffering::On));
    }
}
