//! The request pipeline (docs/architecture.md): identify, admit (`checks`: methods, Host, header
//! names), deny, route, allow/deny, limit, forward or answer, respond, log. Each phase is
//! a small function that either goes on or finishes the response.

mod acme_challenge;
pub(crate) mod auth;
mod checks;
mod conn;
pub(crate) mod compress;
mod encoding;
pub(crate) mod files;
mod fill;
pub(crate) mod error;
mod explain;
mod forward;
mod header_rules;
pub(crate) mod headers;
mod internal;
mod limit_phase;
pub(crate) mod limit_response;
mod logged;
mod own;
mod request_id;
pub(crate) mod response;
pub(crate) mod rewrite;
mod settle;
pub(crate) mod site;
mod slash_redirect;
pub(crate) mod tarpit;
mod text;
pub(crate) mod timeouts;
pub(crate) mod tunnel;
pub(crate) mod upstream_urls;

use std::net::IpAddr;
use std::sync::Arc;

use crate::wire::body::ClientBody;
use http::{Request, Response, StatusCode};

use crate::access;
use crate::admission::Policy;
use crate::config::{Forwarded, LimitAction, MaxBodySize, RequestBuffering};
use crate::limit::outcome::{InFlight, Outcome};
use crate::log::{AccessLog, Logs};
use crate::metrics::cells::{Counter, PerWorker};
use crate::metrics::{LocationStats, ZoneStats};
use crate::upstream::{Group, Lease, ResponseBody};
use crate::vars;
pub(crate) use header_rules::HeaderRules;
use http::uri::PathAndQuery;
use request_id::RequestId;
use fill::{host_of, vars_of};
use rewrite::Rewrite;
use limit_phase::Refused;

pub(crate) use conn::Conn;
pub(crate) use error::ProxyError;
pub(crate) use limit_phase::ApiKeys;
pub(crate) use logged::Logged;
pub(crate) use response::Fixed;
pub(crate) use site::{Site, Sites};
use site::Unrouted;

/// Everything the pipeline needs, built once per configuration by the snapshot.
pub(crate) struct Pipeline {
    pub sites: Sites,
    pub real_ip: Option<access::RealIp>,
    /// `[access]`: `deny` answers 403 before routing; `exempt` is never limited.
    pub deny: Vec<ipnet::IpNet>,
    pub exempt: Vec<ipnet::IpNet>,
    /// Requests `[access] deny` answered 403.
    pub denied: Arc<PerWorker<Counter>>,
    /// Where requests that match no location are counted.
    pub unrouted: LocationStats,
    pub api_keys: Option<ApiKeys>,
    pub ratelimit_headers: crate::config::RateLimitHeaders,
    /// tollgate's `Server` header (`server_header`), which the connection writes on
    /// every answer that has none; `None`: no `Server` header.
    pub server_header: Option<http::HeaderValue>,
    /// Bodies up to this size are read whole into memory before an upstream is chosen.
    pub client_body_buffer_size: usize,
    /// Where larger bodies are read into a file, in locations with `request_buffering`
    /// on (the directory exists: the snapshot made it).
    pub client_body_temp_path: std::path::PathBuf,
    /// Header names with `_` are passed on (`underscores_in_headers`).
    pub underscores_in_headers: bool,
    /// Every access log: `[log]`'s, and those of sites and locations with their own.
    pub logs: Logs,
    /// With `[acme]`: the http-01 answers under way, given on plain listeners first.
    pub acme: Option<Arc<crate::acme::Published>>,
    /// `limit_action = "tarpit"`: how long, and how many at once.
    pub tarpit: tarpit::Tarpit,
    /// The bound on files answers hold open, the same across generations.
    pub open_files: files::OpenFiles,
    /// The bound on `auth` hash checks at once.
    pub auth_checks: auth::Checks,
    /// `[admin] explain`: the token a request asks why with (`X-Tollgate-Explain`).
    pub explain: Option<crate::config::AdminToken>,
    /// `[trace]`: spans of sampled requests.
    pub tracer: Option<Arc<crate::trace::Tracer>>,
}

