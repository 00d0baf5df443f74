//! What `/metrics` reports (docs/config.md, `[admin]`). Counters live in per-worker cells
//! ([`cells`]), handed out by [`Metrics`] by label when a snapshot is built, so that a
//! location, zone or upstream that a reload keeps keeps counting from where it was.
//! The pipeline writes to the cells; `admin::metrics` adds them up and writes the
//! Prometheus text at scrape time.

pub mod cells;
pub mod load;
pub(crate) mod top;
mod quic;
mod trace;

pub(crate) use quic::QuicConnections;
pub(crate) use trace::TraceSpans;

use std::collections::BTreeMap;
use std::sync::atomic::AtomicU64;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use crate::limit::adaptive::Signals;
use crate::limit::remote::Failure;
use cells::{Aligned, Counter, Gauge, Histogram, PerWorker, StatusCounts};
use load::LoadCell;
use top::Sketch;

/// Every metric family, by label. Only snapshot building and scrapes lock it.
#[derive(Debug)]
pub(crate) struct Metrics {
    workers: usize,
    locations: Family<String, PerWorker<LocationCell>>,
    /// Each location label's site and location, for the labels of `/metrics`.
    location_names: Mutex<BTreeMap<String, Arc<LocationName>>>,
    /// TLS handshakes by result and protocol, per worker.
    tls: PerWorker<TlsHandshakes>,
    /// New QUIC connections, by what became of them.
    quic: QuicConnections,
    trace: Arc<TraceSpans>,
    zones: Family<String, ZoneStats>,
    upstreams: Family<String, UpstreamStats>,
    servers: Family<(String, String), Failures>,
    denied: Family<String, PerWorker<Counter>>,
    connections: Family<String, PerWorker<Gauge>>,
}

impl Metrics {
    pub(crate) fn new(workers: usize) -> Metrics {
        let workers = workers.max(1);
        Metrics {
            workers,
            locations: Family::default(),
            location_names: Mutex::default(),
            tls: PerWorker::new(workers),
            quic: QuicConnections::default(),
            trace: Arc::default(),
            zones: Family::default(),
            upstreams: Family::default(),
            servers: Family::default(),
            denied: Family::default(),
            connections: Family::default(),
        }
    }

    /// The request counts of the location labelled `label`, of no site (`-`).
    pub(crate) fn location(&self, label: &str) -> LocationStats {
        self.site_location(NO_SITE, label, label)
    }

    /// The request counts of location `location` of site `site` (both as configured,
    /// never from a request, so that the label sets stay bounded), kept under `label`
    /// (the site's name and the location's, which [`Metrics::locations_in_use`] gives).
    pub(crate) fn site_location(&self, site: &str, location: &str, label: &str) -> LocationStats {
        let cells = self.locations.get(label, || PerWorker::new(self.workers));
        let name = LocationName {
            site: site.to_owned(),
            location: location.to_owned(),
        };
        lock(&self.location_names).insert(label.to_owned(), Arc::new(name));
        LocationStats { cells }
    }

    /// The counts of new QUIC connections.
    pub(crate) fn quic(&self) -> &QuicConnections {
        &self.quic
    }

    /// What became of request spans (`[trace]`).
    pub(crate) fn trace(&self) -> &Arc<TraceSpans> {
        &self.trace
    }

    /// Worker `worker`'s TLS handshake counts.
    pub(crate) fn tls_handshakes(&self, worker: usize) -> &TlsHandshakes {
        self.tls.get(worker)
    }

    /// The decision counts and most-limited keys of zone `name`.
    pub(crate) fn zone(&self, name: &str) -> Arc<ZoneStats> {
        self.zones.get(name, || ZoneStats {
            decisions: PerWorker::new(self.workers),
            limited: PerWorker::new(self.workers),
            redis_errors: PerWorker::new(self.workers),
            epoch: Instant::now(),
        })
    }

