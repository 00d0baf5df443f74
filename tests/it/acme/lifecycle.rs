//! A certificate's life: a restart reuses the stored one (no new order, even with the CA
//! down), and a short-lived one is renewed and put in force under keep-alive load
//! without a failed request.

use super::*;

use std::sync::atomic::{AtomicU64, Ordering};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_reuses_the_stored_certificate_without_an_order() {
    let ports = Ports::both();
    let Some((_shared, mut pebble, dir)) = with_pebble(ports.options()).await else {
        return;
    };
    let toml = config_for(&pebble, ports, dir.path(), "");
    let gateway = start(&toml);
    wait_for(&gateway, NAME, "valid", 30).await;
    let first = served_chain(ports.tls_addr(), NAME).await;
    gateway.stop().await;
    let orders = pebble.orders();
    assert_eq!(orders, 1);

    // The CA is down: the stored certificate is all there is, and it is enough.
    pebble.stop();
    let gateway = start(&toml);
    let status = wait_for(&gateway, NAME, "valid", 5).await;
    assert!(status["not_after"].is_string(), "{status}");
    let again = served_chain(ports.tls_addr(), NAME).await;
    assert_eq!(again[0], first[0], "the stored certificate is served");
    let text = metrics(&gateway).await;
    assert_eq!(
        sample(&text, r#"tollgate_acme_orders_total{result="issued"}"#),
        Some(0.0)
    );
    assert_eq!(
        sample(&text, r#"tollgate_acme_orders_total{result="failed"}"#),
        Some(0.0)
    );
    gateway.stop().await;
    assert_eq!(pebble.orders(), orders, "no new order");
}

/// Requests that failed, and requests made, by the load below.
#[derive(Default)]
struct Tally {
    ok: AtomicU64,
    failed: AtomicU64,
}

/// HTTPS requests to [`NAME`] at `addr` until `stop`, trusting `root`: each client
/// keeps its connection alive for 20 requests, then makes a new one: resuming its TLS
/// session if `resume` (the certificate stays the session's), else with a full
/// handshake, which gets the certificate in force. Returns the leaves seen.
async fn load(
    addr: SocketAddr,
    root: String,
    resume: bool,
    tally: Arc<Tally>,
    stop: Arc<std::sync::atomic::AtomicBool>,
) -> Vec<Vec<u8>> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::pem::PemObject::pem_slice_iter(root.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let mut config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    if !resume {
        config.resumption = rustls::client::Resumption::disabled();
    }
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let mut serials = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let tcp = TcpStream::connect(addr).await.unwrap();
        let name = ServerName::try_from(NAME).unwrap();
        let tls = match connector.connect(name, tcp).await {
            Ok(tls) => tls,
            Err(err) => {
                eprintln!("handshake failed: {err}");
                tally.failed.fetch_add(1, Ordering::Relaxed);
                continue;
            }
        };
        let leaf = tls.get_ref().1.peer_certificates().unwrap()[0].clone();
        if serials.last() != Some(&leaf.to_vec()) {
            serials.push(leaf.to_vec());
        }
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        for _ in 0..20 {
            let req = http::Request::get("/")
                .header("host", NAME)
                .body(empty())
                .unwrap();
            match sender.send_request(req).await {
                Ok(answer) if answer.status() == 200 => {
                    let _ = read(answer).await;
                    tally.ok.fetch_add(1, Ordering::Relaxed);
                }
                other => {
                    eprintln!("request failed: {other:?}");
                    tally.failed.fetch_add(1, Ordering::Relaxed);
                }
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    serials
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_lived_certificate_is_renewed_under_load_without_a_failed_request() {
    let ports = Ports::both();
    // Renewal starts with a third of 24 s left, 16 s after issuance.
    let Some((_shared, pebble, dir)) =
        with_pebble(ports.options().validity(Duration::from_secs(24))).await
    else {
        return;
    };
    let gateway = start(&config_for(&pebble, ports, dir.path(), ""));
    let first = wait_for(&gateway, NAME, "valid", 30).await;
    let root = pebble.root().await;
    let tally = Arc::new(Tally::default());
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let clients: Vec<_> = (0..4)
        .map(|i| {
            let client = load(
                ports.tls_addr(),
                root.clone(),
                i % 2 == 0,
                tally.clone(),
                stop.clone(),
            );
            tokio::spawn(client)
        })
        .collect();
    // Renewed: a new end of validity in /status.
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let status = name_status(&gateway, NAME).await;
        if status["status"] == "valid" && status["not_after"] != first["not_after"] {
            break;
        }
        assert!(Instant::now() < deadline, "not renewed: {status}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    // Some handshakes after the renewal.
    tokio::time::sleep(Duration::from_secs(2)).await;
    stop.store(true, Ordering::Relaxed);
    let mut seen = Vec::new();
    for client in clients {
        seen.extend(client.await.unwrap());
    }
    seen.sort();
    seen.dedup();
    assert_eq!(tally.failed.load(Ordering::Relaxed), 0, "no failed request");
    assert!(tally.ok.load(Ordering::Relaxed) > 100);
    assert_eq!(
        seen.len(),
        2,
        "full handshakes got the first certificate, then the renewed one"
    );
    let text = metrics(&gateway).await;
    assert_eq!(
        sample(&text, r#"tollgate_acme_orders_total{result="issued"}"#),
        Some(2.0)
    );
    gateway.stop().await;
}