/// One `[[location]]`, ready to use.
pub(crate) struct Location {
    pub route: Route,
    /// The `limit` list, and the units each request takes in it.
    pub limits: Policy,
    /// `cost_from`: the upstream's answer says what the request cost.
    pub cost_from: Option<crate::config::CostFrom>,
    /// nginx allow/deny.
    pub access: access::Rules,
    /// Requests answered here, by status (`/metrics`).
    pub stats: LocationStats,
    /// Each rule's zone's counts, in `limits` order.
    pub zone_stats: Vec<Arc<ZoneStats>>,
    /// Requests each `access` rule denied, in rule order (`None` for `allow` rules).
    pub denied: Vec<Option<Arc<PerWorker<Counter>>>>,
    /// The status of a rejection here.
    pub limit_status: StatusCode,
    /// What a request refused by a limit gets here (`tarpit`).
    pub limit_action: LimitAction,
    /// The texts of its limited answers that are the same every time.
    pub prewritten: limit_response::Prewritten,
    /// Headers set on the request upstream and on the responses served here.
    pub headers: HeaderRules,
    /// `forwarded_headers`: which forwarding headers are written upstream.
    pub forwarded: Forwarded,
    /// The location's regex, when its `return`, header rules or `upstream_path` use
    /// captures (`$1`…).
    pub captures: Option<regex::bytes::Regex>,
    /// `upstream_path`.
    pub rewrite: Option<Rewrite>,
    /// Whether answering here needs the request's variables.
    pub needs_vars: bool,
    /// The location's, else the site's, else the server's (nginx `client_max_body_size`).
    pub client_max_body_size: MaxBodySize,
    /// The location's, else the site's, else the server's (nginx
    /// `proxy_request_buffering`).
    pub request_buffering: RequestBuffering,
    /// `$server_name`: its site's first name.
    pub server_name: Arc<str>,
    /// `$site` and `$location` of its log lines: the site's label (else its first name)
    /// and the location's match.
    pub names: (Arc<str>, Arc<str>),
    /// `redirect_rewrite`, `cookie_path` and `cookie_domain`.
    pub upstream_urls: upstream_urls::UpstreamUrls,
    pub timeouts: timeouts::Timeouts,
    /// `error_pages`: the location's, else its site's.
    pub error_pages: crate::config::ErrorPages,
    /// `intercept_errors`: `error_pages` replace the upstream's answers too.
    pub intercept_errors: bool,
    /// `expires`, on every answer of the location with a safe status.
    pub expires: Option<crate::config::Expires>,
    /// `compress`: which answers are compressed on the fly.
    pub compress: Option<crate::config::Compress>,
    /// `auth`: who may pass beyond `access` (shared with the locations that inherit it).
    pub auth: Option<Arc<auth::Auth>>,
    /// `satisfy`: `"any"` lets an `allow`ed client pass without `auth`.
    pub satisfy: crate::config::Satisfy,
    /// A zone's key reads `$jwt_claim_NAME`: the token is checked before the limits.
    pub check_first: bool,
    /// A text of the location may read `$jwt_claim_NAME`: a verified token's claims go
    /// with the request (else they are not stored, which saves its allocations).
    pub claims_read: bool,
    /// Where its requests are logged: `[log]`'s, else its own or its site's `log`
    /// (`None`: nowhere).
    pub log: Option<Arc<AccessLog>>,
}