    /// Zone `name`'s counts, if it has any (`/status`).
    pub(crate) fn zone_stats(&self, name: &str) -> Option<Arc<ZoneStats>> {
        self.zones.lock().get(name).cloned()
    }

    pub(crate) fn upstream(&self, name: &str) -> Arc<UpstreamStats> {
        self.upstreams.get(name, || UpstreamStats {
            time: PerWorker::new(self.workers),
            no_live: Counter::default(),
            load: PerWorker::new(self.workers),
            signals: Mutex::default(),
        })
    }

    pub(crate) fn server(&self, upstream: &str, server: &str) -> Arc<Failures> {
        let key = (upstream.to_owned(), server.to_owned());
        self.servers.get(&key, Failures::default)
    }

    /// Requests denied by the allow/deny rule labelled `rule`.
    pub(crate) fn denied(&self, rule: &str) -> Arc<PerWorker<Counter>> {
        self.denied.get(rule, || PerWorker::new(self.workers))
    }

    /// Open client connections of the listener at `addr`.
    pub(crate) fn connections(&self, addr: &str) -> Arc<PerWorker<Gauge>> {
        self.connections.get(addr, || PerWorker::new(self.workers))
    }

    // What a scrape reads (`admin::metrics`): each family's members still in use, in
    // label order. Members nothing uses any more are dropped here.

    pub(crate) fn locations_in_use(&self) -> Vec<(String, Arc<PerWorker<LocationCell>>)> {
        self.locations.in_use()
    }

    /// [`Metrics::locations_in_use`] with each one's site and location apart.
    pub(crate) fn located_in_use(&self) -> Vec<(Arc<LocationName>, Arc<PerWorker<LocationCell>>)> {
        let in_use = self.locations_in_use();
        let mut names = lock(&self.location_names);
        // `in_use` is in label order.
        names.retain(|label, _| in_use.binary_search_by(|(used, _)| used.cmp(label)).is_ok());
        in_use
            .into_iter()
            .filter_map(|(label, cells)| Some((names.get(&label)?.clone(), cells)))
            .collect()
    }

    /// Every worker's TLS handshake counts.
    pub(crate) fn tls_handshake_cells(&self) -> &PerWorker<TlsHandshakes> {
        &self.tls
    }

    pub(crate) fn denied_in_use(&self) -> Vec<(String, Arc<PerWorker<Counter>>)> {
        self.denied.in_use()
    }

    pub(crate) fn upstreams_in_use(&self) -> Vec<(String, Arc<UpstreamStats>)> {
        self.upstreams.in_use()
    }

    /// By (upstream, server).
    pub(crate) fn servers_in_use(&self) -> Vec<((String, String), Arc<Failures>)> {
        self.servers.in_use()
    }

    pub(crate) fn zones_in_use(&self) -> Vec<(String, Arc<ZoneStats>)> {
        self.zones.in_use()
    }

    pub(crate) fn connections_in_use(&self) -> Vec<(String, Arc<PerWorker<Gauge>>)> {
        self.connections.in_use()
    }
}

/// Members of one metric family by label. A member no one but the family holds any
/// more (its location, zone or listener was removed by a reload, and the last request
/// using it has finished) is dropped at the next scrape.
#[derive(Debug)]
struct Family<K, T> {
    members: Mutex<BTreeMap<K, Arc<T>>>,
}

impl<K, T> Default for Family<K, T> {
    fn default() -> Self {
        Family {
            members: Mutex::new(BTreeMap::new()),
        }
    }
}

impl<K: Ord + Clone, T> Family<K, T> {
    fn get<Q>(&self, key: &Q, make: impl FnOnce() -> T) -> Arc<T>
    where
        K: std::borrow::Borrow<Q>,
        Q: Ord + ToOwned<Owned = K> + ?Sized,
    {
        let mut members = self.lock();
        if let Some(member) = members.get(key) {
            return member.clone();
        }
        let member = Arc::new(make());
        members.insert(key.to_owned(), member.clone());
        member
    }

