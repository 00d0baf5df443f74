//! `send_timeout` for HTTP/2 streams: a stream whose client has not taken any of its
//! response for that long is reset, and with it go its response body and the upstream
//! connection the body reads from.
//!
//! An HTTP/2 client can stop taking one stream's data without stopping the connection:
//! it just sends no WINDOW_UPDATE. The socket stays writable, so the connection-level
//! write timeout (`server/timeouts.rs`) never sees it, and hyper waits for flow
//! control forever. So each stream task that hyper spawns is wrapped ([`StreamExec`]) in
//! a [`Watched`] future, which knows from the response body's [`SendWatch`] who the
//! stream waits on:
//!
//! - the body's last poll returned `Pending`: the upstream (its `read_timeout` applies);
//! - otherwise hyper holds a chunk it cannot send (the client's window is shut), or the
//!   stream task woke without polling the body, which hyper does only while it waits
//!   for window: the client. A chunk taken since the last look is progress and starts
//!   the clock again.
//!
//! Before the response head there is no body, and nothing is timed here (the pipeline's
//! own delays and the upstream's timeouts apply).

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use pin_project_lite::pin_project;
use tokio::task::futures::TaskLocalFuture;
use tokio::time::{Instant, Sleep};

tokio::task_local! {
    /// The watch of the stream task being polled; the response body takes it.
    static STREAM: Arc<SendWatch>;
}

/// What a stream's response body tells its [`Watched`] task.
#[derive(Debug, Default)]
pub(super) struct SendWatch {
    /// The body exists (the response head has gone out).
    attached: AtomicBool,
    /// Frames the body has yielded.
    frames: AtomicU64,
    /// The body's last poll returned `Pending`: it waits on the upstream.
    pending: AtomicBool,
    /// The answer's own `send_timeout` (its location's) in milliseconds; 0: the
    /// connection's.
    own_ms: AtomicU64,
}

impl SendWatch {
    /// The watch of the HTTP/2 stream being served right now, if this is one; marks
    /// the body as there.
    pub(super) fn current() -> Option<Arc<SendWatch>> {
        let watch = STREAM.try_with(Arc::clone).ok()?;
        watch.attached.store(true, Ordering::Relaxed);
        Some(watch)
    }

    /// The answer's location sets its own `send_timeout`.
    pub(super) fn own_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX).max(1);
        self.own_ms.store(ms, Ordering::Relaxed);
    }

    /// The body was polled: `pending` if it had nothing to give.
    pub(super) fn polled(&self, pending: bool) {
        self.pending.store(pending, Ordering::Relaxed);
        if !pending {
            self.frames.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// The executor hyper's HTTP/2 server spawns its stream tasks on: tokio's, with each
/// task [`Watched`].
#[derive(Clone, Copy, Debug)]
pub(super) struct StreamExec {
    pub send_timeout: Duration,
}

impl<F> hyper::rt::Executor<F> for StreamExec
where
    F: Future<Output = ()> + Send + 'static,
{
    fn execute(&self, task: F) {
        let watch = Arc::new(SendWatch::default());
        tokio::spawn(Watched {
            task: STREAM.scope(watch.clone(), task),
            watch,
            timeout: self.send_timeout,
            frames: 0,
            sleep: None,
        });
    }
}

pin_project! {
    /// A stream task that ends (dropping the stream, which resets it) once its client
    /// has taken nothing for `timeout`.
    pub(crate) struct Watched<F: 'static> {
        #[pin]
        task: TaskLocalFuture<Arc<SendWatch>, F>,
        watch: Arc<SendWatch>,
        timeout: Duration,
        // `watch.frames` at the last look.
        frames: u64,
        // Armed while the stream waits on its client.
        sleep: Option<Pin<Box<Sleep>>>,
    }
}

impl<F: Future<Output = ()>> Future for Watched<F> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.project();
        if this.task.poll(cx).is_ready() {
            return Poll::Ready(());
        }
        let watch = &**this.watch;
        if !watch.attached.load(Ordering::Relaxed) || watch.pending.load(Ordering::Relaxed) {
            *this.sleep = None;
            return Poll::Pending;
        }
        let frames = watch.frames.load(Ordering::Relaxed);
        let progressed = std::mem::replace(this.frames, frames) != frames;
        let timeout = match watch.own_ms.load(Ordering::Relaxed) {
            0 => *this.timeout,
            ms => Duration::from_millis(ms),
        };
        let sleep = match this.sleep {
            Some(sleep) => {
                if progressed {
                    sleep.as_mut().reset(Instant::now() + timeout);
                }
                sleep
            }
            None => this
                .sleep
                .insert(Box::pin(tokio::time::sleep(timeout))),
        };
        if sleep.as_mut().poll(cx).is_ready() {
            tracing::debug!("send_timeout: the client took none of a response for too long");
            return Poll::Ready(());
        }
        Poll::Pending
    }
}
