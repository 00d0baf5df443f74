//! The admin API's listener (`[admin] listen`), on a thread and runtime of its own so that
//! it answers while the workers are busy and its requests never count among theirs.
//! `crate::admin` makes the answers; this is the shell around them, and what bounds it:
//!
//! - its connections are held to `[server]`'s `client_header_timeout`,
//!   `keepalive_timeout` and `send_timeout`, by the data plane's own reads and writes
//!   (`server/timeouts.rs`): a partial head gets 408 and the close, an idle connection
//!   the close;
//! - at most `[admin] max_connections` are open at once; the next are closed as soon as
//!   they are accepted, and so is every one while the process's descriptor reserve is in
//!   use (`server/descriptors.rs`): the admin API gives way before the data plane does.

use std::convert::Infallible;
use std::io;
use std::os::fd::AsRawFd;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Request;
use http_body::{Body, Frame, SizeHint};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use tokio::sync::watch;

use super::descriptors::Descriptors;
use super::timeouts::{ConnLimits, ConnState, RequestGuard, TimedIo};
use crate::log::repeats::Repeats;
use crate::state::GatewayState;

/// The running admin listener; stops (after the request at hand) when dropped.
pub(super) struct AdminListener {
    /// Where it listens, port 0 resolved: for the tests (`Gateway::admin_addr`).
    #[cfg(feature = "testing")]
    addr: std::net::SocketAddr,
    stop: watch::Sender<bool>,
    thread: Option<JoinHandle<()>>,
}

impl AdminListener {
    /// Serves `listener` (bound already, so that a busy port fails the start) on a
    /// thread, at most `max_connections` at once.
    pub(super) fn start(
        listener: std::net::TcpListener,
        max_connections: usize,
        state: Arc<GatewayState>,
        descriptors: Arc<Descriptors>,
    ) -> io::Result<AdminListener> {
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = watch::channel(false);
        let admission = Admission {
            most: max_connections,
            open: Arc::default(),
            descriptors,
        };
        let thread = std::thread::Builder::new()
            .name("tollgate-admin".into())
            .spawn(move || serve(listener, admission, state, stopped))?;
        tracing::info!(%addr, "admin API listening");
        Ok(AdminListener {
            #[cfg(feature = "testing")]
            addr,
            stop,
            thread: Some(thread),
        })
    }

    #[cfg(feature = "testing")]
    pub(super) fn addr(&self) -> std::net::SocketAddr {
        self.addr
    }
}

impl Drop for AdminListener {
    fn drop(&mut self) {
        self.stop.send_replace(true);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Which admin connections may be served.
struct Admission {
    most: usize,
    open: Arc<AtomicUsize>,
    descriptors: Arc<Descriptors>,
}

/// One admin connection counted; uncounted when dropped.
struct Held(Arc<AtomicUsize>);

impl Drop for Held {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Admission {
    /// The connection accepted on descriptor `fd` counted, or why it is refused.
    fn admit(&self, fd: i32) -> Result<Held, &'static str> {
        if self.descriptors.in_reserve(fd) {
            return Err("the process is short of file descriptors");
        }
        let open = self.open.fetch_add(1, Ordering::Relaxed);
        let held = Held(self.open.clone());
        if open >= self.most {
            return Err("max_connections are open");
        }
        Ok(held)
    }
}

fn serve(
    listener: std::net::TcpListener,
    admission: Admission,
    state: Arc<GatewayState>,
    mut stop: watch::Receiver<bool>,
) {
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(err) => {
            tracing::error!(error = %err, "admin API cannot start");
            return;
        }
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::from_std(listener) {
            Ok(listener) => listener,
            Err(err) => {
                tracing::error!(error = %err, "admin API cannot listen");
                return;
            }
        };
        let failures = Repeats::default();
        // The history is the listener's: made whole here, sampled by a task beside the
        // connections, and dropped with the runtime.
        let history = Arc::new(crate::admin::History::default());
        tokio::spawn({
            let (history, state) = (history.clone(), state.clone());
            async move { crate::admin::keep_history(&history, &state).await }
        });
        loop {
            let (stream, _) = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Out of file descriptors and the like, as a worker's accept.
                        if let Some(n) = failures.admit("accept", Instant::now()) {
                            tracing::warn!(error = %err, left_out = n, "admin API accept failed");
                        }
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                },
                _ = stop.wait_for(|stop| *stop) => return,
            };
            match admission.admit(stream.as_raw_fd()) {
                Ok(held) => {
                    tokio::spawn(connection(stream, state.clone(), history.clone(), held));
                }
                Err(why) => {
                    // `stream` closes unanswered.
                    if let Some(n) = failures.admit(why, Instant::now()) {
                        let most = admission.most;
                        tracing::warn!(most, left_out = n, "admin API refuses connections: {why}");
                    }
                }
            }
        }
    });
}

/// One admin connection, HTTP/1.1, with the data plane's connection timeouts.
async fn connection(
    stream: tokio::net::TcpStream,
    state: Arc<GatewayState>,
    history: Arc<crate::admin::History>,
    _held: Held,
) {
    let settings = state.snapshot.load().conn;
    let conn_state = ConnState::new();
    let limits = ConnLimits {
        header: settings.client_header_timeout,
        keepalive: settings.keepalive_timeout,
        send: settings.send_timeout,
    };
    let mut io = TimedIo::new(stream, conn_state.clone(), limits);
    io.park_while_busy();
    let service = service_fn(move |req: Request<Incoming>| {
        // Busy from the complete head until the answer is sent: no timeout but
        // `send_timeout`.
        let request = conn_state.begin();
        let (state, history) = (state.clone(), history.clone());
        async move {
            let answer = crate::admin::answer_async(&req, &state, &history).await;
            Ok::<_, Infallible>(answer.map(|body| Answer {
                body,
                _request: request,
            }))
        }
    });
    let _ = http1::Builder::new()
        .serve_connection(TokioIo::new(io), service)
        .await;
}

/// An answer's body, holding its request until the body is sent (the keep-alive clock
/// starts then).
struct Answer {
    body: Full<Bytes>,
    _request: RequestGuard,
}

impl Body for Answer {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        Pin::new(&mut self.get_mut().body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}
