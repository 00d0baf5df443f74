use rcgen::{BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair};

use super::*;

/// A CA (its certificate and issuer).
fn ca(name: &str) -> (CertificateDer<'static>, Issuer<'static, KeyPair>) {
    let key = KeyPair::generate().unwrap();
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name.push(DnType::CommonName, name);
    let cert = params.self_signed(&key).unwrap();
    (cert.der().clone(), Issuer::new(params, key))
}

fn client(name: &str, by: &Issuer<'static, KeyPair>) -> CertificateDer<'static> {
    let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
    params.distinguished_name.push(DnType::CommonName, format!("{name}, #1"));
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    params.signed_by(&KeyPair::generate().unwrap(), by).unwrap().der().clone()
}

fn auth(root: &CertificateDer<'static>, verify: VerifyClient) -> ClientAuth {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(root.clone()).unwrap();
    let settings = ClientCertificates {
        ca: "ca.pem".into(),
        roots: Arc::new(roots),
        verify,
        roots_id: 7,
    };
    let config = |verifier, _| {
        let config = ServerConfig::builder_with_provider(Arc::new(crate::certs::provider()))
            .with_safe_default_protocol_versions()?
            .with_client_cert_verifier(verifier)
            .with_cert_resolver(Arc::new(rustls::server::ResolvesServerCertUsingSni::new()));
        Ok(Arc::new(config))
    };
    ClientAuth::new(&settings, false, config).unwrap()
}

fn checked(auth: &ClientAuth, chain: Option<&[CertificateDer<'_>]>, sni: &str) -> Peer {
    let mut peer = Peer {
        sni: Some(sni.into()),
        ..Peer::default()
    };
    auth.check(chain, UnixTime::now(), &mut peer);
    peer
}

#[test]
fn a_certificate_the_ca_signed_passes_with_its_subject_and_fingerprint() {
    let (root, issuer) = ca("Clients CA");
    let auth = auth(&root, VerifyClient::On);
    let alice = client("alice", &issuer);
    let peer = checked(&auth, Some(std::slice::from_ref(&alice)), "a.test");
    assert_eq!(peer.certificate, Checked::Verified);
    assert_eq!(&*peer.vars.client_verify, "SUCCESS");
    assert_eq!(&*peer.vars.client_s_dn, "CN=alice\\, #1");
    assert_eq!(peer.vars.client_fingerprint.len(), 40);
    assert_eq!(*peer.vars.client_fingerprint, fingerprint(&alice));
    assert_eq!(auth.admit(true, Some(&peer), Some("a.test")), Ok(()));
    assert_eq!(auth.admit(true, Some(&peer), Some("A.TEST:443")), Ok(()));
    assert_eq!(auth.admit(true, Some(&peer), None), Ok(()));
}

#[test]
fn another_ca_s_certificate_is_refused_and_tells_nothing_of_its_subject() {
    let (root, _) = ca("Clients CA");
    let (_, stranger) = ca("Stranger");
    let auth = auth(&root, VerifyClient::Optional);
    let mallory = client("mallory", &stranger);
    let peer = checked(&auth, Some(&[mallory]), "a.test");
    assert_eq!(peer.certificate, Checked::Failed);
    assert_eq!(&*peer.vars.client_verify, "FAILED:unable to get local issuer certificate");
    assert_eq!((&*peer.vars.client_s_dn, &*peer.vars.client_fingerprint), ("", ""));
    // Refused with `optional` too, as nginx refuses it.
    assert_eq!(auth.admit(true, Some(&peer), Some("a.test")), Err(Refusal::BadCertificate));
}

#[test]
fn no_certificate_is_refused_only_where_one_is_required() {
    let (root, _) = ca("Clients CA");
    let on = auth(&root, VerifyClient::On);
    let optional = auth(&root, VerifyClient::Optional);
    let peer = checked(&on, None, "a.test");
    assert_eq!(&*peer.vars.client_verify, "NONE");
    assert_eq!(on.admit(true, Some(&peer), Some("a.test")), Err(Refusal::NoCertificate));
    assert_eq!(optional.admit(true, Some(&peer), Some("a.test")), Ok(()));
    // Plain HTTP: no certificate at all.
    assert_eq!(on.admit(false, None, Some("a.test")), Err(Refusal::NoCertificate));
    assert_eq!(optional.admit(false, None, Some("a.test")), Ok(()));
}

#[test]
fn a_connection_checked_for_other_names_or_other_cas_is_misdirected() {
    let (root, issuer) = ca("Clients CA");
    let auth = auth(&root, VerifyClient::On);
    let peer = checked(&auth, Some(&[client("alice", &issuer)]), "a.test");
    assert_eq!(auth.admit(true, Some(&peer), Some("b.test")), Err(Refusal::Misdirected));
    // Checked with other CAs (another site's, or this one's before a reload changed them).
    let other = Peer {
        checked_with: Some(8),
        ..checked(&auth, Some(&[client("alice", &issuer)]), "a.test")
    };
    assert_eq!(auth.admit(true, Some(&other), Some("a.test")), Err(Refusal::Misdirected));
    // A TLS connection that was not checked at all (made before the site had the key).
    assert_eq!(auth.admit(true, None, Some("a.test")), Err(Refusal::Misdirected));
}
