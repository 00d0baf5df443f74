//! The last 15 minutes of the gateway's overall traffic, kept by the gateway so that a
//! page opened late draws them at once (`GET /history`, docs/config.md). A task on the
//! admin API's thread (never on a request's path) reads the counts (`admin/traffic.rs`)
//! every [`EVERY`] and keeps their rates in a ring of [`KEPT`] samples, allocated whole at
//! start: the oldest sample makes room for the newest, and no request can make it grow.

use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::status::{line, named, Ordered};
use super::traffic::{Counts, CLASSES};
use crate::metrics::load::Failure;

/// How often a sample is taken.
pub(crate) const EVERY: Duration = Duration::from_secs(5);
/// How many samples are kept: 15 minutes at one every 5 s.
pub(crate) const KEPT: usize = 180;

/// Rates over one interval, per second, and the connections open at its end.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Sample {
    /// The interval's end, in milliseconds since the Unix epoch (the page's clock labels).
    pub at_ms: u64,
    /// The interval's length.
    pub seconds: f64,
    pub requests: [f64; CLASSES.len()],
    pub delayed: f64,
    pub rejected: f64,
    pub upstream_failures: [f64; Failure::ALL.len()],
    pub connections: u64,
}

/// A ring of at most `capacity` items, oldest first; its memory is taken whole when it
/// is made.
#[derive(Debug)]
pub(crate) struct Ring<T> {
    items: Vec<T>,
    /// The most items kept (`Vec::with_capacity` may give more room than asked).
    capacity: usize,
    /// Where the next item goes once the ring is full (the oldest item's place).
    next: usize,
}

impl<T> Ring<T> {
    pub(crate) fn new(capacity: usize) -> Ring<T> {
        let capacity = capacity.max(1);
        Ring {
            items: Vec::with_capacity(capacity),
            capacity,
            next: 0,
        }
    }

    /// Keeps `item`, in place of the oldest when the ring is full.
    pub(crate) fn push(&mut self, item: T) {
        if self.items.len() < self.capacity {
            self.items.push(item);
            return;
        }
        self.items[self.next] = item;
        self.next = (self.next + 1) % self.items.len();
    }

    /// The items, oldest first.
    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        let (newer, older) = self.items.split_at(self.next);
        older.iter().chain(newer)
    }
}

/// Turns counts read at successive moments into rates: the first reading is only a
/// baseline, unless the sampler starts from one ([`Sampler::from_zero`]).
#[derive(Debug, Default)]
pub(crate) struct Sampler {
    last: Option<(Instant, Counts)>,
}

impl Sampler {
    /// A sampler whose baseline is no traffic at `now`: the gateway's counts start at 0,
    /// so the first sample holds what came before the sampler first ran too.
    pub(crate) fn from_zero(now: Instant) -> Sampler {
        Sampler {
            last: Some((now, Counts::default())),
        }
    }

    /// The sample from the last reading to `counts`, read at `now` (`at_ms` on the wall
    /// clock); `None` for the first reading, or when no time has passed.
    pub(crate) fn take(&mut self, now: Instant, at_ms: u64, counts: Counts) -> Option<Sample> {
        let last = self.last.replace((now, counts));
        let (then, before) = last?;
        let seconds = now.saturating_duration_since(then).as_secs_f64();
        if seconds <= 0.0 {
            return None;
        }
        let rate = |now: u64, before: u64| round(now.saturating_sub(before) as f64 / seconds);
        let mut sample = Sample {
            at_ms,
            seconds: round(seconds),
            delayed: rate(counts.delayed, before.delayed),
            rejected: rate(counts.rejected, before.rejected),
            connections: counts.connections,
            ..Sample::default()
        };
        for (i, into) in sample.requests.iter_mut().enumerate() {
            *into = rate(counts.requests[i], before.requests[i]);
        }
        for (i, into) in sample.upstream_failures.iter_mut().enumerate() {
            *into = rate(counts.upstream_failures[i], before.upstream_failures[i]);
        }
        Some(sample)
    }
}

/// Three decimals are plenty for a chart, and keep the JSON short.
fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// The samples the admin API serves, shared by the sampling task and the answers.
#[derive(Debug)]
pub(crate) struct History {
    ring: Mutex<Ring<Sample>>,
}

impl Default for History {
    fn default() -> Self {
        History {
            ring: Mutex::new(Ring::new(KEPT)),
        }
    }
}

impl History {
    pub(crate) fn push(&self, sample: Sample) {
        self.ring
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(sample);
    }

    /// The samples, oldest first.
    pub(crate) fn samples(&self) -> Vec<Sample> {
        let ring = self.ring.lock().unwrap_or_else(PoisonError::into_inner);
        ring.iter().copied().collect()
    }

    /// `GET /history`, one line of JSON.
    pub(crate) fn json(&self) -> String {
        let samples = self.samples();
        let document = Document {
            interval_ms: EVERY.as_millis() as u64,
            capacity: KEPT,
            samples: samples.iter().map(Shown::from).collect(),
        };
        line(&document)
    }

    /// Takes a sample every [`EVERY`] from what `read` returns, for as long as the task
    /// runs (the admin API's runtime ends it), the first one [`EVERY`] after it starts
    /// (from zero: it starts with the gateway). Ticks missed while the thread was busy are
    /// not made up: the next sample spans the longer interval.
    pub(crate) async fn keep(&self, mut read: impl FnMut() -> Counts) {
        let start = tokio::time::Instant::now();
        let mut ticks = tokio::time::interval_at(start + EVERY, EVERY);
        ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut sampler = Sampler::from_zero(start.into_std());
        loop {
            ticks.tick().await;
            let now = tokio::time::Instant::now().into_std();
            if let Some(sample) = sampler.take(now, unix_ms(SystemTime::now()), read()) {
                self.push(sample);
            }
        }
    }
}

fn unix_ms(at: SystemTime) -> u64 {
    let since = at.duration_since(UNIX_EPOCH).unwrap_or_default();
    u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
}

#[derive(serde::Serialize)]
struct Document {
    interval_ms: u64,
    capacity: usize,
    samples: Vec<Shown>,
}

#[derive(serde::Serialize)]
struct Shown {
    at_ms: u64,
    seconds: f64,
    requests: Ordered<f64>,
    delayed: f64,
    rejected: f64,
    upstream_failures: Ordered<f64>,
    connections: u64,
}

impl From<&Sample> for Shown {
    fn from(sample: &Sample) -> Shown {
        Shown {
            at_ms: sample.at_ms,
            seconds: sample.seconds,
            requests: named(&CLASSES, &sample.requests),
            delayed: sample.delayed,
            rejected: sample.rejected,
            upstream_failures: named(
                &Failure::ALL.map(Failure::label),
                &sample.upstream_failures,
            ),
            connections: sample.connections,
        }
    }
}

#[cfg(test)]
mod tests;
