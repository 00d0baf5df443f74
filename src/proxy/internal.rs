//! Internal redirects (nginx's `ngx_http_internal_redirect`) and `error_pages`: a request
//! sent on to another URI of its site by `index`, the last item of `try_files`, or an
//! error page, and answered there.
//!
//! The location is chosen again for the new URI and its allow/deny list checked again,
//! but no limit is charged again (nginx's `limit_req` charges a request once). The first
//! location keeps the request's counters, its charges and its log line's `location`; the
//! last one's header rules, `expires` and `compress` go on the answer, as nginx's filters
//! of the location that answers do. At most ten URI changes, then 500, as nginx.

use std::borrow::Cow;
use std::net::IpAddr;

use http::header::{ACCEPT_RANGES, CONNECTION, CONTENT_LENGTH, LAST_MODIFIED, LOCATION, TRANSFER_ENCODING, WWW_AUTHENTICATE};
use http::request::Parts;
use http::uri::PathAndQuery;
use http::{HeaderMap, Method, Request, Response, StatusCode, Uri};

use super::fill::{fill, retarget, Action};
use super::request_id::RequestId;
use super::{compress, files, header_rules, logged, response, upstream_urls, Conn, Location, Logged, Pipeline, Site};
use std::sync::Arc;
use crate::upstream::Group;
use crate::config::files::{ErrorPage, PageStatus, PageTarget};
use crate::config::{ErrorPages, Satisfy};
use crate::limit::outcome::InFlight;
use crate::routing;
use crate::upstream::{Lease, ResponseBody};
use crate::wire::body::ClientBody;

/// nginx's `NGX_HTTP_MAX_URI_CHANGES`: the internal redirects one request may make.
const MAX_URI_CHANGES: u8 = 10;

/// Who asks: the same on every hop.
pub(super) struct Asker<'c> {
    pub conn: &'c Conn,
    /// The client (after realip) and the peer it came through.
    pub client: IpAddr,
    pub peer: IpAddr,
}

/// A request's answer, and the location that made it.
pub(super) struct Turn<'s> {
    pub location: &'s Location,
    pub response: Response<ResponseBody>,
    /// The upstream connection the answer's body streams from.
    pub lease: Option<Lease>,
    /// The answering location's header values for this request.
    pub rendered: header_rules::Rendered,
    /// The request, while it was not forwarded.
    req: Option<Request<ClientBody>>,
    /// Internal redirects made so far.
    changes: u8,
    /// Whether an error page has replaced an answer already (nginx: once per request).
    paged: bool,
}

impl<'s> Turn<'s> {
    /// A request about to be answered at `location`.
    pub(super) fn start(location: &'s Location, req: Request<ClientBody>) -> Turn<'s> {
        Turn {
            location,
            response: Response::new(ResponseBody::Empty),
            lease: None,
            rendered: header_rules::Rendered::default(),
            req: Some(req),
            changes: 0,
            paged: false,
        }
    }

    pub(super) fn answered_upstream(&self) -> bool {
        self.lease.is_some()
    }

    /// Whether its location has an error page for its answer ([`Pipeline::error_page`]).
    /// Asked first, so that the page's future is made only for the answers that get one.
    pub(super) fn wants_page(&self) -> bool {
        let location = self.location;
        !self.paged
            && (!self.answered_upstream() || location.intercept_errors)
            && location.error_pages.get(self.response.status()).is_some()
    }
}

/// The request's head, kept where an error page may be wanted after the request itself
/// went upstream.
pub(super) struct Kept(Box<Parts>);

impl Kept {
    /// A copy of `req`'s head when `location` may replace an upstream's answer by a page.
    pub(super) fn of(location: &Location, req: &Request<ClientBody>) -> Option<Kept> {
        if !location.intercept_errors || location.error_pages.is_empty() {
            return None;
        }
        let mut head = Request::new(());
        *head.method_mut() = req.method().clone();
        *head.uri_mut() = req.uri().clone();
        *head.version_mut() = req.version();
        *head.headers_mut() = req.headers().clone();
        Some(Kept(Box::new(head.into_parts().0)))
    }
}

/// What [`Pipeline::resolve`] came to.
pub(super) enum Resolved<'s> {
    /// A `return`, a file, or a refusal where a redirect led.
    Answered(Turn<'s>),
    /// To forward, at the turn's location, the request.
    Forward(Forwarding<'s>, Request<ClientBody>),
}

/// Where a request is forwarded: the location (and its header values), the group, and
/// the rewriting prepared for the upstream's answer. Only this is kept while the upstream
/// answers (the caller's future holds it across the wait; the answer's [`Turn`] is made
/// after).
pub(super) struct Forwarding<'s> {
    location: &'s Location,
    rendered: header_rules::Rendered,
    group: &'s Arc<Group>,
    urls: upstream_urls::Prepared,
    changes: u8,
    paged: bool,
}

impl<'s> Forwarding<'s> {
    /// Where and how the request goes.
    pub(super) fn destination<'a>(&'a self, asker: &'a Asker<'_>) -> super::Destination<'a> {
        let peers = (asker.client, asker.peer);
        self.location.destination(self.group, asker.conn, peers, &self.rendered)
    }

    /// The turn, answered by the upstream's `response` (its URLs rewritten) or the
    /// failure's answer.
    pub(super) fn finish(self, mut response: Response<ResponseBody>, lease: Option<Lease>) -> Turn<'s> {
        if lease.is_some() {
            self.location.upstream_urls.rewrite(response.headers_mut(), &self.urls);
        }
        Turn {
            location: self.location,
            response,
            lease,
            rendered: self.rendered,
            req: None,
            changes: self.changes,
            paged: self.paged,
        }
    }
}

