//! The controller in front of a simulated upstream, tick by tick as the adaptive tick
//! drives it (`server/adapt/gates.rs`), at fake times: C workers with service times
//! around S, and clients that keep the gate full. The limit must settle near C within
//! a stated time at S = 10 ms, 300 ms and 1 s, stay there across its probes, and the
//! probes must measure S.

use std::time::Duration;

use super::super::*;
use super::TICK;

/// An upstream of `capacity` workers, as `support::knob` in the black-box tests: a
/// request waits for a worker in arrival order, then holds it for its service time,
/// S ± 20 % (uniform, from a fixed seed). A real service time varies; a constant one
/// would make the p90 a step (S, then 2S once a tenth of the requests wait) and the law
/// cycle around C instead of settling. The gate in front is always full: a request is
/// let in whenever fewer than the limit are in flight (clients overload the upstream).
struct Upstream {
    service: u64,
    /// When each worker is next free.
    workers: Vec<u64>,
    /// Each request in flight: when it was let in, when it answers, and the probes
    /// begun before it was let in.
    in_flight: Vec<(u64, u64, u32)>,
    /// Probes begun so far.
    probes: u32,
    /// The responses the controller's window may still count: when each came and its
    /// latency.
    answered: Vec<(u64, u64)>,
    /// The most in flight at once since the controller last asked.
    peak: u32,
    /// xorshift state for the service times.
    seed: u64,
}

impl Upstream {
    fn new(capacity: usize, service: Duration, seed: u64) -> Upstream {
        Upstream {
            service: nanos(service),
            workers: vec![0; capacity],
            in_flight: Vec::new(),
            probes: 0,
            answered: Vec::new(),
            peak: 0,
            seed: seed.max(1),
        }
    }

    /// Runs from `at` until `to` under `limit`: fills the gate, answers what is due, in
    /// order, and lets in a request for each answer.
    fn run(&mut self, mut at: u64, to: u64, limit: u32) {
        loop {
            while self.in_flight.len() < limit as usize {
                self.admit(at);
            }
            let next = self.in_flight.iter().enumerate().min_by_key(|(_, r)| r.1);
            let Some((i, &(admitted, ends, _))) = next else {
                return;
            };
            if ends > to {
                return;
            }
            self.in_flight.swap_remove(i);
            self.answered.push((ends, ends - admitted));
            at = ends;
        }
    }

    fn admit(&mut self, at: u64) {
        self.seed ^= self.seed << 13;
        self.seed ^= self.seed >> 7;
        self.seed ^= self.seed << 17;
        let service = self.service / 1000 * (800 + self.seed % 401);
        let free = self.workers.iter_mut().min().expect("a worker");
        let start = at.max(*free);
        *free = start + service;
        self.in_flight.push((at, *free, self.probes));
        self.peak = self.peak.max(self.in_flight.len() as u32);
    }

    fn in_flight(&self) -> u32 {
        self.in_flight.len() as u32
    }

    fn in_flight_before_probe(&self) -> u32 {
        let before = self.in_flight.iter().filter(|r| r.2 < self.probes);
        before.count() as u32
    }

    /// What the tick reads of the responses that came after `from`: their p90 (nearest
    /// rank; the shell's histogram is the black-box tests' business) and count.
    fn since(&self, from: u64) -> (Option<Duration>, u64) {
        let mut latencies: Vec<u64> = self
            .answered
            .iter()
            .filter(|(at, _)| *at > from)
            .map(|(_, latency)| *latency)
            .collect();
        latencies.sort_unstable();
        let rank = (latencies.len() * 9).div_ceil(10);
        let p90 = rank
            .checked_sub(1)
            .map(|i| Duration::from_nanos(latencies[i]));
        (p90, latencies.len() as u64)
    }
}

fn nanos(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).expect("a short time")
}

/// What a run saw.
struct Run {
    /// The limit after every tick (ns), and whether a probe held it at the floor.
    limits: Vec<(u64, u32, bool)>,
    /// What each probe measured.
    probed: Vec<Option<Duration>>,
}

impl Run {
    /// The limit's changes, as (ms, limit, probing).
    fn changes(&self) -> Vec<(u64, u32, bool)> {
        let mut changes: Vec<(u64, u32, bool)> = Vec::new();
        for &(at, limit, probing) in &self.limits {
            if changes
                .last()
                .is_none_or(|c| (c.1, c.2) != (limit, probing))
            {
                changes.push((at / 1_000_000, limit, probing));
            }
        }
        changes
    }
}

