//! `[acme]` and `acme = true` on a site: defaults, the names ordered and those a static
//! certificate covers, and every problem at its `line:col`.

use super::tls::write_cert;
use super::*;
use crate::config::acme::Covered;

/// A plain and a TLS address (lines 1 to 3).
const LISTENERS: &str =
    "[server]\nlisten = [\"127.0.0.1:8080\"]\nlisten_tls = [\"127.0.0.1:8443\"]\n";

/// `[acme]` with only its required key (two lines).
const ACME: &str = "[acme]\ndirectory = \"https://acme.test/directory\"\n";

const RETURN: &str = "[[site.location]]\nmatch = \"/\"\nreturn = { status = 204 }\n";

/// A site for `names` (written as TOML items) with `acme = true` (three lines, then its
/// location).
fn acme_site(names: &str) -> String {
    format!("[[site]]\nnames = [{names}]\nacme = true\n{RETURN}")
}

/// `LISTENERS`, `[acme]` with `keys` after `directory`, and one acme site.
fn with_keys(keys: &str) -> String {
    format!("{LISTENERS}{ACME}{keys}{}", acme_site("\"example.com\""))
}

fn acme_of(text: &str) -> Acme {
    parse(text).acme.expect("[acme]")
}

/// The one problem of `text`.
fn only(text: &str) -> (usize, usize, String) {
    let mut found = errors(text);
    assert_eq!(found.len(), 1, "{found:#?}");
    found.remove(0)
}

#[test]
fn omitted_keys_take_their_defaults_and_names_are_lower_case_without_the_dot() {
    let config = parse(&format!(
        "{LISTENERS}[acme]\ndirectory = \"https://acme-v02.api.letsencrypt.org/directory\"\n{}",
        acme_site("\"Example.COM.\", \"www.example.com\", \"\"")
    ));
    let want = Acme {
        directory: "https://acme-v02.api.letsencrypt.org/directory".to_owned(),
        email: None,
        storage: PathBuf::from("/etc/tollgate/acme"),
        ca: None,
        eab: None,
        challenges: vec![Challenge::Http01, Challenge::TlsAlpn01],
        retry_min: Duration::from_secs(60),
        retry_max: Duration::from_secs(24 * 60 * 60),
        names: vec!["example.com".to_owned(), "www.example.com".to_owned()],
        covered: Vec::new(),
    };
    assert_eq!(config.acme, Some(want));
    assert!(config.sites[0].acme);
    let tls = config.tls.expect("TLS settings for listen_tls");
    assert!(tls.certificates.is_empty());
    assert_eq!(tls.handshake_timeout, Duration::from_secs(10));
}

#[test]
fn written_keys_replace_the_defaults() {
    let acme = acme_of(&with_keys(
        "email = \"mailto:ops@example.com\"\nstorage = \"/var/lib/tollgate/acme\"\n\
         challenges = [\"tls-alpn-01\", \"http-01\"]\nretry_min = \"10s\"\nretry_max = \"10s\"\n\
         eab_kid = \"kid-1\"\neab_hmac_key = \"c2VjcmV0LWtleQ\"\n",
    ));
    assert_eq!(acme.email.as_deref(), Some("ops@example.com"));
    assert_eq!(acme.storage, PathBuf::from("/var/lib/tollgate/acme"));
    assert_eq!(acme.challenges, [Challenge::TlsAlpn01, Challenge::Http01]);
    assert_eq!(acme.retry_min, Duration::from_secs(10));
    assert_eq!(acme.retry_max, Duration::from_secs(10));
    let eab = acme.eab.expect("eab");
    assert_eq!(
        (eab.kid.as_str(), &eab.hmac_key[..]),
        ("kid-1", &b"secret-key"[..])
    );
    let relative = acme_of(&with_keys("storage = \"state/acme\"\n"));
    assert_eq!(relative.storage, PathBuf::from("/etc/tollgate/state/acme"));
}

#[test]
fn the_eab_key_is_taken_in_base64url_or_base64_with_or_without_padding() {
    for written in ["-_8", "-_8=", "+/8", "+/8="] {
        let acme = acme_of(&with_keys(&format!(
            "eab_kid = \"k\"\neab_hmac_key = \"{written}\"\n"
        )));
        assert_eq!(acme.eab.expect(written).hmac_key, [0xfb, 0xff], "{written}");
    }
}

