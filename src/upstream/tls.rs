//! TLS to upstream servers: the handshake after the TCP connect, under the same
//! `connect_timeout` (as nginx's `proxy_connect_timeout` covers its SSL handshake).
//!
//! The client settings (roots, client certificate, ALPN `http/1.1`) come built from
//! the config ([`crate::config::Upstream::tls`]), and verification is always on. Here
//! each server gets the name its certificate is checked against: sent as SNI when it
//! is a host name; an IP address is sent no SNI and checked against the certificate's
//! IP addresses (rustls does both from the [`ServerName`]).

use std::borrow::Cow;
use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

use crate::config;

/// How one server is reached over TLS.
#[derive(Clone)]
pub struct ServerTls {
    connector: TlsConnector,
    name: ServerName<'static>,
}

impl ServerTls {
    pub(crate) fn new(client: Arc<rustls::ClientConfig>, name: ServerName<'static>) -> ServerTls {
        ServerTls {
            connector: TlsConnector::from(client),
            name,
        }
    }

    /// The handshake on a connected socket; a verification failure is an error of
    /// kind `InvalidData` that says what was wrong with the certificate.
    pub(crate) async fn handshake(&self, tcp: TcpStream) -> io::Result<TlsStream<TcpStream>> {
        self.connector.connect(self.name.clone(), tcp).await
    }

    /// The name the certificate must carry, for messages.
    pub(crate) fn name(&self) -> Cow<'_, str> {
        self.name.to_str()
    }
}

impl fmt::Debug for ServerTls {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ServerTls")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// A TLS group's [`ServerTls`], one per server in the order of
/// [`config::Upstream::servers`].
pub struct GroupTls(Vec<ServerTls>);

impl GroupTls {
    /// `None` for a group that speaks plain HTTP.
    pub fn of(upstream: &config::Upstream) -> Option<GroupTls> {
        let client = upstream.tls.as_ref()?;
        let servers = upstream
            .servers
            .iter()
            .map(|server| {
                // The config names every server of a TLS group; the address itself is
                // the strict fallback (its certificate must carry that IP).
                let name = server
                    .tls_name
                    .clone()
                    .unwrap_or_else(|| ip_name(server.addr));
                ServerTls::new(client.clone(), name)
            })
            .collect();
        Some(GroupTls(servers))
    }

    pub fn into_servers(self) -> Vec<ServerTls> {
        self.0
    }
}

fn ip_name(addr: SocketAddr) -> ServerName<'static> {
    ServerName::IpAddress(addr.ip().into())
}
