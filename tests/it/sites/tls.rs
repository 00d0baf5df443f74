//! Sites over TLS: the SNI name stands in for a missing Host (an HTTP/1.0 request), and
//! when both are there and disagree the Host decides (as in nginx; HTTP/2 clients reuse
//! one connection for every name its certificate covers).

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::ServerName;
use rustls::{ClientConfig, RootCertStore};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

use crate::support::{self, free_port, gateway, within};

/// Writes `dir/site.pem` (a leaf for `a.test` and `b.test`, then its CA) and
/// `dir/site.key`; returns the roots a client needs to trust it.
pub(super) fn certificate(dir: &Path) -> RootCertStore {
    let ca_key = KeyPair::generate().unwrap();
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "tollgate sites test CA");
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let issuer = Issuer::new(ca_params, ca_key);
    let key = KeyPair::generate().unwrap();
    let params = CertificateParams::new(vec!["a.test".to_owned(), "b.test".to_owned()]).unwrap();
    let leaf = params.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("site.pem"), leaf.pem() + &ca.pem()).unwrap();
    std::fs::write(dir.join("site.key"), key.serialize_pem()).unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    roots
}

/// A plain and a TLS port; a nameless default site first, then `a.test` and `b.test`.
fn config(dir: &Path, plain: u16, tls: u16) -> String {
    let (cert, key) = (dir.join("site.pem"), dir.join("site.key"));
    let mut text = format!(
        "[server]\nlisten = [\"127.0.0.1:{plain}\"]\nlisten_tls = [\"127.0.0.1:{tls}\"]\n\
         workers = 1\n[log]\naccess = \"off\"\n\
         [[tls.certificates]]\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    );
    for (names, body) in [("", "default"), ("\"a.test\"", "a"), ("\"b.test\"", "b")] {
        if names.is_empty() {
            text.push_str("[[site]]\n");
        } else {
            text.push_str(&format!("[[site]]\nnames = [{names}]\n"));
        }
        text.push_str(&format!(
            "[[site.location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"{body}\" }}\n"
        ));
    }
    text
}

/// Everything the server sends after `request`, over TLS with `sni`, until it closes.
async fn exchange_tls(addr: SocketAddr, roots: &RootCertStore, sni: &str, request: &str) -> String {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut client = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots.clone())
        .with_no_client_auth();
    client.alpn_protocols = vec![b"http/1.1".to_vec()];
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(sni.to_owned()).unwrap();
    let connect = TlsConnector::from(Arc::new(client)).connect(name, tcp);
    let mut stream = within(5, connect).await.expect("TLS handshake");
    stream.write_all(request.as_bytes()).await.unwrap();
    read_all(&mut stream).await
}

/// The same over plain TCP.
async fn exchange_plain(addr: SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.expect("connect");
    stream.write_all(request.as_bytes()).await.unwrap();
    read_all(&mut stream).await
}

/// What arrives until the peer closes (or 3 s pass); a close without `close_notify` is
/// no error here, the bytes before it are what counts.
async fn read_all(stream: &mut (impl AsyncReadExt + Unpin)) -> String {
    let mut received = Vec::new();
    let mut chunk = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + Duration::from_secs(3);
    while let Ok(Ok(n)) = tokio::time::timeout_at(deadline, stream.read(&mut chunk)).await {
        if n == 0 {
            break;
        }
        received.extend_from_slice(&chunk[..n]);
    }
    String::from_utf8_lossy(&received).into_owned()
}

/// The body of a whole response in `text` (`""` when there is no head).
fn body(text: &str) -> &str {
    text.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

#[tokio::test]
async fn sni_names_the_site_of_a_request_without_host_and_host_wins_over_sni() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let roots = certificate(dir.path());
    let (plain, tls) = (free_port(), free_port());
    let _gw = gateway(&config(dir.path(), plain, tls));
    let tls_addr = SocketAddr::from(([127, 0, 0, 1], tls));
    let plain_addr = SocketAddr::from(([127, 0, 0, 1], plain));
    let close = "Connection: close\r\n";
    for (sni, request, site) in [
        ("b.test", "GET / HTTP/1.0\r\n\r\n".to_owned(), "b"),
        ("a.test", "GET / HTTP/1.0\r\n\r\n".to_owned(), "a"),
        (
            "a.test",
            format!("GET / HTTP/1.1\r\nHost: b.test\r\n{close}\r\n"),
            "b",
        ),
        (
            "b.test",
            format!("GET / HTTP/1.1\r\nHost: B.test.:443\r\n{close}\r\n"),
            "b",
        ),
        (
            "b.test",
            format!("GET / HTTP/1.1\r\nHost: other.test\r\n{close}\r\n"),
            "default",
        ),
    ] {
        let answer = exchange_tls(tls_addr, &roots, sni, &request).await;
        assert!(
            answer.starts_with("HTTP/1."),
            "SNI {sni} {request:?}: {answer:?}"
        );
        assert_eq!(body(&answer), site, "SNI {sni} {request:?}: {answer:?}");
    }
    // Without TLS there is no SNI: a request without a Host gets the default site.
    let answer = exchange_plain(plain_addr, "GET / HTTP/1.0\r\n\r\n").await;
    assert_eq!(body(&answer), "default", "{answer:?}");
}
