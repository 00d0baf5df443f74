//! The PROXY protocol on a listener with `proxy_protocol = true` (DESIGN §18): before
//! TLS or HTTP, the connection's first bytes are a v1 or v2 header from a load balancer
//! (HAProxy, an AWS NLB) naming the client, whose address then stands for the peer's
//! everywhere: access rules, zone keys, logs and `X-Forwarded-For`.
//!
//! Only a sender of `[server] proxy_protocol_from` is believed: a connection from any
//! other is closed unread. A header that is malformed, longer than
//! `wire::proxy_protocol::MAX_HEADER`, missing (the connection starts with something
//! else), or not whole within `client_header_timeout` closes the connection too: the
//! balancer always sends one, so its absence means something is wrong, and guessing
//! would let a client name itself.
//!
//! The header is peeked, then exactly its bytes are read: what follows stays in the
//! socket for the TLS handshake or the HTTP/1.1 parser, which see the connection as if
//! it started there.

use std::net::SocketAddr;
use std::time::Duration;

use tokio::net::TcpStream;

use crate::config::{Address, ProxyProtocol};
use crate::wire::proxy_protocol::{self, Parsed, MAX_HEADER};

/// How long to wait before looking again at a header that has not arrived whole (it
/// nearly always arrives in the connection's first segment).
const AGAIN: Duration = Duration::from_millis(5);

/// Why a connection was closed before anything was served.
#[derive(Debug, thiserror::Error)]
pub(super) enum Refused {
    #[error("the sender is not in proxy_protocol_from")]
    Untrusted,
    /// The header is malformed or missing, or the peer closed first.
    #[error("no PROXY header: {0}")]
    Malformed(String),
    #[error("no whole PROXY header within client_header_timeout")]
    Slow,
}

/// The client of a connection from `peer` accepted at `address`: `peer` itself unless the
/// listener reads PROXY headers, else the address the header names (the sender's own for
/// a health check's `LOCAL`).
pub(super) async fn client(
    stream: &mut TcpStream,
    peer: SocketAddr,
    address: &Address,
    settings: &ProxyProtocol,
    within: Duration,
) -> Result<SocketAddr, Refused> {
    if !settings.reads(address) {
        return Ok(peer);
    }
    let sender = crate::access::canonical(peer.ip());
    if !settings.from.iter().any(|net| net.contains(&sender)) {
        return Err(Refused::Untrusted);
    }
    // Boxed: the buffer lives only while the header is read, not in every connection's task.
    let read = Box::pin(read(stream));
    match tokio::time::timeout(within, read).await {
        Ok(Ok(named)) => Ok(named.unwrap_or(peer)),
        Ok(Err(refused)) => Err(refused),
        Err(_) => Err(Refused::Slow),
    }
}

/// The header `stream` starts with, consumed: the source it names, if any.
async fn read(stream: &mut TcpStream) -> Result<Option<SocketAddr>, Refused> {
    let mut buf = vec![0u8; MAX_HEADER];
    loop {
        let seen = stream.peek(&mut buf).await.map_err(|e| Refused::Malformed(e.to_string()))?;
        if seen == 0 {
            return Err(Refused::Malformed("closed before the header".to_owned()));
        }
        match proxy_protocol::parse(&buf[..seen]) {
            Ok(Parsed::Complete { header, len }) => {
                let taken = &mut buf[..len];
                tokio::io::AsyncReadExt::read_exact(stream, taken)
                    .await
                    .map_err(|e| Refused::Malformed(e.to_string()))?;
                return Ok(header.source);
            }
            Ok(Parsed::Incomplete) => tokio::time::sleep(AGAIN).await,
            Err(malformed) => return Err(Refused::Malformed(malformed.to_string())),
        }
    }
}
