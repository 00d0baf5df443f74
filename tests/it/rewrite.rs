//! `upstream_path` through the real gateway ("Path rewrite" in docs/config.md): nginx's
//! `proxy_pass http://app/v2/;` under `location /api/`, regex captures, and no path the
//! upstream could read as outside its root.

use crate::support::{self, addr, gateway, send, send_h2, text, within, Upstream};

fn config(up: std::net::SocketAddr) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{up}\"]\n\
         [[location]]\nmatch = \"/api/\"\nupstream = \"app\"\nupstream_path = \"/v2/\"\n\
         [[location]]\nmatch = \"~ ^/users/(\\\\d+)/(.*)$\"\nupstream = \"app\"\n\
         upstream_path = \"/v2/u/$1/$2\"\n\
         [[location]]\nmatch = \"~ ^/a(.)b$\"\nupstream = \"app\"\nupstream_path = \"/v2/$1$1/etc\"\n\
         [[location]]\nmatch = \"= /health\"\nupstream = \"app\"\nupstream_path = \"/internal/status\"\n"
    )
}

fn get(path: &str) -> http::Request<support::Body> {
    http::Request::get(path)
        .header("host", "example.test")
        .body(support::empty())
        .unwrap()
}

#[tokio::test]
async fn the_matched_prefix_is_replaced_and_the_query_kept() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { text(200, "ok") }).await;
    let gw = gateway(&config(up.addr));
    for (path, seen) in [
        ("/api/x?y=1", "/v2/x?y=1"),
        ("/api/", "/v2/"),
        ("/api//a%20b/./c", "/v2/a%20b/c"),
        ("/users/42/profile?tab=1", "/v2/u/42/profile?tab=1"),
        ("/health?v", "/internal/status?v"),
    ] {
        let reply = within(5, send(addr(&gw), get(path))).await;
        assert_eq!(reply.status, 200, "{path}");
        assert_eq!(up.last().uri, seen, "{path}");
    }
    let h2 = http::Request::get("http://example.test/api/h2?q=1")
        .body(support::empty())
        .unwrap();
    assert_eq!(within(5, send_h2(addr(&gw), h2)).await.status, 200);
    let seen = up.last();
    assert_eq!(seen.uri, "/v2/h2?q=1");
    assert_eq!(seen.headers["host"], "example.test");
}

#[tokio::test]
async fn a_rewrite_that_would_leave_the_root_is_a_400_and_reaches_no_upstream() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { text(200, "ok") }).await;
    let gw = gateway(&config(up.addr));
    let reply = within(5, send(addr(&gw), get("/a.b"))).await;
    assert_eq!(reply.status, 400);
    assert_eq!(up.count(), 0);
    assert_eq!(within(5, send(addr(&gw), get("/axb"))).await.status, 200);
    assert_eq!(up.last().uri, "/v2/xx/etc");
}

#[test]
fn an_upstream_path_needs_an_upstream_and_a_leading_slash() {
    let base =
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[upstreams.app]\nservers = [\"127.0.0.1:9\"]\n";
    for location in [
        "match = \"/\"\nreturn = { status = 200 }\nupstream_path = \"/v2/\"",
        "match = \"/\"\nupstream = \"app\"\nupstream_path = \"v2/\"",
        "match = \"/\"\nupstream = \"app\"\nupstream_path = \"/v2/$1\"",
    ] {
        let text = format!("{base}[[location]]\n{location}\n");
        let result = tollgate::config::from_str(&text, std::path::Path::new("t.toml"));
        assert!(result.is_err(), "accepted: {location}");
    }
}

/// Issue 31's query injection, in raw bytes: an encoded `?` in the path once became the
/// upstream's query, adding `api_key=K1` that the zone keyed by `$arg_api_key` never saw.
#[tokio::test]
async fn an_encoded_question_mark_adds_no_query_upstream() {
    use tokio::io::AsyncWriteExt;
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { text(200, "ok") }).await;
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{}\"]\n\
         [zones.per_key]\nkey = \"$arg_api_key\"\nrate = \"1r/m\"\n\
         [[location]]\nmatch = \"/api/\"\nupstream = \"app\"\nupstream_path = \"/v2/\"\n\
         limit = [{{ zone = \"per_key\" }}]\n\
         [[location]]\nmatch = \"/fixed/\"\nupstream = \"app\"\n\
         upstream_path = \"/v3/?tenant=public\"\n",
        up.addr
    );
    let gw = gateway(&config);
    let mut stream = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
    let mut statuses = Vec::new();
    for target in [
        "/api/x?api_key=K1",
        "/api/x?api_key=K1",
        "/api/x%3fapi_key=K1",
    ] {
        let head = format!("GET {target} HTTP/1.1\r\nHost: example.test\r\n\r\n");
        stream.write_all(head.as_bytes()).await.unwrap();
        let reply = within(5, support::raw::read_response(&mut stream)).await;
        statuses.push(reply.expect("an answer").status);
    }
    assert_eq!(statuses, [200, 429, 200]);
    assert_eq!(up.last().uri, "/v2/x%3Fapi_key=K1");
    let head = "GET /fixed/x%3ftenant=admin%26?a=1 HTTP/1.1\r\nHost: example.test\r\n\r\n";
    stream.write_all(head.as_bytes()).await.unwrap();
    let reply = within(5, support::raw::read_response(&mut stream)).await;
    assert_eq!(reply.expect("an answer").status, 200);
    assert_eq!(up.last().uri, "/v3/x%3Ftenant=admin%26?tenant=public");
}
