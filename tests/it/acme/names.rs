//! Which names are managed: a name a static certificate covers is served with it and not
//! ordered; a reload orders the names it adds and stops serving those it removes.

use super::*;

/// A self-signed certificate for `name` at `dir/static.pem` and `dir/static.key`.
fn static_certificate(dir: &Path, name: &str) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, "static");
    let cert = params.self_signed(&key).unwrap();
    std::fs::write(dir.join("static.pem"), cert.pem()).unwrap();
    std::fs::write(dir.join("static.key"), key.serialize_pem()).unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_static_certificate_wins_and_its_name_is_not_ordered() {
    let ports = Ports::both();
    let Some((_shared, pebble, dir)) = with_pebble(ports.options()).await else {
        return;
    };
    static_certificate(dir.path(), "static.test");
    let tls = format!(
        "[[tls.certificates]]\ncert = \"{0}/static.pem\"\nkey = \"{0}/static.key\"",
        dir.path().display()
    );
    let storage = dir.path().join("acme");
    let toml = config(
        ports,
        &pebble.directory(),
        pebble.ca_pem_path(),
        &storage,
        "",
        &tls,
    )
    .replace(
        r#"names = ["shop.test"]"#,
        r#"names = ["shop.test", "static.test"]"#,
    );
    let gateway = start(&toml);
    wait_for(&gateway, NAME, "valid", 30).await;
    assert!(
        name_status(&gateway, "static.test").await.is_null(),
        "not managed"
    );
    let chain = served_chain(ports.tls_addr(), "static.test").await;
    assert_eq!(common_name(&chain[0]), "static");
    assert_eq!(pebble.orders(), 1, "only shop.test was ordered");
    let text = metrics(&gateway).await;
    let static_expiry = r#"tollgate_certificate_expiry_timestamp_seconds{name="static.test"}"#;
    assert!(
        sample(&text, static_expiry).is_some(),
        "static certificates have an expiry too"
    );
    // `/status` lists both, with when they end.
    let admin = gateway.admin_addr().expect("admin");
    let status: serde_json::Value =
        serde_json::from_str(&get_text(admin, "/status").await.body).expect("JSON");
    for name in ["static.test", NAME] {
        let not_after = status["certificates"][name].as_str().unwrap_or_default();
        assert!(not_after.ends_with('Z'), "{name}: {status}");
    }
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_orders_names_it_adds_and_stops_serving_those_it_removes() {
    let ports = Ports::both();
    let Some((_shared, pebble, dir)) = with_pebble(ports.options()).await else {
        return;
    };
    let toml = config_for(&pebble, ports, dir.path(), "");
    let gateway = start(&toml);
    wait_for(&gateway, NAME, "valid", 30).await;
    let shop = served_chain(ports.tls_addr(), NAME).await;

    let load = |text: &str| {
        tollgate::config::from_str(text, Path::new("/tmp/tollgate-test/gateway.toml")).unwrap()
    };
    let both = toml.replace(
        r#"names = ["shop.test"]"#,
        r#"names = ["shop.test", "new.test"]"#,
    );
    gateway.reload(&load(&both)).expect("reload");
    wait_for(&gateway, "new.test", "valid", 30).await;
    let new = served_chain(ports.tls_addr(), "new.test").await;
    pebble::verify_chain(&pebble.root().await, &pem(&new), "new.test").expect("new.test's own");
    assert_eq!(
        served_chain(ports.tls_addr(), NAME).await[0],
        shop[0],
        "shop.test kept its certificate"
    );
    assert_eq!(pebble.orders(), 2);

    let only_new = toml.replace(r#"names = ["shop.test"]"#, r#"names = ["new.test"]"#);
    gateway.reload(&load(&only_new)).expect("reload");
    assert!(
        name_status(&gateway, NAME).await.is_null(),
        "no longer managed"
    );
    let served = served_chain(ports.tls_addr(), NAME).await;
    assert_ne!(
        served[0], shop[0],
        "shop.test's certificate is no longer served"
    );
    assert_eq!(served[0], new[0], "the default: the first managed name's");
    gateway.stop().await;
}
