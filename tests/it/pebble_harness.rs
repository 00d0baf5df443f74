//! The pebble harness itself (`support::pebble`): pebble answers with a directory over the
//! HTTPS the harness made and serves its roots; it issues only after validating for real,
//! connecting back to the port the test named (http-01 and tls-alpn-01); it requires
//! external account binding when told; it comes back on the same ports after a stop.

use crate::support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use instant_acme::{
    Account, ChallengeType, ExternalAccountKey, Identifier, KeyAuthorization, NewAccount, NewOrder,
    OrderStatus, RetryPolicy,
};
use support::pebble::{self, Options, Pebble};
use support::{text, within, Upstream};

const NEW_ACCOUNT: NewAccount<'static> = NewAccount {
    contact: &[],
    terms_of_service_agreed: true,
    only_return_existing: false,
};

/// Answers http-01 challenges: the key authorization of each token put in `tokens`.
async fn challenge_responder(tokens: Arc<Mutex<HashMap<String, String>>>) -> Upstream {
    Upstream::start(move |req| {
        let path = req.uri().path().to_owned();
        let token = path.strip_prefix("/.well-known/acme-challenge/");
        let answer = token.and_then(|token| tokens.lock().unwrap().get(token).cloned());
        async move {
            match answer {
                Some(key_authorization) => text(200, &key_authorization),
                None => text(404, "no such token"),
            }
        }
    })
    .await
}

#[tokio::test]
async fn the_directory_offers_accounts_and_orders_and_the_roots_are_served() {
    let _shared = support::shared();
    if !pebble::available() {
        return;
    }
    let pebble = Pebble::start(Options::default()).await;
    let https = pebble::Https::trusting(pebble.ca_pem());
    let (status, body) = https.get(&pebble.directory()).await.unwrap();
    assert_eq!(status, 200);
    let directory: serde_json::Value = serde_json::from_slice(&body).unwrap();
    for key in ["newAccount", "newOrder", "newNonce"] {
        assert!(directory[key].is_string(), "{key} in {directory}");
    }
    assert_eq!(directory["meta"]["externalAccountRequired"], false);

    let root = pebble.root().await;
    let intermediate = pebble.intermediate().await;
    assert!(root.starts_with("-----BEGIN CERTIFICATE-----"), "{root}");
    assert!(intermediate.contains("BEGIN CERTIFICATE"), "{intermediate}");
    assert_ne!(root, intermediate);
}

/// Orders a certificate for `name` as a new account, answering its one challenge of type
/// `kind`: `respond(token, key_authorization)` puts the answer in place before pebble is
/// told to validate. Returns the chain (PEM, leaf first).
async fn issue(
    pebble: &Pebble,
    name: &str,
    kind: ChallengeType,
    mut respond: impl FnMut(&str, &KeyAuthorization),
) -> String {
    let builder = Account::builder_with_http(pebble.acme_http());
    let (account, _) = builder
        .create(&NEW_ACCOUNT, pebble.directory(), None)
        .await
        .unwrap();
    let identifiers = [Identifier::Dns(name.to_owned())];
    let mut order = account
        .new_order(&NewOrder::new(&identifiers))
        .await
        .unwrap();
    let mut authorizations = order.authorizations();
    while let Some(authorization) = authorizations.next().await {
        let mut authorization = authorization.unwrap();
        let mut challenge = authorization.challenge(kind.clone()).unwrap();
        respond(&challenge.token, &challenge.key_authorization());
        challenge.set_ready().await.unwrap();
    }
    let retries = RetryPolicy::new()
        .initial_delay(Duration::from_millis(50))
        .backoff(1.5)
        .timeout(Duration::from_secs(8));
    let status = order.poll_ready(&retries).await.unwrap();
    assert_eq!(status, OrderStatus::Ready, "{}", pebble.log());
    order.finalize_csr(&csr(name)).await.unwrap();
    order.poll_certificate(&retries).await.unwrap()
}

