//! One client connection: its timeouts set up ([`TimedIo`]), the protocol told from its
//! first bytes ([`preface`]), then served by that protocol's module (`h1`, `h2`), each of
//! which hands every request to the pipeline of the snapshot in force and closes
//! gracefully when the worker drains.

use std::future::poll_fn;
use std::sync::Arc;

use bytes::BytesMut;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::sync::watch;

use super::preface::{self, Sniffed};
use super::timeouts::{ConnLimits, ConnState, TimedIo};
use super::{h1, h2};
use crate::proxy::Conn;
use crate::state::GatewayState;
use crate::wire::Protocol;

/// Serves one accepted connection until it closes or the worker's drain ends it.
/// `conn_state` is new, made as the connection's first byte may arrive (after the TLS
/// handshake), and the worker may shed it ([`ConnState::shed`]).
/// `alpn`: what TLS's ALPN agreed on, when that binds: after `h2`, only HTTP/2 may
/// follow (RFC 9113 §3.3). `http2`: the listener serves HTTP/2 (else every connection
/// is HTTP/1.x, and an HTTP/2 preface an HTTP/1.1 request line like any other).
pub(super) async fn serve<T>(
    stream: T,
    conn: Arc<Conn>,
    conn_state: Arc<ConnState>,
    state: Arc<GatewayState>,
    mut shutdown: watch::Receiver<bool>,
    alpn: Option<Protocol>,
    http2: bool,
) where
    T: AsyncRead + AsyncWrite + Unpin + super::zero_copy::ZeroCopy + Send + 'static,
{
    let snapshot = state.snapshot.load();
    let settings = snapshot.conn;
    let limits = ConnLimits {
        header: settings.client_header_timeout,
        keepalive: settings.keepalive_timeout,
        send: settings.send_timeout,
    };
    // Boxed: passed down by value through the protocol's layers of futures, each of which
    // would otherwise keep a copy of it for the connection's life.
    let mut io = Box::new(TimedIo::new(stream, conn_state.clone(), limits));
    io.set_server(snapshot.pipeline.server_header.clone());
    drop(snapshot);
    let (protocol, read) = match sniff(&mut io, alpn, http2).await {
        Ok(Some(sniffed)) => sniffed,
        Ok(None) => return,
        Err(err) => {
            tracing::debug!(peer = %conn.peer, error = %err, "connection closed before a request");
            return;
        }
    };
    match protocol {
        Protocol::Http1 => {
            let setup = h1::Setup {
                conn: &conn,
                state: &state,
                conn_state: &conn_state,
                limits: h1::HeadLimits {
                    max_line: settings.max_uri_bytes,
                    max_bytes: settings.max_header_bytes,
                    max_headers: settings.max_headers,
                },
            };
            h1::serve(io, read, setup, &mut shutdown).await;
        }
        Protocol::Http2 => {
            let setup = h2::Setup {
                conn,
                state,
                conn_state,
                settings,
            };
            // Boxed: an HTTP/1.1 connection's task does not carry hyper's connection.
            Box::pin(h2::serve(io, read, setup, &mut shutdown)).await;
        }
        // Over TCP, the first bytes tell only HTTP/1.x or HTTP/2 (HTTP/3 comes over QUIC).
        Protocol::Http3 => {}
    }
}

/// Reads until the first bytes tell HTTP/2 from HTTP/1.1 (see [`preface`]).
/// `Ok(None)`: the client closed (or timed out) before sending anything, or sent a
/// broken HTTP/2 preface, which has been answered with GOAWAY. After ALPN agreed on
/// `h2`, anything but the HTTP/2 preface is a broken one: RFC 9113 §3.3 lets only
/// HTTP/2 follow, so HTTP/1.1 bytes get GOAWAY PROTOCOL_ERROR, not an answer. Without
/// `http2`, the first bytes are HTTP/1.x whatever they are.
async fn sniff<T>(
    io: &mut TimedIo<T>,
    alpn: Option<Protocol>,
    http2: bool,
) -> std::io::Result<Option<(Protocol, BytesMut)>>
where
    T: AsyncRead + AsyncWrite + Unpin,
{
    // No buffer until the first bytes come (`poll_read_waiting`).
    let mut buf = BytesMut::new();
    loop {
        if poll_fn(|cx| h1::poll_read_waiting(io, &mut buf, cx)).await? == 0 {
            return Ok(None);
        }
        if !http2 {
            return Ok(Some((Protocol::Http1, buf)));
        }
        let protocol = match preface::sniff(&buf) {
            Sniffed::More => continue,
            Sniffed::Http1 if alpn != Some(Protocol::Http2) => Protocol::Http1,
            Sniffed::Http2 => Protocol::Http2,
            Sniffed::Http1 | Sniffed::Broken => {
                io.write_all(&preface::GOAWAY).await?;
                io.shutdown().await?;
                return Ok(None);
            }
        };
        return Ok(Some((protocol, buf)));
    }
}
