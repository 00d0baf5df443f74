//! Time as a trait, so limiters and health checks take `now` and tests advance it by hand.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A source of monotonic time. The pure core never reads a clock itself; the shell asks a `Clock`
/// once per request and passes `now` down.
pub trait Clock: Send + Sync + 'static {
    fn now(&self) -> Instant;
}

/// The real clock: `Instant::now()`.
#[derive(Clone, Copy, Debug, Default)]
pub struct MonotonicClock;

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that only moves when told to. It starts at the `Instant` it was made with and keeps the
/// offset in nanoseconds in one atomic, so `advance` works through `&self` (shared in an `Arc`)
/// without a lock.
#[derive(Debug)]
pub struct FakeClock {
    origin: Instant,
    offset_nanos: AtomicU64,
}

impl FakeClock {
    /// A clock standing at `origin`.
    pub fn new(origin: Instant) -> FakeClock {
        FakeClock {
            origin,
            offset_nanos: AtomicU64::new(0),
        }
    }

    /// The instant this clock started at.
    pub fn origin(&self) -> Instant {
        self.origin
    }

    /// Moves time forward by `by`. Saturates instead of overflowing (u64 nanoseconds is 584 years).
    pub fn advance(&self, by: Duration) {
        let add = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // fetch_update never fails with a closure that always returns Some.
        let _ = self
            .offset_nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                Some(cur.saturating_add(add))
            });
    }

    /// Sets the time to `origin + since_origin`; may move backwards, which only tests should want.
    pub fn set(&self, since_origin: Duration) {
        let nanos = u64::try_from(since_origin.as_nanos()).unwrap_or(u64::MAX);
        self.offset_nanos.store(nanos, Ordering::Release);
    }
}

impl Default for FakeClock {
    fn default() -> FakeClock {
        FakeClock::new(Instant::now())
    }
}

impl Clock for FakeClock {
    fn now(&self) -> Instant {
        let offset = Duration::from_nanos(self.offset_nanos.load(Ordering::Acquire));
        // An Instant cannot overflow in any test that runs for less than centuries; fall back to
        // the origin rather than panic if it somehow does.
        self.origin.checked_add(offset).unwrap_or(self.origin)
    }
}

/// Whole milliseconds from `origin` to `now`, 0 if `now` is earlier. nginx's limiters count in ms,
/// so this is the unit their arithmetic wants.
#[inline]
pub fn millis_since(origin: Instant, now: Instant) -> u64 {
    u64::try_from(now.saturating_duration_since(origin).as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn fake_clock_stands_still_until_advanced() {
        let start = Instant::now();
        let clock = FakeClock::new(start);
        assert_eq!(clock.now(), start);
        assert_eq!(clock.now(), start);
        clock.advance(Duration::from_millis(1500));
        assert_eq!(clock.now(), start + Duration::from_millis(1500));
    }

    #[test]
    fn fake_clock_advances_through_a_shared_reference() {
        let start = Instant::now();
        let clock = Arc::new(FakeClock::new(start));
        let other = Arc::clone(&clock);
        other.advance(Duration::from_secs(2));
        clock.advance(Duration::from_secs(3));
        assert_eq!(clock.now(), start + Duration::from_secs(5));
    }

    #[test]
    fn fake_clock_set_moves_to_an_absolute_offset() {
        let start = Instant::now();
        let clock = FakeClock::new(start);
        clock.advance(Duration::from_secs(10));
        clock.set(Duration::from_secs(4));
        assert_eq!(clock.now(), start + Duration::from_secs(4));
    }

    #[test]
    fn monotonic_clock_does_not_go_backwards() {
        let a = MonotonicClock.now();
        let b = MonotonicClock.now();
        assert!(b >= a);
    }

    #[test]
    fn millis_since_truncates_and_clamps_at_zero() {
        let t0 = Instant::now();
        assert_eq!(millis_since(t0, t0 + Duration::from_micros(2999)), 2);
        assert_eq!(millis_since(t0 + Duration::from_secs(1), t0), 0);
    }

    #[test]
    fn clock_is_usable_as_a_trait_object() {
        let clock: Box<dyn Clock> = Box::new(FakeClock::new(Instant::now()));
        let _ = clock.now();
    }
}
