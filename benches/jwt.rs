//! `auth.jwt`'s cost per request: a token checked before (the verdict remembered by its
//! SHA-256, what a client sending its token with every request costs after the first), and
//! a first check of each kind — ES256, EdDSA, RS256 (an `openssl genpkey` key, skipped
//! without openssl), HS256 — and a refusal before any signature check (an unknown `kid`).
//! Issue 37's target: at most 15 µs per request with the memory of verdicts.
//!
//! ```text
//! cargo bench --bench jwt
//! ```

use std::hint::black_box;
use std::sync::Arc;

use base64::Engine as _;
use criterion::{criterion_group, criterion_main, Criterion};
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, Ed25519KeyPair, KeyPair, RsaKeyPair};
use tollgate::access::jwt::{self, token, KeySet, Remembered, Rules};

const NOW: u64 = 1_800_000_000;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A payload like an IdP's access token.
fn payload() -> String {
    format!(
        r#"{{"sub":"user-1234567890","iss":"https://id.example.com","aud":"api","exp":{},"iat":{NOW},"plan":"pro","scope":"api:read api:write","email":"someone@example.com"}}"#,
        NOW + 3600
    )
}

fn rules() -> Rules {
    Rules {
        issuers: vec!["https://id.example.com".to_owned()],
        audiences: vec!["api".to_owned()],
        leeway: 60,
        require: vec![("scope".to_owned(), "api:read".to_owned())],
    }
}

fn message(header: &str) -> String {
    format!("{}.{}", b64(header.as_bytes()), b64(payload().as_bytes()))
}

/// The tokens and the set holding their keys.
struct Fixture {
    set: Arc<KeySet>,
    tokens: Vec<(&'static str, String)>,
}

fn fixture() -> Fixture {
    let rng = SystemRandom::new();
    let mut keys = Vec::new();
    let mut tokens = Vec::new();
    let pkcs8 =
        EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let ec = EcdsaKeyPair::from_pkcs8(
        &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
        pkcs8.as_ref(),
        &rng,
    )
    .unwrap();
    let point = ec.public_key().as_ref();
    keys.push(format!(
        r#"{{"kty":"EC","crv":"P-256","kid":"ec","x":"{}","y":"{}"}}"#,
        b64(&point[1..33]),
        b64(&point[33..])
    ));
    let m = message(r#"{"alg":"ES256","typ":"JWT","kid":"ec"}"#);
    tokens.push((
        "es256",
        format!("{m}.{}", b64(ec.sign(&rng, m.as_bytes()).unwrap().as_ref())),
    ));

    let pkcs8 = Ed25519KeyPair::generate_pkcs8(&rng).unwrap();
    let ed = Ed25519KeyPair::from_pkcs8(pkcs8.as_ref()).unwrap();
    keys.push(format!(
        r#"{{"kty":"OKP","crv":"Ed25519","kid":"ed","x":"{}"}}"#,
        b64(ed.public_key().as_ref())
    ));
    let m = message(r#"{"alg":"EdDSA","typ":"JWT","kid":"ed"}"#);
    tokens.push((
        "eddsa",
        format!("{m}.{}", b64(ed.sign(m.as_bytes()).as_ref())),
    ));

    let secret = b"0123456789abcdef0123456789abcdef";
    keys.push(format!(
        r#"{{"kty":"oct","kid":"hs","k":"{}"}}"#,
        b64(secret)
    ));
    let m = message(r#"{"alg":"HS256","typ":"JWT","kid":"hs"}"#);
    let hmac = ring::hmac::sign(
        &ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret),
        m.as_bytes(),
    );
    tokens.push(("hs256", format!("{m}.{}", b64(hmac.as_ref()))));

    if let Some((jwk, rsa)) = rsa_key() {
        keys.push(jwk);
        let m = message(r#"{"alg":"RS256","typ":"JWT","kid":"rsa"}"#);
        let mut sig = vec![0; rsa.public().modulus_len()];
        rsa.sign(&signature::RSA_PKCS1_SHA256, &rng, m.as_bytes(), &mut sig)
            .unwrap();
        tokens.push(("rs256", format!("{m}.{}", b64(&sig))));
    }
    let written = format!(r#"{{"keys":[{}]}}"#, keys.join(","));
    jwt::install();
    Fixture {
        set: Arc::new(KeySet::parse(written.as_bytes(), true).unwrap()),
        tokens,
    }
}

/// An RSA-2048 key by `openssl genpkey`, and its JWK; `None` without openssl.
fn rsa_key() -> Option<(String, RsaKeyPair)> {
    let dir = std::env::temp_dir().join(format!("tollgate-jwt-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let pem = dir.join("rsa.pem");
    let run = |args: &[&str]| {
        std::process::Command::new("openssl")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| o.stdout)
    };
    let pem_text = pem.to_str()?;
    run(&[
        "genpkey",
        "-algorithm",
        "RSA",
        "-pkeyopt",
        "rsa_keygen_bits:2048",
        "-out",
        pem_text,
    ])?;
    let der = run(&[
        "pkcs8", "-topk8", "-nocrypt", "-in", pem_text, "-outform", "DER",
    ])?;
    let modulus = String::from_utf8(run(&["rsa", "-in", pem_text, "-noout", "-modulus"])?).ok()?;
    let _ = std::fs::remove_dir_all(&dir);
    let hex = modulus.trim().trim_start_matches("Modulus=");
    let n: Vec<u8> = (0..hex.len())
        .step_by(2)
        .filter_map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect();
    let jwk = format!(
        r#"{{"kty":"RSA","kid":"rsa","n":"{}","e":"AQAB"}}"#,
        b64(&n)
    );
    Some((jwk, RsaKeyPair::from_pkcs8(&der).ok()?))
}

fn checks(c: &mut Criterion) {
    let fixture = fixture();
    let rules = rules();
    let mut group = c.benchmark_group("jwt");
    let (_, es256) = &fixture.tokens[0];
    let remembered = Remembered::default();
    assert!(remembered
        .verify(es256.as_bytes(), &fixture.set, &rules, NOW)
        .is_ok());
    group.bench_function("remembered_es256", |b| {
        b.iter(|| {
            remembered
                .verify(black_box(es256.as_bytes()), &fixture.set, &rules, NOW)
                .is_ok()
        })
    });
    for (name, token) in &fixture.tokens {
        assert!(
            token::verify(token.as_bytes(), &fixture.set, &rules, NOW).is_ok(),
            "{name}"
        );
        group.bench_function(format!("first_{name}"), |b| {
            b.iter(|| token::verify(black_box(token.as_bytes()), &fixture.set, &rules, NOW).is_ok())
        });
    }
    let unknown = format!(
        "{}.{}",
        message(r#"{"alg":"ES256","kid":"nope"}"#),
        b64(&[0; 64])
    );
    group.bench_function("refused_unknown_kid", |b| {
        b.iter(|| token::verify(black_box(unknown.as_bytes()), &fixture.set, &rules, NOW).is_err())
    });
    group.finish();
}

criterion_group!(benches, checks);
criterion_main!(benches);
