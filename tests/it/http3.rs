//! HTTP/3 (`listen_tls = [{ addr, quic = true }]`) through the real gateway, with quinn
//! and h3 as the client: the same sites, forwarding, limits and body limits as over TCP,
//! one zone budget across HTTP/1.1, HTTP/2 and HTTP/3.

use crate::support;

use std::path::Path;

use http::Request;
use support::h3;
use support::*;

/// A gateway serving `a.test` over TLS and QUIC in front of `up`, with `extra` after its
/// `[[location]]`'s `upstream` line.
pub(crate) fn quic_gateway(
    dir: &Path,
    up: std::net::SocketAddr,
    extra: &str,
    head: &str,
) -> tollgate::Gateway {
    write_self_signed(dir, "a", "a.test");
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

/// The `alt-svc` of an HTTP/1.1 answer over TCP TLS at `addr`.
pub(crate) async fn alt_svc_over_tcp(addr: std::net::SocketAddr) -> Option<String> {
    alt_svc_over_tcp_to(addr, "a.test").await
}

/// The `Alt-Svc` of a `GET /` over TCP TLS to `host` (SNI and `Host`), answered 200.
async fn alt_svc_over_tcp_to(addr: std::net::SocketAddr, host: &str) -> Option<String> {
    use std::sync::Arc;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(support::accept_any::AcceptAny))
        .with_no_client_auth();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls::pki_types::ServerName::try_from(host.to_owned()).unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(Arc::new(config))
        .connect(name, tcp)
        .await
        .unwrap();
    let head = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    tls.write_all(head.as_bytes()).await.unwrap();
    let mut answer = String::new();
    let _ = within(5, tls.read_to_string(&mut answer)).await;
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let line = answer
        .lines()
        .find(|l| l.to_ascii_lowercase().starts_with("alt-svc:"))?;
    Some(line.split_once(':').unwrap().1.trim().to_owned())
}

#[tokio::test]
async fn answers_over_tcp_tls_advertise_http3_as_quic_says() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(dir.path(), up.addr, "", "");
    let tls = gw.tls_addrs()[0];
    let expected = format!("h3=\":{}\"; ma=86400", tls.port());
    assert_eq!(
        alt_svc_over_tcp(tls).await.as_deref(),
        Some(expected.as_str())
    );
    // Plain HTTP offers nothing, nor do HTTP/3's own answers.
    let plain = raw_exchange(
        addr(&gw),
        "GET / HTTP/1.1\r\nHost: a.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(
        !plain.head.to_ascii_lowercase().contains("alt-svc"),
        "{}",
        plain.head
    );
    let over_h3 = within(10, h3::get(tls, "a.test", "/")).await.unwrap();
    assert!(!over_h3.headers.contains_key("alt-svc"));

    let other_port = quic_gateway(dir.path(), up.addr, "", "[quic]\nadvertised_port = 8443\n");
    let at = other_port.tls_addrs()[0];
    assert_eq!(
        alt_svc_over_tcp(at).await.as_deref(),
        Some("h3=\":8443\"; ma=86400")
    );
    let quiet = quic_gateway(dir.path(), up.addr, "", "[quic]\nadvertise = false\n");
    assert_eq!(alt_svc_over_tcp(quiet.tls_addrs()[0]).await, None);
}

#[tokio::test]
async fn a_site_asking_for_client_certificates_does_not_advertise_http3() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    write_self_signed(dir.path(), "a", "a.test");
    let d = dir.path().display();
    let site = |name: &str, more: &str| {
        format!(
            "[[site]]\nnames = [\"{name}\"]\n{more}\n[[site.location]]\nmatch = \"/\"\n\
             return = {{ status = 200, body = \"{name}\" }}\n"
        )
    };
    let gw = gateway(&format!(
        "[server]\nlisten_tls = [{{ addr = \"127.0.0.1:0\", quic = true }}]\n[log]\naccess = \"off\"\n\
         [tls]\n[[tls.certificates]]\ncert = \"{d}/a.pem\"\nkey = \"{d}/a.key\"\n{}{}",
        site("a.test", "default = true"),
        site("b.test", &format!("client_certificates = {{ ca = \"{d}/a.pem\", verify = \"optional\" }}")),
    ));
    let tls = gw.tls_addrs()[0];
    // Its requests over HTTP/3 would get 421: browsers are not sent there.
    assert_eq!(alt_svc_over_tcp_to(tls, "b.test").await, None);
    assert!(alt_svc_over_tcp_to(tls, "a.test").await.is_some());
}

