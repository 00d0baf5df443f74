use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;

use super::*;

#[test]
fn a_ring_keeps_its_capacity_and_drops_the_oldest() {
    let mut ring = Ring::new(3);
    let room = ring.items.capacity();
    assert_eq!(ring.iter().count(), 0);
    ring.push(1);
    ring.push(2);
    assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [1, 2]);
    ring.push(3);
    ring.push(4);
    assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [2, 3, 4]);
    for n in 5..=1000 {
        ring.push(n);
        assert_eq!(ring.items.len(), 3);
        assert_eq!(ring.items.capacity(), room, "never grows");
    }
    assert_eq!(ring.iter().copied().collect::<Vec<_>>(), [998, 999, 1000]);
}

#[test]
fn a_ring_wraps_in_order_at_every_fill() {
    for pushed in 0..10usize {
        let mut ring = Ring::new(4);
        for n in 0..pushed {
            ring.push(n);
        }
        let kept: Vec<_> = ring.iter().copied().collect();
        let expected: Vec<_> = (pushed.saturating_sub(4)..pushed).collect();
        assert_eq!(kept, expected, "after {pushed}");
    }
}

#[test]
fn the_history_holds_at_most_fifteen_minutes() {
    let history = History::default();
    for n in 0..(KEPT as u64 * 3) {
        history.push(Sample {
            at_ms: n,
            ..Sample::default()
        });
    }
    let samples = history.samples();
    assert_eq!(samples.len(), KEPT);
    assert_eq!(samples[0].at_ms, KEPT as u64 * 2);
    assert!(samples.windows(2).all(|w| w[0].at_ms + 1 == w[1].at_ms));
    assert_eq!(KEPT as u64 * EVERY.as_secs(), 15 * 60);
}

#[test]
fn the_first_reading_is_a_baseline_and_rates_are_per_second() {
    let mut sampler = Sampler::default();
    let start = Instant::now();
    let mut counts = Counts::default();
    assert_eq!(sampler.take(start, 1, counts), None);
    counts.requests = [0, 50, 5, 10, 1];
    counts.rejected = 10;
    counts.upstream_failures = [5, 0, 0, 0];
    counts.connections = 7;
    let sample = sampler
        .take(start + Duration::from_secs(5), 2, counts)
        .expect("a sample");
    assert_eq!(sample.requests, [0.0, 10.0, 1.0, 2.0, 0.2]);
    assert_eq!((sample.rejected, sample.seconds), (2.0, 5.0));
    assert_eq!(sample.upstream_failures, [1.0, 0.0, 0.0, 0.0]);
    assert_eq!((sample.connections, sample.at_ms), (7, 2));
    // Counts that went down (a location removed by a reload) give 0, not a negative rate.
    let sample = sampler
        .take(start + Duration::from_secs(10), 3, Counts::default())
        .expect("a sample");
    assert_eq!(sample.requests, [0.0; 5]);
    // No time passed: no sample.
    assert_eq!(
        sampler.take(start + Duration::from_secs(10), 4, counts),
        None
    );
}

#[tokio::test(start_paused = true)]
async fn the_task_samples_every_five_seconds_oldest_first() {
    let history = Arc::new(History::default());
    let served = Arc::new(AtomicU64::new(0));
    let task = tokio::spawn({
        let (history, served) = (history.clone(), served.clone());
        async move {
            history
                .keep(|| Counts {
                    requests: [0, served.load(Relaxed), 0, 0, 0],
                    ..Counts::default()
                })
                .await;
        }
    });
    // The baseline is no traffic at the start, then a sample every 5 s; the counts move
    // halfway between ticks.
    tokio::time::sleep(EVERY / 2).await;
    for step in 1..=4u64 {
        served.fetch_add(step * 5, Relaxed);
        tokio::time::sleep(EVERY).await;
    }
    task.abort();
    let samples = history.samples();
    let rates: Vec<f64> = samples.iter().map(|s| s.requests[1]).collect();
    assert_eq!(rates, [1.0, 2.0, 3.0, 4.0]);
    assert!(samples.iter().all(|s| s.seconds == 5.0));
    assert!(samples.windows(2).all(|w| w[0].at_ms <= w[1].at_ms));
}

#[test]
fn the_document_names_every_series() {
    let history = History::default();
    history.push(Sample {
        at_ms: 1_764_000_000_000,
        seconds: 5.0,
        requests: [0.0, 2.5, 0.0, 1.0, 0.2],
        ..Sample::default()
    });
    let doc: serde_json::Value = serde_json::from_str(&history.json()).unwrap();
    assert_eq!(doc["interval_ms"], 5000);
    assert_eq!(doc["capacity"], 180);
    let sample = &doc["samples"][0];
    assert_eq!(sample["at_ms"], 1_764_000_000_000u64);
    assert_eq!(sample["requests"]["2xx"], 2.5);
    assert_eq!(sample["requests"]["5xx"], 0.2);
    assert_eq!(sample["upstream_failures"]["5xx"], 0.0);
    assert_eq!(sample["upstream_failures"]["timeout"], 0.0);
    assert_eq!(sample["connections"], 0);
}
