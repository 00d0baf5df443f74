//! Bodies that pass through the gateway: the client's request body as the pipeline reads
//! it ([`ClientBody`]), on its way upstream (read whole before an upstream is chosen, so
//! a slow upload never holds an upstream connection: in memory when small, in a file
//! ([`spool`]) when larger, or streamed when larger with `request_buffering` off), and
//! the response on its way back ([`ResponseBody`]), each with its timeouts.

use std::error::Error as StdError;
use std::fmt;
use std::future::Future;
use std::path::Path;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;
use tokio::time::{Instant, Sleep};

use crate::config::MaxBodySize;

pub(crate) mod client;
pub(crate) mod encode;
pub(crate) mod file;
mod rendered;
mod response;
mod spool;

pub(crate) use client::{ClientBody, ClientBodyError, H3Body};
pub(crate) use rendered::{Form, Rendered, MOST_NUMBERS};
pub(crate) use response::ResponseBody;
use spool::Spool;
pub(crate) use spool::Unspool;

/// Why a streamed body stopped early.
#[derive(Debug)]
pub enum BodyError {
    /// The client's body paused longer than `client_body_timeout`. (An upstream body
    /// that stalls past `read_timeout` is an [`BodyError::Upstream`] timeout.)
    Timeout,
    /// The client's body failed: reset, closed early, malformed framing.
    Stream(ClientBodyError),
    /// The client's body grew past `client_max_body_size`; the frame that would have
    /// crossed it was not passed on.
    TooLarge,
    /// The upstream's response body failed (reset, cut short, malformed, idle too long):
    /// `upstream::h1`'s error, which this module, below `upstream`, does not name. Boxed
    /// on the error path only.
    Upstream(Box<dyn StdError + Send + Sync>),
    /// The file a body is read into (`client_body_temp_path`) could not be made,
    /// written or read: the gateway's failure, not the client's.
    Spool(std::io::Error),
    /// The file being served could not be read, or ended before its length (it shrank
    /// while it was sent): the connection ends rather than send a short body.
    File(std::io::Error),
    /// Compressing the body failed.
    #[allow(dead_code)]
    Encode(std::io::Error),
}

impl fmt::Display for BodyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyError::Timeout => f.write_str("body timed out between two reads"),
            BodyError::TooLarge => f.write_str("body larger than client_max_body_size"),
            BodyError::Stream(err) => write!(f, "body stream failed: {err}"),
            BodyError::Upstream(err) => write!(f, "upstream body failed: {err}"),
            BodyError::Spool(err) => write!(f, "client body temporary file failed: {err}"),
            BodyError::File(err) => write!(f, "file read failed: {err}"),
            BodyError::Encode(err) => write!(f, "compression failed: {err}"),
        }
    }
}

