//! Conformance with nginx's `limit_req`: the same timed request schedules are
//! sent at the same instants to a real nginx (Debian's `/usr/sbin/nginx`, run as a child
//! process from a temporary prefix) and to tollgate, with equivalent configurations. Every
//! request must get the same status from both, and the same delay within ±15 ms.
//!
//! nginx's own answers are also checked against outcomes worked out by hand (from
//! nginx's documented arithmetic), so the two cannot agree by being wrong the same way.
//!
//! Schedules keep every arrival at least 30 ms away from a token boundary, so the outcome does
//! not depend on scheduling jitter. Requests sent at the same offset from the same client with
//! the same key are interchangeable (which of them the server sees first is a race), so each
//! such group is compared as a sorted list.
//!
//! Without nginx the test is skipped, unless `CI` is set: then it fails (`.ci/run` installs it).
//! `cargo test --test it nginx_conformance:: -- --nocapture` prints every request's row.

use crate::support;

use support::nginx::Nginx;

use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::Path;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpSocket;
use tokio::time::Instant;

/// How far two latencies (or a latency and its expected delay) may differ.
const TOLERANCE_MS: u64 = 15;

/// Runs before a latency-only difference fails the test (see the test's doc comment).
const ATTEMPTS: u32 = 3;

/// Scenarios run concurrently; each starts this much after the previous one, so that their
/// simultaneous spikes do not coincide.
const STAGGER_MS: u64 = 40;

// ---------------------------------------------------------------------------------------------
// Scenarios

/// What a zone is keyed on.
#[derive(Clone, Copy)]
enum Key {
    /// `$binary_remote_addr`
    Addr,
    /// `$http_x_api_key`: requests without the header are not limited by the zone.
    ApiKey,
}

impl Key {
    /// The same variable name in both configurations.
    fn variable(self) -> &'static str {
        match self {
            Key::Addr => "$binary_remote_addr",
            Key::ApiKey => "$http_x_api_key",
        }
    }
}

struct Zone {
    name: &'static str,
    key: Key,
    /// As written in both configs, e.g. `10r/s`.
    rate: &'static str,
}

/// nginx's `nodelay` / `delay=N` / neither.
#[derive(Clone, Copy)]
enum Mode {
    DelayAll,
    NoDelay,
    DelayAfter(u32),
}

