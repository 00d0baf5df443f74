//! Sites over TLS, beside nginx: when the SNI name and the Host disagree the Host decides
//! (HTTP/2 clients reuse one connection for every name its certificate covers), and a
//! request without a Host (HTTP/1.0) gets the default site, as over plain TCP: nginx does
//! not look at the SNI name then.

use std::fmt::Write as _;
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

use crate::support::nginx::{self, Nginx};
use crate::support::{self, free_port, gateway, within};

/// Writes `dir/site.pem` (a leaf for `a.test`, `b.test` and `c.test`, then its CA) and
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
    let params =
        CertificateParams::new(vec!["a.test".into(), "b.test".into(), "c.test".into()]).unwrap();
    let leaf = params.signed_by(&key, &issuer).unwrap();
    std::fs::write(dir.join("site.pem"), leaf.pem() + &ca.pem()).unwrap();
    std::fs::write(dir.join("site.key"), key.serialize_pem()).unwrap();
    let mut roots = RootCertStore::empty();
    roots.add(ca.der().clone()).unwrap();
    roots
}

/// The sites, in file order, as (id, names, on the TLS port too): the nameless default
/// first, and `c.test` on the plain port only.
const SITES: [(&str, &[&str], bool); 4] = [
    ("default", &[], true),
    ("a", &["a.test"], true),
    ("b", &["b.test"], true),
    ("c", &["c.test"], false),
];

/// The SNI name (`None`: plain TCP), the request head (lines split by `|`) and the site
/// that should answer: what nginx does.
#[rustfmt::skip] // A table: one request a line.
const REQUESTS: [(Option<&str>, &str, &str); 9] = [
    // No Host: nginx looks up the name `""` (else the default), SNI or not
    // (`ngx_http_process_request_header`), where the spec has the SNI name stand in.
    (Some("b.test"), "GET / HTTP/1.0",                                 "default"),
    (Some("a.test"), "GET / HTTP/1.0",                                 "default"),
    (Some("c.test"), "GET / HTTP/1.0",                                 "default"),
    // A Host decides, whatever the SNI name.
    (Some("a.test"), "GET / HTTP/1.1|Host: b.test|Connection: close",  "b"),
    (Some("b.test"), "GET / HTTP/1.1|Host: B.test.:443|Connection: close", "b"),
    (Some("b.test"), "GET / HTTP/1.1|Host: other.test|Connection: close", "default"),
    (Some("a.test"), "GET / HTTP/1.1|Host: c.test|Connection: close",  "default"),
    // Plain: no SNI to fall back on.
    (None,           "GET / HTTP/1.0",                                 "default"),
    (None,           "GET / HTTP/1.1|Host: c.test|Connection: close",  "c"),
];

/// tollgate's configuration of [`SITES`], its certificate in `dir`.
fn tollgate_config(dir: &Path, plain: u16, tls: u16) -> String {
    let (cert, key) = (dir.join("site.pem"), dir.join("site.key"));
    let mut text = format!(
        "[server]\nlisten = [\"127.0.0.1:{plain}\"]\nlisten_tls = [\"127.0.0.1:{tls}\"]\n\
         workers = 1\n[log]\naccess = \"off\"\n\
         [[tls.certificates]]\ncert = \"{}\"\nkey = \"{}\"\n",
        cert.display(),
        key.display()
    );
    for (id, names, on_tls) in SITES {
        let names: Vec<String> = names.iter().map(|n| format!("\"{n}\"")).collect();
        let _ = writeln!(text, "[[site]]\nnames = [{}]", names.join(", "));
        if !on_tls {
            let _ = writeln!(text, "listen = [\"127.0.0.1:{plain}\"]");
        }
        let _ = writeln!(
            text,
            "[[site.location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"{id}\" }}"
        );
    }
    text
}

