//! The access log (one line per request, combined or JSON, written to a file) and the error
//! log (what a client or an outage can make us write there).

use crate::support;

use std::time::Duration;

use support::*;

fn config(up: std::net::SocketAddr, path: &std::path::Path, format: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
[log]
access = "{}"
format = "{format}"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
[[location]]
match = "= /demo"
return = {{ status = 200, body = "hello\n" }}
"#,
        path.display()
    )
}

#[tokio::test]
async fn combined_lines_carry_status_bytes_and_times() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let gw = gateway(&config(up.addr, &path, "combined"));
    let req = http::Request::get("/page?x=1")
        .header("host", "example.test")
        .header("user-agent", "test-agent/1.0")
        .header("referer", "http://ref.test/")
        .body(empty())
        .unwrap();
    within(5, send(addr(&gw), req)).await;
    within(5, get_text(addr(&gw), "/demo")).await;
    let lines = log_lines(&path, 2).await;
    let first = &lines[0];
    assert!(first.starts_with("127.0.0.1 - - ["), "{first}");
    assert!(
        first.contains(
            "] \"GET /page?x=1 HTTP/1.1\" 200 11 \"http://ref.test/\" \"test-agent/1.0\" - "
        ),
        "{first}"
    );
    let fields: Vec<&str> = first.rsplit(' ').take(2).collect();
    let upstream_time: f64 = fields[0].parse().expect("upstream time is a number");
    let request_time: f64 = fields[1].parse().expect("request time is a number");
    assert!(upstream_time <= request_time);
    assert!(
        lines[1].contains("\"GET /demo HTTP/1.1\" 200 6 \"-\" \"-\" - "),
        "{}",
        lines[1]
    );
    assert!(
        lines[1].ends_with(" -"),
        "no upstream time for a return: {}",
        lines[1]
    );
}

#[tokio::test]
async fn json_lines_are_one_object_per_request() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.json");
    let gw = gateway(&config(up.addr, &path, "json"));
    within(5, get_text(addr(&gw), "/a\"b")).await;
    let lines = log_lines(&path, 1).await;
    let line = &lines[0];
    assert!(line.starts_with("{\"time\":\""), "{line}");
    assert!(line.ends_with('}'), "{line}");
    assert!(line.contains("\"remote_addr\":\"127.0.0.1\""), "{line}");
    assert!(
        line.contains("\"status\":200,\"body_bytes_sent\":11"),
        "{line}"
    );
    assert!(
        line.contains(&format!("\"upstream_addr\":\"{}\"", up.addr)),
        "{line}"
    );
    let id = line
        .split("\"request_id\":\"")
        .nth(1)
        .expect("a request id");
    assert!(
        id.len() > 32 && id[..32].bytes().all(|b| b.is_ascii_hexdigit()),
        "{line}"
    );
}

/// The id in a JSON line is the one header rules sent upstream for that request.
#[tokio::test]
async fn the_logged_request_id_is_the_one_sent_upstream() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.json");
    let toml = config(up.addr, &path, "json").replace(
        "upstream = \"app\"\n",
        "upstream = \"app\"\nrequest_headers = { \"X-Request-Id\" = \"$request_id\" }\n",
    );
    let gw = gateway(&toml);
    within(5, get_text(addr(&gw), "/x")).await;
    let lines = log_lines(&path, 1).await;
    let sent = up.last().headers["x-request-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(sent.len(), 32);
    assert!(
        lines[0].contains(&format!("\"request_id\":\"{sent}\"")),
        "{}",
        lines[0]
    );
}

#[tokio::test]
async fn client_gone_before_the_response_is_logged_as_499() {
    let _shared = support::shared();
    let up = Upstream::start(|_req| async {
        tokio::time::sleep(Duration::from_millis(500)).await;
        text(200, "too late")
    })
    .await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let gw = gateway(&config(up.addr, &path, "combined"));
    {
        use tokio::io::AsyncWriteExt;
        let mut stream = tokio::net::TcpStream::connect(addr(&gw)).await.unwrap();
        stream
            .write_all(b"GET /slow HTTP/1.1\r\nHost: example.test\r\n\r\n")
            .await
            .unwrap();
        // Gone once the request is with the upstream.
        up.holds(1).await;
    }
    let lines = log_lines(&path, 1).await;
    assert!(
        lines[0].contains("\"GET /slow HTTP/1.1\" 499 0"),
        "{}",
        lines[0]
    );
}

