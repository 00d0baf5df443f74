//! `listen_tls`: certificates made at run time (rcgen, and openssl for RSA), a real TLS
//! client (rustls) speaking HTTP/1.1 and HTTP/2 through the gateway to a real upstream,
//! SNI choosing between certificates, resumption and a certificate swapped by a reload.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::Request;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, HandshakeKind, RootCertStore};
use support::*;
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// A test CA that signs leaf certificates.
struct Ca {
    cert: CertificateDer<'static>,
    issuer: Issuer<'static, KeyPair>,
}

impl Ca {
    fn new() -> Ca {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, "tollgate test CA");
        let cert = params.self_signed(&key).unwrap();
        Ca {
            cert: cert.der().clone(),
            issuer: Issuer::new(params, key),
        }
    }

    /// Writes a leaf for `names` signed by this CA (with the CA in the chain) to
    /// `dir/{stem}.pem` and `dir/{stem}.key`.
    fn leaf(&self, dir: &Path, stem: &str, names: &[&str], key: KeyPair) {
        let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(names).unwrap();
        params
            .distinguished_name
            .push(DnType::CommonName, stem.to_owned());
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        let ca = pem("CERTIFICATE", &self.cert);
        std::fs::write(dir.join(format!("{stem}.pem")), cert.pem() + &ca).unwrap();
        std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
    }

    fn roots(&self) -> RootCertStore {
        let mut roots = RootCertStore::empty();
        roots.add(self.cert.clone()).unwrap();
        roots
    }
}

fn pem(label: &str, der: &[u8]) -> String {
    use std::fmt::Write;
    const B64: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in der.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | u32::from(*b) << (16 - 8 * i));
        for i in 0..4 {
            if i <= chunk.len() {
                text.push(B64[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                text.push('=');
            }
        }
    }
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in text.as_bytes().chunks(64) {
        let _ = writeln!(out, "{}", std::str::from_utf8(line).unwrap());
    }
    let _ = writeln!(out, "-----END {label}-----");
    out
}

fn config(dir: &Path, up: SocketAddr, certs: &[&str], extra_tls: &str) -> String {
    let mut text = format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
listen_tls = ["127.0.0.1:0"]
workers = 2
[log]
access = "off"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
[tls]
{extra_tls}
"#
    );
    for stem in certs {
        let (cert, key) = (
            dir.join(format!("{stem}.pem")),
            dir.join(format!("{stem}.key")),
        );
        text.push_str(&format!(
            "[[tls.certificates]]\ncert = \"{}\"\nkey = \"{}\"\n",
            cert.display(),
            key.display()
        ));
    }
    text
}

fn client(roots: RootCertStore, alpn: &[&[u8]]) -> Arc<ClientConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A gateway serving one certificate, for `a.test` (signed by the returned CA), in front of
/// an upstream; the directory and the upstream live as long as the values returned.
async fn one_certificate() -> (tempfile::TempDir, Ca, Upstream, tollgate::Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["a.test"], KeyPair::generate().unwrap());
    let up = Upstream::named("app").await;
    let gw = gateway(&config(dir.path(), up.addr, &["a"], ""));
    (dir, ca, up, gw)
}

async fn connect(addr: SocketAddr, config: Arc<ClientConfig>, sni: &str) -> TlsStream<TcpStream> {
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(sni.to_owned()).unwrap();
    within(5, TlsConnector::from(config).connect(name, tcp))
        .await
        .expect("TLS handshake")
}

