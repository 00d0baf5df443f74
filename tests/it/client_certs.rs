//! A site's `client_certificates` (nginx `ssl_verify_client`) through the real gateway:
//! CAs and certificates `openssl` made, a rustls client presenting them (or not), and
//! nginx itself answering the same handshakes and requests as the oracle for the 400s and
//! for `$ssl_client_verify`, `$ssl_client_s_dn` and `$ssl_client_fingerprint`.

use crate::support;

use std::net::SocketAddr;
use std::path::Path;
use std::process::Command;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use support::nginx::{self, Nginx};
use support::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

fn openssl(dir: &Path, args: &[&str]) {
    support::openssl(dir, args);
}

/// In `dir`: `ca` (signs the server's certificate and alice's), `stranger` (signs
/// mallory's), `server` for the test names, and the clients `alice` (a subject with
/// characters RFC 2253 escapes) and `mallory`.
fn make_certificates(dir: &Path) {
    let ca = |name: &str, subject: &str| {
        openssl(
            dir,
            &[
                "req",
                "-x509",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.pem"),
                "-days",
                "30",
                "-subj",
                subject,
                "-addext",
                "basicConstraints=critical,CA:TRUE",
                "-addext",
                "keyUsage=critical,keyCertSign,cRLSign",
            ],
        );
    };
    ca("ca", "/CN=Test Clients CA");
    ca("stranger", "/CN=Stranger CA");
    let leaf = |name: &str, by: &str, subject: &str, ext: &str| {
        openssl(
            dir,
            &[
                "req",
                "-newkey",
                "ec",
                "-pkeyopt",
                "ec_paramgen_curve:P-256",
                "-nodes",
                "-utf8",
                "-keyout",
                &format!("{name}.key"),
                "-out",
                &format!("{name}.csr"),
                "-subj",
                subject,
            ],
        );
        std::fs::write(dir.join(format!("{name}.ext")), ext).unwrap();
        openssl(
            dir,
            &[
                "x509",
                "-req",
                "-in",
                &format!("{name}.csr"),
                "-CA",
                &format!("{by}.pem"),
                "-CAkey",
                &format!("{by}.key"),
                "-CAcreateserial",
                "-days",
                "30",
                "-out",
                &format!("{name}.pem"),
                "-extfile",
                &format!("{name}.ext"),
            ],
        );
    };
    leaf(
        "server",
        "ca",
        "/CN=server",
        "subjectAltName=DNS:secure.test,DNS:opt.test,DNS:open.test\n",
    );
    let client = "extendedKeyUsage=clientAuth\n";
    leaf(
        "alice",
        "ca",
        "/C=DE/O=Example, Inc./OU=R\\+D <lab>;x/CN=Ålice #1 /emailAddress=alice@example.com",
        client,
    );
    leaf("mallory", "stranger", "/CN=mallory", client);
}

/// What `openssl x509` says of `name.pem`: its subject as RFC 2253 and its SHA-1.
fn openssl_says(dir: &Path, name: &str) -> (String, String) {
    let out = |args: &[&str]| {
        let out = Command::new("openssl")
            .current_dir(dir)
            .args(args)
            .output()
            .unwrap();
        String::from_utf8(out.stdout).unwrap().trim().to_owned()
    };
    let file = format!("{name}.pem");
    let subject = out(&[
        "x509", "-in", &file, "-noout", "-subject", "-nameopt", "RFC2253",
    ]);
    let sha1 = out(&["x509", "-in", &file, "-noout", "-fingerprint", "-sha1"]);
    let sha1 = sha1
        .rsplit('=')
        .next()
        .unwrap()
        .replace(':', "")
        .to_ascii_lowercase();
    (subject.trim_start_matches("subject=").to_owned(), sha1)
}

const ANSWER: &str = "$ssl_client_verify|$ssl_client_s_dn|$ssl_client_fingerprint";

