//! TLS to upstreams (`[upstreams.NAME] tls`, `https://` servers) through the real
//! gateway: an in-process rustls upstream with an rcgen CA, kept-alive connections
//! reused, every verification failure a 502 counted as `kind="tls"`, client
//! certificates, a stalled handshake cut by `connect_timeout`, and WebSockets tunnelled.

use crate::support;

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_util::{SinkExt, StreamExt};
use hyper_util::rt::TokioIo;
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};
use support::*;
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_tungstenite::tungstenite::handshake::derive_accept_key;
use tokio_tungstenite::tungstenite::protocol::Role;
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::WebSocketStream;

/// A test CA: its certificate written to `dir/{name}.pem`, and what signs leaves.
struct Ca {
    pem: PathBuf,
    der: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new(dir: &Path, name: &str) -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        let cert = params.self_signed(&key).unwrap();
        let pem = dir.join(format!("{name}.pem"));
        std::fs::write(&pem, cert.pem()).unwrap();
        Ca {
            pem,
            der: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// A leaf for `names` (DNS names or IP addresses): its chain and key.
    fn leaf(&self, names: &[&str]) -> (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>) {
        let key = KeyPair::generate().unwrap();
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let cert = CertificateParams::new(names)
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        let key = PrivateKeyDer::Pkcs8(key.serialize_der().into());
        (vec![cert.der().clone()], key)
    }

    /// A leaf for `name` written to `dir/{stem}.pem` and `dir/{stem}.key`.
    fn leaf_files(&self, dir: &Path, stem: &str, name: &str) -> (PathBuf, PathBuf) {
        let key = KeyPair::generate().unwrap();
        let cert = CertificateParams::new(vec![name.to_owned()])
            .unwrap()
            .signed_by(&key, &self.issuer)
            .unwrap();
        let (cert_path, key_path) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A server config for a leaf of `ca` carrying `names`; with `clients`, a client
/// certificate signed by that CA is required.
fn server_config(ca: &Ca, names: &[&str], clients: Option<&Ca>) -> Arc<ServerConfig> {
    let (chain, key) = ca.leaf(names);
    let builder = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap();
    let builder = match clients {
        None => builder.with_no_client_auth(),
        Some(clients) => {
            let mut roots = RootCertStore::empty();
            roots.add(clients.der.clone()).unwrap();
            let verifier = WebPkiClientVerifier::builder_with_provider(roots.into(), provider())
                .build()
                .unwrap();
            builder.with_client_cert_verifier(verifier)
        }
    };
    Arc::new(builder.with_single_cert(chain, key).unwrap())
}

/// An HTTPS upstream on 127.0.0.1:0: answers `hello over tls`, tunnels WebSocket
/// upgrades as an echo, and counts TCP connections and completed handshakes (with the
/// SNI each one sent).
struct TlsUpstream {
    addr: SocketAddr,
    accepted: Arc<AtomicUsize>,
    sni: Arc<Mutex<Vec<Option<String>>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsUpstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsUpstream {
    async fn start(config: Arc<ServerConfig>) -> TlsUpstream {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let accepted = Arc::new(AtomicUsize::new(0));
        let sni: Arc<Mutex<Vec<Option<String>>>> = Arc::default();
        let (counter, names) = (accepted.clone(), sni.clone());
        let acceptor = TlsAcceptor::from(config);
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::SeqCst);
                let (acceptor, names) = (acceptor.clone(), names.clone());
                tokio::spawn(async move {
                    let Ok(tls) = acceptor.accept(tcp).await else {
                        return;
                    };
                    let name = tls.get_ref().1.server_name().map(str::to_owned);
                    names.lock().unwrap().push(name);
                    let service = hyper::service::service_fn(|req| async move {
                        Ok::<_, std::convert::Infallible>(answer(req))
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(tls), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        TlsUpstream {
            addr,
            accepted,
            sni,
            task,
        }
    }

    fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    fn handshakes(&self) -> Vec<Option<String>> {
        self.sni.lock().unwrap().clone()
    }
}

/// `hello over tls`, or a WebSocket echo for an upgrade.
fn answer(mut req: http::Request<hyper::body::Incoming>) -> http::Response<Body> {
    let Some(key) = req.headers().get("sec-websocket-key").cloned() else {
        return text(200, "hello over tls");
    };
    let upgrade = hyper::upgrade::on(&mut req);
    tokio::spawn(async move {
        let upgraded = upgrade.await.expect("upstream side upgraded");
        let mut ws =
            WebSocketStream::from_raw_socket(TokioIo::new(upgraded), Role::Server, None).await;
        while let Some(Ok(message)) = ws.next().await {
            if message.is_close() || ws.send(message).await.is_err() {
                break;
            }
        }
    });
    let mut response = text(101, "");
    let h = response.headers_mut();
    h.insert("upgrade", "websocket".parse().unwrap());
    h.insert("connection", "upgrade".parse().unwrap());
    let accept = derive_accept_key(key.as_bytes());
    h.insert("sec-websocket-accept", accept.parse().unwrap());
    *response.body_mut() = empty();
    response
}

/// A gateway proxying `/` to one server with `upstream` keys (after `servers`), and an
/// admin listener for `/metrics`.
fn config(server: &str, upstream: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
[upstreams.app]
servers = ["{server}"]
{upstream}
[[location]]
match = "/"
upstream = "app"
"#
    )
}

/// The group's `tls` key: the name `app.internal`, checked against `ca`.
fn trusting(ca: &Ca) -> String {
    format!(
        "tls = {{ server_name = \"app.internal\", ca = \"{}\" }}",
        ca.pem.display()
    )
}

/// `tollgate_upstream_failures_total` of `server` for `kind`.
async fn failures(gw: &tollgate::Gateway, server: SocketAddr, kind: &str) -> f64 {
    let admin = gw.admin_addr().expect("admin configured");
    let reply = within(5, send(admin, get("/metrics"))).await;
    let series = format!(
        "tollgate_upstream_failures_total{{upstream=\"app\",server=\"{server}\",kind=\"{kind}\"}} "
    );
    let line = reply.body.lines().find(|line| line.starts_with(&series));
    let value = line.unwrap_or_else(|| panic!("no {series} in:\n{}", reply.body));
    value[series.len()..].parse().unwrap()
}

#[tokio::test]
async fn a_request_reaches_an_https_upstream_and_its_connection_is_reused() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let up = TlsUpstream::start(server_config(&ca, &["app.internal"], None)).await;
    let tls = trusting(&ca);
    let gw = gateway(&config(&up.addr.to_string(), &tls));
    for _ in 0..2 {
        let reply = within(5, get_text(addr(&gw), "/")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        assert_eq!(reply.body, "hello over tls");
    }
    assert_eq!(up.accepted(), 1, "the second request reused the connection");
    assert_eq!(up.handshakes(), [Some("app.internal".to_owned())]);
    assert_eq!(failures(&gw, up.addr, "tls").await, 0.0);
}

#[tokio::test]
async fn an_ip_address_server_is_sent_no_sni_and_checked_against_its_ip() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let up = TlsUpstream::start(server_config(&ca, &["127.0.0.1"], None)).await;
    let tls = format!("tls = {{ ca = \"{}\" }}", ca.pem.display());
    let gw = gateway(&config(&format!("https://{}", up.addr), &tls));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(up.handshakes(), [None]);
}

#[tokio::test]
async fn a_certificate_from_another_ca_is_a_502_counted_as_tls() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let (ca, other) = (Ca::new(dir.path(), "ca"), Ca::new(dir.path(), "other"));
    let up = TlsUpstream::start(server_config(&other, &["app.internal"], None)).await;
    let tls = trusting(&ca);
    let gw = gateway(&config(&up.addr.to_string(), &tls));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 502);
    assert_eq!(failures(&gw, up.addr, "tls").await, 1.0);
    assert_eq!(failures(&gw, up.addr, "connect").await, 0.0);
    assert!(up.handshakes().is_empty());
}

#[tokio::test]
async fn a_certificate_for_another_name_is_a_502() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let up = TlsUpstream::start(server_config(&ca, &["app.internal"], None)).await;
    let tls = format!(
        "tls = {{ server_name = \"other.internal\", ca = \"{}\" }}",
        ca.pem.display()
    );
    let gw = gateway(&config(&up.addr.to_string(), &tls));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 502);
    assert_eq!(failures(&gw, up.addr, "tls").await, 1.0);
}

#[tokio::test]
async fn the_handshake_error_says_what_was_wrong_with_the_certificate() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let (ca, other) = (Ca::new(dir.path(), "ca"), Ca::new(dir.path(), "other"));
    let up = TlsUpstream::start(server_config(&other, &["app.internal"], None)).await;
    let tls = trusting(&ca);
    let config = tollgate::config::from_str(&config("127.0.0.1:1", &tls), Path::new("/x.toml"))
        .unwrap_or_else(|e| panic!("{e}"));
    let group = tollgate::upstream::tls::GroupTls::of(&config.upstreams[0]).expect("TLS on");
    let server = &group.into_servers()[0];
    let err = tollgate::upstream::h1::UpstreamConn::connect(
        up.addr,
        Some(server),
        Duration::from_secs(5),
    )
    .await
    .expect_err("refused");
    let message = err.to_string();
    assert!(
        message.starts_with(&format!(
            "TLS handshake with {} (app.internal) failed: ",
            up.addr
        )),
        "{message}"
    );
    assert!(message.contains("UnknownIssuer"), "{message}");
}