/// One GET over an established TLS connection, HTTP/2 when ALPN chose it.
async fn get_over(stream: TlsStream<TcpStream>, path: &str) -> Reply {
    let h2 = stream.get_ref().1.alpn_protocol() == Some(b"h2");
    let req = Request::get(path)
        .header("host", "a.test")
        .body(empty())
        .unwrap();
    let io = TokioIo::new(stream);
    let response = if h2 {
        let (mut sender, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .expect("h2 handshake");
        tokio::spawn(conn);
        sender.send_request(req).await.expect("response")
    } else {
        let (mut sender, conn) = hyper::client::conn::http1::handshake(io)
            .await
            .expect("h1 handshake");
        tokio::spawn(conn);
        sender.send_request(req).await.expect("response")
    };
    read(response).await
}

/// The served leaf's common name.
fn served(stream: &TlsStream<TcpStream>) -> String {
    let leaf = &stream
        .get_ref()
        .1
        .peer_certificates()
        .expect("a certificate")[0];
    let (_, cert) = x509_parser::parse_x509_certificate(leaf).unwrap();
    let cn = cert.subject().iter_common_name().next().unwrap();
    cn.as_str().unwrap().to_owned()
}

#[tokio::test]
async fn h1_and_h2_over_tls_reach_the_upstream_as_https() {
    let _shared = support::shared();
    let (_dir, ca, up, gw) = one_certificate().await;
    let tls_addr = gw.tls_addrs()[0];

    for (alpn, want) in [
        (&b"http/1.1"[..], http::Version::HTTP_11),
        (b"h2", http::Version::HTTP_2),
    ] {
        let stream = connect(tls_addr, client(ca.roots(), &[alpn]), "a.test").await;
        assert_eq!(stream.get_ref().1.alpn_protocol(), Some(alpn));
        let reply = within(5, get_over(stream, "/x")).await;
        assert_eq!(
            (reply.status.as_u16(), reply.body.as_str()),
            (200, "ok from app")
        );
        assert_eq!(reply.version, want);
        let seen = up.last();
        assert_eq!(seen.headers["x-forwarded-proto"], "https");
    }
    // A client offering both gets h2; one offering none gets HTTP/1.1.
    let both = connect(
        tls_addr,
        client(ca.roots(), &[b"h2", b"http/1.1"]),
        "a.test",
    )
    .await;
    assert_eq!(both.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    let none = connect(tls_addr, client(ca.roots(), &[]), "a.test").await;
    assert_eq!(none.get_ref().1.alpn_protocol(), None);
    assert_eq!(within(5, get_over(none, "/")).await.status, 200);
    // The plain listener still speaks plain HTTP.
    assert_eq!(get_text(addr(&gw), "/").await.status, 200);
}

/// RFC 9113 §3.3: once ALPN agreed on `h2`, only HTTP/2 may follow. HTTP/1.1 bytes after
/// it are a broken preface: GOAWAY PROTOCOL_ERROR and close (h2spec 3.5/2), no HTTP/1.1
/// answer and nothing upstream.
#[tokio::test]
async fn http1_after_alpn_h2_is_refused_with_goaway() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _shared = support::shared();
    let (_dir, ca, up, gw) = one_certificate().await;
    let mut stream = connect(gw.tls_addrs()[0], client(ca.roots(), &[b"h2"]), "a.test").await;
    assert_eq!(stream.get_ref().1.alpn_protocol(), Some(&b"h2"[..]));
    stream
        .write_all(b"GET / HTTP/1.1\r\nHost: a.test\r\n\r\n")
        .await
        .unwrap();
    let mut answer = Vec::new();
    let _ = within(5, stream.read_to_end(&mut answer)).await;
    // The server's SETTINGS, then GOAWAY (type 7) whose error code is PROTOCOL_ERROR.
    assert_eq!(answer.len(), 26, "{answer:?}");
    assert_eq!((answer[3], answer[12]), (0x4, 0x7), "{answer:?}");
    assert_eq!(answer[22..], [0, 0, 0, 1]);
    assert_eq!(up.count(), 0);
}

#[tokio::test]
async fn sni_chooses_the_certificate_and_the_first_is_the_default() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["a.test"], KeyPair::generate().unwrap());
    ca.leaf(
        dir.path(),
        "b",
        &["b.test", "*.b.test"],
        KeyPair::generate().unwrap(),
    );
    let up = Upstream::named("app").await;
    let gw = gateway(&config(dir.path(), up.addr, &["a", "b"], ""));
    let tls_addr = gw.tls_addrs()[0];

    // Verified against the CA: each name gets its own certificate.
    for (sni, cn) in [
        ("a.test", "a"),
        ("b.test", "b"),
        ("www.b.test", "b"),
        ("A.TEST", "a"),
    ] {
        let stream = connect(tls_addr, client(ca.roots(), &[b"http/1.1"]), sni).await;
        assert_eq!(served(&stream), cn, "SNI {sni}");
    }
    // A name no certificate covers, or no SNI at all: the first certificate.
    let mut any =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAny))
            .with_no_client_auth();
    let unknown = connect(tls_addr, Arc::new(any.clone()), "other.test").await;
    assert_eq!(served(&unknown), "a");
    any.enable_sni = false;
    let no_sni = connect(tls_addr, Arc::new(any), "b.test").await;
    assert_eq!(served(&no_sni), "a");
}

