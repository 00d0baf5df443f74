//! Listening sockets: one per worker per address, bound with `SO_REUSEPORT` so the
//! kernel spreads new connections over the workers without a shared accept lock; and the
//! addresses in force, each opened at start or by a reload and closed by a reload.
//!
//! `SO_REUSEPORT` would as gladly share an address with another process of the same
//! user that sets it too: a second tollgate started by mistake on the same file would
//! get half the clients, each half limited apart (every limit silently doubled). So an
//! address is first probed with a socket without `SO_REUSEPORT`, which Linux refuses to
//! bind where any socket listens, whoever's and however bound (`0.0.0.0:80` covers
//! `127.0.0.1:80` too); then the workers' sockets are bound. Two instances started
//! within the same few microseconds could both pass the probe; nothing short of one
//! socket shared by every worker (and a shared accept queue) closes that window.

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use socket2::{Domain, Protocol, Socket, Type};
use tokio::sync::{mpsc, watch};

use super::work::{Listen, Work};
use crate::config::{Address, Transport};
use crate::metrics::Metrics;

const BACKLOG: i32 = 4096;

/// Whether an address may be served by another process too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sharing {
    /// No: binding fails (`AddrInUse`) where a socket listens already.
    Alone,
    /// Yes: a binary upgrade (`tollgate --upgrade`) starts beside the running tollgate
    /// and both accept until the old one stops; or a reload adds an address that one of
    /// the gateway's own covers.
    Beside,
}

/// Binds `workers` sockets to `addr`. When `addr` has port 0, the first socket's
/// port is used for the rest, so every worker listens on the same actual address
/// (a fresh port: no probe).
pub(super) fn bind(
    addr: SocketAddr,
    workers: usize,
    sharing: Sharing,
) -> io::Result<(SocketAddr, Vec<TcpListener>)> {
    if sharing == Sharing::Alone && addr.port() != 0 {
        probe(addr)?;
    }
    let first = bind_one(addr)?;
    let actual = first.local_addr()?;
    let mut listeners = vec![first];
    for _ in 1..workers.max(1) {
        listeners.push(bind_one(actual)?);
    }
    Ok((actual, listeners))
}

/// Binds `addr` without `SO_REUSEPORT`, and lets it go: `AddrInUse` if a socket
/// listens there. With `SO_REUSEADDR`, as the workers' sockets: the connections of an
/// earlier run still in `TIME_WAIT` are no obstacle (Linux's rule is that two sockets with
/// `SO_REUSEADDR` share a port unless the one bound first listens).
fn probe(addr: SocketAddr) -> io::Result<()> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_reuse_address(true)?;
    socket.bind(&addr.into())
}

/// Whether a socket listening on `ours` makes the probe of `addr` fail: the same port
/// and family, and the same address or either one the wildcard.
pub(super) fn covers(ours: SocketAddr, addr: SocketAddr) -> bool {
    ours.port() == addr.port()
        && ours.is_ipv4() == addr.is_ipv4()
        && (ours.ip() == addr.ip() || ours.ip().is_unspecified() || addr.ip().is_unspecified())
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
pub(super) struct Bound {
    configured: Address,
    actual: SocketAddr,
    sockets: Vec<TcpListener>,
}

/// An address in force: its sockets accept until [`Listening::close`].
pub(super) struct Listening {
    /// As configured (port 0 unresolved): what a reload compares.
    pub configured: Address,
    pub actual: SocketAddr,
    stop: watch::Sender<bool>,
    /// `configured.http2`, as its workers read it for each connection they accept.
    http2: Arc<AtomicBool>,
}

impl Bound {
    /// Binds `addr` once per worker (see [`bind`]): a busy port fails here, before
    /// anything changes.
    pub(super) fn new(configured: Address, workers: usize, sharing: Sharing) -> io::Result<Bound> {
        let (actual, sockets) = bind(configured.addr, workers, sharing)?;
        Ok(Bound {
            configured,
            actual,
            sockets,
        })
    }

    /// Hands each worker its socket: accepting starts. Open connections are counted
    /// in `metrics` under the actual address.
    pub(super) fn serve(self, workers: &[mpsc::UnboundedSender<Work>], metrics: &Metrics) -> Listening {
        let (stop, _) = watch::channel(false);
        let http2 = Arc::new(AtomicBool::new(self.configured.http2));
        let open = metrics.connections(&self.actual.to_string());
        for (worker, listener) in workers.iter().zip(self.sockets) {
            // A worker that has ended (shutting down) no longer needs it.
            let _ = worker.send(Work::Tcp(Listen {
                listener,
                stop: stop.subscribe(),
                open: open.clone(),
                address: self.configured,
                http2: http2.clone(),
            }));
        }
        tracing::info!(addr = %self.actual, tls = self.configured.transport == Transport::Tls, "listening");
        Listening {
            configured: self.configured,
            actual: self.actual,
            stop,
            http2,
        }
    }
}

impl Listening {
    /// Stops accepting at once; the connections it accepted finish what they are doing
    /// and close.
    pub(super) fn close(&self) {
        self.stop.send_replace(true);
    }

    /// Whether `wanted` can be served on this listener's sockets: the same address and
    /// transport (what else a listener table says is a setting, changed in place).
    pub(super) fn serves(&self, wanted: &Address) -> bool {
        self.configured.addr == wanted.addr && self.configured.transport == wanted.transport
    }

    /// Takes `wanted`'s settings ([`Listening::serves`] it): its connections accepted
    /// from now on are served by them.
    pub(super) fn retune(&mut self, wanted: Address) {
        self.configured = wanted;
        self.http2.store(wanted.http2, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(text: &str) -> SocketAddr {
        text.parse().expect("an address")
    }

    #[test]
    fn an_address_another_process_listens_on_is_refused_unless_shared() {
        // Bound as another tollgate's workers would be: SO_REUSEPORT, listening.
        let (taken, _theirs) = bind(addr("127.0.0.1:0"), 2, Sharing::Alone).expect("bound");
        let refused = bind(taken, 2, Sharing::Alone)
            .map(|_| ())
            .expect_err("refused");
        assert_eq!(refused.kind(), io::ErrorKind::AddrInUse);
        let wildcard = SocketAddr::new([0, 0, 0, 0].into(), taken.port());
        assert!(bind(wildcard, 1, Sharing::Alone).is_err());
        let (shared, ours) = bind(taken, 2, Sharing::Beside).expect("shared");
        assert_eq!((shared, ours.len()), (taken, 2));
    }

    #[test]
    fn an_address_free_again_is_bound_while_its_connections_linger() {
        let (addr, first) = bind(addr("127.0.0.1:0"), 1, Sharing::Alone).expect("bound");
        let client = std::net::TcpStream::connect(addr).expect("connected");
        let (server, _) = first[0].accept().expect("accepted");
        // The server closes first: its side of the connection stays in TIME_WAIT.
        drop(server);
        drop(first);
        drop(client);
        assert!(bind(addr, 1, Sharing::Alone).is_ok());
    }

    #[test]
    fn a_wildcard_covers_every_address_of_its_port_and_family() {
        let any = addr("0.0.0.0:80");
        assert!(covers(any, addr("127.0.0.1:80")));
        assert!(covers(addr("127.0.0.1:80"), any));
        assert!(covers(addr("127.0.0.1:80"), addr("127.0.0.1:80")));
        assert!(!covers(addr("127.0.0.1:80"), addr("127.0.0.2:80")));
        assert!(!covers(any, addr("0.0.0.0:81")));
        assert!(!covers(addr("[::]:80"), any));
    }
}
