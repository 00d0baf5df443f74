//! The gateway's own calls out (a JWK set fetched, spans exported): a connection to the
//! first server of a URL's group that takes one, with TLS when the URL is `https://`.
//! Not for requests: those go through the pool (`pool.rs`).

use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::config;

/// A connection, plain or TLS.
pub(crate) trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}

impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

/// A connection to the first server of `upstream` that takes one (each in turn while
/// connecting fails), its TLS handshake done when the group speaks TLS; why not, else.
pub(crate) async fn dial(upstream: &config::Upstream) -> Result<Box<dyn Stream>, String> {
    let mut last_error = String::from("no address");
    for server in &upstream.servers {
        let tcp = match TcpStream::connect(server.addr).await {
            Ok(tcp) => tcp,
            Err(err) => {
                last_error = format!("cannot connect to {}: {err}", server.addr);
                continue;
            }
        };
        let (Some(tls), Some(name)) = (&upstream.tls, &server.tls_name) else {
            return Ok(Box::new(tcp));
        };
        let connector = tokio_rustls::TlsConnector::from(tls.clone());
        let stream = connector.connect(name.clone(), tcp).await.map_err(|err| format!("TLS with {}: {err}", server.addr))?;
        return Ok(Box::new(stream));
    }
    Err(last_error)
}