#[tokio::test]
async fn rsa_ecdsa_and_ed25519_keys_are_served() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    let keys = [
        (
            "p256",
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).unwrap(),
        ),
        (
            "p384",
            KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap(),
        ),
        (
            "ed25519",
            KeyPair::generate_for(&rcgen::PKCS_ED25519).unwrap(),
        ),
        ("rsa", rsa_key(dir.path())),
    ];
    let up = Upstream::named("app").await;
    for (stem, key) in keys {
        ca.leaf(dir.path(), stem, &["a.test"], key);
        let gw = gateway(&config(dir.path(), up.addr, &[stem], ""));
        let stream = connect(gw.tls_addrs()[0], client(ca.roots(), &[b"h2"]), "a.test").await;
        assert_eq!(served(&stream), stem);
        assert_eq!(within(5, get_over(stream, "/")).await.status, 200, "{stem}");
    }
}

/// A 2048-bit RSA key from openssl (ring cannot generate RSA keys), as PKCS#8 PEM.
fn rsa_key(dir: &Path) -> KeyPair {
    let path = dir.join("rsa-only.key");
    let status = std::process::Command::new("openssl")
        .args([
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
        ])
        .arg(&path)
        .stderr(std::process::Stdio::null())
        .status()
        .expect("openssl is installed (.ci/run installs it)");
    assert!(status.success());
    let pem = std::fs::read_to_string(&path).unwrap();
    KeyPair::from_pem_and_sign_algo(&pem, &rcgen::PKCS_RSA_SHA256).unwrap()
}

#[tokio::test]
async fn tls_1_2_is_served_with_the_servers_cipher_order() {
    let _shared = support::shared();
    let (_dir, ca, _up, gw) = one_certificate().await;
    let provider = rustls::crypto::ring::default_provider();
    // The client prefers ChaCha20; the server's order puts AES-128-GCM first.
    let mut suites = provider.cipher_suites.clone();
    suites.sort_by_key(|s| !format!("{:?}", s.suite()).contains("CHACHA20"));
    let provider = rustls::crypto::CryptoProvider {
        cipher_suites: suites,
        ..provider
    };
    let config = ClientConfig::builder_with_provider(Arc::new(provider))
        .with_protocol_versions(&[&rustls::version::TLS12])
        .unwrap()
        .with_root_certificates(ca.roots())
        .with_no_client_auth();
    let stream = connect(gw.tls_addrs()[0], Arc::new(config), "a.test").await;
    let conn = stream.get_ref().1;
    assert_eq!(
        conn.protocol_version(),
        Some(rustls::ProtocolVersion::TLSv1_2)
    );
    let suite = format!("{:?}", conn.negotiated_cipher_suite().unwrap().suite());
    assert_eq!(suite, "TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256");
    assert_eq!(within(5, get_over(stream, "/")).await.status, 200);
}

/// A client's session store that counts the TLS 1.3 tickets it is given.
#[derive(Debug)]
struct CountedTickets {
    inner: rustls::client::ClientSessionMemoryCache,
    tickets: std::sync::atomic::AtomicUsize,
}