    /// The members in use, in label order.
    fn in_use(&self) -> Vec<(K, Arc<T>)> {
        let mut members = self.lock();
        members.retain(|_, member| Arc::strong_count(member) > 1);
        members
            .iter()
            .map(|(key, member)| (key.clone(), member.clone()))
            .collect()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<K, Arc<T>>> {
        lock(&self.members)
    }
}

/// A location's counts: one cell per worker.
#[derive(Clone, Debug)]
pub struct LocationStats {
    cells: Arc<PerWorker<LocationCell>>,
}

impl LocationStats {
    /// Worker `worker`'s cell, for a request to keep until its response has been sent.
    pub(crate) fn cell(&self, worker: usize) -> Arc<Aligned<LocationCell>> {
        self.cells.get(worker).clone()
    }

    /// [`LocationCell::finish`] on worker `worker`'s cell.
    pub(crate) fn finish(&self, worker: usize, status: u16, elapsed: Duration, sent: u64) {
        self.cells.get(worker).finish(status, elapsed, sent);
    }

    /// Worker `worker`'s count of request body bytes, which the body adds to as it is
    /// read.
    pub(crate) fn received(&self, worker: usize) -> &Arc<AtomicU64> {
        &self.cells.get(worker).received
    }
}

/// What a location is called in `/metrics`: its site's first name (`-` for none) and
/// its `match` string.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct LocationName {
    pub site: String,
    pub location: String,
}

/// The `site` label of a file of top-level `[[location]]`s, and of requests that matched
/// no location.
pub(crate) const NO_SITE: &str = "-";

/// One worker's counts for one location.
#[derive(Debug, Default)]
pub(crate) struct LocationCell {
    pub statuses: StatusCounts,
    /// This location's request latency (`tollgate_request_duration_seconds{site,location}`).
    pub time: Histogram,
    /// Response body bytes sent.
    pub sent: Counter,
    /// Request body bytes read from the client; an `Arc` the body being read holds.
    pub received: Arc<AtomicU64>,
}

impl LocationCell {
    /// A request has been answered: its status, its time from arrival to the last byte
    /// sent (or until the client left), and the response body bytes sent.
    pub(crate) fn finish(&self, status: u16, elapsed: Duration, sent: u64) {
        self.statuses.add(status);
        self.time.observe(elapsed);
        if sent > 0 {
            self.sent.add(sent);
        }
    }
}

/// TLS handshakes on client connections, by result and protocol.
#[derive(Debug, Default)]
pub(crate) struct TlsHandshakes {
    ok: [Counter; TlsProtocol::ALL.len()],
    failed: Counter,
}

impl TlsHandshakes {
    pub(crate) fn ok(&self, protocol: TlsProtocol) {
        self.ok[protocol as usize].add(1);
    }

    /// A handshake that failed or timed out.
    pub(crate) fn failed(&self) {
        self.failed.add(1);
    }

    pub(crate) fn ok_count(&self, protocol: TlsProtocol) -> u64 {
        self.ok[protocol as usize].get()
    }

    pub(crate) fn failed_count(&self) -> u64 {
        self.failed.get()
    }
}


/// The TLS version a handshake agreed on (the `protocol` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TlsProtocol {
    Tls12,
    Tls13,
    /// Anything else rustls may come to speak.
    Other,
}

impl TlsProtocol {
    pub(crate) const ALL: [TlsProtocol; 3] =
        [TlsProtocol::Tls12, TlsProtocol::Tls13, TlsProtocol::Other];

    pub(crate) fn label(self) -> &'static str {
        match self {
            TlsProtocol::Tls12 => "TLSv1.2",
            TlsProtocol::Tls13 => "TLSv1.3",
            TlsProtocol::Other => "other",
        }
    }
}

