//! The concurrency gate of an upstream group (`max_in_flight`): at most `limit` requests
//! in flight on the group; those over it wait in a bounded queue, best priority first,
//! for at most `queue_timeout`, and are shed when the queue is full, when they wait too
//! long, or when a request of a higher priority needs their place.
//!
//! The protocol (checked by the loom model in `gate/tests/loom.rs`). The count of requests in
//! flight and the count of waiters share one atomic word, so that each choice between
//! "go" and "wait" is one read-modify-write on it, ordered against every other:
//! - **Fast path.** A CAS raises the count while it is below `limit`: one shared write,
//!   and no lock.
//! - **Slow path.** Under the queue's lock, one CAS either takes a free slot after all or
//!   counts the request as waiting; only then does it queue. A release's CAS that lowers
//!   the count requires no waiter in the same word, so either the request sees the slot
//!   the release freed, or the release sees the waiter and, under the lock (which the
//!   request held while queuing), hands the slot on. No wakeup is lost.
//! - **Release.** While someone waits and the count is within the limit, the slot passes
//!   straight to the best waiter through its channel, the count unchanged, so a newcomer
//!   cannot take it first. A lowered limit drains first: the slot is given back instead.
//! - **Leaving.** A waiter whose future is dropped (its client left, or its wait timed
//!   out) takes itself out of the queue; a slot already sent to it comes back with the
//!   dropped channel ([`Permit`] releases on drop wherever it is).
//!
//! Memory is bounded by `queue`: one entry and one small channel per waiter.
//!
//! With `max_in_flight = "auto"` ([`Gate::auto`]) the limit starts at `in_flight_min`
//! and the adaptive tick (`server/adapt/gates.rs`) moves it with [`Gate::set_limit`];
//! the gate only keeps what `/status` shows of that controller ([`Auto`]), and which
//! requests came before the controller's latest probe ([`Gate::mark`]).

mod oneshot;
mod sync;

#[cfg(all(test, tollgate_loom))]
#[path = "gate/tests/loom.rs"]
mod loom;
#[cfg(all(test, not(tollgate_loom)))]
mod tests;

use std::cmp::Reverse;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use sync::{lock, AtomicU32, AtomicU64, Mutex, Ordering};

use crate::limit::adaptive::gradient;

/// What the gate's keys say, besides the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct GateSettings {
    /// Requests that may wait at once (`queue`); 0: none wait.
    pub queue: u32,
    /// The longest a request waits (`queue_timeout`).
    pub queue_timeout: Duration,
}

/// Why a request was not let through.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Shed {
    /// The queue was full of requests of its priority or higher.
    QueueFull,
    /// It waited `queue_timeout`.
    Timeout,
    /// A request of a higher priority took its place in a full queue.
    Priority,
}

impl Shed {
    pub(crate) const ALL: [Shed; 3] = [Shed::QueueFull, Shed::Timeout, Shed::Priority];

    /// The `reason` label of `/metrics` and the member of `/status`.
    pub(crate) fn label(self) -> &'static str {
        match self {
            Shed::QueueFull => "queue_full",
            Shed::Timeout => "timeout",
            Shed::Priority => "priority",
        }
    }
}

/// Requests shed, by reason. Outlives the gate: a group whose gate is made anew on a
/// reload keeps counting in the same cells.
#[derive(Default, Debug)]
pub(crate) struct ShedCounts([std::sync::atomic::AtomicU64; 3]);

impl ShedCounts {
    pub(crate) fn get(&self, reason: Shed) -> u64 {
        self.0[reason as usize].load(std::sync::atomic::Ordering::Relaxed)
    }