impl rustls::client::ClientSessionStore for CountedTickets {
    fn set_kx_hint(&self, name: ServerName<'static>, group: rustls::NamedGroup) {
        self.inner.set_kx_hint(name, group)
    }
    fn kx_hint(&self, name: &ServerName<'_>) -> Option<rustls::NamedGroup> {
        self.inner.kx_hint(name)
    }
    fn set_tls12_session(
        &self,
        name: ServerName<'static>,
        value: rustls::client::Tls12ClientSessionValue,
    ) {
        self.inner.set_tls12_session(name, value)
    }
    fn tls12_session(
        &self,
        name: &ServerName<'_>,
    ) -> Option<rustls::client::Tls12ClientSessionValue> {
        self.inner.tls12_session(name)
    }
    fn remove_tls12_session(&self, name: &ServerName<'static>) {
        self.inner.remove_tls12_session(name)
    }
    fn insert_tls13_ticket(
        &self,
        name: ServerName<'static>,
        value: rustls::client::Tls13ClientSessionValue,
    ) {
        self.tickets
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.inner.insert_tls13_ticket(name, value)
    }
    fn take_tls13_ticket(
        &self,
        name: &ServerName<'static>,
    ) -> Option<rustls::client::Tls13ClientSessionValue> {
        self.inner.take_tls13_ticket(name)
    }
}

#[tokio::test]
async fn tls_1_3_is_served_with_aes_128_first_and_one_ticket_per_handshake() {
    let _shared = support::shared();
    let (_dir, ca, _up, gw) = one_certificate().await;
    let store = Arc::new(CountedTickets {
        inner: rustls::client::ClientSessionMemoryCache::new(8),
        tickets: Default::default(),
    });
    // ring's own order, which the client sends: AES-256-GCM first.
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_protocol_versions(&[&rustls::version::TLS13])
            .unwrap()
            .with_root_certificates(ca.roots())
            .with_no_client_auth();
    config.resumption = rustls::client::Resumption::store(store.clone());
    let config = Arc::new(config);
    let ticketed = || store.tickets.load(std::sync::atomic::Ordering::Relaxed);
    for (round, kind) in [HandshakeKind::Full, HandshakeKind::Resumed]
        .into_iter()
        .enumerate()
    {
        let stream = connect(gw.tls_addrs()[0], config.clone(), "a.test").await;
        let conn = stream.get_ref().1;
        assert_eq!(conn.handshake_kind(), Some(kind));
        let suite = format!("{:?}", conn.negotiated_cipher_suite().unwrap().suite());
        assert_eq!(suite, "TLS13_AES_128_GCM_SHA256");
        // The ticket comes before the answer: once it is read, the ticket was too.
        assert_eq!(within(5, get_over(stream, "/")).await.status, 200);
        assert_eq!(ticketed(), round + 1, "tickets after handshake {round}");
    }
}

#[tokio::test]
async fn a_client_that_never_finishes_its_handshake_is_closed() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["a.test"], KeyPair::generate().unwrap());
    let up = Upstream::named("app").await;
    let gw = gateway(&config(
        dir.path(),
        up.addr,
        &["a"],
        "handshake_timeout = \"300ms\"",
    ));
    let mut idle = TcpStream::connect(gw.tls_addrs()[0]).await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 16];
    let read = within(5, tokio::io::AsyncReadExt::read(&mut idle, &mut buf)).await;
    assert!(matches!(read, Ok(0) | Err(_)), "{read:?}");
    assert!(started.elapsed() >= Duration::from_millis(250));
}