#[test]
fn challenges_default_to_what_the_listeners_can_answer() {
    let tls_only = "[server]\nlisten_tls = [\"127.0.0.1:8443\"]\n";
    let acme = acme_of(&format!("{tls_only}{ACME}{}", acme_site("\"a.test\"")));
    assert_eq!(acme.challenges, [Challenge::TlsAlpn01]);
    // Without acme sites `[acme]` orders nothing, and needs no TLS listener.
    let text = format!("{SERVER}{ACME}[[location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n");
    let acme = acme_of(&text);
    assert_eq!(acme.challenges, [Challenge::Http01]);
    assert!(acme.names.is_empty());
}

#[test]
fn each_challenge_problem_is_reported_at_its_item() {
    let text = format!(
        "{SERVER}{ACME}challenges = [\"http-01\", \"dns-01\", \"http-01\", \"tls-alpn-01\", \"x\"]\n"
    );
    let found = errors(&text);
    let at: Vec<_> = found.iter().map(|(l, c, _)| (*l, *c)).collect();
    assert_eq!(at, [(5, 26), (5, 36), (5, 47), (5, 62)], "{found:#?}");
    assert!(
        found[0].2.starts_with("dns-01 is not supported"),
        "{}",
        found[0].2
    );
    assert_eq!(found[1].2, "\"http-01\" is listed twice");
    assert!(
        found[2].2.starts_with(
            "tls-alpn-01 is answered on a TLS listener, and `[server] listen_tls` has none"
        ),
        "{}",
        found[2].2
    );
    assert_eq!(
        found[3].2,
        r#"unknown challenge type "x": expected "http-01" or "tls-alpn-01""#
    );
    let tls_only = "[server]\nlisten_tls = [\"127.0.0.1:8443\"]\n";
    let (line, col, message) = only(&format!(
        "{tls_only}{ACME}challenges = [\"http-01\"]\n{}",
        acme_site("\"a.test\"")
    ));
    assert_eq!((line, col), (5, 15), "{message}");
    assert!(
        message.starts_with("http-01 is answered on a plain listener"),
        "{message}"
    );
    let (line, col, message) = only(&with_keys("challenges = []\n"));
    assert_eq!((line, col), (6, 14), "{message}");
    assert!(message.starts_with("`challenges` is empty"), "{message}");
}

#[test]
fn directory_is_required_and_must_be_a_web_url_with_a_host() {
    let (line, col, message) = only(&format!("{LISTENERS}[acme]\n{}", acme_site("\"a.test\"")));
    assert_eq!(
        (line, col, message.as_str()),
        (4, 1, "missing key `directory`")
    );
    for bad in [
        "ftp://acme.test/directory",
        "https://",
        "acme.test/directory",
        "",
        "https:///directory",
    ] {
        let text = format!(
            "{LISTENERS}[acme]\ndirectory = \"{bad}\"\n{}",
            acme_site("\"a.test\"")
        );
        let (line, col, message) = only(&text);
        assert_eq!((line, col), (5, 13), "{bad}: {message}");
        assert_eq!(
            message,
            format!(
                r#"invalid directory "{bad}": expected the http:// or https:// URL of the ACME server's directory, e.g. "https://acme-v02.api.letsencrypt.org/directory""#
            )
        );
    }
    let acme = acme_of(&format!(
        "{LISTENERS}[acme]\ndirectory = \"http://127.0.0.1:14000/dir\"\n{}",
        acme_site("\"a.test\"")
    ));
    assert_eq!(acme.directory, "http://127.0.0.1:14000/dir");
    // Plain http:// elsewhere: its answers are not signed.
    let text = format!(
        "{LISTENERS}[acme]\ndirectory = \"http://ca.example.com/dir\"\n{}",
        acme_site("\"a.test\"")
    );
    let (line, col, message) = only(&text);
    assert_eq!((line, col), (5, 13));
    assert!(message.contains("ACME needs https://"), "{message}");
}

