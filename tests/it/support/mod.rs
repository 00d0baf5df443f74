//! Shared helpers for the black-box tests: start the real gateway on 127.0.0.1:0 from
//! TOML text, run an in-process hyper upstream, and talk to both with a real client; and
//! what the tests need to share one process ([`shared`], [`alone`], [`free_port`]).
#![allow(dead_code)]

pub mod accept_any;
pub mod chromium;
pub mod h3;
pub mod haproxy;
pub mod knob;
pub mod nginx;
pub mod pebble;
pub mod raw;
pub mod redis;

pub use accept_any::AcceptAny;

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response, StatusCode};
use http_body_util::{combinators::BoxBody, BodyExt, Empty, Full};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::{TcpListener, TcpStream};

pub type Body = BoxBody<Bytes, hyper::Error>;

/// The machine, as the tests share it. Every test takes it first thing: [`shared`] to run
/// beside other tests, or [`alone`] to run with no other test (proptest's tests take it in
/// each case, the only place its macro leaves).
///
/// All the tests are one binary, so the harness runs any of them at once (as many as there
/// are cores), where each file used to be a binary of its own, run after the one before. A
/// test that loads every core for seconds, or that measures time closely, used to share
/// the machine with the tests of its own file at most; now it could share it with any
/// test. Those take the machine alone, so that they neither upset other tests' timing nor
/// have theirs upset:
/// - `testssl`: a scan loads the machine for about 35 s and its checks fail under load
///   (two scans at once do: they took turns already);
/// - `nginx_conformance`: latencies compared with nginx's within ±15 ms (it was alone in
///   its binary);
/// - `large_body`: 1 GiB through the gateway, on every core;
/// - the load tests `redis_zones::two_instances_share_one_limit_under_load` (10 s) and
///   `reload::sixty_sighups_under_keep_alive_load_lose_no_request`;
/// - the two `adaptive::concurrency` tests of the auto limit (7 s and 5 s): 60 and 30
///   clients, and checks on the latencies they measure (with six busy loops beside the
///   suite, the limit swung and `min_rtt` read high).
///
/// Tests busy on one core (the property tests, `limit_memory`'s key sprays) stay shared, as
/// they ran beside the other tests of their file. No test measures the memory of this
/// process, which other tests would add to: `large_body` reads the peak RSS of the
/// `tollgate` child it runs, and `limit_memory` counts only what its own thread allocates
/// (its counting allocator is the whole binary's, but counts only on that thread).
static MACHINE: RwLock<()> = RwLock::new(());

/// A test's share of [`MACHINE`], held until the test ends (across `.await`s: it only keeps
/// other tests out, no data behind it).
pub struct Shared {
    _guard: RwLockReadGuard<'static, ()>,
}

/// The whole of [`MACHINE`], held until the test ends.
pub struct Alone {
    _guard: RwLockWriteGuard<'static, ()>,
}

/// Runs the calling test beside others (but not beside one that runs [`alone`]). Take it
/// once, on the test's own thread, and never with [`alone`]: the lock is not reentrant.
pub fn shared() -> Shared {
    Shared {
        // A test that panicked holding it poisons it; it guards no data, so that is no harm.
        _guard: MACHINE.read().unwrap_or_else(PoisonError::into_inner),
    }
}

/// Runs the calling test with no other test running (see [`MACHINE`] for which do).
pub fn alone() -> Alone {
    Alone {
        _guard: MACHINE.write().unwrap_or_else(PoisonError::into_inner),
    }
}

/// A free loopback port for a listener made later (a child process's, or a gateway's with a
/// fixed port): bound, then released, and never one this process handed out before. All the
/// tests share one process, so two that choose ports at once (for nginx, Redis, `tollgate`
/// children) could otherwise be handed the same released port.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Vec<u16>> = Mutex::new(Vec::new());
    let mut given = GIVEN.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        if !given.contains(&port) {
            given.push(port);
            return port;
        }
    }
}

/// Starts the gateway from TOML text. `{UP}` / `{UP2}` are replaced by `upstreams`'
/// addresses first.
pub fn gateway(toml: &str) -> tollgate::Gateway {
    tollgate::Gateway::start(parse(toml)).expect("gateway starts")
}

/// The `[admin] token` of the tests' configs (those whose admin calls change state).
pub const ADMIN_TOKEN: &str = "test-admin-token-0123456789";

/// `Authorization` with [`ADMIN_TOKEN`].
pub fn admin_authorization() -> String {
    format!("Bearer {ADMIN_TOKEN}")
}

