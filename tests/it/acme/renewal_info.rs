//! A CA offering ACME Renewal Information (RFC 9773), which pebble 2.4 does not: a fake
//! directory on loopback in front of a certificate pebble issued. Its window lies in the
//! past and its `Retry-After` is past any clock: the gateway renews at once, fails (the
//! fake issues nothing), backs off, and neither loops nor panics.

use super::*;

use http::Response;

/// The fake CA: a directory with `renewalInfo`, a past window, and 500 for the rest.
async fn fake_ca() -> Upstream {
    Upstream::start(|req| async move {
        let host = req.headers()["host"].to_str().unwrap().to_owned();
        let base = format!("http://{host}");
        let path = req.uri().path().to_owned();
        let (status, body) = if path == "/dir" {
            let directory = serde_json::json!({
                "newNonce": format!("{base}/nonce"),
                "newAccount": format!("{base}/account"),
                "newOrder": format!("{base}/order"),
                "renewalInfo": format!("{base}/ari"),
            });
            (200, directory.to_string())
        } else if path.starts_with("/ari/") {
            let window = r#"{"suggestedWindow":{"start":"2020-01-01T00:00:00Z","end":"2020-01-02T00:00:00Z"}}"#;
            (200, window.to_owned())
        } else {
            (500, r#"{"type":"urn:ietf:params:acme:error:serverInternal","detail":"the fake issues nothing"}"#.to_owned())
        };
        Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .header("retry-after", "18446744073709551615")
            .header("replay-nonce", "fake-nonce")
            .body(full(body))
            .unwrap()
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_past_renewal_window_renews_at_once_and_backs_off_without_a_loop() {
    let ports = Ports::both();
    let Some((_shared, pebble, dir)) = with_pebble(ports.options()).await else {
        return;
    };
    let gateway = start(&config_for(&pebble, ports, dir.path(), ""));
    wait_for(&gateway, NAME, "valid", 30).await;
    let issued = served_chain(ports.tls_addr(), NAME).await;
    gateway.stop().await;

    // The same account and certificate, filed under the fake CA's directory.
    let fake = fake_ca().await;
    let directory = format!("http://{}/dir", fake.addr);
    let storage = dir.path().join("acme");
    let pebble_part = std::fs::read_dir(&storage)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let fake_part = storage.join(format!("127.0.0.1_{}-dir", fake.addr.port()));
    copy_dir(&pebble_part, &fake_part);
    let account = fake_part.join("account.json");
    let mut credentials: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&account).unwrap()).unwrap();
    credentials["directory"] = serde_json::Value::String(directory.clone());
    std::fs::write(&account, credentials.to_string()).unwrap();

    let toml = config(ports, &directory, pebble.ca_pem_path(), &storage, "", "");
    let gateway = start(&toml);
    let status = wait_for(&gateway, NAME, "failed", 10).await;
    assert!(
        status["not_after"].is_string(),
        "the stored certificate stays in force: {status}"
    );
    let asked_at = fake.count();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let more = fake.count() - asked_at;
    // A loop would ask thousands of times; backoff asks a few.
    assert!(more < 20, "{more} requests to the CA in 3 s");
    assert_eq!(served_chain(ports.tls_addr(), NAME).await[0], issued[0]);
    assert!(
        fake.seen
            .lock()
            .unwrap()
            .iter()
            .any(|seen| seen.uri.starts_with("/ari/")),
        "ARI was asked"
    );
    gateway.stop().await;
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
