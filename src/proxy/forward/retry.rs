//! Which server a request tries next, and whether it may try again at all.
//!
//! Retry rule: a request goes to the next server when no byte of it reached the
//! failed one (the connect failed), or when it can be sent again unchanged (an
//! idempotent method with no body or a body read whole, in memory or in its file,
//! which `forward` puts back before each try; a streamed body cannot be replayed). A kept-alive
//! connection that the server had already closed gets one more try on a fresh
//! connection to the same server, without counting against the server's health.

use std::net::IpAddr;
use std::time::{Duration, Instant};

use http::Request;

use crate::metrics::FailureKind;
use crate::proxy::error::ProxyError;
use crate::upstream::h1::{self, ConnectError, SendError};
use crate::upstream::pool::{self, Checkout};
use crate::upstream::Group;
use crate::wire::body::RequestBody;

/// Where the tries of one request over its group's servers stand.
pub(in crate::proxy) struct Attempts {
    /// The request can go again after it was (partly) sent: idempotent, and no body
    /// that streamed (a body read whole is sent again whole).
    replayable: bool,
    /// The servers tried so far, a bit each (see [`Group::pick`]).
    tried: u64,
    /// The one free retry after a stale kept-alive connection (same server, new
    /// connection) is still to be had; until it is used, pooled connections are taken.
    fresh_retry: bool,
    /// The server that free retry goes to, on the next try.
    fresh_on: Option<usize>,
    /// Why the last try failed, the answer when no try is left.
    last_error: Option<ProxyError>,
    /// Each try that failed, in order (for the request's trace); empty, and no
    /// allocation, when the first try answers.
    failures: Vec<Failed>,
}

/// A try that failed: the server, why, and when.
pub(crate) struct Failed {
    pub server: std::net::SocketAddr,
    /// `connect`, `connect timeout`, `tls`, `timeout`, `closed`, `broken` or `oversized head`.
    pub reason: &'static str,
    pub at: Instant,
}

impl Attempts {
    pub(in crate::proxy) fn new(replayable: bool) -> Attempts {
        Attempts {
            replayable,
            tried: 0,
            fresh_retry: true,
            fresh_on: None,
            last_error: None,
            failures: Vec::new(),
        }
    }

    /// The tries that failed, for the one that answered (or the failure) to report.
    pub(in crate::proxy) fn take_failures(&mut self) -> Vec<Failed> {
        std::mem::take(&mut self.failures)
    }

    fn note(&mut self, group: &Group, server: usize, reason: &'static str) {
        let server = group.servers[server].addr;
        self.failures.push(Failed { server, reason, at: crate::clock::now() });
    }

    /// The server to try next: the same one again for the free retry, else the
    /// group's pick among those not tried yet. `None` when none is left.
    pub(in crate::proxy) fn next_server(
        &mut self,
        group: &Group,
        client: IpAddr,
        now: Instant,
    ) -> Option<usize> {
        let server = match self.fresh_on.take() {
            Some(server) => server,
            None => group.pick(client, self.tried, now)?,
        };
        self.tried |= bit(server);
        Some(server)
    }

    /// A connection to `server`: a pooled one unless the free retry has been used (a
    /// new one within `connect_timeout`).
    /// `None` when connecting failed, which counts against the server; no byte of the
    /// request was sent, so it goes on to the next try.
    pub(in crate::proxy) async fn checkout(
        &mut self,
        group: &Group,
        server: usize,
        worker: usize,
        connect_timeout: Duration,
    ) -> Option<Checkout> {
        let reuse = self.fresh_retry;
        match pool::checkout(group, server, worker, reuse, connect_timeout).await {
            Ok(checkout) => Some(checkout),
            Err(err) => {
                let (kind, reason) = match err {
                    ConnectError::Timeout { .. } => (FailureKind::ConnectTimeout, "connect timeout"),
                    ConnectError::Io { .. } => (FailureKind::Connect, "connect"),
                    ConnectError::Tls { .. } => (FailureKind::Tls, "tls"),
                };
                group.servers[server].failed(kind);
                self.note(group, server, reason);
                self.last_error = Some(ProxyError::from(err));
                None
            }
        }
    }

