//! The error-log lines of a zone's penalty box, thinned. A client makes them (each fake
//! key it gets banned is one), so each kind is logged at once the first time, then at most
//! once per [`INTERVAL`], saying how many were left out since the last: the rule of
//! `log::repeats`, which the pure core may not use. Metrics count every one.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::later;

/// Most one line of a kind is logged in this time (as `log::repeats::INTERVAL`).
pub const INTERVAL: Duration = Duration::from_secs(10);

/// The lines of one kind.
#[derive(Debug, Default)]
pub struct Thinned {
    /// When the next line may be logged, and the lines left out since the last;
    /// `None` before the first.
    state: Mutex<Option<(Instant, u64)>>,
}

impl Thinned {
    /// Whether a line is to be logged at `now`: `Some(n)`, `n` being how many were left
    /// out since the last one logged; `None` to leave this one out.
    pub fn admit(&self, now: Instant) -> Option<u64> {
        let Ok(mut state) = self.state.lock() else {
            // A panic elsewhere poisoned the lock: log rather than lose the line.
            return Some(0);
        };
        match &mut *state {
            Some((next, left_out)) if now < *next => {
                *left_out += 1;
                None
            }
            seen => {
                let left_out = seen.map_or(0, |(_, n)| n);
                *seen = Some((later(now, INTERVAL), 0));
                Some(left_out)
            }
        }
    }
}

/// A zone's penalty-box lines, one [`Thinned`] per kind.
#[derive(Debug, Default)]
pub struct Lines {
    /// "key banned".
    pub banned: Thinned,
    /// A ban refused: the table is full.
    pub refused: Thinned,
    /// A first strike not counted: the strike table is full.
    pub uncounted: Thinned,
}