/// A test's config text, parsed as if from `/tmp/tollgate-test/gateway.toml` (to start a
/// gateway with, or to reload one with).
pub fn parse(toml: &str) -> tollgate::config::Config {
    tollgate::config::from_str(toml, Path::new("/tmp/tollgate-test/gateway.toml"))
        .unwrap_or_else(|errors| panic!("test config is invalid:\n{errors}"))
}

/// A config with one worker and no access log that proxies `/` to `up`; `server` adds
/// lines to `[server]`.
pub fn proxying(up: SocketAddr, server: &str) -> String {
    format!(
        r#"
[server]
listen = ["127.0.0.1:0"]
workers = 1
{server}
[log]
access = "off"
[upstreams.app]
servers = ["{up}"]
[[location]]
match = "/"
upstream = "app"
"#
    )
}

/// The gateway's first listening address.
pub fn addr(gateway: &tollgate::Gateway) -> SocketAddr {
    gateway.local_addrs()[0]
}

/// What an upstream saw of one request.
#[derive(Clone, Debug)]
pub struct Seen {
    pub method: Method,
    pub uri: String,
    pub headers: HeaderMap,
    pub version: http::Version,
}

/// An in-process HTTP/1.1 upstream on 127.0.0.1:0 that records what it receives.
pub struct Upstream {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Upstream {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Upstream {
    /// An upstream answering each request with `handler`.
    pub async fn start<F, Fut>(handler: F) -> Upstream
    where
        F: Fn(Request<Incoming>) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Response<Body>> + Send + 'static,
    {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen: Arc<Mutex<Vec<Seen>>> = Arc::default();
        let handler = Arc::new(handler);
        let recorder = seen.clone();
        let task = tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let handler = handler.clone();
                let recorder = recorder.clone();
                tokio::spawn(async move {
                    let service = service_fn(move |req: Request<Incoming>| {
                        recorder.lock().unwrap().push(Seen {
                            method: req.method().clone(),
                            uri: req.uri().to_string(),
                            headers: req.headers().clone(),
                            version: req.version(),
                        });
                        let fut = handler(req);
                        async move { Ok::<_, Infallible>(fut.await) }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .with_upgrades()
                        .await;
                });
            }
        });
        Upstream { addr, seen, task }
    }

    /// An upstream that answers `200 ok from NAME` to everything.
    pub async fn named(name: &'static str) -> Upstream {
        Upstream::start(move |_req| async move { text(200, &format!("ok from {name}")) }).await
    }

    pub fn last(&self) -> Seen {
        self.seen
            .lock()
            .unwrap()
            .last()
            .cloned()
            .expect("upstream saw a request")
    }

    pub fn count(&self) -> usize {
        self.seen.lock().unwrap().len()
    }

