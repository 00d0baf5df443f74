//! ACME against a real ACME server: Debian's pebble, with pebble-challtestsrv as its DNS
//! pointing every name at 127.0.0.1, so its validator really connects back to the
//! gateway's listeners (http-01 on the plain one, tls-alpn-01 on the TLS one).
//!
//! Here: first issuance over each challenge type, the certificate served for its SNI and
//! chaining to pebble's root. In `acme/`: restart and renewal (`lifecycle`), the CA down
//! or wrong and unusable storage (`failures`), instances sharing storage (`instances`).

mod failures;
mod instances;
mod lifecycle;
mod names;
mod renewal_info;

use crate::support::pebble::{self, Options, Pebble};
use crate::support::*;

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::pki_types::{CertificateDer, ServerName};
use tokio::net::TcpStream;

/// The name the tests order certificates for (pebble's DNS answers 127.0.0.1).
const NAME: &str = "shop.test";

/// The gateway's ports, chosen before pebble starts (its validator connects to them).
#[derive(Clone, Copy)]
struct Ports {
    plain: Option<u16>,
    tls: u16,
}

impl Ports {
    fn both() -> Ports {
        Ports {
            plain: Some(free_port()),
            tls: free_port(),
        }
    }

    fn tls_only() -> Ports {
        Ports {
            plain: None,
            tls: free_port(),
        }
    }

    /// pebble validating on these ports.
    fn options(self) -> Options {
        let options = Options::default().tls_port(self.tls);
        match self.plain {
            Some(port) => options.http_port(port),
            None => options,
        }
    }

    fn tls_addr(self) -> SocketAddr {
        SocketAddr::from(([127, 0, 0, 1], self.tls))
    }
}

/// A gateway config: `[server]` on `ports`, `[acme]` at `directory` trusting `ca`, with
/// `storage`, and one site for [`NAME`] with `acme = true` answering `200 shop`.
/// `acme_extra` adds lines to `[acme]`; `top` adds sections before the sites.
fn config(
    ports: Ports,
    directory: &str,
    ca: &Path,
    storage: &Path,
    acme_extra: &str,
    top: &str,
) -> String {
    let listen = match ports.plain {
        Some(port) => format!("listen = [\"127.0.0.1:{port}\"]\n"),
        None => String::new(),
    };
    format!(
        r#"
[server]
workers = 1
{listen}listen_tls = ["127.0.0.1:{tls}"]

[admin]
listen = "127.0.0.1:0"

[log]
access = "off"

[acme]
directory = "{directory}"
email = "ops@shop.test"
storage = "{storage}"
ca = "{ca}"
retry_min = "1s"
{acme_extra}

{top}

[[site]]
names = ["{NAME}"]
acme = true

[[site.location]]
match = "/"
return = {{ status = 200, body = "shop" }}
"#,
        tls = ports.tls,
        storage = storage.display(),
        ca = ca.display(),
    )
}

/// The config for `pebble`, with storage under `dir`.
fn config_for(pebble: &Pebble, ports: Ports, dir: &Path, acme_extra: &str) -> String {
    let storage = dir.join("acme");
    config(
        ports,
        &pebble.directory(),
        pebble.ca_pem_path(),
        &storage,
        acme_extra,
        "",
    )
}

/// What every test here starts with: its share of the machine, pebble validating as
/// `options` say, and a directory for storage. `None` (the test is skipped) without
/// pebble.
async fn with_pebble(options: Options) -> Option<(Shared, Pebble, tempfile::TempDir)> {
    let shared = shared();
    if !pebble::available() {
        return None;
    }
    let pebble = Pebble::start(options).await;
    Some((shared, pebble, tempfile::tempdir().unwrap()))
}

/// The gateway started from `toml`.
fn start(toml: &str) -> tollgate::Gateway {
    gateway(toml)
}

