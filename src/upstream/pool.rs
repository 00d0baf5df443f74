//! Connections to upstream servers: connect with a timeout, keep idle ones for reuse.
//!
//! Each worker thread has its own idle list per server, so a pooled connection is
//! always driven by the runtime that opened it (no cross-thread wake-ups) and the
//! lock is never contended. `keepalive` bounds each list, as nginx's `keepalive N`.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::Group;
use crate::body::RequestBody;

/// The sending half of one HTTP/1.1 connection to an upstream server.
pub type Sender = http1::SendRequest<RequestBody>;

/// Largest upstream response header block accepted (a bigger one is a bad response: 502).
const MAX_RESPONSE_HEADER_BYTES: usize = 64 * 1024;

/// Idle keep-alive connections of one server, one list per worker.
pub struct IdlePool {
    per_worker: Box<[Mutex<Vec<Sender>>]>,
    keepalive: usize,
}

impl IdlePool {
    pub fn new(workers: usize, keepalive: usize) -> IdlePool {
        IdlePool {
            per_worker: (0..workers.max(1))
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            keepalive,
        }
    }

    /// The most recently used idle connection that is still open (it is the least
    /// likely to have been closed by the server). It may not be ready yet: a
    /// connection is checked in as soon as its response body has been read, a moment
    /// before hyper has noticed; [`checkout`] waits for that.
    fn take(&self, worker: usize) -> Option<Sender> {
        let list = self.per_worker.get(worker)?;
        let mut idle = list.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while let Some(sender) = idle.pop() {
            if !sender.is_closed() {
                return Some(sender);
            }
        }
        None
    }

    /// Keeps a connection for reuse, or drops (closes) it when the list is full.
    pub fn put(&self, worker: usize, sender: Sender) {
        let Some(list) = self.per_worker.get(worker) else {
            return;
        };
        let mut idle = list.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < self.keepalive {
            idle.push(sender);
        }
    }
}

/// Why no connection could be had. No byte of the request has been sent.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("connect to {addr} timed out after {after:?}")]
    Timeout { addr: SocketAddr, after: Duration },
    #[error("connect to {addr} failed: {source}")]
    Io {
        addr: SocketAddr,
        source: std::io::Error,
    },
    #[error("HTTP handshake with {addr} failed: {source}")]
    Handshake {
        addr: SocketAddr,
        source: hyper::Error,
    },
}

/// A connection to `server`: an idle pooled one if `reuse` allows and one is left
/// (`true` in the result), else a new one.
pub async fn checkout(
    group: &Group,
    server: usize,
    worker: usize,
    reuse: bool,
) -> Result<(Sender, bool), ConnectError> {
    let srv = &group.servers[server];
    while let Some(mut sender) = reuse.then(|| srv.pool.take(worker)).flatten() {
        // Ready at once, or as soon as hyper has finished the previous exchange.
        if let Ok(Ok(())) = tokio::time::timeout(group.connect_timeout, sender.ready()).await {
            return Ok((sender, true));
        }
    }
    Ok((connect(srv.addr, group.connect_timeout).await?, false))
}

/// Opens a new HTTP/1.1 connection and spawns its driver on the current runtime.
pub async fn connect(addr: SocketAddr, timeout: Duration) -> Result<Sender, ConnectError> {
    let stream = match tokio::time::timeout(timeout, TcpStream::connect(addr)).await {
        Ok(Ok(stream)) => stream,
        Ok(Err(source)) => return Err(ConnectError::Io { addr, source }),
        Err(_) => {
            return Err(ConnectError::Timeout {
                addr,
                after: timeout,
            })
        }
    };
    // Small requests and responses must not wait for Nagle.
    let _ = stream.set_nodelay(true);
    let (sender, conn) = http1::Builder::new()
        .max_header_size(MAX_RESPONSE_HEADER_BYTES)
        .max_headers(256)
        .handshake(TokioIo::new(stream))
        .await
        .map_err(|source| ConnectError::Handshake { addr, source })?;
    tokio::spawn(async move {
        if let Err(err) = conn.with_upgrades().await {
            tracing::debug!(upstream = %addr, error = %err, "upstream connection ended");
        }
    });
    Ok(sender)
}

/// A connection whose response is still being read, to go back to its pool once the
/// body has been read to the end (an HTTP/1.1 connection carries one exchange at a
/// time). Dropped without [`Checkin::finish`], the connection is closed.
pub struct Checkin {
    group: Arc<Group>,
    server: usize,
    worker: usize,
    sender: Sender,
}

impl Checkin {
    pub fn new(group: Arc<Group>, server: usize, worker: usize, sender: Sender) -> Checkin {
        Checkin {
            group,
            server,
            worker,
            sender,
        }
    }

    /// The response was read whole: keep the connection for the next request.
    pub fn finish(self) {
        self.group.servers[self.server]
            .pool
            .put(self.worker, self.sender);
    }
}