#[tokio::test]
async fn an_http_01_order_is_validated_on_the_named_port_and_chains_to_the_root() {
    let _shared = support::shared();
    if !pebble::available() {
        return;
    }
    let tokens: Arc<Mutex<HashMap<String, String>>> = Arc::default();
    let responder = challenge_responder(tokens.clone()).await;
    let options = Options::default()
        .http_port(responder.addr.port())
        .validity(Duration::from_secs(600));
    let pebble = Pebble::start(options).await;

    let answer = |token: &str, key_authorization: &KeyAuthorization| {
        let answer = key_authorization.as_str().to_owned();
        tokens.lock().unwrap().insert(token.to_owned(), answer);
    };
    let chain = within(
        15,
        issue(&pebble, "acme.test", ChallengeType::Http01, answer),
    )
    .await;

    // Pebble really asked the responder, three times (its three simulated vantage points),
    // naming the identifier and the port in Host.
    assert_eq!(pebble.validations(), 1);
    assert_eq!((responder.count(), pebble.http_validations()), (3, 3));
    let seen = responder.last();
    assert!(
        seen.uri.starts_with("/.well-known/acme-challenge/"),
        "{seen:?}"
    );
    let host = seen.headers["host"].to_str().unwrap();
    assert_eq!(host, format!("acme.test:{}", responder.addr.port()));
    assert_eq!((pebble.orders(), pebble.issued()), (1, 1));

    // Leaf and intermediate; the root only from the management interface.
    assert_eq!(chain.matches("BEGIN CERTIFICATE").count(), 2);
    let root = pebble.root().await;
    pebble::verify_chain(&root, &chain, "acme.test").unwrap();
    let other_root = Pebble::start(Options::default()).await.root().await;
    assert!(pebble::verify_chain(&other_root, &chain, "acme.test").is_err());
    // Pebble counts both ends: notAfter is notBefore + the period − 1 s (RFC 5280).
    assert_eq!(validity_of_leaf(&chain), Duration::from_secs(599));
}

#[tokio::test]
async fn a_tls_alpn_01_order_is_validated_on_the_named_tls_port() {
    let _shared = support::shared();
    if !pebble::available() {
        return;
    }
    let responder = TlsAlpnResponder::start().await;
    let options = Options::default().tls_port(responder.port);
    let pebble = Pebble::start(options).await;

    let answer = |_: &str, key_authorization: &KeyAuthorization| {
        responder.answer("acme.test", key_authorization);
    };
    let chain = within(
        15,
        issue(&pebble, "acme.test", ChallengeType::TlsAlpn01, answer),
    )
    .await;

    pebble::verify_chain(&pebble.root().await, &chain, "acme.test").unwrap();
    let handshakes = responder.handshakes.lock().unwrap().clone();
    let expected = (Some("acme.test".to_owned()), Some(b"acme-tls/1".to_vec()));
    assert_eq!(handshakes, vec![expected; 3]);
    assert_eq!((pebble.validations(), pebble.http_validations()), (1, 0));
}

/// The server name (SNI) and ALPN protocol a client asked for in one handshake.
type Handshake = (Option<String>, Option<Vec<u8>>);

