//! What only tollgate's sites have, or nginx cannot be asked the same way: the site
//! chosen by HTTP/2's `:authority`, `$server_name`, 444 on a catch-all, the config error
//! for mixing the two forms, and request counts labelled by site.

use std::io::Write as _;
use std::process::Command;
use std::time::Duration;

use http::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use crate::support::{self, addr, empty, gateway, send, send_h2, within};

/// A gateway config on one port with `sites` after `[server]` and `[log]`.
pub(super) fn config(sites: &str) -> String {
    format!("[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n{sites}")
}

/// Two named sites, the first also the default, each answering its own name.
const TWO_SITES: &str = r#"
[[site]]
names = ["a.test"]
[[site.location]]
match = "/"
return = { status = 200, body = "a" }
[[site]]
names = ["b.test", "*.b.test"]
[[site.location]]
match = "/"
return = { status = 200, body = "b" }
"#;

pub(super) fn get_with_host(host: &str) -> Request<support::Body> {
    Request::get("/")
        .header("host", host)
        .body(empty())
        .unwrap()
}

#[tokio::test]
async fn http2_authority_selects_the_site() {
    let _shared = support::shared();
    let gw = gateway(&config(TWO_SITES));
    for (uri, site) in [
        ("http://b.test/", "b"),
        ("http://X.B.Test:8080/", "b"),
        ("http://a.test/", "a"),
        ("http://unknown.test/", "a"),
    ] {
        let req = Request::get(uri).body(empty()).unwrap();
        let reply = within(5, send_h2(addr(&gw), req)).await;
        assert_eq!(reply.version, http::Version::HTTP_2);
        assert_eq!(
            (reply.status.as_u16(), reply.body.as_str()),
            (200, site),
            "{uri}"
        );
    }
}

#[tokio::test]
async fn server_name_is_the_sites_first_name() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[[site]]
names = ["example.com", "www.example.com"]
[[site.location]]
match = "/"
return = { status = 200, body = "[$server_name]" }
[[site]]
default = true
[[site.location]]
match = "/"
return = { status = 200, body = "[$server_name]" }
"#,
    ));
    for (host, body) in [("www.example.com", "[example.com]"), ("unknown.test", "[]")] {
        let reply = within(5, send(addr(&gw), get_with_host(host))).await;
        assert_eq!(reply.body, body, "{host}");
    }
    // A file of top-level locations is one site without a name.
    let gw = gateway(&config(
        "[[location]]\nmatch = \"/\"\nreturn = { status = 200, body = \"[$server_name]\" }\n",
    ));
    let reply = within(5, send(addr(&gw), get_with_host("example.com"))).await;
    assert_eq!(reply.body, "[]");
}

#[tokio::test]
async fn host_is_the_server_name_when_the_request_names_none() {
    let _shared = support::shared();
    let gw = gateway(&config(
        "[[site]]\nnames = [\"example.com\", \"*.example.com\"]\n[[site.location]]\n\
         match = \"/\"\nreturn = { status = 200, body = \"[$host]\" }\n",
    ));
    let answer = within(5, super::answer(addr(&gw), "GET / HTTP/1.0")).await;
    assert_eq!(answer, "[example.com]");
    let answer = within(
        5,
        super::answer(addr(&gw), "GET / HTTP/1.0|Host: A.Example.com"),
    )
    .await;
    assert_eq!(answer, "[a.example.com]");
}

/// A named site and nginx's catch-all for scanners: a default that answers nothing.
const CATCH_ALL_444: &str = r#"
[[site]]
names = ["example.com"]
[[site.location]]
match = "/"
return = { status = 200, body = "site" }
[[site]]
default = true
[[site.location]]
match = "/"
return = { status = 444 }
"#;

