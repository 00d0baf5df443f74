//! New QUIC connections admitted before their handshake (`[quic] retry_above`,
//! `refuse_above`, `per_address`), through the real gateway: a Retry, then a refusal,
//! then silence as the rate grows; a budget per client address that a forged source
//! cannot spend for the real one; a flood of real Initials (made by quinn's own state
//! machine, sent as raw datagrams) answered at the thresholds, within 3x the bytes it
//! sent and in bounded memory; real Initials cut short or altered dropped without harm;
//! and a migrating client keeping the address its connection was opened from.

use crate::cli::{tollgate, wait_until_listening, Running};
use crate::http3::quic_gateway;
use crate::metrics::scrape;
use crate::support;

use std::net::SocketAddr;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use support::h3;
use support::*;

/// Each outcome of `count` new connections one after another, each making one request:
/// whether it was answered 200 within 600 ms.
async fn connections(addr: SocketAddr, count: usize) -> Vec<bool> {
    let mut outcomes = Vec::new();
    for _ in 0..count {
        let attempt =
            tokio::time::timeout(Duration::from_millis(600), h3::get(addr, "a.test", "/")).await;
        outcomes.push(matches!(attempt, Ok(Ok(ref reply)) if reply.status == 200));
    }
    outcomes
}

/// `tollgate_quic_connections_total{result}` on `admin`.
async fn counted(admin: SocketAddr, result: &str) -> f64 {
    let scraped = scrape(admin).await;
    scraped.get(&format!(
        "tollgate_quic_connections_total{{result=\"{result}\"}}"
    ))
}

#[tokio::test]
async fn new_connections_past_the_limits_get_a_retry_then_a_refusal() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let head = "[admin]\nlisten = \"127.0.0.1:0\"\n[quic]\nretry_above = \"1r/s\"\nrefuse_above = \"6r/s\"\n";
    let gw = quic_gateway(dir.path(), up.addr, "", head);
    let admin = gw.admin_addr().unwrap();
    // Within one second: the first is accepted, the second retried (quinn's client echoes
    // the token and is let in), and past six attempts the rest are refused or dropped.
    let outcomes = connections(gw.tls_addrs()[0], 12).await;
    assert!(outcomes[0] && outcomes[1], "{outcomes:?}");
    assert!(outcomes.iter().any(|ok| !ok), "{outcomes:?}");
    assert!(counted(admin, "retried").await >= 1.0);
    let refused = counted(admin, "refused").await + counted(admin, "dropped").await;
    assert!(refused >= 1.0);
    assert!(counted(admin, "ok").await >= 2.0);
}

#[tokio::test]
async fn one_address_past_its_budget_is_retried_then_refused_once_proven() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let head = "[admin]\nlisten = \"127.0.0.1:0\"\n[quic]\nper_address = \"1r/m\"\nper_address_burst = 1\n";
    let gw = quic_gateway(dir.path(), up.addr, "", head);
    let admin = gw.admin_addr().unwrap();
    // Two at once from 127.0.0.1 unproven (rate and burst); the next two get a Retry,
    // which quinn's client answers: proven, they spend the proven budget; the fifth is
    // retried, proven, and refused.
    let outcomes = connections(gw.tls_addrs()[0], 5).await;
    assert_eq!(outcomes, [true, true, true, true, false]);
    assert_eq!(counted(admin, "retried").await, 3.0);
    assert_eq!(counted(admin, "refused").await, 1.0);
    // TCP is not touched: `per_address` counts QUIC connections only (this asserts a 200).
    crate::http3::alt_svc_over_tcp(gw.tls_addrs()[0]).await;
}

#[tokio::test]
async fn a_migrating_client_keeps_the_address_it_connected_from() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let extra = "request_headers = { \"X-Peer\" = \"$remote_addr:$remote_port\" }\n";
    let gw = quic_gateway(dir.path(), up.addr, extra, "");
    let mut client = h3::H3Client::connect(gw.tls_addrs()[0], "a.test")
        .await
        .unwrap();
    assert_eq!(client.get("a.test", "/first").await.unwrap().status, 200);
    let moved_to = client.migrate().unwrap();
    assert_eq!(client.get("a.test", "/second").await.unwrap().status, 200);
    let seen = up.seen.lock().unwrap();
    let peer = |i: usize| seen[i].headers["x-peer"].to_str().unwrap().to_owned();
    assert_eq!(peer(0), peer(1), "the address changed with the path");
    assert_ne!(peer(1), format!("127.0.0.1:{}", moved_to.port()));
}

