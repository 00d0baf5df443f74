//! A worker: one thread with its own single-threaded runtime, accepting on its own
//! listening sockets and serving its connections start to end. Nothing is shared
//! between workers on the request path but the snapshot and upstream health. Sockets
//! arrive over a channel, at start and on reload, each with its own stop signal: a
//! listener removed by a reload stops accepting, and its connections drain, while the
//! others serve on.
//!
//! Accepting counts each connection against the process's descriptors
//! (`server/descriptors.rs`); one beyond the data plane's share closes the worker's oldest
//! idle connections (`server/shed.rs`), or is closed at once when none is idle.

use std::net::SocketAddr;
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::work::{Listen, Work};
use super::{conn, handshake};
use super::proxy_protocol;
use super::descriptors::{self, Descriptors};
use super::shed::Sheddable;
use super::timeouts::ConnState;
use crate::config::{Address, Transport};
use crate::log::repeats::Repeats;
use crate::metrics::cells::{Gauge, PerWorker};
use crate::proxy::Conn;
use crate::state::GatewayState;

/// Accepts on every socket `listen` brings until `shutdown` turns true (the gateway
/// stops every socket first), then gives open connections until the snapshot's
/// `shutdown_timeout` to finish. Connections count against `descriptors`.
pub(super) fn run(
    worker: usize,
    mut listen: mpsc::UnboundedReceiver<Work>,
    state: Arc<GatewayState>,
    shutdown: watch::Receiver<bool>,
    descriptors: Arc<Descriptors>,
) -> std::io::Result<()> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        // Every task holds a sender; `recv` returns `None` once all have ended.
        let (alive, mut all_done) = mpsc::channel::<()>(1);
        state.runtimes.register(worker, tokio::runtime::Handle::current(), alive.clone());
        let sheddable = Arc::new(Sheddable::default());
        tokio::spawn(heartbeat(worker, state.clone(), sheddable.clone()));
        let mut stop = shutdown.clone();
        loop {
            let next = tokio::select! {
                Some(next) = listen.recv() => next,
                _ = stop.wait_for(|stop| *stop) => break,
            };
            let Listen {
                listener,
                stop,
                open,
                address,
                http2,
            } = match next {
                Work::Tcp(listen) => listen,
                Work::Quic(quic) => {
                    tokio::spawn(super::quic::run(quic, worker, state.clone(), alive.clone()));
                    continue;
                }
            };
            let addr = listener.local_addr().ok();
            match listener
                .set_nonblocking(true)
                .and_then(|()| tokio::net::TcpListener::from_std(listener))
            {
                Ok(listener) => {
                    let accepting = Accepting {
                        worker,
                        state: state.clone(),
                        stop,
                        alive: alive.clone(),
                        open,
                        address,
                        http2,
                        descriptors: descriptors.clone(),
                        sheddable: sheddable.clone(),
                    };
                    tokio::spawn(accepting.run(listener));
                }
                Err(err) => tracing::error!(worker, ?addr, error = %err, "cannot accept"),
            }
        }
        drop(alive);
        let limit = state.snapshot.load().conn.shutdown_timeout;
        if tokio::time::timeout(limit, all_done.recv()).await.is_err() {
            tracing::warn!(
                worker,
                "shutdown_timeout reached; closing the connections still open"
            );
        }
        Ok(())
    })
}

/// Keeps a timer at most [`HEARTBEAT`] away. tokio's timer wakes its own driver
/// (an eventfd write, a system call) whenever a timer is armed that expires before the
/// driver's next planned wake-up; with nothing else pending, every request's
/// `read_timeout` and every keep-alive reset would do that. A short periodic timer
/// makes those long timers "later than the next wake-up", so arming them costs no
/// system call. Measured: ~0.45 eventfd writes per proxied request without it.
///
/// Each beat, it asks the HTTP/1.1 connections that have waited for a request
/// [`LET_GO_AFTER`] or longer to let their buffers go.
///
/// Every [`TRIM_EVERY`] beats it lets go of what a busy spell left behind: the HTTP/1.1
/// buffers this worker kept spare that no connection took since the last time, the
/// buffers of upstream connections that idled as long, and the entries of client
/// connections that ended.
async fn heartbeat(worker: usize, state: Arc<GatewayState>, sheddable: Arc<Sheddable>) {
    let mut tick = tokio::time::interval(HEARTBEAT);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    for beat in 1u64.. {
        tick.tick().await;
        sheddable.let_go_idle(tokio::time::Instant::now() - LET_GO_AFTER);
        if beat % TRIM_EVERY == 0 {
            super::h1::trim_spares();
            let snapshot = state.snapshot.load();
            for group in snapshot.upstreams.iter().chain(&snapshot.auth_services) {
                group.trim_idle(worker);
            }
            sheddable.prune();
        }
    }
}

const HEARTBEAT: Duration = Duration::from_millis(500);
/// Beats between two trims of the spare buffers: 2 s.
const TRIM_EVERY: u64 = 4;
/// How long an idle HTTP/1.1 connection keeps its buffers (it lets them go at the first
/// beat after): far longer than a busy keep-alive connection waits between two requests,
/// short enough that thousands of idle ones hold none.
const LET_GO_AFTER: Duration = Duration::from_millis(500);

