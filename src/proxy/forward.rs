//! Forwarding one request to its upstream group (docs/architecture.md): rewrite the head, pick a
//! server, send, retry when that is safe (the rules in [`retry`]), and hand the streaming
//! response back.

pub(super) mod retry;

use std::net::{IpAddr, SocketAddr};
use std::sync::atomic::AtomicU64;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::wire::body::ClientBody;
use http::header::{CONTENT_LENGTH, COOKIE, EXPECT, HOST};
use http::uri::{PathAndQuery, Uri};
use http::{HeaderMap, HeaderValue, Request, Response, Version};
use http_body::Body;

use super::error::ProxyError;
use super::{headers, tunnel, Conn};
use crate::config::{Forwarded, MaxBodySize, Passed};
use crate::limit::outcome::InFlight;
use crate::metrics::load::Failure;
use crate::upstream::h1::{ConnectError, Exchange};
use crate::upstream::pool::Checkout;
use crate::upstream::{ActiveRequest, Group, Lease, ResponseBody};
use super::timeouts::Timeouts;
use crate::wire::body::{Progress, RequestBody, Timed};
use retry::Attempts;

/// What the forwarder knows about the request's origin.
pub(super) struct Ctx<'a> {
    pub client: IpAddr,
    pub peer: IpAddr,
    pub peer_trusted: bool,
    pub conn: &'a Conn,
    /// The location's: its `client_body_timeout`, and towards the upstream.
    pub timeouts: Timeouts,
    /// Bodies up to this size are read whole into memory before an upstream is chosen.
    pub body_buffer: usize,
    /// The location's `client_max_body_size`: a body growing past it is cut off.
    pub max_body: MaxBodySize,
    /// With `request_buffering` on: where a body larger than `body_buffer` is read
    /// whole into a file before an upstream is chosen. `None`: it streams.
    pub spool: Option<&'a std::path::Path>,
    /// The location's `forwarded_headers`.
    pub forwarded: Forwarded,
    /// The location's `pass_headers`.
    pub pass: Passed,
    /// The location's count of request body bytes (this worker's).
    pub received: &'a Arc<AtomicU64>,
}

/// A response head from upstream, ready for the client.
pub(super) struct Done {
    pub response: Response<ResponseBody>,
    pub addr: SocketAddr,
    pub upstream_time: Duration,
    pub lease: Lease,
    /// The tries that failed before (for the request's trace).
    pub failed: Vec<retry::Failed>,
}

/// Rewrites the request head for the upstream in place: hop-by-hop headers out,
/// origin-form URI, HTTP/1.1 with a `Host`, and no framing headers of the client's
/// (the upstream client writes its own from the body).
pub(super) fn prepare<B>(req: &mut Request<B>, ctx: &Ctx<'_>) -> Prepared {
    let present = headers::Present::of(req.headers());
    let sent_host = req.headers().get(HOST).cloned();
    let host = sent_host.clone().or_else(|| authority(req.uri()));
    let fwd = headers::Forwarding {
        client: ctx.client,
        peer: ctx.peer,
        peer_trusted: ctx.peer_trusted,
        https: ctx.conn.https,
        host: host.as_ref(),
        client_value: (ctx.client == ctx.peer).then_some(&ctx.conn.peer_value),
        set: ctx.forwarded,
    };
    let version = req.version();
    let upgrade = headers::is_websocket_handshake(req.method(), version, req.headers(), present);
    let added = headers::for_upstream(req.headers_mut(), present, &fwd, upgrade);
    let headers = req.headers_mut();
    if present.has_content_length() {
        headers.remove(CONTENT_LENGTH);
    }
    // Tollgate streams the body itself; an interim 100 is the client side's business.
    if present.has_expect() {
        headers.remove(EXPECT);
    }
    // `Host` is never stripped (hop_by_hop keeps it), so a sent one is still there.
    if let (None, Some(host)) = (sent_host, host) {
        headers.insert(HOST, host);
    }
    if version == Version::HTTP_2 {
        join_cookies(headers);
    }
    if req.uri().scheme().is_some() || req.uri().authority().is_some() {
        let path = req
            .uri()
            .path_and_query()
            .cloned()
            .unwrap_or_else(|| PathAndQuery::from_static("/"));
        *req.uri_mut() = Uri::from(path);
    }
    *req.version_mut() = Version::HTTP_11;
    Prepared {
        websocket: upgrade,
        added,
    }
}

