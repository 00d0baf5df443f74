//! tollgate's own `Server` header (`server_header`, nginx `server_tokens`) on every answer,
//! over HTTP/1.1 and HTTP/2, and the headers of an upstream's answer dropped by default
//! (nginx's list: `Date`, `Server`, `X-Pad`, `X-Accel-*`) unless `pass_headers` names
//! them.

use crate::support;

use support::raw::read_response;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const OLD_DATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

/// `/` proxied to `up`, `/deny` denied, `/ret` a `return`, `/limited` limited to one
/// request a minute (`limit_status` 503), with `server` in `[server]` and `location` in
/// the proxying location.
fn config(up: std::net::SocketAddr, server: &str, location: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\nclient_max_body_size = \"10\"\n\
         client_header_timeout = \"1s\"\n{server}\n[log]\naccess = \"off\"\n\
         [zones.one]\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n\
         [upstreams.app]\nservers = [\"{up}\"]\n\
         [[location]]\nmatch = \"= /\"\nupstream = \"app\"\n{location}\n\
         [[location]]\nmatch = \"/deny\"\nupstream = \"app\"\naccess = [\"deny all\"]\n\
         [[location]]\nmatch = \"/ret\"\nreturn = {{ status = 200, body = \"r\" }}\n\
         [[location]]\nmatch = \"/limited\"\nupstream = \"app\"\nlimit_status = 503\n\
         limit = [{{ zone = \"one\" }}]\n"
    )
}

/// An upstream that names itself and sends what nginx's proxy drops by default.
async fn chatty() -> Upstream {
    Upstream::start(|_req| async {
        let mut response = text(200, "ok");
        let headers = response.headers_mut();
        headers.insert("server", "Apache/2.4.1 (Unix)".parse().unwrap());
        headers.insert("date", OLD_DATE.parse().unwrap());
        headers.insert("x-pad", "avoid browser bug".parse().unwrap());
        headers.insert("x-accel-redirect", "/internal/file".parse().unwrap());
        headers.insert("x-accel-buffering", "no".parse().unwrap());
        headers.insert("x-powered-by", "PHP/5.4".parse().unwrap());
        response
    })
    .await
}

/// Sends `request` for `path` over HTTP/2 (prior knowledge) or HTTP/1.1.
async fn ask(
    gw: &tollgate::Gateway,
    h2: bool,
    request: http::request::Builder,
    path: &str,
    body: Body,
) -> Reply {
    let request = match h2 {
        true => request.uri(format!("http://{}{path}", addr(gw))),
        false => request.uri(path).header("host", "a.example"),
    };
    let request = request.body(body).unwrap();
    match h2 {
        false => within(5, send(addr(gw), request)).await,
        true => within(5, send_h2(addr(gw), request)).await,
    }
}

fn servers(reply: &Reply) -> Vec<String> {
    let all = reply.headers.get_all("server").iter();
    all.map(|v| v.to_str().unwrap().to_owned()).collect()
}

#[tokio::test]
async fn a_proxied_answer_carries_tollgates_server_and_date_not_the_upstreams() {
    let _shared = support::shared();
    let up = chatty().await;
    let gw = gateway(&config(up.addr, "", ""));
    for h2 in [false, true] {
        let reply = ask(&gw, h2, http::Request::get("/"), "/", empty()).await;
        assert_eq!(reply.status, 200);
        assert_eq!(servers(&reply), ["tollgate"], "h2 {h2}");
        let date = reply.headers["date"].to_str().unwrap();
        assert_ne!(date, OLD_DATE, "h2 {h2}");
        assert_eq!(reply.headers.get_all("date").iter().count(), 1);
        for name in ["x-pad", "x-accel-redirect", "x-accel-buffering"] {
            assert!(reply.headers.get(name).is_none(), "{name} passed (h2 {h2})");
        }
        assert_eq!(
            reply.headers["x-powered-by"], "PHP/5.4",
            "not dropped by default"
        );
    }
}

#[tokio::test]
async fn pass_headers_lets_the_upstreams_through_and_then_ours_is_not_added() {
    let _shared = support::shared();
    let up = chatty().await;
    let pass = "pass_headers = [\"Server\", \"date\", \"X-Accel-Buffering\"]";
    let gw = gateway(&config(up.addr, "", pass));
    for h2 in [false, true] {
        let reply = ask(&gw, h2, http::Request::get("/"), "/", empty()).await;
        assert_eq!(servers(&reply), ["Apache/2.4.1 (Unix)"], "h2 {h2}");
        assert_eq!(reply.headers["date"], OLD_DATE, "h2 {h2}");
        assert_eq!(reply.headers["x-accel-buffering"], "no");
        assert!(reply.headers.get("x-accel-redirect").is_none());
    }
    // Passed, but the upstream sends none: ours goes out.
    let quiet = Upstream::start(|_req| async { text(200, "ok") }).await;
    let gw = gateway(&config(quiet.addr, "", pass));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(servers(&reply), ["tollgate"]);
}