#[tokio::test]
async fn garbage_datagrams_are_dropped_and_the_listener_serves_on() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(dir.path(), up.addr, "", "");
    let tls = gw.tls_addrs()[0];
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let mut seed = 0x2545_f491_4f6c_dd1du64;
    for len in [0usize, 1, 5, 20, 1200, 1350, 1500, 9000] {
        let mut bytes = Vec::with_capacity(len);
        for _ in 0..len {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            bytes.push(seed as u8);
        }
        // A long-header Initial's first byte with garbage after, and pure noise.
        let _ = socket.send_to(&bytes, tls).await;
        if let Some(first) = bytes.first_mut() {
            *first = 0xc0;
            let _ = socket.send_to(&bytes, tls).await;
        }
    }
    // A truncated Initial: a real client's first packet cut short.
    let _ = socket.send_to(&[0xc0, 0, 0, 0, 1, 8, 1, 2, 3], tls).await;
    let reply = within(10, h3::get(tls, "a.test", "/"))
        .await
        .expect("still served");
    assert_eq!(reply.status, 200);
}

#[tokio::test]
async fn a_reload_keeps_http3_connections_and_quic_follows_the_file() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(dir.path(), up.addr, "", "");
    let tls = gw.tls_addrs()[0];
    let mut client = within(10, h3::H3Client::connect(tls, "a.test"))
        .await
        .unwrap();
    assert_eq!(client.get("a.test", "/").await.unwrap().status, 200);
    // The same addresses (the actual port), a header rule more.
    let d = dir.path().display();
    let text = |quic: bool, rule: &str| {
        format!(
            "[server]\nlisten = [\"{}\"]\nlisten_tls = [{{ addr = \"{tls}\", quic = {quic} }}]\n\
             [log]\naccess = \"off\"\n[tls]\n[[tls.certificates]]\ncert = \"{d}/a.pem\"\nkey = \"{d}/a.key\"\n\
             [upstreams.app]\nservers = [\"{}\"]\n[[location]]\nmatch = \"/\"\nupstream = \"app\"\n{rule}",
            addr(&gw),
            up.addr
        )
    };
    gw.reload(&parse(&text(
        true,
        "response_headers = { \"X-Generation\" = \"2\" }\n",
    )))
    .unwrap();
    let after = within(10, client.get("a.test", "/"))
        .await
        .expect("the connection outlives the reload");
    assert_eq!(
        (
            after.status.as_u16(),
            after.headers["x-generation"].to_str().unwrap()
        ),
        (200, "2")
    );
    // `quic` taken off: the listener stops (its connection finishes, a new one gets none).
    gw.reload(&parse(&text(false, ""))).unwrap();
    let refused = tokio::time::timeout(
        std::time::Duration::from_secs(3),
        h3::get(tls, "a.test", "/"),
    )
    .await;
    assert!(!matches!(refused, Ok(Ok(_))), "{refused:?}");
    // And put back.
    gw.reload(&parse(&text(true, ""))).unwrap();
    let back = within(10, h3::get(tls, "a.test", "/"))
        .await
        .expect("HTTP/3 again");
    assert_eq!(back.status, 200);
}

