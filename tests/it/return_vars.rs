//! Variables in `return` through the real gateway ("Variables" in docs/config.md): the
//! redirect to HTTPS every TLS edge starts with, on HTTP/1.1 and HTTP/2, regex captures,
//! a decoded `$uri` that cannot split the head, and the same `Location`s as nginx.

use std::fmt::Write as _;

use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

use crate::support::nginx::{self, Nginx};
use crate::support::raw::read_response;
use crate::support::{self, addr, gateway, get, send, send_h2, within};

fn config(locations: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n{locations}"
    )
}

const TO_HTTPS: &str = "[[location]]\nmatch = \"/\"\n\
    return = { status = 301, location = \"https://$host$request_uri\" }\n";

#[tokio::test]
async fn the_redirect_to_https_fills_in_host_and_request_uri_on_h1_and_h2() {
    let _shared = support::shared();
    let gw = gateway(&config(TO_HTTPS));
    let req = http::Request::get("/a/b?x=1")
        .header("host", "Example.TEST.:8080")
        .body(support::empty())
        .unwrap();
    let reply = within(5, send(addr(&gw), req)).await;
    assert_eq!(reply.status, 301);
    assert_eq!(reply.headers["location"], "https://example.test/a/b?x=1");
    let req = http::Request::get("http://www.Example.test/h2/%7e?q=1")
        .body(support::empty())
        .unwrap();
    let reply = within(5, send_h2(addr(&gw), req)).await;
    assert_eq!(reply.version, http::Version::HTTP_2);
    assert_eq!(reply.status, 301);
    assert_eq!(
        reply.headers["location"],
        "https://www.example.test/h2/%7e?q=1"
    );
}

#[tokio::test]
async fn captures_and_the_other_variables_are_filled_in() {
    let _shared = support::shared();
    let gw = gateway(&config(
        "[[location]]\nmatch = \"~ ^/old/([a-z]+)/(\\\\d+)$\"\n\
         return = { status = 308, location = \"$scheme://$host:$server_port/new/$2/$1?$args\", \
         body = \"$remote_addr [$http_x_name] $uri\" }\n",
    ));
    let port = addr(&gw).port();
    let req = http::Request::get("/old//page/42?k=v")
        .header("host", "example.test")
        .header("x-name", "tollgate")
        .body(support::empty())
        .unwrap();
    let reply = within(5, send(addr(&gw), req)).await;
    assert_eq!(reply.status, 308);
    assert_eq!(
        reply.headers["location"],
        format!("http://example.test:{port}/new/42/page?k=v").as_str()
    );
    assert_eq!(reply.body, "127.0.0.1 [tollgate] /old/page/42");
    assert_eq!(
        within(5, send(addr(&gw), get("/old/x/y"))).await.status,
        404
    );
}

#[tokio::test]
async fn a_decoded_uri_cannot_add_a_header_line() {
    let _shared = support::shared();
    let gw = gateway(&config(
        "[[location]]\nmatch = \"/\"\nreturn = { status = 302, location = \"https://$host$uri\" }\n",
    ));
    let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
    let request = "GET /a%0d%0aSet-Cookie:%20x=1%20%ff HTTP/1.1\r\nHost: example.test\r\n\r\n";
    stream.write_all(request.as_bytes()).await.unwrap();
    let reply = within(5, read_response(&mut stream))
        .await
        .expect("a response");
    assert_eq!(reply.status, 302);
    assert!(
        !reply.head.to_ascii_lowercase().contains("\nset-cookie"),
        "{}",
        reply.head
    );
    assert!(
        reply
            .head
            .contains("Location: https://example.test/a%0D%0ASet-Cookie:%20x=1%20%FF\r\n")
            || reply
                .head
                .contains("location: https://example.test/a%0D%0ASet-Cookie:%20x=1%20%FF\r\n"),
        "{}",
        reply.head
    );
}

