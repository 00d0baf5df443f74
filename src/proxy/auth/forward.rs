//! `auth.request` at run time: nginx's `auth_request`, Traefik's ForwardAuth. The auth
//! service is asked ([`subrequest`](super::subrequest)) over pooled connections of a
//! group of its own, and its answer decides:
//!
//! - a 2xx lets the request pass, carrying the service's `copy_headers` (the client's
//!   own headers of those names are removed first, whatever the answer);
//! - a 401, a 403 or a redirect is the client's answer, as the service gave it: its
//!   `WWW-Authenticate`, `Location` and `Set-Cookie` are how logins work (Traefik's way;
//!   nginx gives its own 401 or 403 page and refuses a redirect with a 500);
//! - any other status is a 500, as in nginx;
//! - no answer within `timeout` (waiting for a turn, connecting, the head, the body), a
//!   refused or broken connection, a malformed head or a body over 64 KiB: 503. A
//!   request never passes because the service could not be asked.

use std::sync::Arc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, Uri};
use http_body::Body as _;
use http_body_util::BodyExt;
use tokio::sync::Semaphore;

use super::subrequest::{self, Target};
use crate::config;
use crate::proxy::error::{self, ProxyError};
use crate::proxy::forward::retry::Attempts;
use crate::proxy::own::Asked;
use crate::proxy::response;
use crate::upstream::h1::{self, Exchange};
use crate::upstream::pool::Checkout;
use crate::upstream::{Group, ResponseBody, Server};
use crate::wire::body::RequestBody;

/// The most of a service's answer body read: its login page, not a download.
const MOST_BODY: usize = 64 * 1024;

