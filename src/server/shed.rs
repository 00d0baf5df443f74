//! A worker's connections, so that the oldest idle ones can be closed to make room when
//! the process runs short of descriptors (`server/descriptors.rs`). Idle means waiting
//! for a request: fresh (nothing read yet) or between two requests, as nginx's
//! "reusable" connections, which it closes oldest first when `worker_connections` run
//! out ("worker_connections are not enough, reusing connections").

use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use tokio::time::Instant;

use super::timeouts::ConnState;

/// The most connections one call sheds, as nginx's `ngx_drain_connections`.
const MOST: usize = 32;

/// After a look that found none idle, how long looks are not made again: a connection
/// accepted beyond the share in that time is refused without one.
const QUIET: Duration = Duration::from_millis(100);

/// The connections of one worker (every listener's), held weakly: a connection that
/// ended is dropped from the list at the next prune. The list is pruned whenever it has
/// doubled since the last prune, so it holds at most twice the connections alive when it
/// was last pruned, plus [`SLACK`]: bounded by the connections open, whatever the churn.
/// The worker prunes it every few seconds too ([`Sheddable::prune`]): an ended
/// connection's entry keeps its state's memory allocated, which a quiet spell after a busy
/// one would otherwise hold.
#[derive(Default)]
pub(super) struct Sheddable {
    inner: Mutex<Inner>,
}

const SLACK: usize = 64;

#[derive(Default)]
struct Inner {
    conns: Vec<Weak<ConnState>>,
    /// Entries after the last prune.
    kept: usize,
    /// Connections shed for which no new one has been let in yet: each is closing, and
    /// its descriptor will be free for one.
    credit: usize,
    /// No look before this, the last having found none idle.
    quiet_until: Option<Instant>,
}

impl Sheddable {
    /// Adds a connection just accepted.
    pub(super) fn add(&self, conn: &Arc<ConnState>) {
        let mut inner = self.lock();
        if inner.conns.len() >= 2 * inner.kept + SLACK {
            inner.conns.retain(|conn| conn.strong_count() > 0);
            inner.kept = inner.conns.len();
        }
        inner.conns.push(Arc::downgrade(conn));
    }

    /// Asks the connections that have waited for a request since `before` or longer to
    /// let their buffers go ([`ConnState::ask_let_go`]).
    pub(super) fn let_go_idle(&self, before: Instant) {
        let inner = self.lock();
        for conn in inner.conns.iter().filter_map(Weak::upgrade) {
            conn.ask_let_go(before);
        }
    }

    /// Drops the entries of connections that ended, and the room the list no longer needs.
    pub(super) fn prune(&self) {
        let mut inner = self.lock();
        inner.conns.retain(|conn| conn.strong_count() > 0);
        inner.kept = inner.conns.len();
        let room = 2 * inner.kept + SLACK;
        inner.conns.shrink_to(room);
    }

    /// Room for one connection beyond the share: the descriptor of one shed earlier
    /// (`Some(0)`), or of those [`Sheddable::shed_oldest`] sheds now (`Some(n)`); `None`
    /// when none is idle.
    pub(super) fn make_room(&self, now: Instant) -> Option<usize> {
        {
            let mut inner = self.lock();
            if inner.credit > 0 {
                inner.credit -= 1;
                return Some(0);
            }
        }
        let shed = self.shed_oldest(now);
        if shed == 0 {
            return None;
        }
        let mut inner = self.lock();
        inner.credit = inner.credit.saturating_sub(1);
        Some(shed)
    }

