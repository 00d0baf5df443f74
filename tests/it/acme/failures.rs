//! When ACME cannot work: the CA down (a placeholder is served, never another site's
//! certificate; retries back off; the name is issued once the CA is back), a directory
//! that is not an ACME server, and storage that cannot be used.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_the_ca_down_a_placeholder_is_served_and_retries_back_off() {
    let ports = Ports::both();
    let Some((_shared, mut pebble, dir)) = with_pebble(ports.options()).await else {
        return;
    };
    pebble.stop();
    let gateway = start(&config_for(
        &pebble,
        ports,
        dir.path(),
        r#"retry_max = "1m""#,
    ));

    // Before any certificate: the placeholder, for the name and for no SNI alike.
    let chain = served_chain(ports.tls_addr(), NAME).await;
    assert_eq!(chain.len(), 1);
    assert!(
        common_name(&chain[0]).contains("placeholder"),
        "{}",
        common_name(&chain[0])
    );
    let status = wait_for(&gateway, NAME, "failed", 10).await;
    let error = status["error"].as_str().unwrap();
    assert!(
        error.contains(&pebble.directory()),
        "the error names the directory: {error}"
    );
    assert!(
        status["state"]
            .as_str()
            .unwrap()
            .contains(", next try at 20"),
        "{status}"
    );

    // 1 s, 2 s, 4 s…: in 6 s, three or four tries, not six.
    tokio::time::sleep(Duration::from_secs(6)).await;
    let text = metrics(&gateway).await;
    let failed = sample(&text, r#"tollgate_acme_orders_total{result="failed"}"#).unwrap();
    assert!(
        (2.0..=4.0).contains(&failed),
        "{failed} failed tries in 6 s"
    );

    // The CA is back: the next try issues.
    pebble.restart().await;
    wait_for(&gateway, NAME, "valid", 30).await;
    let chain = served_chain(ports.tls_addr(), NAME).await;
    pebble::verify_chain(&pebble.root().await, &pem(&chain), NAME)
        .expect("chains to pebble's root");
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_that_is_not_an_acme_server_is_a_clear_failure() {
    let ports = Ports::both();
    let Some((_shared, pebble, dir)) = with_pebble(ports.options()).await else {
        return;
    };
    // pebble's own HTTPS, a path that is no directory (404).
    let directory = format!(
        "{}/nothing-here",
        pebble.directory().trim_end_matches("/dir")
    );
    let storage = dir.path().join("acme");
    let toml = config(ports, &directory, pebble.ca_pem_path(), &storage, "", "");
    let gateway = start(&toml);
    let status = wait_for(&gateway, NAME, "failed", 10).await;
    let error = status["error"].as_str().unwrap();
    assert!(
        error.contains("nothing-here"),
        "the error names the directory: {error}"
    );
    // Still the placeholder, still no crash.
    let chain = served_chain(ports.tls_addr(), NAME).await;
    assert!(common_name(&chain[0]).contains("placeholder"));
    gateway.stop().await;
}

#[tokio::test]
async fn unusable_storage_stops_the_start_with_its_path() {
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let ports = Ports::both();
    let storage = file.join("acme");
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, pebble_free_ca()).unwrap();
    let toml = config(ports, "https://127.0.0.1:1/dir", &ca, &storage, "", "");
    let config = tollgate::config::from_str(&toml, Path::new("/tmp/tollgate-test/gateway.toml"));
    let err = match config.map(tollgate::Gateway::start) {
        Ok(Ok(_)) => panic!("started with storage under a file"),
        Ok(Err(err)) => err.to_string(),
        // `-t`'s check may already refuse it.
        Err(errors) => errors.to_string(),
    };
    assert!(err.contains("a-file/acme"), "{err}");
}

/// Any CA certificate, for a `ca` that must read but is never used.
fn pebble_free_ca() -> String {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    params.self_signed(&key).unwrap().pem()
}
