//! Listening sockets: one per worker per address, bound with `SO_REUSEPORT` so the
//! kernel spreads new connections over the workers without a shared accept lock.

use std::io;
use std::net::{SocketAddr, TcpListener};

use socket2::{Domain, Protocol, Socket, Type};

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
