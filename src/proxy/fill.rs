//! Filling in a location's texts from the request's variables ([`fill`]): its header
//! values, the rewriting of its upstream's URLs, and its `return` or upstream path; and
//! the request as variables see it ([`vars_of`], [`host_of`]).

use std::net::IpAddr;
use std::sync::Arc;

use http::uri::{PathAndQuery, Uri};
use http::{Request, Response, StatusCode};

use super::request_id::RequestId;
use super::files::{self, Served};
use super::{header_rules, response, upstream_urls, Conn, Location, Route};
use crate::upstream::{Group, ResponseBody};
use crate::vars;
use crate::wire::body::ClientBody;

/// What the location does with the request once its variables are filled in.
pub(super) enum Action<'l> {
    /// Its `return`, made, or its file's answer.
    Answer(Response<ResponseBody>),
    /// Forward to the group, at the path `upstream_path` makes (see [`Location::target`]).
    Forward(&'l Arc<Group>, Option<Option<PathAndQuery>>),
    /// Its files sent the request to another URI of the site (`index`, `try_files`).
    Redirect { path: Vec<u8>, query: Option<String> },
}

/// Fills in the location's texts: its header values, what its upstream's answer is
/// rewritten with, and its answer or upstream path. Everything that reads the variables
/// happens here, so none of it (nor `path`) stays alive in the request's future across
/// the wait for the upstream. `first`: the request's target is still the one the client
/// sent (no internal redirect yet).
pub(super) fn fill<'l>(
    location: &'l Location,
    req: &Request<ClientBody>,
    conn: &Conn,
    client: IpAddr,
    (path, first): (std::borrow::Cow<'_, [u8]>, bool),
    id: Option<RequestId>,
) -> (header_rules::Rendered, upstream_urls::Prepared, Action<'l>) {
    let captures = location.captures_of(&path);
    let vars = (id.as_ref()).map(|id| vars::Request {
        request_id: Some(id.as_str()),
        captures: captures.as_ref(),
        ..vars_of(req, conn, client, &path, host_of(req), &location.server_name)
    });
    let rendered = location.headers.render(vars.as_ref());
    let urls = location.upstream_urls.prepare(
        vars.as_ref(),
        conn.https,
        host_of(req),
        &location.server_name,
        conn.server_port,
    );
    let forward = |group| {
        let target = location.target(req.uri().path(), req.uri().query(), vars.as_ref());
        Action::Forward(group, target)
    };
    let action = match &location.route {
        Route::Return(fixed) => Action::Answer(fixed.respond(vars.as_ref())),
        Route::Proxy(group) => forward(group),
        Route::Files { files, upstream } => {
            // `try_files` items read `$uri` and the like even where nothing else does.
            let vars = vars.unwrap_or_else(|| vars::Request {
                captures: captures.as_ref(),
                ..vars_of(req, conn, client, &path, host_of(req), &location.server_name)
            });
            let ask = files::Ask {
                method: req.method(),
                version: req.version(),
                headers: req.headers(),
                path: &path,
                sent: first.then(|| req.uri().path()),
                query: req.uri().query(),
                compress: location.compress.as_ref(),
                vars: &vars,
            };
            match (files::serve(files, &ask), upstream) {
                (Served::Answer(answer), _) => Action::Answer(answer),
                (Served::Redirect { path, query }, _) => Action::Redirect { path, query },
                (Served::Upstream, Some(group)) => forward(group),
                // The configuration pairs `"@upstream"` with an upstream.
                (Served::Upstream, None) => {
                    Action::Answer(response::error(StatusCode::INTERNAL_SERVER_ERROR))
                }
            }
        }
    };
    (rendered, urls, action)
}

/// Points the request at the rewritten path and query; `false` when the rewrite would
/// leave the root (a 400).
pub(super) fn retarget<B>(req: &mut Request<B>, target: Option<Option<PathAndQuery>>) -> bool {
    let Some(target) = target else {
        return true;
    };
    let Some(target) = target else {
        return false;
    };
    let mut parts = req.uri().clone().into_parts();
    parts.path_and_query = Some(target);
    match Uri::from_parts(parts) {
        Ok(uri) => {
            *req.uri_mut() = uri;
            true
        }
        Err(_) => false,
    }
}

/// What the request says, for filling in variables (the limit phase's keys and the
/// answer's texts): `path` is the normalized path, `host` the host sent ([`host_of`]) when
/// the texts read it, `server_name` its site's. No id and no captures: the answer adds
/// its own.
pub(super) fn vars_of<'a, B>(
    req: &'a Request<B>,
    conn: &'a Conn,
    client: IpAddr,
    path: &'a [u8],
    host: Option<&'a str>,
    server_name: &'a str,
) -> vars::Request<'a> {
    vars::Request {
        https: conn.https,
        method: req.method(),
        host,
        server_name,
        server_port: conn.server_port,
        request_uri: req.uri().path_and_query().map_or("/", |pq| pq.as_str()),
        uri: path,
        args: req.uri().query(),
        remote_addr: client,
        remote_port: conn.peer.port(),
        request_id: None,
        headers: req.headers(),
        captures: None,
        // Put there by `auth.jwt` once the token is verified.
        claims: req.extensions().get::<std::sync::Arc<vars::Claims>>().map(|claims| &**claims),
        tls: conn.tls.as_deref().map(|peer| &peer.vars),
    }
}

/// The request's host as sent: the absolute-form target's authority (an HTTP/2
/// `:authority`), else the `Host` header.
pub(super) fn host_of<B>(req: &Request<B>) -> Option<&str> {
    req.uri()
        .authority()
        .map(|a| a.as_str())
        .or_else(|| req.headers().get(http::header::HOST)?.to_str().ok())
}
