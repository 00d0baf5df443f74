//! The metrics a Grafana user reads, scraped from a real gateway: request duration and
//! body bytes by site and location, TLS handshakes by result and protocol, the build and
//! the process; and contrib/'s dashboard and alert rules held to that scrape (every metric
//! they name must be in it, so that they cannot rot) and to `promtool check rules`.

use crate::metrics::{scrape_until, Scrape};
use crate::support;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use http::Request;
use hyper_util::rt::TokioIo;
use rcgen::{CertificateParams, KeyPair};
use rustls::pki_types::ServerName;
use rustls::ClientConfig;
use support::*;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio_rustls::TlsConnector;

/// Two sites (one plain, one over TLS) in front of one upstream, a zone, and the admin
/// listener; the certificate goes into `dir`.
fn config(dir: &Path, up: SocketAddr) -> String {
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["b.test".to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    let (cert_path, key_path) = (dir.join("b.pem"), dir.join("b.key"));
    std::fs::write(&cert_path, cert.pem()).unwrap();
    std::fs::write(&key_path, key.serialize_pem()).unwrap();
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
listen_tls = ["127.0.0.1:0"]
workers = 2
[log]
access = "off"
[admin]
listen = "127.0.0.1:0"
[zones.per_ip]
key = "$binary_remote_addr"
rate = "100r/s"
[upstreams.app]
servers = ["{up}"]
[[tls.certificates]]
cert = "{}"
key = "{}"
[[site]]
names = ["a.test"]
[[site.location]]
match = "/api/"
upstream = "app"
limit = [{{ zone = "per_ip", burst = 10, nodelay = true }}]
[[site.location]]
match = "= /ping"
return = {{ status = 200, body = "pong" }}
[[site]]
names = ["b.test"]
[[site.location]]
match = "/"
upstream = "app"
"#,
        cert_path.display(),
        key_path.display()
    )
}