#[tokio::test]
async fn chromium_loads_a_page_over_http3() {
    use base64::Engine as _;
    use sha2::Digest as _;
    if !chromium::available("a page over HTTP/3 in Chromium") {
        return;
    }
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(dir.path(), up.addr, "", "");
    let port = gw.tls_addrs()[0].port();
    // Chromium takes a QUIC certificate it does not trust only by its key's SPKI hash.
    let key = rcgen::KeyPair::from_pem(&std::fs::read_to_string(dir.path().join("a.key")).unwrap())
        .unwrap();
    let spki = base64::engine::general_purpose::STANDARD.encode(sha2::Sha256::digest(
        rcgen::PublicKeyData::subject_public_key_info(&key),
    ));
    let mut browser = chromium::Browser::start_with(&[
        &format!("--origin-to-force-quic-on=a.test:{port}"),
        "--host-resolver-rules=MAP a.test 127.0.0.1",
        &format!("--ignore-certificate-errors-spki-list={spki}"),
    ])
    .await;
    browser.open(&format!("https://a.test:{port}/page")).await;
    let protocol = browser
        .eval("performance.getEntriesByType('navigation')[0].nextHopProtocol")
        .await;
    let text = browser.eval("document.body.innerText").await;
    assert_eq!(protocol.as_str(), Some("h3"), "{protocol:?}, {text:?}");
    assert_eq!(text.as_str().map(str::trim), Some("ok from app"));
    assert!(up
        .seen
        .lock()
        .unwrap()
        .iter()
        .any(|seen| seen.uri == "/page"));
}

#[tokio::test]
async fn the_host_key_file_is_made_private_and_kept() {
    use std::os::unix::fs::PermissionsExt;
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let key = dir.path().join("quic.key");
    let head = format!("[quic]\nhost_key_file = \"{}\"\n", key.display());
    let gw = quic_gateway(dir.path(), up.addr, "", &head);
    let made = std::fs::read(&key).unwrap();
    assert_eq!(made.len(), 64);
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    assert_eq!(
        within(10, h3::get(gw.tls_addrs()[0], "a.test", "/"))
            .await
            .unwrap()
            .status,
        200
    );
    drop(gw);
    // A restart reads the same key back; a key others may read is refused.
    let again = quic_gateway(dir.path(), up.addr, "", &head);
    assert_eq!(std::fs::read(&key).unwrap(), made);
    drop(again);
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    let config = parse(&format!(
        "[server]\nlisten_tls = [{{ addr = \"127.0.0.1:0\", quic = true }}]\n[tls]\n[[tls.certificates]]\n\
         cert = \"{d}/a.pem\"\nkey = \"{d}/a.key\"\n{head}[[location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n",
        d = dir.path().display()
    ));
    let refused = tollgate::Gateway::start(config)
        .err()
        .expect("refused")
        .to_string();
    assert!(refused.contains("may be read by others"), "{refused}");
}

/// An upstream that answers each request with 20 chunks of 1 KiB, 50 ms apart: a download
/// of a second.
async fn slow_download() -> Upstream {
    use http_body_util::{BodyExt, StreamBody};
    Upstream::start(|_| async {
        let chunks = futures_util::stream::unfold(0u32, |n| async move {
            if n == 20 {
                return None;
            }
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            let frame = hyper::body::Frame::data(bytes::Bytes::from(vec![b'd'; 1024]));
            Some((Ok::<_, hyper::Error>(frame), n + 1))
        });
        http::Response::new(StreamBody::new(chunks).boxed())
    })
    .await
}

