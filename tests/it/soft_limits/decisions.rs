//! Soft lanes in `decision::decide`, as the gateway calls it.

use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::HeaderMap;

use tollgate::limit::decision::{decide, LimitRule};
use tollgate::limit::key::Template;
use tollgate::limit::outcome::{Outcome, Status};
use tollgate::limit::settle::{Answer, StatusSet};
use tollgate::limit::soft::Share;
use tollgate::limit::zone::{Spec, Zone};
use tollgate::limit::{Algorithm, Period, Rate, Verdict, NODELAY};
use tollgate::vars::{Request, VarText};

fn zone(name: &str, algorithm: Algorithm, soft: Option<u16>, epoch: Instant) -> Arc<Zone> {
    let spec = Spec {
        name: name.to_owned(),
        template: Template::new(VarText::parse("$binary_remote_addr").unwrap(), 32, 128),
        algorithm,
        rate: Rate::new(1, Period::Hour).expect("non-zero"),
        plan_rates: Vec::new(),
        max: 0,
        size: 1 << 20,
        redis: None,
        adaptive: None,
        soft: soft.and_then(Share::from_permille),
        plan_from: None,
    };
    Arc::new(Zone::new(spec, epoch, std::time::SystemTime::now()))
}

fn rule(zone: &Arc<Zone>, burst: u64, soft: Option<u16>) -> LimitRule {
    LimitRule {
        zone: Arc::clone(zone),
        burst,
        delay: NODELAY,
        dry_run: false,
        count: None,
        settles: false,
        ban: None,
        elastic: None,
        soft: soft.and_then(Share::from_permille),
    }
}

fn ask(rules: &[LimitRule], client: u8, now: Instant) -> Outcome {
    ask_as(rules, IpAddr::from([10, 0, 0, client]), now)
}

fn ask_as(rules: &[LimitRule], client: IpAddr, now: Instant) -> Outcome {
    let headers = HeaderMap::new();
    let view = Request::new(client, &headers);
    decide(rules, &view, None, 1, now)
}

/// (passed, soft, rejected) of `n` requests from one client at `now`.
fn tally(rules: &[LimitRule], n: usize, now: Instant) -> (usize, usize, usize) {
    let mut seen = (0, 0, 0);
    for _ in 0..n {
        match ask(rules, 1, now).status {
            Some(Status::Passed) => seen.0 += 1,
            Some(Status::Soft) => seen.1 += 1,
            Some(Status::Rejected) => seen.2 += 1,
            other => panic!("{other:?}"),
        }
    }
    seen
}

#[test]
fn soft_share_admits_exactly_its_capacity_marked() {
    let epoch = Instant::now();
    let now = epoch + Duration::from_secs(1);
    for algorithm in Algorithm::ALL {
        if algorithm == Algorithm::Concurrency {
            continue;
        }
        // 1r/h, burst 9: ten at once; 20 % of ten more, marked.
        let z = zone("api", algorithm, Some(200), epoch);
        let rules = [rule(&z, 9, Some(200))];
        assert_eq!(tally(&rules, 20, now), (10, 2, 8), "{algorithm:?}");
        // And the same through a list of two (the locked path).
        let (z, roomy) = (
            zone("api", algorithm, Some(200), epoch),
            zone("roomy", algorithm, None, epoch),
        );
        let rules = [rule(&roomy, 1000, None), rule(&z, 9, Some(200))];
        assert_eq!(
            tally(&rules, 20, now),
            (10, 2, 8),
            "{algorithm:?} in a list"
        );
    }
}

