//! nginx's trailing-slash 301 (`routing/slash.rs` decides when): the answer to a request
//! for a proxying location's path without its final `/`.
//!
//! nginx gives it where it finds the location, before its rewrite, access and limit
//! phases: only `client_max_body_size` is checked first (413 for a declared body over
//! it). Its `Location` is the slashed path with the query as sent, made absolute as
//! nginx's `absolute_redirect` does (the request's scheme, host and port), and the
//! location's `response_headers` are set on it, as nginx's `add_header` is on a 301.
//! The body is tollgate's own short text, not nginx's HTML page.

use std::net::IpAddr;

use http::header::LOCATION;
use http::{HeaderValue, Request, Response, StatusCode};

use super::header_rules::Source;
use super::request_id::RequestId;
use super::{declared_body, host_of, response, upstream_urls, vars_of, Conn, Location};
use crate::routing;
use crate::upstream::ResponseBody;
use crate::vars;
use crate::wire::body::ClientBody;

/// The 301 (or the 413 that comes first); `path` is the normalized path, `id` the
/// request's id when the location's header values need variables.
pub(super) fn answer(
    location: &Location,
    req: &Request<ClientBody>,
    conn: &Conn,
    client: IpAddr,
    path: &[u8],
    id: Option<RequestId>,
) -> Response<ResponseBody> {
    if let Err(status) = declared_body(location, req) {
        return response::refusal(status, req.version());
    }
    let host = host_of(req);
    let mut target = upstream_urls::origin(conn.https, host, &location.server_name, conn.server_port);
    target.push_str(&routing::slashed_target(path, req.uri().query()));
    let mut answer = response::error(StatusCode::MOVED_PERMANENTLY);
    let headers = answer.headers_mut();
    if let Ok(target) = HeaderValue::from_str(&target) {
        headers.insert(LOCATION, target);
    }
    let vars = (id.as_ref()).map(|id| vars::Request {
        request_id: Some(id.as_str()),
        ..vars_of(req, conn, client, path, host, &location.server_name)
    });
    let rendered = location.headers.render(vars.as_ref());
    // An implicit `return 301`: every rule as on a `return` (nginx's add_header puts its
    // headers on this redirect too, 301 being one of its success statuses).
    location
        .headers
        .to_response(headers, &rendered, StatusCode::MOVED_PERMANENTLY, Source::Return, false);
    answer
}
