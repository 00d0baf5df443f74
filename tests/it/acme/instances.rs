//! Two instances sharing `[acme] storage` (as on a shared filesystem): one orders, under
//! the name's lock, and both serve what it stored. The CA may validate at either: here it
//! reaches the one that did not order, which answers from storage.

use super::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn instances_sharing_storage_order_once_and_either_answers_the_ca() {
    let (a, b) = (Ports::both(), Ports::both());
    // The validator reaches `a` only.
    let Some((_shared, pebble, dir)) = with_pebble(a.options()).await else {
        return;
    };
    let storage = dir.path().join("acme");
    let toml = |ports| {
        config(
            ports,
            &pebble.directory(),
            pebble.ca_pem_path(),
            &storage,
            "",
            "",
        )
    };
    // `b` starts first and takes the name's lock; `a` starts while it orders.
    let gateway_b = start(&toml(b));
    let lock = wait_for_lock(&storage).await;
    let gateway_a = start(&toml(a));
    wait_for(&gateway_b, NAME, "valid", 30).await;
    wait_for(&gateway_a, NAME, "valid", 30).await;
    assert!(!lock.exists(), "the lock is released");
    assert_eq!(pebble.orders(), 1, "one order between them");
    let (issued_a, issued_b) = (
        sample(
            &metrics(&gateway_a).await,
            r#"tollgate_acme_orders_total{result="issued"}"#,
        ),
        sample(
            &metrics(&gateway_b).await,
            r#"tollgate_acme_orders_total{result="issued"}"#,
        ),
    );
    assert_eq!((issued_a, issued_b), (Some(0.0), Some(1.0)));
    let served_a = served_chain(a.tls_addr(), NAME).await;
    let served_b = served_chain(b.tls_addr(), NAME).await;
    assert_eq!(served_a[0], served_b[0], "both serve the one certificate");
    gateway_a.stop().await;
    gateway_b.stop().await;
}

/// The path of the first name lock that appears under `storage`.
async fn wait_for_lock(storage: &Path) -> std::path::PathBuf {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let lock = std::fs::read_dir(storage)
            .into_iter()
            .flatten()
            .flatten()
            .map(|ca| ca.path().join("certs").join(NAME).join("lock"))
            .find(|lock| lock.exists());
        if let Some(lock) = lock {
            return lock;
        }
        assert!(
            Instant::now() < deadline,
            "no lock under {}",
            storage.display()
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