#[test]
fn a_soft_admission_passes_at_once_with_nothing_remaining() {
    let epoch = Instant::now();
    let z = zone("api", Algorithm::LeakyBucket, Some(1000), epoch);
    // Without nodelay: the base delays its burst, the lane never delays.
    let rules = [LimitRule {
        delay: 0,
        ..rule(&z, 1, Some(1000))
    }];
    let now = epoch + Duration::from_secs(1);
    assert_eq!(ask(&rules, 1, now).status, Some(Status::Passed));
    let delayed = ask(&rules, 1, now);
    assert_eq!(delayed.status, Some(Status::Delayed));
    for _ in 0..2 {
        let soft = ask(&rules, 1, now);
        assert_eq!(soft.status, Some(Status::Soft));
        assert_eq!(soft.delay, 0);
        let applied = soft.applied.iter().next().expect("one zone");
        assert!(applied.soft);
        assert_eq!(
            (applied.decision.verdict, applied.decision.remaining),
            (Verdict::Pass, 0)
        );
        assert_eq!(
            applied.rate,
            Rate::new(1, Period::Hour).unwrap(),
            "the base rate is shown"
        );
    }
    let rejected = ask(&rules, 1, now);
    assert_eq!(rejected.status, Some(Status::Rejected));
    let retry = Duration::from_nanos(rejected.retry_after);
    // The lane (100 % of 1r/h) frees a unit in an hour, as the base does: the sooner.
    assert!(
        retry <= Duration::from_secs(3600) && retry >= Duration::from_secs(3599),
        "{retry:?}"
    );
}

#[test]
fn soft_lane_charged_only_when_base_rejects() {
    let epoch = Instant::now();
    let now = epoch + Duration::from_secs(1);
    let z = zone("api", Algorithm::TokenBucket, Some(500), epoch);
    let rules = [rule(&z, 3, Some(500))];
    for client in 1..=50 {
        assert_eq!(ask(&rules, client, now).status, Some(Status::Passed));
    }
    let base_keys = z.stats().keys;
    assert_eq!(base_keys, 50, "no key in the lane while within the limit");
    for _ in 0..3 {
        ask(&rules, 1, now);
    }
    assert_eq!(z.stats().keys, 50, "still within the base: four at once");
    assert_eq!(ask(&rules, 1, now).status, Some(Status::Soft));
    assert_eq!(
        z.stats().keys,
        51,
        "the lane holds the one key that went over"
    );
}

#[test]
fn a_settled_soft_admission_gives_back_to_the_lane() {
    let epoch = Instant::now();
    let now = epoch + Duration::from_secs(1);
    let z = zone("login", Algorithm::FixedWindow, Some(1000), epoch);
    let mut set = StatusSet::default();
    set.insert_range(401, 401);
    let rules = vec![LimitRule {
        count: Some(set),
        settles: true,
        ..rule(&z, 0, Some(1000))
    }];
    let policy = tollgate::admission::Policy::new(rules.clone(), 1, None, &Default::default());
    let ok = Answer {
        status: 200,
        declared: None,
    };
    assert_eq!(ask(&rules, 1, now).status, Some(Status::Passed));
    // The lane's one unit, given back by each 200: it never runs out.
    for _ in 0..5 {
        let outcome = ask(&rules, 1, now);
        assert_eq!(outcome.status, Some(Status::Soft));
        policy.settle(outcome.settle, ok, now, 0);
    }
    let failed = Answer {
        status: 401,
        declared: None,
    };
    let outcome = ask(&rules, 1, now);
    policy.settle(outcome.settle, failed, now, 0);
    assert_eq!(
        ask(&rules, 1, now).status,
        Some(Status::Rejected),
        "a 401 counts"
    );
}

#[test]
fn multi_zone_soft_charges_nothing_on_rejection() {
    let epoch = Instant::now();
    let now = epoch + Duration::from_secs(1);
    let (a, b) = (
        zone("a", Algorithm::LeakyBucket, Some(1000), epoch),
        zone("b", Algorithm::LeakyBucket, Some(1000), epoch),
    );
    let both = [rule(&a, 0, Some(1000)), rule(&b, 1, Some(1000))];
    let a_alone = [rule(&a, 0, Some(1000))];
    let b_alone = [rule(&b, 1, Some(1000))];
    assert_eq!(ask(&both, 1, now).status, Some(Status::Passed));
    // a over its limit, its lane covers; b within: soft, a's lane and b charged.
    let soft = ask(&both, 1, now);
    assert_eq!(soft.status, Some(Status::Soft));
    let marks: Vec<bool> = soft.applied.iter().map(|x| x.soft).collect();
    assert_eq!(marks, [true, false]);
    // a's lane is spent; b over its limit too, its lane could cover: rejected, and
    // neither b nor its lane charged.
    let rejected = ask(&both, 1, now);
    assert_eq!(rejected.status, Some(Status::Rejected));
    assert_eq!(rejected.rejected_by, Some(0));
    assert_eq!(
        ask(&b_alone, 1, now).status,
        Some(Status::Soft),
        "b's lane unspent"
    );
    assert_eq!(ask(&b_alone, 1, now).status, Some(Status::Soft));
    assert_eq!(ask(&b_alone, 1, now).status, Some(Status::Rejected));
    assert_eq!(ask(&a_alone, 1, now).status, Some(Status::Rejected));
}