#[tokio::test]
async fn a_plain_http_server_in_a_tls_group_is_a_502() {
    let _shared = support::shared();
    let up = Upstream::named("plain").await;
    let gw = gateway(&config(&format!("https://{}", up.addr), ""));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 502);
    assert_eq!(failures(&gw, up.addr, "tls").await, 1.0);
}

#[tokio::test]
async fn a_client_certificate_is_offered_when_the_upstream_requires_one() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let (ca, clients) = (Ca::new(dir.path(), "ca"), Ca::new(dir.path(), "clients"));
    let (cert, key) = clients.leaf_files(dir.path(), "client", "gateway.internal");
    let up = TlsUpstream::start(server_config(&ca, &["app.internal"], Some(&clients))).await;

    let with_cert = format!(
        "tls = {{ server_name = \"app.internal\", ca = \"{}\", cert = \"{}\", key = \"{}\" }}",
        ca.pem.display(),
        cert.display(),
        key.display()
    );
    let gw = gateway(&config(&up.addr.to_string(), &with_cert));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body, "hello over tls");

    let without = trusting(&ca);
    let gw = gateway(&config(&up.addr.to_string(), &without));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 502);
    // TLS 1.3: the client's handshake is done before the server has judged it, so the
    // refusal comes with the first read of the response; it is still a TLS failure.
    let tls = failures(&gw, up.addr, "tls").await;
    let broken = failures(&gw, up.addr, "broken").await;
    assert_eq!((tls, broken), (1.0, 0.0));
}

