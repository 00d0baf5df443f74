//! Who may pass, through the real gateway: zones and their limits, the rejection and
//! its headers, delays, access lists, exemptions, API-key plans, cost, dry runs and
//! in-flight limits. Clients other than 127.0.0.1 are made with a trusted
//! `X-Forwarded-For` (realip), so every test stays on loopback.

use crate::support;

use std::time::{Duration, Instant};

use http::{Request, StatusCode};
use support::*;

/// `[server]` and `[real_ip]` trusting loopback, then `rest`.
fn config(rest: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
{rest}
"#
    )
}

/// [`config`] with the access log written to `log`.
fn config_logging_to(log: &std::path::Path, rest: &str) -> String {
    config(rest).replace(
        "access = \"off\"",
        &format!("access = \"{}\"", log.display()),
    )
}

/// `GET path` as the client `ip` (through the trusted loopback proxy).
fn from(ip: &str, path: &str) -> Request<Body> {
    Request::get(path)
        .header("host", "example.test")
        .header("x-forwarded-for", ip)
        .body(empty())
        .unwrap()
}

fn with_key(ip: &str, path: &str, key: &str) -> Request<Body> {
    Request::get(path)
        .header("host", "example.test")
        .header("x-forwarded-for", ip)
        .header("x-api-key", key)
        .body(empty())
        .unwrap()
}

async fn statuses(
    addr: std::net::SocketAddr,
    n: usize,
    make: impl Fn() -> Request<Body>,
) -> Vec<u16> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        out.push(send(addr, make()).await.status.as_u16());
    }
    out
}

/// The limit status of each of the first `n` access-log lines (combined: the third
/// field from the end).
async fn outcomes(log: &std::path::Path, n: usize) -> Vec<String> {
    let lines = log_lines(log, n).await;
    lines
        .iter()
        .map(|l| l.split(' ').rev().nth(2).unwrap().to_owned())
        .collect()
}

const PER_IP: &str = r#"
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
"#;