#[test]
fn email_must_be_one_address() {
    let acme = acme_of(&with_keys("email = \"MAILTO:ops@example.com\"\n"));
    assert_eq!(acme.email.as_deref(), Some("ops@example.com"));
    for bad in [
        "ops",
        "a@b@example.com",
        "ops @example.com",
        "a@example.com,b@example.com",
        "@example.com",
        "ops@",
        "mailto:",
        "",
    ] {
        let (line, col, message) = only(&with_keys(&format!("email = \"{bad}\"\n")));
        assert_eq!((line, col), (6, 9), "{bad}: {message}");
        assert_eq!(
            message,
            format!(r#"invalid email "{bad}": expected one address, e.g. "ops@example.com""#)
        );
    }
}

#[test]
fn storage_may_not_be_empty() {
    let (line, col, message) = only(&with_keys("storage = \"\"\n"));
    assert_eq!((line, col), (6, 11), "{message}");
    assert!(message.starts_with("`storage` is empty"), "{message}");
}

#[test]
fn eab_needs_both_keys_and_a_key_that_decodes() {
    let (line, col, message) = only(&with_keys("eab_kid = \"k\"\n"));
    assert_eq!((line, col), (6, 11), "{message}");
    assert!(
        message.starts_with("External Account Binding needs both"),
        "{message}"
    );
    let (line, col, _) = only(&with_keys("eab_hmac_key = \"c2VjcmV0\"\n"));
    assert_eq!((line, col), (6, 16));
    for bad in ["", "=", "not base64!", "a", "abc==", "ab=c"] {
        let (line, col, message) = only(&with_keys(&format!(
            "eab_kid = \"k\"\neab_hmac_key = \"{bad}\"\n"
        )));
        assert_eq!((line, col), (7, 16), "{bad:?}: {message}");
        assert!(message.starts_with("invalid eab_hmac_key: "), "{message}");
        assert!(bad.len() < 4 || !message.contains(bad), "{message}");
    }
    let (line, col, message) = only(&with_keys("eab_kid = \"\"\neab_hmac_key = \"c2VjcmV0\"\n"));
    assert_eq!((line, col, message.as_str()), (6, 11, "`eab_kid` is empty"));
}

#[test]
fn retries_start_at_a_second_and_the_longest_is_not_shorter() {
    let cases = [
        (
            "retry_min = \"500ms\"\n",
            (6, 13),
            "retry_min \"500ms\" is too short: at least \"1s\"",
        ),
        (
            "retry_min = \"2h\"\nretry_max = \"1h\"\n",
            (7, 13),
            "`retry_max` is shorter than `retry_min`",
        ),
        (
            "retry_min = \"25h\"\n",
            (6, 13),
            "`retry_min` is longer than `retry_max` (\"24h\" when left out)",
        ),
        (
            "retry_max = \"30s\"\n",
            (6, 13),
            "`retry_max` is shorter than `retry_min` (\"1m\" when left out)",
        ),
    ];
    for (keys, at, want) in cases {
        let (line, col, message) = only(&with_keys(keys));
        assert_eq!(((line, col), message.as_str()), (at, want), "{keys}");
    }
    let (line, col, message) = only(&with_keys("retry_min = 10\n"));
    assert_eq!((line, col), (6, 13));
    assert!(message.starts_with("invalid duration 10"), "{message}");
}

#[test]
fn unknown_acme_keys_are_reported_at_the_key() {
    let (line, col, message) = only(&with_keys("contact = \"ops@example.com\"\n"));
    assert_eq!((line, col), (6, 1));
    assert!(
        message.starts_with("unknown key `contact`, expected one of `directory`, `email`"),
        "{message}"
    );
}

#[test]
fn a_ca_file_is_read_with_the_config() {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = params.self_signed(&key).unwrap();
    std::fs::write(dir.path().join("pebble.pem"), ca.pem()).unwrap();
    std::fs::write(dir.path().join("empty.pem"), "nothing\n").unwrap();
    let origin = dir.path().join("gateway.toml");
    let config = load_at(&with_keys("ca = \"pebble.pem\"\n"), &origin).unwrap();
    assert_eq!(config.acme.unwrap().ca.map(|ca| ca.len()), Some(1));
    for (file, start) in [("missing.pem", "cannot read "), ("empty.pem", "")] {
        let errors = from_str(&with_keys(&format!("ca = \"{file}\"\n")), &origin)
            .expect_err(file)
            .errors;
        assert_eq!(errors.len(), 1, "{errors:#?}");
        assert_eq!((errors[0].line, errors[0].col), (6, 6));
        let path = dir.path().join(file).display().to_string();
        assert!(
            errors[0].message.starts_with(&format!("{start}{path}")),
            "{}",
            errors[0].message
        );
    }
}

#[test]
fn acme_true_needs_an_acme_section() {
    let (line, col, message) = only(&format!("{LISTENERS}{}", acme_site("\"a.test\"")));
    assert_eq!((line, col), (6, 8));
    assert!(
        message.starts_with("`acme = true` needs an [acme] section"),
        "{message}"
    );
    // `acme = false` needs nothing.
    let config = parse(&format!(
        "{SERVER}[[site]]\nnames = [\"a.test\"]\nacme = false\n{RETURN}"
    ));
    assert!(!config.sites[0].acme && config.acme.is_none());
}

#[test]
fn acme_true_needs_names_that_a_certificate_can_be_ordered_for() {
    for names in ["", "\"\""] {
        let (line, col, message) = only(&format!("{LISTENERS}{ACME}{}", acme_site(names)));
        assert_eq!((line, col), (8, 8), "{names}: {message}");
        assert!(
            message.starts_with("`acme = true` needs `names`"),
            "{message}"
        );
    }
    let names =
        "\"a.example.com\", \"*.example.com\", \"mail.*\", \"~^x$\", \"10.0.0.1\", \"[::1]\"";
    let found = errors(&format!("{LISTENERS}{ACME}{}", acme_site(names)));
    let at: Vec<_> = found.iter().map(|(l, c, _)| (*l, *c)).collect();
    assert_eq!(
        at,
        [(7, 27), (7, 44), (7, 54), (7, 62), (7, 74)],
        "{found:#?}"
    );
    assert_eq!(
        found[0].2,
        r#"the wildcard "*.example.com" cannot get a certificate from ACME: http-01 and tls-alpn-01 cannot prove a wildcard; use a static certificate ([[tls.certificates]]) for it"#
    );
    assert!(
        found[1].2.starts_with(r#"the wildcard "mail.*" cannot"#),
        "{}",
        found[1].2
    );
    assert!(
        found[2]
            .2
            .starts_with("a regex name cannot get a certificate"),
        "{}",
        found[2].2
    );
    assert!(
        found[3]
            .2
            .starts_with(r#"the IP address "10.0.0.1" cannot"#),
        "{}",
        found[3].2
    );
    assert!(
        found[4].2.starts_with(r#"the IP address "[::1]" cannot"#),
        "{}",
        found[4].2
    );
}

#[test]
fn acme_true_needs_a_tls_address_to_serve_the_certificate_on() {
    let want = "`acme = true`, but the site answers on no `listen_tls` address: its certificate would never be served";
    let text = format!(
        "{LISTENERS}{ACME}[[site]]\nnames = [\"a.test\"]\nacme = true\nlisten = [\"127.0.0.1:8080\"]\n{RETURN}\
         [[site]]\nlisten = [\"127.0.0.1:8443\"]\n{RETURN}"
    );
    assert_eq!(only(&text), (8, 8, want.to_owned()));
    let text = format!("{SERVER}{ACME}{}", acme_site("\"a.test\""));
    assert_eq!(only(&text), (7, 8, want.to_owned()));
}

#[test]
fn names_come_from_every_acme_site_once_in_file_order() {
    let text = format!(
        "[server]\nlisten = [\"127.0.0.1:8080\"]\nlisten_tls = [\"127.0.0.1:8443\", \"127.0.0.1:8444\"]\n{ACME}\
         [[site]]\nnames = [\"b.test\", \"A.test\"]\nacme = true\nlisten = [\"127.0.0.1:8443\"]\n{RETURN}\
         [[site]]\nnames = [\"c.test\", \"a.test.\"]\nacme = true\nlisten = [\"127.0.0.1:8444\"]\n{RETURN}\
         [[site]]\nnames = [\"d.test\"]\n{RETURN}"
    );
    let acme = acme_of(&text);
    assert_eq!(acme.names, ["b.test", "a.test", "c.test"]);
    assert!(acme.covered.is_empty());
}

#[test]
fn names_a_static_certificate_covers_are_not_ordered() {
    let dir = tempfile::tempdir().unwrap();
    let alg = &rcgen::PKCS_ECDSA_P256_SHA256;
    write_cert(dir.path(), "static", &["example.com", "*.example.com"], alg);
    let text = format!(
        "{LISTENERS}[tls]\n[[tls.certificates]]\ncert = \"static.pem\"\nkey = \"static.key\"\n{ACME}{}",
        acme_site("\"example.com\", \"WWW.example.com\", \"a.b.example.com\", \"shop.example.org\"")
    );
    let config = load_at(&text, &dir.path().join("gateway.toml")).unwrap_or_else(|e| panic!("{e}"));
    let acme = config.acme.expect("[acme]");
    assert_eq!(acme.names, ["a.b.example.com", "shop.example.org"]);
    let cert = dir.path().join("static.pem");
    let covered = |name: &str| Covered {
        name: name.to_owned(),
        cert: cert.clone(),
    };
    assert_eq!(
        acme.covered,
        [covered("example.com"), covered("www.example.com")]
    );
}

#[test]
fn with_acme_sites_tls_needs_no_static_certificate() {
    let text = format!(
        "{LISTENERS}[tls]\nhandshake_timeout = \"3s\"\n{ACME}{}",
        acme_site("\"a.test\"")
    );
    let tls = parse(&text).tls.expect("[tls]");
    assert!(tls.certificates.is_empty());
    assert_eq!(tls.handshake_timeout, Duration::from_secs(3));
    let text = format!(
        "{LISTENERS}[tls]\ncertificates = []\n{ACME}{}",
        acme_site("\"a.test\"")
    );
    assert!(parse(&text).tls.expect("[tls]").certificates.is_empty());
    // Without one, the certificates are needed as before.
    let found = errors(&format!("{LISTENERS}[tls]\nhandshake_timeout = \"3s\"\n"));
    let messages: Vec<_> = found.iter().map(|(_, _, m)| m.as_str()).collect();
    assert_eq!(messages.len(), 2, "{found:#?}");
    assert!(messages[0].starts_with("`listen_tls` needs a certificate"));
    assert_eq!(messages[1], "missing key `certificates`");
}

#[test]
fn storage_is_checked_without_being_made() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("somefile"), "").unwrap();
    let acme = |storage: &str| {
        let text = with_keys(&format!("storage = \"{storage}\"\n"));
        load_at(&text, &d.join("gateway.toml"))
            .unwrap()
            .acme
            .unwrap()
    };
    acme(".").check_storage().expect("an existing directory");
    acme("new/deeper")
        .check_storage()
        .expect("a directory to make");
    assert!(!d.join("new").exists(), "the check made the directory");
    let entries: Vec<_> = std::fs::read_dir(d).unwrap().collect();
    assert_eq!(entries.len(), 1, "the probe file is left: {entries:?}");
    let err = acme("somefile/acme").check_storage().unwrap_err();
    let path = d.join("somefile/acme");
    assert_eq!(err.path, path);
    let message = err.to_string();
    let start = format!(
        "cannot use {} as the [acme] storage: it does not exist and cannot be created: {} is not a directory (",
        path.display(),
        d.join("somefile").display()
    );
    assert!(message.starts_with(&start), "{message}");
    let err = acme("somefile").check_storage().unwrap_err();
    assert_eq!(err.reason, "not a directory");
}

#[test]
fn the_acme_example_in_docs_is_valid() {
    let doc = include_str!("../../../docs/config.md");
    let section = doc.find("## `[acme]`\n").expect("an [acme] section");
    let start =
        section + doc[section..].find("```toml\n").expect("a toml example") + "```toml\n".len();
    let end = start + doc[start..].find("```").expect("end of the example");
    let acme = acme_of(&doc[start..end]);
    assert_eq!(acme.names, ["example.com", "www.example.com"]);
    assert_eq!(acme.challenges, [Challenge::Http01, Challenge::TlsAlpn01]);
    assert_eq!(acme.storage, PathBuf::from("/etc/tollgate/acme"));
}
