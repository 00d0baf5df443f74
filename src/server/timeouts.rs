//! Connection-level timeouts, enforced where the bytes are read.
//!
//! Both protocols' connections (tollgate's HTTP/1.1, hyper's HTTP/2) keep one account of
//! what the connection is doing ([`ConnState`]), and [`TimedIo`] applies the matching
//! limit whenever a read has to wait:
//!
//! | phase | starts | limit | on expiry |
//! |---|---|---|---|
//! | fresh | accept | `client_header_timeout` | close quietly (nothing was sent) |
//! | head | first byte of a request | `client_header_timeout` | `408` and close |
//! | busy | request head complete | none here (body and upstream have their own) | |
//! | idle | last response finished | `keepalive_timeout` | close quietly |
//!
//! An HTTP/2 connection has no "head" phase: its waits between requests use
//! `keepalive_timeout`. An upgraded (WebSocket) connection has no limit here; the
//! tunnel keeps its own idle timeout.
//!
//! A fresh or idle connection can also be shed ([`ConnState::shed`]) when the process
//! runs short of descriptors (`server/shed.rs`): it ends as if its `keepalive_timeout`
//! were up.

use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use atomic_waker::AtomicWaker;
use bytes::{Buf, Bytes};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

use crate::wire::Protocol;

const FRESH: u8 = 0;
const HEAD: u8 = 1;
const BUSY: u8 = 2;
const IDLE: u8 = 3;

const REQUEST_TIMEOUT: &[u8] =
    b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Length: 0\r\n\r\n";

/// The 408, with `server` as its `Server` header, and a `Date`.
fn request_timeout(server: Option<&http::HeaderValue>) -> Vec<u8> {
    let line = REQUEST_TIMEOUT.windows(2).position(|w| w == b"\r\n").unwrap_or(0) + 2;
    let (status, rest) = REQUEST_TIMEOUT.split_at(line);
    let mut answer = Vec::with_capacity(REQUEST_TIMEOUT.len() + 64);
    answer.extend_from_slice(status);
    if let Some(server) = server {
        answer.extend_from_slice(b"Server: ");
        answer.extend_from_slice(server.as_bytes());
        answer.extend_from_slice(b"\r\n");
    }
    super::date::write_header(&mut answer);
    answer.extend_from_slice(rest);
    answer
}

/// The limits a connection is held to.
#[derive(Clone, Copy, Debug)]
pub(super) struct ConnLimits {
    pub header: Duration,
    pub keepalive: Duration,
    /// Longest wait for the client to take more bytes (`send_timeout`).
    pub send: Duration,
}

/// What one connection is doing, shared between its reader and its requests.
pub(super) struct ConnState {
    origin: Instant,
    phase: AtomicU8,
    /// Milliseconds after `origin` when the current phase began.
    since_ms: AtomicU64,
    in_flight: AtomicU32,
    upgraded: AtomicBool,
    /// An answer closes the connection and may leave a request body unread.
    lingers: AtomicBool,
    /// The reader, parked while requests are in flight, to be woken when the
    /// connection goes idle so that the keep-alive clock starts.
    reader: Mutex<Option<Waker>>,
    /// The connection is to end at its next wait for a request ([`ConnState::shed`]).
    shed: AtomicBool,
    /// The reader while it waits for a request, to be woken when the connection is shed
    /// or asked to let its buffers go.
    waiting: AtomicWaker,
    /// Whether an idle HTTP/1.1 connection holds its buffers ([`BARE`], [`HOLDS`],
    /// [`ASKED`]): it keeps them when it goes idle, so that a busy connection's next
    /// request finds them, and lets them go when the worker asks, once it has waited a
    /// while (`server/h1/spare.rs`).
    buffers: AtomicU8,
}

/// The connection holds no buffers (or the worker has not asked it to let them go).
const BARE: u8 = 0;
/// The connection went idle holding its buffers.
const HOLDS: u8 = 1;
/// The worker asked the idle connection to let its buffers go.
const ASKED: u8 = 2;

impl ConnState {
    pub(super) fn new() -> Arc<ConnState> {
        Arc::new(ConnState {
            origin: Instant::now(),
            phase: AtomicU8::new(FRESH),
            since_ms: AtomicU64::new(0),
            in_flight: AtomicU32::new(0),
            upgraded: AtomicBool::new(false),
            lingers: AtomicBool::new(false),
            reader: Mutex::new(None),
            shed: AtomicBool::new(false),
            waiting: AtomicWaker::new(),
            buffers: AtomicU8::new(BARE),
        })
    }