/// The request's target could not be made from what `upstream_path` gives (a 400), with
/// the location's header values for the answer.
pub(super) struct BadTarget(pub header_rules::Rendered);

impl Pipeline {
    /// Where the request `turn` holds is answered: its location (found for `path`) or
    /// the one internal redirects within `site` lead to, answering itself or forwarding.
    /// Synchronous: only the forward waits, and the caller awaits it in its own future
    /// (a future of its own for this would be moved, all its size, every request).
    /// `first` says whether the request's target is still the client's.
    pub(super) fn resolve<'s>(
        &'s self,
        site: &'s Site,
        mut turn: Turn<'s>,
        (mut path, mut first): (Cow<'_, [u8]>, bool),
        asker: &Asker<'_>,
        log: &logged::Pending<'_>,
    ) -> Result<Resolved<'s>, BadTarget> {
        let Some(mut req) = turn.req.take() else {
            return Ok(Resolved::Answered(turn));
        };
        loop {
            let location = turn.location;
            let id = (location.needs_vars).then(|| log.request_id().unwrap_or_else(RequestId::new));
            let (rendered, urls, action) =
                fill(location, &req, asker.conn, asker.client, (path, first), id);
            turn.rendered = rendered;
            let (next, query) = match action {
                Action::Answer(response) => {
                    turn.response = response;
                    turn.req = Some(req);
                    return Ok(Resolved::Answered(turn));
                }
                Action::Forward(group, target) => {
                    if !retarget(&mut req, target) {
                        return Err(BadTarget(turn.rendered));
                    }
                    let forwarding = Forwarding {
                        location,
                        rendered: turn.rendered,
                        group,
                        urls,
                        changes: turn.changes,
                        paged: turn.paged,
                    };
                    return Ok(Resolved::Forward(forwarding, req));
                }
                Action::Redirect { path, query } => (path, query),
            };
            turn.changes += 1;
            let hopped = match turn.changes > MAX_URI_CHANGES {
                true => Hop::Ends(response::error(StatusCode::INTERNAL_SERVER_ERROR)),
                false => hop((site, Some(turn.location)), &mut req, &next, query.as_deref(), asker),
            };
            match hopped {
                Hop::To(found) => turn.location = found,
                Hop::Ends(answer) => {
                    turn.response = answer;
                    turn.req = Some(req);
                    return Ok(Resolved::Answered(turn));
                }
            }
            (path, first) = (Cow::Owned(next), false);
        }
    }

    /// [`Pipeline::resolve`], then the forward if it comes to one: for error pages.
    async fn answer<'s>(
        &'s self,
        site: &'s Site,
        turn: Turn<'s>,
        asking: (Cow<'_, [u8]>, bool),
        asker: &Asker<'_>,
        in_flight: &mut Vec<InFlight>,
        log: &mut logged::Pending<'_>,
    ) -> Result<Turn<'s>, BadTarget> {
        match self.resolve(site, turn, asking, asker, log)? {
            Resolved::Answered(turn) => Ok(turn),
            Resolved::Forward(forwarding, req) => {
                let to = forwarding.destination(asker);
                let (response, lease) = self.proxy(req, &to, in_flight, log).await;
                Ok(forwarding.finish(response, lease))
            }
        }
    }

    /// A refusal made before the request was let through (its location's allow/deny,
    /// no location, a limit), or the error page `pages` give for its status.
    /// A refusal (a limit's, a failed login's, one before any limit) answered as it is,
    /// or by its page among `pages` (a site's and its own or its location's).
    pub(super) async fn refuse<'s>(
        &'s self,
        pages: Option<(&'s Site, &'s ErrorPages)>,
        refusal: Response<ResponseBody>,
        req: Request<ClientBody>,
        asker: &Asker<'_>,
        log: logged::Pending<'s>,
    ) -> Response<Logged> {
        match paging(pages, &refusal) {
            None => log.finish(refusal, None),
            // Boxed: the page's future is made only for the answers that get one.
            Some(paging) => Box::pin(self.refused_page(paging, refusal, req, asker, log)).await,
        }
    }

    pub(super) async fn refused_page<'s>(
        &'s self,
        (site, pages): (&'s Site, &crate::config::ErrorPages),
        refusal: Response<ResponseBody>,
        req: Request<ClientBody>,
        asker: &Asker<'_>,
        mut log: logged::Pending<'s>,
    ) -> Response<Logged> {
        if pages.get(refusal.status()).is_none() {
            return log.finish(refusal, None);
        }
        let accepted = compress::Accepted::of(req.method(), req.version(), req.headers());
        let failed = Failed {
            pages,
            status: refusal.status(),
            changes: 0,
        };
        let mut in_flight = Vec::new();
        let paged = self.page(site, failed, req, asker, &mut in_flight, &mut log);
        let mut turn = match paged.await {
            Page::None(_) => return log.finish(refusal, None),
            Page::Redirect(answer) => return log.finish(answer, None),
            Page::Answered(turn) => *turn,
        };
        keep_close(&refusal, &mut turn.response);
        keep_challenge(&refusal, &mut turn.response);
        let answering = turn.location;
        self.respond((answering, answering), &mut turn, &crate::limit::outcome::Outcome::default());
        finish_body(answering, &mut turn.response, Some(&accepted));
        log.hold(in_flight);
        log.finish(turn.response, turn.lease)
    }

    /// Replaces `turn`'s answer by its location's error page for its status, if it has
    /// one (for an upstream's answer only with `intercept_errors`), once per request.
    /// `kept` is the request's head when the request itself went upstream.
    pub(super) async fn error_page<'s>(
        &'s self,
        site: &'s Site,
        mut turn: Turn<'s>,
        kept: Option<Kept>,
        asker: &Asker<'_>,
        in_flight: &mut Vec<InFlight>,
        log: &mut logged::Pending<'_>,
    ) -> Turn<'s> {
        let from_upstream = turn.answered_upstream();
        if turn.paged || (from_upstream && !turn.location.intercept_errors) {
            return turn;
        }
        let asked = turn.req.take();
        let Some(req) = asked.or_else(|| kept.map(|Kept(head)| Request::from_parts(*head, ClientBody::Empty))) else {
            return turn;
        };
        let failed = Failed {
            pages: &turn.location.error_pages,
            status: turn.response.status(),
            changes: turn.changes,
        };
        match self.page(site, failed, req, asker, in_flight, log).await {
            Page::None(req) => {
                turn.req = Some(req);
                turn
            }
            Page::Redirect(moved) => {
                (turn.response, turn.lease, turn.paged) = (moved, None, true);
                turn
            }
            Page::Answered(mut page) => {
                keep_close(&turn.response, &mut page.response);
                if from_upstream {
                    keep_challenge(&turn.response, &mut page.response);
                }
                *page
            }
        }
    }

    /// The error page `failed.pages` give an answer with `failed.status`, for `req`.
    pub(super) async fn page<'s>(
        &'s self,
        site: &'s Site,
        failed: Failed<'_>,
        req: Request<ClientBody>,
        asker: &Asker<'_>,
        in_flight: &mut Vec<InFlight>,
        log: &mut logged::Pending<'_>,
    ) -> Page<'s> {
        let Some(page) = failed.pages.get(failed.status) else {
            return Page::None(req);
        };
        let uri = match &page.target {
            PageTarget::Url(url) => {
                let mut moved = response::error(redirect_status(page));
                moved.headers_mut().insert(LOCATION, url.clone());
                return Page::Redirect(moved);
            }
            PageTarget::Uri(uri) => uri,
        };
        let (mut req, path, query) = page_request(req, uri);
        let Some(path) = path else {
            return Page::None(req);
        };
        let location = match hop((site, None), &mut req, &path, query, asker) {
            Hop::To(location) => location,
            Hop::Ends(answer) => return Page::Redirect(answer),
        };
        let paging = Turn {
            location,
            response: Response::new(ResponseBody::Empty),
            lease: None,
            rendered: header_rules::Rendered::default(),
            req: Some(req),
            changes: failed.changes + 1,
            paged: true,
        };
        let asking = (Cow::Owned(path), false);
        let mut turn = match self.answer(site, paging, asking, asker, in_flight, log).await {
            Ok(turn) => turn,
            Err(BadTarget(_)) => {
                return Page::Redirect(response::error(StatusCode::INTERNAL_SERVER_ERROR))
            }
        };
        let response = &mut turn.response;
        match page.status {
            PageStatus::Keep => *response.status_mut() = failed.status,
            PageStatus::Set(set) => *response.status_mut() = set,
            PageStatus::Target => {}
        }
        if !matches!(response.status().as_u16(), 200 | 206 | 304) {
            response.headers_mut().remove(LAST_MODIFIED);
        }
        // Ranges are offered on a 200 only (nginx's range filter).
        if response.status() != StatusCode::OK {
            response.headers_mut().remove(ACCEPT_RANGES);
        }
        Page::Answered(Box::new(turn))
    }
}

