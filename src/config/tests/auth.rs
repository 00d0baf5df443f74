//! `auth` and `satisfy` (DESIGN §18): what they become, what a location inherits from
//! its site, and every problem `-t` reports (a missing file, a line it cannot check, a
//! realm that would break the header, a table without a check).

use super::*;

/// Lines Debian's `htpasswd` wrote (password `secret`): bcrypt and apr1.
const USERS: &str = "alice:$2y$05$HprCKKdeFGNtdb9f7EuriO.lne6xFcgzw/PvzS7E9ps1dseriY7vy\n\
                     # a comment\n\
                     bob:$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHrk/\n";

/// A config at `dir` whose `[[site]]` has `site` and whose one location has `location`.
fn at(dir: &Path, site: &str, location: &str) -> String {
    let _ = dir;
    format!(
        "{SERVER}[upstreams.app]\nservers = [\"127.0.0.1:3000\"]\n\
         [[site]]\nnames = [\"a.test\"]\n{site}\n\
         [[site.location]]\nmatch = \"/admin/\"\nupstream = \"app\"\n{location}\n\
         [[site.location]]\nmatch = \"/\"\nupstream = \"app\"\n"
    )
}

/// A JWK set with one P-256 key.
const JWKS: &str = r#"{"keys":[{"kty":"EC","crv":"P-256","kid":"k1","x":"f83OJ3D2xF1Bg8vub9tLe1gHMzV76e8Tus9uPHvRVEU","y":"x_FEzRu9m36HLN_tue659LNpXW6pCyStikYjKIWI5a0"}]}"#;

fn with_users() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("users"), USERS).unwrap();
    std::fs::write(dir.path().join("jwks.json"), JWKS).unwrap();
    dir
}

/// The `basic` a location's `auth` is.
fn basic(check: Option<&Check>) -> &Basic {
    match check {
        Some(Check::Basic(basic)) => basic,
        other => panic!("not basic: {other:?}"),
    }
}

/// The `request` a location's `auth` is.
fn request(check: Option<&Check>) -> &ForwardAuth {
    match check {
        Some(Check::Request(request)) => request,
        other => panic!("not request: {other:?}"),
    }
}

fn problems(dir: &Path, text: &str) -> Vec<String> {
    let origin = dir.join("gateway.toml");
    match from_str(text, &origin) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(errors) => errors.errors.into_iter().map(|e| e.message).collect(),
    }
}

#[test]
fn a_site_auth_is_inherited_read_at_load_and_turned_off_by_a_location() {
    let dir = with_users();
    let auth = "auth = { basic = { realm = \"Admin\", users = \"users\" } }\nsatisfy = \"any\"";
    let text = at(dir.path(), auth, "auth = \"off\"");
    let config = load_at(&text, &dir.path().join("gateway.toml")).unwrap();
    let locations = &config.sites[0].locations;
    assert!(locations[0].auth.is_none(), "\"off\" turns the site's off");
    assert_eq!(locations[0].satisfy, Satisfy::Any);
    let basic = basic(locations[1].auth.as_ref());
    assert_eq!(basic.realm, "Admin");
    assert_eq!(basic.users, dir.path().join("users"));
    assert_eq!(basic.table.check(b"alice", b"secret"), crate::access::basic::Checked::Pass);
    assert_eq!(basic.table.check(b"bob", b"secret"), crate::access::basic::Checked::Pass);
    assert_eq!(locations[1].satisfy, Satisfy::Any);
}

#[test]
fn a_location_auth_replaces_the_site_one_and_the_realm_has_a_default() {
    let dir = with_users();
    let text = at(dir.path(), "", "auth = { basic = { users = \"users\" } }");
    let config = load_at(&text, &dir.path().join("gateway.toml")).unwrap();
    let locations = &config.sites[0].locations;
    assert_eq!(basic(locations[0].auth.as_ref()).realm, "Restricted");
    assert_eq!(locations[0].satisfy, Satisfy::All);
    assert!(locations[1].auth.is_none());
}

