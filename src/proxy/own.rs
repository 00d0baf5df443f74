//! What tollgate's own answers in a site or location (403, 404, 413, 429, 503…) get of
//! its `response_headers`: the rules with `when = "always"`, and those with `when =
//! "success"` when the status is one of nginx's list. Nothing is done where no such rule
//! is written; the request's variables are gathered only for a rule that has some.

use std::net::IpAddr;

use http::{Request, Response};

use super::header_rules::{HeaderRules, Source};
use super::logged::Pending;
use super::request_id::RequestId;
use super::{host_of, vars_of, Conn, Location, Site};
use crate::upstream::ResponseBody;
use crate::vars;
use crate::wire::body::ClientBody;

/// The request an answer is for, as far as its header values may read it.
pub(super) struct Asked<'a> {
    pub req: &'a Request<ClientBody>,
    pub conn: &'a Conn,
    pub client: IpAddr,
    /// The normalized path (`$uri`).
    pub path: &'a [u8],
}

impl<'a> Asked<'a> {
    pub(super) fn new(
        req: &'a Request<ClientBody>,
        conn: &'a Conn,
        client: IpAddr,
        path: &'a [u8],
    ) -> Asked<'a> {
        Asked {
            req,
            conn,
            client,
            path,
        }
    }
}

/// Where the answer is given: the rules that apply there, its `$server_name`, and the
/// regex whose captures the values may read.
pub(super) struct Place<'a> {
    rules: &'a HeaderRules,
    server_name: &'a str,
    captures: Option<&'a regex::bytes::Regex>,
}

impl<'a> Place<'a> {
    pub(super) fn location(location: &'a Location) -> Place<'a> {
        Place {
            rules: &location.headers,
            server_name: &location.server_name,
            captures: location.captures.as_ref(),
        }
    }

    pub(super) fn site(site: &'a Site) -> Place<'a> {
        Place {
            rules: &site.headers,
            server_name: &site.server_name,
            captures: None,
        }
    }
}

/// Adds to `response`, an answer of tollgate's own, the rules of `place` that go on it.
pub(super) fn add(
    place: Place<'_>,
    response: &mut Response<ResponseBody>,
    asked: &Asked<'_>,
    log: &Pending<'_>,
) {
    let rules = place.rules;
    if !rules.touches_own() {
        return;
    }
    let rendered = if rules.own_per_request() {
        let id = log.request_id().unwrap_or_else(RequestId::new);
        let captures = place.captures.and_then(|re| re.captures(asked.path));
        let host = host_of(asked.req);
        let view = vars::Request {
            request_id: Some(id.as_str()),
            captures: captures.as_ref(),
            ..vars_of(asked.req, asked.conn, asked.client, asked.path, host, place.server_name)
        };
        rules.render(Some(&view))
    } else {
        Default::default()
    };
    // A rejection written beforehand has the rules without variables in its lines.
    let written = matches!(response.body(), ResponseBody::Rendered(_));
    let status = response.status();
    let headers = response.headers_mut();
    rules.to_response(headers, &rendered, status, Source::Own, written);
}
