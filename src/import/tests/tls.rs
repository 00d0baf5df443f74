//! TLS's directives: `ssl_verify_client` and `ssl_client_certificate` (a server's, or,
//! inherited, the `http {}`'s, become its site's `client_certificates`; `off` and
//! `optional_no_ca` are reported), and `listen … quic` with `http3`.



use super::super::Imported;
use super::{approx, exact, has, import_in, unsupported};

/// `text` imported, `{DIR}` in it naming a directory that holds `server.pem`/`.key`
/// and `clients.pem`; the file written must load from there.
fn import(text: &str) -> Imported {
    let dir = tempfile::tempdir().unwrap();
    let key = rcgen::KeyPair::generate().unwrap();
    let names = vec!["a.test".to_owned(), "b.test".to_owned()];
    let cert = rcgen::CertificateParams::new(names).unwrap().self_signed(&key).unwrap();
    std::fs::write(dir.path().join("server.pem"), cert.pem()).unwrap();
    std::fs::write(dir.path().join("server.key"), key.serialize_pem()).unwrap();
    std::fs::write(dir.path().join("clients.pem"), cert.pem()).unwrap();
    import_in(dir.path(), text)
}

#[test]
fn a_server_that_verifies_clients_becomes_a_site_with_client_certificates() {
    let imported = import(
        "http {
    ssl_client_certificate {DIR}/clients.pem;
    ssl_certificate {DIR}/server.pem;
    ssl_certificate_key {DIR}/server.key;
    server {
        listen 443 ssl;
        server_name a.test;
        ssl_verify_client on;
        ssl_verify_depth 2;
        location / { return 200 \"$ssl_client_verify $ssl_client_s_dn $ssl_client_fingerprint\"; }
    }
    server {
        listen 443 ssl;
        server_name b.test;
        ssl_verify_client optional;
        location / { return 200 ok; }
    }
    server {
        listen 443 ssl default_server;
        ssl_verify_client optional_no_ca;
        location / { return 200 ok; }
    }
}
",
    );
    exact(&imported, 2, "ssl_client_certificate");
    approx(&imported, 8, "ssl_verify_client", "a plain-HTTP request to this server is refused");
    approx(&imported, 9, "ssl_verify_depth", "any depth");
    unsupported(&imported, 20, "ssl_verify_client", "optional_no_ca");
    has(&imported, "names = [\"a.test\"]\nlisten = [\"0.0.0.0:443\"]\nclient_certificates = { ca = \"");
    has(&imported, "/clients.pem\", verify = \"optional\" }\n");
    has(&imported, "body = \"$ssl_client_verify $ssl_client_s_dn $ssl_client_fingerprint\"");
    // The default server verifies nothing: neither `off` nor `optional_no_ca` write one.
    assert_eq!(imported.toml.matches("client_certificates").count(), 2, "{}", imported.toml);
}

#[test]
fn a_quic_listen_becomes_quic_on_the_tls_address() {
    let imported = import(
        "http {
    ssl_certificate {DIR}/server.pem;
    ssl_certificate_key {DIR}/server.key;
    server {
        listen 443 quic reuseport;
        listen 443 ssl;
        http3 on;
        quic_retry on;
        server_name a.test;
        add_header Alt-Svc 'h3=\":443\"; ma=86400';
        ssl_early_data on;
        location / { return 200 ok; }
    }
}
",
    );
    approx(&imported, 5, "listen", "`quic = true` on the address's `listen_tls` table");
    exact(&imported, 7, "http3");
    approx(&imported, 8, "quic_retry", "[quic]");
    approx(&imported, 11, "ssl_early_data", "answers the others 425 Too Early");
    has(&imported, "listen_tls = [{ addr = \"0.0.0.0:443\", http2 = false, quic = true }]");
}
