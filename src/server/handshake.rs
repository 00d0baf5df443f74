//! A `listen_tls` connection's TLS handshake, within the snapshot's `handshake_timeout`:
//! its ClientHello fingerprinted first when a text reads `$ja4`, the server config chosen
//! by SNI when some site has `client_certificates` (only that site's asks for a
//! certificate, which is checked once the handshake is over), then the connection served
//! as any other, with what the handshake told on its [`Conn`].

use std::sync::Arc;
use std::time::Duration;

use rustls::pki_types::UnixTime;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::watch;
use tokio_rustls::server::TlsStream;

use super::conn;
use super::shed::Sheddable;
use super::timeouts::ConnState;
use crate::metrics::TlsProtocol;
use crate::proxy::Conn;
use crate::snapshot::TlsServer;
use crate::state::GatewayState;
use crate::tls::{ja4, ClientAuth, Peer};
use crate::wire::Protocol;

/// How long to wait before looking again at a ClientHello that has not arrived whole (it
/// nearly always arrives in the connection's first segment or two).
const AGAIN: Duration = Duration::from_millis(5);

/// The ClientHello bytes first looked at for `$ja4`; a larger one is looked at again
/// with room for the largest.
const FIRST_LOOK: usize = 2048;

/// The TLS handshake (within the snapshot's `handshake_timeout`, with its certificates,
/// offering ALPN `h2` when `http2`), then the connection as any other.
pub(super) async fn serve_tls(
    stream: TcpStream,
    http2: bool,
    mut conn: Conn,
    state: Arc<GatewayState>,
    stop: watch::Receiver<bool>,
    sheddable: Arc<Sheddable>,
) {
    let Some(tls) = state.snapshot.load().tls.clone() else {
        // Validation makes `listen_tls` need certificates; nothing to serve without.
        tracing::error!(peer = %conn.peer, "TLS connection without certificates");
        return;
    };
    let counted = state.metrics.tls_handshakes(conn.worker);
    let mut peer = Peer::default();
    // The handshake's state is boxed, and let go once it is over.
    let handshake = Box::pin(handshake(stream, http2, &tls, &conn, &state, &mut peer));
    let (mut stream, auth) = match tokio::time::timeout(tls.handshake_timeout, handshake).await {
        Ok(Ok(done)) => done,
        Ok(Err(err)) => {
            counted.failed();
            tracing::debug!(peer = %conn.peer, error = %err, "TLS handshake failed");
            return;
        }
        Err(_) => {
            counted.failed();
            tracing::debug!(peer = %conn.peer, "TLS handshake timed out");
            return;
        }
    };
    let session = stream.get_ref().1;
    counted.ok(tls_protocol(session.protocol_version()));
    let suite = session.negotiated_cipher_suite().map(|suite| suite.suite());
    conn.tls_names = Some(crate::tls::openssl_names(session.protocol_version(), suite));
    let alpn = session.alpn_protocol();
    if alpn == Some(crate::acme::ACME_TLS_ALPN) {
        // A tls-alpn-01 validation: the handshake was the answer (RFC 8737).
        tracing::debug!(peer = %conn.peer, "tls-alpn-01 validation handshake");
        let _ = tokio::time::timeout(tls.handshake_timeout, stream.shutdown()).await;
        return;
    }
    let alpn = (alpn == Some(b"h2".as_slice())).then_some(Protocol::Http2);
    // A site asking for client certificates is not offered HTTP/3, whose requests to it
    // get 421 (one QUIC config serves every name, and cannot ask per site).
    if auth.is_none() {
        conn.alt_svc = tls.alt_svc(conn.address.addr, conn.server_port);
    }
    if tls.per_site || tls.ja4 {
        peer.sni = session.server_name().map(Box::from);
        peer.vars.client_verify = "NONE".into();
        if let Some(auth) = auth {
            auth.check(session.peer_certificates(), UnixTime::now(), &mut peer);
        }
        conn.tls = Some(Box::new(peer));
    }
    let conn_state = ConnState::new();
    sheddable.add(&conn_state);
    // Boxed: rustls's connection is large, and each layer of futures below would keep a
    // copy of it. `conn` is shared (HTTP/2's streams share it): the layers keep a pointer.
    let stream = Box::new(stream);
    conn::serve(stream, Arc::new(conn), conn_state, state, stop, alpn, http2).await
}

/// The handshake itself, and the client certificates of the site SNI chose (when it
/// has any). `$ja4` goes into `peer`.
async fn handshake(
    stream: TcpStream,
    http2: bool,
    tls: &TlsServer,
    conn: &Conn,
    state: &GatewayState,
    peer: &mut Peer,
) -> std::io::Result<(TlsStream<TcpStream>, Option<Arc<ClientAuth>>)> {
    if tls.ja4 {
        peer.vars.ja4 = fingerprint(&stream).await?.unwrap_or_default().into();
    }
    let acceptor = tls.acceptor(http2);
    if !tls.per_site {
        return Ok((acceptor.accept(stream).await?, None));
    }
    let acceptor_hello = tokio_rustls::LazyConfigAcceptor::new(rustls::server::Acceptor::default(), stream);
    let start = acceptor_hello.await?;
    let sni = start.client_hello().server_name().map(str::to_owned);
    let snapshot = state.snapshot.load();
    let site = snapshot.pipeline.sites.select(conn, || sni.as_deref());
    let auth = site.and_then(|site| site.client_auth.clone());
    let config = match &auth {
        Some(auth) => auth.server_config(http2).clone(),
        None => acceptor.config().clone(),
    };
    drop(snapshot);
    Ok((start.into_stream(config).await?, auth))
}

/// The JA4 fingerprint of the ClientHello `stream` starts with, looked at without
/// taking it (the handshake reads it after); `None` for what is no ClientHello, or one
/// too large.
async fn fingerprint(stream: &TcpStream) -> std::io::Result<Option<String>> {
    let mut buf = vec![0u8; FIRST_LOOK];
    loop {
        let seen = stream.peek(&mut buf).await?;
        if seen == 0 {
            return Ok(None);
        }
        match ja4::ja4(&buf[..seen]) {
            ja4::Read::Complete(fingerprint) => return Ok(Some(fingerprint)),
            ja4::Read::Malformed => return Ok(None),
            ja4::Read::Incomplete if seen == buf.len() => {
                if buf.len() > FIRST_LOOK {
                    // Records of a few bytes each: past any real client's.
                    return Ok(None);
                }
                buf.resize(ja4::MAX_HELLO + 1024, 0);
            }
            ja4::Read::Incomplete => tokio::time::sleep(AGAIN).await,
        }
    }
}

/// The `protocol` label of a handshake that agreed on `version`.
fn tls_protocol(version: Option<rustls::ProtocolVersion>) -> TlsProtocol {
    match version {
        Some(rustls::ProtocolVersion::TLSv1_3) => TlsProtocol::Tls13,
        Some(rustls::ProtocolVersion::TLSv1_2) => TlsProtocol::Tls12,
        _ => TlsProtocol::Other,
    }
}