#[tokio::test]
async fn a_stalled_handshake_is_cut_by_connect_timeout() {
    let _shared = support::shared();
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listener.local_addr().unwrap();
    // Accepts and never answers the ClientHello.
    let task = tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((tcp, _)) = listener.accept().await {
            held.push(tcp);
        }
    });
    let gw = gateway(&config(
        &format!("https://{up}"),
        "connect_timeout = \"300ms\"",
    ));
    let start = Instant::now();
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 504);
    assert!(
        start.elapsed() < Duration::from_secs(3),
        "{:?}",
        start.elapsed()
    );
    assert_eq!(failures(&gw, up, "connect_timeout").await, 1.0);
    task.abort();
}

#[tokio::test]
async fn a_websocket_tunnels_to_a_tls_upstream() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let up = TlsUpstream::start(server_config(&ca, &["app.internal"], None)).await;
    let tls = trusting(&ca);
    let gw = gateway(&config(&up.addr.to_string(), &tls));
    let stream = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
    let url = format!("ws://{}/ws", addr(&gw));
    let (mut ws, response) = within(5, tokio_tungstenite::client_async(url, stream))
        .await
        .expect("websocket handshake through the gateway");
    assert_eq!(response.status(), 101);
    for message in [
        Message::text("over tls"),
        Message::binary(vec![7u8; 100_000]),
    ] {
        within(5, ws.send(message.clone())).await.unwrap();
        let echoed = within(5, ws.next()).await.unwrap().unwrap();
        assert_eq!(echoed, message);
    }
    within(5, ws.close(None)).await.unwrap();
}

/// An upstream that answers with a body that ends when the connection does (no length,
/// not chunked), then drops TCP without TLS's `close_notify`, as many servers do: the
/// client gets the whole body, as from nginx (which reads such an end as the body's).
#[tokio::test]
async fn a_body_read_until_close_may_end_without_close_notify() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new(dir.path(), "ca");
    let acceptor = TlsAcceptor::from(server_config(&ca, &["app.internal"], None));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = listener.local_addr().unwrap();
    let task = tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (tcp, _) = listener.accept().await.unwrap();
        let mut tls = acceptor.accept(tcp).await.unwrap();
        let mut head = vec![0u8; 4096];
        let _ = tls.read(&mut head).await.unwrap();
        let answer = b"HTTP/1.1 200 OK\r\nconnection: close\r\n\r\nuntil the end";
        tls.write_all(answer).await.unwrap();
        tls.flush().await.unwrap();
        // The TCP stream alone is closed: no close_notify goes out.
        let (tcp, _) = tls.into_inner();
        drop(tcp);
    });
    let tls = trusting(&ca);
    let gw = gateway(&config(&up.to_string(), &tls));
    let reply = within(5, get_text(addr(&gw), "/")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    assert_eq!(reply.body, "until the end");
    task.await.unwrap();
}