    /// The connection goes idle holding its buffers.
    pub(super) fn holds_buffers(&self) {
        self.buffers.store(HOLDS, Ordering::Relaxed);
    }

    /// Asks the connection to let its buffers go if it has waited for a request since
    /// `before` or longer holding them; wakes it to do so.
    pub(super) fn ask_let_go(&self, before: Instant) {
        let long_idle = self.idle_since().is_some_and(|since| since <= before);
        if long_idle
            && self
                .buffers
                .compare_exchange(HOLDS, ASKED, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
        {
            self.waiting.wake();
        }
    }

    /// Whether the worker asked the connection to let its buffers go (the answer is
    /// given once).
    pub(super) fn let_go_asked(&self) -> bool {
        self.buffers.load(Ordering::Relaxed) == ASKED
            && self.buffers.swap(BARE, Ordering::Relaxed) == ASKED
    }

    /// Since when the connection has waited for a request, fresh or idle between two;
    /// `None` while a request is under way or begun, and once it is upgraded or shed.
    pub(super) fn idle_since(&self) -> Option<Instant> {
        let phase = self.phase.load(Ordering::Acquire);
        let waits = phase == FRESH || phase == IDLE;
        if !waits || self.upgraded.load(Ordering::Relaxed) || self.shed.load(Ordering::Relaxed) {
            return None;
        }
        Some(self.origin + Duration::from_millis(self.since_ms.load(Ordering::Relaxed)))
    }

    /// Ends the connection the next time it waits for a request (at once if it waits
    /// now), as its `keepalive_timeout` would: quietly, no request being under way.
    pub(super) fn shed(&self) {
        self.shed.store(true, Ordering::Release);
        self.waiting.wake();
    }

    fn enter(&self, phase: u8) {
        let since = crate::clock::now().saturating_duration_since(self.origin.into_std());
        let ms = since.as_millis() as u64;
        self.since_ms.store(ms, Ordering::Relaxed);
        self.phase.store(phase, Ordering::Release);
    }

    /// Bytes of the next head arrived while the last request was in flight (HTTP/1.1
    /// pipelining): once idle, the connection waits for the rest under
    /// `client_header_timeout`, as for any head begun.
    pub(super) fn head_begun(&self) {
        let phase = self.phase.load(Ordering::Acquire);
        if phase == FRESH || phase == IDLE {
            self.enter(HEAD);
        }
    }

    /// A request head has been read; the connection is busy until the guard drops
    /// (when the response body has been sent or abandoned).
    pub(super) fn begin(self: &Arc<Self>) -> RequestGuard {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        self.phase.store(BUSY, Ordering::Release);
        RequestGuard(self.clone())
    }

    /// An answer that closes the connection was sent before the request body was read
    /// (a 413, a 400): the connection ends with a lingering close ([`TimedIo`]).
    pub(super) fn linger_on_close(&self) {
        self.lingers.store(true, Ordering::Relaxed);
    }

    /// The connection now carries a tunnel; only the tunnel's idle timeout applies.
    pub(super) fn set_upgraded(&self) {
        self.upgraded.store(true, Ordering::Relaxed);
    }

    fn deadline(&self, limits: &ConnLimits, protocol: Protocol) -> Option<Instant> {
        if self.upgraded.load(Ordering::Relaxed) {
            return None;
        }
        let limit = match (self.phase.load(Ordering::Acquire), protocol) {
            (BUSY, _) => return None,
            (IDLE, _) => limits.keepalive,
            // No head phase: between requests, an HTTP/2 connection is idle.
            (_, Protocol::Http2 | Protocol::Http3) => limits.keepalive,
            (_, Protocol::Http1) => limits.header,
        };
        let since = Duration::from_millis(self.since_ms.load(Ordering::Relaxed));
        Some(self.origin + since + limit)
    }
}

/// One request in progress on a connection.
pub(super) struct RequestGuard(Arc<ConnState>);

impl Drop for RequestGuard {
    fn drop(&mut self) {
        let state = &self.0;
        if state.in_flight.fetch_sub(1, Ordering::AcqRel) == 1 {
            state.enter(IDLE);
            let waker = state.reader.lock().ok().and_then(|mut w| w.take());
            if let Some(waker) = waker {
                waker.wake();
            }
        }
    }
}

/// A connection's byte stream, with the phase limits applied to its reads, and bytes
/// already read (the protocol-sniffing prefix, or what came after an upgrade's head)
/// replayed in front.
pub(super) struct TimedIo<T> {
    inner: T,
    state: Arc<ConnState>,
    limits: ConnLimits,
    /// What the connection speaks; HTTP/1.1 until the first bytes tell otherwise.
    protocol: Protocol,
    /// A read while requests are in flight parks in [`ConnState`], to be woken when the
    /// connection goes idle: hyper's connections (HTTP/2, and the admin API's HTTP/1.1)
    /// may not read again by themselves once their answer is sent.
    parks: bool,
    prefix: Bytes,
    sleep: Pin<Box<Sleep>>,
    armed: Option<Instant>,
    /// `send_timeout`: armed (lazily made) while a write waits for the client.
    write_sleep: Option<Pin<Box<Sleep>>>,
    /// The `send_timeout` of the answer being sent: its location's, else `limits.send`.
    send: Duration,
    write_waiting: bool,
    /// Lingering on a close ([`ConnState::linger_on_close`]) has begun: `sleep` is armed
    /// for its end.
    draining: bool,
    /// While draining: the write side has been shut.
    drain_shut: bool,
    /// `server_header`, for the 408 (`None`: none is sent).
    server: Option<http::HeaderValue>,
}

/// How long what a client still sends after an answer that closed the connection before
/// its body was read is read and dropped.
const LINGER: Duration = Duration::from_secs(2);

impl<T> TimedIo<T> {
    pub(super) fn new(inner: T, state: Arc<ConnState>, limits: ConnLimits) -> TimedIo<T> {
        let first = state.origin + limits.header;
        TimedIo {
            inner,
            state,
            limits,
            protocol: Protocol::Http1,
            parks: false,
            prefix: Bytes::new(),
            sleep: Box::pin(tokio::time::sleep_until(first)),
            armed: Some(first),
            write_sleep: None,
            send: limits.send,
            write_waiting: false,
            draining: false,
            drain_shut: false,
            server: None,
        }
    }