    /// After sending on `server` failed (on a `pooled` connection or a new one): the
    /// request to send on the next try, or the error to answer with now.
    pub(in crate::proxy) fn failed(
        &mut self,
        err: SendError,
        group: &Group,
        server: usize,
        pooled: bool,
    ) -> Result<Request<RequestBody>, ProxyError> {
        let srv = &group.servers[server];
        match err {
            SendError::ClientBody(err) => Err(ProxyError::client_body(err)),
            SendError::Timeout(request) => {
                srv.failed(FailureKind::Timeout);
                self.note(group, server, "timeout");
                self.again(request, ProxyError::Timeout(srv.addr))
            }
            SendError::Unsent(request, err) => {
                // Nothing was written: the request goes on unchanged.
                let err = h1::Error::Io(err);
                if !(pooled && self.retry_fresh(server)) {
                    srv.failed(failure_kind(&err));
                }
                self.note(group, server, "closed");
                self.last_error = Some(ProxyError::Upstream {
                    addr: srv.addr,
                    source: err,
                });
                Ok(request)
            }
            SendError::Failed(err @ (h1::Error::HeadTooLarge | h1::Error::TooManyHeaders), _) => {
                // The server answered, over our limits: a 502 for this request alone,
                // neither a mark against the server nor a try elsewhere.
                srv.failed(FailureKind::OversizedHead);
                self.note(group, server, "oversized head");
                Err(ProxyError::Upstream {
                    addr: srv.addr,
                    source: err,
                })
            }
            SendError::Failed(err, request) => {
                // A kept-alive connection closed before any answer: the server had
                // dropped it while it sat in the pool.
                let stale = pooled && matches!(err, h1::Error::Closed);
                if !(stale && self.replayable && self.retry_fresh(server)) {
                    srv.failed(failure_kind(&err));
                }
                self.note(group, server, if stale { "closed" } else { "broken" });
                let err = ProxyError::Upstream {
                    addr: srv.addr,
                    source: err,
                };
                self.again(request, err)
            }
        }
    }

    /// No try is left: the last failure, or "no live upstreams" when no server could
    /// be tried at all.
    pub(in crate::proxy) fn give_up(self, group: &Group) -> ProxyError {
        self.last_error.unwrap_or_else(|| {
            group.stats.no_live.add(1);
            ProxyError::NoLiveUpstream(group.name.clone())
        })
    }

    /// No try is left: the answer to the failure, with the tries that failed.
    pub(in crate::proxy) fn stopped(mut self, group: &Group) -> super::Stopped {
        let failed = self.take_failures();
        super::Stopped::Failed(self.give_up(group), failed)
    }

    /// A request that was (partly) sent goes on only if it can be sent again
    /// unchanged; otherwise `err` is the answer.
    fn again(
        &mut self,
        request: Request<RequestBody>,
        err: ProxyError,
    ) -> Result<Request<RequestBody>, ProxyError> {
        if !self.replayable {
            return Err(err);
        }
        self.last_error = Some(err);
        Ok(request)
    }

    /// Takes the free retry on `server` if it is still to be had.
    fn retry_fresh(&mut self, server: usize) -> bool {
        if !self.fresh_retry {
            return false;
        }
        self.fresh_retry = false;
        self.fresh_on = Some(server);
        true
    }
}

fn bit(server: usize) -> u64 {
    if server < 64 {
        1 << server
    } else {
        0
    }
}

/// How a broken exchange is counted: `tls` when TLS itself failed under it.
fn failure_kind(err: &h1::Error) -> FailureKind {
    if err.is_tls() {
        FailureKind::Tls
    } else {
        FailureKind::Broken
    }
}
