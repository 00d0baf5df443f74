//! An upstream group's load signals (docs/config.md, "Load signals"): per worker, a fine
//! latency histogram of response heads and counts of ended and failed requests
//! ([`LoadCell`], two or three uncontended `Relaxed` adds on the worker's own lines per
//! request); and, for the tick thread alone, the sliding [`Window`] that turns the
//! workers' cumulative counts into 100 ms slots and those into [`Signals`].

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::time::Duration;

use super::cells::PerWorker;
use crate::limit::adaptive::{Signals, MIN_SAMPLES};

/// One slot of a [`Window`]: the tick thread pushes one this often.
pub(crate) const SLOT: Duration = Duration::from_millis(100);

/// Slots of the signals `/status` and `/metrics` show (the last second).
pub(crate) const SHOWN_SLOTS: usize = 10;

/// Latency buckets: 4 per power of two from 64 µs to 64 s (the last one holds longer).
pub(crate) const BUCKETS: usize = 80;
/// log2 of the first octave's start in µs (64 µs).
const FIRST_OCTAVE: u32 = 6;

/// The bucket of a latency: octave (power of two of its µs) and quarter within it.
fn bucket(latency: Duration) -> usize {
    let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
    if us < 1 << FIRST_OCTAVE {
        return 0;
    }
    let log2 = 63 - us.leading_zeros();
    let quarter = ((us >> (log2 - 2)) & 3) as usize;
    (((log2 - FIRST_OCTAVE) as usize) * 4 + quarter).min(BUCKETS - 1)
}

/// The µs range `[low, high)` bucket `i` stands for (the first starts at 0).
fn bounds(i: usize) -> (f64, f64) {
    let unit = (1u64 << (i / 4 + FIRST_OCTAVE as usize - 2)) as f64;
    let quarter = (i % 4) as f64;
    let low = if i == 0 { 0.0 } else { (4.0 + quarter) * unit };
    (low, (5.0 + quarter) * unit)
}

/// Why a request to a group failed (the `kind` label of
/// `tollgate_upstream_failed_requests_total`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Failure {
    /// A response with a status of 500 or above.
    ServerError,
    /// No response head within `read_timeout` (or no connection within
    /// `connect_timeout`).
    Timeout,
    /// No server took the connection, or none was live.
    Refused,
    /// The exchange broke: reset, closed early, a malformed response.
    Broken,
}

impl Failure {
    pub(crate) const ALL: [Failure; 4] = [
        Failure::ServerError,
        Failure::Timeout,
        Failure::Refused,
        Failure::Broken,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Failure::ServerError => "5xx",
            Failure::Timeout => "timeout",
            Failure::Refused => "refused",
            Failure::Broken => "broken",
        }
    }
}

/// One worker's load counts for one group, cumulative since start. Only that worker
/// writes them; the tick reads every worker's.
#[derive(Debug)]
pub struct LoadCell {
    buckets: [AtomicU64; BUCKETS],
    /// Requests that ended: a response head or a failure.
    ended: AtomicU64,
    failures: [AtomicU64; Failure::ALL.len()],
}

impl Default for LoadCell {
    fn default() -> Self {
        LoadCell {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            ended: AtomicU64::new(0),
            failures: std::array::from_fn(|_| AtomicU64::new(0)),
        }
    }
}

impl LoadCell {
    /// A response head came after `latency` with `status`.
    #[inline]
    pub fn record(&self, latency: Duration, status: u16) {
        self.buckets[bucket(latency)].fetch_add(1, Relaxed);
        self.ended.fetch_add(1, Relaxed);
        if status >= 500 {
            self.failures[Failure::ServerError as usize].fetch_add(1, Relaxed);
        }
    }

    /// A request ended without a response head. A timeout passes its `read_timeout` as
    /// a (censored) latency sample, so a stalled group still shows slow.
    pub fn fail(&self, kind: Failure, latency: Option<Duration>) {
        if let Some(latency) = latency {
            self.buckets[bucket(latency)].fetch_add(1, Relaxed);
        }
        self.ended.fetch_add(1, Relaxed);
        self.failures[kind as usize].fetch_add(1, Relaxed);
    }
}

/// Counts added up over workers (and over a window's slots).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Totals {
    buckets: [u64; BUCKETS],
    pub ended: u64,
    pub failures: [u64; Failure::ALL.len()],
}