    /// The `Server` header the 408 of an unfinished head carries (`server_header`).
    pub(super) fn set_server(&mut self, server: Option<http::HeaderValue>) {
        self.server = server;
    }

    /// Bytes already read (while sniffing the protocol, or past an upgrade's head) to
    /// hand out again first, to a connection that speaks `protocol` from now on.
    pub(super) fn replay(&mut self, prefix: Bytes, protocol: Protocol) {
        self.prefix = prefix;
        self.protocol = protocol;
        self.parks = match protocol {
            Protocol::Http1 => false,
            Protocol::Http2 | Protocol::Http3 => true,
        };
    }

    /// For an HTTP/1.1 connection served by hyper: a read while busy parks (see
    /// `parks`), so that the keep-alive clock starts when the last answer is sent.
    pub(super) fn park_while_busy(&mut self) {
        self.parks = true;
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> TimedIo<T> {
    /// The last part of a lingering close, the write side shut: reads and drops what the
    /// client still sends; ready when it closes (or fails) or the armed `sleep` is up. A
    /// client that never stops sending gives other tasks their turn every 64 KiB.
    fn poll_discard(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        let mut inner = Pin::new(&mut self.inner);
        // Left uninitialized: zeroing 4 KiB on every poll was half a lingering close's cost.
        let mut scratch = [std::mem::MaybeUninit::<u8>::uninit(); 4096];
        for _ in 0..16 {
            let mut drained = ReadBuf::uninit(&mut scratch);
            match inner.as_mut().poll_read(cx, &mut drained) {
                Poll::Ready(Ok(())) if !drained.filled().is_empty() => continue,
                Poll::Ready(_) => return Poll::Ready(()),
                Poll::Pending => return self.sleep.as_mut().poll(cx),
            }
        }
        if self.sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(());
        }
        cx.waker().wake_by_ref();
        Poll::Pending
    }

    /// Sets `sleep` for `deadline`.
    fn arm(&mut self, deadline: Instant) {
        self.sleep.as_mut().reset(deadline);
        self.armed = Some(deadline);
    }

    /// Called when a read has nothing to give: is the phase's time up?
    fn poll_expired(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let Some(deadline) = self.state.deadline(&self.limits, self.protocol) else {
            // HTTP/1.1 reads again by itself once its request is over (`server/h1`); a
            // reader of hyper's is parked here and woken then.
            if !self.parks {
                return Poll::Pending;
            }
            if let Ok(mut reader) = self.state.reader.lock() {
                *reader = Some(cx.waker().clone());
            }
            // The last request may have finished between the check and the park.
            if self.state.deadline(&self.limits, self.protocol).is_none() {
                return Poll::Pending;
            }
            return self.poll_expired(cx);
        };
        let phase = self.state.phase.load(Ordering::Acquire);
        if phase == FRESH || phase == IDLE {
            // Registered before the flag is read, so that a shed in between wakes us.
            self.state.waiting.register(cx.waker());
            if self.state.shed.load(Ordering::Acquire) {
                return Poll::Ready(Ok(()));
            }
        }
        // The timer moves lazily: each request puts the deadline later, which leaves the
        // armed one alone (moving a registered timer costs a trip through the timer
        // wheel); when it fires early it is armed again for the deadline in force.
        if self.armed.is_none_or(|armed| armed > deadline) {
            self.arm(deadline);
        }
        loop {
            // Polled each time: a poll the task's budget refused registered nothing, and
            // only a later one arms the timer.
            if self.sleep.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            match self.armed {
                Some(armed) if armed < deadline => self.arm(deadline),
                _ => break,
            }
        }
        let phase = self.state.phase.load(Ordering::Acquire);
        if phase == HEAD && self.protocol == Protocol::Http1 {
            // Best effort: the client gets a status before the close, as nginx's 408.
            let answer = request_timeout(self.server.as_ref());
            let _ = Pin::new(&mut self.inner).poll_write(cx, &answer);
            let _ = Pin::new(&mut self.inner).poll_flush(cx);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "client_header_timeout: request header not complete",
            )));
        }
        // Nothing pending from the client: end the connection as if it had closed.
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncRead for TimedIo<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.prefix.has_remaining() {
            let n = this.prefix.len().min(buf.remaining());
            buf.put_slice(&this.prefix[..n]);
            this.prefix.advance(n);
            if !this.prefix.has_remaining() {
                // Its buffer is let go rather than held for the connection's life.
                this.prefix = Bytes::new();
            }
            return Poll::Ready(Ok(()));
        }
        let before = buf.filled().len();
        match Pin::new(&mut this.inner).poll_read(cx, buf) {
            Poll::Ready(Ok(())) => {
                // After an upgrade the bytes are the tunnel's, not requests.
                if buf.filled().len() > before && !this.state.upgraded.load(Ordering::Relaxed) {
                    let phase = this.state.phase.load(Ordering::Acquire);
                    if phase == FRESH || phase == IDLE {
                        this.state.enter(HEAD);
                    }
                }
                Poll::Ready(Ok(()))
            }
            Poll::Ready(Err(err)) => Poll::Ready(Err(err)),
            Poll::Pending => this.poll_expired(cx),
        }
    }
}

