//! Forwarding through the real gateway: bodies, forwarded headers, hop-by-hop.

mod support;

use support::*;

fn config(up: std::net::SocketAddr) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 2
[log]
access = "off"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
[[location]]
match = "= /demo"
return = {{ status = 200, body = "hello from tollgate\n" }}
"#
    )
}

#[tokio::test]
async fn get_is_forwarded_and_answered() {
    let up = Upstream::named("app").await;
    let gw = gateway(&config(up.addr));
    let reply = within(5, get_text(addr(&gw), "/hello?x=1")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "ok from app");
    let seen = up.last();
    assert_eq!(seen.uri, "/hello?x=1");
    assert_eq!(seen.headers["host"], "example.test");
    assert_eq!(seen.headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen.headers["x-real-ip"], "127.0.0.1");
    assert_eq!(seen.headers["x-forwarded-proto"], "http");
    assert_eq!(seen.headers["x-forwarded-host"], "example.test");
}

#[tokio::test]
async fn return_location_answers_without_upstream() {
    let gw = gateway(&config(closed_port()));
    let reply = within(5, get_text(addr(&gw), "/demo")).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, "hello from tollgate\n");
}
