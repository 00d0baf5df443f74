//! HTTP/3 connections, served by h3 over quinn: the handshake (with the snapshot's QUIC
//! config, within `handshake_timeout`), then each request stream's request goes to the
//! pipeline of the snapshot in force, as HTTP/1.1's and HTTP/2's do, and its answer is
//! sent back on the stream as it comes. When the worker drains, the connection sends
//! GOAWAY and finishes the requests under way.
//!
//! With `[quic] early_data`, requests are taken before the handshake completes (0-RTT,
//! which an attacker may replay): only safe methods go on, with `Early-Data: 1` so that
//! the upstream may answer 425; any other is answered 425 Too Early here, and the client
//! sends it again once the handshake is done (RFC 8470).

use std::future::poll_fn;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use h3::error::Code;
use h3::server::{RequestResolver, RequestStream};
use http::header::{self, HeaderValue};
use http::{HeaderMap, Response};
use http_body::Body;
use tokio::sync::watch;

use super::answer::settle;
use super::timeouts::ConnState;
use crate::config::Address;
use crate::proxy::{Conn, Logged};
use crate::state::GatewayState;
use crate::wire::body::{ClientBody, H3Body};
use crate::wire::Protocol;

type Connection = h3::server::Connection<h3_quinn::Connection, Bytes>;
type SendHalf = RequestStream<h3_quinn::SendStream<Bytes>, Bytes>;

/// What a QUIC listener's connections are served with.
#[derive(Clone)]
pub(super) struct Setup {
    pub state: Arc<GatewayState>,
    /// The `listen_tls` address it serves beside: the sites that answer there answer
    /// HTTP/3 too.
    pub address: Address,
    /// The UDP port, `$server_port`.
    pub port: u16,
    pub worker: usize,
    pub stop: watch::Receiver<bool>,
}

/// Completes `incoming`'s handshake and serves its requests until the client closes,
/// the connection fails, or the worker's drain ends it.
pub(super) async fn serve(incoming: quinn::Incoming, config: Arc<quinn::ServerConfig>, setup: Setup) {
    let peer = incoming.remote_address();
    let Some((connection, confirmed)) = handshake(incoming, config, &setup).await else {
        return;
    };
    let max_header_bytes = setup.state.snapshot.load().conn.max_header_bytes as u64;
    let built = h3::server::builder()
        .max_field_section_size(max_header_bytes)
        .build(h3_quinn::Connection::new(connection))
        .await;
    let mut h3 = match built {
        Ok(h3) => h3,
        Err(err) => {
            tracing::debug!(%peer, error = %err, "HTTP/3 connection failed");
            return;
        }
    };
    let mut conn = Conn::new(peer, setup.worker, setup.address, setup.port, setup.stop.clone());
    // QUIC is TLS 1.3; quinn does not tell the suite.
    conn.tls_names = Some(("TLSv1.3", None));
    let conn = Arc::new(conn);
    requests(&mut h3, &conn, &setup, &confirmed).await;
}

/// The connection `incoming` becomes, within `handshake_timeout`, and whether its
/// handshake is over (at once without `early_data`; with it, the connection is served
/// from its 0-RTT on, and the flag turns true when the handshake completes).
async fn handshake(
    incoming: quinn::Incoming,
    config: Arc<quinn::ServerConfig>,
    setup: &Setup,
) -> Option<(quinn::Connection, Arc<AtomicBool>)> {
    let peer = incoming.remote_address();
    let (tls, early_data) = setup
        .state
        .snapshot
        .load()
        .tls
        .as_ref()
        .map(|tls| (tls.handshake_timeout, tls.quic_early_data))?;
    let connecting = match incoming.accept_with(config) {
        Ok(connecting) => connecting,
        Err(err) => {
            tracing::debug!(%peer, error = %err, "QUIC connection refused");
            return None;
        }
    };
    let counts = setup.state.metrics.quic();
    let confirmed = Arc::new(AtomicBool::new(!early_data));
    if !early_data {
        return match tokio::time::timeout(tls, connecting).await {
            Ok(Ok(connection)) => {
                counts.ok.add(1);
                Some((connection, confirmed))
            }
            Ok(Err(err)) => {
                counts.failed.add(1);
                tracing::debug!(%peer, error = %err, "QUIC handshake failed");
                None
            }
            Err(_) => {
                counts.failed.add(1);
                tracing::debug!(%peer, "QUIC handshake timed out");
                None
            }
        };
    }
    // On a server, this always succeeds; `established` resolves with the handshake.
    let (connection, established) = connecting.into_0rtt().ok()?;
    let (flag, state, watched) = (confirmed.clone(), setup.state.clone(), connection.clone());
    tokio::spawn(async move {
        let counts = state.metrics.quic();
        match tokio::time::timeout(tls, established).await {
            Ok(_) => {
                counts.ok.add(1);
                flag.store(true, Ordering::Release);
            }
            // A replayed first flight never completes its handshake: closed in time, it
            // holds nothing longer than a slow handshake over TCP.
            Err(_) => {
                counts.failed.add(1);
                watched.close(0u32.into(), b"handshake timed out");
            }
        }
    });
    Some((connection, confirmed))
}

