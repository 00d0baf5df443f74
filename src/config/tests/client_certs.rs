//! A site's `client_certificates`: the `ca` read and checked with the file, `verify`'s
//! words, and a site that no TLS listener serves refused.

use super::tls::write_cert;
use super::*;

const SERVERS: &str = "[server]\nlisten = [\"127.0.0.1:8080\"]\nlisten_tls = [\"127.0.0.1:8443\"]\n\
                       [tls]\n[[tls.certificates]]\ncert = \"ca.pem\"\nkey = \"ca.key\"\n";

/// `SERVERS` and a site `a.test` with `client_certificates` (and `listen`, when given),
/// loaded in `dir`, which holds `ca.pem`.
fn site(dir: &Path, certificates: &str, listen: &str) -> Result<Config, ConfigErrors> {
    let text = format!(
        "{SERVERS}[[site]]\nnames = [\"a.test\"]\n{listen}\nclient_certificates = {certificates}\n\
         [[site.location]]\nmatch = \"/\"\nreturn = {{ status = 204 }}\n"
    );
    load_at(&text, &dir.join("gateway.toml"))
}

fn messages(result: Result<Config, ConfigErrors>) -> Vec<String> {
    let Err(errors) = result else { panic!("accepted") };
    errors.errors.into_iter().map(|e| e.message).collect()
}

fn with_ca() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    write_cert(dir.path(), "ca", &["Clients CA"], &rcgen::PKCS_ECDSA_P256_SHA256);
    dir
}

#[test]
fn the_ca_is_read_relative_to_the_file_and_verify_defaults_to_on() {
    let dir = with_ca();
    let config = site(dir.path(), "{ ca = \"ca.pem\" }", "").unwrap();
    let certificates = config.sites[0].client_certificates.as_ref().unwrap();
    assert_eq!(certificates.verify, VerifyClient::On);
    assert_eq!(certificates.ca, dir.path().join("ca.pem"));
    let optional = site(dir.path(), "{ ca = \"ca.pem\", verify = \"optional\" }", "").unwrap();
    let optional = optional.sites[0].client_certificates.as_ref().unwrap();
    assert_eq!(optional.verify, VerifyClient::Optional);
    // The same file is the same CAs, whatever the verify.
    assert_eq!(optional.roots_id, certificates.roots_id);
}

#[test]
fn each_mistake_is_named() {
    let dir = with_ca();
    let found = messages(site(dir.path(), "{ ca = \"ca.pem\", verify = \"yes\" }", ""));
    assert_eq!(found, ["unknown verify \"yes\": expected \"on\" or \"optional\""]);
    let found = messages(site(dir.path(), "{ ca = \"ca.pem\", verify = \"optional_no_ca\" }", ""));
    assert!(found[0].contains("\"optional_no_ca\"` is not supported"), "{found:?}");
    let found = messages(site(dir.path(), "{ verify = \"on\" }", ""));
    assert!(found[0].contains("needs `ca`"), "{found:?}");
    let found = messages(site(dir.path(), "{ ca = \"missing.pem\" }", ""));
    assert!(found[0].contains("missing.pem"), "{found:?}");
    let found = messages(site(dir.path(), "{ ca = \"ca.pem\", depth = 2 }", ""));
    assert!(found[0].contains("unknown key `depth`"), "{found:?}");
}

#[test]
fn a_site_no_tls_listener_serves_cannot_ask_for_certificates() {
    let dir = with_ca();
    let found = messages(site(dir.path(), "{ ca = \"ca.pem\" }", "listen = [\"127.0.0.1:8080\"]"));
    assert!(found[0].contains("needs the site to answer on a `listen_tls` address"), "{found:?}");
    // On both, it may: a plain request to it is refused at run time.
    site(dir.path(), "{ ca = \"ca.pem\" }", "listen = [\"127.0.0.1:8080\", \"127.0.0.1:8443\"]").unwrap();
}
