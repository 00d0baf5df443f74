//! Keys and certificates tollgate makes itself, with rcgen: a name's key and its CSR,
//! the self-signed placeholder served until a name has a certificate, and the
//! tls-alpn-01 challenge certificate (RFC 8737).

use std::sync::Arc;

use rcgen::{CertificateParams, CustomExtension, DistinguishedName, DnType, KeyPair};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::sign::CertifiedKey;

/// A new ECDSA P-256 key for a name's certificate, with the CSR (DER) that asks for it.
pub(super) fn key_and_csr(name: &str) -> Result<(KeyPair, Vec<u8>), rcgen::Error> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256)?;
    let mut params = CertificateParams::new(vec![name.to_owned()])?;
    params.distinguished_name = DistinguishedName::new();
    let csr = params.serialize_request(&key)?;
    Ok((key, csr.der().to_vec()))
}

/// A self-signed certificate for `name`, served until ACME issues the real one. Clients
/// refuse it, which is the point: nothing else is served in its place.
pub(super) fn placeholder(name: &str) -> Result<Arc<CertifiedKey>, String> {
    let mut params = CertificateParams::new(vec![name.to_owned()]).map_err(|e| e.to_string())?;
    params.distinguished_name.push(
        DnType::CommonName,
        "tollgate placeholder: no certificate yet",
    );
    self_signed(params)
}

/// The tls-alpn-01 certificate for `name`: self-signed, the name as its only SAN, and
/// the critical acmeIdentifier extension holding `digest`, the SHA-256 of the key
/// authorization.
pub(super) fn tls_alpn01(name: &str, digest: &[u8]) -> Result<Arc<CertifiedKey>, String> {
    let mut params = CertificateParams::new(vec![name.to_owned()]).map_err(|e| e.to_string())?;
    params.distinguished_name = DistinguishedName::new();
    params.custom_extensions = vec![CustomExtension::new_acme_identifier(digest)];
    self_signed(params)
}

fn self_signed(params: CertificateParams) -> Result<Arc<CertifiedKey>, String> {
    let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P256_SHA256).map_err(|e| e.to_string())?;
    let cert = params.self_signed(&key).map_err(|e| e.to_string())?;
    certified(vec![cert.der().clone()], &key)
}

/// A rustls signing key for `chain` and `key`, made together here (rustls's own check
/// that they match would refuse the tls-alpn-01 certificate's critical extension).
fn certified(
    chain: Vec<CertificateDer<'static>>,
    key: &KeyPair,
) -> Result<Arc<CertifiedKey>, String> {
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let signer = crate::certs::provider()
        .key_provider
        .load_private_key(der)
        .map_err(|e| e.to_string())?;
    Ok(Arc::new(CertifiedKey::new(chain, signer)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use x509_parser::prelude::*;

    #[test]
    fn the_challenge_certificate_carries_the_digest_in_a_critical_extension() {
        let digest = [7u8; 32];
        let key = tls_alpn01("example.com", &digest).unwrap();
        let (_, cert) = X509Certificate::from_der(key.cert[0].as_ref()).unwrap();
        // id-pe-acmeIdentifier, RFC 8737 §6.1.
        let oid = x509_parser::der_parser::oid!(1.3.6 .1 .5 .5 .7 .1 .31);
        let ext = cert.get_extension_unique(&oid).unwrap().unwrap();
        assert!(ext.critical);
        // An OCTET STRING of the 32 bytes.
        assert_eq!(&ext.value[..2], &[0x04, 32]);
        assert_eq!(&ext.value[2..], &digest);
        let san = cert.subject_alternative_name().unwrap().unwrap();
        assert_eq!(
            san.value.general_names,
            vec![GeneralName::DNSName("example.com")]
        );
    }

    #[test]
    fn a_csr_names_only_the_name() {
        let (_, csr) = key_and_csr("www.example.com").unwrap();
        let (_, req) = X509CertificationRequest::from_der(&csr).unwrap();
        let names: Vec<String> = req
            .requested_extensions()
            .into_iter()
            .flatten()
            .filter_map(|ext| match ext {
                ParsedExtension::SubjectAlternativeName(san) => Some(san),
                _ => None,
            })
            .flat_map(|san| san.general_names.iter().map(|n| n.to_string()))
            .collect();
        assert_eq!(names, ["DNSName(www.example.com)"]);
    }
}
