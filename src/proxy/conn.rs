//! The connection a request arrived on, as the pipeline sees it: the peer, the worker,
//! the listening address, and the key buffer its requests borrow in turn.

use std::net::SocketAddr;

use crate::access;
use crate::config::Address;

use super::headers;

/// The connection a request arrived on.
#[derive(Debug)]
pub(crate) struct Conn {
    pub peer: SocketAddr,
    /// Index of the worker thread serving it (selects the upstream idle pools).
    pub worker: usize,
    /// The listener's address as configured: which sites answer here.
    pub address: Address,
    pub https: bool,
    /// The port it arrived on (`$server_port`).
    pub server_port: u16,
    /// The peer's address as a header value, made once per connection.
    pub peer_value: http::HeaderValue,
    /// The buffer its requests render their zone keys into (`limit::keys::Keys`), lent
    /// to one request at a time: a keep-alive connection's requests allocate none.
    keys: std::sync::Mutex<Vec<u8>>,
    /// Turns true when the connection's worker drains: a held request ends then.
    pub(super) stop: tokio::sync::watch::Receiver<bool>,
    /// What its TLS handshake told (SNI, client certificate, `$ja4`); `None` over plain
    /// TCP.
    pub tls: Option<Box<crate::tls::Peer>>,
    /// The `Alt-Svc` its answers carry (HTTP/3 offered at its address), unless an answer
    /// has its own.
    pub alt_svc: Option<http::HeaderValue>,
    /// Its TLS version and cipher suite in OpenSSL's names (`$ssl_protocol`,
    /// `$ssl_cipher`); `None` over plain TCP.
    pub tls_names: Option<(&'static str, Option<&'static str>)>,
}

impl Conn {
    pub(crate) fn new(
        peer: SocketAddr,
        worker: usize,
        address: Address,
        server_port: u16,
        stop: tokio::sync::watch::Receiver<bool>,
    ) -> Conn {
        Conn {
            peer,
            worker,
            address,
            https: address.transport.is_secure(),
            server_port,
            peer_value: headers::ip_value(access::canonical(peer.ip())),
            keys: std::sync::Mutex::default(),
            stop,
            tls: None,
            alt_svc: None,
            tls_names: None,
        }
    }

    /// The connection's key buffer, lent to the request arriving (empty while another of
    /// its requests holds it: an HTTP/2 stream then has one of its own).
    pub(crate) fn key_buffer(&self) -> Vec<u8> {
        self.keys
            .lock()
            .map(|mut keys| std::mem::take(&mut *keys))
            .unwrap_or_default()
    }

    /// Gives the key buffer back once the request's limits are decided. One that grew
    /// past [`KEPT_KEY_BUFFER`] is dropped: an idle connection holds no client's long key.
    pub(crate) fn return_key_buffer(&self, buffer: Vec<u8>) {
        if buffer.capacity() <= KEPT_KEY_BUFFER {
            if let Ok(mut keys) = self.keys.lock() {
                *keys = buffer;
            }
        }
    }
}

/// The most a connection keeps of its key buffer between requests, in bytes.
const KEPT_KEY_BUFFER: usize = 1024;