/// A zone's counts: its decisions, and the keys it rejected most.
#[derive(Debug)]
pub struct ZoneStats {
    pub decisions: PerWorker<Decisions>,
    limited: PerWorker<Mutex<Sketch>>,
    /// Redis calls that failed, by [`Failure`] (Redis zones only).
    pub redis_errors: PerWorker<[Counter; Failure::ALL.len()]>,
    /// Where the sketches' clock starts.
    epoch: Instant,
}

impl ZoneStats {
    /// Requests the zone answered `outcome`, over every worker.
    pub(crate) fn decided(&self, outcome: Answer) -> u64 {
        self.decisions.iter().map(|cell| cell.get(outcome)).sum()
    }

    pub(crate) fn redis_failed(&self, worker: usize, failure: Failure) {
        self.redis_errors.get(worker)[failure as usize].add(1);
    }

    /// Counts a rejection of `key` (as the zone stores it) at `now`.
    pub(crate) fn limited(&self, worker: usize, now: Instant, key: &[u8]) {
        let secs = now.saturating_duration_since(self.epoch).as_secs();
        lock(self.limited.get(worker)).add(secs, key);
    }

    /// The `n` keys rejected most over the last minute at `now`, most first: the key
    /// (cut short when the `bool` says so) and its rejections.
    pub(crate) fn top_limited(&self, now: Instant, n: usize) -> Vec<((Vec<u8>, bool), u64)> {
        let secs = now.saturating_duration_since(self.epoch).as_secs();
        let mut counts = std::collections::HashMap::new();
        for sketch in self.limited.iter() {
            lock(sketch).collect(secs, &mut counts);
        }
        top::top(counts, n)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// A zone's decisions, by [`Answer`].
#[derive(Debug, Default)]
pub struct Decisions([Counter; Answer::ALL.len()]);

impl Decisions {
    pub(crate) fn add(&self, outcome: Answer) {
        self.0[outcome as usize].add(1);
    }

    pub(crate) fn get(&self, outcome: Answer) -> u64 {
        self.0[outcome as usize].get()
    }
}

/// What one zone answered about one request (the `outcome` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Answer {
    Passed,
    Delayed,
    Rejected,
    PassedDryRun,
    DelayedDryRun,
    RejectedDryRun,
    /// Answered by a ban (the penalty box), no zone asked.
    Banned,
    /// Over the limit, passed on the zone's soft share (`soft`).
    Soft,
}

impl Answer {
    pub(crate) const ALL: [Answer; 8] = [
        Answer::Passed,
        Answer::Delayed,
        Answer::Rejected,
        Answer::PassedDryRun,
        Answer::DelayedDryRun,
        Answer::RejectedDryRun,
        Answer::Banned,
        Answer::Soft,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            Answer::Passed => "passed",
            Answer::Delayed => "delayed",
            Answer::Rejected => "rejected",
            Answer::PassedDryRun => "passed_dry_run",
            Answer::DelayedDryRun => "delayed_dry_run",
            Answer::RejectedDryRun => "rejected_dry_run",
            Answer::Banned => "banned",
            Answer::Soft => "soft",
        }
    }
}

/// An upstream group's counts.
#[derive(Debug)]
pub struct UpstreamStats {
    /// From sending the request to the response head.
    pub time: PerWorker<Histogram>,
    /// Requests that found no server to try.
    pub no_live: Counter,
    /// The load signals' counts, per worker (`load`).
    pub load: PerWorker<LoadCell>,
    /// The last second's signals as the tick thread last saw them: what `/status` and
    /// `/metrics` show. Only the tick and scrapes take the lock.
    signals: Mutex<Signals>,
}

impl UpstreamStats {
    /// The last second's signals the tick stored.
    pub(crate) fn signals(&self) -> Signals {
        *lock(&self.signals)
    }

    /// Stores the last second's signals (the tick thread).
    pub(crate) fn set_signals(&self, signals: Signals) {
        *lock(&self.signals) = signals;
    }
}

