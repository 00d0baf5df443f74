//! The request pipeline (DESIGN §3): identify, route, forward or answer, respond, log.
//! Each phase is a small function that either goes on or finishes the response.

pub mod error;
mod forward;
pub mod headers;
mod logged;
pub mod response;
mod tunnel;

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response, StatusCode};
use hyper::body::Incoming;

use crate::access;
use crate::log::AccessLog;
use crate::routing::{self, Router};
use crate::upstream::Group;

pub use error::ProxyError;
pub use logged::Logged;
pub use response::Fixed;

/// Everything the pipeline needs, built once per configuration by the snapshot.
pub struct Pipeline {
    pub router: Router,
    /// Indexed by the router's location index.
    pub locations: Vec<Route>,
    pub real_ip: Option<RealIp>,
    pub client_body_timeout: Duration,
    pub access_log: Option<Arc<AccessLog>>,
}

/// What a location does.
pub enum Route {
    Proxy(Arc<Group>),
    Return(Fixed),
}

/// `[real_ip]`, ready to use.
pub struct RealIp {
    pub trusted: Vec<ipnet::IpNet>,
    pub header: http::HeaderName,
    pub recursive: bool,
}

/// The connection a request arrived on.
#[derive(Clone, Debug)]
pub struct Conn {
    pub peer: SocketAddr,
    /// Index of the worker thread serving it (selects the upstream idle pools).
    pub worker: usize,
    pub https: bool,
    /// The peer's address as a header value, made once per connection.
    pub peer_value: http::HeaderValue,
}

impl Conn {
    pub fn new(peer: SocketAddr, worker: usize, https: bool) -> Conn {
        Conn {
            peer,
            worker,
            https,
            peer_value: headers::ip_value(access::canonical(peer.ip())),
        }
    }
}

impl Pipeline {
    /// Handles one request from head to response head. The response body streams on
    /// afterwards; the access-log line is written when it ends (or is abandoned).
    pub async fn handle(&self, mut req: Request<Incoming>, conn: &Conn) -> Response<Logged> {
        let peer = access::canonical(conn.peer.ip());
        let client = self.identify(peer, &req);
        let mut log = logged::Pending::new(self.access_log.clone(), &req, client);
        let response = match self.route(&req) {
            Err(status) => response::error(status),
            Ok(Route::Return(fixed)) => fixed.respond(),
            Ok(Route::Proxy(group)) => {
                let ctx = forward::Ctx {
                    client,
                    peer,
                    peer_trusted: self.is_trusted(peer),
                    conn,
                    client_body_timeout: self.client_body_timeout,
                };
                let prepared = forward::prepare(&mut req, &ctx);
                match forward::forward(req, group, &ctx, prepared).await {
                    Ok(done) => {
                        log.upstream(done.addr, done.upstream_time);
                        return log.finish(done.response, Some(done.lease));
                    }
                    Err(err) => {
                        report(&err, group);
                        response::error(err.status())
                    }
                }
            }
        };
        log.finish(response, None)
    }

    /// The client's address: the peer, or what a trusted proxy says (nginx realip).
    fn identify(&self, peer: IpAddr, req: &Request<Incoming>) -> IpAddr {
        match &self.real_ip {
            Some(rip) => access::real_client(
                peer,
                req.headers(),
                &rip.trusted,
                &rip.header,
                rip.recursive,
            ),
            None => peer,
        }
    }

    fn is_trusted(&self, peer: IpAddr) -> bool {
        self.real_ip
            .as_ref()
            .is_some_and(|rip| access::is_trusted(peer, &rip.trusted))
    }

    /// The location for this request, or the 400/404 that ends it.
    fn route(&self, req: &Request<Incoming>) -> Result<&Route, StatusCode> {
        check_host(req)?;
        let path =
            routing::normalize_path(req.uri().path()).map_err(|_| StatusCode::BAD_REQUEST)?;
        self.router
            .find(&path)
            .and_then(|index| self.locations.get(index))
            .ok_or(StatusCode::NOT_FOUND)
    }
}

/// HTTP/1.1 requires exactly one `Host` (RFC 9112 §3.2); nginx answers 400 to a
/// request without one or with two, and so does tollgate (a second `Host` is a classic
/// way to make two servers disagree about the target).
fn check_host<B>(req: &Request<B>) -> Result<(), StatusCode> {
    let mut hosts = req.headers().get_all(http::header::HOST).iter();
    let first = hosts.next();
    if hosts.next().is_some() {
        return Err(StatusCode::BAD_REQUEST);
    }
    if first.is_none() && req.version() == http::Version::HTTP_11 && req.uri().authority().is_none()
    {
        return Err(StatusCode::BAD_REQUEST);
    }
    Ok(())
}

/// One error-log line per failed request, at a level that matches who failed.
fn report(err: &ProxyError, group: &Group) {
    match err.party() {
        error::Party::Client => tracing::info!(upstream = %group.name, "{err}"),
        error::Party::Upstream => tracing::warn!(upstream = %group.name, "{err}"),
    }
}
