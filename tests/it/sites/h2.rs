//! HTTP/2 (prior knowledge, no TLS) beside nginx: `:authority` names the site, with the
//! same case, port and trailing-dot rules as a Host header; a Host header stands in for
//! a missing `:authority` and may not contradict one.

use std::fmt::Write as _;
use std::net::SocketAddr;

use http::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpStream;

use crate::support::nginx::{self, Nginx};
use crate::support::{self, addr, empty, gateway, within};

/// The sites as (id, names); the first is the default.
const SITES: [(&str, &[&str]); 3] = [
    ("default", &[]),
    ("exact", &["example.com"]),
    ("wild", &["*.example.com"]),
];

/// Request targets (absolute: their authority is `:authority`) and a Host header to send
/// beside it (`""`: none). A Host that names another host than `:authority` makes the
/// request malformed (RFC 9113 8.3.1: nginx answers 400); nginx 1.22 refuses a Host
/// beside `:authority` even when they agree, so that case is left out.
const REQUESTS: [(&str, &str); 6] = [
    ("http://example.com/", ""),
    ("http://X.Example.COM:8080/", ""),
    ("http://example.com./", ""),
    ("http://unknown.test/", ""),
    ("/", "x.example.com"),
    ("http://example.com/", "x.example.com"),
];

fn nginx_config(dir: &std::path::Path, port: u16) -> String {
    let mut servers = String::new();
    for (id, names) in SITES {
        let names = if names.is_empty() {
            "_".to_owned()
        } else {
            names.join(" ")
        };
        let _ = writeln!(
            servers,
            " server {{\n  listen 127.0.0.1:{port} http2;\n  server_name {names};\n\
             location / {{ return 200 \"{id}\"; }}\n }}"
        );
    }
    nginx::http(dir, &servers)
}

fn tollgate_config() -> String {
    let mut text =
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n".to_owned();
    for (id, names) in SITES {
        let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        let _ = writeln!(
            text,
            "[[site]]\nnames = [{}]\n[[site.location]]\nmatch = \"/\"\n\
             return = {{ status = 200, body = \"{id}\" }}",
            names.join(", ")
        );
    }
    text
}

/// The site that answers (a 200's body), else the status, or the error.
async fn answer(addr: SocketAddr, target: &str, host: &str) -> String {
    let stream = TcpStream::connect(addr).await.expect("connect");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    let mut req = Request::get(target);
    if !host.is_empty() {
        req = req.header("host", host);
    }
    match within(5, sender.send_request(req.body(empty()).unwrap())).await {
        Ok(response) if response.status() == 200 => support::read(response).await.body,
        Ok(response) => response.status().as_str().to_owned(),
        Err(error) => format!("error: {error}"),
    }
}

#[tokio::test]
async fn http2_authority_picks_the_site_nginx_picks() {
    if !nginx::available("the sites HTTP/2 conformance test") {
        return;
    }
    let _shared = support::shared();
    let nginx = Nginx::start(nginx_config, &[]);
    let gw = gateway(&tollgate_config());
    let mut differences = String::new();
    for (target, host) in REQUESTS {
        let theirs = answer(nginx.addr, target, host).await;
        let ours = answer(addr(&gw), target, host).await;
        if theirs != ours {
            let _ = writeln!(
                differences,
                "{target} host {host:?}: nginx {theirs:?}, tollgate {ours:?}"
            );
        }
    }
    assert!(differences.is_empty(), "{differences}");
}