#[tokio::test]
async fn tollgates_own_answers_carry_its_server_over_both_protocols() {
    let _shared = support::shared();
    let gw = gateway(&config(support::closed_port(), "", ""));
    let cases = [
        ("/", 502),
        ("/deny", 403),
        ("/ret", 200),
        ("/nowhere", 404),
        ("/limited", 502),
        ("/limited", 503),
    ];
    for h2 in [false, true] {
        // The limit's minute starts anew for each protocol's turn: another gateway.
        let gw = match h2 {
            false => &gw,
            true => &gateway(&config(support::closed_port(), "", "")),
        };
        for (path, status) in cases {
            let reply = ask(gw, h2, http::Request::get(path), path, empty()).await;
            assert_eq!(reply.status, status, "{path} h2 {h2}");
            assert_eq!(servers(&reply), ["tollgate"], "{path} h2 {h2}");
            assert!(reply.headers.contains_key("date"), "{path} h2 {h2}");
        }
        let post = http::Request::post("/").header("content-length", "11");
        let reply = ask(gw, h2, post, "/", full("01234567890")).await;
        assert_eq!(reply.status, 413, "h2 {h2}");
        assert_eq!(servers(&reply), ["tollgate"], "413 h2 {h2}");
    }
}

/// The head of the answer to `raw`, sent on a new connection, lowercased.
async fn raw_head(gw: &tollgate::Gateway, raw: &[u8]) -> String {
    let mut client = TcpStream::connect(addr(gw)).await.unwrap();
    client.write_all(raw).await.unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    reply.head.to_ascii_lowercase()
}

#[tokio::test]
async fn the_answers_to_malformed_and_slow_heads_carry_it_too() {
    let _shared = support::shared();
    let gw = gateway(&config(
        support::closed_port(),
        "server_header = \"edge\"",
        "",
    ));
    let bad = raw_head(&gw, b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n").await;
    assert!(bad.starts_with("http/1.1 400 "), "{bad}");
    assert!(bad.contains("\r\nserver: edge\r\n"), "{bad}");
    assert!(bad.contains("\r\ndate: "), "{bad}");
    let long = format!("GET /{} HTTP/1.1\r\nHost: a\r\n\r\n", "a".repeat(20_000));
    let long = raw_head(&gw, long.as_bytes()).await;
    assert!(long.starts_with("http/1.1 414 "), "{long}");
    assert!(long.contains("\r\nserver: edge\r\n"), "{long}");
    // An unfinished head: 408 once `client_header_timeout` (1 s) is over.
    let mut client = TcpStream::connect(addr(&gw)).await.unwrap();
    client
        .write_all(b"GET / HTTP/1.1\r\nHost: a\r\n")
        .await
        .unwrap();
    let reply = within(5, read_response(&mut client)).await.expect("a 408");
    let head = reply.head.to_ascii_lowercase();
    assert!(head.starts_with("http/1.1 408 "), "{head}");
    assert!(head.contains("\r\nserver: edge\r\n"), "{head}");
    assert!(head.contains("\r\ndate: "), "{head}");
}

#[tokio::test]
async fn an_empty_server_header_sends_none_and_a_custom_one_is_sent_as_written() {
    let _shared = support::shared();
    let up = chatty().await;
    let gw = gateway(&config(up.addr, "server_header = \"\"", ""));
    for path in ["/", "/nowhere", "/ret"] {
        let reply = within(5, get_text(addr(&gw), path)).await;
        assert!(servers(&reply).is_empty(), "{path}: {:?}", reply.headers);
    }
    let bad = raw_head(&gw, b"GET / HTTP/1.1\r\nHost: a\r\nBad Header: x\r\n\r\n").await;
    assert!(!bad.contains("server:"), "{bad}");
    let gw = gateway(&config(up.addr, "server_header = \"Edge/1\"", ""));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(servers(&reply), ["Edge/1"]);
}

#[tokio::test]
async fn a_location_passing_what_its_site_hides_passes_it_as_nginx_does() {
    let _shared = support::shared();
    let up = chatty().await;
    let toml = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{}\"]\n\
         [[site]]\nnames = [\"a.example\"]\nhide_headers = [\"Server\", \"X-Powered-By\"]\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\npass_headers = [\"Server\"]\n",
        up.addr
    );
    let gw = gateway(&toml);
    let reply = ask(&gw, false, http::Request::get("/"), "/", empty()).await;
    assert_eq!(servers(&reply), ["Apache/2.4.1 (Unix)"]);
    assert!(reply.headers.get("x-powered-by").is_none());
}

#[test]
fn pass_headers_takes_only_headers_dropped_by_default_and_none_also_hidden() {
    let up = support::closed_port();
    for (rules, said) in [
        (
            "pass_headers = [\"X-Powered-By\"]",
            "reaches the client anyway",
        ),
        (
            "pass_headers = [\"Server\"]\nhide_headers = [\"server\"]",
            "in `hide_headers` too",
        ),
    ] {
        let toml = config(up, "", rules);
        match tollgate::config::from_str(&toml, std::path::Path::new("t.toml")) {
            Ok(_) => panic!("accepted: {rules}"),
            Err(errors) => assert!(errors.to_string().contains(said), "{errors}"),
        }
    }
    let toml = config(up, "server_header = \"a\\u0007b\"", "");
    assert!(tollgate::config::from_str(&toml, std::path::Path::new("t.toml")).is_err());
}
