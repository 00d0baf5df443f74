//! Passive health of one upstream server, as nginx's `max_fails` / `fail_timeout`.
//!
//! A server that failed `max_fails` times within `fail_timeout` is skipped for `fail_timeout`
//! after its last failure, then tried again; one success brings it fully back. Time comes in as
//! `now`; nothing here reads a clock.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// Health of one server. `Send + Sync`. The hot paths (`is_available` and `record_success` on a
/// healthy server) are one atomic load; the mutex is taken only around failures and while the
/// server is, or was just, down.
#[derive(Debug)]
pub struct Health {
    max_fails: u32,
    fail_timeout: Duration,
    /// Mirror of the failure count, written only under `window`'s lock, read without it.
    fails: AtomicU32,
    window: Mutex<Window>,
}

#[derive(Debug, Default)]
struct Window {
    /// The first failure of the current counting window.
    started: Option<Instant>,
    last_failure: Option<Instant>,
}

impl Health {
    /// `max_fails` 0 turns passive health off: the server is never marked down and failures are
    /// not counted (nginx).
    pub(crate) fn new(max_fails: u32, fail_timeout: Duration) -> Health {
        Health {
            max_fails,
            fail_timeout,
            fails: AtomicU32::new(0),
            window: Mutex::new(Window::default()),
        }
    }

    /// False while the server has `max_fails` failures and its last one is less than
    /// `fail_timeout` ago.
    #[inline]
    pub(crate) fn is_available(&self, now: Instant) -> bool {
        if self.fails.load(Ordering::Relaxed) < self.max_fails || self.max_fails == 0 {
            return true;
        }
        let window = self.lock();
        self.fails.load(Ordering::Relaxed) < self.max_fails || self.timed_out(&window, now)
    }

    /// Counts a failure (refused, reset, timed out, bad response). A failure more than
    /// `fail_timeout` after the window's first one starts a new count. A server that was down
    /// and is being tried again still has `fails ≥ max_fails`, so one more failure takes it down
    /// again at once, as in nginx.
    pub(crate) fn record_failure(&self, now: Instant) {
        if self.max_fails == 0 {
            return;
        }
        let mut window = self.lock();
        let fails = self.fails.load(Ordering::Relaxed);
        let expired = window
            .started
            .is_none_or(|started| now.saturating_duration_since(started) > self.fail_timeout);
        let fails = if fails < self.max_fails && expired {
            window.started = Some(now);
            1
        } else {
            fails.saturating_add(1)
        };
        window.last_failure = Some(now);
        self.fails.store(fails, Ordering::Relaxed);
    }

    /// Counts a success. Once `fail_timeout` has passed since the last failure (the server came
    /// back, or the count is stale), it forgets the failures; within the window a success does
    /// not cancel them — nginx counts failures per `fail_timeout`, not in a row.
    #[inline]
    pub(crate) fn record_success(&self, now: Instant) {
        if self.fails.load(Ordering::Relaxed) == 0 {
            return;
        }
        let mut window = self.lock();
        if self.timed_out(&window, now) {
            *window = Window::default();
            self.fails.store(0, Ordering::Relaxed);
        }
    }

    /// Failures counted now (for `/status`).
    pub(crate) fn fails(&self) -> u32 {
        self.fails.load(Ordering::Relaxed)
    }

    fn timed_out(&self, window: &Window, now: Instant) -> bool {
        window
            .last_failure
            .is_none_or(|last| now.saturating_duration_since(last) >= self.fail_timeout)
    }

    /// The state stays consistent even if a holder panicked (each update is a few stores), so a
    /// poisoned lock is used as is rather than propagating the panic into request handling.
    fn lock(&self) -> MutexGuard<'_, Window> {
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SEC: Duration = Duration::from_secs(1);

    fn health() -> (Health, Instant) {
        (Health::new(3, 10 * SEC), Instant::now())
    }

    #[test]
    fn fresh_server_is_available() {
        let (h, t0) = health();
        assert!(h.is_available(t0));
        assert_eq!(h.fails(), 0);
    }

    #[test]
    fn max_fails_within_fail_timeout_takes_the_server_down() {
        let (h, t0) = health();
        h.record_failure(t0);
        h.record_failure(t0 + 2 * SEC);
        assert!(h.is_available(t0 + 2 * SEC));
        h.record_failure(t0 + 4 * SEC);
        assert!(!h.is_available(t0 + 4 * SEC));
        assert_eq!(h.fails(), 3);
    }

    #[test]
    fn down_server_comes_back_fail_timeout_after_its_last_failure() {
        let (h, t0) = health();
        for s in [0, 1, 5] {
            h.record_failure(t0 + s * SEC);
        }
        assert!(!h.is_available(t0 + 14 * SEC));
        assert!(h.is_available(t0 + 15 * SEC));
    }

    #[test]
    fn failures_spread_wider_than_fail_timeout_restart_the_count() {
        let (h, t0) = health();
        h.record_failure(t0);
        h.record_failure(t0 + 5 * SEC);
        h.record_failure(t0 + 11 * SEC); // window began at t0: a new count of 1
        assert_eq!(h.fails(), 1);
        assert!(h.is_available(t0 + 11 * SEC));
        h.record_failure(t0 + 12 * SEC);
        h.record_failure(t0 + 13 * SEC);
        assert!(!h.is_available(t0 + 13 * SEC));
    }

    #[test]
    fn one_success_after_coming_back_resets_the_count() {
        let (h, t0) = health();
        for _ in 0..3 {
            h.record_failure(t0);
        }
        h.record_success(t0 + 10 * SEC);
        assert_eq!(h.fails(), 0);
        h.record_failure(t0 + 11 * SEC);
        assert!(h.is_available(t0 + 11 * SEC));
    }

    #[test]
    fn a_failure_right_after_coming_back_takes_it_down_again_at_once() {
        let (h, t0) = health();
        for _ in 0..3 {
            h.record_failure(t0);
        }
        assert!(h.is_available(t0 + 10 * SEC));
        h.record_failure(t0 + 10 * SEC);
        assert!(!h.is_available(t0 + 10 * SEC));
        assert!(!h.is_available(t0 + 19 * SEC));
        assert!(h.is_available(t0 + 20 * SEC));
    }

    #[test]
    fn success_within_the_window_does_not_cancel_failures() {
        let (h, t0) = health();
        h.record_failure(t0);
        h.record_failure(t0 + SEC);
        h.record_success(t0 + 2 * SEC);
        h.record_failure(t0 + 3 * SEC);
        assert!(!h.is_available(t0 + 3 * SEC));
    }

    #[test]
    fn success_from_a_request_that_started_before_the_outage_keeps_it_down() {
        let (h, t0) = health();
        for _ in 0..3 {
            h.record_failure(t0);
        }
        h.record_success(t0 + SEC);
        assert!(!h.is_available(t0 + SEC));
    }

    #[test]
    fn max_fails_zero_never_marks_down() {
        let h = Health::new(0, 10 * SEC);
        let t0 = Instant::now();
        for _ in 0..100 {
            h.record_failure(t0);
        }
        assert!(h.is_available(t0));
        assert_eq!(h.fails(), 0);
    }

    #[test]
    fn max_fails_one_goes_down_on_the_first_failure() {
        let h = Health::new(1, 10 * SEC);
        let t0 = Instant::now();
        h.record_failure(t0);
        assert!(!h.is_available(t0 + 9 * SEC));
        assert!(h.is_available(t0 + 10 * SEC));
    }
}
