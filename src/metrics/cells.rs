//! Counters that each worker writes on its own cache lines: the request path never
//! writes a line another worker writes, and a scrape adds the workers' cells up.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicI64, AtomicU16, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A value on cache lines of its own. 128 bytes, not 64: x86 fetches lines in
/// adjacent pairs, so two workers' cells 64 bytes apart would still slow each other.
#[repr(align(128))]
#[derive(Debug, Default)]
pub struct Aligned<T>(pub T);

impl<T> std::ops::Deref for Aligned<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.0
    }
}

/// One `T` per worker, each in an allocation of its own. A request clones the handle of
/// its own worker's cell when it must keep it past the handler (an uncontended count).
#[derive(Debug)]
pub struct PerWorker<T> {
    cells: Box<[Arc<Aligned<T>>]>,
}

impl<T: Default> PerWorker<T> {
    pub fn new(workers: usize) -> PerWorker<T> {
        PerWorker {
            cells: (0..workers.max(1))
                .map(|_| Arc::new(Aligned::default()))
                .collect(),
        }
    }
}

impl<T> PerWorker<T> {
    /// Worker `worker`'s cell (any index is accepted: it wraps).
    pub fn get(&self, worker: usize) -> &Arc<Aligned<T>> {
        &self.cells[worker % self.cells.len()]
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = &T> {
        self.cells.iter().map(|cell| &cell.0)
    }
}

/// A monotonic count.
#[derive(Debug, Default)]
pub struct Counter(AtomicU64);

impl Counter {
    pub(crate) fn add(&self, n: u64) {
        self.0.fetch_add(n, Relaxed);
    }

    pub(crate) fn get(&self) -> u64 {
        self.0.load(Relaxed)
    }
}

/// A count that goes up and down (open connections). Per worker it may dip below zero
/// when a connection ends on another worker than it began; the sum never does.
#[derive(Debug, Default)]
pub(crate) struct Gauge(AtomicI64);

impl Gauge {
    pub(crate) fn add(&self, n: i64) {
        self.0.fetch_add(n, Relaxed);
    }

    pub(crate) fn get(&self) -> i64 {
        self.0.load(Relaxed)
    }
}

/// Distinct statuses one worker keeps counts for without a lock. A location sees a
/// handful (200, 304, 404, 429, 502…); more spill into a locked list.
const STATUS_SLOTS: usize = 8;

/// Responses by status code.
#[derive(Debug, Default)]
pub(crate) struct StatusCounts {
    /// 0 while a slot is free; set once.
    codes: [AtomicU16; STATUS_SLOTS],
    counts: [AtomicU64; STATUS_SLOTS],
    spilled: Mutex<Vec<(u16, u64)>>,
}

impl StatusCounts {
    pub(crate) fn add(&self, status: u16) {
        for (code, count) in self.codes.iter().zip(&self.counts) {
            let mut seen = code.load(Relaxed);
            if seen == 0 {
                // Claimed by whoever gets there first; a loser sees the winner's code.
                seen = match code.compare_exchange(0, status, Relaxed, Relaxed) {
                    Ok(_) => status,
                    Err(other) => other,
                };
            }
            if seen == status {
                count.fetch_add(1, Relaxed);
                return;
            }
        }
        let mut spilled = self
            .spilled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        match spilled.iter_mut().find(|(code, _)| *code == status) {
            Some((_, count)) => *count += 1,
            None => spilled.push((status, 1)),
        }
    }

