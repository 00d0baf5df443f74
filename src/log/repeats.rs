//! Error-log lines that repeat. During an upstream outage every request fails the same
//! way, and one line per failure would make the error log the next outage (hundreds of
//! thousands of lines in seconds). So the first line of a kind, at one place (an
//! upstream server, a group, a listener), is logged at once, and the next ones at most
//! once per [`INTERVAL`], each saying how many like it were left out since the last.
//! Metrics count every failure; only the log is thinned.

use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Most one line per kind and place is logged in this time.
pub const INTERVAL: Duration = Duration::from_secs(10);

/// The repeats of each kind of line at one place.
#[derive(Debug, Default)]
pub struct Repeats {
    /// Few kinds occur at one place: a short list, searched, behind one lock that
    /// only failing requests take.
    kinds: Mutex<Vec<Seen>>,
}

#[derive(Debug)]
struct Seen {
    kind: &'static str,
    /// When the next line of the kind may be logged.
    next: Instant,
    /// Lines left out since the last one logged.
    left_out: u64,
}

impl Repeats {
    /// Whether a line of `kind` is to be logged at `now`: `Some(n)`, `n` being how many
    /// were left out since the last one; `None` to leave this one out.
    pub(crate) fn admit(&self, kind: &'static str, now: Instant) -> Option<u64> {
        let Ok(mut kinds) = self.kinds.lock() else {
            // A panic elsewhere poisoned the lock: log rather than lose the line.
            return Some(0);
        };
        let Some(seen) = kinds.iter_mut().find(|seen| seen.kind == kind) else {
            kinds.push(Seen {
                kind,
                next: now + INTERVAL,
                left_out: 0,
            });
            return Some(0);
        };
        if now < seen.next {
            seen.left_out += 1;
            return None;
        }
        seen.next = now + INTERVAL;
        Some(std::mem::take(&mut seen.left_out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_line_of_a_kind_is_logged_then_one_per_interval_with_the_count_left_out() {
        let repeats = Repeats::default();
        let t0 = Instant::now();
        assert_eq!(repeats.admit("timeout", t0), Some(0));
        for ms in 1..1000 {
            assert_eq!(
                repeats.admit("timeout", t0 + Duration::from_millis(ms)),
                None
            );
        }
        // Another kind at the same place is its own.
        assert_eq!(
            repeats.admit("connect", t0 + Duration::from_secs(1)),
            Some(0)
        );
        assert_eq!(repeats.admit("timeout", t0 + INTERVAL), Some(999));
        assert_eq!(repeats.admit("timeout", t0 + INTERVAL), None);
        assert_eq!(repeats.admit("timeout", t0 + 3 * INTERVAL), Some(1));
    }
}
