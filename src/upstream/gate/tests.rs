//! The gate's rules, one request at a time (the races are `loom.rs`'s).

use std::sync::Arc;
use std::time::Duration;

use futures_util::FutureExt;

use super::*;

fn gate(limit: u32, queue: u32) -> Arc<Gate> {
    let settings = GateSettings {
        queue,
        queue_timeout: Duration::from_secs(1),
    };
    Arc::new(Gate::new(limit, settings, Arc::default()))
}

fn queued(gate: &Arc<Gate>, priority: u8) -> Ticket {
    match gate.enqueue(priority) {
        Admission::Queued(ticket) => ticket,
        Admission::Now(_) => panic!("admitted at once"),
        Admission::Shed(reason) => panic!("shed: {reason:?}"),
    }
}

#[test]
fn fast_path_admits_up_to_the_limit() {
    let gate = gate(2, 0);
    let a = gate.try_acquire().expect("first");
    let _b = gate.try_acquire().expect("second");
    assert!(gate.try_acquire().is_none());
    assert_eq!(gate.in_flight(), 2);
    drop(a);
    assert_eq!(gate.in_flight(), 1);
    assert!(gate.try_acquire().is_some());
}

#[test]
fn release_hands_slot_to_best_waiter() {
    let gate = gate(1, 8);
    let held = gate.try_acquire().expect("slot");
    let mut first_free = queued(&gate, 0);
    let mut pro = queued(&gate, 5);
    let mut second_free = queued(&gate, 0);
    assert_eq!(gate.queue_len(), 3);
    drop(held);
    // The count did not drop, so no newcomer could take the slot meanwhile.
    assert_eq!(gate.in_flight(), 1);
    assert!(gate.try_acquire().is_none());
    let permit = (&mut pro)
        .now_or_never()
        .expect("pro served")
        .expect("a slot");
    assert!((&mut first_free).now_or_never().is_none());
    drop(permit);
    let permit = (&mut first_free)
        .now_or_never()
        .expect("first come")
        .expect("slot");
    assert!((&mut second_free).now_or_never().is_none());
    drop(permit);
    assert!((&mut second_free).now_or_never().is_some());
    assert_eq!(gate.queue_len(), 0);
}

#[test]
fn full_queue_evicts_lower_priority() {
    let gate = gate(1, 2);
    let _held = gate.try_acquire().expect("slot");
    let mut free_a = queued(&gate, 0);
    let mut free_b = queued(&gate, 0);
    // Equal priority: the newcomer is the one shed.
    assert!(matches!(gate.enqueue(0), Admission::Shed(Shed::QueueFull)));
    let _pro = queued(&gate, 10);
    // The latest of the lowest goes.
    assert!((&mut free_a).now_or_never().is_none());
    let answer = (&mut free_b).now_or_never().expect("answered at once");
    assert!(matches!(answer, Err(Shed::Priority)));
    assert_eq!(gate.queue_len(), 2);
    assert_eq!(gate.shed().get(Shed::QueueFull), 1);
    assert_eq!(gate.shed().get(Shed::Priority), 1);
}

#[test]
fn a_queue_of_zero_sheds_at_once() {
    let gate = gate(1, 0);
    let _held = gate.try_acquire().expect("slot");
    assert!(matches!(
        gate.enqueue(100),
        Admission::Shed(Shed::QueueFull)
    ));
}

#[tokio::test(start_paused = true)]
async fn timeout_removes_waiter() {
    let settings = GateSettings {
        queue: 4,
        queue_timeout: Duration::from_millis(20),
    };
    let gate = Arc::new(Gate::new(1, settings, Arc::default()));
    let held = gate.try_acquire().expect("slot");
    let answer = gate.admit(|| 0).await;
    assert!(matches!(answer, Err(Shed::Timeout)));
    assert_eq!(gate.queue_len(), 0);
    assert_eq!(gate.shed().get(Shed::Timeout), 1);
    drop(held);
    assert_eq!(gate.in_flight(), 0);
}

#[test]
fn a_waiter_that_leaves_frees_its_place() {
    let gate = gate(1, 1);
    let held = gate.try_acquire().expect("slot");
    let ticket = queued(&gate, 0);
    drop(ticket);
    assert_eq!(gate.queue_len(), 0);
    let _next = queued(&gate, 0);
    drop(held);
    assert_eq!(gate.in_flight(), 1, "handed to the waiter still there");
}

#[test]
fn a_slot_sent_to_a_waiter_that_leaves_comes_back() {
    let gate = gate(1, 2);
    let held = gate.try_acquire().expect("slot");
    let gone = queued(&gate, 0);
    let mut stays = queued(&gate, 0);
    drop(held);
    // Sent to `gone`, which never reads it.
    assert!((&mut stays).now_or_never().is_none());
    drop(gone);
    let _permit = (&mut stays)
        .now_or_never()
        .expect("passed on")
        .expect("slot");
    assert_eq!(gate.in_flight(), 1);
}