impl<T> TimedIo<T> {
    /// The `send_timeout` of the next answer: its location's (`own`), else the
    /// connection's.
    pub(super) fn answer_send_timeout(&mut self, own: Option<Duration>) {
        self.send = own.unwrap_or(self.limits.send);
    }

    /// `send_timeout` (nginx's meaning: between two successful writes, not for the whole
    /// response): a write that has waited that long for the client to read fails, and
    /// the connection with it, so a client that stops reading cannot hold its response,
    /// nor the upstream connection feeding it, forever.
    fn timed<R>(
        &mut self,
        cx: &mut Context<'_>,
        result: Poll<io::Result<R>>,
    ) -> Poll<io::Result<R>> {
        if result.is_ready() {
            self.write_waiting = false;
            return result;
        }
        let deadline = Instant::now() + self.send;
        let sleep = self
            .write_sleep
            .get_or_insert_with(|| Box::pin(tokio::time::sleep_until(deadline)));
        if !std::mem::replace(&mut self.write_waiting, true) {
            sleep.as_mut().reset(deadline);
        }
        if sleep.as_mut().poll(cx).is_ready() {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "send_timeout: the client took nothing of the response",
            )));
        }
        Poll::Pending
    }
}

impl<T: super::zero_copy::ZeroCopy> TimedIo<T> {
    /// Sends up to `count` bytes of `file` from `*offset` without copying them, under
    /// `send_timeout` as any write; `None` when the stream cannot (TLS).
    pub(super) fn poll_sendfile(
        &mut self,
        cx: &mut Context<'_>,
        file: std::os::fd::BorrowedFd<'_>,
        offset: &mut u64,
        count: usize,
    ) -> Option<Poll<io::Result<usize>>> {
        let result = self.inner.poll_sendfile(cx, file, offset, count)?;
        Some(self.timed(cx, result))
    }