/// Accepts request streams, each served on a task of its own, until the connection
/// ends; when the drain starts, sends GOAWAY and keeps the connection until the requests
/// under way have been answered (the worker's `shutdown_timeout` bounds the wait).
async fn requests(h3: &mut Connection, conn: &Arc<Conn>, setup: &Setup, confirmed: &AtomicBool) {
    let conn_state = ConnState::new();
    let mut stop = setup.stop.clone();
    // Each request's task holds a sender: `recv` gives `None` once all have ended.
    let (alive, mut all_done) = tokio::sync::mpsc::channel::<()>(1);
    loop {
        let accepted = tokio::select! {
            accepted = h3.accept() => Some(accepted),
            _ = stop.wait_for(|stop| *stop) => None,
        };
        let Some(accepted) = accepted else {
            // GOAWAY: the requests already accepted go on, on this connection.
            let _ = h3.shutdown(0).await;
            drop(alive);
            let _ = all_done.recv().await;
            return;
        };
        match accepted {
            Ok(Some(resolver)) => {
                let (conn, state) = (conn.clone(), setup.state.clone());
                let (conn_state, alive) = (conn_state.clone(), alive.clone());
                let early = !confirmed.load(Ordering::Acquire);
                tokio::spawn(async move {
                    request(resolver, conn, state, conn_state, early).await;
                    drop(alive);
                });
            }
            Ok(None) => return,
            Err(err) => {
                if !err.is_h3_no_error() {
                    tracing::debug!(peer = %conn.peer, error = %err, "HTTP/3 connection ended with an error");
                }
                return;
            }
        }
    }
}

/// One request: read, handed to the pipeline, answered on its stream. `early`: it came
/// before the handshake was over (0-RTT).
async fn request(
    resolver: RequestResolver<h3_quinn::Connection, Bytes>,
    conn: Arc<Conn>,
    state: Arc<GatewayState>,
    conn_state: Arc<ConnState>,
    early: bool,
) {
    let (mut req, stream) = match Box::pin(resolver.resolve_request()).await {
        Ok(resolved) => resolved,
        Err(err) => {
            tracing::debug!(peer = %conn.peer, error = %err, "HTTP/3 request unreadable");
            return;
        }
    };
    let (mut send, recv) = stream.split();
    if early {
        let counts = state.metrics.quic();
        if !req.method().is_safe() {
            counts.too_early.add(1);
            // RFC 8470 §5.2: the client sends it again after the handshake.
            let too_early = Response::builder().status(http::StatusCode::TOO_EARLY).body(()).unwrap_or_default();
            if send.send_response(too_early).await.is_ok() {
                let _ = send.finish().await;
            }
            return;
        }
        counts.early_taken.add(1);
        req.headers_mut().insert("early-data", HeaderValue::from_static("1"));
    }
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    let req = req.map(|()| ClientBody::Http3(Box::new(H3Body::new(recv, declared))));
    let snapshot = state.snapshot.load_full();
    let _busy = conn_state.begin();
    // Boxed, as the head's reading and the answer's sending: held inline, their states made
    // each request's task 9 KB, copied whole when it was spawned (2 KB boxed).
    let response = Box::pin(snapshot.pipeline.handle(req, &conn)).await;
    if settle(&response, &conn_state, Protocol::Http3).is_err() {
        // `return 444`: the stream is reset unanswered.
        send.stop_stream(Code::H3_REQUEST_REJECTED);
        return;
    }
    let server = snapshot.pipeline.server_header.clone();
    drop(snapshot);
    if let Err(err) = Box::pin(answer(&mut send, response, server)).await {
        tracing::debug!(peer = %conn.peer, error = %err, "HTTP/3 answer broke off");
    }
}

/// Sends `response` on `send`: its head (with `Server` and `Date`), its body as it comes,
/// its trailers, the stream's end. A body that fails resets the stream.
async fn answer(
    send: &mut SendHalf,
    response: Response<Logged>,
    server: Option<HeaderValue>,
) -> Result<(), h3::error::StreamError> {
    let (mut parts, mut body) = response.into_parts();
    body.lines_into(&mut parts.headers);
    connection_specific_out(&mut parts.headers);
    if let Some(server) = server {
        parts.headers.entry(header::SERVER).or_insert(server);
    }
    if let Some(date) = super::date::value() {
        parts.headers.entry(header::DATE).or_insert(date);
    }
    super::answer::measure_head(parts.status, &parts.headers, false, &mut body);
    send.send_response(Response::from_parts(parts, ())).await?;
    let mut body = Pin::new(&mut body);
    while let Some(frame) = poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let Ok(frame) = frame else {
            send.stop_stream(Code::H3_INTERNAL_ERROR);
            return Ok(());
        };
        match frame.into_data() {
            Ok(data) => send.send_data(data).await?,
            Err(frame) => {
                if let Ok(trailers) = frame.into_trailers() {
                    send.send_trailers(trailers).await?;
                    break;
                }
            }
        }
    }
    send.finish().await
}

/// Takes out the headers HTTP/3 forbids (RFC 9114 §4.2): those of one connection.
fn connection_specific_out(headers: &mut HeaderMap) {
    for name in [header::CONNECTION, header::TRANSFER_ENCODING, header::UPGRADE] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
}
