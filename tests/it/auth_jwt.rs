//! `auth = { jwt = … }` through the real gateway, with keys `openssl` made (RSA) and ring
//! (P-256): good tokens pass with their claims in `$jwt_claim_NAME`, and each attack is
//! sent as raw bytes — `alg: none`, HS256 signed with the RSA public key, a tampered
//! payload, expired and early tokens, another audience, a missing scope, `Authorization`
//! twice, a token too long — and gets its 401, 403 or 400. A rotated key file takes
//! effect within a second.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;

use base64::Engine as _;
use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use support::*;

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

fn openssl(args: &[&str]) -> Vec<u8> {
    support::openssl(std::path::Path::new("."), args)
}

/// The keys: an RSA-2048 pair by `openssl genpkey` and a P-256 pair by ring, with their
/// JWKs and the RSA public key's PEM (what the HS256 confusion attack signs with).
struct Keys {
    rsa: RsaKeyPair,
    rsa_jwk: String,
    rsa_pem: Vec<u8>,
    ec: EcdsaKeyPair,
    ec_jwk: String,
}

impl Keys {
    fn new(dir: &Path) -> Keys {
        let pem = dir.join("rsa.pem");
        let pem_text = pem.to_str().unwrap();
        openssl(&[
            "genpkey",
            "-algorithm",
            "RSA",
            "-pkeyopt",
            "rsa_keygen_bits:2048",
            "-out",
            pem_text,
        ]);
        let der = openssl(&[
            "pkcs8", "-topk8", "-nocrypt", "-in", pem_text, "-outform", "DER",
        ]);
        let rsa = RsaKeyPair::from_pkcs8(&der).expect("openssl's PKCS#8");
        let rsa_pem = openssl(&["pkey", "-in", pem_text, "-pubout"]);
        let modulus =
            String::from_utf8(openssl(&["rsa", "-in", pem_text, "-noout", "-modulus"])).unwrap();
        let modulus = modulus.trim().trim_start_matches("Modulus=");
        let n: Vec<u8> = (0..modulus.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&modulus[i..i + 2], 16).unwrap())
            .collect();
        let rsa_jwk = format!(
            r#"{{"kty":"RSA","kid":"rsa1","use":"sig","n":"{}","e":"AQAB"}}"#,
            b64(&n)
        );
        let rng = SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&signature::ECDSA_P256_SHA256_FIXED_SIGNING, &rng)
            .unwrap();
        let ec = EcdsaKeyPair::from_pkcs8(
            &signature::ECDSA_P256_SHA256_FIXED_SIGNING,
            pkcs8.as_ref(),
            &rng,
        )
        .unwrap();
        let point = ec.public_key().as_ref();
        let ec_jwk = format!(
            r#"{{"kty":"EC","crv":"P-256","kid":"ec1","x":"{}","y":"{}"}}"#,
            b64(&point[1..33]),
            b64(&point[33..])
        );
        Keys {
            rsa,
            rsa_jwk,
            rsa_pem,
            ec,
            ec_jwk,
        }
    }

    fn rs256(&self, payload: &str) -> String {
        let message = format!(
            "{}.{}",
            b64(br#"{"alg":"RS256","typ":"JWT","kid":"rsa1"}"#),
            b64(payload.as_bytes())
        );
        let mut sig = vec![0; self.rsa.public().modulus_len()];
        self.rsa
            .sign(
                &signature::RSA_PKCS1_SHA256,
                &SystemRandom::new(),
                message.as_bytes(),
                &mut sig,
            )
            .unwrap();
        format!("{message}.{}", b64(&sig))
    }

    fn es256(&self, payload: &str) -> String {
        self.es256_as("ec1", payload)
    }

    /// An ES256 token whose header names `kid`.
    fn es256_as(&self, kid: &str, payload: &str) -> String {
        let header = format!(r#"{{"alg":"ES256","kid":"{kid}"}}"#);
        let message = format!("{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()));
        let sig = self
            .ec
            .sign(&SystemRandom::new(), message.as_bytes())
            .unwrap();
        format!("{message}.{}", b64(sig.as_ref()))
    }
}

fn hs256(secret: &[u8], header: &str, payload: &str) -> String {
    let message = format!("{}.{}", b64(header.as_bytes()), b64(payload.as_bytes()));
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, secret);
    format!(
        "{message}.{}",
        b64(ring::hmac::sign(&key, message.as_bytes()).as_ref())
    )
}

fn claims(extra: &str) -> String {
    format!(
        r#"{{"sub":"alice","iss":"https://id.test","aud":"api","exp":{},"plan":"pro"{extra}}}"#,
        now() + 600
    )
}

fn config(app: SocketAddr, jwks: &Path, jwt_extra: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "off"
[upstreams.app]
servers = ["{app}"]
[[location]]
match = "/api/"
upstream = "app"
auth = {{ jwt = {{ jwks = "{}", issuer = "https://id.test", audience = "api", realm = "api"{jwt_extra} }} }}
request_headers = {{ X-User = "$jwt_claim_sub", X-Plan = "$jwt_claim_plan" }}
[[location]]
match = "/"
upstream = "app"
"#,
        jwks.display()
    )
}

