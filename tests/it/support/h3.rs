//! An HTTP/3 client for the tests: quinn and h3 (the crates tollgate serves HTTP/3 with,
//! used from the other side), trusting any certificate.

use std::net::SocketAddr;
use std::sync::Arc;

use bytes::{Buf, Bytes};
use http::{HeaderMap, Request, StatusCode};
use quinn::crypto::rustls::QuicClientConfig;

use super::accept_any::AcceptAny;

/// An answer over HTTP/3.
#[derive(Debug)]
pub struct H3Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
}

/// An HTTP/3 connection, for several requests.
pub struct H3Client {
    endpoint: quinn::Endpoint,
    sender: h3::client::SendRequest<h3_quinn::OpenStreams, Bytes>,
    driver: tokio::task::JoinHandle<h3::error::ConnectionError>,
}

impl H3Client {
    /// Connects to `addr` with SNI `host`.
    pub async fn connect(addr: SocketAddr, host: &str) -> Result<H3Client, String> {
        let mut endpoint =
            quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).map_err(|e| e.to_string())?;
        endpoint.set_default_client_config(client_config());
        let connection = endpoint
            .connect(addr, host)
            .map_err(|e| e.to_string())?
            .await
            .map_err(|e| format!("QUIC handshake: {e}"))?;
        let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(connection))
            .await
            .map_err(|e| e.to_string())?;
        let driver =
            tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        Ok(H3Client {
            endpoint,
            sender,
            driver,
        })
    }

    /// `req` (its URI absolute, `https://host/path`) with `body` after it, on this
    /// connection.
    pub async fn send(&mut self, req: Request<()>, body: &[u8]) -> Result<H3Reply, String> {
        let mut stream = self
            .sender
            .send_request(req)
            .await
            .map_err(|e| e.to_string())?;
        if !body.is_empty() {
            stream
                .send_data(Bytes::copy_from_slice(body))
                .await
                .map_err(|e| e.to_string())?;
        }
        stream.finish().await.map_err(|e| e.to_string())?;
        let response = stream.recv_response().await.map_err(|e| e.to_string())?;
        let mut text = Vec::new();
        while let Some(mut chunk) = stream.recv_data().await.map_err(|e| e.to_string())? {
            while chunk.has_remaining() {
                let piece = chunk.chunk();
                text.extend_from_slice(piece);
                let n = piece.len();
                chunk.advance(n);
            }
        }
        Ok(H3Reply {
            status: response.status(),
            headers: response.headers().clone(),
            body: String::from_utf8_lossy(&text).into_owned(),
        })
    }

    /// `GET https://{host}{path}` on this connection.
    pub async fn get(&mut self, host: &str, path: &str) -> Result<H3Reply, String> {
        let req = Request::get(format!("https://{host}{path}"))
            .body(())
            .unwrap();
        self.send(req, b"").await
    }
}

impl H3Client {
    /// Moves the connection to a new local port, as a client whose NAT rebinds (a QUIC
    /// connection migration): the new address.
    pub fn migrate(&self) -> std::io::Result<SocketAddr> {
        let socket = std::net::UdpSocket::bind("127.0.0.1:0")?;
        let moved_to = socket.local_addr()?;
        self.endpoint.rebind(socket)?;
        Ok(moved_to)
    }
}

impl Drop for H3Client {
    fn drop(&mut self) {
        self.driver.abort();
        self.endpoint.close(0u32.into(), b"done");
    }
}

/// One request over a new HTTP/3 connection to `addr` with SNI `host`.
pub async fn request(
    addr: SocketAddr,
    host: &str,
    req: Request<()>,
    body: &[u8],
) -> Result<H3Reply, String> {
    H3Client::connect(addr, host).await?.send(req, body).await
}

/// `GET https://{host}{path}` over a new HTTP/3 connection.
pub async fn get(addr: SocketAddr, host: &str, path: &str) -> Result<H3Reply, String> {
    H3Client::connect(addr, host).await?.get(host, path).await
}

/// The client config of [`H3Client::connect`]: TLS 1.3, ALPN `h3`, any certificate.
pub fn client_config() -> quinn::ClientConfig {
    quic_config(false)
}

/// A client config that keeps the session tickets it is given (the config is shared by
/// the connections made with it) and offers 0-RTT with them.
pub fn early_config() -> quinn::ClientConfig {
    quic_config(true)
}

fn quic_config(early_data: bool) -> quinn::ClientConfig {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(&[&rustls::version::TLS13])
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny))
        .with_no_client_auth();
    tls.alpn_protocols = vec![b"h3".to_vec()];
    tls.enable_early_data = early_data;
    quinn::ClientConfig::new(Arc::new(QuicClientConfig::try_from(tls).unwrap()))
}

impl H3Client {
    /// Connects with `config` (from [`early_config`]), sending its first requests in 0-RTT
    /// when it holds a ticket that allows it: the client, and whether it did.
    pub async fn connect_early(
        config: &quinn::ClientConfig,
        addr: SocketAddr,
        host: &str,
    ) -> Result<(H3Client, bool), String> {
        let mut endpoint =
            quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).map_err(|e| e.to_string())?;
        endpoint.set_default_client_config(config.clone());
        let connecting = endpoint.connect(addr, host).map_err(|e| e.to_string())?;
        let (connection, early) = match connecting.into_0rtt() {
            Ok((connection, _)) => (connection, true),
            Err(connecting) => (
                connecting
                    .await
                    .map_err(|e| format!("QUIC handshake: {e}"))?,
                false,
            ),
        };
        let (mut driver, sender) = h3::client::new(h3_quinn::Connection::new(connection))
            .await
            .map_err(|e| e.to_string())?;
        let driver =
            tokio::spawn(async move { std::future::poll_fn(|cx| driver.poll_close(cx)).await });
        Ok((
            H3Client {
                endpoint,
                sender,
                driver,
            },
            early,
        ))
    }
}
