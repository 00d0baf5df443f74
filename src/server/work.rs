//! What a worker is given to serve ([`Work`]): the sockets the gateway binds and hands to
//! its workers, apart from both so that neither side imports the other.

use std::net::{TcpListener, UdpSocket};
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use tokio::sync::watch;

use crate::config::Address;
use crate::metrics::cells::{Gauge, PerWorker};

/// What a worker is given to serve.
pub(super) enum Work {
    /// A TCP listening socket of its own.
    Tcp(Listen),
    /// A QUIC listener's socket (one worker serves it).
    Quic(QuicListen),
}

/// A listening socket for one worker, and the signal that stops it: accepting ends at
/// once, and its connections finish what they are doing and close.
pub(super) struct Listen {
    pub listener: TcpListener,
    pub stop: watch::Receiver<bool>,
    /// Open connections accepted on this address (`/metrics`).
    pub open: Arc<PerWorker<Gauge>>,
    /// The address as configured; over [`Transport::Tls`] (`listen_tls`), connections
    /// start with a TLS handshake.
    pub address: Address,
    /// Whether HTTP/2 is served here: the address's `http2`, which a reload may turn
    /// on or off without a new socket (one that took its place would reset the
    /// connections waiting in this one's accept queue).
    pub http2: Arc<AtomicBool>,
}

/// A QUIC listener's socket, for the worker that serves it.
pub(super) struct QuicListen {
    pub socket: UdpSocket,
    /// The `listen_tls` address it serves beside.
    pub address: Address,
    /// Turns true when it stops: its TCP address closed, `quic` was taken off it, or the
    /// gateway stops.
    pub stop: watch::Receiver<bool>,
}

