//! `[maps.NAME]` (nginx `map`) through the real gateway, beside real nginx: a status
//! chosen by the method, a header chosen by regexes in the order written (captures,
//! named groups, exact keys in any case, a map in the default), and a zone key that a map
//! empties for some clients. nginx has no `return $var`: its side chooses with `if`.

use std::fmt::Write as _;
use std::time::Duration;

use http::Method;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::nginx::{self, Nginx};
use crate::support::{self, addr, gateway, send, within, Reply};

const TOLLGATE: &str = r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"

[maps.redirect_status]
source = "$request_method"
values = { GET = "301", HEAD = "301", "~^(OPTIONS)$" = "204" }
default = "308"

[maps.backend]
source = "$http_x_tier"
values = { "~b" = "first", "~^ab" = "second", "\\~x" = "tilde", "~^(?<tier>\\w+)-(\\d+)$" = "$tier/$2", GOLD = "gold" }
default = "$tier_default"

[maps.tier_default]
source = "$host"
values = { "Example.COM" = "main" }

[[location]]
match = "/"
response_headers = { "X-Backend" = "$backend" }
return = { status = "$redirect_status", location = "https://$host$request_uri" }
"#;

fn nginx_maps(port: u16) -> String {
    format!(
        r#" map $request_method $redirect_status {{ GET 301; HEAD 301; ~^(OPTIONS)$ 204; default 308; }}
 map $http_x_tier $backend {{ ~b first; ~^ab second; \~x tilde; "~^(?<tier>\w+)-(\d+)$" $tier/$2; GOLD gold; default $tier_default; }}
 map $host $tier_default {{ Example.COM main; }}
 server {{
  listen 127.0.0.1:{port};
  add_header X-Backend $backend always;
  location / {{
   if ($redirect_status = 301) {{ return 301 https://$host$request_uri; }}
   if ($redirect_status = 308) {{ return 308 https://$host$request_uri; }}
   if ($redirect_status = 204) {{ return 204; }}
  }}
 }}
"#
    )
}

/// Status, `Location` and `X-Backend` of `method /p?q=1` with `X-Tier: tier`.
async fn answer(to: std::net::SocketAddr, method: &Method, tier: Option<&str>) -> String {
    let mut req = http::Request::builder()
        .method(method)
        .uri("/p?q=1")
        .header("host", "Example.COM");
    if let Some(tier) = tier {
        req = req.header("x-tier", tier);
    }
    let reply: Reply = within(5, send(to, req.body(support::empty()).unwrap())).await;
    let header = |name: &str| {
        reply
            .headers
            .get(name)
            .map(|v| v.to_str().unwrap_or("?").to_owned())
    };
    format!(
        "{} {:?} {:?}",
        reply.status.as_u16(),
        header("location"),
        header("x-backend")
    )
}

#[tokio::test]
async fn a_status_and_a_header_from_maps_are_nginxs() {
    if !nginx::available("the map conformance test") {
        return;
    }
    let _shared = support::shared();
    let nginx = Nginx::start(|dir, port| nginx::http(dir, &nginx_maps(port)), &[]);
    let gw = gateway(TOLLGATE);
    let methods = [
        Method::GET,
        Method::HEAD,
        Method::POST,
        Method::OPTIONS,
        Method::PUT,
    ];
    let tiers = [
        None,
        Some("abc"),
        Some("bob"),
        Some("~x"),
        Some("~X"),
        Some("gold-42"),
        Some("GOLD"),
        Some("gold"),
        Some("x"),
    ];
    let mut differences = String::new();
    let mut seen = Vec::new();
    for method in &methods {
        for tier in tiers {
            let theirs = answer(nginx.addr, method, tier).await;
            let ours = answer(addr(&gw), method, tier).await;
            if theirs != ours {
                let _ = writeln!(
                    differences,
                    "{method} {tier:?}: nginx {theirs}, tollgate {ours}"
                );
            }
            seen.push(ours);
        }
    }
    assert!(differences.is_empty(), "{differences}");
    // The cases the comparison is about did happen.
    for want in [
        "301",
        "308",
        "204 None",
        "\"first\"",
        "\"tilde\"",
        "\"gold/42\"",
        "\"gold\"",
        "\"main\"",
    ] {
        assert!(seen.iter().any(|s| s.contains(want)), "{want}: {seen:#?}");
    }
    assert!(
        nginx.error_log_problems().is_empty(),
        "{}",
        nginx.error_log_problems()
    );
}

const LIMITED: &str = r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"

[maps.limit_key]
source = "$http_x_tier"
values = { free = "", "~^(?<t>\\w+)-\\d+$" = "$t" }
default = "$http_x_tier"

[zones.tier]
key = "$limit_key"
rate = "1r/m"

[[location]]
match = "/"
limit = [{ zone = "tier" }]
return = { status = 200, body = "ok\n" }
"#;

fn nginx_limited(dir: &std::path::Path, port: u16) -> String {
    let www = dir.join("www");
    let www = www.display();
    format!(
        r#" map $http_x_tier $limit_key {{ free ""; "~^(?<t>\w+)-\d+$" $t; default $http_x_tier; }}
 limit_req_zone $limit_key zone=tier:1m rate=1r/m;
 server {{
  listen 127.0.0.1:{port};
  root {www};
  limit_req_status 429;
  location / {{ limit_req zone=tier; }}
 }}
"#
    )
}

#[tokio::test]
async fn a_map_in_a_zone_key_limits_whom_nginx_limits() {
    if !nginx::available("the map zone key conformance test") {
        return;
    }
    let _shared = support::shared();
    let nginx = Nginx::start(
        |dir, port| nginx::http(dir, &nginx_limited(dir, port)),
        &["ok".to_owned()],
    );
    let gw = gateway(LIMITED);
    let tiers = [
        Some("gold-1"),
        Some("gold-2"),
        Some("free"),
        Some("free"),
        Some("FREE"),
        None,
        None,
        Some("silver"),
        Some("silver"),
    ];
    let status = |to, tier: Option<&'static str>| async move {
        let mut req = http::Request::get("/ok").header("host", "example.test");
        if let Some(tier) = tier {
            req = req.header("x-tier", tier);
        }
        within(5, send(to, req.body(support::empty()).unwrap()))
            .await
            .status
            .as_u16()
    };
    let mut theirs = Vec::new();
    let mut ours = Vec::new();
    for tier in tiers {
        theirs.push(status(nginx.addr, tier).await);
        ours.push(status(addr(&gw), tier).await);
    }
    assert_eq!(ours, theirs);
    assert_eq!(ours, [200, 429, 200, 200, 200, 200, 200, 200, 429]);
}

/// A map over a client's header: a value of most of a megabyte against many regexes is
/// one linear pass per regex (the regex crate never backtracks), so the answer is quick.
#[tokio::test]
async fn a_huge_header_under_a_map_is_bounded_work() {
    let _shared = support::shared();
    let regexes: String = (0..32)
        .map(|i| format!("\"~(a+)+b{i}$\" = \"hit\", "))
        .collect();
    let gw = gateway(&format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nmax_header_bytes = \"1m\"\n\
         [log]\naccess = \"off\"\n\
         [maps.m]\nsource = \"$http_x\"\nvalues = {{ {regexes}x = \"exact\" }}\ndefault = \"miss\"\n\
         [[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"$m\" }}\n"
    ));
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let value = "a".repeat(900 * 1024);
    let request = format!("GET / HTTP/1.1\r\nHost: t\r\nX: {value}\r\nConnection: close\r\n\r\n");
    let started = std::time::Instant::now();
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    within(10, stream.read_to_end(&mut answer)).await.unwrap();
    let answer = String::from_utf8_lossy(&answer);
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("miss"), "{answer}");
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
}

/// A map in `request_headers` and `upstream_path`, its source reading the location's
/// capture: the upstream sees what the map chose.
#[tokio::test]
async fn a_map_fills_in_a_request_header_and_the_upstream_path() {
    let _shared = support::shared();
    let up = support::Upstream::named("app").await;
    let up_addr = up.addr;
    let gw = gateway(&format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[upstreams.app]
servers = ["{up_addr}"]
[maps.version]
source = "$1"
values = {{ "~^v(?<n>\\d+)$" = "$n", latest = "3" }}
default = "1"
[[location]]
match = "~ ^/api/([^/]+)/(.*)$"
upstream = "app"
upstream_path = "/v$version/$2"
request_headers = {{ "X-Api-Version" = "$version" }}
[[location]]
match = "~ ^/only/([^/]+)$"
upstream = "app"
request_headers = {{ "X-Api-Version" = "$version" }}
"#
    ));
    for (path, version, upstream) in [
        ("/api/v2/users", "2", "/v2/users"),
        ("/api/LATEST/users", "3", "/v3/users"),
        ("/api/old/x?y=1", "1", "/v1/x?y=1"),
        // Only the map reads the capture here.
        ("/only/v7", "7", "/only/v7"),
    ] {
        let reply = within(5, send(addr(&gw), support::get(path))).await;
        assert_eq!(reply.status, 200, "{path}");
        let seen = up.last();
        assert_eq!(seen.headers["x-api-version"], version, "{path}");
        assert_eq!(seen.uri, upstream, "{path}");
    }
}