    /// Waits until the upstream has seen `n` requests (at most 5 s): they are in flight.
    pub async fn holds(&self, n: usize) {
        within(5, async {
            while self.count() < n {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
        .await;
    }
}

pub fn text(status: u16, body: &str) -> Response<Body> {
    let mut response = Response::new(full(body.to_owned()));
    *response.status_mut() = StatusCode::from_u16(status).unwrap();
    response
}

pub fn full(body: impl Into<Bytes>) -> Body {
    Full::new(body.into())
        .map_err(|never| match never {})
        .boxed()
}

pub fn empty() -> Body {
    Empty::new().map_err(|never| match never {}).boxed()
}

/// A finished exchange, body read whole.
#[derive(Debug)]
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: String,
    pub version: http::Version,
}

/// Sends one request over a new HTTP/1.1 connection and reads the whole response.
pub async fn send(addr: SocketAddr, req: Request<Body>) -> Reply {
    let stream = TcpStream::connect(addr).await.expect("connect to gateway");
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .expect("handshake");
    tokio::spawn(conn);
    read(sender.send_request(req).await.expect("response")).await
}

/// Sends one request over a new HTTP/2 (prior knowledge) connection.
pub async fn send_h2(addr: SocketAddr, req: Request<Body>) -> Reply {
    let stream = TcpStream::connect(addr).await.expect("connect to gateway");
    let (mut sender, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .expect("h2 handshake");
    tokio::spawn(conn);
    read(sender.send_request(req).await.expect("response")).await
}

pub async fn read(response: Response<Incoming>) -> Reply {
    let (parts, body) = response.into_parts();
    let bytes = body.collect().await.expect("whole body").to_bytes();
    Reply {
        status: parts.status,
        headers: parts.headers,
        body: String::from_utf8_lossy(&bytes).into_owned(),
        version: parts.version,
    }
}

/// An HTTP/2 frame: its 9-byte header (length, type, flags, stream), then `payload`.
pub fn h2_frame(kind: u8, flags: u8, stream: u32, payload: &[u8]) -> Vec<u8> {
    let len = (payload.len() as u32).to_be_bytes();
    let mut out = vec![len[1], len[2], len[3], kind, flags];
    out.extend_from_slice(&stream.to_be_bytes());
    out.extend_from_slice(payload);
    out
}

/// `GET path` with a Host header.
pub fn get(path: &str) -> Request<Body> {
    Request::get(path)
        .header("host", "example.test")
        .body(empty())
        .unwrap()
}

pub async fn get_text(addr: SocketAddr, path: &str) -> Reply {
    send(addr, get(path)).await
}

/// Says why a test is skipped, where `cargo test` shows it: straight to the process's
/// stderr, which the test harness does not capture (it captures `eprintln!`).
pub fn skip_note(message: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr().lock(), "note: {message}");
}

/// `GET path` as `client` (an `X-Forwarded-For` a gateway trusting 127.0.0.1 believes),
/// within 5 s.
pub async fn get_as(addr: SocketAddr, path: &str, client: &str) -> Reply {
    let req = Request::get(path)
        .header("host", "example.test")
        .header("x-forwarded-for", client)
        .body(empty())
        .unwrap();
    within(5, send(addr, req)).await
}

/// Fails the test if `fut` takes longer than `secs` seconds.
pub async fn within<T>(secs: u64, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(Duration::from_secs(secs), fut)
        .await
        .expect("finished in time")
}

/// An answer read whole from a connection the client closed after its request.
pub struct RawReply {
    /// 0 when the answer has no status line.
    pub status: u16,
    /// The status line and header lines, as sent (no blank line).
    pub head: String,
    pub body: String,
}

/// `request` as raw bytes to `addr` (it should say `Connection: close`); the answer
/// read to the end, within 10 seconds.
pub async fn raw_exchange(addr: SocketAddr, request: &str) -> RawReply {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    within(10, async {
        let mut stream = TcpStream::connect(addr).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let mut answer = Vec::new();
        let _ = stream.read_to_end(&mut answer).await;
        let text = String::from_utf8_lossy(&answer).into_owned();
        let status = text.get(9..12).and_then(|s| s.parse().ok()).unwrap_or(0);
        let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
        RawReply {
            status,
            head: head.to_owned(),
            body: body.to_owned(),
        }
    })
    .await
}

/// A port on 127.0.0.1 where nothing listens while the tests run: a socket holds it bound
/// and never listens, so a connection to it is refused, and no listener made meanwhile (a
/// gateway's or an upstream's on port 0) is given it. (A port bound, then released, was
/// once given to another test's gateway, which answered where a refusal was expected.)
pub fn closed_port() -> SocketAddr {
    static HELD: Mutex<Vec<socket2::Socket>> = Mutex::new(Vec::new());
    let socket =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("a socket");
    let any = SocketAddr::from(([127, 0, 0, 1], 0));
    socket.bind(&any.into()).expect("bind a loopback port");
    let addr = socket.local_addr().ok().and_then(|a| a.as_socket());
    HELD.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(socket);
    addr.expect("an IPv4 address")
}

/// Waits until the log file has `n` lines (the log is flushed every 100 ms).
pub async fn log_lines(path: &std::path::Path, n: usize) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        let lines: Vec<String> = text.lines().map(str::to_owned).collect();
        if lines.len() >= n {
            return lines;
        }
        assert!(
            Instant::now() < deadline,
            "log has {} lines: {lines:?}",
            lines.len()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Runs `openssl` with `args` in `dir`: its standard output, or a panic with its errors.
pub fn openssl(dir: &std::path::Path, args: &[&str]) -> Vec<u8> {
    let out = std::process::Command::new("openssl")
        .current_dir(dir)
        .args(args)
        .output()
        .expect("openssl runs");
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A self-signed certificate for `name` with a fresh P-256 key, written to `dir` as
/// `{stem}.pem` and `{stem}.key`.
pub fn write_self_signed(dir: &std::path::Path, stem: &str, name: &str) {
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = rcgen::CertificateParams::new(vec![name.to_owned()])
        .unwrap()
        .self_signed(&key)
        .unwrap();
    std::fs::write(dir.join(format!("{stem}.pem")), cert.pem()).unwrap();
    std::fs::write(dir.join(format!("{stem}.key")), key.serialize_pem()).unwrap();
}