struct Limit {
    zone: &'static str,
    burst: u32,
    mode: Mode,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Outcome {
    Passed { delay_ms: u64 },
    Rejected,
}

#[derive(Clone, Copy)]
struct Request {
    at_ms: u64,
    /// Last octet of the client's address.
    host: u8,
    api_key: Option<&'static str>,
    expected: Outcome,
}

struct Scenario {
    name: &'static str,
    zones: Vec<Zone>,
    /// In order: the first listed is checked first.
    limits: Vec<Limit>,
    requests: Vec<Request>,
}

fn zone(name: &'static str, key: Key, rate: &'static str) -> Zone {
    Zone { name, key, rate }
}

fn limit(zone: &'static str, burst: u32, mode: Mode) -> Limit {
    Limit { zone, burst, mode }
}

/// Requests sent together (same instant, client and key): one passes after each of `delays`
/// (ms), `rejected` more are rejected.
fn spike(
    at_ms: u64,
    host: u8,
    api_key: Option<&'static str>,
    delays: &[u64],
    rejected: usize,
) -> Vec<Request> {
    let passed = delays.iter().map(|&delay_ms| Outcome::Passed { delay_ms });
    passed
        .chain(std::iter::repeat_n(Outcome::Rejected, rejected))
        .map(|expected| Request {
            at_ms,
            host,
            api_key,
            expected,
        })
        .collect()
}

/// One request every `at` from client `host`; `expected` has one letter per request:
/// `P` passes at once, `R` is rejected, a number passes after that many ms.
fn stream(host: u8, at: &[u64], expected: &str) -> Vec<Request> {
    let outcomes: Vec<Outcome> = expected
        .split_whitespace()
        .map(|word| match word {
            "P" => Outcome::Passed { delay_ms: 0 },
            "R" => Outcome::Rejected,
            ms => Outcome::Passed {
                delay_ms: ms.parse().expect("a delay in ms"),
            },
        })
        .collect();
    assert_eq!(at.len(), outcomes.len(), "one outcome per arrival");
    at.iter()
        .zip(outcomes)
        .map(|(&at_ms, expected)| Request {
            at_ms,
            host,
            api_key: None,
            expected,
        })
        .collect()
}

/// 15 requests a second against a 10r/s zone: arrivals 30, 70 and 150 ms into every 200 ms,
/// so each sits at least 30 ms from the 100 ms token grid.
fn fifteen_per_second() -> Vec<u64> {
    let mut at: Vec<u64> = (0..9)
        .flat_map(|j| [30, 70, 150].map(|o| 200 * j + o))
        .collect();
    at.insert(0, 0);
    at
}

/// The expected outcomes follow nginx's limit_req arithmetic (10r/s drains one request per
/// 100 ms; the first request of a key costs nothing; a rejection changes no state).
fn scenarios() -> Vec<Scenario> {
    let addr_10 = || vec![zone("ip", Key::Addr, "10r/s")];
    vec![
        Scenario {
            // 20 at once, burst=5: 1 + 5 pass on the 100 ms grid, 14 rejected. Another client
            // is independent. By t=750 the bucket has drained.
            name: "burst_without_nodelay_delays_on_the_grid",
            zones: addr_10(),
            limits: vec![limit("ip", 5, Mode::DelayAll)],
            requests: [
                spike(0, 2, None, &[0, 100, 200, 300, 400, 500], 14),
                spike(0, 3, None, &[0, 100, 200], 0),
                spike(750, 2, None, &[0, 100], 0),
            ]
            .concat(),
        },
        Scenario {
            // 10 at once: 6 pass. At t=250 excess is 5000-2500: 2 more fit. At t=1550 the
            // bucket is empty: 1 free + 5.
            name: "burst_with_nodelay_passes_at_once",
            zones: addr_10(),
            limits: vec![limit("ip", 5, Mode::NoDelay)],
            requests: [
                spike(0, 2, None, &[0; 6], 4),
                spike(250, 2, None, &[0; 2], 2),
                spike(1550, 2, None, &[0; 6], 1),
            ]
            .concat(),
        },
        Scenario {
            // burst=8 delay=3, 12 at once: 4 at once, 5 delayed 100..500, 3 rejected. At
            // t=650 excess is 8000-6500: the next three reach 2500 (not above delay=3, so no
            // wait), 3500 and 4500 (50 and 150 ms).
            name: "delay_lets_the_first_through_then_delays",
            zones: addr_10(),
            limits: vec![limit("ip", 8, Mode::DelayAfter(3))],
            requests: [
                spike(0, 2, None, &[0, 0, 0, 0, 100, 200, 300, 400, 500], 3),
                spike(650, 2, None, &[0, 50, 150], 0),
            ]
            .concat(),
        },
        Scenario {
            // Each accepted request adds 1000 minus what drained: the burst fills after 8, then
            // one in three is rejected.
            name: "sustained_stream_above_rate_with_nodelay",
            zones: addr_10(),
            limits: vec![limit("ip", 3, Mode::NoDelay)],
            requests: stream(
                2,
                &fifteen_per_second(),
                "P P P P P P P P R P P R P P R P P R P P R P P R P P R P",
            ),
        },
        Scenario {
            // The same stream delayed: each accepted request waits excess/rate.
            name: "sustained_stream_above_rate_delayed",
            zones: addr_10(),
            limits: vec![limit("ip", 2, Mode::DelayAll)],
            requests: stream(
                2,
                &fifteen_per_second(),
                "P 70 130 150 170 R 150 170 R 150 170 R 150 170 R 150 170 R \
                 150 170 R 150 170 R 150 170 R 150",
            ),
        },
        Scenario {
            // 5r/s: at t=730, 3650 of 5000 has drained: 3 pass. Empty again by t=1600.
            name: "idle_client_recovers",
            zones: vec![zone("ip", Key::Addr, "5r/s")],
            limits: vec![limit("ip", 5, Mode::NoDelay)],
            requests: [
                spike(0, 2, None, &[0; 6], 4),
                spike(730, 2, None, &[0; 3], 7),
                spike(2000, 2, None, &[0; 6], 2),
            ]
            .concat(),
        },
        Scenario {
            // IP zone (capacity 3) checked first, key zone (2r/s, capacity 2) last.
            // t=0: the key zone rejects 2 of 4; they must not charge the IP zone, so at t=50
            // the IP bucket is 1000-500 and one more fits (none would if they had charged it).
            // t=400: the IP zone rejects client 4 (full since t=350) for key k2; that must not
            // charge k2, so client 5 still gets 1 free + 1 burst of k2 at t=420.
            name: "two_zones_a_rejection_charges_neither",
            zones: vec![
                zone("ip", Key::Addr, "10r/s"),
                zone("key", Key::ApiKey, "2r/s"),
            ],
            limits: vec![
                limit("ip", 2, Mode::NoDelay),
                limit("key", 1, Mode::NoDelay),
            ],
            requests: [
                spike(0, 2, Some("k1"), &[0, 0], 2),
                spike(50, 2, None, &[0], 2),
                spike(350, 4, None, &[0, 0, 0], 0),
                spike(400, 4, Some("k2"), &[], 2),
                spike(420, 5, Some("k2"), &[0, 0], 1),
            ]
            .concat(),
        },
        Scenario {
            // Both zones delay: the larger delay wins (key zone: 200 ms a request). The 5th is
            // rejected by the key zone (4000 > 3000) and charges neither: at t=250 the IP bucket holds
            // 3000-2500, so the next three wait 150, 250, 350 ms.
            name: "two_delaying_zones_take_the_larger_delay",
            zones: vec![
                zone("ip", Key::Addr, "10r/s"),
                zone("key", Key::ApiKey, "5r/s"),
            ],
            limits: vec![
                limit("ip", 5, Mode::DelayAll),
                limit("key", 3, Mode::DelayAll),
            ],
            requests: [
                spike(0, 2, Some("k1"), &[0, 200, 400, 600], 1),
                spike(250, 2, None, &[150, 250, 350], 0),
            ]
            .concat(),
        },
        Scenario {
            // Keyed on X-API-Key: keys are independent, requests without one are not limited,
            // and a key is limited whatever address it comes from.
            name: "api_key_zone_limits_per_key_and_skips_requests_without_one",
            zones: vec![zone("key", Key::ApiKey, "5r/s")],
            limits: vec![limit("key", 2, Mode::NoDelay)],
            requests: [
                spike(0, 2, Some("alpha"), &[0; 3], 2),
                spike(0, 2, Some("beta"), &[0; 2], 0),
                spike(0, 2, None, &[0; 6], 0),
                spike(100, 3, Some("alpha"), &[], 1),
                spike(100, 3, None, &[0], 0),
                spike(500, 4, Some("alpha"), &[0, 0], 1),
            ]
            .concat(),
        },
        Scenario {
            // 30r/m is exactly 500 milli-requests a second, so nginx's truncation loses
            // nothing. At t=1000 excess would be 2500 > 2000; at t=2100 it is 1950.
            name: "per_minute_rate_that_nginx_stores_exactly",
            zones: vec![zone("ip", Key::Addr, "30r/m")],
            limits: vec![limit("ip", 2, Mode::NoDelay)],
            requests: [
                spike(0, 2, None, &[0; 3], 1),
                spike(1000, 2, None, &[], 1),
                spike(2100, 2, None, &[0], 0),
            ]
            .concat(),
        },
    ]
}

/// Scenario `index`'s own client addresses, path and zone names, so that no two scenarios
/// share any state in either server.
fn client(index: usize, host: u8) -> Ipv4Addr {
    Ipv4Addr::new(127, 0, u8::try_from(index + 1).unwrap(), host)
}

fn path(index: usize) -> String {
    format!("/s{index}")
}

fn zone_name(index: usize, zone: &str) -> String {
    format!("s{index}_{zone}")
}

// ---------------------------------------------------------------------------------------------
// The two configurations

/// One `location = /sN` per scenario, its zones named `sN_NAME`, everything inside `dir`.
fn nginx_config(dir: &Path, port: u16, scenarios: &[Scenario]) -> String {
    let dir = dir.display();
    let mut zones = String::new();
    let mut locations = String::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        for zone in &scenario.zones {
            let key = zone.key.variable();
            let name = zone_name(index, zone.name);
            let rate = zone.rate;
            writeln!(
                zones,
                "    limit_req_zone {key} zone={name}:1m rate={rate};"
            )
            .unwrap();
        }
        // `return` would answer before limit_req runs: serve a file (content phase) instead.
        writeln!(locations, "        location = {} {{", path(index)).unwrap();
        for limit in &scenario.limits {
            let mode = match limit.mode {
                Mode::DelayAll => String::new(),
                Mode::NoDelay => " nodelay".to_owned(),
                Mode::DelayAfter(n) => format!(" delay={n}"),
            };
            let (name, burst) = (zone_name(index, limit.zone), limit.burst);
            writeln!(
                locations,
                "            limit_req zone={name} burst={burst}{mode};"
            )
            .unwrap();
        }
        writeln!(locations, "        }}").unwrap();
    }
    format!(
        "daemon off;
master_process off;
worker_processes 1;
error_log {dir}/error.log warn;
pid {dir}/nginx.pid;
events {{
    worker_connections 1024;
}}
http {{
    access_log off;
    client_body_temp_path {dir}/tmp/client_body;
    proxy_temp_path {dir}/tmp/proxy;
    fastcgi_temp_path {dir}/tmp/fastcgi;
    uwsgi_temp_path {dir}/tmp/uwsgi;
    scgi_temp_path {dir}/tmp/scgi;
    default_type text/plain;
{zones}    server {{
        listen 127.0.0.1:{port};
        root {dir}/www;
{locations}        location = /warm {{
        }}
    }}
}}
"
    )
}

