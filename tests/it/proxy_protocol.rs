//! The PROXY protocol (`proxy_protocol = true` on a listener, `[server]
//! proxy_protocol_from`) behind a real sender, Debian's HAProxy with `send-proxy` and
//! `send-proxy-v2`: the client it names is the client for access rules, logs and
//! `X-Forwarded-For`. Then raw bytes: a sender not in `proxy_protocol_from`, a missing,
//! malformed, lying or slow header, and a header followed at once by the request in the
//! same segment.

use crate::support;

use std::net::SocketAddr;
use std::time::Duration;

use support::haproxy::{self, Haproxy};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// A gateway whose one listener reads PROXY headers from `from`; `/denied/` refuses
/// 127.0.0.2, `/` forwards to `up`, and the access log is `log`.
fn config(up: SocketAddr, from: &str, log: &std::path::Path) -> String {
    format!(
        r#"
[server]
listen = [{{ addr = "127.0.0.1:0", proxy_protocol = true }}]
proxy_protocol_from = ["{from}"]
workers = 1
client_header_timeout = "1s"
[log]
access = "{}"
format = "json"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/denied/"
access = ["deny 127.0.0.2"]
return = {{ status = 200, body = "in" }}
[[location]]
match = "/"
upstream = "app"
"#,
        log.display()
    )
}

/// An upstream that answers the `X-Forwarded-For` it was sent.
async fn echoing_forwarded_for() -> Upstream {
    Upstream::start(|req| async move {
        let xff = req
            .headers()
            .get("x-forwarded-for")
            .map(|v| v.to_str().unwrap_or("").to_owned());
        text(200, &xff.unwrap_or_default())
    })
    .await
}

