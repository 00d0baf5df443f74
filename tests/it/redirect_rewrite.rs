//! `redirect_rewrite`, `cookie_path` and `cookie_domain` beside real nginx
//! (`proxy_redirect`, `proxy_cookie_path`, `proxy_cookie_domain`): one upstream answers
//! both with a `Location`, a `Refresh` and several `Set-Cookie`s, and what reaches the
//! client must be the same, the authority of an absolute `Location` aside (each listens
//! on its own port).

use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::support::nginx::{self, Nginx};
use crate::support::{self, addr, gateway, send, within, Upstream};

/// What the upstream writes in every answer.
const COOKIES: [&str; 7] = [
    "a=1; Path=/v2/; Domain=app.internal",
    "b=2;path=/v2/deep;  HttpOnly ;Secure",
    "c=3; Domain=.APP.internal; path=/other",
    "d=4; Path=/x/",
    "noequals; path=/v2/",
    "e=5; path=/V2/; domain=app.internal.evil",
    " f = 6 ; Path = /v2/a ;;",
];

async fn upstream() -> Upstream {
    Upstream::start(|_req| async {
        let mut response = support::text(302, "moved");
        let headers = response.headers_mut();
        headers.insert("location", "http://app/v2/x?q=1".parse().unwrap());
        headers.insert("refresh", "5; url=http://app/v2/y".parse().unwrap());
        for cookie in COOKIES {
            headers.append("set-cookie", cookie.parse().unwrap());
        }
        response
    })
    .await
}

/// Each location: its `match`, nginx's directives, tollgate's keys.
const LOCATIONS: [(&str, &str, &str); 5] = [
    (
        "/api/",
        "proxy_pass http://app/v2/; proxy_redirect http://app/v2/ /api/; \
         proxy_cookie_path /v2/ /api/; proxy_cookie_domain app.internal example.test;",
        "upstream_path = \"/v2/\"\nredirect_rewrite = [{ from = \"http://app/v2/\", to = \"/api/\" }]\n\
         cookie_path = { \"/v2/\" = \"/api/\" }\ncookie_domain = { \"app.internal\" = \"example.test\" }",
    ),
    (
        "/def/",
        "proxy_pass http://app/v2/; proxy_redirect default;",
        "upstream_path = \"/v2/\"\nredirect_rewrite = \"default\"",
    ),
    (
        "/re/",
        "proxy_pass http://app/v2/; proxy_redirect ~^http://app/v2/(.*)$ https://$host/re/$1; \
         proxy_cookie_path ~*^/v2/(.*)$ /re/$1; proxy_cookie_domain ~^app\\.(.*)$ $1.test;",
        "upstream_path = \"/v2/\"\n\
         redirect_rewrite = [{ from = \"~^http://app/v2/(.*)$\", to = \"https://$host/re/$1\" }]\n\
         cookie_path = { \"~*^/v2/(.*)$\" = \"/re/$1\" }\ncookie_domain = { \"~^app\\\\.(.*)$\" = \"$1.test\" }",
    ),
    (
        "/first/",
        "proxy_pass http://app/v2/; proxy_redirect http://app/ /one/; proxy_redirect http://app/v2/ /two/; \
         proxy_cookie_path / /root/; proxy_cookie_path /v2/ /never/;",
        "upstream_path = \"/v2/\"\n\
         redirect_rewrite = [{ from = \"http://app/\", to = \"/one/\" }, { from = \"http://app/v2/\", to = \"/two/\" }]\n\
         cookie_path = { \"/\" = \"/root/\", \"/v2/\" = \"/never/\" }",
    ),
    ("/off/", "proxy_pass http://app/v2/; proxy_redirect off;", "upstream_path = \"/v2/\""),
];

