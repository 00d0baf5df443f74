//! Soft limits (`soft = "10%"`): the decision over local zones, with exact counts at
//! one instant (nothing refills), then through the gateway: marks in the access log,
//! metrics and headers, bans, and a Redis zone's lane on a real redis-server.

mod decisions;

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
        // A line is written as its answer's body ends, which the next request may beat
        // on a busy machine: the outcomes are compared, not their order.
        let mut logged = statuses(&log, 5).await;
        logged.sort();
        assert_eq!(logged, ["BANNED", "PASSED", "REJECTED", "REJECTED", "SOFT"]);
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