/// What [`prepare`] found out about the request.
pub(super) struct Prepared {
    /// A WebSocket handshake: the one upgrade carried through.
    pub websocket: bool,
    /// The forwarding headers to send after the request's own.
    pub added: headers::Added,
}

fn authority(uri: &Uri) -> Option<HeaderValue> {
    uri.authority()
        .and_then(|a| HeaderValue::from_str(a.as_str()).ok())
}

/// HTTP/2 may split `Cookie` into one field per cookie; HTTP/1.1 wants one line
/// joined with "; " (RFC 9113 §8.2.3).
fn join_cookies(headers: &mut HeaderMap) {
    if headers.get_all(COOKIE).iter().nth(1).is_none() {
        return;
    }
    let mut joined = Vec::new();
    for value in headers.get_all(COOKIE) {
        if !joined.is_empty() {
            joined.extend_from_slice(b"; ");
        }
        joined.extend_from_slice(value.as_bytes());
    }
    if let Ok(value) = HeaderValue::from_bytes(&joined) {
        headers.insert(COOKIE, value);
    }
}

/// Why [`forward`] answered nothing from upstream.
pub(super) enum Stopped {
    /// The group's gate shed the request (the caller answers 503).
    Shed,
    /// The answer to the failure, and the tries that failed (for the request's trace).
    Failed(ProxyError, Vec<retry::Failed>),
}

impl From<ProxyError> for Stopped {
    fn from(err: ProxyError) -> Stopped {
        Stopped::Failed(err, Vec::new())
    }
}

/// Sends an already [`prepare`]d request to a server of `group`, and to the next
/// one while the [`retry`] rules allow. The client's body is read ahead first (all of a
/// small one; all of a larger one too with `request_buffering` on, into a file; else its
/// first `client_body_buffer_size`, and the rest streams), and only then is a slot of the
/// group's gate taken, so that a slow upload read whole holds none; `priority` (of the
/// request's headers) is asked only if it has to wait. Kept in one function (one future)
/// on purpose: splitting it moved the request between futures, 0.7k instructions of
/// copying per request (benches/callgrind.sh).
pub(super) async fn forward(
    mut req: Request<ClientBody>,
    group: &Arc<Group>,
    ctx: &Ctx<'_>,
    prepared: Prepared,
    held: &mut Vec<InFlight>,
    priority: impl FnOnce(&HeaderMap) -> u8,
) -> Result<Done, Stopped> {
    let upgrade = prepared.websocket;
    let client_upgrade = upgrade.then(|| take_upgrade(&mut req)).flatten();
    let (parts, body) = req.into_parts();
    let (body, progress) = upstream_body(body, ctx).await?;
    let permit = match &group.gate {
        Some(gate) => Some(
            gate.admit(|| priority(&parts.headers))
                .await
                .map_err(|_| Stopped::Shed)?,
        ),
        None => None,
    };
    // A body read whole goes again whole with a retry: a copy of it (its bytes' or its
    // file's handle) is kept, as sending takes it out of the request.
    let whole_body = body.replay();
    // Can go again after it was (partly) sent: idempotent, and no streamed body.
    let streamed = matches!(body, RequestBody::Client(_));
    let replayable = !streamed && parts.method.is_idempotent() && !upgrade;
    let mut unsent = Some(Request::from_parts(parts, body));
    let mut attempts = Attempts::new(replayable);
    for _ in 0..group.servers.len() + 2 {
        // The poll's time (`clock`), one per try: health looks at it on slow paths only.
        let now = crate::clock::now();
        let Some(server) = attempts.next_server(group, ctx.client, now) else {
            break;
        };
        // Counted from the pick, so that concurrent picks see each other (least_conn).
        let active = ActiveRequest::new(group.clone(), server);
        let checkout = attempts
            .checkout(group, server, ctx.conn.worker, ctx.timeouts.connect)
            .await;
        let Some(Checkout { conn, pooled }) = checkout else {
            continue;
        };
        let Some(request) = again(&mut unsent, whole_body.as_ref()) else {
            break;
        };
        let sent = conn
            .send_with(
                request,
                prepared.added.as_slice(),
                ctx.timeouts.read,
                progress.as_deref(),
            )
            .await;
        let exchange = match sent {
            Ok(exchange) => exchange,
            Err(err) => {
                let failed = attempts.failed(err, group, server, pooled);
                unsent = Some(failed.map_err(|err| Stopped::Failed(err, attempts.take_failures()))?);
                continue;
            }
        };
        let worker = ctx.conn.worker;
        let (status, upstream_time) =
            answered(&exchange, group, server, now, progress.as_deref(), worker);
        let idle = ctx.timeouts.read;
        let response = respond(exchange, client_upgrade, (group, server), ctx.pass, idle, held)?;
        let mut lease = Lease::new(active, ctx.conn.worker);
        // A tunnel would hold its slot for as long as it stays open: a WebSocket
        // handshake waits at the gate like any request (anyone can send its headers),
        // and gives the slot back once the upstream switched.
        if status != http::StatusCode::SWITCHING_PROTOCOLS {
            lease.hold(permit);
        }
        return Ok(Done {
            response,
            addr: group.servers[server].addr,
            upstream_time,
            lease,
            failed: attempts.take_failures(),
        });
    }
    Err(attempts.stopped(group))
}

