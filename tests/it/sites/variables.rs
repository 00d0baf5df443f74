//! `$server_name` and `$host` in a site's `return`, compared with nginx: the name a site
//! is known by (its first; nginx lowers the case of all but a regex), and the host a
//! request without one gets (that name).

use std::fmt::Write as _;
use std::net::SocketAddr;

use super::answer;
use crate::support::nginx::{self, Nginx};
use crate::support::{self, addr, gateway};

/// The sites' names, in file order; the first site is the default.
const SITES: [&[&str]; 4] = [
    &["Example.com", "www.example.com"],
    &[r"~^www\d+\.example\.net$"],
    &["*.Wild.test"],
    &["mail.*"],
];

const BODY: &str = "$server_name|$host";

/// Request heads (lines split by `|`).
const REQUESTS: [&str; 8] = [
    "GET / HTTP/1.1|Host: WWW.EXAMPLE.COM:8080",
    "GET / HTTP/1.1|Host: example.com.",
    "GET / HTTP/1.0",
    "GET / HTTP/1.1|Host: Www7.example.net",
    "GET / HTTP/1.1|Host: x.wild.TEST",
    "GET / HTTP/1.1|Host: mail.x",
    "GET / HTTP/1.1|Host: unknown.test",
    "GET http://Mail.Y./ HTTP/1.1|Host: other.test",
];

fn nginx_config(dir: &std::path::Path, port: u16) -> String {
    let mut servers = String::new();
    for names in SITES {
        let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        let _ = writeln!(
            servers,
            " server {{\n  listen 127.0.0.1:{port};\n  server_name {};\n\
             location / {{ return 200 \"{BODY}\"; }}\n }}",
            names.join(" ")
        );
    }
    nginx::http(dir, &servers)
}

fn tollgate_config() -> String {
    let mut text =
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n[log]\naccess = \"off\"\n".to_owned();
    for names in SITES {
        let names: Vec<String> = names.iter().map(|n| format!("'{n}'")).collect();
        let _ = writeln!(
            text,
            "[[site]]\nnames = [{}]\n[[site.location]]\nmatch = \"/\"\n\
             return = {{ status = 200, body = \"{BODY}\" }}",
            names.join(", ")
        );
    }
    text
}

#[tokio::test]
async fn server_name_and_host_are_what_nginx_fills_in() {
    if !nginx::available("the $server_name conformance test") {
        return;
    }
    let _shared = support::shared();
    let nginx = Nginx::start(nginx_config, &[]);
    let gw = gateway(&tollgate_config());
    let ours: SocketAddr = addr(&gw);
    let mut differences = String::new();
    for request in REQUESTS {
        let theirs = answer(nginx.addr, request).await;
        let mine = answer(ours, request).await;
        if theirs != mine {
            let _ = writeln!(
                differences,
                "{request:?}: nginx {theirs:?}, tollgate {mine:?}"
            );
        }
    }
    assert!(differences.is_empty(), "{differences}");
}