/// An answer an error page may replace.
pub(super) struct Failed<'p> {
    pub pages: &'p ErrorPages,
    pub status: StatusCode,
    /// The internal redirects made before it.
    pub changes: u8,
}

/// What [`Pipeline::page`] came to.
pub(super) enum Page<'s> {
    /// No page for the status: the request back.
    None(Request<ClientBody>),
    /// The page is a URL (a redirect), or the request ended before a location answered
    /// it (no location for the page's path, its access refused it): this answer, as it is.
    Redirect(Response<ResponseBody>),
    /// The page's location answered (boxed: pages are the rare path).
    Answered(Box<Turn<'s>>),
}

/// An answer that closes the connection after it (the request's body was not read, or
/// cannot be trusted) still does when a page replaces it.
pub(super) fn keep_close<A, B>(answer: &Response<A>, page: &mut Response<B>) {
    if let Some(close) = answer.headers().get(CONNECTION) {
        page.headers_mut().insert(CONNECTION, close.clone());
    }
}

/// A 401's challenge, kept on the page that replaces it (nginx keeps it): a browser asks
/// for a login only when it sees one.
fn keep_challenge<A, B>(answer: &Response<A>, page: &mut Response<B>) {
    if answer.status() != StatusCode::UNAUTHORIZED {
        return;
    }
    for value in answer.headers().get_all(WWW_AUTHENTICATE) {
        page.headers_mut().append(WWW_AUTHENTICATE, value.clone());
    }
}