    fn add(&self, reason: Shed) {
        self.0[reason as usize].fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// A gate whose limit follows the group's latency (`max_in_flight = "auto"`): the
/// controller's bounds, what it last told (for `/status`), and the requests in flight
/// on either side of its latest mark. Requests write only the last.
#[derive(Debug)]
pub(crate) struct Auto {
    pub settings: gradient::Settings,
    shown: std::sync::Mutex<AutoShown>,
    marks: Line<Marks>,
}

/// Requests in flight by the parity of the marks made before they were let through: a
/// probe begins with [`Gate::mark`], and measures the unloaded latency once none let
/// through before is left ([`Gate::in_flight_before_mark`]), so that no answer of a
/// request queued under the old limit is taken for one at the floor. A request still
/// in flight from two marks ago counts as after the last one (marks are a probe
/// interval apart, and a probe's drain is bounded anyway).
///
/// Outside the gate's protocol (no decision reads them), so std's atomics under loom too.
#[derive(Debug, Default)]
struct Marks {
    parity: std::sync::atomic::AtomicU32,
    in_flight: [std::sync::atomic::AtomicU32; 2],
}

/// What the controller of an `"auto"` gate last measured.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct AutoShown {
    /// The unloaded latency the limit is judged against; `None` until measured.
    pub min_rtt: Option<Duration>,
    /// Whether the limit is pinned to `in_flight_min` to measure `min_rtt` again.
    pub probing: bool,
}

impl Auto {
    pub(crate) fn shown(&self) -> AutoShown {
        *self
            .shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(crate) fn show(&self, shown: AutoShown) {
        *self
            .shown
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner) = shown;
    }
}

/// A word on a cache line of its own: every worker writes `in_flight`.
#[repr(align(128))]
#[derive(Debug)]
struct Line<T>(T);

/// Where a waiter stands: higher priority first, then first come.
type Place = (Reverse<u8>, u64);

/// What a waiter is sent: its slot, or why it was shed while waiting.
type Message = Result<Permit, Shed>;

struct Queue {
    waiters: BTreeMap<Place, oneshot::Sender<Message>>,
    next_seq: u64,
}

/// One group's gate, shared by every worker (and by the next generation, while the
/// group's gate keys stay the same).
pub struct Gate {
    /// Requests waiting (high 32 bits) and in flight (low 32 bits), in one word so that
    /// every decision between "wait" and "go" is one read-modify-write: see the module docs.
    state: Line<AtomicU64>,
    limit: Line<AtomicU32>,
    /// The most in flight at once since [`Gate::take_peak`] last asked.
    peak: AtomicU32,
    /// Changed only under this lock: the waiting count in `state` is then its length.
    queue: Mutex<Queue>,
    settings: GateSettings,
    shed: Arc<ShedCounts>,
    /// `Some` with `max_in_flight = "auto"`.
    auto: Option<Auto>,
}

fn split(word: u64) -> (u32, u32) {
    ((word >> 32) as u32, word as u32)
}

fn join(waiting: u32, in_flight: u32) -> u64 {
    (u64::from(waiting) << 32) | u64::from(in_flight)
}

impl Gate {
    /// A gate letting `limit` (at least 1) through at once.
    pub(crate) fn new(limit: u32, settings: GateSettings, shed: Arc<ShedCounts>) -> Gate {
        Gate {
            state: Line(AtomicU64::new(0)),
            limit: Line(AtomicU32::new(limit.max(1))),
            peak: AtomicU32::new(0),
            queue: Mutex::new(Queue {
                waiters: BTreeMap::new(),
                next_seq: 0,
            }),
            settings,
            shed,
            auto: None,
        }
    }

    /// A gate for `max_in_flight = "auto"`: it starts at `in_flight_min`, and the
    /// adaptive tick moves its limit within `auto`'s bounds.
    pub(crate) fn auto(auto: gradient::Settings, settings: GateSettings, shed: Arc<ShedCounts>) -> Gate {
        Gate {
            auto: Some(Auto {
                settings: auto,
                shown: std::sync::Mutex::default(),
                marks: Line(Marks::default()),
            }),
            ..Gate::new(auto.min, settings, shed)
        }
    }

    /// The controller's side of an `"auto"` gate; `None` for a fixed limit.
    pub(crate) fn auto_limit(&self) -> Option<&Auto> {
        self.auto.as_ref()
    }

    pub(crate) fn settings(&self) -> GateSettings {
        self.settings
    }

    pub(crate) fn limit(&self) -> u32 {
        self.limit.0.load(Ordering::SeqCst)
    }

    /// Sets the limit (at least 1). A raised limit lets waiters in at once; a lowered one
    /// takes effect as requests end.
    pub(crate) fn set_limit(self: &Arc<Self>, limit: u32) {
        self.limit.0.store(limit.max(1), Ordering::SeqCst);
        // Always, not only when someone seems to wait: a waiter queuing now read the old
        // limit, and the lock orders it before or after this store.
        self.pump();
    }

    pub(crate) fn in_flight(&self) -> u32 {
        split(self.state.0.load(Ordering::SeqCst)).1
    }

    /// The most requests in flight at once since the last call (or since the start).
    pub(crate) fn take_peak(&self) -> u32 {
        let now = self.in_flight();
        self.peak.swap(now, Ordering::Relaxed).max(now)
    }

