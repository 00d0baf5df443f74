//! A future that waits beside a connection (the worker's drain signal), polled only when
//! it woke itself. `select!` polls every branch each time the task wakes, and a
//! connection's task wakes several times per request: polling the drain watch each time
//! cost more than 350 instructions per request (callgrind), for a signal that comes once.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use atomic_waker::AtomicWaker;

/// `inner`, with a waker of its own: a wakeup of `inner` marks it due and wakes the task.
pub(super) struct Beside<F> {
    inner: F,
    flag: Arc<Flag>,
    waker: Waker,
}

struct Flag {
    /// `inner` woke (or was never polled) and is due a poll.
    due: AtomicBool,
    /// The task that polls the pair.
    task: AtomicWaker,
}

impl Wake for Flag {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.due.store(true, Ordering::Release);
        self.task.wake();
    }
}

impl<F: Future + Unpin> Beside<F> {
    pub(super) fn new(inner: F) -> Beside<F> {
        let flag = Arc::new(Flag {
            due: AtomicBool::new(true),
            task: AtomicWaker::new(),
        });
        Beside {
            inner,
            waker: Waker::from(flag.clone()),
            flag,
        }
    }

    /// Polls `inner` if it woke since its last poll; `Pending` (and nothing else done
    /// but noting the task's waker) otherwise.
    pub(super) fn poll_if_due(&mut self, cx: &mut Context<'_>) -> Poll<F::Output> {
        self.flag.task.register(cx.waker());
        if !self.flag.due.swap(false, Ordering::AcqRel) {
            return Poll::Pending;
        }
        Pin::new(&mut self.inner).poll(&mut Context::from_waker(&self.waker))
    }
}

#[cfg(test)]
mod tests {
    use std::future::poll_fn;
    use std::sync::atomic::AtomicUsize;

    use super::*;

    /// Counts its polls; ready once `open` is set, and wakes whoever waits then.
    struct Gate {
        polls: Arc<AtomicUsize>,
        open: Arc<AtomicBool>,
        waiter: Arc<AtomicWaker>,
    }

    impl Future for Gate {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.polls.fetch_add(1, Ordering::Relaxed);
            self.waiter.register(cx.waker());
            match self.open.load(Ordering::Acquire) {
                true => Poll::Ready(()),
                false => Poll::Pending,
            }
        }
    }

    #[tokio::test]
    async fn the_inner_future_is_polled_once_then_only_after_its_own_wakeup() {
        let (polls, open, waiter) = Default::default();
        let gate = Gate {
            polls: Arc::clone(&polls),
            open: Arc::clone(&open),
            waiter: Arc::clone(&waiter),
        };
        let mut beside = Beside::new(gate);
        let task = tokio::spawn(async move {
            // The task wakes itself 100 times, as a busy connection's does.
            let mut spins = 0;
            poll_fn(|cx| {
                if beside.poll_if_due(cx).is_ready() {
                    return Poll::Ready(spins);
                }
                spins += 1;
                if spins < 100 {
                    cx.waker().wake_by_ref();
                }
                Poll::Pending
            })
            .await
        });
        // The runtime is the test's one thread: the task runs while this one yields.
        for _ in 0..300 {
            tokio::task::yield_now().await;
        }
        assert_eq!(
            polls.load(Ordering::Relaxed),
            1,
            "polled beyond its first time"
        );
        open.store(true, Ordering::Release);
        waiter.wake();
        let spins = task.await.expect("the task ends");
        assert_eq!(spins, 100);
        assert_eq!(polls.load(Ordering::Relaxed), 2);
    }
}