/// nginx's configuration of [`SITES`] under `prefix`, the certificate in `certs`.
fn nginx_config(prefix: &Path, certs: &Path, plain: u16, tls: u16) -> String {
    let mut servers = format!(
        " ssl_certificate {};\n ssl_certificate_key {};\n",
        certs.join("site.pem").display(),
        certs.join("site.key").display()
    );
    for (id, names, on_tls) in SITES {
        // A server without names has the name `""` in nginx, not in tollgate.
        let names = if names.is_empty() {
            "_".to_owned()
        } else {
            names.join(" ")
        };
        let _ = writeln!(servers, " server {{\n  listen 127.0.0.1:{plain};");
        if on_tls {
            let _ = writeln!(servers, "  listen 127.0.0.1:{tls} ssl;");
        }
        let _ = writeln!(
            servers,
            "  server_name {names};\n  location / {{ return 200 \"{id}\"; }}\n }}"
        );
    }
    nginx::http(prefix, &servers)
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

/// The site that answered (the body of a 200), else the status line, from all that
/// came back.
fn site_of(answer: &str) -> String {
    match answer.split_once("\r\n\r\n") {
        Some((head, body)) if head.get(8..13) == Some(" 200 ") => body.to_owned(),
        Some((head, _)) => head.lines().next().unwrap_or_default().to_owned(),
        None => format!("no response: {answer:?}"),
    }
}

/// What the server on `plain` or `tls` (by [`REQUESTS`]' SNI) answers to each request.
async fn answers(plain: SocketAddr, tls: SocketAddr, roots: &RootCertStore) -> Vec<String> {
    let mut answers = Vec::new();
    for (sni, head, _) in REQUESTS {
        let request = format!("{}\r\n\r\n", head.replace('|', "\r\n"));
        let answer = match sni {
            Some(sni) => exchange_tls(tls, roots, sni, &request).await,
            None => exchange_plain(plain, &request).await,
        };
        answers.push(site_of(&answer));
    }
    answers
}

#[tokio::test]
async fn over_tls_the_host_decides_and_sni_does_not_stand_in_for_a_missing_one() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let roots = certificate(dir.path());
    let (plain, tls) = (free_port(), free_port());
    let _gw = gateway(&tollgate_config(dir.path(), plain, tls));
    let loopback = |port| SocketAddr::from(([127, 0, 0, 1], port));
    let ours = answers(loopback(plain), loopback(tls), &roots).await;
    let expected: Vec<&str> = REQUESTS.iter().map(|(_, _, site)| *site).collect();
    if nginx::available("the sites TLS conformance test") {
        let nginx = Nginx::start_on(
            2,
            |prefix, ports| nginx_config(prefix, dir.path(), ports[0], ports[1]),
            &[],
        );
        let theirs = answers(nginx.addrs[0], nginx.addrs[1], &roots).await;
        assert_eq!(theirs, expected, "nginx (the table is wrong)");
    }
    let mut differences = String::new();
    for ((sni, head, site), ours) in REQUESTS.iter().zip(&ours) {
        if site != ours {
            let _ = writeln!(
                differences,
                "SNI {sni:?} {head:?}: nginx {site:?}, tollgate {ours:?}"
            );
        }
    }
    assert!(differences.is_empty(), "{differences}");
}

#[tokio::test]
async fn a_444_default_closes_a_tls_connection_after_the_handshake_without_a_byte() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let roots = certificate(dir.path());
    let tls = free_port();
    let _gw = gateway(&format!(
        "[server]\nlisten_tls = [\"127.0.0.1:{tls}\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [[tls.certificates]]\ncert = \"{}\"\nkey = \"{}\"\n\
         [[site]]\nnames = [\"a.test\"]\n[[site.location]]\nmatch = \"/\"\n\
         return = {{ status = 200, body = \"a\" }}\n\
         [[site]]\ndefault = true\n[[site.location]]\nmatch = \"/\"\nreturn = {{ status = 444 }}\n",
        dir.path().join("site.pem").display(),
        dir.path().join("site.key").display()
    ));
    let tls_addr = SocketAddr::from(([127, 0, 0, 1], tls));
    let close = "Connection: close\r\n";
    let request = format!("GET / HTTP/1.1\r\nHost: scanner.test\r\n{close}\r\n");
    // The handshake succeeds (`exchange_tls` asserts it); then nothing comes back, and
    // the connection ends well before `read_all` would give up on it (3 s).
    let started = std::time::Instant::now();
    assert_eq!(exchange_tls(tls_addr, &roots, "a.test", &request).await, "");
    assert!(started.elapsed() < Duration::from_secs(2), "left open");
    let request = format!("GET / HTTP/1.1\r\nHost: a.test\r\n{close}\r\n");
    let answer = exchange_tls(tls_addr, &roots, "a.test", &request).await;
    assert_eq!(site_of(&answer), "a");
}