/// A tls-alpn-01 responder (RFC 8737) on 127.0.0.1:0: offers only `acme-tls/1` and serves
/// the validation certificate set by [`TlsAlpnResponder::answer`]; records the SNI and
/// ALPN protocol of every finished handshake.
struct TlsAlpnResponder {
    port: u16,
    config: Arc<Mutex<Option<Arc<rustls::ServerConfig>>>>,
    handshakes: Arc<Mutex<Vec<Handshake>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for TlsAlpnResponder {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl TlsAlpnResponder {
    async fn start() -> TlsAlpnResponder {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let config: Arc<Mutex<Option<Arc<rustls::ServerConfig>>>> = Arc::default();
        let handshakes: Arc<Mutex<Vec<_>>> = Arc::default();
        let (slot, seen) = (config.clone(), handshakes.clone());
        let task = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let Some(config) = slot.lock().unwrap().clone() else {
                    continue;
                };
                let seen = seen.clone();
                tokio::spawn(async move {
                    let acceptor = tokio_rustls::TlsAcceptor::from(config);
                    if let Ok(tls) = acceptor.accept(stream).await {
                        let (_, connection) = tls.get_ref();
                        let sni = connection.server_name().map(str::to_owned);
                        let alpn = connection.alpn_protocol().map(<[u8]>::to_vec);
                        seen.lock().unwrap().push((sni, alpn));
                    }
                });
            }
        });
        TlsAlpnResponder {
            port,
            config,
            handshakes,
            task,
        }
    }

    /// Serves the validation certificate for `name` and `key_authorization` from now on.
    fn answer(&self, name: &str, key_authorization: &KeyAuthorization) {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
        let digest = key_authorization.digest();
        params.custom_extensions =
            vec![rcgen::CustomExtension::new_acme_identifier(digest.as_ref())];
        let cert = params.self_signed(&key).unwrap();
        let key = rustls::pki_types::PrivatePkcs8KeyDer::from(key.serialize_der());
        let provider = rustls::crypto::ring::default_provider();
        let signing_key = provider.key_provider.load_private_key(key.into()).unwrap();
        // Served as is: `with_single_cert` would check the certificate first, and webpki
        // refuses its critical acmeIdentifier extension.
        let certified = rustls::sign::CertifiedKey::new(vec![cert.der().clone()], signing_key);
        let resolver = rustls::sign::SingleCertAndKey::from(certified);
        let mut config = rustls::ServerConfig::builder_with_provider(Arc::new(provider))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_cert_resolver(Arc::new(resolver));
        config.alpn_protocols = vec![b"acme-tls/1".to_vec()];
        *self.config.lock().unwrap() = Some(Arc::new(config));
    }
}

/// A CSR for `name` (with a new key: the test throws it away).
fn csr(name: &str) -> Vec<u8> {
    let key = rcgen::KeyPair::generate().unwrap();
    let params = rcgen::CertificateParams::new(vec![name.to_owned()]).unwrap();
    params.serialize_request(&key).unwrap().der().to_vec()
}

/// notAfter − notBefore of the first certificate in a PEM chain.
fn validity_of_leaf(chain: &str) -> Duration {
    let (_, pem) = x509_parser::pem::parse_x509_pem(chain.as_bytes()).unwrap();
    let cert = pem.parse_x509().unwrap();
    let validity = cert.validity();
    let seconds = validity.not_after.timestamp() - validity.not_before.timestamp();
    Duration::from_secs(seconds.try_into().unwrap())
}

#[tokio::test]
async fn external_account_binding_is_required_when_configured() {
    let _shared = support::shared();
    if !pebble::available() {
        return;
    }
    let hmac = b"a MAC key only this test knows, 32+ bytes long";
    let pebble = Pebble::start(Options::default().eab("kid-1", hmac)).await;

    let unbound = Account::builder_with_http(pebble.acme_http())
        .create(&NEW_ACCOUNT, pebble.directory(), None)
        .await;
    let error = unbound
        .err()
        .expect("an account without a binding is refused");
    assert!(
        error.to_string().contains("externalAccountRequired"),
        "{error}"
    );

    let key = ExternalAccountKey::new("kid-1".to_owned(), hmac);
    let _bound = Account::builder_with_http(pebble.acme_http())
        .create(&NEW_ACCOUNT, pebble.directory(), Some(&key))
        .await
        .unwrap();
}

#[tokio::test]
async fn a_stopped_pebble_restarts_on_the_same_directory_with_a_new_root() {
    let _shared = support::shared();
    if !pebble::available() {
        return;
    }
    let mut pebble = Pebble::start(Options::default()).await;
    let https = pebble::Https::trusting(pebble.ca_pem());
    let first_root = pebble.root().await;

    pebble.stop();
    assert!(https.get(&pebble.directory()).await.is_err());

    pebble.restart().await;
    let (status, _) = https.get(&pebble.directory()).await.unwrap();
    assert_eq!(status, 200);
    assert_ne!(pebble.root().await, first_root);
}