/// The same as [`nginx_config`] for tollgate, which limits before `return` answers.
fn tollgate_config(scenarios: &[Scenario]) -> String {
    let mut text = String::from(
        r#"[server]
listen = ["127.0.0.1:0"]
workers = 2
limit_status = 503
[log]
access = "off"
"#,
    );
    for (index, scenario) in scenarios.iter().enumerate() {
        for zone in &scenario.zones {
            let key = zone.key.variable();
            let (name, rate) = (zone_name(index, zone.name), zone.rate);
            writeln!(
                text,
                "[zones.{name}]\nkey = \"{key}\"\nrate = \"{rate}\"\nsize = \"1m\""
            )
            .unwrap();
        }
    }
    for (index, scenario) in scenarios.iter().enumerate() {
        let limits: Vec<String> = scenario
            .limits
            .iter()
            .map(|limit| {
                let mode = match limit.mode {
                    Mode::DelayAll => String::new(),
                    Mode::NoDelay => ", nodelay = true".to_owned(),
                    Mode::DelayAfter(n) => format!(", delay = {n}"),
                };
                let (name, burst) = (zone_name(index, limit.zone), limit.burst);
                format!("{{ zone = \"{name}\", burst = {burst}{mode} }}")
            })
            .collect();
        writeln!(
            text,
            "[[location]]\nmatch = \"= {}\"\nlimit = [{}]\nreturn = {{ status = 200, body = \"ok\\n\" }}",
            path(index),
            limits.join(", ")
        )
        .unwrap();
    }
    text.push_str(
        "[[location]]\nmatch = \"= /warm\"\nreturn = { status = 200, body = \"ok\\n\" }\n",
    );
    text
}

