//! `$ja4` through the real gateway: the fingerprint of each client's own ClientHello,
//! from rustls clients told apart by version and ALPN, and from headless Chromium, whose
//! cipher list has the published JA4 part `t13d15…_8daaf6152771`.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use support::accept_any::AcceptAny;
use support::*;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// A gateway answering every request on TLS with its `$ja4` (and keying a zone by it).
fn ja4_gateway(dir: &Path) -> tollgate::Gateway {
    write_self_signed(dir, "cert", "ja4.test");
    let d = dir.display();
    gateway(&format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nlisten_tls = [\"127.0.0.1:0\"]\n[log]\naccess = \"off\"\n\
         [tls]\n[[tls.certificates]]\ncert = \"{d}/cert.pem\"\nkey = \"{d}/cert.key\"\n\
         [zones.by_client]\nkey = \"$ja4\"\nrate = \"100r/s\"\n\
         [[location]]\nmatch = \"/\"\nlimit = [{{ zone = \"by_client\", burst = 100 }}]\n\
         return = {{ status = 200, body = \"$ja4\" }}\n"
    ))
}

/// What `$ja4` is for a rustls client offering `versions` and `alpn`.
async fn ja4_of(
    addr: SocketAddr,
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> String {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("ja4.test").unwrap();
    let tls = within(5, TlsConnector::from(Arc::new(config)).connect(name, tcp))
        .await
        .unwrap();
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let req = http::Request::get("https://ja4.test/")
        .body(empty())
        .unwrap();
    let io = TokioIo::new(tls);
    let response = if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        sender.send_request(req).await.unwrap()
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io).await.unwrap();
        tokio::spawn(conn);
        let req = http::Request::get("/")
            .header("host", "ja4.test")
            .body(empty())
            .unwrap();
        sender.send_request(req).await.unwrap()
    };
    let reply = within(5, read(response)).await;
    assert_eq!(reply.status, 200);
    reply.body
}

#[tokio::test]
async fn each_client_gets_the_fingerprint_of_its_own_hello() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let gw = ja4_gateway(dir.path());
    let tls = gw.tls_addrs()[0];
    let all = rustls::ALL_VERSIONS;
    let h2 = ja4_of(tls, all, &[b"h2", b"http/1.1"]).await;
    let again = ja4_of(tls, all, &[b"h2", b"http/1.1"]).await;
    let http1 = ja4_of(tls, all, &[b"http/1.1"]).await;
    let tls12 = ja4_of(tls, &[&rustls::version::TLS12], &[]).await;
    // The same client the same fingerprint, though its random and key shares change.
    assert_eq!(h2, again);
    let shape = |ja4: &str| ja4.split('_').map(str::len).collect::<Vec<_>>();
    for ja4 in [&h2, &http1, &tls12] {
        assert_eq!(shape(ja4), [10, 12, 12], "{ja4}");
    }
    assert!(h2.starts_with("t13d") && h2[4..10].ends_with("h2"), "{h2}");
    assert!(
        http1.starts_with("t13d") && http1[4..10].ends_with("h1"),
        "{http1}"
    );
    // Only the ALPN differs: the same ciphers, the same extensions.
    assert_eq!(h2[10..], http1[10..]);
    assert!(
        tls12.starts_with("t12d") && tls12[4..10].ends_with("00"),
        "{tls12}"
    );
    // Plain HTTP has none.
    let plain = raw_exchange(
        addr(&gw),
        "GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!((plain.status, plain.body.as_str()), (200, ""));
}

#[tokio::test]
async fn chromium_s_fingerprint_has_chrome_s_published_cipher_part() {
    if !chromium::available("$ja4 from Chromium") {
        return;
    }
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let gw = ja4_gateway(dir.path());
    let port = gw.tls_addrs()[0].port();
    let mut browser = chromium::Browser::start_with(&[
        "--ignore-certificate-errors",
        "--host-resolver-rules=MAP ja4.test 127.0.0.1",
    ])
    .await;
    browser.open(&format!("https://ja4.test:{port}/")).await;
    let seen = browser.eval("document.body.innerText").await;
    let ja4 = seen.as_str().unwrap_or_default().trim();
    // FoxIO's and browserleaks' Chrome: 15 ciphers (GREASE aside), SNI, ALPN h2, and
    // `8daaf6152771` the hash of its sorted cipher list.
    assert!(
        ja4.starts_with("t13d15") && ja4.contains("h2_8daaf6152771_"),
        "{ja4}"
    );
}
