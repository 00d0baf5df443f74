//! The admin API (`[admin]`): `/healthz` and `/status` on a listener of their own.

use crate::support;

use std::path::Path;

use http::Request;
use support::*;

fn config(admin: &str, rate: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
{admin}
[zones.per_ip]
key = "$binary_remote_addr"
rate = "{rate}"
[upstreams.app]
servers = ["{}"]
[[location]]
match = "/"
limit = [{{ zone = "per_ip", nodelay = true }}]
return = {{ status = 200 }}
"#,
        closed_port()
    )
}

async fn from(gw: &tollgate::Gateway, client: &str) -> u16 {
    get_as(addr(gw), "/", client).await.status.as_u16()
}

#[tokio::test]
async fn healthz_and_status_tell_generation_listeners_upstreams_and_zones() {
    let _shared = support::shared();
    let gw = gateway(&config(&admin_section(), "1r/m"));
    let admin = gw.admin_addr().expect("admin configured");
    let health = within(5, send(admin, get("/healthz"))).await;
    assert_eq!(
        (health.status.as_u16(), health.body.as_str()),
        (200, "ok\n")
    );

    for client in ["10.0.0.1", "10.0.0.2", "10.0.0.2"] {
        from(&gw, client).await;
    }
    let status = within(5, send(admin, get("/status"))).await;
    assert_eq!(status.status, 200);
    assert_eq!(status.headers["content-type"], "application/json");
    let body = status.body;
    assert!(
        body.starts_with("{\"generation\":1,\"config_sha256\":\""),
        "{body}"
    );
    assert!(
        body.contains("\"reloads\":{\"ok\":0,\"failed\":0}"),
        "{body}"
    );
    assert!(
        body.contains(&format!(
            "\"listeners\":[\"{}\"],\"tls_listeners\":[]",
            addr(&gw)
        )),
        "{body}"
    );
    assert!(body.contains("\"healthy\":true,\"fails\":0"), "{body}");
    assert!(
        body.contains("\"per_ip\":{\"algorithm\":\"leaky_bucket\",\"keys\":2,"),
        "{body}"
    );

    // After a reload: the next generation, the zone's keys kept.
    let next = tollgate::config::from_str(
        &config(&admin_section(), "2r/m"),
        Path::new("/tmp/tollgate-test/gateway.toml"),
    )
    .unwrap();
    assert_eq!(gw.reload(&next).unwrap(), 2);
    let body = within(5, send(admin, get("/status"))).await.body;
    assert!(body.starts_with("{\"generation\":2,"), "{body}");
    assert!(
        body.contains("\"reloads\":{\"ok\":1,\"failed\":0}"),
        "{body}"
    );
    assert!(body.contains("\"keys\":2,"), "{body}");

    // A file that does not validate changes nothing, and counts as failed.
    let dir = tempfile::tempdir().unwrap();
    let broken = dir.path().join("gateway.toml");
    std::fs::write(&broken, "[server]\nlisten = 3\n").unwrap();
    assert!(gw.reload_file(&broken).is_err());
    let body = within(5, send(admin, get("/status"))).await.body;
    assert!(body.starts_with("{\"generation\":2,"), "{body}");
    // The last failure is kept with when and why, as the log said it.
    let status: serde_json::Value = serde_json::from_str(&body).expect("JSON");
    let reloads = &status["reloads"];
    assert_eq!(
        (&reloads["ok"], &reloads["failed"]),
        (&1.into(), &1.into()),
        "{body}"
    );
    let error = reloads["last_failure"]["error"].as_str().expect("an error");
    assert!(error.contains("gateway.toml:2:10"), "{error}");
    let at = reloads["last_failure"]["at"].as_str().expect("a time");
    assert!(at.starts_with("20") && at.ends_with('Z'), "{at}");

    let missing = within(5, send(admin, get("/nothing"))).await;
    assert_eq!(missing.status, 404);
    // A method that would change something needs the token before it is even told no.
    let post = Request::post("/status")
        .header("host", "admin")
        .body(empty())
        .unwrap();
    assert_eq!(within(5, send(admin, post)).await.status, 401);
    assert_eq!(
        within(5, send(admin, request("POST", "/status")))
            .await
            .status,
        405
    );
}

