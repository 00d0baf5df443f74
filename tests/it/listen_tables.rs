//! Listener tables: `{ addr = "…", http2 = false }` serves HTTP/1.x only, as an nginx
//! `listen` without `http2`: no ALPN `h2` over TLS, no h2c prior knowledge in clear text
//! (an HTTP/2 preface is then a request line nginx answers 400).

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use support::nginx::Nginx;
use support::raw::read_response;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

const PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";

/// A self-signed certificate for `a.test` in `dir`.
fn certificate(dir: &Path) -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec!["a.test".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (pem, key_pem) = (dir.join("a.pem"), dir.join("a.key"));
    std::fs::write(&pem, cert.pem()).unwrap();
    std::fs::write(&key_pem, key.serialize_pem()).unwrap();
    format!(
        "[[tls.certificates]]\ncert = \"{}\"\nkey = \"{}\"\n",
        pem.display(),
        key_pem.display()
    )
}

/// Two plain and two TLS listeners, the second of each with `http2 = false`; every
/// request answered 200 "ok".
fn config(dir: &Path) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0", {{ addr = "127.0.0.1:0", http2 = false }}]
listen_tls = ["127.0.0.1:0", {{ addr = "127.0.0.1:0", http2 = false }}]
workers = 1
[log]
access = "off"
[[location]]
match = "/"
return = {{ status = 200, body = "ok" }}
{}"#,
        certificate(dir)
    )
}

/// The protocol ALPN agrees on when the client offers `h2` then `http/1.1`.
async fn agreed(addr: SocketAddr) -> Option<Vec<u8>> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny))
        .with_no_client_auth();
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("a.test").unwrap();
    let stream = within(5, TlsConnector::from(Arc::new(config)).connect(name, tcp))
        .await
        .expect("TLS handshake");
    stream.get_ref().1.alpn_protocol().map(<[u8]>::to_vec)
}

#[tokio::test]
async fn a_tls_listener_without_http2_agrees_on_http1_only() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config(dir.path()));
    let tls = gw.tls_addrs();
    assert_eq!(agreed(tls[0]).await.as_deref(), Some(&b"h2"[..]));
    assert_eq!(agreed(tls[1]).await.as_deref(), Some(&b"http/1.1"[..]));
}

#[tokio::test]
async fn a_plain_listener_without_http2_serves_http1_and_refuses_prior_knowledge() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config(dir.path()));
    let plain = gw.local_addrs();
    let reply = within(5, send_h2(plain[0], get("/"))).await;
    assert_eq!(reply.status, 200);
    let reply = within(5, send(plain[1], get("/"))).await;
    assert_eq!(reply.status, 200);
    let mut client = TcpStream::connect(plain[1]).await.unwrap();
    client.write_all(PREFACE).await.unwrap();
    let answer = within(5, read_response(&mut client)).await;
    let answer = answer.expect("an HTTP/1.1 answer");
    assert_eq!(answer.status, 400);
    assert!(support::raw::closes(&mut client).await, "kept open");
}

#[tokio::test]
async fn an_http2_preface_on_a_listener_without_http2_is_answered_as_nginx_does() {
    let _shared = support::shared();
    if !support::nginx::available("the nginx comparison of a listener without http2") {
        return;
    }
    let nginx = Nginx::start(
        |dir: &Path, port: u16| {
            let server =
                format!("server {{ listen 127.0.0.1:{port}; location / {{ return 200 ok; }} }}\n");
            support::nginx::http(dir, &server)
        },
        &[],
    );
    let dir = tempfile::tempdir().unwrap();
    let gw = gateway(&config(dir.path()));
    for bytes in [PREFACE, b"PRI * HTTP/2.0\r\n\r\n"] {
        let mut statuses = Vec::new();
        for addr in [nginx.addr, gw.local_addrs()[1]] {
            let mut client = TcpStream::connect(addr).await.unwrap();
            client.write_all(bytes).await.unwrap();
            let answer = within(5, read_response(&mut client)).await;
            statuses.push(answer.map(|a| a.status));
        }
        assert_eq!(statuses[0], Some(400), "nginx");
        assert_eq!(
            statuses[1],
            statuses[0],
            "{:?}",
            String::from_utf8_lossy(bytes)
        );
    }
}

/// A fixed port, so that a reload that turns `http2` on has the same address listen anew.
#[tokio::test]
async fn a_reload_turns_http2_on_for_a_listener() {
    let _shared = support::shared();
    let port = free_port();
    let plain = |item: &str| {
        format!(
            "[server]\nlisten = [{item}]\nworkers = 1\n[log]\naccess = \"off\"\n\
             [[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"ok\" }}\n"
        )
    };
    let off = plain(&format!("{{ addr = \"127.0.0.1:{port}\", http2 = false }}"));
    let gw = gateway(&off);
    let at = gw.local_addrs()[0];
    let prior_knowledge = || async {
        let mut client = TcpStream::connect(at).await.unwrap();
        client.write_all(PREFACE).await.unwrap();
        within(5, read_response(&mut client))
            .await
            .map(|a| a.status)
    };
    assert_eq!(prior_knowledge().await, Some(400));
    gw.reload(&parse(&plain(&format!("\"127.0.0.1:{port}\""))))
        .unwrap();
    assert_eq!(gw.local_addrs(), [at]);
    let reply = within(5, send_h2(at, get("/"))).await;
    assert_eq!(reply.status, 200);
}
