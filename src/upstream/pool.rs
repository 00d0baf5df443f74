//! Connections to upstream servers: connect with a timeout, keep idle ones for reuse.
//!
//! Each worker thread has its own idle list per server, so a pooled connection is
//! only ever used by the thread that opened it and the lock is never contended.
//! `keepalive` bounds each list, as nginx's `keepalive N`. A connection comes back
//! when its response body has been read to the end and HTTP/1.1 keep-alive allows it
//! ([`super::h1::Body::take_reusable`]). A connection that stayed idle from one trim to
//! the next ([`IdlePool::trim`], every few seconds) lets go of its buffers, as nginx's
//! cached upstream connections hold none: kept connections cost a socket, not 10 KB.

use std::sync::Mutex;
use std::time::Duration;

use super::h1::{ConnectError, UpstreamConn};
use super::Group;

/// Idle keep-alive connections of one server, one list per worker.
pub struct IdlePool {
    per_worker: Box<[Mutex<Idle>]>,
    keepalive: usize,
}

/// One worker's idle connections, the most recently used last, and how many at the
/// bottom of the list no request took since the last trim: the fewest there were since.
#[derive(Default)]
struct Idle {
    conns: Vec<UpstreamConn>,
    untouched: usize,
}

impl IdlePool {
    pub(crate) fn new(workers: usize, keepalive: usize) -> IdlePool {
        IdlePool {
            per_worker: (0..workers.max(1))
                .map(|_| Mutex::new(Idle::default()))
                .collect(),
            keepalive,
        }
    }

    /// The most recently used idle connection that still looks usable (it is the
    /// least likely to have been closed by the server).
    fn take(&self, worker: usize) -> Option<UpstreamConn> {
        let mut idle = self.lock(worker)?;
        let Idle { conns, untouched } = &mut *idle;
        while let Some(mut conn) = conns.pop() {
            *untouched = (*untouched).min(conns.len());
            if conn.is_reusable() {
                return Some(conn);
            }
        }
        None
    }

    /// Keeps a connection for reuse, or drops (closes) it when the list is full.
    pub(crate) fn put(&self, worker: usize, conn: UpstreamConn) {
        let Some(mut idle) = self.lock(worker) else {
            return;
        };
        if idle.conns.len() < self.keepalive {
            idle.conns.push(conn);
        }
    }

    /// Lets the connections that no request took since the last trim go of their buffers
    /// (they stay open, and take buffers again when next used). Called on `worker`'s
    /// thread.
    pub(crate) fn trim(&self, worker: usize) {
        let Some(mut idle) = self.lock(worker) else {
            return;
        };
        let Idle { conns, untouched } = &mut *idle;
        for conn in &mut conns[..*untouched] {
            conn.shed_buffers();
        }
        *untouched = conns.len();
    }

    fn lock(&self, worker: usize) -> Option<std::sync::MutexGuard<'_, Idle>> {
        let list = self.per_worker.get(worker)?;
        Some(list.lock().unwrap_or_else(|poisoned| poisoned.into_inner()))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn connections_no_request_took_between_two_trims_let_go_of_their_buffers() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let pool = IdlePool::new(1, 8);
        let mut accepted = Vec::new();
        for _ in 0..3 {
            let conn = tokio::net::TcpStream::connect(addr).await.unwrap();
            accepted.push(listener.accept().await.unwrap());
            pool.put(0, UpstreamConn::new(conn));
        }
        let rooms = |pool: &IdlePool| -> Vec<usize> {
            let idle = pool.lock(0).unwrap();
            idle.conns.iter().map(UpstreamConn::read_room).collect()
        };
        pool.trim(0);
        assert!(rooms(&pool).iter().all(|&room| room > 0), "the first trim only counts");
        // One request takes the newest and puts it back.
        let conn = pool.take(0).unwrap();
        pool.put(0, conn);
        pool.trim(0);
        let after = rooms(&pool);
        assert_eq!(after[..2], [0, 0], "the two never taken let go: {after:?}");
        assert!(after[2] > 0, "the one taken keeps its buffer: {after:?}");
        // A connection that let go is usable: the next trim finds it, and it still counts.
        assert!(pool.take(0).is_some());
    }
}
