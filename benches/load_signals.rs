//! What the load signals cost a request: `LoadCell::record` (a response head) and
//! `LoadCell::fail` (a request that ended without one), on one worker's cell, as the
//! request path calls them. Compare with the gateway's CPU per proxied request
//! (`benches/proxy_vs_nginx.sh`, about 16 µs): the issue allows the signals 1 %.
//!
//! ```text
//! cargo bench --bench load_signals
//! ```
//!
//! `window` is the tick thread's side (adding up every worker's cell and pushing one
//! slot, then reading the last second), which runs every 100 ms per group, not per
//! request.

use std::hint::black_box;
use std::time::Duration;

use criterion::{criterion_group, criterion_main, Criterion};
use tollgate::metrics::cells::PerWorker;
use tollgate::metrics::load::{Failure, LoadCell, Window};

fn record(c: &mut Criterion) {
    let cells = PerWorker::<LoadCell>::new(2);
    let cell = cells.get(0);
    let latencies: Vec<Duration> = (0..64u64)
        .map(|i| Duration::from_micros(200 + i * i * 37))
        .collect();
    let mut i = 0;
    c.bench_function("load_signals/record", |b| {
        b.iter(|| {
            i = (i + 1) % latencies.len();
            cell.record(black_box(latencies[i]), black_box(200));
        });
    });
    c.bench_function("load_signals/record_5xx", |b| {
        b.iter(|| cell.record(black_box(Duration::from_millis(3)), black_box(503)));
    });
    c.bench_function("load_signals/fail", |b| {
        b.iter(|| cell.fail(black_box(Failure::Broken), None));
    });
}

fn window(c: &mut Criterion) {
    let cells = PerWorker::<LoadCell>::new(2);
    for i in 0..1000u64 {
        cells
            .get(i as usize)
            .record(Duration::from_micros(i * 97), 200);
    }
    let mut window = Window::new(&cells, 10);
    c.bench_function("load_signals/window_tick", |b| {
        b.iter(|| {
            window.advance(&cells);
            black_box(window.last(10).signals(0));
        });
    });
}

criterion_group!(benches, record, window);
criterion_main!(benches);
