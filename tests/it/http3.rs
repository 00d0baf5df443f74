//! HTTP/3 (`listen_tls = [{ addr, quic = true }]`) through the real gateway, with quinn
//! and h3 as the client: the same sites, forwarding, limits and body limits as over TCP,
//! one zone budget across HTTP/1.1, HTTP/2 and HTTP/3.

use crate::support;

use std::path::Path;

use http::Request;
use rcgen::{CertificateParams, KeyPair};
use support::h3;
use support::*;

/// A gateway serving `a.test` over TLS and QUIC in front of `up`, with `extra` after its
/// `[[location]]`'s `upstream` line.
fn quic_gateway(
    dir: &Path,
    up: std::net::SocketAddr,
    extra: &str,
    head: &str,
) -> tollgate::Gateway {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["a.test".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("a.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("a.key"), key.serialize_pem()).unwrap();
    let d = dir.display();
    gateway(&format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nlisten_tls = [{{ addr = \"127.0.0.1:0\", quic = true }}]\n\
         [log]\naccess = \"off\"\n[tls]\n[[tls.certificates]]\ncert = \"{d}/a.pem\"\nkey = \"{d}/a.key\"\n\
         {head}[upstreams.app]\nservers = [\"{up}\"]\n[[location]]\nmatch = \"/\"\nupstream = \"app\"\n{extra}"
    ))
}

#[tokio::test]
async fn a_request_over_http3_reaches_the_upstream_as_https() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(dir.path(), up.addr, "", "");
    let addr = gw.tls_addrs()[0];
    let reply = within(10, h3::get(addr, "a.test", "/x?y=1"))
        .await
        .expect("an HTTP/3 answer");
    assert_eq!(
        (reply.status.as_u16(), reply.body.as_str()),
        (200, "ok from app")
    );
    assert!(reply.headers.contains_key("date"), "{:?}", reply.headers);
    let seen = up.last();
    assert_eq!(seen.uri, "/x?y=1");
    assert_eq!(seen.headers["x-forwarded-proto"], "https");
    assert_eq!(seen.headers["x-forwarded-for"], "127.0.0.1");
    assert_eq!(seen.headers["host"], "a.test");
}

#[tokio::test]
async fn a_body_over_the_limit_is_refused_before_the_upstream() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(dir.path(), up.addr, "client_max_body_size = 10\n", "");
    let addr = gw.tls_addrs()[0];
    let post = |len: usize| {
        let req = Request::post("https://a.test/upload")
            .header("content-length", len.to_string())
            .body(())
            .unwrap();
        (req, vec![b'x'; len])
    };
    let (req, body) = post(100);
    let reply = within(10, h3::request(addr, "a.test", req, &body))
        .await
        .unwrap();
    assert_eq!(reply.status, 413);
    assert_eq!(up.count(), 0);
    let (req, body) = post(5);
    let reply = within(10, h3::request(addr, "a.test", req, &body))
        .await
        .unwrap();
    assert_eq!(reply.status, 200);
    assert_eq!(up.count(), 1);
}

#[tokio::test]
async fn one_client_has_one_budget_over_every_transport() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let zone = "[zones.per_ip]\nkey = \"$binary_remote_addr\"\nrate = \"1r/m\"\n";
    let gw = quic_gateway(
        dir.path(),
        up.addr,
        "limit = [{ zone = \"per_ip\", burst = 2, nodelay = true }]\n",
        zone,
    );
    let tls = gw.tls_addrs()[0];
    // Three requests, one per transport, spend the burst; the fourth is refused on any.
    assert_eq!(get_text(addr(&gw), "/").await.status, 200);
    let h2 = send_h2(addr(&gw), get("/")).await;
    assert_eq!(h2.status, 200);
    let h3_first = within(10, h3::get(tls, "a.test", "/")).await.unwrap();
    assert_eq!(h3_first.status, 200);
    let refused = within(10, h3::get(tls, "a.test", "/")).await.unwrap();
    assert_eq!(refused.status, 429);
    assert_eq!(get_text(addr(&gw), "/").await.status, 429);
    assert_eq!(up.count(), 3);
}
