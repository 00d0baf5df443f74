//! The forwarding headers tollgate writes upstream ("Forwarding headers" in
//! docs/config.md): `X-Forwarded-Host` is the host the client sent whatever a rule makes
//! of `Host`, and `forwarded_headers` (per `[server]`, site and location) says which of
//! the four are written; one left out passes as the client sent it, or as a rule sets it.

use crate::support;

use support::raw::{read_response, RawUpstream};
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// One location proxying to `up`, with `rules` in it and `server` in `[server]`.
fn config(up: std::net::SocketAddr, server: &str, rules: &str) -> String {
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n{server}\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{up}\"]\n\
         [[location]]\nmatch = \"/\"\nupstream = \"app\"\n{rules}\n"
    )
}

/// Sends `raw` on a new connection and returns the status and what the upstream got,
/// lowercased.
async fn through(gw: &tollgate::Gateway, up: &RawUpstream, raw: &[u8]) -> (u16, String) {
    let mut client = TcpStream::connect(addr(gw)).await.unwrap();
    client.write_all(raw).await.unwrap();
    let reply = read_response(&mut client).await.expect("a response");
    let seen = String::from_utf8_lossy(&up.bytes()).to_ascii_lowercase();
    (reply.status, seen)
}

#[tokio::test]
async fn x_forwarded_host_is_the_host_the_client_sent_whatever_host_a_rule_sets() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let rules = "request_headers = { Host = \"slack.com\" }";
    let gw = gateway(&config(up.addr, "", rules));
    let raw = b"GET /x HTTP/1.1\r\nHost: evil.example\r\nX-Forwarded-Host: spoof.example\r\n\r\n";
    let (status, seen) = through(&gw, &up, raw).await;
    assert_eq!(status, 200);
    assert!(seen.contains("\r\nhost: slack.com\r\n"), "{seen}");
    assert!(
        seen.contains("x-forwarded-host: evil.example\r\n"),
        "{seen}"
    );
    assert!(!seen.contains("spoof.example"), "{seen}");
    assert_eq!(seen.matches("x-forwarded-host").count(), 1, "{seen}");
}

#[tokio::test]
async fn x_forwarded_host_is_the_http2_authority_whatever_host_a_rule_sets() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { text(200, "ok") }).await;
    let rules = "request_headers = { Host = \"slack.com\" }";
    let gw = gateway(&config(up.addr, "", rules));
    let request = http::Request::get("http://evil.example:8443/x")
        .body(empty())
        .unwrap();
    let reply = within(5, send_h2(addr(&gw), request)).await;
    assert_eq!(reply.status, 200);
    let seen = up.last();
    assert_eq!(seen.headers["host"], "slack.com");
    assert_eq!(seen.headers["x-forwarded-host"], "evil.example:8443");
}

#[tokio::test]
async fn an_empty_list_writes_none_and_the_clients_own_copies_pass_as_sent() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, "", "forwarded_headers = []"));
    let (status, seen) = through(&gw, &up, b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n").await;
    assert_eq!(status, 200);
    for name in [
        "x-forwarded-for",
        "x-real-ip",
        "x-forwarded-proto",
        "x-forwarded-host",
    ] {
        assert!(!seen.contains(name), "{name} written: {seen}");
    }
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(up.addr, "", "forwarded_headers = []"));
    let raw = b"GET / HTTP/1.1\r\nHost: a.example\r\nX-Forwarded-For: 6.6.6.6\r\n\
                X-Real-IP: 6.6.6.6\r\n\r\n";
    let (_, seen) = through(&gw, &up, raw).await;
    assert!(seen.contains("x-forwarded-for: 6.6.6.6\r\n"), "{seen}");
    assert!(seen.contains("x-real-ip: 6.6.6.6\r\n"), "{seen}");
}

#[tokio::test]
async fn a_header_left_out_may_be_set_by_a_rule_and_the_others_stay_tollgates() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let rules = "forwarded_headers = [\"x-forwarded-for\", \"X-FORWARDED-HOST\"]\n\
                 request_headers = { \"X-Forwarded-Proto\" = \"https\" }";
    let gw = gateway(&config(up.addr, "", rules));
    let raw = b"GET / HTTP/1.1\r\nHost: a.example\r\nX-Forwarded-For: 6.6.6.6\r\n\
                X-Forwarded-Proto: gopher\r\nX-Real-IP: 7.7.7.7\r\n\r\n";
    let (status, seen) = through(&gw, &up, raw).await;
    assert_eq!(status, 200);
    // Written by tollgate: the spoofed copy is replaced.
    assert!(seen.contains("x-forwarded-for: 127.0.0.1\r\n"), "{seen}");
    assert!(!seen.contains("6.6.6.6"), "{seen}");
    assert!(seen.contains("x-forwarded-host: a.example\r\n"), "{seen}");
    // Set by the rule, over the client's.
    assert!(seen.contains("x-forwarded-proto: https\r\n"), "{seen}");
    assert!(!seen.contains("gopher"), "{seen}");
    // Neither written nor set: the client's passes, as nginx passes it.
    assert!(seen.contains("x-real-ip: 7.7.7.7\r\n"), "{seen}");
}