/// Raw bytes to `addr`; the status and head of the answer.
async fn raw(addr: SocketAddr, request: &str) -> (u16, String) {
    let reply = raw_exchange(addr, request).await;
    (reply.status, reply.head)
}

fn with(token: &str) -> String {
    format!("GET /api/x HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {token}\r\nConnection: close\r\n\r\n")
}

/// A gateway in front of a recording upstream, with the keys' set as its `jwks` file.
async fn start(extra: &str) -> (tempfile::TempDir, Keys, Upstream, tollgate::Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(dir.path());
    let jwks = dir.path().join("jwks.json");
    std::fs::write(
        &jwks,
        format!(r#"{{"keys":[{},{}]}}"#, keys.rsa_jwk, keys.ec_jwk),
    )
    .unwrap();
    let app = Upstream::start(|_| async { text(200, "in") }).await;
    let gateway = gateway(&config(app.addr, &jwks, extra));
    (dir, keys, app, gateway)
}

/// A gateway whose key set holds the EC key alone, its config changed by `edit` (given
/// the config and the test's directory).
async fn start_ec(
    edit: impl FnOnce(String, &Path) -> String,
) -> (tempfile::TempDir, Keys, Upstream, tollgate::Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(dir.path());
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, format!(r#"{{"keys":[{}]}}"#, keys.ec_jwk)).unwrap();
    let app = Upstream::start(|_| async { text(200, "in") }).await;
    let gateway = gateway(&edit(config(app.addr, &jwks, ""), dir.path()));
    (dir, keys, app, gateway)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn good_tokens_pass_with_their_claims_and_every_forgery_is_refused() {
    let _shared = shared();
    let (_dir, keys, app, gateway) = start("").await;
    let addr = addr(&gateway);
    for token in [keys.rs256(&claims("")), keys.es256(&claims(""))] {
        assert_eq!(raw(addr, &with(&token)).await.0, 200);
        let seen = app.last();
        assert_eq!(
            seen.headers.get("x-user").unwrap(),
            "alice",
            "the verified sub"
        );
        assert_eq!(seen.headers.get("x-plan").unwrap(), "pro");
        assert_eq!(
            seen.headers.get("authorization").unwrap(),
            &format!("Bearer {token}"),
            "the token goes on"
        );
    }
    let passed = app.count();

    let (status, head) = raw(
        addr,
        "GET /api/x HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(status, 401);
    assert!(
        head.contains("www-authenticate: Bearer realm=\"api\"\r\n"),
        "{head}"
    );

    let header = |alg: &str| b64(format!(r#"{{"alg":"{alg}","kid":"rsa1"}}"#).as_bytes());
    let none = format!("{}.{}.", header("none"), b64(claims("").as_bytes()));
    let confused = hs256(
        &keys.rsa_pem,
        r#"{"alg":"HS256","kid":"rsa1"}"#,
        &claims(""),
    );
    let good = keys.rs256(&claims(""));
    let (head_part, rest) = good.split_once('.').unwrap();
    let signature = rest.split_once('.').unwrap().1;
    let tampered = format!(
        "{head_part}.{}.{signature}",
        b64(claims(r#","sub":"admin""#).as_bytes())
    );
    let expired = keys.rs256(&claims("").replace(
        &format!("\"exp\":{}", now() + 600),
        &format!("\"exp\":{}", now() - 600),
    ));
    let early = keys.es256(&claims(&format!(r#","nbf":{}"#, now() + 600)));
    let audience = keys.es256(&claims("").replace(r#""aud":"api""#, r#""aud":"billing""#));
    let unknown_kid = keys.es256(&claims("")).replacen(
        &b64(br#"{"alg":"ES256","kid":"ec1"}"#),
        &b64(br#"{"alg":"ES256","kid":"ec9"}"#),
        1,
    );
    let long = keys.es256(&claims(&format!(r#","pad":"{}""#, "x".repeat(9000))));
    let attacks = [
        ("alg none", none),
        ("HS256 signed with the RSA public key", confused),
        ("a tampered payload", tampered),
        ("expired", expired),
        ("not yet valid", early),
        ("another audience", audience),
        ("an unknown kid", unknown_kid),
        ("too long", long),
        ("garbage", "not-a-token".to_owned()),
    ];
    for (what, token) in attacks {
        let (status, head) = raw(addr, &with(&token)).await;
        assert_eq!(status, 401, "{what}: {head}");
        assert!(
            head.contains("www-authenticate: Bearer realm=\"api\", error=\"invalid_token\""),
            "{what}: {head}"
        );
    }
    let twice = format!(
        "GET /api/x HTTP/1.1\r\nHost: t\r\nAuthorization: Bearer {0}\r\nAuthorization: Bearer {0}\r\nConnection: close\r\n\r\n",
        keys.es256(&claims(""))
    );
    assert_eq!(raw(addr, &twice).await.0, 400, "Authorization twice");
    let basic = "GET /api/x HTTP/1.1\r\nHost: t\r\nAuthorization: Basic YWxpY2U6c2VjcmV0\r\nConnection: close\r\n\r\n";
    assert_eq!(raw(addr, basic).await.0, 401, "another scheme");
    assert_eq!(app.count(), passed, "no forgery reached the application");
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_scope_is_403_and_a_cookie_can_carry_the_token() {
    let _shared = shared();
    let (_dir, keys, app, gateway) =
        start(r#", from = "cookie:session", require = { scope = "api:write" }"#).await;
    let addr = addr(&gateway);
    let cookie = |token: &str| {
        format!("GET /api/x HTTP/1.1\r\nHost: t\r\nCookie: theme=dark; session={token}\r\nConnection: close\r\n\r\n")
    };
    let writer = keys.es256(&claims(r#","scope":"api:read api:write""#));
    assert_eq!(raw(addr, &cookie(&writer)).await.0, 200);
    let reader = keys.es256(&claims(r#","scope":"api:read""#));
    let (status, head) = raw(addr, &cookie(&reader)).await;
    assert_eq!(status, 403);
    assert!(head.contains("error=\"insufficient_scope\""), "{head}");
    assert_eq!(
        raw(addr, &with(&writer)).await.0,
        401,
        "the header is not read when the cookie is"
    );
    assert_eq!(app.count(), 1);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rotated_key_file_takes_effect_within_a_second_and_a_broken_one_does_not() {
    let _shared = shared();
    let (dir, keys, _app, gateway) = start("").await;
    let addr = addr(&gateway);
    let token = keys.es256(&claims(""));
    assert_eq!(raw(addr, &with(&token)).await.0, 200);
    let jwks = dir.path().join("jwks.json");
    std::fs::write(&jwks, "{ not json").unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(
        raw(addr, &with(&token)).await.0,
        200,
        "a broken file leaves the last good set"
    );
    std::fs::write(&jwks, format!(r#"{{"keys":[{}]}}"#, keys.rsa_jwk)).unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    assert_eq!(
        raw(addr, &with(&token)).await.0,
        401,
        "the EC key was removed: its remembered pass goes too"
    );
    assert_eq!(raw(addr, &with(&keys.rs256(&claims("")))).await.0, 200);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_keyed_by_a_claim_counts_each_user_and_never_an_unverified_one() {
    let _shared = shared();
    let (_dir, keys, _app, gateway) = start_ec(|toml, _| {
        toml.replace(
            "[[location]]\nmatch = \"/api/\"",
            "[zones.per_user]\nkey = \"$jwt_claim_sub\"\nrate = \"1r/m\"\n[[location]]\nmatch = \"/api/\"\nlimit = [{ zone = \"per_user\" }]",
        )
    })
    .await;
    let addr = addr(&gateway);
    let user = |sub: &str| {
        keys.es256(&claims("").replace("\"sub\":\"alice\"", &format!("\"sub\":\"{sub}\"")))
    };
    assert_eq!(raw(addr, &with(&user("alice"))).await.0, 200);
    assert_eq!(
        raw(addr, &with(&user("alice"))).await.0,
        429,
        "alice's second within the minute"
    );
    assert_eq!(
        raw(addr, &with(&user("bob"))).await.0,
        200,
        "bob has his own count"
    );
    // A forged token naming bob: no claims, so no key in the zone; refused, and bob's
    // count untouched.
    let forged = hs256(
        b"guess",
        r#"{"alg":"HS256"}"#,
        &claims("").replace("alice", "carol"),
    );
    assert_eq!(raw(addr, &with(&forged)).await.0, 401);
    assert_eq!(
        raw(addr, &with(&user("carol"))).await.0,
        200,
        "the forgery charged nobody"
    );
    gateway.stop().await;
}

/// A JWKS endpoint whose answer the test changes as it goes: `(status, body)`.
async fn jwks_endpoint(
    first: String,
) -> (Upstream, std::sync::Arc<std::sync::Mutex<(u16, String)>>) {
    let served = std::sync::Arc::new(std::sync::Mutex::new((200, first)));
    let answer = served.clone();
    let endpoint = Upstream::start(move |_| {
        let (status, body) = answer.lock().unwrap().clone();
        async move { text(status, &body) }
    })
    .await;
    (endpoint, served)
}

fn fetched_config(app: SocketAddr, url: &str) -> String {
    config(app, Path::new("unused"), "")
        .replace(r#"jwks = "unused""#, &format!(r#"jwks_url = "{url}""#))
        .replace("[log]", "[admin]\nlisten = \"127.0.0.1:0\"\n[log]")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fetched_key_set_is_used_and_fetched_again_for_a_new_kid() {
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(dir.path());
    let (endpoint, served) = jwks_endpoint(format!(r#"{{"keys":[{}]}}"#, keys.ec_jwk)).await;
    let app = Upstream::start(|_| async { text(200, "in") }).await;
    let gateway = gateway(&fetched_config(
        app.addr,
        &format!("http://{}/jwks.json", endpoint.addr),
    ));
    let addr = addr(&gateway);
    let token = keys.es256(&claims(""));
    let mut status = 0;
    for _ in 0..50 {
        status = raw(addr, &with(&token)).await.0;
        if status == 200 {
            break;
        }
        assert_eq!(status, 503, "before the first fetch");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, 200, "once fetched");
    // The IdP rotates: the RSA key is published and used. The first request with it waits
    // for the set fetched for it.
    served.lock().unwrap().1 = format!(r#"{{"keys":[{},{}]}}"#, keys.ec_jwk, keys.rsa_jwk);
    let rotated = keys.rs256(&claims(""));
    let fetches = endpoint.count();
    assert_eq!(
        raw(addr, &with(&rotated)).await.0,
        200,
        "an unknown kid: the set fetched again, then it passes"
    );
    assert_eq!(endpoint.count(), fetches + 1);
    assert_eq!(raw(addr, &with(&rotated)).await.0, 200);
    let started = std::time::Instant::now();
    assert_eq!(
        raw(addr, &with(&keys.es256_as("zzz", &claims("")))).await.0,
        401
    );
    assert!(
        started.elapsed() < std::time::Duration::from_secs(1),
        "no wait when no fetch is asked"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        endpoint.count(),
        fetches + 1,
        "another unknown kid within 30 s fetches nothing: no flood of fetches"
    );
    let scrape = crate::metrics::scrape(gateway.admin_addr().expect("admin")).await;
    let url = format!("http://{}/jwks.json", endpoint.addr);
    assert_eq!(
        scrape.get(&format!("tollgate_jwks_keys{{url=\"{url}\"}}")),
        2.0
    );
    let ok = format!("tollgate_jwks_fetches_total{{url=\"{url}\",result=\"ok\"}}");
    assert_eq!(scrape.get(&ok), 2.0);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_set_url_that_fails_keeps_the_last_good_set_or_answers_503() {
    let _shared = shared();
    let dir = tempfile::tempdir().unwrap();
    let keys = Keys::new(dir.path());
    let app = Upstream::start(|_| async { text(200, "in") }).await;
    // Never answering a usable set: 503, never a pass.
    for (status, body) in [
        (200, "garbage".to_owned()),
        (500, String::new()),
        (200, r#"{"keys":[{"kty":"oct","k":"c2VjcmV0"}]}"#.to_owned()),
    ] {
        let (endpoint, _served) = jwks_endpoint(body).await;
        _served.lock().unwrap().0 = status;
        let refusing = gateway(&fetched_config(
            app.addr,
            &format!("http://{}/jwks", endpoint.addr),
        ));
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
        assert_eq!(
            raw(addr(&refusing), &with(&keys.es256(&claims(""))))
                .await
                .0,
            503,
            "{status}"
        );
        refusing.stop().await;
    }
    let dead = closed_port();
    let unreachable = gateway(&fetched_config(app.addr, &format!("http://{dead}/jwks")));
    assert_eq!(
        raw(addr(&unreachable), &with(&keys.es256(&claims(""))))
            .await
            .0,
        503,
        "unreachable"
    );
    unreachable.stop().await;
    // A good set, then garbage: the good set stays.
    let (endpoint, served) = jwks_endpoint(format!(r#"{{"keys":[{}]}}"#, keys.ec_jwk)).await;
    let gateway = gateway(&fetched_config(
        app.addr,
        &format!("http://{}/jwks", endpoint.addr),
    ));
    let addr = addr(&gateway);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(raw(addr, &with(&keys.es256(&claims("")))).await.0, 200);
    *served.lock().unwrap() = (200, "{ garbage".to_owned());
    assert_eq!(
        raw(addr, &with(&keys.rs256(&claims("")))).await.0,
        401,
        "unknown kid: fetched again, garbage"
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    assert_eq!(
        raw(addr, &with(&keys.es256(&claims("")))).await.0,
        200,
        "the last good set stays"
    );
    assert_eq!(app.count(), 2);
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_zone_plan_read_from_a_claim_gives_each_user_their_plan_rate() {
    let _shared = shared();
    let (_dir, keys, _app, gateway) = start_ec(|toml, _| {
        toml.replace(
            "[[location]]\nmatch = \"/api/\"",
            "[zones.per_user]\nkey = \"$jwt_claim_sub\"\nrate = \"1r/m\"\nalgorithm = \"fixed_window\"\n\
             plan = \"$jwt_claim_plan\"\nplans = { pro = \"3r/m\" }\n\
             [[location]]\nmatch = \"/api/\"\nlimit = [{ zone = \"per_user\" }]",
        )
    })
    .await;
    let addr = addr(&gateway);
    let token = |sub: &str, plan: &str| {
        keys.es256(
            &claims("")
                .replace("\"sub\":\"alice\"", &format!("\"sub\":\"{sub}\""))
                .replace("\"plan\":\"pro\"", &format!("\"plan\":\"{plan}\"")),
        )
    };
    let mut statuses = Vec::new();
    for (sub, plan) in [
        ("pro_user", "pro"),
        ("free_user", "free"),
        ("nobody_user", ""),
    ] {
        let mut passed = 0;
        for _ in 0..6 {
            if raw(addr, &with(&token(sub, plan))).await.0 == 200 {
                passed += 1;
            }
        }
        statuses.push((sub, passed));
    }
    // A window of a minute: the pro plan's 3, the zone's own 1 for a plan it does not
    // know and for none.
    assert_eq!(
        statuses,
        [("pro_user", 3), ("free_user", 1), ("nobody_user", 1)]
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_verified_subject_is_the_access_log_user_and_a_forged_one_is_not() {
    let _shared = shared();
    let (dir, keys, _app, gateway) = start_ec(|toml, dir| {
        let log = dir.join("access.log");
        toml.replace(
            "access = \"off\"",
            &format!("access = \"{}\"\nformat = \"json\"", log.display()),
        )
    })
    .await;
    let log = dir.path().join("access.log");
    let addr = addr(&gateway);
    assert_eq!(raw(addr, &with(&keys.es256(&claims("")))).await.0, 200);
    let forged = hs256(
        b"guess",
        r#"{"alg":"HS256"}"#,
        &claims("").replace("alice", "mallory"),
    );
    assert_eq!(raw(addr, &with(&forged)).await.0, 401);
    let lines = log_lines(&log, 2).await;
    assert!(
        lines[0].contains("\"remote_user\":\"alice\""),
        "{}",
        lines[0]
    );
    assert!(
        lines[1].contains("\"remote_user\":\"\""),
        "a forged token names nobody: {}",
        lines[1]
    );
    gateway.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_into_a_jwt_location_checks_the_token_and_carries_its_claims() {
    let _shared = shared();
    let (dir, keys, _app, gateway) = start_ec(|toml, dir| {
        std::fs::create_dir_all(dir.join("www")).unwrap();
        let files = format!(
            "[[location]]\nmatch = \"/\"\nroot = \"{}\"\ntry_files = [\"$uri\", \"/members/welcome\"]\n\
             [[location]]\nmatch = \"/members/\"\nauth = {{ jwt = {{ jwks = \"{}\" }} }}\n\
             return = {{ status = 200, body = \"hello $jwt_claim_sub\" }}\n",
            dir.join("www").display(),
            dir.join("jwks.json").display()
        );
        // The files location and the members' replace the catch-all proxy.
        let cut = toml.rfind("[[location]]\nmatch = \"/\"").unwrap();
        format!("{}{files}", &toml[..cut])
    })
    .await;
    let _ = dir;
    let addr = addr(&gateway);
    let asked = |token: Option<String>| {
        let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
        format!("GET /missing HTTP/1.1\r\nHost: t\r\n{auth}Connection: close\r\n\r\n")
    };
    let reply = raw_exchange(addr, &asked(Some(keys.es256(&claims(""))))).await;
    assert_eq!(
        (reply.status, reply.body.as_str()),
        (200, "hello alice"),
        "{}",
        reply.head
    );
    assert_eq!(
        raw(addr, &asked(None)).await.0,
        401,
        "no token: the redirect's location asks for one"
    );
    gateway.stop().await;
}
