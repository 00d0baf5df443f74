//! A one-message channel from a release to a waiting request, on the gate's own
//! primitives (`sync.rs`) so that the loom model checks it too. A value sent to a
//! receiver already dropped comes back to the sender; a value left in a channel when its
//! receiver drops is dropped outside the lock (a [`super::Permit`] then releases).

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use super::sync::{lock, Mutex};

struct Slot<T> {
    value: Option<T>,
    waker: Option<Waker>,
    receiver_gone: bool,
    sender_gone: bool,
}

pub(super) struct Sender<T>(Arc<Mutex<Slot<T>>>);

pub(super) struct Receiver<T>(Arc<Mutex<Slot<T>>>);

pub(super) fn channel<T>() -> (Sender<T>, Receiver<T>) {
    let slot = Arc::new(Mutex::new(Slot {
        value: None,
        waker: None,
        receiver_gone: false,
        sender_gone: false,
    }));
    (Sender(Arc::clone(&slot)), Receiver(slot))
}

impl<T> Sender<T> {
    /// Sends `value`, or gives it back when the receiver is gone.
    pub(super) fn send(self, value: T) -> Result<(), T> {
        let waker = {
            let mut slot = lock(&self.0);
            if slot.receiver_gone {
                return Err(value);
            }
            slot.value = Some(value);
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
        Ok(())
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut slot = lock(&self.0);
            slot.sender_gone = true;
            slot.waker.take()
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> Future for Receiver<T> {
    /// `None`: the sender went without sending.
    type Output = Option<T>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
        let mut slot = lock(&self.0);
        if let Some(value) = slot.value.take() {
            return Poll::Ready(Some(value));
        }
        if slot.sender_gone {
            return Poll::Ready(None);
        }
        match &slot.waker {
            Some(waker) if waker.will_wake(cx.waker()) => {}
            _ => slot.waker = Some(cx.waker().clone()),
        }
        Poll::Pending
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let left = {
            let mut slot = lock(&self.0);
            slot.receiver_gone = true;
            slot.value.take()
        };
        drop(left);
    }
}