    /// Marks the requests in flight now as let through before the mark (an `"auto"`
    /// gate's probe begins).
    pub(crate) fn mark(&self) {
        if let Some(auto) = &self.auto {
            // Relaxed: a request that let itself in on the old parity just after is
            // counted as before, which only makes the probe wait for it too.
            auto.marks.0.parity.fetch_xor(1, Relaxed);
        }
    }

    /// Requests let through before the last [`Gate::mark`] and still in flight.
    pub(crate) fn in_flight_before_mark(&self) -> u32 {
        self.auto.as_ref().map_or(0, |auto| {
            let marks = &auto.marks.0;
            let before = 1 - marks.parity.load(Relaxed);
            marks.in_flight[before as usize].load(Relaxed)
        })
    }

    /// Requests waiting now.
    pub(crate) fn queue_len(&self) -> u32 {
        split(self.state.0.load(Ordering::SeqCst)).0
    }

    pub(crate) fn shed(&self) -> &Arc<ShedCounts> {
        &self.shed
    }

    /// Lets the request through, at once or after a wait; `priority` is asked only when
    /// it has to wait.
    pub(crate) async fn admit(self: &Arc<Self>, priority: impl FnOnce() -> u8) -> Result<Permit, Shed> {
        if let Some(permit) = self.try_acquire() {
            return Ok(permit);
        }
        let ticket = match self.enqueue(priority()) {
            Admission::Now(permit) => return Ok(permit),
            Admission::Shed(reason) => return Err(reason),
            Admission::Queued(ticket) => ticket,
        };
        match tokio::time::timeout(self.settings.queue_timeout, ticket).await {
            Ok(answer) => answer,
            Err(_) => {
                self.shed.add(Shed::Timeout);
                Err(Shed::Timeout)
            }
        }
    }

    /// The fast path: a slot if the count is below the limit.
    pub(crate) fn try_acquire(self: &Arc<Self>) -> Option<Permit> {
        let taken = self.change(|w, n| (n < self.limit()).then(|| (w, n + 1)));
        let (_, n) = taken.ok()?;
        self.note_peak(n);
        Some(self.permit())
    }

    /// The slow path, under the lock: a slot after all, a place in the queue, or shed.
    pub(crate) fn enqueue(self: &Arc<Self>, priority: u8) -> Admission {
        let mut queue = lock(&self.queue);
        let worst = queue.waiters.last_key_value().map(|(place, _)| place.0 .0);
        let full = queue.waiters.len() >= self.settings.queue as usize;
        let room = !full || worst.is_some_and(|worst| worst < priority);
        let mut acquired = false;
        let decided = self.change(|w, n| {
            acquired = n < self.limit();
            match (acquired, room) {
                (true, _) => Some((w, n + 1)),
                (false, true) => Some((w + 1, n)),
                (false, false) => None,
            }
        });
        match decided {
            Err(_) => {
                self.shed.add(Shed::QueueFull);
                return Admission::Shed(Shed::QueueFull);
            }
            Ok((_, n)) if acquired => {
                self.note_peak(n);
                return Admission::Now(self.permit());
            }
            Ok(_) => {}
        }
        if full {
            self.evict_worst(&mut queue);
        }
        let place = (Reverse(priority), queue.next_seq);
        queue.next_seq += 1;
        let (sender, receiver) = oneshot::channel();
        queue.waiters.insert(place, sender);
        Admission::Queued(Ticket {
            gate: Arc::clone(self),
            place,
            receiver,
            answered: false,
        })
    }

    /// Sheds the queue's worst waiter (the caller checked that it ranks below).
    fn evict_worst(&self, queue: &mut Queue) {
        if let Some((_, sender)) = queue.waiters.pop_last() {
            self.leave();
            self.shed.add(Shed::Priority);
            // A waiter already gone takes nothing with it.
            let _ = sender.send(Err(Shed::Priority));
        }
    }

    /// One waiter left the queue (under the lock).
    fn leave(&self) {
        let _ = self.change(|w, n| Some((w.saturating_sub(1), n)));
    }

    /// Applies `f` to (waiting, in flight) in one read-modify-write; `Err` with the
    /// values seen when `f` declines. `f` may run more than once.
    fn change(
        &self,
        mut f: impl FnMut(u32, u32) -> Option<(u32, u32)>,
    ) -> Result<(u32, u32), (u32, u32)> {
        let mut word = self.state.0.load(Ordering::SeqCst);
        loop {
            let (w, n) = split(word);
            let Some((w2, n2)) = f(w, n) else {
                return Err((w, n));
            };
            match self.state.0.compare_exchange_weak(
                word,
                join(w2, n2),
                Ordering::SeqCst,
                Ordering::SeqCst,
            ) {
                Ok(_) => return Ok((w2, n2)),
                Err(now) => word = now,
            }
        }
    }