    /// Adds these counts to `into`, by status.
    pub(crate) fn collect(&self, into: &mut BTreeMap<u16, u64>) {
        for (code, count) in self.codes.iter().zip(&self.counts) {
            let code = code.load(Relaxed);
            let count = count.load(Relaxed);
            if code != 0 && count != 0 {
                *into.entry(code).or_default() += count;
            }
        }
        let spilled = self
            .spilled
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        for &(code, count) in spilled.iter() {
            *into.entry(code).or_default() += count;
        }
    }
}

/// Upper bounds of the latency buckets, in seconds: from half a millisecond (a
/// gateway's own answers) to ten seconds (a slow upstream).
pub(crate) const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

const BUCKETS_NS: [u64; 14] = [
    500_000,
    1_000_000,
    2_500_000,
    5_000_000,
    10_000_000,
    25_000_000,
    50_000_000,
    100_000_000,
    250_000_000,
    500_000_000,
    1_000_000_000,
    2_500_000_000,
    5_000_000_000,
    10_000_000_000,
];

/// A latency histogram: a count per bucket (the last is +Inf) and the sum.
#[derive(Debug, Default)]
pub struct Histogram {
    counts: [AtomicU64; BUCKETS.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    pub(crate) fn observe(&self, elapsed: Duration) {
        let (bucket, ns) = bucket(elapsed);
        self.add(bucket, ns);
    }

    fn add(&self, bucket: usize, ns: u64) {
        self.counts[bucket].fetch_add(1, Relaxed);
        self.sum_ns.fetch_add(ns, Relaxed);
    }
}

/// The bucket `elapsed` falls in, and `elapsed` in nanoseconds.
fn bucket(elapsed: Duration) -> (usize, u64) {
    let ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
    // Most observations fall in the first buckets: a forward scan ends early.
    let bucket = BUCKETS_NS
        .iter()
        .position(|bound| ns <= *bound)
        .unwrap_or(BUCKETS.len());
    (bucket, ns)
}

/// Several histograms' cells added up, for a scrape.
#[derive(Debug, Default, Clone, PartialEq)]
pub(crate) struct HistogramSum {
    /// Per bucket, not cumulative; the last is +Inf.
    pub counts: [u64; BUCKETS.len() + 1],
    pub sum_ns: u64,
}

impl HistogramSum {
    pub(crate) fn add(&mut self, cell: &Histogram) {
        for (sum, count) in self.counts.iter_mut().zip(&cell.counts) {
            *sum += count.load(Relaxed);
        }
        self.sum_ns = self.sum_ns.wrapping_add(cell.sum_ns.load(Relaxed));
    }

    pub(crate) fn count(&self) -> u64 {
        self.counts.iter().sum()
    }

    /// `(upper bound, count)` per bucket, the last with an infinite bound.
    pub(crate) fn buckets(&self) -> Vec<(f64, u64)> {
        BUCKETS
            .iter()
            .copied()
            .chain([f64::INFINITY])
            .zip(self.counts)
            .collect()
    }

    pub(crate) fn sum_seconds(&self) -> f64 {
        self.sum_ns as f64 / 1e9
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_match_their_bounds_in_nanoseconds() {
        for (seconds, ns) in BUCKETS.iter().zip(BUCKETS_NS) {
            assert_eq!((seconds * 1e9).round() as u64, ns);
        }
    }

    #[test]
    fn an_observation_falls_in_the_first_bucket_whose_bound_it_does_not_exceed() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(500)); // exactly on the first bound
        h.observe(Duration::from_micros(501));
        h.observe(Duration::from_secs(11));
        let mut sum = HistogramSum::default();
        sum.add(&h);
        assert_eq!(sum.counts[0], 1);
        assert_eq!(sum.counts[1], 1);
        assert_eq!(sum.counts[BUCKETS.len()], 1);
        assert_eq!(sum.count(), 3);
        assert_eq!(sum.sum_ns, 500_000 + 501_000 + 11_000_000_000);
    }

    #[test]
    fn statuses_beyond_the_slots_are_still_counted() {
        let counts = StatusCounts::default();
        for status in 200..220u16 {
            for _ in 0..(status - 199) {
                counts.add(status);
            }
        }
        let mut by_status = BTreeMap::new();
        counts.collect(&mut by_status);
        assert_eq!(by_status.len(), 20);
        for (status, count) in by_status {
            assert_eq!(count, u64::from(status - 199));
        }
    }

    #[test]
    fn workers_cells_sit_on_lines_of_their_own() {
        let cells: PerWorker<Counter> = PerWorker::new(2);
        let a = Arc::as_ptr(cells.get(0)) as usize;
        let b = Arc::as_ptr(cells.get(1)) as usize;
        assert_eq!(a % 128, 0);
        assert!(a.abs_diff(b) >= 128);
        cells.get(0).add(2);
        cells.get(3).add(1); // wraps to worker 1
        assert_eq!(cells.iter().map(Counter::get).collect::<Vec<_>>(), [2, 1]);
    }
}