impl Location {
    /// Where and how this location forwards a request from `client` (through `peer`).
    fn destination<'a>(
        &'a self,
        group: &'a Arc<Group>,
        conn: &'a Conn,
        (client, peer): (IpAddr, IpAddr),
        rendered: &'a header_rules::Rendered,
    ) -> Destination<'a> {
        Destination {
            group,
            conn,
            client,
            peer,
            max_body: self.client_max_body_size,
            buffering: self.request_buffering,
            headers: &self.headers,
            rendered,
            forwarded: self.forwarded,
            timeouts: self.timeouts,
            received: self.stats.received(conn.worker),
        }
    }

    /// Where `upstream_path` points the request: `None` without one, `Some(None)` when
    /// the rewrite would leave the root.
    fn target(
        &self,
        raw_path: &str,
        query: Option<&str>,
        vars: Option<&vars::Request<'_>>,
    ) -> Option<Option<PathAndQuery>> {
        let rewrite = self.rewrite.as_ref()?;
        Some(rewrite.apply(raw_path, query, vars))
    }

    /// The location regex's captures of `path`, when something here uses them.
    fn captures_of<'p>(&self, path: &'p [u8]) -> Option<regex::bytes::Captures<'p>> {
        self.captures.as_ref()?.captures(path)
    }

    /// The answer when the location refuses the request before limiting it: a declared
    /// body over its limit (413), or its allow/deny list (403, counted on `worker`'s
    /// cells).
    fn refusal(
        &self,
        req: &Request<ClientBody>,
        client: IpAddr,
        worker: usize,
    ) -> Option<Response<ResponseBody>> {
        if let Err(status) = declared_body(self, req) {
            return Some(response::refusal(status, req.version()));
        }
        if self.satisfy == crate::config::Satisfy::Any && self.auth.is_some() {
            return None; // the auth phase asks `access` and `auth` together
        }
        let Err(rule) = self.access.check(client) else {
            return None;
        };
        if let Some(Some(denied)) = self.denied.get(rule) {
            denied.get(worker).add(1);
        }
        Some(response::error(StatusCode::FORBIDDEN))
    }
}

/// What a location does.
pub(crate) enum Route {
    Proxy(Arc<Group>),
    Return(Fixed),
    /// `root` or `alias`; `upstream` is where `try_files … "@upstream"` forwards.
    Files {
        files: files::Files,
        upstream: Option<Arc<Group>>,
    },
}

/// Where a request is forwarded, and for whom.
struct Destination<'a> {
    group: &'a Arc<Group>,
    conn: &'a Conn,
    /// The client (after realip) and the peer it came through.
    client: IpAddr,
    peer: IpAddr,
    max_body: MaxBodySize,
    buffering: RequestBuffering,
    /// The location's header rules and their values for this request: the request
    /// rules are applied once forwarding has read the headers the client sent.
    headers: &'a HeaderRules,
    rendered: &'a header_rules::Rendered,
    forwarded: Forwarded,
    timeouts: timeouts::Timeouts,
    /// The location's count of request body bytes (this worker's).
    received: &'a Arc<std::sync::atomic::AtomicU64>,
}