#[tokio::test]
async fn http2_requests_are_logged_with_the_path_as_nginx() {
    let _shared = support::shared();
    let up = Upstream::named("app").await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("access.log");
    let gw = gateway(&config(up.addr, &path, "combined"));
    let req = http::Request::get("http://example.test/h2/page?x=1")
        .body(empty())
        .unwrap();
    within(5, send_h2(addr(&gw), req)).await;
    let lines = log_lines(&path, 1).await;
    assert!(
        lines[0].contains("\"GET /h2/page?x=1 HTTP/2.0\" 200 "),
        "{}",
        lines[0]
    );
}

/// Sends `n` requests made by `request` over one keep-alive connection; their statuses.
async fn burst(
    addr: std::net::SocketAddr,
    n: usize,
    request: impl Fn() -> http::Request<Body>,
) -> Vec<u16> {
    let stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let mut statuses = Vec::with_capacity(n);
    for _ in 0..n {
        let response = sender.send_request(request()).await.unwrap();
        statuses.push(read(response).await.status.as_u16());
    }
    statuses
}

#[tokio::test]
async fn an_upstream_outage_logs_a_line_per_kind_and_interval_while_metrics_count_every_failure() {
    let _shared = support::shared();
    let (admin, down) = (free_port(), closed_port());
    let (running, addr) = ErrorLogged::start(|port| {
        format!(
            r#"
[server]
listen = ["127.0.0.1:{port}"]
workers = 2
[admin]
listen = "127.0.0.1:{admin}"
[log]
access = "off"
[upstreams.app]
servers = ["{down}"]
[[location]]
match = "/"
upstream = "app"
"#
        )
    })
    .await;
    let started = std::time::Instant::now();
    let clients: Vec<_> = (0..4)
        .map(|_| tokio::spawn(burst(addr, 500, || get("/"))))
        .collect();
    for client in clients {
        let statuses = within(30, client).await.unwrap();
        assert!(statuses.iter().all(|&s| s == 502), "{statuses:?}");
    }
    let took = started.elapsed();
    let metrics = within(5, get_text(([127, 0, 0, 1], admin).into(), "/metrics")).await;
    let log = running.stop();
    let series = format!(
        "tollgate_upstream_failures_total{{upstream=\"app\",server=\"{down}\",kind=\"connect\"}} 2000"
    );
    assert!(metrics.body.contains(&series), "{}", metrics.body);
    let failures: Vec<&str> = log.lines().filter(|l| l.contains("WARN")).collect();
    // One line per kind and interval; more only if the run outlasted an interval.
    let intervals = 1 + took.as_secs() / tollgate::log::repeats::INTERVAL.as_secs();
    assert!(
        !failures.is_empty() && failures.len() as u64 <= intervals,
        "{} warning lines in {took:?} for 2000 failures:\n{log}",
        failures.len()
    );
    assert!(failures[0].contains("kind=\"connect\""), "{}", failures[0]);
}

/// A TLS 1.3 ClientHello (one cipher suite, an X25519 key share) naming `sni` in its
/// server_name extension, as raw record bytes: rustls's own client never sends the names
/// below, and a hostile one writes what it likes.
fn client_hello(sni: &[u8]) -> Vec<u8> {
    fn extension(kind: u16, data: &[u8]) -> Vec<u8> {
        let mut out = kind.to_be_bytes().to_vec();
        out.extend_from_slice(&(data.len() as u16).to_be_bytes());
        out.extend_from_slice(data);
        out
    }
    let mut name = vec![0];
    name.extend_from_slice(&(sni.len() as u16).to_be_bytes());
    name.extend_from_slice(sni);
    let mut names = (name.len() as u16).to_be_bytes().to_vec();
    names.extend_from_slice(&name);
    let mut share = vec![0, 36, 0, 0x1d, 0, 32];
    share.extend_from_slice(&[9; 32]);
    let extensions = [
        extension(0x0000, &names),
        extension(0x002b, &[2, 3, 4]),
        extension(0x000a, &[0, 2, 0, 0x1d]),
        extension(0x000d, &[0, 2, 4, 3]),
        extension(0x0033, &share),
    ]
    .concat();
    let mut body = vec![3, 3];
    body.extend_from_slice(&[7; 32]);
    body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
    body.extend_from_slice(&(extensions.len() as u16).to_be_bytes());
    body.extend_from_slice(&extensions);
    let mut handshake = vec![1];
    handshake.extend_from_slice(&(body.len() as u32).to_be_bytes()[1..]);
    handshake.extend_from_slice(&body);
    let mut record = vec![0x16, 3, 1];
    record.extend_from_slice(&(handshake.len() as u16).to_be_bytes());
    record.extend_from_slice(&handshake);
    record
}