#[test]
fn every_problem_is_named_at_its_key() {
    let dir = with_users();
    let cases = [
        ("auth = { basic = { users = \"missing\" } }", "cannot read the htpasswd file"),
        ("auth = { basic = { realm = \"a\\\"b\" } }", "auth.basic needs `users`"),
        ("auth = { basic = { realm = \"a\\\"b\", users = \"users\" } }", "the realm holds '\"'"),
        ("auth = {}", "auth needs a way to check who is asking"),
        ("auth = \"on\"", "invalid auth \"on\""),
        ("auth = { jwt = {} }", "auth.jwt needs its keys"),
        ("auth = { oidc = {} }", "unknown key `oidc`"),
        ("auth = { jwt = { jwks = \"missing.json\" } }", "cannot read the JWK set"),
        ("auth = { jwt = { jwks = \"users\" } }", "not a JWK set"),
        ("auth = { jwt = { jwks_url = \"http://id.example.com/jwks\" } }", "jwks_url must be https://"),
        ("auth = { jwt = { jwks_url = \"https://127.0.0.1:0/jwks\" } }", "port 0"),
        ("auth = { jwt = { jwks = \"jwks.json\", jwks_url = \"https://127.0.0.1:1/\" } }", "not both"),
        ("auth = { jwt = { jwks = \"jwks.json\", from = \"query\" } }", "invalid from \"query\""),
        ("auth = { jwt = { jwks = \"jwks.json\", leeway = \"2h\" } }", "an hour at most"),
        ("auth = { jwt = { jwks = \"jwks.json\", audience = [] } }", "invalid audience"),
        ("auth = { jwt = { jwks = \"jwks.json\", issuer = 5 } }", "invalid issuer"),
        ("auth = { jwt = { jwks = \"jwks.json\", realm = \"a\\\"b\" } }", "the realm holds"),
        ("auth = { jwt = { jwks = \"jwks.json\" }, basic = { users = \"users\" } }", "not two"),
        ("auth = { request = {} }", "auth.request needs `url`"),
        ("auth = { request = { url = \"ftp://a.test/\" } }", "expected http:// or https://"),
        ("auth = { request = { url = \"/auth\" } }", "expected http:// or https://"),
        ("auth = { request = { url = \"http://u:p@127.0.0.1:1/\" } }", "a user or password in the URL"),
        ("auth = { request = { url = \"http://127.0.0.1:0/\" } }", "port 0"),
        ("auth = { request = { url = \"http://127.0.0.1:1/\", copy_headers = [\"Host\"] } }", "copy_headers cannot name host"),
        ("auth = { request = { url = \"http://127.0.0.1:1/\", copy_headers = [\"a b\"] } }", "invalid header name"),
        ("auth = { request = { url = \"http://127.0.0.1:1/\", timeout = 2 } }", "invalid duration 2"),
        ("auth = { request = { url = \"http://127.0.0.1:1/\", max_in_flight = 0 } }", "invalid max_in_flight 0"),
        ("auth = { request = { url = \"http://127.0.0.1:1/\", method = \"POST\" } }", "unknown key `method`"),
        ("auth = { basic = { users = \"users\" }, request = { url = \"http://127.0.0.1:1/\" } }", "`basic`, `jwt` or `request`, not two"),
        ("auth = { basic = { users = \"users\", file = \"x\" } }", "unknown key `file`"),
        ("satisfy = \"either\"", "unknown variant `either`"),
    ];
    for (written, expected) in cases {
        let found = problems(dir.path(), &at(dir.path(), "", written));
        assert!(found.iter().any(|p| p.contains(expected)), "{written}: {found:#?}");
    }
}

#[test]
fn a_line_that_cannot_be_checked_is_named_with_its_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    // DES (`htpasswd -d`), then plain text (`htpasswd -p`), then no colon.
    let lines = "ok:$apr1$v.PeWTmm$UaeMNTwzGyrJ1n60LqHrk/\ndes:ZJpRNehYYCLuc\nplain:secret\nnocolon\n";
    std::fs::write(dir.path().join("users"), lines).unwrap();
    let found = problems(dir.path(), &at(dir.path(), "", "auth = { basic = { users = \"users\" } }"));
    let text = found.join("\n");
    let file = dir.path().join("users").display().to_string();
    for line in 2..=4 {
        assert!(text.contains(&format!("{file}:{line}: ")), "line {line}: {text}");
    }
    assert!(!text.contains(&format!("{file}:1: ")), "{text}");
}

#[test]
fn a_request_auth_is_resolved_now_and_asks_its_url() {
    let dir = tempfile::tempdir().unwrap();
    let written = "auth = { request = { url = \"http://127.0.0.1:4180/oauth2/auth?rd=1\", \
                   copy_headers = [\"X-Auth-Request-User\", \"x-auth-request-user\", \"X-Email\"], timeout = \"2s\" } }";
    let config = load_at(&at(dir.path(), written, ""), &dir.path().join("gateway.toml")).unwrap();
    let service = request(config.sites[0].locations[0].auth.as_ref());
    assert_eq!(service.target.as_str(), "/oauth2/auth?rd=1");
    assert_eq!(service.host, "127.0.0.1:4180");
    assert_eq!(service.copy_headers, ["x-auth-request-user", "x-email"], "lowercased, once each");
    assert_eq!(service.timeout, Duration::from_secs(2));
    assert_eq!(service.upstream.read_timeout, Duration::from_secs(2));
    assert_eq!(service.upstream.servers.len(), 1);
    assert_eq!(service.upstream.servers[0].addr, "127.0.0.1:4180".parse().unwrap());
    assert!(service.upstream.tls.is_none());
    assert_eq!(service.max_in_flight, 256);
    // A bare host asks `/` on port 80; https:// speaks TLS to port 443, checked for the name.
    let written = "auth = { request = { url = \"http://localhost\" } }";
    let config = load_at(&at(dir.path(), written, ""), &dir.path().join("gateway.toml")).unwrap();
    let service = request(config.sites[0].locations[1].auth.as_ref());
    assert_eq!((service.target.as_str(), service.timeout), ("/", Duration::from_secs(5)));
    assert!(service.upstream.servers.iter().all(|s| s.addr.port() == 80));
    let written = "auth = { request = { url = \"https://localhost/check\" } }";
    let config = load_at(&at(dir.path(), written, ""), &dir.path().join("gateway.toml")).unwrap();
    let service = request(config.sites[0].locations[0].auth.as_ref());
    assert!(service.upstream.tls.is_some());
    let name = service.upstream.servers[0].tls_name.as_ref().unwrap();
    assert_eq!(name.to_str(), "localhost");
    assert!(service.upstream.servers.iter().all(|s| s.addr.port() == 443));
}