impl Pipeline {
    /// Handles one request from head to response head. The response body streams on
    /// afterwards; the access-log line is written when it ends (or is abandoned).
    pub(crate) async fn handle(&self, mut req: Request<ClientBody>, conn: &Conn) -> Response<Logged> {
        // The poll's time (`clock`): the arrival, as nginx's cached time is.
        let now = crate::clock::now();
        let peer = access::canonical(conn.peer.ip());
        let client = self.identify(peer, &req);
        let asker = internal::Asker { conn, client, peer };
        let followers = self.followers(&mut req, client, now);
        let mut log = logged::Pending::new(followers, &req, (client, conn), now, &self.unrouted, conn.worker);
        if let Some(answer) = self.screen(&mut req, conn, client, &mut log) {
            return log.finish(answer, None);
        }
        // The path borrows a copy of the target (a reference count), not the request,
        // whose header map a rejection takes over.
        let target = req.uri().clone();
        let (site, location, path) = match self.locate(&target, &req, conn, client, &mut log) {
            Located::Found(site, location, path) => (site, location, path),
            Located::Answered(answer, pages) => return self.refuse(pages, answer, req, &asker, log).await,
        };
        let pages = Some((site, &location.error_pages));
        let arrival = self.arrival(location, &mut req, client, &path, now, conn);
        let mut limited = match &arrival {
            None => Outcome::default(),
            Some(arrival) if location.limits.at_once() => self.limit_at_once(location, arrival),
            Some(arrival) => self.limit(location, arrival).await,
        };
        log.limit(&limited, location.limits.rules(), arrival.as_ref().map(|arrival| &arrival.keys));
        if let Some(arrival) = arrival {
            conn.return_key_buffer(arrival.keys.into_buffer());
        }
        let asked = (&mut req, conn, client, &*path);
        match self.refused(location, &mut limited, asked, &log).await {
            Some(Refused::Unanswered) => return log.unanswered(),
            Some(Refused::Answer(refusal)) => return self.refuse(pages, refusal, req, &asker, log).await,
            None => {}
        }
        if let Some(delay) = limit_response::delay(&limited) {
            // Fixed at arrival; a client that leaves meanwhile drops this future (499).
            tokio::time::sleep_until((now + delay).into()).await;
        }
        if location.auth.is_some() {
            let asked = own::Asked::new(&req, conn, client, &path);
            match self.authenticate(location, &asked, &mut limited, &log).await {
                auth::Verdict::Pass(granted) => granted.apply(&mut req, &mut log),
                auth::Verdict::Refuse(refusal) => {
                    log.refused_by(|| "auth".to_owned());
                    return self.refuse(pages, refusal, req, &asker, log).await;
                }
            }
        }
        let accepted = (location.compress.as_ref())
            .map(|_| compress::Accepted::of(req.method(), req.version(), req.headers()));
        let kept = internal::Kept::of(location, &req);
        let version = req.version();
        let in_flight = &mut limited.in_flight;
        let start = internal::Turn::start(location, req);
        let asking = (path, true);
        let mut turn = match self.resolve(site, start, asking, &asker, &log) {
            Ok(internal::Resolved::Answered(turn)) => turn,
            Ok(internal::Resolved::Forward(forwarding, req)) => {
                let to = forwarding.destination(&asker);
                let (response, lease) = self.proxy(req, &to, in_flight, &mut log).await;
                forwarding.finish(response, lease)
            }
            Err(internal::BadTarget(rendered)) => {
                let pending = std::mem::take(&mut limited.settle);
                let answer = bad_target(location, version, pending, &rendered, conn);
                return log.finish(answer, None);
            }
        };
        let pending = std::mem::take(&mut limited.settle);
        let from_upstream = turn.answered_upstream();
        settle::settle(location, &mut turn.response, pending, from_upstream, conn.worker);
        let in_flight = &mut limited.in_flight;
        if turn.wants_page() {
            // Boxed: the page's future is made only for the answers that get one.
            let paged = self.error_page(site, turn, kept, &asker, in_flight, &mut log);
            turn = Box::pin(paged).await;
        }
        let answering = turn.location;
        self.respond((location, answering), &mut turn, &limited);
        internal::finish_body(answering, &mut turn.response, accepted.as_ref());
        log.ended_at(answering);
        log.hold(limited.in_flight);
        log.finish(turn.response, turn.lease)
    }

