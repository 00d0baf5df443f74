//! `GET /metrics` on the admin listener: every family the README's "Metrics" table names,
//! counted through the real gateway, added up over both workers, and kept across a reload.

use crate::support;

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use support::*;

fn config(up: SocketAddr, dead: SocketAddr, shadow_rate: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
[access]
deny = ["10.9.0.0/16"]
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
[zones.shadow]
key = "$binary_remote_addr"
rate = "{shadow_rate}"
[upstreams.app]
servers = ["{up}"]
[upstreams.dead]
servers = ["{dead}"]
[[location]]
match = "/api/"
upstream = "app"
limit = [{{ zone = "per_ip", burst = 1, nodelay = true }}]
[[location]]
match = "= /shadow"
return = {{ status = 204 }}
limit = [{{ zone = "shadow", dry_run = true, nodelay = true }}]
[[location]]
match = "/dead/"
upstream = "dead"
[[location]]
match = "^~ /private/"
access = ["allow 10.1.0.0/16", "deny all"]
return = {{ status = 200 }}
"#
    )
}

async fn from(addr: SocketAddr, path: &str, client: &str) -> u16 {
    get_as(addr, path, client).await.status.as_u16()
}

/// The scrape as `name{labels}` → value, with the text itself for messages (also
/// tests/it/contrib.rs's).
pub(crate) struct Scrape {
    pub values: BTreeMap<String, f64>,
    pub text: String,
}

impl Scrape {
    pub fn get(&self, series: &str) -> f64 {
        match self.values.get(series) {
            Some(value) => *value,
            None => panic!("no series {series} in:\n{}", self.text),
        }
    }

    /// The metric names of its samples (`_bucket`, `_total`… as written).
    pub fn names(&self) -> std::collections::BTreeSet<&str> {
        self.values
            .keys()
            .map(|series| series.split(['{', ' ']).next().unwrap_or(""))
            .collect()
    }
}

pub(crate) async fn scrape(admin: SocketAddr) -> Scrape {
    let reply = within(5, send(admin, get("/metrics"))).await;
    assert_eq!(reply.status, 200);
    assert_eq!(
        reply.headers["content-type"],
        "application/openmetrics-text; version=1.0.0; charset=utf-8"
    );
    assert!(reply.body.ends_with("# EOF\n"), "{}", reply.body);
    let values = reply
        .body
        .lines()
        .filter(|line| !line.starts_with('#'))
        .map(|line| {
            let (series, value) = line.rsplit_once(' ').expect("series value");
            (series.to_owned(), value.parse().expect("a number"))
        })
        .collect();
    Scrape {
        values,
        text: reply.body,
    }
}