#[test]
fn lowered_limit_drains_first() {
    let gate = gate(2, 4);
    let a = gate.try_acquire().expect("slot");
    let b = gate.try_acquire().expect("slot");
    let mut waiter = queued(&gate, 0);
    gate.set_limit(1);
    drop(a);
    assert_eq!(gate.in_flight(), 1);
    assert!((&mut waiter).now_or_never().is_none());
    drop(b);
    let _permit = (&mut waiter).now_or_never().expect("served").expect("slot");
    assert_eq!(gate.in_flight(), 1);
}

#[test]
fn raised_limit_lets_waiters_in() {
    let gate = gate(1, 4);
    let _held = gate.try_acquire().expect("slot");
    let mut a = queued(&gate, 0);
    let mut b = queued(&gate, 0);
    gate.set_limit(3);
    let _a = (&mut a).now_or_never().expect("in").expect("slot");
    let _b = (&mut b).now_or_never().expect("in").expect("slot");
    assert_eq!(gate.in_flight(), 3);
    assert_eq!(gate.queue_len(), 0);
}

#[test]
fn take_peak_reports_the_most_since_last_asked() {
    let gate = gate(10, 0);
    let permits: Vec<_> = (0..6).filter_map(|_| gate.try_acquire()).collect();
    drop(permits);
    let one = gate.try_acquire();
    assert_eq!(gate.take_peak(), 6);
    assert_eq!(gate.take_peak(), 1);
    drop(one);
    assert_eq!(gate.take_peak(), 1);
    assert_eq!(gate.take_peak(), 0);
}

#[test]
fn a_mark_counts_the_requests_let_through_before_it_until_they_end() {
    let auto = gradient::Settings {
        min: 2,
        max: 10,
        probe_interval: Duration::from_secs(30),
    };
    let settings = GateSettings {
        queue: 4,
        queue_timeout: Duration::from_secs(1),
    };
    let probed = Arc::new(Gate::auto(auto, settings, Arc::default()));
    let a = probed.try_acquire().expect("slot");
    let b = probed.try_acquire().expect("slot");
    let mut waiter = queued(&probed, 0);
    assert_eq!(probed.in_flight_before_mark(), 0);
    probed.mark();
    assert_eq!(probed.in_flight_before_mark(), 2);
    // `a`'s slot goes to the waiter: a request let through after the mark.
    drop(a);
    let c = (&mut waiter).now_or_never().expect("served").expect("slot");
    assert_eq!(probed.in_flight_before_mark(), 1);
    drop(b);
    assert_eq!(probed.in_flight_before_mark(), 0);
    assert_eq!(probed.in_flight(), 1);
    // The next mark counts `c`, and only it.
    let d = probed.try_acquire().expect("slot");
    probed.mark();
    assert_eq!(probed.in_flight_before_mark(), 2);
    drop(c);
    drop(d);
    assert_eq!(probed.in_flight_before_mark(), 0);
    // A fixed gate counts nothing.
    let fixed = gate(1, 0);
    let _held = fixed.try_acquire().expect("slot");
    fixed.mark();
    assert_eq!(fixed.in_flight_before_mark(), 0);
}

/// Many tasks on several threads through a gate of 3: never more than 3 at once, and
/// every one gets through (the queue holds them all, the wait is long).
#[test]
fn many_racing_requests_never_exceed_the_limit_and_all_pass() {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_time()
        .build()
        .expect("runtime");
    let gate = Arc::new(Gate::new(
        3,
        GateSettings {
            queue: 1000,
            queue_timeout: Duration::from_secs(60),
        },
        Arc::default(),
    ));
    let over = Arc::new(std::sync::atomic::AtomicBool::new(false));
    runtime.block_on(async {
        let tasks: Vec<_> = (0..400u32)
            .map(|i| {
                let (gate, over) = (gate.clone(), over.clone());
                tokio::spawn(async move {
                    let permit = gate.admit(|| (i % 3) as u8).await.expect("admitted");
                    if gate.in_flight() > 3 {
                        over.store(true, std::sync::atomic::Ordering::Relaxed);
                    }
                    tokio::task::yield_now().await;
                    drop(permit);
                })
            })
            .collect();
        for task in tasks {
            task.await.expect("task");
        }
    });
    assert!(!over.load(std::sync::atomic::Ordering::Relaxed));
    assert_eq!(gate.in_flight(), 0);
    assert_eq!(gate.queue_len(), 0);
}