#[tokio::test]
async fn burst_with_nodelay_admits_burst_then_rejects_with_problem_json() {
    let _shared = support::shared();
    let gw = gateway(&config(&format!(
        r#"{PER_IP}
[[location]]
match = "/"
limit = [{{ zone = "per_ip", burst = 2, nodelay = true }}]
return = {{ status = 200, body = "ok\n" }}
"#
    )));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(
            statuses(addr, 3, || from("10.0.0.1", "/")).await,
            [200, 200, 200]
        );
        let reply = send(addr, from("10.0.0.1", "/")).await;
        assert_eq!(reply.status, StatusCode::TOO_MANY_REQUESTS);
        assert_eq!(reply.headers["content-type"], "application/problem+json");
        // 1r/m, burst 2, three taken: the next slot frees 60 s after the first.
        let retry: u64 = reply.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!((59..=60).contains(&retry), "{retry}");
        assert!(
            reply.body.contains(
                r#""type":"https://iana.org/assignments/http-problem-types#quota-exceeded""#
            ),
            "{}",
            reply.body
        );
        assert!(
            reply
                .body
                .contains(r#""title":"Too Many Requests","status":429"#),
            "{}",
            reply.body
        );
        assert!(reply.body.contains(r#""zone":"per_ip""#), "{}", reply.body);
        assert!(
            reply.body.contains(&format!(r#""retry_after":{retry}"#)),
            "{}",
            reply.body
        );
        assert_eq!(reply.headers["ratelimit-policy"], r#""per_ip";q=1;w=60"#);
        assert_eq!(reply.headers["ratelimit"], format!(r#""per_ip";r=0;t=180"#));
        // Another client has its own bucket.
        assert_eq!(send(addr, from("10.0.0.2", "/")).await.status, 200);
    })
    .await;
}

#[tokio::test]
async fn admitted_responses_carry_draft_headers_counting_down() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(&format!(
        r#"{PER_IP}
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
limit = [{{ zone = "per_ip", burst = 5, nodelay = true }}]
upstream = "app"
"#,
        up.addr
    )));
    let addr = addr(&gw);
    within(10, async {
        let first = send(addr, from("10.0.0.1", "/")).await;
        assert_eq!(first.status, 200);
        assert_eq!(first.headers["ratelimit-policy"], r#""per_ip";q=1;w=60"#);
        assert_eq!(first.headers["ratelimit"], r#""per_ip";r=5;t=60"#);
        let second = send(addr, from("10.0.0.1", "/")).await;
        assert_eq!(second.headers["ratelimit"], r#""per_ip";r=4;t=120"#);
        assert!(second.headers.get("x-ratelimit-limit").is_none());
    })
    .await;
}

#[tokio::test]
async fn legacy_both_and_none_header_styles() {
    let _shared = support::shared();
    for (style, draft, legacy) in [
        ("legacy", false, true),
        ("both", true, true),
        ("none", false, false),
    ] {
        let gw = gateway(
            &config(&format!(
                r#"{PER_IP}
[[location]]
match = "/"
limit = [{{ zone = "per_ip", burst = 3, nodelay = true }}]
return = {{ status = 200 }}
"#
            ))
            .replace(
                "workers = 1",
                &format!("workers = 1\nratelimit_headers = \"{style}\""),
            ),
        );
        let reply = within(5, send(addr(&gw), from("10.0.0.1", "/"))).await;
        assert_eq!(reply.headers.contains_key("ratelimit"), draft, "{style}");
        assert_eq!(
            reply.headers.contains_key("x-ratelimit-remaining"),
            legacy,
            "{style}"
        );
        if legacy {
            assert_eq!(reply.headers["x-ratelimit-limit"], "1");
            assert_eq!(reply.headers["x-ratelimit-remaining"], "3");
            assert_eq!(reply.headers["x-ratelimit-reset"], "60");
        }
    }
}

#[tokio::test]
async fn without_nodelay_excess_requests_wait_on_the_rate_grid() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[zones.fast]
key = "$binary_remote_addr"
rate = "2r/s"
[[location]]
match = "/"
limit = [{ zone = "fast", burst = 2 }]
return = { status = 200 }
"#,
    ));
    let addr = addr(&gw);
    within(10, async {
        let start = Instant::now();
        let sends = (0..4).map(|_| async move {
            let reply = send(addr, from("10.0.0.9", "/")).await;
            (reply.status.as_u16(), start.elapsed())
        });
        let got = futures_util::future::join_all(sends).await;
        let rejected = got.iter().filter(|(s, _)| *s == 429).count();
        assert_eq!(rejected, 1, "{got:?}");
        // The first passes at once; the two delayed ones finish 500 and 1000 ms in. (A
        // slow grid: the four must arrive within one step for exactly one to be refused.)
        let mut admitted: Vec<Duration> = got
            .iter()
            .filter(|(s, _)| *s == 200)
            .map(|(_, t)| *t)
            .collect();
        admitted.sort();
        let ms: Vec<u128> = admitted.iter().map(Duration::as_millis).collect();
        assert!(ms[0] < 350, "{got:?}");
        assert!((450..850).contains(&ms[1]), "{got:?}");
        assert!((950..1350).contains(&ms[2]), "{got:?}");
    })
    .await;
}

#[tokio::test]
async fn access_deny_is_403_before_routing_and_exempt_is_never_limited() {
    let _shared = support::shared();
    let gw = gateway(&config(&format!(
        r#"
[access]
deny = ["192.0.2.0/24"]
exempt = ["203.0.113.7"]
{PER_IP}
[[location]]
match = "/"
limit = [{{ zone = "per_ip" }}]
return = {{ status = 200 }}
"#
    )));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(
            send(addr, from("192.0.2.55", "/nowhere-routed"))
                .await
                .status,
            403
        );
        assert_eq!(
            statuses(addr, 5, || from("203.0.113.7", "/")).await,
            [200; 5]
        );
        let exempt = send(addr, from("203.0.113.7", "/")).await;
        assert!(exempt.headers.get("ratelimit").is_none());
        assert_eq!(
            statuses(addr, 2, || from("203.0.113.8", "/")).await,
            [200, 429]
        );
    })
    .await;
}

#[tokio::test]
async fn location_access_rules_first_match_decides_and_a_denied_request_costs_nothing() {
    let _shared = support::shared();
    let gw = gateway(&config(&format!(
        r#"{PER_IP}
[[location]]
match = "^~ /internal/"
access = ["deny 10.0.0.13", "allow 10.0.0.0/8", "deny all"]
limit = [{{ zone = "per_ip" }}]
return = {{ status = 200 }}
[[location]]
match = "/"
limit = [{{ zone = "per_ip" }}]
return = {{ status = 200 }}
"#
    )));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(
            send(addr, from("10.0.0.13", "/internal/x")).await.status,
            403
        );
        assert_eq!(
            send(addr, from("192.0.2.1", "/internal/x")).await.status,
            403
        );
        // IPv4-mapped IPv6 matches the IPv4 rules.
        assert_eq!(
            send(addr, from("::ffff:10.0.0.13", "/internal/x"))
                .await
                .status,
            403
        );
        assert_eq!(
            send(addr, from("10.1.1.1", "/internal/x")).await.status,
            200
        );
        // nginx would have charged the denied requests; tollgate did not.
        for _ in 0..3 {
            assert_eq!(
                send(addr, from("10.0.0.13", "/internal/x")).await.status,
                403
            );
        }
        assert_eq!(send(addr, from("10.0.0.13", "/")).await.status, 200);
    })
    .await;
}