/// The site and error pages that replace `answer`, if they have a page for its status
/// (`None`: the answer goes as it is, and no page's future is made).
pub(super) fn paging<'a>(
    pages: Option<(&'a Site, &'a ErrorPages)>,
    answer: &Response<ResponseBody>,
) -> Option<(&'a Site, &'a ErrorPages)> {
    pages.filter(|(_, pages)| pages.get(answer.status()).is_some())
}

/// What the location does to every answer's body and caching headers once the answer
/// is otherwise made: `expires`, then `compress`.
pub(super) fn finish_body(
    location: &Location,
    response: &mut Response<ResponseBody>,
    accepted: Option<&compress::Accepted>,
) {
    if let Some(expires) = location.expires {
        let now = std::time::SystemTime::now();
        files::expires(expires, response.status(), response.headers_mut(), now);
    }
    if let (Some(compress), Some(accepted)) = (&location.compress, accepted) {
        compress::apply(compress, accepted, response);
    }
}

/// The status of an error page that is a URL: a redirect (302 unless `=301`… says).
fn redirect_status(page: &ErrorPage) -> StatusCode {
    match page.status {
        PageStatus::Set(status) if status.is_redirection() => status,
        _ => StatusCode::FOUND,
    }
}

/// The request for an error page at `target` (a path and an optional query): a GET
/// (a HEAD stays one) without a body, with the page's normalized path (`None` when the
/// page's path is malformed) and its query.
fn page_request(
    mut req: Request<ClientBody>,
    target: &str,
) -> (Request<ClientBody>, Option<Vec<u8>>, Option<&str>) {
    let (path, query) = target.split_once('?').map_or((target, None), |(p, q)| (p, Some(q)));
    let path = routing::normalize_path(path).ok().map(Cow::into_owned);
    if req.method() != Method::HEAD {
        *req.method_mut() = Method::GET;
    }
    let headers: &mut HeaderMap = req.headers_mut();
    headers.remove(CONTENT_LENGTH);
    headers.remove(TRANSFER_ENCODING);
    *req.body_mut() = ClientBody::Empty;
    (req, path, query)
}