// ---------------------------------------------------------------------------------------------
// nginx as a child process

/// Starts nginx serving every scenario's location from a static file (nginx's `return`
/// would answer before `limit_req` runs).
fn start_nginx(scenarios: &[Scenario]) -> Nginx {
    let mut files = vec!["warm".to_owned()];
    files.extend((0..scenarios.len()).map(|index| path(index)[1..].to_owned()));
    Nginx::start(|root, port| nginx_config(root, port, scenarios), &files)
}

// ---------------------------------------------------------------------------------------------
// The client

/// What one request got: its status (0 if the exchange failed) and its latency: the time from
/// the instant it was due to receiving the status line. Measured from the due instant, not from
/// when the client got round to sending it, because a delayed request completes on a grid set by
/// earlier arrivals: a request sent late is delayed that much less.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Measured {
    status: u16,
    latency_ms: u64,
}

/// One request on a fresh connection from `client`, as a raw HTTP/1.1 exchange, sent at once
/// (`due` is normally now).
async fn hit(
    due: Instant,
    server: SocketAddr,
    client: Ipv4Addr,
    path: &str,
    api_key: Option<&str>,
) -> Measured {
    let since_due = || u64::try_from(due.elapsed().as_millis()).unwrap_or(u64::MAX);
    let exchange = async {
        let socket = TcpSocket::new_v4()?;
        socket.bind(SocketAddr::new(client.into(), 0))?;
        let mut stream = socket.connect(server).await?;
        let mut request =
            format!("GET {path} HTTP/1.1\r\nHost: conformance.test\r\nConnection: close\r\n");
        if let Some(key) = api_key {
            write!(request, "X-API-Key: {key}\r\n").unwrap();
        }
        request.push_str("\r\n");
        // The write side stays open: nginx ends a delayed request whose client half-closed.
        stream.write_all(request.as_bytes()).await?;
        let mut head = Vec::new();
        let mut buf = [0u8; 1024];
        while !head.windows(2).any(|w| w == b"\r\n") {
            let n = stream.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buf[..n]);
        }
        let latency_ms = since_due();
        let status = std::str::from_utf8(&head)
            .ok()
            .and_then(|head| head.split_whitespace().nth(1))
            .and_then(|code| code.parse().ok())
            .unwrap_or(0);
        // Read the rest so the server is not answered with a reset.
        let _ = stream.read_to_end(&mut Vec::new()).await;
        std::io::Result::Ok(Measured { status, latency_ms })
    };
    match tokio::time::timeout(Duration::from_secs(5), exchange).await {
        Ok(Ok(measured)) => measured,
        _ => Measured {
            status: 0,
            latency_ms: since_due(),
        },
    }
}