#[tokio::test]
async fn plans_give_api_keys_their_rates_and_unlisted_keys_the_zone_rate() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[zones.per_key]
key = "$http_x_api_key"
rate = "1r/m"
algorithm = "token_bucket"
plans = { free = "2r/h", pro = "600r/m" }
[api_keys]
header = "X-API-Key"
inline = { "k-free" = "free", "k-pro" = "pro" }
[[location]]
match = "/"
limit = [{ zone = "per_key", burst = 1, nodelay = true }]
return = { status = 200 }
"#,
    ));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(
            statuses(addr, 3, || with_key("10.0.0.1", "/", "k-free")).await,
            [200, 200, 429]
        );
        let free = send(addr, with_key("10.0.0.1", "/", "k-free")).await;
        assert_eq!(free.headers["ratelimit-policy"], r#""per_key";q=2;w=3600"#);
        // 600r/m is one every 100 ms: spaced by 110 ms, nothing is rejected.
        for _ in 0..4 {
            let pro = send(addr, with_key("10.0.0.1", "/", "k-pro")).await;
            assert_eq!(pro.status, 200);
            assert_eq!(pro.headers["ratelimit-policy"], r#""per_key";q=600;w=60"#);
            tokio::time::sleep(Duration::from_millis(110)).await;
        }
        assert_eq!(
            statuses(addr, 3, || with_key("10.0.0.1", "/", "k-other")).await,
            [200, 200, 429]
        );
        // No key: the zone does not apply, and says nothing.
        let keyless = send(addr, from("10.0.0.1", "/")).await;
        assert_eq!(keyless.status, 200);
        assert!(keyless.headers.get("ratelimit").is_none());
    })
    .await;
}

