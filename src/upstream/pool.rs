//! Connections to upstream servers: connect with a timeout, keep idle ones for reuse.
//!
//! Each worker thread has its own idle list per server, so a pooled connection is
//! only ever used by the thread that opened it and the lock is never contended.
//! `keepalive` bounds each list, as nginx's `keepalive N`. A connection comes back
//! when its response body has been read to the end and HTTP/1.1 keep-alive allows it
//! ([`super::h1::Body::take_reusable`]).

use std::sync::Mutex;
use std::time::Duration;

use super::h1::{ConnectError, UpstreamConn};
use super::Group;

/// Idle keep-alive connections of one server, one list per worker.
pub struct IdlePool {
    per_worker: Box<[Mutex<Vec<UpstreamConn>>]>,
    keepalive: usize,
}

impl IdlePool {
    pub(crate) fn new(workers: usize, keepalive: usize) -> IdlePool {
        IdlePool {
            per_worker: (0..workers.max(1))
                .map(|_| Mutex::new(Vec::new()))
                .collect(),
            keepalive,
        }
    }

    /// The most recently used idle connection that still looks usable (it is the
    /// least likely to have been closed by the server).
    fn take(&self, worker: usize) -> Option<UpstreamConn> {
        let list = self.per_worker.get(worker)?;
        let mut idle = list.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        while let Some(mut conn) = idle.pop() {
            if conn.is_reusable() {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps a connection for reuse, or drops (closes) it when the list is full.
    pub(crate) fn put(&self, worker: usize, conn: UpstreamConn) {
        let Some(list) = self.per_worker.get(worker) else {
            return;
        };
        let mut idle = list.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        if idle.len() < self.keepalive {
            idle.push(conn);
        }
    }
}

/// A connection to send a request on, and where it came from.
pub(crate) struct Checkout {
    pub conn: UpstreamConn,
    /// Taken from the idle pool: the server may have closed it meanwhile.
    pub pooled: bool,
}

/// A connection to `server`: an idle pooled one if `reuse` allows and one is left,
/// else a new one, within `connect_timeout` (the location's, else the group's).
pub(crate) async fn checkout(
    group: &Group,
    server: usize,
    worker: usize,
    reuse: bool,
    connect_timeout: Duration,
) -> Result<Checkout, ConnectError> {
    let srv = &group.servers[server];
    if reuse {
        if let Some(conn) = srv.pool.take(worker) {
            return Ok(Checkout { conn, pooled: true });
        }
    }
    let conn = UpstreamConn::connect(srv.addr, srv.tls.as_ref(), connect_timeout).await?;
    Ok(Checkout {
        conn,
        pooled: false,
    })
}
