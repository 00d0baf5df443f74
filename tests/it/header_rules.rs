//! A location's header rules through the real gateway ("Header rules" in
//! docs/config.md): set and removed on the way up, set and hidden on the way down, with
//! variables, never on tollgate's own error answers, and never over the forwarding
//! headers tollgate writes.

use crate::support::{self, addr, gateway, send, text, within, Upstream};

fn config(up: std::net::SocketAddr, rules: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{up}\"]\n\
         [[location]]\nmatch = \"~ ^/app/(.*)$\"\nupstream = \"app\"\n{rules}\n\
         [[location]]\nmatch = \"~ ^/here(/?)\"\nreturn = {{ status = 200, body = \"here\" }}\n{rules}\n"
    )
}

const RULES: &str = "request_headers = { \"X-Env\" = \"prod\", \"X-Orig\" = \"$host$request_uri\", \
     \"X-Tail\" = \"$1\", \"Cookie\" = \"\" }\n\
     response_headers = { \"Strict-Transport-Security\" = \"max-age=63072000\", \"X-Uri\" = \"$uri\" }\n\
     hide_headers = [\"X-Powered-By\", \"Server\"]";

fn request(path: &str) -> http::Request<support::Body> {
    http::Request::get(path)
        .header("host", "example.test")
        .header("cookie", "session=1")
        .header("x-forwarded-for", "203.0.113.9")
        .body(support::empty())
        .unwrap()
}

#[tokio::test]
async fn request_rules_set_and_remove_headers_on_the_way_up() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { text(200, "ok") }).await;
    let gw = gateway(&config(up.addr, RULES));
    let reply = within(5, send(addr(&gw), request("/app/a%2fb?q=1"))).await;
    assert_eq!(reply.status, 200);
    let seen = up.last();
    assert_eq!(seen.headers["x-env"], "prod");
    assert_eq!(seen.headers["x-orig"], "example.test/app/a%2fb?q=1");
    assert_eq!(seen.headers["x-tail"], "a/b");
    assert!(seen.headers.get("cookie").is_none(), "{:?}", seen.headers);
    // The client's X-Forwarded-For is replaced by tollgate's, whatever the rules say.
    assert_eq!(seen.headers["x-forwarded-for"], "127.0.0.1");
}

#[tokio::test]
async fn response_rules_set_and_hide_headers_on_what_the_location_serves() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async {
        let mut response = text(404, "not here");
        let headers = response.headers_mut();
        headers.insert("x-powered-by", "PHP/5.4".parse().unwrap());
        headers.insert("server", "Apache".parse().unwrap());
        headers.insert("strict-transport-security", "max-age=0".parse().unwrap());
        response
    })
    .await;
    let gw = gateway(&config(up.addr, RULES));
    for path in ["/app/x", "/here"] {
        let reply = within(5, send(addr(&gw), request(path))).await;
        assert!(
            reply.headers.get("x-powered-by").is_none(),
            "{path}: {:?}",
            reply.headers
        );
        // The upstream's is hidden; tollgate's own goes out (`server_header`).
        assert_eq!(reply.headers["server"], "tollgate", "{path}");
        let hsts: Vec<_> = reply
            .headers
            .get_all("strict-transport-security")
            .iter()
            .collect();
        assert_eq!(hsts, ["max-age=63072000"], "{path}: set, not added");
        assert_eq!(reply.headers["x-uri"], path);
    }
}

#[tokio::test]
async fn tollgates_own_errors_and_control_bytes_get_no_rule() {
    let _shared = support::shared();
    let gw = gateway(&config(support::closed_port(), RULES));
    let reply = within(5, send(addr(&gw), request("/app/x"))).await;
    assert_eq!(reply.status, 502);
    assert!(reply.headers.get("strict-transport-security").is_none());
    let gw = gateway(&config(
        support::closed_port(),
        "response_headers = { \"X-Uri\" = \"$uri\" }",
    ));
    let reply = within(5, send(addr(&gw), request("/here/%0d%0aSet-Cookie:%20a"))).await;
    assert_eq!(reply.status, 200);
    assert_eq!(reply.headers["x-uri"], "/here/%0D%0ASet-Cookie:%20a");
    assert!(reply.headers.get("set-cookie").is_none());
}

#[test]
fn rules_may_not_touch_forwarding_or_framing_headers() {
    for rules in [
        "request_headers = { \"X-Forwarded-For\" = \"1.2.3.4\" }",
        "request_headers = { \"Transfer-Encoding\" = \"chunked\" }",
        "response_headers = { \"Content-Length\" = \"1\" }",
        "response_headers = { \"X-A\" = \"\" }",
        "hide_headers = [\"Connection\"]",
        "request_headers = { \"X-A\" = \"$nope\" }",
        "request_headers = { \"bad name\" = \"x\" }",
    ] {
        let text = config(support::closed_port(), rules);
        let result = tollgate::config::from_str(&text, std::path::Path::new("t.toml"));
        assert!(result.is_err(), "accepted: {rules}");
    }
}

#[tokio::test]
async fn request_id_is_one_random_id_per_request_up_and_down() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { text(200, "ok") }).await;
    let rules = "request_headers = { \"X-Request-Id\" = \"$request_id\" }\n\
                 response_headers = { \"X-Request-Id\" = \"$request_id\" }";
    let gw = gateway(&config(up.addr, rules));
    let mut seen = Vec::new();
    for _ in 0..2 {
        let reply = within(5, send(addr(&gw), request("/app/x"))).await;
        let down = reply.headers["x-request-id"].to_str().unwrap().to_owned();
        let upstream = up.last().headers["x-request-id"]
            .to_str()
            .unwrap()
            .to_owned();
        assert_eq!(down, upstream, "the same id both ways");
        assert_eq!(down.len(), 32);
        assert!(down.bytes().all(|b| b.is_ascii_hexdigit()), "{down}");
        seen.push(down);
    }
    assert_ne!(seen[0], seen[1], "one id per request");
}