/// Headers of the service's answer that are not passed to the client: hop-by-hop and
/// framing, and what tollgate writes itself.
const NOT_PASSED: [&str; 10] = [
    "connection",
    "content-length",
    "date",
    "keep-alive",
    "proxy-connection",
    "server",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// A location's `auth.request`, ready to ask.
pub(crate) struct Service {
    settings: Arc<config::ForwardAuth>,
    target: Target,
    group: Arc<Group>,
    /// `max_in_flight` turns; a request waits for one within `timeout`.
    turns: Semaphore,
}

/// What the service's answer means for the request.
pub(super) enum Answer {
    /// A 2xx: the request goes on with these headers, the service's `copy_headers`.
    Pass(Vec<(HeaderName, HeaderValue)>),
    /// The client's answer instead.
    Refuse(Response<ResponseBody>),
}

/// The service's answer, read whole.
struct Reply {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// Why the service gave no usable answer.
enum Failure {
    /// Connecting or the exchange failed on every try.
    Proxy(ProxyError),
    /// The body broke off.
    Body(h1::Error),
    /// The body was larger than [`MOST_BODY`].
    TooLarge,
    /// It switched protocols.
    Upgraded,
}

impl Service {
    /// `settings`, asked through `group` (built from `settings.upstream`).
    pub(crate) fn new(settings: Arc<config::ForwardAuth>, group: Arc<Group>) -> Service {
        let uri = Uri::from(settings.target.clone());
        let target = Target {
            uri,
            host: settings.host.clone(),
        };
        let turns = Semaphore::new(settings.max_in_flight as usize);
        Service {
            settings,
            target,
            group,
            turns,
        }
    }

    pub(crate) fn group(&self) -> &Arc<Group> {
        &self.group
    }

    /// The headers a pass copies from the service's answer (and takes from the client).
    pub(super) fn copied(&self) -> &[HeaderName] {
        &self.settings.copy_headers
    }

    /// Asks the service about `asked`.
    pub(super) async fn ask(&self, asked: &Asked<'_>) -> Answer {
        let exchange = self.exchange(asked, asked.conn.worker);
        match tokio::time::timeout(self.settings.timeout, exchange).await {
            Ok(Ok(reply)) => self.judge(reply),
            Ok(Err(failure)) => {
                self.failed(&failure);
                Answer::Refuse(response::error(StatusCode::SERVICE_UNAVAILABLE))
            }
            Err(_) => {
                self.note("timeout", format_args!("no answer within {:?}", self.settings.timeout));
                Answer::Refuse(response::error(StatusCode::SERVICE_UNAVAILABLE))
            }
        }
    }

    /// Sends the subrequest (again on a fresh connection when a pooled one had been
    /// closed, or to the host's next address when one cannot be reached) and reads the
    /// answer whole.
    async fn exchange(&self, asked: &Asked<'_>, worker: usize) -> Result<Reply, Failure> {
        // The semaphore is never closed.
        let _turn = self.turns.acquire().await.ok();
        let group = &self.group;
        let mut request: Option<Request<RequestBody>> = Some(subrequest::build(&self.target, asked));
        let mut attempts = Attempts::new(true);
        for _ in 0..group.servers.len() + 2 {
            let Some(server) = attempts.next_server(group, asked.client, crate::clock::now()) else {
                break;
            };
            let checkout = attempts.checkout(group, server, worker, group.connect_timeout).await;
            let Some(Checkout { conn, pooled }) = checkout else {
                continue;
            };
            let Some(sent) = request.take() else {
                break;
            };
            match conn.send_with(sent, &[], group.read_timeout, None).await {
                Ok(Exchange::Response(answer)) => return read(answer, &group.servers[server], worker).await,
                Ok(Exchange::Upgraded(..)) => return Err(Failure::Upgraded),
                Err(err) => match attempts.failed(err, group, server, pooled) {
                    Ok(again) => request = Some(again),
                    Err(err) => return Err(Failure::Proxy(err)),
                },
            }
        }
        Err(Failure::Proxy(attempts.give_up(group)))
    }

    /// What the service's answer means for the request.
    fn judge(&self, reply: Reply) -> Answer {
        let status = reply.status;
        if status.is_success() {
            let copied = self.settings.copy_headers.iter().flat_map(|name| {
                let values = reply.headers.get_all(name).iter();
                values.map(move |value| (name.clone(), value.clone()))
            });
            return Answer::Pass(copied.collect());
        }
        if status == StatusCode::UNAUTHORIZED || status == StatusCode::FORBIDDEN || status.is_redirection() {
            return Answer::Refuse(passed_on(reply));
        }
        self.note("status", format_args!("unexpected status {status}: only 2xx, 401, 403 and redirects are answers"));
        Answer::Refuse(response::error(StatusCode::INTERNAL_SERVER_ERROR))
    }

    fn failed(&self, failure: &Failure) {
        match failure {
            Failure::Proxy(err) => error::report(err, &self.group),
            Failure::Body(err) => self.note("body", format_args!("its answer broke off: {err}")),
            Failure::TooLarge => self.note("body", format_args!("its answer's body is larger than {MOST_BODY} bytes")),
            Failure::Upgraded => self.note("status", format_args!("it switched protocols (101)")),
        }
    }

    /// One error-log line about the service, thinned as upstream failures are.
    fn note(&self, kind: &'static str, what: std::fmt::Arguments<'_>) {
        let Some(left_out) = self.group.log.admit(kind, Instant::now()) else {
            return;
        };
        let url = &self.settings.url;
        match left_out {
            0 => tracing::warn!(auth = %url, kind, "auth service: {what}"),
            n => tracing::warn!(auth = %url, kind, "auth service: {what} (and {n} more like it since the last report)"),
        }
    }
}

/// The answer's body, at most [`MOST_BODY`]; the connection goes back to its pool once
/// it is read whole.
async fn read(answer: Response<h1::Body>, server: &Server, worker: usize) -> Result<Reply, Failure> {
    let (parts, mut body) = answer.into_parts();
    if body.size_hint().lower() > MOST_BODY as u64 {
        return Err(Failure::TooLarge);
    }
    let mut bytes = BytesMut::new();
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.map_err(Failure::Body)?.into_data() else {
            continue;
        };
        if bytes.len() + data.len() > MOST_BODY {
            return Err(Failure::TooLarge);
        }
        bytes.extend_from_slice(&data);
    }
    if let Some(conn) = body.take_reusable() {
        server.pool.put(worker, conn);
    }
    Ok(Reply {
        status: parts.status,
        headers: parts.headers,
        body: bytes.freeze(),
    })
}

/// The service's answer as the client's: its status, end-to-end headers and body.
fn passed_on(reply: Reply) -> Response<ResponseBody> {
    // The headers its `Connection` names were for the hop to tollgate alone.
    let connection = reply.headers.get_all(http::header::CONNECTION);
    let named: Vec<Vec<u8>> = connection
        .iter()
        .flat_map(|line| crate::wire::h1::tokens(line.as_bytes()).map(<[u8]>::to_ascii_lowercase))
        .collect();
    let mut answer = Response::new(ResponseBody::full(reply.body));
    *answer.status_mut() = reply.status;
    let headers = answer.headers_mut();
    let mut last: Option<HeaderName> = None;
    for (name, value) in reply.headers {
        if let Some(name) = name {
            last = Some(name);
        }
        let Some(name) = &last else { continue };
        let hop = NOT_PASSED.contains(&name.as_str()) || named.iter().any(|n| n == name.as_str().as_bytes());
        if !hop {
            headers.append(name.clone(), value);
        }
    }
    answer
}