/// `count` real client Initials to `server`, each opening a connection of its own (its
/// own connection ids and keys): quinn's client state machine writes them, nobody sends
/// them again or answers what comes back.
fn initials(server: SocketAddr, count: usize) -> Vec<Vec<u8>> {
    let config = Arc::new(quinn_proto::EndpointConfig::default());
    let mut endpoint = quinn_proto::Endpoint::new(config, None, false, None);
    let client = h3::client_config();
    let now = Instant::now();
    (0..count)
        .map(|_| {
            let (_, mut connection) = endpoint
                .connect(now, client.clone(), server, "a.test")
                .unwrap();
            let mut datagram = Vec::new();
            let transmit = connection.poll_transmit(now, 1, &mut datagram).unwrap();
            datagram.truncate(transmit.size);
            datagram
        })
        .collect()
}

/// Resident memory of a process, in KiB: now (`VmRSS`) or at its peak (`VmHWM`).
fn memory_kib(pid: u32, which: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix(which))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

/// What came back to the flooding socket.
#[derive(Default)]
struct Answers {
    datagrams: AtomicU64,
    bytes: AtomicU64,
    /// Retry packets (long header, type 3).
    retries: AtomicU64,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_initials_gets_retries_refusals_then_silence_in_bounded_memory() {
    // Alone: the flood keeps the machine's cores busy for a moment.
    let _alone = support::alone();
    let dir = tempfile::tempdir().unwrap();
    write_self_signed(dir.path(), "a", "a.test");
    let (port, admin_port) = (free_port(), free_port());
    let d = dir.path().display();
    let text = format!(
        "[server]\nlisten_tls = [{{ addr = \"127.0.0.1:{port}\", quic = true }}]\n\
         [admin]\nlisten = \"127.0.0.1:{admin_port}\"\n[log]\naccess = \"off\"\n\
         [tls]\nhandshake_timeout = \"1s\"\n[[tls.certificates]]\ncert = \"{d}/a.pem\"\nkey = \"{d}/a.key\"\n\
         [quic]\nretry_above = \"50r/s\"\nrefuse_above = \"200r/s\"\n\
         [[location]]\nmatch = \"/\"\nreturn = {{ status = 200, body = \"ok\" }}\n"
    );
    let path = dir.path().join("gateway.toml");
    std::fs::write(&path, text).unwrap();
    let running = Running(
        tollgate()
            .arg("-c")
            .arg(&path)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = running.0.id();
    wait_until_listening(port).await;
    let server: SocketAddr = ([127, 0, 0, 1], port).into();
    let admin: SocketAddr = ([127, 0, 0, 1], admin_port).into();
    let ok = within(10, h3::get(server, "a.test", "/")).await.unwrap();
    assert_eq!(ok.status, 200);
    let before = memory_kib(pid, "VmRSS:");

    let flood = initials(server, 4000);
    let socket = Arc::new(tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap());
    let answers = Arc::new(Answers::default());
    let listening = tokio::spawn({
        let (socket, answers) = (socket.clone(), answers.clone());
        async move {
            let mut buf = vec![0; 65536];
            while let Ok(n) = socket.recv(&mut buf).await {
                answers.datagrams.fetch_add(1, Ordering::Relaxed);
                answers.bytes.fetch_add(n as u64, Ordering::Relaxed);
                if n > 0 && buf[0] & 0xf0 == 0xf0 {
                    answers.retries.fetch_add(1, Ordering::Relaxed);
                }
            }
        }
    });
    let started = Instant::now();
    let mut sent = 0u64;
    for batch in flood.chunks(50) {
        for datagram in batch {
            socket.send_to(datagram, server).await.unwrap();
            sent += datagram.len() as u64;
        }
        tokio::time::sleep(Duration::from_millis(2)).await;
    }
    let took = started.elapsed();
    // The handshakes let in time out (`handshake_timeout`), and their last packets land.
    tokio::time::sleep(Duration::from_millis(2500)).await;
    listening.abort();

    let peak = memory_kib(pid, "VmHWM:");
    let (retried, refused, dropped) = (
        counted(admin, "retried").await,
        counted(admin, "refused").await,
        counted(admin, "dropped").await,
    );
    let accepted = counted(admin, "ok").await + counted(admin, "failed").await;
    let (datagrams, bytes, retries) = (
        answers.datagrams.load(Ordering::Relaxed),
        answers.bytes.load(Ordering::Relaxed),
        answers.retries.load(Ordering::Relaxed),
    );
    eprintln!(
        "{} Initials ({sent} bytes) in {took:?}: {accepted} accepted, {retried} retried, \
         {refused} refused, {dropped} dropped; {datagrams} datagrams ({bytes} bytes, \
         {retries} Retry) back; RSS {before} KiB before, peak {peak} KiB",
        flood.len()
    );
    assert!(retried >= 1.0 && refused >= 1.0 && dropped >= 1.0);
    assert!(retries >= 1, "no Retry on the wire");
    // Each second of the flood lets in at most `retry_above` (one window may straddle two).
    let windows = took.as_secs_f64().ceil() + 1.0;
    assert!(
        accepted <= 1.0 + 50.0 * windows,
        "{accepted} accepted in {took:?}"
    );
    // Never more bytes back than 3x those sent: the flood amplifies nothing.
    assert!(bytes <= 3 * sent, "{bytes} bytes back for {sent}");
    assert!(
        peak < before + 48 * 1024,
        "memory grew with the flood: {before} KiB -> {peak} KiB"
    );
    // The listener serves on once the second is over.
    let after = within(10, h3::get(server, "a.test", "/")).await.unwrap();
    assert_eq!(after.status, 200);
}

#[tokio::test]
async fn real_initials_cut_short_or_altered_are_dropped_and_the_listener_serves_on() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(
        dir.path(),
        up.addr,
        "",
        "[admin]\nlisten = \"127.0.0.1:0\"\n",
    );
    let server = gw.tls_addrs()[0];
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    let flood = initials(server, 64);
    for (i, initial) in flood.iter().enumerate() {
        // Cut anywhere (the header, the token, the payload), or one bit flipped.
        let cut = &initial[..i * initial.len() / flood.len()];
        socket.send_to(cut, server).await.unwrap();
        let mut altered = initial.clone();
        altered[(i * 37 + 1) % initial.len()] ^= 1 << (i % 8);
        socket.send_to(&altered, server).await.unwrap();
    }
    let reply = within(10, h3::get(server, "a.test", "/"))
        .await
        .expect("still served");
    assert_eq!(reply.status, 200);
    let admin = gw.admin_addr().unwrap();
    assert_eq!(counted(admin, "ok").await, 1.0);
}

#[tokio::test]
async fn packets_for_connection_ids_never_issued_draw_no_answer() {
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = quic_gateway(dir.path(), up.addr, "", "");
    let server = gw.tls_addrs()[0];
    let socket = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    // Short-header packets (first byte 0b01xxxxxx) to connection ids the endpoint never
    // gave out (its ids carry a keyed check): large enough to draw a stateless reset, were
    // the id one of ours. And long headers of other types than Initial, for no connection.
    for i in 0..500u32 {
        let mut packet = vec![0x40 | (i as u8 & 0x3f)];
        packet.extend_from_slice(&(i.wrapping_mul(2_654_435_761)).to_be_bytes());
        packet.resize(100, 0xa5);
        socket.send_to(&packet, server).await.unwrap();
        let mut handshake = vec![0xe0, 0, 0, 0, 1, 8];
        handshake.extend_from_slice(&u64::from(i).to_be_bytes());
        handshake.resize(1200, 0);
        socket.send_to(&handshake, server).await.unwrap();
    }
    let mut buf = [0; 2048];
    let answer = tokio::time::timeout(Duration::from_millis(500), socket.recv(&mut buf)).await;
    assert!(answer.is_err(), "answered: {answer:?}");
    let reply = within(10, h3::get(server, "a.test", "/")).await.unwrap();
    assert_eq!(reply.status, 200);
}
