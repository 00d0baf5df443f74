//! Listening sockets: one per worker per address, bound with `SO_REUSEPORT` so the
//! kernel spreads new connections over the workers without a shared accept lock; and the
//! addresses in force, each opened at start or by a reload and closed by a reload.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::{mpsc, watch};

use super::worker::Listen;
use crate::config::Address;
use crate::metrics::Metrics;

const BACKLOG: i32 = 4096;

/// Binds `workers` sockets to `addr`. When `addr` has port 0, the first socket's
/// port is used for the rest, so every worker listens on the same actual address.
pub fn bind(addr: SocketAddr, workers: usize) -> io::Result<(SocketAddr, Vec<TcpListener>)> {
    let first = bind_one(addr)?;
    let actual = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..workers.max(1) {
        listeners.push(bind_one(actual)?);
    }
    Ok((actual, listeners))
}

fn bind_one(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        // `[::]:80` and `0.0.0.0:80` can both be listened on, as nginx's ipv6only=on.
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.set_tcp_nodelay(true)?;
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(BACKLOG)?;
    Ok(socket.into())
}

/// A `listen` or `listen_tls` address bound for every worker, not yet accepting.
pub struct Bound {
    configured: Address,
    actual: SocketAddr,
    sockets: Vec<TcpListener>,
}

/// An address in force: its sockets accept until [`Listening::close`].
pub struct Listening {
    /// As configured (port 0 unresolved): what a reload compares.
    pub configured: Address,
    pub actual: SocketAddr,
    stop: watch::Sender<bool>,
}

impl Bound {
    /// Binds `addr` once per worker (see [`bind`]): a busy port fails here, before
    /// anything changes.
    pub fn new(configured: Address, workers: usize) -> io::Result<Bound> {
        let (actual, sockets) = bind(configured.addr, workers)?;
        Ok(Bound {
            configured,
            actual,
            sockets,
        })
    }

    /// Hands each worker its socket: accepting starts. Open connections are counted
    /// in `metrics` under the actual address.
    pub fn serve(self, workers: &[mpsc::UnboundedSender<Listen>], metrics: &Metrics) -> Listening {
        let (stop, _) = watch::channel(false);
        let open = metrics.connections(&self.actual.to_string());
        for (worker, listener) in workers.iter().zip(self.sockets) {
            // A worker that has ended (shutting down) no longer needs it.
            let _ = worker.send(Listen {
                listener,
                stop: stop.subscribe(),
                open: open.clone(),
                address: self.configured,
            });
        }
        tracing::info!(addr = %self.actual, tls = self.configured.tls, "listening");
        Listening {
            configured: self.configured,
            actual: self.actual,
            stop,
        }
    }
}

impl Listening {
    /// Stops accepting at once; the connections it accepted finish what they are doing
    /// and close.
    pub fn close(&self) {
        self.stop.send_replace(true);
    }
}