#[tokio::test]
async fn a_download_under_way_finishes_across_a_reload_and_through_a_graceful_stop() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = slow_download().await;
    let gw = quic_gateway(dir.path(), up.addr, "", "");
    let tls = gw.tls_addrs()[0];
    let download = tokio::spawn(h3::get(tls, "a.test", "/big"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let d = dir.path().display();
    let again = format!(
        "[server]\nlisten = [\"{}\"]\nlisten_tls = [{{ addr = \"{tls}\", quic = true }}]\n[log]\naccess = \"off\"\n\
         [tls]\n[[tls.certificates]]\ncert = \"{d}/a.pem\"\nkey = \"{d}/a.key\"\n[upstreams.app]\nservers = [\"{}\"]\n\
         [[location]]\nmatch = \"/\"\nupstream = \"app\"\nresponse_headers = {{ \"X-Generation\" = \"2\" }}\n",
        addr(&gw),
        up.addr
    );
    gw.reload(&parse(&again)).unwrap();
    let reply = within(10, download)
        .await
        .unwrap()
        .expect("the download finishes");
    assert_eq!((reply.status.as_u16(), reply.body.len()), (200, 20 * 1024));

    // A graceful stop: the download under way finishes (GOAWAY), no new connection is taken.
    let download = tokio::spawn(h3::get(tls, "a.test", "/big"));
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    gw.shutdown();
    let reply = within(10, download)
        .await
        .unwrap()
        .expect("the download finishes through the stop");
    assert_eq!((reply.status.as_u16(), reply.body.len()), (200, 20 * 1024));
    let late = tokio::time::timeout(
        std::time::Duration::from_secs(2),
        h3::get(tls, "a.test", "/"),
    )
    .await;
    assert!(!matches!(late, Ok(Ok(_))), "{late:?}");
    tokio::task::spawn_blocking(move || gw.wait())
        .await
        .unwrap();
}

/// Relays datagrams between a client and `server`, keeping the client's in order: what
/// an attacker on the path would capture.
async fn relay(
    server: std::net::SocketAddr,
) -> (
    std::net::SocketAddr,
    std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>>,
) {
    let socket = std::sync::Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let at = socket.local_addr().unwrap();
    let captured: std::sync::Arc<std::sync::Mutex<Vec<Vec<u8>>>> = Default::default();
    let upstream = std::sync::Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let client: std::sync::Arc<std::sync::Mutex<Option<std::net::SocketAddr>>> = Default::default();
    let (down, up_socket, seen) = (socket.clone(), upstream.clone(), client.clone());
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok(n) = up_socket.recv(&mut buf).await {
            let to = *seen.lock().unwrap();
            if let Some(to) = to {
                let _ = down.send_to(&buf[..n], to).await;
            }
        }
    });
    upstream.connect(server).await.unwrap();
    let kept = captured.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 65536];
        while let Ok((n, from)) = socket.recv_from(&mut buf).await {
            *client.lock().unwrap() = Some(from);
            kept.lock().unwrap().push(buf[..n].to_vec());
            let _ = upstream.send(&buf[..n]).await;
        }
    });
    (at, captured)
}

#[tokio::test]
async fn early_data_takes_safe_methods_only_and_a_replayed_flight_gets_no_more() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(dir.path(), up.addr, "", "[quic]\nearly_data = true\n");
    let tls = gw.tls_addrs()[0];
    let config = h3::early_config();
    // A first connection gets a ticket; a second sends its request in 0-RTT.
    let (mut first, early) = within(10, h3::H3Client::connect_early(&config, tls, "a.test"))
        .await
        .unwrap();
    assert!(!early);
    assert_eq!(first.get("a.test", "/first").await.unwrap().status, 200);
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    drop(first);
    let (relay_at, captured) = relay(tls).await;
    let (mut second, early) = within(10, h3::H3Client::connect_early(&config, relay_at, "a.test"))
        .await
        .unwrap();
    assert!(early, "no 0-RTT: the ticket allowed none");
    let req = http::Request::post("https://a.test/pay").body(()).unwrap();
    let posted = within(10, second.send(req, b"once")).await.unwrap();
    // Whether it came early (425, then the client may send it again) or after the
    // handshake (200), a POST is never taken from 0-RTT.
    let pays = || {
        up.seen
            .lock()
            .unwrap()
            .iter()
            .filter(|s| s.uri == "/pay")
            .count()
    };
    match posted.status.as_u16() {
        425 => assert_eq!(pays(), 0),
        200 => assert_eq!(pays(), 1),
        other => panic!("POST answered {other}"),
    }
    let before = pays();
    // An attacker replays the client's first flight (Initial and 0-RTT) from elsewhere: the
    // handshake never completes, so whatever it carries is early.
    let flight: Vec<Vec<u8>> = captured.lock().unwrap().iter().take(4).cloned().collect();
    let attacker = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    for datagram in &flight {
        attacker.send_to(datagram, tls).await.unwrap();
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(pays(), before, "a replayed 0-RTT POST reached the upstream");
    // A GET in 0-RTT goes on, marked for the upstream.
    let (mut third, early) = within(10, h3::H3Client::connect_early(&config, tls, "a.test"))
        .await
        .unwrap();
    assert!(early);
    assert_eq!(third.get("a.test", "/read").await.unwrap().status, 200);
    let read = up
        .seen
        .lock()
        .unwrap()
        .iter()
        .rev()
        .find(|s| s.uri == "/read")
        .map(|s| s.headers.clone())
        .unwrap();
    let marked = read
        .get("early-data")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(
        marked.is_none() || marked.as_deref() == Some("1"),
        "{marked:?}"
    );
}
