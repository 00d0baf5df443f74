//! Tokens made here with ring (ES256, EdDSA, HS256) against sets written here: what
//! passes, what each attack gets, and the claims a pass gives.

use base64::Engine as _;
use ::ring::rand::SystemRandom;
use ::ring::signature::{EcdsaKeyPair, Ed25519KeyPair, KeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};

use std::sync::Arc;

use super::token::verify;
use super::*;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// The tests' wall clock: any fixed time, tokens are made around it.
fn now() -> u64 {
    1_800_000_000
}

/// An ES256 key pair, its JWK (with `kid`) and a signer.
struct Ec {
    pair: EcdsaKeyPair,
    kid: &'static str,
}

impl Ec {
    fn new(kid: &'static str) -> Ec {
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
        Ec { pair, kid }
    }

    fn jwk(&self) -> String {
        let point = self.pair.public_key().as_ref();
        let (x, y) = (b64(&point[1..33]), b64(&point[33..]));
        format!(r#"{{"kty":"EC","crv":"P-256","kid":"{}","x":"{x}","y":"{y}"}}"#, self.kid)
    }

    fn sign(&self, header: &str, payload: &str) -> String {
        let message = format!("{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()));
        let signature = self.pair.sign(&SystemRandom::new(), message.as_bytes()).unwrap();
        format!("{message}.{}", b64(signature.as_ref()))
    }

    fn token(&self, payload: &str) -> String {
        self.sign(&format!(r#"{{"alg":"ES256","typ":"JWT","kid":"{}"}}"#, self.kid), payload)
    }
}

fn set(keys: &[String]) -> KeySet {
    install();
    KeySet::parse(format!(r#"{{"keys":[{}]}}"#, keys.join(",")).as_bytes(), true).unwrap()
}

fn payload(extra: &str) -> String {
    format!(r#"{{"sub":"alice","exp":{},"iss":"https://id.test","aud":"api"{extra}}}"#, now() + 600)
}

fn rules() -> Rules {
    Rules {
        issuers: vec!["https://id.test".to_owned()],
        audiences: vec!["api".to_owned()],
        leeway: 30,
        require: Vec::new(),
    }
}

fn hmac(secret: &[u8], header: &str, payload: &str) -> String {
    let message = format!("{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()));
    let key = ::ring::hmac::Key::new(::ring::hmac::HMAC_SHA256, secret);
    format!("{message}.{}", b64(::ring::hmac::sign(&key, message.as_bytes()).as_ref()))
}

#[test]
fn a_good_token_passes_with_its_claims_as_text() {
    let ec = Ec::new("k1");
    let keys = set(&[ec.jwk()]);
    let token = ec.token(&payload(r#","plan":"pro","n":7,"admin":true,"roles":["a","b"],"org":{"id":1}"#));
    let verified = verify(token.as_bytes(), &keys, &rules(), now()).expect("passes");
    let claim = |name: &str| verified.claims.get(name).map(|v| String::from_utf8_lossy(v).into_owned());
    assert_eq!(claim("sub").as_deref(), Some("alice"));
    assert_eq!(claim("plan").as_deref(), Some("pro"));
    assert_eq!(claim("n").as_deref(), Some("7"));
    assert_eq!(claim("admin").as_deref(), Some("true"));
    assert_eq!(claim("roles").as_deref(), Some("a,b"));
    assert_eq!(claim("org").as_deref(), Some(r#"{"id":1}"#));
    assert_eq!(verified.expires, now() + 600);
}

#[test]
fn forged_tampered_and_untimely_tokens_are_invalid() {
    let ec = Ec::new("k1");
    let keys = set(&[ec.jwk()]);
    let invalid = |token: &str| match verify(token.as_bytes(), &keys, &rules(), now()) {
        Err(Refused::Invalid(why)) => why,
        other => panic!("{token}: {:?}", other.map(|_| "passed")),
    };
    let none = format!("{}.{}.", b64(br#"{"alg":"none","typ":"JWT"}"#), b64(payload("").as_bytes()));
    assert_eq!(invalid(&none), "malformed token", "alg none");
    let good = ec.token(&payload(""));
    let (head, rest) = good.split_once('.').unwrap();
    let (_, signature) = rest.split_once('.').unwrap();
    let tampered = format!("{head}.{}.{signature}", b64(payload(r#","sub":"admin""#).as_bytes()));
    assert_eq!(invalid(&tampered), "bad signature");
    let other_key = Ec::new("k1").token(&payload(""));
    assert_eq!(invalid(&other_key), "bad signature", "signed by another key with the same kid");
    let hs = hmac(b"secret", r#"{"alg":"HS256","kid":"k1"}"#, &payload(""));
    assert_eq!(invalid(&hs), "no key for its kid and alg", "HS256 against an EC key");
    let expired = format!(r#"{{"sub":"a","exp":{},"iss":"https://id.test","aud":"api"}}"#, now() - 120);
    assert_eq!(invalid(&ec.token(&expired)), "expired");
    let just = format!(r#"{{"sub":"a","exp":{},"iss":"https://id.test","aud":"api"}}"#, now() - 10);
    assert!(verify(ec.token(&just).as_bytes(), &keys, &rules(), now()).is_ok(), "within the leeway");
    let early = payload(&format!(r#","nbf":{}"#, now() + 600));
    assert_eq!(invalid(&ec.token(&early)), "not yet valid (nbf)");
    let no_exp = r#"{"sub":"a","iss":"https://id.test","aud":"api"}"#;
    assert_eq!(invalid(&ec.token(no_exp)), "a required claim (exp) is missing");
    let issuer = payload("").replace("https://id.test", "https://evil.test");
    assert_eq!(invalid(&ec.token(&issuer)), "another issuer");
    let audience = payload("").replace(r#""aud":"api""#, r#""aud":"web""#);
    assert_eq!(invalid(&ec.token(&audience)), "another audience");
    let unknown = Ec::new("k2").token(&payload(""));
    assert_eq!(invalid(&unknown), "no key for its kid and alg");
    let long = ec.token(&payload(&format!(r#","pad":"{}""#, "x".repeat(token::MAX_TOKEN))));
    assert_eq!(invalid(&long), "token too long");
    assert_eq!(invalid("a.b"), "malformed token");
    assert_eq!(invalid(""), "malformed token");
}

#[test]
fn without_a_kid_only_a_set_with_one_key_for_the_alg_chooses() {
    let (a, b) = (Ec::new("a"), Ec::new("b"));
    let bare = a.sign(r#"{"alg":"ES256"}"#, &payload(""));
    assert!(verify(bare.as_bytes(), &set(&[a.jwk()]), &rules(), now()).is_ok());
    let two = set(&[a.jwk(), b.jwk()]);
    assert_eq!(verify(bare.as_bytes(), &two, &rules(), now()).err(), Some(Refused::Invalid("no key for its kid and alg")));
}

#[test]
fn hmac_secrets_come_from_files_only_and_check_hs_tokens() {
    let secret = b"0123456789abcdef0123456789abcdef";
    let oct = format!(r#"{{"kty":"oct","kid":"h","k":"{}"}}"#, b64(secret));
    let written = format!(r#"{{"keys":[{oct}]}}"#);
    let fetched = KeySet::parse(written.as_bytes(), false).err().unwrap();
    assert!(fetched.contains("HMAC keys are read from a `jwks` file only"), "{fetched}");
    let keys = set(&[oct]);
    let token = hmac(secret, r#"{"alg":"HS256","kid":"h"}"#, &payload(""));
    assert!(verify(token.as_bytes(), &keys, &rules(), now()).is_ok());
    let wrong = hmac(b"guess", r#"{"alg":"HS256","kid":"h"}"#, &payload(""));
    assert_eq!(verify(wrong.as_bytes(), &keys, &rules(), now()).err(), Some(Refused::Invalid("bad signature")));
}

#[test]
fn eddsa_tokens_pass_against_an_okp_key() {
    let rng = SystemRandom::new();
    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let pair = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    let jwk = format!(r#"{{"kty":"OKP","crv":"Ed25519","kid":"e","x":"{}"}}"#, b64(pair.public_key().as_ref()));
    let message = format!("{}.{}", b64(br#"{"alg":"EdDSA","kid":"e"}"#), b64(payload("").as_bytes()));
    let token = format!("{message}.{}", b64(pair.sign(message.as_bytes()).as_ref()));
    assert!(verify(token.as_bytes(), &set(&[jwk]), &rules(), now()).is_ok());
}

#[test]
fn requirements_hold_by_value_array_item_or_scope_word() {
    let ec = Ec::new("k1");
    let keys = set(&[ec.jwk()]);
    let token = ec.token(&payload(r#","scope":"api:read api:write","groups":["staff","ops"],"tier":2"#));
    let with = |name: &str, wanted: &str| Rules {
        require: vec![(name.to_owned(), wanted.to_owned())],
        ..rules()
    };
    for (name, wanted) in [("scope", "api:read"), ("groups", "ops"), ("tier", "2"), ("sub", "alice")] {
        assert!(verify(token.as_bytes(), &keys, &with(name, wanted), now()).is_ok(), "{name} = {wanted}");
    }
    for (name, wanted) in [("scope", "api"), ("groups", "admin"), ("tier", "3"), ("missing", "x"), ("sub", "ali")] {
        let refused = verify(token.as_bytes(), &keys, &with(name, wanted), now()).err();
        assert_eq!(refused, Some(Refused::Insufficient), "{name} = {wanted}");
    }
}

#[test]
fn a_set_says_which_keys_it_left_out_and_refuses_one_with_none_usable() {
    let ec = Ec::new("k1");
    let mismatched = ec.jwk().replace(r#""kty":"EC""#, r#""kty":"EC","alg":"RS256""#);
    let enc = ec.jwk().replace(r#""kty":"EC""#, r#""kty":"EC","use":"enc""#);
    let weird = r#"{"kty":"XYZ"}"#.to_owned();
    let keys = KeySet::parse(format!(r#"{{"keys":[{},{mismatched},{enc},{weird}]}}"#, ec.jwk()).as_bytes(), false).unwrap();
    assert_eq!(keys.count(), 1);
    assert_eq!(keys.skipped.len(), 3, "{:?}", keys.skipped);
    let none = KeySet::parse(format!(r#"{{"keys":[{mismatched}]}}"#).as_bytes(), false).err().unwrap();
    assert!(none.contains("no usable key"), "{none}");
    assert!(KeySet::parse(b"[]", false).is_err());
    assert!(KeySet::parse(b"garbage", false).is_err());
    let many = vec![ec.jwk(); keys::MAX_KEYS + 1].join(",");
    assert!(KeySet::parse(format!(r#"{{"keys":[{many}]}}"#).as_bytes(), false).err().unwrap().contains("more than"));
}

#[test]
fn a_remembered_pass_ends_with_its_token_and_with_its_key_set() {
    let ec = Ec::new("k1");
    let keys = Arc::new(set(&[ec.jwk()]));
    let remembered = Remembered::default();
    let token = ec.token(&payload(""));
    assert!(remembered.verify(token.as_bytes(), &keys, &rules(), now()).is_ok());
    assert!(remembered.verify(token.as_bytes(), &keys, &rules(), now() + 1).is_ok(), "remembered");
    let after = now() + 600 + 30 + 1;
    assert_eq!(remembered.verify(token.as_bytes(), &keys, &rules(), after).err(), Some(Refused::Invalid("expired")));
    let rotated = Arc::new(set(&[Ec::new("k2").jwk()]));
    let refused = remembered.verify(token.as_bytes(), &rotated, &rules(), now() + 2).err();
    assert_eq!(refused, Some(Refused::Invalid(NO_KEY)), "a new set forgets what the old one passed");
}