/// rustls writes a warning for a client's protocol slips (an IP address or a malformed
/// name as SNI, a record out of turn); through the error log, any client could then have
/// us write a line per connection. The gateway keeps a client's TLS trouble at debug level,
/// as nginx keeps it at info, below its default error_log level.
#[tokio::test]
async fn a_client_cannot_make_the_gateway_log_a_line_per_tls_handshake() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _shared = support::shared();
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, cert.cert.pem()).unwrap();
    std::fs::write(&key_path, cert.signing_key.serialize_pem()).unwrap();
    let (running, addr) = ErrorLogged::start(|port| {
        format!(
            r#"
[server]
listen_tls = ["127.0.0.1:{port}"]
workers = 1
[tls]
certificates = [{{ cert = "{}", key = "{}" }}]
[[location]]
match = "/"
return = {{ status = 200, body = "hello\n" }}
"#,
            cert_path.display(),
            key_path.display()
        )
    })
    .await;
    let application_data = [0x17, 3, 3, 0, 5, 1, 2, 3, 4, 5];
    let openings = [
        client_hello(b"127.0.0.1"),
        client_hello(b"bad name\r\n"),
        application_data.to_vec(),
    ];
    for opening in openings.iter().cycle().take(30) {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream.write_all(opening).await.unwrap();
        // The server's answer (its hello, or an alert and a close) shows it read ours.
        let mut answer = [0; 5];
        let read = within(5, stream.read(&mut answer)).await.unwrap();
        assert!(read > 0 && matches!(answer[0], 0x15 | 0x16), "{answer:?}");
    }
    running.assert_quiet("30 hostile handshakes");
}

/// h2 warns of a PING acknowledgement for a PING it never sent, per frame, and of a burst
/// of streams reset before they were accepted, per connection; neither may reach the
/// error log (`log::errors`). Raw frames over cleartext HTTP/2 (prior knowledge).
#[tokio::test]
async fn a_client_cannot_make_the_gateway_log_a_line_per_http2_frame() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let _shared = support::shared();
    let (running, addr) = ErrorLogged::start(|port| hello(port, "off")).await;
    let preface = [
        &b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"[..],
        &h2_frame(0x4, 0, 0, &[]),
    ]
    .concat();
    // GET / with `:authority: a`, HPACK-indexed but for the authority's value.
    let get = [0x82, 0x86, 0x84, 0x41, 0x01, b'a'];
    let pings: Vec<u8> = (0..200u64)
        .flat_map(|n| h2_frame(0x6, 0x1, 0, &n.to_be_bytes()))
        .collect();
    let resets: Vec<u8> = (0..40u32)
        .flat_map(|n| {
            let stream = 2 * n + 1;
            [
                h2_frame(0x1, 0x5, stream, &get),
                h2_frame(0x3, 0, stream, &[0, 0, 0, 8]),
            ]
            .concat()
        })
        .collect();
    for attack in [pings, resets] {
        let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
        stream
            .write_all(&[&preface[..], &attack[..]].concat())
            .await
            .unwrap();
        // The server's frames until it closes or falls silent: it has read all of ours.
        let mut answer = Vec::new();
        let mut buf = [0; 4096];
        while let Ok(Ok(n @ 1..)) =
            tokio::time::timeout(Duration::from_millis(500), stream.read(&mut buf)).await
        {
            answer.extend_from_slice(&buf[..n]);
        }
        assert!(!answer.is_empty(), "no answer to the frames");
    }
    running.assert_quiet("200 stray PING acknowledgements and 40 reset streams");
}

