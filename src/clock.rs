//! The time of the task poll under way. A connection's task reads the clock once each
//! time it is polled ([`Polled`]), and what that poll does takes the reading: a
//! request's arrival, its answer's `Date`, its request time in the log, the connection's
//! idle clock. nginx does the same with the time it caches once per turn of its event
//! loop. One poll lasts microseconds (tokio's budget ends a long one), so the reading is
//! as good as a fresh one, at a fifth of the clock reads. A poll that blocks (an access-log
//! write to a slow pipe waits under the log's lock) makes its reading as old as the wait,
//! as a blocking call makes nginx's cached time; the limiters take such a late reading as
//! an early arrival, never as a later one. Outside such a poll, [`now`] reads the clock.

use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Instant;

thread_local! {
    /// The reading of the poll under way on this thread, if a [`Polled`] task's.
    static POLL: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// The time of the poll under way, or the clock's now outside one.
#[inline]
pub(crate) fn now() -> Instant {
    POLL.with(Cell::get).unwrap_or_else(Instant::now)
}

pin_project_lite::pin_project! {
    /// A task whose every poll reads the clock once, for [`now`] to give out.
    pub(crate) struct Polled<F> {
        #[pin]
        inner: F,
    }
}

impl<F> Polled<F> {
    pub(crate) fn new(inner: F) -> Polled<F> {
        Polled { inner }
    }
}

impl<F: Future> Future for Polled<F> {
    type Output = F::Output;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<F::Output> {
        let _reading = Reading::take();
        self.project().inner.poll(cx)
    }
}

/// The poll's reading, in force until dropped (even by a panic), when the one before is
/// back: a task polled inside another's poll has its own.
struct Reading {
    before: Option<Instant>,
}

impl Reading {
    fn take() -> Reading {
        Reading {
            before: POLL.with(|poll| poll.replace(Some(Instant::now()))),
        }
    }
}

impl Drop for Reading {
    fn drop(&mut self) {
        POLL.with(|poll| poll.set(self.before));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_poll_has_one_reading_and_outside_one_the_clock_is_read() {
        let outside = now();
        tick_past(outside);
        assert!(now() > outside);
        let task = Polled::new(async {
            let first = now();
            tick_past(first);
            assert_eq!(now(), first);
            // A task polled inside this one has a reading of its own, and this one's
            // comes back after it.
            let inner = Polled::new(async { now() }).await;
            assert!(inner > first);
            assert_eq!(now(), first);
            first
        });
        let reading = block_on(task);
        assert!(reading > outside);
        assert!(now() > reading);
    }

    #[test]
    fn a_panicking_poll_leaves_no_reading_behind() {
        let caught =
            std::panic::catch_unwind(|| block_on(Polled::new(async { panic!("in the poll") })));
        assert!(caught.is_err());
        assert_eq!(POLL.with(Cell::get), None);
    }

    /// Waits until the clock reads later than `then`: a spin of nanoseconds, where a
    /// sleep would wait a scheduler's tick or more.
    fn tick_past(then: Instant) {
        while Instant::now() <= then {
            std::hint::spin_loop();
        }
    }

    /// Polls `future` to its end on this thread.
    fn block_on<F: Future>(future: F) -> F::Output {
        let mut future = std::pin::pin!(future);
        let mut cx = Context::from_waker(std::task::Waker::noop());
        loop {
            if let Poll::Ready(out) = future.as_mut().poll(&mut cx) {
                return out;
            }
        }
    }
}