#[tokio::test]
async fn a_rejection_by_one_zone_charges_no_other_zone() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
[zones.per_key]
key = "$http_x_api_key"
rate = "1r/m"
[[location]]
match = "/"
limit = [{ zone = "per_ip", burst = 3, nodelay = true }, { zone = "per_key", nodelay = true }]
return = { status = 200 }
"#,
    ));
    let addr = addr(&gw);
    within(10, async {
        let first = send(addr, with_key("10.0.0.1", "/", "k")).await;
        assert_eq!(first.status, 200);
        assert_eq!(
            first.headers["ratelimit-policy"],
            r#""per_ip";q=1;w=60, "per_key";q=1;w=60"#
        );
        assert_eq!(
            first.headers["ratelimit"],
            r#""per_ip";r=3;t=60, "per_key";r=0;t=60"#
        );
        // per_key rejects these: per_ip must not be charged for them.
        for _ in 0..5 {
            let reply = send(addr, with_key("10.0.0.1", "/", "k")).await;
            assert_eq!(reply.status, 429);
            assert!(reply.body.contains(r#""zone":"per_key""#), "{}", reply.body);
        }
        assert_eq!(
            statuses(addr, 4, || from("10.0.0.1", "/")).await,
            [200, 200, 200, 429],
            "per_ip kept its burst of 3"
        );
    })
    .await;
}

#[tokio::test]
async fn cost_takes_that_many_units_and_limit_status_can_be_overridden() {
    let _shared = support::shared();
    let gw = gateway(&config(&format!(
        r#"{PER_IP}
[[location]]
match = "/expensive"
cost = 3
limit_status = 503
limit = [{{ zone = "per_ip", burst = 4, nodelay = true }}]
return = {{ status = 200 }}
[[location]]
match = "/"
limit = [{{ zone = "per_ip", burst = 4, nodelay = true }}]
return = {{ status = 200 }}
"#
    )));
    let addr = addr(&gw);
    within(10, async {
        // Fresh: 3 units with the first free = excess 2; +3 = 5 > 4.
        assert_eq!(send(addr, from("10.0.0.1", "/expensive")).await.status, 200);
        let reply = send(addr, from("10.0.0.1", "/expensive")).await;
        assert_eq!(reply.status, 503);
        assert!(
            reply
                .body
                .contains(r#""title":"Service Unavailable","status":503"#),
            "{}",
            reply.body
        );
        assert_eq!(
            statuses(addr, 3, || from("10.0.0.1", "/")).await,
            [200, 200, 429]
        );
    })
    .await;
}

#[tokio::test]
async fn dry_run_decides_and_counts_but_never_rejects() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&config_logging_to(
        &log,
        &format!(
            r#"{PER_IP}
[[location]]
match = "/"
limit = [{{ zone = "per_ip", dry_run = true, nodelay = true }}]
return = {{ status = 200 }}
"#
        ),
    ));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(
            statuses(addr, 3, || from("10.0.0.1", "/")).await,
            [200, 200, 200]
        );
    })
    .await;
    assert_eq!(
        outcomes(&log, 3).await,
        ["PASSED", "REJECTED_DRY_RUN", "REJECTED_DRY_RUN"]
    );
}

#[tokio::test]
async fn the_access_log_tells_passed_delayed_rejected_and_unlimited() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&config_logging_to(
        &log,
        &format!(
            r#"{PER_IP}
[zones.fast]
key = "$binary_remote_addr"
# Slow enough that the second /queued comes within a step of the first: delayed.
rate = "1r/s"
[[location]]
match = "/free"
return = {{ status = 200 }}
[[location]]
match = "/queued"
limit = [{{ zone = "fast", burst = 1 }}]
return = {{ status = 200 }}
[[location]]
match = "/"
limit = [{{ zone = "per_ip", nodelay = true }}]
return = {{ status = 200 }}
"#
        ),
    ));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(
            statuses(addr, 2, || from("10.0.0.1", "/queued")).await,
            [200, 200]
        );
        assert_eq!(
            statuses(addr, 2, || from("10.0.0.1", "/")).await,
            [200, 429]
        );
        assert_eq!(send(addr, from("10.0.0.1", "/free")).await.status, 200);
    })
    .await;
    let want = ["PASSED", "DELAYED", "PASSED", "REJECTED", "-"];
    assert_eq!(outcomes(&log, 5).await, want);
}

#[tokio::test]
async fn a_client_that_leaves_while_delayed_is_logged_as_499() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let gw = gateway(&config_logging_to(
        &log,
        r#"
[zones.slow]
key = "$binary_remote_addr"
rate = "1r/m"
[[location]]
match = "/"
limit = [{ zone = "slow", burst = 1 }]
return = { status = 200 }
"#,
    ));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(send(addr, from("10.0.0.1", "/")).await.status, 200);
        // The second waits 60 s; give up after 1 s.
        let gave_up =
            tokio::time::timeout(Duration::from_secs(1), send(addr, from("10.0.0.1", "/"))).await;
        assert!(gave_up.is_err());
    })
    .await;
    let lines = log_lines(&log, 2).await;
    assert!(
        lines[1].contains("\" 499 ") && lines[1].contains(" DELAYED "),
        "{lines:?}"
    );
}

