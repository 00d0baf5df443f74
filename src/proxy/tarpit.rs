//! `limit_action` at run time: a request refused by a limit is answered, closed
//! unanswered (as nginx's `return 444`), or held first (the tarpit), so that a flood of
//! refused requests costs the client more than it costs us.
//!
//! A held request is a sleeping future and a counted slot: it has been read whole, nothing
//! more is read for it, nothing is written, no upstream or zone budget is held. The
//! connection reads at most into the room its buffer already has (see `server/h1`), so
//! a client that sends more meanwhile only fills its own socket buffers.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http::header::CONNECTION;
use http::{HeaderValue, Response, Version};

use crate::config::LimitAction;
use crate::limit::outcome::Outcome;
use crate::upstream::ResponseBody;

use super::{Conn, Location, Pipeline};

/// `tarpit_hold` and `tarpit_max`, and the count they bound.
pub(crate) struct Tarpit {
    pub hold: Duration,
    pub max: usize,
    /// Requests held now by the whole instance; the next generation takes it over, so
    /// that the requests held across a reload still count.
    pub held: Arc<Held>,
}

/// How many requests are held, across every worker and generation.
#[derive(Debug, Default)]
pub(crate) struct Held(AtomicUsize);

impl Held {
    /// A slot, unless `max` are held already.
    fn take(self: &Arc<Self>, max: usize) -> Option<Slot> {
        let admit = |held: usize| (held < max).then_some(held + 1);
        (self.0.fetch_update(Ordering::AcqRel, Ordering::Acquire, admit)).ok()?;
        Some(Slot(Arc::clone(self)))
    }

    /// Requests held now.
    #[cfg(test)]
    fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }
}

/// One held request's place in the count, given back when it drops: when the hold ends,
/// or when its request is dropped (the client went away, HTTP/2 reset its stream).
struct Slot(Arc<Held>);

impl Drop for Slot {
    fn drop(&mut self) {
        self.0 .0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// What `limit_action` makes of a request's outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Acted {
    /// Answered as usual: not refused by a limit, or `"answer"`.
    Answer,
    /// Closed without an answer (`"close"`, a full tarpit, or a drain during the hold).
    Close,
    /// Held `tarpit_hold`: now answered, and the connection closed after.
    Held,
}

impl Pipeline {
    /// `location`'s `limit_action` for `outcome`: only refusals by a limit (a zone's
    /// rejection, a ban) are acted on; dry-run zones never refuse, and a Redis failure
    /// (`on_error = "deny"`, 503) is ours, so it is answered.
    pub(super) async fn act(&self, location: &Location, outcome: &mut Outcome, conn: &Conn) -> Acted {
        let limited = outcome.banned.is_some() || (outcome.rejected() && !outcome.unavailable);
        match location.limit_action {
            _ if !limited => Acted::Answer,
            LimitAction::Answer => Acted::Answer,
            LimitAction::Close => Acted::Close,
            LimitAction::Tarpit => {
                let Some(slot) = self.tarpit.held.take(self.tarpit.max) else {
                    return Acted::Close;
                };
                // A held request keeps no zone's count (a rejected one takes none).
                outcome.in_flight.clear();
                // Boxed: the request's future stays small for the requests never held.
                Box::pin(hold(slot, self.tarpit.hold, conn)).await
            }
        }
    }
}

/// Holds a refused request for `hold`; when the connection's worker drains first (a
/// SIGTERM, or its listener gone in a reload), the request ends unanswered at once.
async fn hold(slot: Slot, hold: Duration, conn: &Conn) -> Acted {
    let mut stop = conn.stop.clone();
    let acted = tokio::select! {
        () = tokio::time::sleep(hold) => Acted::Held,
        _ = stop.wait_for(|stop| *stop) => Acted::Close,
    };
    drop(slot);
    acted
}

/// A held request's answer closes its HTTP/1.x connection: what the client sent behind
/// it is not read. (An HTTP/2 stream is answered; the connection's other streams go on.)
pub(super) fn closing(response: &mut Response<ResponseBody>, version: Version) {
    if version < Version::HTTP_2 {
        let close = HeaderValue::from_static("close");
        response.headers_mut().insert(CONNECTION, close);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_stop_at_the_max_and_come_back_when_dropped() {
        let held = Arc::new(Held::default());
        let first = held.take(2);
        let second = held.take(2);
        assert!(first.is_some() && second.is_some());
        assert!(held.take(2).is_none(), "a third is over the max");
        drop(first);
        assert_eq!(held.count(), 1);
        assert!(held.take(2).is_some(), "a dropped slot is free again");
        drop(second);
        assert_eq!(held.count(), 0);
    }

    fn conn(stop: tokio::sync::watch::Receiver<bool>) -> Conn {
        let address = crate::config::Address {
            addr: "127.0.0.1:80".parse().unwrap(),
            transport: crate::config::Transport::Tcp,
            http2: true,
        };
        Conn::new("127.0.0.1:1234".parse().unwrap(), 0, address, 80, stop)
    }

    #[tokio::test(start_paused = true)]
    async fn a_hold_lasts_its_time_then_frees_its_slot() {
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let conn = conn(stopped);
        let held = Arc::new(Held::default());
        let slot = held.take(1).unwrap();
        let start = tokio::time::Instant::now();
        let acted = hold(slot, Duration::from_secs(10), &conn).await;
        assert_eq!(acted, Acted::Held);
        assert_eq!(start.elapsed(), Duration::from_secs(10));
        assert_eq!(held.count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_drain_ends_a_hold_at_once_unanswered() {
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let conn = conn(stopped);
        let held = Arc::new(Held::default());
        let slot = held.take(1).unwrap();
        let start = tokio::time::Instant::now();
        let holding = hold(slot, Duration::from_secs(10), &conn);
        let draining = async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            stop.send_replace(true);
        };
        let (acted, ()) = tokio::join!(holding, draining);
        assert_eq!(acted, Acted::Close);
        assert_eq!(start.elapsed(), Duration::from_secs(1));
        assert_eq!(held.count(), 0);
    }

    #[tokio::test(start_paused = true)]
    async fn a_request_dropped_while_held_frees_its_slot() {
        let (_stop, stopped) = tokio::sync::watch::channel(false);
        let conn = conn(stopped);
        let held = Arc::new(Held::default());
        let slot = held.take(1).unwrap();
        let holding = hold(slot, Duration::from_secs(10), &conn);
        let gone = tokio::time::timeout(Duration::from_secs(1), holding).await;
        assert!(gone.is_err());
        assert_eq!(held.count(), 0, "the client went away: its slot is free");
    }
}