impl Default for Totals {
    fn default() -> Self {
        Totals {
            buckets: [0; BUCKETS],
            ended: 0,
            failures: [0; Failure::ALL.len()],
        }
    }
}

impl Totals {
    /// Every worker's cell of `cells`, added up.
    pub(crate) fn of(cells: &PerWorker<LoadCell>) -> Totals {
        let mut sum = Totals::default();
        for cell in cells.iter() {
            for (into, from) in sum.buckets.iter_mut().zip(&cell.buckets) {
                *into += from.load(Relaxed);
            }
            sum.ended += cell.ended.load(Relaxed);
            for (into, from) in sum.failures.iter_mut().zip(&cell.failures) {
                *into += from.load(Relaxed);
            }
        }
        sum
    }

    fn add(&mut self, other: &Totals) {
        for (a, b) in self.buckets.iter_mut().zip(&other.buckets) {
            *a += b;
        }
        self.ended += other.ended;
        for (a, b) in self.failures.iter_mut().zip(&other.failures) {
            *a += b;
        }
    }

    /// `self - earlier`, each count at least 0 (a cell read mid-update may lag).
    fn since(&self, earlier: &Totals) -> Totals {
        let mut delta = self.clone();
        for (a, b) in delta.buckets.iter_mut().zip(&earlier.buckets) {
            *a = a.saturating_sub(*b);
        }
        delta.ended = delta.ended.saturating_sub(earlier.ended);
        for (a, b) in delta.failures.iter_mut().zip(&earlier.failures) {
            *a = a.saturating_sub(*b);
        }
        delta
    }

    /// Latency samples.
    pub(crate) fn samples(&self) -> u64 {
        self.buckets.iter().sum()
    }

    pub(crate) fn failed(&self) -> u64 {
        self.failures.iter().sum()
    }

    /// The latency at quantile `q` (0–1), interpolated inside its bucket; `None` under
    /// [`MIN_SAMPLES`] samples.
    pub(crate) fn quantile(&self, q: f64) -> Option<Duration> {
        if self.samples() < MIN_SAMPLES {
            return None;
        }
        self.quantile_of_any(q)
    }

    /// [`Totals::quantile`] of however few samples there are; `None` only with none.
    /// For a reader that weighs the count itself.
    pub(crate) fn quantile_of_any(&self, q: f64) -> Option<Duration> {
        let samples = self.samples();
        let rank = (q * samples as f64).ceil().max(1.0);
        let mut below = 0u64;
        for (i, &count) in self.buckets.iter().enumerate() {
            if count > 0 && (below + count) as f64 >= rank {
                let (low, high) = bounds(i);
                let within = (rank - below as f64) / count as f64;
                let us = low + within * (high - low);
                return Some(Duration::from_nanos((us * 1000.0) as u64));
            }
            below += count;
        }
        None
    }

    /// These counts as [`Signals`], with the group's `in_flight`.
    pub fn signals(&self, in_flight: u64) -> Signals {
        let failure_share = (self.ended >= MIN_SAMPLES)
            .then(|| (self.failed().min(self.ended) * 1000 / self.ended) as u32);
        Signals {
            in_flight,
            samples: self.samples(),
            p50: self.quantile(0.50),
            p90: self.quantile(0.90),
            p99: self.quantile(0.99),
            failure_share,
        }
    }
}

/// The tick's view of one group: the cumulative counts last read and a ring of the
/// deltas of the last slots (one per [`Window::advance`], every 100 ms), as many as the
/// longest span a consumer asks for.
#[derive(Debug)]
pub struct Window {
    previous: Totals,
    slots: VecDeque<Totals>,
    span: usize,
    /// Slots pushed since the window was made.
    ticks: u64,
}

impl Window {
    /// A window keeping `span` slots, starting from `cells` as they are now (what was
    /// counted before is not in any slot).
    pub fn new(cells: &PerWorker<LoadCell>, span: usize) -> Window {
        Window {
            previous: Totals::of(cells),
            slots: VecDeque::with_capacity(span.max(1)),
            span: span.max(1),
            ticks: 0,
        }
    }

    /// Keeps at least `span` slots from now on.
    pub(crate) fn keep(&mut self, span: usize) {
        self.span = self.span.max(span);
    }

    /// Reads `cells` and pushes what they counted since the last read as one slot.
    pub fn advance(&mut self, cells: &PerWorker<LoadCell>) {
        let now = Totals::of(cells);
        self.push(now.since(&self.previous));
        self.previous = now;
    }