    /// The request's location (counted there in `log`), or the answer it gets before any
    /// limit: no site (421) or location (404), a malformed path (400), nginx's
    /// trailing-slash 301, or the location's refusal (`access`, a body too large).
    fn locate<'s, 'p>(
        &'s self,
        target: &'p http::Uri,
        req: &Request<ClientBody>,
        conn: &Conn,
        client: IpAddr,
        log: &mut logged::Pending<'s>,
    ) -> Located<'s, 'p> {
        let (site, location, path, slashless) = match self.route(target, req, conn) {
            Ok(found) => found,
            Err(Unrouted::NotFound(site, path)) => {
                log.site(site);
                let asked = own::Asked::new(req, conn, client, &path);
                let mut answer = response::error(StatusCode::NOT_FOUND);
                own::add(own::Place::site(site), &mut answer, &asked, log);
                return Located::Answered(answer, Some((site, &site.error_pages)));
            }
            Err(Unrouted::Refused(status)) => {
                return Located::Answered(response::refusal(status, req.version()), None)
            }
            Err(Unrouted::ClientCertificate(refusal)) => {
                return Located::Answered(response::client_certificate(refusal, req.version()), None)
            }
        };
        log.route(location);
        if slashless {
            let id = (location.needs_vars).then(|| log.request_id().unwrap_or_else(RequestId::new));
            let answer = slash_redirect::answer(location, req, conn, client, &path, id);
            return Located::Answered(answer, None);
        }
        if let Some(mut refusal) = location.refusal(req, client, conn.worker) {
            log.refused_by(|| match location.access.check(client) {
                Err(rule) => format!("access rule {}: {}", rule + 1, location.access.describe(rule)),
                Ok(()) => format!("the location ({})", refusal.status()),
            });
            let asked = own::Asked::new(req, conn, client, &path);
            own::add(own::Place::location(location), &mut refusal, &asked, log);
            return Located::Answered(refusal, Some((site, &location.error_pages)));
        }
        Located::Found(site, location, path)
    }

    /// The answers given before routing: a refusal of what nginx refuses outright
    /// (`checks`), an http-01 challenge's answer on a plain listener, and `[access] deny`.
    fn screen(
        &self,
        req: &mut Request<ClientBody>,
        conn: &Conn,
        client: IpAddr,
        log: &mut logged::Pending<'_>,
    ) -> Option<Response<ResponseBody>> {
        if let Err(status) = checks::admit(req, self.underscores_in_headers) {
            return Some(response::refusal(status, req.version()));
        }
        if let (Some(acme), false) = (&self.acme, conn.https) {
            if let Some(answer) = acme_challenge::answer(acme, req) {
                return Some(answer);
            }
        }
        if access::listed(client, &self.deny) {
            self.denied.get(conn.worker).add(1);
            log.refused_by(|| "[access] deny".to_owned());
            return Some(response::error(StatusCode::FORBIDDEN));
        }
        None
    }

    /// What every answer gets once its charges are settled: the `response_headers` of
    /// the location that answered (each as its `when` says: a plain one when it was
    /// served there, by the upstream, the `return` or a file, not on a 502 of ours) and
    /// the rate-limit headers of the location whose limits it passed (`first`).
    fn respond(&self, (first, answering): (&Location, &Location), turn: &mut internal::Turn<'_>, limited: &Outcome) {
        let response = &mut turn.response;
        answering.timeouts.mark(response);
        let served_here = matches!(answering.route, Route::Return(_) | Route::Files { .. });
        let source = header_rules::Source::of(turn.lease.is_some(), served_here);
        let status = response.status();
        let headers = response.headers_mut();
        answering
            .headers
            .to_response(headers, &turn.rendered, status, source, false);
        let headers = response.headers_mut();
        limit_response::add_headers(headers, first, limited, self.ratelimit_headers);
    }