#[tokio::test]
async fn concurrency_limits_requests_in_flight_per_client_until_the_body_ends() {
    let _shared = support::shared();
    let (release, released) = tokio::sync::watch::channel(false);
    let up = Upstream::start(move |_req| {
        let mut released = released.clone();
        async move {
            let _ = released.wait_for(|r| *r).await;
            text(200, "done\n")
        }
    })
    .await;
    let gw = gateway(&config(&format!(
        r#"
[zones.conns]
key = "$binary_remote_addr"
algorithm = "concurrency"
max = 2
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
limit = [{{ zone = "conns" }}]
upstream = "app"
"#,
        up.addr
    )));
    let addr = addr(&gw);
    within(10, async {
        let first = tokio::spawn(send(addr, from("10.0.0.1", "/")));
        let second = tokio::spawn(send(addr, from("10.0.0.1", "/")));
        up.holds(2).await;
        let third = send(addr, from("10.0.0.1", "/")).await;
        assert_eq!(third.status, 429);
        assert_eq!(third.headers["retry-after"], "1");
        assert_eq!(third.headers["ratelimit-policy"], r#""conns";q=2"#);
        // Another client is not affected.
        let other = tokio::spawn(send(addr, from("10.0.0.2", "/")));
        release.send(true).unwrap();
        assert_eq!(first.await.unwrap().status, 200);
        assert_eq!(second.await.unwrap().status, 200);
        assert_eq!(other.await.unwrap().status, 200);
        // Both released: room again.
        assert_eq!(send(addr, from("10.0.0.1", "/")).await.status, 200);
    })
    .await;
}

#[tokio::test]
async fn window_algorithms_admit_rate_plus_burst_per_window() {
    let _shared = support::shared();
    for algorithm in ["fixed_window", "sliding_window", "sliding_log"] {
        let gw = gateway(&config(&format!(
            r#"
[zones.w]
key = "$binary_remote_addr"
rate = "3r/d"
algorithm = "{algorithm}"
[[location]]
match = "/"
limit = [{{ zone = "w", burst = 1, nodelay = true }}]
return = {{ status = 200 }}
"#
        )));
        let got = within(10, statuses(addr(&gw), 5, || from("10.0.0.1", "/"))).await;
        assert_eq!(got, [200, 200, 200, 200, 429], "{algorithm}");
    }
}

#[tokio::test]
async fn a_literal_key_is_one_bucket_for_everyone_and_composite_keys_split() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[zones.global]
key = "global"
rate = "1r/m"
[zones.per_key_uri]
key = "$http_x_api_key:$uri"
rate = "1r/m"
[[location]]
match = "/g"
limit = [{ zone = "global", burst = 1, nodelay = true }]
return = { status = 200 }
[[location]]
match = "/k/"
limit = [{ zone = "per_key_uri", nodelay = true }]
return = { status = 200 }
"#,
    ));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(send(addr, from("10.0.0.1", "/g")).await.status, 200);
        assert_eq!(send(addr, from("10.0.0.2", "/g")).await.status, 200);
        assert_eq!(send(addr, from("10.0.0.3", "/g")).await.status, 429);
        assert_eq!(
            send(addr, with_key("10.0.0.1", "/k/a", "x")).await.status,
            200
        );
        assert_eq!(
            send(addr, with_key("10.0.0.1", "/k/a", "x")).await.status,
            429
        );
        assert_eq!(
            send(addr, with_key("10.0.0.1", "/k/b", "x")).await.status,
            200
        );
        assert_eq!(
            send(addr, with_key("10.0.0.1", "/k/a", "y")).await.status,
            200
        );
    })
    .await;
}

#[tokio::test]
async fn ipv6_clients_share_their_prefix() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[zones.per_net]
key = "$binary_remote_addr"
rate = "1r/m"
ipv6_prefix = 64
[[location]]
match = "/"
limit = [{ zone = "per_net", nodelay = true }]
return = { status = 200 }
"#,
    ));
    let addr = addr(&gw);
    within(10, async {
        assert_eq!(send(addr, from("2001:db8:1:2::1", "/")).await.status, 200);
        assert_eq!(
            send(addr, from("2001:db8:1:2::ffff", "/")).await.status,
            429
        );
        assert_eq!(send(addr, from("2001:db8:1:3::1", "/")).await.status, 200);
    })
    .await;
}