/// Raw HTTP/1.x requests whose `$host` and `$request_uri` differ in every way nginx
/// normalizes: case, port, trailing dot, IPv6 literal, absolute-form target, no Host.
const REQUESTS: [&str; 7] = [
    "GET /x?y=1 HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "GET /x HTTP/1.1\r\nHost: EXAMPLE.com:8080\r\n\r\n",
    "GET /%41/./b HTTP/1.1\r\nHost: example.com.\r\n\r\n",
    "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n",
    "GET http://Other.Example/p?q HTTP/1.1\r\nHost: example.com\r\n\r\n",
    "GET /old HTTP/1.0\r\n\r\n",
    "GET /a//b HTTP/1.1\r\nHost: 10.0.0.1\r\n\r\n",
];

async fn location_of(addr: std::net::SocketAddr, request: &str) -> (u16, String) {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    let reply = within(5, read_response(&mut stream))
        .await
        .expect("a response");
    let location = reply
        .head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("location")
                .then(|| value.trim().to_owned())
        })
        .unwrap_or_default();
    (reply.status, location)
}

#[tokio::test]
async fn the_redirect_sends_the_location_nginx_sends() {
    if !nginx::available("the return conformance test") {
        return;
    }
    let _shared = support::shared();
    let nginx = Nginx::start(
        |dir, port| {
            let server = format!(
                " server {{\n  listen 127.0.0.1:{port};\n\
                 location / {{ return 301 https://$host$request_uri; }}\n }}\n"
            );
            nginx::http(dir, &server)
        },
        &[],
    );
    let gw = gateway(&config(TO_HTTPS));
    let mut differences = String::new();
    for request in REQUESTS {
        let theirs = location_of(nginx.addr, request).await;
        let ours = location_of(addr(&gw), request).await;
        if theirs != ours {
            let _ = writeln!(
                differences,
                "{request:?}: nginx {theirs:?}, tollgate {ours:?}"
            );
        }
    }
    assert!(differences.is_empty(), "{differences}");
}

/// One variable language: `$host` and a repeated `$http_x_team` mean in a zone key what
/// they mean in a `return` (issue 32). `$host` loses its port and its trailing dot and
/// falls back to the site's first name when the request names no host (HTTP/1.0);
/// repeated header lines are joined with ", " (nginx 1.23+). Before, a key kept the dot,
/// took the first line only, and had no host at all without one.
#[tokio::test]
async fn host_and_a_repeated_header_mean_the_same_in_a_zone_key_as_in_a_return() {
    let _shared = support::shared();
    let gw = gateway(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[admin]\nlisten = \"127.0.0.1:0\"\n\
         [log]\naccess = \"off\"\n\
         [zones.team]\nkey = \"$host|$http_x_team\"\nrate = \"1r/m\"\n\
         [[site]]\nnames = [\"api.test\"]\n\
         [[site.location]]\nmatch = \"/echo\"\nreturn = { status = 200, body = \"$host|$http_x_team\" }\n\
         [[site.location]]\nmatch = \"/limited\"\nlimit = [{ zone = \"team\" }]\n\
         return = { status = 200 }\n",
    );
    let admin = gw.admin_addr().expect("admin");
    for (head, meant) in [
        (
            "HTTP/1.1\r\nHost: API.test.:8080\r\nX-Team: a\r\nX-Team: b",
            "api.test|a, b",
        ),
        ("HTTP/1.0\r\nX-Team: c", "api.test|c"),
    ] {
        let mut answers = Vec::new();
        for path in ["/echo", "/limited"] {
            let mut stream = TcpStream::connect(addr(&gw)).await.unwrap();
            let request = format!("GET {path} {head}\r\n\r\n");
            stream.write_all(request.as_bytes()).await.unwrap();
            answers.push(within(5, read_response(&mut stream)).await.expect("answer"));
        }
        assert_eq!(answers[1].status, 200);
        let key = &answers[0].body;
        assert_eq!(key, meant);
        let encoded: String = key
            .bytes()
            .map(|b| match b {
                b'a'..=b'z' | b'0'..=b'9' | b'.' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect();
        let url = format!("http://{admin}/zones/team/keys/{encoded}");
        let reply = within(
            5,
            send(
                admin,
                http::Request::get(url).body(support::empty()).unwrap(),
            ),
        )
        .await;
        assert!(
            reply.body.contains("\"stored\":true"),
            "the zone stored no key {key:?}: {}",
            reply.body
        );
    }
}