/// The client's side of a WebSocket handshake, which the tunnel takes over after a 101.
fn take_upgrade(req: &mut Request<ClientBody>) -> Option<tunnel::ClientUpgrade> {
    req.extensions_mut().remove::<tunnel::ClientUpgrade>()
}

/// The request for the next try, if it is still there: with the body read whole
/// again from its start when it was (`whole`), since a try takes the body it sends.
fn again(
    unsent: &mut Option<Request<RequestBody>>,
    whole: Option<&RequestBody>,
) -> Option<Request<RequestBody>> {
    let mut request = unsent.take()?;
    if let Some(body) = whole.and_then(RequestBody::replay) {
        *request.body_mut() = body;
    }
    Some(request)
}

/// Records a server's answer (its head, read at `now` plus the time it took): the
/// server's health, the group's upstream time and load signals. Returns the answer's
/// status and the upstream time.
fn answered(
    exchange: &Exchange,
    group: &Group,
    server: usize,
    now: Instant,
    progress: Option<&Progress>,
    worker: usize,
) -> (http::StatusCode, Duration) {
    group.servers[server].health.record_success(now);
    let upstream_time = crate::clock::now().saturating_duration_since(now);
    group.stats.time.get(worker).observe(upstream_time);
    let status = match exchange {
        Exchange::Response(response) => response.status(),
        Exchange::Upgraded(head, _) => head.status(),
    };
    // A client that trickles a streamed body slows the exchange, not the upstream: the
    // load signals time the upstream from the last bytes it was sent, or a slow uploader
    // could cut everyone's adaptive limits.
    let latency = progress.map_or(upstream_time, |p| p.since_last_frame().min(upstream_time));
    group
        .stats
        .load
        .get(worker)
        .record(latency, status.as_u16());
    (status, upstream_time)
}