/// What nginx and tollgate answered to one request: `[nginx, tollgate]`.
type Pair = [Measured; 2];

/// Sends every scenario's schedule to nginx and tollgate at the same instants (the scenarios
/// concurrently, staggered) and returns, per scenario and request, what each answered.
async fn run(scenarios: &[Scenario], nginx: SocketAddr, tollgate: SocketAddr) -> Vec<Vec<Pair>> {
    // Margin for spawning every task before the first is due.
    let start = Instant::now() + Duration::from_millis(200);
    let mut tasks = Vec::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        let base = start + Duration::from_millis(STAGGER_MS * index as u64);
        let mut per_request = Vec::new();
        for request in &scenario.requests {
            let due = base + Duration::from_millis(request.at_ms);
            let (client, path, api_key) =
                (client(index, request.host), path(index), request.api_key);
            per_request.push(tokio::spawn(async move {
                tokio::time::sleep_until(due).await;
                let (nginx, tollgate) = tokio::join!(
                    hit(due, nginx, client, &path, api_key),
                    hit(due, tollgate, client, &path, api_key),
                );
                [nginx, tollgate]
            }));
        }
        tasks.push(per_request);
    }
    let mut results = Vec::new();
    for per_request in tasks {
        let mut measured = Vec::new();
        for task in per_request {
            measured.push(task.await.expect("request task"));
        }
        results.push(measured);
    }
    results
}