    fn note_peak(&self, in_flight: u32) {
        if in_flight > self.peak.load(Ordering::Relaxed) {
            self.peak.fetch_max(in_flight, Ordering::Relaxed);
        }
    }

    /// A permit for a slot already counted.
    fn permit(self: &Arc<Self>) -> Permit {
        let parity = self.auto.as_ref().map_or(0, |auto| {
            let marks = &auto.marks.0;
            let parity = marks.parity.load(Relaxed);
            marks.in_flight[parity as usize].fetch_add(1, Relaxed);
            parity
        });
        Permit {
            gate: Some(Arc::clone(self)),
            parity,
        }
    }

    /// A permit of `parity` is gone (released or handed on).
    fn unmark(&self, parity: u32) {
        if let Some(auto) = &self.auto {
            auto.marks.0.in_flight[parity as usize].fetch_sub(1, Relaxed);
        }
    }

    /// Sends a slot already counted (and its waiter uncounted) to the best waiter;
    /// `false` if its receiver was gone (the slot is still the caller's).
    fn send_best(self: &Arc<Self>, queue: &mut Queue) -> bool {
        let Some((_, sender)) = queue.waiters.pop_first() else {
            return false;
        };
        match sender.send(Ok(self.permit())) {
            Ok(()) => true,
            Err(message) => {
                if let Ok(permit) = message {
                    permit.keep_counted();
                }
                false
            }
        }
    }

    /// A request ended: its slot goes to the best waiter while the count is within the
    /// limit (a lowered limit drains first), else back to the count.
    fn release(self: &Arc<Self>) {
        let fast = self.change(|w, n| (w == 0 || n > self.limit()).then(|| (w, n - 1)));
        if fast.is_ok() {
            return;
        }
        let mut queue = lock(&self.queue);
        while !queue.waiters.is_empty() {
            let handed = self.change(|w, n| (w > 0 && n <= self.limit()).then(|| (w - 1, n)));
            if handed.is_err() {
                break;
            }
            if self.send_best(&mut queue) {
                return;
            }
        }
        let _ = self.change(|w, n| Some((w, n.saturating_sub(1))));
    }

    /// Lets waiters in while the count is below the limit (after a raised limit).
    fn pump(self: &Arc<Self>) {
        let mut queue = lock(&self.queue);
        while !queue.waiters.is_empty() {
            let taken = self.change(|w, n| (w > 0 && n < self.limit()).then(|| (w - 1, n + 1)));
            let Ok((_, n)) = taken else {
                return;
            };
            self.note_peak(n);
            if !self.send_best(&mut queue) {
                let _ = self.change(|w, n| Some((w, n.saturating_sub(1))));
            }
        }
    }
}

/// What [`Gate::enqueue`] decided.
pub(crate) enum Admission {
    Now(Permit),
    Queued(Ticket),
    Shed(Shed),
}

/// A slot on the group, given back when dropped.
pub(crate) struct Permit {
    gate: Option<Arc<Gate>>,
    /// The parity of the marks when it was let through (`"auto"` gates).
    parity: u32,
}

impl Permit {
    /// Drops the permit without giving its slot back (it is handed on instead).
    fn keep_counted(mut self) {
        if let Some(gate) = self.gate.take() {
            gate.unmark(self.parity);
        }
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some(gate) = self.gate.take() {
            gate.unmark(self.parity);
            gate.release();
        }
    }
}

/// A place in the queue: resolves to a slot, or to why the request was shed. Dropping
/// it leaves the queue.
pub(crate) struct Ticket {
    gate: Arc<Gate>,
    place: Place,
    receiver: oneshot::Receiver<Message>,
    /// A message came: the place is no longer in the queue.
    answered: bool,
}

impl Future for Ticket {
    type Output = Result<Permit, Shed>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        match Pin::new(&mut this.receiver).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(message) => {
                this.answered = true;
                // The gate outlives its tickets, so its sender never goes unsent.
                Poll::Ready(message.unwrap_or(Err(Shed::Timeout)))
            }
        }
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.answered {
            return;
        }
        let mut queue = lock(&self.gate.queue);
        if queue.waiters.remove(&self.place).is_some() {
            self.gate.leave();
        }
        // A slot already sent comes back when `receiver` drops, after this lock.
    }
}