/// Why an attempt on an upstream server failed (the `kind` label).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FailureKind {
    /// The connection was refused or broke while connecting.
    Connect,
    ConnectTimeout,
    /// No response head within `read_timeout`.
    Timeout,
    /// The exchange broke: reset, closed early, a malformed response.
    Broken,
    /// The TLS handshake failed: the server's certificate did not verify, it refused
    /// ours, or it does not speak TLS.
    Tls,
    /// The response head was over the limits (64 KiB, 128 fields): a 502 for that
    /// request only. Not a failure of the server's health, since a client can often
    /// make a response's head grow (an echoed cookie).
    OversizedHead,
}

impl FailureKind {
    pub(crate) const ALL: [FailureKind; 6] = [
        FailureKind::Connect,
        FailureKind::ConnectTimeout,
        FailureKind::Timeout,
        FailureKind::Broken,
        FailureKind::Tls,
        FailureKind::OversizedHead,
    ];

    pub(crate) fn label(self) -> &'static str {
        match self {
            FailureKind::Connect => "connect",
            FailureKind::ConnectTimeout => "connect_timeout",
            FailureKind::Timeout => "timeout",
            FailureKind::Broken => "broken",
            FailureKind::Tls => "tls",
            FailureKind::OversizedHead => "oversized_head",
        }
    }
}

/// One upstream server's failed attempts, by kind. Failures are rare and slow anyway:
/// one shared count each is enough.
#[derive(Debug, Default)]
pub(crate) struct Failures([Counter; FailureKind::ALL.len()]);

impl Failures {
    pub(crate) fn add(&self, kind: FailureKind) {
        self.0[kind as usize].add(1);
    }

    pub(crate) fn get(&self, kind: FailureKind) -> u64 {
        self.0[kind as usize].get()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_label_asked_for_again_gets_the_same_counts() {
        let metrics = Metrics::new(2);
        let first = metrics.zone("per_ip");
        first.decisions.get(1).add(Answer::Rejected);
        let again = metrics.zone("per_ip");
        assert_eq!(again.decisions.get(1).get(Answer::Rejected), 1);
        assert!(!Arc::ptr_eq(&metrics.zone("other"), &again));
    }

    #[test]
    fn the_most_limited_keys_are_added_up_over_workers() {
        let metrics = Metrics::new(2);
        let zone = metrics.zone("per_ip");
        let now = Instant::now();
        for worker in [0, 1, 1] {
            zone.limited(worker, now, b"a");
        }
        zone.limited(0, now, b"b");
        let top = zone.top_limited(now, 10);
        assert_eq!(
            top,
            [((b"a".to_vec(), false), 3), ((b"b".to_vec(), false), 1)]
        );
        assert_eq!(zone.top_limited(now + Duration::from_secs(120), 10), []);
    }

    #[test]
    fn members_no_one_holds_are_dropped_at_the_next_scrape() {
        let metrics = Metrics::new(1);
        let kept = metrics.zone("kept");
        drop(metrics.zone("gone"));
        let names: Vec<String> = metrics.zones.in_use().into_iter().map(|(k, _)| k).collect();
        assert_eq!(names, ["kept"]);
        drop(kept);
    }

    #[test]
    fn each_location_counts_its_own_request_times() {
        let metrics = Metrics::new(2);
        let a = metrics.location("/a");
        let b = metrics.location("/b");
        a.cell(0).finish(200, Duration::from_millis(1), 0);
        b.cell(0).finish(404, Duration::from_millis(1), 0);
        b.cell(1).finish(404, Duration::from_millis(1), 0);
        let mut sum = cells::HistogramSum::default();
        for (_, cells) in metrics.locations_in_use() {
            cells.iter().for_each(|cell| sum.add(&cell.time));
        }
        assert_eq!(sum.count(), 3);
    }
}
