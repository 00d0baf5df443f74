//! `[upstreams.NAME] tls` and `https://` servers: when a group speaks TLS, the name
//! each server's certificate is checked against, and every problem at its key.

use rustls::pki_types::ServerName;

use super::*;

/// A CA certificate written to `dir/ca.pem`, and a client certificate and key signed by
/// nobody (`client.pem`, `client.key`); `other.key` does not belong to it.
fn write_files(dir: &Path) {
    let key = rcgen::KeyPair::generate().unwrap();
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    let ca = params.self_signed(&key).unwrap();
    std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let client = rcgen::CertificateParams::new(vec!["client.test".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join("client.pem"), client.pem()).unwrap();
    std::fs::write(dir.join("client.key"), key.serialize_pem()).unwrap();
    let other = rcgen::KeyPair::generate().unwrap();
    std::fs::write(dir.join("other.key"), other.serialize_pem()).unwrap();
    std::fs::write(dir.join("empty.pem"), "no certificate here\n").unwrap();
}

/// Loads a file of `[upstreams.app]` with `rest` from `dir`; a file that loads must load
/// the same once written.
fn group(dir: &Path, rest: &str) -> Result<Config, ConfigErrors> {
    let text = format!("{SERVER}[upstreams.app]\n{rest}");
    load_at(&text, &dir.join("gateway.toml"))
}

fn names(config: &Config) -> Vec<Option<ServerName<'static>>> {
    config.upstreams[0]
        .servers
        .iter()
        .map(|s| s.tls_name.clone())
        .collect()
}

fn name(text: &str) -> Option<ServerName<'static>> {
    Some(ServerName::try_from(text.to_owned()).unwrap())
}

fn found(errors: ConfigErrors) -> Vec<(usize, usize, String)> {
    errors
        .errors
        .into_iter()
        .map(|e| (e.line, e.col, e.message))
        .collect()
}

#[test]
fn a_plain_group_has_no_tls_and_tls_false_keeps_it_plain() {
    let dir = tempfile::tempdir().unwrap();
    for rest in [
        "servers = [\"127.0.0.1:80\"]\n",
        "servers = [\"http://127.0.0.1\"]\n",
        "servers = [\"127.0.0.1:80\"]\ntls = false\n",
    ] {
        let config = group(dir.path(), rest).unwrap_or_else(|e| panic!("{e}"));
        assert!(config.upstreams[0].tls.is_none(), "{rest}");
        assert_eq!(names(&config), [None], "{rest}");
        assert_eq!(config.upstreams[0].servers[0].addr, addr("127.0.0.1:80"));
    }
}

#[test]
fn https_servers_turn_tls_on_with_the_system_roots_and_their_own_names() {
    let dir = tempfile::tempdir().unwrap();
    let config = group(
        dir.path(),
        "servers = [\"https://127.0.0.1\", { addr = \"https://[::1]:8443\", weight = 2 }]\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let app = &config.upstreams[0];
    let client = app.tls.as_ref().expect("TLS on");
    assert_eq!(client.alpn_protocols, [b"http/1.1".to_vec()]);
    assert_eq!(app.servers[0].addr, addr("127.0.0.1:443"));
    assert_eq!(app.servers[1].addr, addr("[::1]:8443"));
    assert_eq!(names(&config), [name("127.0.0.1"), name("::1")]);

    let config = group(dir.path(), "servers = [\"localhost:8443\"]\ntls = true\n")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(config.upstreams[0].tls.is_some());
    assert!(names(&config).iter().all(|n| *n == name("localhost")));
}

#[test]
fn a_tls_table_reads_its_files_relative_to_the_config_and_names_every_server() {
    let dir = tempfile::tempdir().unwrap();
    write_files(dir.path());
    let config = group(
        dir.path(),
        "servers = [\"127.0.0.1:8443\", \"https://127.0.0.2:8443\"]\n\
         tls = { server_name = \"app.internal\", ca = \"ca.pem\", cert = \"client.pem\", key = \"client.key\" }\n",
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let client = config.upstreams[0].tls.as_ref().expect("TLS on");
    assert!(client.client_auth_cert_resolver.has_certs());
    assert_eq!(names(&config), [name("app.internal"), name("app.internal")]);
}

#[test]
fn each_tls_file_problem_is_reported_at_its_key() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_files(d);
    let errors = found(
        group(
            d,
            "servers = [\"127.0.0.1:8443\"]\n\
             tls = { ca = \"missing.pem\", cert = \"client.pem\", key = \"other.key\" }\n",
        )
        .expect_err("invalid"),
    );
    let path = |name: &str| d.join(name).display().to_string();
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert_eq!((errors[0].0, errors[0].1), (5, 14));
    assert!(
        errors[0]
            .2
            .starts_with(&format!("cannot read {}: ", path("missing.pem"))),
        "{}",
        errors[0].2
    );
    assert_eq!(
        errors[1],
        (
            5,
            56,
            format!(
                "the key in {} does not match the certificate in {}",
                path("other.key"),
                path("client.pem")
            )
        )
    );

    let errors = found(
        group(
            d,
            "servers = [\"127.0.0.1:8443\"]\ntls = { ca = \"empty.pem\", cert = \"client.pem\" }\n",
        )
        .expect_err("invalid"),
    );
    assert_eq!(
        errors,
        [
            (
                5,
                7,
                "a client certificate needs both `cert` and `key`".to_owned()
            ),
            (
                5,
                14,
                format!(
                    "{}: no certificate found: expected a PEM \"BEGIN CERTIFICATE\" block",
                    path("empty.pem")
                )
            )
        ]
    );
}

#[test]
fn a_group_speaks_tls_to_all_of_its_servers_or_to_none() {
    let dir = tempfile::tempdir().unwrap();
    let cases = [
        (
            "servers = [\"https://127.0.0.1\", \"http://127.0.0.2\"]\n",
            (4, 33),
            "`servers` mixes https:// with plain servers",
        ),
        (
            "servers = [\"https://127.0.0.1\", \"127.0.0.2:80\"]\n",
            (4, 33),
            "`servers` mixes https:// with plain servers",
        ),
        (
            "servers = [\"http://127.0.0.1\"]\ntls = true\n",
            (4, 12),
            "an http:// server in a group with `tls`",
        ),
        (
            "servers = [\"https://127.0.0.1\"]\ntls = false\n",
            (5, 7),
            "`tls = false`, but a server is written https://",
        ),
        (
            "servers = [\"127.0.0.1:443\"]\ntls = { server_name = \"not a name\" }\n",
            (5, 23),
            "invalid server_name \"not a name\"",
        ),
        (
            "servers = [\"127.0.0.1:443\"]\ntls = { verify = false }\n",
            (5, 9),
            "unknown key `verify`, expected one of `server_name`, `ca`, `cert`, `key`",
        ),
        (
            "servers = [\"127.0.0.1:443\"]\ntls = \"on\"\n",
            (5, 7),
            "invalid type: string \"on\", expected true, false, or a table",
        ),
    ];
    for (rest, at, message) in cases {
        let errors = found(group(dir.path(), rest).expect_err(rest));
        assert_eq!(errors.len(), 1, "{rest}: {errors:#?}");
        assert_eq!((errors[0].0, errors[0].1), at, "{rest}: {errors:#?}");
        assert!(errors[0].2.starts_with(message), "{rest}: {errors:#?}");
    }
}