/// Points `req` at `path` (normalized, so escaped again) and `query`.
fn set_target<B>(req: &mut Request<B>, path: &[u8], query: Option<&str>) -> Option<()> {
    let target = routing::escaped_target(path, "", query);
    let target = PathAndQuery::try_from(target).ok()?;
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = Some(target);
    *req.uri_mut() = Uri::from_parts(parts).ok()?;
    Some(())
}

/// One internal redirect from location `from` (`None` for an error page): `req` pointed
/// at `path` and `query`, and the site's location for it, or the answer that ends the
/// request there (no location: 404; its allow/deny list or body limit refuses: 403, 413;
/// its `auth`: 401).
fn hop<'s>(
    (site, from): (&'s Site, Option<&Location>),
    req: &mut Request<ClientBody>,
    path: &[u8],
    query: Option<&str>,
    asker: &Asker<'_>,
) -> Hop<'s> {
    if set_target(req, path, query).is_none() {
        return Hop::Ends(response::error(StatusCode::INTERNAL_SERVER_ERROR));
    }
    let location = match site.router.route(path) {
        Some(routing::Routed::Location(index) | routing::Routed::AddSlash(index)) => {
            site.locations.get(index)
        }
        None => None,
    };
    let Some(location) = location else {
        return Hop::Ends(response::error(StatusCode::NOT_FOUND));
    };
    let refusal = location.refusal(req, asker.client, asker.conn.worker);
    match refusal.or_else(|| auth_on_hop(from, location, req, asker.client)) {
        Some(refusal) => Hop::Ends(refusal),
        None => Hop::To(location),
    }
}

/// A redirect into a location with another `auth` than the one that let the request in
/// asks that `auth` now, on the worker ([`super::auth::Auth::check_now`]): redirects
/// cannot wait, and one from one `auth` into another is rare. A client that `satisfy =
/// "any"` lets in by address loses the headers an auth service would have given.
fn auth_on_hop(from: Option<&Location>, to: &Location, req: &mut Request<ClientBody>, client: IpAddr) -> Option<Response<ResponseBody>> {
    let auth = to.auth.as_ref()?;
    // The same `auth` let the request in, itself rather than by an `allow` rule.
    let asked = |from: &Location| {
        let same = from.auth.as_ref().is_some_and(|from| Arc::ptr_eq(from, auth));
        same && (from.satisfy == Satisfy::All || !from.access.allows(client))
    };
    if from.is_some_and(asked) {
        return None;
    }
    if to.satisfy == Satisfy::Any && to.access.allows(client) {
        for name in auth.copied() {
            req.headers_mut().remove(name);
        }
        return None;
    }
    auth.check_now(req, to.claims_read, crate::clock::now())
}

/// Where an internal redirect leads.
enum Hop<'s> {
    To(&'s Location),
    /// The answer that ends the request there.
    Ends(Response<ResponseBody>),
}
