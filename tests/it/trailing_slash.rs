//! nginx's trailing-slash 301 beside real nginx: a request for a proxying location's
//! path without its final `/` is sent to the slashed path (query kept), unless a
//! location is named like the path; a regex location never redirects, and neither does
//! one that answers itself.

use std::fmt::Write as _;
use std::net::SocketAddr;

use crate::support::nginx::{self, Nginx};
use crate::support::{self, addr, gateway, send, within, Upstream};

/// Each location: nginx's, then tollgate's `match` and action.
const LOCATIONS: [(&str, &str); 8] = [
    (
        "location / { proxy_pass http://app; }",
        "match = \"/\"\nupstream = \"app\"",
    ),
    (
        "location /api/ { proxy_pass http://app; }",
        "match = \"/api/\"\nupstream = \"app\"",
    ),
    (
        "location ^~ /static/ { proxy_pass http://app; }",
        "match = \"^~ /static/\"\nupstream = \"app\"",
    ),
    (
        "location /exact/ { proxy_pass http://app; }",
        "match = \"/exact/\"\nupstream = \"app\"",
    ),
    (
        "location = /exact { return 200 \"exact\"; }",
        "match = \"= /exact\"\nreturn = { status = 200, body = \"exact\" }",
    ),
    (
        "location ~ ^/re/ { proxy_pass http://app; }",
        "match = \"~ ^/re/\"\nupstream = \"app\"",
    ),
    (
        "location /ret/ { return 200 \"ret\"; }",
        "match = \"/ret/\"\nreturn = { status = 200, body = \"ret\" }",
    ),
    (
        "location = /only/ { proxy_pass http://app; }",
        "match = \"= /only/\"\nupstream = \"app\"",
    ),
];

/// Method and target of each request compared.
const REQUESTS: [(&str, &str); 12] = [
    ("GET", "/api"),
    ("GET", "/api?a=1&b=%20x"),
    ("GET", "/api?"),
    ("HEAD", "/api"),
    ("POST", "/api"),
    ("GET", "/static?x"),
    ("GET", "/exact"),
    ("GET", "/re"),
    ("GET", "/ret"),
    ("GET", "/only"),
    ("GET", "/x/../api"),
    ("GET", "/API"),
];

fn nginx_config(dir: &std::path::Path, port: u16, up: SocketAddr) -> String {
    let mut servers =
        format!(" upstream app {{ server {up}; }}\n server {{\n  listen 127.0.0.1:{port};\n");
    for (nginx, _) in LOCATIONS {
        let _ = writeln!(servers, "  {nginx}");
    }
    servers.push_str(" }\n");
    nginx::http(dir, &servers)
}

fn tollgate_config(up: SocketAddr) -> String {
    let mut text = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{up}\"]\n"
    );
    for (_, ours) in LOCATIONS {
        let _ = writeln!(text, "[[location]]\n{ours}");
    }
    text
}

/// Status and `Location` (its port written `PORT`), and the body unless it is one of
/// the servers' own redirect pages (nginx's is HTML, ours plain text).
async fn answer(at: SocketAddr, method: &str, target: &str) -> String {
    let req = http::Request::builder()
        .method(method)
        .uri(target)
        .header("host", "Gate.Test")
        .body(support::empty())
        .unwrap();
    let reply = within(5, send(at, req)).await;
    let location = reply
        .headers
        .get("location")
        .map(|l| l.to_str().unwrap_or("?"));
    let body = if reply.status == 301 { "" } else { &reply.body };
    format!("{} {location:?} {body:?}", reply.status.as_u16())
        .replace(&format!(":{}", at.port()), ":PORT")
}

#[tokio::test]
async fn the_slashless_path_is_redirected_as_nginx_redirects_it() {
    if !nginx::available("the trailing-slash conformance test") {
        return;
    }
    let _shared = support::shared();
    let up = Upstream::start(|req| async move { support::text(200, req.uri().path()) }).await;
    let nginx = Nginx::start(|dir, port| nginx_config(dir, port, up.addr), &[]);
    let gw = gateway(&tollgate_config(up.addr));
    let mut differences = String::new();
    for (method, target) in REQUESTS {
        let theirs = answer(nginx.addr, method, target).await;
        let mine = answer(addr(&gw), method, target).await;
        if theirs != mine {
            let _ = writeln!(
                differences,
                "{method} {target}: nginx {theirs}, tollgate {mine}"
            );
        }
    }
    assert!(differences.is_empty(), "{differences}");
    let redirect = answer(addr(&gw), "GET", "/api?a=1").await;
    assert_eq!(
        redirect,
        "301 Some(\"http://gate.test:PORT/api/?a=1\") \"\""
    );
    assert_eq!(
        answer(addr(&gw), "GET", "/exact").await,
        "200 None \"exact\""
    );
}

#[tokio::test]
async fn the_redirect_comes_before_access_rules_and_limits_and_reaches_no_upstream() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { support::text(200, "up") }).await;
    let config = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [zones.none]\nkey = \"$remote_addr\"\nrate = \"1r/m\"\n\
         [upstreams.app]\nservers = [\"{}\"]\n\
         [[location]]\nmatch = \"/api/\"\nupstream = \"app\"\naccess = [\"deny all\"]\n\
         limit = [{{ zone = \"none\" }}]\nclient_max_body_size = \"1k\"\n\
         response_headers = {{ \"X-Frame-Options\" = \"DENY\", \"X-Uri\" = \"$uri\" }}\n",
        up.addr
    );
    let gw = gateway(&config);
    for _ in 0..3 {
        let reply = within(5, send(addr(&gw), support::get("/api?x"))).await;
        assert_eq!(reply.status, 301);
        assert_eq!(reply.headers["x-frame-options"], "DENY");
        assert_eq!(reply.headers["x-uri"], "/api");
        assert!(reply.headers["location"]
            .to_str()
            .unwrap()
            .ends_with("/api/?x"));
    }
    let big = http::Request::post("/api")
        .header("host", "gate.test")
        .header("content-length", "2048")
        .body(support::full(vec![b'x'; 2048]))
        .unwrap();
    assert_eq!(within(5, send(addr(&gw), big)).await.status, 413);
    assert_eq!(up.count(), 0);
}