fn tls_client(versions: &[&'static rustls::SupportedProtocolVersion]) -> TlsConnector {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(support::accept_any::AcceptAny))
        .with_no_client_auth();
    TlsConnector::from(Arc::new(config))
}

/// One GET to `b.test` over TLS with `versions` offered.
async fn get_over_tls(addr: SocketAddr, versions: &[&'static rustls::SupportedProtocolVersion]) {
    let tcp = TcpStream::connect(addr).await.unwrap();
    let name = ServerName::try_from("b.test").unwrap();
    let stream = within(5, tls_client(versions).connect(name, tcp))
        .await
        .expect("TLS handshake");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let req = Request::get("/x").header("host", "b.test").body(empty());
    let response = sender.send_request(req.unwrap()).await.unwrap();
    assert_eq!(read(response).await.status, 200);
}

/// A gateway that has answered plain and TLS requests (one with a body) and refused a
/// handshake, scraped once it has counted them all.
async fn exercised() -> (Scrape, tempfile::TempDir, Upstream, tollgate::Gateway) {
    let dir = tempfile::tempdir().unwrap();
    let up = Upstream::named("app").await;
    let gw = gateway(&config(dir.path(), up.addr));
    let (plain, tls) = (addr(&gw), gw.tls_addrs()[0]);
    let admin = gw.admin_addr().expect("admin configured");

    let post = Request::post("/api/upload").header("host", "a.test");
    let reply = within(5, send(plain, post.body(full("0123456789")).unwrap())).await;
    assert_eq!(reply.status, 200);
    let ping = Request::get("/ping").header("host", "a.test");
    assert_eq!(
        within(5, send(plain, ping.body(empty()).unwrap()))
            .await
            .status,
        200
    );
    // A host and a path no configuration names: no label of theirs may appear.
    let stray = Request::get("/random-7f3a").header("host", "evil.test");
    let stray = within(5, send(plain, stray.body(empty()).unwrap())).await;
    assert_eq!(stray.status, 404);
    get_over_tls(tls, &[&rustls::version::TLS13]).await;
    get_over_tls(tls, &[&rustls::version::TLS12]).await;
    // Not TLS at all: a failed handshake.
    let mut junk = TcpStream::connect(tls).await.unwrap();
    junk.write_all(b"GET / HTTP/1.1\r\nHost: b.test\r\n\r\n")
        .await
        .unwrap();

    let failed = "tollgate_tls_handshakes_total{result=\"failed\",protocol=\"none\"}";
    let timed = |m: &Scrape, site: &str, location: &str| {
        let series = format!(
            "tollgate_request_duration_seconds_count{{site=\"{site}\",location=\"{location}\"}}"
        );
        m.values.get(&series).copied()
    };
    let m = scrape_until(admin, |m| {
        m.values.get(failed) == Some(&1.0)
            && timed(m, "-", "-") == Some(1.0)
            && m.values
                .get("tollgate_request_duration_seconds_count{site=\"b.test\",location=\"/\"}")
                == Some(&2.0)
            && m.values.get(
                "tollgate_request_duration_seconds_count{site=\"a.test\",location=\"= /ping\"}",
            ) == Some(&1.0)
    })
    .await;
    (m, dir, up, gw)
}

#[tokio::test]
async fn requests_are_timed_and_their_bodies_counted_by_site_and_location() {
    let _shared = support::shared();
    let (m, _dir, _up, _gw) = exercised().await;
    let requests = |site: &str, location: &str| {
        m.get(&format!(
            "tollgate_requests_total{{site=\"{site}\",location=\"{location}\",status=\"200\"}}"
        ))
    };
    assert_eq!(requests("a.test", "/api/"), 1.0);
    assert_eq!(requests("a.test", "= /ping"), 1.0);
    assert_eq!(requests("b.test", "/"), 2.0);
    let duration = |part: &str, site: &str, location: &str| {
        m.get(&format!(
            "tollgate_request_duration_seconds_{part}{{site=\"{site}\",location=\"{location}\"}}"
        ))
    };
    assert_eq!(duration("count", "a.test", "/api/"), 1.0);
    let inf =
        "tollgate_request_duration_seconds_bucket{le=\"+Inf\",site=\"a.test\",location=\"/api/\"}";
    assert_eq!(m.get(inf), 1.0);
    assert_eq!(duration("count", "b.test", "/"), 2.0);
    assert!(duration("sum", "b.test", "/") > 0.0);
    // The stray request matched no location: counted under "-", its host and path nowhere.
    assert_eq!(duration("count", "-", "-"), 1.0);
    assert!(
        !m.text.contains("evil") && !m.text.contains("random"),
        "{}",
        m.text
    );
    // The site is never glued into the location any more.
    assert!(!m.text.contains("location=\"a.test"), "{}", m.text);

    let bytes = |metric: &str, site: &str, location: &str| {
        m.get(&format!(
            "tollgate_{metric}_bytes_total{{site=\"{site}\",location=\"{location}\"}}"
        ))
    };
    assert_eq!(bytes("request_body", "a.test", "/api/"), 10.0);
    assert_eq!(bytes("request_body", "a.test", "= /ping"), 0.0);
    assert_eq!(bytes("response_body", "a.test", "= /ping"), 4.0);
    assert!(bytes("response_body", "a.test", "/api/") > 0.0);
    assert!(bytes("response_body", "b.test", "/") > 0.0);
}

#[tokio::test]
async fn tls_handshakes_build_and_process_are_reported() {
    let _shared = support::shared();
    let (m, _dir, _up, _gw) = exercised().await;
    let handshakes = |result: &str, protocol: &str| {
        m.get(&format!(
            "tollgate_tls_handshakes_total{{result=\"{result}\",protocol=\"{protocol}\"}}"
        ))
    };
    assert_eq!(handshakes("ok", "TLSv1.3"), 1.0);
    assert_eq!(handshakes("ok", "TLSv1.2"), 1.0);
    assert_eq!(handshakes("failed", "none"), 1.0);

    let build = m
        .values
        .iter()
        .find(|(series, _)| series.starts_with("tollgate_build_info{"))
        .unwrap_or_else(|| panic!("no build info in:\n{}", m.text));
    let version = env!("CARGO_PKG_VERSION");
    assert!(
        build
            .0
            .contains(&format!("version=\"{version}\",commit=\"")),
        "{build:?}"
    );
    assert_eq!(*build.1, 1.0);

    if cfg!(target_os = "linux") {
        assert!(m.get("process_resident_memory_bytes") > 1e6);
        assert!(m.get("process_virtual_memory_bytes") >= m.get("process_resident_memory_bytes"));
        assert!(m.get("process_cpu_seconds_total") > 0.0);
        assert!(m.get("process_open_fds") > 0.0);
        assert!(m.get("process_max_fds") >= m.get("process_open_fds"));
        assert!(m.get("process_start_time_seconds") > 1.6e9);
    }
}

/// The metric names a contrib file uses: every word that starts as tollgate's or the
/// process collector's do.
fn metric_names(text: &str) -> BTreeSet<String> {
    let mut names = BTreeSet::new();
    for (at, _) in text.match_indices(['t', 'p']) {
        let rest = &text[at..];
        let boundary = at == 0 || !text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_');
        if boundary && (rest.starts_with("tollgate_") || rest.starts_with("process_")) {
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            // `process_*` in a comment is not a name.
            if !rest[..end].ends_with('_') {
                names.insert(rest[..end].to_owned());
            }
        }
    }
    names
}

fn contrib(path: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("contrib")
        .join(path);
    std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
}

#[tokio::test]
async fn every_metric_the_dashboard_and_alerts_use_is_in_a_real_scrape() {
    let _shared = support::shared();
    let (m, _dir, _up, _gw) = exercised().await;
    let scraped = m.names();
    let dashboard = contrib("grafana/tollgate.json");
    let _: serde_json::Value = serde_json::from_str(&dashboard).expect("the dashboard is JSON");
    for (file, text) in [
        ("grafana/tollgate.json", dashboard),
        (
            "prometheus/tollgate-alerts.yml",
            contrib("prometheus/tollgate-alerts.yml"),
        ),
    ] {
        let used = metric_names(&text);
        assert!(used.len() >= 10, "{file}: only {used:?}");
        let missing: Vec<_> = used
            .iter()
            .filter(|name| !scraped.contains(name.as_str()))
            .collect();
        assert!(
            missing.is_empty(),
            "{file} uses metrics no scrape has: {missing:?}\nscraped: {scraped:?}"
        );
    }
}

#[test]
fn metric_names_are_found_whole_and_only_at_a_word_start() {
    let text =
        r#"rate(tollgate_requests_total{x="y"}[5m]) / process_open_fds + my_tollgate_x, process_*"#;
    let names: Vec<String> = metric_names(text).into_iter().collect();
    assert_eq!(names, ["process_open_fds", "tollgate_requests_total"]);
}

/// Every `expr` in `value`, depth first.
fn exprs(value: &serde_json::Value, into: &mut Vec<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("expr", serde_json::Value::String(expr)) => into.push(expr.clone()),
                    _ => exprs(value, into),
                }
            }
        }
        serde_json::Value::Array(values) => values.iter().for_each(|v| exprs(v, into)),
        _ => {}
    }
}