    /// Sheds the connections idle the longest: an eighth of the idle ones, at least one
    /// and at most [`MOST`], so that the next accepts beyond the share find room too.
    /// Returns how many. A look costs a walk over the worker's connections; after one
    /// that found none idle, the next [`QUIET`] return 0 without a look.
    pub(super) fn shed_oldest(&self, now: Instant) -> usize {
        let mut inner = self.lock();
        if inner.quiet_until.is_some_and(|until| now < until) {
            return 0;
        }
        inner.conns.retain(|conn| conn.strong_count() > 0);
        inner.kept = inner.conns.len();
        let mut idle: Vec<(Instant, Arc<ConnState>)> = inner
            .conns
            .iter()
            .filter_map(Weak::upgrade)
            .filter_map(|conn| Some((conn.idle_since()?, conn)))
            .collect();
        if idle.is_empty() {
            inner.quiet_until = Some(now + QUIET);
            return 0;
        }
        let n = (idle.len() / 8).clamp(1, MOST);
        inner.credit += n;
        drop(inner);
        if n < idle.len() {
            idle.select_nth_unstable_by_key(n - 1, |(since, _)| *since);
        }
        for (_, conn) in &idle[..n] {
            conn.shed();
        }
        n
    }

    /// Entries in the list, ended connections not yet pruned included.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.lock().conns.len()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_list_stays_bounded_by_the_connections_alive() {
        let sheddable = Sheddable::default();
        let alive: Vec<_> = (0..100).map(|_| ConnState::new()).collect();
        for conn in &alive {
            sheddable.add(conn);
        }
        for _ in 0..100_000 {
            let conn = ConnState::new();
            sheddable.add(&conn);
        }
        assert!(
            sheddable.len() <= 2 * 101 + SLACK + 1,
            "{} entries for 100 connections",
            sheddable.len()
        );
    }

    #[test]
    fn a_prune_lets_go_of_the_connections_that_ended() {
        let sheddable = Sheddable::default();
        let alive = ConnState::new();
        sheddable.add(&alive);
        let ended: Vec<_> = (0..1000).map(|_| ConnState::new()).collect();
        for conn in &ended {
            sheddable.add(conn);
        }
        drop(ended);
        sheddable.prune();
        assert_eq!(sheddable.len(), 1);
        assert!(sheddable.lock().conns.capacity() <= 2 + SLACK);
    }

    #[test]
    fn the_oldest_idle_connections_are_shed_and_busy_ones_never() {
        let sheddable = Sheddable::default();
        let mut conns = Vec::new();
        for _ in 0..16 {
            let conn = ConnState::new();
            sheddable.add(&conn);
            // Each one accepted after the last: the clock moves on before the next.
            let accepted = conn.idle_since().expect("fresh");
            while Instant::now() <= accepted {
                std::hint::spin_loop();
            }
            conns.push(conn);
        }
        // The oldest is busy: it is not idle, whatever its age.
        let _busy = conns[0].begin();
        assert_eq!(sheddable.shed_oldest(Instant::now()), 1, "15 idle: one");
        assert!(conns[0].idle_since().is_none(), "busy");
        assert!(conns[1].idle_since().is_none(), "the oldest idle was shed");
        assert!(conns[2..].iter().all(|conn| conn.idle_since().is_some()));
        // Only busy and shed ones left: none to shed, and no look for a while.
        for conn in &conns[2..] {
            conn.shed();
        }
        let now = Instant::now();
        assert_eq!(sheddable.shed_oldest(now), 0);
        let late = ConnState::new();
        sheddable.add(&late);
        assert_eq!(sheddable.shed_oldest(now + QUIET / 2), 0, "quiet");
        assert_eq!(sheddable.shed_oldest(now + QUIET), 1);
    }

    #[test]
    fn each_connection_shed_makes_room_for_one() {
        let sheddable = Sheddable::default();
        let conns: Vec<_> = (0..16).map(|_| ConnState::new()).collect();
        for conn in &conns {
            sheddable.add(conn);
        }
        let now = Instant::now();
        // 16 idle: two shed, for this connection and the next.
        assert_eq!(sheddable.make_room(now), Some(2));
        assert_eq!(sheddable.make_room(now), Some(0));
        // 14 idle: one.
        assert_eq!(sheddable.make_room(now), Some(1));
        let shed = conns.iter().filter(|conn| conn.idle_since().is_none());
        assert_eq!(shed.count(), 3);
    }
}