/// Drives a controller with `settings` for `span` in front of `upstream`, as the
/// adaptive tick does: a window counts the responses of the ticks after it opened (one
/// that opens ahead, after a dead time, from the first tick past it), and a probe that
/// begins marks the requests in flight.
fn drive(settings: Settings, mut upstream: Upstream, span: Duration) -> Run {
    let mut gradient = Gradient::new(settings, 0, 7);
    let (mut now, mut from, mut peak) = (0, 0, 0);
    let mut run = Run {
        limits: Vec::new(),
        probed: Vec::new(),
    };
    while now < nanos(span) {
        let last = now;
        now += TICK;
        upstream.run(last, now, gradient.limit());
        peak = peak.max(std::mem::take(&mut upstream.peak));
        if gradient.window_start() > last {
            from = now;
            peak = upstream.in_flight();
        }
        let (p90, samples) = upstream.since(from);
        let input = GradientInput {
            p90,
            samples,
            peak_in_flight: peak,
            in_flight_before_probe: upstream.in_flight_before_probe(),
        };
        let opened = gradient.window_start();
        match gradient.step(&input, now) {
            Step::ProbeStarted { .. } => upstream.probes += 1,
            Step::ProbeEnded { min_rtt, .. } => run.probed.push(min_rtt),
            _ => {}
        }
        if gradient.window_start() != opened {
            from = now;
            peak = upstream.in_flight();
        }
        upstream.answered.retain(|(at, _)| *at > from);
        run.limits.push((now, gradient.limit(), gradient.probing()));
    }
    run
}

/// The workers of the simulated upstream.
const CAPACITY: u32 = 16;

/// Where the limit must settle against [`CAPACITY`] workers: at least C, so that the
/// workers are kept busy, and at most 2C. The law's fixed point is `L* = 1.2C + √L*`
/// (24.1 for C = 16); around it, a window's few samples at a slow upstream and the
/// service times' spread move the limit by a few (seen: 18 to 28 over 200 seeds).
const BAND: (u32, u32) = (CAPACITY, 2 * CAPACITY);

/// Runs an upstream of service time `service` (eight seeds) for `settle` and a minute
/// more (two probes at the default `probe_interval` of 30 s), and checks that from
/// `settle` on the limit stays in [`BAND`] whenever no probe holds it at the floor, and
/// that every probe measured an unloaded latency (a service time: within S ± 20 %).
fn settles_within(service: Duration, settle: Duration) {
    let settings = Settings {
        min: 4,
        max: 1000,
        probe_interval: Duration::from_secs(30),
    };
    let (low, high) = BAND;
    for seed in 1..=8 {
        let upstream = Upstream::new(CAPACITY as usize, service, seed * 7919);
        let run = drive(settings, upstream, settle + Duration::from_secs(60));
        let stray = run.limits.iter().find(|(at, limit, probing)| {
            *at >= nanos(settle) && !*probing && !(low..=high).contains(limit)
        });
        assert!(
            stray.is_none(),
            "at {service:?} (seed {seed}) the limit left [{low}, {high}] after {settle:?}: \
             (ns, limit, probing) {stray:?}; its changes (ms, limit, probing): {:?}",
            run.changes()
        );
        let unloaded = service.mul_f64(0.8)..=service.mul_f64(1.2);
        assert!(
            run.probed.len() == 2
                && run
                    .probed
                    .iter()
                    .all(|m| m.is_some_and(|m| unloaded.contains(&m))),
            "at {service:?} (seed {seed}) the probes measured {:?}",
            run.probed
        );
    }
}

#[test]
fn auto_limit_settles_near_capacity_of_a_10ms_upstream_within_1s() {
    settles_within(Duration::from_millis(10), Duration::from_secs(1));
}

#[test]
fn auto_limit_settles_near_capacity_of_a_300ms_upstream_within_6s() {
    settles_within(Duration::from_millis(300), Duration::from_secs(6));
}

#[test]
fn auto_limit_settles_near_capacity_of_a_1s_upstream_within_12s() {
    settles_within(Duration::from_secs(1), Duration::from_secs(12));
}