fn gateway_config(dir: &Path) -> String {
    let d = dir.display();
    let site = |name: &str, certificates: &str| {
        format!(
            "[[site]]\nnames = [\"{name}\"]\n{certificates}\n[[site.location]]\nmatch = \"/\"\n\
             return = {{ status = 200, body = \"{name} {ANSWER}\" }}\n"
        )
    };
    format!(
        "[server]\nlisten = [\"127.0.0.1:0\"]\nlisten_tls = [\"127.0.0.1:0\"]\n[log]\naccess = \"off\"\n\
         [tls]\n[[tls.certificates]]\ncert = \"{d}/server.pem\"\nkey = \"{d}/server.key\"\n{}{}{}",
        site("open.test", "default = true"),
        site("secure.test", &format!("client_certificates = {{ ca = \"{d}/ca.pem\" }}")),
        site("opt.test", &format!("client_certificates = {{ ca = \"{d}/ca.pem\", verify = \"optional\" }}")),
    )
}

fn nginx_config(dir: &Path, port: u16, cert_dir: &Path) -> String {
    let d = cert_dir.display();
    let server = |name: &str, verify: &str| {
        let verify = match verify {
            "" => String::new(),
            v => format!("ssl_verify_client {v}; ssl_client_certificate {d}/ca.pem;"),
        };
        format!(
            "server {{ listen 127.0.0.1:{port} ssl; server_name {name}; \
             ssl_certificate {d}/server.pem; ssl_certificate_key {d}/server.key; {verify} \
             location / {{ return 200 \"{name} {ANSWER}\"; }} }}\n"
        )
    };
    let servers =
        server("open.test", "") + &server("secure.test", "on") + &server("opt.test", "optional");
    nginx::http(dir, &servers)
}

/// A rustls client trusting `ca.pem`, presenting `identity`'s certificate when given.
fn client(dir: &Path, identity: Option<&str>) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_file(dir.join("ca.pem")).unwrap())
        .unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots);
    let config = match identity {
        Some(name) => {
            let chain =
                vec![CertificateDer::from_pem_file(dir.join(format!("{name}.pem"))).unwrap()];
            let key = PrivateKeyDer::from_pem_file(dir.join(format!("{name}.key"))).unwrap();
            builder.with_client_auth_cert(chain, key).unwrap()
        }
        None => builder.with_no_client_auth(),
    };
    Arc::new(config)
}

/// One `GET /` with SNI `sni` and `Host: host`: the status and body.
async fn ask(addr: SocketAddr, config: Arc<ClientConfig>, sni: &str, host: &str) -> (u16, String) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from(sni.to_owned()).unwrap();
    let mut tls = within(5, TlsConnector::from(config).connect(name, tcp))
        .await
        .expect("handshake");
    let request = format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n");
    tls.write_all(request.as_bytes()).await.unwrap();
    let mut answer = Vec::new();
    let _ = within(5, tls.read_to_end(&mut answer)).await;
    let answer = String::from_utf8_lossy(&answer).into_owned();
    let status = answer.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
    let body = answer
        .split_once("\r\n\r\n")
        .map_or("", |(_, body)| body)
        .trim()
        .to_owned();
    (status, body)
}

/// What every case is asked: (identity, SNI, Host).
const CASES: [(Option<&str>, &str, &str); 10] = [
    (Some("alice"), "secure.test", "secure.test"),
    (None, "secure.test", "secure.test"),
    (Some("mallory"), "secure.test", "secure.test"),
    (Some("alice"), "opt.test", "opt.test"),
    (None, "opt.test", "opt.test"),
    (Some("mallory"), "opt.test", "opt.test"),
    (None, "open.test", "open.test"),
    // A connection made for one name, asking for another: a site that checks
    // certificates answers 421 (or its check could be gone around); one that does not
    // answers, and the variables are the connection's.
    (None, "open.test", "secure.test"),
    (Some("alice"), "opt.test", "secure.test"),
    (Some("alice"), "secure.test", "open.test"),
];