fn nginx_config(dir: &std::path::Path, port: u16, up: SocketAddr) -> String {
    let mut locations = String::new();
    for (prefix, directives, _) in LOCATIONS {
        let _ = writeln!(locations, "  location {prefix} {{ {directives} }}");
    }
    let servers = format!(
        " upstream app {{ server {up}; }}\n server {{\n  listen 127.0.0.1:{port};\n{locations} }}\n"
    );
    nginx::http(dir, &servers)
}

fn tollgate_config(up: SocketAddr) -> String {
    let mut text = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{up}\"]\n"
    );
    for (prefix, _, keys) in LOCATIONS {
        let _ = writeln!(
            text,
            "[[location]]\nmatch = \"{prefix}\"\nupstream = \"app\"\n{keys}"
        );
    }
    text
}

/// The answer's `Location`, `Refresh` and `Set-Cookie`s, `at`'s port written `PORT`.
async fn rewritten(at: SocketAddr, path: &str) -> String {
    let req = http::Request::get(path)
        .header("host", "gate.test")
        .body(support::empty())
        .unwrap();
    let reply = within(5, send(at, req)).await;
    let mut seen = format!("{} ", reply.status.as_u16());
    for name in ["location", "refresh", "set-cookie"] {
        for value in reply.headers.get_all(name) {
            let value = String::from_utf8_lossy(value.as_bytes());
            let _ = write!(seen, "\n  {name}: {value}");
        }
    }
    seen.replace(&format!(":{}", at.port()), ":PORT")
}

#[tokio::test]
async fn location_refresh_and_cookies_are_rewritten_as_nginx_rewrites_them() {
    if !nginx::available("the redirect_rewrite conformance test") {
        return;
    }
    let _shared = support::shared();
    let up = upstream().await;
    let nginx = Nginx::start(|dir, port| nginx_config(dir, port, up.addr), &[]);
    let gw = gateway(&tollgate_config(up.addr));
    let mut differences = String::new();
    for (prefix, _, _) in LOCATIONS {
        let path = format!("{prefix}page");
        let theirs = rewritten(nginx.addr, &path).await;
        let mine = rewritten(addr(&gw), &path).await;
        if theirs != mine {
            let _ = writeln!(differences, "{path}:\nnginx {theirs}\ntollgate {mine}");
        }
    }
    assert!(differences.is_empty(), "{differences}");
    // What the comparison covers, spelled out once.
    let api = rewritten(addr(&gw), "/api/page").await;
    assert!(
        api.contains("location: http://gate.test:PORT/api/x?q=1"),
        "{api}"
    );
    assert!(api.contains("refresh: 5; url=/api/y"), "{api}");
    assert!(
        api.contains("set-cookie: a=1; Path=/api/; Domain=example.test"),
        "{api}"
    );
    assert!(
        api.contains("set-cookie: c=3; Domain=.example.test; path=/other"),
        "{api}"
    );
    assert!(api.contains("set-cookie: noequals; path=/v2/"), "{api}");
    let off = rewritten(addr(&gw), "/off/page").await;
    assert!(off.contains("location: http://app/v2/x?q=1"), "{off}");
}

#[tokio::test]
async fn a_sites_rules_reach_its_locations_and_a_location_can_turn_them_off() {
    let _shared = support::shared();
    let up = upstream().await;
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{}\"]\n\
         [[site]]\nnames = [\"gate.test\"]\nredirect_rewrite = \"default\"\n\
         cookie_path = {{ \"/v2/\" = \"/\" }}\n\
         [[site.location]]\nmatch = \"/one/\"\nupstream = \"app\"\nupstream_path = \"/v2/\"\n\
         [[site.location]]\nmatch = \"/two/\"\nupstream = \"app\"\nupstream_path = \"/v2/\"\n\
         redirect_rewrite = \"off\"\ncookie_path = {{}}\n",
        up.addr
    );
    let gw = gateway(&config);
    let one = rewritten(addr(&gw), "/one/x").await;
    assert!(
        one.contains("location: http://gate.test:PORT/one/x?q=1"),
        "{one}"
    );
    assert!(
        one.contains("set-cookie: a=1; Path=/; Domain=app.internal"),
        "{one}"
    );
    let two = rewritten(addr(&gw), "/two/x").await;
    assert!(two.contains("location: http://app/v2/x?q=1"), "{two}");
    assert!(
        two.contains("set-cookie: a=1; Path=/v2/; Domain=app.internal"),
        "{two}"
    );
}