/// Counts a request that ended in `err` in its group's load signals (`metrics::load`),
/// on `worker`'s cell. A client's failure (or ours) is not the upstream's load and is
/// left out.
pub(super) fn record_failure(err: &ProxyError, group: &Group, worker: usize) {
    let (kind, latency) = match err {
        ProxyError::ClientBodyTimeout
        | ProxyError::BodyTooLarge
        | ProxyError::ClientBody(_)
        | ProxyError::BodyTempFile(_) => return,
        // Censored at `read_timeout`: a stalled group answers nothing, and without a
        // sample its latency would look unknown rather than slow.
        ProxyError::Timeout(_) => (Failure::Timeout, Some(group.read_timeout)),
        ProxyError::Connect(ConnectError::Timeout { .. }) => (Failure::Timeout, None),
        ProxyError::Connect(_) | ProxyError::NoLiveUpstream(_) => (Failure::Refused, None),
        ProxyError::Upstream { .. } | ProxyError::UnexpectedUpgrade(_) => (Failure::Broken, None),
    };
    group.stats.load.get(worker).fail(kind, latency);
}

/// The client's body as it goes upstream: none, read whole (before any upstream is
/// chosen, so a slow upload holds none: in memory up to `client_body_buffer_size`, the
/// rest in a file with `request_buffering` on), or streamed after what was read ahead.
/// A body from a file or a stream comes with its `Progress`, so that `read_timeout`
/// counts from its last frame sent, never the client's slowness or a long upload.
async fn upstream_body(
    body: ClientBody,
    ctx: &Ctx<'_>,
) -> Result<(RequestBody, Option<Arc<Progress>>), ProxyError> {
    if body.is_end_stream() {
        return Ok((RequestBody::Empty, None));
    }
    let progress = Progress::new();
    let body = Timed::watched(body, ctx.timeouts.body, ctx.max_body, progress.clone())
        .tallied(ctx.received.clone());
    let mut body = RequestBody::read_ahead(body, ctx.body_buffer)
        .await
        .map_err(ProxyError::client_body)?;
    if let Some(dir) = ctx.spool {
        body = body
            .spool(dir, ctx.body_buffer)
            .await
            .map_err(ProxyError::client_body)?;
    }
    let sent_over_time = matches!(body, RequestBody::Client(_) | RequestBody::Spooled(_));
    let progress = sent_over_time.then_some(progress);
    Ok((body, progress))
}

/// Turns the upstream's response head (of `server` of `group`) into the client's.
fn respond(
    exchange: Exchange,
    client_upgrade: Option<tunnel::ClientUpgrade>,
    (group, server): (&Arc<Group>, usize),
    pass: Passed,
    idle: Duration,
    held: &mut Vec<InFlight>,
) -> Result<Response<ResponseBody>, ProxyError> {
    match exchange {
        Exchange::Upgraded(head, upgraded) => {
            // Only to a WebSocket handshake, and only to WebSocket: the tunnel is beyond
            // every rule, so a 101 to anything else is a broken (or hostile) upstream.
            let client_upgrade = match client_upgrade {
                Some(client) if headers::is_websocket_accept(head.headers()) => client,
                _ => return Err(ProxyError::UnexpectedUpgrade(group.servers[server].addr)),
            };
            // A tunnel is a request in flight until it closes (nginx's limit_conn counts
            // it until the request is freed), so it holds the in-flight counts.
            let held = std::mem::take(held);
            tokio::spawn(async move {
                tunnel::run(client_upgrade, upgraded, idle).await;
                drop(held);
            });
            let (mut parts, ()) = head.into_parts();
            headers::to_client(&mut parts.headers, true, pass);
            parts.version = Version::HTTP_11;
            Ok(Response::from_parts(parts, ResponseBody::Empty))
        }
        Exchange::Response(response) => {
            let (mut parts, body) = response.into_parts();
            headers::to_client(&mut parts.headers, false, pass);
            // The client's protocol is the client connection's business, whatever the
            // upstream spoke (it may be HTTP/1.0).
            parts.version = Version::HTTP_11;
            Ok(Response::from_parts(parts, ResponseBody::Upstream(body)))
        }
    }
}