#[tokio::test]
async fn client_certificates_are_checked_as_nginx_checks_them() {
    if !nginx::available("client certificates beside nginx") {
        return;
    }
    let _shared = support::shared();
    let certs = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    let gw = gateway(&gateway_config(certs.path()));
    let ours = gw.tls_addrs()[0];
    let theirs = Nginx::start(|root, port| nginx_config(root, port, certs.path()), &[]);
    let (alice_dn, alice_sha1) = openssl_says(certs.path(), "alice");
    assert!(alice_dn.contains("\\C3\\85lice #1\\ "), "{alice_dn}");
    for (identity, sni, host) in CASES {
        let config = client(certs.path(), identity);
        let (status, body) = ask(ours, config.clone(), sni, host).await;
        let (nginx_status, nginx_body) = ask(theirs.addr, config, sni, host).await;
        let case = format!("{identity:?} to {sni}: tollgate {status} {body:?}, nginx {nginx_status} {nginx_body:?}");
        assert_eq!(status, nginx_status, "{case}");
        if status == 200 {
            assert_eq!(body, nginx_body, "{case}");
        } else if status == 400 {
            assert!(nginx_body.contains("SSL certificate"), "{case}");
            assert!(body.contains("SSL certificate"), "{case}");
        }
        if identity == Some("alice") && status == 200 {
            let expected = format!("{host} SUCCESS|{alice_dn}|{alice_sha1}");
            assert_eq!(body, expected, "{case}");
        }
    }
}

#[tokio::test]
async fn a_request_for_a_checking_site_on_a_connection_made_for_another_is_misdirected() {
    let _shared = support::shared();
    let certs = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    let gw = gateway(&gateway_config(certs.path()));
    let ours = gw.tls_addrs()[0];
    // The handshake for open.test asks for no certificate: a request for secure.test on
    // it would pass the check by going around it. nginx answers 421 too.
    let (status, _) = ask(ours, client(certs.path(), None), "open.test", "secure.test").await;
    assert_eq!(status, 421);
    // With a certificate checked for opt.test, secure.test is still another name.
    let (status, _) = ask(
        ours,
        client(certs.path(), Some("alice")),
        "opt.test",
        "secure.test",
    )
    .await;
    assert_eq!(status, 421);
    // The other way round: a site that checks nothing answers on any connection.
    let (status, body) = ask(
        ours,
        client(certs.path(), Some("alice")),
        "secure.test",
        "open.test",
    )
    .await;
    assert_eq!(
        (status, body.starts_with("open.test SUCCESS|")),
        (200, true),
        "{body}"
    );
    // Over plain HTTP, a site that requires a certificate refuses (nginx would pass it).
    let plain = addr(&gw);
    let reply = raw_exchange(
        plain,
        "GET / HTTP/1.1\r\nHost: secure.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!(reply.status, 400, "{}", reply.body);
    let reply = raw_exchange(
        plain,
        "GET / HTTP/1.1\r\nHost: opt.test\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert_eq!((reply.status, reply.body.as_str()), (200, "opt.test ||"));
}

#[tokio::test]
async fn a_site_without_client_certificates_asks_for_none() {
    let _shared = support::shared();
    let certs = tempfile::tempdir().unwrap();
    make_certificates(certs.path());
    let gw = gateway(&gateway_config(certs.path()));
    // openssl s_client prints the CAs a server names when it asks for a certificate.
    let asked = |sni: &str| {
        let out = Command::new("openssl")
            .args([
                "s_client",
                "-connect",
                &gw.tls_addrs()[0].to_string(),
                "-servername",
                sni,
            ])
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let open = asked("open.test");
    assert!(
        open.contains("No client certificate CA names sent"),
        "{open}"
    );
    let secure = asked("secure.test");
    assert!(
        secure.contains("Acceptable client certificate CA names\nCN = Test Clients CA"),
        "{secure}"
    );
}
