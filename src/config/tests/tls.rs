//! `[tls]` and `listen_tls`: certificates are read and checked with the file, and each
//! problem is reported at the value that names the file.

use super::*;

/// A self-signed certificate for `names` with a fresh key of `alg`, written to `dir` as
/// `{stem}.pem` and `{stem}.key`.
pub(super) fn write_cert(
    dir: &Path,
    stem: &str,
    names: &[&str],
    alg: &'static rcgen::SignatureAlgorithm,
) {
    let key = rcgen::KeyPair::generate_for(alg).unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let cert = rcgen::CertificateParams::new(names)
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join(format!("{stem}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
}

/// Loads `text` from `dir`; a file that loads must load the same once written.
fn config_in(dir: &Path, text: &str) -> Result<Config, ConfigErrors> {
    load_at(text, &dir.join("gateway.toml"))
}

const TLS_SERVER: &str = "[server]\nlisten_tls = [\"127.0.0.1:8443\"]\n";

#[test]
fn certificates_load_with_their_names_relative_to_the_file() {
    let dir = tempfile::tempdir().unwrap();
    write_cert(
        dir.path(),
        "a",
        &["a.test", "*.a.test"],
        &rcgen::PKCS_ECDSA_P256_SHA256,
    );
    write_cert(
        dir.path(),
        "b",
        &["B.test", "127.0.0.1"],
        &rcgen::PKCS_ED25519,
    );
    let text = format!(
        "{TLS_SERVER}[tls]\nhandshake_timeout = \"3s\"\n\
         [[tls.certificates]]\ncert = \"a.pem\"\nkey = \"a.key\"\n\
         [[tls.certificates]]\ncert = \"b.pem\"\nkey = \"{}\"\n",
        dir.path().join("b.key").display()
    );
    let config = config_in(dir.path(), &text).unwrap_or_else(|e| panic!("{e}"));
    assert!(config.server.listen.is_empty());
    assert_eq!(addrs(&config.server.listen_tls), [addr("127.0.0.1:8443")]);
    let tls = config.tls.expect("[tls]");
    assert_eq!(tls.handshake_timeout, Duration::from_secs(3));
    let names: Vec<_> = tls.certificates.iter().map(|c| c.names.clone()).collect();
    assert_eq!(
        names,
        [vec!["a.test", "*.a.test"], vec!["b.test", "127.0.0.1"]]
    );
    assert_eq!(tls.certificates[0].path, dir.path().join("a.pem"));
}

#[test]
fn each_certificate_problem_is_reported_at_its_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_cert(d, "a", &["a.test"], &rcgen::PKCS_ECDSA_P256_SHA256);
    write_cert(d, "b", &["b.test"], &rcgen::PKCS_ECDSA_P256_SHA256);
    std::fs::write(d.join("empty.pem"), "not a certificate\n").unwrap();
    std::fs::write(d.join("garbled.pem"), "-----BEGIN CERTIFICATE-----\n!!\n").unwrap();
    let text = format!(
        "{TLS_SERVER}[tls]\n\
         [[tls.certificates]]\ncert = \"missing.pem\"\nkey = \"a.key\"\n\
         [[tls.certificates]]\ncert = \"a.pem\"\nkey = \"b.key\"\n\
         [[tls.certificates]]\ncert = \"empty.pem\"\nkey = \"a.key\"\n\
         [[tls.certificates]]\ncert = \"a.pem\"\nkey = \"a.pem\"\n\
         [[tls.certificates]]\ncert = \"garbled.pem\"\nkey = \"a.key\"\n\
         [[tls.certificates]]\ncert = \"a.pem\"\n"
    );
    let errors = config_in(d, &text).expect_err("invalid");
    let found: Vec<(usize, usize, String)> = errors
        .errors
        .iter()
        .map(|e| (e.line, e.col, e.message.clone()))
        .collect();
    let path = |name: &str| d.join(name).display().to_string();
    assert_eq!(found.len(), 6, "{found:#?}");
    assert_eq!((found[0].0, found[0].1), (5, 8));
    assert!(
        found[0]
            .2
            .starts_with(&format!("cannot read {}: ", path("missing.pem"))),
        "{}",
        found[0].2
    );
    assert_eq!(
        found[1],
        (
            9,
            7,
            format!(
                "the key in {} does not match the certificate in {}",
                path("b.key"),
                path("a.pem")
            )
        )
    );
    assert_eq!(
        found[2],
        (
            11,
            8,
            format!(
                "{}: no certificate found: expected a PEM \"BEGIN CERTIFICATE\" block",
                path("empty.pem")
            )
        )
    );
    assert_eq!((found[3].0, found[3].1), (15, 7));
    assert!(
        found[3]
            .2
            .starts_with(&format!("{}: no private key found", path("a.pem"))),
        "{}",
        found[3].2
    );
    assert_eq!((found[4].0, found[4].1), (17, 8));
    assert!(
        found[4]
            .2
            .starts_with(&format!("{}: invalid PEM", path("garbled.pem"))),
        "{}",
        found[4].2
    );
    assert_eq!(found[5], (19, 1, "missing key `key`".to_owned()));
}

#[test]
fn listen_tls_needs_a_certificate_and_a_tls_section_needs_its_list() {
    let dir = tempfile::tempdir().unwrap();
    let errors = config_in(dir.path(), &format!("{TLS_SERVER}[tls]\n")).expect_err("invalid");
    let messages: Vec<_> = errors.errors.iter().map(|e| e.message.as_str()).collect();
    assert_eq!(
        messages,
        [
            "`listen_tls` needs a certificate: add a [[tls.certificates]] table with `cert` and `key`, or set `acme = true` on a site to order one",
            "missing key `certificates`"
        ]
    );
    let errors =
        config_in(dir.path(), "[server]\nlisten = []\nlisten_tls = []\n").expect_err("no listener");
    assert_eq!(
        errors.errors[0].message,
        "at least one of `listen` / `listen_tls` must be non-empty"
    );
}