/// One listening socket's accept loop, and what each connection it accepts gets.
struct Accepting {
    worker: usize,
    state: Arc<GatewayState>,
    stop: watch::Receiver<bool>,
    /// Held by every task, so the worker knows when all have ended.
    alive: mpsc::Sender<()>,
    open: Arc<PerWorker<Gauge>>,
    address: Address,
    http2: Arc<AtomicBool>,
    descriptors: Arc<Descriptors>,
    /// The worker's connections, every listener's.
    sheddable: Arc<Sheddable>,
}

impl Accepting {
    async fn run(mut self, listener: tokio::net::TcpListener) {
        let repeats = Repeats::default();
        let server_port = listener.local_addr().map_or(0, |addr| addr.port());
        loop {
            let accepted = tokio::select! {
                accepted = listener.accept() => accepted,
                _ = self.stop.wait_for(|stop| *stop) => return,
            };
            match accepted {
                Ok((stream, peer)) => {
                    let (slot, over) = self.descriptors.take(stream.as_raw_fd());
                    if over {
                        let room = self.make_room(&repeats);
                        // What was shed closes on its own task: before the next accept,
                        // or a burst of accepts would outrun the closes.
                        tokio::task::yield_now().await;
                        if !room {
                            // `stream` closes: refused rather than the process running out.
                            continue;
                        }
                    }
                    let _ = stream.set_nodelay(true);
                    self.spawn(stream, peer, server_port, slot);
                }
                Err(err) => {
                    if descriptors::exhausted(&err) {
                        self.sheddable.shed_oldest(tokio::time::Instant::now());
                    }
                    // Out of file descriptors and the like: back off instead of spinning,
                    // and do not fill the log with it either.
                    if let Some(n) = repeats.admit("accept", std::time::Instant::now()) {
                        tracing::error!(error = %err, left_out = n, "accept failed");
                    }
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    }

    /// Serves an accepted connection on its own task, holding its descriptor `slot`:
    /// after its PROXY header on a listener that reads one, and its TLS handshake on a
    /// `listen_tls` one.
    fn spawn(&self, mut stream: tokio::net::TcpStream, peer: SocketAddr, server_port: u16, slot: descriptors::Slot) {
        let http2 = self.http2.load(Ordering::Relaxed);
        let address = Address { http2, ..self.address };
        let proxied = {
            let snapshot = self.state.snapshot.load();
            let settings = &snapshot.proxy_protocol;
            (settings.reads(&address)).then(|| (settings.clone(), snapshot.conn.client_header_timeout))
        };
        let (worker, stop) = (self.worker, self.stop.clone());
        let (state, alive) = (self.state.clone(), self.alive.clone());
        let open = self.open.get(self.worker).clone();
        open.add(1);
        let sheddable = self.sheddable.clone();
        // Its polls read the clock once each (`clock`).
        tokio::spawn(crate::clock::Polled::new(async move {
            let client = match proxied {
                None => Some(peer),
                // Boxed: the header's reading is no part of other connections' tasks.
                Some((settings, within)) => {
                    let read = proxy_protocol::client(&mut stream, peer, &address, &settings, within);
                    let read = Box::pin(read).await;
                    read.inspect_err(|refused| tracing::debug!(%peer, %refused, "connection closed unserved")).ok()
                }
            };
            if let Some(client) = client {
                let conn = Conn::new(client, worker, address, server_port, stop.clone());
                match address.transport {
                    Transport::Tcp => {
                        let conn_state = ConnState::new();
                        sheddable.add(&conn_state);
                        // Shared (and HTTP/2's streams share it): the task's layers of
                        // futures each keep a pointer, not a copy.
                        conn::serve(stream, Arc::new(conn), conn_state, state, stop, None, http2).await;
                    }
                    // Boxed: a plain connection's task does not carry a TLS connection's
                    // state; its `ConnState` is made once the handshake is over.
                    Transport::Tls => {
                        Box::pin(handshake::serve_tls(stream, http2, conn, state, stop, sheddable)).await
                    }
                }
            }
            open.add(-1);
            drop((slot, alive));
        }));
    }

    /// A connection was accepted beyond the data plane's share of descriptors: closes
    /// the worker's oldest idle connections (or counts on one closed already). `false`
    /// when none is idle (the new one is then refused). Logged at most once per kind per
    /// `log::repeats::INTERVAL`.
    fn make_room(&self, repeats: &Repeats) -> bool {
        let room = self.sheddable.make_room(tokio::time::Instant::now());
        let (kind, shed) = match room {
            Some(0) => return true,
            Some(shed) => ("shed", shed),
            None => ("refused", 0),
        };
        if let Some(left_out) = repeats.admit(kind, std::time::Instant::now()) {
            let (worker, open) = (self.worker, self.descriptors.open());
            let (share, limit) = (self.descriptors.share(), self.descriptors.limit());
            if shed > 0 {
                tracing::warn!(
                    worker,
                    open,
                    share,
                    limit,
                    shed,
                    left_out,
                    "client connections are not enough, closing the oldest idle ones"
                );
            } else {
                tracing::warn!(
                    worker,
                    open,
                    share,
                    limit,
                    left_out,
                    "client connections are not enough and none is idle: refusing new ones"
                );
            }
        }
        room.is_some()
    }
}
