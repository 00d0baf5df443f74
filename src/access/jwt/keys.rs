//! The keys tokens are checked against: a JWK set (RFC 7517) as a file or an IdP's
//! `jwks_uri` serves it. Each key keeps the algorithms it may check, from its `alg` or else
//! from its type and curve, so that a token's header can never pick another: an RSA key
//! checks RS*/PS* only, a P-256 key ES256 only, a shared secret HS* only.

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm, PublicKeyUse};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde::Deserialize;

/// The most keys a set may hold: real ones hold a few.
pub const MAX_KEYS: usize = 64;

/// The smallest RSA modulus checked, in bytes (2048 bits, ring's floor too).
const MIN_RSA_MODULUS: usize = 256;

/// A usable JWK set.
pub struct KeySet {
    keys: Vec<Key>,
    /// Why each key left out was left out (for `-t` and the log).
    pub skipped: Vec<String>,
}

/// One key and what it may check.
pub(crate) struct Key {
    pub kid: Option<String>,
    pub algorithms: Vec<Algorithm>,
    pub decoding: DecodingKey,
}

#[derive(Deserialize)]
struct Written {
    keys: Vec<serde_json::Value>,
}

impl KeySet {
    /// The set in `json`; `secrets`: whether `oct` keys (shared HMAC secrets) are taken,
    /// which only a file may hold, never a set fetched over the network. At least one key
    /// must be usable.
    pub fn parse(json: &[u8], secrets: bool) -> Result<KeySet, String> {
        let written: Written = serde_json::from_slice(json).map_err(|err| format!("not a JWK set ({{\"keys\": [...]}}): {err}"))?;
        if written.keys.len() > MAX_KEYS {
            return Err(format!("{} keys: more than the {MAX_KEYS} a set may hold", written.keys.len()));
        }
        let mut set = KeySet {
            keys: Vec::new(),
            skipped: Vec::new(),
        };
        for (at, value) in written.keys.into_iter().enumerate() {
            match key(value, secrets) {
                Ok(key) => set.keys.push(key),
                Err(why) => set.skipped.push(format!("key {at}: {why}")),
            }
        }
        if set.keys.is_empty() {
            let why = set.skipped.join("; ");
            return Err(format!("no usable key in the set{}", if why.is_empty() { String::new() } else { format!(" ({why})") }));
        }
        Ok(set)
    }

    /// The key that checks a token whose header names `kid` and `alg`: the key of that
    /// id, or without an id the one key that may check `alg`. One key, never a try of
    /// several (each failed check costs a signature verification).
    pub(crate) fn choose(&self, kid: Option<&str>, alg: Algorithm) -> Option<&Key> {
        let fits = |key: &&Key| key.algorithms.contains(&alg);
        match kid {
            Some(kid) => self.keys.iter().find(|key| key.kid.as_deref() == Some(kid)).filter(fits),
            None => {
                let mut fitting = self.keys.iter().filter(fits);
                let first = fitting.next();
                fitting.next().is_none().then_some(first).flatten()
            }
        }
    }

    /// How many keys are usable.
    pub fn count(&self) -> usize {
        self.keys.len()
    }
}

fn key(value: serde_json::Value, secrets: bool) -> Result<Key, String> {
    let jwk: Jwk = serde_json::from_value(value).map_err(|err| format!("not a JWK: {err}"))?;
    if jwk.common.public_key_use == Some(PublicKeyUse::Encryption) {
        return Err("`use` is \"enc\": an encryption key".to_owned());
    }
    let by_type = by_type(&jwk.algorithm, secrets)?;
    let algorithms = match jwk.common.key_algorithm {
        None => by_type,
        Some(written) => match algorithm(written).filter(|alg| by_type.contains(alg)) {
            Some(alg) => vec![alg],
            None => return Err(format!("its `alg` {written:?} does not go with its key type")),
        },
    };
    let decoding = DecodingKey::from_jwk(&jwk).map_err(|err| format!("unusable: {err}"))?;
    Ok(Key {
        kid: jwk.common.key_id,
        algorithms,
        decoding,
    })
}

/// What a key of its type and curve may check.
fn by_type(params: &AlgorithmParameters, secrets: bool) -> Result<Vec<Algorithm>, String> {
    use Algorithm::*;
    Ok(match params {
        AlgorithmParameters::RSA(rsa) => {
            let bits = modulus_bits(&rsa.n);
            if bits < MIN_RSA_MODULUS * 8 {
                return Err(format!("an RSA key of {bits} bits: 2048 at least"));
            }
            vec![RS256, RS384, RS512, PS256, PS384, PS512]
        }
        AlgorithmParameters::EllipticCurve(ec) => match ec.curve {
            EllipticCurve::P256 => vec![ES256],
            EllipticCurve::P384 => vec![ES384],
            ref other => return Err(format!("curve {other:?}: P-256 and P-384 are checked")),
        },
        AlgorithmParameters::OctetKeyPair(okp) => match okp.curve {
            EllipticCurve::Ed25519 => vec![EdDSA],
            ref other => return Err(format!("curve {other:?}: Ed25519 is checked")),
        },
        AlgorithmParameters::OctetKey(_) if secrets => vec![HS256, HS384, HS512],
        AlgorithmParameters::OctetKey(_) => {
            return Err("a shared secret (`oct`) from the network: HMAC keys are read from a `jwks` file only".to_owned())
        }
        AlgorithmParameters::Other(_) => return Err("an unknown key type".to_owned()),
        _ => return Err("an unknown key type".to_owned()),
    })
}

fn algorithm(written: KeyAlgorithm) -> Option<Algorithm> {
    use Algorithm::*;
    Some(match written {
        KeyAlgorithm::HS256 => HS256,
        KeyAlgorithm::HS384 => HS384,
        KeyAlgorithm::HS512 => HS512,
        KeyAlgorithm::ES256 => ES256,
        KeyAlgorithm::ES384 => ES384,
        KeyAlgorithm::RS256 => RS256,
        KeyAlgorithm::RS384 => RS384,
        KeyAlgorithm::RS512 => RS512,
        KeyAlgorithm::PS256 => PS256,
        KeyAlgorithm::PS384 => PS384,
        KeyAlgorithm::PS512 => PS512,
        KeyAlgorithm::EdDSA => EdDSA,
        _ => return None,
    })
}

/// The size of an RSA modulus written in base64url, leading zero bytes not counted.
fn modulus_bits(n: &str) -> usize {
    use base64::Engine as _;
    let Ok(bytes) = base64::engine::general_purpose::URL_SAFE_NO_PAD.decode(n) else {
        return 0;
    };
    bytes.iter().skip_while(|byte| **byte == 0).count() * 8
}