/// `/status`'s `acme` member for `name`.
async fn name_status(gateway: &tollgate::Gateway, name: &str) -> serde_json::Value {
    let admin = gateway.admin_addr().expect("admin");
    let reply = get_text(admin, "/status").await;
    let status: serde_json::Value = serde_json::from_str(&reply.body).expect("status is JSON");
    status["acme"][name].clone()
}

/// Waits until `name`'s state starts with `word` (`valid`, `failed`…), at most `secs`.
async fn wait_for(
    gateway: &tollgate::Gateway,
    name: &str,
    word: &str,
    secs: u64,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        let status = name_status(gateway, name).await;
        if status["status"] == word {
            return status;
        }
        assert!(
            Instant::now() < deadline,
            "{name} not {word} within {secs}s: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// `/metrics` as text.
async fn metrics(gateway: &tollgate::Gateway) -> String {
    get_text(gateway.admin_addr().expect("admin"), "/metrics")
        .await
        .body
}

/// The value of the sample whose line starts with `series` (name and labels).
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let value = line.strip_prefix(series)?.strip_prefix(' ')?;
        value.parse().ok()
    })
}

/// The chain a TLS handshake with `sni` gets from `addr` (no verification: the tests
/// check it themselves).
async fn served_chain(addr: SocketAddr, sni: &str) -> Vec<CertificateDer<'static>> {
    handshake(addr, sni, &[b"h2", b"http/1.1"])
        .await
        .expect("handshake")
}

/// A handshake with `sni` offering `alpn`: the chain served, or why it failed.
async fn handshake(
    addr: SocketAddr,
    sni: &str,
    alpn: &[&[u8]],
) -> std::io::Result<Vec<CertificateDer<'static>>> {
    let mut config = rustls::ClientConfig::builder()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AcceptAny))
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(sni.to_owned()).expect("server name");
    let tls = connector.connect(name, tcp).await?;
    Ok(tls
        .get_ref()
        .1
        .peer_certificates()
        .expect("a chain")
        .to_vec())
}

/// `chain` as PEM, leaf first.
fn pem(chain: &[CertificateDer<'_>]) -> String {
    chain
        .iter()
        .map(|cert| {
            let body = base64_lines(cert.as_ref());
            format!("-----BEGIN CERTIFICATE-----\n{body}-----END CERTIFICATE-----\n")
        })
        .collect()
}

fn base64_lines(bytes: &[u8]) -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut text = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk.iter().fold(0u32, |n, b| n << 8 | u32::from(*b)) << (8 * (3 - chunk.len()));
        for i in 0..4 {
            text.push(if i <= chunk.len() {
                ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char
            } else {
                '='
            });
        }
    }
    text.as_bytes()
        .chunks(64)
        .map(|line| format!("{}\n", std::str::from_utf8(line).unwrap()))
        .collect()
}

