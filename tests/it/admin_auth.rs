//! `[admin] token` and `protect_reads` through the real admin listener: calls that change
//! state need `Authorization: Bearer TOKEN` (refused outright without a token), views
//! need it with `protect_reads`, `/healthz` never does, and a reload changes the token.

use crate::support;

use http::Request;
use support::*;

/// `[admin]` with `extra` lines, and a zone `per_ip` at 1r/m in front of a `return`.
fn config(extra: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[real_ip]
trusted = ["127.0.0.1/32"]
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
{extra}
[zones.per_ip]
key = "$binary_remote_addr"
rate = "1r/m"
[[location]]
match = "/"
limit = [{{ zone = "per_ip", nodelay = true }}]
return = {{ status = 200 }}
"#
    )
}

fn call(method: &str, path: &str, authorization: Option<&str>) -> Request<Body> {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "admin");
    if let Some(value) = authorization {
        req = req.header("authorization", value);
    }
    req.body(empty()).unwrap()
}

/// Client 10.0.0.1 limited: its second request is rejected.
async fn limit_one(gw: &tollgate::Gateway) {
    assert_eq!(get_as(addr(gw), "/", "10.0.0.1").await.status, 200);
    assert_eq!(get_as(addr(gw), "/", "10.0.0.1").await.status, 429);
}

const KEY: &str = "/zones/per_ip/keys/10.0.0.1";

#[tokio::test]
async fn without_a_token_nothing_changes_state() {
    let _shared = support::shared();
    let gw = gateway(&config(""));
    let admin = gw.admin_addr().expect("admin");
    limit_one(&gw).await;
    let refused = within(
        5,
        send(admin, call("DELETE", KEY, Some("Bearer guess-guess-guess"))),
    )
    .await;
    assert_eq!(refused.status, 403, "{refused:?}");
    assert!(refused.body.contains("[admin] token"), "{refused:?}");
    // The key was not reset, and views stay open.
    assert_eq!(get_as(addr(&gw), "/", "10.0.0.1").await.status, 429);
    assert_eq!(
        within(5, send(admin, call("GET", KEY, None))).await.status,
        200
    );
}

#[tokio::test]
async fn a_change_needs_the_token_exactly() {
    let _shared = support::shared();
    let gw = gateway(&config(&format!("token = \"{ADMIN_TOKEN}\"")));
    let admin = gw.admin_addr().expect("admin");
    limit_one(&gw).await;
    let wrong = format!("Bearer {ADMIN_TOKEN}0");
    for authorization in [
        None,
        Some("Bearer"),
        Some(wrong.as_str()),
        Some(ADMIN_TOKEN),
    ] {
        let denied = within(5, send(admin, call("DELETE", KEY, authorization))).await;
        assert_eq!(denied.status, 401, "{authorization:?}: {denied:?}");
        assert_eq!(
            denied.headers["www-authenticate"],
            "Bearer realm=\"tollgate admin\""
        );
    }
    assert_eq!(get_as(addr(&gw), "/", "10.0.0.1").await.status, 429);
    // In raw bytes: the right token twice is refused too; the scheme's case is free.
    let twice = format!(
        "DELETE {KEY} HTTP/1.1\r\nhost: admin\r\nauthorization: Bearer {ADMIN_TOKEN}\r\n\
         authorization: Bearer {ADMIN_TOKEN}\r\nconnection: close\r\n\r\n"
    );
    assert_eq!(raw_status(admin, &twice).await, 401);
    let lower = format!(
        "DELETE {KEY} HTTP/1.1\r\nhost: admin\r\nauthorization: bearer {ADMIN_TOKEN}\r\n\
         connection: close\r\n\r\n"
    );
    assert_eq!(raw_status(admin, &lower).await, 200);
    assert_eq!(get_as(addr(&gw), "/", "10.0.0.1").await.status, 200);
}

#[tokio::test]
async fn protected_reads_need_the_token_but_healthz_does_not() {
    let _shared = support::shared();
    let gw = gateway(&config(&format!(
        "token = \"{ADMIN_TOKEN}\"\nprotect_reads = true"
    )));
    let admin = gw.admin_addr().expect("admin");
    for path in ["/status", "/metrics", "/bans", KEY] {
        let denied = within(5, send(admin, call("GET", path, None))).await;
        assert_eq!(denied.status, 401, "{path}: {denied:?}");
    }
    let right = admin_authorization();
    let status = within(5, send(admin, call("GET", "/status", Some(&right)))).await;
    assert_eq!(status.status, 200);
    assert_eq!(
        within(5, send(admin, call("GET", "/healthz", None)))
            .await
            .status,
        200
    );
    // The page's own files hold no data: they load without the token, each with a policy
    // that lets the page run no script but its own and call nothing but this listener.
    for (path, kind) in [
        ("/", "text/html"),
        ("/app.js", "text/javascript"),
        ("/style.css", "text/css"),
    ] {
        let file = within(5, send(admin, call("GET", path, None))).await;
        assert_eq!(file.status, 200, "{path}");
        let content_type = file.headers["content-type"].to_str().unwrap();
        assert!(content_type.starts_with(kind), "{path}: {content_type}");
        let policy = file.headers["content-security-policy"].to_str().unwrap();
        assert!(
            policy.starts_with("default-src 'none'; script-src 'self';"),
            "{policy}"
        );
        assert!(policy.contains("connect-src 'self'"), "{policy}");
        assert_eq!(file.headers["x-content-type-options"], "nosniff");
    }
}

#[tokio::test]
async fn a_reload_changes_the_token() {
    let _shared = support::shared();
    let gw = gateway(&config(&format!("token = \"{ADMIN_TOKEN}\"")));
    let admin = gw.admin_addr().expect("admin");
    let new = "a-new-admin-token-9876543210";
    gw.reload(&parse(&config(&format!("token = \"{new}\""))))
        .expect("reload");
    limit_one(&gw).await;
    let old = within(
        5,
        send(admin, call("DELETE", KEY, Some(&admin_authorization()))),
    )
    .await;
    assert_eq!(old.status, 401, "{old:?}");
    let bearer = format!("Bearer {new}");
    let reset = within(5, send(admin, call("DELETE", KEY, Some(&bearer)))).await;
    assert_eq!(reset.status, 200, "{reset:?}");
}

/// The status of the answer to `head`, sent as raw bytes.
async fn raw_status(admin: std::net::SocketAddr, head: &str) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(admin).await.unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut stream, head.as_bytes())
        .await
        .unwrap();
    let response = within(5, raw::read_response(&mut stream)).await;
    response.expect("an answer").status
}