impl StdError for BodyError {
    fn source(&self) -> Option<&(dyn StdError + 'static)> {
        match self {
            BodyError::Timeout | BodyError::TooLarge => None,
            BodyError::Stream(err) => Some(err),
            BodyError::Upstream(err) => Some(err.as_ref() as &(dyn StdError + 'static)),
            BodyError::Spool(err) | BodyError::File(err) | BodyError::Encode(err) => Some(err),
        }
    }
}

/// How a request body's upload is going, watched by the forwarder so that
/// `read_timeout` counts only time the upstream spends not reading or not answering,
/// never time spent waiting for a slow client (that is `client_body_timeout`'s job).
#[derive(Debug)]
pub(crate) struct Progress {
    origin: Instant,
    /// Microseconds after `origin` of the last frame read from the client (fine enough
    /// to time a fast upstream from it: see [`Progress::since_last_frame`]).
    last_us: AtomicU64,
    /// The body is waiting for the client's next bytes right now.
    waiting_on_client: AtomicBool,
}

impl Progress {
    pub(crate) fn new() -> Arc<Progress> {
        Arc::new(Progress {
            origin: Instant::now(),
            last_us: AtomicU64::new(0),
            waiting_on_client: AtomicBool::new(false),
        })
    }

    fn record(&self, waiting: bool) {
        let us = u64::try_from(self.origin.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.last_us.store(us, Ordering::Relaxed);
        self.waiting_on_client.store(waiting, Ordering::Relaxed);
    }

    /// When the upstream will have been idle for `timeout`, counting from the last
    /// body frame.
    pub(crate) fn deadline(&self, timeout: Duration) -> Instant {
        self.origin + Duration::from_micros(self.last_us.load(Ordering::Relaxed)) + timeout
    }

    /// How long ago the last frame was read from the client.
    pub(crate) fn since_last_frame(&self) -> Duration {
        let last = Duration::from_micros(self.last_us.load(Ordering::Relaxed));
        self.origin.elapsed().saturating_sub(last)
    }

    pub(crate) fn waiting_on_client(&self) -> bool {
        self.waiting_on_client.load(Ordering::Relaxed)
    }
}

/// How long a client may take over its request body.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimits {
    /// Longest pause between two reads (`client_body_timeout`).
    pub timeout: Duration,
    /// Slowest average, in bytes per second (`client_body_min_rate`; 0: none): byte N
    /// is due `timeout + N / min_rate` after the body's start at the latest, so a body
    /// trickled in just faster than `timeout` cannot last forever.
    pub min_rate: u64,
}

pin_project! {
    /// A hyper body that fails with [`BodyError::Timeout`] when it has to wait longer
    /// than `timeout` for its next frame, or falls behind `min_rate`. The timer is
    /// armed lazily, only when the inner body is pending, so a body that is always
    /// ready costs no timer at all. It fails with [`BodyError::TooLarge`], for good,
    /// instead of handing out the frame that would take it past `max`: whatever the
    /// framing (chunked, HTTP/2 DATA without a length), no more than `max` bytes of
    /// body leave it.
    pub(crate) struct Timed {
        #[pin]
        inner: ClientBody,
        limits: BodyLimits,
        max: MaxBodySize,
        too_large: bool,
        start: Instant,
        received: u64,
        sleep: Option<Pin<Box<Sleep>>>,
        progressed: bool,
        progress: Option<Arc<Progress>>,
        // Where each frame's bytes are added as they are read (the request's location's
        // count of request body bytes, `/metrics`).
        tally: Option<Arc<AtomicU64>>,
    }
}

impl Timed {
    pub(crate) fn new(inner: ClientBody, limits: BodyLimits, max: MaxBodySize) -> Timed {
        Timed {
            inner,
            limits,
            max,
            too_large: false,
            start: Instant::now(),
            received: 0,
            sleep: None,
            progressed: true,
            progress: None,
            tally: None,
        }
    }

    /// Also adds each frame's bytes to `tally`.
    pub(crate) fn tallied(self, tally: Arc<AtomicU64>) -> Timed {
        Timed {
            tally: Some(tally),
            ..self
        }
    }

    /// Also reports each frame to `progress`.
    pub(crate) fn watched(
        inner: ClientBody,
        limits: BodyLimits,
        max: MaxBodySize,
        progress: Arc<Progress>,
    ) -> Timed {
        Timed {
            progress: Some(progress),
            ..Timed::new(inner, limits, max)
        }
    }

    /// When the next frame is due, waiting from `now`.
    fn deadline(limits: &BodyLimits, start: Instant, received: u64, now: Instant) -> Instant {
        let pause = now + limits.timeout;
        if limits.min_rate == 0 {
            return pause;
        }
        let earned = Duration::from_secs_f64(received as f64 / limits.min_rate as f64);
        pause.min(start + limits.timeout + earned)
    }
}

impl Body for Timed {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        let this = self.project();
        if *this.too_large {
            return Poll::Ready(Some(Err(BodyError::TooLarge)));
        }
        match this.inner.poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                *this.progressed = true;
                if let Some(data) = frame.data_ref() {
                    let received = this.received.saturating_add(data.len() as u64);
                    if this.max.exceeded_by(received) {
                        *this.too_large = true;
                        return Poll::Ready(Some(Err(BodyError::TooLarge)));
                    }
                    *this.received = received;
                    if let Some(tally) = this.tally {
                        tally.fetch_add(data.len() as u64, Ordering::Relaxed);
                    }
                }
                if let Some(progress) = this.progress {
                    progress.record(false);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(err))) => Poll::Ready(Some(Err(BodyError::Stream(err)))),
            Poll::Ready(None) => {
                if let Some(progress) = this.progress {
                    progress.record(false);
                }
                Poll::Ready(None)
            }
            Poll::Pending => {
                if let Some(progress) = this.progress {
                    progress.waiting_on_client.store(true, Ordering::Relaxed);
                }
                if *this.progressed {
                    *this.progressed = false;
                    let deadline =
                        Timed::deadline(this.limits, *this.start, *this.received, Instant::now());
                    match this.sleep {
                        Some(sleep) => sleep.as_mut().reset(deadline),
                        None => *this.sleep = Some(Box::pin(tokio::time::sleep_until(deadline))),
                    }
                }
                let expired = match this.sleep {
                    Some(sleep) => sleep.as_mut().poll(cx).is_ready(),
                    None => false,
                };
                if expired {
                    Poll::Ready(Some(Err(BodyError::Timeout)))
                } else {
                    Poll::Pending
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

/// The body of a request sent upstream.
pub(crate) enum RequestBody {
    /// No body (GET and friends); such a request can be sent again on another server.
    Empty,
    /// The client's whole body, read into memory before the upstream was chosen.
    Buffered(Option<Bytes>),
    /// The client's whole body, read into a file before the upstream was chosen (larger
    /// than the read-ahead limit, with `request_buffering` on). Boxed as `Client` is.
    Spooled(Box<Unspool>),
    /// The client's body, streamed as it arrives after what was read ahead. Boxed: only
    /// bodies larger than the read-ahead limit take it, and every request moves this
    /// enum several times on its way upstream.
    Client(Box<Streamed>),
}

/// A body larger than the read-ahead limit: what was read, then the rest.
pub(crate) struct Streamed {
    read: Option<Bytes>,
    rest: Timed,
}

impl RequestBody {
    /// Reads the client's body until it ends or passes `limit` bytes: a body that ends
    /// within the limit comes back whole ([`RequestBody::Buffered`], sent with its
    /// length), a longer one as what was read and the rest to stream. Nothing waits on
    /// an upstream meanwhile (nginx's `client_body_buffer_size`, without the spill to
    /// disk: past the limit, the body streams).
    pub(crate) async fn read_ahead(mut body: Timed, limit: usize) -> Result<RequestBody, BodyError> {
        let mut read = bytes::BytesMut::new();
        loop {
            if read.len() >= limit {
                return Ok(RequestBody::Client(Box::new(Streamed {
                    read: (!read.is_empty()).then(|| read.freeze()),
                    rest: body,
                })));
            }
            let frame = std::future::poll_fn(|cx| Pin::new(&mut body).poll_frame(cx)).await;
            match frame {
                // Trailers, the only other kind of frame, are not forwarded (the
                // upstream request is sent with a length or plainly chunked).
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        if read.is_empty() && body.is_end_stream() {
                            return Ok(RequestBody::Buffered(Some(data)));
                        }
                        read.extend_from_slice(&data);
                    }
                }
                Some(Err(err)) => return Err(err),
                None => return Ok(RequestBody::Buffered(Some(read.freeze()))),
            }
        }
    }

    /// What [`RequestBody::read_ahead`] left to stream is read to its end too, into a
    /// file in `dir` ([`Spool`]); a body read whole already stays as it is. Writes to
    /// the file gather at least `batch` bytes.
    pub(crate) async fn spool(self, dir: &Path, batch: usize) -> Result<RequestBody, BodyError> {
        match self {
            RequestBody::Client(streamed) => {
                // Boxed: its state would otherwise grow every request's future, bodiless
                // ones too, for the few that have a body this large.
                let writing = Spool::write(*streamed, dir.to_path_buf(), batch);
                let spool = Box::pin(writing).await?;
                Ok(RequestBody::Spooled(Box::new(spool.reader())))
            }
            whole => Ok(whole),
        }
    }

    /// The same body again from its start, for another try, when it was read whole
    /// (a streamed one cannot be sent twice).
    pub(crate) fn replay(&self) -> Option<RequestBody> {
        match self {
            RequestBody::Buffered(Some(bytes)) => Some(RequestBody::Buffered(Some(bytes.clone()))),
            RequestBody::Spooled(unspool) => Some(RequestBody::Spooled(Box::new(unspool.again()))),
            _ => None,
        }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BodyError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BodyError>>> {
        match self.get_mut() {
            RequestBody::Empty => Poll::Ready(None),
            RequestBody::Buffered(bytes) => Poll::Ready(
                bytes
                    .take()
                    .filter(|b| !b.is_empty())
                    .map(|b| Ok(Frame::data(b))),
            ),
            RequestBody::Spooled(unspool) => Pin::new(unspool.as_mut()).poll_frame(cx),
            RequestBody::Client(streamed) => match streamed.read.take() {
                Some(read) => Poll::Ready(Some(Ok(Frame::data(read)))),
                None => Pin::new(&mut streamed.rest).poll_frame(cx),
            },
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            RequestBody::Empty => true,
            RequestBody::Buffered(bytes) => bytes.as_ref().is_none_or(Bytes::is_empty),
            RequestBody::Spooled(unspool) => unspool.is_end_stream(),
            RequestBody::Client(streamed) => {
                streamed.read.is_none() && streamed.rest.is_end_stream()
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        let read = |bytes: &Option<Bytes>| bytes.as_ref().map_or(0, |b| b.len() as u64);
        match self {
            RequestBody::Empty => SizeHint::with_exact(0),
            RequestBody::Buffered(bytes) => SizeHint::with_exact(read(bytes)),
            RequestBody::Spooled(unspool) => unspool.size_hint(),
            RequestBody::Client(streamed) => {
                let (rest, ahead) = (streamed.rest.size_hint(), read(&streamed.read));
                let mut hint = SizeHint::new();
                hint.set_lower(rest.lower() + ahead);
                if let Some(upper) = rest.upper() {
                    hint.set_upper(upper + ahead);
                }
                hint
            }
        }
    }
}