#[tokio::test]
async fn a_reload_swaps_the_certificate_and_sessions_resume_across_it() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    ca.leaf(
        dir.path(),
        "site",
        &["a.test"],
        KeyPair::generate().unwrap(),
    );
    let up = Upstream::named("app").await;
    let text = config(dir.path(), up.addr, &["site"], "");
    let gw = gateway(&text);
    let tls_addr = gw.tls_addrs()[0];
    let roots = ca.roots();
    let shared_client = client(roots, &[b"http/1.1"]);

    let first = connect(tls_addr, shared_client.clone(), "a.test").await;
    let before = first.get_ref().1.peer_certificates().unwrap()[0].clone();
    assert_eq!(
        first.get_ref().1.handshake_kind(),
        Some(HandshakeKind::Full)
    );
    // The response carries the session ticket along.
    assert_eq!(within(5, get_over(first, "/")).await.status, 200);

    // A new certificate for the same name, in the same files, then a reload.
    ca.leaf(
        dir.path(),
        "site",
        &["a.test"],
        KeyPair::generate().unwrap(),
    );
    let next =
        tollgate::config::from_str(&text, Path::new("/tmp/tollgate-test/gateway.toml")).unwrap();
    assert_eq!(gw.reload(&next).unwrap(), 2);

    let resumed = connect(tls_addr, shared_client.clone(), "a.test").await;
    assert_eq!(
        resumed.get_ref().1.handshake_kind(),
        Some(HandshakeKind::Resumed),
        "the ticket issued before the reload is still accepted"
    );
    assert_eq!(within(5, get_over(resumed, "/")).await.status, 200);

    // A client with no session sees the new certificate.
    let fresh = connect(tls_addr, client(ca.roots(), &[b"http/1.1"]), "a.test").await;
    let after = fresh.get_ref().1.peer_certificates().unwrap()[0].clone();
    assert_ne!(before, after);
    assert_eq!(
        fresh.get_ref().1.handshake_kind(),
        Some(HandshakeKind::Full)
    );

    // A TLS address added by a reload opens; the one removed stops accepting.
    let moved = text.replace(
        "listen_tls = [\"127.0.0.1:0\"]",
        "listen_tls = [\"127.0.0.2:0\"]",
    );
    let moved =
        tollgate::config::from_str(&moved, Path::new("/tmp/tollgate-test/gateway.toml")).unwrap();
    assert_eq!(gw.reload(&moved).unwrap(), 3);
    let now = gw.tls_addrs();
    assert_eq!(now.len(), 1);
    assert_eq!(now[0].ip().to_string(), "127.0.0.2");
    let there = connect(now[0], client(ca.roots(), &[b"h2"]), "a.test").await;
    assert_eq!(within(5, get_over(there, "/")).await.status, 200);
    let deadline = Instant::now() + Duration::from_secs(5);
    while TcpStream::connect(tls_addr).await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the old TLS address still accepts"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `tollgate -t` on a file: (exit success, stdout, stderr).
fn check(config: &Path) -> (bool, String, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
        .arg("-t")
        .arg("-c")
        .arg(config)
        .output()
        .expect("run tollgate -t");
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    (out.status.success(), text(&out.stdout), text(&out.stderr))
}

#[test]
fn the_binary_checks_certificates_warns_of_expiry_and_names_a_mismatched_key() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(vec!["old.test".to_owned()]).unwrap();
    params.not_before = rcgen::date_time_ymd(2020, 1, 1);
    params.not_after = rcgen::date_time_ymd(2021, 1, 1);
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(d.join("old.pem"), cert.pem()).unwrap();
    std::fs::write(d.join("old.key"), key.serialize_pem()).unwrap();
    std::fs::write(
        d.join("other.key"),
        KeyPair::generate().unwrap().serialize_pem(),
    )
    .unwrap();
    let text = |key: &str| {
        format!(
            "[server]\nlisten_tls = [\"127.0.0.1:0\"]\n[log]\naccess = \"off\"\n\
             [[location]]\nmatch = \"/\"\nreturn = {{ status = 200 }}\n\
             [[tls.certificates]]\ncert = \"old.pem\"\nkey = \"{key}\"\n"
        )
    };
    let file = d.join("gateway.toml");

    std::fs::write(&file, text("old.key")).unwrap();
    let (ok, stdout, stderr) = check(&file);
    assert!(ok, "{stderr}");
    assert_eq!(stdout, "configuration ok\n");
    assert!(stderr.contains("certificate has expired"), "{stderr}");
    assert!(stderr.contains("2021-01-01T00:00:00Z"), "{stderr}");

    std::fs::write(&file, text("other.key")).unwrap();
    let (ok, _, stderr) = check(&file);
    assert!(!ok);
    let want = format!(
        "{}:10:7: the key in {} does not match the certificate in {}",
        file.display(),
        d.join("other.key").display(),
        d.join("old.pem").display()
    );
    assert!(stderr.contains(&want), "{stderr}");
}

/// Reads HTTP/2 frames off a stream: (type, flags, stream, payload).
struct Frames<S> {
    io: S,
    buf: Vec<u8>,
}