/// Each key a client got banned made a "key banned" line: a spray of fake API keys wrote
/// one each (issue 31.5). The lines are thinned like the other lines a client makes, and
/// the key is written quoted and escaped, so that one like `x strikes=1 for_ms=0` forges
/// no field for a log parser.
#[tokio::test]
async fn a_spray_of_bans_logs_a_line_per_interval_with_each_key_quoted() {
    let _shared = support::shared();
    let (running, addr) = ErrorLogged::start(|port| {
        format!(
            r#"
[server]
listen = ["127.0.0.1:{port}"]
workers = 1
[log]
access = "off"
[zones.api]
key = "$http_x_api_key"
rate = "1r/m"
[[location]]
match = "/"
return = {{ status = 200, body = "hello\n" }}
limit = [{{ zone = "api", burst = 0, ban = {{ after = 1, within = "1m", for = "15m" }} }}]
"#
        )
    })
    .await;
    let started = std::time::Instant::now();
    // The forged key first, then 400 fresh ones: one request each passes, the next bans.
    let forged = r#"x" strikes=1 for_ms=0"#;
    let fresh = (0..400).map(|i| format!("fake-{i:03}"));
    let keys: Vec<String> = std::iter::once(forged.to_owned()).chain(fresh).collect();
    let bytes = keys.iter().flat_map(|key| raw::api_key_requests(key, 2));
    let statuses = within(30, raw::pipelined(addr, bytes.collect(), 2 * keys.len())).await;
    assert!(statuses.chunks(2).all(|s| s == [200, 429]), "{statuses:?}");
    let took = started.elapsed();
    let log = running.stop();
    let lines: Vec<&str> = log.lines().filter(|l| l.contains("key banned")).collect();
    let intervals = 1 + took.as_secs() / tollgate::log::repeats::INTERVAL.as_secs();
    assert!(
        !lines.is_empty() && lines.len() as u64 <= intervals,
        "{} lines in {took:?} for 401 bans:\n{log}",
        lines.len()
    );
    assert!(
        lines[0].contains(r#" key="x\" strikes=1 for_ms=0" strikes=1 "#),
        "{}",
        lines[0]
    );
}

/// The gateway binary, run on a config file with its error log (stderr) in a file and
/// `RUST_LOG` unset, as an operator starts it.
struct ErrorLogged {
    child: std::process::Child,
    errors: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

impl ErrorLogged {
    /// Starts it on the config `config(port)` writes, `port` being a free one it listens
    /// on, and waits until that listener takes connections; its address.
    async fn start(config: impl FnOnce(u16) -> String) -> (ErrorLogged, std::net::SocketAddr) {
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let path = dir.path().join("gateway.toml");
        std::fs::write(&path, config(port)).unwrap();
        let errors = dir.path().join("errors.log");
        let child = std::process::Command::new(env!("CARGO_BIN_EXE_tollgate"))
            .arg("-c")
            .arg(&path)
            .env_remove("RUST_LOG")
            .stdout(std::process::Stdio::null())
            .stderr(std::fs::File::create(&errors).unwrap())
            .spawn()
            .unwrap();
        let addr: std::net::SocketAddr = ([127, 0, 0, 1], port).into();
        let started = std::time::Instant::now();
        while tokio::net::TcpStream::connect(addr).await.is_err() {
            assert!(
                started.elapsed() < Duration::from_secs(5),
                "tollgate did not start"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let running = ErrorLogged {
            child,
            errors,
            _dir: dir,
        };
        (running, addr)
    }

    /// Stops it; what it logged.
    fn stop(mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        std::fs::read_to_string(&self.errors).unwrap()
    }

    /// Stops it, and asserts it logged nothing but its own start (INFO lines).
    fn assert_quiet(self, after: &str) {
        let log = self.stop();
        assert!(log.contains("listening"), "{log}");
        let lines: Vec<&str> = log.lines().filter(|l| !l.contains(" INFO ")).collect();
        assert!(lines.is_empty(), "{after} logged:\n{log}");
    }
}

/// An access log that cannot be written (a full disk: `/dev/full`) says so in the error
/// log once per interval, not once per flush: requests flush every 64 KiB of lines, and
/// a long `User-Agent` makes that a flush every few requests.
#[tokio::test]
async fn a_failing_access_log_is_reported_once_per_interval() {
    let _shared = support::shared();
    let (running, addr) = ErrorLogged::start(|port| hello(port, "/dev/full")).await;
    let started = std::time::Instant::now();
    let agent = "x".repeat(12 * 1024);
    let statuses = within(
        30,
        burst(addr, 300, || {
            let mut request = get("/");
            let value = http::HeaderValue::from_str(&agent).unwrap();
            request
                .headers_mut()
                .insert(http::header::USER_AGENT, value);
            request
        }),
    )
    .await;
    assert!(statuses.iter().all(|&s| s == 200), "{statuses:?}");
    let took = started.elapsed();
    let log = running.stop();
    let failures = log
        .lines()
        .filter(|l| l.contains("cannot write the access log"));
    let intervals = 1 + took.as_secs() / tollgate::log::repeats::INTERVAL.as_secs();
    let count = failures.count() as u64;
    assert!(
        count >= 1 && count <= intervals,
        "{count} lines in {took:?} for a failing access log:\n{log}"
    );
}

/// A gateway on `port` answering every request itself, its access log at `access`.
fn hello(port: u16, access: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:{port}"]
workers = 1
[log]
access = "{access}"
[[location]]
match = "/"
return = {{ status = 200, body = "hello\n" }}
"#
    )
}
