//! jsonwebtoken's signature checks done by ring, the one crypto library of the gateway
//! (rustls, ACME): the crate's own backends are aws-lc (a second, C-built TLS library)
//! or RustCrypto's (several times slower at RSA and ECDSA). Verify only: the gateway
//! never signs a token.
//!
//! The factory refuses a key of another family than the algorithm's, so a token whose
//! header says HS256 is never checked as an HMAC keyed with an RSA public key.

use jsonwebtoken::crypto::{CryptoProvider, JwtSigner, JwtVerifier, KeyUtils};
use jsonwebtoken::errors::{ErrorKind, Result};
use jsonwebtoken::{Algorithm, DecodingKey, DecodingKeyKind, EncodingKey};
use ::signature as signature_trait;
use ring::signature::{self, RsaPublicKeyComponents, UnparsedPublicKey};

static RING: CryptoProvider = CryptoProvider {
    signer_factory: no_signer,
    verifier_factory: verifier,
    key_utils: KeyUtils::new_unimplemented(),
};

/// Makes ring jsonwebtoken's provider for this process; a second call changes nothing.
pub(crate) fn install() {
    // `Err` only when one is installed already: this one, by an earlier call.
    let _ = RING.install_default();
}

struct Verifier {
    algorithm: Algorithm,
    key: DecodingKey,
}

fn verifier(algorithm: &Algorithm, key: &DecodingKey) -> Result<Box<dyn JwtVerifier>> {
    if algorithm.family() != key.family() {
        return Err(ErrorKind::InvalidKeyFormat.into());
    }
    Ok(Box::new(Verifier {
        algorithm: *algorithm,
        key: key.clone(),
    }))
}

fn no_signer(_: &Algorithm, _: &EncodingKey) -> Result<Box<dyn JwtSigner>> {
    Err(ErrorKind::InvalidAlgorithm.into())
}

impl JwtVerifier for Verifier {
    fn algorithm(&self) -> Algorithm {
        self.algorithm
    }
}

impl signature_trait::Verifier<Vec<u8>> for Verifier {
    fn verify(&self, message: &[u8], sig: &Vec<u8>) -> std::result::Result<(), signature_trait::Error> {
        let checked = match self.key.kind() {
            DecodingKeyKind::SecretOrDer(bytes) => match self.algorithm {
                Algorithm::HS256 => hmac(ring::hmac::HMAC_SHA256, bytes, message, sig),
                Algorithm::HS384 => hmac(ring::hmac::HMAC_SHA384, bytes, message, sig),
                Algorithm::HS512 => hmac(ring::hmac::HMAC_SHA512, bytes, message, sig),
                other => public(other, bytes, message, sig),
            },
            DecodingKeyKind::RsaModulusExponent { n, e } => match rsa(self.algorithm) {
                Some(params) => RsaPublicKeyComponents { n, e }.verify(params, message, sig).is_ok(),
                None => false,
            },
        };
        checked.then_some(()).ok_or_else(signature_trait::Error::new)
    }
}

/// An HMAC compared in constant time (ring's `hmac::verify`).
fn hmac(algorithm: ring::hmac::Algorithm, secret: &[u8], message: &[u8], sig: &[u8]) -> bool {
    ring::hmac::verify(&ring::hmac::Key::new(algorithm, secret), message, sig).is_ok()
}

/// A signature by a public key in its raw form (EC point, Ed25519 key, RSA DER).
fn public(algorithm: Algorithm, key: &[u8], message: &[u8], sig: &[u8]) -> bool {
    let params: &dyn signature::VerificationAlgorithm = match algorithm {
        Algorithm::ES256 => &signature::ECDSA_P256_SHA256_FIXED,
        Algorithm::ES384 => &signature::ECDSA_P384_SHA384_FIXED,
        Algorithm::EdDSA => &signature::ED25519,
        other => match rsa(other) {
            Some(params) => params,
            None => return false,
        },
    };
    UnparsedPublicKey::new(params, key).verify(message, sig).is_ok()
}

/// The ring parameters of an RSA algorithm: keys of 2048 to 8192 bits.
fn rsa(algorithm: Algorithm) -> Option<&'static signature::RsaParameters> {
    Some(match algorithm {
        Algorithm::RS256 => &signature::RSA_PKCS1_2048_8192_SHA256,
        Algorithm::RS384 => &signature::RSA_PKCS1_2048_8192_SHA384,
        Algorithm::RS512 => &signature::RSA_PKCS1_2048_8192_SHA512,
        Algorithm::PS256 => &signature::RSA_PSS_2048_8192_SHA256,
        Algorithm::PS384 => &signature::RSA_PSS_2048_8192_SHA384,
        Algorithm::PS512 => &signature::RSA_PSS_2048_8192_SHA512,
        _ => return None,
    })
}