impl<S: tokio::io::AsyncRead + Unpin> Frames<S> {
    /// The next frame, or `None` at EOF or after `wait` with nothing.
    async fn next(&mut self, wait: Duration) -> Option<(u8, u8, u32, Vec<u8>)> {
        use tokio::io::AsyncReadExt;
        loop {
            if self.buf.len() >= 9 {
                let len = u32::from_be_bytes([0, self.buf[0], self.buf[1], self.buf[2]]) as usize;
                if self.buf.len() >= 9 + len {
                    let head: Vec<u8> = self.buf.drain(..9 + len).collect();
                    let stream = u32::from_be_bytes([head[5], head[6], head[7], head[8]]);
                    return Some((head[3], head[4], stream & 0x7fff_ffff, head[9..].to_vec()));
                }
            }
            let mut chunk = [0u8; 16384];
            match tokio::time::timeout(wait, self.io.read(&mut chunk)).await {
                Ok(Ok(n)) if n > 0 => self.buf.extend_from_slice(&chunk[..n]),
                _ => return None,
            }
        }
    }
}

/// After the client resets a stream, the gateway sends no DATA for it that it made after
/// reading the reset (RFC 9113 §5.1). What arrives after the RST was committed before it
/// (kernel and TLS buffers, at most the one frame h2 was writing): it is bounded by the
/// window the client granted, and none comes after the answer to a PING sent with the
/// RST, since the gateway reads both in order.
#[tokio::test]
async fn a_reset_stream_gets_no_data_made_after_the_reset() {
    let _shared = support::shared();
    use tokio::io::AsyncWriteExt;
    let dir = tempfile::tempdir().unwrap();
    let ca = Ca::new();
    ca.leaf(dir.path(), "a", &["a.test"], KeyPair::generate().unwrap());
    let up = support::raw::RawUpstream::start(|_| {
        let body = vec![b'x'; 8 << 20];
        let mut reply =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
        reply.extend_from_slice(&body);
        reply
    })
    .await;
    let gw = gateway(&config(dir.path(), up.addr, &["a"], ""));
    for round in 0..10 {
        let stream = connect(gw.tls_addrs()[0], client(ca.roots(), &[b"h2"]), "a.test").await;
        let (read, mut write) = tokio::io::split(stream);
        let mut frames = Frames {
            io: read,
            buf: Vec::new(),
        };
        // The preface with default settings: a 65,535-byte window, never raised.
        let mut hello = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
        hello.extend(h2_frame(0x4, 0, 0, &[]));
        // GET https://a.test/ (HPACK: :method GET, :scheme https, :path /, :authority a.test).
        let block = [&[0x82, 0x87, 0x84, 0x01, 6][..], b"a.test"].concat();
        hello.extend(h2_frame(0x1, 0x5, 1, &block));
        write.write_all(&hello).await.unwrap();

        let (mut before, mut after_rst, mut after_ack) = (0usize, 0usize, 0usize);
        let mut reset = false;
        let mut acked = false;
        // Up to the PING's answer anything may be slow to come; after it, 200 ms of
        // silence ends the round.
        let wait = |acked: bool| Duration::from_millis(if acked { 200 } else { 5_000 });
        while let Some((kind, flags, stream, payload)) = frames.next(wait(acked)).await {
            match (kind, stream) {
                (0x4, 0) if flags & 1 == 0 => {
                    write.write_all(&h2_frame(0x4, 1, 0, &[])).await.unwrap();
                }
                (0x0, 1) if acked => after_ack += payload.len(),
                (0x0, 1) if reset => after_rst += payload.len(),
                (0x0, 1) => {
                    before += payload.len();
                    // RST_STREAM(CANCEL) and a PING in one write.
                    let mut bye = h2_frame(0x3, 0, 1, &8u32.to_be_bytes());
                    bye.extend(h2_frame(0x6, 0, 0, b"tollgate"));
                    write.write_all(&bye).await.unwrap();
                    reset = true;
                }
                (0x6, 0) if flags & 1 == 1 && payload == b"tollgate" => acked = true,
                _ => {}
            }
        }
        assert!(reset, "round {round}: no DATA before the reset");
        assert!(acked, "round {round}: the PING was not answered");
        assert_eq!(after_ack, 0, "round {round}: DATA made after the reset");
        assert!(
            before + after_rst <= 65_535,
            "round {round}: {before} + {after_rst} bytes past the window"
        );
    }
}