    /// Forwards the request: the upstream's response and its connection's lease, or the
    /// answer to the failure.
    async fn proxy(
        &self,
        mut req: Request<ClientBody>,
        to: &Destination<'_>,
        in_flight: &mut Vec<InFlight>,
        log: &mut logged::Pending<'_>,
    ) -> (Response<ResponseBody>, Option<Lease>) {
        let ctx = forward::Ctx {
            client: to.client,
            peer: to.peer,
            peer_trusted: self.is_trusted(to.peer),
            conn: to.conn,
            timeouts: to.timeouts,
            body_buffer: self.client_body_buffer_size,
            max_body: to.max_body,
            spool: (to.buffering == RequestBuffering::On)
                .then_some(self.client_body_temp_path.as_path()),
            forwarded: to.forwarded,
            pass: to.headers.pass(),
            received: to.received,
        };
        let version = req.version();
        let prepared = forward::prepare(&mut req, &ctx);
        // After forwarding read the client's headers: `X-Forwarded-Host` is the host the
        // client sent, whatever a rule sets `Host` to.
        to.headers.to_request(req.headers_mut(), to.rendered);
        let api_keys = self.api_keys.as_ref();
        let priority =
            |headers: &http::HeaderMap| api_keys.map_or(0, |keys| keys.priority(headers));
        match forward::forward(req, to.group, &ctx, prepared, in_flight, priority).await {
            Ok(done) => {
                log.upstream(done.addr, done.response.status(), done.upstream_time, &done.failed);
                (done.response, Some(done.lease))
            }
            Err(forward::Stopped::Shed) => {
                log.shed();
                let wait = to
                    .group
                    .gate
                    .as_ref()
                    .map(|gate| gate.settings().queue_timeout);
                let answer = limit_response::overloaded(&to.group.name, wait.unwrap_or_default());
                (answer, None)
            }
            Err(forward::Stopped::Failed(err, failed)) => {
                log.failed_tries(&failed);
                error::report(&err, to.group);
                forward::record_failure(&err, to.group, to.conn.worker);
                let response = match err.party() {
                    // A broken or stalled body (or one whose file failed) leaves nothing
                    // on the connection that could be read as the next request.
                    error::Party::Client | error::Party::Gateway => {
                        response::refusal(err.status(), version)
                    }
                    error::Party::Upstream => response::error(err.status()),
                };
                (response, None)
            }
        }
    }

    /// The client's address: the peer, or what a trusted proxy says (nginx realip).
    fn identify(&self, peer: IpAddr, req: &Request<ClientBody>) -> IpAddr {
        match &self.real_ip {
            Some(real_ip) => real_ip.client(peer, req.headers()),
            None => peer,
        }
    }

    fn is_trusted(&self, peer: IpAddr) -> bool {
        self.real_ip
            .as_ref()
            .is_some_and(|real_ip| real_ip.trusts(peer))
    }

}

/// The 400 of a request whose path `upstream_path` would take out of the root, settled
/// with the zones (`pending`) and carrying the location's rules for its own answers.
fn bad_target(
    location: &Location,
    version: http::Version,
    pending: Vec<crate::limit::settle::Pending>,
    rendered: &header_rules::Rendered,
    conn: &Conn,
) -> Response<ResponseBody> {
    let mut response = response::refusal(StatusCode::BAD_REQUEST, version);
    settle::settle(location, &mut response, pending, false, conn.worker);
    let (status, headers) = (response.status(), response.headers_mut());
    let own = header_rules::Source::Own;
    location
        .headers
        .to_response(headers, rendered, status, own, false);
    response
}

/// Where [`Pipeline::locate`] got a request: to its location, with its normalized path, or
/// to an answer before any limit.
enum Located<'s, 'p> {
    Found(&'s Site, &'s Location, std::borrow::Cow<'p, [u8]>),
    /// With the error pages that may replace the answer, and their site.
    Answered(Response<ResponseBody>, Option<(&'s Site, &'s crate::config::ErrorPages)>),
}

/// nginx's `client_max_body_size` check, made for every request of the location (a
/// `return` one too) as soon as it is found: a body declared larger (`Content-Length`,
/// HTTP/1.1 or HTTP/2) is answered 413 before a byte of it is read and before any
/// upstream is chosen. A body without a length is held to the limit as it arrives
/// (`wire::body::Timed`).
fn declared_body(location: &Location, req: &Request<ClientBody>) -> Result<(), StatusCode> {
    let declared = http_body::Body::size_hint(req.body()).lower();
    if location.client_max_body_size.exceeded_by(declared) {
        return Err(ProxyError::BodyTooLarge.status());
    }
    Ok(())
}