#[tokio::test]
async fn without_an_admin_section_there_is_no_admin_listener() {
    let _shared = support::shared();
    let gw = gateway(&config("", "1r/m"));
    assert!(gw.admin_addr().is_none());
}

/// `[admin]` on a free port, with the tests' admin token.
fn admin_section() -> String {
    format!("[admin]\nlisten = \"127.0.0.1:0\"\ntoken = \"{ADMIN_TOKEN}\"")
}

/// An admin call, with the tests' admin token (calls that change state need it).
fn request(method: &str, path: &str) -> Request<Body> {
    Request::builder()
        .method(method)
        .uri(path)
        .header("host", "admin")
        .header("authorization", admin_authorization())
        .body(empty())
        .unwrap()
}

#[tokio::test]
async fn a_limited_client_is_shown_and_freed_by_hand() {
    let _shared = support::shared();
    let gw = gateway(&config(&admin_section(), "1r/m"));
    let admin = gw.admin_addr().expect("admin configured");
    assert_eq!(from(&gw, "10.0.0.1").await, 200);
    assert_eq!(from(&gw, "10.0.0.1").await, 429);

    let shown = within(5, send(admin, get("/zones/per_ip/keys/10.0.0.1"))).await;
    assert_eq!(shown.status, 200, "{}", shown.body);
    assert!(
        shown
            .body
            .starts_with("{\"zone\":\"per_ip\",\"key\":\"10.0.0.1\",\"stored\":true,\"state\":\""),
        "{}",
        shown.body
    );
    let unknown = within(5, send(admin, get("/zones/per_ip/keys/10.0.0.9"))).await;
    assert_eq!(unknown.status, 404);
    assert!(
        unknown.body.contains("\"stored\":false"),
        "{}",
        unknown.body
    );
    let no_zone = within(5, send(admin, get("/zones/nope/keys/10.0.0.1"))).await;
    assert_eq!(no_zone.status, 404);

    // Freed: the client's next request passes, once.
    let reset = within(
        5,
        send(admin, request("DELETE", "/zones/per_ip/keys/10.0.0.1")),
    )
    .await;
    assert_eq!(reset.status, 200);
    assert!(reset.body.contains("\"reset\":true"), "{}", reset.body);
    assert_eq!(from(&gw, "10.0.0.1").await, 200);
    assert_eq!(from(&gw, "10.0.0.1").await, 429);
    let again = within(
        5,
        send(admin, request("DELETE", "/zones/per_ip/keys/10.0.0.2")),
    )
    .await;
    assert_eq!(again.status, 404);
    let put = within(
        5,
        send(admin, request("PUT", "/zones/per_ip/keys/10.0.0.1")),
    )
    .await;
    assert_eq!(put.status, 405);
    assert_eq!(put.headers["allow"], "GET, HEAD, DELETE");
}

#[tokio::test]
async fn status_shows_the_keys_limited_most_over_the_last_minute() {
    let _shared = support::shared();
    let gw = gateway(&config(&admin_section(), "1r/m"));
    let admin = gw.admin_addr().expect("admin configured");
    let before = within(5, send(admin, get("/status"))).await.body;
    assert!(
        before.contains("\"evictions\":0,\"top_limited\":[],\"decisions\":{\"passed\":0,"),
        "{before}"
    );

    // 1r/m without burst: each client's first request passes, the rest are rejected.
    for (client, requests) in [
        ("10.0.0.1", 5),
        ("10.0.0.2", 3),
        ("10.0.0.3", 1),
        ("2001:db8::7", 2),
    ] {
        for _ in 0..requests {
            from(&gw, client).await;
        }
    }
    let body = within(5, send(admin, get("/status"))).await.body;
    assert!(
        body.contains(
            "\"top_limited\":[{\"key\":\"10.0.0.1\",\"rejected\":4},\
             {\"key\":\"10.0.0.2\",\"rejected\":2},{\"key\":\"2001:db8::7\",\"rejected\":1}]"
        ),
        "{body}"
    );
    // The zone's decisions, as `tollgate_limit_decisions_total` counts them.
    assert!(
        body.contains("\"decisions\":{\"passed\":4,\"delayed\":0,\"rejected\":7,"),
        "{body}"
    );
}