/// Raw bytes from the upstream: cookies without `=`, of nothing but `;`, of thousands of
/// attributes or huge values, with bytes beyond ASCII, and odd `Refresh` and `Location`
/// lines. Each is rewritten or left alone, and the gateway answers and goes on.
#[tokio::test]
async fn hostile_cookies_and_redirects_from_the_upstream_are_handled_in_bounded_work() {
    use crate::support::raw::{read_response, RawUpstream};
    use tokio::io::AsyncWriteExt;
    let _shared = support::shared();
    let many = "; path=/v2/x".repeat(2_000);
    let huge_value = "v".repeat(20_000);
    let huge_path = "p".repeat(20_000);
    let mut head = b"HTTP/1.1 302 Found\r\nContent-Length: 0\r\n".to_vec();
    let lines: Vec<Vec<u8>> = vec![
        b"Set-Cookie: =".to_vec(),
        b"Set-Cookie: ;;;;".to_vec(),
        b"Set-Cookie: noequals; path=/v2/".to_vec(),
        format!("Set-Cookie: many=1{many}").into_bytes(),
        format!("Set-Cookie: huge={huge_value}; path=/v2/{huge_path}").into_bytes(),
        b"Set-Cookie: a=b;path;domain; path = /v2/spaced ; =/v2/".to_vec(),
        b"Set-Cookie: obs=\xff; Path=/v2/\xfe".to_vec(),
        b"Refresh: url=url=http://app/v2/x".to_vec(),
        b"Refresh: 0; URL=".to_vec(),
        b"Location: http://app/v2/\xff\t?x".to_vec(),
    ];
    for line in &lines {
        head.extend_from_slice(line);
        head.extend_from_slice(b"\r\n");
    }
    head.extend_from_slice(b"\r\n");
    let up = RawUpstream::start(move |_| head.clone()).await;
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{}\"]\n\
         [[location]]\nmatch = \"/\"\nupstream = \"app\"\n\
         redirect_rewrite = [{{ from = \"http://app/v2/\", to = \"/api/\" }}]\n\
         cookie_path = {{ \"/v2/\" = \"/api/\" }}\ncookie_domain = {{ \"~(.*)\" = \"$1$1\" }}\n",
        up.addr
    );
    let gw = gateway(&config);
    let mut stream = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
    for _ in 0..2 {
        let request = b"GET /x HTTP/1.1\r\nHost: gate.test\r\n\r\n";
        stream.write_all(request).await.unwrap();
        let reply = within(10, read_response(&mut stream))
            .await
            .expect("an answer");
        assert_eq!(reply.status, 302);
        let head = reply.head;
        for kept in [
            "set-cookie: =\r\n",
            "set-cookie: ;;;;\r\n",
            "set-cookie: noequals; path=/v2/\r\n",
            "refresh: 0; url=\r\n",
            "refresh: url=url=http://app/v2/x\r\n",
        ] {
            assert!(
                head.to_ascii_lowercase().contains(kept),
                "{kept:?} is missing"
            );
        }
        assert_eq!(head.matches("path=/api/x").count(), 2_000);
        assert!(head.contains(&format!("huge={huge_value}; path=/api/{huge_path}")));
        assert!(head.contains("a=b; path; domain; path=/api/spaced; =/v2/"));
        assert!(
            head.contains("http://gate.test:"),
            "the Location made absolute"
        );
        assert!(
            head.contains("/api/\u{fffd}\t?x"),
            "bytes beyond ASCII kept"
        );
    }
}