#[tokio::test]
async fn status_444_closes_an_http1_connection_without_a_byte_and_is_logged() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let logged = format!("access = \"{}\"", log.display());
    let gw = gateway(&config(CATCH_ALL_444).replace("access = \"off\"", &logged));
    for request in [
        "GET / HTTP/1.1\r\nHost: scanner.test\r\n\r\n",
        "GET / HTTP/1.0\r\n\r\n",
    ] {
        let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut received = Vec::new();
        let read = tokio::time::timeout(Duration::from_secs(3), stream.read_to_end(&mut received));
        // A reset instead of a FIN also sends nothing; only a timeout means "left open".
        assert!(read.await.is_ok(), "{request:?}: the connection stays open");
        assert!(
            received.is_empty(),
            "{request:?}: {:?}",
            String::from_utf8_lossy(&received)
        );
    }
    let reply = within(5, send(addr(&gw), get_with_host("example.com"))).await;
    assert_eq!(reply.body, "site");
    // As nginx logs it: status 444, no bytes sent.
    let lines = support::log_lines(&log, 3).await;
    let closed = lines.iter().filter(|line| line.contains("\" 444 0 "));
    assert_eq!(closed.count(), 2, "{lines:#?}");
}

#[tokio::test]
async fn status_444_resets_an_http2_stream() {
    let _shared = support::shared();
    let gw = gateway(&config(CATCH_ALL_444));
    let stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let req = Request::get("http://scanner.test/").body(empty()).unwrap();
    let result = within(5, sender.send_request(req)).await;
    assert!(
        result.is_err(),
        "answered: {:?}",
        result.map(|r| r.status())
    );
    // Only that stream ends: the connection still serves the named site.
    within(5, sender.ready())
        .await
        .expect("the connection is open");
    let req = Request::get("http://example.com/").body(empty()).unwrap();
    let response = within(5, sender.send_request(req))
        .await
        .expect("a response");
    assert_eq!(support::read(response).await.body, "site");
}

#[test]
fn mixing_top_level_locations_with_sites_is_an_error_at_its_line() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mixed.toml");
    let text = "[server]\nlisten = [\"127.0.0.1:8080\"]\n\
                [[location]]\nmatch = \"/\"\nreturn = { status = 200 }\n\
                [[site]]\nnames = [\"example.com\"]\n\
                [[site.location]]\nmatch = \"/\"\nreturn = { status = 200 }\n";
    std::fs::File::create(&path)
        .and_then(|mut file| file.write_all(text.as_bytes()))
        .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("-t")
        .arg("-c")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let file = path.display().to_string();
    // At the first top-level `[[location]]`, the one to move into a site.
    assert!(stderr.contains(&format!("{file}:3:1: ")), "{stderr}");
    assert!(stderr.contains("[[site.location]]"), "{stderr}");
    assert!(out.stdout.is_empty());
}

#[tokio::test]
async fn request_counts_name_the_site_beside_the_location() {
    let _shared = support::shared();
    let gw = gateway(&config(
        r#"
[admin]
listen = "127.0.0.1:0"
[[site]]
names = ["example.com", "www.example.com"]
[[site.location]]
match = "/api/"
return = { status = 204 }
[[site]]
default = true
[[site.location]]
match = "/api/"
return = { status = 204 }
"#,
    ));
    let request = |host: &str| {
        let req = Request::get("/api/x").header("host", host);
        send(addr(&gw), req.body(empty()).unwrap())
    };
    assert_eq!(within(5, request("www.example.com")).await.status, 204);
    assert_eq!(within(5, request("unknown.test")).await.status, 204);
    let admin = gw.admin_addr().expect("admin configured");
    let wanted = [
        "tollgate_requests_total{site=\"example.com\",location=\"/api/\",status=\"204\"} 1",
        "tollgate_requests_total{site=\"_\",location=\"/api/\",status=\"204\"} 1",
    ];
    // A request is counted just after its response is sent: ask again for up to 5 s.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let reply = within(5, send(admin, support::get("/metrics"))).await;
        let lines: Vec<&str> = reply.body.lines().collect();
        if wanted.iter().all(|series| lines.contains(series)) {
            return;
        }
        assert!(std::time::Instant::now() < deadline, "{}", reply.body);
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
