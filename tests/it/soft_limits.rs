//! Soft limits (`soft = "10%"`): the decision over local zones, with exact counts at
//! one instant (nothing refills), then through the gateway: marks in the access log,
//! metrics and headers, bans, and a Redis zone's lane on a real redis-server.

mod decisions {
    //! Soft lanes in `decision::decide`, as the gateway calls it.

    use std::net::IpAddr;
    use std::sync::Arc;
    use std::time::{Duration, Instant};

    use http::{HeaderMap, Method};

    use tollgate::limit::decision::{decide, LimitRule};
    use tollgate::limit::key::{Part, RequestView, Template};
    use tollgate::limit::outcome::{Outcome, Status};
    use tollgate::limit::settle::{Answer, StatusSet};
    use tollgate::limit::soft::Share;
    use tollgate::limit::zone::{Spec, Zone};
    use tollgate::limit::{Algorithm, Period, Rate, Verdict, NODELAY};

    fn zone(name: &str, algorithm: Algorithm, soft: Option<u16>, epoch: Instant) -> Arc<Zone> {
        let spec = Spec {
            name: name.to_owned(),
            template: Template::new(vec![Part::BinaryRemoteAddr], 32, 128),
            algorithm,
            rate: Rate::new(1, Period::Hour).expect("non-zero"),
            plan_rates: Vec::new(),
            max: 0,
            size: 1 << 20,
            redis: None,
            soft: soft.and_then(Share::from_permille),
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
            soft: soft.and_then(Share::from_permille),
        }
    }

    fn ask(rules: &[LimitRule], client: u8, now: Instant) -> Outcome {
        ask_as(rules, IpAddr::from([10, 0, 0, client]), now)
    }

    fn ask_as(rules: &[LimitRule], client: IpAddr, now: Instant) -> Outcome {
        let headers = HeaderMap::new();
        let view = RequestView {
            client,
            method: &Method::GET,
            path: b"/",
            query: None,
            headers: &headers,
            host: None,
        };
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
        let policy = tollgate::limit::policy::Policy::new(rules.clone(), 1, None);
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
}

mod gateway {
    //! Soft limits through the real gateway.

    use crate::support;

    use std::net::SocketAddr;
    use std::path::Path;
    use std::time::{Duration, Instant};

    use support::redis::{self as server, Redis};
    use support::*;

    /// Zone `api` (`algorithm`, 1r/h) with `extra` zone lines, and location `/` with
    /// the limit `limit`, answering 200 itself; headers both ways, a JSON access log.
    fn config(log: &Path, zone: &str, limit: &str) -> String {
        format!(
            r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
ratelimit_headers = "both"
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "{}"
format = "json"
[admin]
listen = "127.0.0.1:0"
{zone}
[[location]]
match = "/"
return = {{ status = 200 }}
limit = [{limit}]
"#,
            log.display()
        )
    }

    const API: &str =
        "[zones.api]\nkey = \"$binary_remote_addr\"\nrate = \"1r/h\"\nalgorithm = \"token_bucket\"";

    pub async fn metric(admin: SocketAddr, sample: &str) -> u64 {
        let text = within(5, send(admin, get("/metrics"))).await.body;
        text.lines()
            .find_map(|line| line.strip_prefix(sample)?.strip_prefix(' '))
            .map_or(0, |value| value.trim().parse().unwrap())
    }