/// A request to `to` from the local address `from` (any 127.x is this machine's); the
/// status and body.
async fn from(from: [u8; 4], to: SocketAddr, path: &str) -> (u16, String) {
    within(10, async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from((from, 0))).unwrap();
        let mut stream = socket.connect(to).await.unwrap();
        let request = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        (
            status,
            text.split("\r\n\r\n").nth(1).unwrap_or_default().to_owned(),
        )
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn haproxy_names_the_client_in_both_versions() {
    if !haproxy::available("the PROXY protocol") {
        return;
    }
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("access.log");
    let up = echoing_forwarded_for().await;
    let gateway = gateway(&config(up.addr, "127.0.0.1", &log));
    let haproxy = Haproxy::start(addr(&gateway));
    for front in [haproxy.v1, haproxy.v2] {
        assert_eq!(
            from([127, 0, 0, 2], front, "/").await,
            (200, "127.0.0.2".to_owned()),
            "{front}"
        );
        assert_eq!(
            from([127, 0, 0, 3], front, "/").await,
            (200, "127.0.0.3".to_owned()),
            "{front}"
        );
        assert_eq!(
            from([127, 0, 0, 2], front, "/denied/").await.0,
            403,
            "{front}"
        );
        assert_eq!(
            from([127, 0, 0, 3], front, "/denied/").await.0,
            200,
            "{front}"
        );
    }
    let lines = log_lines(&log, 8).await;
    assert!(
        lines[0].contains("\"remote_addr\":\"127.0.0.2\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"remote_addr\":\"127.0.0.3\""),
        "{}",
        lines[1]
    );
    // Straight to tollgate, without HAProxy: no header, closed unanswered.
    assert_eq!(from([127, 0, 0, 1], addr(&gateway), "/").await.0, 0);
    drop(haproxy);
    gateway.stop().await;
}

/// Raw bytes to the gateway from 127.0.0.1; what came back.
async fn raw(addr: SocketAddr, bytes: &[u8]) -> String {
    within(10, async {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        let _ = stream.write_all(bytes).await;
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    })
    .await
}

const GET: &str = "GET /denied/ HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hostile_or_missing_headers_close_the_connection_unanswered() {
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::start(|_| async { text(200, "up") }).await;
    let gateway = gateway(&config(up.addr, "127.0.0.1", &dir.path().join("log")));
    let addr = addr(&gateway);
    // A v1 header and the request in one segment: the header names 127.0.0.2, denied.
    let named = format!("PROXY TCP4 127.0.0.2 127.0.0.1 5555 80\r\n{GET}");
    assert!(raw(addr, named.as_bytes())
        .await
        .starts_with("HTTP/1.1 403"));
    let other = format!("PROXY TCP4 192.0.2.9 127.0.0.1 5555 80\r\n{GET}");
    assert!(raw(addr, other.as_bytes())
        .await
        .starts_with("HTTP/1.1 200"));
    // v2 LOCAL (a balancer's health check): the sender's own address stands.
    let mut local = b"\r\n\r\n\0\r\nQUIT\n\x20\x00\x00\x00".to_vec();
    local.extend_from_slice(GET.as_bytes());
    assert!(raw(addr, &local).await.starts_with("HTTP/1.1 200"));
    let hostile: Vec<Vec<u8>> = vec![
        GET.as_bytes().to_vec(),
        format!("PROXY TCP4 127.0.0.2 127.0.0.1 99999 80\r\n{GET}").into_bytes(),
        format!("PROXY  TCP4 127.0.0.2 127.0.0.1 1 80\r\n{GET}").into_bytes(),
        format!("PROXY TCP4 ::1 127.0.0.1 1 80\r\n{GET}").into_bytes(),
        format!("PROXY TCP4 {}\r\n", "1".repeat(200)).into_bytes(),
        // v2 whose length says 65535: longer than any header tollgate takes.
        b"\r\n\r\n\0\r\nQUIT\n\x21\x11\xff\xff".to_vec(),
        // v2 with an address block too short for its family.
        b"\r\n\r\n\0\r\nQUIT\n\x21\x11\x00\x04\x7f\x00\x00\x02".to_vec(),
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03".to_vec(),
    ];
    for bytes in hostile {
        let answer = raw(addr, &bytes).await;
        assert_eq!(answer, "", "{:?}", String::from_utf8_lossy(&bytes));
    }
    // Half a header, then silence: closed after client_header_timeout.
    let started = std::time::Instant::now();
    assert_eq!(raw(addr, b"PROXY TCP4 127.0.0.2").await, "");
    assert!(started.elapsed() >= Duration::from_millis(900));
    assert_eq!(
        up.count(),
        0,
        "`/denied/` answers itself: nothing went upstream"
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sender_not_in_proxy_protocol_from_is_refused_unread() {
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::start(|_| async { text(200, "up") }).await;
    let gateway = gateway(&config(up.addr, "10.0.0.0/8", &dir.path().join("log")));
    let named = format!("PROXY TCP4 10.1.1.1 127.0.0.1 5555 80\r\n{GET}");
    assert_eq!(raw(addr(&gateway), named.as_bytes()).await, "");
    assert_eq!(up.count(), 0);
    gateway.stop().await;
}

/// On a `listen_tls` address the header comes before the handshake: HAProxy in TCP mode
/// passes the client's TLS through after its v2 header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_header_comes_before_tls_on_a_tls_listener() {
    if !haproxy::available("the PROXY protocol before TLS") {
        return;
    }
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(dir.path().join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), cert.signing_key.serialize_pem()).unwrap();
    let up = echoing_forwarded_for().await;
    let toml = format!(
        "[server]\nlisten_tls = [{{ addr = \"127.0.0.1:0\", proxy_protocol = true }}]\n\
         proxy_protocol_from = [\"127.0.0.1\"]\nworkers = 1\n[log]\naccess = \"off\"\n\
         [[tls.certificates]]\ncert = \"{0}/cert.pem\"\nkey = \"{0}/key.pem\"\n\
         [upstreams.app]\nservers = [\"{1}\"]\n[[location]]\nmatch = \"/\"\nupstream = \"app\"\n",
        dir.path().display(),
        up.addr
    );
    let gateway = gateway(&toml);
    let haproxy = Haproxy::start(gateway.tls_addrs()[0]);
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .dangerous()
    .with_custom_certificate_verifier(std::sync::Arc::new(AcceptAny))
    .with_no_client_auth();
    let answer = within(10, async {
        let socket = tokio::net::TcpSocket::new_v4().unwrap();
        socket.bind(SocketAddr::from(([127, 0, 0, 2], 0))).unwrap();
        let tcp = socket.connect(haproxy.v2).await.unwrap();
        let name = rustls::pki_types::ServerName::try_from("localhost").unwrap();
        let mut stream = tokio_rustls::TlsConnector::from(std::sync::Arc::new(tls))
            .connect(name, tcp)
            .await
            .unwrap();
        stream
            .write_all(b"GET / HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        String::from_utf8_lossy(&answer).into_owned()
    })
    .await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("\r\n\r\n127.0.0.2"), "{answer}");
    drop(haproxy);
    gateway.stop().await;
}
