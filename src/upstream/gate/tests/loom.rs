//! Model checks of the gate's protocol: loom runs each test's threads in every
//! interleaving (up to [`PREEMPTIONS`] forced switches a run). A lost wakeup shows as a
//! deadlock (a waiter parked that nothing will wake), which loom reports; the count is
//! checked against the limit wherever a request holds a slot.
//!
//! Run with `RUSTFLAGS="--cfg tollgate_loom" cargo test --profile loom --lib upstream::gate`
//! (its own target dir, as for the store's models in .ci/run).

use std::sync::Arc;
use std::time::Duration;

use ::loom::future::block_on;
use ::loom::model::Builder;
use ::loom::thread;

use super::{Admission, Gate, GateSettings, Permit};

const PREEMPTIONS: usize = 3;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut builder = Builder::new();
    builder.preemption_bound.get_or_insert(PREEMPTIONS);
    builder.check(f);
}

fn gate(limit: u32) -> Arc<Gate> {
    let settings = GateSettings {
        queue: 4,
        queue_timeout: Duration::from_secs(1),
    };
    Arc::new(Gate::new(limit, settings, Arc::default()))
}

/// A request through the gate as the pipeline makes it, waiting as long as it takes.
fn through(gate: &Arc<Gate>, priority: u8) -> Permit {
    if let Some(permit) = gate.try_acquire() {
        return permit;
    }
    match gate.enqueue(priority) {
        Admission::Now(permit) => permit,
        Admission::Queued(ticket) => block_on(ticket).expect("a slot, not a shed"),
        Admission::Shed(reason) => panic!("shed: {reason:?}"),
    }
}

fn assert_idle(gate: &Gate) {
    assert_eq!(gate.in_flight(), 0, "a slot leaked");
    assert_eq!(gate.queue_len(), 0, "a waiter left behind");
}

/// A release races a request that finds the gate full: the request gets the slot,
/// whichever sees the other first.
#[test]
fn a_release_racing_a_would_be_waiter_loses_no_wakeup() {
    model(|| {
        let gate = gate(1);
        let held = gate.try_acquire().expect("slot");
        let releaser = thread::spawn(move || drop(held));
        let permit = through(&gate, 0);
        assert!(gate.in_flight() <= gate.limit());
        drop(permit);
        releaser.join().expect("releaser");
        assert_idle(&gate);
    });
}

/// Two requests wait for one slot while it is released: each gets in in turn, and the
/// count never passes the limit.
#[test]
fn two_waiters_and_a_release_each_get_in_within_the_limit() {
    model(|| {
        let gate = gate(1);
        let held = gate.try_acquire().expect("slot");
        let waiters: Vec<_> = [0u8, 5]
            .into_iter()
            .map(|priority| {
                let gate = gate.clone();
                thread::spawn(move || {
                    let permit = through(&gate, priority);
                    assert!(gate.in_flight() <= 1, "over the limit");
                    drop(permit);
                })
            })
            .collect();
        drop(held);
        for waiter in waiters {
            waiter.join().expect("waiter");
        }
        assert_idle(&gate);
    });
}

/// A queued request leaves (client gone, or timed out) while the slot is released to
/// it: the slot comes back, and nobody waits behind.
#[test]
fn a_waiter_leaving_as_its_slot_arrives_leaks_nothing() {
    model(|| {
        let gate = gate(1);
        let held = gate.try_acquire().expect("slot");
        let Admission::Queued(ticket) = gate.enqueue(0) else {
            panic!("the gate is full");
        };
        let leaver = thread::spawn(move || drop(ticket));
        drop(held);
        leaver.join().expect("leaver");
        assert_idle(&gate);
    });
}

/// A raised limit races a request that finds the gate full: it gets in while the first
/// slot is still held.
#[test]
fn a_raised_limit_lets_a_racing_waiter_in() {
    model(|| {
        let gate = gate(1);
        let held = gate.try_acquire().expect("slot");
        let raiser = {
            let gate = gate.clone();
            thread::spawn(move || gate.set_limit(2))
        };
        let permit = through(&gate, 0);
        assert_eq!(gate.in_flight(), 2);
        raiser.join().expect("raiser");
        drop(permit);
        drop(held);
        assert_idle(&gate);
    });
}

#[test]
fn a_slot_released_while_the_waiter_parks_reaches_it() {
    model(|| {
        let gate = gate(1);
        let held = gate.try_acquire().expect("slot");
        let Admission::Queued(ticket) = gate.enqueue(0) else {
            panic!("full");
        };
        let t = thread::spawn(move || drop(held));
        let permit = block_on(ticket).expect("slot");
        drop(permit);
        t.join().unwrap();
        assert_idle(&gate);
    });
}