/// The dashboard's queries as recording rules, Grafana's variables given values, so that
/// promtool parses them too.
fn dashboard_as_rules() -> String {
    let dashboard: serde_json::Value =
        serde_json::from_str(&contrib("grafana/tollgate.json")).unwrap();
    let mut found = Vec::new();
    exprs(&dashboard, &mut found);
    assert!(found.len() >= 10, "{found:?}");
    let mut rules = String::from("groups:\n  - name: dashboard\n    rules:\n");
    for (i, expr) in found.iter().enumerate() {
        let expr = expr
            .replace("$__rate_interval", "5m")
            .replace("$instance", ".*")
            .replace("$site", ".*");
        rules.push_str(&format!(
            "      - record: dashboard:query{i}\n        expr: |\n"
        ));
        for line in expr.lines() {
            rules.push_str(&format!("          {line}\n"));
        }
    }
    rules
}

/// `promtool check rules` on the alert rules, and on the dashboard's queries (Debian's
/// `prometheus` package has promtool). Without promtool the test is skipped, unless `CI`
/// is set: then it fails (`.ci/run` installs it).
#[test]
fn the_alert_rules_and_the_dashboards_queries_pass_promtool() {
    let dir = tempfile::tempdir().unwrap();
    let dashboard = dir.path().join("dashboard-queries.yml");
    std::fs::write(&dashboard, dashboard_as_rules()).unwrap();
    let rules =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("contrib/prometheus/tollgate-alerts.yml");
    let run = std::process::Command::new("promtool")
        .args(["check", "rules"])
        .arg(&rules)
        .arg(&dashboard)
        .output();
    let output = match run {
        Ok(output) => output,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            let in_ci = std::env::var_os("CI").is_some_and(|v| !v.is_empty());
            assert!(
                !in_ci,
                "promtool not found: CI must install it (`apt-get install -y prometheus` in .ci/run)"
            );
            support::skip_note("promtool not found; skipping the alert rules' check");
            return;
        }
        Err(err) => panic!("promtool: {err}"),
    };
    assert!(
        output.status.success(),
        "promtool check rules failed:\n{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}