/// The subject common name of `cert` (to tell the placeholder).
fn common_name(cert: &CertificateDer<'_>) -> String {
    let (_, parsed) = x509_parser::parse_x509_certificate(cert.as_ref()).expect("x509");
    let cn = parsed.subject().iter_common_name().next();
    cn.and_then(|cn| cn.as_str().ok()).unwrap_or("").to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http01_issues_before_any_rule_and_the_certificate_chains_to_pebble() {
    let ports = Ports::both();
    let Some((_shared, pebble, dir)) = with_pebble(ports.options()).await else {
        return;
    };
    // Every request from loopback is denied, and the site redirects everything: the
    // validator (on loopback too) still gets its answer.
    let top = "[access]\ndeny = [\"127.0.0.0/8\"]";
    let storage = dir.path().join("acme");
    let toml = config(
        ports,
        &pebble.directory(),
        pebble.ca_pem_path(),
        &storage,
        "",
        top,
    );
    let gateway = start(&toml);
    let status = wait_for(&gateway, NAME, "valid", 30).await;
    assert!(
        status["state"]
            .as_str()
            .unwrap()
            .starts_with("valid until 20"),
        "{status}"
    );
    assert!(pebble.http_validations() > 0, "validated over http-01");

    let chain = served_chain(ports.tls_addr(), NAME).await;
    pebble::verify_chain(&pebble.root().await, &pem(&chain), NAME)
        .expect("chains to pebble's root");
    // Stored with its key, private.
    let stored = std::fs::read_dir(&storage)
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let key = stored.join("certs").join(NAME).join("bundle.pem");
    let mode =
        std::os::unix::fs::PermissionsExt::mode(&std::fs::metadata(&key).unwrap().permissions());
    assert_eq!(mode & 0o777, 0o600);
    let storage_mode = std::fs::metadata(&storage).unwrap().permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&storage_mode) & 0o777,
        0o700
    );

    let text = metrics(&gateway).await;
    assert_eq!(
        sample(&text, r#"tollgate_acme_orders_total{result="issued"}"#),
        Some(1.0)
    );
    let expiry = format!(r#"tollgate_certificate_expiry_timestamp_seconds{{name="{NAME}"}}"#);
    let not_after = sample(&text, &expiry).expect("expiry of the managed certificate");
    let (_, leaf) = x509_parser::parse_x509_certificate(chain[0].as_ref()).unwrap();
    assert_eq!(not_after as i64, leaf.validity().not_after.timestamp());
    // A token nobody ordered goes through the rules like any request (403 here).
    let plain = SocketAddr::from(([127, 0, 0, 1], ports.plain.unwrap()));
    let reply = get_text(plain, "/.well-known/acme-challenge/unknown-token").await;
    assert_eq!(reply.status, 403);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_alpn01_proves_a_name_without_a_plain_listener() {
    let ports = Ports::tls_only();
    let Some((_shared, pebble, dir)) = with_pebble(ports.options()).await else {
        return;
    };
    let gateway = start(&config_for(&pebble, ports, dir.path(), ""));
    wait_for(&gateway, NAME, "valid", 30).await;
    assert_eq!(
        pebble.http_validations(),
        0,
        "no plain listener: tls-alpn-01 only"
    );
    assert!(pebble.validations() > 0);
    let chain = served_chain(ports.tls_addr(), NAME).await;
    pebble::verify_chain(&pebble.root().await, &pem(&chain), NAME)
        .expect("chains to pebble's root");
    // With no challenge under way, `acme-tls/1` alone gets nothing; offered beside
    // others, it is a handshake like any other.
    let addr = ports.tls_addr();
    assert!(handshake(addr, NAME, &[b"acme-tls/1"]).await.is_err());
    let mixed = handshake(addr, NAME, &[b"acme-tls/1", b"http/1.1"])
        .await
        .unwrap();
    assert_eq!(mixed[0], chain[0]);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn external_account_binding_makes_the_account_and_a_wrong_key_is_a_clear_failure() {
    let hmac = [0x5au8; 32];
    let ports = Ports::both();
    let Some((_shared, pebble, dir)) = with_pebble(ports.options().eab("kid-1", &hmac)).await
    else {
        return;
    };
    let key = base64_lines(&hmac);
    let eab = format!("eab_kid = \"kid-1\"\neab_hmac_key = \"{}\"", key.trim());
    let gateway = start(&config_for(&pebble, ports, dir.path(), &eab));
    wait_for(&gateway, NAME, "valid", 30).await;
    gateway.stop().await;

    let other = tempfile::tempdir().unwrap();
    let wrong = format!(
        "eab_kid = \"kid-1\"\neab_hmac_key = \"{}\"",
        base64_lines(&[1u8; 32]).trim()
    );
    let gateway = start(&config_for(&pebble, ports, other.path(), &wrong));
    let status = wait_for(&gateway, NAME, "failed", 10).await;
    let error = status["error"].as_str().unwrap();
    assert!(
        error.contains("ACME directory") && error.contains("API error"),
        "{error}"
    );
    gateway.stop().await;
}