#[tokio::test]
async fn a_location_replaces_its_sites_list_which_replaces_the_servers() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { text(200, "ok") }).await;
    let toml = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nworkers = 1\n\
         forwarded_headers = [\"X-Real-IP\"]\n[log]\naccess = \"off\"\n\
         [upstreams.app]\nservers = [\"{}\"]\n\
         [[site]]\nnames = [\"site.example\"]\nforwarded_headers = [\"X-Forwarded-Proto\"]\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\n\
         [[site.location]]\nmatch = \"/own\"\nupstream = \"app\"\n\
         forwarded_headers = [\"X-Forwarded-For\"]\n\
         [[site]]\nnames = [\"server.example\"]\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\n",
        up.addr
    );
    let gw = gateway(&toml);
    let cases = [
        ("site.example", "/", "x-forwarded-proto"),
        ("site.example", "/own", "x-forwarded-for"),
        ("server.example", "/", "x-real-ip"),
    ];
    for (host, path, only) in cases {
        let request = http::Request::get(path)
            .header("host", host)
            .body(empty())
            .unwrap();
        let reply = within(5, send(addr(&gw), request)).await;
        assert_eq!(reply.status, 200);
        let seen = up.last().headers;
        let written: Vec<&str> = [
            "x-forwarded-for",
            "x-real-ip",
            "x-forwarded-proto",
            "x-forwarded-host",
        ]
        .into_iter()
        .filter(|name| seen.contains_key(*name))
        .collect();
        assert_eq!(written, [only], "{host}{path}");
    }
}

#[tokio::test]
async fn the_servers_list_holds_for_top_level_locations() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async { text(200, "ok") }).await;
    let gw = gateway(&config(
        up.addr,
        "forwarded_headers = [\"X-Forwarded-Host\"]",
        "",
    ));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 200);
    let seen = up.last().headers;
    assert!(seen.contains_key("x-forwarded-host"), "{seen:?}");
    assert!(!seen.contains_key("x-forwarded-for"), "{seen:?}");
}

/// `-t`'s message for `toml`, which must be refused.
fn refused(toml: &str) -> String {
    match tollgate::config::from_str(toml, std::path::Path::new("t.toml")) {
        Ok(_) => panic!("accepted:\n{toml}"),
        Err(errors) => errors.to_string(),
    }
}

#[test]
fn a_rule_for_a_header_tollgate_writes_there_is_refused_where_it_is_written() {
    let up = support::closed_port();
    let message = refused(&config(
        up,
        "",
        "request_headers = { \"X-Forwarded-Proto\" = \"https\" }",
    ));
    assert!(message.contains("t.toml:"), "{message}");
    assert!(message.contains("forwarded_headers"), "{message}");
    // Left out by [server]'s list: the rule is fine.
    let toml = config(
        up,
        "forwarded_headers = [\"X-Forwarded-For\"]",
        "request_headers = { \"X-Forwarded-Proto\" = \"https\" }",
    );
    assert!(tollgate::config::from_str(&toml, std::path::Path::new("t.toml")).is_ok());
    // A site's rule, and a location of it that has tollgate write the header again.
    let toml = format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\n[upstreams.app]\nservers = [\"{up}\"]\n\
         [[site]]\nnames = [\"a\"]\nforwarded_headers = []\n\
         request_headers = {{ \"X-Real-IP\" = \"$remote_addr\" }}\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\n\
         forwarded_headers = [\"X-Real-IP\"]\n"
    );
    let message = refused(&toml);
    assert!(message.contains("X-Real-IP set by the site"), "{message}");
    let message = refused(&config(up, "forwarded_headers = [\"Forwarded\"]", ""));
    assert!(
        message.contains("not a header tollgate forwards"),
        "{message}"
    );
}

#[tokio::test]
async fn repeated_and_oddly_cased_copies_are_all_replaced_or_all_passed() {
    let _shared = support::shared();
    let up = RawUpstream::ok().await;
    let gw = gateway(&config(
        up.addr,
        "",
        "forwarded_headers = [\"X-Forwarded-Host\"]",
    ));
    let raw = b"GET / HTTP/1.1\r\nHost: a.example\r\nx-FORWARDED-host: one.example\r\n\
                X-Forwarded-Host: two.example\r\nX-Forwarded-For: 6.6.6.6\r\n\
                X-FORWARDED-FOR: 7.7.7.7\r\n\r\n";
    let (status, seen) = through(&gw, &up, raw).await;
    assert_eq!(status, 200);
    assert_eq!(seen.matches("x-forwarded-host:").count(), 1, "{seen}");
    assert!(seen.contains("x-forwarded-host: a.example\r\n"), "{seen}");
    assert!(
        !seen.contains("one.example") && !seen.contains("two.example"),
        "{seen}"
    );
    // Not written: both of the client's lines go on as sent.
    assert!(
        seen.contains("6.6.6.6") && seen.contains("7.7.7.7"),
        "{seen}"
    );
}