    /// Writes `buf` with more to follow at once (`MSG_MORE`), under `send_timeout`;
    /// `None` when the stream cannot.
    pub(super) fn poll_send_more(&mut self, cx: &mut Context<'_>, buf: &[u8]) -> Option<Poll<io::Result<usize>>> {
        let result = self.inner.poll_send_more(cx, buf)?;
        Some(self.timed(cx, result))
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> TimedIo<T> {
    /// nginx's lingering close for an answer that left a request body unread: shut the
    /// write side, then read and drop what the client still sends until it closes or
    /// [`LINGER`] has passed. Closing at once with unread bytes would reset the
    /// connection, and the reset can destroy the answer before the client reads it.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        if !self.draining {
            // Armed first: shutting a TLS stream writes its close_notify, which a client
            // that reads nothing could hold up for ever.
            self.arm(Instant::now() + LINGER);
            self.draining = true;
        }
        if !self.drain_shut {
            match Pin::new(&mut self.inner).poll_shutdown(cx) {
                Poll::Ready(Ok(())) => self.drain_shut = true,
                Poll::Ready(Err(err)) => return Poll::Ready(Err(err)),
                Poll::Pending => return self.sleep.as_mut().poll(cx).map(Ok),
            }
        }
        self.poll_discard(cx).map(Ok)
    }
}

impl<T: AsyncRead + AsyncWrite + Unpin> AsyncWrite for TimedIo<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write(cx, buf);
        this.timed(cx, result)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_write_vectored(cx, bufs);
        this.timed(cx, result)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let result = Pin::new(&mut this.inner).poll_flush(cx);
        this.timed(cx, result)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.state.lingers.load(Ordering::Relaxed) {
            return this.poll_drain(cx);
        }
        let result = Pin::new(&mut this.inner).poll_shutdown(cx);
        this.timed(cx, result)
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;

    use tokio::io::AsyncReadExt;

    use super::*;

    /// A read that finds nothing in a poll whose budget is used up (tokio's cooperative
    /// scheduling) has its timer's poll refused too: the timer must be polled again on
    /// the next read, or nothing ever arms it and a silent client keeps the connection.
    #[tokio::test(start_paused = true)]
    async fn a_read_refused_by_the_budget_still_arms_the_timer() {
        let (client, server) = tokio::io::duplex(64);
        let limits = ConnLimits {
            header: Duration::from_millis(50),
            keepalive: Duration::from_millis(50),
            send: Duration::from_secs(5),
        };
        let mut io = TimedIo::new(server, ConnState::new(), limits);
        let refused = poll_fn(|cx| {
            while let Poll::Ready(used) = tokio::task::coop::poll_proceed(cx) {
                used.made_progress();
            }
            let mut buf = [0u8; 8];
            let mut read = ReadBuf::new(&mut buf);
            Poll::Ready(Pin::new(&mut io).poll_read(cx, &mut read).is_pending())
        })
        .await;
        assert!(refused);
        // The client says nothing: the connection ends as if it had closed.
        let mut buf = [0u8; 8];
        let read = tokio::time::timeout(Duration::from_secs(3), io.read(&mut buf)).await;
        assert!(matches!(read, Ok(Ok(0))), "{read:?}");
        drop(client);
    }

    #[test]
    fn an_idle_connection_is_asked_once_to_let_its_buffers_go_and_a_busy_one_never() {
        let state = ConnState::new();
        let later = Instant::now() + Duration::from_secs(60);
        state.ask_let_go(later);
        assert!(!state.let_go_asked(), "it holds no buffers");
        let busy = state.begin();
        state.holds_buffers();
        state.ask_let_go(later);
        assert!(!state.let_go_asked(), "a request is under way");
        drop(busy);
        state.ask_let_go(Instant::now() - Duration::from_secs(1));
        assert!(!state.let_go_asked(), "it has not waited that long");
        state.ask_let_go(later);
        assert!(state.let_go_asked());
        assert!(!state.let_go_asked(), "asked once");
    }
}