/// A request is counted when its response has been sent, a moment after the client has
/// read it: scrapes until `ready` holds (5 s at most).
pub(crate) async fn scrape_until(admin: SocketAddr, ready: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let scraped = scrape(admin).await;
        if ready(&scraped) || Instant::now() > deadline {
            return scraped;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const REQUESTS: &str = "tollgate_requests_total";

/// Requests timed, over every site and location.
fn duration_count(m: &Scrape) -> f64 {
    m.values
        .iter()
        .filter(|(series, _)| series.starts_with("tollgate_request_duration_seconds_count{"))
        .map(|(_, value)| value)
        .sum()
}

#[tokio::test]
async fn every_family_counts_what_the_gateway_did() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dead = closed_port();
    let gw = gateway(&config(up.addr, dead, "1r/m"));
    let (addr, admin) = (addr(&gw), gw.admin_addr().expect("admin configured"));

    // per_ip: 1r/m with burst 1 → two pass, the third is rejected.
    for expected in [200, 200, 429] {
        assert_eq!(from(addr, "/api/x", "10.0.0.1").await, expected);
    }
    // shadow is dry-run: all pass, the second and third would have been rejected.
    for _ in 0..3 {
        assert_eq!(from(addr, "/shadow", "10.0.0.2").await, 204);
    }
    assert_eq!(from(addr, "/dead/x", "10.0.0.3").await, 502);
    assert_eq!(from(addr, "/private/x", "10.1.0.1").await, 200);
    assert_eq!(from(addr, "/private/x", "10.2.0.1").await, 403);
    assert_eq!(from(addr, "/api/x", "10.9.0.1").await, 403);
    assert_eq!(from(addr, "/nowhere", "10.0.0.4").await, 404);

    let m = scrape_until(admin, |m| {
        m.values.get(&format!(
            "{REQUESTS}{{site=\"-\",location=\"-\",status=\"404\"}}"
        )) == Some(&1.0)
            && duration_count(m) == 11.0
    })
    .await;
    let requests = |location: &str, status: u16| {
        m.get(&format!(
            "{REQUESTS}{{site=\"-\",location=\"{location}\",status=\"{status}\"}}"
        ))
    };
    assert_eq!(requests("/api/", 200), 2.0);
    assert_eq!(requests("/api/", 429), 1.0);
    assert_eq!(requests("= /shadow", 204), 3.0);
    assert_eq!(requests("/dead/", 502), 1.0);
    assert_eq!(requests("^~ /private/", 200), 1.0);
    assert_eq!(requests("^~ /private/", 403), 1.0);
    // Denied before routing, and matched nothing: counted under "-".
    assert_eq!(requests("-", 403), 1.0);
    assert_eq!(requests("-", 404), 1.0);
    assert_eq!(duration_count(&m), 11.0);
    let duration = |part: &str, location: &str| {
        m.get(&format!(
            "tollgate_request_duration_seconds_{part}{{site=\"-\",location=\"{location}\"}}"
        ))
    };
    assert_eq!(duration("count", "/api/"), 3.0);
    let inf = "tollgate_request_duration_seconds_bucket{le=\"+Inf\",site=\"-\",location=\"/api/\"}";
    assert_eq!(m.get(inf), 3.0);
    assert!(duration("sum", "/api/") > 0.0);
    assert_eq!(duration("count", "= /shadow"), 3.0);
    assert_eq!(duration("count", "-"), 2.0);

    let decisions = |zone: &str, outcome: &str| {
        m.get(&format!(
            "tollgate_limit_decisions_total{{zone=\"{zone}\",outcome=\"{outcome}\"}}"
        ))
    };
    assert_eq!(decisions("per_ip", "passed"), 2.0);
    assert_eq!(decisions("per_ip", "rejected"), 1.0);
    assert_eq!(decisions("per_ip", "delayed"), 0.0);
    assert_eq!(decisions("shadow", "passed_dry_run"), 1.0);
    assert_eq!(decisions("shadow", "rejected_dry_run"), 2.0);
    assert_eq!(decisions("shadow", "rejected"), 0.0);
    assert_eq!(m.get("tollgate_zone_keys{zone=\"per_ip\"}"), 1.0);
    assert!(m.get("tollgate_zone_bytes{zone=\"per_ip\"}") > 0.0);
    assert_eq!(
        m.get("tollgate_zone_capacity_bytes{zone=\"per_ip\"}"),
        10.0 * 1024.0 * 1024.0
    );
    assert_eq!(m.get("tollgate_zone_evictions_total{zone=\"per_ip\"}"), 0.0);

    assert_eq!(
        m.get("tollgate_access_denied_total{rule=\"[access] deny\"}"),
        1.0
    );
    assert_eq!(
        m.get("tollgate_access_denied_total{rule=\"location ^~ /private/: deny all\"}"),
        1.0
    );

    // Upstreams: the two answered requests were timed; the dead server was refused.
    assert_eq!(
        m.get("tollgate_upstream_duration_seconds_count{upstream=\"app\"}"),
        2.0
    );
    assert_eq!(
        m.get(&format!(
            "tollgate_upstream_failures_total{{upstream=\"dead\",server=\"{dead}\",kind=\"connect\"}}"
        )),
        1.0
    );
    assert_eq!(
        m.get(&format!(
            "tollgate_upstream_failures_total{{upstream=\"app\",server=\"{}\",kind=\"connect\"}}",
            up.addr
        )),
        0.0
    );
    assert_eq!(
        m.get(&format!(
            "tollgate_upstream_healthy{{upstream=\"app\",server=\"{}\"}}",
            up.addr
        )),
        1.0
    );

    assert_eq!(m.get("tollgate_config_generation"), 1.0);
    assert_eq!(m.get("tollgate_reloads_total{result=\"ok\"}"), 0.0);
    assert_eq!(m.get("tollgate_reloads_total{result=\"failed\"}"), 0.0);
    // Admin requests are not counted: the scrapes themselves added nothing.
    assert!(!m.text.contains("/metrics"), "{}", m.text);
}

#[tokio::test]
async fn counts_survive_a_reload_and_the_reload_is_counted() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dead = closed_port();
    let gw = gateway(&config(up.addr, dead, "1r/m"));
    let (addr, admin) = (addr(&gw), gw.admin_addr().expect("admin configured"));
    for _ in 0..3 {
        from(addr, "/shadow", "10.0.0.2").await;
    }
    let series = format!("{REQUESTS}{{site=\"-\",location=\"= /shadow\",status=\"204\"}}");
    scrape_until(admin, |m| m.values.get(&series) == Some(&3.0)).await;

    let next = tollgate::config::from_str(
        &config(up.addr, dead, "5r/m"),
        Path::new("/tmp/tollgate-test/gateway.toml"),
    )
    .unwrap();
    assert_eq!(gw.reload(&next).unwrap(), 2);
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("gateway.toml");
    std::fs::write(&broken, "[server]\nlisten = 3\n").unwrap();
    assert!(gw.reload_file(&broken).is_err());

    from(addr, "/shadow", "10.0.0.2").await;
    let m = scrape_until(admin, |m| m.values.get(&series) == Some(&4.0)).await;
    assert_eq!(m.get(&series), 4.0);
    // The zone kept its state: at 5r/m the fourth request still finds the bucket full
    // (a fresh zone would have passed it).
    assert_eq!(
        m.get("tollgate_limit_decisions_total{zone=\"shadow\",outcome=\"rejected_dry_run\"}"),
        3.0
    );
    assert_eq!(
        m.get("tollgate_limit_decisions_total{zone=\"shadow\",outcome=\"passed_dry_run\"}"),
        1.0
    );
    assert_eq!(m.get("tollgate_config_generation"), 2.0);
    assert_eq!(m.get("tollgate_reloads_total{result=\"ok\"}"), 1.0);
    assert_eq!(m.get("tollgate_reloads_total{result=\"failed\"}"), 1.0);
}

#[tokio::test]
async fn open_connections_are_counted_per_listener() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr, closed_port(), "1r/m"));
    let (addr, admin) = (addr(&gw), gw.admin_addr().expect("admin configured"));
    let series = format!("tollgate_connections{{listener=\"{addr}\"}}");

    let held: Vec<tokio::net::TcpStream> = {
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(tokio::net::TcpStream::connect(addr).await.unwrap());
        }
        held
    };
    let m = scrape_until(admin, |m| m.values.get(&series) == Some(&3.0)).await;
    assert_eq!(m.get(&series), 3.0);
    drop(held);
    let m = scrape_until(admin, |m| m.values.get(&series) == Some(&0.0)).await;
    assert_eq!(m.get(&series), 0.0);
}