// ---------------------------------------------------------------------------------------------
// Comparing

/// How well one column of results matches what it is compared with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Agreement {
    /// A status differs.
    Differs,
    /// Every status matches, some latency is off by more than the tolerance.
    StatusesOnly,
    Full,
}

fn agreement(got: Measured, want: Measured) -> Agreement {
    if got.status != want.status {
        Agreement::Differs
    } else if got.latency_ms.abs_diff(want.latency_ms) > TOLERANCE_MS {
        Agreement::StatusesOnly
    } else {
        Agreement::Full
    }
}

fn expected_measure(outcome: Outcome) -> Measured {
    match outcome {
        Outcome::Passed { delay_ms } => Measured {
            status: 200,
            latency_ms: delay_ms,
        },
        Outcome::Rejected => Measured {
            status: 503,
            latency_ms: 0,
        },
    }
}

/// One scenario's verdict: nginx against the hand-worked outcomes, tollgate against nginx.
struct Verdict {
    nginx: Agreement,
    tollgate: Agreement,
    table: String,
}

/// Compares one scenario row by row. Each group of interchangeable requests (same offset,
/// client and key) is sorted by (status, latency) on every side before rows are paired.
fn compare(index: usize, scenario: &Scenario, measured: &[Pair]) -> Verdict {
    let mut verdict = Verdict {
        nginx: Agreement::Full,
        tollgate: Agreement::Full,
        table: format!(
            "scenario {index}: {}\n  {:>3} {:>6} {:<12} {:<6} {:>10} {:>10} {:>10}\n",
            scenario.name, "#", "at ms", "client", "key", "expected", "nginx", "tollgate"
        ),
    };
    let show = |m: Measured| format!("{} {:>4}ms", m.status, m.latency_ms);
    let requests = &scenario.requests;
    let mut start = 0;
    while start < requests.len() {
        let first = requests[start];
        let group = |r: &Request| (r.at_ms, r.host, r.api_key);
        let len = requests[start..]
            .iter()
            .take_while(|r| group(r) == group(&first))
            .count();
        let end = start + len;
        let mut expected: Vec<Measured> = requests[start..end]
            .iter()
            .map(|r| expected_measure(r.expected))
            .collect();
        expected.sort();
        let column = |server: usize| {
            let mut column: Vec<Measured> =
                measured[start..end].iter().map(|m| m[server]).collect();
            column.sort();
            column
        };
        let (nginx, tollgate) = (column(0), column(1));
        for k in 0..len {
            let nginx_agrees = agreement(nginx[k], expected[k]);
            let tollgate_agrees = agreement(tollgate[k], nginx[k]);
            verdict.nginx = verdict.nginx.min(nginx_agrees);
            verdict.tollgate = verdict.tollgate.min(tollgate_agrees);
            let mark = match (nginx_agrees, tollgate_agrees) {
                (Agreement::Full, Agreement::Full) => "",
                (Agreement::Full, _) => "  <- tollgate != nginx",
                (_, Agreement::Full) => "  <- nginx != expected",
                _ => "  <- nginx != expected, tollgate != nginx",
            };
            writeln!(
                verdict.table,
                "  {:>3} {:>6} {:<12} {:<6} {:>10} {:>10} {:>10}{mark}",
                start + k,
                first.at_ms,
                client(index, first.host).to_string(),
                first.api_key.unwrap_or("-"),
                show(expected[k]),
                show(nginx[k]),
                show(tollgate[k]),
            )
            .unwrap();
        }
        start = end;
    }
    verdict
}