#[test]
fn a_jwt_auth_reads_its_keys_now_and_its_rules() {
    let dir = with_users();
    let written = "auth = { jwt = { jwks = \"jwks.json\", issuer = \"https://id.test\", audience = [\"api\", \"web\"], \
                   from = \"cookie:session\", leeway = \"0s\", realm = \"api\", require = { scope = \"api:read\" } } }";
    let config = load_at(&at(dir.path(), written, ""), &dir.path().join("gateway.toml")).unwrap();
    let Some(Check::Jwt(jwt)) = config.sites[0].locations[0].auth.as_ref() else {
        panic!("not jwt");
    };
    assert!(matches!(&jwt.keys, JwtKeys::File { set, .. } if set.count() == 1));
    assert_eq!(jwt.rules.issuers, ["https://id.test"]);
    assert_eq!(jwt.rules.audiences, ["api", "web"]);
    assert_eq!(jwt.rules.leeway, 0);
    assert_eq!(jwt.rules.require, [("scope".to_owned(), "api:read".to_owned())]);
    assert_eq!(jwt.from, TokenFrom::Cookie("session".to_owned()));
    assert_eq!(jwt.challenge, "Bearer realm=\"api\"");
    let written = "auth = { jwt = { jwks_url = \"http://127.0.0.1:8080/.well-known/jwks.json\" } }";
    let config = load_at(&at(dir.path(), written, ""), &dir.path().join("gateway.toml")).unwrap();
    let Some(Check::Jwt(jwt)) = config.sites[0].locations[0].auth.as_ref() else {
        panic!("not jwt");
    };
    let JwtKeys::Url(endpoint) = &jwt.keys else {
        panic!("not a URL");
    };
    assert_eq!(endpoint.target.as_str(), "/.well-known/jwks.json");
    assert_eq!((jwt.rules.leeway, &jwt.from), (60, &TokenFrom::Header), "the defaults");
    assert_eq!(jwt.challenge, "Bearer");
}

#[test]
fn a_zone_reading_a_claim_needs_a_location_that_verifies_a_token() {
    let dir = with_users();
    let zone = "[zones.per_user]\nkey = \"$jwt_claim_sub\"\nrate = \"1r/s\"\nplan = \"$jwt_claim_plan\"\nplans = { pro = \"5r/s\" }\n";
    let text = |auth: &str| {
        at(dir.path(), "", &format!("limit = [{{ zone = \"per_user\" }}]\n{auth}")).replacen("[upstreams.app]", &format!("{zone}[upstreams.app]"), 1)
    };
    let found = problems(dir.path(), &text(""));
    assert!(found.iter().any(|p| p.contains("zone `per_user` reads `$jwt_claim_…`, but nothing here verifies a token")), "{found:#?}");
    let basic = problems(dir.path(), &text("auth = { basic = { users = \"users\" } }"));
    assert!(basic.iter().any(|p| p.contains("nothing here verifies a token")), "{basic:#?}");
    let config = load_at(&text("auth = { jwt = { jwks = \"jwks.json\" } }"), &dir.path().join("gateway.toml")).unwrap();
    assert!(config.zones[0].plan_from.is_some());
    let no_plans = text("auth = { jwt = { jwks = \"jwks.json\" } }").replace("plans = { pro = \"5r/s\" }\n", "");
    let found = problems(dir.path(), &no_plans);
    assert!(found.iter().any(|p| p.contains("`plan` names one of the zone's `plans`")), "{found:#?}");
    let refused = text("auth = { jwt = { jwks = \"jwks.json\" } }").replace("$jwt_claim_plan", "$request_id");
    assert!(problems(dir.path(), &refused).iter().any(|p| p.contains("$request_id")));
}