#[test]
fn a_rejection_without_a_lane_rejects_whatever_the_lanes_say() {
    let epoch = Instant::now();
    let now = epoch + Duration::from_secs(1);
    let (a, strict) = (
        zone("a", Algorithm::SlidingWindow, Some(1000), epoch),
        zone("strict", Algorithm::SlidingWindow, None, epoch),
    );
    let rules = [rule(&a, 0, Some(1000)), rule(&strict, 1, None)];
    assert_eq!(tally(&rules, 2, now), (1, 1, 0));
    assert_eq!(
        tally(&rules, 3, now),
        (0, 0, 3),
        "strict rejects; a's lane is spent"
    );
    let a_alone = [rule(&a, 0, Some(1000))];
    assert_eq!(tally(&a_alone, 2, now), (0, 0, 2));
}

#[test]
fn racing_threads_never_pass_more_than_the_limit_and_its_share() {
    let _shared = crate::support::shared();
    let epoch = Instant::now();
    let now = epoch + Duration::from_secs(1);
    let (z, roomy) = (
        zone("api", Algorithm::LeakyBucket, Some(100), epoch),
        zone("roomy", Algorithm::LeakyBucket, None, epoch),
    );
    // One location lists `api` alone (its lane decided alone), another after a roomy
    // zone (the lanes locked with the zones): the same keys race through both.
    let alone = vec![rule(&z, 19, Some(100))];
    let listed = vec![rule(&roomy, 1_000_000, None), rule(&z, 19, Some(100))];
    let tallies: Vec<[usize; 4]> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8)
            .map(|t| {
                let (alone, listed) = (&alone, &listed);
                scope.spawn(move || {
                    let mut soft = [0usize; 4];
                    let mut passed = [0usize; 4];
                    for i in 0..60 {
                        let client = (t + i) % 4;
                        let rules = if (t + i / 4) % 2 == 0 { alone } else { listed };
                        match ask(rules, client as u8 + 1, now).status {
                            Some(Status::Soft) => soft[client] += 1,
                            Some(Status::Passed) => passed[client] += 1,
                            _ => {}
                        }
                    }
                    [0, 1, 2, 3].map(|c| passed[c] * 1000 + soft[c])
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().expect("thread"))
            .collect()
    });
    for client in 0..4 {
        let total: usize = tallies.iter().map(|t| t[client]).sum();
        // burst 19: 20 at once; 10 % of 20 more, marked.
        assert_eq!((total / 1000, total % 1000), (20, 2), "client {client}");
    }
}

#[test]
fn a_spray_of_keys_over_their_limit_keeps_the_lane_within_a_quarter_of_size() {
    let epoch = Instant::now();
    let now = epoch + Duration::from_secs(1);
    let z = zone("api", Algorithm::TokenBucket, Some(1000), epoch);
    let rules = [rule(&z, 0, Some(1000))];
    for n in 0..60_000u32 {
        let client = IpAddr::from((10 << 24 | n).to_be_bytes());
        assert_eq!(ask_as(&rules, client, now).status, Some(Status::Passed));
        assert_eq!(ask_as(&rules, client, now).status, Some(Status::Soft));
    }
    let stats = z.stats();
    assert_eq!(
        stats.capacity_bytes,
        (1 << 20) + (1 << 18),
        "size and a quarter"
    );
    assert!(stats.bytes <= stats.capacity_bytes, "{stats:?}");
    assert!(
        stats.evictions > 0,
        "the lane evicted to stay within its bytes"
    );
}