// ---------------------------------------------------------------------------------------------

/// One full run against a fresh nginx and a fresh tollgate (fresh state on both sides).
async fn attempt(scenarios: &[Scenario]) -> (Agreement, Agreement, String) {
    let nginx = start_nginx(scenarios);
    let tollgate = support::gateway(&tollgate_config(scenarios));
    let (nginx_addr, tollgate_addr) = (nginx.addr, support::addr(&tollgate));
    for server in [nginx_addr, tollgate_addr] {
        let warm = hit(Instant::now(), server, Ipv4Addr::LOCALHOST, "/warm", None).await;
        assert_eq!(warm.status, 200, "warm-up request to {server}");
    }

    let started = std::time::Instant::now();
    let measured = run(scenarios, nginx_addr, tollgate_addr).await;
    let elapsed = started.elapsed();
    let requests: usize = scenarios.iter().map(|s| s.requests.len()).sum();
    eprintln!("{requests} requests to each server in {elapsed:.2?}");

    let (mut nginx_agrees, mut tollgate_agrees) = (Agreement::Full, Agreement::Full);
    let mut report = String::new();
    for (index, scenario) in scenarios.iter().enumerate() {
        let verdict = compare(index, scenario, &measured[index]);
        // Every table goes to the captured output: `-- --nocapture` shows them on success too.
        eprint!("{}", verdict.table);
        if (verdict.nginx, verdict.tollgate) != (Agreement::Full, Agreement::Full) {
            report.push_str(&verdict.table);
        }
        nginx_agrees = nginx_agrees.min(verdict.nginx);
        tollgate_agrees = tollgate_agrees.min(verdict.tollgate);
    }
    let problems = nginx.error_log_problems();
    if !problems.is_empty() {
        writeln!(
            report,
            "nginx error log (limit lines left out):\n{problems}"
        )
        .unwrap();
    }
    (nginx_agrees, tollgate_agrees, report)
}

/// A run whose statuses all agree but where some latency is off is repeated, up to [`ATTEMPTS`]
/// runs: on a loaded machine a process can be descheduled for longer than the tolerance. So is
/// a run where nginx itself strays from the hand-worked outcomes while tollgate answers every
/// request as nginx did: the harness sent a request late (both saw it late), which says nothing
/// about tollgate. A status where tollgate and nginx differ fails at once (every arrival is at
/// least 30 ms from a token boundary).
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn limits_decide_and_delay_exactly_as_nginx_limit_req() {
    // Alone: latencies are compared within ±15 ms, which another test's load could upset.
    let _alone = support::alone();
    if !support::nginx::available("the nginx conformance test") {
        return;
    }
    let scenarios = scenarios();
    for attempt_no in 1..=ATTEMPTS {
        let (nginx, tollgate, report) = attempt(&scenarios).await;
        if (nginx, tollgate) == (Agreement::Full, Agreement::Full) {
            return;
        }
        let problem = format!(
            "nginx vs the hand-worked outcomes: {nginx:?} (if not Full: a harness or timing \
             problem); tollgate vs nginx: {tollgate:?} (latencies within ±{TOLERANCE_MS} ms)\n\
             {report}"
        );
        let only_latency = nginx.min(tollgate) == Agreement::StatusesOnly;
        let late_arrival = nginx == Agreement::Differs && tollgate != Agreement::Differs;
        assert!(
            (only_latency || late_arrival) && attempt_no < ATTEMPTS,
            "{problem}"
        );
        eprintln!("attempt {attempt_no}: a timing problem of the harness; again.\n{problem}");
    }
}