    /// The access log's `limit_status` of its first `n` lines, once written.
    async fn statuses(log: &Path, n: usize) -> Vec<String> {
        let deadline = Instant::now() + Duration::from_secs(3);
        loop {
            let text = std::fs::read_to_string(log).unwrap_or_default();
            let found: Vec<String> = text
                .lines()
                .filter_map(|l| l.split(r#""limit_status":""#).nth(1))
                .filter_map(|rest| rest.split('"').next())
                .map(str::to_owned)
                .collect();
            if found.len() >= n {
                return found;
            }
            assert!(Instant::now() < deadline, "{text}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn count(seen: &[String], status: &str) -> usize {
        seen.iter().filter(|s| *s == status).count()
    }

    #[tokio::test]
    async fn soft_admits_exactly_the_share_marked_soft() {
        let _shared = support::shared();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("access.log");
        let limit = r#"{ zone = "api", burst = 9, nodelay = true, soft = "20%" }"#;
        let gw = gateway(&config(&log, API, limit));
        let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
        let mut answers = Vec::new();
        for _ in 0..20 {
            answers.push(get_as(addr, "/", "10.1.0.1").await);
        }
        let ok: Vec<&Reply> = answers.iter().filter(|r| r.status == 200).collect();
        assert_eq!(ok.len(), 12, "10 within the limit, 2 soft");
        // The soft ones (11th and 12th) say nothing is left, as the 10th does.
        for reply in &ok[9..] {
            let state = reply.headers["ratelimit"].to_str().unwrap();
            assert!(state.starts_with(r#""api";r=0;t="#), "{state}");
            assert_eq!(reply.headers["x-ratelimit-remaining"], "0");
            assert_eq!(reply.headers["ratelimit-policy"], r#""api";q=1;w=3600"#);
        }
        assert!(answers[12..].iter().all(|r| r.status == 429));
        let seen = statuses(&log, 20).await;
        let tally = [
            count(&seen, "PASSED"),
            count(&seen, "SOFT"),
            count(&seen, "REJECTED"),
        ];
        assert_eq!(tally, [10, 2, 8], "{seen:?}");
        assert_eq!(seen[10..12], ["SOFT", "SOFT"]);
        let outcome =
            |o: &str| format!(r#"tollgate_limit_decisions_total{{zone="api",outcome="{o}"}}"#);
        assert_eq!(metric(admin, &outcome("passed")).await, 10);
        assert_eq!(metric(admin, &outcome("soft")).await, 2);
        assert_eq!(metric(admin, &outcome("rejected")).await, 8);
    }

    #[tokio::test]
    async fn a_soft_admission_is_no_strike() {
        let _shared = support::shared();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("access.log");
        let ban = r#"ban = { after = 2, within = "1m", for = "1m" }"#;
        let limit = format!(r#"{{ zone = "api", soft = "100%", {ban} }}"#);
        let gw = gateway(&config(&log, API, &limit));
        let addr = addr(&gw);
        let mut seen = Vec::new();
        for _ in 0..5 {
            seen.push(get_as(addr, "/", "10.1.0.2").await.status.as_u16());
        }
        // Passed, soft, then two strikes: the second bans.
        assert_eq!(seen, [200, 200, 429, 429, 403]);
        let logged = statuses(&log, 5).await;
        assert_eq!(logged, ["PASSED", "SOFT", "REJECTED", "REJECTED", "BANNED"]);
    }

    #[tokio::test]
    async fn a_reload_keeps_the_lane_and_a_new_share_applies_to_it() {
        let _shared = support::shared();
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("access.log");
        let text = |share: &str| {
            config(
                &log,
                API,
                &format!(r#"{{ zone = "api", soft = "{share}" }}"#),
            )
        };
        let gw = gateway(&text("100%"));
        let addr = addr(&gw);
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(get_as(addr, "/", "10.1.0.6").await.status.as_u16());
        }
        assert_eq!(seen, [200, 200, 429]);
        let path = Path::new("/tmp/tollgate-test/gateway.toml");
        // The zone keeps its state, and its lane its keys: no fresh share by reload.
        gw.reload(&tollgate::config::from_str(&text("50%"), path).unwrap())
            .unwrap();
        assert_eq!(get_as(addr, "/", "10.1.0.6").await.status, 429);
        // Without any `soft`, the zone has no lane; given one again, it starts empty.
        let without = config(&log, API, r#"{ zone = "api" }"#);
        gw.reload(&tollgate::config::from_str(&without, path).unwrap())
            .unwrap();
        assert_eq!(get_as(addr, "/", "10.1.0.6").await.status, 429);
        gw.reload(&tollgate::config::from_str(&text("100%"), path).unwrap())
            .unwrap();
        assert_eq!(
            get_as(addr, "/", "10.1.0.6").await.status,
            200,
            "a fresh lane"
        );
        assert_eq!(get_as(addr, "/", "10.1.0.6").await.status, 429);
    }

    /// `api` in Redis at `url`, with `extra` lines.
    fn in_redis(url: &str, extra: &str) -> String {
        format!("[redis]\nurl = \"{url}\"\ntimeout = \"500ms\"\non_error = \"deny\"\n{API}\nbackend = \"redis\"\n{extra}")
    }

    /// (passed, soft, rejected) over `gateways`' metrics.
    async fn redis_tally(admins: &[SocketAddr]) -> [u64; 3] {
        let mut tally = [0; 3];
        for admin in admins {
            for (i, o) in ["passed", "soft", "rejected"].iter().enumerate() {
                let sample =
                    format!(r#"tollgate_limit_decisions_total{{zone="api",outcome="{o}"}}"#);
                tally[i] += metric(*admin, &sample).await;
            }
        }
        tally
    }

    #[tokio::test]
    async fn a_redis_zones_lane_is_shared_by_the_instances() {
        let _shared = support::shared();
        if !server::available() {
            return;
        }
        let redis = Redis::start();
        let dir = tempfile::tempdir().unwrap();
        let limit = r#"{ zone = "api", burst = 9, nodelay = true, soft = "20%" }"#;
        let zone = in_redis(&redis.url(), "");
        let a = gateway(&config(&dir.path().join("a.log"), &zone, limit));
        let b = gateway(&config(&dir.path().join("b.log"), &zone, limit));
        let mut ok = 0;
        for i in 0..20 {
            let gw = if i % 2 == 0 { &a } else { &b };
            if get_as(addr(gw), "/", "10.1.0.3").await.status == 200 {
                ok += 1;
            }
        }
        assert_eq!(ok, 12);
        let admins = [a.admin_addr().unwrap(), b.admin_addr().unwrap()];
        assert_eq!(redis_tally(&admins).await, [10, 2, 8]);
        let client = ::redis::Client::open(redis.url()).unwrap();
        let mut conn = client.get_multiplexed_async_connection().await.unwrap();
        let lane = [b"tollgate-soft:api:".as_slice(), &[10, 1, 0, 3]].concat();
        let ttl: i64 = ::redis::cmd("PTTL")
            .arg(&lane)
            .query_async(&mut conn)
            .await
            .unwrap();
        assert!(ttl > 0, "the lane's key is in Redis, with a TTL: {ttl}");
    }

    #[tokio::test]
    async fn a_leased_redis_zone_admits_exactly_the_share_too() {
        let _shared = support::shared();
        if !server::available() {
            return;
        }
        let redis = Redis::start();
        let dir = tempfile::tempdir().unwrap();
        let limit = r#"{ zone = "api", burst = 9, nodelay = true, soft = "20%" }"#;
        let gw = gateway(&config(
            &dir.path().join("a.log"),
            &in_redis(&redis.url(), "lease = 4"),
            limit,
        ));
        let mut ok = 0;
        for _ in 0..20 {
            if get_as(addr(&gw), "/", "10.1.0.4").await.status == 200 {
                ok += 1;
            }
        }
        assert_eq!(ok, 12);
        assert_eq!(redis_tally(&[gw.admin_addr().unwrap()]).await, [10, 2, 8]);
    }

    #[tokio::test]
    async fn a_flood_over_limit_and_lane_costs_redis_nothing() {
        let _shared = support::shared();
        if !server::available() {
            return;
        }
        let redis = Redis::start();
        let dir = tempfile::tempdir().unwrap();
        let limit = r#"{ zone = "api", soft = "100%" }"#;
        let gw = gateway(&config(
            &dir.path().join("a.log"),
            &in_redis(&redis.url(), ""),
            limit,
        ));
        let (addr, admin) = (addr(&gw), gw.admin_addr().unwrap());
        let mut seen = Vec::new();
        for _ in 0..3 {
            seen.push(get_as(addr, "/", "10.1.0.5").await.status.as_u16());
        }
        assert_eq!(seen, [200, 200, 429], "passed, soft, rejected");
        // Both rejections are remembered: with Redis stuck, the flood is still answered
        // 429 at once (on_error = "deny" would answer 503 after the timeout).
        redis.pause();
        let started = Instant::now();
        for _ in 0..20 {
            assert_eq!(get_as(addr, "/", "10.1.0.5").await.status, 429);
        }
        redis.resume();
        assert!(
            started.elapsed() < Duration::from_millis(500),
            "{:?}",
            started.elapsed()
        );
        let errors = r#"tollgate_redis_errors_total{zone="api",kind="timeout"}"#;
        assert_eq!(metric(admin, errors).await, 0);
    }

    #[tokio::test]
    async fn a_lane_and_a_ban_work_on_a_cluster() {
        let _shared = support::shared();
        if !server::available() {
            return;
        }
        let cluster = server::Cluster::start(3);
        let urls: Vec<String> = cluster.urls().iter().map(|u| format!("\"{u}\"")).collect();
        let zone = format!(
            "[redis]\nurls = [{}]\ntimeout = \"500ms\"\non_error = \"deny\"\n{API}\nbackend = \"redis\"\n",
            urls.join(", ")
        );
        let ban = r#"ban = { after = 2, within = "1m", for = "1m" }"#;
        let limit = format!(r#"{{ zone = "api", soft = "100%", {ban} }}"#);
        let dir = tempfile::tempdir().unwrap();
        let gw = gateway(&config(&dir.path().join("a.log"), &zone, &limit));
        // Six clients, whose keys (and lane keys) spread over the nodes.
        for client in 1..=6u8 {
            let ip = format!("10.1.1.{client}");
            let mut seen = Vec::new();
            for _ in 0..5 {
                seen.push(get_as(addr(&gw), "/", &ip).await.status.as_u16());
            }
            assert_eq!(seen, [200, 200, 429, 429, 403], "{ip}");
        }
    }
}
