//! The adaptive tick (docs/architecture.md, "The adaptive tick"): one thread of its own
//! that every [`TICK`] reads every upstream group's load cells (`metrics::load`) into
//! its sliding window, stores the last second's signals for `/status` and `/metrics`,
//! and steps the controllers that follow them: the zones' rate factors (`zones.rs`) and
//! the `"auto"` gates' limits (`gates.rs`). The request path writes only its own
//! worker's cells; what it reads back is a few atomics the tick writes.
//!
//! This is the one place that knows a reload exists for adaptive protection: each tick
//! reads the snapshot in force, and a group keeps its window while its name and
//! counts (`UpstreamStats`, which outlive generations) stay.

mod gates;
mod zones;

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::limit::adaptive::Signals;
use crate::metrics::load::{Window, SHOWN_SLOTS, SLOT};
use crate::metrics::UpstreamStats;
use crate::snapshot::Snapshot;
use crate::state::GatewayState;
use crate::upstream::Group;

/// How often the tick runs: one slot of every window.
pub(crate) const TICK: Duration = SLOT;

/// The tick thread; stopped (and waited for) by [`Adapt::stop`] or on drop.
pub(crate) struct Adapt {
    stop: Arc<Stop>,
    thread: Option<JoinHandle<()>>,
}

#[derive(Default)]
struct Stop {
    stopped: Mutex<bool>,
    wake: Condvar,
}

impl Adapt {
    pub(crate) fn start(state: Arc<GatewayState>) -> std::io::Result<Adapt> {
        let stop = Arc::new(Stop::default());
        let thread = std::thread::Builder::new()
            .name("tollgate-adapt".to_owned())
            .spawn({
                let stop = stop.clone();
                move || run(&state, &stop)
            })?;
        Ok(Adapt {
            stop,
            thread: Some(thread),
        })
    }

    /// Tells the thread to stop; it does at its next wake-up, at once.
    pub(crate) fn signal_stop(&self) {
        *lock(&self.stop.stopped) = true;
        self.stop.wake.notify_all();
    }

    /// Stops the thread and waits for it.
    pub(crate) fn stop(&mut self) {
        self.signal_stop();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Adapt {
    fn drop(&mut self) {
        self.stop();
    }
}

fn run(state: &GatewayState, stop: &Stop) {
    let mut tick = Tick::default();
    let mut next = Instant::now() + TICK;
    loop {
        let mut stopped = lock(&stop.stopped);
        loop {
            if *stopped {
                return;
            }
            let now = Instant::now();
            if now >= next {
                break;
            }
            stopped = stop
                .wake
                .wait_timeout(stopped, next - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
        drop(stopped);
        let now = Instant::now();
        tick.step(&state.snapshot.load(), now);
        // A late tick (a loaded machine) does not make up for the slots it missed: a
        // slot is whatever came since the last one.
        next = (next + TICK).max(now + TICK / 2);
    }
}

/// What the tick keeps from one run to the next.
#[derive(Default)]
pub(crate) struct Tick {
    pub loads: Loads,
    gates: gates::Gates,
}

impl Tick {
    /// One tick at `now` with `snapshot` in force.
    pub(crate) fn step(&mut self, snapshot: &Snapshot, now: Instant) {
        self.loads.advance(&snapshot.upstreams);
        zones::step(&snapshot.zones, &mut self.loads, now);
        self.gates.step(&snapshot.upstreams, &mut self.loads, now);
    }
}

/// Every group's window, by name.
#[derive(Default)]
pub(crate) struct Loads {
    groups: HashMap<String, GroupLoad>,
}

/// One group's signals as the tick reads them.
pub(crate) struct GroupLoad {
    stats: Arc<UpstreamStats>,
    window: Window,
    in_flight: u64,
}

impl Loads {
    /// Pushes one slot into each group's window and stores its last second's signals;
    /// forgets groups no longer configured.
    fn advance(&mut self, groups: &[Arc<Group>]) {
        self.groups
            .retain(|name, _| groups.iter().any(|g| g.name == *name));
        for group in groups {
            let fresh = || GroupLoad {
                stats: group.stats.clone(),
                window: Window::new(&group.stats.load, SHOWN_SLOTS),
                in_flight: 0,
            };
            let load = self.groups.entry(group.name.clone()).or_insert_with(fresh);
            if !Arc::ptr_eq(&load.stats, &group.stats) {
                *load = fresh();
            }
            load.window.advance(&load.stats.load);
            load.in_flight = match &group.gate {
                // A gated group's servers never hold more than its limit: the requests
                // waiting at its gate are load too, or a full queue would read as room.
                Some(gate) => u64::from(gate.in_flight()) + u64::from(gate.queue_len()),
                None => group.in_flight(),
            };
            load.stats.set_signals(load.last(SHOWN_SLOTS));
        }
    }

    /// Group `name`'s load, to make its window keep more slots.
    pub(crate) fn get_mut(&mut self, name: &str) -> Option<&mut GroupLoad> {
        self.groups.get_mut(name)
    }
}

impl GroupLoad {
    /// The group's window: its [`Window::ticks`] marks a point to read
    /// [`Window::since`] from later (what a controller that updates irregularly, the
    /// gate's gradient, judges).
    pub(crate) fn window(&self) -> &Window {
        &self.window
    }

    /// Makes the window keep at least `slots` slots.
    pub(crate) fn keep(&mut self, slots: usize) {
        self.window.keep(slots);
    }

    /// The signals of the last `slots` slots (100 ms each).
    pub(crate) fn last(&self, slots: usize) -> Signals {
        self.window.last(slots).signals(self.in_flight)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}