    fn push(&mut self, slot: Totals) {
        while self.slots.len() >= self.span {
            self.slots.pop_front();
        }
        self.slots.push_back(slot);
        self.ticks += 1;
    }

    /// Slots pushed so far: pass it to [`Window::since`] later to read what came after.
    pub(crate) fn ticks(&self) -> u64 {
        self.ticks
    }

    /// The last `slots` slots added up (fewer when the window holds fewer).
    pub fn last(&self, slots: usize) -> Totals {
        let mut sum = Totals::default();
        for slot in self.slots.iter().rev().take(slots) {
            sum.add(slot);
        }
        sum
    }

    /// The slots pushed after [`Window::ticks`] returned `tick` (as far as the window
    /// still holds them).
    pub(crate) fn since(&self, tick: u64) -> Totals {
        self.last(usize::try_from(self.ticks.saturating_sub(tick)).unwrap_or(usize::MAX))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn buckets_are_ordered_and_cover_their_latency() {
        let mut last = 0;
        for us in (0..70_000_000u64).step_by(997) {
            let i = bucket(Duration::from_micros(us));
            assert!(i >= last, "{us} µs went back to bucket {i}");
            last = i;
            let (low, high) = bounds(i);
            if i < BUCKETS - 1 {
                assert!(low <= us as f64 && (us as f64) < high, "{us} µs in {i}");
            }
        }
        assert_eq!(last, BUCKETS - 1);
    }

    #[test]
    fn percentile_within_bucket_error() {
        // A naive baseline: the nearest-rank percentile of the sorted samples.
        let cells = PerWorker::<LoadCell>::new(2);
        let mut samples = Vec::new();
        let mut x: u64 = 12345;
        for i in 0..5000 {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            let us = 100 + (x >> 33) % 400_000;
            samples.push(us);
            cells.get(i).record(Duration::from_micros(us), 200);
        }
        samples.sort_unstable();
        let totals = Totals::of(&cells);
        for q in [0.5, 0.9, 0.99] {
            let rank = (q * samples.len() as f64).ceil() as usize;
            let exact = samples[rank - 1] as f64;
            let got = totals.quantile(q).unwrap().as_micros() as f64;
            // A bucket is a quarter of an octave wide: at most 25 % of its lower edge.
            assert!(
                (got - exact).abs() <= exact * 0.25,
                "q{q}: {got} µs against {exact} µs"
            );
        }
    }

    #[test]
    fn fewer_than_ten_samples_is_unknown() {
        let cells = PerWorker::<LoadCell>::new(1);
        for _ in 0..9 {
            cells.get(0).record(ms(30), 500);
        }
        let nine = Totals::of(&cells).signals(3);
        assert_eq!(
            (nine.p90, nine.failure_share, nine.in_flight),
            (None, None, 3)
        );
        cells.get(0).record(ms(30), 200);
        let ten = Totals::of(&cells).signals(0);
        assert!(ten.p90.is_some());
        assert_eq!(ten.failure_share, Some(900));
    }

    #[test]
    fn window_forgets_old_slots() {
        let cells = PerWorker::<LoadCell>::new(2);
        let mut window = Window::new(&cells, 3);
        for _ in 0..20 {
            cells.get(1).record(ms(500), 200);
        }
        window.advance(&cells);
        let mark = window.ticks();
        for _ in 0..20 {
            cells.get(0).record(ms(5), 200);
        }
        window.advance(&cells);
        assert_eq!(window.last(10).samples(), 40);
        assert_eq!(window.since(mark).samples(), 20);
        assert!(window.since(mark).quantile(0.9).unwrap() < ms(6));
        window.advance(&cells);
        window.advance(&cells);
        // The slow slot has left the 3-slot ring.
        assert_eq!(window.last(10).samples(), 20);
        assert!(window.last(10).quantile(0.99).unwrap() < ms(6));
    }

    #[test]
    fn failures_count_by_kind_and_a_timeout_counts_as_slow() {
        let cells = PerWorker::<LoadCell>::new(1);
        let cell = cells.get(0);
        for _ in 0..8 {
            cell.record(ms(10), 200);
        }
        cell.fail(Failure::Timeout, Some(Duration::from_secs(60)));
        cell.fail(Failure::Refused, None);
        let totals = Totals::of(&cells);
        assert_eq!(
            (totals.ended, totals.samples(), totals.failed()),
            (10, 9, 2)
        );
        assert_eq!(totals.signals(0).failure_share, Some(200));
    }
}
